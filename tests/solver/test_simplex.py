"""method = 'simplex' (issue 39): optimal 2-anonymity as a minimum-cost simplex matching, checked
against the fixtures' known optima and against a brute force written here (every partition into
groups of 2 and 3 rows, and the all-suppressed table), on 2,000 seeded random tables."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from duckanon.errors import AnonymizeError
from duckanon.solver import Histogram, KAnonymity, LDiversity, solve
from duckanon.solver.partition import SHOW_VALUE
from duckanon.solver.simplex import optimal_cover

from support.data import hospital_digits
from support.instances import BLOCKI_WILLIAMS
from support.solver_checks import assert_valid
from support.tiers import examples


def least_cover(n: int, cost) -> float:
    """The least total `cost` of a partition of rows 0..n-1 into groups of 2 and 3 rows, or of the
    whole table as one group, by a memoised recursion on row subsets."""
    @lru_cache(maxsize=None)
    def best(mask: int) -> float:
        if mask == 0:
            return 0.0
        first = (mask & -mask).bit_length() - 1
        rest = [j for j in range(first + 1, n) if mask >> j & 1]
        value = np.inf
        for a, second in enumerate(rest):
            left = mask & ~(1 << first) & ~(1 << second)
            value = min(value, cost((first, second)) + best(left))
            for third in rest[a + 1:]:
                value = min(value, cost((first, second, third)) + best(left & ~(1 << third)))
        return value

    return min(best((1 << n) - 1), cost(tuple(range(n))))


def brute_force(rows, weights) -> float:
    """The fewest (weighted) stars of a 2-anonymous partition of `rows`: the minimum over every
    partition into groups of 2 and 3 rows (Blocki & Williams: larger groups never help, and the
    all-suppressed table, one group, is compared too), by a memoised recursion on row subsets."""
    rows = np.asarray(rows)
    n = len(rows)

    def cost(members) -> float:
        sub = rows[list(members)]
        return len(members) * float((weights * (sub.min(axis=0) != sub.max(axis=0))).sum())

    return least_cover(n, cost)


def random_table(rng):
    n = int(rng.integers(2, 13))
    m = int(rng.integers(1, 6))
    rows = rng.integers(0, int(rng.integers(2, 4)), size=(n, m))
    weights = np.ones(m) if rng.random() < 0.6 else rng.integers(1, 5, size=m).astype(float)
    if rng.random() < 0.15:
        weights = weights + rng.random(m)  # non-integral weights
    return rows, weights


def test_random_tables_equal_the_brute_force():
    """2,000 seeded tables of 2-12 rows: the cover's cost equals the brute force, and it is proven;
    a quarter run the LP pruning (whole=0), the rest the whole listing."""
    rng = np.random.default_rng(39)
    checked = pruned = 0
    while checked < 2000:
        rows, weights = random_table(rng)
        codes, counts = np.unique(rows, axis=0, return_counts=True)
        if (counts >= 2).all():
            continue  # zero stars without grouping (the method returns the classes as they are)
        whole = 0 if checked % 4 == 0 else None
        cover = optimal_cover(codes, counts, weights, whole=whole)
        expected = brute_force(rows, weights)
        assert cover["cost"] == pytest.approx(expected, abs=1e-9), (rows.tolist(), weights.tolist())
        assert cover["proven"] is True
        assert cover["bound"] <= expected + 1e-9
        checked += 1
        pruned += whole == 0
    assert pruned == 500


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 1), st.integers(0, 3)),
                min_size=2, max_size=11))
def test_releases_through_solve_are_valid_and_optimal(rows):
    hist = Histogram.from_rows([tuple(map(str, r)) for r in rows], ["s"] * len(rows))
    models = [KAnonymity(2)]
    solution = solve(hist, models, "simplex")
    assert_valid(hist, solution, models)
    assert solution.stars == brute_force([list(r) for r in rows], np.ones(4))
    assert (solution.optimal, solution.lower_bound) == (True, solution.stars)


@pytest.mark.parametrize("rows, k, optimum", [case for case in BLOCKI_WILLIAMS if case[1] == 2])
def test_blocki_williams_fixtures(rows, k, optimum):
    qi = [tuple(r) for r in rows.split(",")]
    hist = Histogram.from_rows(qi, ["s"] * len(qi))
    solution = solve(hist, [KAnonymity(k)], "simplex")
    assert_valid(hist, solution, [KAnonymity(k)])
    assert (solution.stars, solution.optimal, solution.method) == (optimum, True, "simplex")


def test_hospital_two_anonymity_is_46():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    solution = solve(hist, [KAnonymity(2)], "simplex")
    assert_valid(hist, solution, [KAnonymity(2)])
    assert (solution.stars, solution.optimal) == (46, True)


@pytest.mark.parametrize("whole", [None, 0])
def test_the_gadget_counterexample_and_pruned_hospital(whole):
    """ALGORITHMS.md's counterexample to one-matching gadgets (00, 00, 11, 11, 01: optimum 3, the
    gadget relaxation 2), and the hospital's 46, with and without the LP pruning."""
    codes, counts = np.unique(np.array([[0, 0], [0, 0], [1, 1], [1, 1], [0, 1]]), axis=0, return_counts=True)
    cover = optimal_cover(codes, counts, np.ones(2), whole=whole)
    assert (cover["cost"], cover["proven"]) == (3.0, True)
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    cover = optimal_cover(hist.codes, hist.sizes, np.ones(hist.m), whole=whole)
    assert (cover["cost"], cover["proven"]) == (46.0, True)
    if whole == 0:
        assert cover["bound"] <= 46 and cover["lp_solves"] >= 1


def test_pruned_path_on_a_larger_table_matches_the_whole_listing():
    """60 random rows of 4 columns: the pruning (LP duals, reduced costs) and the MILP over every
    pair and triple agree, and the LP bound is at most the optimum."""
    rng = np.random.default_rng(7)
    for _ in range(3):
        codes, counts = np.unique(rng.integers(0, 3, size=(60, 4)), axis=0, return_counts=True)
        pruned = optimal_cover(codes, counts, np.ones(4), whole=0)
        whole = optimal_cover(codes, counts, np.ones(4), whole=10**6)
        assert (pruned["cost"], pruned["proven"], whole["proven"]) == (whole["cost"], True, True)
        assert pruned["bound"] <= pruned["cost"] and pruned["groups"] < whole["groups"]


def test_without_scipys_private_highs_bindings_the_lp_is_rebuilt_with_the_same_optimum(monkeypatch):
    """warm_lp reads a private scipy module; where a scipy release moves it, the pruned path solves
    each round through the public linprog: proven covers of the same cost, the same LP bound."""
    from duckanon.solver import warm_lp

    assert warm_lp._bindings() is not None  # this scipy has them: the test below forces the other path
    rng = np.random.default_rng(11)
    tables = [np.unique(rng.integers(0, 3, size=(40, 4)), axis=0, return_counts=True) for _ in range(2)]
    kept = [optimal_cover(codes, counts, np.ones(4), whole=0) for codes, counts in tables]
    monkeypatch.setattr(warm_lp, "_bindings", lambda: None)
    for (codes, counts), before in zip(tables, kept):
        rebuilt = optimal_cover(codes, counts, np.ones(4), whole=0)
        assert (rebuilt["cost"], rebuilt["proven"]) == (before["cost"], True)
        assert rebuilt["bound"] == pytest.approx(before["bound"], abs=1e-6)


def test_a_component_too_large_for_one_milp_is_improved_in_pieces(monkeypatch):
    """With the MILP's cap below every listing and the exchange algorithm off, each component is
    covered in pieces (_in_pieces):
    the cover still holds every row once (checked here from its groups), costs what its groups
    cost, is no cheaper than the whole listing's optimum, and is claimed optimal only where it meets
    the bound ceil(L)."""
    import importlib

    simplex_module = importlib.import_module("duckanon.solver.simplex")  # (the package exports a function of that name)

    monkeypatch.setattr(simplex_module, "MILP_MAX_GROUPS", 5)
    monkeypatch.setattr(simplex_module, "PIECE_CLASSES", 6)
    # (the exchange algorithm off: with it these components get their optimum, test_exchange.py)
    monkeypatch.setattr(simplex_module, "EXCHANGE_MAX_ROWS", 0)
    rng = np.random.default_rng(11)
    unproven = 0
    for _ in range(3):
        codes, counts = np.unique(rng.integers(0, 3, size=(30, 4)), axis=0, return_counts=True)
        pieces = optimal_cover(codes, counts, np.ones(4), whole=0)
        whole = optimal_cover(codes, counts, np.ones(4), whole=10**6)
        chosen = np.repeat(pieces["members"], pieces["copies"], axis=0)
        assert (np.bincount(chosen[chosen >= 0], minlength=len(counts)) == counts).all()
        stars = sum(len(g[g >= 0]) * int((codes[g[g >= 0]].min(axis=0) != codes[g[g >= 0]].max(axis=0)).sum())
                    for g in chosen)
        assert stars == pieces["cost"] >= whole["cost"] and whole["proven"]
        # proven only where the cover meets the bound ceil(L); else stopped says why
        assert pieces["proven"] == (pieces["cost"] <= np.ceil(pieces["bound"] - 1e-6))
        assert pieces["proven"] or "groups" in pieces["stopped"]
        unproven += not pieces["proven"]
    assert unproven >= 1


def test_weights_are_weighted_stars():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    weights = np.arange(1, hist.m + 1, dtype=float)
    solution = solve(hist, [KAnonymity(2)], "simplex", weights=weights)
    assert solution.optimal is True
    assert solution.notes["weighted_lower_bound"] == pytest.approx(solution.weighted_stars(weights))
    expected = brute_force(np.array(hist.codes), weights)
    assert solution.weighted_stars(weights) == pytest.approx(expected)


def test_auto_runs_simplex_on_two_anonymity():
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    solution = solve(hist, [KAnonymity(2)])
    assert (solution.method, solution.stars, solution.optimal) == ("auto: simplex", 46, True)
    assert solve(hist, [KAnonymity(3)]).method != "auto: simplex"


@pytest.mark.parametrize("models, message", [
    ([KAnonymity(3)], "method simplex solves 2-anonymity alone (k = 2 and no other model), not k = 3: use 'auto', "
                      "'exact' or 'dp'"),
    ([KAnonymity(2), LDiversity(2)], "method simplex solves 2-anonymity alone (k = 2 and no other model), not "
                                     "frequency 2-diversity: use 'auto', 'exact' or 'dp'"),
])
def test_refusals_are_one_line_from_the_registry(models, message):
    qi, sa = hospital_digits()
    hist = Histogram.from_rows(qi, sa)
    with pytest.raises(AnonymizeError) as error:
        solve(hist, models, "simplex")
    assert str(error.value) == message


# -- generalization hierarchies (Blocki & Williams Thm 8) ---------------------------------------

# ARX rows [value, level 1, top]: 4 leaves under 2 labels of 2 leaves, then one top label
SMALL_HIERARCHY = [[str(v), f"g{v // 2}", "*"] for v in range(4)]


def label_loss_brute_force(rows, table=SMALL_HIERARCHY) -> float:
    """The least summed cell loss of a 2-anonymous recoding of `rows` to `table`'s labels, counted
    here from the table's rows: a group's cell in a column is the lowest level's label its values
    share, costing (leaves under it - 1) / (leaves - 1); every partition into groups of 2 and 3
    rows (and the whole table) by the same memoised recursion as brute_force."""
    n, m = len(rows), len(rows[0])

    @lru_cache(maxsize=None)
    def label_loss(values: frozenset) -> float:
        for level in range(len(table[0])):
            labels = {row[level] for row in table if row[0] in {str(v) for v in values}}
            if len(labels) == 1:
                label = labels.pop()
                return (sum(1 for row in table if row[level] == label) - 1) / (len(table) - 1)
        return 1.0

    def cost(members) -> float:
        return len(members) * sum(label_loss(frozenset(rows[i][j] for i in members)) for j in range(m))

    return least_cover(n, cost)


def bound_hierarchies(rows, table=SMALL_HIERARCHY):
    from duckanon.hierarchy.rows import from_rows

    # Histogram.from_rows codes a column's values in repr order (single digits: numeric)
    return [from_rows(table).bind([str(v) for v in sorted({r[j] for r in rows}, key=repr)])
            for j in range(len(rows[0]))]


def test_hierarchies_equal_the_brute_force_whole_and_pruned():
    """24 seeded tables of 2-9 rows over a 3-level hierarchy: the summed cell loss equals the
    brute force, through the whole listing and through the LP pruning (whole=0), proven; the
    published labels are each group's lowest common ones (looked up in the table's rows)."""
    from duckanon.solver.hierarchical import HierarchicalRecoding
    from duckanon.solver.simplex import _LabelLosses, simplex_with_hierarchies

    rng = np.random.default_rng(8)
    for trial in range(24):
        n, m = int(rng.integers(2, 10)), int(rng.integers(1, 4))
        rows = rng.integers(0, 4, size=(n, m)).tolist()
        hist = Histogram.from_rows([tuple(r) for r in rows], ["s"] * n)
        hierarchies = bound_hierarchies(rows)
        expected = label_loss_brute_force(rows)
        solution = simplex_with_hierarchies(hist, hierarchies, [KAnonymity(2)])
        assert solution.notes["cell_loss_sum"] == pytest.approx(expected, abs=1e-9), rows
        assert solution.optimal is True and solution.method == "simplex"
        assert (solution.group_sizes() >= 2).all()
        if trial % 2 == 0 and not (hist.sizes >= 2).all():
            search = HierarchicalRecoding(hist, hierarchies, [KAnonymity(2)])
            costs = _LabelLosses(hist.codes, search.ancestors, search.cell_loss, np.ones(m))
            cover = optimal_cover(hist.codes, hist.sizes, np.ones(m), whole=0, distances=costs)
            assert (cover["cost"], cover["proven"]) == (pytest.approx(expected, abs=1e-9), True)
            assert cover["bound"] <= expected + 1e-9


def test_hierarchy_labels_are_the_lowest_common_ones():
    """00 + 01 share g0 in column 2, 22 + 33 share g1 in column 1 and the top in column 2."""
    rows = [(0, 0), (0, 1), (2, 2), (3, 3)]
    hist = Histogram.from_rows(rows, ["s"] * 4)
    from duckanon.solver.simplex import simplex_with_hierarchies

    solution = simplex_with_hierarchies(hist, bound_hierarchies(rows), [KAnonymity(2)])
    # (0,0)+(0,1): 2 rows x g0 (1/3); (2,2)+(3,3): 2 x (g1 + g1) = 4/3
    assert solution.notes["cell_loss_sum"] == pytest.approx(2 / 3 + 4 / 3)
    shown = {tuple(solution.group_labels[j][g] if solution.group_labels[j] else None for j in range(2))
             for g in range(len(solution.group_rep))}
    assert shown == {(SHOW_VALUE, "g0"), ("g1", "g1")}


def test_hierarchy_refusals():
    from duckanon.solver.simplex import hierarchy_refusal

    rows = [(0,), (1,), (2,)]
    assert hierarchy_refusal(bound_hierarchies(rows), 0.1) == \
        "method simplex with hierarchies removes no rows: suppression_limit must be 0, not 0.1"
    two_tops = [[str(v), f"g{v // 2}"] for v in range(4)]
    # rows with two top labels get a '*' level above them when read (docs/bad_inputs.md row 310): one top
    assert hierarchy_refusal(bound_hierarchies([(0,), (2,)], two_tops), 0) is None
    assert hierarchy_refusal(bound_hierarchies(rows), 0) is None
