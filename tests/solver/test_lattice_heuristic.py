"""The heuristic lattice search (solver/lattice_heuristic.py) against the exhaustive one on lattices
small enough for both (the heuristic forced by `exhaustive_nodes = 0`): its node is valid by an
independent check of the generalized rows, its value is never below the exhaustive optimum and
equals it on these fixtures, the same input gives the same node; and a statement over 200 QIs with
hierarchies gets the heuristic, not an error."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter, defaultdict

import pytest

from duckanon.pipeline.problem import prepare
from duckanon.solver.lattice import EXHAUSTIVE_NODES, Lattice
from duckanon.solver.lattice_heuristic import SEARCH_STEPS

from support.checks import check_published, check_table
from support.data import SHARED

ADULT = SHARED / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "workclass"]

# (privacy options, suppression limit, metric, gensup's cell suppression afterwards)
CASES = [
    ("k = 5", 0.0, "loss", False),
    ("k = 10", 0.05, "loss", False),
    ("k = 20", 0.05, "entropy", False),
    ("k = 5", 0.02, "discernibility", False),
    ("k = 20", 1.0, "loss", True),
    ("l = 3, l_variant = distinct, sensitive = occupation", 0.04, "loss", False),
    ("t = 0.2, sensitive = occupation", 0.04, "precision", False),
]


def lattice_of(con, options: str, limit: float, metric: str, after: bool) -> Lattice:
    qi = ", ".join(f'"{c}"' for c in QIS)
    problem = prepare(con, f"ANONYMIZE adult WITH ({options}, qi = ({qi}), method = 'lattice', "
                           f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")
    return Lattice(problem.histogram, [h.codes for h in problem.domains.hierarchies], problem.models, limit, metric,
                   cell_suppression_after=after)


def source_rows() -> list[dict]:
    with open(ADULT / "adult.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter=";"))


def labels_of(column: str) -> dict[str, list[str]]:
    """The ARX hierarchy file of `column`: value -> its labels, level by level."""
    with open(ADULT / f"adult_hierarchy_{column}.csv", encoding="utf-8") as f:
        return {row[0]: row for row in csv.reader(f, delimiter=";") if row}


def independent_check(rows, levels, limit: float, after: bool, **model) -> tuple[int, list[str]]:
    """Publish `rows` at `levels` from the hierarchy files alone: the classes that fail the model
    are removed (none when `after`: gensup suppresses their cells instead); returns the rows
    removed and the checker's problems with the rows published (within the limit, the request
    holds)."""
    hierarchies = [labels_of(column) for column in QIS]
    sensitive = model.pop("sensitive", None)
    classes = defaultdict(list)
    for row in rows:
        key = tuple(h[row[c]][level] for c, h, level in zip(QIS, hierarchies, levels))
        classes[key].append(row[sensitive] if sensitive else None)
    total = Counter(row[sensitive] for row in rows) if sensitive else None
    published, removed = [], 0
    for key, values in classes.items():
        one = [key + (value,) for value in values]
        if check_published(one, list(range(len(QIS))), len(QIS) if sensitive else None, total_sa=total, **model)[2]:
            removed += len(one)
            if not after:
                continue
        published += one
    if after:
        return removed, []
    problems = check_published(published, list(range(len(QIS))), len(QIS) if sensitive else None, total_sa=total,
                               **model)[2]
    if removed > math.floor(limit * len(rows) + 1e-9):
        problems.append(f"{removed} rows removed, more than the limit")
    return removed, problems


def model_of(options: str) -> dict:
    """The checker's arguments for the request of `options`."""
    parts = dict(item.split(" = ") for item in options.split(", "))
    model = {}
    if "k" in parts:
        model["k"] = int(parts["k"])
    if "l" in parts:
        model.update(l=int(parts["l"]), l_variant=parts.get("l_variant", "frequency"))
    if "t" in parts:
        model["t"] = float(parts["t"])
    if "sensitive" in parts:
        model["sensitive"] = parts["sensitive"]
    return model


@pytest.fixture(scope="module")
def rows():
    return source_rows()


@pytest.mark.parametrize("options, limit, metric, after", CASES, ids=[f"{c[0]}|{c[1]}|{c[2]}" for c in CASES])
def test_the_heuristic_finds_the_exhaustive_optimum(adult, rows, options, limit, metric, after):
    """With its default bound the heuristic reaches the exhaustive optimum on these lattices (720
    nodes), its node passes the independent check, and it proves the optimum when its best-first
    search runs out of nodes that could beat it."""
    exhaustive = lattice_of(adult, options, limit, metric, after).search()
    assert exhaustive.optimal and exhaustive.notes["search"] == "exhaustive"
    lattice = lattice_of(adult, options, limit, metric, after)
    heuristic = lattice.search(exhaustive_nodes=0)
    assert heuristic.notes["search"] == "heuristic" and heuristic.notes["evaluation_bound"] == SEARCH_STEPS
    assert heuristic.nodes == lattice.size == 720 and heuristic.evaluated <= SEARCH_STEPS
    assert math.isclose(heuristic.value, exhaustive.value, rel_tol=1e-9)
    removed, problems = independent_check(rows, heuristic.node.levels, limit, after, **model_of(options))
    assert problems == [] and removed == heuristic.node.suppressed_rows
    if heuristic.optimal:
        assert heuristic.evaluated < SEARCH_STEPS


@pytest.mark.parametrize("options, limit, metric, after", CASES, ids=[f"{c[0]}|{c[1]}|{c[2]}" for c in CASES])
@pytest.mark.parametrize("steps", [1, 8, 40])
def test_a_short_bound_gives_a_valid_node_no_better_than_the_optimum(adult, rows, options, limit, metric, after,
                                                                       steps):
    """Cut short, the heuristic still publishes a node that passes the independent check, of a
    value at least the optimum's, within its bound (the top node is its first)."""
    optimum = lattice_of(adult, options, limit, metric, after).search().value
    heuristic = lattice_of(adult, options, limit, metric, after).search(exhaustive_nodes=0, steps=steps)
    assert heuristic.evaluated <= steps
    assert heuristic.value >= optimum - 1e-9 * max(1.0, abs(optimum))
    if heuristic.optimal:  # (its best-first search ran out of nodes that could beat it)
        assert math.isclose(heuristic.value, optimum, rel_tol=1e-9)
    removed, problems = independent_check(rows, heuristic.node.levels, limit, after, **model_of(options))
    assert problems == [] and removed == heuristic.node.suppressed_rows
    if steps == 1:
        assert heuristic.node.levels == tuple(lattice_of(adult, options, limit, metric, after).heights)


@pytest.mark.parametrize("steps", [25, SEARCH_STEPS])
def test_the_heuristic_is_deterministic(adult, steps):
    """Two searches of the same input (two lattices) evaluate the same nodes and pick the same one."""
    first = lattice_of(adult, "k = 10", 0.05, "loss", False).search(exhaustive_nodes=0, steps=steps)
    second = lattice_of(adult, "k = 10", 0.05, "loss", False).search(exhaustive_nodes=0, steps=steps)
    assert (first.node.levels, first.value, first.evaluated) == (second.node.levels, second.value, second.evaluated)


def test_the_exhaustive_search_runs_up_to_its_bound(adult):
    """A lattice of at most EXHAUSTIVE_NODES nodes is searched exhaustively; one node fewer allowed
    than it has, heuristically."""
    lattice = lattice_of(adult, "k = 5", 0.0, "loss", False)
    assert lattice.search(exhaustive_nodes=lattice.size).notes["search"] == "exhaustive"
    assert lattice.search(exhaustive_nodes=lattice.size - 1).notes["search"] == "heuristic"
    assert EXHAUSTIVE_NODES == 100_000


WIDE = 200


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """200 integer QIs (0..19, interval hierarchies of four levels: 4^200 nodes) on 400 rows: the
    first three spread, the others repeating every 4 rows, so most columns can stay fine."""
    import duckanon

    con = duckanon.connect()
    spread = [f"(hash(i * {j + 7}) % 20)::INTEGER AS q{j}" for j in range(3)]
    repeating = [f"((i * {j + 1}) % 4)::INTEGER AS q{j}" for j in range(3, WIDE)]
    con.execute(f"CREATE TABLE t AS SELECT {', '.join(spread + repeating)} FROM range(400) r(i)")
    return con


def test_a_statement_over_200_qis_gets_the_heuristic(wide):
    qi = [f"q{j}" for j in range(WIDE)]
    row = wide.execute(f"ANONYMIZE t WITH (k = 5, qi = ({', '.join(qi)}), method = 'lattice', "
                       f"hierarchies = 'intervals(5, 10)', suppression_limit = 0.05)").fetchone()
    details = json.loads(row[-1])
    assert row[5] == "lattice" and row[6] is False  # method, optimal
    assert "optimal_for" not in details  # nothing proven, so nothing is said to be optimal for anything
    assert details["search"] == "heuristic" and details["lattice_nodes"] == 4 ** WIDE
    assert details["evaluation_bound"] == SEARCH_STEPS and 0 < details["nodes_evaluated"] <= SEARCH_STEPS
    assert "4^200" not in details["search_reason"] and "more than the 100,000" in details["search_reason"]
    assert len(details["levels"]) == WIDE and details["removed_rows"] <= 20
    assert check_table(wide, "t_anon", "t", qi, k=5) == []
    rows = dict(wide.execute(f"EXPLAIN ANONYMIZE t WITH (k = 5, qi = ({', '.join(qi)}), method = 'lattice', "
                             f"hierarchies = 'intervals(5, 10)', suppression_limit = 0.05)").fetchall())
    assert rows["lattice search"].startswith("heuristic: the lattice has 2.582e+120 nodes, more than the 100,000")
    assert rows["optimum proven within the time limit"] == "no: the heuristic lattice search did not prove its node optimal"


def test_a_time_limit_stops_the_heuristic_with_its_best_node(adult, rows):
    """A deadline already passed: the heuristic stops at its first clock read (every 16
    evaluations) with the best node so far, valid, and says the time limit cut it."""
    import time

    from duckanon.solver.context import SolveContext

    context = SolveContext(deadline=time.perf_counter())
    result = lattice_of(adult, "k = 10", 0.05, "loss", False).search(context, exhaustive_nodes=0)
    assert result.evaluated == 16 and not result.optimal
    assert result.notes["time_limit"] == "reached: the best node found so far" and context.cuts == ["lattice search"]
    assert independent_check(rows, result.node.levels, 0.05, False, k=10)[1] == []
