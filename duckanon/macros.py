"""The SQL macros of sql/*.sql (checks, risk, hierarchical t), installed into a DuckDB connection.

The files create TEMP macros: per connection, so they work on read-only databases, never write
into the user's file, and connections (or cursors, or threads) never conflict installing them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).resolve().parent / "_sql"


def macro_files() -> list[Path]:
    return sorted(SQL_DIR.glob("*.sql"))


def install(con: duckdb.DuckDBPyConnection) -> None:
    for path in macro_files():
        con.execute(path.read_text())


def installed(con: duckdb.DuckDBPyConnection) -> bool:
    # fetchall, not fetchone: DuckDB 2 leaves a result open until a fetch returns nothing, and then
    # refuses the caller's next con.sql() or register()
    return con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = 'anon_utility'").fetchall()[0][0] > 0


def ensure_installed(con: duckdb.DuckDBPyConnection) -> None:
    """Install the macros on `con` unless they are there already (a connection of `connect`
    installs them when first needed)."""
    if not installed(con):
        install(con)
