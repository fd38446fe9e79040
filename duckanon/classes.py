"""Step 2 of the pipeline: one GROUP BY inside DuckDB builds the class histogram.

The cells table holds one row per distinct (QI vector, SA value) with its row count, dictionary
codes per QI column and for the SA, and a stable cell id. Only the codes and counts cross into
Python (Arrow -> numpy); the values themselves stay in DuckDB, where the join-back reads them.
The SQL is built as sqlglot expressions so that another engine can run it by changing dialect.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
from sqlglot import exp

from duckanon.errors import AnonymizeError
from duckanon.plan import Plan
from duckanon.solver.histogram import Histogram

STAR = "*"


def qcol(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def qi_alias(j: int) -> str:
    return f"q{j}"


def code_alias(j: int) -> str:
    return f"c{j}"


SA_ALIAS, SA_CODE, COUNT, CELL_ID = "s", "s_code", "n", "cell_id"


class HistogramTooLarge(AnonymizeError):
    """The solver side would need more memory than the budget (raised before the fetch)."""


@dataclass
class Cells:
    """The histogram and, per cell, the class and SA code it belongs to."""

    table: str  # temp table name in DuckDB
    histogram: Histogram
    cell_class: np.ndarray
    cell_sa: np.ndarray
    cell_count: np.ndarray


def _ascending(column: str) -> exp.Ordered:
    # NULL last, spelled out: engines differ in their default (DuckDB last, Spark first)
    return exp.Ordered(this=qcol(column), desc=False, nulls_first=False)


def _dense_code(column: str) -> exp.Expr:
    window = exp.Window(this=exp.Anonymous(this="DENSE_RANK"), order=exp.Order(expressions=[_ascending(column)]))
    return exp.Sub(this=window, expression=exp.Literal.number(1))


def cells_select(plan: Plan) -> exp.Select:
    """SELECT <QI values>, <SA>, count, codes, cell id FROM (GROUP BY QI, SA)."""
    grouped_columns = [exp.alias_(qcol(c), qi_alias(j), quoted=True) for j, c in enumerate(plan.qi)]
    if plan.sensitive:
        grouped_columns.append(exp.alias_(qcol(plan.sensitive), SA_ALIAS, quoted=True))
    keys = [exp.Literal.number(i + 1) for i in range(len(grouped_columns))]
    grouped = (
        exp.select(*grouped_columns, exp.alias_(exp.Count(this=exp.Star()), COUNT, quoted=True))
        .from_(plan.source.table.copy())
        .group_by(*keys)
    )
    outer = [exp.Star()]
    outer += [exp.alias_(_dense_code(qi_alias(j)), code_alias(j), quoted=True) for j in range(len(plan.qi))]
    if plan.sensitive:
        outer.append(exp.alias_(_dense_code(SA_ALIAS), SA_CODE, quoted=True))
    # cell ids numbered in value order, so every engine numbers the cells alike
    cell_order = exp.Order(expressions=[_ascending(a) for a in [qi_alias(j) for j in range(len(plan.qi))]
                                        + ([SA_ALIAS] if plan.sensitive else [])])
    row_number = exp.Window(this=exp.Anonymous(this="ROW_NUMBER"), order=cell_order)
    outer.append(exp.alias_(exp.Sub(this=row_number, expression=exp.Literal.number(1)), CELL_ID, quoted=True))
    return exp.select(*outer).from_(grouped.subquery("g"))


# What the solver side holds, per class and per cell, in 8-byte words times these factors: the
# dense class x SA count matrix and the class codes (copied a few times by the solvers), and the
# cell arrays. Calibrated on unique-id tables (benchmarks/bench_memory.py: measured peaks were
# 3.2-5.2 words per class x (m + SA values)); the factors leave a margin above that.
CLASS_WORD_FACTOR = 6
CELL_WORD_FACTOR = 4
BASE_BYTES = 64 * 2**20  # the interpreter-side overhead of a statement (parsing, models, small MILPs)


def solver_memory_estimate(n_classes: int, n_cells: int, m: int, n_sa: int) -> int:
    """Bytes the histogram and the solver need in Python for these sizes (an upper estimate)."""
    return BASE_BYTES + 8 * (CLASS_WORD_FACTOR * n_classes * (m + n_sa) + CELL_WORD_FACTOR * n_cells * (m + 3))


def _check_memory(con, plan: Plan, table: str, budget: int | None) -> None:
    """Refuse before anything big reaches Python: the classes, cells and SA values are counted
    inside DuckDB (which spills to disk under its own memory_limit) and the estimate is compared
    with the budget."""
    if budget is None:
        return
    m = len(plan.qi)
    codes = ", ".join(f'"{code_alias(j)}"' for j in range(m))
    sa = f'max("{SA_CODE}") + 1' if plan.sensitive else "1"
    n_cells, n_sa = con.execute(f'SELECT count(*), coalesce({sa}, 1) FROM "{table}"').fetchone()
    need = solver_memory_estimate(n_cells, n_cells, m, n_sa)  # classes <= cells: an upper bound first
    if need > budget:  # only then the exact count of classes (one more pass over the cells)
        n_classes = con.execute(f'SELECT count(*) FROM (SELECT DISTINCT {codes} FROM "{table}")').fetchone()[0] if m else 1
        need = solver_memory_estimate(n_classes, n_cells, m, n_sa)
    if need > budget:
        values = f" x {n_sa:,} sensitive values" if plan.sensitive else ""
        raise HistogramTooLarge(
            f"the class histogram is too large for the memory limit: {n_classes:,} classes{values} ({n_cells:,} "
            f"cells) need about {_size(need)} in the solver, above {_size(budget)}; use fewer or coarser "
            "quasi-identifiers (hierarchies), or raise the option memory_limit")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def fetch_arrow(con, query: str):
    """The result of `query` as an Arrow table. On DuckDB through a relation: DuckDB 2 copies and
    warns when Arrow is taken from an execute() result."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        if hasattr(con, "abort"):  # DuckDB 2: results stream; drop the unread rest of an earlier one
            con.abort()
        return con.sql(query).to_arrow_table()
    return con.execute(query).to_arrow_table()


def build_cells(con: duckdb.DuckDBPyConnection, plan: Plan, table: str, memory_budget: int | None = None) -> Cells:
    create = exp.Create(
        this=exp.to_table(table, quoted=True), kind="TABLE", expression=cells_select(plan),
        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
    )
    con.execute(create.sql(dialect="duckdb"))
    _reject_star_values(con, plan, table)
    _check_memory(con, plan, table, memory_budget)
    code_columns = [qcol(code_alias(j)) for j in range(len(plan.qi))]
    sa_code = qcol(SA_CODE) if plan.sensitive else exp.Literal.number(0)
    fetch = exp.select(*code_columns, exp.alias_(sa_code, SA_CODE, quoted=True), qcol(COUNT)).from_(
        exp.to_table(table, quoted=True)).order_by(qcol(CELL_ID))
    arrow = fetch_arrow(con, fetch.sql(dialect="duckdb"))
    m = len(plan.qi)
    n_cells = arrow.num_rows
    codes = np.column_stack([arrow.column(j).to_numpy() for j in range(m)]).astype(np.int64) if n_cells else np.zeros((0, m), np.int64)
    cell_sa = arrow.column(m).to_numpy().astype(np.int64) if n_cells else np.zeros(0, np.int64)
    cell_count = arrow.column(m + 1).to_numpy().astype(np.int64) if n_cells else np.zeros(0, np.int64)
    if n_cells:
        class_codes, cell_class = np.unique(codes, axis=0, return_inverse=True)
        cell_class = cell_class.ravel()
    else:
        class_codes, cell_class = codes, np.zeros(0, np.int64)
    n_sa = int(cell_sa.max()) + 1 if n_cells else 1
    sa_counts = np.zeros((len(class_codes), n_sa), dtype=np.int64)
    np.add.at(sa_counts, (cell_class, cell_sa), cell_count)
    histogram = Histogram(codes=class_codes, sa_counts=sa_counts, columns=tuple(plan.qi))
    return Cells(table, histogram, cell_class, cell_sa, cell_count)


def _reject_star_values(con, plan: Plan, table: str) -> None:
    """A source value '*' would be indistinguishable from a suppressed cell: refuse it."""
    checks = [
        exp.EQ(this=exp.Cast(this=qcol(qi_alias(j)), to=exp.DataType.build("VARCHAR")), expression=exp.Literal.string(STAR))
        for j in range(len(plan.qi))
    ]
    condition = exp.or_(*checks) if len(checks) > 1 else checks[0]
    query = exp.select(*[exp.alias_(exp.func("bool_or", c), f"x{j}", quoted=True) for j, c in enumerate(checks)]).from_(
        exp.to_table(table, quoted=True)).where(condition)
    row = con.execute(query.sql(dialect="duckdb")).fetchone()
    for j, flag in enumerate(row or ()):
        if flag:
            raise AnonymizeError(
                f"column '{plan.qi[j]}' contains the value '*', which duckanon reserves for suppressed cells"
            )


def sa_values(con: duckdb.DuckDBPyConnection, cells: Cells) -> list:
    """The sensitive values in SA-code order (code s is the s-th value; NULL sorts last)."""
    query = f'SELECT DISTINCT "{SA_CODE}", "{SA_ALIAS}" FROM "{cells.table}" ORDER BY 1'
    return [value for _, value in con.execute(query).fetchall()]
