"""Differential privacy and values a hierarchy lacks (issue 37, section 1): a private statement
never refuses after it read the source because of which values the source holds. A value the
hierarchy lacks or cannot place is published as the hierarchy's root at every level above 0, the
release commits and is recorded in the ledger, and nothing in the result, the published comment or
EXPLAIN says whether such a value occurred. Without epsilon the refusals are unchanged."""

from __future__ import annotations

import json

import pytest

import duckanon
from duckanon.errors import AnonymizeError
from duckanon.pipeline.problem import UNCOVERED_RULE

pytestmark = pytest.mark.e2e

HIERARCHY = "hierarchies = (a = 'table(h)'), levels = (a = 1, b = 0)"
PRIVATE = f"epsilon = 1, delta = 1e-5, qi = (a, b), {HIERARCHY}"


@pytest.fixture
def con():
    con = duckanon.connect()
    con.execute("CREATE TABLE h (value VARCHAR, l1 VARCHAR, l2 VARCHAR)")
    con.execute("INSERT INTO h VALUES ('0', 'low', '*'), ('1', 'low', '*'), ('2', 'high', '*'), ('3', 'high', '*')")
    con.execute("CREATE TABLE t AS SELECT (i % 4)::VARCHAR AS a, i % 3 AS b FROM range(4000) r(i)")
    # the neighbour: one row more, holding a value the hierarchy lacks
    con.execute("CREATE TABLE t2 AS SELECT * FROM t UNION ALL SELECT 'zzz', 1")
    yield con
    con.close()


def _result(con, text: str) -> dict:
    cur = con.execute(text)
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def _keys(value, prefix=""):
    """Every key path of a JSON value (lists by position)."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{prefix}{k}"} | _keys(v, f"{prefix}{k}.")}
    return set()


def _comment(con, name: str) -> dict:
    text = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = ?", [name]).fetchone()[0]
    return json.loads(text.removeprefix("duckanon "))


def _ledger_rows(con, source: str) -> list:
    return con.execute("SELECT statement, epsilon, delta FROM duckanon_privacy_ledger WHERE source_name = ?",
                       [source]).fetchall()


def test_a_neighbour_with_an_uncovered_value_commits_and_says_nothing_of_it(con):
    covered = _result(con, f"ANONYMIZE t INTO out_t WITH ({PRIVATE})")
    uncovered = _result(con, f"ANONYMIZE t2 INTO out_t2 WITH ({PRIVATE})")
    # both commit and both are recorded
    assert _ledger_rows(con, "t") == _ledger_rows(con, "t2") == [("ANONYMIZE", 1.0, 1e-5)]
    assert covered.keys() == uncovered.keys()
    d1, d2 = json.loads(covered["details"]), json.loads(uncovered["details"])
    assert _keys(d1) == _keys(d2)
    assert d1["differential_privacy"]["uncovered_values"] == d2["differential_privacy"]["uncovered_values"] \
        == UNCOVERED_RULE
    assert d1["differential_privacy"]["ledger"]["recorded"] is d2["differential_privacy"]["ledger"]["recorded"] is True
    text = json.dumps(d2).lower()
    assert "missing" not in text and "zzz" not in text
    # the published comment (part of the release): the same keys, and the same values but for
    # the functions of the published rows and the release's own id
    c1, c2 = _comment(con, "out_t"), _comment(con, "out_t2")
    assert _keys(c1) == _keys(c2)
    differ = {key for key in _keys(c1) if _at(c1, key) != _at(c2, key) and not isinstance(_at(c1, key), dict)}
    assert differ <= {"release", "summary.published_rows", "summary.classes", "summary.min_class_size"}
    # the uncovered row is in a class of one (its label at level 1 is the root), so never published
    assert con.execute("SELECT count(*) FROM out_t2 WHERE a NOT IN ('low', 'high')").fetchone()[0] == 0


def _at(value: dict, key: str):
    for part in key.split("."):
        value = value[part]
    return value


def test_uncovered_values_are_published_as_the_root_label(con):
    # 400 rows of 200 values the hierarchy lacks: about 253 sampled, one class at level 1, above k = 62
    con.execute("INSERT INTO t SELECT 'x' || (i % 200), 0 FROM range(400) r(i)")
    _result(con, f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    labels = dict(con.execute("SELECT a, count(*) FROM out WHERE b = '0' GROUP BY a").fetchall())
    assert set(labels) == {"low", "high", "*"} and labels["*"] >= 62
    assert con.execute("SELECT count(*) FROM out WHERE a LIKE 'x%'").fetchone()[0] == 0
    # at level 0 every value is itself, as always: the hierarchy does not generalize there
    _result(con, "ANONYMIZE t INTO out0 WITH (epsilon = 1, delta = 1e-5, qi = (a, b), hierarchies = (a = 'table(h)'), "
                 "levels = (a = 0, b = 0))")
    assert con.execute("SELECT count(*) FROM out0 WHERE a = '*'").fetchone()[0] == 0


def test_without_epsilon_the_refusal_is_unchanged(con):
    with pytest.raises(AnonymizeError, match=r"^1 value of column a is missing from hierarchy table h; list it with: "):
        con.execute("ANONYMIZE t2 INTO out WITH (k = 2, qi = (a, b), method = 'lattice', hierarchies = (a = 'table(h)'))")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'out'").fetchone()[0] == 0


def test_the_budget_refuses_both_neighbours_alike_before_any_read(con):
    for source in ("t", "t2"):
        con.execute(f"ANONYMIZE {source} INTO first_{source} WITH ({PRIVATE}, budget = (1.5, 1e-4))")
    for source in ("t", "t2"):
        with pytest.raises(AnonymizeError) as refused:
            con.execute(f"ANONYMIZE {source} INTO second_{source} WITH ({PRIVATE}, budget = (1.5, 1e-4))")
        assert str(refused.value) == (
            f"ANONYMIZE refused: budget (1.5, 0.0001) of memory.main.{source} would be exceeded: 1 private releases "
            "spent (epsilon 1.0, delta 1e-05), this statement would bring the total to (epsilon 2.0, delta 2e-05); "
            "nothing was read or written")
        assert len(_ledger_rows(con, source)) == 1


def test_explain_of_a_private_statement_is_the_same_for_both_neighbours(con):
    items = [dict(con.execute(f"EXPLAIN ANONYMIZE {s} INTO out WITH ({PRIVATE})").fetchall()) for s in ("t", "t2")]
    assert items[0].keys() == items[1].keys()
    assert {k for k in items[0] if items[0][k] != items[1][k]} == {"source", "privacy ledger"}
    assert items[0]["privacy ledger"].replace("memory.main.t ", "memory.main.t2 ") == items[1]["privacy ledger"]


def test_refresh_and_the_sql_function_commit_with_an_uncovered_value(con):
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    con.execute("INSERT INTO t VALUES ('zzz', 1), (NULL, 2)")
    con.execute("REFRESH out")
    text = f"ANONYMIZE t INTO out_f WITH ({PRIVATE})".replace("'", "''")
    summary = json.loads(con.execute(f"SELECT anonymize('{text}')").fetchone()[0])
    assert summary["details"]["differential_privacy"]["uncovered_values"] == UNCOVERED_RULE
    assert [row[0] for row in _ledger_rows(con, "t")] == ["ANONYMIZE", "REFRESH", "ANONYMIZE"]


@pytest.mark.parametrize("column, values, spec", [
    # a hierarchy lacking NULL
    ("a VARCHAR", "(CASE WHEN i % 5 = 0 THEN NULL ELSE (i % 2)::VARCHAR END)", "table(h)"),
    # a value that differs from the hierarchy's only in case, in a NOCASE column (matched byte by byte)
    ("a VARCHAR COLLATE NOCASE", "(CASE WHEN i % 5 = 0 THEN 'ANN' ELSE (i % 2)::VARCHAR END)", "table(h)"),
    # a text spelled as a hierarchy spells NULL
    ("a VARCHAR", "(CASE WHEN i % 5 = 0 THEN '' ELSE (i % 2)::VARCHAR END)", "table(h)"),
    # a category ordered() does not list
    ("a VARCHAR", "(CASE WHEN i % 5 = 0 THEN 'q' ELSE (i % 2)::VARCHAR END)", "ordered(0, 1; 2)"),
    # numbers intervals cannot number, and infinite dates
    ("a DOUBLE", "(CASE WHEN i % 5 = 0 THEN 'nan'::DOUBLE ELSE i % 2 END)", "intervals(2)"),
    ("a DOUBLE", "(CASE WHEN i % 5 = 0 THEN 'infinity'::DOUBLE ELSE i % 2 END)", "intervals(2)"),
    ("a DATE", "(CASE WHEN i % 5 = 0 THEN 'infinity'::DATE ELSE DATE '2024-01-01' + (i % 2)::INTEGER END)", "dates(year)"),
    ("a TIMESTAMP", "(CASE WHEN i % 5 = 0 THEN '-infinity'::TIMESTAMP ELSE TIMESTAMP '2024-01-01' END)", "dates(year)"),
    # a text that is no date, under dates()
    ("a VARCHAR", "(CASE WHEN i % 5 = 0 THEN 'soon' ELSE '2024-01-0' || (1 + i % 2) END)", "dates(year)"),
])
def test_every_value_a_hierarchy_cannot_place_goes_to_its_root(con, column, values, spec):
    con.execute(f"CREATE TABLE u ({column}, b INTEGER)")
    con.execute(f"INSERT INTO u SELECT {values}, 0 FROM range(2000) r(i)")
    with pytest.raises(AnonymizeError):
        con.execute(f"ANONYMIZE u INTO refused WITH (k = 2, qi = (a, b), method = 'lattice', hierarchies = (a = '{spec}'))")
    result = _result(con, f"ANONYMIZE u INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), "
                          f"hierarchies = (a = '{spec}'), levels = (a = 1, b = 0))")
    assert json.loads(result["details"])["differential_privacy"]["uncovered_values"] == UNCOVERED_RULE
    # 400 rows go to the root: about 253 sampled, far above k = 62
    stars = con.execute("SELECT count(*) FROM out WHERE a = '*'").fetchone()[0]
    assert 62 <= stars <= 400 and stars + con.execute("SELECT count(*) FROM out WHERE a <> '*' OR a IS NULL"
                                                        ).fetchone()[0] == result["published_rows"]
    assert len(_ledger_rows(con, "u")) == 1


def test_a_zoned_timestamp_is_matched_by_instant_in_any_time_zone(con):
    con.execute("CREATE TABLE z (a TIMESTAMPTZ, b INTEGER)")
    con.execute("INSERT INTO z SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00' + (i % 2) * INTERVAL 1 HOUR, 0 "
                "FROM range(2000) r(i)")
    con.execute("CREATE TABLE hz (value TIMESTAMPTZ, l1 VARCHAR, l2 VARCHAR)")
    con.execute("INSERT INTO hz VALUES (TIMESTAMPTZ '2024-01-01 00:00:00+00', 'night', '*'), "
                "(TIMESTAMPTZ '2024-01-01 01:00:00+00', 'night', '*')")
    con.execute("SET TimeZone = 'America/New_York'")
    con.execute("ANONYMIZE z INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), hierarchies = (a = 'table(hz)'), "
                "levels = (a = 1, b = 0))")
    # every value is covered (matched by its instant): none goes to the root
    assert con.execute("SELECT DISTINCT a FROM out").fetchall() == [("night",)]


def test_sources_of_another_schema_and_another_database(con, tmp_path):
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.t2 AS SELECT * FROM t2")
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    con.execute("CREATE TABLE other.main.t2 AS SELECT * FROM t2")
    con.execute(f"ANONYMIZE s.t2 INTO s.out WITH ({PRIVATE})")
    con.execute(f"ANONYMIZE other.main.t2 INTO other.main.out WITH ({PRIVATE.replace('table(h)', 'table(memory.main.h)')})")
    assert con.execute("SELECT source_schema, source_name FROM duckanon_privacy_ledger WHERE source_name = 't2'"
                       ).fetchall() == [("s", "t2")]
    assert con.execute("SELECT source_name, statement FROM other.main.duckanon_privacy_ledger").fetchall() == \
        [("t2", "ANONYMIZE")]


def test_levels_are_checked_before_any_row_is_read(con):
    # a level above the hierarchy's height: refused by EXPLAIN too, which reads no row
    with pytest.raises(AnonymizeError, match=r"^option levels: the hierarchy of a has levels 0 to 2, got 3$"):
        con.execute("EXPLAIN ANONYMIZE t INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), "
                    "hierarchies = (a = 'table(h)'), levels = (a = 3, b = 0))")
    with pytest.raises(AnonymizeError, match=r"^option levels: the hierarchy of b has levels 0 to 1, got 2$"):
        con.execute("ANONYMIZE t INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), "
                    "hierarchies = (a = 'table(h)'), levels = (a = 1, b = 2))")
    # prefix without a width takes its height from the longest value: refused before the read
    with pytest.raises(AnonymizeError, match=r"^the hierarchy of a \(prefix\) takes its height from the data, so "
                                             r"whether option levels' level exists would depend on the rows: give it "
                                             r"a fixed height \(e\.g\. prefix\(5\)\)$"):
        con.execute("ANONYMIZE t INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), hierarchies = (a = 'prefix'), "
                    "levels = (a = 1, b = 0))")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'out'").fetchone()[0] == 0


def test_a_hierarchy_whose_top_label_names_a_smaller_group_below_is_refused_whatever_the_values(con):
    con.execute("CREATE TABLE hb (value VARCHAR, l1 VARCHAR, l2 VARCHAR)")
    con.execute("INSERT INTO hb VALUES ('0', 'all', 'all'), ('1', 'one', 'all'), ('2', 'one', 'all'), "
                "('3', 'one', 'all')")
    con.execute("CREATE TABLE only_one AS SELECT '1' AS a, i % 3 AS b FROM range(100) r(i)")  # never binds '0'
    for source in ("t", "only_one"):
        with pytest.raises(AnonymizeError, match=r"^hierarchy table hb gives its top label to a group of only some "
                                                 r"of its values at level 1: "):
            con.execute(f"ANONYMIZE {source} INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), "
                        "hierarchies = (a = 'table(hb)'), levels = (a = 1, b = 0))")


def test_a_hierarchy_file_and_the_search_go_to_the_root_too(con, tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("0;low;*\n1;low;*\n2;high;*\n3;high;*\n")
    con.execute("INSERT INTO t2 SELECT 'y' || (i % 300), i % 3 FROM range(1200) r(i)")  # 300 values the file lacks
    with pytest.raises(AnonymizeError, match=r"^301 values of column a are missing from hierarchy "):
        con.execute(f"ANONYMIZE t2 INTO out WITH (k = 2, qi = (a, b), method = 'lattice', hierarchies = (a = '{path}'))")
    con.execute(f"ANONYMIZE t2 INTO out WITH (epsilon = 1, delta = 1e-5, qi = (a, b), hierarchies = (a = '{path}'), "
                "levels = (a = 1, b = 0))")
    assert {a for (a,) in con.execute("SELECT DISTINCT a FROM out").fetchall()} == {"low", "high", "*"}
    result = _result(con, f"ANONYMIZE t2 INTO searched WITH (epsilon = 1, epsilon_search = 0.2, delta = 1e-5, "
                          f"qi = (a, b), hierarchies = (a = '{path}', b = 'intervals(2)'), metric = 'entropy')")
    assert json.loads(result["details"])["differential_privacy"]["uncovered_values"] == UNCOVERED_RULE
    assert con.execute("SELECT count(*) FROM searched WHERE a LIKE 'y%' OR a = 'zzz'").fetchone()[0] == 0 or \
        json.loads(result["details"])["differential_privacy"]["levels"]["a"] == 0
    assert [row[0] for row in _ledger_rows(con, "t2")] == ["ANONYMIZE", "ANONYMIZE"]
