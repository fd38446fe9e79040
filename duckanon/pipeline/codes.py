"""The cells' dictionary codes: per QI column, the dense rank of its value in the column's order.

A narrow table gets them from one DENSE_RANK window per column over the cells. A wide one does
not: DuckDB's window operator carries every column of its input through the sort of each
distinct ORDER BY, so m windows over a table of m columns cost m^2 x cells (200 QIs at 30,000
cells: 44 s; 1,000,000 cells of 30 QIs: 34 s on a busy machine). There each column gets a small
dictionary instead (its distinct values and their dense rank: the window's codes, ties and NULLs
last alike, since both are the same DENSE_RANK over the same ORDER BY), joined to the cells on
its values (IS NOT DISTINCT FROM: NULL is a value with a code). At most JOIN_BATCH dictionaries
go into one query (the optimizer orders a join of 200 relations slowly: 30 s at 30,000 cells);
more are joined in batches over the cell id and the batch's columns only, and the batches then
joined on the cell id (1,000,000 x 30: 2.3 s in one query; 200 columns in batches: 3.5 s at 30,000).
A dictionary's codes are stored in the narrowest integer type that holds its size: the cells
table of 10,000,000 cells x 50 QIs holds 500 MB of TINYINT codes where BIGINTs took 4 GB.

A backend that says `codes_by_lookup` (Spark) gets its dictionaries another way: Spark's analyzer
re-resolves a cached temp view's plan at every reference, and each of 200 dictionary views carries
the plan of the 200-column cells (a UNION ALL of their 200 counts stalled for minutes at 2,000
cells; issue 40). There ONE query makes every column's dictionary at once, as one row of sorted
arrays (each column's distinct values, sorted by the engine's own ordering: the same order
DENSE_RANK sees), kept as one cached table; a code is then the value's position in its array,
looked up in one more query over the cells (no join but a cross join with that one row). NULL
gets the code after the last value (collect_set leaves it out: NULL last, as in the windows); an
order of several columns is one array of structs (each column behind its IS NULL flag, so NULLs
sort last there too). The lookup is a linear search, so a column of more than LOOKUP_UP_TO values
keeps its dictionary table and join (few columns of a wide table have that many).
"""

from __future__ import annotations

from sqlglot import exp

import numpy as np

from duckanon.backends.base import Backend
from duckanon.pipeline.columns import qcol

# Up to this many coded columns, the windows (one query, no dictionary tables).
WINDOW_CODES_UP_TO = 8
# At most this many dictionaries joined in one query.
JOIN_BATCH = 32
# codes_by_lookup: columns of at most this many codes are looked up in their sorted array (a
# linear search per cell), larger ones joined to a dictionary table.
LOOKUP_UP_TO = 256


# Signed integer types by width, (numpy, SQL): every engine has these (Spark has no unsigned ones).
INTEGER_TYPES = ((np.int8, "TINYINT"), (np.int16, "SMALLINT"), (np.int32, "INT"), (np.int64, "BIGINT"))


def narrowest_integer(largest: int) -> tuple[type, str]:
    """The (numpy, SQL) signed integer type of fewest bytes that holds 0..largest."""
    return next(t for t in INTEGER_TYPES if largest <= np.iinfo(t[0]).max)


def ascending(column: str) -> exp.Ordered:
    # NULL last, spelled out: engines differ in their default (DuckDB last, Spark first)
    return exp.Ordered(this=qcol(column), desc=False, nulls_first=False)


def dense_code(*columns: str) -> exp.Expr:
    """0, 1, 2, ... in the order of `columns` (ties: one code)."""
    window = exp.Window(this=exp.Anonymous(this="DENSE_RANK"), order=exp.Order(expressions=[ascending(c) for c in columns]))
    return exp.Sub(this=window, expression=exp.Literal.number(1))


def create_coded(backend: Backend, table: str, uncoded: exp.Select, orders: list[list[str]], codes: list[str],
                 row_id: str) -> None:
    """Create the temp table `table`: the rows of `uncoded` (each with the unique `row_id`) and,
    per i, the column `codes[i]`, the dense code of the columns `orders[i]` (module docstring)."""
    if len(orders) <= WINDOW_CODES_UP_TO:
        windows = [exp.alias_(dense_code(*order), code, quoted=True) for order, code in zip(orders, codes)]
        backend.create_temp(table, exp.select(exp.Star(), *windows).from_(uncoded.subquery("u")))
        return
    base = f"{table}_uncoded"
    backend.create_temp(base, uncoded)
    if backend.codes_by_lookup:
        _create_looked_up(backend, table, base, orders, codes, row_id)
    else:
        _create_joined(backend, table, base, range(len(orders)), orders, codes, row_id)


def _create_joined(backend: Backend, table: str, base: str, columns: range | list[int], orders, codes,
                   row_id: str, known_sizes: dict[int, int] | None = None) -> None:
    """`table`: the rows of the temp table `base` and the codes of the orders `columns`, each from
    a dictionary table of its own joined to the rows (module docstring); `known_sizes`: each
    dictionary's size where the caller has it (else counted)."""
    dictionaries = {}
    for i in columns:
        order = orders[i]
        values = exp.select(*[qcol(c) for c in order]).distinct().from_(exp.to_table(base, quoted=True))
        dictionaries[i] = f"{table}_d{i}"
        backend.create_temp(dictionaries[i], exp.select(*[qcol(c) for c in order], exp.alias_(dense_code(*order), codes[i], quoted=True))
                            .from_(values.subquery("v")))
    sizes = ([known_sizes[i] for i in dictionaries] if known_sizes is not None
             else _row_counts(backend, list(dictionaries.values())))
    widths = {i: narrowest_integer(max(0, size - 1))[1] for i, size in zip(dictionaries, sizes)}
    columns = list(columns)
    batches = [columns[start:start + JOIN_BATCH] for start in range(0, len(columns), JOIN_BATCH)]
    temps = [base, *dictionaries.values()]
    if len(batches) == 1:
        backend.create_temp(table, _joined(base, None, batches[0], orders, codes, dictionaries, widths))
    else:
        parts = []
        for b, batch in enumerate(batches):
            parts.append(f"{table}_b{b}")
            backend.create_temp(parts[-1], _joined(base, row_id, batch, orders, codes, dictionaries, widths))
        select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("u")),
                            *[qcol(codes[i], f"b{b}") for b, batch in enumerate(batches) for i in batch])
        select = select.from_(exp.alias_(exp.to_table(base, quoted=True), "u", table=True))
        for b, part in enumerate(parts):
            select = select.join(exp.alias_(exp.to_table(part, quoted=True), f"b{b}", table=True),
                                 on=exp.EQ(this=qcol(row_id, "u"), expression=qcol(row_id, f"b{b}")), copy=False)
        backend.create_temp(table, select)
        temps += parts
    backend.drop_inputs(*temps)


def _lookup_key(order: list[str], table: str | None) -> exp.Expr:
    """What QI's array holds: the value of a one-column order; for several columns a struct of
    each column behind its IS NULL flag (false sorts first: NULL last, as in the windows)."""
    if len(order) == 1:
        return qcol(order[0], table)
    fields = []
    for n, column in enumerate(order):
        fields += [exp.PropertyEQ(this=exp.to_identifier(f"n{n}"), expression=exp.Is(this=qcol(column, table), expression=exp.Null())),
                   exp.PropertyEQ(this=exp.to_identifier(f"v{n}"), expression=qcol(column, table))]
    return exp.Struct(expressions=fields)


def _create_looked_up(backend: Backend, table: str, base: str, orders, codes, row_id: str) -> None:
    """`table`: the rows of `base` and every order's code, looked up in one row of sorted arrays
    (the codes_by_lookup part of the module docstring)."""
    arrays = f"{table}_arrays"
    one = exp.Literal.number(1)
    backend.create_temp(arrays, exp.select(*[
        item for i, order in enumerate(orders) for item in (
            exp.alias_(exp.ArraySort(this=exp.ArrayUniqueAgg(this=_lookup_key(order, None))), f"a{i}", quoted=True),
            # a NULL of a one-column order has a code (the last) that its array leaves out
            exp.alias_(exp.Max(this=exp.If(this=exp.Is(this=qcol(order[0]), expression=exp.Null()), true=one,
                                           false=exp.Literal.number(0))) if len(order) == 1 else exp.Literal.number(0),
                       f"n{i}", quoted=True))]).from_(exp.to_table(base, quoted=True)))
    sizes = backend.one(exp.select(*[exp.Add(this=exp.ArraySize(this=qcol(f"a{i}")), expression=qcol(f"n{i}"))
                                     for i in range(len(orders))]).from_(exp.to_table(arrays, quoted=True)))
    sizes = [int(size) for size in sizes]
    looked = [i for i, size in enumerate(sizes) if size <= LOOKUP_UP_TO]
    joined = [i for i, size in enumerate(sizes) if size > LOOKUP_UP_TO]

    def code(i: int) -> exp.Expr:
        position = exp.Sub(this=exp.ArrayPosition(this=qcol(f"a{i}", "d"), expression=_lookup_key(orders[i], "u")),
                           expression=one)
        if len(orders[i]) == 1:  # NULL is in no array: its position is NULL, its code the array's size
            position = exp.Coalesce(this=position, expressions=[exp.ArraySize(this=qcol(f"a{i}", "d"))])
        width = narrowest_integer(max(0, sizes[i] - 1))[1]
        return exp.alias_(exp.cast(position, exp.DataType.build(width)), codes[i], quoted=True)

    coded = table if not joined else f"{table}_looked"
    select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("u")), *[code(i) for i in looked])
    select = select.from_(exp.alias_(exp.to_table(base, quoted=True), "u", table=True))
    select = select.join(exp.alias_(exp.to_table(arrays, quoted=True), "d", table=True), join_type="CROSS", copy=False)
    backend.create_temp(coded, select)
    if joined:
        _create_joined(backend, table, coded, joined, orders, codes, row_id, dict(enumerate(sizes)))
    backend.drop_inputs(base, arrays)


def _row_counts(backend: Backend, tables: list[str]) -> list[int]:
    """The row count of each table, in one query (a UNION ALL of the counts): on Spark each query
    is a job of its own, and 200 dictionaries' counts one by one were 200 jobs."""
    counts = [exp.select(exp.alias_(exp.Literal.number(i), "i", quoted=True),
                         exp.alias_(exp.func("count", exp.Star()), "n", quoted=True)).from_(exp.to_table(name, quoted=True))
              for i, name in enumerate(tables)]
    union = counts[0] if len(counts) == 1 else exp.union(*counts, distinct=False) if counts else None
    found = dict(backend.rows(union)) if counts else {}
    return [int(found[i]) for i in range(len(tables))]


def _joined(base: str, row_id: str | None, batch: list[int], orders, codes, dictionaries: dict[int, str],
            widths: dict[int, str]) -> exp.Select:
    """SELECT <the cells u: every column, or the row id alone>, <the batch's codes, each in the
    SQL type `widths[i]`> FROM u JOIN each of the batch's dictionaries."""
    taken = exp.Column(this=exp.Star(), table=exp.to_identifier("u")) if row_id is None else qcol(row_id, "u")
    narrow = [exp.alias_(exp.cast(qcol(codes[i], f"d{i}"), exp.DataType.build(widths[i])), codes[i], quoted=True)
              for i in batch]
    select = exp.select(taken, *narrow)
    select = select.from_(exp.alias_(exp.to_table(base, quoted=True), "u", table=True))
    for i in batch:
        on = exp.and_(*[exp.NullSafeEQ(this=qcol(c, "u"), expression=qcol(c, f"d{i}")) for c in orders[i]])
        select = select.join(exp.alias_(exp.to_table(dictionaries[i], quoted=True), f"d{i}", table=True), on=on, copy=False)
    return select
