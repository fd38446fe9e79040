"""Delta-presence and the population's classes that no sample row reaches (issue 35, item 4), on a
small table whose answer is known by hand, under the variants of the statement.

The sample `s` has a in {0, 1} only; the population `pop` is the sample and 300 more rows with a
in {2, 3}. a's hierarchy: level 1 is 'low' (0, 1) / 'high' (2, 3), level 2 '*'. With
delta_presence = (0.01, 1) alone, levels 0 and 1 of a leave population classes without sample
rows (presence 0 < 0.01) that cannot be suppressed: the answer is a at level 2. A model that
sets a minimal class size (k, highest_risk, l: ARX's HashGroupify) makes them count as suppressed,
so a stays at level 0; t-closeness and k-map set none (as in ARX's criteria)."""

from __future__ import annotations

import json

import pytest

import duckanon


@pytest.fixture()
def con(tmp_path):
    con = duckanon.connect()
    con.execute("CREATE TABLE s AS SELECT range % 2 AS a, range % 5 AS b, ['x', 'y', 'z'][range % 3 + 1] AS d "
                "FROM range(100)")
    con.execute("CREATE TABLE pop AS SELECT a, b FROM s UNION ALL SELECT 2 + range % 2, range % 5 FROM range(300)")
    con.execute("CREATE TABLE pop_counted AS SELECT a, b, count(*) AS people FROM pop GROUP BY ALL")
    path = tmp_path / "h_a.csv"
    path.write_text("0;low;*\n1;low;*\n2;high;*\n3;high;*\n")
    con.hier = f"hierarchies = (a = '{path}')"
    yield con
    con.close()


def publish(con, options: str) -> dict:
    con.execute(f"ANONYMIZE s INTO r WITH ({options}, qi = (a, b), sensitive = d, {con.hier})")
    row = dict(zip([c[0] for c in con.description], con.fetchone()))
    return row["details"] if isinstance(row["details"], dict) else json.loads(row["details"])


@pytest.mark.parametrize("options", [
    "delta_presence = (0.01, 1), population = pop, method = lattice",
    "delta_presence = (0.01, 1), population = pop, method = auto",
    "delta_presence = (0.01, 1), population = pop, method = lattice, suppression_limit = 0.5",
    "delta_presence = (0.01, 1), population = pop_counted, population_weight = people, method = lattice",
    "delta_presence = (0.01, 1), k_map = 2, population = pop, method = lattice",
    "delta_presence = (0.01, 1), t = 0.9, population = pop, method = lattice",
    "delta_presence = (0.01, 1), population = pop, method = lattice, metric = aecs",
    "delta_presence = (0.01, 1), population = pop, method = lattice, metric = discernibility",
])
def test_population_classes_no_sample_row_reaches_are_refused(con, options):
    details = publish(con, options)
    assert details["levels"][0] == 2
    found = details["population"]
    assert (found["population_only_classes"], found["population_only_rows"]) == (0, 0)
    assert con.execute("SELECT DISTINCT a FROM r").fetchall() == [("*",)]


@pytest.mark.parametrize("options", [
    "k = 1, delta_presence = (0.01, 1), population = pop, method = lattice",
    "k = 2, delta_presence = (0.01, 1), population = pop, method = lattice",
    "highest_risk = 0.5, delta_presence = (0.01, 1), population = pop, method = lattice",
    "l = 2, delta_presence = (0.01, 1), population = pop, method = lattice",
    "k = 2, delta_presence = (0.01, 1), population = pop_counted, population_weight = people, method = lattice",
])
def test_a_minimal_class_size_counts_them_as_suppressed(con, options):
    details = publish(con, options)
    assert details["levels"] == [0, 0]
    found = details["population"]
    # the population's classes (a, b) with a in {2, 3}: 2 x 5 classes, 300 people, none published
    assert (found["population_only_classes"], found["population_only_rows"]) == (10, 300)
    assert (found["unpublished_classes"], found["unpublished_rows"]) == (10, 300)


def test_dmin_zero_accepts_them(con):
    details = publish(con, "delta_presence = (0, 1), population = pop, method = lattice")
    assert details["levels"] == [0, 0]
    assert details["population"]["population_only_classes"] == 10


def test_none_valid_is_one_line(con):
    """dmin above the share of every node's classes (the whole table is 100 of 400): no
    generalization, one line, nothing written."""
    with pytest.raises(duckanon.AnonymizeError) as error:
        publish(con, "delta_presence = (0.9, 1), population = pop, method = lattice")
    assert str(error.value) == "no generalization satisfies the request within the suppression limit"
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'r'").fetchone() == (0,)
