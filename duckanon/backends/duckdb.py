"""The DuckDB backend: the connection a statement came on.

DuckDB gives what the generic backend cannot: transactions that cover temp tables and the
published table, the bound types and collations of the source's columns, whether a source reads
the same rows twice, its own name resolution (duckdb_names), and comments on tables. The queries
of DuckDB's catalog functions are DuckDB's own SQL and stay in this module and duckdb_names.
"""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager

import duckdb
import pyarrow as pa
from sqlglot import exp

from duckanon.backends import duckdb_names
from duckanon.backends.base import Backend, BackendError, Interrupted, ReadOnlyDatabase, UnknownTable, WriteConflict
from duckanon.backends.codings import ENUM_CODING
from duckanon.backends.duckdb_catalog import DuckDBCatalog
from duckanon import macros
from duckanon.errors import AnonymizeError, one_line
from duckanon.names import TableName, shown_name


def in_explicit_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """In autocommit mode every statement is its own transaction (two txid_current() differ);
    inside an explicit one they are equal."""
    first = con.execute("SELECT txid_current()").fetchall()[0][0]
    return con.execute("SELECT txid_current()").fetchall()[0][0] == first


# DuckDB's write-write conflicts name the object as its catalog path, e.g.
# `Catalog write-write conflict on create with "Schema\0main\0Table\0main\0t_anon"`: the last part
_CONFLICT_OBJECT = re.compile(r'conflict on \w+ with "(.*)"\s*$', re.S)
_READ_ONLY = re.compile(r'on database "(.*)" which is attached in read-only mode')
_OTHER_KIND = re.compile(r'Existing object "?(.*?)"? is of type (\w+), trying to replace with type (\w+)')
# a type as DuckDB's conversion messages write it: INT64, DECIMAL(5,2), INTEGER[], TIMESTAMP WITH TIME ZONE
_TYPE = r"[A-Z][A-Z0-9_]*(?: WITH TIME ZONE)?(?:\(\d+(?:,\s*\d+)?\))?(?:\[\d*\])*"
_CONVERTED_TO = re.compile(rf"(?:to(?: the destination type)?|destination type) ({_TYPE})(?: when casting from source column .*)?!?$",
                           re.S)


def _without_values(error: duckdb.Error, text: str) -> str | None:
    """DuckDB's text for errors about data (conversions, overflows, constraint and parse failures)
    quotes the value, which must not reach a message: the error kind alone, with the type converted
    to when DuckDB names one in a place no value can take. None for errors that quote no value."""
    prefix = text.split(":", 1)[0]
    if isinstance(error, duckdb.ConversionException):
        target = _CONVERTED_TO.search(text)
        into = f" to {target.group(1)}" if target else ""
        return f"{prefix}: a value could not be converted{into} (the value is not shown)"
    if isinstance(error, duckdb.OutOfRangeException):
        return f"{prefix}: a value is out of range (the value is not shown)"
    if isinstance(error, duckdb.ConstraintException) or "constraint violation" in text:
        return f"{prefix}: a constraint was violated (the key is not shown)"
    if isinstance(error, duckdb.InvalidInputException) and "Could not parse" in text:
        return f"{prefix}: a value could not be parsed (the value is not shown)"
    if isinstance(error, duckdb.InvalidInputException) and not _OWN_MESSAGE.match(text):
        # a function's refusal of its input quotes that input, a value of the data (json_extract:
        # `Malformed JSON at byte 0 of input: ... Input: "<value>"`, regexp_matches: `missing ):
        # <pattern>`): the kind alone; duckanon's own macros' messages (`duckanon: ...`) quote none
        if "JSON" in text:
            return f"{prefix}: a value is not valid JSON (the value is not shown)"
        return f"{prefix}: an input was refused (its text is not shown: it may quote a value)"
    return None


# the messages of duckanon's SQL macros (error('duckanon: ...')), which name tables and columns only
_OWN_MESSAGE = re.compile(r"^[^:]*: duckanon: ")


def _translated(error: duckdb.Error) -> BackendError:
    """DuckDB's error as a BackendError of the kind the pipeline and the statements tell apart,
    on one line and without a value of the data (errors about data quote it)."""
    text = one_line(error)
    if isinstance(error, duckdb.TransactionException) and "conflict" in text.lower():
        found = _CONFLICT_OBJECT.search(text)
        name = re.split(r"\\0|\x00", found.group(1))[-1] if found else None
        return WriteConflict(f"another statement changed {name or 'the same rows'} at the same time", name)
    read_only = _READ_ONLY.search(text)
    if read_only:
        return ReadOnlyDatabase(f"database {read_only.group(1)} is read-only")
    if isinstance(error, duckdb.InterruptException):  # the connection's interrupt(), from another thread
        return Interrupted("interrupted (the connection's interrupt() was called)")
    other_kind = _OTHER_KIND.search(text)
    if other_kind:  # the CREATE OR REPLACE of a target: a table cannot replace a view (nor a view a table)
        name, existing, new = other_kind.group(1), other_kind.group(2).lower(), other_kind.group(3).lower()
        return BackendError(f"the target {name} is a {existing}, which a {new} cannot replace: drop the {existing}, "
                            "or choose another target with INTO")
    scrubbed = _without_values(error, text)
    if scrubbed is not None:
        return BackendError(scrubbed)
    kind = UnknownTable if isinstance(error, duckdb.CatalogException) else BackendError
    return kind(text)


class DuckDBBackend(DuckDBCatalog, Backend):
    name = "duckdb"
    dialect = "duckdb"
    transactional = True
    binds_column_types = True
    has_collations = True
    reads_stably = True
    writes_reports = True
    string_coding = ENUM_CODING  # an ENUM through the sort, a few bits of a part key where it packs
    hashes_64_bits = True
    scan_unit_rows = 122_880  # a row group: DuckDB scans a table on one thread per row group

    def __init__(self, con: duckdb.DuckDBPyConnection):
        super().__init__()
        self.con = getattr(con, "duckdb", con)  # a duckanon Connection wraps one
        self._insertion_order_to_restore = False

    def _run(self, sql: str, parameters=None):
        """One statement of DuckDB's SQL (also the catalog queries of this module)."""
        try:
            return self.con.execute(sql, parameters)
        except duckdb.Error as error:
            raise _translated(error) from None

    @contextmanager
    def translating(self):
        try:
            yield
        except duckdb.Error as error:
            raise _translated(error) from None

    def arrow(self, expression: exp.Expr) -> pa.Table:
        """Through a relation: DuckDB 2 copies and warns when Arrow is taken from an execute()."""
        self.close()
        try:
            return self.con.sql(self.render(expression)).to_arrow_table()
        except duckdb.Error as error:
            raise _translated(error) from None

    def holds_infinite_dates(self, table: str, column: str) -> bool:
        value = exp.column(column, quoted=True)
        probe = exp.select(exp.func("bool_or", exp.func("isinf", value))).from_(exp.to_table(table, quoted=True))
        return bool(self.one(probe)[0])

    def register_arrow(self, name: str, table: pa.Table) -> None:
        self.close()  # DuckDB 2 refuses register() while a result of ours (or the caller's) is unread
        self.con.register(name, table)
        self.registered.add(name)

    def unregister(self, name: str) -> None:
        try:
            self.con.unregister(name)
        except duckdb.Error:
            pass
        super().unregister(name)

    def catalog_entry(self, table: TableName) -> tuple[str, str | None] | None:
        """(kind, comment) of the table or view the name holds in its catalog and schema."""
        where = ("database_name = coalesce(?, current_database()) AND schema_name = coalesce(?, current_schema()) "
                 "AND lower({name}) = lower(?)")
        parameters = [table.table.catalog or None, table.table.db or None, table.name]
        return self._run(
            f"SELECT 'TABLE', comment FROM duckdb_tables() WHERE {where.format(name='table_name')} UNION ALL "
            f"SELECT 'VIEW', comment FROM duckdb_views() WHERE NOT internal AND {where.format(name='view_name')}",
            parameters * 2).fetchone()

    def create_target(self, table: TableName, select: exp.Expr, kind: str = "TABLE") -> None:
        """CREATE OR REPLACE cannot turn a view into a table or back: the other kind is dropped first
        (in the statement's transaction, like the replacement itself): a table, as a table target
        would be replaced, but a view only if duckanon published it (materialize = 'view'); the
        user's own view makes the CREATE fail."""
        existing, comment = self.catalog_entry(table) or (None, None)
        ours = (comment or "").startswith("duckanon {")
        if (existing, kind) == ("TABLE", "VIEW") or ((existing, kind) == ("VIEW", "TABLE") and ours):
            self.drop_object(table, existing)
        super().create_target(table, select, kind)

    def file_access_allowed(self) -> bool:
        return bool(self._run("SELECT current_setting('enable_external_access')").fetchone()[0])

    # ------------------------------------------------------------------ catalog
    def place(self, source: TableName, target: TableName, hierarchy_tables=()) -> tuple[TableName, TableName]:
        """The source and target as DuckDB resolves them (duckdb_names.place), and the target's
        database and schema checked writable before any work: DuckDB would say so only at the CREATE."""
        with self.translating():
            source, resolved = duckdb_names.place(self.con, source, target, hierarchy_tables)
            self._check_target_location(target, resolved)
        return source, resolved

    def _check_target_location(self, written: TableName, target: TableName) -> None:
        """One line naming why `target` (the name `written`, resolved) cannot be created: its
        database is not attached, read-only or DuckDB's own; its schema does not exist."""
        catalog, schema = target.table.catalog, target.table.db
        parts = [part.name for part in written.table.parts]
        cannot = f"the target {shown_name(target)} cannot be written"
        if catalog.lower() == "temp":
            raise AnonymizeError(f"{cannot}: ANONYMIZE publishes a persistent table, and temp holds temporary ones "
                                 "only; choose another target with INTO")
        try:
            databases = {name.lower(): (name, readonly, internal) for name, readonly, internal in self._run(
                "SELECT database_name, readonly, internal FROM duckdb_databases()").fetchall()}
        except BackendError:  # a DuckDB without these columns: its own error comes at the CREATE
            return
        found = databases.get(catalog.lower())
        cannot_written = f"the target {shown_name(written)} cannot be written"  # as written: a name DuckDB cannot place
        if found is None or (len(parts) == 2 and parts[0].lower() == schema.lower()
                             and not self._has_schema(catalog, schema)):
            if len(parts) == 2 and found is not None:  # `x.t`: neither a database nor a schema of the default one
                raise AnonymizeError(f"{cannot_written}: no database {parts[0]} is attached and {catalog} has no schema "
                                     f"{parts[0]}; ATTACH it (or CREATE SCHEMA {parts[0]}), or choose another target "
                                     "with INTO")
            raise AnonymizeError(f"{cannot_written}: no database {catalog} is attached; ATTACH it, or choose another target "
                                 "with INTO")
        name, readonly, internal = found
        if internal:
            raise AnonymizeError(f"{cannot}: {name} is DuckDB's built-in catalog; choose another target with INTO")
        if readonly:
            raise AnonymizeError(f"{cannot}: database {name} is read-only (attached READ_ONLY, or opened with "
                                 "read_only=True); publish into a writable database with INTO")
        if not self._has_schema(catalog, schema):
            raise AnonymizeError(f"{cannot}: database {name} has no schema {schema}; CREATE SCHEMA "
                                 f"{shown_name(TableName(exp.Table(this=exp.to_identifier(schema), db=exp.to_identifier(name))))} "
                                 "first, or choose another target with INTO")

    def _has_schema(self, catalog: str, schema: str) -> bool:
        return self._run("SELECT count(*) FROM duckdb_schemas() WHERE lower(database_name) = lower(?) "
                         "AND lower(schema_name) = lower(?)", [catalog, schema]).fetchone()[0] > 0

    def resolved(self, table: TableName) -> TableName:
        with self.translating():
            return duckdb_names.resolved(self.con, table)

    def named_object(self, table: TableName) -> duckdb_names.CatalogObject:
        """The object a statement naming `table` means (REFRESH): the one a SELECT reads, else the
        table CREATE TABLE would make (duckdb_names.named_object)."""
        with self.translating():
            return duckdb_names.named_object(self.con, table)

    def lone_name_in_catalog(self, name: str) -> bool:
        """Whether a table or view on DuckDB's search path carries the lone name: the binder finds
        it before any replacement scan of a Python object of that name."""
        with self.translating():
            session = duckdb_names._Session(self.con)
            lone = TableName(exp.Table(this=exp.to_identifier(name, quoted=True)))
            return any(session.rank(found.catalog, found.schema) < len(session.path)
                       for found in session.candidates(lone))

    def read_by_lone_name(self, target: TableName) -> duckdb_names.CatalogObject | None:
        """The table CREATE TABLE <target> would write, when a read of its lone name would find it
        (its schema is on the search path); else None."""
        with self.translating():
            session = duckdb_names._Session(self.con)
            place = session.create_location(target)
            return place if session.rank(place.catalog, place.schema) < len(session.path) else None

    def replacement_scans(self) -> tuple[bool, bool]:
        """Whether DuckDB reads a Python variable that a statement names where no table or view
        carries the name (python_enable_replacements, and enable_external_access), and whether it
        looks past the innermost frame to the frames that called it (python_scan_all_frames)."""
        enabled, all_frames, external = self._run(
            "SELECT current_setting('python_enable_replacements'), current_setting('python_scan_all_frames'), "
            "current_setting('enable_external_access')").fetchone()
        return bool(enabled and external), bool(all_frames)

    def register_python(self, name: str, value) -> None:
        """A Python table (DataFrame, Arrow) registered under `name` for the rest of the statement:
        not one of the work's own (`registered`), so a commit does not let go of it; the caller
        unregisters it."""
        self.close()  # DuckDB 2 refuses register() while a result is unread
        with self.translating():
            self.con.register(name, value)

    def unregister_python(self, name: str) -> None:
        try:
            self.con.unregister(name)
        except duckdb.Error:  # e.g. the caller's transaction was aborted: DuckDB drops it with the connection
            pass

    def install_macros(self) -> None:
        """The SQL macros of sql/*.sql (the report's and the profile's), installed on this
        connection unless they are."""
        with self.translating():
            macros.ensure_installed(self.con)

    def report_connection(self) -> duckdb.DuckDBPyConnection:
        return self.con

    def collations(self, source: TableName, columns: list[str]) -> tuple[dict[str, str], str]:
        """DESCRIBE does not show collations; the CREATE statement DuckDB writes for an empty copy does."""
        name = f"__duckanon_probe_{uuid.uuid4().hex[:12]}"
        copy = exp.select(*[exp.alias_(exp.column(c, quoted=True), f"c{i}", quoted=True)
                            for i, c in enumerate(columns)]).from_(source.table.copy()).limit(0)
        self.create_temp(name, copy)  # tracked: the statement's end drops it whatever happens here
        sql = self._run("SELECT sql FROM duckdb_tables() WHERE temporary AND table_name = ?", [name]).fetchone()[0]
        self.drop_temp(name)
        found = {i: name.strip('"') for i, name in re.findall(r'"?c(\d+)"? VARCHAR COLLATE ([^,)\s]+)', sql)}
        default = str(self._run("SELECT current_setting('default_collation')").fetchone()[0] or "")
        return {c: found[str(i)] for i, c in enumerate(columns) if str(i) in found}, default

    def source_is_stable(self, source: TableName, read: list[str]) -> bool:
        """Whether every read of the source inside one transaction sees the same rows: it is exactly
        one DuckDB base table (no view, nothing attached from another system, no replacement scan of
        a file) and none of the columns read is generated (computed at each read)."""
        parts = [part.name for part in source.table.parts]
        found = self._run(
            "SELECT t.database_name, t.schema_name, t.table_name, 'table', d.type, t.sql FROM duckdb_tables() AS t "
            "JOIN duckdb_databases() AS d USING (database_name) WHERE lower(t.table_name) = lower($1) "
            "UNION ALL SELECT database_name, schema_name, view_name, 'view', NULL, NULL FROM duckdb_views() "
            "WHERE lower(view_name) = lower($1) AND NOT internal", [parts[-1]]).fetchall()
        if len(parts) >= 3:
            found = [f for f in found if (f[0].lower(), f[1].lower()) == (parts[-3].lower(), parts[-2].lower())]
        elif len(parts) == 2:
            found = [f for f in found if parts[0].lower() in (f[0].lower(), f[1].lower())]
        if len(found) != 1:  # nothing (a file, a DataFrame) or more than one object the name could mean
            return False
        database, schema, table, what, database_type, sql = found[0]
        if what != "table" or (database_type or "").lower() != "duckdb":
            return False
        read = {c.lower() for c in read}
        where = "database_name = $1 AND schema_name = $2 AND table_name = $3"
        try:
            generated = self._run(f"SELECT column_name FROM duckdb_columns() WHERE {where} AND is_generated",
                                  [database, schema, table]).fetchall()
        except BackendError:  # DuckDB 1.5 has no is_generated: a column with an expression in a table that has generated ones
            generated = self._run(
                f"SELECT column_name FROM duckdb_columns() WHERE {where} AND column_default IS NOT NULL",
                [database, schema, table]).fetchall() if "GENERATED ALWAYS" in (sql or "").upper() else []
        return not any(name.lower() in read for (name,) in generated)

    # ------------------------------------------------------------------ transactions
    def in_explicit_transaction(self) -> bool:
        with self.translating():
            return in_explicit_transaction(self.con)

    def begin(self) -> None:
        self._run("BEGIN TRANSACTION")

    def commit(self) -> None:
        self._run("COMMIT")
        self.temps.clear()
        self.release()

    def rollback(self) -> None:
        try:
            self.con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        super().rollback()
        if self._insertion_order_to_restore:
            self._restore_insertion_order()

    @contextmanager
    def keeping_insertion_order(self):
        """With preserve_insertion_order off, DuckDB stores a CREATE TABLE AS's rows in any order,
        ORDER BY or not, and that order comes from the source's (the GROUP BY's hash table, the
        join's input): turned on for the statement's CREATEs, restored after."""
        if self._run("SELECT current_setting('preserve_insertion_order')").fetchone()[0]:
            yield
            return
        self._run("SET preserve_insertion_order = true")
        self._insertion_order_to_restore = True
        try:
            yield
        finally:
            self._restore_insertion_order()

    def threads(self) -> int:
        return int(self._run("SELECT current_setting('threads')").fetchone()[0])

    def _restore_insertion_order(self) -> None:
        """SET fails inside an aborted transaction: then the rollback restores it (the error that
        aborted it is the one the caller sees)."""
        try:
            self.con.execute("SET preserve_insertion_order = false")
            self._insertion_order_to_restore = False
        except duckdb.Error:
            pass

    def close(self) -> None:
        """DuckDB 2 streams results: none of ours stays unread to block the caller's next query."""
        if hasattr(self.con, "abort"):
            self.con.abort()
