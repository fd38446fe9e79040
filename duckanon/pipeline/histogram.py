"""Step 2 of the pipeline: one GROUP BY inside the engine builds the class histogram.

The cells table holds one row per distinct (QI vector, SA value) with its row count, dictionary
codes per QI column and for the SA, and a stable cell id. Only the codes and counts cross into
Python (Arrow -> numpy); the values themselves stay in the engine, where the join-back reads them.
The SQL is built as sqlglot expressions; the backend renders them in its dialect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.errors import AnonymizeError
from duckanon.pipeline.arrays import int_column
from duckanon.pipeline.columns import (STRING, TEXT, TYPED, VALUE, ColumnFacts, hashable, key_of, published_text, qcol,
                                       temp_table)
from duckanon.pipeline.codes import ascending as _ascending
from duckanon.pipeline.codes import create_coded, dense_code as _dense_code, narrowest_integer
from duckanon.pipeline.plan import Plan
from duckanon.solver.heuristics import segments_alone as heuristic_segments_alone
from duckanon.solver.histogram import Histogram, group_keys
from duckanon.solver.recode import recoding_memory_bound
from duckanon.solver.refine import refine_memory_bound
from duckanon.solver.segments import SEGMENT_BLOCK
from duckanon.names import TableName

STAR = "*"


def qi_alias(j: int) -> str:
    return f"q{j}"


def code_alias(j: int) -> str:
    return f"c{j}"


def key_alias(j: int) -> str:
    return f"k{j}"


SA_ALIAS, SA_KEY, SA_CODE, COUNT, CELL_ID = "s", "sk", "s_code", "n", "cell_id"
# per lane, a cell's sum of per-row products and its share of the registry's checksum of the source (_fingerprint)
FINGERPRINT, FINGERPRINT_SHARE = "fingerprint_rows", "fingerprint"


class HistogramTooLarge(AnonymizeError):
    """The solver side would need more memory than the budget (raised before the fetch)."""


@dataclass(frozen=True)
class Cells:
    """The histogram and, per cell, the class and SA code it belongs to."""

    table: str  # temp table name in DuckDB
    histogram: Histogram
    cell_class: np.ndarray
    cell_sa: np.ndarray  # the SA code: several cells of one class may share it (spellings of one value)
    cell_count: np.ndarray
    fingerprint: tuple[int, int] | None = None  # the source's (rows, checksum) for the registry, if computed


def _any_value(value: exp.Expr) -> exp.Expr:
    return exp.AnyValue(this=value)


SA_ORDER = "so"


def shown_alias(j: int) -> str:
    return f"p{j}"


def qi_order(plan: Plan, facts: ColumnFacts, j: int) -> list[str]:
    """The cells-table columns that order QI j's codes: its value, then (when keyed by text) the
    key, so two spellings equal under `=` get two codes, next to each other."""
    return [qi_alias(j)] if facts.kind(plan.qi[j]) == VALUE else [qi_alias(j), key_alias(j)]


def qi_key(plan: Plan, facts: ColumnFacts, j: int) -> str:
    """The cells-table column holding QI j's class key."""
    return qi_alias(j) if facts.kind(plan.qi[j]) == VALUE else key_alias(j)


def qi_shown(plan: Plan, facts: ColumnFacts, j: int) -> str:
    """The cells-table column whose text QI j publishes: the class's text, with the column's own
    collation (a string) or none, and never a window's sort column (see above)."""
    return shown_alias(j) if facts.shows_own_text(plan.qi[j]) else qi_alias(j)


def sa_key(plan: Plan, facts: ColumnFacts) -> str:
    """The cells-table column holding the sensitive column's key."""
    return SA_ALIAS if facts.kind(plan.sensitive) == VALUE else SA_KEY


def _sa_code_order(plan: Plan, facts: ColumnFacts) -> list[str]:
    """What orders the sensitive codes (by `=`: ties are one value) and, with the key, the cells."""
    kind = facts.kind(plan.sensitive)
    if kind == TEXT and facts.session_type(plan.sensitive) is not None:
        return [SA_ORDER]  # its canonical text, not the session's
    return {VALUE: [SA_ALIAS], STRING: [SA_ALIAS], TYPED: [SA_ORDER], TEXT: [SA_KEY]}[kind]


def cells_select(plan: Plan, facts: ColumnFacts, fingerprint_of=None) -> exp.Select:
    """SELECT <QI values and keys>, <SA value and key>, count, SA code, cell id FROM (GROUP BY the
    keys): the cells without their QI codes (codes.create_coded adds them, in the order of
    qi_order, as code_alias). A cell is a distinct vector of published QI texts and sensitive text (see the kinds
    above): q{j} is its QI j value (the key itself for a VALUE column), k{j} the key of the others,
    p{j} the text of a TYPED column; s the sensitive value published, sk its key where it is not
    the value, so a copy of a TYPED value that its codes sort."""
    keys, values, shown = [], [], []
    for j, column in enumerate(plan.qi):
        kind = facts.kind(column)
        if kind == VALUE:
            keys.append(exp.alias_(qcol(column), qi_alias(j), quoted=True))
            if facts.shows_own_text(plan.qi[j]):  # a TIMESTAMPTZ: its canonical text, once per cell
                shown.append(exp.alias_(published_text(facts, column, qcol(qi_alias(j))), shown_alias(j), quoted=True))
            continue
        # the key; one value of the class: its spelling (STRING), its value for the order of the
        # codes (TYPED, beside its text), or its text (TEXT); the texts with no collation of ours
        keys.append(exp.alias_(key_of(kind, qcol(column)), key_alias(j), quoted=True))
        text = published_text(facts, column, qcol(column))
        values.append(exp.alias_(_any_value(text if kind == TEXT else qcol(column)), qi_alias(j), quoted=True))
        if kind == TYPED:
            values.append(exp.alias_(_any_value(text), shown_alias(j), quoted=True))
    if plan.sensitive:
        kind = facts.kind(plan.sensitive)
        if kind == VALUE:
            keys.append(exp.alias_(qcol(plan.sensitive), SA_ALIAS, quoted=True))
        else:  # the value published (its own type), and the key its spellings are told apart by
            keys.append(exp.alias_(key_of(kind, qcol(plan.sensitive)), SA_KEY, quoted=True))
            values.append(exp.alias_(_any_value(qcol(plan.sensitive)), SA_ALIAS, quoted=True))
            if kind == TYPED:
                values.append(exp.alias_(_any_value(qcol(plan.sensitive)), SA_ORDER, quoted=True))
            elif _sa_code_order(plan, facts) == [SA_ORDER]:  # a TEXT value a session prints in its settings
                values.append(exp.alias_(_any_value(hashable(facts, plan.sensitive, qcol(plan.sensitive))), SA_ORDER,
                                         quoted=True))
    group_by = [exp.Literal.number(i + 1) for i in range(len(keys))]
    summed, shares = _fingerprint(plan, facts, fingerprint_of)
    grouped = (
        exp.select(*keys, *values, exp.alias_(exp.Count(this=exp.Star()), COUNT, quoted=True), *summed)
        .from_(plan.source.table.copy())
        .group_by(*group_by)
    )
    outer = [exp.Star(), *shown, *shares]
    cell_order = [c for j in range(len(plan.qi)) for c in qi_order(plan, facts, j)]
    if plan.sensitive:
        outer.append(exp.alias_(_dense_code(*_sa_code_order(plan, facts)), SA_CODE, quoted=True))
        cell_order += list(dict.fromkeys(_sa_code_order(plan, facts) + [sa_key(plan, facts)]))
    # cell ids numbered in value order, so every engine numbers the cells alike
    row_number = exp.Window(this=exp.Anonymous(this="ROW_NUMBER"), order=exp.Order(expressions=[_ascending(c) for c in cell_order]))
    outer.append(exp.alias_(exp.Sub(this=row_number, expression=exp.Literal.number(1)), CELL_ID, quoted=True))
    return exp.select(*outer).from_(grouped.subquery("g"))


# The registry's checksum of the source (registry.fingerprint_sql), in two lanes: per lane, the
# sum over the rows of the product of one factor per column (a hash of the value, the column's
# position and the lane), modulo the prime FINGERPRINT_MODULUS; the checksum is lane 0 * 2**32 +
# lane 1. A product rather than a hash of the whole row, so that the columns every row of a cell
# shares give one factor per cell: the GROUP BY that reads the source anyway hashes per row only
# the columns it does not group by (kept ones). (Hashing whole rows there cost 0.3 s at 10M rows,
# a sixth of the floor; a second scan 0.47 s.) A 31-bit prime keeps every step in BIGINT (a
# 61-bit one needs HUGEINT: 10x slower to scan); two lanes make a change go unseen with a
# chance of about 2**-62. Two rows that swap a value change the sums unless hashes collide.
FINGERPRINT_MODULUS = 2**31 - 1
FINGERPRINT_LANES = (0, 1 << 16)  # added to a column's position in its hash


def _huge(value: exp.Expr) -> exp.Expr:
    return exp.cast(value, exp.DataType.build("HUGEINT", dialect="duckdb"))


def _modulo(value: exp.Expr) -> exp.Expr:
    return exp.Mod(this=exp.Paren(this=value), expression=exp.Literal.number(FINGERPRINT_MODULUS))


def fingerprint_factor(value: exp.Expr, position: int, lane: int) -> exp.Expr:
    """A column's factor in a row's product: 1 .. FINGERPRINT_MODULUS - 1, never 0. As a BIGINT
    (hash() is unsigned): DuckDB sums BIGINTs faster than UBIGINTs (0.03 s of the GROUP BY at
    10M rows), and the products stay below 2**62 either way."""
    hashed = exp.func("hash", value, exp.Literal.number(position + lane))
    reduced = exp.Add(this=exp.Mod(this=hashed, expression=exp.Literal.number(FINGERPRINT_MODULUS - 1)),
                      expression=exp.Literal.number(1))
    return exp.cast(reduced, exp.DataType.build("BIGINT"))


def fingerprint_product(factors: list[exp.Expr]) -> exp.Expr:
    """The product of the factors modulo FINGERPRINT_MODULUS (each step below 2**62); 1 for none.
    Multiplied in pairs, so a table of hundreds of columns nests a few levels, not hundreds."""
    if not factors:
        return exp.Literal.number(1)
    while len(factors) > 1:
        pairs = [_modulo(exp.Mul(this=exp.Paren(this=a), expression=exp.Paren(this=b)))
                 for a, b in zip(factors[::2], factors[1::2])]
        factors = pairs + factors[len(pairs) * 2:]
    return factors[0]


def fingerprint_checksum(lane_sums: list[exp.Expr]) -> exp.Expr:
    """The checksum from the two lanes' sums (each reduced modulo FINGERPRINT_MODULUS here)."""
    high, low = (_modulo(lane) for lane in lane_sums)
    return exp.Add(this=exp.Mul(this=exp.Paren(this=high), expression=exp.Literal.number(1 << 32)), expression=low)


def fingerprinted(plan: Plan, fingerprint_of: tuple[str, tuple[str, ...]] | None) -> bool:
    """Whether build_cells computes the registry's fingerprint `fingerprint_of` ((the source as SQL,
    the columns it covers): registry.fingerprint_sql): asked for, and of the table `plan` reads."""
    return fingerprint_of is not None and fingerprint_of[0] == plan.source.sql()


def _fingerprint(plan: Plan, facts: ColumnFacts, fingerprint_of=None) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """The GROUP BY's aggregates and the cells' columns that compute each cell's share of the
    registry's checksum of the source, per lane; ([], []) when none is asked for or the plan reads
    another table (a masked or combined copy).

    A column whose class key is the value itself (VALUE: equal keys are identical values) is
    the same in every row of a cell: its factor is taken once per cell. The others (kept columns,
    and keys that are a text) are multiplied per row and summed by the GROUP BY."""
    if not fingerprinted(plan, fingerprint_of):
        return [], []
    as_key = {c.lower(): qi_alias(j) for j, c in enumerate(plan.qi)}
    if plan.sensitive:
        as_key[plan.sensitive.lower()] = SA_ALIAS
    per_cell, per_row = [], []  # (the column as the cells or the source name it, its position)
    for i, column in enumerate(fingerprint_of[1]):
        if column.lower() in as_key and facts.kind(column) == VALUE:
            per_cell.append((as_key[column.lower()], i))
        else:
            per_row.append((column, i))
    summed, shares = [], []
    for n, lane in enumerate(FINGERPRINT_LANES):
        rows = fingerprint_product([fingerprint_factor(qcol(c), i, lane) for c, i in per_row])
        summed.append(exp.alias_(exp.func("sum", rows) if per_row else _huge(exp.Count(this=exp.Star())),
                                 f"{FINGERPRINT}{n}", quoted=True))
        cell = fingerprint_product([fingerprint_factor(qcol(c), i, lane) for c, i in per_cell])
        share = _modulo(exp.Mul(this=exp.Paren(this=cell), expression=_modulo(qcol(f"{FINGERPRINT}{n}"))))
        shares.append(exp.alias_(share, f"{FINGERPRINT_SHARE}{n}", quoted=True))
    return summed, shares


def source_fingerprint(backend: Backend, plan: Plan, table: str, fingerprint_of=None) -> tuple[int, int] | None:
    """(rows, checksum) of the source, from the cells table `table` when build_cells computed it."""
    if not fingerprinted(plan, fingerprint_of):
        return None
    checksum = fingerprint_checksum([exp.func("sum", qcol(f"{FINGERPRINT_SHARE}{n}"))
                                     for n in range(len(FINGERPRINT_LANES))])
    rows, checksum = backend.one(exp.select(
        exp.func("coalesce", exp.func("sum", qcol(COUNT)), exp.Literal.number(0)),
        exp.func("coalesce", checksum, exp.Literal.number(0)),
    ).from_(exp.to_table(table, quoted=True)))
    return int(rows), int(checksum)


# What the solver side holds, per class and per cell, in 8-byte words times these factors: the
# dense class x SA count matrix and the class codes (copied a few times by the solvers), and the
# cell arrays. Calibrated on unique-id tables (benchmarks/bench_memory.py: measured peaks were
# 3.2-5.2 words per class x (m + SA values)); the factors leave a margin above that.
CLASS_WORD_FACTOR = 6
CELL_WORD_FACTOR = 4
BASE_BYTES = 64 * 2**20  # the interpreter-side overhead of a statement (parsing, models, small MILPs)
# Where the codes stay compact (segments_alone: one sort and a cut, no int64 copy of them), what
# it holds per class and cell: the codes three times in their own width (the fetch, the histogram,
# the parts' masks), per class in words the counts, sizes, the sort's packed keys, the parts and
# the groups' representatives, per cell its arrays; segments' block of positions and the
# representatives are counted per column apart (an attack at 45,000 x 150 QIs of 3 values measured
# 136 MiB where these terms alone said 93). Measured at 2,000,000 x 50 QIs (random values, k = 5):
# about 0.35 KiB per class beside DuckDB's memory; this estimates 0.75 KiB there.
COMPACT_CLASS_WORDS = 16
COMPACT_CODE_COPIES = 3


def solver_memory_estimate(n_classes: int, n_cells: int, m: int, n_sa: int, code_bytes: int = 8) -> int:
    """Bytes the histogram and the solver need in Python for these sizes (an upper estimate); with
    `code_bytes` below 8, the codes stay in that width throughout (segments_alone)."""
    if code_bytes < 8:
        # beside the codes: segments' block of positions (three words per position and column, at
        # most SEGMENT_BLOCK positions) and the groups' representatives (a word per group and
        # column, at most one group per two classes)
        per_column_words = 3 * min(n_classes, SEGMENT_BLOCK) + n_classes // 2
        return BASE_BYTES + (COMPACT_CODE_COPIES * code_bytes * n_classes * m + 8 * per_column_words * m
                             + 8 * (COMPACT_CLASS_WORDS + n_sa) * n_classes + 8 * CELL_WORD_FACTOR * 3 * n_cells)
    return BASE_BYTES + 8 * (CLASS_WORD_FACTOR * n_classes * (m + n_sa) + CELL_WORD_FACTOR * n_cells * (m + 3))


@dataclass(frozen=True)
class CellCounts:
    """What build_cells counts in the engine before anything reaches Python."""

    cells: int
    sa_values: int
    largest_code: int  # over every QI column's codes (0 without QIs)

    @property
    def code_type(self) -> tuple[type, str]:
        """The (numpy, SQL) integer type the codes are fetched in: the narrowest that holds them."""
        return narrowest_integer(self.largest_code)


def _count_cells(backend: Backend, plan: Plan, table: str) -> CellCounts:
    """The cells, SA values and largest code of the cells table, in one pass inside the engine."""
    m = len(plan.qi)
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    n_sa = exp.Add(this=exp.func("max", qcol(SA_CODE)), expression=one) if plan.sensitive else one
    largest = [exp.func("coalesce", exp.func("max", qcol(code_alias(j))), zero) for j in range(m)]
    query = exp.select(exp.func("count", exp.Star()), exp.func("coalesce", n_sa, one),
                       exp.func("greatest", *largest) if len(largest) > 1 else (largest[0] if largest else zero))
    n_cells, n_sa, largest_code = backend.one(query.from_(exp.to_table(table, quoted=True)))
    return CellCounts(int(n_cells), int(n_sa), int(largest_code))


def _method_bytes(plan: Plan, n_classes: int, counts: CellCounts) -> int:
    """What the method the statement runs holds beyond the histogram's words, where that grows
    with more than the classes and columns: with hierarchies, `mondrian`'s and `auto`'s local
    recoding (solver/recode.py's bound: its packing, cache and codes per level; a `prefix`
    without a width counts as 32 levels, its height being the longest value's length); `mondrian`
    without them, its refinement's counts per value (solver/refine.py)."""
    method, m, n_sa = plan.statement.method, len(plan.qi), counts.sa_values
    if plan.hierarchies is not None and method in ("mondrian", "auto"):
        levels = 1 + max((h.height if h.height is not None else 32 for h in plan.hierarchies if h is not None),
                         default=0)
        return recoding_memory_bound(n_classes, m, n_sa, levels)
    if method == "mondrian":
        return refine_memory_bound(n_classes, m, counts.largest_code)
    return 0


def _check_memory(backend: Backend, plan: Plan, table: str, budget: int | None, counts: CellCounts) -> None:
    """Refuse before anything big reaches Python: the classes, cells and SA values are counted
    inside the engine (DuckDB spills to disk under its own memory_limit) and the estimate is
    compared with the budget."""
    if budget is None:
        return
    m, n_cells, n_sa = len(plan.qi), counts.cells, counts.sa_values
    compact = segments_alone(plan, n_cells)
    code_bytes = np.dtype(counts.code_type[0]).itemsize if compact else 8
    # classes <= cells: an upper bound first
    need = solver_memory_estimate(n_cells, n_cells, m, n_sa, code_bytes) + _method_bytes(plan, n_cells, counts)
    n_classes = n_cells
    if need > budget:  # only then the exact count of classes (one more pass over the cells)
        cells = exp.to_table(table, quoted=True)
        distinct = exp.select(*[qcol(code_alias(j)) for j in range(m)]).distinct().from_(cells)
        n_classes = backend.one(exp.select(exp.func("count", exp.Star())).from_(distinct.subquery()))[0] if m else 1
        need = solver_memory_estimate(n_classes, n_cells, m, n_sa, code_bytes) + _method_bytes(plan, n_classes, counts)
    if need > budget:
        values = f" x {n_sa:,} sensitive values" if plan.sensitive else ""
        raise HistogramTooLarge(
            f"the class histogram is too large for the memory limit: {n_classes:,} classes{values} ({n_cells:,} "
            f"cells) need about {_size(need)} in the solver, above {_size(budget)}; use fewer or coarser "
            "quasi-identifiers (hierarchies), or raise the option memory_limit")


def segments_alone(plan: Plan, n_classes: int) -> bool:
    """Whether the solver will run `segments` alone on these classes (its codes never widened):
    asked for, or auto's choice on a large wide table (heuristics.segments_alone) for k alone,
    without hierarchies, patterns or a population."""
    if plan.hierarchies is not None or plan.patterns is not None or plan.population is not None:
        return False
    method = plan.statement.method
    return method == "segments" or (method == "auto" and plan.sensitive is None
                                    and heuristic_segments_alone(n_classes, len(plan.qi)))


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def build_cells(backend: Backend, plan: Plan, facts: ColumnFacts, table: str, memory_budget: int | None = None,
                fingerprint_of: tuple[str, tuple[str, ...]] | None = None) -> Cells:
    """The cells table `table` (a temp table of the backend) of the columns `plan` reads, keyed as
    `facts` says (columns.column_facts), and the histogram; with `fingerprint_of`, the registry's
    fingerprint of the source computed in the same GROUP BY (fingerprinted)."""
    grouped = cells_select(plan, facts, fingerprint_of)  # the one GROUP BY of the source
    m = len(plan.qi)
    create_coded(backend, table, grouped, [qi_order(plan, facts, j) for j in range(m)], [code_alias(j) for j in range(m)],
                 CELL_ID)
    if plan.statement.epsilon is None:  # a private release suppresses no cell to '*' (whole records go):
        _reject_star_values(backend, plan, facts, table)  # there a refusal would tell that a row holds one
    counts = _count_cells(backend, plan, table)
    _check_memory(backend, plan, table, memory_budget, counts)
    # fetched in the narrowest integer type that holds them (a wide table's codes fit in a byte)
    code_dtype, code_sql = counts.code_type
    code_columns = [exp.alias_(exp.cast(qcol(code_alias(j)), exp.DataType.build(code_sql)), code_alias(j), quoted=True)
                    for j in range(len(plan.qi))]
    sa_code = qcol(SA_CODE) if plan.sensitive else exp.Literal.number(0)
    fetch = exp.select(*code_columns, exp.alias_(sa_code, SA_CODE, quoted=True), qcol(COUNT)).from_(
        exp.to_table(table, quoted=True)).order_by(qcol(CELL_ID))
    histogram, cell_class, cell_sa, cell_count = _histogram_of(backend.arrow(fetch), plan.qi, code_dtype)
    return Cells(table, histogram, cell_class, cell_sa, cell_count,
                 source_fingerprint(backend, plan, table, fingerprint_of))


def _histogram_of(arrow, qi: list[str], code_dtype=np.int64) -> tuple[Histogram, np.ndarray, np.ndarray, np.ndarray]:
    """The class histogram of the cells' codes (kept in `code_dtype`) and counts (one row per
    cell, in cell id order), and per cell its class, SA code and rows."""
    m = len(qi)
    n_cells = arrow.num_rows
    codes = np.empty((n_cells, m), dtype=code_dtype)  # filled a column at a time: no stacked copy
    for j in range(m):
        codes[:, j] = int_column(arrow.column(j), code_dtype) if n_cells else 0
    cell_sa = int_column(arrow.column(m)) if n_cells else np.zeros(0, np.int64)
    cell_count = int_column(arrow.column(m + 1)) if n_cells else np.zeros(0, np.int64)
    # classes numbered in the order of their code vectors, as np.unique(axis=0) numbers them
    # (group_keys: 3 ms where that took 25 at 19,502 cells)
    cell_class = group_keys(codes) if n_cells else np.zeros(0, np.int64)
    n_classes = int(cell_class.max()) + 1 if n_cells else 0
    if n_classes == n_cells and (cell_class == np.arange(n_cells)).all():
        class_codes = codes  # one cell per class, in class order (no sensitive column): no copy
    else:
        class_codes = np.zeros((n_classes, m), dtype=code_dtype)
        class_codes[cell_class] = codes
    n_sa = int(cell_sa.max()) + 1 if n_cells else 1
    sa_counts = np.bincount(cell_class * n_sa + cell_sa, weights=cell_count,
                            minlength=len(class_codes) * n_sa).astype(np.int64).reshape(len(class_codes), n_sa)
    return Histogram(codes=class_codes, sa_counts=sa_counts, columns=tuple(qi)), cell_class, cell_sa, cell_count


def _reject_star_values(backend: Backend, plan: Plan, facts: ColumnFacts, table: str) -> None:
    """A source value published as '*' would be indistinguishable from a suppressed cell: refuse it."""
    checks = []
    for j, column in enumerate(plan.qi):
        text = exp.Cast(this=qcol(qi_shown(plan, facts, j)), to=exp.DataType.build("VARCHAR"))  # the text published
        checks.append(exp.EQ(this=text, expression=exp.Literal.string(STAR)))
    condition = exp.or_(*checks) if len(checks) > 1 else checks[0]
    query = exp.select(*[exp.alias_(exp.func("bool_or", c), f"x{j}", quoted=True) for j, c in enumerate(checks)]).from_(
        exp.to_table(table, quoted=True)).where(condition)
    row = backend.one(query)
    for j, flag in enumerate(row or ()):
        if flag:
            raise AnonymizeError(
                f"column '{plan.qi[j]}' contains the value '*', which duckanon reserves for suppressed cells"
            )


def sa_values(backend: Backend, cells: Cells) -> list:
    """The sensitive values in SA-code order (code s is the s-th value; NULL sorts last). A code
    with several spellings (a NOCASE 'Flu' and 'flu') is named by its first spelling in byte order."""
    table = exp.to_table(cells.table, quoted=True)
    if SA_KEY in backend.columns(TableName(table)):
        query = exp.select(qcol(SA_CODE), exp.func("arg_min", qcol(SA_ALIAS), qcol(SA_KEY))).from_(table).group_by(
            exp.Literal.number(1))
    else:
        query = exp.select(qcol(SA_CODE), qcol(SA_ALIAS)).distinct().from_(table)
    return [value for _, value in backend.rows(query.order_by(exp.Literal.number(1)))]


# ------------------------------------------------------------------------------ one read of the source
#
# The histogram comes from one read of the source and, with `keep` columns, the published rows
# from a second (the join back); the report reads it again. Inside the statement's transaction a
# DuckDB base table reads the same every time (MVCC), but a view, an attached database's table, a
# file or a generated column is computed again at each read: a view with USING SAMPLE or random()
# gives other rows each time, and rows would be lost or classes fall below k. Such a source is
# copied once (its published columns only) into a temp table that every step then reads.


def snapshot_source(backend: Backend, plan: Plan, name: str) -> Plan:
    """The plan to publish from: `plan` itself when the source is read once (no `keep` columns,
    no report) or reads the same every time (source_is_stable); else a plan reading the temp table
    `name`, created here with the published columns of one read of the source. Call it right
    after BEGIN; drop `name` after the report (a ROLLBACK drops it too)."""
    if not backend.reads_stably:
        return plan  # e.g. Spark: no transactions and no temp tables that stay put
    if not (plan.keep or plan.statement.report) or backend.source_is_stable(plan.source, plan.published):
        return plan
    backend.create_temp(name, exp.select(*[qcol(c) for c in plan.published]).from_(plan.source.table.copy()))
    return replace(plan, source=temp_table(name), columns=list(plan.published))
