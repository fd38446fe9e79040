"""The population macros against a release's labels agree with details.population (issue 35,
item 13). A lattice release publishes hierarchy labels, which no raw population value equals:
anon_kmap / anon_delta_presence then say k_map = 0 and contained = false. Their `_labeled` forms
take a table of (column, value, label): built here from ARX's hierarchy files and the release's
levels alone (anon_hierarchy_labels), independently of duckanon's binding, and every figure
details.population gives is recomputed from the published table, the population and those
labels, for every population model, with and without suppression."""

from __future__ import annotations

import json

import pytest

import duckanon

from support.data import SHARED

ADULT = SHARED / "adult"
QI = ["sex", "age", "race", "marital-status", "education"]
QI_LIST = "[" + ", ".join(f"'{c}'" for c in QI) + "]"
ALL_HIER = f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv'"
SOME_HIER = f"hierarchies = (age = '{ADULT}/adult_hierarchy_age.csv', education = '{ADULT}/adult_hierarchy_education.csv')"


@pytest.fixture(scope="module")
def db():
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';')")
    con.execute("CREATE TABLE sample AS SELECT * FROM adult USING SAMPLE 10% (bernoulli, 42)")
    yield con
    con.close()


def release(con, options: str, hier: str, target: str) -> dict:
    qi = ", ".join(f'"{c}"' for c in QI)
    con.execute(f"ANONYMIZE sample INTO {target} WITH ({options}, population = adult, qi = ({qi}), "
                f"sensitive = \"salary-class\", method = lattice, {hier})")
    row = dict(zip([c[0] for c in con.description], con.fetchone()))
    return row["details"] if isinstance(row["details"], dict) else json.loads(row["details"])


def write_labels(con, levels: list[int], hier: str, name: str) -> None:
    """The labels of the release's levels, from the hierarchy files: one anon_hierarchy_labels
    per generalized column that has a file; a column without one generalized is '*' for every
    population value (the macros would take its '*' as a wildcard anyway: listing it makes the
    population's classes those of the release's generalization, for the unpublished count)."""
    parts = []
    for c, h in zip(QI, levels):
        if h > 0 and (hier == ALL_HIER or c in ("age", "education")):
            parts.append(f"SELECT * FROM anon_hierarchy_labels('{ADULT}/adult_hierarchy_{c}.csv', '{c}', {h})")
        elif h > 0:
            parts.append(f"SELECT DISTINCT '{c}' AS \"column\", CAST(\"{c}\" AS VARCHAR) AS value, '*' AS label "
                         "FROM adult")
    parts.append("SELECT NULL::VARCHAR AS \"column\", NULL::VARCHAR AS value, NULL::VARCHAR AS label WHERE false")
    con.execute(f"CREATE OR REPLACE TABLE {name} AS " + " UNION ALL ".join(parts))


CASES = [
    ("k_map = 5", 0.0, ALL_HIER),
    ("k_map = 5", 0.05, ALL_HIER),
    ("k_map = 20", 0.02, SOME_HIER),
    ("delta_presence = (0.05, 0.2)", 0.0, ALL_HIER),
    ("delta_presence = (0.05, 0.2)", 0.05, ALL_HIER),
    ("delta_presence = (0, 0.5)", 0.05, ALL_HIER),
    ("k = 2, delta_presence = (0.05, 0.25)", 0.0, ALL_HIER),  # population-only classes counted as suppressed
    ("k_map = 3, delta_presence = (0.02, 0.3)", 0.04, SOME_HIER),
]


@pytest.mark.parametrize("options, limit, hier", CASES)
def test_the_labeled_macros_agree_with_details_population(db, options, limit, hier):
    details = release(db, f"{options}, suppression_limit = {limit}", hier, "rel")
    found = details["population"]
    write_labels(db, details["levels"], hier, "rel_labels")
    kmap = db.execute(f"SELECT k_map, classes, population_rows, unpublished_classes, unpublished_rows "
                      f"FROM anon_kmap_labeled('rel', 'adult', {QI_LIST}, 'rel_labels')").fetchone()
    assert kmap == (found["k_map_level"], found["classes_checked"], found["population_rows"],
                    found["unpublished_classes"], found["unpublished_rows"])
    low, high, contained, short, classes, rows, people, unpublished, unpublished_rows = db.execute(
        f"SELECT * FROM anon_delta_presence_labeled('rel', 'adult', {QI_LIST}, 'rel_labels')").fetchone()
    assert [round(low, 6), round(high, 6)] == found["delta_presence_range"]
    assert contained and short == 0 and classes == found["classes_checked"]
    assert rows == db.execute("SELECT count(*) FROM rel").fetchone()[0]
    assert (unpublished, unpublished_rows) == (found["unpublished_classes"], found["unpublished_rows"])
    assert db.execute(f"SELECT unlabeled_rows FROM anon_population_unpublished('rel', 'adult', {QI_LIST}, "
                      "'rel_labels')").fetchone() == (0,)
    per_class = db.execute(f"SELECT min(matches), count(*) FROM anon_kmap_classes_labeled('rel', 'adult', {QI_LIST}, "
                           "'rel_labels')").fetchone()
    assert per_class == (found["k_map_level"], found["classes_checked"])
    if limit == 0:  # nothing suppressed: the classes no published row reaches are those no sample row reaches
        assert (found["unpublished_classes"], found["unpublished_rows"]) == (
            found["population_only_classes"], found["population_only_rows"])
    else:
        assert found["unpublished_classes"] >= found["population_only_classes"]
    if "delta_presence = (0.05" in options and not options.startswith("k ="):
        assert found["population_only_classes"] == 0  # ARX's rule: none may be left


def test_the_plain_macros_do_not_see_labels(db):
    """Why the labeled forms exist: on a release with hierarchy labels the plain macros compare
    labels with raw values and see no match."""
    release(db, "k_map = 5, suppression_limit = 0", ALL_HIER, "rel_plain")
    assert db.execute(f"SELECT k_map FROM anon_kmap('rel_plain', 'adult', {QI_LIST})").fetchone() == (0,)
    assert db.execute(f"SELECT contained FROM anon_delta_presence('rel_plain', 'adult', {QI_LIST})").fetchone() == (False,)


@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_population_uniqueness_macro_agrees(db, limit):
    details = release(db, f"population_uniqueness = 0.01, suppression_limit = {limit}", ALL_HIER, "rel_pu")
    estimate = details["population_uniqueness"]
    (value,) = db.execute(f"SELECT fraction FROM anon_population_uniqueness('rel_pu', {QI_LIST}, "
                          f"{estimate['population_size']}, '{estimate['estimator']}')").fetchone()
    assert value == pytest.approx(estimate["estimate"], rel=1e-9, abs=1e-15)


def test_a_value_without_a_label_matches_nothing(db):
    """A listed column's population value missing from the labels: its rows are counted as
    unlabeled and reach no class."""
    db.execute("CREATE OR REPLACE TABLE tiny_pop AS SELECT * FROM (VALUES ('a', 1), ('a', 2), ('b', 3), (NULL, 4)) t(q, r)")
    db.execute("CREATE OR REPLACE TABLE tiny_rel AS SELECT * FROM (VALUES ('A'), ('A'), ('N')) t(q)")
    db.execute("CREATE OR REPLACE TABLE tiny_labels AS SELECT * FROM (VALUES ('q', 'a', 'A'), ('q', NULL, 'N')) "
               "t(\"column\", value, label)")
    assert db.execute("SELECT * FROM anon_kmap_labeled('tiny_rel', 'tiny_pop', ['q'], 'tiny_labels')").fetchone() == (
        1, 2, 3, 4, 1, 1)
    assert db.execute("SELECT * FROM anon_population_unpublished('tiny_rel', 'tiny_pop', ['q'], "
                      "'tiny_labels')").fetchone() == (1, 1, 1)


def test_write_release_labels_gives_the_hierarchy_files_rows(db):
    """The helper's labels (duckanon's binding of the release's specs) are the hierarchy files'
    rows at the release's levels, for every population value."""
    from duckanon.report.population import write_release_labels

    details = release(db, "k_map = 5, suppression_limit = 0.02", SOME_HIER, "rel_helper")
    written = write_release_labels(db, "rel_helper", "adult", "helper_labels",
                                   hierarchies={c: f"{ADULT}/adult_hierarchy_{c}.csv" for c in ("age", "education")})
    write_labels(db, details["levels"], SOME_HIER, "file_labels")
    helper = db.execute("SELECT * FROM helper_labels ORDER BY ALL").fetchall()
    assert len(helper) == written
    present = " UNION ALL ".join(f"SELECT DISTINCT '{c}' AS c, CAST(\"{c}\" AS VARCHAR) AS v FROM adult" for c in QI)
    expected = db.execute(f"SELECT DISTINCT f.* FROM file_labels AS f JOIN ({present}) AS p "
                          "ON p.c = f.\"column\" AND p.v = f.value ORDER BY ALL").fetchall()
    assert helper == expected and len(expected) > 0
    got = db.execute(f"SELECT k_map, classes, unpublished_classes, unpublished_rows FROM anon_kmap_labeled("
                     f"'rel_helper', 'adult', {QI_LIST}, 'helper_labels')").fetchone()
    found = details["population"]
    assert got == (found["k_map_level"], found["classes_checked"], found["unpublished_classes"],
                   found["unpublished_rows"])


@pytest.mark.parametrize("options, specs", [
    ("k_map = 30, suppression_limit = 0", "(a = 'intervals(5, 10, 20)')"),
    ("k = 1, delta_presence = (0.05, 0.2), suppression_limit = 0", "(a = 'intervals(5, 10, 20)')"),
    ("delta_presence = (0.05, 0.2), suppression_limit = 0.1", "(a = 'intervals(5, 10, 20)', c = 'prefix(1)')"),
    ("k_map = 20, suppression_limit = 0.05", "(c = 'ordered(x1, x2, y1, y2, z1; 2, 4)', a = 'table(a_levels)')"),
])
def test_write_release_labels_for_other_specs(options, specs):
    """Builders (intervals, prefix, ordered) and table(name) hierarchies, whose labels no file
    gives: the helper's table makes the macros agree with details.population; the population has
    values (a = 70, 71) the sample lacks."""
    from duckanon.report.population import write_release_labels

    con = duckanon.connect()
    con.execute("CREATE TABLE s AS SELECT range % 70 AS a, range % 5 AS b, "
                "['x1', 'x2', 'y1', 'y2', 'z1'][range % 5 + 1] AS c FROM range(300)")
    con.execute("CREATE TABLE pop AS SELECT * FROM s UNION ALL SELECT range % 72, range % 5, "
                "['x1', 'x2', 'y1', 'y2', 'z1'][range % 5 + 1] FROM range(2700)")
    con.execute("CREATE TABLE a_levels AS SELECT v AS level0, (v // 10 * 10)::VARCHAR || 's' AS level1, '*' AS level2 "
                "FROM range(72) t(v)")
    con.execute(f"ANONYMIZE s INTO r WITH ({options}, population = pop, qi = (a, b, c), method = lattice, "
                f"hierarchies = {specs})")
    row = dict(zip([c[0] for c in con.description], con.fetchone()))
    details = row["details"] if isinstance(row["details"], dict) else json.loads(row["details"])
    found = details["population"]
    write_release_labels(con, "r", "pop", "r_labels", hierarchies={"a": "table(a_levels)"})  # (the provenance: "a table")
    got = con.execute("SELECT * FROM anon_delta_presence_labeled('r', 'pop', ['a', 'b', 'c'], 'r_labels')").fetchone()
    low, high, contained, _, classes, rows, people, unpublished, unpublished_rows = got
    assert [round(low, 6), round(high, 6)] == found["delta_presence_range"] and contained
    assert (classes, people) == (found["classes_checked"], found["population_rows"])
    assert (unpublished, unpublished_rows) == (found["unpublished_classes"], found["unpublished_rows"])
    assert con.execute("SELECT k_map FROM anon_kmap_labeled('r', 'pop', ['a', 'b', 'c'], 'r_labels')").fetchone() == (
        found["k_map_level"],)
    con.close()


def test_write_release_labels_refuses_a_table_without_levels(db):
    from duckanon.report.population import write_release_labels

    db.execute("CREATE OR REPLACE TABLE plain AS SELECT 1 AS a")
    with pytest.raises(duckanon.AnonymizeError) as error:
        write_release_labels(db, "plain", "adult", "x_labels")
    assert str(error.value) == ("plain is not a lattice release of duckanon (its provenance gives no "
                                "level per quasi-identifier)")


def test_labels_of_a_release_that_generalized_nothing():
    """A lattice release whose every level is 0 (the sample already meets k_map as it is): no
    label to write, an empty table, and the _labeled macro then reads the release's values as they
    are. Fetched with fetchone() first, which leaves DuckDB 2's result unread (register() refused
    that until the backend closed our result first)."""
    from duckanon.report.population import write_release_labels

    con = duckanon.connect()
    con.execute("CREATE TABLE pop AS SELECT range % 3 AS a, range % 2 AS b FROM range(600)")
    con.execute("CREATE TABLE s AS SELECT * FROM pop WHERE rowid % 10 = 0")
    con.execute("ANONYMIZE s INTO r WITH (k_map = 2, population = pop, qi = (a, b), method = lattice)")
    row = dict(zip([c[0] for c in con.description], con.fetchone()))
    details = row["details"] if isinstance(row["details"], dict) else json.loads(row["details"])
    assert details["levels"] == [0, 0]
    assert write_release_labels(con, "r", "pop", "r_labels") == 0
    assert con.execute("SELECT count(*) FROM r_labels").fetchone() == (0,)
    got = con.execute("SELECT k_map FROM anon_kmap_labeled('r', 'pop', ['a', 'b'], 'r_labels')").fetchone()
    assert got == (details["population"]["k_map_level"],) == (100,)
    con.close()
