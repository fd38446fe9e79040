"""The report's plots, each returned as an <img> whose PNG is embedded as a base64 data URI, so
the page opens offline and can be mailed as it is.

matplotlib is an optional extra (duckanon[report]): it is imported when a figure is drawn, never
when duckanon.report is imported, and each plot is a Figure on an explicit Agg canvas rather than
pyplot: no global backend switch, no figure registry to leak.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING

import numpy as np

from duckanon.report.facts import TOP_SA_VALUES
from duckanon.report.markup import escape, format_value

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _figure(width: float = 9, height: float = 4) -> tuple[Figure, object]:
    fig = _new_figure(width, height)
    ax = fig.add_subplot()
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


def _img(fig: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"{escape(alt)}\" src=\"data:image/png;base64,{data}\">"


def _column_ticks(ax, x, qi) -> None:
    """One tick per quasi-identifier, slanted when there are too many to read side by side."""
    ax.set_xticks(x, qi, rotation=30 if len(qi) > 6 else 0, ha="right" if len(qi) > 6 else "center")


def class_sizes(before: dict[int, int], after: dict[int, int], original: str, published: str, k) -> str:
    """Histogram of the class sizes of both tables ({size: classes}), with k as a dashed line."""
    fig, ax = _figure()
    sizes = [np.array(list(h), dtype=float) for h in (before, after)]
    counts = [np.array(list(h.values()), dtype=float) for h in (before, after)]
    largest = max([1.0] + [s.max() for s in sizes if len(s)])
    if largest <= 40:   # one bar per size
        bins = np.arange(0.5, largest + 1.5)
    else:               # sizes span orders of magnitude: logarithmic bins
        bins = np.unique(np.round(np.geomspace(1, largest + 1, 30))) - 0.5
        ax.set_xscale("log")
    ax.hist(sizes, bins=bins, weights=counts, label=[f"original ({original})", f"published ({published})"])
    all_counts = np.concatenate(counts) if any(len(c) for c in counts) else np.array([1.0])
    if all_counts.max() / max(all_counts.min(), 1) > 50:  # a few big classes next to many small ones
        ax.set_yscale("log")
    if k is not None:
        ax.axvline(k - 0.5, color="black", linestyle="--", label=f"k = {k}")
    ax.set(xlabel="equivalence class size (rows)", ylabel="number of classes")
    ax.set_title("Equivalence class sizes before and after", pad=40)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False)  # above the bars
    return _img(fig, "class size histogram")


def _count_axis(ax) -> None:
    """Counts on the y axis with thousands separators, as the tables write them."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _labelled_bars(ax, x, values, width, label, colour) -> None:
    """Bars with each value written above its own bar."""
    ax.bar(x, values, width, label=label, color=colour)
    for xi, value in zip(x, values):
        ax.annotate(format_value(int(value)), (xi, value), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")


def stars_per_column(qi: list[str], stars: list[int], generalized: list[int]) -> str:
    """Per quasi-identifier, the cells counted as stars ('*', or a label covering every value) and,
    when there are any, beside them the cells generalized to another label: two series, each
    value above its own bar, the legend above the plot where it covers no bar."""
    fig, ax = _figure()
    x = np.arange(len(qi))
    if any(generalized):
        _labelled_bars(ax, x - 0.2, stars, 0.4, "stars ('*' or one label for every value)", "C0")
        _labelled_bars(ax, x + 0.2, generalized, 0.4, "generalized (other labels)", "C1")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False)
        title = "Stars and generalized cells per quasi-identifier"
    else:
        _labelled_bars(ax, x, stars, 0.6, None, "C0")
        title = "Stars ('*' cells) per quasi-identifier"
    ax.margins(y=0.12)  # room for the counts above the bars
    _count_axis(ax)
    _column_ticks(ax, x, qi)
    ax.set_ylabel("cells")
    ax.set_title(title, pad=22 if any(generalized) else 6)  # (the legend sits between title and plot)
    return _img(fig, "stars and generalized cells per column")


def loss_per_column(qi: list[str], losses: list[float]) -> str:
    fig, ax = _figure()
    x = np.arange(len(qi))
    ax.bar(x, losses, color="C3")
    for xi, v in zip(x, losses):
        ax.annotate(format_value(v), (xi, v), ha="center", va="bottom")
    _column_ticks(ax, x, qi)
    ax.set(ylabel="mean loss per row (0 = kept, 1 = '*')", ylim=(0, 1.1),
           title="Information loss per quasi-identifier (generalization and suppression)")
    return _img(fig, "loss per column")


def sa_per_class(mix: list[dict], sa: str) -> str:
    """Stacked shares of the SA values: the whole table, then each class of facts.sa_mix, with the
    values beyond the TOP_SA_VALUES most frequent pooled in grey as "other"."""
    positions = sorted({r["position"] for r in mix})
    buckets = sorted({(r["bucket"] or TOP_SA_VALUES + 1, r["value"]) for r in mix})  # "other" last
    share = np.zeros((len(buckets), len(positions)))
    totals = {}
    for r in mix:
        totals[r["position"]] = totals.get(r["position"], 0) + r["n"]
    for r in mix:
        b = buckets.index((r["bucket"] or TOP_SA_VALUES + 1, r["value"]))
        share[b, positions.index(r["position"])] = r["n"] / totals[r["position"]]
    fig, ax = _figure(width=10, height=4.8)
    x = np.arange(len(positions))
    bottom = np.zeros(len(positions))
    colours = [f"C{i}" for i in range(10)]
    for b, (bucket, value) in enumerate(buckets):
        colour = "#bbbbbb" if bucket > TOP_SA_VALUES else colours[b % 10]
        ax.bar(x, share[b], 0.8, bottom=bottom, label=value, color=colour)
        bottom += share[b]
    ax.axvline(0.5, color="black", linewidth=0.8)
    ax.set_xticks(x, ["table"] + [f"#{p}\n{totals[p]}" for p in positions[1:]], fontsize=8)
    ax.set(ylabel="share of rows", ylim=(0, 1),
           title=f"Distribution of {sa}: whole table, then the least diverse classes (#rank, rows)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _img(fig, "SA distribution per class")


def risk_before_and_after(measures: list[tuple[str, str]], before: dict, after: dict,
                          original: str, published: str) -> str:
    """Bars of each (key, label) measure of anon_risk for both tables, with their values."""
    fig, ax = _figure()
    x = np.arange(len(measures))
    for offset, label, row in ((-0.2, f"original ({original})", before), (0.2, f"published ({published})", after)):
        values = [row[m] or 0.0 for m, _ in measures]
        ax.bar(x + offset, values, 0.4, label=label)
        for xi, v in zip(x, values):
            ax.annotate(format_value(float(v)), (xi + offset, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [name for _, name in measures])
    ax.set(ylabel="probability / fraction of records", ylim=(0, 1.3), yticks=np.linspace(0, 1, 6),
           title="Prosecutor re-identification risk before and after")
    ax.legend(loc="upper center", ncol=2)  # above the bars, which stop at 1
    return _img(fig, "risk before and after")


def sweep(rows: list[dict], columns: list[str], published=None) -> str:
    """Loss (stars, suppressed and removed rows) above risk, against the swept parameter,
    columns[0], on a numeric axis in increasing order (the rows come in the order typed); the
    published value, when given, marked by a dotted line."""
    swept = columns[0]
    rows = sorted(rows, key=lambda row: row.get(swept))
    x = np.array([float(row.get(swept)) for row in rows])
    fig = _new_figure(9, 5.5)
    loss_ax, risk_ax = fig.subplots(2, 1, sharex=True)
    # distinct markers and dashes: stars and suppressed_rows are often equal, and both stay visible
    styles = {"stars": ("o", "-", 7), "suppressed_rows": ("x", "--", 8), "removed_rows": ("^", ":", 6)}
    for key in [c for c in styles if c in columns]:
        marker, dashes, size = styles[key]
        loss_ax.plot(x, [_number(row.get(key)) for row in rows], marker=marker, linestyle=dashes, markersize=size,
                     label=key)
    for key in [c for c in columns[1:] if "risk" in c]:
        risk_ax.plot(x, [_number(row.get(key)) for row in rows], marker="s", label=key)
    loss_ax.set(ylabel="cells / rows", title=f"Information loss and risk against {swept}")
    _count_axis(loss_ax)
    risk_ax.set(ylabel="risk", xlabel=f"{swept} (increasing)")
    risk_ax.set_xticks(x, [format_value(row.get(swept)) for row in rows])
    for ax in (loss_ax, risk_ax):
        ax.grid(alpha=0.3)
        if published is not None:
            ax.axvline(float(published), color="grey", linestyle=":",
                       label=f"published: {swept} = {format_value(published)}" if ax is loss_ax else None)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _img(fig, f"sweep over {swept}")


def _number(value) -> float:
    return np.nan if value is None else float(value)
