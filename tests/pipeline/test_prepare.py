"""pipeline.problem.prepare: the solver's input for a statement, as ANONYMIZE builds it, with nothing written."""

from __future__ import annotations

import pytest

import duckanon
from duckanon.pipeline.problem import prepare
from duckanon.solver import solve

from support.database import result_row

STATEMENT = "ANONYMIZE hospital WITH (k = 3, l = 2, qi = (zipcode, age, education), sensitive = disease, method = exact)"


def tables(con):
    return con.duckdb.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


def test_prepare_gives_what_anonymize_solves_and_writes_nothing(con):
    before = tables(con)
    problem = prepare(con, STATEMENT)
    assert tables(con) == before
    assert problem.histogram.n_rows == 10 and problem.plan.qi == ["zipcode", "age", "education"]
    assert [type(m).__name__ for m in problem.models] == ["KAnonymity", "FrequencyLDiversity"]
    assert problem.patterns is None and problem.domains is None
    solution = solve(problem.histogram, problem.models, "exact", problem.patterns, domains=problem.domains)
    summary = result_row(con, STATEMENT)
    assert (solution.stars, solution.optimal) == (summary["stars"], summary["optimal"]) == (summary["stars"], True)


def test_prepare_builds_domains_for_generalizing_methods(con):
    problem = prepare(con, "ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), method = lattice, "
                           "hierarchies = (zipcode = 'prefix'))")
    assert problem.domains is not None and len(problem.domains.hierarchies) == 2


def test_prepare_takes_one_anonymize_statement(con):
    with pytest.raises(duckanon.AnonymizeError) as refused:
        prepare(con, "EXPLAIN ANONYMIZE hospital WITH (k = 2)")
    assert str(refused.value) == "prepare() takes one ANONYMIZE statement"
