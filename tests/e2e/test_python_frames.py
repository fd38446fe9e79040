"""Issue 35 item 16: duckanon sees the caller's pandas / polars DataFrames and Arrow tables by
variable name, as DuckDB's own execute and sql do (its replacement scans): in plain SQL through
Connection.execute / sql and duckanon.execute, and as the source of ANONYMIZE, EXPLAIN and REPORT.
The caller's locals, then its globals, then (python_scan_all_frames) the frames above; a table or
view of the name wins; each thread sees its own frame; the frame is unregistered after the statement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import duckanon

from support.checks import check_published
from support.data import HOSPITAL
from support.refusals import assert_refused_and_unchanged, snapshot
from support.risk_checks import check_population, flat_ancestors

pytest.importorskip("pandas")
import pandas as pd  # noqa: E402

pytestmark = pytest.mark.e2e

HOSPITAL_FRAME = pd.read_csv(HOSPITAL)
QI = "qi = (zipcode, age, education), sensitive = disease"
# a module global, seen as DuckDB sees globals of the calling frame
global_frame = pd.DataFrame({"a": [1, 2, 3]})


def summary(cursor) -> dict:
    return dict(zip([d[0] for d in cursor.description], cursor.fetchall()[0]))


def views(con) -> list:
    return con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()


def test_plain_sql_sees_a_frame_in_the_callers_locals():
    con = duckanon.connect()
    local_frame = pd.DataFrame({"a": [1, 2]})
    assert con.execute("SELECT count(*) FROM local_frame").fetchall() == [(2,)]
    assert con.sql("SELECT sum(a) FROM local_frame").fetchall() == [(3,)]
    assert con.query("SELECT max(a) FROM local_frame").fetchall() == [(2,)]
    plain = duckdb.connect()  # duckanon.execute on a connection of the caller's
    assert duckanon.execute(plain, "SELECT count(*) FROM local_frame").fetchall() == [(2,)]
    hospital_frame = HOSPITAL_FRAME.copy()  # noqa: F841 (and our statements on it)
    duckanon.execute(plain, f"ANONYMIZE hospital_frame WITH (k = 3, {QI}, seed = 1)")
    assert plain.execute("SELECT count(*) FROM hospital_frame_anon").fetchall() == [(10,)]
    assert views(plain) == []
    assert views(con) == []  # nothing was registered for plain SQL: DuckDB read the variable itself


def test_plain_sql_sees_a_frame_in_the_callers_globals_and_a_script_sees_it_too():
    con = duckanon.connect()
    assert con.execute("SELECT count(*) FROM global_frame").fetchall() == [(3,)]
    con.execute("CREATE TABLE copied AS SELECT * FROM global_frame; "
                "ANONYMIZE copied INTO copied_anon WITH (k = 3, qi = (a)); SELECT count(*) FROM global_frame")
    assert con.fetchall() == [(3,)]


def _reads_in_a_function(con):
    inner_frame = pd.DataFrame({"a": [7, 8, 9, 10]})
    return con.execute("SELECT count(*) FROM inner_frame").fetchall()


def _calls_without_a_frame(con):
    return con.execute("SELECT count(*) FROM outer_frame").fetchall()


def test_a_function_sees_its_own_frame_and_not_its_callers_unless_asked():
    con = duckanon.connect()
    assert _reads_in_a_function(con) == [(4,)]
    outer_frame = pd.DataFrame({"a": [1]})  # noqa: F841 (read by name)
    with pytest.raises(duckdb.CatalogException):  # as in DuckDB: only the calling frame
        _calls_without_a_frame(con)
    con.execute("SET python_scan_all_frames = true")
    assert _calls_without_a_frame(con) == [(1,)]
    plain = duckdb.connect()  # DuckDB itself does the same
    with pytest.raises(duckdb.CatalogException):
        _calls_without_a_frame(plain)
    plain.execute("SET python_scan_all_frames = true")
    assert _calls_without_a_frame(plain) == [(1,)]


def test_a_table_of_the_same_name_wins():
    con = duckanon.connect()
    shadowed = pd.DataFrame({"zipcode": [1], "age": [1], "education": ["x"], "disease": ["y"]})  # noqa: F841
    con.execute(f"CREATE TABLE shadowed AS SELECT * FROM read_csv('{HOSPITAL}')")
    assert con.execute("SELECT count(*) FROM shadowed").fetchall() == [(10,)]
    row = summary(con.execute(f"ANONYMIZE shadowed WITH (k = 3, {QI}, seed = 1)"))
    assert row["rows"] == 10 and row["target"] == "memory.main.shadowed_anon"
    con.register("registered", HOSPITAL_FRAME.head(4))  # an object the caller registered wins too
    registered = pd.DataFrame({"a": [1]})  # noqa: F841
    assert con.execute("SELECT count(*) FROM registered").fetchall() == [(4,)]
    assert summary(con.execute(f"ANONYMIZE registered WITH (k = 2, {QI}, seed = 1)"))["rows"] == 4
    assert con.execute("SELECT count(*) FROM registered").fetchall() == [(4,)]  # still the caller's registration


def test_anonymize_a_dataframe_publishes_a_checked_release_in_the_default_database():
    con = duckanon.connect()
    df = HOSPITAL_FRAME.copy()
    row = summary(con.execute(f"ANONYMIZE df INTO df_anon WITH (k = 3, l = 2, {QI}, seed = 5)"))
    assert row["rows"] == 10 and row["target"] == "memory.main.df_anon"
    rows = con.execute("SELECT zipcode, age, education, disease FROM df_anon").fetchall()
    stars, suppressed, problems = check_published(rows, [0, 1, 2], 3, k=3, l=2)
    assert problems == [] and stars == row["stars"] and suppressed == row["suppressed_rows"]
    assert sorted(r[3] for r in rows) == sorted(df["disease"])
    # the frame was registered for the statement only, and the registry could not record it
    assert views(con) == []
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0
    assert json.loads(row["details"])["registry"].startswith("not recorded")
    assert con.execute("SELECT count(*) FROM duckanon_publications()").fetchone()[0] == 0
    # the same statement on the same data through a table publishes the same release
    con.execute("CREATE TABLE hospital AS SELECT * FROM df")
    con.execute(f"ANONYMIZE hospital INTO table_anon WITH (k = 3, l = 2, {QI}, seed = 5)")
    assert con.execute("SELECT * FROM df_anon").fetchall() == con.execute("SELECT * FROM table_anon").fetchall()


def test_explain_and_report_of_a_frame(tmp_path):
    pytest.importorskip("matplotlib")
    con = duckanon.connect()
    df = HOSPITAL_FRAME.copy()  # noqa: F841
    explained = dict(con.execute(f"EXPLAIN ANONYMIZE df WITH (k = 3, {QI})").fetchall())
    assert explained["rows"] == "10"
    # the frame is read as the temporary view it is registered as; the target goes to the default database
    assert explained["source"] == '"temp"."main"."df"'
    assert explained["target (not written)"] == '"memory"."main"."df_anon"'
    assert views(con) == []
    con.execute(f"ANONYMIZE df INTO df_anon WITH (k = 3, {QI}, seed = 2)")
    report = tmp_path / "frame.html"
    row = summary(con.execute(f"REPORT df_anon FROM df WITH (file = '{report}')"))
    assert report.exists() and report.stat().st_size > 10_000 and str(report) in json.dumps(row, default=str)
    assert views(con) == []


def test_arrow_tables_and_a_record_batch_reader_are_anonymized():
    con = duckanon.connect()
    arrow_table = pa.Table.from_pandas(HOSPITAL_FRAME)
    reader = arrow_table.to_reader(max_chunksize=3)  # a stream: read once, into a table, for the statement
    assert summary(con.execute(f"ANONYMIZE arrow_table INTO t_anon WITH (k = 3, {QI}, seed = 3)"))["rows"] == 10
    assert summary(con.execute(f"ANONYMIZE reader INTO r_anon WITH (k = 3, {QI}, seed = 3)"))["rows"] == 10
    assert con.execute("SELECT * FROM t_anon").fetchall() == con.execute("SELECT * FROM r_anon").fetchall()
    rows = con.execute("SELECT zipcode, age, education, disease FROM r_anon").fetchall()
    assert check_published(rows, [0, 1, 2], 3, k=3)[2] == []
    assert con.execute("SELECT count(*) FROM arrow_table").fetchall() == [(10,)]


def test_polars_frames_are_anonymized():
    pl = pytest.importorskip("polars")
    con = duckanon.connect()
    eager = pl.from_pandas(HOSPITAL_FRAME)
    lazy = eager.lazy()
    assert con.sql("SELECT count(*) FROM eager").fetchall() == [(10,)]
    assert summary(con.execute(f"ANONYMIZE eager INTO e_anon WITH (k = 3, {QI}, seed = 4)"))["rows"] == 10
    assert summary(con.execute(f"ANONYMIZE lazy INTO l_anon WITH (k = 3, {QI}, seed = 4)"))["rows"] == 10
    assert con.execute("SELECT * FROM e_anon").fetchall() == con.execute("SELECT * FROM l_anon").fetchall()
    assert check_published(con.execute("SELECT zipcode, age, education, disease FROM e_anon").fetchall(),
                           [0, 1, 2], 3, k=3)[2] == []


def test_connection_anonymize_and_an_open_transaction_see_the_frame():
    con = duckanon.connect()
    df = HOSPITAL_FRAME.copy()  # noqa: F841
    assert con.anonymize(f"ANONYMIZE df INTO df_anon WITH (k = 3, {QI}, seed = 6)").rows == 10
    con.execute("BEGIN")
    con.execute(f"ANONYMIZE df INTO df_again WITH (k = 3, {QI}, seed = 6)")
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'df_again'").fetchone()[0] == 0
    con.execute("BEGIN")
    con.execute(f"ANONYMIZE df INTO df_again WITH (k = 3, {QI}, seed = 6)")
    con.execute("COMMIT")
    assert con.execute("SELECT * FROM df_again").fetchall() == con.execute("SELECT * FROM df_anon").fetchall()
    assert views(con) == []


def test_replacements_off_means_no_frame_is_seen():
    con = duckanon.connect()
    df = HOSPITAL_FRAME.copy()  # noqa: F841
    con.execute("SET python_enable_replacements = false")
    with pytest.raises(duckdb.CatalogException):
        con.execute("SELECT count(*) FROM df")
    assert_refused_and_unchanged(con, f"ANONYMIZE df WITH (k = 3, {QI})", r'^unknown table "df"$')


def test_each_thread_sees_its_own_frame():
    con = duckanon.connect()
    results, errors = {}, []
    barrier = threading.Barrier(3)

    def work(i: int) -> None:
        try:
            mine = HOSPITAL_FRAME.head(4 + 3 * i)  # 4, 7, 10 rows
            barrier.wait(timeout=60)
            count = con.execute("SELECT count(*) FROM mine").fetchall()[0][0]
            row = summary(con.execute(f"ANONYMIZE mine INTO mine_{i} WITH (k = 2, {QI}, seed = {i})"))
            published = con.execute(f"SELECT zipcode, age, education, disease FROM mine_{i}").fetchall()
            results[i] = (count, row["rows"], check_published(published, [0, 1, 2], 3, k=2)[2], len(mine))
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert results == {i: (4 + 3 * i, 4 + 3 * i, [], 4 + 3 * i) for i in range(3)}


def test_a_variable_that_is_no_frame_is_not_read():
    con = duckanon.connect()
    hospital = {"zipcode": [1]}  # noqa: F841 (a dict: DuckDB reads no table from it)
    assert_refused_and_unchanged(con, f"ANONYMIZE hospital WITH (k = 3, {QI})", r'^unknown table "hospital"$')


def test_without_pandas_and_polars_arrow_tables_are_still_seen(tmp_path):
    """pandas and polars are optional: with neither importable, duckanon works and reads Arrow."""
    script = tmp_path / "no_pandas.py"
    script.write_text(
        "import importlib.abc, sys\n"
        "class NotInstalled(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('pandas', 'polars'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "import pyarrow as pa, duckanon\n"
        "con = duckanon.connect()\n"
        "arrow_table = pa.table({'a': [1, 2, 2], 'b': ['x', 'y', 'y']})\n"
        "print(con.execute('SELECT count(*) FROM arrow_table').fetchall()[0][0])\n"
        "print(con.execute('ANONYMIZE arrow_table INTO t_anon WITH (k = 1, qi = (a, b))').fetchall()[0][0])\n"
        "print('pandas' in sys.modules, 'polars' in sys.modules)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(Path(duckanon.__file__).parents[1])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "3", "False", "False"]


def test_a_population_frame_is_read_by_name():
    """k_map against a population that is a DataFrame of the caller's (the sample a table)."""
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    population = pd.concat([HOSPITAL_FRAME, HOSPITAL_FRAME.head(6)], ignore_index=True)
    row = summary(con.execute("ANONYMIZE hospital WITH (k_map = 3, population = population, "
                              "qi = (zipcode, age, education), sensitive = disease, seed = 8)"))
    assert row["rows"] == 10
    published = con.execute("SELECT zipcode, age, education FROM hospital_anon").fetchall()
    rows = [tuple(r) for r in population[["zipcode", "age", "education"]].itertuples(index=False)]
    ancestors = [flat_ancestors(population[c]) for c in ("zipcode", "age", "education")]
    level, _, problems = check_population(published, [0, 1, 2], rows, ancestors, k_map=3)
    assert problems == [] and level >= 3
    assert views(con) == []


@pytest.mark.parametrize("statement, role", [
    ("ANONYMIZE hospital INTO population WITH (k_map = 3, population = population, {qi})", "population"),
    ("ANONYMIZE hospital INTO POPULATION WITH (k_map = 3, population = population, {qi}, method = lattice)",
     "population"),
    ("ANONYMIZE hospital INTO main.population WITH (delta_presence = (0, 0.9), population = population, {qi})",
     "population"),
    ("ANONYMIZE population INTO memory.main.Population WITH (k = 3, {qi})", "source"),
])
def test_a_target_named_like_a_frame_the_statement_reads_is_refused(statement, role):
    """The release would be a table under the DataFrame's name, which DuckDB's binder finds before
    the replacement scan: every later statement naming the frame would read the release."""
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    population = pd.concat([HOSPITAL_FRAME, HOSPITAL_FRAME.head(6)], ignore_index=True)  # noqa: F841 (read by name)
    target = statement.split(" INTO ")[1].split(" WITH")[0]
    before = snapshot(con)
    with pytest.raises(duckanon.AnonymizeError) as refused:  # here: the frame read is the one calling duckanon
        con.execute(statement.format(qi=QI))
    assert str(refused.value) == (f"the target {target} would take the name of the Python object population this "
                                  f"statement reads as its {role}: choose another name with INTO")
    assert snapshot(con) == before and views(con) == []


def test_a_target_in_another_database_may_carry_a_frames_name():
    """Off the search path, the lone name never finds the release: nothing to refuse."""
    con = duckanon.connect()
    con.execute("ATTACH ':memory:' AS other")
    population = pd.concat([HOSPITAL_FRAME, HOSPITAL_FRAME.head(6)], ignore_index=True)  # noqa: F841 (read by name)
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    row = summary(con.execute(f"ANONYMIZE hospital INTO other.main.population WITH (k_map = 3, "
                              f"population = population, {QI}, seed = 8)"))
    assert row["rows"] == 10
    assert con.execute("SELECT count(*) FROM other.population").fetchone() == (10,)
