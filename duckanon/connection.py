"""Python entry points: a connection that understands our statements, and helpers for plain ones.

`Connection` wraps a `duckdb.DuckDBPyConnection`: `execute` and `sql` run our statements
themselves and hand everything else to DuckDB verbatim; any other attribute is DuckDB's own.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from duckanon.engine import Summary, run_anonymize, run_statement
from duckanon.errors import AnonymizeError
from duckanon.plan import one_line
from duckanon.sql import split_statements

_SQL_DIR = Path(__file__).resolve().parent / "_sql"
_REGISTERED_UDF = "__duckanon_anonymize"
# A failed run comes back from the Python UDF as this prefix + the message, and the `anonymize`
# macro turns it into DuckDB's error(): a Python exception raised inside a UDF would reach the
# user as several lines with a traceback ("At: .../models.py(49)").
_UDF_ERROR = "!error "  # a summary is JSON and starts with "{"
_ANONYMIZE_MACRO = (
    "CREATE OR REPLACE TEMP MACRO anonymize(statement_text) AS "
    # the lambda binds the UDF's result once (a macro argument used twice would run it twice)
    f"list_transform([{_REGISTERED_UDF}(statement_text)], lambda r: CASE WHEN starts_with(r, '{_UDF_ERROR}') "
    f"THEN error(r[{len(_UDF_ERROR) + 1}:]) ELSE r END)[1]"
)


def macro_files() -> list[Path]:
    return sorted(_SQL_DIR.glob("*.sql"))


def execute(con: duckdb.DuckDBPyConnection, text: str, parameters=None):
    """Run a script of our statements and plain DuckDB SQL on `con`.

    Plain statements go to DuckDB untouched. Returns the DuckDB connection, whose fetch methods
    read the last statement's result (for ANONYMIZE: its one-row summary).
    """
    pieces = split_statements(text)
    if not any(ours for _, ours in pieces):
        return con.execute(text, parameters) if parameters is not None else con.execute(text)
    result = con
    for piece, ours in pieces:
        if ours:
            query, values = run_statement(con, piece).as_sql()
            result = con.execute(query, values)
        else:
            result = con.execute(piece)
    return result


def sql(con: duckdb.DuckDBPyConnection, text: str):
    """Like `duckdb.sql`: a relation for the last statement (ANONYMIZE: its summary)."""
    pieces = split_statements(text)
    if not any(ours for _, ours in pieces):
        return con.sql(text)
    relation = None
    for piece, ours in pieces:
        if ours:
            query, values = run_statement(con, piece).as_sql()
            relation = con.sql(query, params=values)
        else:
            relation = con.sql(piece)
    return relation


def register(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Install our SQL macros (checks, reports) and the `anonymize(text)` scalar UDF into `con`."""
    for path in macro_files():
        # the files create TEMP macros: per connection, so they work on read-only databases, never
        # write into the user's file, and connections (or cursors, or threads) never conflict
        con.execute(path.read_text())
    try:
        con.remove_function(_REGISTERED_UDF)
    except Exception:
        pass

    def anonymize_udf(text: str) -> str:
        # A UDF runs inside the caller's query, so it works on its own cursor (same database,
        # separate connection); the summary comes back as JSON text.
        cursor = con.cursor()
        try:
            return run_anonymize(cursor, text).to_json()
        except (AnonymizeError, duckdb.Error) as error:
            return _UDF_ERROR + one_line(error)
        finally:
            cursor.close()

    try:
        con.create_function(_REGISTERED_UDF, anonymize_udf, [duckdb.sqltype("VARCHAR")], duckdb.sqltype("VARCHAR"),
                            side_effects=True)
    except duckdb.CatalogException:
        pass  # already there: UDFs live in the database instance, shared by its connections and cursors
    con.execute(_ANONYMIZE_MACRO)
    return con


class Connection:
    """A DuckDB connection that also accepts ANONYMIZE."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        register(con)

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        return self._con

    def execute(self, text: str, parameters=None) -> "Connection":
        execute(self._con, text, parameters)
        return self

    def sql(self, text: str):
        return sql(self._con, text)

    query = sql

    def anonymize(self, text: str) -> Summary:
        """Run one ANONYMIZE and return its Summary as a Python object."""
        pieces = split_statements(text)
        if len(pieces) != 1 or not pieces[0][1]:
            raise AnonymizeError("anonymize() takes exactly one ANONYMIZE statement")
        return run_anonymize(self._con, pieces[0][0])

    def cursor(self) -> "Connection":
        return Connection(self._con.cursor())

    def __getattr__(self, name):
        return getattr(self._con, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._con.close()


def connect(database: str = ":memory:", read_only: bool = False, config: dict | None = None) -> Connection:
    """Open DuckDB (in memory by default) with duckanon's statements and macros available."""
    return Connection(duckdb.connect(database, read_only=read_only, config=config or {}))
