"""What the engine refuses, said in one clear line (issue 35, item 14): a mask rule's arguments
bound in the front end, a target whose database does not exist or is read-only refused before any
work, a write-write conflict named as such (under REFRESH as REFRESH), a report file that is not
HTML, and DuckDB's errors about data without the value they quote. Each message is matched whole
and the database is compared before and after: the same tables and rows everywhere, no target,
no registry table."""

import threading

import duckdb
import pytest

import duckanon
from duckanon.backends import DuckDBBackend
from duckanon.backends.base import BackendError, ReadOnlyDatabase, WriteConflict
from duckanon.backends.duckdb import _translated

from support.data import HOSPITAL
from support.refusals import database_state as state, refused_unchanged as refused






@pytest.fixture
def db(hospital_and_people):
    return hospital_and_people


# -- a mask rule's arguments: integers in a range the engine takes, checked before the engine sees them

@pytest.mark.parametrize("rule", ["partial(99999999999999999999, 1)", "partial(1, 1000001)", "partial(-1, 2)",
                                  "partial(1.5, 2)", "partial(2)", "partial"])
def test_partial_counts_out_of_range_are_refused_up_front(db, rule):
    column = 1 + len("ANONYMIZE people WITH (k = 2, qi = (age, sex), ")  # the option mask
    refused(db, f"ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = '{rule}'))",
            "mask rule partial on column name needs two whole numbers from 0 to 1,000,000: partial(left, right), "
            f"the characters kept at each end (at line 1, column {column})")


def test_partial_at_the_limit_publishes(db):
    db.execute("ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = 'partial(1000000, 0)'), seed = 1)")
    assert db.execute("SELECT count(name) FROM people_anon").fetchone()[0] == 12


# -- the target's database and schema: refused before any work

TARGETS = [
    ("nosuchdb.x", "the target nosuchdb.x cannot be written: no database nosuchdb is attached and memory has no "
                   "schema nosuchdb; ATTACH it (or CREATE SCHEMA nosuchdb), or choose another target with INTO"),
    ("nosuchdb.s.x", "the target nosuchdb.s.x cannot be written: no database nosuchdb is attached; ATTACH it, or "
                     "choose another target with INTO"),
    ("memory.nosuch.x", "the target memory.nosuch.x cannot be written: database memory has no schema nosuch; "
                        "CREATE SCHEMA memory.nosuch first, or choose another target with INTO"),
    ("system.main.x", "the target system.main.x cannot be written: system is DuckDB's built-in catalog; choose "
                      "another target with INTO"),
    ("temp.main.x", "the target temp.main.x cannot be written: ANONYMIZE publishes a persistent table, and temp "
                    "holds temporary ones only; choose another target with INTO"),
]


@pytest.mark.parametrize("target,message", TARGETS)
def test_a_target_that_cannot_be_created_is_refused_before_any_work(db, monkeypatch, target, message):
    def no_solver(*args, **kwargs):
        raise AssertionError("the solver ran")

    monkeypatch.setattr(duckanon.pipeline.problem, "solve", no_solver)
    refused(db, f"ANONYMIZE hospital INTO {target} WITH (k = 2, sensitive = disease)", message)


def test_a_read_only_attached_database_is_refused_before_any_work(db, tmp_path, monkeypatch):
    duckdb.connect(str(tmp_path / "ro.duckdb")).close()
    db.execute(f"ATTACH '{tmp_path / 'ro.duckdb'}' AS ro (READ_ONLY)")
    monkeypatch.setattr(duckanon.pipeline.problem, "solve", lambda *a, **k: pytest.fail("the solver ran"))
    message = ("the target ro.main.x cannot be written: database ro is read-only (attached READ_ONLY, or opened with "
               "read_only=True); publish into a writable database with INTO")
    refused(db, "ANONYMIZE hospital INTO ro.x WITH (k = 2, sensitive = disease)", message)
    refused(db, "ANONYMIZE hospital INTO ro.main.x WITH (k = 2, materialize = 'view')", message)
    refused(db, "EXPLAIN ANONYMIZE hospital INTO ro.x WITH (k = 2)", message)  # what ANONYMIZE would do: refuse
    monkeypatch.undo()
    db.execute("ANONYMIZE hospital INTO memory.main.x WITH (k = 2, sensitive = disease)")  # a writable one works
    assert db.execute("SELECT count(*) FROM memory.main.x").fetchone()[0] == 10


@pytest.fixture
def read_only_file(tmp_path):
    """A database file with a published release, opened again read-only."""
    path = tmp_path / "file.duckdb"
    with duckanon.connect(str(path)) as con:
        con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
        con.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease, seed = 1)")
    con = duckanon.connect(str(path), read_only=True)
    yield con
    con.close()


def test_a_connection_opened_read_only_is_refused_before_any_work(read_only_file):
    assert any(name == "duckanon_publications" for _, _, name in state(read_only_file)[0])
    message = ("the target file.main.{} cannot be written: database file is read-only (attached READ_ONLY, or "
               "opened with read_only=True); publish into a writable database with INTO")
    refused(read_only_file, "ANONYMIZE hospital WITH (k = 3, sensitive = disease)", message.format("hospital_anon"))
    refused(read_only_file, "ANONYMIZE hospital INTO other WITH (k = 3)", message.format("other"))
    # REFRESH checks the registered target's database before it binds the statement again
    refused(read_only_file, "REFRESH hospital_anon", "REFRESH hospital_anon: its target's database file is read-only; "
                                                     "nothing was changed")


# -- write-write conflicts: deterministic, another cursor holds an uncommitted write of the object

def _conflict(db, hold: str, statement: str) -> str:
    """Run `statement` while another cursor's open transaction has run `hold`; its message."""
    other = db.duckdb.cursor()
    other.execute("BEGIN")
    other.execute(hold)
    try:
        with pytest.raises(duckanon.AnonymizeError) as caught:
            db.execute(statement)
    finally:
        other.execute("ROLLBACK")
        other.close()
    return str(caught.value)


def test_a_write_write_conflict_on_the_target_says_so(db):
    before = state(db)
    message = _conflict(db, "CREATE TABLE hospital_anon AS SELECT 1 AS x",
                        "ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    assert message == ("another statement changed the target memory.main.hospital_anon at the same time: nothing "
                       "was written; run ANONYMIZE again")
    assert state(db) == before
    db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")  # run again: it publishes
    assert db.execute("SELECT count(*) FROM hospital_anon").fetchone()[0] == 10


def test_a_conflict_inside_the_callers_transaction_says_to_roll_back(db):
    db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease, seed = 1)")
    before = state(db)
    cursor = db.cursor()
    cursor.execute("BEGIN")
    other = db.duckdb.cursor()
    other.execute("BEGIN")
    other.execute("COMMENT ON TABLE hospital_anon IS 'theirs'")
    try:
        with pytest.raises(duckanon.AnonymizeError) as caught:
            cursor.execute("ANONYMIZE hospital WITH (k = 3, sensitive = disease)")
    finally:
        other.execute("ROLLBACK")
        cursor.execute("ROLLBACK")
    assert str(caught.value) == ("another statement changed the target memory.main.hospital_anon at the same time: "
                                 "nothing was written; roll back the open transaction, then run ANONYMIZE again")
    assert state(db) == before


def test_a_conflict_under_refresh_is_called_refresh(db):
    db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease, seed = 1)")
    db.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    before = state(db)
    message = _conflict(db, "COMMENT ON TABLE hospital_anon IS 'theirs'", "REFRESH hospital_anon")
    assert message == ("another statement changed the target memory.main.hospital_anon at the same time: nothing "
                       "was written; run REFRESH again")
    assert state(db) == before


def test_a_conflict_on_rows_it_writes_names_the_release(db):
    """Another transaction deleted the registry's rows: DuckDB names no object, the message names the release."""
    db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease, seed = 1)")
    before = state(db)
    message = _conflict(db, "DELETE FROM duckanon_publications", "ANONYMIZE hospital WITH (k = 3, sensitive = disease)")
    assert message == ("another statement changed rows that this ANONYMIZE of memory.main.hospital_anon writes at "
                       "the same time: nothing was written; run ANONYMIZE again")
    assert state(db) == before


def test_other_engine_failures_under_refresh_are_called_refresh(db, monkeypatch):
    db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease, seed = 1)")
    db.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    before = state(db)

    def fails(self, table, select, kind="TABLE"):
        raise BackendError("disk full (simulated)")

    monkeypatch.setattr(DuckDBBackend, "create_target", fails)
    with pytest.raises(duckanon.AnonymizeError) as caught:
        db.execute("REFRESH hospital_anon")
    assert str(caught.value) == "REFRESH failed: disk full (simulated)"
    assert state(db) == before


def test_threads_publishing_one_target_get_the_release_or_the_conflict_message():
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT i % 13 AS a, i % 7 AS b FROM range(300) r(i)")
    messages, done = [], []

    def work():
        try:
            con.execute("ANONYMIZE t WITH (k = 3, qi = (a, b), seed = 1)")
            done.append(1)
        except duckanon.AnonymizeError as error:
            messages.append(str(error))

    threads = [threading.Thread(target=work) for _ in range(4)]
    [thread.start() for thread in threads]
    [thread.join() for thread in threads]
    assert done and len(done) + len(messages) == 4
    assert set(messages) <= {"another statement changed the target memory.main.t_anon at the same time: nothing "
                             "was written; run ANONYMIZE again"}
    con.close()


# -- the report's file: HTML, said before any work

REPORTS = [
    ("ANONYMIZE hospital WITH (k = 2, report = '{dir}/r.pdf')",
     "option report must name an .html or .htm file (the report is an HTML page), got '{dir}/r.pdf': write "
     "report = '{dir}/r.html'"),
    ("ANONYMIZE hospital WITH (k = 2, report = '{dir}/report')",
     "option report must name an .html or .htm file (the report is an HTML page), got '{dir}/report': write "
     "report = '{dir}/report.html'"),
    ("REPORT hospital_anon FROM hospital WITH (file = '{dir}/r.PDF')",
     "option file must name an .html or .htm file (the report is an HTML page), got '{dir}/r.PDF': write "
     "file = '{dir}/r.html'"),
]


@pytest.mark.parametrize("statement,message", REPORTS)
def test_a_report_file_that_is_not_html_is_refused_before_any_work(db, tmp_path, statement, message):
    if statement.startswith("REPORT"):
        db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    refused(db, statement.format(dir=tmp_path), message.format(dir=tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_htm_and_upper_case_html_are_written(db, tmp_path):
    pytest.importorskip("matplotlib")
    for name in ("r.htm", "R.HTML"):
        db.execute(f"ANONYMIZE hospital WITH (k = 2, sensitive = disease, report = '{tmp_path / name}')")
        assert (tmp_path / name).read_text().startswith("<!DOCTYPE html>")


# -- DuckDB's errors about data: the kind, never the value

def _duckdb_error(sql: str) -> duckdb.Error:
    with pytest.raises(duckdb.Error) as caught:
        duckdb.connect().execute(sql)
    return caught.value


@pytest.mark.parametrize("sql,message", [
    ("SELECT 'secret-xyz'::INTEGER", "Conversion Error: a value could not be converted to INT32 (the value is not shown)"),
    ("SELECT 'secret-xyz'::DECIMAL(5,2)",
     "Conversion Error: a value could not be converted to DECIMAL(5,2) (the value is not shown)"),
    ("SELECT 'secret-xyz'::DATE", "Conversion Error: a value could not be converted (the value is not shown)"),
    ("SELECT 'secret-xyz'::INTEGER[]",
     "Conversion Error: a value could not be converted to INTEGER[] (the value is not shown)"),
    ("SELECT 123456::DECIMAL(3,1)",
     "Conversion Error: a value could not be converted to DECIMAL(3,1) (the value is not shown)"),
    ("SELECT 2147483647::INTEGER + 1", "Out of Range Error: a value is out of range (the value is not shown)"),
    ("SELECT strptime('secret-xyz', '%Y')", "Invalid Input Error: a value could not be parsed (the value is not shown)"),
    ("CREATE TABLE pk (i VARCHAR PRIMARY KEY); INSERT INTO pk VALUES ('secret-xyz'), ('secret-xyz')",
     "Constraint Error: a constraint was violated (the key is not shown)"),
])
def test_errors_about_data_lose_their_values(sql, message):
    translated = _translated(_duckdb_error(sql))
    assert str(translated) == message and "secret" not in str(translated) and "123456" not in str(translated)


def test_errors_about_names_keep_their_text():
    assert str(_translated(_duckdb_error("SELECT * FROM nosuch_table"))).startswith(
        "Catalog Error: Table with name nosuch_table does not exist!")


def test_a_write_conflict_and_a_read_only_write_are_told_apart(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    first, second = con.cursor(), con.cursor()
    first.execute("BEGIN")
    second.execute("BEGIN")
    first.execute("CREATE OR REPLACE TABLE u AS SELECT 1 AS x")
    with pytest.raises(duckdb.Error) as caught:
        second.execute("CREATE OR REPLACE TABLE u AS SELECT 2 AS x")
    conflict = _translated(caught.value)
    assert isinstance(conflict, WriteConflict) and conflict.object_name == "u"
    assert str(conflict) == "another statement changed u at the same time"
    duckdb.connect(str(tmp_path / "ro.duckdb")).close()
    con.execute(f"ATTACH '{tmp_path / 'ro.duckdb'}' AS ro (READ_ONLY)")
    with pytest.raises(duckdb.Error) as caught:
        con.execute("CREATE TABLE ro.main.y AS SELECT 1 AS x")
    read_only = _translated(caught.value)
    assert isinstance(read_only, ReadOnlyDatabase) and str(read_only) == "database ro is read-only"


def test_a_population_of_other_types_does_not_show_its_values(db):
    """The population's QI columns cast to the sample's types: DuckDB's Conversion Error quotes the
    value that fails; the message names the population table, the column and the types, never the
    value (pipeline/population.py checks the conversion before the read)."""
    db.execute("CREATE TABLE pop AS SELECT 'secretzip' || zipcode AS zipcode, age, education, disease FROM hospital "
               "UNION ALL SELECT zipcode::VARCHAR, age, education, disease FROM hospital")
    refused(db, "ANONYMIZE hospital WITH (k_map = 1, population = pop, qi = (zipcode, age))",
            "cannot read population table pop with the sample's column types: its column zipcode (VARCHAR) does not "
            "convert to the sample's BIGINT in 10 rows")


def test_a_view_in_the_way_of_the_target_is_named(db):
    db.execute("CREATE VIEW v_target AS SELECT 1 AS x")
    refused(db, "ANONYMIZE hospital INTO v_target WITH (k = 2, sensitive = disease)",
            "ANONYMIZE failed: the target v_target is a view, which a table cannot replace: drop the view, or choose "
            "another target with INTO")


def test_an_interrupt_from_another_thread_is_named(db, monkeypatch):
    from sqlglot import exp

    before = state(db)
    original = DuckDBBackend.create_target
    writing, stop = threading.Event(), threading.Event()
    running = db.duckdb  # this thread's DuckDB connection, which runs the statement (db.duckdb is per thread)
    lock = threading.Lock()  # no interrupt once the CREATE is over (the rollback must run)

    def keep_interrupting():  # an interrupt before the query starts is lost: repeat until it returns
        writing.wait()
        while not stop.wait(0.02):
            with lock:
                if not stop.is_set():
                    running.interrupt()

    def interrupted(backend, table, select, kind="TABLE"):
        writing.set()  # the target's CREATE, made to run long enough to be interrupted
        slow = exp.select("*").from_(exp.Table(this=exp.Anonymous(this="range", expressions=[
            exp.Literal.number(10**12)])))
        try:
            return original(backend, table, slow, kind)
        finally:
            with lock:
                stop.set()

    monkeypatch.setattr(DuckDBBackend, "create_target", interrupted)
    interrupter = threading.Thread(target=keep_interrupting)
    interrupter.start()
    try:
        with pytest.raises(duckanon.AnonymizeError) as caught:
            db.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    finally:
        stop.set()
        writing.set()
        interrupter.join()
    assert str(caught.value) == "ANONYMIZE interrupted (the connection's interrupt() was called); nothing was written"
    monkeypatch.undo()
    assert state(db) == before
