"""The vertex-incremental exchange algorithm for simplex matching (ALGORITHMS.md, "Simplex
matching: what is now known"; issue 39): a minimum-cost cover of n vertices by pairs and triples
whose costs satisfy the simplex condition c(uv) + c(vw) + c(uw) <= 2 c(uvw), in polynomial time
IF the exchange lemma holds. The lemma is verified on random instances (ALGORITHMS.md; this
repository's tests against an independent brute force), NOT proved: a cover this function
returns is a valid cover, claimed optimal by nothing.

What it computes. Costs are completed as in fact (i): a missing pair (inf) costs BIG and a
missing triple 2 BIG, BIG above any cover of present groups, which keeps the simplex condition
and gives every vertex set of at least 2 vertices a cover. Vertices are added one at a time in the
order given; a cover of the vertices so far is kept as a set T of disjoint triples plus a
minimum-cost perfect matching (MCPM) of the rest (fact (ii)). For a new vertex z and W' (the
vertices in no triple, z with them) the candidates are "add a triple t inside W'", costing
c(T) + c(t) + MCPM(W' \\ t), and "remove a triple s of T", costing c(T) - c(s) + MCPM(W' + s); the
cheapest is kept (ties: the first in a fixed order). n - 2 steps of at most C(n, 3) + n/3 MCPMs:
polynomial (each MCPM is networkx's O(n^3) blossom).

Pruning (proved, it changes no step's minimum, only how many MCPMs are solved): NPM, the
least-cost matching of the odd W' leaving one vertex out (one MCPM of W' plus a vertex joined to
all at cost 0), bounds every "add t" candidate: an MCPM of W' \\ t plus t's cheapest pair is such
a matching, so MCPM(W' \\ t) >= NPM - min pair(t). The vertex NPM leaves out joined to a pair of
NPM is a cover (an "add" candidate's value at least), the first incumbent. Candidates are taken in
increasing bound; before a candidate's MCPM, half the minimum-cost assignment of its vertex set
(scipy's linear_sum_assignment, no vertex assigned to itself: a perfect matching taken both ways
is such an assignment) must also be below the incumbent. MCPMs of the same vertex set are solved
once. The LP-dual pruning of ALGORITHMS.md ("Making it fast") is not built.

Work is bounded by a count: at most `max_matchings` blossom MCPMs per call (None: no bound);
past it the function returns None (no cover), the same whatever the load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np


class _OverBudget(Exception):
    """More blossom MCPMs than the call's max_matchings."""


@dataclass
class ExchangeCover:
    """A cover of vertices 0..n-1: `groups` (tuples of 2 or 3 vertices, sorted), its `cost` (the
    completed costs), `feasible` (no missing group used), and the work done: `matchings` (blossom
    MCPMs solved) and `candidates` (candidates evaluated exactly)."""

    groups: list[tuple[int, ...]]
    cost: float
    feasible: bool
    matchings: int = 0
    candidates: int = 0
    steps: int = 0
    bounded: int = field(default=0)  # candidates ruled out by a bound without an MCPM


class _Matcher:
    """MCPMs of vertex subsets over one completed pair-cost matrix, memoised by vertex set."""

    def __init__(self, pair: np.ndarray, budget: int | None):
        self.pair, self.budget, self.solved = pair, budget, 0
        self.integral = bool(np.all(pair == np.rint(pair)))
        self.top = float(pair.max(initial=0.0)) + 1.0
        self.memo: dict[frozenset, tuple[float, list]] = {}

    def mcpm(self, vertices) -> tuple[float, list[tuple[int, int]]]:
        """The least-cost perfect matching of an even vertex set: (cost, pairs)."""
        key = frozenset(vertices)
        if key in self.memo:
            return self.memo[key]
        vs = sorted(key)
        if len(vs) == 0:
            result = (0.0, [])
        elif len(vs) == 2:
            result = (float(self.pair[vs[0], vs[1]]), [(vs[0], vs[1])])
        else:
            result = self._blossom(vs)
        self.memo[key] = result
        return result

    def near(self, vertices) -> tuple[float, list[tuple[int, int]], int]:
        """The least-cost matching of an odd vertex set leaving exactly one vertex out (a vertex
        joined to every other at cost 0): (cost, pairs, the vertex left out)."""
        vs = sorted(vertices)
        if len(vs) == 1:
            return 0.0, [], vs[0]
        cost, pairs = self._blossom(vs, dummy=True)
        matched = {v for p in pairs for v in p}
        (out,) = [v for v in vs if v not in matched]
        return cost, pairs, out

    def _blossom(self, vs: list[int], dummy: bool = False):
        import networkx as nx

        self.solved += 1
        if self.budget is not None and self.solved > self.budget:
            raise _OverBudget
        sub = self.pair[np.ix_(vs, vs)]
        # a maximum-weight matching of maximum cardinality on weights top - cost: on a complete
        # graph of an even vertex set it is perfect, and the least-cost one (networkx's
        # min_weight_matching does the same); integers stay integers (exact arithmetic)
        weight = (self.top - sub)
        graph = nx.Graph()
        a, b = np.triu_indices(len(vs), 1)
        values = weight[a, b]
        if self.integral:
            graph.add_weighted_edges_from(zip([vs[i] for i in a.tolist()], [vs[j] for j in b.tolist()],
                                              np.rint(values).astype(np.int64).tolist()))
        else:
            graph.add_weighted_edges_from(zip([vs[i] for i in a.tolist()], [vs[j] for j in b.tolist()],
                                              values.tolist()))
        if dummy:
            top = int(self.top) if self.integral else self.top
            graph.add_weighted_edges_from((-1, v, top) for v in vs)
        mate = nx.max_weight_matching(graph, maxcardinality=True)
        pairs = sorted(tuple(sorted(e)) for e in mate if -1 not in e)
        if 2 * len(mate) != len(vs) + (1 if dummy else 0):
            raise AssertionError("the blossom matching is not perfect on a complete graph")
        return float(sum(self.pair[u, v] for u, v in pairs)), pairs

    def assignment_bound(self, vertices) -> float:
        """Half the least-cost assignment of the vertex set to itself with no vertex to itself: at
        most its MCPM (a perfect matching taken both ways is such an assignment)."""
        from scipy.optimize import linear_sum_assignment

        vs = np.fromiter(vertices, dtype=np.int64)
        if len(vs) <= 2:
            return self.mcpm(vs.tolist())[0]
        sub = self.pair[np.ix_(vs, vs)].copy()
        np.fill_diagonal(sub, 2 * self.top * len(vs) + 1.0)
        r, c = linear_sum_assignment(sub)
        return float(sub[r, c].sum()) / 2


def _below(value: float) -> float:
    """A candidate must cost less than this to beat `value` (a relative tolerance; inf stays inf)."""
    return value - 1e-9 * max(1.0, abs(value)) if np.isfinite(value) else value


class _Triples:
    """The completed triple costs: an (n, n, n) array or a vectorised oracle f(a, b, c) -> costs
    (inf for a missing triple), missing ones at 2 BIG."""

    def __init__(self, triple, big: float):
        self.triple, self.big = triple, big

    def __call__(self, a, b, c) -> np.ndarray:
        a, b, c = (np.asarray(x, dtype=np.int64) for x in (a, b, c))
        if callable(self.triple):
            cost = np.asarray(self.triple(a, b, c), dtype=np.float64).reshape(a.shape)
        else:
            cost = self.triple[a, b, c]
        if (cost < 0).any():
            raise ValueError("exchange_cover needs costs of at least 0")
        return np.where(np.isfinite(cost), cost, 2 * self.big)


def completed(pair: np.ndarray, triple, upper: float | None = None) -> tuple[np.ndarray, _Triples, float]:
    """Fact (i): missing pairs (inf) cost BIG, missing triples 2 BIG, BIG = 1 + n times the largest
    present cost (`upper` bounds it when the triples are an oracle), above every cover of present
    groups (a cover has at most n / 2 groups)."""
    pair = np.asarray(pair, dtype=np.float64)
    n = len(pair)
    present = pair[np.isfinite(pair)]
    if (present < 0).any():
        raise ValueError("exchange_cover needs costs of at least 0")
    if callable(triple):
        if upper is None:
            raise ValueError("exchange_cover needs `upper` with a triple oracle")
        top = max(float(upper), float(present.max(initial=0.0)))
        whole = bool(np.all(present == np.rint(present))) and float(upper) == np.rint(upper)
    else:
        triple = np.asarray(triple, dtype=np.float64)
        finite = triple[np.isfinite(triple)]
        if (finite < 0).any():
            raise ValueError("exchange_cover needs costs of at least 0")
        top = max(float(present.max(initial=0.0)), float(finite.max(initial=0.0)))
        whole = bool(np.all(present == np.rint(present)) and np.all(finite == np.rint(finite)))
    big = 1.0 + n * top
    if whole:
        big = float(np.ceil(big))
    return np.where(np.isfinite(pair), pair, big), _Triples(triple, big), big


def _candidate_triples(sub: np.ndarray, limit: float):
    """Every (i, j, k), i < j < k, of a pair-cost matrix whose three pairs all cost below `limit`
    (local indices)."""
    w = len(sub)
    near = sub < limit
    i, j = np.nonzero(np.triu(near, 1))
    if len(i) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    found = []
    step = max(1, (1 << 22) // max(w, 1))
    for start in range(0, len(i), step):
        a, b = i[start:start + step], j[start:start + step]
        common = near[a] & near[b]
        common &= np.arange(w)[None, :] > b[:, None]
        e, k = np.nonzero(common)
        found.append(np.column_stack([a[e], b[e], k]))
    return np.concatenate(found)


def exchange_cover(pair: np.ndarray, triple, max_matchings: int | None = None,
                   upper: float | None = None) -> ExchangeCover | None:
    """The vertex-incremental exchange algorithm (module docstring) on `pair` (n x n, symmetric)
    costs and `triple` costs (an n x n x n symmetric array, or a vectorised oracle f(a, b, c) with
    `upper` bounding every present group's cost), inf for a missing group, n >= 2, vertices added
    in the order 0..n-1. The costs must satisfy the simplex condition (the algorithm's premise;
    the pruning uses it too: a triple's cost is at least half its three pairs'). None when it
    would solve more than `max_matchings` blossom MCPMs."""
    pair_c, triple_c, big = completed(pair, triple, upper)
    n = len(pair_c)
    if n < 2:
        raise ValueError("exchange_cover needs at least 2 vertices")
    matcher = _Matcher(pair_c, max_matchings)
    triples: list[tuple[int, int, int]] = []  # T
    triple_cost: list[float] = []
    matching = [(0, 1)]  # a minimum-cost perfect matching of the vertices in no triple
    free = [0, 1]
    evaluated = bounded = steps = 0
    try:
        for z in range(2, n):
            steps += 1
            w = sorted(free + [z])
            c_t = float(sum(triple_cost))
            near, near_pairs, out = matcher.near(w)
            best_value, best = np.inf, None
            if near_pairs:  # the first incumbent: the vertex left out joined to a pair of NPM
                u, v = np.array(near_pairs).T
                joined = triple_c(np.full(len(u), out), u, v)
                gain = joined - pair_c[u, v]
                at = int(np.argmin(gain))
                t = tuple(sorted((out, int(u[at]), int(v[at]))))
                best_value = c_t + near + float(gain[at])
                best = ("add", t, float(joined[at]), [p for p in near_pairs if p != (int(u[at]), int(v[at]))])
            # the "add t" candidates that can beat it: c(T) + c(t) + NPM - min pair(t) < incumbent,
            # and c(t) >= half its pairs (the simplex condition), so every pair of t costs below
            # 2 (incumbent - c(T) - NPM)
            ws = np.array(w, dtype=np.int64)
            sub = pair_c[np.ix_(ws, ws)]
            if np.isfinite(best_value):
                local = _candidate_triples(sub, 2 * (best_value - c_t - near) + 1e-9 * max(1.0, abs(best_value)))
            else:
                local = np.zeros((0, 3), dtype=np.int64)
            a, b, c = ws[local[:, 0]], ws[local[:, 1]], ws[local[:, 2]]
            cost_t = triple_c(a, b, c)
            least_pair = np.minimum(np.minimum(pair_c[a, b], pair_c[a, c]), pair_c[b, c])
            add_bound = c_t + cost_t + near - least_pair
            candidates = [(float(add_bound[i]), 0, i) for i in range(len(local))]
            candidates += [(c_t - triple_cost[i], 1, i) for i in range(len(triples))]
            candidates.sort()
            for bound, kind, i in candidates:
                if bound >= _below(best_value):
                    break
                if kind == 0:
                    t = (int(a[i]), int(b[i]), int(c[i]))
                    rest = [v for v in w if v not in t]
                    base = c_t + float(cost_t[i])
                else:
                    rest = w + list(triples[i])
                    base = c_t - triple_cost[i]
                if base + matcher.assignment_bound(rest) >= _below(best_value):
                    bounded += 1
                    continue
                value, pairs = matcher.mcpm(rest)
                evaluated += 1
                if base + value < _below(best_value):
                    best_value = base + value
                    best = ("add", t, float(cost_t[i]), pairs) if kind == 0 else ("remove", i, 0.0, pairs)
            what, group, cost, matching = best
            if what == "add":
                triples.append(group)
                triple_cost.append(cost)
            else:
                del triples[group], triple_cost[group]
            free = sorted(v for p in matching for v in p)
    except _OverBudget:
        return None
    groups = sorted([tuple(p) for p in matching] + [tuple(t) for t in triples])
    cost = float(sum(pair_c[p] for p in matching) + sum(triple_cost))
    feasible = all(pair_c[p] < big for p in matching) and all(cost < big for cost in triple_cost)
    return ExchangeCover(groups, cost, feasible, matcher.solved, evaluated, steps, bounded)
