"""What the pipeline asks of an engine: the `Backend` protocol.

The pipeline builds every statement as a sqlglot expression; a backend renders it once, in its
own `dialect`, and runs it. Anything an engine does differently (temporary tables, the published
table, transactions, its catalog's names, which column types it can compare) is a method here that
a backend overrides, never a probe of the connection's type in the pipeline. Errors of the engine
reach the pipeline as `BackendError` only, whatever the engine raised.

A backend is one statement's view of one connection: it records the temporary objects it made,
so `Work` can remove them whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from duckanon.backends.codings import Coding
from duckanon.errors import AnonymizeError
from duckanon.names import TableName


class BackendError(Exception):
    """An error the engine raised while running one of our statements (its first line)."""


class UnknownTable(BackendError):
    """The engine knows no table or view of that name."""


class WriteConflict(BackendError):
    """Another statement wrote the same object (or rows) in a transaction that overlapped ours; the
    engine aborted ours, so nothing of it was written. `object_name` is the object's name as the
    engine gave it (no value), or None when the engine named none (a row conflict)."""

    def __init__(self, message: str, object_name: str | None = None):
        super().__init__(message)
        self.object_name = object_name


class ReadOnlyDatabase(BackendError):
    """A write into a database that is attached read-only (or a connection opened read-only)."""


class Interrupted(BackendError):
    """The engine stopped the statement on request (another thread's interrupt of the connection)."""


def full_key(table: TableName, database: str, schema: str) -> tuple[str, str, str]:
    """(catalog, schema, name), lower case, with the session's defaults filled in."""
    parts = [p.name.lower() for p in table.table.parts]
    if len(parts) == 1:
        return (database.lower(), schema.lower(), parts[0])
    if len(parts) == 2:
        return (database.lower(), parts[0], parts[1])
    return tuple(parts[-3:])


def temporary(create: exp.Create) -> exp.Create:
    create.set("properties", exp.Properties(expressions=[exp.TemporaryProperty()]))
    return create


class Backend:
    """The generic engine: ANSI-ish SQL through sqlglot, no transactions, no catalog insight.
    Subclasses say what their engine does better (DuckDBBackend) or differently (SparkBackend)."""

    name = "generic"
    dialect = "duckdb"
    # capability flags: what the pipeline may rely on
    transactional = False  # BEGIN / COMMIT / ROLLBACK cover temp tables and the published table
    binds_column_types = False  # column_types() names the types the source binds (for keys and collations)
    has_collations = False  # COLLATE c exists (byte-wise comparison of strings)
    reads_stably = False  # source_is_stable() can tell a base table that reads the same twice
    writes_reports = False  # the HTML report's SQL macros can be installed
    # how a sort carries a column's few published strings as small codes (backends/codings.py: an
    # ENUM on DuckDB, a position in an array on Spark); None: as the strings themselves
    string_coding: Coding | None = None
    # hash() is 64 bits wide, so distinct class keys rarely share one: the join back may match on the
    # hash of the keys where the histogram shows no two cells sharing one (materialize.key_hashes_distinct)
    hashes_64_bits = False
    # a wide table's dictionary codes are looked up in one row of sorted arrays rather than joined
    # from a dictionary table per column (pipeline/codes.py: Spark's analyzer and 200 views)
    codes_by_lookup = False
    keeps_registry = False  # the publication registry is kept (a KeepsRegistry backend), for REFRESH
    # rows per unit a table scan is split into for its threads (None: the engine splits otherwise)
    scan_unit_rows: int | None = None

    def __init__(self):
        self.registered: set[str] = set()  # Arrow tables registered under a name
        self.temps: list[str] = []  # temp tables made and not yet dropped

    # ------------------------------------------------------------------ running expressions
    def render(self, expression: exp.Expr) -> str:
        return expression.sql(dialect=self.dialect)

    def _run(self, sql: str, parameters=None):
        """Run one statement of engine SQL; raise BackendError (the engine's first line)."""
        raise NotImplementedError

    def execute(self, expression: exp.Expr, parameters=None):
        if not isinstance(expression, exp.Expr):
            raise TypeError("a backend runs sqlglot expressions, not SQL text")
        return self._run(self.render(expression), parameters)

    def rows(self, expression: exp.Expr, parameters=None) -> list[tuple]:
        return [tuple(row) for row in self.execute(expression, parameters).fetchall()]

    def one(self, expression: exp.Expr, parameters=None) -> tuple | None:
        rows = self.rows(expression, parameters)
        return rows[0] if rows else None

    def arrow(self, expression: exp.Expr) -> pa.Table:
        return self.execute(expression).to_arrow_table()

    def holds_infinite_dates(self, table: str, column: str) -> bool:
        """Whether a DATE/TIMESTAMP column of `table` holds infinity or -infinity. An engine without
        infinite dates (Spark) has none; DuckDB hands them to Python as the largest and smallest
        date, which a real 9999-12-31 or 0001-01-01 also is, so only the engine can tell."""
        return False

    def columns(self, table: TableName) -> list[str]:
        """The column names of a table or view, in order (UnknownTable if there is none)."""
        probe = exp.select(exp.Star()).from_(table.table.copy()).limit(0)
        return [d[0] for d in self.execute(probe).description]

    def column_types(self, select: exp.Select) -> list[str]:
        """The type names `select` binds, one per column (only where binds_column_types)."""
        return [row[1] for row in self.rows(exp.Describe(this=select))]

    def tie_key(self, value: exp.Expr, sortable: bool = False) -> exp.Expr | None:
        """The sort key that goes on ordering rows by `value`, one of their published values, after
        their order hash (join_back: every order by a row's hash), or None: no tie keys. An engine
        whose sort reads the keys after a near-unique hash only on its ties (they cost next to
        nothing) returns one, so that rows whose hashes collide are ordered by what they publish
        too, never by the order they arrive in. `sortable`: the value is a QI's string or code,
        which any engine sorts as it is."""
        return None

    # ------------------------------------------------------------------ objects of a statement
    def create_temp(self, name: str, select: exp.Expr) -> None:
        self.temps.append(name)  # before: a failed CREATE may have made it on some engines
        self.execute(temporary(exp.Create(this=exp.to_table(name, quoted=True), kind="TABLE", expression=select)))

    def drop_temp(self, *names: str) -> None:
        for name in names:
            self.execute(exp.Drop(tables=[exp.to_table(name, quoted=True)], kind="TABLE", exists=True))
            if name in self.temps:
                self.temps.remove(name)

    def drop_inputs(self, *names: str) -> None:
        """Drop temp tables that only built other temp tables (where the engine stored those)."""
        self.drop_temp(*names)

    def create_target(self, table: TableName, select: exp.Expr, kind: str = "TABLE") -> None:
        """Create or replace the published table (or view: kind = 'VIEW')."""
        self.execute(exp.Create(this=table.table.copy(), kind=kind, replace=True, expression=select))

    def catalog_entry(self, table: TableName) -> tuple[str, str | None] | None:
        """(kind, comment) of what the name holds now: kind 'TABLE' or 'VIEW'; None when it holds
        nothing (or the engine has no catalog to ask)."""
        return None

    def existing_kind(self, table: TableName) -> str | None:
        entry = self.catalog_entry(table)
        return entry[0] if entry else None

    def drop_object(self, table: TableName, kind: str) -> None:
        self.execute(exp.Drop(tables=[table.table.copy()], kind=kind, exists=True))

    def register_arrow(self, name: str, table: pa.Table) -> None:
        raise NotImplementedError

    def unregister(self, name: str) -> None:
        self.registered.discard(name)

    def set_comment(self, table: TableName, text: str, kind: str = "TABLE") -> None:
        self.execute(exp.Comment(this=table.table.copy(), kind=kind, expression=exp.Literal.string(text)))

    def table_comment(self, table: TableName) -> str | None:
        entry = self.catalog_entry(table)
        return entry[1] if entry else None

    def file_access_allowed(self) -> bool:
        return True

    def install_macros(self) -> None:
        """The SQL macros of sql/*.sql (the report's and the profile's), where `writes_reports`."""
        raise NotImplementedError

    def report_connection(self):
        """The connection the HTML report (duckanon.report) runs its own SQL on, where
        `writes_reports`: the report's queries are DuckDB SQL over the macros of sql/*.sql, not yet
        expressions a backend renders, so the one engine that writes reports hands it its connection."""
        raise NotImplementedError

    # ------------------------------------------------------------------ catalog
    def session_defaults(self) -> tuple[str, str]:
        """The database and schema an unqualified name resolves in (full_key fills them in)."""
        return self.one(exp.select(exp.func("current_database"), exp.func("current_schema")))

    def place(self, source: TableName, target: TableName, hierarchy_tables=()) -> tuple[TableName, TableName]:
        """The source and target as the engine resolves them; refuse a target that is the source.
        The generic engine compares the names with the session's defaults filled in."""
        defaults = self.session_defaults()
        if full_key(target, *defaults) == full_key(source, *defaults):
            raise AnonymizeError(f"the target {target.sql()} is the source table: choose another name with INTO")
        return source, target

    def resolved(self, table: TableName) -> TableName:
        """`table` as the object a SELECT reads (for statements that read tables by name)."""
        return table

    def collations(self, source: TableName, columns: list[str]) -> tuple[dict[str, str], str]:
        """The explicit collation of each string column (absent: none) and the default collation."""
        return {}, ""

    def source_is_stable(self, source: TableName, read: list[str]) -> bool:
        return False

    # ------------------------------------------------------------------ transactions
    def in_explicit_transaction(self) -> bool:
        return False

    def begin(self) -> None:
        pass

    def commit(self) -> None:
        self.release()

    def rollback(self) -> None:
        self.temps.clear()
        self.release()

    def release(self, names=None) -> None:
        """Let go of registered data (all of it, or `names`): what the engine keeps past a statement."""
        for name in list(self.registered if names is None else names):
            self.unregister(name)

    @contextmanager
    def translating(self):
        """Errors of the engine raised inside the block (by code that runs the engine's own SQL,
        such as the report's macros) come out as BackendError."""
        yield

    @contextmanager
    def keeping_insertion_order(self):
        yield

    def threads(self) -> int:
        """How many threads one query may run on."""
        return 1

    def close(self) -> None:
        """The end of a statement: nothing of ours stays open on the caller's connection."""


@dataclass(frozen=True)
class Database:
    """An attached database as the engine lists it: its alias, file (None in memory), whether it
    is read-only, its storage type ('duckdb', or another system's attached through an extension)
    and whether it is the engine's own (internal)."""

    name: str
    path: str | None
    readonly: bool
    type: str | None
    internal: bool = False


class KeepsRegistry:
    """A backend that can keep the publication registry (pipeline/registry*): a table in the
    source's database, told apart from a user's table by its comment and columns, and a listing
    macro over the registries of every attached database. The registry finds this capability by
    isinstance (as ibis's HasCurrentCatalog), never by the engine's name, and asks the catalog only
    through these methods; names are parts (catalog, schema, name) compared without case."""

    keeps_registry = True

    def session(self) -> object:
        """An object that lives as long as the engine's session and can be weakly referenced: what
        the registry keeps per session (the listing it made) is keyed by it."""
        raise NotImplementedError

    def databases(self) -> list[Database]:
        raise NotImplementedError

    def database(self, name: str) -> Database | None:
        """The attached database of that alias (any case), or None."""
        return next((d for d in self.databases() if d.name.lower() == name.lower()), None)

    def find_object(self, catalog: str, schema: str, name: str) -> tuple[str, str | None] | None:
        """('table' or 'view', its comment) of the object at catalog.schema.name, or None."""
        raise NotImplementedError

    def table_columns(self, catalog: str, schema: str, name: str) -> list[tuple[str, str]]:
        """(name, type) of each column of the table, in order."""
        raise NotImplementedError

    def databases_holding(self, schema: str, name: str) -> list[str]:
        """The databases (sorted) that hold a persistent table schema.name."""
        raise NotImplementedError

    def named_object(self, table: TableName):
        """The object a statement naming `table` means (REFRESH): the one a SELECT reads, else the
        table CREATE TABLE would make; its `key()` is (catalog, schema, name), lower case."""
        raise NotImplementedError

    def hierarchy_table(self, name: str) -> tuple[str, str, str] | None:
        """The table or view a `table(name)` hierarchy reads, as (catalog, schema, name) parts, when
        the name is that object's (None: no catalog object, or read otherwise)."""
        raise NotImplementedError

    def engine_version(self) -> str:
        raise NotImplementedError

    @contextmanager
    def separate_session(self) -> Iterator[Backend]:
        """A backend on a session of its own (its own transaction), closed on leaving."""
        raise NotImplementedError
        yield

    def create_table_macro(self, name: str, select: exp.Select) -> None:
        """Create or replace the session's table macro `name()` returning `select`'s rows."""
        raise NotImplementedError

    def create_scalar_macro(self, name: str, parameters: list[str], body: exp.Expr) -> None:
        """Create or replace the session's macro `name(parameters...)` returning `body`."""
        raise NotImplementedError

    def objects_relation(self) -> exp.Query:
        """The catalog's tables and views as rows (database_name, schema_name, name, comment), for
        queries that look them up when they run (the listing)."""
        raise NotImplementedError

    def databases_relation(self) -> exp.Query:
        """The attached databases as rows (database_name, readonly, path), likewise."""
        raise NotImplementedError


@dataclass
class Work:
    """One statement's work on a backend: its own transaction unless the caller has one open (a
    failed BEGIN inside the caller's transaction would abort it, so that is probed first). Leaving
    without `commit()` undoes what this work made: a rollback of our own transaction, or, inside
    the caller's (or an enclosing work's, as a sweep's dry runs inside ANONYMIZE), dropping the
    temp tables and registered data made since it began, never those of the enclosing work."""

    backend: Backend
    own_transaction: bool = False
    committed: bool = False
    first_temp: int = 0  # backend.temps[first_temp:] are this work's
    registered_before: frozenset = frozenset()

    def _own_temps(self) -> list[str]:
        return self.backend.temps[self.first_temp:]

    def _own_registered(self) -> list[str]:
        return [name for name in self.backend.registered if name not in self.registered_before]

    def drop_temps(self) -> None:
        self.backend.drop_temp(*reversed(self._own_temps()))

    def commit(self) -> None:
        self.drop_temps()
        if self.own_transaction:
            self.backend.commit()
        else:
            self.backend.release(self._own_registered())
        self.committed = True

    def undo(self) -> None:
        try:
            if self.own_transaction and self.backend.transactional:
                self.backend.rollback()
            else:
                self.drop_temps()
        except BackendError:
            pass
        finally:
            del self.backend.temps[self.first_temp:]
            self.backend.release(self._own_registered())


@contextmanager
def work(backend: Backend):
    """`with work(backend) as w:` ... `w.commit()`; anything else leaves the database as it was."""
    w = Work(backend, first_temp=len(backend.temps), registered_before=frozenset(backend.registered))
    try:
        if backend.transactional and not backend.in_explicit_transaction():
            w.own_transaction = True  # before BEGIN: an interrupt right after it still rolls back
            backend.begin()
        yield w
    finally:
        if not w.committed:
            w.undo()
