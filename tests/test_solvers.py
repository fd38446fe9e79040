"""Solver core on the fixtures of ../shared/ALGORITHMS.md, checked against known optima."""

import csv
from itertools import product

import numpy as np
import pytest

from conftest import HOSPITAL
from duckanon.solver import Histogram, KAnonymity, LDiversity, TCloseness, solve
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.greedy import greedy
from duckanon.solver.mapprox import mapprox
from duckanon.solver.partition import STAR
from duckanon.solver.models import all_satisfied


def hospital_digits():
    rows = list(csv.DictReader(open(HOSPITAL)))
    qi = [tuple(r["zipcode"]) + tuple(r["age"]) + (r["education"],) for r in rows]
    return qi, [r["disease"] for r in rows]


def independent_stars(hist, solution):
    """Recount stars from membership, without using the solution's representatives."""
    total = 0
    for g in np.unique(solution.part_group):
        members = solution.part_class[solution.part_group == g]
        counts = solution.part_count[solution.part_group == g]
        varying = sum(len(set(hist.codes[members, j])) > 1 for j in range(hist.m))
        total += varying * counts.sum()
    return total


def assert_valid(hist, solution, models):
    sizes = solution.group_sizes()
    used = sizes > 0
    assert all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used]).all()
    # every row of every class is published exactly once, with its own SA value
    placed = np.zeros_like(hist.sa_counts)
    np.add.at(placed, (solution.part_class, solution.part_sa), solution.part_count)
    assert (placed == hist.sa_counts).all()
    assert solution.stars == independent_stars(hist, solution)


def test_hospital_digits_k3_mapprox_within_m_times_opt_and_greedy_valid():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    models = [KAnonymity(3)]
    approx = solve(hist, models, "mapprox")
    assert_valid(hist, approx, models)
    assert approx.stars <= 8 * 54
    assert approx.stars == 70  # case 1: all ten singleton classes merge, 7 varying columns
    greedy_solution = solve(hist, models, "greedy")
    assert_valid(hist, greedy_solution, models)
    assert greedy_solution.stars >= 54
    assert greedy_solution.stars == 54  # greedy happens to find the optimum here


def test_hospital_digits_k2_l2_t_valid_and_not_below_optimum():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    total = tuple(int(x) for x in hist.sa_counts.sum(axis=0))
    cases = [([KAnonymity(2)], 46), ([LDiversity(2)], 50), ([TCloseness(0.3, total)], 52),
             ([TCloseness(0.1, total)], 64), ([TCloseness(0.0, total)], 70)]
    for models, optimum in cases:
        for method in ("auto", "mapprox", "greedy", "merge"):
            solution = solve(hist, models, method)
            assert_valid(hist, solution, models)
            assert solution.stars >= optimum, (models, method)
    assert solve(hist, [TCloseness(0.0, total)], "auto").stars == 70


def test_lower_bound_is_below_the_known_optima():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    assert k_anonymity_lower_bound(hist, 2) <= 46
    assert k_anonymity_lower_bound(hist, 3) <= 54
    assert k_anonymity_lower_bound(hist, 3) >= 10  # every row is alone in its class: >= 1 star each


BLOCKI_WILLIAMS = [
    ("000,001,011,111,110", 2, 8),
    ("000,000,001,111,111,101", 2, 2),
    ("000,000,001,111,111,101", 3, 6),
    ("000,001,011,111,110,100,010", 2, 10),
    ("1100,1010,1001", 3, 9),
    ("110,101,011", 3, 9),
]


@pytest.mark.parametrize("rows,k,optimum", BLOCKI_WILLIAMS)
def test_blocki_williams_instances(rows, k, optimum):
    hist = Histogram.from_rows([tuple(r) for r in rows.split(",")])
    models = [KAnonymity(k)]
    for method in ("auto", "mapprox", "greedy", "merge"):
        solution = solve(hist, models, method)
        assert_valid(hist, solution, models)
        assert optimum <= solution.stars <= hist.m * optimum
        assert solution.lower_bound <= optimum
        if solution.optimal:
            assert solution.stars == optimum


def bredereck_tightness(k=3, m=3):
    rows = [("1",) * m] * k
    for i in range(m):
        for copy in range(k - 1):
            row = ["1"] * m
            row[i] = f"u{i}_{copy}"
            rows.append(tuple(row))
    return rows


def test_bredereck_greedy_tightness_instance_costs_18():
    hist = Histogram.from_rows(bredereck_tightness())
    one_star = [[j] for j in range(3)]
    patterns = one_star + [[0, 1, 2]]
    solution = solve(hist, [KAnonymity(3)], "greedy", patterns)
    assert_valid(hist, solution, [KAnonymity(3)])
    assert solution.stars == 18  # the optimum is 9 (ALGORITHMS.md section 3)


def test_greedy_with_user_patterns_only_uses_those_patterns():
    hist = Histogram.from_rows(bredereck_tightness())
    solution = greedy(hist, 3, [[0], [1], [2], [0, 1, 2]])
    starred = {tuple(np.flatnonzero(rep == STAR)) for rep in solution.group_rep}
    assert starred <= {(), (0,), (1,), (2,), (0, 1, 2)}


def test_mapprox_cases():
    # case 2: small classes have 2 rows, large class has spare rows
    hist = Histogram.from_rows([("a", "x")] * 6 + [("b", "x"), ("c", "y")])
    solution = mapprox(hist, 3)
    assert sorted(solution.group_sizes()) == [3, 5]
    # case 3: no spare rows: the smallest large class is merged whole
    hist = Histogram.from_rows([("a", "x")] * 3 + [("b", "y")])
    solution = mapprox(hist, 3)
    assert list(solution.group_sizes()) == [4]


def test_empty_and_infeasible():
    from duckanon.errors import AnonymizeError

    hist = Histogram.from_rows([("a",), ("b",)], ["x", "x"])
    with pytest.raises(AnonymizeError, match="greater than the number of distinct"):
        solve(hist, [LDiversity(2)])
    with pytest.raises(AnonymizeError, match="greater than the number of rows"):
        solve(hist, [KAnonymity(3)])
    hist = Histogram.from_rows([("a",), ("b",), ("c",)], ["x", "x", "y"])
    with pytest.raises(AnonymizeError, match="infeasible"):
        solve(hist, [LDiversity(2)])
    empty = Histogram(codes=np.zeros((0, 2)), sa_counts=np.zeros((0, 1)))
    assert solve(empty, [KAnonymity(5)]).stars == 0


@pytest.mark.parametrize("seed", range(40))
def test_random_small_tables_all_methods_valid(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 30)), int(rng.integers(1, 5))
    rows = [tuple(str(rng.integers(0, 3)) for _ in range(m)) for _ in range(n)]
    sa = [str(rng.integers(0, 3)) for _ in range(n)]
    hist = Histogram.from_rows(rows, sa)
    total = tuple(int(x) for x in hist.sa_counts.sum(axis=0))
    k = int(rng.integers(1, min(n, 5) + 1))
    requests = [[KAnonymity(k)], [KAnonymity(k), TCloseness(float(rng.uniform(0, 1)), total)]]
    distinct = len(set(sa))
    if distinct >= 2 and 2 * max(hist.sa_counts.sum(axis=0)) <= n:
        requests.append([LDiversity(2)])
        requests.append([KAnonymity(k), LDiversity(2, "distinct")])
    for models in requests:
        for method in ("auto", "mapprox", "greedy", "merge"):
            solution = solve(hist, models, method)
            assert_valid(hist, solution, models)
            if solution.lower_bound is not None:
                assert solution.lower_bound <= solution.stars


def test_implied_group_sizes():
    assert LDiversity(3).min_group_size() == 3
    # table distribution (3, 3, 4)/10: one row has EMD 0.6 or 0.7, two rows >= 0.4, three rows 0.1 ...
    t = TCloseness(0.3, (3, 3, 4))
    assert t.min_group_size() == 2  # (1, 0, 1)/2 has EMD 0.5 * (0.2 + 0.3 + 0.1) = 0.3
    assert TCloseness(0.1, (3, 3, 4)).min_group_size() == 3
    assert TCloseness(0.0, (3, 3, 4)).min_group_size() == 10
    for size, model in ((2, t), (3, TCloseness(0.1, (3, 3, 4)))):
        # brute force: no composition of a smaller size is t-close
        for s in range(1, size):
            for a in range(s + 1):
                for b in range(s + 1 - a):
                    counts = np.array([[a, b, s - a - b]])
                    assert not model.satisfied(np.array([s]), counts)
