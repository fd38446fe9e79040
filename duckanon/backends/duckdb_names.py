"""DuckDB's name resolution, for the DuckDB backend."""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb
from sqlglot import exp

from duckanon.errors import AnonymizeError, one_line
from duckanon.names import TableName, shown_name

# The source is read and the target written under names the user wrote; DuckDB resolves each
# differently: a read looks in the temp schema first, then along the search path (SET search_path,
# USE), and `x.t` may name a schema or an attached database; CREATE TABLE without TEMP never goes to
# the temp schema and takes the session's default database and schema. So the names are compared
# as the objects DuckDB sees: the source as the object a SELECT reads (and, through views, the
# tables it reads, from DuckDB's own EXPLAIN), the target as the table CREATE OR REPLACE TABLE
# would replace. Both are then written fully qualified, so every later step (the CREATE, the
# COMMENT with the provenance, the report) reads and writes exactly the objects compared here.


@dataclass(frozen=True)
class CatalogObject:
    """A table or view as DuckDB names it: catalog (database), schema, name; `kind` is 'table',
    'view', or None for an object that does not exist (yet)."""

    catalog: str
    schema: str
    name: str
    kind: str | None = None

    def table_name(self) -> TableName:
        """catalog.schema.name, every part quoted: what later steps write into SQL."""
        return TableName(exp.Table(this=exp.to_identifier(self.name, quoted=True),
                                   db=exp.to_identifier(self.schema, quoted=True),
                                   catalog=exp.to_identifier(self.catalog, quoted=True)))

    def shown(self) -> str:
        """catalog.schema.name for messages, quoted only where DuckDB needs it."""
        return shown_name(self.table_name())

    def key(self) -> tuple[str, str, str]:
        return (self.catalog.lower(), self.schema.lower(), self.name.lower())


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    items, current, quoted = [], [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted  # "" inside quotes toggles twice
        if ch == separator and not quoted:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return items


def _unquote_identifier(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return text


class _Session:
    """What DuckDB's name resolution depends on, read once: the default database and schema, the
    search path, and the databases and schemas that exist (canonical spellings by lower case)."""

    SYSTEM_SCHEMAS = ("information_schema", "pg_catalog")

    def __init__(self, con):
        self.con = con
        self.database, self.schema, path = con.execute(
            "SELECT current_database(), current_schema(), current_setting('search_path')").fetchone()
        self.databases = {name.lower(): name for (name,) in
                          con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
        self.database = self.databases.get(self.database.lower(), self.database)
        self.schemas: dict[tuple[str, str], str] = {
            (catalog.lower(), name.lower()): name
            for catalog, name in con.execute("SELECT database_name, schema_name FROM duckdb_schemas()").fetchall()}
        self.schema = self.schemas.get((self.database.lower(), self.schema.lower()), self.schema)
        entries = []
        for item in _split_outside_quotes(path or "", ","):
            parts = [_unquote_identifier(part) for part in _split_outside_quotes(item, ".")]
            if len(parts) == 2 and all(parts):
                entries.append((self.databases.get(parts[0].lower(), parts[0]), parts[1]))
            elif len(parts) == 1 and parts[0]:
                entries.append((self.database, parts[0]))
        # DuckDB's order: the temp schema, the paths set, the default database's main schema, system
        self.path = [("temp", "main"), *entries, (self.database, "main"), ("system", "main"), ("system", "pg_catalog")]

    def has_schema(self, catalog: str, schema: str) -> bool:
        return (catalog.lower(), schema.lower()) in self.schemas

    def canonical_schema(self, catalog: str, schema: str) -> str:
        return self.schemas.get((catalog.lower(), schema.lower()), schema)

    def rank(self, catalog: str, schema: str) -> int:
        """Where (catalog, schema) stands in the search path; past its end when it is not on it."""
        for i, (c, s) in enumerate(self.path):
            if c.lower() == catalog.lower() and s.lower() == schema.lower():
                return i
        return len(self.path)

    def create_location(self, table: TableName) -> CatalogObject:
        """The table CREATE TABLE <table> (without TEMP) creates or replaces, as DuckDB's binder
        resolves it: a lone name goes to the default database and schema; `a.t` is the attached
        database `a` (in its schema on the search path, else main) when there is one, else the schema
        `a` of the first database on the search path that lists it (else of the default database);
        both at once is ambiguous, as DuckDB says."""
        parts = [part.name for part in table.table.parts]
        name = parts[-1]
        if len(parts) == 1:
            catalog, schema = self.database, self.schema
        elif len(parts) >= 3:
            catalog = self.databases.get(parts[-3].lower(), parts[-3])
            schema = self.canonical_schema(catalog, parts[-2])
        else:
            first = parts[0]
            if first.lower() in self.databases:
                catalog = self.databases[first.lower()]
                holders = [c for c, s in self.path if s.lower() == first.lower()] or [self.database]
                for holder in holders:
                    if self.has_schema(holder, first):
                        raise AnonymizeError(
                            f"the name {shown_name(table)} is ambiguous: {first} is both an attached database and a "
                            f"schema of {holder}; write {shown_name(_qualified(holder, first, name))} or "
                            f"{shown_name(_qualified(catalog, 'main', name))}")
                schema = next((s for c, s in self.path if c.lower() == catalog.lower()), "main")
            else:
                if first.lower() in self.SYSTEM_SCHEMAS:
                    catalog = "system"
                else:
                    catalog = next((c for c, s in self.path if c != "temp" and s.lower() == first.lower()),
                                   self.database)
                schema = first
            schema = self.canonical_schema(catalog, schema)
        kind = self._kind(catalog, schema, name)
        if kind is not None:
            name = kind[1]
        return CatalogObject(catalog, schema, name, kind[0] if kind else None)

    def _kind(self, catalog: str, schema: str, name: str) -> tuple[str, str] | None:
        found = self.con.execute(
            "SELECT 'table', table_name FROM duckdb_tables() WHERE lower(database_name) = lower($1) "
            "AND lower(schema_name) = lower($2) AND lower(table_name) = lower($3) "
            "UNION ALL SELECT 'view', view_name FROM duckdb_views() WHERE lower(database_name) = lower($1) "
            "AND lower(schema_name) = lower($2) AND lower(view_name) = lower($3)",
            [catalog, schema, name]).fetchall()
        return tuple(found[0]) if found else None

    def candidates(self, table: TableName) -> list[CatalogObject]:
        """The tables and views the name could denote, in DuckDB's search order."""
        parts = [part.name for part in table.table.parts]
        found = self.con.execute(
            "SELECT database_name, schema_name, table_name, 'table' FROM duckdb_tables() WHERE lower(table_name) = lower($1) "
            "UNION ALL SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() "
            "WHERE lower(view_name) = lower($1)", [parts[-1]]).fetchall()
        objects = [CatalogObject(*row) for row in found]
        if len(parts) >= 3:
            objects = [o for o in objects if (o.catalog.lower(), o.schema.lower()) == (parts[-3].lower(), parts[-2].lower())]
        elif len(parts) == 2:
            objects = [o for o in objects if parts[0].lower() in (o.catalog.lower(), o.schema.lower())]
        return sorted(objects, key=lambda o: (self.rank(o.catalog, o.schema), o.kind != "table", o.key()))


def _qualified(catalog: str, schema: str, name: str) -> TableName:
    return CatalogObject(catalog, schema, name).table_name()


def _plan_of(con, from_sql: str, parameters=None) -> tuple[str, frozenset[str]]:
    """DuckDB's plan of reading `from_sql` (its JSON EXPLAIN, for comparing two readings) and the
    tables it scans, fully qualified as DuckDB prints them."""
    rows = con.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {from_sql}", parameters).fetchall()
    scanned: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            table = (node.get("extra_info") or {}).get("Table") if isinstance(node.get("extra_info"), dict) else None
            if isinstance(table, str):
                scanned.add(table)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for _, text in rows:
        try:
            walk(json.loads(text))
        except ValueError:
            pass
    return "\n".join(text for _, text in rows), frozenset(scanned)


@dataclass
class _Read:
    """What a SELECT of the source reads: the object (None when the name is no catalog object,
    e.g. a file read by a replacement scan) and the tables it scans."""

    object: CatalogObject | None
    scanned: frozenset[str]


def _resolve_read(con, session: _Session, table: TableName) -> _Read:
    """The object `SELECT * FROM <table>` reads, found by DuckDB: of the tables and views that
    could carry the name, the first in search order whose plan is the plan of the name as written
    (a table's plan names it fully qualified, so two tables never compare equal)."""
    plan, scanned = _plan_of(con, table.sql())
    for candidate in session.candidates(table):
        try:
            if _plan_of(con, candidate.table_name().sql())[0] == plan:
                return _Read(candidate, scanned)
        except duckdb.Error:
            continue
    return _Read(None, scanned)


def resolved(con, table: TableName) -> TableName:
    """`table` fully qualified as the object `SELECT * FROM <table>` reads on DuckDB (temp schema,
    search path, USE, attached databases), for statements that read a table by name (REPORT);
    unchanged when it is no catalog object (a file)."""
    try:
        found = _resolve_read(con, _Session(con), table).object
    except duckdb.Error:
        return table
    return found.table_name() if found is not None else table


def _scanned_as(con, target: CatalogObject) -> str | None:
    """How DuckDB's plans name the existing table `target` (None if it is no table)."""
    if target.kind != "table":
        return None
    try:
        scanned = _plan_of(con, target.table_name().sql())[1]
    except duckdb.Error:
        return None
    return next(iter(scanned), None) if len(scanned) == 1 else None


def place(con, source: TableName, target: TableName, hierarchy_tables=()) -> tuple[TableName, TableName]:
    """Refuse a target that is the source, or a table the source reads (through a view) or a
    hierarchy table (`hierarchy_tables`: (QI column, table name) pairs); return the source and the
    target fully qualified as DuckDB resolves them."""
    session = _Session(con)
    try:
        read = _resolve_read(con, session, source)
    except duckdb.Error as error:  # the plan of a name that was just read: not expected
        raise AnonymizeError(f"cannot read table {source.sql()}: {one_line(error)}") from None
    written = session.create_location(target)
    source_shown = read.object.shown() if read.object is not None else shown_name(source)
    if read.object is not None and read.object.key() == written.key():
        raise AnonymizeError(f"the target {written.shown()} is the source {read.object.kind} {source_shown}: "
                             "choose another name with INTO")
    scanned_as = _scanned_as(con, written)
    if scanned_as is not None and scanned_as in read.scanned:
        what = f"the source {read.object.kind} {source_shown}" if read.object is not None else f"the source {source_shown}"
        raise AnonymizeError(f"the target {written.shown()} is read by {what}: choose another name with INTO")
    if scanned_as is not None:
        for column, name in hierarchy_tables:
            try:
                scanned = _plan_of(con, "query_table(?)", [name])[1]
            except duckdb.Error:
                continue  # the hierarchy's own error comes when it is read
            if scanned_as in scanned:
                raise AnonymizeError(f"the target {written.shown()} is the hierarchy table of column {column} "
                                     f"(table({name})): choose another name with INTO")
    return (read.object.table_name() if read.object is not None else source), written.table_name()


def named_object(con, table: TableName) -> CatalogObject:
    """The table or view a statement naming `table` means (REFRESH): the object
    `SELECT * FROM <table>` reads, as DuckDB resolves it (temp schema, search path, USE, attached
    databases, `x.t` as a database or a schema); when it reads none (the table was dropped), the
    table CREATE TABLE <table> would make."""
    session = _Session(con)
    try:
        found = _resolve_read(con, session, table).object
    except duckdb.Error:
        found = None
    return found if found is not None else session.create_location(table)
