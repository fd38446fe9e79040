"""The published columns' facts and class keys: how each column is keyed, hashed and published.

`column_facts` reads, once and before any scan (probes of LIMIT 0 and the catalog), what the
engine says of the columns a statement publishes: each one's kind (below), which are strings,
whether the engine has COLLATE c, and the collation each VARCHAR was declared with. The result,
a frozen `ColumnFacts`, is handed to every step that keys, hashes or publishes those columns (the
cells table, the population's classes, the keyed table, the join back, the checks).
Also the small SQL helpers every step shares (quoted columns, temp tables).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlglot import exp

from duckanon.backends.base import Backend, BackendError
from duckanon.errors import AnonymizeError
from duckanon.pipeline.canonical import NoCanonicalText, canonical_text, parse_type
from duckanon.names import TableName


def qcol(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def scratch_name(kind: str) -> str:
    """A temp object's name no user table has and no concurrent statement shares."""
    return f"__duckanon_{kind}_{uuid.uuid4().hex[:12]}"


def temp_table(name: str) -> TableName:
    """The temp table `name` (Backend.create_temp), as a plan's source to read instead of the
    user's: the copies of a changing source, of masked identifiers, of several sensitive columns."""
    return TableName(exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier("main", quoted=True),
                               catalog=exp.to_identifier("temp", quoted=True)))


# The class key.
#
# A published QI cell is text, so a class is a set of rows with the same published text, whatever
# the column's type. GROUP BY groups by `=`, which for many types is coarser than the text: a
# collation ('Ann' = 'ann' under NOCASE, or under SET default_collation), INTERVAL ('1 month' =
# '30 days'), -0.0 = 0.0, 'nan' = '-nan', nested values holding any of these. Grouping those by
# value would publish each row's own spelling inside one class: classes smaller than k, and the
# spelling telling rows apart. So each column is grouped by a key whose equality is exactly the
# equality of the published text:
#
#   VALUE   types whose `=` is equality of their text (integers, DECIMAL of one scale, DATE, TIME,
#           TIMESTAMP, UUID, BLOB, BIT, ENUM, ..., and VARCHAR compared byte by byte: no collation
#           of its own and no default_collation), and TIMESTAMPTZ (`=` is the instant's, and its
#           canonical text tells every instant apart): the value itself (the fastest GROUP BY and join);
#   STRING  VARCHAR under a collation, JSON: the string with the binary collation; one spelling of
#           the class is kept as its value, with the column's own collation (kept by the output);
#   TYPED   types with a coarser `=` whose text still determines the value (FLOAT, DOUBLE, INTERVAL,
#           TIMETZ): the text with the binary collation; one value of the class is
#           kept to order the codes (Mondrian's ranges stay numeric), and its text to publish;
#   TEXT    everything else (LIST, ARRAY, STRUCT, MAP, UNION, types of extensions): the text with
#           the binary collation, and the text as the class's value (MAP{'a=b': 'c'} and
#           MAP{'a': 'b=c'} print alike: one published string, one class).
#
# The text published is a value's canonical text (canonical.canonical_text): DuckDB's own text,
# except for a TIMESTAMPTZ (alone or inside a LIST, STRUCT, MAP, UNION), which a session prints in
# its TimeZone: it is published, and hashed for the published order, as its instant in UTC (a
# TIMESTAMPTZ by value), so two sessions publish the same release. A TEXT column's key stays its
# session's text (the population's classes are keyed alike, population.py): within one session
# that text and the canonical one tell the same values apart, so the classes are the same.
#
# What is published is never the key itself: its collation (c) would clash with the collations
# of other columns wherever DuckDB combines them (a UNPIVOT, a join, hash()).
#
# The binary collation is explicit (COLLATE c), so neither a column's collation nor the session's
# default_collation can merge two spellings again. The join back to the source compares the same
# key computed on the source row. The sensitive column is keyed the same way (each spelling is
# published as it is), but its codes, which the privacy models count, follow `=`: 'Flu' and 'flu'
# in a NOCASE column are one sensitive value, never two.
#
# A window's ORDER BY column comes out of DuckDB 1.5 normalized (-0.0 as 0.0), so a value that is
# published is never a window's sort column when its type has such values: a TYPED column
# publishes its text p{j}, and the sensitive codes of a TYPED column sort a copy of the value.

VALUE, STRING, TYPED, TEXT = "value", "string", "typed", "text"
VALUE_TYPES = {
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    "UHUGEINT", "DATE", "TIME", "TIME_NS", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "UUID", "BLOB",
    "BIT", "BIGNUM", "VARINT",
    # an instant: `=` is the instant's, and a session prints every instant apart (its offset included);
    # hashed by value, the published order does not follow the session's TimeZone
    "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ_NS",
}
STRING_TYPES = {"VARCHAR", "JSON"}
TYPED_TYPES = {"FLOAT", "DOUBLE", "INTERVAL", "TIME WITH TIME ZONE"}
BINARY_COLLATION = "c"  # DuckDB's name for byte-wise comparison (also "binary", "posix")


def type_kind(type_name: str) -> str:
    """How a column of this DuckDB type (as DESCRIBE writes it) is keyed: VALUE, STRING, TYPED or TEXT."""
    name = type_name.strip().upper()
    if name in VALUE_TYPES or name.startswith("DECIMAL(") or name.startswith("ENUM("):
        return VALUE
    if name in STRING_TYPES:
        return STRING
    if name in TYPED_TYPES:
        return TYPED
    return TEXT


class SessionKind(str):
    """The kind of a column whose type a session prints in its settings (a TIMESTAMPTZ, alone or
    inside a container): equal to its kind (VALUE or TEXT), and carrying the type, from which its
    published text is made (published_text)."""

    type_name: str

    def __new__(cls, kind: str, type_name: str) -> "SessionKind":
        made = super().__new__(cls, kind)
        made.type_name = type_name
        return made


def _kind_with_type(kind: str, type_name: str) -> str:
    """`kind`, as a SessionKind where the type's text depends on the session's settings and has a
    canonical text. A type the parser does not read (an extension's) and a VARIANT (no canonical
    text: canonical.NoCanonicalText) keep DuckDB's own text, as before."""
    try:
        if not parse_type(type_name).session_dependent:
            return kind
        canonical_text(exp.column("v", quoted=True), type_name)
    except NoCanonicalText:
        return kind
    return SessionKind(kind, type_name)


BINARY_COLLATIONS = {"", "binary", "c", "posix"}


@dataclass(frozen=True)
class ColumnFacts:
    """What the engine says of the published columns (column_facts). Without them (another
    engine than DuckDB, or before they are read) every column is keyed by value."""

    kinds: dict[str, str] = field(default_factory=dict)  # lower-case name -> VALUE / STRING / TYPED / TEXT
    strings: frozenset[str] = frozenset()  # the columns that are strings (VARCHAR, JSON), lower-case
    collations: bool = False  # the engine has COLLATE c (Backend.has_collations: see binary_text)
    # the VARCHAR columns declared with a collation (lower-case name -> the collation, as the
    # engine writes it): a QI that the keep path decodes from a code gets it back (join_back)
    declared: dict[str, str] = field(default_factory=dict)

    def kind(self, column: str) -> str:
        return self.kinds.get(column.lower(), VALUE)

    def session_type(self, column: str) -> str | None:
        """The type of `column` where a session prints it in its settings, else None."""
        return getattr(self.kinds.get(column.lower()), "type_name", None)

    def shows_own_text(self, column: str) -> bool:
        """Whether the cells hold the column's published text beside its value (p{j}): a TYPED
        column, or a VALUE one whose text follows the session (a TIMESTAMPTZ)."""
        kind = self.kind(column)
        return kind == TYPED or (kind == VALUE and self.session_type(column) is not None)


def column_facts(backend: Backend, source: TableName, columns: list[str]) -> ColumnFacts:
    """The facts of the published `columns` of `source`, from the types the backend binds for them
    (with their collations). A type that has no text (no cast to VARCHAR) cannot be published as
    text: refused, naming it."""
    if not backend.binds_column_types or not columns:
        return ColumnFacts({c.lower(): VALUE for c in columns}, collations=backend.has_collations)  # e.g. Spark
    probe = exp.select(*[qcol(c) for c in columns]).from_(source.table.copy()).limit(0)
    types = backend.column_types(probe)
    kinds = {c.lower(): _kind_with_type(type_kind(t), t) for c, t in zip(columns, types)}
    strings = frozenset(c.lower() for c, t in zip(columns, types) if t.strip().upper() in STRING_TYPES)
    varchars = [c for c, t in zip(columns, types) if t.strip().upper() == "VARCHAR"]
    declared: dict[str, str] = {}
    if varchars:
        collations, default = backend.collations(source, varchars)
        declared = {column.lower(): collation for column, collation in collations.items()}
        for column in varchars:
            collation = collations.get(column)
            binary = collation.lower() in BINARY_COLLATIONS if collation else default.lower() in BINARY_COLLATIONS
            kinds[column.lower()] = VALUE if binary else STRING
    for column, type_name in zip(columns, types):
        if kinds[column.lower()] in (TYPED, TEXT):
            try:
                backend.column_types(exp.select(text_of(qcol(column))).from_(source.table.copy()).limit(0))
            except BackendError:
                raise AnonymizeError(f"column '{column}' has type {type_name}, which has no text form "
                                     "(no cast to VARCHAR): duckanon cannot publish it") from None
    return ColumnFacts(kinds, strings, backend.has_collations, declared)


def published_text(facts: ColumnFacts, column: str, value: exp.Expr) -> exp.Expr:
    """The text a value of `column` is published as: its canonical text (the instant in UTC of a
    TIMESTAMPTZ, inside a container too), which is CAST(value AS VARCHAR) for every type whose text
    no setting changes."""
    type_name = facts.session_type(column)
    if type_name is None:
        return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))
    return canonical_text(value, type_name)


def text_of(value: exp.Expr) -> exp.Expr:
    """The published text of a value, compared byte by byte."""
    return exp.Collate(this=exp.Cast(this=value, to=exp.DataType.build("VARCHAR")),
                       expression=exp.Var(this=BINARY_COLLATION))


def key_of(kind: str, value: exp.Expr) -> exp.Expr:
    """The class key of a source value (see above): equal exactly when the published texts are."""
    return value if kind == VALUE else text_of(value)


def binary_text(facts: ColumnFacts, value: exp.Expr) -> exp.Expr:
    """A VARCHAR compared and hashed byte by byte whatever its collation (DuckDB's COLLATE c;
    another engine's strings compare byte by byte already). Also what lets VARCHARs of different
    collations meet in one hash(): DuckDB refuses to combine them."""
    if not facts.collations:
        return value
    return exp.Collate(this=value, expression=exp.Var(this=BINARY_COLLATION))


def hashable(facts: ColumnFacts, column: str, value: exp.Expr) -> exp.Expr:
    """A published value of `column` as it enters a hash() of the published order: by value where
    equal values print alike (a VARCHAR byte by byte, a TIMESTAMPTZ's instant), else by its
    published text byte by byte (a collation would hash 'Ann' and 'ann' alike; a LIST of
    TIMESTAMPTZ by its canonical text, never the session's)."""
    if facts.kind(column) == TEXT and facts.session_type(column) is not None:
        return exp.Collate(this=published_text(facts, column, value), expression=exp.Var(this=BINARY_COLLATION))
    return key_hashable(facts, column, value)


def key_hashable(facts: ColumnFacts, column: str, key: exp.Expr) -> exp.Expr:
    """A class key of `column` (key_of), or a value of a column whose text no setting changes, as
    it enters a hash(): the value, a string byte by byte, or its text byte by byte."""
    if facts.kind(column) != VALUE:
        return text_of(key)
    return binary_text(facts, key) if column.lower() in facts.strings else key


def count_all() -> exp.Expr:
    return exp.func("count", exp.Star())
