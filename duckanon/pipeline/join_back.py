"""Step 4 of the pipeline, the keep path: the source joined back to the coded keyed table and
the published rows sorted by their own keys; split cells' rows dealt to their parts.

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
an array of the column's strings (each backend's `string_coding`, backends/codings.py), and the
order stays hash(part hash, ...), then the row's values as the backend keys ties (Backend.tie_key).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from duckanon.pipeline.columns import ColumnFacts, count_all, hashable, qcol
from duckanon.pipeline.dictionaries import PART_KEY, WORD_BITS, Dictionary, part_key_layout, unpacked
from duckanon.pipeline.histogram import CELL_ID, TEXT
from duckanon.pipeline.keyed import (BEFORE, BUCKET, BUCKETS, HI, KEY_HASH, LO, MAX_BUCKETS, PART_HASH, RANK, ROW_HASH,
                                     ROW_ORDER, WHOLE, aliased_table, key_aliases, matches_keyed)
from duckanon.pipeline.plan import Plan

def _ordering(plan: Plan, facts: ColumnFacts, per_row: list[str]) -> list[str]:
    """The per-row columns a row's order hash reads: the kept ones. The sensitive value is the
    same on every row of a cell, and so of a part (it is part of the cell's key, and the part hash
    covers it): hashing it per row added nothing to the order and cost 0.1 s at 10M rows. Except
    where equal keys allow unequal values (a TEXT-kind column: values that print alike) or the
    key is several sensitive columns' combination."""
    if plan.sensitive is None or len(plan.sensitives) > 1 or facts.kind(plan.sensitive) == TEXT:
        return per_row
    return [c for c in per_row if c.lower() != plan.sensitive.lower()] or per_row


def _row_hash(plan: Plan, facts: ColumnFacts, seed: exp.Expr, per_row: list[str], table: str,
              name=None) -> exp.Expr:
    """A split cell's row's place in its cell: hash(seed, the row's own published values), read
    from `table` under `name(column)` (v{i} by default)."""
    name = name or (lambda c: f"v{plan.published.index(c)}")
    return exp.func("hash", seed, *[hashable(facts, c, qcol(name(c), table)) for c in _ordering(plan, facts, per_row)])


TieKey = Callable[[exp.Expr, bool], "exp.Expr | None"]


def no_tie_key(value: exp.Expr, sortable: bool = False) -> None:
    """The tie keys of an engine that needs none (Backend.tie_key)."""
    return None


def _row_ties(plan: Plan, per_row: list[str], table: str, tie_key: TieKey, name=None) -> list[exp.Expr]:
    """The tie keys of _row_hash over the same columns, read the same way (Backend.tie_key)."""
    name = name or (lambda c: f"v{plan.published.index(c)}")
    keys = [tie_key(qcol(name(c), table), False) for c in per_row]
    return [key for key in keys if key is not None]


def _split_rows(plan: Plan, facts: ColumnFacts, keyed_table: str, seed: exp.Expr, per_row: list[str], large: bool,
                by_key_hash: bool = False, tie_key: TieKey = no_tie_key) -> exp.Select:
    """The rows of split cells: their own published values (v{i}, the SA and kept columns) and
    their cell. A row's place in its cell's seeded order comes from hash(seed, those values):
    never a QI value the parts may suppress, and equal for every spelling of the cell.

    `large`: the cells of several buckets (keyed_arrow's BUCKETS), each row with its bucket, the
    hash modulo the cell's bucket count; the cell's order is by bucket, then hash (_bucket_parts).
    Else the cells of one bucket, each row with its rank in the cell (RANK), by a window (ordered
    by the hash, then by the row's own values as `tie_key` keys them, if it does)."""
    several = exp.GT(this=qcol(BUCKETS), expression=exp.Literal.number(1))
    split_cells = (
        exp.select(*[qcol(a) for a in key_aliases(plan, facts)], qcol(KEY_HASH), qcol(CELL_ID), qcol(BUCKETS))
        .from_(exp.to_table(keyed_table, quoted=True))
        .where(exp.and_(qcol("split"), several if large else exp.Not(this=exp.paren(several)))).distinct()
    )
    row_hash = _row_hash(plan, facts, seed, per_row, "src", lambda c: c)
    own = [f"v{plan.published.index(c)}" for c in per_row]
    values = [exp.alias_(qcol(c, "src"), v, quoted=True) for c, v in zip(per_row, own)]
    source = exp.alias_(plan.source.table.copy(), "src", table=True)
    cells = exp.alias_(split_cells.subquery(), "k", table=True)
    if not large:
        ties = _row_ties(plan, per_row, "src", tie_key, lambda c: c)
        rank = exp.Window(this=exp.Anonymous(this="ROW_NUMBER"), partition_by=[qcol(CELL_ID, "k")],
                          order=exp.Order(expressions=[exp.Ordered(this=o) for o in [row_hash, *ties]]))
        return (exp.select(*values, qcol(CELL_ID, "k"), exp.alias_(rank, RANK, quoted=True))
                .from_(source).join(cells, on=matches_keyed(plan, facts, "src", "k", by_key_hash)))
    hashed = (
        exp.select(*values, qcol(CELL_ID, "k"), qcol(BUCKETS, "k"), exp.alias_(row_hash, ROW_HASH, quoted=True))
        .from_(source).join(cells, on=matches_keyed(plan, facts, "src", "k", by_key_hash))
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
    counts = (exp.select(qcol(CELL_ID), qcol(BUCKET), exp.alias_(count_all(), "n", quoted=True))
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
    ).from_(aliased_table(coded_table, "parts")).where(
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
        .join(aliased_table(coded_table, "p"),
              on=exp.and_(exp.EQ(this=qcol(CELL_ID, "b"), expression=qcol(CELL_ID, "p")),
                          exp.EQ(this=qcol(f"part_{LO}", "b"), expression=qcol(LO, "p"))))
        .where(exp.EQ(this=qcol("is_bucket", "b"), expression=exp.Literal.number(1)))
    )


def publish_select(plan: Plan, facts: ColumnFacts, coded_table: str, any_split: bool, seed: int,
                   dictionaries: dict[int, Dictionary] | None = None, by_key_hash: bool = False,
                   tie_key: TieKey = no_tie_key) -> exp.Select:
    """The published rows: the source joined to the coded keyed table (coded_select; on the class
    keys, or on their hash where `by_key_hash`: key_hashes_distinct), ordered by the part keys
    (the packed QIs, DuckDB), then hash(part hash, the row's own published values). The other QIs
    travel through the sort as codes of `dictionaries` (published_dictionaries: ENUMs on DuckDB,
    positions on Spark) or as themselves; all are decoded above it, in a projection of the sorted
    subquery, which keeps its order. Where `tie_key` (the backend's Backend.tie_key) gives keys,
    every order by a row's hash goes on by what the row publishes, so rows whose hashes collide
    are ordered by their values too, never by the order they arrive in."""
    dictionaries = dictionaries or {}
    layout = part_key_layout(dictionaries)
    words = [f"{PART_KEY}{w}" for w in sorted({w for w, _ in layout.values()})]
    rows = _row_items(plan, facts, layout, words)
    body = (
        exp.select(*rows("k", "src"))
        .from_(exp.alias_(plan.source.table.copy(), "src", table=True))
        .join(aliased_table(coded_table, "k"), on=matches_keyed(plan, facts, "src", "k", by_key_hash))
    )
    ctes = []
    if any_split:
        body = body.where(exp.Not(this=qcol("split", "k")))
        branches, ctes = _split_branches(plan, facts, rows, coded_table, exp.Literal.number(seed), by_key_hash,
                                         tie_key)
        for branch in branches:
            body = exp.union(body, branch, distinct=False)
    ordered = (exp.select(exp.Star()).from_(body.subquery("published"))
               .order_by(*_sort_keys(words, _word_bits(dictionaries, layout), any_split),
                         *_tie_keys(plan, layout, tie_key)))
    select = exp.select(*_decoded(plan, facts, dictionaries, layout)).from_(ordered.subquery("sorted"))
    for name, query in ctes:
        select = select.with_(exp.to_identifier(name, quoted=True), as_=query)
    return select


def _per_row(plan: Plan) -> list[str]:
    """The published columns that are no QI: the SA and the kept columns, published per row."""
    qi = {c.lower() for c in plan.qi}
    return [c for c in plan.published if c.lower() not in qi]


def _row_items(plan: Plan, facts: ColumnFacts, layout: dict[int, tuple[int, int]], words: list[str]):
    """rows(keyed, source, source_name): a published row's items below the sort, the QIs (coded)
    from the keyed row `keyed`, the rest from the source row `source` (its columns named by
    `source_name(position, column)`), then the row's sort keys (the part key words, ROW_ORDER)."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    per_row = _per_row(plan)

    def rows(keyed: str, source: str, source_name=lambda i, col: col) -> list[exp.Expr]:
        items = []
        for i, col in enumerate(plan.published):
            j = qi_index.get(col.lower())
            if j in layout:
                continue
            value = qcol(f"e{j}", keyed) if j is not None else qcol(source_name(i, col), source)
            items.append(exp.alias_(value, f"v{i}", quoted=True))
        items.extend(qcol(word, keyed) for word in words)
        own = [hashable(facts, col, qcol(source_name(plan.published.index(col), col), source))
               for col in _ordering(plan, facts, per_row)]
        items.append(exp.alias_(exp.func("hash", qcol(PART_HASH, keyed), *own), ROW_ORDER, quoted=True))
        return items
    return rows


def _split_branches(plan: Plan, facts: ColumnFacts, rows, coded_table: str, seed: exp.Expr, by_key_hash: bool,
                    tie_key: TieKey) -> tuple[list[exp.Select], list[tuple[str, exp.Select]]]:
    """The published rows of split cells (the branches added to the others) and the CTEs they read.

    Rows of split cells go to the part whose rank range (within the cell) holds their rank in the
    cell's seeded order. Cells of fewer than SMALL_CELL rows are numbered by a window over the
    cell; larger ones by buckets (_split_rows), so that no window sorts a whole large cell on one
    thread. Either branch without cells costs nothing: DuckDB skips the probe side of a join with
    an empty build side."""
    per_row = _per_row(plan)
    split_rows, buckets = f"{coded_table}_split", f"{coded_table}_buckets"
    ctes = [(split_rows, _split_rows(plan, facts, coded_table, seed, per_row, large=True, by_key_hash=by_key_hash,
                                     tie_key=tie_key)),
            (buckets, _bucket_parts(split_rows, coded_table))]

    def in_part(ranked: exp.Select) -> exp.Select:
        """Rows of `ranked` (own values v{i}, cell id, rank) in the part whose range holds the rank."""
        in_range = exp.and_(
            exp.EQ(this=qcol(CELL_ID, "x"), expression=qcol(CELL_ID, "p")),
            exp.Between(this=qcol(RANK, "x"), low=qcol(LO, "p"), high=qcol(HI, "p")),
        )
        return (exp.select(*rows("p", "x", source_name=lambda i, col: f"v{i}"))
                .from_(ranked.subquery("x"))
                .join(aliased_table(coded_table, "p"), on=in_range))

    small = in_part(_split_rows(plan, facts, coded_table, seed.copy(), per_row, large=False,
                                by_key_hash=by_key_hash, tie_key=tie_key))
    placed = exp.and_(exp.EQ(this=qcol(CELL_ID, "r"), expression=qcol(CELL_ID, "m")),
                      exp.EQ(this=qcol(BUCKET, "r"), expression=qcol(BUCKET, "m")))
    # rows of a bucket that lies in one part: that part, by two equality keys
    whole = (
        exp.select(*rows("m", "r", source_name=lambda i, col: f"v{i}"))
        .from_(aliased_table(split_rows, "r"))
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
            _row_hash(plan, facts, seed.copy(), per_row, "r"),
            *_row_ties(plan, per_row, "r", tie_key)]]),
    ))
    cut = in_part(
        exp.select(*[qcol(f"v{plan.published.index(c)}", "r") for c in per_row], qcol(CELL_ID, "r"),
                   exp.alias_(rank, RANK, quoted=True))
        .from_(aliased_table(split_rows, "r"))
        .join(exp.alias_(straddling.subquery(), "m", table=True), on=placed)
    )
    return [small, whole, cut], ctes


def _decoded(plan: Plan, facts: ColumnFacts, dictionaries: dict[int, Dictionary],
             layout: dict[int, tuple[int, int]]) -> list[exp.Expr]:
    """The published columns above the sort, each under its name: a packed QI from its bits of a
    part key word, a coded one from its code, the rest as they crossed the sort."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    outputs = []
    for i, col in enumerate(plan.published):
        value = qcol(f"v{i}")
        j = qi_index.get(col.lower())
        if j in layout:
            word, shift = layout[j]
            value = _collated(facts, col, unpacked(dictionaries[j], qcol(f"{PART_KEY}{word}"), shift))
        elif j is not None and j in dictionaries:
            value = _collated(facts, col, dictionaries[j].decoded(value))
        outputs.append(exp.alias_(value, col, quoted=True))
    return outputs


def _tie_keys(plan: Plan, layout: dict[int, tuple[int, int]], tie_key: TieKey) -> list[exp.Expr]:
    """The sorted rows' columns (v{i}) that break ties of their order hash, as `tie_key` keys them:
    the QIs the part key words do not carry (codes or strings: sortable) and the per-row values."""
    qi_index = {c.lower(): j for j, c in enumerate(plan.qi)}
    keys = []
    for i, col in enumerate(plan.published):
        j = qi_index.get(col.lower())
        if j is None or j not in layout:
            keys.append(tie_key(qcol(f"v{i}"), j is not None))
    return [key for key in keys if key is not None]


def _collated(facts: ColumnFacts, column: str, decoded: exp.Expr) -> exp.Expr:
    """A QI decoded from its code with the collation its column was declared with: the strings
    come back from constants, which have none, and the published column would otherwise compare
    differently from the same release published without `keep` (or from a column of more strings)."""
    collation = facts.declared.get(column.lower())
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
