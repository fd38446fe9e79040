"""BI tools reading a table published by duckanon (docs/bi.md).

Superset and most Python BI stacks reach DuckDB through SQLAlchemy + duckdb-engine, and the first
thing they do with a table is list its columns: `sqlalchemy.inspect(engine).get_columns(name)`.
duckdb-engine inherits SQLAlchemy's PostgreSQL column reflection, which DuckDB answers from its
emulated pg_catalog. SQLAlchemy 2.0.45 added a pg_collation subquery to that reflection (DuckDB has
a stub pg_collation since 1.5.3) and 2.1 extended it (pg_collation.collnamespace,
json_build_object) beyond what DuckDB 1.5 or 2.0 emulate, so with SQLAlchemy 2.1 the call fails
with `Referenced table "pg_catalog.pg_collation" not found`. The `bi` and `test` extras pin
SQLAlchemy to 2.0.x (and DuckDB >= 1.5.3); these tests run exactly the call BI tools make.

Also checked here: the read-only URI form Superset uses, the file lock between the publisher and
its readers, and a release written for DuckDB 1.5 readers (STORAGE_VERSION 'v1.5.0').
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("duckdb_engine")

import duckanon  # noqa: E402

from support.shell import duckdb_cli  # noqa: E402

# the source has columns the statement does not mention (id, name, phone): never published
SOURCE = """
    CREATE TABLE t AS SELECT * FROM (VALUES
        (1, 'Ann',  '555-0101', 1, 'a', 'x'),
        (2, 'Bob',  '555-0102', 1, 'a', 'y'),
        (3, 'Cleo', '555-0103', 2, 'b', 'x'),
        (4, 'Dan',  '555-0104', 2, 'b', 'y')
    ) v(id, name, phone, a, b, s)
"""
ANONYMIZE = "ANONYMIZE t WITH (k = 2, qi = (a, b), sensitive = s)"
PUBLISHED = ["a", "b", "s"]  # QI columns first, then the sensitive one, in source order
UNMENTIONED = {"id", "name", "phone"}


def reflection_hint(error: Exception) -> str:
    return (f"SQLAlchemy {sqlalchemy.__version__} cannot list a DuckDB table's columns through "
            f"duckdb-engine (DuckDB {duckdb.__version__}): SQLAlchemy 2.1 reflects collations "
            f"through pg_catalog tables DuckDB does not emulate. Install the pins of the `bi` "
            f"extra (sqlalchemy>=2.0,<2.1, duckdb>=1.5.3), see docs/bi.md. Error: {error}")


@pytest.fixture
def published(tmp_path) -> Path:
    """A database file where duckanon published t_anon from t, closed afterwards."""
    path = tmp_path / "file.duckdb"
    con = duckanon.connect(str(path))
    con.execute(SOURCE)
    con.execute(ANONYMIZE)
    con.close()
    return path


def test_get_columns_lists_the_published_columns(published):
    """The exact call BI tools make first, on a read-only engine."""
    engine = sqlalchemy.create_engine(f"duckdb:///{published}", connect_args={"read_only": True})
    try:
        try:
            columns = sqlalchemy.inspect(engine).get_columns("t_anon")
        except sqlalchemy.exc.ProgrammingError as error:
            pytest.fail(reflection_hint(error))
        names = [c["name"] for c in columns]
        assert names == PUBLISHED
        assert not UNMENTIONED & set(names)
        # QI columns are published as text ('*' for a suppressed cell), the sensitive one unchanged
        assert all(isinstance(c["type"], sqlalchemy.String) for c in columns)
        # and the source, in the same file, still has everything: the check is not vacuous
        assert {c["name"] for c in sqlalchemy.inspect(engine).get_columns("t")} == set(PUBLISHED) | UNMENTIONED
    finally:
        engine.dispose()


def test_table_listing_and_a_query(published):
    """What a BI tool does next: list tables, then query the release."""
    engine = sqlalchemy.create_engine(f"duckdb:///{published}", connect_args={"read_only": True})
    try:
        assert sorted(sqlalchemy.inspect(engine).get_table_names()) == ["duckanon_publications", "t", "t_anon"]
        with engine.connect() as con:
            sizes = con.execute(sqlalchemy.text(
                "SELECT count(*) AS n FROM t_anon GROUP BY a, b ORDER BY n")).scalars().all()
        assert sizes == [2, 2]
    finally:
        engine.dispose()


def test_read_only_uri_as_superset_writes_it(published):
    """`duckdb:////abs/path.duckdb?access_mode=read_only`: URL parameters become DuckDB settings."""
    url = f"duckdb:///{published.resolve()}?access_mode=read_only"
    assert url.startswith("duckdb:////")
    engine = sqlalchemy.create_engine(url)
    try:
        try:
            names = [c["name"] for c in sqlalchemy.inspect(engine).get_columns("t_anon")]
        except sqlalchemy.exc.ProgrammingError as error:
            pytest.fail(reflection_hint(error))
        assert names == PUBLISHED
        with engine.connect() as con:
            with pytest.raises(sqlalchemy.exc.DBAPIError, match="read-only"):
                con.execute(sqlalchemy.text("CREATE TABLE leak AS SELECT * FROM t"))
    finally:
        engine.dispose()


# ------------------------------------------------------------------ the file lock


def open_in_other_process(path: Path, read_only: bool) -> tuple[bool, str]:
    """Open `path` from a separate process (the lock is per process), run one query."""
    code = (f"import duckdb; c = duckdb.connect({str(path)!r}, read_only={read_only}); "
            "print(c.execute('SELECT count(*) FROM t_anon').fetchone()[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out.returncode == 0, (out.stdout + out.stderr).strip()


def test_readers_share_the_file_and_block_the_writer(published):
    """Many read-only processes at once; none may write while one of them holds the file."""
    engine = sqlalchemy.create_engine(f"duckdb:///{published}", connect_args={"read_only": True})
    try:
        with engine.connect() as bi:  # a BI tool holding the file open
            bi.execute(sqlalchemy.text("SELECT 1")).fetchall()
            ok, out = open_in_other_process(published, read_only=True)
            assert ok and out.endswith("4"), out
            ok, out = open_in_other_process(published, read_only=False)
            assert not ok and "lock" in out.lower(), out
    finally:
        engine.dispose()
    ok, out = open_in_other_process(published, read_only=False)  # readers gone: the writer gets in
    assert ok, out


def test_a_writer_blocks_readers(published):
    """While the publisher holds the file read-write, a BI process cannot even read it."""
    con = duckdb.connect(str(published))
    try:
        ok, out = open_in_other_process(published, read_only=True)
        assert not ok and "lock" in out.lower(), out
    finally:
        con.close()


@pytest.mark.skipif(sys.platform == "win32", reason="replacing an open file is a POSIX pattern")
def test_new_release_replaces_the_file_under_running_readers(published, tmp_path):
    """docs/bi.md's republishing pattern: publish into a new file, then os.replace() it over the
    old one. A reader that still holds the old file keeps reading the old release (the lock is on
    the old inode), new readers get the new one, and nobody waits for anybody."""
    reader = subprocess.Popen(
        [sys.executable, "-c",
         f"import duckdb, sys; c = duckdb.connect({str(published)!r}, read_only=True)\n"
         "q = 'SELECT count(*) FROM t_anon'\n"
         "print(c.execute(q).fetchone()[0], flush=True); sys.stdin.readline()\n"
         "print(c.execute(q).fetchone()[0], flush=True)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "4"
        new = tmp_path / "file.new.duckdb"
        con = duckanon.connect()
        con.execute(SOURCE)
        con.execute("INSERT INTO t SELECT id + 4, name, phone, a, b, s FROM t")  # 8 rows now
        con.execute(f"ATTACH '{new}' AS release")
        con.execute("ANONYMIZE t INTO release.t_anon WITH (k = 2, qi = (a, b), sensitive = s)")
        con.execute("DETACH release")
        con.close()
        new.replace(published)
        ok, out = open_in_other_process(published, read_only=True)
        assert ok and out.endswith("8"), out
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "4"  # the old release, still consistent
    finally:
        reader.kill()
        reader.wait()


# ------------------------------------------------------------------ a release for DuckDB 1.5 readers


@pytest.mark.skipif(duckdb_cli() is None, reason="duckdb CLI not installed (pip install duckdb-cli)")
def test_release_for_duckdb_1_5_readers(tmp_path):
    """ATTACH the release file with STORAGE_VERSION 'v1.5.0' and ANONYMIZE INTO it: whatever
    DuckDB the publisher runs (1.5 or 2.x), a 1.5 client (the duckdb-cli package here, or a
    1.5 ODBC/JDBC driver) opens the release read-only, and it holds only the published table."""
    release = tmp_path / "release.duckdb"
    con = duckanon.connect()
    con.execute(SOURCE)
    con.execute(f"ATTACH '{release}' AS release (STORAGE_VERSION 'v1.5.0')")
    con.execute("ANONYMIZE t INTO release.t_anon WITH (k = 2, qi = (a, b), sensitive = s)")
    con.execute("DETACH release")
    con.close()
    out = subprocess.run([duckdb_cli(), "-readonly", "-csv", str(release), "-c",
                          "SELECT table_name, column_name FROM duckdb_columns() "
                          "WHERE database_name = current_database() ORDER BY table_name, column_index"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["table_name,column_name"] + [f"t_anon,{c}" for c in PUBLISHED]
