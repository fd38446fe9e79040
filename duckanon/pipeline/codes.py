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
    temps = [base]
    for i, (order, code) in enumerate(zip(orders, codes)):
        values = exp.select(*[qcol(c) for c in order]).distinct().from_(exp.to_table(base, quoted=True))
        temps.append(f"{table}_d{i}")
        backend.create_temp(temps[-1], exp.select(*[qcol(c) for c in order], exp.alias_(dense_code(*order), code, quoted=True))
                            .from_(values.subquery("v")))
    widths = [narrowest_integer(max(0, size - 1))[1] for size in _row_counts(backend, temps[1:])]
    batches = [range(start, min(len(orders), start + JOIN_BATCH)) for start in range(0, len(orders), JOIN_BATCH)]
    if len(batches) == 1:
        backend.create_temp(table, _joined(base, None, batches[0], orders, codes, temps, widths))
    else:
        parts = []
        for b, batch in enumerate(batches):
            parts.append(f"{table}_b{b}")
            backend.create_temp(parts[-1], _joined(base, row_id, batch, orders, codes, temps, widths))
        select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("u")),
                            *[qcol(codes[i], f"b{b}") for b, batch in enumerate(batches) for i in batch])
        select = select.from_(exp.alias_(exp.to_table(base, quoted=True), "u", table=True))
        for b, part in enumerate(parts):
            select = select.join(exp.alias_(exp.to_table(part, quoted=True), f"b{b}", table=True),
                                 on=exp.EQ(this=qcol(row_id, "u"), expression=qcol(row_id, f"b{b}")), copy=False)
        backend.create_temp(table, select)
        temps += parts
    backend.drop_inputs(*temps)


def _row_counts(backend: Backend, tables: list[str]) -> list[int]:
    """The row count of each table, in one query (a UNION ALL of the counts): on Spark each query
    is a job of its own, and 200 dictionaries' counts one by one were 200 jobs."""
    counts = [exp.select(exp.alias_(exp.Literal.number(i), "i", quoted=True),
                         exp.alias_(exp.func("count", exp.Star()), "n", quoted=True)).from_(exp.to_table(name, quoted=True))
              for i, name in enumerate(tables)]
    found = dict(backend.rows(exp.union(*counts, distinct=False))) if counts else {}
    return [int(found[i]) for i in range(len(tables))]


def _joined(base: str, row_id: str | None, batch: range, orders, codes, temps, widths) -> exp.Select:
    """SELECT <the cells u: every column, or the row id alone>, <the batch's codes, each in the
    SQL type `widths[i]`> FROM u JOIN each of the batch's dictionaries."""
    taken = exp.Column(this=exp.Star(), table=exp.to_identifier("u")) if row_id is None else qcol(row_id, "u")
    narrow = [exp.alias_(exp.cast(qcol(codes[i], f"d{i}"), exp.DataType.build(widths[i])), codes[i], quoted=True)
              for i in batch]
    select = exp.select(taken, *narrow)
    select = select.from_(exp.alias_(exp.to_table(base, quoted=True), "u", table=True))
    for i in batch:
        on = exp.and_(*[exp.NullSafeEQ(this=qcol(c, "u"), expression=qcol(c, f"d{i}")) for c in orders[i]])
        select = select.join(exp.alias_(exp.to_table(temps[i + 1], quoted=True), f"d{i}", table=True), on=on, copy=False)
    return select
