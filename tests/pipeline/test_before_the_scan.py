"""Names resolved before the scan, and a problem built once (issue 36).

Every statement the DuckDB backend runs is recorded (DuckDBBackend._run, the one place its SQL
goes to DuckDB), and the GROUP BYs that read the source are counted: a misspelled `weights` or
`hierarchies` column is refused before any of them, and a sweep of three values runs one.
"""

from __future__ import annotations

import pytest

import duckanon
from duckanon.backends.duckdb import DuckDBBackend
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import ColumnFacts, column_facts
from duckanon.pipeline.materialize import check_published_rows
from duckanon.pipeline.plan import bind
from duckanon.pipeline.problem import prepare
from duckanon.sql import statement_for

SOURCE = "scanned_source"
SWEPT_COLUMNS = ("stars", "suppressed_rows", "removed_rows", "classes", "min_class_size", "highest_risk",
                 "average_risk", "method", "optimal")


@pytest.fixture
def recorded(monkeypatch):
    """A connection with the table SOURCE, and the list of every SQL statement its backend runs."""
    con = duckanon.connect()
    con.execute(f"CREATE TABLE {SOURCE} AS SELECT i % 7 AS zip, i % 5 AS age, i % 3 AS edu, "
                f"['flu', 'cold', 'none'][i % 3 + 1] AS disease FROM range(300) r(i)")
    ran = []
    real = DuckDBBackend._run

    def recording(self, sql, parameters=None):
        ran.append(sql)
        return real(self, sql, parameters)

    monkeypatch.setattr(DuckDBBackend, "_run", recording)
    return con, ran


def group_bys_of_the_source(ran: list[str]) -> int:
    """How many of the statements run grouped the source table (the histogram's GROUP BY)."""
    return sum(1 for sql in ran if f'"{SOURCE}"' in sql and "GROUP BY" in sql.upper())


@pytest.mark.parametrize("options, message", [
    ("weights = (age = 2, agee = 1)",
     "weights names column agee, which is not a quasi-identifier (quasi-identifiers: zip, age, edu)"),
    ("method = lattice, hierarchies = (zip = 'intervals(5)', agee = 'intervals(5)')",
     "hierarchies names column agee, which is not a quasi-identifier"),
    ("method = lattice, hierarchies = (zip = 'intervals(x)')", "intervals: 'x' is not a number"),
    ("method = lattice, hierarchies = (zip = 'intervalz(5)')",
     "unknown hierarchy builder 'intervalz'; did you mean 'intervals'?"),
])
def test_a_misspelled_weights_or_hierarchies_name_is_refused_before_any_scan(recorded, options, message):
    con, ran = recorded
    with pytest.raises(AnonymizeError) as refused:
        con.execute(f"ANONYMIZE {SOURCE} WITH (k = 2, qi = (zip, age, edu), {options})")
    assert str(refused.value) == message
    assert group_bys_of_the_source(ran) == 0
    # nothing read the source's rows: the statements that name it are the catalog's and LIMIT 0 probes
    assert all("LIMIT 0" in sql.upper() for sql in ran if f'"{SOURCE}"' in sql and "SELECT" in sql.upper()
               and "duckdb_" not in sql)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name <> ?", [SOURCE]).fetchone()[0] == 0


def test_the_same_statement_spelled_right_runs_one_group_by(recorded):
    con, ran = recorded
    con.execute(f"ANONYMIZE {SOURCE} WITH (k = 2, qi = (zip, age, edu), weights = (age = 2), method = lattice, "
                "hierarchies = (zip = 'intervals(5)', age = 'intervals(5)'))")
    assert group_bys_of_the_source(ran) == 1


@pytest.mark.parametrize("swept, values", [("k", (2, 3, 5)), ("l", (2, 3)), ("t", (0.2, 0.5, 0.9))])
def test_a_sweep_runs_one_group_by_and_solves_each_value_as_its_own_dry_run(recorded, swept, values):
    con, ran = recorded
    options = "qi = (zip, age, edu), sensitive = disease, method = greedy, seed = 1"
    fixed = "k = 2" if swept != "k" else "l = 2"
    listed = f"{swept} = ({', '.join(map(str, values))})"
    result = con.execute(f"EXPLAIN ANONYMIZE {SOURCE} WITH ({listed}, {fixed}, {options})")
    names, rows = [d[0] for d in result.description], result.fetchall()
    assert group_bys_of_the_source(ran) == 1
    assert [row[0] for row in rows] == list(values)
    for value, row in zip(values, rows):  # each row is what a dry run of that value alone finds
        alone = dict(con.execute(f"EXPLAIN ANONYMIZE {SOURCE} WITH ({swept} = {value}, {fixed}, {options})").fetchall())
        swept_row = dict(zip(names, row))
        assert swept_row["stars"] == int(alone["estimated stars"].split(" of ")[0])
        assert swept_row["suppressed_rows"] == int(alone["estimated suppressed rows"])
        assert swept_row["method"] == alone["method that would run"]
        assert swept_row["classes"] == int(alone["published classes"].split(" ")[0])


def test_the_report_of_a_sweep_solves_the_release_problem_without_a_group_by_of_its_own(recorded, tmp_path):
    pytest.importorskip("matplotlib")
    con, ran = recorded
    summary = con.execute(f"ANONYMIZE {SOURCE} WITH (k = (5, 2, 10), qi = (zip, age, edu), sensitive = disease, "
                          f"method = greedy, seed = 1, report = '{tmp_path / 'release.html'}')").fetchone()
    assert group_bys_of_the_source(ran) == 1  # the release's own; the sweep's three values solve it again
    assert (tmp_path / "release.html").exists() and summary[2] >= 5


def test_the_collations_fact_reaches_the_check_of_the_published_rows():
    """The check before COMMIT compares the published QI vectors byte by byte (COLLATE c) where
    the engine has collations: a NOCASE column's 'Ann' published where the keyed table says 'ann'
    is a changed source. (The check used to get a plan that build_cells never wrote its facts
    into: on DuckDB it read `collations` as False and hashed both alike.)"""
    con = duckanon.connect()
    raw = con.duckdb
    raw.execute("CREATE TABLE src (n VARCHAR COLLATE NOCASE, b INTEGER)")
    raw.execute("INSERT INTO src VALUES ('ann', 1), ('ann', 1)")
    statement = "ANONYMIZE src INTO out WITH (k = 2, qi = (n, b))"
    assert prepare(con, statement).facts.collations  # what publish hands the check
    backend = DuckDBBackend(raw)
    plan = bind(backend, statement_for(statement))
    facts = column_facts(backend, plan.source, plan.published)
    raw.execute("CREATE TABLE out (n VARCHAR COLLATE NOCASE, b VARCHAR)")
    raw.execute("INSERT INTO out VALUES ('Ann', '1'), ('Ann', '1')")
    raw.execute("CREATE TEMP TABLE keyed AS SELECT 'ann' AS o0, '1' AS o1, 1 AS lo, 2 AS hi")
    with pytest.raises(AnonymizeError, match="in other classes than the ones checked"):
        check_published_rows(backend, plan, facts, 2, "keyed")
    check_published_rows(backend, plan, ColumnFacts(), 2, "keyed")  # without the fact, NOCASE hashes them alike


@pytest.mark.parametrize("options", [
    "epsilon = 1, delta = 1e-5, qi = (zip, age)",
    "epsilon = 1, delta = 1e-5, qi = (zip, age), hierarchies = (zip = 'intervals(2)', age = 'intervals(2)'), "
    "epsilon_search = 0.3",
])
def test_explain_of_a_private_statement_reads_no_row(recorded, options):
    """A dry run of the mechanism would be a release the user sees, spending epsilon again with no
    record (found by the DP attack: EXPLAINs with a search, then the levels it chose published as
    'fixed'): EXPLAIN shows the plan and the derived parameters only."""
    con, ran = recorded
    items = dict(con.execute(f"EXPLAIN ANONYMIZE {SOURCE} WITH ({options})").fetchall())
    assert not any(f'"{SOURCE}"' in sql and "SELECT" in sql.upper() and "LIMIT 0" not in sql.upper() for sql in ran)
    assert items["this dry run"].startswith("none: EXPLAIN draws no sample and runs no search")
    assert "classes below k = " in items["differential privacy"]
    assert "published classes" not in items and "estimated stars" not in items
