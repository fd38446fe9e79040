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
from duckanon.backends.base import Backend, BackendError, UnknownTable
from duckanon.errors import one_line
from duckanon.sql.statement import TableName


def in_explicit_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """In autocommit mode every statement is its own transaction (two txid_current() differ);
    inside an explicit one they are equal."""
    first = con.execute("SELECT txid_current()").fetchone()[0]
    return con.execute("SELECT txid_current()").fetchone()[0] == first


def _translated(error: duckdb.Error) -> BackendError:
    kind = UnknownTable if isinstance(error, duckdb.CatalogException) else BackendError
    return kind(one_line(error))


class DuckDBBackend(Backend):
    name = "duckdb"
    dialect = "duckdb"
    transactional = True
    binds_column_types = True
    has_collations = True
    reads_stably = True
    writes_reports = True
    has_enum_types = True
    hashes_64_bits = True
    keeps_registry = True
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

    def register_arrow(self, name: str, table: pa.Table) -> None:
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
        with self.translating():
            return duckdb_names.place(self.con, source, target, hierarchy_tables)

    def resolved(self, table: TableName) -> TableName:
        with self.translating():
            return duckdb_names.resolved(self.con, table)

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
