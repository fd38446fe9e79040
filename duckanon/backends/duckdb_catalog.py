"""What the publication registry asks of DuckDB's catalog (backends.base.KeepsRegistry), for the
DuckDB backend: the attached databases, a table's or view's comment and columns, the object a
`table(name)` hierarchy reads, a second cursor, and the TEMP table macro of the listing.

The queries of DuckDB's catalog functions are DuckDB's own SQL with the names as parameters; the
relations the listing joins when it is read (objects_relation, databases_relation) are sqlglot
expressions, rendered with the listing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError

from duckanon.backends import duckdb_names
from duckanon.backends.base import Backend, Database, KeepsRegistry
from duckanon.names import TableName


def _catalog_function(name: str) -> exp.Table:
    """FROM duckdb_tables() and the like: DuckDB's table functions of its catalog."""
    return exp.Table(this=exp.Anonymous(this=name))


def _catalog_rows(function: str, **columns: str) -> exp.Select:
    """SELECT <column> AS <alias>, ... FROM function(): the catalog's rows under the names the
    registry's queries read."""
    return exp.select(*[exp.alias_(exp.column(column), alias) for alias, column in columns.items()]).from_(
        _catalog_function(function))


class DuckDBCatalog(KeepsRegistry):
    """KeepsRegistry on a DuckDB connection (mixed into DuckDBBackend, which gives `con`, `_run`
    and `translating`)."""

    con: duckdb.DuckDBPyConnection

    def session(self) -> object:
        return self.con

    def databases(self) -> list[Database]:
        return [Database(name, path, bool(readonly), database_type, bool(internal))
                for name, path, readonly, database_type, internal in self._run(
                    "SELECT database_name, path, readonly, type, internal FROM duckdb_databases()").fetchall()]

    def find_object(self, catalog: str, schema: str, name: str) -> tuple[str, str | None] | None:
        """Tables first: duckdb_views() lists DuckDB's own views too, a scan saved when a table is found."""
        where = "lower(database_name) = lower($1) AND lower(schema_name) = lower($2) AND lower({name}) = lower($3)"
        for kind, query in (("table", f"SELECT comment FROM duckdb_tables() WHERE {where.format(name='table_name')}"),
                            ("view", f"SELECT comment FROM duckdb_views() WHERE NOT internal AND "
                                     f"{where.format(name='view_name')}")):
            found = self._run(query, [catalog, schema, name]).fetchall()
            if found:
                return kind, found[0][0]
        return None

    def table_columns(self, catalog: str, schema: str, name: str) -> list[tuple[str, str]]:
        """DESCRIBE binds the one table (duckdb_columns() lists every column of every table)."""
        table = exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier(schema, quoted=True),
                          catalog=exp.to_identifier(catalog, quoted=True))
        return [(row[0], row[1]) for row in self.rows(exp.Describe(this=exp.select(exp.Star()).from_(table)))]

    def databases_holding(self, schema: str, name: str) -> list[str]:
        return [found for (found,) in self._run(
            "SELECT DISTINCT database_name FROM duckdb_tables() WHERE lower(table_name) = lower($2) "
            "AND lower(schema_name) = lower($1) AND NOT temporary ORDER BY ALL", [schema, name]).fetchall()]

    def hierarchy_table(self, name: str) -> tuple[str, str, str] | None:
        """parse_spec reads a `table(name)` hierarchy with query_table(name), in this session: the
        object the name resolves to now, kept only when query_table's plan is that object's."""
        try:
            table = TableName(exp.to_table(name, dialect="duckdb"))
            parts = tuple(part.name for part in duckdb_names.resolved(self.con, table).table.parts)
            if len(parts) != 3:
                return None
            qualified = exp.Table(this=exp.to_identifier(parts[2], quoted=True),
                                  db=exp.to_identifier(parts[1], quoted=True),
                                  catalog=exp.to_identifier(parts[0], quoted=True))
            if duckdb_names._plan_of(self.con, "query_table(?)", [name])[0] != \
                    duckdb_names._plan_of(self.con, qualified.sql(dialect="duckdb"))[0]:
                return None
        except (SqlglotError, duckdb.Error):
            return None
        return parts

    def engine_version(self) -> str:
        return duckdb.__version__

    @contextmanager
    def separate_session(self) -> Iterator[Backend]:
        """A cursor of the connection: DuckDB gives it a transaction of its own."""
        with self.translating():
            cursor = self.con.cursor()
        try:
            yield type(self)(cursor)
        finally:
            cursor.close()

    def create_table_macro(self, name: str, select: exp.Select) -> None:
        self._create_macro(name, [], select, returns_table=True)

    def create_scalar_macro(self, name: str, parameters: list[str], body: exp.Expr) -> None:
        self._create_macro(name, parameters, body, returns_table=False)

    def _create_macro(self, name: str, parameters: list[str], body: exp.Expr, returns_table: bool) -> None:
        """CREATE OR REPLACE TEMP MACRO name(parameters) AS [TABLE] body."""
        properties = [exp.TemporaryProperty()]
        if returns_table:
            properties.append(exp.ReturnsProperty(this=exp.Schema(this=exp.Var(this="TABLE")), is_table=True))
        self.execute(exp.Create(
            this=exp.UserDefinedFunction(this=exp.to_table(name, quoted=True), wrapped=True,
                                         expressions=[exp.to_identifier(p, quoted=True) for p in parameters]),
            kind="MACRO", replace=True, expression=body, properties=exp.Properties(expressions=properties)))

    def objects_relation(self) -> exp.Query:
        names = {"database_name": "database_name", "schema_name": "schema_name"}
        return exp.union(
            _catalog_rows("duckdb_tables", **names, name="table_name", comment="comment"),
            _catalog_rows("duckdb_views", **names, name="view_name", comment="comment").where(
                exp.not_(exp.column("internal"))),
            distinct=False)

    def databases_relation(self) -> exp.Query:
        return _catalog_rows("duckdb_databases", database_name="database_name", readonly="readonly", path="path")
