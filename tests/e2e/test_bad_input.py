"""Bad input: one clear one-line error, and the database exactly as it was."""

import pytest

import duckanon
from conftest import assert_refused_and_unchanged


@pytest.fixture
def db(con):
    # an earlier good run, whose result must survive every failed one
    con.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    return con


BAD = [
    ("ANONYMIZE nosuch WITH k = 2", "unknown table"),
    ("ANONYMIZE hospital WITH k = 2, qi = (zipcode, nosuch)", "unknown column 'nosuch'"),
    ("ANONYMIZE hospital WITH k = 2, sensitive = nosuch", "unknown column 'nosuch'"),
    ("ANONYMIZE hospital WITH k = 0", "option k must be at least 1"),
    ("ANONYMIZE hospital WITH k = 'x'", "option k must be a number"),
    ("ANONYMIZE hospital WITH l = 2", "needs a sensitive column"),
    ("ANONYMIZE hospital WITH l = 4, sensitive = disease", "greater than the number of distinct sensitive values"),
    ("ANONYMIZE hospital WITH t = 1.5, sensitive = disease", r"option t must be in \[0, 1\]"),
    ("ANONYMIZE hospital WITH k = 2, k = 3", "duplicate option 'k'"),
    ("ANONYMIZE hospital WITH k = 2, colour = 'red'", "unknown option 'colour'"),
    ("ANONYMIZE hospital WITH k = 2, engine = 'oracle'", r"option engine must be one of duckdb, spark, got 'oracle' \(at line 1, column 32\)"),
    ("ANONYMIZE hospital WITH k = 2, spark_master = 'local[1]'", "option spark_master needs engine = 'spark'"),
    ("ANONYMIZE hospital WITH k = 2, engine = 'spark', report = 'x.html'", "option report needs engine = 'duckdb'"),
    ("ANONYMIZE hospital WITH k = 2, risk_threshold = 0.1", "option risk_threshold applies to the report"),
    ("ANONYMIZE hospital WITH (k = 2", "syntax error at line 1, column"),
    ("ANONYMIZE hospital WITH (k 2)", "syntax error at line 1, column"),
    ("ANONYMIZE hospital\nWITH (k = 2,, l = 2)", "line 2"),
    ("ANONYMIZE hospital INTO hospital WITH k = 2", "is the source table"),
    ("ANONYMIZE hospital INTO main.hospital WITH k = 2", "is the source table"),
    ("ANONYMIZE hospital WITH k = 11", r"greater than the number of rows \(10\)"),
    ("ANONYMIZE hospital WITH k = 2, qi = (zipcode, zipcode)", "listed twice"),
    ("ANONYMIZE hospital WITH k = 2, qi = (zipcode, disease), sensitive = disease", "both sensitive and a quasi-identifier"),
    ("ANONYMIZE hospital WITH k = 2, method = 'magic'", "option method must be one of"),
    ("ANONYMIZE hospital WITH qi = (zipcode)", "at least one of the options k, l or t"),
    ("ANONYMIZE hospital WITH k = 2, patterns = ((zipcode), (disease)), sensitive = disease", "not a quasi-identifier"),
]


@pytest.mark.parametrize("statement,message", BAD)
def test_bad_input_is_one_line_error_and_database_unchanged(db, statement, message):
    assert_refused_and_unchanged(db, statement, message)


def test_infeasible_frequency_l_diversity(db):
    db.execute("CREATE TABLE skew AS SELECT i AS q, CASE WHEN i < 8 THEN 'flu' ELSE 'hiv' END AS s FROM range(10) t(i)")
    assert_refused_and_unchanged(db, "ANONYMIZE skew WITH l = 2, sensitive = s",
                                 "infeasible: the most frequent sensitive value covers 8 of 10")


def test_failure_while_writing_rolls_back(db):
    # the target name is taken by a view: the CREATE fails after the solver ran
    db.execute("CREATE VIEW v_target AS SELECT 1 AS x")
    assert_refused_and_unchanged(db, "ANONYMIZE hospital INTO v_target WITH k = 2, sensitive = disease",
                                 "ANONYMIZE failed")


def test_error_inside_a_script_stops_the_script(db):
    assert_refused_and_unchanged(db, "ANONYMIZE hospital WITH k = 0; CREATE TABLE after_error AS SELECT 1",
                                 "option k must be at least 1")


def test_plain_sql_errors_are_duckdb_errors(db):
    import duckdb

    with pytest.raises(duckdb.Error):
        db.execute("SELEC 1")
