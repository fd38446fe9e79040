"""The population table is never the target (issue 35, item 3): as for the source and the
hierarchy tables, the target is compared with the population as the objects DuckDB resolves, so
no spelling of the population (quoted, other case, fully qualified, a view over it, an attached
database's alias, the search path) lets the release replace it; the database is unchanged."""

from __future__ import annotations

import pytest

import duckanon

MODELS = ["k_map = 2", "delta_presence = (0, 1)", "population_uniqueness = 0.5"]


@pytest.fixture()
def con():
    con = duckanon.connect()
    con.execute("CREATE TABLE s AS SELECT range % 7 AS a, range % 5 AS b FROM range(200)")
    con.execute("CREATE TABLE census AS SELECT range % 7 AS a, range % 5 AS b FROM range(2000)")
    con.execute("CREATE VIEW census_view AS SELECT * FROM census")
    con.execute("ATTACH ':memory:' AS d2")
    con.execute("CREATE TABLE d2.pop AS SELECT * FROM census")
    yield con
    con.close()


def objects(con) -> list[tuple]:
    return con.execute("SELECT database_name, schema_name, table_name, estimated_size FROM duckdb_tables() "
                       "WHERE table_name NOT LIKE 'duckanon%' ORDER BY ALL").fetchall() + \
        con.execute("SELECT count(*) FROM memory.main.census").fetchall() + \
        con.execute("SELECT count(*) FROM d2.main.pop").fetchall()


IS_CENSUS = "the target memory.main.census is the population table memory.main.census: choose another name with INTO"
READ_BY_VIEW = ("the target memory.main.census is read by the population view memory.main.census_view: choose "
                "another name with INTO")
IS_POP = "the target d2.main.pop is the population table d2.main.pop: choose another name with INTO"

SPELLINGS = [
    ("census", "census", IS_CENSUS),
    ('"CENSUS"', "census", IS_CENSUS),
    ("Census", '"census"', IS_CENSUS),
    ("memory.main.census", "CENSUS", IS_CENSUS),
    ("memory.census", "memory.main.census", IS_CENSUS),
    ("census", "census_view", READ_BY_VIEW),
    ('"memory"."main"."census"', '"census_view"', READ_BY_VIEW),
    ("d2.pop", "d2.main.pop", IS_POP),
    ("d2.main.pop", "d2.pop", IS_POP),
]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("into, population, message", SPELLINGS)
def test_the_population_is_never_the_target(con, model, into, population, message):
    before = objects(con)
    with pytest.raises(duckanon.AnonymizeError) as error:
        con.execute(f"ANONYMIZE s INTO {into} WITH ({model}, population = {population}, qi = (a, b), "
                    "method = lattice)")
    assert str(error.value) == message
    assert objects(con) == before


def test_the_population_on_the_search_path_is_never_the_target(con):
    con.execute("SET search_path = 'd2'")
    before = objects(con)
    with pytest.raises(duckanon.AnonymizeError) as error:
        con.execute("ANONYMIZE memory.main.s INTO pop WITH (k_map = 2, population = pop, qi = (a, b))")
    assert str(error.value) == IS_POP
    with pytest.raises(duckanon.AnonymizeError) as error:
        con.execute("ANONYMIZE memory.main.s INTO d2.pop WITH (k_map = 2, population = \"POP\", qi = (a, b))")
    assert str(error.value) == IS_POP
    assert objects(con) == before


def test_a_temp_view_shadowing_the_population_is_compared_as_read(con):
    """`census` read through a temp view of the same name that reads memory.main.census: the
    target memory.main.census is what that population reads."""
    con.execute("CREATE TEMP VIEW census AS SELECT * FROM memory.main.census")
    before = objects(con)
    with pytest.raises(duckanon.AnonymizeError) as error:
        con.execute("ANONYMIZE s INTO memory.main.census WITH (k_map = 2, population = census, qi = (a, b))")
    assert str(error.value) == ("the target memory.main.census is read by the population view temp.main.census: "
                                "choose another name with INTO")
    assert objects(con) == before


def test_another_target_publishes(con):
    """The refusal is about the population alone: a release beside it is written."""
    con.execute("ANONYMIZE s INTO release WITH (k_map = 2, population = census_view, qi = (a, b), method = lattice)")
    assert con.execute("SELECT count(*) FROM release").fetchone() == (200,)
    assert con.execute("SELECT count(*) FROM census").fetchone() == (2000,)


@pytest.mark.parametrize("method", ["mondrian", "lattice", "gensup", "auto"])
def test_the_target_never_replaces_a_hierarchy_table_whatever_the_method(method):
    """mondrian reads the hierarchies for its local recoding without taking them as the lattice
    does: its target was not compared with them and replaced the hierarchy table."""
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 20)::VARCHAR AS z, i % 50 AS a FROM range(200) r(i)")
    con.execute("CREATE TABLE zh AS SELECT (i)::VARCHAR AS c0, (i // 10)::VARCHAR AS c1, '*' AS c2 FROM range(20) r(i)")
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(f"ANONYMIZE t INTO zh WITH (k = 5, qi = (z), hierarchies = (z = 'table(zh)'), method = {method})")
    assert str(caught.value) == ("the target memory.main.zh is the hierarchy table of column z (table(zh)): choose "
                                 "another name with INTO")
    assert con.execute("SELECT count(*), count(DISTINCT c1) FROM zh").fetchone() == (20, 2)
    con.close()
