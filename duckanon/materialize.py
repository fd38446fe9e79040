"""Step 4 of the pipeline: write the published table inside DuckDB.

A small "keyed" table holds, per cell (distinct QI vector + SA value), the published QI strings:
the value cast to VARCHAR, or '*' where the cell's group is suppressed. The source is joined to
it on the QI and SA values (NULL-safe), so the only per-row work is one hash join. Cells whose
rows go to groups with different patterns ("split" cells) get one keyed row per part with a rank
range, and only their rows are numbered by a window. Rows are written in a seeded pseudo-random
order (a hash of the published row and the seed), never in source order, and without row ids.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sqlglot import exp

from duckanon.classes import CELL_ID, COUNT, SA_ALIAS, STAR, Cells, qcol, qi_alias
from duckanon.plan import Plan
from duckanon.solver.partition import SHOW_VALUE, STAR as STAR_CODE, Solution

LO, HI, RANK = "lo", "hi", "rn"


def out_alias(j: int) -> str:
    return f"o{j}"


def cell_parts(cells: Cells, solution: Solution):
    """Per part of a cell: (cell id, first rank, last rank, suppressed mask (m,))."""
    n_sa = cells.histogram.sa_counts.shape[1]
    cell_of = np.full(cells.histogram.n_classes * n_sa, -1, dtype=np.int64)
    cell_of[cells.cell_class * n_sa + cells.cell_sa] = np.arange(len(cells.cell_class))
    part_cell = cell_of[solution.part_class * n_sa + solution.part_sa]
    order = np.lexsort((solution.part_group, part_cell))
    part_cell, part_group, part_count = part_cell[order], solution.part_group[order], solution.part_count[order]
    hi = np.cumsum(part_count)
    first = np.ones(len(part_cell), dtype=bool)
    first[1:] = part_cell[1:] != part_cell[:-1]
    cell_start = np.maximum.accumulate(np.where(first, hi - part_count, 0))
    lo = hi - part_count - cell_start + 1
    hi = hi - cell_start
    masks = solution.group_rep[part_group] == STAR_CODE
    return part_cell, lo, hi, masks, part_group


def keyed_arrow(cells: Cells, solution: Solution) -> pa.Table:
    """Per part: cell id, rank range, suppressed mask m{j} and, for generalized columns, the
    label flag l{j} and label g{j}. Parts of removed groups are left out, so their rows are not
    published (a removed group holds whole cells, so no rank range is cut)."""
    part_cell, lo, hi, masks, groups = cell_parts(cells, solution)
    keep = solution.kept_groups[groups]
    columns = {CELL_ID: part_cell[keep], LO: lo[keep], HI: hi[keep]}
    for j in range(masks.shape[1]):
        columns[f"m{j}"] = masks[keep, j]
    for j, labels in enumerate(solution.group_labels or []):
        if labels is None:
            continue
        chosen = np.asarray(labels, dtype=object)[groups[keep]]
        use_label = np.array([label != SHOW_VALUE for label in chosen.tolist()], dtype=bool)
        columns[f"l{j}"] = use_label
        columns[f"g{j}"] = pa.array([label if flag else None for label, flag in zip(chosen.tolist(), use_label)],
                                    type=pa.string())
    return pa.table(columns)


def _table(name: str, alias: str) -> exp.Expr:
    return exp.alias_(exp.to_table(name, quoted=True), alias, table=True)


def keyed_select(plan: Plan, cells_table: str, parts_view: str, labelled=()) -> exp.Select:
    """Cells joined with their parts; the published QI strings are computed here, once per part:
    '*' where suppressed, the generalized label for the columns in `labelled`, else the value."""
    c, p = "c", "p"
    outputs = []
    for j in range(len(plan.qi)):
        shown = exp.Cast(this=qcol(qi_alias(j), c), to=exp.DataType.build("VARCHAR"))
        if j in labelled:
            shown = exp.If(this=qcol(f"l{j}", p), true=qcol(f"g{j}", p), false=shown)
        published = exp.If(this=qcol(f"m{j}", p), true=exp.Literal.string(STAR), false=shown)
        outputs.append(exp.alias_(published, out_alias(j), quoted=True))
    values = [qcol(name, c) for name in _value_aliases(plan)]
    parts_per_cell = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[qcol(CELL_ID, p)])
    split = exp.alias_(exp.GT(this=parts_per_cell, expression=exp.Literal.number(1)), "split", quoted=True)
    # Stored in seeded pseudo-random order: the histogram-only path publishes in this order.
    order = exp.func("hash", exp.Literal.number(plan.statement.seed), *values, qcol(LO, p))
    return (
        exp.select(*values, *outputs, qcol(CELL_ID, c), qcol(LO, p), qcol(HI, p), split)
        .from_(_table(cells_table, c))
        .join(_table(parts_view, p), on=exp.EQ(this=qcol(CELL_ID, c), expression=qcol(CELL_ID, p)))
        .order_by(order)
    )


def _value_aliases(plan: Plan) -> list[str]:
    return [qi_alias(j) for j in range(len(plan.qi))] + ([SA_ALIAS] if plan.sensitive else [])


def _match(plan: Plan, source: str, keyed: str) -> exp.Expr:
    """NULL-safe equality of the source's QI and SA values with a keyed row's."""
    columns = plan.qi + ([plan.sensitive] if plan.sensitive else [])
    return exp.and_(*[
        exp.NullSafeEQ(this=qcol(col, source), expression=qcol(alias, keyed))
        for col, alias in zip(columns, _value_aliases(plan))
    ])


def _projection(plan: Plan, keyed: str, source: str, source_name=lambda i, col: col) -> list[exp.Expr]:
    """Published columns in source order: QIs from the keyed row, SA and kept columns from the source."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    items = []
    for i, col in enumerate(plan.published):
        j = qi_index.get(col.lower())
        value = qcol(out_alias(j), keyed) if j is not None else qcol(source_name(i, col), source)
        items.append(exp.alias_(value, col, quoted=True))
    return items


def histogram_publish_select(plan: Plan, keyed_table: str) -> exp.Select:
    """The published rows generated from the keyed table alone, `hi - lo + 1` copies per part.

    Used when nothing per-row is published (no `keep` columns): then every row of a part is
    identical in the output, so the source need not be read again. Rows come out in the keyed
    table's stored (seeded pseudo-random) order, identical rows next to each other.
    """
    copies = exp.Unnest(expressions=[exp.func("range", exp.Add(this=exp.Sub(this=qcol(HI), expression=qcol(LO)), expression=exp.Literal.number(1)))])
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    items = []
    for col in plan.published:
        j = qi_index.get(col.lower())
        items.append(exp.alias_(qcol(out_alias(j) if j is not None else SA_ALIAS), col, quoted=True))
    expanded = exp.select(exp.Star(), exp.alias_(copies, "copy", quoted=True)).from_(exp.to_table(keyed_table, quoted=True))
    return exp.select(*items).from_(expanded.subquery("expanded"))


def publish_select(plan: Plan, keyed_table: str, any_split: bool) -> exp.Select:
    """The published rows: the source joined to the keyed table, in seeded hash order."""
    seed = exp.Literal.number(plan.statement.seed)
    body = (
        exp.select(*_projection(plan, "k", "src"))
        .from_(exp.alias_(plan.source.table.copy(), "src", table=True))
        .join(_table(keyed_table, "k"), on=_match(plan, "src", "k"))
    )
    if any_split:
        body = body.where(exp.Not(this=qcol("split", "k")))
        # Rows of split cells: numbered within their cell in seeded order, then matched to the
        # part whose rank range holds them.
        split_cells = (
            exp.select(*[qcol(a) for a in _value_aliases(plan)], qcol(CELL_ID))
            .from_(exp.to_table(keyed_table, quoted=True)).where(qcol("split")).distinct()
        )
        row_order = exp.func("hash", seed, *[qcol(c, "src") for c in plan.published])
        rank = exp.Window(
            this=exp.Anonymous(this="ROW_NUMBER"), partition_by=[qcol(CELL_ID, "k")],
            order=exp.Order(expressions=[exp.Ordered(this=row_order)]),
        )
        ranked = (
            exp.select(
                *[exp.alias_(qcol(c, "src"), f"v{i}", quoted=True) for i, c in enumerate(plan.published)],
                exp.alias_(qcol(CELL_ID, "k"), CELL_ID, quoted=True),
                exp.alias_(rank, RANK, quoted=True),
            )
            .from_(exp.alias_(plan.source.table.copy(), "src", table=True))
            .join(exp.alias_(split_cells.subquery(), "k", table=True), on=_match(plan, "src", "k"))
        )
        in_range = exp.and_(
            exp.EQ(this=qcol(CELL_ID, "r"), expression=qcol(CELL_ID, "p")),
            exp.Between(this=qcol(RANK, "r"), low=qcol(LO, "p"), high=qcol(HI, "p")),
        )
        parts = (
            exp.select(*_projection(plan, "p", "r", source_name=lambda i, col: f"v{i}"))
            .from_(ranked.subquery("r"))
            .join(_table(keyed_table, "p"), on=in_range)
        )
        body = exp.union(body, parts, distinct=False)
    order = exp.func("hash", seed, *[qcol(c) for c in plan.published])
    return exp.select(exp.Star()).from_(body.subquery("published")).order_by(order)


def column_loss_select(n_qi: int, keyed_table: str, cells_table: str) -> str:
    """Per QI column j, the summed loss of the published rows: a row costs (d_L - 1) / (d - 1)
    where d_L is the number of distinct original values published as the same string L in that
    column and d the column's number of distinct values: 0 for an unchanged value, 1 for '*',
    in between for a generalized label (Iyengar's loss metric, counted on the values present in
    the data rather than on a hierarchy's leaves, so it applies to every method). NULL counts as
    a value. Only our own aliases (q{j}, o{j}) and temp table names appear here."""
    def distinct(column: str) -> str:
        return f'(count(DISTINCT "{column}") + bool_or("{column}" IS NULL)::INT)'

    parts = []
    for j in range(n_qi):
        parts.append(
            f"SELECT {j} AS j, coalesce(sum((k.hi - k.lo + 1) * CASE WHEN k.o = '*' THEN 1.0 WHEN d.d <= 1 THEN 0.0 "
            f"ELSE (cov.covered - 1) / (d.d - 1) END), 0.0) AS loss "
            f'FROM (SELECT "{out_alias(j)}" AS o, "{LO}" AS lo, "{HI}" AS hi FROM "{keyed_table}") AS k '
            f'JOIN (SELECT "{out_alias(j)}" AS o, {distinct(qi_alias(j))} AS covered FROM "{keyed_table}" GROUP BY 1) AS cov '
            f"ON cov.o IS NOT DISTINCT FROM k.o, "
            f'(SELECT {distinct(qi_alias(j))} AS d FROM "{cells_table}") AS d')
    return " UNION ALL ".join(parts) + " ORDER BY j"
