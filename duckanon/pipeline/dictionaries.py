"""Step 4 of the pipeline, the dictionaries of the keep path: each QI column's few published
strings as the codes the sort carries (an ENUM, bits of a part key, a position in an array), in
an order drawn by the seed. See join_back for why. How an engine codes them is the backend's
choice (`Backend.string_coding`, a backends.codings.Coding)."""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b

from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.backends.codings import Coding
from duckanon.pipeline.columns import ColumnFacts, binary_text, qcol
from duckanon.pipeline.keyed import out_alias
from duckanon.pipeline.plan import Plan

# Columns with more distinct published strings than this are sorted as VARCHARs: the dictionary
# (the ENUM's, or Spark's array) is part of the statement's text.
ENUM_LIMIT = 4096
# Columns with at most this many published strings go into the part keys (DuckDB): taking a string
# back from a constant list costs per chunk of rows in proportion to the list (at 10M rows: 0.07 s
# a column for 256 strings, 0.4 s for 4,096, where the ENUM's cast costs 0.05 s).
PACK_LIMIT = 256
PART_KEY, WORD_BITS = "part_key", 64


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


def published_dictionaries(backend: Backend, plan: Plan, facts: ColumnFacts, keyed_table: str,
                           seed: int) -> dict[int, Dictionary]:
    """Per QI column j with at most ENUM_LIMIT distinct published strings (compared byte by byte):
    those strings in the seed's order (which orders the part keys), the dictionary of the codes its
    rows are sorted as (publish_select). Empty on an engine that has no coding (its
    `string_coding`, backends/codings.py)."""
    coding = backend.string_coding
    if coding is None or not plan.qi:
        return {}
    columns = [coding.collect(binary_text(facts, qcol(out_alias(j)))) for j in range(len(plan.qi))]
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


def unpacked(dictionary: Dictionary, word: exp.Expr, shift: int) -> exp.Expr:
    """A packing column's string, from its bits of a part key word."""
    bits = exp.BitwiseRightShift(this=word, expression=exp.Literal.number(shift)) if shift else word
    number = exp.BitwiseAnd(this=exp.paren(bits), expression=exp.Literal.number((1 << dictionary.bits) - 1))
    return dictionary.string_at(exp.cast(number, exp.DataType.build("BIGINT")))


def _sorted_as(value: exp.Expr, dictionary: Dictionary | None) -> exp.Expr:
    return value if dictionary is None else dictionary.encoded(value)


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
