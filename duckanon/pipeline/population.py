"""The population table (k_map, delta_presence): its classes in the sample's codes, and the check
of a release against it.

A population row matches a sample class when its QI values, read as the sample's column types,
have the sample's keys (columns.key_of: the value, or its text where the sample's classes are
told apart by text). Values the sample lacks get codes after the sample's, so the lattice's
hierarchies are bound to both tables' values and every population row rolls up with the labels
of the node. Everything is one GROUP BY of the population and joins in the engine; only codes
and counts cross into Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from duckanon.backends.base import Backend, BackendError
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import TEXT, VALUE, ColumnFacts, duckdb_sql, published_text, qcol, quoted
from duckanon.pipeline.histogram import code_alias, key_alias, qi_alias
from duckanon.pipeline.plan import Plan
from duckanon.solver.lattice import with_population
from duckanon.solver.models import rejects_unreached
from duckanon.sql.names import shown_name


@dataclass(frozen=True)
class PopulationClasses:
    """The population's distinct QI vectors as codes (values the sample lacks numbered after the
    sample's, in `extra_values` per column, in code order) and the rows (or weights) of each."""

    codes: np.ndarray
    rows: np.ndarray
    extra_values: list[list]
    # the temp tables it was counted in: the population grouped by the QI keys (k{j}, n), and per
    # column its keys' codes (k, code); the release's check reads them again
    grouped: str = ""
    maps: tuple = ()
    cells: str = ""  # the sample's cells table (its classes' codes), for the classes it does not reach

    @property
    def total(self) -> int:
        return int(self.rows.sum())


def _sample_types(backend: Backend, plan: Plan) -> list[str]:
    probe = exp.select(*[qcol(c) for c in plan.qi]).from_(plan.source.table.copy()).limit(0)
    return backend.column_types(probe)


def check_weights(backend: Backend, plan: Plan) -> None:
    """population_weight: every row's number of people is given (a NULL is no number: refused,
    the rows counted, never shown)."""
    if plan.population_weight is None:
        return
    named = f"population_weight column {plan.population_weight} of population table {shown_name(plan.statement.population)}"
    weight = quoted(plan.population_weight)
    (type_name,) = backend.column_types(exp.select(qcol(plan.population_weight)).from_(
        plan.population.table.copy()).limit(0))
    numeric = type_name.split("(")[0] in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                                          "UINTEGER", "UBIGINT", "UHUGEINT", "DECIMAL", "FLOAT", "DOUBLE")
    if not numeric:
        raise AnonymizeError(f"{named} is {type_name}: it must be a number type (the people each row counts)")
    nulls, fractions = backend.one(duckdb_sql(
        f"SELECT count(*) FILTER (WHERE {weight} IS NULL), "
        f"count(*) FILTER (WHERE {weight} <> floor({weight}) OR NOT isfinite(CAST({weight} AS DOUBLE))) "
        f"FROM {plan.population.sql()}"))
    for count, what in ((nulls, "is NULL"), (fractions, "is not a whole number")):
        if count:
            raise AnonymizeError(f"{named} {what} in {int(count)} row{'s' if count != 1 else ''}: every row needs its "
                                 "number of people")


def check_convertible(backend: Backend, plan: Plan, types: list[str]) -> None:
    """The population's QI columns are read as the sample's types: a column of another type whose
    values do not all convert is refused before it is read (the engine's own message would quote
    the value, and abort the transaction), naming the column, both types and the rows that fail."""
    own_types = backend.column_types(exp.select(*[qcol(c) for c in plan.population_qi]).from_(
        plan.population.table.copy()).limit(0))
    differing = [(c, own, wanted) for c, own, wanted in zip(plan.population_qi, own_types, types) if own != wanted]
    if not differing:
        return
    counts = ", ".join(f"count(*) FILTER (WHERE {quoted(c)} IS NOT NULL AND TRY_CAST({quoted(c)} AS {wanted}) IS NULL)"
                       for c, _, wanted in differing)
    failing = backend.one(duckdb_sql(f"SELECT {counts} FROM {plan.population.sql()}"))
    for (column, own, wanted), rows in zip(differing, failing):
        if rows:
            raise AnonymizeError(
                f"cannot read population table {shown_name(plan.statement.population)} with the sample's column "
                f"types: its column {column} ({own}) does not convert to the sample's {wanted} in {int(rows)} "
                f"row{'s' if rows != 1 else ''}")


def population_size(backend: Backend, plan: Plan) -> int:
    """The population table's rows (or the sum of its weights): N for the estimates."""
    check_weights(backend, plan)
    weight = "count(*)" if plan.population_weight is None else f"sum({quoted(plan.population_weight)})"
    (people,) = backend.one(duckdb_sql(f"SELECT coalesce({weight}, 0) FROM {plan.population.sql()}"))
    return int(people)


def population_classes(backend: Backend, plan: Plan, facts: ColumnFacts, cells_table: str, scratch) -> PopulationClasses:
    """The population table's classes in the codes of the cells table `cells_table` (its columns
    keyed as `facts` says); `scratch(kind)` names the temp tables (dropped with the statement's others)."""
    shown = shown_name(plan.statement.population)
    check_weights(backend, plan)
    types = _sample_types(backend, plan)
    check_convertible(backend, plan, types)
    population = plan.population.sql()
    weight = "count(*)" if plan.population_weight is None else f"sum({quoted(plan.population_weight)})"
    keys, values = [], []
    for j, (column, type_name) in enumerate(zip(plan.population_qi, types)):
        read = f"CAST({quoted(column)} AS {type_name})"
        kind = facts.kind(plan.qi[j])
        text = f"CAST({read} AS VARCHAR) COLLATE c"
        keys.append(f"{read if kind == VALUE else text} AS k{j}")
        values.append(f"any_value({text if kind == TEXT else read}) AS v{j}")
    grouped = scratch("population")
    try:
        backend.create_temp(grouped, duckdb_sql(
            f"SELECT {', '.join(keys)}, {', '.join(values)}, {weight} AS n FROM {population} "
            f"GROUP BY {', '.join(str(j + 1) for j in range(len(keys)))}"))
    except BackendError:  # (the engine's message would quote a value: check_convertible said what it can)
        raise AnonymizeError(f"cannot read population table {shown} with the sample's column types") from None
    cells = quoted(cells_table)
    maps, extra_values = [], []
    for j, column in enumerate(plan.qi):
        sample_key = qi_alias(j) if facts.kind(column) == VALUE else key_alias(j)
        code = code_alias(j)
        (count,) = backend.one(duckdb_sql(f"SELECT count(DISTINCT {quoted(code)}) FROM {cells}"))
        mapping = scratch(f"population_map{j}")
        backend.create_temp(mapping, duckdb_sql(
            f"WITH s AS (SELECT DISTINCT {quoted(sample_key)} AS k, {quoted(code)} AS code FROM {cells}), "
            f"p AS (SELECT k{j} AS k, any_value(v{j}) AS v FROM {quoted(grouped)} GROUP BY 1), "
            f"new AS (SELECT p.k, p.v FROM p ANTI JOIN s ON p.k IS NOT DISTINCT FROM s.k) "
            f"SELECT k, code, FALSE AS added, NULL AS v FROM s UNION ALL "
            f"SELECT k, {int(count)} + row_number() OVER (ORDER BY k) - 1, TRUE, v FROM new"))
        extra = backend.rows(duckdb_sql(f"SELECT v FROM {quoted(mapping)} WHERE added ORDER BY code"))
        extra_values.append([row[0] for row in extra])
        maps.append(mapping)
    joins = " ".join(f"JOIN {quoted(m)} AS m{j} ON g.k{j} IS NOT DISTINCT FROM m{j}.k" for j, m in enumerate(maps))
    codes = ", ".join(f"m{j}.code" for j in range(len(maps)))
    arrow = backend.arrow(duckdb_sql(f"SELECT {codes}, sum(g.n) FROM {quoted(grouped)} AS g {joins} "
                                  f"GROUP BY {', '.join(str(j + 1) for j in range(len(maps)))}"))
    m = len(plan.qi)
    if arrow.num_rows:
        vectors = np.column_stack([arrow.column(j).to_numpy() for j in range(m)]).astype(np.int64)
        rows = arrow.column(m).to_numpy().astype(np.int64)
    else:
        vectors, rows = np.zeros((0, m), np.int64), np.zeros(0, np.int64)
    if (rows < 0).any():
        raise AnonymizeError(f"population_weight of population table {shown} is negative for some rows")
    return PopulationClasses(vectors, rows, extra_values, grouped, tuple(maps), cells_table)


def bind_with_population(parsed, values: list, sample_values: int, plan: Plan, j: int):
    """QI j's hierarchy bound to the sample's values and then the population's (`values`: the
    sample's first `sample_values`). A value the hierarchy lacks is blamed on the table that has
    it: the sample's by the sample's message, else the population table's, with a query that
    lists them from the population table (never the values)."""
    column = plan.qi[j]
    try:
        return parsed.bind(values, column=column, source=plan.source_shown)
    except AnonymizeError:
        if sample_values == len(values):
            raise
        parsed.bind(values[:sample_values], column=column, source=plan.source_shown)  # the sample's own, if any
    shown = shown_name(plan.population)
    try:
        parsed.bind(values, column=plan.population_qi[j], source=shown)
    except AnonymizeError as error:
        raise AnonymizeError(f"population table {shown}: {error}") from None
    raise AnonymizeError(f"internal error: the hierarchy of column {column} could not be bound")


def check_contained(hist, population: PopulationClasses, shown: str) -> None:
    """delta_presence: the sample must be drawn from the population, so every sample class has at
    least as many population rows with its values as it has rows (counted, never quoted)."""
    _, counts = with_population(hist, (population.codes, population.rows), None)
    short = int((counts[:hist.n_classes] < hist.sizes).sum())
    if short:
        raise AnonymizeError(f"delta_presence needs the sample to be contained in the population: {short} of its "
                             f"{hist.n_classes} classes have more rows than population table {shown} has with "
                             "their values")


def published_matches(backend: Backend, plan: Plan, facts: ColumnFacts, population: PopulationClasses, hierarchies,
                      levels, scratch) -> tuple[np.ndarray, tuple[int, int]]:
    """Per published class of the target (as written): its rows and the population rows whose
    values generalize to its labels, counted in the engine: the published table grouped by its QI
    texts, joined to the population grouped by the labels of the node's `levels` (each
    hierarchy's label of the value's code; the value's text at level 0). (C, 2) integers, and the
    population's classes under those labels that no published class matches, with their rows."""
    published, labels, label_joins, registered = [], [], [], []
    for j, (column, level) in enumerate(zip(plan.qi, levels)):
        published.append(f"CAST({quoted(column)} AS VARCHAR) AS l{j}")
        if level == 0:
            # the text the sample's value of this key is published as (a TIMESTAMPTZ's UTC instant)
            key = exp.column(f"k{j}", table="g", quoted=True)
            text = published_text(facts, column, key) if facts.kind(column) == VALUE else exp.cast(key, "VARCHAR")
            labels.append(f"{text.sql('duckdb')} AS l{j}")
            continue
        bound = hierarchies[j]
        names = bound.labels[level]
        table = scratch(f"population_labels{j}")
        registered.append(table)
        backend.register_arrow(table, pa.table({
            "code": pa.array(np.arange(len(bound.codes)), pa.int64()),
            "label": pa.array([names[c] for c in bound.codes[:, level].tolist()], pa.string())}))
        labels.append(f"t{j}.label AS l{j}")
        label_joins.append(f"JOIN {quoted(table)} AS t{j} ON t{j}.code = m{j}.code")
    joins = " ".join([f"JOIN {quoted(m)} AS m{j} ON g.k{j} IS NOT DISTINCT FROM m{j}.k"
                      for j, m in enumerate(population.maps)] + label_joins)
    on = " AND ".join(f"pub.l{j} IS NOT DISTINCT FROM pop.l{j}" for j in range(len(plan.qi)))
    groups = ", ".join(str(j + 1) for j in range(len(plan.qi)))
    with_sql = (f"WITH pub AS (SELECT {', '.join(published)}, count(*) AS n FROM {plan.target.sql()} "
                f"GROUP BY {groups}), "
                f"pop AS (SELECT {', '.join(labels)}, sum(g.n) AS p FROM {quoted(population.grouped)} AS g {joins} "
                f"GROUP BY {groups}) ")
    try:
        rows = backend.rows(duckdb_sql(with_sql + f"SELECT pub.n, coalesce(pop.p, 0) FROM pub LEFT JOIN pop ON {on}"))
        unpublished = backend.one(duckdb_sql(with_sql + "SELECT count(*), coalesce(sum(p), 0) FROM pop "
                                             f"ANTI JOIN pub ON {on} WHERE p > 0"))
    finally:
        for table in registered:
            backend.unregister(table)
    return np.array(rows, dtype=np.int64).reshape(-1, 2), (int(unpublished[0]), int(unpublished[1]))


def population_only(backend: Backend, plan: Plan, population: PopulationClasses, hierarchies, levels,
                    scratch) -> tuple[int, int]:
    """The population's classes at the node's `levels` that no sample row reaches (no class of
    the sample, published or suppressed, generalizes to them), and their rows (people), counted
    in the engine: the population grouped by each value's generalized code, anti-joined with the
    sample's cells grouped the same way."""
    registered, pop_joins, cell_joins = [], [], []
    for j, level in enumerate(levels):
        table = scratch(f"population_level{j}")
        registered.append(table)
        codes = np.asarray(hierarchies[j].codes)
        backend.register_arrow(table, pa.table({"code": pa.array(np.arange(len(codes)), pa.int64()),
                                                "g": pa.array(codes[:, level].astype(np.int64), pa.int64())}))
        pop_joins.append(f"JOIN {quoted(population.maps[j])} AS m{j} ON g.k{j} IS NOT DISTINCT FROM m{j}.k "
                         f"JOIN {quoted(table)} AS t{j} ON t{j}.code = m{j}.code")
        cell_joins.append(f"JOIN {quoted(table)} AS t{j} ON t{j}.code = c.{quoted(code_alias(j))}")
    generalized = ", ".join(f"t{j}.g AS g{j}" for j in range(len(levels)))
    groups = ", ".join(str(j + 1) for j in range(len(levels)))
    on = " AND ".join(f"pop.g{j} = sam.g{j}" for j in range(len(levels)))
    query = duckdb_sql(
        f"WITH pop AS (SELECT {generalized}, sum(g.n) AS p FROM {quoted(population.grouped)} AS g "
        f"{' '.join(pop_joins)} GROUP BY {groups}), "
        f"sam AS (SELECT DISTINCT {generalized} FROM {quoted(population.cells)} AS c {' '.join(cell_joins)}) "
        f"SELECT count(*), coalesce(sum(p), 0) FROM pop ANTI JOIN sam ON {on} WHERE p > 0")
    try:
        classes, people = backend.one(query)
    finally:
        for table in registered:
            backend.unregister(table)
    return int(classes), int(people)


def check_release(backend: Backend, plan: Plan, facts: ColumnFacts, models, population: PopulationClasses, solution,
                  hierarchies, scratch) -> dict:
    """Before COMMIT: every published class of the target meets the population models, counted
    from the published table and the population table (published_matches); what was found, for
    the result's details. A violation is a bug, never published: nothing is written."""
    matches, unpublished = published_matches(backend, plan, facts, population, hierarchies, solution.notes["levels"],
                                             scratch)
    sizes, counts = matches[:, 0], matches[:, 1]
    for model in models:
        if model.needs_population and not model.satisfied_in(sizes, counts).all():
            raise AnonymizeError(f"internal error: the published table has a class that violates {model} against "
                                 "the population table; nothing was published")
    found = {"population_rows": population.total, "classes_checked": int(len(sizes))}
    # the population's classes that no sample row reaches; delta-presence with dmin > 0 rejects
    # them unless a model sets a minimal class size, under which they count as suppressed (ARX)
    classes, people = population_only(backend, plan, population, hierarchies, solution.notes["levels"], scratch)
    if classes and rejects_unreached(models):
        raise AnonymizeError("internal error: the population table has classes that no published or suppressed "
                             "row reaches, which delta-presence rejects; nothing was published")
    found["population_only_classes"], found["population_only_rows"] = classes, people
    # the population's classes no published class reaches (these, and those whose sample rows
    # were suppressed): what a check of the published table with its labels counts
    found["unpublished_classes"], found["unpublished_rows"] = unpublished
    if len(sizes):
        found["k_map_level"] = int(counts.min())
        shares = sizes / np.maximum(counts, 1)
        found["delta_presence_range"] = [round(float(shares.min()), 6), round(float(shares.max()), 6)]
    return found
