"""Python API edges: parameters in ANONYMIZE, executemany, the anonymize() SQL function (EXPLAIN,
nested details, transactions) and threads sharing one duckanon.Connection."""

import json
import threading

import duckdb
import pytest

import duckanon
from duckanon.connection import IN_TRANSACTION, bind_parameters

TXN = ("anonymize() cannot run inside an open transaction: run ANONYMIZE through duckanon's "
       "connection.execute, or COMMIT first")


def summary(con) -> dict:
    names = [d[0] for d in con.description]
    return dict(zip(names, con.fetchall()[0]))


def published(con, table):
    return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def tables(con) -> set:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


# --- 1. parameters -------------------------------------------------------------------------------

def test_execute_binds_option_parameters(con):
    literal = "ANONYMIZE hospital INTO lit WITH (k = 3, qi = (zipcode, age), sensitive = disease, seed = 7)"
    bound = "ANONYMIZE hospital INTO par WITH (k = ?, qi = ?, sensitive = ?, seed = ?)"
    expected = summary(con.execute(literal))
    got = summary(con.execute(bound, [3, ["zipcode", "age"], "disease", 7]))
    assert got["rows"] == expected["rows"] == 10
    assert got["min_class_size"] >= 3 and got["stars"] == expected["stars"]
    assert published(con, "par") == published(con, "lit")
    assert con.execute("SELECT k FROM anon_k('par', ['zipcode', 'age'])").fetchall() == [(got["min_class_size"],)]


def test_numbered_and_named_parameters(con):
    con.execute("ANONYMIZE hospital INTO a WITH (k = $1, qi = (zipcode, age), sensitive = $2)", [2, "disease"])
    assert summary(con)["min_class_size"] >= 2
    con.execute("ANONYMIZE hospital INTO b WITH (k = ?2, qi = ?1)", (["zipcode", "age"], 4))
    assert summary(con)["min_class_size"] >= 4
    con.execute("ANONYMIZE hospital INTO c WITH (k = $k, qi = (zipcode, age), t = $t, sensitive = disease)",
                {"k": 2, "t": 0.9})
    assert summary(con)["rows"] == 10
    assert {"a", "b", "c"} <= tables(con)


def test_a_sweep_and_patterns_as_list_parameters(con):
    rows = con.execute("EXPLAIN ANONYMIZE hospital WITH (k = ?, qi = (zipcode, age))", [[2, 3, 5]]).fetchall()
    assert [row[0] for row in rows] == [2, 3, 5]
    text = bind_parameters("ANONYMIZE t WITH (k = 2, patterns = ?)", [[["a", "b"], ["c"]]])
    assert text == "ANONYMIZE t WITH (k = 2, patterns = [['a', 'b'], ['c']])"


@pytest.mark.parametrize("value, literal", [
    (3, "3"), (-5, "-5"), (0.25, "0.25"), (True, "TRUE"), (None, "NULL"), ("disease", "'disease'"),
    ("it's", "'it''s'"), ("x'); DROP TABLE hospital; --", "'x''); DROP TABLE hospital; --'"),
    (["zip code", 2], "['zip code', 2]"),
])
def test_values_become_literals(value, literal):
    assert bind_parameters("ANONYMIZE t WITH (k = ?)", [value]) == f"ANONYMIZE t WITH (k = {literal})"


def test_a_value_never_runs_as_sql(con):
    before = published(con, "hospital")
    evil = "disease'); DROP TABLE hospital; --"
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute("ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), sensitive = ?)", [evil])
    assert str(caught.value).startswith(f"unknown column '{evil}' in sensitive")
    # `-?` with -5 would be `--5`, a comment, if the literal were pasted without a space
    with pytest.raises(duckanon.AnonymizeError, match="option k must be a number"):
        con.execute("ANONYMIZE hospital WITH (k = -?, qi = (zipcode, age))", [-5])
    assert published(con, "hospital") == before and tables(con) == {"hospital"}


@pytest.mark.parametrize("text, values, message", [
    ("ANONYMIZE hospital WITH (k = ?)", None,
     "ANONYMIZE has a parameter (k = ?) but no values were given: pass them as execute(text, [values])"),
    ("ANONYMIZE ? WITH (k = 2)", ["hospital"],
     "ANONYMIZE takes parameters only as option values: write the table name itself, not ?"),
    ("ANONYMIZE hospital INTO $t WITH (k = 2)", {"t": "x"},
     "ANONYMIZE takes parameters only as option values: write the table name itself, not $t"),
    ("ANONYMIZE hospital WITH (k = ?)", [2, 3], "ANONYMIZE has 1 parameter(s) but 2 value(s) were given"),
    ("ANONYMIZE hospital WITH (k = 2)", [2], "ANONYMIZE has 0 parameter(s) but 1 value(s) were given"),
    ("ANONYMIZE hospital WITH (k = ?)", {"k": 2}, "ANONYMIZE has positional parameters (?): pass the values as a list"),
    ("ANONYMIZE hospital WITH (k = $k)", [2], "ANONYMIZE has named parameters ($k): pass the values as a dict"),
    ("ANONYMIZE hospital WITH (k = $k)", {"kk": 2}, "ANONYMIZE parameters and values do not match: no value for $k"),
    ("ANONYMIZE hospital WITH (k = $k, l = ?)", {"k": 2},
     "ANONYMIZE mixes named ($name) and positional (?, $1) parameters"),
    ("ANONYMIZE hospital WITH (k = ?)", [{"a": 1}],
     "parameter ? has type dict: an option value must be a number, a string, a boolean, None, or a list of them"),
    ("ANONYMIZE hospital WITH (k = 2, time_limit = ?)", [float("inf")],
     "parameter ? is inf: an option value must be a finite number"),
    ("ANONYMIZE hospital WITH (k = ?); SELECT ?", [2, 3],
     "parameters bind to the last statement of a script only (as in DuckDB): run the ANONYMIZE that has "
     "parameters in an execute() of its own"),
])
def test_parameter_mistakes_are_one_line_errors_and_run_nothing(con, text, values, message):
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(text, values)
    assert str(caught.value) == message
    assert tables(con) == {"hospital"}


def test_parameters_bind_to_the_last_statement_of_a_script(con):
    con.execute("CREATE TABLE h2 AS SELECT * FROM hospital; ANONYMIZE h2 WITH (k = ?, qi = (zipcode, age))", [5])
    assert summary(con)["min_class_size"] >= 5
    con.execute("ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age)); SELECT count(*) + ? FROM hospital_anon", [1])
    assert con.fetchall() == [(11,)]


def test_sql_binds_parameters(con):
    relation = con.sql("ANONYMIZE hospital WITH (k = ?, qi = (zipcode, age))", params=[4])
    row = dict(zip(relation.columns, relation.fetchall()[0]))
    assert row["rows"] == 10 and row["min_class_size"] >= 4
    assert con.sql("SELECT count(*) + ? FROM hospital_anon", params=[1]).fetchall() == [(11,)]


# --- 2. executemany --------------------------------------------------------------------------------

def test_executemany_refuses_anonymize_and_passes_plain_sql(con):
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.executemany("ANONYMIZE hospital WITH (k = ?)", [[2], [3]])
    assert str(caught.value) == "executemany cannot run ANONYMIZE: call execute(text, values) once per set of values"
    assert tables(con) == {"hospital"}
    con.executemany("INSERT INTO hospital VALUES (?, ?, ?, ?)", [[11111, 20, "Master", "Flu"], [22222, 21, "PhD", "Flu"]])
    assert con.execute("SELECT count(*) FROM hospital").fetchall() == [(12,)]


# --- 3. and 4. the SQL function's JSON --------------------------------------------------------------

def test_sql_function_runs_explain_and_returns_the_plan_as_an_object(con):
    statement = "EXPLAIN ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age))"
    plan = dict(con.execute(statement).fetchall())
    method = con.execute(f"SELECT anonymize('{statement}')->>'method that would run'").fetchall()[0][0]
    assert method == plan["method that would run"]
    got = json.loads(con.execute("SELECT anonymize(?)", [statement]).fetchall()[0][0])
    assert got["rows"] == "10" and got["quasi-identifiers"] == "zipcode, age"
    assert isinstance(got["solver details"], dict)  # nested, like the summary's details
    assert set(got) == set(plan)
    assert tables(con) == {"hospital"}  # EXPLAIN writes nothing


def test_sql_function_sweep_is_an_array_of_rows(con):
    got = json.loads(con.execute(
        "SELECT anonymize('EXPLAIN ANONYMIZE hospital WITH (k = (2, 3), qi = (zipcode, age))')").fetchall()[0][0])
    assert [row["k"] for row in got] == [2, 3]
    assert all(row["min_class_size"] >= row["k"] for row in got)


def test_sql_function_details_are_a_nested_object(con):
    loss = con.execute("SELECT anonymize('ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age))')::JSON"
                       "->'details'->'column_loss'").fetchall()[0][0]
    assert loss is not None
    assert set(json.loads(loss)) == {"zipcode", "age"}
    assert all(0 <= value <= 1 for value in json.loads(loss).values())


def test_sql_function_takes_literal_options(con):
    with pytest.raises(duckdb.Error) as caught:
        con.execute("SELECT anonymize('ANONYMIZE hospital WITH (k = ?)')")
    assert str(caught.value) == "Invalid Input Error: anonymize() takes literal option values: write k = <value>, not k = ?"
    # the whole statement as a parameter is fine
    assert json.loads(con.execute("SELECT anonymize(?)", ["ANONYMIZE hospital WITH (k = 2)"]).fetchall()[0][0])["rows"] == 10


# --- 5. the SQL function and transactions ------------------------------------------------------------

CALL = "SELECT anonymize('ANONYMIZE hospital INTO published WITH (k = 2, qi = (zipcode, age))')"


def test_sql_function_is_refused_inside_a_transaction(con):
    assert IN_TRANSACTION == TXN
    con.execute("BEGIN")
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(CALL)
    assert str(caught.value) == TXN
    with pytest.raises(duckanon.AnonymizeError, match="^anonymize.. cannot run inside an open transaction"):
        con.sql(CALL)
    assert con.execute("SELECT 'anonymize(' AS mention").fetchall() == [("anonymize(",)]  # a string is not a call
    con.execute("ROLLBACK")
    assert "published" not in tables(con)
    # outside a transaction it works as before
    assert json.loads(con.execute(CALL).fetchall()[0][0])["rows"] == 10
    assert "published" in tables(con)


@pytest.mark.parametrize("begin", ["script", "duckdb_begin", "plain_duckdb_connection"])
def test_every_way_into_a_transaction_is_seen(con, begin):
    if begin == "script":  # BEGIN and the call in one execute
        with pytest.raises(duckanon.AnonymizeError) as caught:
            con.execute(f"BEGIN; {CALL}")
    elif begin == "duckdb_begin":  # DuckDB's begin() through the wrapper
        con.begin()
        with pytest.raises(duckanon.AnonymizeError) as caught:
            con.execute(CALL)
    else:  # duckanon.execute on a plain DuckDB connection (what the shell does)
        raw = con.duckdb
        raw.execute("BEGIN")
        with pytest.raises(duckanon.AnonymizeError) as caught:
            duckanon.execute(raw, CALL)
    assert str(caught.value) == TXN
    con.execute("ROLLBACK")
    assert "published" not in tables(con)


def test_anonymize_statement_joins_the_callers_transaction(con):
    con.execute("BEGIN")
    con.execute("CREATE TABLE fresh AS SELECT * FROM hospital")  # visible only inside this transaction
    con.execute("ANONYMIZE fresh WITH (k = 2, qi = (zipcode, age))")
    assert summary(con)["rows"] == 10
    con.execute("ROLLBACK")
    assert tables(con) == {"hospital"}


# --- 6. threads sharing one Connection ----------------------------------------------------------------

def _threads(n, work):
    errors = []
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        try:
            work(i)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(f"{i}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_threads_sharing_one_connection_get_their_own_results():
    con = duckanon.connect()
    for n in range(8):  # a source per thread, each with its own number of rows: a summary tells whose it is
        con.execute(f"CREATE TABLE src{n} AS SELECT i % 11 AS a, i % 5 AS b, (i % 3)::VARCHAR AS s "
                    f"FROM range({100 + 10 * n}) r(i)")
    seen = {}

    def work(n):
        rows = 100 + 10 * n
        for round_ in range(2):
            k = 2 + (n + round_) % 4
            target = f"out{n}_{round_}"
            con.execute(f"ANONYMIZE src{n} INTO {target} WITH (k = ?, qi = (a, b), sensitive = s)", [k])
            row = summary(con)
            assert (row["rows"], row["min_class_size"] >= k) == (rows, True), row
            assert con.execute(f"SELECT count(*) FROM {target}").fetchall() == [(rows,)]
            assert con.sql(f"SELECT k >= {k} FROM anon_k('{target}', ['a', 'b'])").fetchall() == [(True,)]
            py = con.anonymize(f"ANONYMIZE src{n} INTO {target}_py WITH (k = {k}, qi = (a, b))")
            assert (py.rows, py.min_class_size >= k) == (rows, True)
            sql = json.loads(con.execute(f"SELECT anonymize('ANONYMIZE src{n} INTO {target}_sql "
                                         f"WITH (k = {k}, qi = (a, b))')").fetchall()[0][0])
            assert (sql["rows"], sql["min_class_size"] >= k) == (rows, True)
            seen[(n, round_)] = k

    assert _threads(8, work) == []
    assert len(seen) == 16
    for (n, round_), k in seen.items():
        for suffix in ("", "_py", "_sql"):
            assert con.execute(f"SELECT count(*) FROM out{n}_{round_}{suffix}").fetchall() == [(100 + 10 * n,)]
    con.close()


def test_threads_writing_one_table_get_results_or_one_line_errors():
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT i % 13 AS a, i % 7 AS b FROM range(200) r(i)")
    done, refused = [], []

    def work(_):
        for _ in range(3):
            try:
                con.execute("ANONYMIZE t WITH (k = 3, qi = (a, b))")
                done.append(summary(con)["rows"])
            except duckanon.AnonymizeError as error:  # DuckDB's write-write conflict, in our words
                refused.append(str(error))

    assert _threads(8, work) == []
    assert done and set(done) == {200} and len(done) + len(refused) == 24
    assert set(refused) <= {"another statement changed the target memory.main.t_anon at the same time: nothing was "
                            "written; run ANONYMIZE again"}, refused
    assert con.execute("SELECT count(*) FROM t_anon").fetchall() == [(200,)]
    assert con.sql("SELECT k FROM anon_k('t_anon', ['a', 'b'])").fetchall()[0][0] >= 3
    con.close()


def test_a_threads_transaction_is_its_own(con):
    con.execute("BEGIN")  # the opening thread's transaction...
    with pytest.raises(duckanon.AnonymizeError):
        con.execute(CALL)
    results = []

    def other(_):  # ...does not hold another thread's statements: it has its own cursor
        results.append(json.loads(con.execute(CALL).fetchall()[0][0])["rows"])
        results.append(con.duckdb is not None and con.execute("SELECT count(*) FROM published").fetchall())

    assert _threads(1, other) == []
    assert results == [10, [(10,)]]
    con.execute("ROLLBACK")
    assert "published" in tables(con)  # committed by the other thread, not undone by this ROLLBACK


def test_sql_function_runs_report_and_returns_its_row(con, tmp_path):
    con.execute("ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), sensitive = disease)")
    path = tmp_path / "r.html"
    got = json.loads(con.execute("SELECT anonymize(?)", [f"REPORT hospital_anon FROM hospital WITH (file = '{path}')"])
                     .fetchall()[0][0])
    assert (got["report"], got["published"], got["original"]) == (str(path), "hospital_anon", "hospital")
    assert got["highest_risk"] <= 0.5 and path.exists()


# --- the SQL macros, installed when first needed -----------------------------------------------


def _has_macros(raw) -> bool:
    return raw.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'anon\\_%' "
                       "ESCAPE '\\'").fetchall()[0][0] > 0


def test_the_macros_are_installed_when_a_statement_names_one():
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT i % 5 AS a, i % 3 AS b FROM range(100) r(i)")
    assert not _has_macros(con._con)  # (the raw connection, looked at without Connection.duckdb)
    assert con.execute("SELECT k FROM anon_k('t', ['a', 'b'])").fetchall() == [(6,)]
    assert con.sql("SELECT k FROM anon_k('t', ['a', 'b'])").fetchall() == [(6,)]


def test_the_raw_connection_is_handed_out_with_the_macros():
    """Whatever runs on con.duckdb directly may call a macro: it comes with them, in every thread."""
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT i % 5 AS a, i % 3 AS b FROM range(100) r(i)")
    assert con.duckdb.execute("SELECT k FROM anon_k('t', ['a', 'b'])").fetchall() == [(6,)]
    found = []
    thread = threading.Thread(target=lambda: found.append(
        con.duckdb.execute("SELECT k FROM anon_k('t', ['a'])").fetchall()))
    thread.start()
    thread.join(timeout=60)
    assert found == [[(20,)]]


def _file_with_a_view_calling_a_macro(tmp_path) -> str:
    """A database file holding t, an empty n (x) and a view v over anon_k('t', ['a', 'b'])."""
    path = str(tmp_path / "v.duckdb")
    con = duckanon.connect(path)
    con.execute("CREATE TABLE t AS SELECT i % 5 AS a, i % 3 AS b FROM range(100) r(i)")
    con.execute("CREATE TABLE n (x INTEGER)")
    con.execute("CREATE VIEW v AS SELECT k FROM anon_k('t', ['a', 'b'])")
    con.close()
    return path


def test_a_view_calling_a_macro_reads_on_a_new_connection(tmp_path):
    """A lone statement that reaches a macro without naming it is run again once the macros are
    in: it failed while binding, so nothing of it ran twice."""
    path = _file_with_a_view_calling_a_macro(tmp_path)
    con = duckanon.connect(path)
    assert con.execute("SELECT * FROM v").fetchall() == [(6,)]
    con.close()
    con = duckanon.connect(path)
    assert con.execute("INSERT INTO n SELECT k FROM v").fetchall() == [(1,)]
    assert con.execute("SELECT x FROM n").fetchall() == [(6,)]
    con.close()


def test_a_script_reaching_a_macro_through_a_view_runs_nothing_twice(tmp_path):
    path = _file_with_a_view_calling_a_macro(tmp_path)
    con = duckanon.connect(path)
    with pytest.raises(duckdb.CatalogException, match="anon_k does not exist"):
        con.execute("INSERT INTO n VALUES (1); SELECT * FROM v")
    assert con.execute("SELECT count(*) FROM n").fetchall() == [(1,)]  # the INSERT ran once
    con.execute("BEGIN")
    with pytest.raises(duckdb.CatalogException, match="anon_k does not exist"):
        con.execute("SELECT * FROM v")  # inside a transaction: never run again
    con.execute("ROLLBACK")
    assert con.execute("SELECT * FROM v").fetchall() == [(6,)]
    con.close()
