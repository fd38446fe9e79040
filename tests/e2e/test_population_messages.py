"""Bad population tables get one line that names the column and the table, never a value (issue
35, item 14), and the database is unchanged."""

from __future__ import annotations

import pytest

import duckanon

SECRET = "secretvalue"


@pytest.fixture()
def con(tmp_path):
    con = duckanon.connect()
    con.execute("CREATE TABLE s AS SELECT range % 7 AS a, range % 5 AS b FROM range(200)")
    con.execute("CREATE TABLE pw AS SELECT range % 7 AS a, range % 5 AS b, "
                "CASE WHEN range % 3 = 0 THEN NULL ELSE 2 END AS w FROM range(2000)")
    con.execute("CREATE TABLE pwall AS SELECT range % 7 AS a, range % 5 AS b, NULL::INTEGER AS w FROM range(2000)")
    con.execute(f"CREATE TABLE ps AS SELECT CAST(range % 7 AS VARCHAR) AS a, range % 5 AS b FROM range(2000) "
                f"UNION ALL SELECT '{SECRET}', 1")
    con.execute("CREATE TABLE pextra AS SELECT range % 9 AS a, range % 5 AS b FROM range(2000)")
    con.execute("CREATE TABLE s8 AS SELECT range % 8 AS a, range % 5 AS b FROM range(200)")
    path = tmp_path / "h_a.csv"
    path.write_text("".join(f"{v};{'low' if v < 3 else 'high'};*\n" for v in range(7)))
    con.hierarchy = str(path)
    yield con
    con.close()


def tables(con) -> list:
    return con.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE table_name NOT LIKE 'duckanon%' "
                       "ORDER BY ALL").fetchall()


def refused(con, statement: str) -> str:
    before = tables(con)
    with pytest.raises(duckanon.AnonymizeError) as error:
        con.execute(statement)
    assert tables(con) == before
    assert "\n" not in str(error.value)
    return str(error.value)


@pytest.mark.parametrize("model", ["k_map = 2", "delta_presence = (0, 1)", "population_uniqueness = 0.5"])
@pytest.mark.parametrize("table, rows", [("pw", 667), ("pwall", 2000)])
def test_null_population_weights_are_refused_in_one_line(con, model, table, rows):
    message = refused(con, f"ANONYMIZE s INTO r WITH ({model}, population = {table}, population_weight = w, "
                           "qi = (a, b), method = lattice)")
    assert message == (f"population_weight column w of population table {table} is NULL in {rows} rows: every row "
                       "needs its number of people")


@pytest.mark.parametrize("model", ["k_map = 2", "delta_presence = (0, 1)"])
def test_a_population_value_that_does_not_convert_is_not_quoted(con, model):
    message = refused(con, f"ANONYMIZE s INTO r WITH ({model}, population = ps, qi = (a, b), method = lattice)")
    assert message == ("cannot read population table ps with the sample's column types: its column a (VARCHAR) does "
                       "not convert to the sample's BIGINT in 1 row")
    assert SECRET not in message


@pytest.mark.parametrize("model", ["k_map = 2", "delta_presence = (0, 1)"])
def test_a_population_value_missing_from_a_hierarchy_is_the_population_tables(con, model):
    """Values 7 and 8 are in the population only: the message names the population table and its
    query lists exactly them, from the population table."""
    message = refused(con, f"ANONYMIZE s INTO r WITH ({model}, population = pextra, qi = (a, b), method = lattice, "
                           f"hierarchies = (a = '{con.hierarchy}'))")
    assert message.startswith(f"population table memory.main.pextra: 2 values of column a are missing from "
                              f"hierarchy {con.hierarchy}; list them with: SELECT DISTINCT a FROM memory.main.pextra ")
    query = message.split("list them with: ", 1)[1]
    assert sorted(con.execute(query).fetchall()) == [(7,), (8,)]


def test_a_sample_value_missing_from_a_hierarchy_is_still_the_samples(con):
    message = refused(con, "ANONYMIZE s8 INTO r WITH (k_map = 2, population = pextra, qi = (a, b), method = lattice, "
                           f"hierarchies = (a = '{con.hierarchy}'))")
    assert message.startswith(f"1 value of column a is missing from hierarchy {con.hierarchy}; list it with: "
                              "SELECT DISTINCT a FROM memory.main.s8 ")
    assert con.execute(message.split("list it with: ", 1)[1]).fetchall() == [(7,)]


@pytest.mark.parametrize("weight, message", [
    ("CASE WHEN range = 5 THEN 'secretw' ELSE '2' END", "is VARCHAR: it must be a number type (the people each row "
                                                       "counts)"),
    ("1.5::DOUBLE", "is not a whole number in 2000 rows: every row needs its number of people"),
    ("CASE WHEN range = 3 THEN 'inf'::DOUBLE WHEN range = 4 THEN 'nan'::DOUBLE ELSE 2 END",
     "is not a whole number in 2 rows: every row needs its number of people"),
])
@pytest.mark.parametrize("model", ["k_map = 2", "population_uniqueness = 0.5"])
def test_population_weights_that_are_no_number_of_people(con, weight, message, model):
    con.execute(f"CREATE TABLE pbad AS SELECT range % 7 AS a, range % 5 AS b, {weight} AS w FROM range(2000)")
    got = refused(con, f"ANONYMIZE s INTO r WITH ({model}, population = pbad, population_weight = w, qi = (a, b), "
                       "method = lattice)")
    assert got == f"population_weight column w of population table pbad {message}"
    assert "secretw" not in got


@pytest.mark.parametrize("weight", ["2::HUGEINT", "2.00::DECIMAL(10, 2)", "2.0::DOUBLE", "2::UTINYINT"])
def test_whole_weights_of_any_number_type_are_read(con, weight):
    con.execute(f"CREATE TABLE pok AS SELECT range % 7 AS a, range % 5 AS b, {weight} AS w FROM range(2000)")
    con.execute("ANONYMIZE s INTO r WITH (k_map = 2, population = pok, population_weight = w, qi = (a, b), "
                "method = lattice)")
    assert con.execute("SELECT count(*) FROM r").fetchone() == (200,)
