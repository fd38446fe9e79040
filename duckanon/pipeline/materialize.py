"""Step 4 of the pipeline: the published table, written by the engine, and its check before COMMIT.

`materialize(backend, plan, facts, cells, solution, seed)` writes the target in one of three
forms, from the keyed table (keyed.py: per part of a cell, the published QI strings):
- no `keep` column: every row of a part is the same, so the rows are generated from the keyed
  table alone (generated.py), from blocks of its parts when the release is large;
- `keep` columns: the source is joined back to the keyed table, its QIs coded by their
  dictionaries (dictionaries.py), and the rows sorted by their own keys (join_back.py);
- materialize = 'view': a view over a table of the count of each published row (generated.py).
`check_published_rows` then compares the target with what the solution published.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import ColumnFacts, binary_text, count_all, qcol, scratch_name
from duckanon.pipeline.dictionaries import coded_select, published_dictionaries
from duckanon.pipeline.generated import (blocks_select, count_column, counts_select, histogram_publish_select,
                                         rows_per_block, view_select)
from duckanon.pipeline.histogram import Cells
from duckanon.pipeline.join_back import publish_select
from duckanon.pipeline.keyed import HI, LO, key_hashes_distinct, keyed_arrow, keyed_select, out_alias
from duckanon.pipeline.plan import Plan, counts_name, is_counts_of
from duckanon.solver.partition import Solution
from duckanon.names import TableName


@dataclass(frozen=True)
class Written:
    """What materialize left in the engine: the keyed table (check_published_rows reads it again)
    and every temp table it made (the keyed table's among them), for the caller to drop."""

    keyed_table: str
    temps: tuple[str, ...]


def labelled_columns(solution: Solution) -> set[int]:
    """The QI columns the solution publishes as labels (ranges, sets, hierarchy levels)."""
    return {j for j, labels in enumerate(solution.group_labels or []) if labels is not None}


def any_split(parts: pa.Table) -> bool:
    """Whether some cell's rows go to several parts (keyed_arrow's `split`)."""
    return bool(pc.any(parts["split"]).as_py())


def materialize(backend: Backend, plan: Plan, facts: ColumnFacts, cells: Cells, solution: Solution,
                seed: int) -> Written:
    """Write the target of `plan` (a table, or the view and its table of counts) with the rows the
    solution publishes from `cells`, in the order the seed draws (join_back's docstring)."""
    keyed_table, parts_view = scratch_name("keyed"), scratch_name("parts")
    parts = keyed_arrow(cells, solution)
    backend.register_arrow(parts_view, parts)
    # without kept columns the published order is the keyed table's (seeded) order; with them
    # the published rows are sorted by their own keys, and the keyed table's order is not read
    with backend.keeping_insertion_order():
        backend.create_temp(keyed_table, keyed_select(plan, facts, cells.table, parts_view, seed,
                                                      labelled=labelled_columns(solution), join_back=bool(plan.keep)))
        backend.unregister(parts_view)
        if plan.counts is not None:  # materialize = 'view': a view over the count of each published row
            backend.create_target(plan.counts, counts_select(plan, facts, keyed_table))
            backend.create_target(plan.target, view_select(plan, plan.counts), kind="VIEW")
            return Written(keyed_table, (keyed_table,))
        _drop_replaced_counts(backend, plan.target)
        if plan.keep:  # per-row values are published: join the keyed table back to the source
            published, temps = _joined_back(backend, plan, facts, cells, keyed_table, any_split(parts), seed)
        else:  # every published row is determined by its cell: no second pass over the source
            published, temps = _generated(backend, plan, keyed_table, cells.histogram.n_rows)
        backend.create_target(plan.target, published)
    return Written(keyed_table, (keyed_table, *temps))


def _joined_back(backend: Backend, plan: Plan, facts: ColumnFacts, cells: Cells, keyed_table: str, split: bool,
                 seed: int) -> tuple[exp.Select, tuple[str, ...]]:
    """The keep path's published SELECT, and the temp table it reads (the coded keyed table)."""
    coded_table = scratch_name("coded")
    dictionaries = published_dictionaries(backend, plan, facts, keyed_table, seed)
    backend.create_temp(coded_table, coded_select(plan, keyed_table, dictionaries))
    published = publish_select(plan, facts, coded_table, split, seed, dictionaries,
                               by_key_hash=key_hashes_distinct(backend, plan, facts, cells.table),
                               tie_key=backend.tie_key)
    return published, (coded_table,)


def _generated(backend: Backend, plan: Plan, keyed_table: str, rows: int) -> tuple[exp.Select, tuple[str, ...]]:
    """The published SELECT generated from the keyed table, and the temp table of blocks it reads
    when the release is large enough to be cut (rows_per_block)."""
    block_rows = rows_per_block(rows, backend.threads(), backend.scan_unit_rows)
    if block_rows is None:
        return histogram_publish_select(plan, keyed_table), ()
    blocks_table = scratch_name("blocks")
    backend.create_temp(blocks_table, blocks_select(plan, keyed_table, block_rows))
    return histogram_publish_select(plan, keyed_table, blocks_table), (blocks_table,)


def _drop_replaced_counts(backend: Backend, target: TableName) -> None:
    """A view published with materialize = 'view' and now replaced by a table leaves its table of
    counts behind: dropped with it (only the one duckanon made for that view)."""
    if backend.existing_kind(target) == "VIEW":
        counts = counts_name(target)
        if is_counts_of(backend.catalog_entry(counts), target):
            backend.drop_object(counts, "TABLE")


def read_twice(backend: Backend, plan: Plan, read: Plan) -> bool:
    """Whether the published rows came from a second read of the source `read` that could differ
    from the histogram's: the keep path joins the source back, unless what it reads (the source,
    or its snapshot) reads the same every time."""
    return bool(plan.keep) and not (backend.reads_stably and backend.source_is_stable(read.source, read.published))


def _checksum(value: exp.Expr, weight: exp.Expr | None = None) -> exp.Expr:
    """coalesce(sum(weight * hash(value)), 0) as HUGEINT: order-free, so two multisets compare in
    one pass each."""
    hashed = exp.cast(exp.func("hash", *value), exp.DataType.build("HUGEINT", dialect="duckdb"))
    if weight is not None:
        hashed = exp.Mul(this=exp.cast(exp.paren(weight), exp.DataType.build("HUGEINT", dialect="duckdb")),
                         expression=hashed)
    return exp.func("coalesce", exp.func("sum", hashed), exp.Literal.number(0))


def check_published_rows(backend: Backend, plan: Plan, facts: ColumnFacts, expected: int,
                         keyed_table: str | None = None) -> None:
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
    elif keyed_table is None or not facts.collations:
        got = backend.one(exp.select(count_all()).from_(target))[0]
        checksums = None
    else:
        qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
        shown = [c for c in plan.published if c.lower() in qi_index]  # published order = o{j} order below
        published = [binary_text(facts, qcol(out_alias(qi_index[c.lower()]))) for c in shown]
        columns = [binary_text(facts, qcol(c)) for c in shown]
        got, checksum = backend.one(exp.select(count_all(), _checksum(columns)).from_(target))
        ranks = exp.Add(this=exp.Sub(this=qcol(HI), expression=qcol(LO)), expression=exp.Literal.number(1))
        wanted = backend.one(exp.select(_checksum(published, ranks)).from_(exp.to_table(keyed_table, quoted=True)))[0]
        checksums = (checksum, wanted)
    if got != expected or (checksums is not None and checksums[0] != checksums[1]):
        what = f"{got} rows would be published instead of {expected}" if got != expected else \
            "its rows would be published in other classes than the ones checked"
        raise AnonymizeError(
            f"the source changed while it was read ({what}): nothing was published; "
            "copy it into a table first (CREATE TABLE ... AS SELECT ...)")
