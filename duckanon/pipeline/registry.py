"""The publication registry: what each ANONYMIZE published, from what, and whether it is current.

A table `duckanon_publications` in the source's database holds one row per published target,
written in the publishing transaction when the target is in that database too (else right after
the release commits, in a transaction of its own). Nothing derived from the source (names,
counts, checksums, the statement) is ever written into any other database: a source that is a
file, a DataFrame, a temporary table or in a read-only database gets no entry, and the release
says why in `details.registry`.

An entry holds the *bound* statement as data, never as SQL to run: the target and the source as
identifier parts (the registry's own database is "this database": NULL in `target_database`, and
the source is always in it; a target in another database is named by that database's alias), the
options as typed JSON values (with `hierarchy_tables`: each `table(name)` hierarchy as the table
DuckDB resolved at publish time, in identifier parts like the target's), the published transformation, and a fingerprint of the source (its
row count and an order-independent checksum of the columns the statement reads: fingerprint_sql).
`entry_digest`, a SHA-256 of the other fields, tells an entry duckanon wrote from one edited by
hand. Every query built from an entry is a sqlglot expression with quoted identifiers and literal
values; an entry that does not read back as that structure is `corrupt`: listed so, never run.
The table is marked as duckanon's by its comment (REGISTRY_COMMENT) and its exact columns; a table
of that name that is not duckanon's is never written, read or dropped.

`duckanon_publications()` is a TEMP table macro, generated per connection from the registries of
every attached database (install_listing): each entry with the source's current fingerprint and
`status` current, stale (the fingerprint differs), source missing, source lost column x, corrupt,
or (a registry of the previous format, whose sources were SQL text) outdated: publish again.

Every release has a random id (Recording.release_id, a UUID: never derived from the source) on the
target's comment and in its entry; the listing and REFRESH compare them (target_state): an entry
whose target holds another release is `superseded` (or `target replaced` when the table there is
not duckanon's), and REFRESH never writes it. DuckDB cannot commit two databases at once, so an
entry kept in another database than its release is first marked with the new release as pending
(mark_pending), then the release commits, then the entry is written: a split between the last two
(a kill, a failed write) is listed as `unrecorded release`, which REFRESH brings up to date.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import sys
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError

from duckanon import hierarchy
from duckanon._version import __version__
from duckanon.backends import duckdb_names
from duckanon.backends.base import Backend
from duckanon.backends.duckdb import in_explicit_transaction
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import duckdb_sql
from duckanon.pipeline.histogram import FINGERPRINT_LANES, fingerprint_checksum, fingerprint_factor, fingerprint_product
from duckanon.pipeline.plan import Plan, hierarchy_specs
from duckanon.pipeline.provenance import release_parameters
from duckanon.sql.parser import AnonDialect, Anonymize, AnonOption, parse_statement
from duckanon.sql.statement import AnonymizeStatement, TableName, bind_statement, shown_name

REGISTRY = "duckanon_publications"
FORMAT = 2
REGISTRY_COMMENT = 'duckanon registry {"format": 2}'
COLUMNS = {
    "target_database": "VARCHAR",  # NULL: this database (the registry's own); else the alias of another
    "target_schema": "VARCHAR", "target_name": "VARCHAR",
    "source_schema": "VARCHAR", "source_name": "VARCHAR",  # the source is always in this database
    "statement": "JSON",  # {"format": 2, "options": [[name, value], ...]}: the bound options as typed values
    "statement_text": "VARCHAR",  # the statement as written, for people: never parsed nor run
    "parameters": "JSON", "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "source_checksum": "HUGEINT",
    "summary": "JSON", "transformation": "JSON", "entry_digest": "VARCHAR",
}
# the registry of duckanon before format 2 (source and statement as SQL text): listed as outdated
PREVIOUS_COLUMNS = {
    "target": "VARCHAR", "source": "VARCHAR", "statement": "VARCHAR", "parameters": "JSON",
    "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "source_checksum": "HUGEINT",
    "summary": "JSON", "transformation": "JSON",
}
JSON_COLUMNS = ("statement", "parameters", "summary", "transformation")
CORRUPT = "corrupt"
OUTDATED = "outdated: publish again"


def _identifier(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def table_of(catalog: str | None, schema: str, name: str) -> exp.Table:
    """catalog.schema.name with every part quoted (identifiers, never SQL text)."""
    return exp.Table(this=_identifier(name), db=_identifier(schema),
                     catalog=_identifier(catalog) if catalog is not None else None)


def shown(catalog: str, schema: str, name: str) -> str:
    return shown_name(TableName(table_of(catalog, schema, name)))


def registry_table(catalog: str) -> exp.Table:
    return table_of(catalog, "main", REGISTRY)


# ----------------------------------------------------------------------------- the fingerprint

def fingerprint_select(source: exp.Table, columns) -> exp.Select:
    """SELECT (rows, checksum) of `source` over `columns`: per lane, the sum over the rows of the
    product of one factor per column, modulo a prime (histogram.fingerprint_factor); the order
    of the rows does not matter and every row counts. The histogram's GROUP BY computes the same
    number when it publishes (histogram.source_fingerprint)."""
    return exp.select(exp.alias_(exp.func("count", exp.Star()), "n"),
                      exp.alias_(exp.func("coalesce", _checksum_of(tuple(columns)), exp.Literal.number(0)), "checksum")
                      ).from_(source.copy())


@lru_cache(maxsize=256)
def _checksum_expression(columns: tuple[str, ...]) -> exp.Expr:
    lanes = [exp.func("sum", fingerprint_product([fingerprint_factor(exp.column(c, quoted=True), i, lane)
                                                  for i, c in enumerate(columns)]))
             for lane in FINGERPRINT_LANES]
    return fingerprint_checksum(lanes)


def _checksum_of(columns: tuple[str, ...]) -> exp.Expr:
    return _checksum_expression(columns).copy()


def fingerprint_sql(source, columns) -> str:
    """fingerprint_select as DuckDB SQL; `source` a TableName, an exp.Table, or (in tests and
    benchmarks) a table name as text, read as a table name only."""
    if isinstance(source, TableName):
        source = source.table
    elif isinstance(source, str):
        source = exp.to_table(source, dialect="duckdb")
    return fingerprint_select(source, columns).sql("duckdb")


def fingerprint(backend: Backend, source: TableName, columns: list[str]) -> tuple[int, int]:
    rows, checksum = backend.one(fingerprint_select(source.table, columns))
    return int(rows), int(checksum)


# ----------------------------------------------------------------------------- which table is ours

def registry_kind(con, catalog: str) -> str | None:
    """What `<catalog>.main.duckanon_publications` is: 'ours' (duckanon's comment and exact
    columns), 'previous' (the registry of an earlier duckanon: its exact columns, no comment),
    'foreign' (anything else of that name: never written, read or dropped), or None (none)."""
    found = con.execute("SELECT comment FROM duckdb_tables() WHERE database_name = ? AND lower(schema_name) = 'main' "
                        "AND lower(table_name) = ? AND NOT temporary", [catalog, REGISTRY]).fetchall()
    if not found:
        views = con.execute("SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND lower(schema_name) = 'main' "
                            "AND lower(view_name) = ?", [catalog, REGISTRY]).fetchone()[0]
        return "foreign" if views else None
    comment = found[0][0]
    columns = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? "
                          "AND lower(schema_name) = 'main' AND lower(table_name) = ? ORDER BY column_index",
                          [catalog, REGISTRY]).fetchall()
    if comment == REGISTRY_COMMENT and columns == list(COLUMNS.items()):
        return "ours"
    if not comment and columns == list(PREVIOUS_COLUMNS.items()):
        return "previous"
    return "foreign"


def _not_ours(catalog: str, kind: str) -> str:
    where = f"{shown(catalog, 'main', REGISTRY)}"
    if kind == "previous":
        return (f"not recorded: {where} is the registry of an earlier duckanon (its entries cannot be refreshed; "
                "drop it to record new releases)")
    return f"not recorded: {where} is a table duckanon did not make (left untouched)"


# ----------------------------------------------------------------------------- where an entry goes

@dataclass
class Placement:
    """The database whose registry takes the release's entry (the source's), or why none does."""

    database: str | None
    why_not: str | None = None
    with_release: bool = False  # the target is in that database too: the entry commits with the release


def placement(backend: Backend, plan: Plan) -> Placement:
    try:
        return _placement(backend.con, plan)
    except duckdb.Error as error:  # the catalog could not be read: the release stands, unrecorded
        return Placement(None, f"not recorded: {str(error).splitlines()[0][:200]}")


def _placement(con, plan: Plan) -> Placement:
    parts = [part.name for part in plan.source.table.parts]
    kind = None
    if len(parts) == 3:
        kind = con.execute(
            "SELECT 'table' FROM duckdb_tables() WHERE database_name = $1 AND schema_name = $2 AND table_name = $3 "
            "UNION ALL SELECT 'view' FROM duckdb_views() WHERE database_name = $1 AND schema_name = $2 "
            "AND view_name = $3", parts).fetchone()
    if kind is None:
        return Placement(None, "not recorded: the source is not a table or view of a database (a file, a DataFrame): "
                               "the registry lives in the source's database, and nothing about a source is written "
                               "anywhere else")
    catalog = parts[0]
    if catalog.lower() == "temp":
        return Placement(None, "not recorded: the source is temporary (a TEMP table or view, or a registered "
                               "DataFrame): the registry lives in the source's database, and this one ends with the "
                               "connection")
    readonly, database_type = con.execute("SELECT readonly, type FROM duckdb_databases() WHERE database_name = ?",
                                          [catalog]).fetchone()
    if readonly:
        return Placement(None, f"not recorded: the source's database {catalog} is read-only (the registry lives in "
                               "the source's database, and nothing about a source is written anywhere else)")
    if (database_type or "").lower() != "duckdb":
        return Placement(None, f"not recorded: the source's database {catalog} is not a DuckDB database")
    target_catalog = plan.target.table.catalog
    if target_catalog.lower() == "temp":
        return Placement(None, "not recorded: the target is a temporary table (it ends with the connection)")
    for column, parts in hierarchy_tables(con, plan).items():
        if parts[0].lower() == "temp":
            return Placement(None, f"not recorded: the hierarchy table of column {column} is temporary (a TEMP table "
                                   "or view): it ends with the connection, and REFRESH reads the hierarchy tables "
                                   "the release was made with")
    kind = registry_kind(con, catalog)
    if kind not in (None, "ours"):
        return Placement(None, _not_ours(catalog, kind))
    return Placement(catalog, None, with_release=target_catalog.lower() == catalog.lower())


def hierarchy_tables(con, plan: Plan) -> dict[str, tuple[str, str, str]]:
    """QI column -> the table or view its `table(name)` hierarchy reads, fully qualified as DuckDB
    resolves the name now (parse_spec reads it with query_table(), in this session): kept in the
    entry so that REFRESH reads the same object. A name that is no catalog object, or whose
    reading by query_table() is not the object's, is left out (REFRESH reads the name again)."""
    specs = plan.statement.hierarchies
    if specs is None:
        return {}
    found = {}
    for column, spec in hierarchy_specs(specs, plan.qi).items():
        name = hierarchy.table_spec_name(spec, column)
        if name is None:
            continue
        try:
            table = TableName(exp.to_table(name, dialect="duckdb"))
            parts = tuple(part.name for part in duckdb_names.resolved(con, table).table.parts)
            if len(parts) != 3 or duckdb_names._plan_of(con, "query_table(?)", [name])[0] != \
                    duckdb_names._plan_of(con, table_of(*parts).sql(dialect="duckdb"))[0]:
                continue
        except (SqlglotError, duckdb.Error):
            continue
        found[column] = parts
    return found


def _hierarchy_parts(data: dict, database: str) -> dict[str, tuple[str, str, str]]:
    """The entry's `hierarchy_tables` (QI column -> [database or None for this one, schema,
    name]) as table parts with this database's alias now; {} for an entry without them (an
    older format-2 entry: its `table(name)` hierarchies are read by name)."""
    stored = data.get("hierarchy_tables")
    if stored is None:
        return {}
    if not isinstance(stored, dict) or not stored:
        raise Corrupt("hierarchy_tables")
    parts_of = {}
    for column, parts in stored.items():
        if not (isinstance(parts, list) and len(parts) == 3) or not column:
            raise Corrupt("hierarchy_tables")
        catalog = database if parts[0] is None else _text(parts[0], "hierarchy_tables")
        resolved = (catalog, _text(parts[1], "hierarchy_tables"), _text(parts[2], "hierarchy_tables"))
        if any(hierarchy.PLACEHOLDER_PATTERN.search(part) for part in resolved):
            raise Corrupt("hierarchy_tables")  # parse_spec would read a `{word}` in a name as a placeholder
        parts_of[column] = resolved
    return parts_of


def hierarchy_parts(entry: Entry) -> dict[str, tuple[str, str, str]]:
    """The hierarchy tables an entry's release was made with, as table parts (see _hierarchy_parts)."""
    return _hierarchy_parts(entry.statement, entry.registry)


def _resolved_hierarchies(value, resolved: dict, options: list) -> dict:
    """The `hierarchies` option with each resolved column's spec made `table("db"."schema"."name")`."""
    if isinstance(value, str):
        qi = next((item[1] for item in options if isinstance(item, list) and len(item) == 2 and item[0] == "qi"), None)
        if not isinstance(qi, list) or not all(isinstance(c, str) and c for c in qi):
            raise Corrupt("hierarchy_tables")
        value = {column: value for column in qi}
    if not isinstance(value, dict):
        raise Corrupt("hierarchies")
    value = dict(value)
    for column, parts in resolved.items():
        key = next((name for name in value if isinstance(name, str) and name.lower() == column.lower()), None)
        if key is None:
            raise Corrupt("hierarchy_tables")  # a table for a column the statement gives no hierarchy
        value[key] = hierarchy.table_spec(*parts)
    return value


# ----------------------------------------------------------------------------- the statement as data

_NAME_LISTS = ("qi", "keep", "identifiers", "sensitive")
_NUMBERS = ("k", "l", "t", "c", "seed", "time_limit", "suppression_limit", "k_map", "average_risk", "highest_risk",
            "population_uniqueness", "beta_likeness", "delta_disclosure", "population_size", "significance",
            "risk_threshold", "memory_limit")
_TEXTS = ("report", "spark_master", "sa_hierarchy", "mask_key", "engine", "materialize", "method", "l_variant",
          "metric", "t_distance", "beta_variant", "estimator", "population_weight")
_SHAPED = ("patterns", "sa_order", "hierarchies", "delta_presence", "population", "weights", "mask")
OPTION_NAMES = _NAME_LISTS + _NUMBERS + _TEXTS + _SHAPED


class Corrupt(ValueError):
    """A registry row that does not read back as duckanon's structure."""


def given_options(text: str) -> list[str]:
    """The option names an ANONYMIZE statement being run was written with (its live text)."""
    return [option.name for option in parse_statement(text).args["options"]]


def _options_set(statement: AnonymizeStatement) -> list[str]:
    """The options of a statement built without a text (from Python): those that differ from
    ANONYMIZE's defaults, the seed always (it orders the published rows)."""
    default = AnonymizeStatement(source=statement.source, target=statement.target)
    differ = [name for name in OPTION_NAMES if name != "sensitive" and getattr(statement, name, None) !=
              getattr(default, name, None)]
    return differ + (["sensitive"] if statement.sensitives else []) + ([] if "seed" in differ else ["seed"])


def statement_data(plan: Plan, database: str, given: list[str]) -> dict:
    """The bound statement's options `given`, as typed JSON values (no SQL)."""
    statement = plan.statement
    options = []
    for name in given:
        if statement.sweep is not None and statement.sweep[0] == name:
            value = list(statement.sweep[1])
        elif name == "sensitive":
            value = list(statement.sensitives)
        elif name == "population":
            parts = [part.name for part in (plan.population or statement.population).table.parts]
            if len(parts) == 3 and parts[0].lower() == database.lower():
                parts[0] = None  # this database
            value = parts
        elif name == "mask":
            value = {column: str(rule) for column, rule in statement.mask.items()}
        elif name == "delta_presence":
            value = list(statement.delta_presence)
        else:
            value = getattr(statement, name)
        options.append([name, value])
    return {"format": FORMAT, "options": options}


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Corrupt(what)
    return value


def _number_literal(value, what: str) -> exp.Expr:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Corrupt(what)
    return exp.Literal.number(str(value) if isinstance(value, int) else repr(value))


def _names_expression(value, what: str) -> exp.Expr:
    if not isinstance(value, list) or not value:
        raise Corrupt(what)
    return exp.Tuple(expressions=[exp.Literal.string(_text(item, what)) for item in value])


def _option_expression(name: str, value) -> exp.Expr:
    """The option's value as the expression ANONYMIZE's binder reads (literals and quoted names)."""
    if name in _NAME_LISTS:
        return _names_expression(value, name)
    if name in _NUMBERS:
        if isinstance(value, list):  # a sweep
            if not value:
                raise Corrupt(name)
            return exp.Tuple(expressions=[_number_literal(item, name) for item in value])
        return _number_literal(value, name)
    if name in _TEXTS:
        return exp.Literal.string(_text(value, name))
    if name == "patterns":
        if not isinstance(value, list) or not value:
            raise Corrupt(name)
        return exp.Tuple(expressions=[_names_expression(item, name) if item else exp.Null() for item in value])
    if name == "sa_order":
        if not isinstance(value, list) or not value:
            raise Corrupt(name)
        return exp.Tuple(expressions=[exp.Null() if item is None else exp.Literal.string(_text(item, name))
                                      for item in value])
    if name in ("hierarchies", "weights", "mask"):
        if name == "hierarchies" and isinstance(value, str):
            return exp.Literal.string(value)
        if not isinstance(value, dict) or not value:
            raise Corrupt(name)
        convert = _number_literal if name == "weights" else (lambda item, what: exp.Literal.string(_text(item, what)))
        return exp.Tuple(expressions=[exp.EQ(this=exp.column(_text(column, name), quoted=True),
                                             expression=convert(item, name)) for column, item in value.items()])
    if name == "delta_presence":
        if not isinstance(value, list) or len(value) != 2:
            raise Corrupt(name)
        return exp.Tuple(expressions=[_number_literal(item, name) for item in value])
    if name == "population":
        if not isinstance(value, list) or not 1 <= len(value) <= 3:
            raise Corrupt(name)
        return value  # made into a name by rebuild(), which knows this database's alias
    raise Corrupt(f"unknown option {name}")


def rebuild(data, database: str, source: exp.Table, target: exp.Table) -> tuple[AnonymizeStatement, list[str]]:
    """The ANONYMIZE statement an entry holds, rebuilt from its structure (never from text) and
    bound by ANONYMIZE's own binder, which checks every value again; and its option names. A
    statement without a seed of its own gets a fresh one (as ANONYMIZE does)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("options"), list):
        raise Corrupt("statement")
    options, given = [], []
    resolved = _hierarchy_parts(data, database)
    if resolved and not any(isinstance(item, list) and item[:1] == ["hierarchies"] for item in data["options"]):
        raise Corrupt("hierarchy_tables")
    for item in data["options"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)) or item[0] not in OPTION_NAMES \
                or item[0] in given:
            raise Corrupt("statement")
        name, value = item
        if name == "hierarchies" and resolved:  # the tables resolved at publish time, never the session's
            value = _resolved_hierarchies(value, resolved, data["options"])
        expression = _option_expression(name, value)
        if name == "population":
            parts = [database if part is None and i == 0 and len(value) == 3 else _text(part, name)
                     for i, part in enumerate(value)]
            expression = exp.Column(this=_identifier(parts[-1]),
                                    table=_identifier(parts[-2]) if len(parts) >= 2 else None,
                                    db=_identifier(parts[-3]) if len(parts) == 3 else None)
        options.append(AnonOption(this=name, expression=expression, position=0))
        given.append(name)
    parsed = Anonymize(this=source.copy(), into=target.copy(), options=options)
    try:
        statement = bind_statement(parsed, parsed.sql(dialect=AnonDialect))
    except AnonymizeError as error:
        raise Corrupt(f"statement: {error}") from None
    if statement.seed is None:
        statement.seed = secrets.randbelow(2**63)
    return statement, given


# ----------------------------------------------------------------------------- entries, read as data

def _digest(values: dict) -> str:
    """SHA-256 of an entry's fields (JSON fields as their parsed values): tells an entry duckanon
    wrote from one edited since. Not a secret: it detects edits, it does not stop a forger (no
    entry is ever run as SQL, so a forged one can at most name a table of this database)."""
    canonical = {}
    for name in COLUMNS:
        if name == "entry_digest":
            continue
        value = values[name]
        if name in JSON_COLUMNS and value is not None:
            value = _loads(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        canonical[name] = value
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _refuse_constant(text):
    raise Corrupt(f"non-finite number {text}")


def _loads(text):
    if not isinstance(text, str):
        raise Corrupt("JSON")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        raise Corrupt(f"JSON: {error}") from None


@dataclass
class Entry:
    """One registry row as read: the database holding it (`registry`, its alias now) and, unless
    `problem` says it is corrupt or outdated, its fields checked."""

    registry: str
    problem: str | None = None
    target: tuple[str, str, str] | None = None  # catalog (alias now), schema, name
    target_database: str | None = None  # as stored: None for this database
    source: tuple[str, str, str] | None = None
    row: dict = field(default_factory=dict)
    statement: dict | None = None
    summary: dict | None = None
    transformation: dict | None = None
    shown_target: str | None = None  # for a corrupt or outdated row, what can be shown of its target
    guessed: tuple[str, str, str] | None = None  # and the target it seems to name, to refuse REFRESH of it

    def target_key(self) -> tuple[str, str, str]:
        return tuple(part.lower() for part in self.target)

    def guessed_key(self) -> tuple[str, str, str] | None:
        return tuple(part.lower() for part in self.guessed) if self.guessed else None

    def target_name(self) -> TableName:
        return TableName(table_of(*self.target))

    def source_name(self) -> TableName:
        return TableName(table_of(*self.source))

    @property
    def shown(self) -> str:
        return shown(*self.target) if self.target else (self.shown_target or "?")

    @property
    def source_shown(self) -> str:
        return shown(*self.source)

    def _recorded(self, key: str):
        return self.statement.get(key) if isinstance(self.statement, dict) else None

    @property
    def release(self) -> str | None:
        """The random id of the release this entry describes (written on the target's comment too);
        None for an entry written before release ids."""
        return self._recorded("release")

    @property
    def pending_release(self) -> str | None:
        """The id of a release into another database that was about to commit when this entry was
        last written (the entry is updated in a second transaction, after the release's)."""
        return self._recorded("pending_release")

    def lenient_release(self) -> str | None:
        """A corrupt row's release id, if its statement still reads as JSON (only to name it in REFRESH's refusal)."""
        try:
            data = json.loads(self.row.get("statement") or "")
        except (TypeError, ValueError):
            return None
        value = data.get("release") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None


@lru_cache(maxsize=4096)
def _statement_checked(text: str, database: str, source: tuple, target: tuple) -> bool:
    """rebuild() accepts the entry's statement (raises Corrupt otherwise): checked once per
    statement and names (the listing reads every entry after every statement)."""
    rebuild(_loads(text), database, table_of(*source), table_of(*target))
    return True


def _entry(registry: str, row: dict) -> Entry:
    """The row as an Entry, or an Entry whose problem is `corrupt`."""
    try:
        target_database = row["target_database"]
        if target_database is not None:
            _text(target_database, "target_database")
        names = [_text(row[c], c) for c in ("target_schema", "target_name", "source_schema", "source_name")]
        for column in COLUMNS:
            if column != "target_database" and row[column] is None:
                raise Corrupt(column)
        if row["entry_digest"] != _digest(row):
            raise Corrupt("entry_digest")
        statement, summary, transformation, parameters = (_loads(row[c]) for c in
                                                          ("statement", "summary", "transformation", "parameters"))
        if not (isinstance(summary, dict) and isinstance(transformation, dict) and isinstance(parameters, dict)):
            raise Corrupt("summary")
        levels = transformation.get("levels")
        if not (transformation.get("method") is None or isinstance(transformation.get("method"), str)) or not (
                levels is None or (isinstance(levels, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                                                     for v in levels))):
            raise Corrupt("transformation")
        columns = row["source_columns"]
        if not (isinstance(columns, list) and columns and all(isinstance(c, str) and c for c in columns)):
            raise Corrupt("source_columns")
        if not isinstance(row["source_rows"], int) or row["source_rows"] < 0:
            raise Corrupt("source_rows")
        target = (target_database or registry, names[0], names[1])
        source = (registry, names[2], names[3])
        _statement_checked(row["statement"], registry, source, target)  # a statement ANONYMIZE's binder accepts
    except Exception:  # noqa: BLE001 - whatever a row holds, it is listed as corrupt, never breaks the listing
        parts = (row.get("target_database") or registry, row.get("target_schema"), row.get("target_name"))
        guessed = parts if all(isinstance(part, str) and part for part in parts) else None
        return Entry(registry, CORRUPT, shown_target=TableName(table_of(*guessed)).sql() if guessed else None,
                     guessed=guessed, row=row)
    return Entry(registry, None, target, target_database, source, row, statement, summary, transformation)


def registries(con) -> list[tuple[str, str]]:
    """(database, kind) of every attached database's registry table that duckanon may read:
    its own ('ours') and the previous format's ('previous'); a table of that name that is not
    duckanon's is never read."""
    databases = [name for (name,) in con.execute(
        "SELECT DISTINCT database_name FROM duckdb_tables() WHERE lower(table_name) = ? AND lower(schema_name) = 'main' "
        "AND NOT temporary ORDER BY ALL", [REGISTRY]).fetchall()]
    found = []
    for database in databases:
        kind = registry_kind(con, database)
        if kind in ("ours", "previous"):
            found.append((database, kind))
    return found


def _read_registries(con, kinds=None) -> list[Entry]:
    """Every entry of every registry that still exists when read. One listed a moment before can
    be gone: a release on another cursor that created the registry and then failed drops it
    again while it is empty (unprepare)."""
    read = []
    for database, kind in (registries(con) if kinds is None else kinds):
        table = registry_table(database)
        columns = COLUMNS if kind == "ours" else PREVIOUS_COLUMNS
        query = exp.select(*[exp.column(c, quoted=True) for c in columns]).from_(table)
        try:
            cursor = con.execute(query.sql("duckdb"))
        except duckdb.Error:  # dropped since it was listed (or unreadable): nothing of it is listed
            continue
        for values in cursor.fetchall():
            row = dict(zip(columns, values))
            if kind == "ours":
                read.append(_entry(database, row))
            else:
                target = row["target"] if isinstance(row["target"], str) else None
                read.append(Entry(database, OUTDATED, shown_target=target, guessed=_name_parts(target, database)))
    return read


def _name_parts(text: str | None, database: str) -> tuple[str, str, str] | None:
    """A previous-format entry's target text read as a plain table name of 1 to 3 identifiers
    and nothing else (only to match REFRESH's name and refuse it; never run), or None."""
    if not text:
        return None
    try:
        table = exp.to_table(text, dialect="duckdb")
    except Exception:  # noqa: BLE001 - not a name
        return None
    parts = table.parts
    if not 1 <= len(parts) <= 3 or not all(isinstance(part, exp.Identifier) for part in parts) or \
            table.sql("duckdb", identify=True) != exp.Table(**{k: v for k, v in table.args.items()
                                                               if k in ("this", "db", "catalog")}).sql("duckdb", identify=True):
        return None
    names = [part.name for part in parts]
    return tuple([database, "main"][:3 - len(names)] + names)


def entries(con) -> list[Entry]:
    return _read_registries(con)


# ----------------------------------------------------------------------------- the state of a source

def _source_columns(con, sources) -> dict[tuple, frozenset[str] | None]:
    """Per source (catalog, schema, name), its columns lowercased, or None where it cannot be
    read: one probe per distinct source, however many entries share it."""
    found = {}
    for source in dict.fromkeys(sources):
        try:
            probe = exp.select(exp.Star()).from_(table_of(*source)).limit(0).sql("duckdb")
            found[source] = frozenset(d[0].lower() for d in con.execute(probe).description)
        except duckdb.Error:
            found[source] = None
    return found


def _problem(columns: frozenset[str] | None, recorded) -> str | None:
    if columns is None:
        return "source missing"
    lost = [c for c in recorded if c.lower() not in columns]
    return f"source lost column {lost[0]}" if lost else None


def source_problem(con, entry: Entry) -> str | None:
    """Why the entry's source cannot be compared ('source missing', 'source lost column x'), or None."""
    return _problem(_source_columns(con, [entry.source])[entry.source], entry.row["source_columns"])


def source_state(con, entry: Entry) -> tuple[str, int | None]:
    """'current', 'stale', the entry's problem or its source's, and the source's current rows."""
    if entry.problem:
        return entry.problem, None
    problem = source_problem(con, entry)
    if problem:
        return problem, None
    rows, checksum = con.execute(fingerprint_select(table_of(*entry.source), entry.row["source_columns"]).sql("duckdb")
                                 ).fetchone()
    same = rows == entry.row["source_rows"] and int(checksum) == int(entry.row["source_checksum"])
    return ("current" if same else "stale"), int(rows)


# ----------------------------------------------------------------------------- the state of a target

# What the table at an entry's target is, against the release the entry recorded (its random id,
# written on the target's comment): REFRESH only ever replaces the release its entry recorded.
SUPERSEDED = "superseded"  # the target carries another release of duckanon: published again from elsewhere
REPLACED = "target replaced"  # the target carries no release id: a table or view duckanon did not publish
UNRECORDED = "unrecorded release"  # the target carries the release the entry was marked as pending
NOT_ATTACHED = "not attached"
OTHER_FILE = "another file"


def database_file(con, alias: str) -> str | None:
    found = con.execute("SELECT path FROM duckdb_databases() WHERE lower(database_name) = lower(?)", [alias]).fetchone()
    return found[0] if found else None


def carried_release(comment) -> str | None:
    """The release id a published table's comment carries (provenance.describe_target), or None."""
    if not isinstance(comment, str) or not comment.startswith("duckanon {"):
        return None
    try:
        value = json.loads(comment[len("duckanon "):]).get("release")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def target_object(con, catalog: str, schema: str, name: str) -> tuple[bool, str | None]:
    """Whether a table or view exists at the target, and the release id its comment carries."""
    found = con.execute(
        "SELECT comment FROM duckdb_tables() WHERE lower(database_name) = lower($1) AND lower(schema_name) = lower($2) "
        "AND lower(table_name) = lower($3) UNION ALL SELECT comment FROM duckdb_views() WHERE lower(database_name) = "
        "lower($1) AND lower(schema_name) = lower($2) AND lower(view_name) = lower($3)", [catalog, schema, name]).fetchall()
    return (True, carried_release(found[0][0])) if found else (False, None)


def target_state(con, entry: Entry) -> str | None:
    """None when REFRESH may replace the entry's target (it carries the entry's release, or it is
    gone from the very database the entry recorded); UNRECORDED (may too: the release committed, its
    entry was not updated); else SUPERSEDED, REPLACED, NOT_ATTACHED or OTHER_FILE. An entry written
    before release ids is not checked."""
    catalog = entry.target[0]
    attached = con.execute("SELECT path FROM duckdb_databases() WHERE lower(database_name) = lower(?)",
                           [catalog]).fetchone()
    if attached is None:
        return NOT_ATTACHED
    if entry.release is None:
        return None
    exists, carried = target_object(con, *entry.target)
    if exists:
        if carried == entry.release:
            return None
        if carried is not None and carried == entry.pending_release:
            return UNRECORDED
        return SUPERSEDED if carried is not None else REPLACED
    if entry.target_database is not None and "target_file" in entry.statement and \
            attached[0] != entry.statement["target_file"]:
        return OTHER_FILE
    return None


def target_refusal(state: str, entry: Entry) -> str:
    """Why REFRESH does not write the entry's target, in the words of a result row or a refusal."""
    catalog = entry.target[0]
    if state == NOT_ATTACHED:
        return f"its target's database {catalog} is not attached (ATTACH it AS {catalog})"
    if state == OTHER_FILE:
        return (f"its target's database {catalog} is another file than the one it was published into (attach that "
                f"file AS {catalog})")
    if state == SUPERSEDED:
        return (f"{entry.shown} no longer holds the release its entry in database {entry.registry} recorded (it was "
                "published again from elsewhere, or its comment was changed)")
    return (f"{entry.shown} no longer holds the release its entry in database {entry.registry} recorded (a table "
            "duckanon did not publish is there now)")


# Tests set this to make a release into another database wait, between its commit and its entry's,
# until a line arrives on stdin (a subprocess test kills it with SIGKILL there).
WAIT_BETWEEN_COMMITS = "DUCKANON_TEST_WAIT_BETWEEN_COMMITS"


def _between_commits() -> None:
    if os.environ.get(WAIT_BETWEEN_COMMITS):
        print("between commits", flush=True)
        sys.stdin.readline()


def mark_pending(con, database: str, target: tuple[str, str, str], release: str) -> None:
    """Before a release into another database commits: its entry in `database` (if it has one)
    records the release as pending, committed on a second cursor, so that a split between the two
    commits (a kill -9, an entry that cannot be written) is listed as an unrecorded release. Raises
    duckdb.Error when the entry cannot be written (another transaction holds it)."""
    table = registry_table(database)
    catalog, schema, name = target
    target_database = None if catalog.lower() == database.lower() else catalog
    cursor = con.cursor()
    try:
        if registry_kind(cursor, database) != "ours":
            return
        cursor.execute("BEGIN TRANSACTION")
        query = exp.select(*[exp.column(c, quoted=True) for c in COLUMNS]).from_(table.copy()).where(_same_target())
        for values in cursor.execute(query.sql("duckdb"), [target_database, schema, name]).fetchall():
            row = dict(zip(COLUMNS, values))
            if row["entry_digest"] != _digest(row):
                continue  # corrupt: left as it is
            data = _loads(row["statement"])
            data["pending_release"] = release
            changed = {**row, "statement": json.dumps(data, sort_keys=True)}
            update = exp.Update(this=table.copy(), expressions=[
                exp.EQ(this=exp.column("statement", quoted=True), expression=exp.cast(exp.Placeholder(), "JSON")),
                exp.EQ(this=exp.column("entry_digest", quoted=True), expression=exp.Placeholder())],
                where=exp.Where(this=exp.EQ(this=exp.column("entry_digest", quoted=True), expression=exp.Placeholder())))
            cursor.execute(update.sql("duckdb"), [changed["statement"], _digest({**changed, "entry_digest": None}),
                                                  row["entry_digest"]])
        cursor.execute("COMMIT")
    except BaseException:
        try:
            cursor.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise
    finally:
        cursor.close()


def _same_target() -> exp.Expr:
    return exp.and_(
        exp.NullSafeEQ(this=exp.func("lower", exp.column("target_database", quoted=True)),
                       expression=exp.func("lower", exp.Placeholder())),
        exp.EQ(this=exp.func("lower", exp.column("target_schema", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())),
        exp.EQ(this=exp.func("lower", exp.column("target_name", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())))


# ----------------------------------------------------------------------------- writing an entry

def _create(backend: Backend, database: str) -> None:
    """The registry table, marked as duckanon's by its comment (and its exact columns)."""
    table = registry_table(database)
    backend.execute(exp.Create(this=exp.Schema(this=table, expressions=[
        exp.ColumnDef(this=_identifier(name), kind=exp.DataType.build(kind, dialect="duckdb"))
        for name, kind in COLUMNS.items()]), kind="TABLE"))
    backend.execute(duckdb_sql(f"COMMENT ON TABLE {table.sql('duckdb')} IS "
                               f"{exp.Literal.string(REGISTRY_COMMENT).sql('duckdb')}"))


def record(backend: Backend, plan: Plan, database: str, read_source: TableName, summary, transformation: dict,
           given: list[str], source_fingerprint: tuple[int, int] | None = None,
           release: str | None = None) -> tuple[str | None, int | None]:
    """Write (or replace) the target's entry into `database`'s registry, inside the current
    transaction, with the source's fingerprint as the histogram's GROUP BY computed it (or read
    now). Returns (None, the source's rows), or (why it was not written, None): a table of that
    name that is not duckanon's is left untouched."""
    kind = registry_kind(backend.con, database)
    if kind is None:
        _create(backend, database)
    elif kind != "ours":
        return _not_ours(database, kind), None
    table = registry_table(database)
    rows, checksum = source_fingerprint or fingerprint(backend, read_source, plan.published)
    target_catalog, target_schema, target_name = (part.name for part in plan.target.table.parts)
    _, source_schema, source_name = (part.name for part in plan.source.table.parts)
    target_database = None if target_catalog.lower() == database.lower() else target_catalog
    data = statement_data(plan, database, given)
    tables = hierarchy_tables(backend.con, plan)
    if tables:  # as the target is stored: None for this database, else its alias
        data["hierarchy_tables"] = {column: [None if catalog.lower() == database.lower() else catalog, schema, name]
                                    for column, (catalog, schema, name) in tables.items()}
    if release is not None:
        data["release"] = release  # the id written on the target's comment too (provenance.describe_target)
    if target_database is not None:  # which file the target's alias named: REFRESH never writes another one
        data["target_file"] = database_file(backend.con, target_database)
    summary_row = {name: value for name, value in summary.__dict__.items() if name not in ("details", "report")}
    summary_row["details"] = json.loads(summary.details)
    values = {
        "target_database": target_database, "target_schema": target_schema, "target_name": target_name,
        "source_schema": source_schema, "source_name": source_name,
        "statement": json.dumps(data, sort_keys=True),
        "statement_text": plan.statement.text.strip(),
        "parameters": json.dumps(release_parameters(plan.statement), default=str, sort_keys=True),
        "published_at": datetime.now(timezone.utc).replace(tzinfo=None), "duckanon_version": __version__,
        "duckdb_version": duckdb.__version__, "source_columns": list(plan.published), "source_rows": int(rows),
        "source_checksum": int(checksum), "summary": json.dumps(summary_row, default=str, sort_keys=True),
        "transformation": json.dumps(transformation, default=str, sort_keys=True),
    }
    values["entry_digest"] = _digest({**values, "entry_digest": None})
    backend.execute(exp.delete(table.copy(), where=_same_target()), [target_database, target_schema, target_name])
    insert = exp.insert(exp.select(*[exp.cast(exp.Placeholder(), exp.DataType.build(kind, dialect="duckdb"))
                                     for kind in COLUMNS.values()]),
                        exp.Schema(this=table.copy(), expressions=[_identifier(c) for c in COLUMNS]))
    backend.execute(insert, [values[c] for c in COLUMNS])
    return None, int(rows)


class Recording:
    """The registry's part in one release: where its entry goes (placement), the entry written in
    the release's transaction when the target is in the source's database, else right after the
    release commits (`after_commit`), or by the caller (`deferred`: REFRESH, which commits several
    releases at once). `note` says why no entry was written; `source_rows` is what was recorded."""

    def __init__(self, backend: Backend, plan: Plan, given: list[str] | None = None, deferred: bool = False):
        self.placement = placement(backend, plan) if backend.keeps_registry else Placement(None)
        self.note = self.placement.why_not if backend.keeps_registry else None
        self.given = given
        self.deferred = deferred
        self.key = None
        self.pending = None
        self.recorded = False
        self.source_rows = None
        self.release_id = uuid.uuid4().hex  # random, never derived from the source: on the target and in the entry

    @property
    def records(self) -> bool:
        return self.placement.database is not None

    def _given(self, plan: Plan) -> list[str]:
        if self.given is not None:
            return self.given
        try:
            return given_options(plan.statement.text)
        except AnonymizeError:  # no text to read (a statement built in Python)
            return _options_set(plan.statement)

    def begin(self, backend: Backend, plan: Plan) -> None:
        if self.records and self.placement.with_release:
            self.key = begin_release(backend, self.placement.database,
                                     may_create=not backend.in_explicit_transaction())

    def in_release(self, backend: Backend, plan: Plan, read_source: TableName, summary, transformation: dict,
                   source_fingerprint) -> None:
        """Inside the release's transaction, before its commit."""
        if not self.records:
            return
        arguments = (plan, self.placement.database, read_source, summary, transformation, self._given(plan),
                     source_fingerprint, self.release_id)
        if self.placement.with_release:
            self._write(backend, arguments)
        else:
            # the source is read again after the commit only if the GROUP BY did not fingerprint it
            self.pending = arguments

    def _write(self, backend: Backend, arguments) -> None:
        note, rows = record(backend, *arguments)
        self.note, self.source_rows, self.recorded = note, rows, note is None

    def before_commit(self, backend: Backend) -> None:
        """An entry kept in another database than the release's: marked as having this release
        pending before the release commits (mark_pending), or the release is refused."""
        if self.pending is None:
            return
        plan = self.pending[0]
        target = tuple(part.name for part in plan.target.table.parts)
        try:
            mark_pending(backend.con, self.placement.database, target, self.release_id)
        except duckdb.Error as error:
            verb = "REFRESH" if plan.statement.previous_release is not None else "ANONYMIZE"
            raise AnonymizeError(f"{verb} {shown_name(plan.target)}: its registry entry in database "
                                 f"{self.placement.database} cannot be written now ({str(error).splitlines()[0][:200]}): "
                                 f"nothing was written; run {verb} again") from None

    def after_commit(self, backend: Backend, own_transaction: bool) -> None:
        """The entry of a release committed in another database than its source's, in its own
        transaction (inside the caller's transaction it would write a second database, which
        DuckDB refuses); the release stands whatever happens here."""
        if self.pending is None or self.deferred:
            return
        if not own_transaction:
            self.note = ("not recorded: the target is in another database than the source, and the caller's "
                         "transaction may write one database only")
            return
        self.write_pending(backend)

    def write_pending(self, backend: Backend) -> None:
        _between_commits()
        try:
            backend.begin()
            self._write(backend, self.pending)
            backend.commit()
        except Exception as error:  # noqa: BLE001 - the release committed: never reported as failed
            try:
                backend.rollback()
            except Exception:  # noqa: BLE001
                pass
            self.note = f"not recorded in the source's database: {str(error).splitlines()[0][:200]}"
        self.pending = None

    def end(self, backend: Backend) -> None:
        if self.key is not None:
            end_release(backend, self.key)
            self.key = None


# Statements that create the registry at once (two cursors publishing) conflict on the catalog:
# the loser retries, and then finds it.
CREATE_ATTEMPTS = 5


def prepare(backend: Backend, database: str) -> bool:
    """The registry table, created before the release's transaction when there is none yet: in
    its own transaction, so publications running at once (two cursors, two threads) do not
    conflict on creating it inside theirs. True when this call created it (`unprepare` then drops
    it if the release fails: a refused statement leaves the database as it was)."""
    if registry_kind(backend.con, database) is not None:
        return False
    for _ in range(CREATE_ATTEMPTS):
        try:
            backend.begin()
            _create(backend, database)
            backend.commit()
            return True
        except Exception:  # noqa: BLE001 - another release created it meanwhile
            try:
                backend.rollback()
            except Exception:  # noqa: BLE001
                pass
            if registry_kind(backend.con, database) is not None:
                return False
    return False  # record() creates it in the release's transaction, or says why not


def unprepare(backend: Backend, database: str) -> None:
    """Drop the registry `prepare` created when it is still empty (the release failed)."""
    table = registry_table(database)
    try:
        if registry_kind(backend.con, database) == "ours" and backend.one(
                exp.select(exp.func("count", exp.Star())).from_(table))[0] == 0:
            backend.execute(exp.Drop(tables=[table], kind="TABLE", exists=True))
    except Exception:  # noqa: BLE001
        pass


# Releases of this process that write into a registry, per registry: [how many are running,
# whether one of them created it]. A failed release that created the registry used to drop it at
# once, under a release of another thread that was writing its entry into it or listing it: that
# one then failed too (all eight threads of a test failed a round), or raised after its commit.
# Now the last release out drops it, when it is still empty (every release of the group failed).
# One DuckDB writer process holds a database file, so the releases that can race are this
# process's; in-memory databases are told apart by name only, so two of them both named `memory`
# share the count, and the last release out of both does the drop.
_RELEASES: dict[tuple, list] = {}
_RELEASES_LOCK = threading.Lock()


def begin_release(backend: Backend, database: str, may_create: bool) -> tuple:
    """Count a release that will write the registry's entry; create the registry first
    (`prepare`) when `may_create`. Returns what `end_release` takes."""
    path = backend.one(duckdb_sql(f"SELECT max(path) FROM duckdb_databases() WHERE database_name = "
                                  f"{exp.Literal.string(database).sql('duckdb')}"))[0]
    key = (database, path)
    with _RELEASES_LOCK:
        _RELEASES.setdefault(key, [0, False])[0] += 1
    try:
        created = may_create and prepare(backend, database)
    except BaseException:
        end_release(backend, key)
        raise
    if created:
        with _RELEASES_LOCK:
            _RELEASES[key][1] = True
    return key


def end_release(backend: Backend, key: tuple) -> None:
    """The release is over, committed or not. The last release of its group drops the registry a
    release of the group created while it is empty; under the lock, so that no release begins
    between the count and the drop."""
    with _RELEASES_LOCK:
        entry = _RELEASES[key]
        entry[0] -= 1
        if entry[0] > 0:
            return
        del _RELEASES[key]
        if entry[1]:
            unprepare(backend, key[0])


# ----------------------------------------------------------------------------- the listing macro

# Per connection, the listing macro last created on it where nothing can undo it (outside an
# explicit transaction, whose ROLLBACK would restore the one before): a statement whose listing
# would be the same does not create it again.
_installed_listing: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

LISTED = {
    "target": "VARCHAR", "source": "VARCHAR", "statement": "VARCHAR", "parameters": "JSON",
    "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "summary": "JSON", "transformation": "JSON",
    "current_rows": "BIGINT", "status": "VARCHAR", "stale": "BOOLEAN", "registry": "VARCHAR",
}


def _sql_literal(value) -> str:
    return exp.Literal.string(value).sql("duckdb")


def _sql_identifier(name: str) -> str:
    return _identifier(name).sql("duckdb")


def _quoted_sql(expression: str) -> str:
    """SQL of `expression` (a VARCHAR) as a quoted identifier's text: '"' || replace(x, '"', '""') || '"'."""
    return f"""('"' || replace({expression}, '"', '""') || '"')"""


@lru_cache(maxsize=1024)
def _fingerprint_text(catalog: str, schema: str, name: str, columns: tuple[str, ...]) -> str:
    return fingerprint_select(table_of(catalog, schema, name), columns).sql("duckdb")


def _checks_sql(con, database: str, entries_of: list[Entry]) -> str:
    """One row per distinct source and column list of the registry's valid entries: the source's
    current fingerprint (computed when the listing is read), or why it cannot be compared."""
    keys = sorted({(entry.source[1], entry.source[2], tuple(entry.row["source_columns"])) for entry in entries_of})
    columns_of = _source_columns(con, [(database, schema, name) for schema, name, _ in keys])
    branches = []
    for schema, name, columns in keys:
        key = (f"{_sql_literal(schema)} AS source_schema, {_sql_literal(name)} AS source_name, "
               f"CAST([{', '.join(_sql_literal(c) for c in columns)}] AS VARCHAR[]) AS source_columns")
        problem = _problem(columns_of[(database, schema, name)], columns)
        if problem is None:
            branches.append(f"SELECT {key}, f.n AS n, f.checksum AS checksum, CAST(NULL AS VARCHAR) AS problem "
                            f"FROM ({_fingerprint_text(database, schema, name, columns)}) AS f")
        else:
            branches.append(f"SELECT {key}, CAST(NULL AS BIGINT) AS n, CAST(NULL AS HUGEINT) AS checksum, "
                            f"{_sql_literal(problem)} AS problem")
    if not branches:
        branches.append("SELECT CAST(NULL AS VARCHAR) AS source_schema, CAST(NULL AS VARCHAR) AS source_name, "
                        "CAST(NULL AS VARCHAR[]) AS source_columns, CAST(NULL AS BIGINT) AS n, "
                        "CAST(NULL AS HUGEINT) AS checksum, CAST(NULL AS VARCHAR) AS problem WHERE false")
    return " UNION ALL ".join(f"({branch})" for branch in branches)


def _registry_listing(con, database: str, kind: str, read: list[Entry]) -> str:
    """The listing's rows of one registry, read from the table when the listing is called: a row
    is valid when its digest is one of those checked here (an entry edited or added by hand since
    is corrupt), and only a valid row's values are shown; every name is a quoted identifier and
    every value a literal."""
    table = registry_table(database).sql("duckdb")
    alias = _sql_literal(database)
    if kind == "previous":
        return (f"SELECT CAST(r.target AS VARCHAR) AS target, " + ", ".join(
            f"CAST(NULL AS {LISTED[c]}) AS {_sql_identifier(c)}" for c in LISTED if c not in ("target", "status", "stale", "registry"))
            + f", {_sql_literal(OUTDATED)} AS status, false AS stale, {alias} AS registry FROM {table} AS r")
    valid = [entry for entry in read if not entry.problem]
    digests = ", ".join(_sql_literal(entry.row["entry_digest"]) for entry in valid)
    is_valid = f"coalesce(list_contains(CAST([{digests}] AS VARCHAR[]), r.entry_digest), false)"
    target_catalog = f"coalesce(r.target_database, {alias})"
    target = (f"CASE WHEN {target_catalog} <> '' AND r.target_schema <> '' AND r.target_name <> '' THEN "
              f"{_quoted_sql(target_catalog)} || '.' || {_quoted_sql('r.target_schema')} || '.' || "
              f"{_quoted_sql('r.target_name')} END")
    source = (f"{_quoted_sql(alias)} || '.' || {_quoted_sql('r.source_schema')} || '.' || "
              f"{_quoted_sql('r.source_name')}")
    same = "(c.n = r.source_rows AND c.checksum = r.source_checksum)"
    shown = {"statement": "r.statement_text", "source": source}
    values = ", ".join(f"CASE WHEN r.valid THEN {shown.get(c, 'r.' + c)} END AS {_sql_identifier(c)}" for c in LISTED
                       if c not in ("target", "current_rows", "status", "stale", "registry"))
    # the target as it is when the listing is read (target_state in SQL): the release id its comment carries
    carried = ("CASE WHEN starts_with(o.comment, 'duckanon {') AND json_valid(substr(o.comment, 10)) "
               "THEN json_extract_string(substr(o.comment, 10), '$.release') END")
    release, pending = "json_extract_string(r.statement, '$.release')", "json_extract_string(r.statement, '$.pending_release')"
    target_state = (f"CASE WHEN d.database_name IS NULL THEN {_sql_literal(NOT_ATTACHED)} WHEN {release} IS NULL THEN NULL "
                    f"WHEN o.name IS NOT NULL THEN CASE WHEN {carried} = {release} THEN NULL "
                    f"WHEN {carried} = {pending} THEN {_sql_literal(UNRECORDED)} "
                    f"WHEN {carried} IS NOT NULL THEN {_sql_literal(SUPERSEDED)} ELSE {_sql_literal(REPLACED)} END "
                    f"WHEN r.target_database IS NOT NULL AND json_exists(r.statement, '$.target_file') AND "
                    f"d.path IS DISTINCT FROM json_extract_string(r.statement, '$.target_file') "
                    f"THEN {_sql_literal(OTHER_FILE)} END")
    unreachable = (f"' (not refreshable: its target''s database ' || {target_catalog} || CASE WHEN "
                   f"t.state = {_sql_literal(NOT_ATTACHED)} THEN ' is not attached)' ELSE "
                   "' is another file than the one it was published into)' END")
    objects = ("(SELECT database_name, schema_name, table_name AS name, comment FROM duckdb_tables() UNION ALL "
               "SELECT database_name, schema_name, view_name, comment FROM duckdb_views())")
    return (f"SELECT {target} AS target, {values}, CASE WHEN r.valid AND c.problem IS NULL THEN c.n END AS current_rows, "
            f"CASE WHEN NOT r.valid THEN {_sql_literal(CORRUPT)} WHEN c.problem IS NOT NULL THEN c.problem "
            f"WHEN t.state IN ({_sql_literal(SUPERSEDED)}, {_sql_literal(REPLACED)}, {_sql_literal(UNRECORDED)}) "
            f"THEN t.state WHEN {same} THEN 'current' WHEN t.state IS NOT NULL THEN 'stale' || {unreachable} "
            f"WHEN d.readonly THEN 'stale (not refreshable: its target''s database ' || {target_catalog} || "
            f"' is read-only)' WHEN (SELECT bool_or(readonly) FROM duckdb_databases() WHERE database_name = {alias}) "
            f"THEN 'stale (not refreshable: its registry''s database ' || {alias} || ' is read-only)' "
            f"ELSE 'stale' END AS status, "
            f"coalesce(r.valid AND c.problem IS NULL AND ((t.state IS DISTINCT FROM {_sql_literal(SUPERSEDED)} AND "
            f"t.state IS DISTINCT FROM {_sql_literal(REPLACED)} AND NOT {same}) OR t.state = {_sql_literal(UNRECORDED)}), "
            f"false) AS stale, {alias} AS registry "
            f"FROM (SELECT *, {is_valid} AS valid FROM {table} AS r) AS r "
            f"LEFT JOIN duckdb_databases() AS d ON lower(d.database_name) = lower({target_catalog}) "
            f"LEFT JOIN {objects} AS o ON lower(o.database_name) = lower({target_catalog}) AND "
            f"lower(o.schema_name) = lower(r.target_schema) AND lower(o.name) = lower(r.target_name) "
            f"CROSS JOIN LATERAL (SELECT CASE WHEN r.valid THEN {target_state} END AS state) AS t "
            f"LEFT JOIN ({_checks_sql(con, database, valid)}) AS c ON r.valid AND c.source_schema = r.source_schema "
            f"AND c.source_name = r.source_name AND c.source_columns = r.source_columns")


def _listing_sql(con, read: list[Entry], kinds: list[tuple[str, str]]) -> str:
    """The CREATE MACRO statement of duckanon_publications() over the registries `kinds`, whose
    entries as read and checked now are `read`."""
    branches = [_registry_listing(con, database, kind, [e for e in read if e.registry == database])
                for database, kind in kinds]
    if not branches:
        branches = ["SELECT " + ", ".join(f"CAST(NULL AS {kind}) AS {c}" for c, kind in LISTED.items()) + " WHERE false"]
    union = " UNION ALL ".join(f"({branch})" for branch in branches)
    return f"CREATE OR REPLACE TEMP MACRO duckanon_publications() AS TABLE SELECT * FROM ({union}) ORDER BY target, registry"


def install_listing(con, always: bool = False) -> None:
    """(Re)create the TEMP macro duckanon_publications(): every entry of every attached registry
    with `status` and `stale` from its source's current fingerprint. A source that is missing or
    lost a column when the macro is made is listed with that status. After a statement the macro
    is remade when what it lists changed; `always`: remade in any case (connect, and a script
    that calls it, so that a macro dropped or replaced meanwhile comes back)."""
    kinds = registries(con)
    text = _listing_sql(con, _read_registries(con, kinds), kinds)
    if not always and _installed_listing.get(con) == text:
        return
    undoable = in_explicit_transaction(con)
    con.execute(text)
    if undoable:
        _installed_listing.pop(con, None)
    else:
        _installed_listing[con] = text


def refresh_refused(target: TableName) -> AnonymizeError:
    return AnonymizeError(f"REFRESH {shown_name(target)}: it was not published by ANONYMIZE (no entry in "
                          f"{REGISTRY}; publish it first)")
