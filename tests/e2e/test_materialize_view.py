"""materialize = 'view': the target is a view over a table of (published values, count).

Without `keep` columns every published row is a function of the class histogram, so the release
can be stored as one row per distinct published row with its count. The view expands it to the
very rows, in the very order, of the table form; it never reads the source; it reads from plain
DuckDB (no duckanon), a DuckDB 1.5 CLI, SQLAlchemy and a Parquet export.
"""

from __future__ import annotations

import re
import subprocess

import duckdb
import pytest

import duckanon

from support.checks import check_published
from support.refusals import assert_refused_and_unchanged
from support.shell import duckdb_cli

# strings that a NOCASE column holds in several spellings, NULLs, numbers: the cases where a
# view could publish other bytes than the table form
SOURCE = """
    CREATE TABLE people AS
    SELECT i AS id,
           (['Ann', 'ann', 'ANN', 'Bob', 'Cleo', NULL])[1 + (i * 7) % 6] COLLATE NOCASE AS name,
           20 + (i * 13) % 37 AS age,
           (['north', 'south', 'east', NULL])[1 + (i * 5) % 4] AS region,
           'd' || ((i * 11) % 5) AS disease
    FROM range(400) r(i)
"""
QI = ("name", "age", "region")
STATEMENT = "ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease, seed = 3, method = {method})"


@pytest.fixture
def people(con):
    con.execute(SOURCE)
    return con


def rows(con, table: str) -> list[tuple]:
    """The published rows in stored order, strings as their bytes."""
    return con.execute(f"SELECT * FROM {table}").fetchall()


@pytest.mark.parametrize("method", ["auto", "greedy", "mapprox", "mondrian", "lattice"])
def test_the_view_expands_to_the_rows_and_order_of_the_table_form(people, method):
    people.execute(STATEMENT.format(method=method))
    table_form = rows(people, "people_anon")
    people.execute(STATEMENT.format(method=method)[:-1] + ", materialize = 'view')")
    assert people.execute("SELECT table_type FROM information_schema.tables WHERE table_name = 'people_anon'"
                          ).fetchone()[0] == "VIEW"
    view_form = rows(people, "people_anon")
    assert view_form == table_form and len(view_form) == 400
    _, _, problems = check_published(view_form, [0, 1, 2], sa_idx=3, k=4)
    assert problems == []
    # the table behind holds published values and counts only, one row per distinct published row
    counts = people.execute("SELECT * FROM people_anon_counts").fetchall()
    columns = [d[0] for d in people.execute("SELECT * FROM people_anon_counts LIMIT 0").description]
    assert columns == ["name", "age", "region", "disease", "published_count"]
    assert sum(r[-1] for r in counts) == 400
    assert len(counts) == len({r[:-1] for r in counts}) == len(set(view_form))
    view_sql = people.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'people_anon'").fetchone()[0]
    assert re.findall(r"\bFROM\s+\"?(\w+)", view_sql) == ["people_anon_counts"]  # never the source


def test_the_summary_and_provenance_say_it_is_a_view(people):
    people.execute("ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease, materialize = view)")
    comment = people.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'people_anon'").fetchone()[0]
    assert comment.startswith("duckanon {") and '"materialize": "view"' in comment
    assert people.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'people_anon_counts'"
                          ).fetchone()[0] == "duckanon: the published rows of view memory.main.people_anon"


def test_the_view_reads_without_duckanon_without_the_source_and_under_another_name(tmp_path):
    path = tmp_path / "release.duckdb"
    con = duckanon.connect(str(path))
    con.execute(SOURCE)
    con.execute("ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease, seed = 1)")
    expected = rows(con, "people_anon")
    con.execute("ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease, seed = 1, "
                "materialize = 'view')")
    con.execute("DROP TABLE people")
    con.close()
    plain = duckdb.connect(str(path), read_only=True)
    assert rows(plain, "people_anon") == expected
    parquet = tmp_path / "release.parquet"
    plain.execute(f"COPY people_anon TO '{parquet}' (FORMAT parquet)")
    assert plain.execute(f"SELECT * FROM '{parquet}'").fetchall() == expected
    plain.close()
    other = duckdb.connect()
    other.execute("CREATE TABLE people_anon_counts AS SELECT 1 AS decoy")  # the view must not bind to this one
    other.execute(f"ATTACH '{path}' AS archive (READ_ONLY)")
    assert rows(other, "archive.people_anon") == expected
    other.close()


@pytest.mark.skipif(duckdb_cli() is None, reason="duckdb CLI not installed (pip install duckdb-cli)")
def test_a_duckdb_1_5_cli_and_sqlalchemy_read_the_view(tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("duckdb_engine")
    release = tmp_path / "release.duckdb"
    con = duckanon.connect()
    con.execute(SOURCE)
    con.execute(f"ATTACH '{release}' AS release (STORAGE_VERSION 'v1.5.0')")
    con.execute("ANONYMIZE people INTO release.people_anon WITH (k = 4, qi = (name, age, region), "
                "sensitive = disease, seed = 2, materialize = 'view')")
    expected = rows(con, "release.people_anon")
    con.execute("DETACH release")
    con.close()
    parquet = tmp_path / "cli.parquet"
    out = subprocess.run([duckdb_cli(), "-readonly", "-csv", "-noheader", str(release), "-c",
                          f"COPY people_anon TO '{parquet}' (FORMAT parquet); "
                          "SELECT count(*) FROM people_anon"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "400"
    # the rows and their order, as the 1.5 CLI read them through the view
    assert duckdb.connect().execute(f"SELECT * FROM '{parquet}'").fetchall() == expected
    engine = sqlalchemy.create_engine(f"duckdb:///{release}", connect_args={"read_only": True})
    try:
        assert "people_anon" in sqlalchemy.inspect(engine).get_view_names()
        with engine.connect() as reader:
            sizes = reader.execute(sqlalchemy.text(
                "SELECT min(n) FROM (SELECT count(*) AS n FROM people_anon GROUP BY name, age, region)")).scalar()
        assert sizes >= 4
    finally:
        engine.dispose()


def test_republishing_switches_between_view_and_table(people):
    view = "ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease, materialize = view)"
    table = "ANONYMIZE people WITH (k = 4, qi = (name, age, region), sensitive = disease)"
    people.execute(table)
    people.execute(view)
    people.execute(view)  # the table of counts is replaced, not refused: duckanon made it for this view
    assert people.execute("SELECT count(*) FROM people_anon").fetchone()[0] == 400
    people.execute(table)  # the view and its table of counts give way to a table
    tables = {name for (name,) in people.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "people_anon" in tables and "people_anon_counts" not in tables
    assert people.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] == 0


def test_refusals_leave_the_database_unchanged(people):
    people.execute("CREATE TABLE mine_counts AS SELECT 42 AS precious")
    assert_refused_and_unchanged(
        people, "ANONYMIZE people INTO mine WITH (k = 4, qi = (name, age), materialize = 'view')",
        r"^materialize = 'view' keeps the view's rows in a table memory\.main\.mine_counts, which already exists "
        r"and was not made by duckanon: drop it or choose another name with INTO$")
    assert_refused_and_unchanged(
        people, "ANONYMIZE people WITH (k = 4, qi = (name, age), keep = (id), materialize = 'view')",
        r"materialize = 'view' generates the rows from the count of each published row, which holds no kept "
        r"column: drop keep, or publish a table$")
    assert_refused_and_unchanged(
        people, "ANONYMIZE people WITH (k = 4, qi = (name, age), materialize = 'view', engine = 'spark')",
        r"materialize = 'view' needs engine = 'duckdb'$")
    assert_refused_and_unchanged(
        people, "ANONYMIZE people WITH (k = 4, qi = (name, age), materialize = 'parquet')",
        r"^unknown materialize form 'parquet' \(known: table, view\) \(at line 1, column \d+\)$")
