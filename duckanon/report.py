"""One self-contained HTML page that shows what an anonymization did to a table.

    from duckanon.report import write_report
    write_report(con, "hospital_anon", "hospital", ["zipcode", "age", "education"], "disease",
                 "report.html", summary=summary, params={"k": 3})

Every number is computed inside DuckDB by the SQL macros of sql/checks.sql and sql/risk.sql (or a
GROUP BY next to them); Python only receives small aggregates (class-size histograms, counts per
column, the SA mix of at most TOP_CLASSES classes). Plots are PNGs drawn with matplotlib's Agg
canvas and embedded as base64 data URIs, CSS is inline: the file opens offline, in any browser,
and can be mailed as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import importlib.metadata
import io
import json
from pathlib import Path

import duckdb
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

TOP_CLASSES = 30     # classes shown in the SA plot: more bars would be unreadable
TOP_SA_VALUES = 10   # SA values with their own colour; the rest are pooled as "other"
RISK_THRESHOLD = 0.2  # anon_risk's default: records in classes of fewer than 5 rows are at risk

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.7em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
img { max-width: 100%; display: block; margin: 0.8em 0; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
.note { color: #555; font-size: 0.92em; } .bad { color: #b00; font-weight: bold; }
.good { color: #070; font-weight: bold; }
"""


def write_report(con, published: str, original: str, qi: list[str], sa: str | None, path,
                 summary: dict | None = None, params: dict | None = None,
                 sweep: list[dict] | None = None, risk_threshold: float = RISK_THRESHOLD) -> Path:
    """Write the HTML report comparing table `published` with `original` to `path`; return it.

    `con` is a duckanon connection (or a DuckDB one: the macros are installed if missing). `qi` are
    the quasi-identifier columns, `sa` the sensitive column or None. `summary` is ANONYMIZE's
    result row as a dict (or a duckanon.Summary), `params` the options of the statement (k, l, t,
    method, ...). `sweep` is a list of dicts whose FIRST key is the swept parameter, e.g.
    [{"k": 2, "stars": 12, "suppressed_rows": 6, "highest_risk": 0.5, "average_risk": 0.3}, ...].
    `risk_threshold`: a record is "at risk" when its re-identification risk exceeds it.
    The loss per column is read from the summary's details (`column_loss`, which ANONYMIZE
    measures while it still knows which original value became which published string).
    """
    db = _duckdb_connection(con)
    qi = list(qi)
    if dataclasses.is_dataclass(summary):
        summary = dataclasses.asdict(summary)
    summary, params = dict(summary or {}), dict(params or {})
    details = summary.get("details")
    details = json.loads(details) if isinstance(details, str) else dict(details or {})
    utility = _utility(db, published, original, qi, sa, params.get("k"))
    sections = [
        _header(published, original, params, summary, utility),
        _class_size_section(db, published, original, qi, params.get("k")),
        _column_section(db, published, original, qi, details.get("column_loss")),
    ]
    if sa is not None:
        sections.append(_sa_section(db, published, qi, sa))
    sections += [
        _risk_section(db, published, original, qi, risk_threshold),
        _metrics_section(db, published, original, qi, sa, params, utility),
    ]
    if sweep:
        sections.append(_sweep_section(sweep))
    title = f"duckanon report: {published}"
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(sections) + "\n</body></html>\n")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------- SQL

def _duckdb_connection(con) -> duckdb.DuckDBPyConnection:
    # Our queries are plain DuckDB SQL: skip duckanon's statement splitter and talk to DuckDB.
    db = getattr(con, "duckdb", con)
    installed = db.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = 'anon_utility'")
    if installed.fetchone()[0] == 0:
        from duckanon.connection import register
        register(db)
    return db


def _rows(db, query: str, **params) -> list[dict]:
    cursor = db.execute(query, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _one(db, query: str, **params) -> dict:
    return _rows(db, query, **params)[0]


def _size_histogram(db, table: str, qi: list[str]) -> dict[int, int]:
    """{class size: number of classes of that size}."""
    rows = _rows(db, "SELECT size, count(*) AS classes FROM anon_class_sizes($t, $qi) GROUP BY size",
                 t=table, qi=qi)
    return {r["size"]: r["classes"] for r in rows}


def _utility(db, published, original, qi, sa, k) -> dict:
    if sa is not None:
        return _one(db, "SELECT * FROM anon_utility($p, $o, $qi, $sa, k := $k)",
                    p=published, o=original, qi=qi, sa=sa, k=k)
    # anon_utility needs an SA column (its KL divergence is over QI x SA): without one, the same
    # class-based measures from the other macros, and no KL divergence.
    return _one(db, """
        SELECT s.stars, s.suppressed_rows, k.classes, r.rows,
               (SELECT sum(size::HUGEINT * size) FROM anon_class_sizes($p, $qi)) AS discernibility,
               r.rows / k.classes AS aecs, r.rows / (k.classes * $k) AS normalized_aecs,
               NULL AS kl_divergence
        FROM anon_stars($p, $qi) AS s, anon_k($p, $qi) AS k, anon_risk($p, $qi) AS r""",
                p=published, qi=qi, k=k)


# ---------------------------------------------------------------------------------- sections

def _header(published, original, params, summary, utility) -> str:
    parts = [f"<h1>duckanon report: <code>{_e(published)}</code></h1>",
             f"<p>Published table <code>{_e(published)}</code>, compared with the original table "
             f"<code>{_e(original)}</code>. duckanon {_e(_duckanon_version())}, "
             f"DuckDB {_e(duckdb.__version__)}.</p>"]
    if params:
        parts += ["<h2>Parameters</h2>", _table(["parameter", "value"], params.items())]
    if summary:
        details = summary.pop("details", None)
        parts += ["<h2>ANONYMIZE summary</h2>", _table(["field", "value"], summary.items()),
                  f"<p>{_optimality(summary)}</p>"]
        if "stars" in summary and summary["stars"] != utility["stars"]:
            parts.append(f"<p class=\"bad\">The summary reports {_e(summary['stars'])} stars but "
                         f"the published table holds {_e(utility['stars'])}.</p>")
        if details:
            pretty = json.dumps(json.loads(details), indent=2, sort_keys=True) if isinstance(details, str) \
                else json.dumps(details, indent=2, sort_keys=True, default=str)
            parts.append(f"<details><summary>solver details</summary><pre>{_e(pretty)}</pre></details>")
    return "\n".join(parts)


def _optimality(summary: dict) -> str:
    stars, bound = summary.get("stars"), summary.get("lower_bound")
    if summary.get("optimal"):
        return "<span class=\"good\">Proven optimal</span>: no suppression with fewer stars satisfies the request."
    if stars is None or bound is None:
        return "Not proven optimal, and no lower bound is known."
    gap = stars - bound
    share = f" ({gap / stars:.1%} of the stars)" if stars else ""
    return (f"Not proven optimal: at most {_e(gap)} stars{_e(share)} could be saved "
            f"(stars {_e(stars)} − proven lower bound {_e(bound)}).")


def _class_size_section(db, published, original, qi, k) -> str:
    before, after = _size_histogram(db, original, qi), _size_histogram(db, published, qi)
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
    ax.set(xlabel="equivalence class size (rows)", ylabel="number of classes",
           title="Equivalence class sizes before and after")
    ax.legend()
    return ("<h2>Equivalence classes</h2>" + _img(fig, "class size histogram")
            + f"<p class=\"note\">Classes are rows with equal values on {_e(', '.join(qi))}; "
              "a '*' is a value of its own in the published table.</p>")


def _column_section(db, published, original, qi, column_loss: dict | None = None) -> str:
    # Per QI column: '*' cells, and cells whose value is neither '*' nor a value of that column in
    # the original (a generalization such as '30-39', which cell suppression never produces).
    rows = _rows(db, """
        WITH pub AS (
            UNPIVOT (SELECT COLUMNS(lambda c: list_contains($qi, c))::VARCHAR FROM query_table($p))
            ON COLUMNS(*) INTO NAME col VALUE v
        ), orig AS (
            SELECT DISTINCT col, v FROM (
                UNPIVOT (SELECT COLUMNS(lambda c: list_contains($qi, c))::VARCHAR FROM query_table($o))
                ON COLUMNS(*) INTO NAME col VALUE v)
        )
        SELECT pub.col, count(*) FILTER (WHERE pub.v = '*') AS stars,
               count(*) FILTER (WHERE pub.v <> '*' AND orig.v IS NULL) AS generalized
        FROM pub LEFT JOIN orig ON orig.col = pub.col AND orig.v = pub.v
        GROUP BY pub.col""", qi=qi, p=published, o=original)
    by_column = {r["col"]: r for r in rows}
    stars = [by_column.get(c, {}).get("stars", 0) for c in qi]
    generalized = [by_column.get(c, {}).get("generalized", 0) for c in qi]
    fig, ax = _figure()
    x = np.arange(len(qi))
    if any(generalized):
        ax.bar(x - 0.2, stars, 0.4, label="'*' cells")
        ax.bar(x + 0.2, generalized, 0.4, label="generalized cells")
        ax.legend()
    else:
        ax.bar(x, stars, color="C0")
    for xi, s in zip(x, stars):
        ax.annotate(str(s), (xi, s), ha="center", va="bottom")
    ax.margins(y=0.12)  # room for the counts above the bars
    ax.set_xticks(x, qi, rotation=30 if len(qi) > 6 else 0, ha="right" if len(qi) > 6 else "center")
    ax.set(ylabel="cells", title="Suppressed cells ('*') per quasi-identifier")
    table = _table(["column", "'*' cells", "generalized cells"], zip(qi, stars, generalized))
    section = "<h2>Suppression per column</h2>" + _img(fig, "stars per column") + table
    if column_loss:
        section += _loss_section(qi, column_loss)
    elif any(generalized):
        section += ("<p class=\"note\">Generalized cells hold a value that is not one of the column's "
                    "original values; how much each lost is recorded by ANONYMIZE (column_loss), which "
                    "this report was not given.</p>")
    else:
        section += ("<p class=\"note\">Every published QI value is an original value or '*' (cell "
                    "suppression), so the information lost per column is exactly its '*' count.</p>")
    return section


def _loss_section(qi, column_loss: dict) -> str:
    losses = [float(column_loss.get(c, 0.0)) for c in qi]
    fig, ax = _figure()
    x = np.arange(len(qi))
    ax.bar(x, losses, color="C3")
    for xi, v in zip(x, losses):
        ax.annotate(f"{v:.3f}", (xi, v), ha="center", va="bottom")
    ax.set_xticks(x, qi, rotation=30 if len(qi) > 6 else 0, ha="right" if len(qi) > 6 else "center")
    ax.set(ylabel="mean loss per row (0 = kept, 1 = '*')", ylim=(0, 1.1),
           title="Information loss per quasi-identifier (generalization and suppression)")
    mean = sum(losses) / len(losses) if losses else 0.0
    return ("<h2>Information loss per column</h2>" + _img(fig, "loss per column")
            + _table(["column", "loss"], [*zip(qi, losses), ("all quasi-identifiers (mean)", mean)])
            + "<p class=\"note\">A row's loss in a column is (d<sub>L</sub> − 1) / (d − 1): d<sub>L</sub> "
              "original values were published as the same string, out of the column's d distinct values "
              "(Iyengar's loss metric on the values present). A kept value costs 0, a '*' or a removed "
              "row 1, a generalized label in between.</p>")


def _sa_section(db, published, qi, sa) -> str:
    # The SA mix of the whole table and of its TOP_CLASSES largest published classes, with the
    # SA values pooled into the TOP_SA_VALUES most frequent ones and "other" (bucket 0).
    mix = _rows(db, """
        WITH counts AS (
            SELECT cls::VARCHAR AS class, coalesce(sa_value::VARCHAR, 'NULL') AS value, n
            FROM anon_sa_counts($p, $qi, $sa)
        ), top_values AS (
            SELECT value, row_number() OVER (ORDER BY sum(n) DESC, value) AS bucket
            FROM counts GROUP BY value QUALIFY bucket <= $top_values
        ), shown AS (
            SELECT class, row_number() OVER (ORDER BY sum(n) DESC, class) AS position
            FROM counts GROUP BY class QUALIFY position <= $top_classes
        ), bucketed AS (
            SELECT c.class, coalesce(t.bucket, 0) AS bucket, coalesce(t.value, 'other') AS value, c.n
            FROM counts AS c LEFT JOIN top_values AS t USING (value)
        )
        SELECT 0 AS position, 'whole table' AS class, bucket, value, sum(n) AS n
        FROM bucketed GROUP BY ALL
        UNION ALL
        SELECT s.position, s.class, b.bucket, b.value, sum(b.n) AS n
        FROM bucketed AS b JOIN shown AS s USING (class) GROUP BY ALL
        ORDER BY position, bucket""",
                p=published, qi=qi, sa=sa, top_values=TOP_SA_VALUES, top_classes=TOP_CLASSES)
    # Per shown class: its size, frequency l and EMD to the table (equal distance, as anon_report).
    per_class = _rows(db, """
        WITH cells AS (
            SELECT cls, n, sum(n) OVER (PARTITION BY cls) AS size,
                   sum(n) OVER (PARTITION BY sa_value) AS nt, sum(n) OVER () AS total
            FROM anon_sa_counts($p, $qi, $sa)
        )
        SELECT cls::VARCHAR AS class, any_value(size) AS size, count(*) AS distinct_values,
               any_value(size) // max(n) AS frequency_l,
               (sum(abs(n * total - nt * size)) + (any_value(total) - sum(nt)) * any_value(size))
                   / (2 * any_value(size) * any_value(total)) AS emd
        FROM cells GROUP BY cls
        ORDER BY size DESC, class LIMIT $top_classes""", p=published, qi=qi, sa=sa, top_classes=TOP_CLASSES)
    heading = f"<h2>Sensitive attribute <code>{_e(sa)}</code> per class</h2>"
    if not mix:
        return heading + "<p>The published table is empty.</p>"
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
           title=f"Distribution of {sa}: whole table, then the largest classes (#rank, rows)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    table = _table(["#", "class (QI values)", "rows", "distinct values", "frequency l", "EMD to table"],
                   [(i + 1, r["class"], r["size"], r["distinct_values"], r["frequency_l"], r["emd"])
                    for i, r in enumerate(per_class)])
    return (heading + _img(fig, "SA distribution per class")
            + "<p class=\"note\">l-diversity asks every class to mix several values (frequency l: no value "
              "in more than 1/l of the class); t-closeness asks every class's bar to stay within EMD t "
              "of the first bar.</p>"
            + f"<details><summary>the {len(per_class)} largest classes</summary>{table}</details>")


def _risk_section(db, published, original, qi, threshold: float) -> str:
    query = "SELECT * FROM anon_risk($t, $qi, threshold := $threshold)"
    before = _one(db, query, t=original, qi=qi, threshold=threshold)
    after = _one(db, query, t=published, qi=qi, threshold=threshold)
    measures = [("highest_risk", "highest risk"), ("average_risk", "average risk"),
                ("records_at_risk_fraction", f"records at risk (> {threshold:g})"),
                ("uniques_fraction", "unique records")]
    fig, ax = _figure()
    x = np.arange(len(measures))
    for offset, label, row in ((-0.2, f"original ({original})", before), (0.2, f"published ({published})", after)):
        values = [row[m] or 0.0 for m, _ in measures]
        ax.bar(x + offset, values, 0.4, label=label)
        for xi, v in zip(x, values):
            ax.annotate(f"{v:.2f}", (xi + offset, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [name for _, name in measures])
    ax.set(ylabel="probability / fraction of records", ylim=(0, 1.3), yticks=np.linspace(0, 1, 6),
           title="Prosecutor re-identification risk before and after")
    ax.legend(loc="upper center", ncol=2)  # above the bars, which stop at 1
    keys = ["highest_risk", "average_risk", "records_at_risk", "records_at_risk_fraction",
            "uniques", "uniques_fraction", "classes", "rows"]
    table = _table(["measure", "original", "published"], [(k, before[k], after[k]) for k in keys])
    return ("<h2>Re-identification risk</h2>" + _img(fig, "risk before and after") + table
            + "<p class=\"note\">Prosecutor model (anon_risk): the attacker knows the person is in the "
              "table; a record's risk is 1 / the size of its class. "
            + f"Records at risk: risk above {threshold:g} (classes of fewer than {_e(_smallest_safe(threshold))} rows).</p>")


def _smallest_safe(threshold: float) -> int:
    """The smallest class size whose risk 1 / size does not exceed `threshold`."""
    size = max(int(1 / threshold), 1)
    return size if 1 / size <= threshold else size + 1


def _metrics_section(db, published, original, qi, sa, params, utility) -> str:
    checks = [("k", "SELECT k FROM anon_k($t, $qi)", params.get("k"), "min")]
    if sa is not None:
        l_form = params.get("l_variant", "frequency")
        t_form = "t_ordered" if params.get("t_distance") == "ordered" else "t"
        checks += [(f"{form}_l", f"SELECT {form}_l FROM anon_l($t, $qi, $sa)",
                    params.get("l") if form == l_form else None, "min")
                   for form in ("distinct", "frequency", "entropy")]
        checks += [(column, f"SELECT {column} FROM anon_t($t, $qi, $sa)",
                    params.get("t") if column == t_form else None, "max")
                   for column in ("t", "t_ordered")]
    rows = []
    for name, query, wanted, kind in checks:
        args = {"qi": qi, **({"sa": sa} if "$sa" in query else {})}
        values = [db.execute(query, {"t": table, **args}).fetchone()[0] for table in (original, published)]
        status = ""
        if wanted is not None and values[1] is not None:
            met = values[1] >= wanted if kind == "min" else values[1] <= wanted + 1e-12
            status = "met" if met else "NOT met"
        rows.append((name, wanted, *values, status))
    utility_names = {"stars": "stars ('*' cells)", "suppressed_rows": "rows with a '*'",
                     "classes": "classes", "rows": "rows", "discernibility": "discernibility (Σ size²)",
                     "aecs": "average class size (AECS)", "normalized_aecs": "normalized AECS (AECS / k)",
                     "kl_divergence": "KL divergence (original ‖ published)"}
    utility_rows = [(label, utility.get(key)) for key, label in utility_names.items()]
    kl_note = "" if sa is not None else \
        "<p class=\"note\">KL divergence is not computed without a sensitive attribute.</p>"
    return ("<h2>Utility</h2>" + _table(["measure (anon_utility)", "published"], utility_rows) + kl_note
            + "<h2>Privacy checks</h2>"
            + _table(["measure", "requested", "original", "published", ""], rows)
            + "<p class=\"note\">k from anon_k, l from anon_l, t from anon_t (EMD, equal and ordered "
              "ground distance), measured on the tables themselves.</p>")


def _sweep_section(sweep: list[dict]) -> str:
    columns = list(dict.fromkeys(key for row in sweep for key in row))
    swept = columns[0]
    labels = [str(row.get(swept)) for row in sweep]
    x = np.arange(len(sweep))
    fig = Figure(figsize=(9, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    loss_ax, risk_ax = fig.subplots(2, 1, sharex=True)
    for key in [c for c in ("stars", "suppressed_rows") if c in columns]:
        loss_ax.plot(x, [row.get(key, np.nan) for row in sweep], marker="o", label=key)
    for key in [c for c in columns[1:] if "risk" in c]:
        risk_ax.plot(x, [row.get(key, np.nan) for row in sweep], marker="s", label=key)
    loss_ax.set(ylabel="cells / rows", title=f"Information loss and risk against {swept}")
    risk_ax.set(ylabel="risk", xlabel=swept)
    risk_ax.set_xticks(x, labels)
    for ax in (loss_ax, risk_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    table = _table(columns, [[row.get(c) for c in columns] for row in sweep])
    return (f"<h2>Sweep over {_e(swept)}</h2>" + _img(fig, f"sweep over {swept}") + table
            + "<p class=\"note\">Pick the knee: the value after which more privacy costs much more "
              "loss, or after which the risk stops falling.</p>")


# ---------------------------------------------------------------------------------- helpers

def _figure(width: float = 9, height: float = 4) -> tuple[Figure, object]:
    # A Figure on an explicit Agg canvas, not pyplot: no global backend switch, no figure registry.
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


def _img(fig: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"{_e(alt)}\" src=\"data:image/png;base64,{data}\">"


def _table(header, rows) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"<td class=\"num\">{_e(_fmt(value))}</td>" if numeric else f"<td>{_e(_fmt(value))}</td>"


def _fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _duckanon_version() -> str:
    import duckanon
    version = getattr(duckanon, "__version__", None)
    return version or importlib.metadata.version("duckanon")
