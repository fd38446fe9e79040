"""The hierarchy a user names in SQL: a builder call, `table(name)` or a file path, parsed once into a
`HierarchySpec` (`read_spec`) and loaded from it (`HierarchySpec.load`; `parse_spec` does both)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError

from duckanon.errors import AnonymizeError, nearest_name, unknown_name
from duckanon.hierarchy.arx_csv import from_csv
from duckanon.hierarchy.binding import Hierarchy
from duckanon.hierarchy.builders import ordered_groups, prefix
from duckanon.hierarchy.ranges import Dates, dates, intervals
from duckanon.hierarchy.tables import from_table

BUILDERS = ("prefix", "intervals", "dates", "ordered", "table")
_SPEC = re.compile(r"^\s*(prefix|intervals|dates|ordered|table)\s*(?:\((.*)\))?\s*$", re.IGNORECASE | re.DOTALL)
# a call of a builder that does not exist: a word and parentheses, refused as one (an ARX file has
# an extension; a file named like a call is written with one, or with a path: ./name(1))
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.DOTALL)
# a bare word, which may be a misspelt builder or a file without an extension
_WORD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
PLACEHOLDERS = ("{column}",)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
PLACEHOLDER_PATTERN = _PLACEHOLDER


@dataclass(frozen=True)
class HierarchySpec:
    """A hierarchy as a user names it in SQL, parsed once (`read_spec`): a builder's hierarchy,
    ready, or the file or table it is read from, named; `load` reads the file or table."""

    kind: str  # a builder's name, "table" or "file"
    name: str | None = None  # the file's path or the table's name, `{column}` replaced
    built: Hierarchy | None = None  # a builder's hierarchy
    nearest: str | None = None  # a file named by a bare word: the builder it may misspell

    @property
    def table(self) -> str | None:
        """The table a `table(name)` spec reads, None for another spec."""
        return self.name if self.kind == "table" else None

    def load(self, con=None) -> Hierarchy:
        """The hierarchy: a builder's as parsed, else read from the file or table through `con`
        (DuckDB's file-access rules apply)."""
        if self.built is not None:
            return self.built
        if self.kind == "table":
            if con is None or self.name is None:
                raise AnonymizeError("table(name) needs one table name and a connection")
            return from_table(con, self.name)
        try:
            return from_csv(self.name, con)
        except AnonymizeError as error:  # no such file: perhaps a builder, misspelt
            if self.nearest is None:
                raise
            raise AnonymizeError(f"{error}; did you mean the builder '{self.nearest}'?") from None


def parse_spec(spec: str, column: str | None = None, con=None) -> Hierarchy:
    """The hierarchy a user names in SQL (`read_spec`), loaded through `con` (`HierarchySpec.load`)."""
    return read_spec(spec, column).load(con)


def read_spec(spec: str, column: str | None = None) -> HierarchySpec:
    """The hierarchy a user names in SQL, parsed; nothing is read yet. Forms (keywords case-insensitive):

    - `prefix` or `prefix(3)`: see `prefix`;
    - `intervals(5, 10, 20)`: see `intervals`;
    - `dates` or `dates(month, year)`: see `dates`;
    - `ordered(a, b, c, d; 2, 4)`: categories in order, `;`, then group sizes; a category with a
      comma, semicolon or spaces at its ends is single-quoted (`'HS, grad'`, `''` for a quote);
    - `table(name)`: a DuckDB table (see `from_table`);
    - anything else: an ARX CSV path, relative to the current directory (see `from_csv`).
    `{column}` in a path or table name is replaced by the column name.
    """
    match = _SPEC.match(spec)
    if not match or match.group(1).lower() == "table":  # a file or table name: {column} is replaced in it
        _check_placeholders(spec, column)
    text = spec.replace("{column}", column) if column is not None else spec
    match = _SPEC.match(text)
    if not match:
        if not text.strip():
            raise AnonymizeError("empty hierarchy specification")
        call = _CALL.match(text)
        if call:
            raise AnonymizeError(unknown_name("hierarchy builder", call.group(1), BUILDERS))
        word = _WORD.match(text)
        return HierarchySpec("file", text, nearest=nearest_name(word.group(1), BUILDERS) if word else None)
    kind, arguments = match.group(1).lower(), match.group(2)
    if kind == "table":
        return HierarchySpec("table", _table_argument(arguments) if arguments is not None else None)
    return HierarchySpec(kind, built=_built(kind, arguments))


def spec_kind(spec: str) -> str:
    """What a spec names, by the parser's own test, without checking it further: a builder's name,
    "table" or "file"."""
    match = _SPEC.match(spec)
    return "file" if match is None else match.group(1).lower()


def _built(kind: str, arguments: str | None) -> Hierarchy:
    """The hierarchy of a builder call (prefix, intervals, dates, ordered) and its arguments' text."""
    items = _split(arguments, ",") if arguments is not None else []
    if kind == "prefix":
        if len(items) > 1:
            raise AnonymizeError(f"prefix takes at most one width, got {arguments!r}")
        return prefix(_integer(items[0], "prefix") if items else None)
    if kind == "intervals":
        return intervals(*[_real(item, "intervals") for item in items])
    if kind == "dates":
        for unit in items:
            if unit.strip().lower() not in Dates.UNITS:
                raise AnonymizeError("dates: " + unknown_name("level", unit.strip(), tuple(Dates.UNITS)))
        return dates(items) if arguments is not None else dates()
    parts = _split(arguments or "", ";", unquote=False)
    if len(parts) != 2:
        raise AnonymizeError("ordered needs categories and group sizes: ordered(a, b, c, d; 2, 4)")
    return ordered_groups(_split(parts[0], ","), [_integer(s, "ordered") for s in _split(parts[1], ",")])


def table_spec_name(spec: str, column: str | None = None) -> str | None:
    """The table name a `table(name)` spec reads (after `{column}`), or None for another spec."""
    try:
        return read_spec(spec, column).table
    except AnonymizeError:
        return None


def table_spec(catalog: str, schema: str, name: str) -> str:
    """The `table(name)` spec of a table given as identifier parts (REFRESH's hierarchy tables,
    resolved at publish time): built by sqlglot, every part double-quoted, so that query_table()
    reads exactly these parts back, whatever the session's USE, search_path or temp tables."""
    table = exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier(schema, quoted=True),
                      catalog=exp.to_identifier(catalog, quoted=True))
    return f"table({table.sql(dialect='duckdb')})"


def _table_argument(arguments: str) -> str | None:
    """The one table name in `table(...)`: single-quoted or plain as written, or a name of
    double-quoted identifiers (`"db"."s"."h,1"`, which may hold commas and single quotes)."""
    text = arguments.strip()
    if text.startswith('"'):
        try:
            table = exp.to_table(text, dialect="duckdb")
        except SqlglotError:
            table = None
        if isinstance(table, exp.Table) and table.parts and all(
                isinstance(part, exp.Identifier) and part.quoted for part in table.parts) and not table.alias:
            return text
    items = _split(arguments, ",")
    return items[0] if len(items) == 1 else None


def _check_placeholders(spec: str, column: str | None) -> None:
    """`{column}` is the one placeholder of a file or table name; any other `{word}` is refused
    with the nearest one, rather than read as part of the name."""
    for placeholder in _PLACEHOLDER.findall(spec):
        if placeholder not in PLACEHOLDERS:
            where = f" in the hierarchy of column {column}" if column is not None else " in a hierarchy file or table name"
            raise AnonymizeError(unknown_name("placeholder", placeholder, PLACEHOLDERS, context=where))


def _split(text: str, separator: str, unquote: bool = True) -> list[str]:
    """Split at `separator` outside single quotes; strip items, and unquote them if asked."""
    items, current, quoted = [], [], False
    for ch in text:
        if ch == "'":
            quoted = not quoted  # '' inside quotes toggles twice, which keeps the text intact
        if ch == separator and not quoted:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if quoted:
        raise AnonymizeError(f"unclosed quote in hierarchy specification: {text!r}")
    items.append("".join(current))
    items = [item.strip() for item in items]
    if items == [""]:
        return []
    if unquote:
        items = [_unquote(item) for item in items]
    return items


def _unquote(item: str) -> str:
    return item[1:-1].replace("''", "'") if len(item) >= 2 and item[0] == item[-1] == "'" else item


def _integer(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise AnonymizeError(f"{where}: {text!r} is not an integer") from None


def _real(text: str, where: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise AnonymizeError(f"{where}: {text!r} is not a number") from None
