"""How an engine's sort carries a column's few published strings as small codes (the keep path's
dictionaries, pipeline/dictionaries.py): each backend names its own (`Backend.string_coding`).

DuckDB: an ENUM, one or two bytes, or a few bits of a part key (ENUM_CODING). Spark: the string's
position in the sorted array of the column's strings, one fixed 8-byte field of a row through the
shuffle and the sort, where a string takes that field and its bytes (ARRAY_POSITIONS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class Coding:
    """How an engine's sort carries a column's few published strings as small codes: `collect`
    aggregates the column's distinct strings into an array (byte-wise distinct), `encode` gives a
    string's code below the sort, `decode` the string of a code above it. Where `number` and
    `string_at` exist, a column of at most PACK_LIMIT strings (pipeline/dictionaries.py) goes into
    the part keys instead:
    `number` gives a string's 1-based number (0 for NULL) below the sort, `string_at` the string of
    a number above it."""

    collect: Callable[[exp.Expr], exp.Expr]
    encode: Callable[[exp.Expr, tuple[str, ...]], exp.Expr]
    decode: Callable[[exp.Expr, tuple[str, ...]], exp.Expr]
    number: Callable[[exp.Expr, tuple[str, ...]], exp.Expr] | None = None
    string_at: Callable[[exp.Expr, tuple[str, ...]], exp.Expr] | None = None


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
    return exp.Cast(this=code, to=exp.DataType.build("VARCHAR"))


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


# CAST(x AS ENUM('a', 'b')); its number packs into a part key
ENUM_CODING = Coding(collect=_distinct_list, encode=_as_enum, decode=_enum_text, number=_enum_number,
                     string_at=_list_item)
# array_position(ARRAY('a', 'b'), x) and element_at(ARRAY('a', 'b'), i); nothing packs
ARRAY_POSITIONS = Coding(collect=_sorted_set, encode=_position_in, decode=_string_at)
