"""Bad input: one clear one-line error, and the database exactly as it was."""

import pytest

import duckanon

from support.refusals import assert_refused_and_unchanged
from support.solver_checks import check_population_uniqueness


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
    ("ANONYMIZE hospital WITH k = 2, engine = 'oracle'", r"^unknown engine 'oracle' \(known: duckdb, spark\) \(at line 1, column 32\)$"),
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
    ("ANONYMIZE hospital WITH k = 2, method = 'magic'", r"^unknown method 'magic' \(known: auto, mapprox, .*, gensup\) \(at line 1, column 32\)$"),
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


# Risk-based models (issue 19): population tables, estimates, weights, methods. Each message
# exactly as written (the whole line), the database as it was, and no value of the table quoted.
POPULATIONS = [
    "CREATE TABLE pop AS SELECT * FROM hospital UNION ALL SELECT * FROM hospital",
    "CREATE TABLE pop_noedu AS SELECT zipcode, age FROM hospital",  # lacks a QI column
    "CREATE TABLE pop_half AS SELECT * FROM hospital WHERE age < 50",  # the sample is not drawn from it
]
RISK_BAD = [
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop_noedu, qi = (zipcode, age, education))",
     "population table pop_noedu lacks the quasi-identifier column 'education' (it must hold every QI: zipcode, age, "
     "education)"),
    ("ANONYMIZE hospital WITH (delta_presence = (0, 0.5), population = pop_half, qi = (zipcode, age, education))",
     "delta_presence needs the sample to be contained in the population: 5 of its 10 classes have more rows than "
     "population table pop_half has with their values"),
    ("ANONYMIZE hospital WITH (k = 2, estimator = 'pitman')",
     "option estimator needs population_size = <people> (the population it estimates for)"),
    ("ANONYMIZE hospital WITH (population_uniqueness = 0.1, estimator = 'pitman')",
     "option population_uniqueness needs population_size = <people> (or population = <table>)"),
    ("ANONYMIZE hospital WITH (k_map = 2, estimator = 'poisson')",
     "option k_map needs population = <table>, or population_size = <people> for an estimate"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop, estimator = 'poisson')",
     "estimator 'poisson' estimates k_map's class sizes: it needs k_map with population_size"),
    ("ANONYMIZE hospital WITH (k = 2, weights = (age = 2, nosuch = 1))",
     "weights names column nosuch, which is not a quasi-identifier (quasi-identifiers: zipcode, age, education, "
     "disease)"),
    ("ANONYMIZE hospital WITH (k = 2, weights = (disease = 2), sensitive = disease)",
     "weights names column disease, which is not a quasi-identifier (quasi-identifiers: zipcode, age, education)"),
    ("ANONYMIZE hospital WITH (delta_presence = (0, 0.5))",
     "option delta_presence needs population = <table> (the population the sample was drawn from)"),
    ("ANONYMIZE hospital WITH (k_map = 2)",
     "option k_map needs population = <table>, or population_size = <people> for an estimate"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop, engine = 'spark')",
     "option population needs engine = 'duckdb' (the population is joined where it lies)"),
    ("ANONYMIZE hospital WITH (population_uniqueness = 0.1, population_size = 1000, method = 'exact')",
     "method exact does not take population_uniqueness: use 'auto', 'mapprox', 'greedy', 'merge', 'topdown', "
     "'carve', 'segments', 'tp', 'tp+', 'hilbert', 'lattice' or 'mondrian'"),
    ("ANONYMIZE hospital WITH (average_risk = 0.2, method = 'dp')",
     "method dp does not take average_risk: use 'auto', 'mapprox', 'greedy', 'merge', 'topdown', 'carve', 'segments', 'tp', "
     "'tp+', 'hilbert', 'lattice' or 'mondrian'"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop, method = 'greedy')",
     "option k_map with a population table needs method = 'auto' or 'lattice' (the lattice counts the population "
     "rows of each generalized class)"),
    ("ANONYMIZE hospital WITH (delta_presence = (0, 0.5), population = pop, method = 'mondrian')",
     "option delta_presence with a population table needs method = 'auto' or 'lattice' (the lattice counts the "
     "population rows of each generalized class)"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = nosuchpop)", "unknown population table nosuchpop"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop, population_weight = nosuch)",
     "unknown column 'nosuch' in population_weight for population table pop"),
    ("ANONYMIZE hospital WITH (k_map = 2, population = pop, population_size = 100)",
     "population_size is the population table's rows: give population or population_size, not both"),
    ("ANONYMIZE hospital WITH (k_map = 50, population = pop)",
     "k_map = 50 is infeasible: population table pop has 20 rows"),
    ("ANONYMIZE hospital WITH (population_uniqueness = 0.1, population_size = 5)",
     "population_size (5) is smaller than the table (10 rows)"),
    ("ANONYMIZE hospital WITH (delta_presence = (0.5, 0.2), population = pop)",
     "option delta_presence needs 0 <= dmin <= dmax <= 1, got (0.5, 0.2) (at line 1, column 26)"),
    ("ANONYMIZE hospital WITH (average_risk = 0.05)",
     "average_risk = 0.05 is infeasible: the whole table as one class has risk 1/10"),
    ("ANONYMIZE hospital WITH (highest_risk = 0.05)", "k = 20 is greater than the number of rows (10)"),
    ("ANONYMIZE hospital WITH (beta_likeness = 1)",
     "option beta_likeness needs a sensitive column: add sensitive = <column>"),
]


def hospital_values(db) -> set[str]:
    return {str(v) for row in db.execute("SELECT * FROM hospital").fetchall() for v in row}


@pytest.mark.parametrize("statement,message", RISK_BAD)
def test_risk_model_bad_input_is_one_exact_line_and_database_unchanged(db, statement, message):
    import re

    for create in POPULATIONS:
        db.execute(create)
    assert_refused_and_unchanged(db, statement, "^" + re.escape(message) + "$")
    assert not {v for v in hospital_values(db) if re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", message)}, message


@pytest.mark.parametrize("method", ["auto", "greedy", "mondrian", "lattice"])
def test_population_uniqueness_with_a_population_table_publishes(db, method):
    """Was a BUG (KeyError 'levels' outside the lattice): the population table gives N, its rows."""
    db.execute(POPULATIONS[0])
    db.execute(f"ANONYMIZE hospital WITH (population_uniqueness = 0.5, population = pop, method = {method})")
    published = db.execute("SELECT zipcode, age, education, disease FROM hospital_anon").fetchall()
    assert len(published) == 10
    assert check_population_uniqueness(published, [0, 1, 2, 3], 0.5, 20, "dankar") == []
