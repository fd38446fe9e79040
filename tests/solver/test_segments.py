"""`segments`, the wide tables' method: its cut is the fewest stars over every cut of its order
(against an enumeration of all cuts written here), its groups satisfy the models (the solver's
predicates and, through a statement, the independent checker), and `auto` runs it alone on a
wide table too large for the quadratic heuristics, saying so in EXPLAIN."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon.solver import solve
from duckanon.solver.heuristics import WIDE_CELL_LIMIT, best_heuristic, run_heuristic
from duckanon.solver.histogram import Histogram, group_keys, lexicographic_order
from duckanon.solver.models import DistinctLDiversity, KAnonymity
from duckanon.solver.request import Request
from duckanon.solver.segments import column_order
from support.checks import check_published
from support.solver_checks import assert_valid


def _random_histogram(rng, rows: int, cards: list[int], n_sa: int = 1) -> Histogram:
    values = np.column_stack([rng.integers(0, c, rows) for c in cards])
    sa = rng.integers(0, n_sa, rows)
    classes = group_keys(values)
    n_classes = int(classes.max()) + 1
    codes = np.zeros((n_classes, len(cards)), dtype=np.int64)
    codes[classes] = values
    counts = np.zeros((n_classes, n_sa), dtype=np.int64)
    np.add.at(counts, (classes, sa), 1)
    return Histogram(codes=codes, sa_counts=counts)


def _fewest_stars_of_any_cut(codes: np.ndarray, sizes: np.ndarray, k: int) -> int | None:
    """Every way to cut the list into consecutive segments of at least k rows, by recursion:
    the fewest stars (rows x columns with two values in the segment), None if none exists."""
    n = len(codes)

    @functools.lru_cache(maxsize=None)
    def best(start: int):
        if start == n:
            return 0
        results = []
        for end in range(start + 1, n + 1):
            rows = int(sizes[start:end].sum())
            rest = best(end)
            if rows >= k and rest is not None:
                varying = sum(len(set(codes[start:end, j].tolist())) > 1 for j in range(codes.shape[1]))
                results.append(rows * varying + rest)
        return min(results, default=None)

    return best(0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(4, 16))
def test_the_cut_has_the_fewest_stars_of_every_cut_of_its_order(seed, k, rows):
    rng = np.random.default_rng(seed)
    hist = _random_histogram(rng, rows, [2, 3, 2, 4])
    solution = run_heuristic("segments", hist, [KAnonymity(k)])
    assert_valid(hist, solution, [KAnonymity(k)])
    small = np.flatnonzero(hist.sizes < k)  # the classes of k rows or more stand alone, unstarred
    if len(small) == 0:
        assert solution.stars == 0
        return
    order = column_order(hist.codes[small], hist.sizes[small], np.ones(hist.m))
    ordered = small[lexicographic_order(hist.codes[small][:, order])]
    fewest = _fewest_stars_of_any_cut(hist.codes[ordered], hist.sizes[ordered], k)
    if fewest is None:  # the small rows are fewer than k: repair merged them into a large class
        assert int(hist.sizes[small].sum()) < k
    else:
        assert solution.stars == fewest


def test_the_packed_sort_is_the_lexicographic_sort():
    rng = np.random.default_rng(3)
    codes = np.column_stack([rng.integers(0, c, 5000) for c in (2, 300, 7, 100_000, 5, 65_000, 3, 40_000)])
    by_column = np.lexsort(codes.T[::-1])
    assert (codes[lexicographic_order(codes)] == codes[by_column]).all()


@pytest.mark.parametrize("cards", [(3, 5, 2), (2, 300, 7, 100_000, 5, 65_000, 3, 40_000)], ids=["one_key", "three_keys"])
def test_group_ids_are_the_ranks_np_unique_gives_the_rows(cards):
    rng = np.random.default_rng(4)
    codes = np.column_stack([rng.integers(0, c, 4000) for c in cards])
    codes = np.vstack([codes, codes[:500]])  # repeated rows share an id
    expected = np.unique(codes, axis=0, return_inverse=True)[1].ravel()
    assert (group_keys(codes) == expected).all()


def test_columns_go_least_entropy_first_and_free_columns_last():
    codes = np.array([[0, 0, 0], [1, 1, 0], [2, 0, 1], [3, 1, 1]])
    sizes = np.array([1, 1, 1, 1])
    assert column_order(codes, sizes, np.ones(3)).tolist() == [1, 2, 0]  # 1 bit, 1 bit, 2 bits
    assert column_order(codes, sizes, np.array([1.0, 0.0, 1.0])).tolist() == [2, 0, 1]  # a free column last
    assert column_order(codes, sizes, np.array([4.0, 1.0, 1.0])).tolist() == [0, 1, 2]  # 2 bits / 4 < 1 bit / 1


@pytest.mark.parametrize("models", [[KAnonymity(5)], [KAnonymity(3), DistinctLDiversity(2)]],
                         ids=["k", "k_and_l"])
def test_groups_satisfy_the_models_on_a_wide_table(models):
    rng = np.random.default_rng(11)
    hist = _random_histogram(rng, 3000, [2 + j % 25 for j in range(40)], n_sa=3)
    solution = run_heuristic("segments", hist, models)
    assert_valid(hist, solution, models)
    assert solution.stars < hist.n_rows * hist.m  # not the whole table starred
    assert run_heuristic("segments", hist, models).stars == solution.stars  # the same twice


def test_weighted_stars_are_no_more_than_unweighted_order_pays():
    rng = np.random.default_rng(5)
    hist = _random_histogram(rng, 2000, [2 + j % 25 for j in range(20)])
    weights = np.where(np.arange(20) % 2 == 0, 10.0, 1.0)
    weighted = run_heuristic("segments", hist, [KAnonymity(4)], weights=weights)
    plain = run_heuristic("segments", hist, [KAnonymity(4)])
    assert weighted.cost(weights) <= plain.cost(weights)


def test_auto_runs_segments_alone_on_a_large_wide_table():
    rng = np.random.default_rng(2)
    m = 31
    hist = _random_histogram(rng, WIDE_CELL_LIMIT // m + 1000, [2 + j % 25 for j in range(m)])
    assert hist.n_classes * m > WIDE_CELL_LIMIT
    best = best_heuristic(hist, [KAnonymity(5)])
    assert best.method == "segments"
    assert best.notes["portfolio"].startswith(f"segments alone: {hist.n_classes} classes x 31 quasi-identifiers")
    solution = solve(hist, [KAnonymity(5)])  # validated by solve
    assert solution.stars == best.stars and not solution.optimal


def _wide_table(con, rows: int, m: int) -> None:
    rng = np.random.default_rng(17)
    data = pa.table({"id": np.arange(rows), **{f"q{j}": rng.integers(0, 2 + j % 25, rows).astype(np.int8)
                                                for j in range(m)}})
    con.duckdb.register("w_rows", data)
    con.execute("CREATE TABLE w AS SELECT * FROM w_rows")
    con.duckdb.unregister("w_rows")


def test_a_segments_release_holds_for_the_independent_checker():
    con = duckanon.connect()
    m = 40
    _wide_table(con, 4000, m)
    qi = ", ".join(f"q{j}" for j in range(m))
    summary = con.execute(f"ANONYMIZE w INTO w_anon WITH (k = 4, qi = ({qi}), method = 'segments')").fetchone()
    rows = con.execute(f"SELECT {qi} FROM w_anon").fetchall()
    assert len(rows) == 4000
    stars, suppressed, problems = check_published(rows, list(range(m)), k=4)
    assert problems == []
    assert (stars, suppressed) == (summary[3], summary[4])


def test_explain_says_why_auto_runs_segments_alone():
    con = duckanon.connect()
    m = 31
    _wide_table(con, WIDE_CELL_LIMIT // m + 1000, m)
    qi = ", ".join(f"q{j}" for j in range(m))
    items = dict(con.execute(f"EXPLAIN ANONYMIZE w INTO w_anon WITH (k = 5, qi = ({qi}))").fetchall())
    assert items["method that would run"] == "segments"
    classes = int(items["classes (distinct QI vectors)"])
    assert items["why"].endswith(f"; segments alone: {classes} classes x 31 quasi-identifiers are more than "
                                 f"{WIDE_CELL_LIMIT} cells of a wide table, where the other heuristics grow with "
                                 "the classes squared")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'w_anon'").fetchone() == (0,)
