"""Step 4 of the pipeline, its keyed table: per part of a cell, the published QI strings.

A small "keyed" table holds, per cell (distinct published QI texts + SA text), the published QI
strings: the class's text, or '*' where the cell's group is suppressed, or the group's label. The
source is joined to it on the same class keys the histogram was grouped by (columns.key_of,
NULL-safe), or on one 64-bit hash of those keys where no two cells of the histogram share one
(key_hashes_distinct), so the only per-row work is one hash join. Cells whose rows go to groups
with different patterns ("split" cells) get one keyed row per part with a rank range, and only
their rows are numbered: by a window over the cell for small cells, by buckets of their order
hash for large ones (publish_select).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.errors import AnonymizeError
from duckanon.pipeline.arrays import arrow_array
from duckanon.pipeline.columns import ColumnFacts, binary_text, count_all, hashable, key_hashable, key_of, qcol
from duckanon.pipeline.histogram import CELL_ID, SA_ALIAS, SA_KEY, STAR, Cells, qi_alias, qi_key, qi_shown, sa_key
from duckanon.pipeline.plan import Plan
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
# histogram share one (key_hashes_distinct), else on the keys themselves (matches_keyed)
KEY_HASH = "key_hash"


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
    masks = (solution.group_rep == STAR_CODE)[part_group]  # (per group first: a part x m int64 copy is 8x larger)
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
    columns = {name: arrow_array(values) for name, values in
               ((CELL_ID, kept_cells), (LO, lo[keep]), (HI, hi[keep]), ("split", split), (BUCKETS, buckets))}
    for j in range(masks.shape[1]):
        columns[f"m{j}"] = arrow_array(masks[keep, j])
    kept_groups = arrow_array(groups[keep])
    for j, labels in enumerate(solution.group_labels or []):
        if labels is None:
            continue
        # per group first (few), then taken for every part
        per_group = pa.array([None if label == SHOW_VALUE else label for label in labels], type=pa.string())
        chosen = per_group.take(kept_groups)
        columns[f"l{j}"] = chosen.is_valid()
        columns[f"g{j}"] = chosen
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def aliased_table(name: str, alias: str) -> exp.Expr:
    return exp.alias_(exp.to_table(name, quoted=True), alias, table=True)


def varchar(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))


def key_aliases(plan: Plan, facts: ColumnFacts) -> list[str]:
    """The keyed table's columns holding the class keys: one per QI, and the SA's."""
    return [qi_key(plan, facts, j) for j in range(len(plan.qi))] + ([sa_key(plan, facts)] if plan.sensitive else [])


def sa_text(plan: Plan, facts: ColumnFacts, table: str | None = None) -> exp.Expr:
    """The published sensitive value of a keyed row, as something that differs exactly when the
    published values do (the value, or its text where spellings differ: its canonical text where a
    session prints it in its settings, a LIST of TIMESTAMPTZ)."""
    if sa_key(plan, facts) == SA_ALIAS or facts.session_type(plan.sensitive) is not None:
        return hashable(facts, plan.sensitive, qcol(SA_ALIAS, table))
    return qcol(SA_KEY, table)


def keyed_select(plan: Plan, facts: ColumnFacts, cells_table: str, parts_view: str, seed: int, labelled=(),
                 join_back: bool = False) -> exp.Select:
    """Cells joined with their parts; the published QI strings are computed here, once per part:
    '*' where suppressed, the generalized label for the columns in `labelled`, else the class's
    text (every value of a class prints as that text: see columns.key_of).

    Stored in the published order: by hash(seed, published strings, published SA) (kept as
    PART_HASH), then by those values (a total order of the distinct published rows; equal
    published rows are identical), so the histogram-only path publishes in this order. Nothing
    else enters the order.

    For the `join_back` (kept columns: publish_select joins the source to it) the table also holds
    every class key and their hash, and is stored in any order (publish_select sorts the rows it
    publishes by their own keys). Without it only what is published and the SA's key are kept: at
    10M x 50 the QIs' keys were half the table DuckDB had to hold and sort."""
    c, p = "c", "p"
    outputs = []
    for j in range(len(plan.qi)):
        shown = varchar(qcol(qi_shown(plan, facts, j), c))
        if j in labelled:
            shown = exp.If(this=qcol(f"l{j}", p), true=qcol(f"g{j}", p), false=shown)
        published = exp.If(this=qcol(f"m{j}", p), true=exp.Literal.string(STAR), false=shown)
        outputs.append(exp.alias_(published, out_alias(j), quoted=True))
    # the class keys (the join back matches on them), every QI value and the SA value (published)
    values = [qi_alias(j) for j in range(len(plan.qi))] + ([SA_ALIAS] if plan.sensitive else [])
    kept = values + key_aliases(plan, facts) if join_back else (
        [SA_ALIAS, sa_key(plan, facts)] if plan.sensitive else [])  # (counts_select's sa_text reads the SA's key)
    keys = [qcol(name, c) for name in dict.fromkeys(kept)]
    split = qcol("split", p)
    shown_values = [binary_text(facts, out.this.copy()) for out in outputs] + ([sa_text(plan, facts, c)] if plan.sensitive else [])
    part_hash = exp.func("hash", exp.Literal.number(seed), *shown_values)
    order = [part_hash.copy(), *[v.copy() for v in shown_values]]
    # built in place (copy=False): copying these trees at every builder step cost more than the query
    key_hash = [exp.alias_(_key_hash(plan, facts, [qcol(a, c) for a in key_aliases(plan, facts)]), KEY_HASH,
                           quoted=True)] if join_back else []
    keyed = (
        exp.select(*keys, *outputs, qcol(CELL_ID, c), qcol(LO, p), qcol(HI, p), split,
                   qcol(BUCKETS, p), exp.alias_(part_hash, PART_HASH, quoted=True), *key_hash, copy=False)
        .from_(aliased_table(cells_table, c), copy=False)
        .join(aliased_table(parts_view, p), on=exp.EQ(this=qcol(CELL_ID, c), expression=qcol(CELL_ID, p)), copy=False)
    )
    return keyed if join_back else keyed.order_by(*[exp.Ordered(this=o, nulls_first=False) for o in order], copy=False)


def _keyed_columns(plan: Plan) -> list[str]:
    """The source columns the class keys are computed from, in key_aliases' order."""
    return plan.qi + ([plan.sensitive] if plan.sensitive else [])


def _key_hash(plan: Plan, facts: ColumnFacts, keys: list[exp.Expr]) -> exp.Expr:
    """hash() of a row's class keys (in key_aliases' order), each as the published order hashes
    it (columns.key_hashable: strings and keys of text byte by byte): equal keys (columns.key_of's
    equality) hash alike, whether computed on a source row or read from the cells table."""
    return exp.func("hash", *[key_hashable(facts, col, key) for col, key in zip(_keyed_columns(plan), keys)])


def key_hashes_distinct(backend: Backend, plan: Plan, facts: ColumnFacts, cells_table: str) -> bool:
    """Whether no two cells of the histogram share a key hash. Then a source row's key hash names
    its cell exactly (every source row is in some cell, published or removed), and the join back
    can match on that one 64-bit value instead of every key (matches_keyed): measured at 10M rows, the
    join's probe no longer carries and compares nine strings per row. Engines whose hash() is
    narrower (32 bits: collisions among a few thousand cells are likely) keep the keys."""
    if not backend.hashes_64_bits:
        return False
    hashes = _key_hash(plan, facts, [qcol(a) for a in key_aliases(plan, facts)])
    distinct, cells = backend.one(exp.select(exp.func("count", exp.Distinct(expressions=[hashes])), count_all())
                                  .from_(exp.to_table(cells_table, quoted=True)))
    return distinct == cells


def matches_keyed(plan: Plan, facts: ColumnFacts, source: str, keyed: str, by_key_hash: bool = False) -> exp.Expr:
    """A source row belongs to a keyed row: the same class keys (NULL-safe), computed on the
    source row the way the histogram computed them (columns.key_of); or, `by_key_hash` (where
    key_hashes_distinct), the same hash of those keys."""
    keys = [key_of(facts.kind(col), qcol(col, source)) for col in _keyed_columns(plan)]
    if by_key_hash:
        return exp.EQ(this=_key_hash(plan, facts, keys), expression=qcol(KEY_HASH, keyed))
    return exp.and_(*[
        exp.NullSafeEQ(this=key, expression=qcol(alias, keyed)) for key, alias in zip(keys, key_aliases(plan, facts))
    ])
