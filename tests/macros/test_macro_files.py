"""The SQL macro files (sql/checks.sql, sql/risk.sql, sql/t_hierarchical.sql) as users load them
without duckanon: `.read sql/checks.sql` in the plain DuckDB CLI, or the file's text executed on
a plain duckdb connection.

Every macro is a TEMP macro, so loading the files
* works on a database opened read-only (CLI `-readonly`, Python `read_only=True`), and
* writes nothing into the user's file: after a read-write session that loaded them, the file's
  catalog holds no macro.

The CLI is the `duckdb` executable of the duckdb-cli package (test extra), looked up next to this
interpreter first. It may be an older major version than the Python duckdb module (1.5 CLI, 2.x
module), so the database file is written with STORAGE_VERSION 'v1.5.0', which both can open.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from support.shell import duckdb_cli

REPO = Path(__file__).resolve().parents[2]
SQL_DIR = REPO / "sql"
MACRO_FILES = [SQL_DIR / "checks.sql", SQL_DIR / "risk.sql", SQL_DIR / "risk_population.sql",
               SQL_DIR / "t_hierarchical.sql", SQL_DIR / "profile.sql"]  # load order

# the test table: classes by a = {1: x, y} and {2: x, y, z}; by (a, b) the same two classes
ROWS = "(1, 'a', 'x'), (1, 'a', 'y'), (2, 'b', 'x'), (2, 'b', 'y'), (2, 'b', 'z')"
# hierarchy of s: x, y under 'xy', z under 'z', then '*' (height 2)
HIERARCHY = ("('x', 1, 'xy'), ('x', 2, '*'), ('y', 1, 'xy'), ('y', 2, '*'), "
             "('z', 1, 'z'), ('z', 2, '*')")

# (query, expected CSV lines without header), each checked by hand:
QUERIES = [
    # classes of sizes 2 and 3
    ("SELECT k, classes FROM anon_k('t', ['a'])", ["2,2"]),
    ("SELECT k, classes FROM anon_k('t', ['a', 'b'])", ["2,2"]),
    # class {x, y}: 2 distinct values, frequency floor(2/1) = 2; class {x, y, z}: 3, 3
    ("SELECT distinct_l, frequency_l FROM anon_l('t', ['a'], 's')", ["2,2"]),
    # Q = (2/5, 2/5, 1/5); class 1: 1/2 (0.1 + 0.1 + 0.2) = 0.2, class 2: 1/2 (4/15) = 2/15
    ("SELECT round(t, 6) FROM anon_t('t', ['a'], 's')", ["0.2"]),
    # highest risk 1/2, 5 rows in 2 classes
    ("SELECT highest_risk, classes, rows FROM anon_risk('t', ['a'])", ["0.5,2,5"]),
    # H = 2; class 1: (0.4 on the leaves + 0.4 on level 1) / 4 = 0.2, class 2: (8/15) / 4
    ("SELECT round(t_hierarchical, 6) FROM anon_t_hierarchical('t', ['a'], 's', 'h')", ["0.2"]),
]


CLI = duckdb_cli()
needs_cli = pytest.mark.skipif(CLI is None, reason="duckdb CLI not installed (pip install duckdb-cli)")


@pytest.fixture
def db_file(tmp_path) -> Path:
    """A database file with the table t(a, b, s) and the hierarchy h, readable by a 1.5 CLI."""
    path = tmp_path / "f.duckdb"
    con = duckdb.connect()
    con.execute(f"ATTACH '{path}' AS f (STORAGE_VERSION 'v1.5.0')")
    con.execute(f"CREATE TABLE f.t AS SELECT * FROM (VALUES {ROWS}) v(a, b, s)")
    con.execute(f"CREATE TABLE f.h AS SELECT * FROM (VALUES {HIERARCHY}) v(value, level, node)")
    con.execute("DETACH f")
    con.close()
    return path


def run_cli(path: Path, script: str, *flags: str) -> list[str]:
    """Run `script` (CLI dot commands and SQL) on `path`, return stdout lines; fail on any error."""
    out = subprocess.run([CLI, "-bail", "-csv", "-noheader", *flags, str(path)], input=script,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    return out.stdout.splitlines()


def read_files_script() -> str:
    return "".join(f".read '{f}'\n" for f in MACRO_FILES)


def persistent_objects(path: Path) -> tuple[list, list]:
    """(macros, tables and views) stored in the file's own catalog, read with Python duckdb."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        db = con.execute("SELECT current_database()").fetchone()[0]
        macros = con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE database_name = ? "
            "AND function_type IN ('macro', 'table_macro') ORDER BY ALL", [db]).fetchall()
        relations = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? UNION ALL "
            "SELECT view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal "
            "UNION ALL SELECT sequence_name FROM duckdb_sequences() WHERE database_name = ? "
            "ORDER BY ALL", [db, db, db]).fetchall()
    finally:
        con.close()
    return macros, relations


# ------------------------------------------------------------------ the files themselves


def statements(path: Path) -> list[str]:
    """The file's statements, comments stripped (duckdb's own splitter)."""
    return [re.sub(r"--[^\n]*", "", s.query).strip() for s in duckdb.extract_statements(path.read_text())]


@pytest.mark.parametrize("path", MACRO_FILES, ids=lambda p: p.name)
def test_every_statement_creates_a_temp_macro_and_nothing_else(path):
    found = statements(path)
    assert found
    bad = [s.split("\n", 1)[0] for s in found if not re.match(r"CREATE OR REPLACE TEMP MACRO anon_\w+\(", s)]
    assert bad == []


def test_the_files_are_all_the_macro_files():
    """A new .sql file must be added to MACRO_FILES (and so be checked here)."""
    assert sorted(SQL_DIR.glob("*.sql")) == sorted(MACRO_FILES)


@pytest.mark.parametrize("path", MACRO_FILES, ids=lambda p: p.name)
def test_no_arrow_lambdas(path):
    """`x -> expr` is deprecated in DuckDB 1.5 and an error in 2.x: only `lambda x: expr`."""
    code = "\n".join(statements(path))
    code = re.sub(r"'(?:[^']|'')*'", "''", code)  # string literals
    assert "->" not in code
    con = duckdb.connect()
    con.execute("SET lambda_syntax = 'DISABLE_SINGLE_ARROW'")
    for f in MACRO_FILES:  # in load order: later files use earlier macros
        con.execute(f.read_text())
        if f == path:
            break
    con.close()


# ------------------------------------------------------------------ the plain DuckDB CLI


@needs_cli
def test_cli_read_only_file(db_file):
    """`duckdb -readonly file` + `.read sql/checks.sql` etc.: the macros load and answer."""
    before = db_file.read_bytes()
    script = read_files_script() + "".join(q + ";\n" for q, _ in QUERIES)
    lines = run_cli(db_file, script, "-readonly")
    assert lines == [line for _, expected in QUERIES for line in expected]
    assert db_file.read_bytes() == before


@needs_cli
def test_cli_read_write_session_writes_no_macro(db_file):
    """A read-write CLI session that loads the files leaves the file's catalog as it was."""
    assert persistent_objects(db_file) == ([], [("h",), ("t",)])
    script = (read_files_script()
              + "SELECT k FROM anon_k('t', ['a']);\n"
              # the macros live in the session's temp catalog
              + "SELECT DISTINCT database_name FROM duckdb_functions() WHERE function_name = 'anon_k';\n"
              + "CHECKPOINT;\n")
    assert run_cli(db_file, script) == ["2", "temp"]
    assert persistent_objects(db_file) == ([], [("h",), ("t",)])


@needs_cli
def test_cli_loads_the_files_twice(db_file):
    """CREATE OR REPLACE: reading a file again in the same session is fine."""
    script = read_files_script() * 2 + "SELECT k FROM anon_k('t', ['a']);\n"
    assert run_cli(db_file, script, "-readonly") == ["2"]


# ------------------------------------------------------------------ Python duckdb, read-only


def test_python_read_only_connection(db_file):
    """The same files and queries on a plain (not duckanon) read-only Python connection."""
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        for f in MACRO_FILES:
            con.execute(f.read_text())
        for query, expected in QUERIES:
            row = con.execute(query).fetchone()
            assert ",".join(str(v) for v in row) == expected[0], query
        db = con.execute("SELECT current_database()").fetchone()[0]
        where = set(con.execute("SELECT DISTINCT database_name FROM duckdb_functions() "
                                "WHERE function_name LIKE 'anon\\_%' ESCAPE '\\'").fetchall())
        assert where == {("temp",)} and db != "temp"
    finally:
        con.close()
    assert persistent_objects(db_file) == ([], [("h",), ("t",)])
