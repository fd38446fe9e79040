"""Python entry points: a connection that understands our statements, and helpers for plain ones.

`Connection` wraps a `duckdb.DuckDBPyConnection`: `execute` and `sql` run our statements
themselves and hand everything else to DuckDB verbatim; any other attribute is DuckDB's own.
Both see the caller's DataFrames and Arrow tables by variable name, as DuckDB's own `execute`
and `sql` do (its replacement scans): see `Caller`.

One module per job: `parameters` (binding `?` and `$name` in our statements), `caller` (the
caller's frame and its Python tables), `scripts` (a script's pieces run by us or by DuckDB, the
macros installed when named, `execute` and `sql`), `udf` (the SQL function anonymize(),
`register`) and `api` (`Connection`, `connect`). This package's names are their public ones.
"""

from __future__ import annotations

from duckanon.connection.api import Connection, connect
from duckanon.connection.caller import PYTHON_TABLE_TYPES, Caller, is_python_table
from duckanon.connection.parameters import bind_parameters
from duckanon.connection.scripts import IN_TRANSACTION, execute, sql
from duckanon.connection.udf import register

__all__ = ["IN_TRANSACTION", "PYTHON_TABLE_TYPES", "Caller", "Connection", "bind_parameters", "connect", "execute",
           "is_python_table", "register", "sql"]
