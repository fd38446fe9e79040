"""The vertex-incremental exchange algorithm for simplex matching (solver/exchange.py, issue 39):
equal to an independent brute force written here (every partition of the rows into groups of 2
and 3, from costs computed here from the table) on 2,000 seeded random tables of 2..12 rows
(cell suppression and generalization hierarchies, odd and even n), on sparse instances with
missing groups (fact (i)'s completion), and on the k = 2 fixtures of ALGORITHMS.md; and wired into
method 'simplex' where its set partitioning is cut."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from duckanon.solver import Histogram, KAnonymity, solve
from duckanon.solver.exchange import exchange_cover
from duckanon.solver.simplex import optimal_cover

from support.data import hospital_digits
from support.instances import BLOCKI_WILLIAMS
from support.solver_checks import assert_valid


@lru_cache(maxsize=None)
def partitions(n: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Every partition of 0..n-1 into blocks of 2 and 3: (partitions x blocks ids, padded with the
    id len(blocks), the blocks)."""
    blocks: dict[tuple[int, ...], int] = {}
    found = []

    def extend(left: tuple[int, ...], chosen: list[int]):
        if not left:
            found.append(list(chosen))
            return
        first, rest = left[0], left[1:]
        for a in range(len(rest)):
            pair = (first, rest[a])
            chosen.append(blocks.setdefault(pair, len(blocks)))
            extend(rest[:a] + rest[a + 1:], chosen)
            chosen.pop()
            for b in range(a + 1, len(rest)):
                triple = (first, rest[a], rest[b])
                chosen.append(blocks.setdefault(triple, len(blocks)))
                extend(rest[:a] + rest[a + 1:b] + rest[b + 1:], chosen)
                chosen.pop()

    extend(tuple(range(n)), [])
    width = max(len(p) for p in found)
    table = np.full((len(found), width), len(blocks), dtype=np.int64)
    for i, p in enumerate(found):
        table[i, :len(p)] = p
    return table, list(blocks)


def brute_force(n: int, group_cost) -> float:
    """The least total cost over every partition into pairs and triples (inf: none is possible)."""
    table, blocks = partitions(n)
    cost = np.array([group_cost(b) for b in blocks] + [0.0])
    return float(cost[table].sum(axis=1).min())


def suppression_costs(codes: np.ndarray):
    """Stars: a pair costs 2 x the columns where its rows differ, a triple 3 x the columns where
    its rows are not all equal (numpy broadcasting over every ordered pair and triple)."""
    codes = np.asarray(codes)
    x, y, z = codes[:, None, None, :], codes[None, :, None, :], codes[None, None, :, :]
    pair = 2.0 * (codes[:, None, :] != codes[None, :, :]).sum(axis=2)
    triple = 3.0 * ((x != y) | (y != z) | (x != z)).sum(axis=3)
    return pair, triple


def random_hierarchy(rng, values: int):
    """A random hierarchy over values 0..values-1: levels of codes (each level a map of the values
    to fewer labels, merging labels of the level below, one label at the top) and ARX's cell loss
    per level and label ((leaves under it - 1) / (leaves - 1))."""
    levels = [np.arange(values)]
    while len(np.unique(levels[-1])) > 1:
        labels = np.unique(levels[-1])
        parent = rng.integers(0, max(1, len(labels) - 1), size=len(labels))
        mapped = parent[np.searchsorted(labels, levels[-1])]
        levels.append(mapped if len(np.unique(mapped)) < len(labels) else np.zeros(values, dtype=np.int64))
    losses = []
    for level in levels:
        leaves = np.bincount(level)
        losses.append((leaves - 1) / max(values - 1, 1))
    return levels, losses


def hierarchy_costs(codes: np.ndarray, hierarchies):
    """A group costs per column its rows x the loss of the lowest level where they share a label
    (every ordered pair and triple, by broadcasting: the levels tried from the top down)."""
    n = len(codes)
    pair, triple = np.zeros((n, n)), np.zeros((n, n, n))
    for column, (levels, losses) in enumerate(hierarchies):
        cell2, cell3 = np.ones((n, n)), np.ones((n, n, n))
        for level, loss in reversed(list(zip(levels, losses))):
            label = level[codes[:, column]]
            same2 = label[:, None] == label[None, :]
            same3 = same2[:, :, None] & same2[None, :, :]
            cell2 = np.where(same2, loss[label][:, None], cell2)
            cell3 = np.where(same3, loss[label][:, None, None], cell3)
        pair += 2 * cell2
        triple += 3 * cell3
    return pair, triple


def check(pair, triple):
    n = len(pair)
    found = exchange_cover(pair, triple)
    expected = brute_force(n, lambda b: pair[b] if len(b) == 2 else triple[b])
    # the cover: every vertex once, in groups of 2 and 3, costing what its groups cost
    assert sorted(v for g in found.groups for v in g) == list(range(n))
    assert all(len(g) in (2, 3) for g in found.groups)
    if np.isfinite(expected):
        assert found.feasible
        assert found.cost == pytest.approx(expected, abs=1e-9)
        assert sum(pair[g] if len(g) == 2 else triple[g] for g in found.groups) == pytest.approx(expected)
    else:
        assert not found.feasible
    return found


@pytest.mark.parametrize("seed", range(4))
def test_exchange_equals_brute_force_on_suppression_tables(seed):
    """1,000 tables (250 per seed) of 2..12 rows, 1..5 columns of 2..4 values."""
    rng = np.random.default_rng(3900 + seed)
    sizes = []
    for _ in range(250):
        n = int(rng.integers(2, 13))
        codes = rng.integers(0, int(rng.integers(2, 5)), size=(n, int(rng.integers(1, 6))))
        check(*suppression_costs(codes))
        sizes.append(n)
    assert {n % 2 for n in sizes} == {0, 1} and max(sizes) == 12


@pytest.mark.parametrize("seed", range(4))
def test_exchange_equals_brute_force_with_hierarchies(seed):
    """1,000 tables (250 per seed) of 2..12 rows, 1..4 columns of 2..6 values, a random hierarchy
    per column (ARX's cell losses: fractions, ties)."""
    rng = np.random.default_rng(3950 + seed)
    for _ in range(250):
        n = int(rng.integers(2, 13))
        m = int(rng.integers(1, 5))
        values = [int(rng.integers(2, 7)) for _ in range(m)]
        codes = np.column_stack([rng.integers(0, v, size=n) for v in values])
        hierarchies = [random_hierarchy(rng, v) for v in values]
        pair, triple = hierarchy_costs(codes, hierarchies)
        # the premise: the simplex condition holds (ALGORITHMS.md fact (iii))
        sides = pair[:, :, None] + pair[None, :, :] + pair[:, None, :]
        assert (sides <= 2 * triple + 1e-9).all()
        check(pair, triple)


def test_exchange_completes_missing_groups():
    """200 sparse instances: missing pairs (and every triple holding one) and missing triples cost
    BIG and 2 BIG (fact (i)); the cover is the brute force's optimum over the present groups, and
    feasible = False exactly when no cover of present groups exists."""
    rng = np.random.default_rng(3999)
    infeasible = 0
    for _ in range(200):
        n = int(rng.integers(2, 11))
        codes = rng.integers(0, 3, size=(n, 3))
        pair, triple = suppression_costs(codes)
        missing = np.triu(rng.random((n, n)) < 0.4, 1)
        missing |= missing.T
        pair[missing] = np.inf
        for a in range(n):
            for b in range(n):
                for c in range(n):
                    if missing[a, b] or missing[b, c] or missing[a, c]:
                        triple[a, b, c] = np.inf
        gone = rng.random((n, n, n)) < 0.3
        gone = gone | gone.transpose(0, 2, 1) | gone.transpose(1, 0, 2) | gone.transpose(1, 2, 0) | \
            gone.transpose(2, 0, 1) | gone.transpose(2, 1, 0)
        triple[gone] = np.inf
        found = check(pair, triple)
        infeasible += not found.feasible
    assert 0 < infeasible < 200


@pytest.mark.parametrize("rows, optimum", [(case[0], case[2]) for case in BLOCKI_WILLIAMS if case[1] == 2])
def test_exchange_on_the_blocki_williams_fixtures(rows, optimum):
    codes = np.array([[int(ch) for ch in r] for r in rows.split(",")])
    assert check(*suppression_costs(codes)).cost == optimum


def test_exchange_on_the_hospital_and_the_gadget():
    """ALGORITHMS.md: the hospital's 2-anonymity optimum 46 (m = 8) and the gadget counterexample
    00, 00, 11, 11, 01 (optimum 3)."""
    qi, _ = hospital_digits()
    _, codes = np.unique(np.array(qi), return_inverse=True)
    codes = codes.reshape(len(qi), -1)
    assert exchange_cover(*suppression_costs(codes)).cost == 46
    assert exchange_cover(*suppression_costs(np.array([[0, 0], [0, 0], [1, 1], [1, 1], [0, 1]]))).cost == 3


def test_exchange_work_is_bounded_by_a_count():
    """Past max_matchings blossom matchings it returns None; within it, the same cover every run;
    a triple oracle gives the same cover as the array."""
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 3, size=(40, 6))
    pair, triple = suppression_costs(codes)
    first = exchange_cover(pair, triple)
    assert first.matchings > 2
    assert exchange_cover(pair, triple, max_matchings=first.matchings - 1) is None
    again = exchange_cover(pair, triple, max_matchings=first.matchings)
    assert (again.groups, again.cost) == (first.groups, first.cost)
    oracle = exchange_cover(pair, lambda a, b, c: triple[a, b, c], upper=3 * 6)
    assert (oracle.groups, oracle.cost) == (first.groups, first.cost)
    with pytest.raises(ValueError):
        exchange_cover(pair, lambda a, b, c: triple[a, b, c])


def test_simplex_takes_the_exchange_cover_where_its_milp_is_cut(monkeypatch):
    """With the MILP's cap below every listing (every component covered in pieces, not proven),
    the components of at most EXCHANGE_MAX_ROWS rows get the exchange cover where cheaper: here
    the whole listing's optimum, and optimal = True only because it meets ceil(L) (then it is
    proven by the bound), with details.exchange saying what ran."""
    import importlib

    simplex_module = importlib.import_module("duckanon.solver.simplex")
    monkeypatch.setattr(simplex_module, "MILP_MAX_GROUPS", 5)
    monkeypatch.setattr(simplex_module, "PIECE_CLASSES", 6)
    rng = np.random.default_rng(11)
    improved = 0
    for _ in range(3):
        codes, counts = np.unique(rng.integers(0, 3, size=(30, 4)), axis=0, return_counts=True)
        cover = optimal_cover(codes, counts, np.ones(4), whole=0)
        whole = optimal_cover(codes, counts, np.ones(4), whole=10**6)
        chosen = np.repeat(cover["members"], cover["copies"], axis=0)
        assert (np.bincount(chosen[chosen >= 0], minlength=len(counts)) == counts).all()
        stars = sum(len(g[g >= 0]) * int((codes[g[g >= 0]].min(axis=0) != codes[g[g >= 0]].max(axis=0)).sum())
                    for g in chosen)
        assert stars == cover["cost"] == whole["cost"] and whole["proven"]
        assert cover["exchange"]["components"] >= 1
        improved += cover["exchange"]["improved"]
        assert cover["proven"] == (cover["cost"] <= np.ceil(cover["bound"] - 1e-6))
        monkeypatch.setattr(simplex_module, "EXCHANGE_MAX_ROWS", 0)
        pieces = optimal_cover(codes, counts, np.ones(4), whole=0)
        monkeypatch.setattr(simplex_module, "EXCHANGE_MAX_ROWS", 100)
        assert pieces["cost"] >= cover["cost"]
    assert improved >= 1
    # through solve: the release is valid and says what ran
    qi = [tuple(int(v) for v in row) for row in rng.integers(0, 3, size=(30, 4))]
    hist = Histogram.from_rows(qi, ["s"] * len(qi))
    monkeypatch.setattr(simplex_module, "SIMPLEX_WHOLE_CLASSES", 0)
    solution = solve(hist, [KAnonymity(2)], "simplex")
    assert_valid(hist, solution, [KAnonymity(2)])
    assert solution.notes["exchange"]["components"] >= 1
    assert solution.optimal == (solution.stars == solution.lower_bound)
