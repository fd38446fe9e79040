"""A refused statement: one line, no traceback, and every database left as it was (the house
rule of docs/bad_inputs.md)."""

from __future__ import annotations

import pytest

import duckanon


def snapshot(con):
    """Everything a failed statement must leave as it was: tables, views, their rows, temp tables."""
    tables = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY ALL").fetchall()
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL").fetchall()
    contents = {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t[0]}"."{t[1]}"').fetchall())) for t in tables}
    temps = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0]
    return tables, views, contents, temps


def assert_refused_and_unchanged(db, statement, message):
    before = snapshot(db)
    with pytest.raises(duckanon.AnonymizeError, match=message) as caught:
        db.execute(statement)
    assert "\n" not in str(caught.value)
    assert "Traceback" not in str(caught.value)
    assert snapshot(db) == before


def database_state(con) -> tuple:
    """Every table and view of every attached database (temp ones too) with its rows: what a
    refused statement must leave as it was (a registry table made on the way would show here)."""
    tables = con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
    views = con.execute("SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal "
                        "ORDER BY ALL").fetchall()
    rows = {t: sorted(map(repr, con.execute("SELECT * FROM " + ".".join('"' + p.replace('"', '""') + '"' for p in t))
                          .fetchall())) for t in tables}
    return tables, views, rows


def refused_unchanged(con, statement: str, message: str, kind=None) -> None:
    """`statement` is refused with exactly `message` (an AnonymizeError unless `kind`), and every
    database is as it was."""
    before = database_state(con)
    with pytest.raises(kind or duckanon.AnonymizeError) as caught:
        con.execute(statement)
    assert str(caught.value) == message
    assert database_state(con) == before  # also: no registry table where there was none
