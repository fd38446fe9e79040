"""The report as one self-contained HTML page: the sections in order, the CSS inline, the plots
embedded, so the file opens offline in any browser and can be mailed as it is."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import ParseError

from duckanon import extras
from duckanon.report import claims, facts, population as population_risk, privacy, sections, verdict
from duckanon.report.markup import escape
from duckanon.report.risk import resolve_risk_threshold

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
.verdict { background: #f3f7fc; border-left: 4px solid #4a78b5; padding: 0.5em 0.8em; }
table.compact { font-size: 0.8em; }  /* the sweep: a dozen columns within a 700 px page */
table.compact th, table.compact td { padding: 0.2em 0.35em; overflow-wrap: normal; }
"""


def _readable(name: str) -> str:
    """A table name as the page shows it: each part quoted only where DuckDB needs quotes
    ('"memory"."main"."t"' reads memory.main.t); a name sqlglot cannot read is shown as given."""
    try:
        table = exp.to_table(name, dialect="duckdb")
    except ParseError:
        return name
    parts = [table.args.get(arg) for arg in ("catalog", "db", "this")]
    return exp.Table(**{arg: exp.to_identifier(part.name) for arg, part in zip(("catalog", "db", "this"), parts)
                        if part is not None}).sql(dialect="duckdb")


def write_report(con, published: str, original: str, qi: list[str], sa: str | None, path,
                 summary: dict | None = None, params: dict | None = None,
                 sweep: list[dict] | None = None, risk_threshold: float | None = None,
                 original_shown: str | None = None, sensitives: list[str] | None = None,
                 population: str | None = None, population_weight: str | None = None,
                 population_shown: str | None = None, roles: dict | None = None,
                 profile_source: str | None = None, previous: dict | None = None) -> Path:
    """Write the HTML report comparing table `published` with `original` to `path`; return it.

    `con` is a duckanon connection (or a DuckDB one: the macros are installed if missing). `qi` are
    the quasi-identifier columns, `sa` the sensitive column or None. `summary` is ANONYMIZE's
    result row as a dict (or a duckanon.Summary), `params` the options of the statement: k, l, t,
    l_variant (shown only with l), c, t_distance (only with t), sa_hierarchy, sa_order, method,
    hierarchies (column -> spec, or one spec for every QI) and suppression_limit (shown when the
    release was generalized over hierarchies), metric (lattice-like methods), and anything else, as
    given. `sweep`: dicts whose FIRST key is the swept parameter, in any order (shown sorted), e.g.
    [{"k": 2, "stars": 12, "suppressed_rows": 6, "highest_risk": 0.5, "average_risk": 0.3}, ...].
    `risk_threshold`: a record is "at risk" when its re-identification risk strictly exceeds it;
    None (the default) means 1/k when k is known, else RISK_THRESHOLD (see resolve_risk_threshold).
    The loss per column is read from the summary's details (`column_loss`, which ANONYMIZE
    measures while it still knows which original value became which published string).
    `original_shown` names the original in the page when it differs from the name queried.
    `sensitives`: every sensitive column when there are several (`sa` is the first): the
    sensitive-attribute section and the l and t checks are shown for each.
    `population`: the population table the release was drawn from (its QI columns matched without
    case, `population_weight` a column counting its people per row, `population_shown` its name on
    the page): with it, or when the release used a population or risk model (params k_map,
    delta_presence, average_risk, highest_risk, population_uniqueness, population_size), the
    "Population risk" section shows k-map, delta-presence, the population-uniqueness estimate and
    the average risk before and after (see duckanon.report.population).
    `roles`: every source column's role (identifier masked by its rule, dropped, ...), shown with
    the HIPAA Safe Harbor kinds sql/profile.sql finds in `profile_source` (the original table).
    `previous` (REFRESH): the release this one replaces ({"summary", "source_rows",
    "published_at"}): what changed is shown beside the header.
    """
    extras.require("matplotlib")  # the plots: refused in one line before any query
    db = facts.duckdb_connection(con)
    qi = list(qi)
    if dataclasses.is_dataclass(summary):
        summary = dataclasses.asdict(summary)
    summary, params = dict(summary or {}), dict(params or {})
    details = summary.get("details")
    details = json.loads(details) if isinstance(details, str) else dict(details or {})
    k = params.get("k")
    threshold, threshold_why = resolve_risk_threshold(risk_threshold, k)
    # a private release: the original's figures are exact functions of its rows, outside the
    # guarantee, and are left out (claims.PRIVATE_NOTE); only the published table is measured
    private = params.get("epsilon") is not None
    counts = facts.row_counts(db, published, original)
    if private:
        counts["original"] = None
    columns = _private_column_counts(db, published, qi, details) if private else \
        facts.column_counts(db, published, original, qi)
    utility = facts.utility(db, published, original, qi, None if private else sa, k)
    release = claims.release(params, summary, details, counts)
    sensitives = list(sensitives or ([sa] if sa is not None else []))
    checks = sections.privacy_checks(db, published, original, qi, params, sensitives, private=private)
    table = None if population is None else population_risk.PopulationTable(
        population, population_shown or population, population_weight)
    population_measured = (population_risk.measure(db, published, original, qi, params, details, counts, columns, table)
                           if population_risk.applies(params, details, table) else None)
    whole = _whole_domain_columns(db, published, qi, columns, details, counts["published"])
    shown = _readable(published), original_shown or _readable(original)
    top = verdict.verdict(checks, population_measured.rows if population_measured else [], release, details,
                          summary, params, counts["published"])
    swept = (next(iter(sweep[0])), tuple(row[next(iter(sweep[0]))] for row in sweep)) if sweep else None
    stars_why = verdict.stars_explained(qi, columns, whole, release, summary, counts["published"],
                                        params.get("hierarchies"))
    parts = [
        sections.header(*shown, params, summary, details, utility, release, qi, threshold, threshold_why,
                        top=top, sweep_values=swept, stars_why=stars_why),
        sections.class_sizes(db, published, original, qi, k, shown, private=private),
        # (a private release's loss divides by the domain of the source's values: left out too)
        sections.columns(qi, columns, None if private else details.get("column_loss"),
                         None if private else details.get("loss"), whole),
    ]
    parts[1:1] = [sections.changes(previous, summary, counts)] if previous else []
    if "differential_privacy" in details:  # what the guarantee means, right below the header
        parts.insert(1, privacy.differential_privacy(details["differential_privacy"]))
    parts += [sections.sensitive_attribute(db, published, qi, column) for column in sensitives]
    if roles:
        parts.append(sections.roles(db, roles, profile_source or original, private=private))
    parts.append(sections.risk(db, published, original, qi, threshold, threshold_why, shown, private=private))
    if population_measured is not None:
        parts.append(sections.population_risk(population_measured))
    parts.append(sections.metrics(utility, sa, columns, release, checks, sensitives, private=private))
    if sweep:
        parts.append(sections.sweep(sweep, published=params.get(swept[0].removeprefix("requested_"))))
    return _page(path, shown[0], parts)


def _private_column_counts(db, published, qi, details) -> dict[str, dict]:
    """facts.column_counts without the original: a private release publishes each column at one
    level (details.levels, the mechanism's output), so its generalized cells are its cells other
    than '*' above level 0, and none at level 0 (or without hierarchies)."""
    total = facts.row_counts(db, published, published)["published"]
    levels = details.get("levels") or [0] * len(qi)
    star_cells = {}
    for c in qi:
        column = exp.cast(exp.column(c, quoted=True), "VARCHAR").sql(dialect="duckdb")
        star_cells[c] = facts.query_row(db, f"SELECT count(*) FILTER (WHERE {column} = '*') AS n, min({column}) "
                                            f"FILTER (WHERE {column} <> '*') AS example FROM query_table($p)", p=published)
    return {c: {"stars": star_cells[c]["n"],
                "generalized": (total - star_cells[c]["n"]) if level and level > 0 else 0,
                "example": star_cells[c]["example"] if level and level > 0 else None}
            for c, level in zip(qi, levels)}


def _whole_domain_columns(db, published, qi, columns, details, published_rows) -> dict[str, int]:
    """verdict.whole_domain_columns, reading the published table only when the release has such cells."""
    cells = int(details.get("whole_domain_cells", 0) or 0)
    one_value = facts.one_value_columns(db, published, qi) if cells else {}
    return verdict.whole_domain_columns(qi, columns, one_value, cells, published_rows)


def _page(path, published: str, parts: list[str]) -> Path:
    """The page around the sections, written to `path`."""
    title = f"duckanon report: {published}"
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
