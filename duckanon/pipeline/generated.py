"""Step 4 of the pipeline, the published rows generated from the keyed table alone (no `keep`
column: every row of a part is the same), in one pass, from blocks of the parts, or as the view
over a table of counts (materialize = 'view')."""

from __future__ import annotations

from sqlglot import exp

from duckanon.pipeline.columns import ColumnFacts, binary_text, qcol
from duckanon.pipeline.histogram import SA_ALIAS
from duckanon.pipeline.keyed import HI, LO, PART_HASH, out_alias, sa_text
from duckanon.pipeline.plan import Plan
from duckanon.names import TableName

# Releases of this many rows or more (without `keep` columns) are generated from blocks of their
# parts (rows_per_block); below it the single-threaded expansion takes well under 0.1 s.
BLOCKED_FROM_ROWS = 1_000_000


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


def counts_select(plan: Plan, facts: ColumnFacts, keyed_table: str) -> exp.Select:
    """materialize = 'view': the table behind the view, one row per distinct published row (its
    published columns under their names, and how many rows publish it), stored in the keyed
    table's (seeded) order, so the view expands to the very rows and order the table form has.
    Rows are distinct byte by byte (the part hash and texts keyed_select orders by), and within one
    every value prints alike, so any_value() is exact. Only published values: never a class key,
    never a source value a row hides."""
    texts = [binary_text(facts, qcol(out_alias(j))) for j in range(len(plan.qi))] + (
        [sa_text(plan, facts)] if plan.sensitive else [])
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
