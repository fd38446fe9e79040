"""Regression tests: exact vs dp under user patterns, and the time limit of method exact.

Pattern-guided k-anonymity (Bredereck et al.): every group is released under an allowed star set
(a user pattern, or none) and publishes its meet, a subset of that pattern; rows that fit no
pattern are fully suppressed *together*: one leftover group (greedy's last group, exact's single
all-star output vector). So an output honours the patterns when every published class but one
stars a subset of a user pattern. Bredereck's cost (`notes["objective"]`) charges each group its
pattern's stars; `stars`, `optimal` and `lower_bound` are about the published stars, which can be
lower: no output honouring the patterns publishes fewer than the lower bound, and two proven
optima publish the same number of stars.
"""

from __future__ import annotations

import time
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest

import duckanon
from duckanon.solver import KAnonymity, LDiversity, solve
from duckanon.solver.histogram import Histogram
from duckanon.solver.context import SolveContext
from duckanon.solver.local import local_search
from duckanon.solver.partition import STAR


def _outside(solution, patterns, m):
    """Published classes (distinct vectors) whose star set is in no user pattern."""
    allowed = [set(p) for p in patterns] + [set()]
    sizes = solution.group_sizes()
    reps = {tuple(rep) for rep, size in zip(solution.group_rep.tolist(), sizes.tolist()) if size}
    return [rep for rep in reps if not any({j for j in range(m) if rep[j] == STAR} <= a for a in allowed)]


def brute_force(rows, sas, k, l, patterns):
    """(Bredereck optimum, least published stars over outputs honouring the patterns)."""
    n, m = len(rows), len(rows[0])
    user = [frozenset(p) for p in patterns] + [frozenset()]
    full = frozenset(range(m))
    leftover_only = full not in user

    info = {}
    for mask in range(1, 1 << n):
        members = [i for i in range(n) if mask >> i & 1]
        counts = Counter(sas[i] for i in members)
        if len(members) < k or (l > 1 and l * max(counts.values()) > len(members)):
            continue
        varying = frozenset(j for j in range(m) if len({rows[i][j] for i in members}) > 1)
        covers = [len(s) for s in user if varying <= s]
        info[mask] = (len(members), len(varying), min(covers) if covers else None)

    @lru_cache(maxsize=None)
    def best(remaining, leftover_used, published):
        if remaining == 0:
            return 0
        low = remaining & -remaining
        rest = remaining ^ low
        result = float("inf")
        sub = rest
        while True:
            block = sub | low
            if block in info:
                size, varying, cover = info[block]
                options = []
                if cover is not None:
                    options.append((size * (varying if published else cover), leftover_used))
                elif leftover_only and not leftover_used:
                    options.append((size * (varying if published else m), True))
                elif not leftover_only:
                    options.append((size * varying, leftover_used))
                for cost, used in options:
                    result = min(result, cost + best(remaining ^ block, used, published))
            if sub == 0:
                break
            sub = (sub - 1) & rest
        return result

    everything = (1 << n) - 1
    return best(everything, False, False), best(everything, False, True)


def test_exact_and_dp_agree_on_the_reported_instance():
    con = duckanon.connect()
    con.duckdb.execute("CREATE TABLE t AS SELECT * FROM (VALUES (0, 0, 0), (1, 0, 0), (0, 1, 1), (1, 1, 1), "
                       "(0, 2, 2), (1, 2, 2)) v(a, b, c)")
    exact = con.execute("ANONYMIZE t INTO e WITH (k = 2, qi = (a, b, c), patterns = ((c), (c)), method = exact)").fetchone()
    dp = con.execute("ANONYMIZE t INTO d WITH (k = 2, qi = (a, b, c), patterns = ((c), (c)), method = dp)").fetchone()
    # no group can star a subset of {c}: everything is the one fully suppressed group
    assert (exact[3], exact[6], exact[7]) == (18, True, 18)
    assert (dp[3], dp[6], dp[7]) == (18, True, 18)
    # dp used to publish (0,*,*), (1,*,*) and (*,*,*): three classes outside the patterns
    assert con.duckdb.execute("SELECT DISTINCT a, b, c FROM d").fetchall() == [("*", "*", "*")]
    con.close()


def test_all_star_user_pattern_bound_is_on_published_stars():
    # a user pattern starring every column allows any meet: pairs starring column a publish 6
    # stars, while Bredereck's cost of every solution is 18
    rows = [(0, 0, 0), (1, 0, 0), (0, 1, 1), (1, 1, 1), (0, 2, 2), (1, 2, 2)]
    hist = Histogram.from_rows([tuple(map(str, r)) for r in rows])
    patterns = [[0, 1, 2]]
    dp_solution = solve(hist, [KAnonymity(2)], "dp", patterns)
    exact_solution = solve(hist, [KAnonymity(2)], "exact", patterns)
    for solution in (dp_solution, exact_solution):
        assert solution.notes["objective"] == 18  # Bredereck's optimum (pattern stars)
        assert (solution.stars, solution.optimal, solution.lower_bound) == (6, True, 6)  # published


def _random_instance(rng):
    n = int(rng.integers(2, 8))
    m = int(rng.integers(2, 4))
    alphabet = int(rng.integers(2, 4))
    rows = [tuple(str(rng.integers(0, alphabet)) for _ in range(m)) for _ in range(n)]
    sas = [str(i % 2) for i in range(n)]
    rng.shuffle(sas)
    k = int(rng.integers(2, min(n, 3) + 1))
    l = 2 if rng.integers(0, 4) == 0 and 2 * max(Counter(sas).values()) <= n else 1
    patterns = [sorted({int(j) for j in rng.choice(m, size=int(rng.integers(1, m + 1)), replace=False)})
                for _ in range(int(rng.integers(1, 3)))]
    return rows, list(sas), k, l, patterns


def test_random_patterns_exact_dp_brute_force():
    rng = np.random.default_rng(11)
    for _ in range(120):
        rows, sas, k, l, patterns = _random_instance(rng)
        hist = Histogram.from_rows(rows, sas)
        models = [KAnonymity(k)] + ([LDiversity(l)] if l > 1 else [])
        bredereck, published = brute_force(rows, sas, k, l, patterns)
        results = {method: solve(hist, models, method, patterns) for method in ("dp", "exact", "greedy")}
        case = (rows, sas, k, l, patterns)
        for method in ("dp", "exact"):
            solution = results[method]
            assert solution.optimal, (method, case)
            assert solution.notes["objective"] == bredereck, (method, case)
            assert solution.stars == solution.lower_bound == published, (method, solution.stars, published, case)
            assert len(_outside(solution, patterns, hist.m)) <= 1, (method, case)
        # every reported bound holds for every method's published stars
        for a in results.values():
            for b in results.values():
                if a.lower_bound is not None:
                    assert b.stars >= a.lower_bound, (a.method, b.method, case)


HARD = ("CREATE TABLE hard AS SELECT hash(i, 1) % 10 AS a, hash(i, 2) % 10 AS b, hash(i, 3) % 10 AS c, "
        "hash(i, 4) % 6 AS d FROM range(400) r(i)")


@pytest.mark.parametrize("limit", [0.3, 1.0])
def test_exact_time_limit_is_one_deadline(limit):
    con = duckanon.connect()
    con.duckdb.execute(HARD)
    started = time.perf_counter()
    summary = con.anonymize(f"ANONYMIZE hard WITH (k = 4, method = exact, time_limit = {limit})")
    elapsed = time.perf_counter() - started
    assert elapsed < limit + 1.5, elapsed
    assert summary.lower_bound is None or summary.lower_bound <= summary.stars
    sizes = con.duckdb.execute("SELECT count(*) FROM hard_anon GROUP BY a, b, c, d").fetchall()
    assert min(s for (s,) in sizes) >= 4
    con.close()


def test_local_search_stops_at_its_deadline_with_a_valid_partition():
    rng = np.random.default_rng(3)
    rows = [tuple(str(v) for v in rng.integers(0, 10, size=4)) for _ in range(400)]
    hist = Histogram.from_rows(rows)
    models = [KAnonymity(4)]
    start = solve(hist, models, "greedy")
    for deadline in (time.perf_counter() + 0.2, None):
        began = time.perf_counter()
        result = local_search(hist, start, models, SolveContext(deadline))
        if deadline is not None:
            assert time.perf_counter() - began < 0.2 + 0.5
        if result is not None:
            assert result.stars <= start.stars
            sizes = result.group_sizes()
            assert sizes[sizes > 0].min() >= 4
    # a deadline already past: nothing to improve with
    assert local_search(hist, start, models, SolveContext(time.perf_counter() - 1)) is None
