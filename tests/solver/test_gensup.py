"""`gensup` (generalize, then suppress cells): the candidates it skips could not have won, so it
publishes what trying every suppression limit in full publishes (issue 18, target 3)."""

import json

import numpy as np
import pytest

from duckanon.pipeline.problem import prepare
from duckanon.solver import Instance, Request, _solve
from duckanon.solver.context import UNBOUNDED
from duckanon.solver.generalize import (GENSUP_LIMITS, GensupCannotWin, _gensup_at, generalization_loss, gensup_loss_bound,
                                        gensup_solution, lattice_of, loss_row_costs)

from support.checks import check_published
from support.data import SHARED
from support.database import connection_with


ADULT = SHARED / "adult"
QI = ["sex", "age", "race", "marital-status", "education", "workclass"]


def problem_for(con, options):
    qi = ", ".join(f'"{c}"' for c in QI)
    return prepare(con, f"ANONYMIZE adult WITH ({options}, qi = ({qi}), method = 'gensup', metric = 'loss', "
                        f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")


def suppression(request):
    return lambda rolled, context: _solve(Instance(rolled, request), "auto", context)


@pytest.fixture(scope="module")
def adult_third():
    """Every third row of Adult (10,054): the test below checks a definition that holds on any
    table, once per suppression limit; on the whole of Adult it took a minute a case under load."""
    yield from connection_with(f"CREATE TABLE adult AS SELECT * EXCLUDE (rn) FROM (SELECT row_number() OVER () AS rn, "
                               f"* FROM read_csv('{ADULT / 'adult.csv'}', delim=';')) WHERE rn % 3 = 0")


CASES = ["k = 10, suppression_limit = 0.05", "k = 3, suppression_limit = 0.01",
         "l = 3, l_variant = distinct, sensitive = occupation, suppression_limit = 0.04",
         "t = 0.2, sensitive = occupation, suppression_limit = 0.04"]


@pytest.mark.parametrize("options", CASES)
def test_gensup_publishes_the_best_of_every_limit_tried_in_full(adult_third, options):
    """Every limit searched on its own lattice and cell-suppressed, the lowest loss kept (the
    smallest limit among equals): the definition gensup's shortcuts must reproduce. Each
    candidate's loss is at least the bound gensup skips by."""
    problem = problem_for(adult_third, options)
    hist, hierarchies, request = problem.histogram, problem.domains.hierarchies, Request.of(problem.models)
    limit = problem.domains.suppression_limit
    costs = loss_row_costs(hist, hierarchies)
    full = []
    for each in sorted({limit, *GENSUP_LIMITS}):
        search = lattice_of(hist, hierarchies, request, each, "loss", cell_suppression_after=True).search()
        candidate = _gensup_at(hist, hierarchies, search, suppression(request), UNBOUNDED)
        loss = generalization_loss(hist, hierarchies, candidate, candidate.notes["levels"])
        assert gensup_loss_bound(hist, search.node, request, costs) <= loss + 1e-12
        full.append((loss, each, candidate.notes["levels"]))
    expected = min(full)
    solution = gensup_solution(hist, hierarchies, request, limit, "loss", suppress=suppression(request))
    assert (solution.notes["loss"], solution.notes["suppression_limit"]) == pytest.approx(expected[:2], abs=1e-12)
    assert solution.notes["levels"] == expected[2]


@pytest.mark.parametrize("method", ["gensup", "lattice"])
def test_statement_is_valid_and_reports_its_search(adult, method):
    """The published table satisfies the request (independent checker) and keeps every row
    (lattice: all but the removed ones); details name the nodes evaluated and the search's
    seconds."""
    qi = ", ".join(f'"{c}"' for c in QI)
    row = adult.execute(f"ANONYMIZE adult INTO adult_{method} WITH (k = 10, qi = ({qi}), method = '{method}', "
                        f"metric = 'loss', suppression_limit = 0.05, "
                        f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv', seed = 1)").fetchone()
    details = json.loads(row[-1])
    published = adult.execute(f"SELECT {qi} FROM adult_{method}").fetchall()
    assert len(published) == 30162 - details.get("removed_rows", 0)
    _, _, problems = check_published(published, list(range(len(QI))), k=10)
    assert problems == []
    assert details["nodes_evaluated"] > 0 and details["search_seconds"] >= 0


def test_gensup_inside_auto_suppresses_cells_without_simplex(adult):
    """2-anonymity: `auto` alone runs simplex first on these few classes, gensup's cell suppression
    does not (simplex is not bounded by work; gensup runs one per limit), and auto's choice says so."""
    from duckanon import solver

    problem = prepare(adult, "ANONYMIZE adult WITH (k = 2, qi = (sex, race, \"marital-status\"), method = 'auto', "
                             f"suppression_limit = 0.01, hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")
    hist, request = problem.histogram, Request.of(problem.models)
    assert solver._simplex_first(Instance(hist, request), UNBOUNDED)
    assert not solver._simplex_first(Instance(hist, request, simplex_first=False), UNBOUNDED)
    chosen = solver._lowest_loss_recoding(Instance(hist, request, domains=problem.domains), UNBOUNDED)
    assert chosen.method == "auto: gensup"  # (its loss 4.42e-05, the lattice's and mondrian's 6.63e-05)
    assert "simplex" not in chosen.notes["cell_suppression"]
    assert "gensup's cell suppression without simplex" in chosen.notes["choice"]
    rows = np.bincount(chosen.part_group, weights=chosen.part_count)
    assert rows.sum() == hist.n_rows and (rows[rows > 0] >= 2).all()  # every group of 2 rows or more


def test_gensup_runs_no_cell_suppression_when_its_bound_cannot_beat_the_best_so_far(adult_third):
    """`beat` (auto with hierarchies passes the lowest loss before gensup): at or below the
    smallest bound of gensup's nodes nothing is cell-suppressed and the refusal states that bound;
    above it, gensup publishes exactly what it publishes without `beat`."""
    problem = problem_for(adult_third, CASES[0])
    hist, hierarchies, request = problem.histogram, problem.domains.hierarchies, Request.of(problem.models)
    limit = problem.domains.suppression_limit
    costs = loss_row_costs(hist, hierarchies)
    bounds = [gensup_loss_bound(hist, lattice_of(hist, hierarchies, request, each, "loss",
                                                 cell_suppression_after=True).search().node, request, costs)
              for each in sorted({limit, *GENSUP_LIMITS})]
    lowest = min(bounds)
    ran = []

    def counted(rolled, context):
        ran.append(1)
        return suppression(request)(rolled, context)

    with pytest.raises(GensupCannotWin) as refused:
        gensup_solution(hist, hierarchies, request, limit, "loss", suppress=counted, beat=lowest)
    assert str(refused.value) == (f"not run: its loss would be at least {lowest:.4g}, not below the best "
                                  f"candidate's {lowest:.4g}")
    assert ran == []
    alone = gensup_solution(hist, hierarchies, request, limit, "loss", suppress=suppression(request))
    beaten = gensup_solution(hist, hierarchies, request, limit, "loss", suppress=counted, beat=lowest * (1 + 1e-9))
    assert ran and (beaten.notes["loss"], beaten.notes["levels"]) == (alone.notes["loss"], alone.notes["levels"])
    assert alone.notes["loss"] >= lowest
