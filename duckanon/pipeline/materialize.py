"""Step 4 of the pipeline: the published table, written by the engine.

A small "keyed" table holds, per cell (distinct published QI texts + SA text), the published QI
strings: the class's text, or '*' where the cell's group is suppressed, or the group's label. The
source is joined to it on the same class keys the histogram was grouped by (histogram.key_of,
NULL-safe), or on one 64-bit hash of those keys where no two cells of the histogram share one
(key_hashes_distinct), so the only per-row work is one hash join. Cells whose rows go to groups
with different patterns ("split" cells) get one keyed row per part with a rank range, and only
their rows are numbered: by a window over the cell for small cells, by buckets of their order
hash for large ones (publish_select).

Row order. The published rows are in a seeded pseudo-random order that depends on the published
values and the seed alone: by the part's hash (hash(seed, published QI strings, published SA),
PART_HASH) where every row of a part is the same (no `keep` columns), else by the part keys
(below), then hash(part hash, the row's own published values: its kept columns; the SA is the
part's, _ordering). Never on source values a row no longer shows (a suppressed value, the spelling
of a generalized one), never on the source order, and without row ids: the same published multiset
with the same seed comes out in the same order, whatever the source was.

The cost of that order. With `keep` columns the published rows must be sorted, and a sort moves its
whole payload: eight VARCHAR QI columns made it cost as much again as the join. On DuckDB a QI
column of at most PACK_LIMIT published strings is therefore not carried at all: its string's number
in the column's dictionary (in an order drawn by the seed, published_dictionaries) is packed with
the other such columns' into one or more 64-bit part keys, the rows are sorted by (part keys,
hash(part hash, the row's own published values)), and each string is taken back from its
dictionary after the sort, in a projection that keeps the sorted order. So rows alike in the packed
columns come out together, and the sort carries the SA and the kept columns (and any column that
does not pack) besides its keys. A column of up to ENUM_LIMIT strings crosses the sort as a DuckDB
ENUM (one or two bytes), a larger one as its VARCHAR; neither leads the sort (a sort on several
keys cost more than the one on the part keys saved), so they order rows only through the part
hash. On Spark, whose shuffle and sort move the same payload, the code is the string's position in
an array of the column's strings (CODINGS), and the order stays hash(part hash, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from hashlib import blake2b

import numpy as np
import pyarrow as pa
from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.pipeline.histogram import (
    CELL_ID, SA_ALIAS, SA_KEY, STAR, TEXT, Cells, binary_text, hashable, key_hashable, kind_of, key_of, qcol, qi_alias,
    qi_key, qi_shown, sa_key, session_type,
)
from duckanon.errors import AnonymizeError
from duckanon.pipeline.plan import Plan
from duckanon.sql.names import TableName
from duckanon.solver.partition import SHOW_VALUE, STAR as STAR_CODE, Solution

LO, HI, RANK = "lo", "hi", "rn"
# Split cells: each row's order hash, its bucket, the bucket's rows before it in its cell, whether
# the bucket lies in one part; the keyed table's bucket count per part's cell (keyed_arrow)
ROW_HASH, BUCKET, BEFORE, WHOLE, BUCKETS = "row_hash", "bucket", "before_rows", "whole", "buckets"
# A split cell of SMALL_CELL rows or more is dealt into buckets of about BUCKET_ROWS rows, at most
# MAX_BUCKETS (a power of two); smaller ones are numbered by a window over the cell. (Measured at 10M
# rows: a window over cells of ~1,200 rows cost no more than the buckets, a window over one cell of
# 7.5M rows sorted it on one thread; hash tables of a few thousand buckets beat 65,536.)
SMALL_CELL, BUCKET_ROWS, MAX_BUCKETS = 4096, 256, 1024
PART_HASH, ROW_ORDER = "ph", "row_order"
# The hash of a keyed row's class keys: the join back matches on it alone where no two cells of the
# histogram share one (key_hashes_distinct), else on the keys themselves (_match)
KEY_HASH = "key_hash"
# Releases of this many rows or more (without `keep` columns) are generated from blocks of their
# parts (rows_per_block); below it the single-threaded expansion takes well under 0.1 s.
BLOCKED_FROM_ROWS = 1_000_000
# Columns with more distinct published strings than this are sorted as VARCHARs: the dictionary
# (the ENUM's, or Spark's array) is part of the statement's text.
ENUM_LIMIT = 4096
# Columns with at most this many published strings go into the part keys (DuckDB): taking a string
# back from a constant list costs per chunk of rows in proportion to the list (at 10M rows: 0.07 s
# a column for 256 strings, 0.4 s for 4,096, where the ENUM's cast costs 0.05 s).
PACK_LIMIT = 256
PART_KEY, WORD_BITS = "part_key", 64


def out_alias(j: int) -> str:
    return f"o{j}"


def cell_parts(cells: Cells, solution: Solution):
    """Per part of a cell: (cell id, first rank, last rank, suppressed mask (m,), group).

    The solver's parts name rows by (class, SA code) only. Several cells may share one (class,
    SA code): the spellings of one sensitive value ('Flu' and 'flu' in a NOCASE column), which the
    models count as one value. Their rows are interchangeable to the solver, so the cells of a
    (class, SA code) are laid end to end, the parts too, and each overlap of a cell with a part is
    one keyed row: a range of ranks within that cell."""
    n_cells = len(cells.cell_class)
    if n_cells == 0 or len(solution.part_class) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros((0, solution.group_rep.shape[1]), dtype=bool), empty
    n_sa = max(int(cells.cell_sa.max()), int(solution.part_sa.max())) + 1
    cell_order = np.argsort(cells.cell_class * n_sa + cells.cell_sa, kind="stable")  # then by cell id
    part_order = np.lexsort((solution.part_group, solution.part_class * n_sa + solution.part_sa))
    cell_end = np.cumsum(cells.cell_count[cell_order])
    part_end = np.cumsum(solution.part_count[part_order])
    if cell_end[-1] != part_end[-1]:
        raise AnonymizeError("internal error: the solution does not place every row of the histogram")
    # every row boundary of either, in order ((class, SA code) pairs end at the same place in both);
    # two sorted runs, so the stable sort merges them in linear time
    ends = np.sort(np.concatenate([cell_end, part_end]), kind="stable")
    ends = ends[np.concatenate([[True], ends[1:] != ends[:-1]])]
    starts = np.concatenate([[0], ends[:-1]])
    in_cell = np.searchsorted(cell_end, ends, side="left")
    in_part = np.searchsorted(part_end, ends, side="left")
    cell_start = cell_end[in_cell] - cells.cell_count[cell_order][in_cell]
    part_cell = cell_order[in_cell]
    part_group = solution.part_group[part_order][in_part]
    if not (np.array_equal(cells.cell_class[part_cell], solution.part_class[part_order][in_part])
            and np.array_equal(cells.cell_sa[part_cell], solution.part_sa[part_order][in_part])):
        raise AnonymizeError("internal error: the solution's rows do not match the histogram's cells")
    lo = starts - cell_start + 1
    hi = ends - cell_start
    masks = solution.group_rep[part_group] == STAR_CODE
    return part_cell.astype(np.int64), lo.astype(np.int64), hi.astype(np.int64), masks, part_group.astype(np.int64)


def keyed_arrow(cells: Cells, solution: Solution) -> pa.Table:
    """Per part: cell id, rank range, whether its cell is split over several parts and, if so, how
    many buckets its rows are dealt into (publish_select), suppressed mask m{j} and, for
    generalized columns, the label flag l{j} and label g{j}. Parts of removed groups are left out,
    so their rows are not published (a removed group holds whole cells, so no rank range is cut)."""
    part_cell, lo, hi, masks, groups = cell_parts(cells, solution)
    keep = solution.kept_groups[groups]
    kept_cells = part_cell[keep]
    # a cell is split when its published rows fall in more than one part (counted here: a window
    # over the keyed table cost more than the rest of building it)
    parts_per_cell = np.bincount(kept_cells, minlength=len(cells.cell_class))
    split = parts_per_cell[kept_cells] > 1
    # a power of two (publish_select takes the hash modulo MAX_BUCKETS first); 1: a window ranks the cell
    cell_rows = cells.cell_count[kept_cells]
    wanted = np.maximum(cell_rows // BUCKET_ROWS, 1)
    several = np.minimum(2 ** np.floor(np.log2(wanted)).astype(np.int64), MAX_BUCKETS)
    buckets = np.where(split & (cell_rows >= SMALL_CELL), several, 1)
    columns = {CELL_ID: kept_cells, LO: lo[keep], HI: hi[keep], "split": split, BUCKETS: buckets.astype(np.int64)}
    for j in range(masks.shape[1]):
        columns[f"m{j}"] = masks[keep, j]
    kept_groups = pa.array(groups[keep])
    for j, labels in enumerate(solution.group_labels or []):
        if labels is None:
            continue
        # per group first (few), then taken for every part
        per_group = pa.array([None if label == SHOW_VALUE else label for label in labels], type=pa.string())
        chosen = per_group.take(kept_groups)
        columns[f"l{j}"] = chosen.is_valid()
        columns[f"g{j}"] = chosen
    return pa.table(columns)


def _table(name: str, alias: str) -> exp.Expr:
    return exp.alias_(exp.to_table(name, quoted=True), alias, table=True)


def _varchar(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))


def _key_aliases(plan: Plan) -> list[str]:
    """The keyed table's columns holding the class keys: one per QI, and the SA's."""
    return [qi_key(plan, j) for j in range(len(plan.qi))] + ([sa_key(plan)] if plan.sensitive else [])


def _sa_text(plan: Plan, table: str | None = None) -> exp.Expr:
    """The published sensitive value of a keyed row, as something that differs exactly when the
    published values do (the value, or its text where spellings differ: its canonical text where a
    session prints it in its settings, a LIST of TIMESTAMPTZ)."""
    if sa_key(plan) == SA_ALIAS or session_type(plan, plan.sensitive) is not None:
        return hashable(plan, plan.sensitive, qcol(SA_ALIAS, table))
    return qcol(SA_KEY, table)


def keyed_select(plan: Plan, cells_table: str, parts_view: str, seed: int, labelled=(), ordered: bool = True) -> exp.Select:
    """Cells joined with their parts; the published QI strings are computed here, once per part:
    '*' where suppressed, the generalized label for the columns in `labelled`, else the class's
    text (every value of a class prints as that text: see histogram.key_of).

    Stored in the published order: by hash(seed, published strings, published SA) (kept as
    PART_HASH), then by those values (a total order of the distinct published rows; equal
    published rows are identical), so the histogram-only path publishes in this order. Nothing
    else enters the order. Not `ordered`: stored in any order (publish_select sorts the rows it
    publishes by their own keys)."""
    c, p = "c", "p"
    outputs = []
    for j in range(len(plan.qi)):
        shown = _varchar(qcol(qi_shown(plan, j), c))
        if j in labelled:
            shown = exp.If(this=qcol(f"l{j}", p), true=qcol(f"g{j}", p), false=shown)
        published = exp.If(this=qcol(f"m{j}", p), true=exp.Literal.string(STAR), false=shown)
        outputs.append(exp.alias_(published, out_alias(j), quoted=True))
    # the class keys (the join back matches on them), every QI value and the SA value (published)
    values = [qi_alias(j) for j in range(len(plan.qi))] + ([SA_ALIAS] if plan.sensitive else [])
    keys = [qcol(name, c) for name in dict.fromkeys(values + _key_aliases(plan))]
    split = qcol("split", p)
    shown_values = [binary_text(plan, out.this.copy()) for out in outputs] + ([_sa_text(plan, c)] if plan.sensitive else [])
    part_hash = exp.func("hash", exp.Literal.number(seed), *shown_values)
    order = [part_hash.copy(), *[v.copy() for v in shown_values]]
    # built in place (copy=False): copying these trees at every builder step cost more than the query
    key_hash = exp.alias_(_key_hash(plan, [qcol(a, c) for a in _key_aliases(plan)]), KEY_HASH, quoted=True)
    keyed = (
        exp.select(*keys, *outputs, qcol(CELL_ID, c), qcol(LO, p), qcol(HI, p), split,
                   qcol(BUCKETS, p), exp.alias_(part_hash, PART_HASH, quoted=True), key_hash, copy=False)
        .from_(_table(cells_table, c), copy=False)
        .join(_table(parts_view, p), on=exp.EQ(this=qcol(CELL_ID, c), expression=qcol(CELL_ID, p)), copy=False)
    )
    return keyed.order_by(*[exp.Ordered(this=o, nulls_first=False) for o in order], copy=False) if ordered else keyed


def _keyed_columns(plan: Plan) -> list[str]:
    """The source columns the class keys are computed from, in _key_aliases' order."""
    return plan.qi + ([plan.sensitive] if plan.sensitive else [])


def _key_hash(plan: Plan, keys: list[exp.Expr]) -> exp.Expr:
    """hash() of a row's class keys (in _key_aliases' order), each as the published order hashes
    it (histogram.key_hashable: strings and keys of text byte by byte): equal keys (histogram.key_of's
    equality) hash alike, whether computed on a source row or read from the cells table."""
    return exp.func("hash", *[key_hashable(plan, col, key) for col, key in zip(_keyed_columns(plan), keys)])


def key_hashes_distinct(backend: Backend, plan: Plan, cells_table: str) -> bool:
    """Whether no two cells of the histogram share a key hash. Then a source row's key hash names
    its cell exactly (every source row is in some cell, published or removed), and the join back
    can match on that one 64-bit value instead of every key (_match): measured at 10M rows, the
    join's probe no longer carries and compares nine strings per row. Engines whose hash() is
    narrower (32 bits: collisions among a few thousand cells are likely) keep the keys."""
    if not backend.hashes_64_bits:
        return False
    hashes = _key_hash(plan, [qcol(a) for a in _key_aliases(plan)])
    distinct, cells = backend.one(exp.select(exp.func("count", exp.Distinct(expressions=[hashes])), _count_all())
                                  .from_(exp.to_table(cells_table, quoted=True)))
    return distinct == cells


def _match(plan: Plan, source: str, keyed: str, by_key_hash: bool = False) -> exp.Expr:
    """A source row belongs to a keyed row: the same class keys (NULL-safe), computed on the
    source row the way the histogram computed them (histogram.key_of); or, `by_key_hash` (where
    key_hashes_distinct), the same hash of those keys."""
    keys = [key_of(kind_of(plan, col), qcol(col, source)) for col in _keyed_columns(plan)]
    if by_key_hash:
        return exp.EQ(this=_key_hash(plan, keys), expression=qcol(KEY_HASH, keyed))
    return exp.and_(*[
        exp.NullSafeEQ(this=key, expression=qcol(alias, keyed)) for key, alias in zip(keys, _key_aliases(plan))
    ])


def _expanded(items: list[exp.Expr], table: exp.Expr, count: exp.Expr, copy_name: str = "copy") -> exp.Select:
    """`items` over `count` copies of each row of `table`, in the table's stored order: UNNEST(
    range(count)) in the SELECT list, as an Alias node (alias_() would name the UNNEST's table
    alias, which Spark cannot place); `copy_name` must be no column of `table`."""
    unnest = exp.Unnest(expressions=[exp.func("range", count, dialect="duckdb")])
    copies = exp.select(exp.Star(), exp.Alias(this=unnest, alias=exp.to_identifier(copy_name, quoted=True))).from_(table)
    return exp.select(*items).from_(copies.subquery("expanded"))


def _published_from_keyed(plan: Plan) -> list[exp.Expr]:
    """The published columns, in source order, from a keyed row: QIs as published, the SA's value."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    return [exp.alias_(qcol(out_alias(qi_index[c.lower()]) if c.lower() in qi_index else SA_ALIAS), c, quoted=True)
            for c in plan.published]


def _part_rows() -> exp.Expr:
    return exp.Add(this=exp.Sub(this=qcol(HI), expression=qcol(LO)), expression=exp.Literal.number(1))


def histogram_publish_select(plan: Plan, keyed_table: str, blocks_table: str | None = None) -> exp.Select:
    """The published rows generated from the keyed table alone, `hi - lo + 1` copies per part, or
    from its parts cut into blocks (blocks_select) when `blocks_table` is given: the same rows.

    Used when nothing per-row is published (no `keep` columns): then every row of a part is
    identical in the output, so the source need not be read again. Rows come out in the keyed
    table's stored order (keyed_select: by the published values and the seed), identical rows
    next to each other. DuckDB keeps that order only while preserve_insertion_order is on: run
    the CREATEs inside `keeping_insertion_order`.
    """
    if blocks_table is None:
        return _expanded(_published_from_keyed(plan), exp.to_table(keyed_table, quoted=True), _part_rows())
    return _published_rows(plan, exp.to_table(blocks_table, quoted=True), _block_count(plan))


def _published_rows(plan: Plan, table: exp.Table, count: str) -> exp.Select:
    """The published columns of `table` (a table of published rows and how many rows each stands
    for: the blocks, or the view's counts), each row repeated `count` times in stored order."""
    items = [exp.alias_(qcol(c), c, quoted=True) for c in plan.published]
    return _expanded(items, table, qcol(count), unused_name(plan, "copy"))


def rows_per_block(total_rows: int, threads: int, scan_unit_rows: int | None) -> int | None:
    """How many rows a block of blocks_select holds, so that the blocks fill about two of the
    engine's scan units per thread; None where cutting gains nothing (one thread, fewer than
    BLOCKED_FROM_ROWS rows, an engine that does not split its scans into units of rows).

    Why blocks: the keyed table of a few thousand parts is one scan unit (a DuckDB row group), so
    every row generated from it came from one thread, while the floor's join ran on all of them."""
    if scan_unit_rows is None or threads < 2 or total_rows < BLOCKED_FROM_ROWS:
        return None
    return max(2, total_rows // (2 * threads * scan_unit_rows))


def blocks_select(plan: Plan, keyed_table: str, block_rows: int) -> exp.Select:
    """Every part of the keyed table cut into blocks of `block_rows` rows (the last one shorter),
    in the keyed table's order: the published columns and the block's row count."""
    rows = exp.paren(_part_rows())
    size = exp.Literal.number(block_rows)
    blocks = exp.IntDiv(this=exp.paren(exp.Add(this=rows, expression=exp.Literal.number(block_rows - 1))),
                        expression=size.copy())
    block = unused_name(plan, "block")
    in_block = exp.func("least", size.copy(), exp.Sub(this=rows.copy(), expression=exp.Mul(
        this=qcol(block), expression=size.copy())))
    return _expanded([*_published_from_keyed(plan), exp.alias_(in_block, _block_count(plan), quoted=True)],
                     exp.to_table(keyed_table, quoted=True), blocks, copy_name=block)


def _block_count(plan: Plan) -> str:
    return unused_name(plan, "block_rows")


def unused_name(plan: Plan, name: str) -> str:
    """`name`, or `_name`, `__name`...: a column name no published column has."""
    taken = {c.lower() for c in plan.published}
    while name in taken:
        name = "_" + name
    return name


def count_column(plan: Plan) -> str:
    """The name of the count in the table of counts."""
    return unused_name(plan, "published_count")


def counts_select(plan: Plan, keyed_table: str) -> exp.Select:
    """materialize = 'view': the table behind the view, one row per distinct published row (its
    published columns under their names, and how many rows publish it), stored in the keyed
    table's (seeded) order, so the view expands to the very rows and order the table form has.
    Rows are distinct byte by byte (the part hash and texts keyed_select orders by), and within one
    every value prints alike, so any_value() is exact. Only published values: never a class key,
    never a source value a row hides."""
    texts = [binary_text(plan, qcol(out_alias(j))) for j in range(len(plan.qi))] + (
        [_sa_text(plan)] if plan.sensitive else [])
    values = [exp.alias_(exp.func("any_value", item.this), item.alias, quoted=True) for item in _published_from_keyed(plan)]
    total = exp.alias_(exp.cast(exp.func("sum", _part_rows()), exp.DataType.build("BIGINT")), count_column(plan), quoted=True)
    return (exp.select(*values, total).from_(exp.to_table(keyed_table, quoted=True))
            .group_by(qcol(PART_HASH), *texts)
            .order_by(*[exp.Ordered(this=o, nulls_first=False) for o in [qcol(PART_HASH), *[t.copy() for t in texts]]]))


def view_select(plan: Plan, counts: TableName) -> exp.Select:
    """materialize = 'view': the published rows, each row of the table of counts repeated `count`
    times in the table's stored order (a SELECT over one table keeps it while the reader's
    preserve_insertion_order is on, DuckDB's default). The table is named without its catalog
    and schema: DuckDB binds a view's names in the view's own, so the view still reads its table
    when the database file is attached under another name."""
    return _published_rows(plan, exp.Table(this=exp.to_identifier(counts.name, quoted=True)), count_column(plan))


def _literals(strings: tuple[str, ...]) -> list[exp.Expr]:
    return [exp.Literal.string(s) for s in strings]


def _distinct_list(text: exp.Expr) -> exp.Expr:
    return exp.func("list", exp.Distinct(expressions=[text]))


def _sorted_set(text: exp.Expr) -> exp.Expr:
    """collect_set, sorted: its own order is its hash set's; the same strings make the same statement."""
    return exp.ArraySort(this=exp.ArrayUniqueAgg(this=text))


def _as_enum(value: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType(this=exp.DataType.Type.ENUM, expressions=_literals(strings)))


def _enum_text(code: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    return _varchar(code)


def _position_in(value: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    """The 1-based position of `value` in the strings (NULL for NULL), as the INT element_at takes."""
    position = exp.ArrayPosition(this=exp.Array(expressions=_literals(strings)), expression=value)
    return exp.Cast(this=position, to=exp.DataType.build("INT"))


def _string_at(code: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    """The string at the 1-based position `code` (NULL for NULL)."""
    return exp.func("element_at", exp.Array(expressions=_literals(strings)), code)


def _enum_number(value: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    """The 1-based number of `value` among the strings (0 for NULL), found byte by byte by the ENUM's cast."""
    code = exp.func("enum_code", _as_enum(value, strings), dialect="duckdb")
    return exp.func("coalesce", exp.Add(this=code, expression=exp.Literal.number(1)), exp.Literal.number(0))


def _list_item(number: exp.Expr, strings: tuple[str, ...]) -> exp.Expr:
    """The string numbered `number` (1-based; 0 gives NULL)."""
    return exp.func("list_extract", exp.Array(expressions=_literals(strings)), number, dialect="duckdb")


@dataclass(frozen=True)
class Coding:
    """How an engine's sort carries a column's few published strings as small codes: `collect`
    aggregates the column's distinct strings into an array (byte-wise distinct), `encode` gives a
    string's code below the sort, `decode` the string of a code above it. Where `number` and
    `string_at` exist, a column of at most PACK_LIMIT strings goes into the part keys instead:
    `number` gives a string's 1-based number (0 for NULL) below the sort, `string_at` the string of
    a number above it."""

    collect: Callable[[exp.Expr], exp.Expr]
    encode: Callable[[exp.Expr, tuple[str, ...]], exp.Expr]
    decode: Callable[[exp.Expr, tuple[str, ...]], exp.Expr]
    number: Callable[[exp.Expr, tuple[str, ...]], exp.Expr] | None = None
    string_at: Callable[[exp.Expr, tuple[str, ...]], exp.Expr] | None = None


# By preference, the first one the backend has (its capability flag). DuckDB: an ENUM, one or two
# bytes, or a few bits of a part key. Spark: the string's position in the sorted array of the
# column's strings, one fixed 8-byte field of a row through the shuffle and the sort, where a string
# takes that field and its bytes.
CODINGS = (
    ("has_enum_types", Coding(collect=_distinct_list, encode=_as_enum, decode=_enum_text,
                              number=_enum_number, string_at=_list_item)),
    ("has_array_positions", Coding(collect=_sorted_set, encode=_position_in, decode=_string_at)),
)


def coding_of(backend: Backend) -> Coding | None:
    return next((coding for flag, coding in CODINGS if getattr(backend, flag)), None)


@dataclass(frozen=True)
class Dictionary:
    """The distinct published strings of one QI column and the coding its rows are sorted in."""

    strings: tuple[str, ...]
    coding: Coding

    def encoded(self, value: exp.Expr) -> exp.Expr:
        return self.coding.encode(value, self.strings)

    def decoded(self, code: exp.Expr) -> exp.Expr:
        return self.coding.decode(code, self.strings)

    @property
    def packs(self) -> bool:
        """Whether the column goes into the part keys (publish_select)."""
        return self.coding.number is not None and len(self.strings) <= PACK_LIMIT

    @property
    def bits(self) -> int:
        """The bits of a part key its numbers take: 0 (NULL) to len(strings)."""
        return len(self.strings).bit_length()

    def numbered(self, value: exp.Expr) -> exp.Expr:
        return self.coding.number(value, self.strings)

    def string_at(self, number: exp.Expr) -> exp.Expr:
        return self.coding.string_at(number, self.strings)


def _seeded_order(strings: list[str], seed: int) -> tuple[str, ...]:
    """The strings in an order drawn by the seed from their bytes alone (blake2b of seed and
    string, then the string): the published rows' order may depend on nothing else."""
    def key(text: str) -> tuple[bytes, str]:
        return blake2b(f"{seed}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest(), text
    return tuple(sorted(strings, key=key))


def published_dictionaries(backend: Backend, plan: Plan, keyed_table: str, seed: int) -> dict[int, Dictionary]:
    """Per QI column j with at most ENUM_LIMIT distinct published strings (compared byte by byte):
    those strings in the seed's order (which orders the part keys), the dictionary of the codes its
    rows are sorted as (publish_select). Empty on an engine that has no coding (CODINGS)."""
    coding = coding_of(backend)
    if coding is None or not plan.qi:
        return {}
    columns = [coding.collect(binary_text(plan, qcol(out_alias(j)))) for j in range(len(plan.qi))]
    found = backend.one(exp.select(*columns).from_(exp.to_table(keyed_table, quoted=True)))
    strings = [[v for v in values or [] if v is not None] for values in found]
    # a column of NULLs alone is not coded (ENUM() is no type); nor one with a NUL character in a
    # string: the codings write the strings into the statement, and DuckDB 1.5's parser ends a
    # literal there ("unterminated quoted string")
    return {j: Dictionary(_seeded_order(values, seed), coding)
            for j, values in enumerate(strings) if 0 < len(values) <= ENUM_LIMIT and not any("\x00" in v for v in values)}


def part_key_layout(dictionaries: dict[int, Dictionary]) -> dict[int, tuple[int, int]]:
    """Per QI column that packs: (part key word, bit shift). Columns fill 64-bit words in column
    order, the first column in the highest bits of the first word, so the rows sort by the first
    column's numbers, then the next."""
    layout, word, used = {}, 0, 0
    for j in sorted(j for j, d in dictionaries.items() if d.packs):
        bits = dictionaries[j].bits
        if used + bits > WORD_BITS:
            word, used = word + 1, 0
        used += bits
        layout[j] = (word, used)  # the shift from the word's top: fixed up below
    words = {}
    for j, (w, top) in layout.items():
        words[w] = max(words.get(w, 0), top)
    return {j: (w, words[w] - top) for j, (w, top) in layout.items()}


def _part_key_words(dictionaries: dict[int, Dictionary], layout: dict[int, tuple[int, int]]) -> list[exp.Expr]:
    """The part key words of a keyed row (its o{j} columns): each packing column's number, shifted."""
    ubigint = exp.DataType.build("UBIGINT", dialect="duckdb")
    words: dict[int, list[exp.Expr]] = {}
    for j, (w, shift) in layout.items():
        number = exp.cast(dictionaries[j].numbered(qcol(out_alias(j))), ubigint)
        words.setdefault(w, []).append(
            exp.BitwiseLeftShift(this=number, expression=exp.Literal.number(shift)) if shift else number)
    return [exp.alias_(_sum_of(words[w]), f"{PART_KEY}{w}", quoted=True) for w in sorted(words)]


def _sum_of(terms: list[exp.Expr]) -> exp.Expr:
    total = terms[0]
    for term in terms[1:]:
        total = exp.Add(this=total, expression=term)
    return total


def _unpacked(dictionary: Dictionary, word: exp.Expr, shift: int) -> exp.Expr:
    """A packing column's string, from its bits of a part key word."""
    bits = exp.BitwiseRightShift(this=word, expression=exp.Literal.number(shift)) if shift else word
    number = exp.BitwiseAnd(this=exp.paren(bits), expression=exp.Literal.number((1 << dictionary.bits) - 1))
    return dictionary.string_at(exp.cast(number, exp.DataType.build("BIGINT")))


def _sorted_as(value: exp.Expr, dictionary: Dictionary | None) -> exp.Expr:
    return value if dictionary is None else dictionary.encoded(value)


def _ordering(plan: Plan, per_row: list[str]) -> list[str]:
    """The per-row columns a row's order hash reads: the kept ones. The sensitive value is the
    same on every row of a cell, and so of a part (it is part of the cell's key, and the part hash
    covers it): hashing it per row added nothing to the order and cost 0.1 s at 10M rows. Except
    where equal keys allow unequal values (a TEXT-kind column: values that print alike) or the
    key is several sensitive columns' combination."""
    if plan.sensitive is None or len(plan.sensitives) > 1 or kind_of(plan, plan.sensitive) == TEXT:
        return per_row
    return [c for c in per_row if c.lower() != plan.sensitive.lower()] or per_row


def _row_hash(plan: Plan, seed: exp.Expr, per_row: list[str], table: str, name=None) -> exp.Expr:
    """A split cell's row's place in its cell: hash(seed, the row's own published values), read
    from `table` under `name(column)` (v{i} by default)."""
    name = name or (lambda c: f"v{plan.published.index(c)}")
    return exp.func("hash", seed, *[hashable(plan, c, qcol(name(c), table)) for c in _ordering(plan, per_row)])


def _tie_key(value: exp.Expr) -> exp.Expr:
    """A per-row published value as it breaks ties of the order hash (Backend.breaks_hash_ties):
    its text, which every type has and which tells apart what Spark's sort and hashes take as
    equal or cannot order (-0.0 and 0.0, a MAP kept where hashing maps is allowed)."""
    return exp.cast(value, exp.DataType.build("VARCHAR"))


def _row_ties(plan: Plan, per_row: list[str], table: str, name=None) -> list[exp.Expr]:
    """The tie keys of _row_hash over the same columns, read the same way."""
    name = name or (lambda c: f"v{plan.published.index(c)}")
    return [_tie_key(qcol(name(c), table)) for c in per_row]


def _split_rows(plan: Plan, keyed_table: str, seed: exp.Expr, per_row: list[str], large: bool,
                by_key_hash: bool = False, break_ties: bool = False) -> exp.Select:
    """The rows of split cells: their own published values (v{i}, the SA and kept columns) and
    their cell. A row's place in its cell's seeded order comes from hash(seed, those values):
    never a QI value the parts may suppress, and equal for every spelling of the cell.

    `large`: the cells of several buckets (keyed_arrow's BUCKETS), each row with its bucket, the
    hash modulo the cell's bucket count; the cell's order is by bucket, then hash (_bucket_parts).
    Else the cells of one bucket, each row with its rank in the cell (RANK), by a window (ordered
    by the hash, then, where `break_ties`, by the row's own values)."""
    several = exp.GT(this=qcol(BUCKETS), expression=exp.Literal.number(1))
    split_cells = (
        exp.select(*[qcol(a) for a in _key_aliases(plan)], qcol(KEY_HASH), qcol(CELL_ID), qcol(BUCKETS))
        .from_(exp.to_table(keyed_table, quoted=True))
        .where(exp.and_(qcol("split"), several if large else exp.Not(this=exp.paren(several)))).distinct()
    )
    row_hash = _row_hash(plan, seed, per_row, "src", lambda c: c)
    own = [f"v{plan.published.index(c)}" for c in per_row]
    values = [exp.alias_(qcol(c, "src"), v, quoted=True) for c, v in zip(per_row, own)]
    source = exp.alias_(plan.source.table.copy(), "src", table=True)
    cells = exp.alias_(split_cells.subquery(), "k", table=True)
    if not large:
        ties = _row_ties(plan, per_row, "src", lambda c: c) if break_ties else []
        rank = exp.Window(this=exp.Anonymous(this="ROW_NUMBER"), partition_by=[qcol(CELL_ID, "k")],
                          order=exp.Order(expressions=[exp.Ordered(this=o) for o in [row_hash, *ties]]))
        return (exp.select(*values, qcol(CELL_ID, "k"), exp.alias_(rank, RANK, quoted=True))
                .from_(source).join(cells, on=_match(plan, "src", "k", by_key_hash)))
    hashed = (
        exp.select(*values, qcol(CELL_ID, "k"), qcol(BUCKETS, "k"), exp.alias_(row_hash, ROW_HASH, quoted=True))
        .from_(source).join(cells, on=_match(plan, "src", "k", by_key_hash))
    )
    # the hash modulo MAX_BUCKETS (a literal: DuckDB keeps its UBIGINT hash unsigned, where a
    # BIGINT divisor would make the modulo HUGEINT and cost more than the rest of this query),
    # then modulo the cell's bucket count, a power of two that divides it. (Spark's hash is signed
    # and its % keeps the sign: buckets -(b - 1) .. b - 1, as many rows in each but bucket 0, which
    # gets two shares; every bucket is still ranked and placed, so the parts' counts hold.)
    low = exp.cast(exp.Mod(this=qcol(ROW_HASH), expression=exp.Literal.number(MAX_BUCKETS)),
                   exp.DataType.build("BIGINT"))
    bucket = exp.Mod(this=low, expression=qcol(BUCKETS))
    return (exp.select(*[qcol(v) for v in own], qcol(CELL_ID), exp.alias_(bucket, BUCKET, quoted=True))
            .from_(hashed.subquery("hashed")))


def _bucket_parts(split_rows: str, coded_table: str) -> exp.Select:
    """Per bucket of a split cell: the rows of the cell's earlier buckets (BEFORE), so its rows hold
    the ranks BEFORE + 1 .. BEFORE + n of the cell in (bucket, hash) order; the part holding its
    first rank, with that part's columns; and whether the part holds all of them (WHOLE).

    The part is found without joining every bucket to every part of its cell: the parts' starts
    and the buckets' starts, in one list ordered by rank, each bucket takes the latest part start
    before it (a running max: the parts' ranges increase together)."""
    counts = (exp.select(qcol(CELL_ID), qcol(BUCKET), exp.alias_(_count_all(), "n", quoted=True))
              .from_(exp.to_table(split_rows, quoted=True)).group_by(qcol(CELL_ID), qcol(BUCKET)))
    running = exp.Window(
        this=exp.func("sum", qcol("n")), partition_by=[qcol(CELL_ID)],
        order=exp.Order(expressions=[exp.Ordered(this=qcol(BUCKET))]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"),
    )
    null = exp.Null()
    buckets = exp.select(
        qcol(CELL_ID), exp.alias_(exp.Sub(this=running, expression=qcol("n")), "pos", quoted=True),
        exp.alias_(exp.Literal.number(1), "is_bucket", quoted=True), qcol(BUCKET), qcol("n"),
        exp.alias_(null.copy(), LO, quoted=True), exp.alias_(null.copy(), HI, quoted=True),
    ).from_(counts.subquery("counts"))
    starts = exp.select(
        qcol(CELL_ID), exp.alias_(exp.Sub(this=qcol(LO), expression=exp.Literal.number(1)), "pos", quoted=True),
        exp.alias_(exp.Literal.number(0), "is_bucket", quoted=True), exp.alias_(null.copy(), BUCKET, quoted=True),
        exp.alias_(null.copy(), "n", quoted=True), qcol(LO), qcol(HI),
    ).from_(_table(coded_table, "parts")).where(
        exp.and_(qcol("split"), exp.GT(this=qcol(BUCKETS), expression=exp.Literal.number(1))))
    events = exp.union(buckets, starts, distinct=False)

    def latest(column: str) -> exp.Expr:
        return exp.alias_(exp.Window(
            this=exp.func("max", qcol(column)), partition_by=[qcol(CELL_ID)],
            order=exp.Order(expressions=[exp.Ordered(this=qcol("pos")), exp.Ordered(this=qcol("is_bucket"))]),
            spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"),
        ), f"part_{column}", quoted=True)

    located = (exp.select(qcol(CELL_ID), qcol("pos"), qcol("is_bucket"), qcol(BUCKET), qcol("n"),
                          latest(LO), latest(HI))
               .from_(events.subquery("events")))
    whole = exp.LTE(this=exp.Add(this=qcol("pos", "b"), expression=qcol("n", "b")), expression=qcol(f"part_{HI}", "b"))
    return (
        exp.select(qcol(BUCKET, "b"), exp.alias_(qcol("pos", "b"), BEFORE, quoted=True),
                   exp.alias_(whole, WHOLE, quoted=True), exp.Column(this=exp.Star(), table=exp.to_identifier("p")))
        .from_(exp.alias_(located.subquery(), "b", table=True))
        .join(_table(coded_table, "p"),
              on=exp.and_(exp.EQ(this=qcol(CELL_ID, "b"), expression=qcol(CELL_ID, "p")),
                          exp.EQ(this=qcol(f"part_{LO}", "b"), expression=qcol(LO, "p"))))
        .where(exp.EQ(this=qcol("is_bucket", "b"), expression=exp.Literal.number(1)))
    )


def coded_select(plan: Plan, keyed_table: str, dictionaries: dict[int, Dictionary]) -> exp.Select:
    """The keyed table with each QI as the sort carries it (publish_select): the part key words of
    the columns that pack, a code e{j} for the others that have a dictionary, else the string.
    Stored as a table of its own: a computed build side made DuckDB's join back 0.4 s slower at
    10M rows than the same columns read from a table."""
    layout = part_key_layout(dictionaries)
    return exp.select(exp.Star(), *_part_key_words(dictionaries, layout), *[
        exp.alias_(_sorted_as(qcol(out_alias(j)), dictionaries.get(j)), f"e{j}", quoted=True)
        for j in range(len(plan.qi)) if j not in layout
    ]).from_(exp.to_table(keyed_table, quoted=True))


def publish_select(plan: Plan, coded_table: str, any_split: bool, seed: int,
                   dictionaries: dict[int, Dictionary] | None = None, by_key_hash: bool = False,
                   break_ties: bool = False) -> exp.Select:
    """The published rows: the source joined to the coded keyed table (coded_select; on the class
    keys, or on their hash where `by_key_hash`: key_hashes_distinct), ordered by the part keys
    (the packed QIs, DuckDB), then hash(part hash, the row's own published values). The other QIs
    travel through the sort as codes of `dictionaries` (published_dictionaries: ENUMs on DuckDB,
    positions on Spark) or as themselves; all are decoded above it, in a projection of the sorted
    subquery, which keeps its order. Where `break_ties` (Backend.breaks_hash_ties), every order by
    a row's hash goes on by what the row publishes, so rows whose hashes collide are ordered by
    their values too, never by the order they arrive in."""
    dictionaries = dictionaries or {}
    layout = part_key_layout(dictionaries)
    words = [f"{PART_KEY}{w}" for w in sorted({w for w, _ in layout.values()})]
    seed_literal = exp.Literal.number(seed)
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    per_row = [c for c in plan.published if c.lower() not in qi_index]  # the SA and kept columns

    def rows(keyed: str, source: str, source_name=lambda i, col: col) -> list[exp.Expr]:
        """QIs (coded) from the keyed row, the rest from the source row, then the row's sort keys."""
        items = []
        for i, col in enumerate(plan.published):
            j = qi_index.get(col.lower())
            if j in layout:
                continue
            value = qcol(f"e{j}", keyed) if j is not None else qcol(source_name(i, col), source)
            items.append(exp.alias_(value, f"v{i}", quoted=True))
        items.extend(qcol(word, keyed) for word in words)
        own = [hashable(plan, col, qcol(source_name(plan.published.index(col), col), source))
               for col in _ordering(plan, per_row)]
        items.append(exp.alias_(exp.func("hash", qcol(PART_HASH, keyed), *own), ROW_ORDER, quoted=True))
        return items

    body = (
        exp.select(*rows("k", "src"))
        .from_(exp.alias_(plan.source.table.copy(), "src", table=True))
        .join(_table(coded_table, "k"), on=_match(plan, "src", "k", by_key_hash))
    )
    ctes = []
    if any_split:
        # Rows of split cells go to the part whose rank range (within the cell) holds their rank in
        # the cell's seeded order. Cells of fewer than SMALL_CELL rows are numbered by a window over
        # the cell; larger ones by buckets (_split_rows), so that no window sorts a whole large cell
        # on one thread. Either branch without cells costs nothing: DuckDB skips the probe side
        # of a join with an empty build side.
        body = body.where(exp.Not(this=qcol("split", "k")))
        split_rows, buckets = f"{coded_table}_split", f"{coded_table}_buckets"
        ctes = [(split_rows, _split_rows(plan, coded_table, seed_literal, per_row, large=True, by_key_hash=by_key_hash,
                                         break_ties=break_ties)),
                (buckets, _bucket_parts(split_rows, coded_table))]

        def in_part(ranked: exp.Select) -> exp.Select:
            """Rows of `ranked` (own values v{i}, cell id, rank) in the part whose range holds the rank."""
            in_range = exp.and_(
                exp.EQ(this=qcol(CELL_ID, "x"), expression=qcol(CELL_ID, "p")),
                exp.Between(this=qcol(RANK, "x"), low=qcol(LO, "p"), high=qcol(HI, "p")),
            )
            return (exp.select(*rows("p", "x", source_name=lambda i, col: f"v{i}"))
                    .from_(ranked.subquery("x"))
                    .join(_table(coded_table, "p"), on=in_range))

        small = in_part(_split_rows(plan, coded_table, seed_literal.copy(), per_row, large=False,
                                    by_key_hash=by_key_hash, break_ties=break_ties))
        placed = exp.and_(exp.EQ(this=qcol(CELL_ID, "r"), expression=qcol(CELL_ID, "m")),
                          exp.EQ(this=qcol(BUCKET, "r"), expression=qcol(BUCKET, "m")))
        # rows of a bucket that lies in one part: that part, by two equality keys
        whole = (
            exp.select(*rows("m", "r", source_name=lambda i, col: f"v{i}"))
            .from_(_table(split_rows, "r"))
            .join(exp.alias_(exp.select(exp.Star()).from_(exp.to_table(buckets, quoted=True)).where(qcol(WHOLE))
                             .subquery(), "m", table=True), on=placed)
        )
        # rows of a bucket that straddles parts (one bucket per part boundary): ranked within the
        # bucket by their order hash, after the rows of the cell's earlier buckets
        straddling = (
            exp.select(qcol(CELL_ID), qcol(BUCKET), qcol(BEFORE)).distinct()
            .from_(exp.to_table(buckets, quoted=True)).where(exp.Not(this=qcol(WHOLE)))
        )
        rank = exp.Add(this=qcol(BEFORE, "m"), expression=exp.Window(
            this=exp.Anonymous(this="ROW_NUMBER"), partition_by=[qcol(CELL_ID, "r"), qcol(BUCKET, "r")],
            order=exp.Order(expressions=[exp.Ordered(this=o) for o in [
                _row_hash(plan, seed_literal.copy(), per_row, "r"),
                *(_row_ties(plan, per_row, "r") if break_ties else [])]]),
        ))
        cut = in_part(
            exp.select(*[qcol(f"v{plan.published.index(c)}", "r") for c in per_row], qcol(CELL_ID, "r"),
                       exp.alias_(rank, RANK, quoted=True))
            .from_(_table(split_rows, "r"))
            .join(exp.alias_(straddling.subquery(), "m", table=True), on=placed)
        )
        for branch in (small, whole, cut):
            body = exp.union(body, branch, distinct=False)
    ordered = (exp.select(exp.Star()).from_(body.subquery("published"))
               .order_by(*_sort_keys(words, _word_bits(dictionaries, layout), any_split),
                         *(_tie_keys(plan, layout) if break_ties else [])))
    outputs = []
    for i, col in enumerate(plan.published):
        value = qcol(f"v{i}")
        j = qi_index.get(col.lower())
        if j in layout:
            word, shift = layout[j]
            value = _collated(plan, col, _unpacked(dictionaries[j], qcol(f"{PART_KEY}{word}"), shift))
        elif j is not None and j in dictionaries:
            value = _collated(plan, col, dictionaries[j].decoded(value))
        outputs.append(exp.alias_(value, col, quoted=True))
    select = exp.select(*outputs).from_(ordered.subquery("sorted"))
    for name, query in ctes:
        select = select.with_(exp.to_identifier(name, quoted=True), as_=query)
    return select


def _tie_keys(plan: Plan, layout: dict[int, tuple[int, int]]) -> list[exp.Expr]:
    """The sorted rows' columns (v{i}) that break ties of their order hash: the QIs the part key
    words do not carry (codes or strings, as they are) and the per-row values (as _tie_key)."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    keys = []
    for i, col in enumerate(plan.published):
        j = qi_index.get(col.lower())
        if j is None:
            keys.append(_tie_key(qcol(f"v{i}")))
        elif j not in layout:
            keys.append(qcol(f"v{i}"))
    return keys


def _collated(plan: Plan, column: str, decoded: exp.Expr) -> exp.Expr:
    """A QI decoded from its code with the collation its column was declared with: the strings
    come back from constants, which have none, and the published column would otherwise compare
    differently from the same release published without `keep` (or from a column of more strings)."""
    collation = plan.column_collations.get(column.lower())
    return decoded if collation is None else exp.Collate(this=decoded, expression=exp.to_identifier(collation, quoted=True))


def _word_bits(dictionaries: dict[int, Dictionary], layout: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Per part key word, the bits its columns take (from the lowest)."""
    used: dict[int, int] = {}
    for j, (word, shift) in layout.items():
        used[word] = max(used.get(word, 0), shift + dictionaries[j].bits)
    return used


def _sort_keys(words: list[str], word_bits: dict[int, int], any_split: bool) -> list[exp.Expr]:
    """The published rows' sort keys: the part key words, then the row's order hash. With split
    cells, the last word's free low bits take the order hash's high bits (the hash stays the last
    key, for the rare ties): measured at 10M rows with one split cell of 7.5M rows in four part key
    values, sorting by (word, hash) cost 0.85 s more than by the one near-unique combined key,
    while without split cells the plain (word, hash) was the faster by 0.15 s (Adult, 19,502
    parts) or as fast (synthetic tables of 4 to 16,384 values, some skewed)."""
    keys: list[exp.Expr] = [qcol(word) for word in words]
    if any_split and words and word_bits[len(words) - 1] < WORD_BITS:
        used = word_bits[len(words) - 1]
        keys[-1] = exp.BitwiseOr(
            this=exp.paren(exp.BitwiseLeftShift(this=keys[-1], expression=exp.Literal.number(WORD_BITS - used))),
            expression=exp.paren(exp.BitwiseRightShift(this=qcol(ROW_ORDER), expression=exp.Literal.number(used))))
    return [*keys, qcol(ROW_ORDER)]


def _count_all() -> exp.Expr:
    return exp.func("count", exp.Star())


def _checksum(value: exp.Expr, weight: exp.Expr | None = None) -> exp.Expr:
    """coalesce(sum(weight * hash(value)), 0) as HUGEINT: order-free, so two multisets compare in
    one pass each."""
    hashed = exp.cast(exp.func("hash", *value), exp.DataType.build("HUGEINT", dialect="duckdb"))
    if weight is not None:
        hashed = exp.Mul(this=exp.cast(exp.paren(weight), exp.DataType.build("HUGEINT", dialect="duckdb")),
                         expression=hashed)
    return exp.func("coalesce", exp.func("sum", hashed), exp.Literal.number(0))


def check_published_rows(backend: Backend, plan: Plan, expected: int, keyed_table: str | None = None) -> None:
    """Before COMMIT: the published table holds the rows the solution published. A source that
    changes between its reads (a view with USING SAMPLE or random() that snapshot_source did not
    copy) would lose rows, add some, or move them to other classes; refuse it then, before anything
    is committed. Checked: the row count and, given the keyed table and a backend that can compare
    strings byte by byte, the multiset of published QI vectors, as a sum of their hashes (one pass
    over the published rows, no grouping)."""
    target = plan.target.table.copy()
    if plan.counts is not None:  # a view: its table of counts says how many rows it expands to
        total = exp.func("coalesce", exp.func("sum", qcol(count_column(plan))), exp.Literal.number(0))
        got = backend.one(exp.select(total).from_(plan.counts.table.copy()))[0]
        checksums = None
    elif keyed_table is None or not backend.has_collations:
        got = backend.one(exp.select(_count_all()).from_(target))[0]
        checksums = None
    else:
        qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
        shown = [c for c in plan.published if c.lower() in qi_index]  # published order = o{j} order below
        published = [binary_text(plan, qcol(out_alias(qi_index[c.lower()]))) for c in shown]
        columns = [binary_text(plan, qcol(c)) for c in shown]
        got, checksum = backend.one(exp.select(_count_all(), _checksum(columns)).from_(target))
        ranks = exp.Add(this=exp.Sub(this=qcol(HI), expression=qcol(LO)), expression=exp.Literal.number(1))
        wanted = backend.one(exp.select(_checksum(published, ranks)).from_(exp.to_table(keyed_table, quoted=True)))[0]
        checksums = (checksum, wanted)
    if got != expected or (checksums is not None and checksums[0] != checksums[1]):
        what = f"{got} rows would be published instead of {expected}" if got != expected else \
            "its rows would be published in other classes than the ones checked"
        raise AnonymizeError(
            f"the source changed while it was read ({what}): nothing was published; "
            "copy it into a table first (CREATE TABLE ... AS SELECT ...)")

