"""Connections and the small things every test does with them: quote a name, read a result row,
fetch a table, make a database file."""

from __future__ import annotations

from pathlib import Path

import duckanon


def qident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def result_row(con, statement: str) -> dict:
    """Run one statement on a duckanon connection; its result row by column name."""
    row = con.execute(statement).fetchone()
    return dict(zip([d[0] for d in con.description], row))


def connection_with(create: str):
    """A duckanon connection on an in-memory database after running `create`; closed after use."""
    connection = duckanon.connect()
    connection.execute(create)
    yield connection
    connection.close()


def fetch(con, table: str):
    return con.execute(f"SELECT * FROM {table}").fetchall()


def database_file(path, statements) -> Path:
    """A database file at `path` made by running `statements` through duckanon, then closed."""
    con = duckanon.connect(str(path))
    for statement in statements:
        con.execute(statement)
    con.close()
    return path
