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
from duckanon.pipeline.arrays import int_column
from duckanon.pipeline.columns import TEXT, VALUE, ColumnFacts, published_text, qcol
from duckanon.pipeline.histogram import code_alias, key_alias, qi_alias
from duckanon.pipeline.plan import Plan
from duckanon.solver.lattice import with_population
from duckanon.solver.models import rejects_unreached
from duckanon.names import shown_name


def _table(name: str, alias: str | None = None) -> exp.Table:
    """A temp table of the statement, by its quoted name."""
    table = exp.to_table(name, quoted=True)
    return table.as_(alias, quoted=True) if alias else table


def _count_where(condition: exp.Expr) -> exp.Expr:
    """count(*) FILTER (WHERE condition)."""
    return exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=condition))


def _type(type_name: str) -> exp.DataType:
    return exp.DataType.build(type_name, dialect="duckdb", udt=True)


def _positions(count: int) -> list[exp.Literal]:
    """GROUP BY 1, 2, ...: the first `count` columns of the SELECT."""
    return [exp.Literal.number(j + 1) for j in range(count)]


def _not_distinct(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.NullSafeEQ(this=left, expression=right)


def _weight(plan: Plan) -> exp.Expr:
    """The people a group of population rows counts: its rows, or the sum of their weights."""
    if plan.population_weight is None:
        return exp.Count(this=exp.Star())
    return exp.func("sum", qcol(plan.population_weight))


def _with(select: exp.Query, **ctes: exp.Query) -> exp.Query:
    for name, query in ctes.items():
        select = select.with_(exp.to_identifier(name, quoted=True), as_=query, copy=False)
    return select


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
    weight = qcol(plan.population_weight)
    (type_name,) = backend.column_types(exp.select(qcol(plan.population_weight)).from_(
        plan.population.table.copy()).limit(0))
    numeric = type_name.split("(")[0] in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                                          "UINTEGER", "UBIGINT", "UHUGEINT", "DECIMAL", "FLOAT", "DOUBLE")
    if not numeric:
        raise AnonymizeError(f"{named} is {type_name}: it must be a number type (the people each row counts)")
    fraction = exp.or_(exp.NEQ(this=weight.copy(), expression=exp.func("floor", weight.copy())),
                       exp.not_(exp.func("isfinite", exp.cast(weight.copy(), "DOUBLE"), dialect="duckdb")))
    nulls, fractions = backend.one(exp.select(_count_where(exp.Is(this=weight.copy(), expression=exp.Null())),
                                              _count_where(fraction)).from_(plan.population.table.copy()))
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
    counts = [_count_where(exp.and_(exp.not_(exp.Is(this=qcol(c), expression=exp.Null())),
                                    exp.Is(this=exp.TryCast(this=qcol(c), to=_type(wanted)), expression=exp.Null())))
              for c, _, wanted in differing]
    failing = backend.one(exp.select(*counts).from_(plan.population.table.copy()))
    for (column, own, wanted), rows in zip(differing, failing):
        if rows:
            raise AnonymizeError(
                f"cannot read population table {shown_name(plan.statement.population)} with the sample's column "
                f"types: its column {column} ({own}) does not convert to the sample's {wanted} in {int(rows)} "
                f"row{'s' if rows != 1 else ''}")


def population_size(backend: Backend, plan: Plan) -> int:
    """The population table's rows (or the sum of its weights): N for the estimates."""
    check_weights(backend, plan)
    (people,) = backend.one(exp.select(exp.func("coalesce", _weight(plan), exp.Literal.number(0))).from_(
        plan.population.table.copy()))
    return int(people)


def _grouped_select(plan: Plan, facts: ColumnFacts, types: list[str]) -> exp.Select:
    """The population grouped by its QI keys read as the sample's types (k{j}: the value, or its
    text where the sample's classes are told apart by text), one value of each (v{j}), and n."""
    keys, values = [], []
    for j, (column, type_name) in enumerate(zip(plan.population_qi, types)):
        read = exp.cast(qcol(column), _type(type_name))
        kind = facts.kind(plan.qi[j])
        text = exp.Collate(this=exp.cast(read.copy(), "VARCHAR"), expression=exp.Var(this="c"))
        keys.append(exp.alias_(read if kind == VALUE else text, f"k{j}", quoted=True))
        values.append(exp.alias_(exp.func("any_value", text.copy() if kind == TEXT else read.copy()), f"v{j}",
                                 quoted=True))
    return (exp.select(*keys, *values, exp.alias_(_weight(plan), "n", quoted=True))
            .from_(plan.population.table.copy()).group_by(*_positions(len(keys))))


def _code_map_select(plan: Plan, facts: ColumnFacts, j: int, cells_table: str, grouped: str, sample_codes: int) -> exp.Query:
    """Per key of QI j, its code: the sample's (from the cells table), and for the keys only the
    population has, codes after the sample's `sample_codes` in the keys' order (added, with a value)."""
    sample_key = qi_alias(j) if facts.kind(plan.qi[j]) == VALUE else key_alias(j)
    k, code, v = (exp.column(name, quoted=True) for name in ("k", "code", "v"))
    sample = exp.select(exp.alias_(qcol(sample_key), "k", quoted=True), exp.alias_(qcol(code_alias(j)), "code",
                                                                                   quoted=True)).distinct().from_(
        _table(cells_table))
    population = (exp.select(exp.alias_(qcol(f"k{j}"), "k", quoted=True),
                             exp.alias_(exp.func("any_value", qcol(f"v{j}")), "v", quoted=True))
                  .from_(_table(grouped)).group_by(exp.Literal.number(1)))
    new = exp.select(qcol("k", "p"), qcol("v", "p")).from_(_table("p")).join(
        _table("s"), join_type="ANTI", on=_not_distinct(qcol("k", "p"), qcol("k", "s")))
    numbered = exp.Sub(this=exp.Add(this=exp.Literal.number(sample_codes), expression=exp.Window(
        this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=k.copy())]))),
        expression=exp.Literal.number(1))
    union = exp.union(
        exp.select(k.copy(), code, exp.alias_(exp.false(), "added", quoted=True),
                   exp.alias_(exp.Null(), "v", quoted=True)).from_(_table("s")),
        exp.select(k.copy(), numbered, exp.true(), v).from_(_table("new")), distinct=False)
    return _with(union, s=sample, p=population, new=new)


def population_classes(backend: Backend, plan: Plan, facts: ColumnFacts, cells_table: str, scratch) -> PopulationClasses:
    """The population table's classes in the codes of the cells table `cells_table` (its columns
    keyed as `facts` says); `scratch(kind)` names the temp tables (dropped with the statement's others)."""

    shown = shown_name(plan.statement.population)
    check_weights(backend, plan)
    types = _sample_types(backend, plan)
    check_convertible(backend, plan, types)
    grouped = scratch("population")
    try:
        backend.create_temp(grouped, _grouped_select(plan, facts, types))
    except BackendError:  # (the engine's message would quote a value: check_convertible said what it can)
        raise AnonymizeError(f"cannot read population table {shown} with the sample's column types") from None
    maps, extra_values = [], []
    for j in range(len(plan.qi)):
        (count,) = backend.one(exp.select(exp.Count(this=exp.Distinct(expressions=[qcol(code_alias(j))]))).from_(
            _table(cells_table)))
        mapping = scratch(f"population_map{j}")
        backend.create_temp(mapping, _code_map_select(plan, facts, j, cells_table, grouped, int(count)))
        extra = backend.rows(exp.select(qcol("v")).from_(_table(mapping)).where(qcol("added")).order_by(qcol("code")))
        extra_values.append([row[0] for row in extra])
        maps.append(mapping)
    classes = exp.select(*[qcol("code", f"m{j}") for j in range(len(maps))],
                         exp.func("sum", qcol("n", "g"))).from_(_table(grouped, "g"))
    for j, mapping in enumerate(maps):
        classes = classes.join(_table(mapping, f"m{j}"), on=_not_distinct(qcol(f"k{j}", "g"), qcol("k", f"m{j}")))
    arrow = backend.arrow(classes.group_by(*_positions(len(maps))))
    m = len(plan.qi)
    if arrow.num_rows:
        vectors = np.column_stack([int_column(arrow.column(j)) for j in range(m)])
        rows = int_column(arrow.column(m))
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


def _population_joins(select: exp.Select, population: PopulationClasses) -> exp.Select:
    """The grouped population (g) joined to each QI's code map (m{j})."""
    for j, mapping in enumerate(population.maps):
        select = select.join(_table(mapping, f"m{j}"), on=_not_distinct(qcol(f"k{j}", "g"), qcol("k", f"m{j}")))
    return select


def _register_labels(backend: Backend, table: str, bound, level: int) -> None:
    """The hierarchy's label at `level` of each value code, as a table (code, label)."""
    names = bound.labels[level]
    backend.register_arrow(table, pa.table({
        "code": pa.array(np.arange(len(bound.codes)), pa.int64()),
        "label": pa.array([names[c] for c in bound.codes[:, level].tolist()], pa.string())}))


def published_matches(backend: Backend, plan: Plan, facts: ColumnFacts, population: PopulationClasses, hierarchies,
                      levels, scratch) -> tuple[np.ndarray, tuple[int, int]]:
    """Per published class of the target (as written): its rows and the population rows whose
    values generalize to its labels, counted in the engine: the published table grouped by its QI
    texts, joined to the population grouped by the labels of the node's `levels` (each
    hierarchy's label of the value's code; the value's text at level 0). (C, 2) integers, and the
    population's classes under those labels that no published class matches, with their rows."""
    published, labels, registered = [], [], {}
    for j, (column, level) in enumerate(zip(plan.qi, levels)):
        published.append(exp.alias_(exp.cast(qcol(column), "VARCHAR"), f"l{j}", quoted=True))
        if level == 0:
            # the text the sample's value of this key is published as (a TIMESTAMPTZ's UTC instant)
            key = qcol(f"k{j}", "g")
            text = published_text(facts, column, key) if facts.kind(column) == VALUE else exp.cast(key, "VARCHAR")
            labels.append(exp.alias_(text, f"l{j}", quoted=True))
            continue
        table = scratch(f"population_labels{j}")
        _register_labels(backend, table, hierarchies[j], level)
        registered[j] = table
        labels.append(exp.alias_(qcol("label", f"t{j}"), f"l{j}", quoted=True))
    groups = _positions(len(plan.qi))
    pub = exp.select(*published, exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True)).from_(
        plan.target.table.copy()).group_by(*groups)
    pop = _population_joins(exp.select(*labels, exp.alias_(exp.func("sum", qcol("n", "g")), "p", quoted=True))
                            .from_(_table(population.grouped, "g")), population)
    for j, table in registered.items():
        pop = pop.join(_table(table, f"t{j}"), on=exp.EQ(this=qcol("code", f"t{j}"), expression=qcol("code", f"m{j}")))
    pop = pop.group_by(*[g.copy() for g in groups])
    on = exp.and_(*[_not_distinct(qcol(f"l{j}", "pub"), qcol(f"l{j}", "pop")) for j in range(len(plan.qi))])
    matched = exp.select(qcol("n", "pub"), exp.func("coalesce", qcol("p", "pop"), exp.Literal.number(0))).from_(
        _table("pub")).join(_table("pop"), join_type="LEFT", on=on)
    unmatched = (exp.select(exp.Count(this=exp.Star()), exp.func("coalesce", exp.func("sum", qcol("p", "pop")),
                                                                 exp.Literal.number(0)))
                 .from_(_table("pop")).join(_table("pub"), join_type="ANTI", on=on.copy())
                 .where(exp.GT(this=qcol("p", "pop"), expression=exp.Literal.number(0))))
    try:
        rows = backend.rows(_with(matched, pub=pub, pop=pop))
        unpublished = backend.one(_with(unmatched, pub=pub.copy(), pop=pop.copy()))
    finally:
        for table in registered.values():
            backend.unregister(table)
    return np.array(rows, dtype=np.int64).reshape(-1, 2), (int(unpublished[0]), int(unpublished[1]))


def population_only(backend: Backend, plan: Plan, population: PopulationClasses, hierarchies, levels,
                    scratch) -> tuple[int, int]:
    """The population's classes at the node's `levels` that no sample row reaches (no class of
    the sample, published or suppressed, generalizes to them), and their rows (people), counted
    in the engine: the population grouped by each value's generalized code, anti-joined with the
    sample's cells grouped the same way."""
    registered = []
    for j, level in enumerate(levels):
        table = scratch(f"population_level{j}")
        registered.append(table)
        codes = np.asarray(hierarchies[j].codes)
        backend.register_arrow(table, pa.table({"code": pa.array(np.arange(len(codes)), pa.int64()),
                                                "g": pa.array(codes[:, level].astype(np.int64), pa.int64())}))

    def generalized():
        return [exp.alias_(qcol("g", f"t{j}"), f"g{j}", quoted=True) for j in range(len(levels))]

    pop = _population_joins(exp.select(*generalized(), exp.alias_(exp.func("sum", qcol("n", "g")), "p", quoted=True))
                            .from_(_table(population.grouped, "g")), population)
    sam = exp.select(*generalized()).distinct().from_(_table(population.cells, "c"))
    for j, table in enumerate(registered):
        pop = pop.join(_table(table, f"t{j}"), on=exp.EQ(this=qcol("code", f"t{j}"), expression=qcol("code", f"m{j}")))
        sam = sam.join(_table(table, f"t{j}"), on=exp.EQ(this=qcol("code", f"t{j}"),
                                                         expression=qcol(code_alias(j), "c")))
    pop = pop.group_by(*_positions(len(levels)))
    on = exp.and_(*[exp.EQ(this=qcol(f"g{j}", "pop"), expression=qcol(f"g{j}", "sam")) for j in range(len(levels))])
    query = (exp.select(exp.Count(this=exp.Star()), exp.func("coalesce", exp.func("sum", qcol("p", "pop")),
                                                             exp.Literal.number(0)))
             .from_(_table("pop")).join(_table("sam"), join_type="ANTI", on=on)
             .where(exp.GT(this=qcol("p", "pop"), expression=exp.Literal.number(0))))
    try:
        classes, people = backend.one(_with(query, pop=pop, sam=sam))
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
