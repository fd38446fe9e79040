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
import io
import json
import math
from pathlib import Path

import duckdb
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from duckanon import macros, methods
from duckanon._version import __version__

TOP_CLASSES = 30     # classes shown in the SA plot: more bars would be unreadable
TOP_SA_VALUES = 10   # SA values with their own colour; the rest are pooled as "other"
RISK_THRESHOLD = 0.2  # the default "at risk" threshold when k is unknown: classes of fewer than 5 rows
LATTICE_LIKE = methods.names(takes_hierarchies=True)  # hierarchies, suppression_limit and metric apply

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h1, h2, p, code { overflow-wrap: anywhere; }
.wide { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.8em 0; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.7em; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th, td:first-child { overflow-wrap: break-word; }  /* names: whole words, unless one alone is too wide */
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
img { max-width: 100%; display: block; margin: 0.8em 0; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
.note { color: #555; font-size: 0.92em; } .bad { color: #b00; font-weight: bold; }
.good { color: #070; font-weight: bold; }
"""


def write_report(con, published: str, original: str, qi: list[str], sa: str | None, path,
                 summary: dict | None = None, params: dict | None = None,
                 sweep: list[dict] | None = None, risk_threshold: float | None = None,
                 original_shown: str | None = None) -> Path:
    """Write the HTML report comparing table `published` with `original` to `path`; return it.

    `con` is a duckanon connection (or a DuckDB one: the macros are installed if missing). `qi` are
    the quasi-identifier columns, `sa` the sensitive column or None. `summary` is ANONYMIZE's
    result row as a dict (or a duckanon.Summary), `params` the options of the statement: k, l, t,
    l_variant (shown only with l), c, t_distance (only with t), sa_hierarchy, sa_order, method,
    hierarchies (column -> spec, or one spec for every QI), suppression_limit and metric (shown for
    the lattice-like methods), and anything else, shown as given. `sweep` is a list of dicts whose
    FIRST key is the swept parameter, e.g.
    [{"k": 2, "stars": 12, "suppressed_rows": 6, "highest_risk": 0.5, "average_risk": 0.3}, ...].
    `risk_threshold`: a record is "at risk" when its re-identification risk strictly exceeds it;
    None (the default) means 1/k when k is known, else RISK_THRESHOLD (see resolve_risk_threshold).
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
    k = params.get("k")
    threshold, threshold_why = resolve_risk_threshold(risk_threshold, k)
    counts = _row_counts(db, published, original)
    columns = _column_counts(db, published, original, qi)
    utility = _utility(db, published, original, qi, sa, k)
    release = _release(params, summary, details, counts)
    sections = [
        _header(published, original_shown or original, params, summary, details, utility, release, qi, threshold,
                threshold_why),
        _class_size_section(db, published, original, qi, k),
        _column_section(qi, columns, details.get("column_loss")),
    ]
    if sa is not None:
        sections.append(_sa_section(db, published, qi, sa))
    sections += [
        _risk_section(db, published, original, qi, threshold, threshold_why),
        _metrics_section(db, published, original, qi, sa, params, utility, columns, release),
    ]
    if sweep:
        sections.append(_sweep_section(sweep))
    title = f"duckanon report: {published}"
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(sections) + "\n</body></html>\n")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path


def resolve_risk_threshold(risk_threshold: float | None, k: int | None = None) -> tuple[float, str]:
    """The "at risk" threshold the report uses, and how it was chosen: the given one, else 1/k (a
    k-anonymous release then has no record at risk), else RISK_THRESHOLD (classes below 5 rows)."""
    if risk_threshold is not None:
        return float(risk_threshold), "as given"
    if k:
        return 1 / k, f"the default: 1/k for k = {k}"
    return RISK_THRESHOLD, "the default without k"


def smallest_safe_size(threshold: float) -> int:
    """The smallest class size whose risk 1 / size does not exceed `threshold` (1/k gives k: the
    comparison allows for 1/k not being exact in floating point)."""
    return max(1, math.ceil(1 / threshold - 1e-9))


def at_risk_sql_threshold(threshold: float) -> float:
    """The threshold to hand to anon_risk so that exactly the classes smaller than
    smallest_safe_size(threshold) count as at risk, with no floating-point tie at 1/size."""
    return 1 / (smallest_safe_size(threshold) - 0.5)


# ---------------------------------------------------------------------------------------- SQL

def _duckdb_connection(con) -> duckdb.DuckDBPyConnection:
    # Our queries are plain DuckDB SQL: skip duckanon's statement splitter and talk to DuckDB.
    db = getattr(con, "duckdb", con)
    if not macros.installed(db):  # the report reads through the SQL macros only
        macros.install(db)
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


def _row_counts(db, published: str, original: str) -> dict:
    return _one(db, "SELECT (SELECT count(*) FROM query_table($o)) AS original, "
                    "(SELECT count(*) FROM query_table($p)) AS published", o=original, p=published)


def _column_counts(db, published, original, qi) -> dict[str, dict]:
    """Per QI column: '*' cells, and cells whose value is neither '*' nor a value of that column in
    the original (a generalization such as '30-39', which cell suppression never produces), with
    the smallest such value as an example."""
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
               count(*) FILTER (WHERE pub.v <> '*' AND orig.v IS NULL) AS generalized,
               min(pub.v) FILTER (WHERE pub.v <> '*' AND orig.v IS NULL) AS example
        FROM pub LEFT JOIN orig ON orig.col = pub.col AND orig.v = pub.v
        GROUP BY pub.col""", qi=qi, p=published, o=original)
    by_column = {r["col"]: r for r in rows}
    return {c: {"stars": by_column.get(c, {}).get("stars", 0),
                "generalized": by_column.get(c, {}).get("generalized", 0),
                "example": by_column.get(c, {}).get("example")} for c in qi}


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

def _release(params: dict, summary: dict, details: dict, counts: dict) -> dict:
    """What was published, merged from the statement's options, the summary row, its details and
    the tables themselves (a REPORT of an older table may lack some of the summary's fields)."""
    method = summary.get("method") or params.get("method")
    lattice_like = method in LATTICE_LIKE or params.get("method") in LATTICE_LIKE
    limit = params.get("suppression_limit")
    if limit is None:
        limit = details.get("suppression_limit")
    total = summary.get("rows") if summary.get("rows") is not None else counts["original"]
    published_rows = summary.get("published_rows")
    if published_rows is None:
        published_rows = counts["published"]
    removed = summary.get("removed_rows")
    if removed is None:
        removed = details.get("removed_rows")
    if removed is None:
        removed = max(total - published_rows, 0)
    return {"method": method, "lattice_like": lattice_like, "suppression_limit": limit,
            "metric": params.get("metric") or details.get("metric") if lattice_like else None,
            "levels": details.get("levels"), "rows": total, "published_rows": published_rows,
            "removed_rows": removed}


def _header(published, original, params, summary, details, utility, release, qi, threshold, threshold_why) -> str:
    parts = [f"<h1>duckanon report: <code>{_e(published)}</code></h1>",
             f"<p>Published table <code>{_e(published)}</code>, compared with the original table "
             f"<code>{_e(original)}</code>. duckanon {_e(__version__)}, "
             f"DuckDB {_e(duckdb.__version__)}.</p>",
             f"<p class=\"removed\">{_e(removed_sentence(release))}</p>"]
    rows = _parameter_rows(params, summary, release, qi, threshold, threshold_why)
    if rows:
        parts += ["<h2>Parameters</h2>", _table(["parameter", "value"], rows)]
    if summary:
        summary = dict(summary)
        summary.pop("details", None)
        if summary.get("report") is None:  # not known while the report is being written
            summary.pop("report", None)
        parts += ["<h2>ANONYMIZE summary</h2>", _table(["field", "value"], summary.items()),
                  f"<p class=\"optimality\">{_optimality(summary, release)}</p>"]
        whole_domain = int((details or {}).get("whole_domain_cells", 0) or 0)
        if summary.get("stars") is not None and summary["stars"] != utility["stars"] + whole_domain:
            parts.append(f"<p class=\"bad\">The summary reports {_e(summary['stars'])} stars but "
                         f"the published table holds {_e(utility['stars'] + whole_domain)}.</p>")
        elif whole_domain:
            parts.append(f"<p class=\"note\">The summary's {_e(summary['stars'])} stars include {_e(whole_domain)} "
                         "cells published as a hierarchy label that covers every value of its column "
                         "(fully masked, like '*'); the tables below list them as generalized cells.</p>")
        if details:
            pretty = json.dumps(_finite(details), indent=2, sort_keys=True, default=str)
            parts.append(f"<details><summary>solver details</summary><pre>{_e(pretty)}</pre></details>")
    return "\n".join(parts)


def removed_sentence(release: dict) -> str:
    """'473 rows (1.6%) removed, limit 2%.' and how many rows are published."""
    removed, total, kept = release["removed_rows"], release["rows"], release["published_rows"]
    limit = release["suppression_limit"] if release["method"] == "lattice" else None
    limit_text = f", limit {_percent(limit, exact=True)}" if limit is not None else ""
    if kept > total:
        return (f"The published table holds {kept} rows, more than the original's {total}: it is not a "
                "subset of the original's rows.")
    if not removed:
        return f"No rows removed{limit_text}: the published table holds all {total} rows."
    share = f" ({_percent(removed / total)})" if total else ""
    return (f"{removed} {'row' if removed == 1 else 'rows'}{share} removed{limit_text}. "
            f"The published table holds {kept} of the original's {total} rows.")


def _parameter_rows(params: dict, summary: dict, release: dict, qi, threshold, threshold_why) -> list[tuple]:
    """The statement's options that mattered, in a fixed order, each stated once: l_variant only
    with l, t_distance only with t, the lattice's options only for a lattice-like method."""
    given, params = params, {name: value for name, value in params.items() if value is not None}
    shown = {}
    requested, used = params.get("method"), release["method"]
    if requested or used:
        shown["method"] = (f"{requested} (chose {used})" if requested and used and requested != used
                           else requested or used)
    for name in ("qi", "sensitive", "k"):
        if name in params:
            shown[name] = params[name]
    if "l" in params:
        shown["l"] = params["l"]
        shown["l_variant"] = params.get("l_variant", "frequency")
        if "c" in params and shown["l_variant"] == "recursive":
            shown["c"] = params["c"]
    if "t" in params:
        shown["t"] = params["t"]
        shown["t_distance"] = params.get("t_distance", "equal")
        for name in ("sa_hierarchy", "sa_order"):
            if name in params:
                shown[name] = params[name]
    if release["lattice_like"]:
        if "hierarchies" in given:  # given as None: the statement had none
            shown["hierarchies"] = _hierarchies_text(given.get("hierarchies"), qi)
        if release["levels"] is not None and len(release["levels"]) == len(qi):
            shown["hierarchy levels chosen (0 = original values)"] = ", ".join(
                f"{column} {level}" for column, level in zip(qi, release["levels"]))
        limit = release["suppression_limit"]
        if limit is not None:
            most = math.floor(limit * release["rows"] + 1e-9)
            shown["suppression_limit"] = (f"{_percent(limit, exact=True)} of the rows (at most {most} "
                                          f"{'row' if most == 1 else 'rows'})")
        if release["metric"]:
            shown["metric"] = release["metric"]
    shown["risk_threshold"] = f"{_fmt(threshold)} ({threshold_why})"
    skip = {"method", "qi", "sensitive", "k", "l", "l_variant", "c", "t", "t_distance", "sa_hierarchy",
            "sa_order", "hierarchies", "suppression_limit", "metric", "risk_threshold"}
    for name, value in params.items():  # anything else the caller passed, as given
        if name not in skip:
            shown[name] = value
    return list(shown.items())


def _hierarchies_text(hierarchies, qi) -> str:
    if not hierarchies:
        return "none: each quasi-identifier is published as it is or as '*'"
    if isinstance(hierarchies, str):
        return f"{hierarchies} for every quasi-identifier"
    if isinstance(hierarchies, dict):
        named = {name.lower() for name in hierarchies}
        text = "; ".join(f"{column}: {spec}" for column, spec in hierarchies.items())
        others = [c for c in qi if c.lower() not in named]
        if others:
            text += f"; {', '.join(others)}: none (the value or '*')"
        return text
    return str(hierarchies)


METRIC_WORDS = {"entropy": "entropy", "loss": "loss", "precision": "precision loss",
                "discernibility": "discernibility", "aecs": "average class size", "stars": "number of stars"}


def _optimality(summary: dict, release: dict | None = None) -> str:
    """What is proven, in the words of the summary's `optimal_for` (the shell prints the same)."""
    release = release or {}
    stars, bound = summary.get("stars"), summary.get("lower_bound")
    optimal_for = summary.get("optimal_for")
    method = summary.get("method") or release.get("method")
    if summary.get("optimal"):
        if optimal_for is None and method == "lattice":  # a summary from before optimal_for
            optimal_for = f"{release.get('metric') or 'its metric'} among full-domain generalizations"
        if optimal_for is None or optimal_for == "stars":
            return ("<span class=\"good\">Proven optimal</span>: no cell suppression with fewer stars "
                    "satisfies the request.")
        if method == "lattice":
            metric = release.get("metric")
            limit = release.get("suppression_limit")
            if limit is None:
                removing = "removes no more rows than the suppression limit allows"
            elif limit == 0:
                removing = "removes no rows"
            else:
                most = math.floor(limit * release.get("rows", 0) + 1e-9)
                removing = (f"removes at most {_percent(limit, exact=True)} of the rows ({most} "
                            f"{'row' if most == 1 else 'rows'})")
            lower = f"a lower {METRIC_WORDS.get(metric, metric)}" if metric else "a better value of its metric"
            return (f"<span class=\"good\">Proven optimal for {_e(optimal_for)}</span>: no release that "
                    f"generalizes each quasi-identifier to one level of its hierarchy (the same level for "
                    f"every row) and {_e(removing)} has {_e(lower)}. Other kinds of release (cell "
                    "suppression, local recoding) may lose less.")
        return f"<span class=\"good\">Proven optimal for {_e(optimal_for)}</span>."
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


def _column_section(qi, columns: dict[str, dict], column_loss: dict | None = None) -> str:
    stars = [columns[c]["stars"] for c in qi]
    generalized = [columns[c]["generalized"] for c in qi]
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
        ax.annotate(_fmt(v), (xi, v), ha="center", va="bottom")
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
    # The SA mix of the whole table and of its TOP_CLASSES least diverse published classes (the
    # ones l-diversity and t-closeness are decided by: fewest distinct SA values, then the largest
    # share of one value, then the farthest from the table's mix), with the SA values pooled into
    # the TOP_SA_VALUES most frequent ones and "other" (bucket 0).
    ranked = """
        WITH cells AS (
            SELECT cls, cls::VARCHAR AS class, coalesce(sa_value::VARCHAR, 'NULL') AS value, n,
                   sum(n) OVER (PARTITION BY cls) AS size,
                   sum(n) OVER (PARTITION BY sa_value) AS nt, sum(n) OVER () AS total
            FROM anon_sa_counts($p, $qi, $sa)
        ), per_class AS (
            SELECT cls, any_value(class) AS class, any_value(size) AS size, count(*) AS distinct_values,
                   max(n) / any_value(size) AS top_share, any_value(size) // max(n) AS frequency_l,
                   (sum(abs(n * total - nt * size)) + (any_value(total) - sum(nt)) * any_value(size))
                       / (2 * any_value(size) * any_value(total)) AS emd
            FROM cells GROUP BY cls  -- the struct: two classes may print alike
        ), shown AS (
            SELECT *, row_number() OVER (ORDER BY distinct_values, top_share DESC, emd DESC, size DESC,
                                                  class) AS position,
                      count(*) OVER () AS all_classes
            FROM per_class QUALIFY position <= $top_classes
        )"""
    mix = _rows(db, ranked + """, counts AS (
            SELECT cls, value, n FROM cells
        ), top_values AS (
            SELECT value, row_number() OVER (ORDER BY sum(n) DESC, value) AS bucket
            FROM counts GROUP BY value QUALIFY bucket <= $top_values
        ), bucketed AS (
            SELECT c.cls, coalesce(t.bucket, 0) AS bucket, coalesce(t.value, 'other') AS value, c.n
            FROM counts AS c LEFT JOIN top_values AS t USING (value)
        )
        SELECT 0 AS position, 'whole table' AS class, bucket, value, sum(n) AS n
        FROM bucketed GROUP BY position, class, bucket, value
        UNION ALL
        SELECT s.position, s.class, b.bucket, b.value, sum(b.n) AS n
        FROM bucketed AS b JOIN shown AS s USING (cls) GROUP BY s.position, s.class, b.bucket, b.value
        ORDER BY position, bucket""",
                p=published, qi=qi, sa=sa, top_values=TOP_SA_VALUES, top_classes=TOP_CLASSES)
    # Per shown class: its size, distinct values, largest share, frequency l and EMD to the table
    # (equal ground distance, as anon_t).
    per_class = _rows(db, ranked + " SELECT * EXCLUDE (cls) FROM shown ORDER BY position",
                      p=published, qi=qi, sa=sa, top_classes=TOP_CLASSES)
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
           title=f"Distribution of {sa}: whole table, then the least diverse classes (#rank, rows)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    all_classes = per_class[0]["all_classes"] if per_class else 0
    which = (f"the {len(per_class)} least diverse of the {all_classes} classes" if all_classes > len(per_class)
             else f"all {all_classes} {'class' if all_classes == 1 else 'classes'}, least diverse first")
    table = _table(["#", "class (QI values)", "rows", "distinct values", "largest share", "frequency l",
                    "EMD to table"],
                   [(r["position"], r["class"], r["size"], r["distinct_values"], r["top_share"],
                     r["frequency_l"], r["emd"]) for r in per_class])
    return (heading + _img(fig, "SA distribution per class")
            + f"<p class=\"note\">Shown: {_e(which)} (fewest distinct values of {_e(sa)}, then the "
              "largest share of one value, then the farthest from the whole table): the classes "
              "l-diversity and t-closeness are decided by. l-diversity asks every class to mix several "
              "values (frequency l: no value in more than 1/l of the class); t-closeness asks every "
              "class's bar to stay within EMD t of the first bar.</p>"
            + f"<details><summary>{_e(which)}</summary>{table}</details>")


def _risk_section(db, published, original, qi, threshold: float, threshold_why: str) -> str:
    # anon_risk counts a record when 1 / size > threshold; it gets a threshold halfway between two
    # sizes' risks, so 1/k (not exact in floating point) puts a class of exactly k rows on the safe side.
    query = "SELECT * FROM anon_risk($t, $qi, threshold := $threshold)"
    safe = smallest_safe_size(threshold)
    before, after = (_one(db, query, t=table, qi=qi, threshold=at_risk_sql_threshold(threshold))
                     for table in (original, published))
    measures = [("highest_risk", "highest risk"), ("average_risk", "average risk"),
                ("records_at_risk_fraction", f"records at risk (> {_fmt(threshold)})"),
                ("uniques_fraction", "unique records")]
    fig, ax = _figure()
    x = np.arange(len(measures))
    for offset, label, row in ((-0.2, f"original ({original})", before), (0.2, f"published ({published})", after)):
        values = [row[m] or 0.0 for m, _ in measures]
        ax.bar(x + offset, values, 0.4, label=label)
        for xi, v in zip(x, values):
            ax.annotate(_fmt(float(v)), (xi + offset, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [name for _, name in measures])
    ax.set(ylabel="probability / fraction of records", ylim=(0, 1.3), yticks=np.linspace(0, 1, 6),
           title="Prosecutor re-identification risk before and after")
    ax.legend(loc="upper center", ncol=2)  # above the bars, which stop at 1
    keys = ["highest_risk", "average_risk", "records_at_risk", "records_at_risk_fraction",
            "uniques", "uniques_fraction", "classes", "rows"]
    table = _table(["measure", "original", "published"], [(k, before[k], after[k]) for k in keys])
    at_risk = after["records_at_risk"]
    smaller = f"classes of fewer than {safe} rows" if safe > 1 else "no class (every risk is at most 1)"
    return ("<h2>Re-identification risk</h2>"
            + f"<p class=\"at-risk\">{_e(at_risk)} published {'record' if at_risk == 1 else 'records'} at "
              f"risk: risk above {_e(_fmt(threshold))} ({_e(threshold_why)}), i.e. in {_e(smaller)}.</p>"
            + _img(fig, "risk before and after") + table
            + "<p class=\"note\">Prosecutor model (anon_risk): the attacker knows the person is in the "
              "table; a record's risk is 1 / the size of its class, and it is at risk when that is "
              "strictly above the threshold. Risks are shown to 3 significant digits. "
            + f"Records at risk: risk above {_e(_fmt(threshold))} ({_e(smaller)}).</p>")


def _metrics_section(db, published, original, qi, sa, params, utility, columns, release) -> str:
    checks = [("k", "SELECT k FROM anon_k($t, $qi)", params.get("k"), "min")]
    if sa is not None:
        l_form = params.get("l_variant") or "frequency"
        t_form = {"equal": "t", "ordered": "t_ordered"}.get(params.get("t_distance") or "equal")
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
    kl = utility.get("kl_divergence")
    if kl is not None and not math.isfinite(kl):
        utility_rows[-1] = (utility_names["kl_divergence"], kl_infinite_text(columns, release))
    kl_note = "" if sa is not None else \
        "<p class=\"note\">KL divergence is not computed without a sensitive attribute.</p>"
    return ("<h2>Utility</h2>" + _table(["measure (anon_utility)", "published"], utility_rows) + kl_note
            + "<h2>Privacy checks</h2>"
            + _table(["measure", "requested", "original", "published", ""], rows)
            + "<p class=\"note\">k from anon_k, l from anon_l, t from anon_t (EMD, equal and ordered "
              "ground distance), measured on the tables themselves.</p>")


def kl_infinite_text(columns: dict[str, dict], release: dict) -> str:
    """Why anon_utility's KL divergence is infinite, in one sentence after the ∞."""
    generalized = {c: v for c, v in columns.items() if v["generalized"]}
    if generalized:
        cells = sum(v["generalized"] for v in generalized.values())
        column, first = next(iter(generalized.items()))
        return (f"∞ (a published cell has no original counterpart: {cells} published "
                f"{'cell holds a generalized value' if cells == 1 else 'cells hold generalized values'} "
                f"such as '{first['example']}' in {column}, which the original column does not contain, "
                "so the original rows behind them get probability 0; this KL divergence reads only a "
                "'*' as any value and is infinite for every generalization, so see the information "
                "loss per column instead)")
    if release.get("removed_rows"):
        removed = release["removed_rows"]
        return (f"∞ (a removed row has no published counterpart: {removed} "
                f"{'row was' if removed == 1 else 'rows were'} removed and some of their value "
                "combinations occur in no published row, even with a '*' read as any value, so the "
                "published table gives them probability 0)")
    return ("∞ (an original row has no published counterpart: some combination of quasi-identifier "
            "and sensitive values occurs in no published row, even with a '*' read as any value, so the "
            "published table gives it probability 0; it is not a cell suppression of the original)")


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
    return f"<div class=\"wide\"><table><tr>{head}</tr>{body}</table></div>"


def _cell(value) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"<td class=\"num\">{_e(_fmt(value))}</td>" if numeric else f"<td>{_e(_fmt(value))}</td>"


def _fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if abs(value) >= 1000:  # 3 significant digits would need an exponent: whole numbers instead
            return f"{value:.0f}"
        return f"{value:.3g}"  # risks, shares, distances: 3 significant digits
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _percent(fraction: float, exact: bool = False) -> str:
    """A share of rows as a percentage: 473/30162 -> '1.6%' (2 significant digits, or whole
    percents from 10% on); `exact` for a limit as the user gave it: 0.02 -> '2%', 0.125 -> '12.5%'."""
    percent = 100 * fraction
    if exact:
        return f"{round(percent, 9):g}%"
    return f"{percent:.0f}%" if percent >= 10 else f"{percent:.2g}%"


def _finite(value):
    """JSON-ready copy of `value` with no Infinity/NaN (json.dumps would write them bare)."""
    if isinstance(value, float) and not math.isfinite(value):
        return _fmt(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _e(value) -> str:
    return html.escape(str(value), quote=True)
