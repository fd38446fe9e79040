"""The population-based risks of a release, before (the original) and after (the published table),
each figure with where it comes from, or why it is not available.

- k-map level and delta-presence range against a population table. The original's are measured
  by anon_kmap and anon_delta_presence on its raw values. Those macros compare values as text ('*'
  a wildcard) and cannot map a raw population value to a hierarchy label (their _labeled forms
  can, given a table of the release's labels, which the report does not have), so the published
  table's are the ones ANONYMIZE counted in DuckDB through the hierarchies' labels while it
  published the table (details.population: in its result row and the report its `report` option
  writes; the table's comment leaves them out, they count the population's rows); only a
  published table that holds nothing but original values and '*' is measured by the macros.
- The population-uniqueness estimate (anon_population_uniqueness) with the release's estimator
  (Dankar's rule by default) and population size.
- The average risk (anon_risk: classes / rows), and the highest risk when it was requested.
- The estimated k-map: the derived k every class needs (details.k_map) against the smallest class.

A figure the report cannot compute is never guessed: it is `Figure(missing=why)`, and the page says
why (a REPORT run later without the population table: the provenance never names it nor
holds its counts).
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

from duckanon.errors import AnonymizeError
from duckanon.report import facts
from duckanon.report.markup import format_value
from duckanon.solver.population import ESTIMATORS as UNIQUENESS_ESTIMATORS, KMAP_SIGNIFICANCE, kmap_derived_k

DEFAULT_UNIQUENESS_ESTIMATOR = "dankar"
# the options and details that make a release's population risk worth a section
RISK_OPTIONS = ("k_map", "delta_presence", "average_risk", "highest_risk", "population_uniqueness", "population",
                "population_size")
RISK_DETAILS = ("population", "k_map", "population_uniqueness", "average_risk")

NO_TABLE = ("the population table is not known here (the provenance records that one was "
            "used, never its name or its counts); give it to REPORT: WITH (population = <table>)")


@dataclass(frozen=True)
class PopulationTable:
    """A population table the report reads: `name` as queried, `shown` as named on the page,
    `weight` a column counting the people of each row (None: a row is a person)."""

    name: str
    shown: str
    weight: str | None = None


@dataclass(frozen=True)
class Figure:
    """One number of the section, or why there is none."""

    value: object = None
    missing: str | None = None  # why it is not available, as a clause: "the population table is not known"


@dataclass(frozen=True)
class Row:
    measure: str
    requested: str | None
    original: Figure
    published: Figure
    status: str
    how: str


@dataclass
class PopulationRisk:
    rows: list[Row]
    notes: list[str] = field(default_factory=list)     # plain sentences: where the figures come from
    warnings: list[str] = field(default_factory=list)  # plain sentences: figures that do not agree


def applies(params: dict, details: dict, population: PopulationTable | None) -> bool:
    """The section is shown when the release used a population or risk model, or a population
    (table or size) is known."""
    return (population is not None or any(params.get(name) is not None for name in RISK_OPTIONS)
            or any(name in details for name in RISK_DETAILS))


def _status(requested_bound, value, kind: str) -> str:
    if requested_bound is None or value is None:
        return ""
    met = value >= requested_bound - 1e-9 if kind == "min" else value <= requested_bound + 1e-9
    return "met" if met else "NOT met"


@contextmanager
def readable(db, population: PopulationTable, original: str, qi: list[str]):
    """The name to hand the macros for `population`: the table itself when it has the QI columns
    as the original spells them, with its types, and no weight; otherwise a temporary view that
    renames them, reads them as the original's types (as ANONYMIZE reads a population) and
    repeats each row `weight` times. Dropped on exit."""
    types = facts.column_types(db, population.name)
    original_types = {name.lower(): kind for name, kind in facts.column_types(db, original).items()}
    wanted = {c: original_types.get(c.lower()) for c in qi}
    by_lower = {name.lower(): name for name in types}
    missing = [c for c in qi if c.lower() not in by_lower]
    if missing:
        raise AnonymizeError(f"population table {population.shown} lacks the quasi-identifier column '{missing[0]}' "
                             f"(it must hold every QI: {', '.join(qi)})")
    weight = None
    if population.weight is not None:
        weight = by_lower.get(population.weight.lower())
        if weight is None:
            raise AnonymizeError(f"unknown column '{population.weight}' in population_weight for population table "
                                 f"{population.shown}")
    columns = [by_lower[c.lower()] for c in qi]
    if weight is None and columns == qi and all(types[c] == wanted[c] or wanted[c] is None for c in qi):
        yield population.name
        return

    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    view = f"__duckanon_report_population_{uuid.uuid4().hex[:12]}"
    select = ", ".join(f"CAST(__p.{quoted(column)} AS {wanted[c]}) AS {quoted(c)}"
                       if wanted[c] is not None and types[column] != wanted[c]
                       else f"__p.{quoted(column)} AS {quoted(c)}" for c, column in zip(qi, columns))
    name = population.name.replace("'", "''")
    repeat = f", range(CAST(__p.{quoted(weight)} AS BIGINT))" if weight else ""
    db.execute(f"CREATE TEMP VIEW {view} AS SELECT {select} FROM query_table('{name}') AS __p{repeat}")
    try:
        yield f"temp.main.{view}"
    finally:
        db.execute(f"DROP VIEW IF EXISTS temp.main.{view}")


def _only_original_values(details: dict, columns: dict[str, dict], qi) -> bool:
    """Whether every published QI value is an original value or '*' (no hierarchy level above 0,
    no label, range or set): then the macros match the published classes exactly."""
    levels = details.get("levels") or []
    return not any(levels) and not any(columns[c]["generalized"] for c in qi)


def measure(db, published: str, original: str, qi: list[str], params: dict, details: dict, counts: dict,
            columns: dict[str, dict], population: PopulationTable | None) -> PopulationRisk:
    """Every figure of the section (see the module's docstring)."""
    if population is None:
        return _measure(db, published, original, qi, params, details, counts, columns, None, None)
    with readable(db, population, original, qi) as name:
        return _measure(db, published, original, qi, params, details, counts, columns, population, name)


def _measure(db, published, original, qi, params, details, counts, columns, population, name) -> PopulationRisk:
    result = PopulationRisk([])
    recorded = details.get("population") if isinstance(details.get("population"), dict) else None
    used_table = params.get("population") is not None or recorded is not None
    people = None
    if population is not None or used_table:
        people = _kmap_rows(db, published, original, qi, params, details, columns, population, name, recorded, result)
    size, size_from = _population_size(params, details, recorded, people)
    if people is not None and size is not None and size_from == "population_size" and people != size:
        result.warnings.append(
            f"population_size is {format_value(size)}, but the population table {population.shown} has "
            f"{format_value(people)} rows (people): "
            "the uniqueness estimate uses population_size; the k-map and delta-presence figures count the table.")
    _risk_rows(db, published, original, qi, params, result)
    _uniqueness_rows(db, published, original, qi, params, counts, size, size_from, result)
    _estimated_kmap_rows(db, published, original, qi, params, details, counts, size, name is not None, result)
    return result


def _kmap_rows(db, published, original, qi, params, details, columns, population, name, recorded, result):
    """k-map level and delta-presence range; returns the people of the population table read
    now (None without one)."""
    keys = ("k_map", "delta_min", "delta_max")
    people, hows = None, []
    if name is not None:  # the original's raw values against the population table, by the macros
        before = facts.kmap(db, original, name, qi)
        people = before["population_rows"]
        original_figures = {key: Figure(before[key]) for key in keys}
        hows.append(f"original: anon_kmap, anon_delta_presence against {population.shown}")
        result.notes.append(
            "k-map and delta-presence: the original's figures are measured by anon_kmap and anon_delta_presence "
            f"on its raw values against the population table {population.shown} ({format_value(people)} rows"
            + (f", weighted by its column {population.weight}" if population.weight else "") + ").")
    else:
        original_figures = {key: Figure(missing=NO_TABLE) for key in keys}
    if recorded is not None:  # what ANONYMIZE counted through the hierarchies' labels
        low, high = recorded.get("delta_presence_range") or (None, None)
        published_figures = {"k_map": Figure(recorded.get("k_map_level")), "delta_min": Figure(low),
                             "delta_max": Figure(high)}
        hows.append("published: counted by ANONYMIZE (details.population)")
        result.notes.append(
            "k-map and delta-presence: the published table's figures are those ANONYMIZE counted in DuckDB when it "
            "published the table (details.population: the population grouped by the labels of the levels chosen, "
            f"{format_value(recorded.get('population_rows'))} rows, joined to the published classes); the plain SQL "
            "macros compare values as text and cannot map a raw population value to a hierarchy label: their _labeled "
            "forms (anon_kmap_labeled, anon_delta_presence_labeled) recount these figures from a table of the "
            "release's labels (README, Population risk in SQL).")
        if people is not None and recorded.get("population_rows") is not None and people != recorded["population_rows"]:
            result.warnings.append(
                f"The population table {population.shown} has {format_value(people)} rows (people), but the release "
                f"was checked against a population of {format_value(recorded['population_rows'])}: the original's "
                "k-map and delta-presence figures are measured against a different population than the published "
                "table's.")
    elif name is not None and _only_original_values(details, columns, qi):
        after = facts.kmap(db, published, name, qi)
        published_figures = {key: Figure(after[key]) for key in keys}
        hows.append(f"published: anon_kmap, anon_delta_presence against {population.shown} ('*' a wildcard)")
        result.notes.append(
            "k-map and delta-presence: the published table holds only original values and '*', so the macros "
            "measure it exactly ('*' matches every population value).")
    else:
        why = ("the published values are hierarchy labels, ranges or sets, which the SQL macros cannot match "
               "against raw population values, and the table's provenance holds no population count (ANONYMIZE's "
               "result row and report have them)"
               if name is not None else NO_TABLE)
        published_figures = {key: Figure(missing=why) for key in keys}
    k_map, delta = params.get("k_map"), params.get("delta_presence")
    for key, label, requested, bound, kind in (
            ("k_map", "k-map level (fewest population rows matching a class)",
             f"≥ {k_map}" if k_map is not None else None, k_map, "min"),
            ("delta_min", "delta-presence, smallest (class rows / matching population rows)",
             f"≥ {format_value(delta[0])}" if delta else None, delta[0] if delta else None, "min"),
            ("delta_max", "delta-presence, largest",
             f"≤ {format_value(delta[1])}" if delta else None, delta[1] if delta else None, "max")):
        after = published_figures[key]
        result.rows.append(Row(label, requested, original_figures[key], after,
                               _status(bound, after.value, kind), "; ".join(hows)))
    return people


def _population_size(params, details, recorded, people) -> tuple[int | None, str]:
    """The population size N of the uniqueness estimate, and where it comes from: the release's
    (population_size, or the population its estimate used), else the population table's rows."""
    estimate = details.get("population_uniqueness") if isinstance(details.get("population_uniqueness"), dict) else {}
    estimated_kmap = details.get("k_map") if isinstance(details.get("k_map"), dict) else {}
    for value, source in ((params.get("population_size"), "population_size"),
                          (estimate.get("population_size"), "the population size of the release's estimate"),
                          ((recorded or {}).get("population_rows"), "the rows of the release's population table"),
                          (people, "the rows of the population table"),
                          (estimated_kmap.get("population_size"), "the population size of the k-map estimate")):
        if value is not None:
            return int(value), source
    return None, ""


def _risk_rows(db, published, original, qi, params, result):
    query = "SELECT average_risk, highest_risk FROM anon_risk($t, $qi)"
    before, after = (facts.query_row(db, query, t=table, qi=qi) for table in (original, published))
    average, highest = params.get("average_risk"), params.get("highest_risk")
    result.rows.append(Row("average risk (classes / rows)",
                           f"≤ {format_value(average)}" if average is not None else None,
                           Figure(before["average_risk"]), Figure(after["average_risk"]),
                           _status(average, after["average_risk"], "max"), "anon_risk"))
    if highest is not None:
        result.rows.append(Row("highest risk (1 / smallest class)", f"≤ {format_value(highest)}",
                               Figure(before["highest_risk"]), Figure(after["highest_risk"]),
                               _status(highest, after["highest_risk"], "max"), "anon_risk"))


def _uniqueness_rows(db, published, original, qi, params, counts, size, size_from, result):
    estimator = params.get("estimator")
    estimator = estimator if estimator in UNIQUENESS_ESTIMATORS else DEFAULT_UNIQUENESS_ESTIMATOR
    wanted = params.get("population_uniqueness")
    figures, used = {}, {}
    for side, table in (("original", original), ("published", published)):
        rows = counts[side]
        if size is None:
            figures[side] = (Figure(missing="no population size (give population_size = N or "
                                            "population = <table>)"),) * 2
            continue
        if rows > size:
            why = f"the population size {format_value(size)} is smaller than the table's {format_value(rows)} rows"
            figures[side] = (Figure(missing=why),) * 2
            continue
        estimate = facts.population_uniqueness(db, table, qi, size, estimator)
        used[side] = estimate["estimator"]
        if estimate["converged"] is False:
            why = f"the {estimate['estimator']} fit did not converge (ARX reports no estimate)"
            figures[side] = (Figure(missing=why),) * 2
            continue
        figures[side] = (Figure(estimate["fraction"]), Figure(estimate["uniques"]))
    picked = set(used.values()) - {estimator}
    chose = "" if not picked else f" (chose {next(iter(picked))})" if len(set(used.values())) == 1 else \
        " (chose " + ", ".join(f"{name} for the {side}" for side, name in used.items()) + ")"
    how = (f"anon_population_uniqueness, estimator {estimator}{chose}"
           + (f", N = {format_value(size)}" if size is not None else ""))
    after = figures["published"][0]
    result.rows.append(Row("population uniqueness (estimated share of the population unique)",
                           f"≤ {format_value(wanted)}" if wanted is not None else None,
                           figures["original"][0], after, _status(wanted, after.value, "max"), how))
    result.rows.append(Row("population uniques (estimated records)", None, figures["original"][1],
                           figures["published"][1], "", how))
    if used:
        result.notes.append(
            f"Population uniqueness: estimated by anon_population_uniqueness from each table's class sizes with "
            f"the estimator {estimator} and a population of {format_value(size)} ({size_from}); an estimate, not a "
            "count.")


def _estimated_kmap_rows(db, published, original, qi, params, details, counts, size, has_table, result):
    """k-map with only a population size: the derived k every class needs (ARX's KMap with a
    population model), against each table's smallest class."""
    noted = details.get("k_map") if isinstance(details.get("k_map"), dict) else None
    k_map = params.get("k_map")
    estimated = noted is not None or (k_map is not None and params.get("population") is None
                                      and params.get("population_size") is not None)
    if not estimated:
        return
    if noted is not None and noted.get("derived_k") is not None:
        derived, k_map = noted["derived_k"], noted.get("k_map", k_map)
        estimator, significance = noted.get("estimator"), noted.get("significance")
        source = "details.k_map"
    else:
        estimator = params.get("estimator") if params.get("estimator") not in UNIQUENESS_ESTIMATORS else None
        estimator, significance = estimator or "poisson", params.get("significance") or KMAP_SIGNIFICANCE
        derived = kmap_derived_k(int(k_map), counts["original"], int(size), estimator, significance) \
            if size is not None and 0 < counts["original"] <= size else None
        source = "recomputed from the release's options"
    query = "SELECT k FROM anon_k($t, $qi)"
    before, after = (facts.query_row(db, query, t=table, qi=qi)["k"] for table in (original, published))
    requested = f"≥ {derived} (derived k for k_map = {k_map})" if derived is not None else None
    result.rows.append(Row("k-map estimate: smallest class", requested, Figure(before), Figure(after),
                           _status(derived, after, "min"),
                           f"anon_k; derived k {source} ({estimator}, significance {format_value(significance)})"))
    if derived is None:
        result.notes.append(f"k-map estimate: the derived k for k_map = {k_map} is not available: it needs the "
                            "population size and a sample no larger than it.")
        return
    result.notes.append(
        f"k-map estimate: without a population table, k_map = {k_map} is held as ARX's KMap with a population "
        f"model does: every class needs at least the derived k = {derived} rows, which the {estimator} model says "
        f"match at least {k_map} people at significance {format_value(significance)}; an estimate, not a count."
        + ("" if has_table or "population" in details else
           " The k-map level against the population's rows is measured only with a population table: "
           "REPORT ... WITH (population = <table>)."))


def write_release_labels(con, release: str, population: str, name: str, hierarchies=None) -> int:
    """Write the table `name` ("column", value, label) that the population macros' _labeled forms
    read (sql/risk_population.sql): for each QI the release `release` generalized (its
    provenance: `qi`, `hierarchies` and the lattice's `details.levels`), every value of the
    population table `population` (as VARCHAR) with the release's label at that level, from the
    same hierarchy spec bound to the population's values (a QI without one: '*'). For hierarchy
    files, anon_hierarchy_labels reads the same rows without duckanon's binding. Returns the rows
    written; the release must be a lattice release (one level per QI).
    The provenance records a builder (`intervals(5, 10)`) as given, but a hierarchy file or
    `table(name)` only as its kind (its path or name is the source side's): `hierarchies` gives
    those, as ANONYMIZE's option does (column -> spec, or one spec with {column} for every QI);
    a recorded builder is used as recorded."""
    import numpy as np
    import pyarrow as pa
    from sqlglot import exp

    from duckanon import hierarchy
    from duckanon.backends import backend_for
    from duckanon.pipeline.plan import hierarchy_specs
    from duckanon.pipeline.provenance import HIERARCHY_FILE, HIERARCHY_TABLE, published_provenance
    from duckanon.sql.statement import TableName, shown_name

    raw = facts.duckdb_connection(con)
    backend = backend_for(raw)
    release_table = TableName(exp.to_table(release, dialect="duckdb"))
    population_table = TableName(exp.to_table(population, dialect="duckdb"))
    provenance = published_provenance(backend, release_table) or {}
    details = (provenance.get("summary") or {}).get("details") or {}
    qi, levels = provenance.get("qi"), details.get("levels")
    if not qi or not isinstance(levels, list) or len(levels) != len(qi):
        raise AnonymizeError(f"{shown_name(release_table)} is not a lattice release of duckanon (its provenance "
                             "gives no level per quasi-identifier)")
    specs = hierarchy_specs(provenance.get("hierarchies"), qi)
    given = hierarchy_specs(hierarchies, qi)
    for column, level in zip(qi, levels):
        kind = {HIERARCHY_FILE: "file", HIERARCHY_TABLE: "table"}.get(specs.get(column))
        if level and kind is not None:
            if given.get(column) is None:
                raise AnonymizeError(
                    f"the provenance of {shown_name(release_table)} does not record which hierarchy {kind} "
                    f"{column} was generalized by (a file or table hierarchy is recorded as its kind only): "
                    f"give it as hierarchies = {{'{column}': '<spec>'}}")
            specs[column] = given[column]
    columns, values, labels = [], [], []
    for column, level in zip(qi, levels):
        if level == 0:
            continue
        read = exp.column(column, quoted=True)
        rows = backend.rows(exp.select(read, exp.cast(read.copy(), "VARCHAR")).distinct().from_(
            population_table.table.copy()))
        texts = [text for _, text in rows]
        spec = specs.get(column)
        if spec is None:  # published as its value or '*': at level 1 every value is '*'
            names = ["*"] * len(rows)
        else:
            bound = hierarchy.parse_spec(spec, column, backend).bind([v for v, _ in rows], column=column,
                                                                    source=shown_name(population_table))
            level_names = bound.level_labels(level)
            names = [level_names[c] for c in np.asarray(bound.codes)[:, level].tolist()]
        columns += [column] * len(rows)
        values += texts
        labels += names
    scratch = "__duckanon_release_labels"
    backend.register_arrow(scratch, pa.table({"column": pa.array(columns, pa.string()),
                                              "value": pa.array(values, pa.string()),
                                              "label": pa.array(labels, pa.string())}))
    try:
        backend.execute(exp.Create(this=exp.to_table(name, dialect="duckdb"), kind="TABLE", replace=True,
                                   expression=exp.select("*").from_(exp.to_table(scratch, quoted=True))))
    finally:
        backend.unregister(scratch)
    return len(columns)
