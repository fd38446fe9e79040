"""Solver core on the fixtures of ../shared/ALGORITHMS.md, checked against known optima."""

from __future__ import annotations

import time
from itertools import product

import numpy as np
import pytest

import duckanon
from duckanon.errors import AnonymizeError
from duckanon.solver import Histogram, KAnonymity, LDiversity, METHODS, TCloseness, solve
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.context import DeadlineExpired, SolveContext
from duckanon.solver.greedy import EXACT_PATTERN_LIMIT, carving_greedy, greedy
from duckanon.solver.heuristics import best_heuristic
from duckanon.solver.histogram import Histogram
from duckanon.solver.lattice import Lattice
from duckanon.solver.local import local_search
from duckanon.solver.mapprox import mapprox
from duckanon.solver.models import CustomDistanceTCloseness, DistinctLDiversity, EntropyLDiversity, EqualDistanceTCloseness, FrequencyLDiversity, HierarchicalDistanceTCloseness, KAnonymity, LDiversity, OrderedDistanceTCloseness, RecursiveCLDiversity, TCloseness, all_satisfied, l_diversity, t_closeness
from duckanon.solver.partition import STAR
from duckanon.solver.repair import repair
from duckanon.solver.request import Request

from support.data import hospital_digits
from support.instances import BLOCKI_WILLIAMS, bredereck_tightness
from support.solver_checks import assert_valid


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


def test_bredereck_greedy_tightness_instance_costs_18():
    hist = Histogram.from_rows(bredereck_tightness())
    one_star = [[j] for j in range(3)]
    patterns = one_star + [[0, 1, 2]]
    solution = solve(hist, [KAnonymity(3)], "greedy", patterns)
    assert_valid(hist, solution, [KAnonymity(3)])
    assert solution.stars == 18  # the optimum is 9 (ALGORITHMS.md section 3)


def test_greedy_with_user_patterns_never_counts_values_by_code():
    """With patterns, greedy never asks which columns are alive: codes as large as 2^40 (a solver
    API caller's own) cost nothing (counting rows per value would take terabytes)."""
    big = 1 << 40
    hist = Histogram(codes=np.array([[0, big], [1, big], [2, 5]]), sa_counts=np.array([[3], [3], [3]]))
    solution = greedy(hist, 3, [[0]])
    assert solution.stars == 0 and sorted(solution.part_group.tolist()) == [0, 1, 2]


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


# --------------------------------------------------------------------------------------------------
# Privacy models: one class per variant, capability flags, the factories


TOTAL = (3, 3, 4)


@pytest.mark.parametrize("model, cls, needs_sa, monotone, milp, text", [
    (KAnonymity(3), KAnonymity, False, True, True, "3-anonymity"),
    (LDiversity(2), FrequencyLDiversity, True, False, True, "frequency 2-diversity"),
    (LDiversity(2, "distinct"), DistinctLDiversity, True, False, True, "distinct 2-diversity"),
    (LDiversity(2, "entropy"), EntropyLDiversity, True, False, False, "entropy 2-diversity"),
    (LDiversity(3, "recursive", 1.5), RecursiveCLDiversity, True, False, False, "recursive (1.5, 3)-diversity"),
    (TCloseness(0.2, TOTAL), EqualDistanceTCloseness, True, False, True, "0.2-closeness (equal distance)"),
    (TCloseness(0.2, TOTAL, "ordered"), OrderedDistanceTCloseness, True, False, True,
     "0.2-closeness (ordered distance)"),
    (TCloseness(0.25, TOTAL, "hierarchical", hierarchy=None), HierarchicalDistanceTCloseness, True, False, True,
     "0.25-closeness (hierarchical distance)"),
    (TCloseness(0.2, TOTAL, "custom", ground=np.ones((3, 3)) - np.eye(3)), CustomDistanceTCloseness, True, False,
     True, "0.2-closeness (custom distance)"),
])
def test_each_variant_is_a_class_with_its_capabilities(model, cls, needs_sa, monotone, milp, text):
    assert type(model) is cls
    assert (model.needs_sa, model.monotone_with_suppression, model.milp_encodable) == (needs_sa, monotone, milp)
    assert model.closed_under_merging and not model.needs_population
    assert str(model) == text  # the texts of user-facing messages


def test_factories_build_the_variant_named_by_the_statements_word():
    assert l_diversity(3, "entropy") == EntropyLDiversity(3) == LDiversity(3, "entropy")
    assert l_diversity(3, "recursive", 2.0) == RecursiveCLDiversity(3, c=2.0)
    assert t_closeness(0.3, TOTAL, "ordered", order=(2, 1, 0)) == OrderedDistanceTCloseness(0.3, TOTAL, order=(2, 1, 0))
    assert t_closeness(0.3, TOTAL) == EqualDistanceTCloseness(0.3, TOTAL) != OrderedDistanceTCloseness(0.3, TOTAL)
    assert LDiversity(2) != LDiversity(2, "distinct") and LDiversity(2) != LDiversity(3)
    assert len({LDiversity(2), FrequencyLDiversity(2), KAnonymity(2)}) == 2
    with pytest.raises(AnonymizeError, match="^l_variant = recursive needs a positive c \\(add c = <number>\\)$"):
        LDiversity(3, "recursive")
    with pytest.raises(AnonymizeError, match="^unknown l_variant 'huge'"):
        l_diversity(3, "huge")
    with pytest.raises(AttributeError):
        KAnonymity(2).k = 3  # models are values


def test_only_the_equal_distance_bounds_the_group_size_and_only_linear_forms_are_closed_forms():
    assert TCloseness(0.3, TOTAL, "ordered").min_group_size() == 1
    assert TCloseness(0.3, TOTAL).min_group_size() == 2
    assert TCloseness(0.3, TOTAL).linear_emd and TCloseness(0.3, TOTAL, "ordered").linear_emd
    assert not TCloseness(0.3, TOTAL, "ordered", order=(2, 0, 1)).linear_emd


@pytest.mark.parametrize("model, counts, expected", [
    (KAnonymity(3), [1, 1, 0], False), (KAnonymity(3), [2, 1, 0], True),
    (LDiversity(2), [2, 1, 0], False), (LDiversity(2), [2, 2, 0], True),
    (LDiversity(3, "distinct"), [5, 1, 0], False), (LDiversity(2, "distinct"), [5, 1, 0], True),
    (LDiversity(2, "entropy"), [1, 1, 0], True), (LDiversity(2, "entropy"), [3, 1, 0], False),
    (LDiversity(2, "recursive", 2.0), [3, 2, 0], True), (LDiversity(2, "recursive", 1.0), [3, 2, 0], False),
    (TCloseness(0.1, TOTAL), [3, 3, 4], True), (TCloseness(0.1, TOTAL), [1, 0, 0], False),
])
def test_ok_on_one_group_agrees_with_satisfied(model, counts, expected):
    assert model.ok(counts, sum(counts)) is expected
    assert bool(model.satisfied(np.array([sum(counts)]), np.array([counts]))[0]) is expected
    # the repair's deficit is 0 exactly on satisfying groups (a frequency proxy for entropy and recursive l)
    if not isinstance(model, (EntropyLDiversity, RecursiveCLDiversity)):
        assert bool(model.deficit(np.array([sum(counts)]), np.array([counts]))[0] == 0) is expected


def test_infeasibility_messages_are_unchanged():
    total = np.array([5, 1])
    with pytest.raises(AnonymizeError, match="^frequency 2-diversity is infeasible: the most frequent sensitive value "
                                             "covers 5 of 6 rows, more than 1/2 of the table$"):
        LDiversity(2).check_feasible(total)
    with pytest.raises(AnonymizeError, match="^l = 3 is greater than the number of distinct sensitive values \\(2\\)$"):
        LDiversity(3, "entropy").check_feasible(total)
    with pytest.raises(AnonymizeError, match="^entropy 2-diversity is infeasible: the whole table as one group does "
                                             "not satisfy it$"):
        LDiversity(2, "entropy").check_feasible(total)


# --------------------------------------------------------------------------------------------------
# Request: what the solvers derive from the models, once


def test_request_derivations_on_known_cases():
    request = Request([KAnonymity(3), LDiversity(4), LDiversity(2, "distinct"), TCloseness(0.5, TOTAL)])
    assert (request.k, request.min_group_size, request.k_only, request.needs_sa) == (3, 4, False, True)
    assert (request.frequency_l, request.distinct_l) == (4, 2)
    assert request.k_anonymity == (KAnonymity(3),) and len(request.diversity) == 2
    assert request.closeness == (TCloseness(0.5, TOTAL),)
    assert not request.monotone_with_suppression and request.closed_under_merging and not request.needs_population
    assert request.not_milp_encodable is None
    assert request.only(KAnonymity, LDiversity, TCloseness) and not request.only(KAnonymity, LDiversity)

    k_alone = Request([KAnonymity(5), KAnonymity(2)])
    assert (k_alone.k, k_alone.min_group_size, k_alone.k_only, k_alone.monotone_with_suppression) == (5, 5, True, True)
    assert (k_alone.frequency_l, k_alone.distinct_l, k_alone.diversity, k_alone.closeness) == (0, 0, (), ())

    empty = Request([])
    assert (empty.k, empty.min_group_size, empty.k_only, bool(empty)) == (1, 1, True, False)

    entropy = Request([LDiversity(3, "entropy"), LDiversity(2, "recursive", 2.0)])
    assert entropy.not_milp_encodable == LDiversity(3, "entropy") and (entropy.k, entropy.min_group_size) == (1, 3)
    # a t-close group needs 2 rows here: the implied size comes from every model
    assert Request([KAnonymity(1), TCloseness(0.3, TOTAL)]).min_group_size == 2
    # a Request is a sequence of its models, and of() does not wrap one twice
    assert list(request) == list(request.models) and Request.of(request) is request


# --------------------------------------------------------------------------------------------------
# SolveContext: the deadline and the progress callback, passed explicitly


def test_context_narrowing_keeps_the_earlier_deadline():
    now = time.perf_counter()
    context = SolveContext(now + 10)
    assert context.narrowed(now + 20) is context and context.narrowed(None) is context
    assert context.narrowed(now + 5).deadline == now + 5
    assert SolveContext().narrowed(now + 5).deadline == now + 5
    assert SolveContext().seconds_left() is None and not SolveContext().expired()
    passed = SolveContext(now - 1)
    assert passed.expired() and passed.seconds_left() == 0.0
    with pytest.raises(DeadlineExpired):
        passed.check()


def random_hist(seed=3, rows=400, m=4):
    rng = np.random.default_rng(seed)
    return Histogram.from_rows([tuple(str(v) for v in rng.integers(0, 10, size=m)) for _ in range(rows)])


def test_an_expired_context_stops_searches_with_a_valid_solution():
    hist = random_hist()
    models = [KAnonymity(4)]
    passed = SolveContext(time.perf_counter() - 1)
    # the portfolio: nothing finished, the whole table as one group
    fallback = best_heuristic(hist, models, context=passed)
    assert fallback.method == "whole table" and fallback.group_sizes().max() == 400
    # local search: nothing to improve with
    assert local_search(hist, solve(hist, models, "greedy"), models, passed) is None
    # the lattice (6 QIs, 4 levels each): the best node found before the first check, valid and
    # not proven optimal; without a deadline the search goes on and proves its optimum
    wide = random_hist(rows=400, m=6)
    levels = np.array([[v, v // 2, v // 5, 0] for v in range(10)])
    codes = [levels[: int(wide.codes[:, j].max()) + 1] for j in range(wide.m)]
    stopped = Lattice(wide, codes, models, 0.5, "loss").search(passed)
    proven = Lattice(wide, codes, models, 0.5, "loss").search()
    assert not stopped.optimal and proven.optimal and stopped.evaluated < proven.evaluated
    assert stopped.value >= proven.value
    node = stopped.node
    assert all_satisfied(models, node.sa_counts.sum(axis=1)[node.ok], node.sa_counts[node.ok]).all()
    assert node.suppressed_rows <= 0.5 * wide.n_rows


def test_progress_reaches_the_callback_given_to_solve():
    hist = random_hist(rows=60, m=3)
    seen = []
    solution = solve(hist, [KAnonymity(3)], "exact", progress=lambda phase, info: seen.append((phase, dict(info))))
    phases = [phase for phase, _ in seen]
    assert phases.index("exact: kernel and model") < phases.index("exact: MILP (HiGHS)") < phases.index("exact: MILP done")
    assert dict(seen)["exact: MILP done"] == {"upper": solution.stars, "lower": solution.lower_bound, "proven": True}
    # nobody listening: the same solution
    assert solve(hist, [KAnonymity(3)], "exact").stars == solution.stars


# --------------------------------------------------------------------------------------------------
# `auto` on many quasi-identifiers and the merging repair
#
#
# 1. `auto` on many quasi-identifiers ran for minutes: greedy (and carve) enumerated all 2^m
#    patterns, and `exact`'s pattern closure was built even when it had hundreds of thousands of
#    candidates. Greedy now draws its patterns from the data beyond 12 alive columns, and `auto`
#    skips exact when building its model is clearly too costly.
# 2. Methods that ignore `patterns` (merge, topdown, carve) published classes outside every
#    pattern; every method now honours the patterns or refuses them with a one-line AnonymizeError.
# --------------------------------------------------------------------------------------------------
def _wide_histogram(m: int, rows: int, seed: int = 0) -> Histogram:
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, 2 + j % 4, size=rows) for j in range(m)], axis=1)
    sensitive = [f"s{i % 5}" for i in range(rows)]
    return Histogram.from_rows([tuple(r) for r in codes.tolist()], sensitive)


def _valid(hist, solution, models) -> bool:
    sizes = solution.group_sizes()
    used = sizes > 0
    return bool(all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used]).all())


# --------------------------------------------------------------------------- bug 1: wide tables


@pytest.mark.parametrize("m, rows", [(16, 300), (40, 300), (198, 120)])
def test_greedy_is_valid_on_many_quasi_identifiers(m, rows):
    """(Its speed there: benchmarks/bench_time_limits.py.)"""
    hist = _wide_histogram(m, rows)
    models = [KAnonymity(3)]
    solution = repair(hist, greedy(hist, 3), models)
    assert _valid(hist, solution, models)
    assert solution.stars <= solve(hist, models, "topdown").stars < rows * m


def test_greedy_enumerates_all_patterns_up_to_the_limit(monkeypatch):
    """12 alive columns (4096 patterns): still Bredereck's exact enumeration, the same output as
    without any limit (the drawn patterns start beyond)."""
    import duckanon.solver.greedy as module

    assert EXACT_PATTERN_LIMIT == 2**12
    hist = _wide_histogram(12, 200, seed=1)
    bounded = greedy(hist, 3)
    monkeypatch.setattr(module, "EXACT_PATTERN_LIMIT", 2**40)
    unbounded = greedy(hist, 3)
    assert bounded.stars == unbounded.stars
    assert (bounded.part_group == unbounded.part_group).all() and (bounded.part_class == unbounded.part_class).all()


def test_drawn_patterns_compete_with_the_enumeration(monkeypatch):
    """On 14 columns, where both run in reasonable time, the drawn patterns are within 5% of
    the full enumeration."""
    import duckanon.solver.greedy as module

    hist = _wide_histogram(14, 200, seed=2)
    drawn = repair(hist, greedy(hist, 3), [KAnonymity(3)]).stars
    monkeypatch.setattr(module, "EXACT_PATTERN_LIMIT", 2**14)
    enumerated = repair(hist, greedy(hist, 3), [KAnonymity(3)]).stars
    assert drawn <= 1.05 * enumerated, (drawn, enumerated)


@pytest.mark.parametrize("model", ["l", "t"])
def test_carve_and_greedy_with_l_or_t_on_many_quasi_identifiers(model):
    hist = _wide_histogram(30, 300)
    if model == "l":
        models = [KAnonymity(3), LDiversity(2)]
    else:
        models = [KAnonymity(2), TCloseness(0.3, tuple(hist.sa_counts.sum(axis=0).tolist()))]
    for solution in (repair(hist, carving_greedy(hist, models), models),
                     repair(hist, greedy(hist, 3, models=models), models)):
        assert _valid(hist, solution, models)


@pytest.mark.parametrize("m, rows", [(40, 300), (16, 1000)])
def test_auto_on_many_quasi_identifiers_skips_exact_and_is_no_worse_than_mapprox_or_topdown(m, rows):
    hist = _wide_histogram(m, rows)
    models = [KAnonymity(3)]
    solution = solve(hist, models, "auto")
    assert "exact_skipped" in solution.notes
    for method in ("mapprox", "topdown"):
        assert solution.stars <= solve(hist, models, method).stars


def test_auto_still_tries_exact_on_small_tables():
    hist = _wide_histogram(4, 40)
    solution = solve(hist, [KAnonymity(3)], "auto")
    assert "exact_skipped" not in solution.notes


# --------------------------------------------------------------------------- bug 2: patterns

CASES = {
    # the fuzz test's table: no pattern but (b) is allowed
    "k": ("CREATE TABLE t AS SELECT i AS a, i // 2 AS b, 0 AS c, 's' || (i % 2) AS s FROM range(8) r(i)",
          "k = 2, qi = (a, b, c)", [{"b"}]),
    "k_l": ("CREATE TABLE t AS SELECT i % 5 AS a, (i * 7) % 4 AS b, (i // 3) % 3 AS c, 's' || (i % 3) AS s "
            "FROM range(60) r(i)", "k = 3, l = 2, sensitive = s, qi = (a, b, c)", [{"a"}, {"b", "c"}]),
    "k_t": ("CREATE TABLE t AS SELECT i % 4 AS a, (i * 3) % 5 AS b, i % 2 AS c, 's' || (i % 3) AS s "
            "FROM range(40) r(i)", "k = 2, t = 0.4, sensitive = s, qi = (a, b, c)", [{"a"}, {"a", "c"}]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("method", [m for m in METHODS if m != "auto"])
def test_every_method_honours_patterns_or_refuses_them(method, case):
    create, options, patterns = CASES[case]
    written = ", ".join("(" + ", ".join(sorted(p)) + ")" for p in patterns)
    with duckanon.connect() as con:
        con.duckdb.execute(create)
        try:
            con.execute(f"ANONYMIZE t WITH ({options}, patterns = ({written}), method = {method})")
        except AnonymizeError as error:
            assert "\n" not in str(error)
            return  # refusing is fine
        published = con.duckdb.execute("SELECT DISTINCT a, b, c FROM t_anon").fetchall()
    starred = [{name for name, value in zip("abc", row) if value == "*"} for row in published]
    # every published class stars a subset of a pattern, except at most one (the fully
    # suppressed leftover group of greedy, exact and dp)
    outside = [row for row, stars in zip(published, starred) if stars and not any(stars <= p for p in patterns)]
    assert len(outside) <= 1, (method, outside)


@pytest.mark.parametrize("method", ["merge", "topdown", "carve", "tp", "tp+", "hilbert", "matching", "lattice",
                                    "mondrian", "gensup"])
def test_methods_that_ignore_patterns_refuse_them_in_the_solver(method):
    hist = Histogram.from_rows([(i, i // 2, 0) for i in range(8)], [i % 2 for i in range(8)])
    with pytest.raises(AnonymizeError, match="patterns|domains"):
        solve(hist, [KAnonymity(2)], method, patterns=[[1]])
