"""A value's text that no session setting changes: what the masking rules read (masking.py).

DuckDB prints two types in the session's settings: TIMESTAMP WITH TIME ZONE and TIMESTAMPTZ_NS
print in its TimeZone ('2024-03-10 08:34:56-04' in America/New_York for the instant
'2024-03-10 12:34:56+00'), and their year() follows its Calendar (6 for 2024 under Calendar =
'japanese'). Their canonical text is the instant in UTC as a session in UTC with the Gregorian
calendar prints it ('2024-03-10 12:34:56.5+00', '0044-03-15 (BC) 12:00:00+00', 'infinity'), made
from the epoch (epoch_us, make_timestamp), which neither setting reaches: a pseudonym made in a UTC
session before this module existed is the same. LIST, ARRAY, STRUCT, MAP and UNION holding one are
rebuilt with those elements, fields, keys or members as their canonical text and printed by DuckDB
as usual; DuckDB quotes a nested string by its characters, as it quotes the timestamp's own text,
so the result is again the text a UTC session prints. VARIANT (DuckDB 2) holds values of any type
per row, zoned timestamps among them: it has no canonical text here (NoCanonicalText).

Every other type is read as DuckDB prints it (CAST AS VARCHAR), which no setting changes, so its
text (and every pseudonym made of it) is what it always was: integers, DECIMAL, DATE, TIME, TIME
WITH TIME ZONE (it carries its own offset), TIMESTAMP and its _S/_MS/_NS forms, INTERVAL, FLOAT and
DOUBLE (the shortest round-trip text, the same in DuckDB 1.5 and 2.x), VARCHAR and JSON (byte for
byte: a collation, declared or the session's default_collation, changes what compares equal,
never the text), BLOB, UUID, ENUM, BIT, GEOMETRY. Where `=` is coarser than that text, equal values
keep their different texts: -0.0 and 0.0, 'nan' and '-nan', INTERVAL '36 hours' and '1 day 12
hours', 'Ann' and 'ann' under NOCASE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

# zoned timestamp type -> (its wall-clock type, the epoch function, the constructor from that epoch)
ZONED = {
    "TIMESTAMP WITH TIME ZONE": ("TIMESTAMP", "epoch_us", "make_timestamp"),
    "TIMESTAMPTZ_NS": ("TIMESTAMP_NS", "epoch_ns", "make_timestamp_ns"),
}
NO_CANONICAL = {"VARIANT"}
UTC_SUFFIX = "+00"  # what a UTC session appends to a zoned timestamp's text


class NoCanonicalText(Exception):
    """A type whose text depends on the session and that has no canonical text here; the message
    says why (never a value)."""


@dataclass(frozen=True)
class DuckType:
    """A DuckDB type as DESCRIBE writes it: a leaf (`name` as written, upper case, without its
    parameters) or LIST / ARRAY / STRUCT / MAP / UNION with its children (field name or None, type)."""
    name: str
    children: tuple = ()

    @property
    def session_dependent(self) -> bool:
        """Whether its text (anywhere inside it) is not already canonical."""
        if self.name in ZONED or self.name in NO_CANONICAL:
            return True
        return any(child.session_dependent for _, child in self.children)


_TOKEN = re.compile(r'\s*("(?:[^"]|"")*"|\'(?:[^\']|\'\')*\'|\[\d*\]|[(),]|[A-Za-z_][A-Za-z0-9_]*|\d+)')


def _tokens(text: str) -> list[str]:
    tokens, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise NoCanonicalText("duckanon cannot read its type")
        tokens.append(match.group(1))
        at = match.end()
    return tokens


def _word(token: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token))


def _name(token: str) -> str:
    return token[1:-1].replace('""', '"') if token.startswith('"') else token


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, self.at = text, _tokens(text), 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise NoCanonicalText("duckanon cannot read its type")
        self.at += 1
        return token

    def type(self) -> DuckType:
        words = [self.take()]
        if not _word(words[0]):
            raise NoCanonicalText("duckanon cannot read its type")
        while self.peek() is not None and _word(self.peek()):  # TIMESTAMP WITH TIME ZONE
            words.append(self.take())
        name = " ".join(words).upper()
        found = DuckType(name)
        if self.peek() == "(":
            self.take("(")
            if name in ("STRUCT", "UNION"):
                fields = []
                while True:
                    field = _name(self.take())
                    fields.append((field, self.type()))
                    if self.take() == ")":
                        break
                found = DuckType(name, tuple(fields))
            elif name == "MAP":
                key = self.type()
                self.take(",")
                value = self.type()
                self.take(")")
                found = DuckType(name, ((None, key), (None, value)))
            else:  # DECIMAL(p, s), ENUM('a', ...): parameters of a leaf
                depth = 1
                while depth:
                    token = self.take()
                    depth += {"(": 1, ")": -1}.get(token, 0)
        while self.peek() is not None and self.peek().startswith("["):
            found = DuckType("LIST" if self.take() == "[]" else "ARRAY", ((None, found),))
        return found


def parse_type(text: str) -> DuckType:
    """The type DESCRIBE wrote (NoCanonicalText when it cannot be read)."""
    parser = _Parser(text)
    found = parser.type()
    if parser.peek() is not None:
        raise NoCanonicalText("duckanon cannot read its type")
    return found


def _call(name: str, *arguments: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(arguments))


def _cast(value: exp.Expr, type_name: str) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build(type_name, dialect="duckdb", udt=True))


def _varchar(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))


def _infinite(value: exp.Expr, type_name: str) -> exp.Expr:
    return exp.or_(exp.EQ(this=value.copy(), expression=_cast(exp.Literal.string("infinity"), type_name)),
                   exp.EQ(this=value.copy(), expression=_cast(exp.Literal.string("-infinity"), type_name)))


def utc_wall_clock(value: exp.Expr, type_name: str) -> exp.Expr:
    """A zoned timestamp as the TIMESTAMP (or TIMESTAMP_NS) of its instant in UTC, infinities kept;
    any other value as it is. Neither TimeZone nor Calendar changes it (year() and strftime() on it
    read the Gregorian UTC date)."""
    if type_name.strip().upper() not in ZONED:
        return value
    wall, epoch, make = ZONED[type_name.strip().upper()]
    return exp.Case(ifs=[exp.If(this=_infinite(value, type_name), true=_cast(value.copy(), wall))],
                    default=_call(make, _call(epoch, value.copy())))


def _lambda_parameter(depth: int) -> str:
    return f"__duckanon_e{depth}"


def _canonical(value: exp.Expr, found: DuckType, depth: int) -> exp.Expr:
    """`value` rebuilt so that DuckDB prints its canonical text (a zoned timestamp, and a UNION
    holding one, become VARCHAR; containers keep their shape)."""
    if not found.session_dependent:
        return value
    if found.name in NO_CANONICAL:
        raise NoCanonicalText(f"a {found.name} prints what it holds in the session's settings (a TIMESTAMP WITH TIME "
                              "ZONE inside it in the session's TimeZone), so it has no text that every session shares: "
                              "cast the column to a concrete type in a view first")
    if found.name in ZONED:  # 'infinity' as it is, else the UTC wall clock and its offset
        wall, epoch, make = ZONED[found.name]
        return exp.Case(ifs=[exp.If(this=_infinite(value, found.name), true=_varchar(_cast(value.copy(), wall)))],
                        default=exp.DPipe(this=_varchar(_call(make, _call(epoch, value.copy()))),
                                          expression=exp.Literal.string(UTC_SUFFIX)))
    if found.name in ("LIST", "ARRAY"):
        parameter = _lambda_parameter(depth)
        element = _canonical(exp.column(parameter, quoted=True), found.children[0][1], depth + 1)
        return _call("list_transform", value, exp.Lambda(this=element, expressions=[exp.to_identifier(parameter, quoted=True)]))
    if found.name == "STRUCT":
        fields = [exp.PropertyEQ(this=exp.to_identifier(name, quoted=True),
                                 expression=_canonical(_call("struct_extract", value.copy(), exp.Literal.string(name)),
                                                       child, depth))
                  for name, child in found.children]
        return exp.Case(ifs=[exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null())],
                        default=exp.Struct(expressions=fields))
    if found.name == "MAP":
        parameter = _lambda_parameter(depth)
        entry = exp.column(parameter, quoted=True)
        (_, key), (_, item) = found.children
        rebuilt = exp.Struct(expressions=[
            exp.PropertyEQ(this=exp.to_identifier("key", quoted=True),
                           expression=_canonical(_call("struct_extract", entry.copy(), exp.Literal.string("key")), key, depth + 1)),
            exp.PropertyEQ(this=exp.to_identifier("value", quoted=True),
                           expression=_canonical(_call("struct_extract", entry.copy(), exp.Literal.string("value")), item, depth + 1))])
        entries = _call("list_transform", _call("map_entries", value.copy()),
                        exp.Lambda(this=rebuilt, expressions=[exp.to_identifier(parameter, quoted=True)]))
        return exp.Case(ifs=[exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null())],
                        default=_call("map_from_entries", entries))
    if found.name == "UNION":  # a UNION prints its member's text: the member's canonical text
        return exp.Case(this=_call("union_tag", value.copy()),
                        ifs=[exp.If(this=exp.Literal.string(name),
                                    true=_varchar(_canonical(_call("union_extract", value.copy(), exp.Literal.string(name)),
                                                             child, depth)))
                             for name, child in found.children])
    raise NoCanonicalText("duckanon cannot read its type")  # not reached: every container is handled above


def canonical_text(value: exp.Expr, type_name: str) -> exp.Expr:
    """The VARCHAR text of `value` (of the DuckDB type `type_name`, as DESCRIBE writes it) that every
    session prints alike: CAST(value AS VARCHAR) wherever that text depends on no setting (so
    it is exactly what it always was), else the canonical text the module's docstring defines."""
    found = parse_type(type_name) if _may_depend(type_name) else DuckType(type_name.strip().upper())
    if not found.session_dependent:
        return _varchar(value)
    return _varchar(_canonical(value, found, 0))


def _may_depend(type_name: str) -> bool:
    """Whether the type's name mentions a type whose text is not canonical (the parser then decides:
    a STRUCT field named "double" does not make a type of it)."""
    upper = type_name.upper()
    return any(word in upper for word in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "VARIANT"))
