"""`Connection`, a DuckDB connection that also accepts our statements (one DuckDB cursor per
thread), and `connect`."""

from __future__ import annotations

import threading

import duckdb

from duckanon import macros
from duckanon.connection.caller import Caller
from duckanon.connection.scripts import (execute, in_open_transaction, install_macros_for, refuse_in_transaction,
                                         sql)
from duckanon.connection.udf import register
from duckanon.errors import AnonymizeError
from duckanon.sql import split_statements
from duckanon.statements import Summary, run_anonymize


class Connection:
    """A DuckDB connection that also accepts ANONYMIZE.

    Threads may share one Connection: each thread works on a DuckDB cursor of its own (same
    database, separate connection, registered like this one), made when the thread first uses the
    Connection; the thread that opened it uses the connection itself. So `execute(...)` and the
    fetch methods after it read the calling thread's own result whatever other threads run, and
    transactions, temp tables and `register`ed Python objects belong to the thread that made them.
    Statements of different threads run concurrently, as on DuckDB cursors; two threads writing the
    same table may get DuckDB's write-write conflict, as a one-line error. `close()` closes them all.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        self._lock = threading.Lock()
        self._local = threading.local()
        register(con, macros_now=False)
        self._local.con = con

    def _current(self) -> duckdb.DuckDBPyConnection:
        """The calling thread's DuckDB connection (its own cursor, except in the opening thread)."""
        try:
            return self._local.con
        except AttributeError:
            pass
        with self._lock:
            cursor = self._con.cursor()
        try:
            register(cursor, macros_now=False)
        except BaseException:
            cursor.close()
            raise
        self._local.con = cursor
        return cursor

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        """The calling thread's DuckDB connection, with the SQL macros installed (whatever runs on it
        directly may call them)."""
        con = self._current()
        if not getattr(self._local, "macros", False):
            macros.ensure_installed(con)
            # (installed inside an explicit transaction, a ROLLBACK would take them away again)
            self._local.macros = not in_open_transaction(con)
        return con

    def execute(self, text: str, parameters=None, progress=None) -> "Connection":
        """Run a script (see `duckanon.execute`); fetch its last result with fetchone() etc."""
        execute(self._current(), text, parameters, progress)
        return self

    def executemany(self, text: str, parameters=None) -> "Connection":
        """DuckDB's executemany for plain SQL. ANONYMIZE is refused: one execute per set of values."""
        if any(ours for _, ours in split_statements(text)):
            raise AnonymizeError("executemany cannot run ANONYMIZE: call execute(text, values) once per set of values")
        con = self._current()
        refuse_in_transaction(con, text)
        install_macros_for(con, text)
        if parameters is not None:
            con.executemany(text, parameters)
        else:
            con.executemany(text)
        return self

    def sql(self, text: str, params=None):
        return sql(self._current(), text, params)

    query = sql

    def anonymize(self, text: str, progress=None) -> Summary:
        """Run one ANONYMIZE and return its Summary as a Python object."""
        pieces = split_statements(text)
        if len(pieces) != 1 or not pieces[0][1]:
            raise AnonymizeError("anonymize() takes exactly one ANONYMIZE statement")
        return run_anonymize(self._current(), pieces[0][0], progress, Caller())

    def cursor(self) -> "Connection":
        """A new Connection on a new cursor (same database), for the calling thread."""
        with self._lock:
            cursor = self._con.cursor()
        return Connection(cursor)

    def close(self) -> None:
        self._con.close()  # DuckDB closes the threads' cursors with it

    def __getattr__(self, name):
        if name in ("_con", "_lock", "_local"):  # not set yet (copy, pickle): never recurse
            raise AttributeError(name)
        return getattr(self._current(), name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(database: str = ":memory:", read_only: bool = False, config: dict | None = None) -> Connection:
    """Open DuckDB (in memory by default) with duckanon's statements and macros available."""
    return Connection(duckdb.connect(database, read_only=read_only, config=config or {}))
