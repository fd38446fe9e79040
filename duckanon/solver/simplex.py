"""Optimal 2-anonymity under cell suppression: the minimum-cost simplex matching (method 'simplex').

Blocki & Williams (Thm 1): an optimal 2-anonymous partition has groups of 2 and 3 rows only, so
optimal 2-anonymity is a minimum-cost perfect cover of the rows by pairs (cost 2 * the columns
where the two rows differ) and triples (3 * the columns where the three are not all equal), and
these costs satisfy the simplex condition c(uv) + c(vw) + c(uw) <= 2 c(uvw) column by column
(three rows differ on 0, 2 or 3 of their pairs in a column that is not all equal, against 2 * 1).
With attribute weights a column counts at its weight: the condition still holds column by column.

What runs, on the class histogram (a class of n_c identical rows is one node with demand n_c):

1. The linear program of the fractional perfect b-matching over class pairs (x_cd >= 0, every
   class covered n_c times, a class with n_c >= 2 may pair with itself at cost 0), by HiGHS with
   column generation: the dual y (one number per class) is priced on a pool of cheap pairs, and
   when none of those is violated checked against every pair of classes (a scan of all C(C-1)/2
   pairs, by blocks: one-hot matrix products for the columns of few values); the violated pairs
   are added and the LP re-solved until none is. The last dual is then shifted down by its largest remaining violation, so it is
   feasible for every pair, exactly.
2. That dual is feasible for every triple too, by the simplex condition:
   y_u + y_v + y_w = ((y_u + y_v) + (y_v + y_w) + (y_u + y_w)) / 2 <= (c(uv) + c(vw) + c(uw)) / 2
   <= c(uvw)
   (for a triple {c, c, d}: 2 y_c + y_d = y_c + y_c + y_d <= 0 / 2 + c(cd) <= c(ccd), since
   2 y_c <= c(cc) = 0). So the LP over pairs *and triples* (the set-partitioning relaxation) has the
   same optimum L, and L = sum n_c y_c is a proven lower bound on the optimum. Every cover then
   costs L + the sum of its groups' reduced costs rc(G) = c(G) - sum y >= 0.
3. Pruning (proved): a cover cheaper than a cover of cost U uses only groups with rc(G) < U - L.
   A triple with rc <= g has its three pairs' reduced costs summing to at most 2 g (the same
   inequality), so the candidate triples come from the pairs with rc <= 2 g. With a gap g, the
   groups with rc <= g are listed (pairs from the scan, triples from those pairs) and the set
   partitioning over them is solved exactly by HiGHS's MILP (integer group counts per class
   tuple). A cover cheaper than V costs at most V - u (u = 1 with integral weights: every cover
   costs an integer; else 0), so its groups have rc <= V - u - L: if that is <= g, V is the global
   optimum; else g becomes V - u - L and the listing and MILP run again (a new optimum below V
   repeats the test; none proves V). When the listed groups cover no solution g is doubled. The
   first g is ceil(L) - L (with integral weights). Up to SIMPLEX_WHOLE_CLASSES classes every
   pair and triple is listed at once (no LP).

So a release of this method with optimal = True is proven optimal: by the LP bound and HiGHS's
MILP optimum on the pruned groups. It is not a polynomial algorithm: the LP part is, the set
partitioning is a branch and bound (worst case exponential; on Adult it closes gaps of a few
stars). When the MILP stops at SIMPLEX_MILP_NODES, or the listing exceeds SIMPLEX_MAX_GROUPS,
the best cover found is released with the bound ceil(L) and optimal = False. The polynomial algorithm of Anshelevich & Karagiozova is not implemented
(its text is not available), nor the vertex-incremental exchange algorithm of ALGORITHMS.md, whose
key lemma is verified, not proved: this method does not depend on it. Generalization
hierarchies (Thm 8) are not implemented here.

Size: everything is on classes, with their counts as demands, so the work grows with the number
of classes, not rows (Blocki & Williams' kernel, Lemma 2, would only lower counts: not needed).
No minimum-cost perfect matching library (networkx) is used: the matching LP and the set
partitioning are HiGHS's.
"""

from __future__ import annotations

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram, lexicographic_order
from duckanon.solver.models import KAnonymity
from duckanon.solver.partition import Solution, solution_from_class_groups
from duckanon.solver.request import Request

# pairs of classes costed per block of the all-pairs scans (memory: a few arrays of this size)
SCAN_PAIRS_PER_BLOCK = 1 << 21
# the column generation adds at most this many violated pairs per class and round
PAIRS_PER_CLASS = 6
# the pool the LP is priced on between full scans (lp_bound)
POOL_PER_CLASS = 40
POOL_SLACK = 2
# columns of at most this many values are compared as one-hot codes by a matrix product
ONE_HOT_VALUES = 512
# violations below this are numerical noise (the dual is shifted down by the largest one left)
TOLERANCE = 1e-9
# the MILP's branch and bound stops after this many nodes (a count, not seconds: the same release
# whatever the load); listing more than this many groups is refused
SIMPLEX_MILP_NODES = 100_000
SIMPLEX_MAX_GROUPS = 3_000_000
# up to this many classes every pair and triple is listed (one MILP, no LP)
SIMPLEX_WHOLE_CLASSES = 24
# the gap grows at most this many times (each round lists more groups)
SIMPLEX_MAX_ROUNDS = 12


def simplex_not_applicable(hist: Histogram, models, patterns=None) -> str | None:
    """None when 'simplex' solves this request, else the one line refusing it (the registry's)."""
    if patterns is not None:
        return methods.refusal("simplex", "takes_patterns")
    request = Request.of(models)
    other = next((m for m in request if type(m) is not KAnonymity), None)
    if other is not None:
        return methods.refusal("simplex", "any_k", str(other))
    if not request.k_anonymity or request.k != 2:
        return methods.refusal("simplex", "any_k", f"k = {request.k}")
    return None


def _weights(hist: Histogram, weights) -> np.ndarray:
    return np.ones(hist.m) if weights is None else np.asarray(weights, dtype=np.float64)


class _Distances:
    """Weighted Hamming distances between classes by blocks of rows: the columns of at most
    ONE_HOT_VALUES values as one matrix product of their one-hot codes (agreements), the others
    compared directly."""

    def __init__(self, codes: np.ndarray, w: np.ndarray):
        self.codes, self.w = codes, w
        few = [j for j in range(codes.shape[1]) if (int(np.ptp(codes[:, j])) if len(codes) else 0) < ONE_HOT_VALUES]
        self.many = [j for j in range(codes.shape[1]) if j not in few]
        blocks, weighted = [], []
        for j in few:
            values = codes[:, j] - codes[:, j].min()
            hot = np.zeros((len(codes), int(values.max()) + 1))
            hot[np.arange(len(codes)), values] = 1.0
            blocks.append(hot); weighted.append(hot * w[j])
        self.hot = np.hstack(blocks) if blocks else np.zeros((len(codes), 0))
        self.hot_w = np.hstack(weighted) if weighted else self.hot
        self.total = float(w[few].sum())

    def __len__(self) -> int:
        return len(self.codes)

    def block(self, rows: slice) -> np.ndarray:
        cost = self.total - self.hot_w[rows] @ self.hot.T
        for j in self.many:
            cost += self.w[j] * (self.codes[rows, j, None] != self.codes[None, :, j])
        return cost


def _scan(distances: _Distances, y: np.ndarray, limit: float):
    """Every pair i < j of distinct classes with reduced cost 2 h(i, j) - y_i - y_j <= limit:
    (i, j, reduced cost) arrays, by blocks of rows."""
    n = len(distances)
    step = max(1, SCAN_PAIRS_PER_BLOCK // max(n, 1))
    found_i, found_j, found_rc = [], [], []
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        rc = 2 * distances.block(rows) - y[rows, None] - y[None, :]
        i, j = np.nonzero(rc <= limit)
        i += start
        keep = j > i
        found_i.append(i[keep]); found_j.append(j[keep]); found_rc.append(rc[i[keep] - start, j[keep]])
    if not found_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_rc)


def _per_class(i: np.ndarray, j: np.ndarray, rc: np.ndarray, cap: int) -> np.ndarray:
    """Indices of the pairs kept when each class keeps its `cap` lowest reduced costs (a pair is
    kept when either end keeps it); ties by the other end's index (deterministic)."""
    ends = np.concatenate([i, j])
    others = np.concatenate([j, i])
    which = np.concatenate([np.arange(len(i)), np.arange(len(i))])
    order = np.lexsort((others, np.concatenate([rc, rc]), ends))
    ends = ends[order]
    start = np.searchsorted(ends, ends, side="left")
    rank = np.arange(len(ends)) - start
    return np.unique(which[order][rank < cap])


class _Pairs:
    """The LP's pair columns: distinct class pairs (i < j)."""

    def __init__(self):
        self.i = np.zeros(0, dtype=np.int64)
        self.j = np.zeros(0, dtype=np.int64)

    def add(self, i, j) -> int:
        """Adds the new ones; returns how many were new."""
        old = set(zip(self.i.tolist(), self.j.tolist()))
        new = [(a, b) for a, b in zip(i.tolist(), j.tolist()) if (a, b) not in old]
        if new:
            a, b = np.array(new, dtype=np.int64).T
            self.i, self.j = np.concatenate([self.i, a]), np.concatenate([self.j, b])
        return len(new)


def _solve_lp(codes, counts, w, pairs: _Pairs) -> np.ndarray:
    """The fractional b-matching LP on `pairs` plus self pairs; its dual y (one per class)."""
    from scipy import sparse
    from scipy.optimize import linprog

    n = len(counts)
    selfs = np.flatnonzero(counts >= 2)
    cost = np.concatenate([2 * (w * (codes[pairs.i] != codes[pairs.j])).sum(axis=1), np.zeros(len(selfs))])
    columns = np.arange(len(cost))
    p = len(pairs.i)
    rows = np.concatenate([pairs.i, pairs.j, selfs])
    cols = np.concatenate([columns[:p], columns[:p], columns[p:]])
    values = np.concatenate([np.ones(2 * p), np.full(len(selfs), 2.0)])
    matrix = sparse.csr_array((values, (rows, cols)), shape=(n, len(cost)))
    result = linprog(cost, A_eq=matrix, b_eq=counts.astype(float), bounds=(0, None), method="highs")
    if result.status != 0:
        raise AnonymizeError(f"simplex: the matching LP was not solved ({result.message})")
    return np.asarray(result.eqlin.marginals, dtype=np.float64)


def lp_bound(distances: _Distances, counts: np.ndarray) -> tuple[np.ndarray, float, int]:
    """Column generation for the fractional perfect b-matching LP (module docstring, 1): a dual y
    feasible for every pair of classes (and so every triple), its value sum n_c y_c (a proven lower
    bound on the optimum) and the number of LP solves."""
    n = len(counts)
    if n == 1:
        return np.zeros(1), 0.0, 0
    # start: each class's nearest classes (reduced costs against y = 0 up to its nearest distance)
    y = np.zeros(n)
    codes = distances.codes
    i, j, rc = _nearest(distances)
    pairs = _Pairs()
    keep = _per_class(i, j, rc, PAIRS_PER_CLASS)
    pairs.add(i[keep], j[keep])
    # and a cycle through the classes in lexicographic order, so the first LP is feasible (half
    # of every cycle edge covers each class once; a class of n_c >= 2 pairs with itself for the rest)
    order = lexicographic_order(codes)
    ring = np.roll(order, -1)
    pairs.add(np.minimum(order, ring)[: n if n > 2 else 1], np.maximum(order, ring)[: n if n > 2 else 1])
    # a pool of cheap pairs, priced without a scan: per class its POOL_PER_CLASS cheapest pairs
    # within POOL_SLACK stars of its nearest (one scan); a full scan only when the pool has none
    # violated, so the LP is re-solved many times for few scans of all C(C-1)/2 pairs
    nearest = np.full(n, np.inf)
    np.minimum.at(nearest, np.concatenate([i, j]), np.concatenate([rc, rc]))
    reach = (nearest + POOL_SLACK * 2 * float(distances.w.min())) / 2
    pi, pj, prc = _scan(distances, reach, 0.0)
    keep = _per_class(pi, pj, prc, POOL_PER_CLASS)
    pool_i, pool_j = pi[keep], pj[keep]
    pool_cost = 2 * (distances.w * (codes[pool_i] != codes[pool_j])).sum(axis=1)
    solves = 0
    while True:
        y = _solve_lp(codes, counts, distances.w, pairs)
        solves += 1
        rc = pool_cost - y[pool_i] - y[pool_j]
        bad = np.flatnonzero(rc < -TOLERANCE)
        if len(bad):
            keep = bad[_per_class(pool_i[bad], pool_j[bad], rc[bad], PAIRS_PER_CLASS)]
            if pairs.add(pool_i[keep], pool_j[keep]):
                continue
        i, j, rc = _scan(distances, y, 0.0)
        bad = rc < -TOLERANCE
        if not bad.any():
            break
        keep = _per_class(i[bad], j[bad], rc[bad], PAIRS_PER_CLASS)
        if pairs.add(i[bad][keep], j[bad][keep]) == 0:
            break
        pool_i, pool_j = np.concatenate([pool_i, i[bad]]), np.concatenate([pool_j, j[bad]])
        pool_cost = 2 * (distances.w * (codes[pool_i] != codes[pool_j])).sum(axis=1)
    # make it exactly feasible: shift by the largest violation left (pairs, from the last scan,
    # and self pairs)
    worst = max(0.0, float(-rc.min()) if len(rc) else 0.0, float(2 * y[counts >= 2].max(initial=0.0)))
    y = y - worst / 2
    return y, float(counts @ y), solves


def _nearest(distances: _Distances):
    """Per class, the pairs to its nearest other classes (distance equal to its nearest), by blocks."""
    n = len(distances)
    step = max(1, SCAN_PAIRS_PER_BLOCK // n)
    found_i, found_j, found_c = [], [], []
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        cost = 2 * distances.block(rows)
        local = np.arange(cost.shape[0])
        cost[local, local + start] = np.inf
        nearest = cost.min(axis=1)
        i, j = np.nonzero(cost <= nearest[:, None])
        found_i.append(np.minimum(i + start, j)); found_j.append(np.maximum(i + start, j)); found_c.append(cost[i, j])
    i, j, c = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_c)
    unique, index = np.unique(i * n + j, return_index=True)
    return i[index], j[index], c[index]


class _Groups:
    """The listed groups: each a tuple of classes (a multiset, sorted) with its cost."""

    def __init__(self):
        self.members: list[np.ndarray] = []  # (G, 3) class ids, -1 in the third for pairs
        self.cost: list[np.ndarray] = []

    def add(self, members: np.ndarray, cost: np.ndarray):
        if len(members):
            self.members.append(members)
            self.cost.append(cost)

    def arrays(self):
        if not self.members:
            return np.zeros((0, 3), dtype=np.int64), np.zeros(0)
        return np.concatenate(self.members), np.concatenate(self.cost)


def _triple_cost(codes, a, b, c, w) -> np.ndarray:
    return 3 * (w * ((codes[a] != codes[b]) | (codes[b] != codes[c]))).sum(axis=1)


def _triangles(i: np.ndarray, j: np.ndarray, rc: np.ndarray, n: int, limit: float) -> np.ndarray:
    """Every (a, b, c), a < b < c, whose three pairs are among the pairs (i < j) with reduced costs
    `rc` summing to at most `limit`: joins the pairs (a, b) and (a, c) on a, then looks (b, c) up."""
    order = np.lexsort((j, i))
    i, j, rc = i[order], j[order], rc[order]
    key = i * n + j  # sorted
    starts = np.searchsorted(i, np.arange(n))
    ends = np.searchsorted(i, np.arange(n), side="right")
    found = []
    for a in np.flatnonzero(ends - starts >= 2).tolist():
        near, near_rc = j[starts[a]:ends[a]], rc[starts[a]:ends[a]]
        x, z = np.triu_indices(len(near), 1)
        two = near_rc[x] + near_rc[z]
        x, z, two = x[two <= limit], z[two <= limit], two[two <= limit]
        wanted = near[x] * n + near[z]
        at = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
        hit = (key[at] == wanted) & (two + rc[at] <= limit)
        if hit.any():
            found.append(np.column_stack([np.full(int(hit.sum()), a), near[x[hit]], near[z[hit]]]))
    return np.concatenate(found) if found else np.zeros((0, 3), dtype=np.int64)


def list_groups(distances: _Distances, counts, y, gap: float):
    """Every group (pair or triple of rows, as classes) whose reduced cost against `y` is at most
    `gap` (module docstring, 3), and the pure groups (c, c) and (c, c, c): (members, cost)."""
    n, codes, w = len(counts), distances.codes, distances.w
    groups = _Groups()
    twice = np.flatnonzero(counts >= 2)
    groups.add(np.column_stack([twice, twice, np.full(len(twice), -1)]), np.zeros(len(twice)))
    thrice = np.flatnonzero(counts >= 3)
    groups.add(np.column_stack([thrice, thrice, thrice]), np.zeros(len(thrice)))
    i, j, rc = _scan(distances, y, 2 * gap + TOLERANCE)
    near = rc <= gap + TOLERANCE
    pair_cost = 2 * (w * (codes[i[near]] != codes[j[near]])).sum(axis=1)
    groups.add(np.column_stack([i[near], j[near], np.full(int(near.sum()), -1)]), pair_cost)
    for double, single in ((i[near], j[near]), (j[near], i[near])):  # (c, c, d): n_c >= 2
        ok = counts[double] >= 2
        a, b = double[ok], single[ok]
        cost = _triple_cost(codes, a, a, b, w)
        fits = cost - 2 * y[a] - y[b] <= gap + TOLERANCE
        groups.add(np.column_stack([a[fits], a[fits], b[fits]]), cost[fits])
    triples = _triangles(i, j, rc, n, 2 * gap + TOLERANCE)
    if len(triples):
        a, b, c = triples.T
        cost = _triple_cost(codes, a, b, c, w)
        fits = cost - y[a] - y[b] - y[c] <= gap + TOLERANCE
        groups.add(triples[fits], cost[fits])
    members, cost = groups.arrays()
    return members, cost


def _set_partitioning(members: np.ndarray, cost: np.ndarray, counts: np.ndarray, below: float | None = None):
    """HiGHS's MILP: how many copies of each listed group cover every class exactly n_c times,
    costing at most `below` when given (x or None when the listed groups cover no such solution,
    proven optimal?, message)."""
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    g = len(cost)
    rows = members.ravel()
    cols = np.repeat(np.arange(g), 3)
    real = rows >= 0
    matrix = sparse.coo_array((np.ones(int(real.sum())), (rows[real], cols[real])), shape=(len(counts), g)).tocsr()
    matrix.sum_duplicates()
    multiplicity = np.where(real, 1, 0).reshape(g, 3)
    same = np.column_stack([members[:, 0] == members[:, 1], members[:, 1] == members[:, 2]])
    per_member = multiplicity + 0  # how often each member's class appears in its group
    per_member[:, 0] += same[:, 0] + (same[:, 0] & same[:, 1])
    ub = np.min(np.where(real.reshape(g, 3), counts[np.maximum(members, 0)] // np.maximum(per_member, 1),
                         np.iinfo(np.int64).max), axis=1)
    constraints = [LinearConstraint(matrix, counts.astype(float), counts.astype(float))]
    if below is not None:
        constraints.append(LinearConstraint(cost[None, :], -np.inf, below))
    result = milp(cost, integrality=np.ones(g), bounds=Bounds(0, ub.astype(float)), constraints=constraints,
                  options={"disp": False, "mip_rel_gap": 0.0, "node_limit": SIMPLEX_MILP_NODES})
    if result.x is None:
        return None, result.status == 2, str(result.message)
    return np.rint(result.x).astype(np.int64), result.status == 0, str(result.message)


def optimal_cover(codes: np.ndarray, counts: np.ndarray, w: np.ndarray, whole: int | None = None) -> dict:
    """The minimum-cost cover of the classes' rows by pairs and triples (module docstring, 3):
    {"members", "copies", "cost", "bound", "proven", "rounds", "lp_solves", "groups", "gap",
    "stopped"}. At most `whole` classes (default SIMPLEX_WHOLE_CLASSES): one MILP over every
    pair and triple, no LP and no pruning."""
    distances = _Distances(codes, w)
    if len(counts) <= (SIMPLEX_WHOLE_CLASSES if whole is None else whole):
        members, cost = list_groups(distances, counts, np.zeros(len(counts)), np.inf)
        copies, solved, message = _set_partitioning(members, cost, counts)
        if copies is None:
            raise AnonymizeError(f"method 'simplex' found no cover ({message})")
        value = float(cost @ copies)
        return {"members": members, "copies": copies, "cost": value, "bound": value if solved else 0.0,
                "proven": solved, "rounds": 1, "lp_solves": 0, "groups": len(cost), "gap": np.inf,
                "stopped": "" if solved else message}
    y, bound, solves = lp_bound(distances, counts)
    # with integral weights every cover costs an integer: a cheaper one costs at most best - 1
    unit = 1.0 if bool((w == np.rint(w)).all()) else 0.0
    gap = (float(np.ceil(bound - 1e-6) - bound) if unit else 0.0) + TOLERANCE
    best, proven, rounds, listed, why = None, False, 0, 0, ""
    while rounds < SIMPLEX_MAX_ROUNDS:
        rounds += 1
        members, cost = list_groups(distances, counts, y, gap)
        listed = len(cost)
        if listed > SIMPLEX_MAX_GROUPS:
            why = f"the pruning lists {listed:,} groups, more than {SIMPLEX_MAX_GROUPS:,}"
            break
        copies, solved, message = _set_partitioning(members, cost, counts)
        if copies is None and not solved:
            why = f"the set partitioning stopped ({message})"
            break
        value = None if copies is None else float(cost @ copies)
        if best is not None and (value is None or value >= best["cost"] - 1e-9):
            proven = solved  # every cheaper cover's groups were listed, and there is none
            break
        if value is None:  # the listed groups cover nothing yet
            gap = max(2 * gap, float(w.min()))
            continue
        best = {"members": members, "copies": copies, "cost": value}
        if not solved:
            why = f"the set partitioning stopped ({message})"
            break
        needed = value - unit - bound  # the largest reduced cost in a cheaper cover
        if needed <= gap + 1e-9 * max(1.0, abs(value)):
            proven = True
            break
        gap = needed + TOLERANCE
    if best is None:
        raise AnonymizeError(f"method 'simplex' found no cover: {why or 'too many rounds'}")
    return dict(best, bound=bound, proven=proven, rounds=rounds, lp_solves=solves, groups=listed, gap=gap,
                stopped=why)


def simplex(hist: Histogram, models, patterns=None, weights=None) -> Solution:
    """Optimal 2-anonymity by the pruned simplex matching (module docstring). `weights`: a star's
    cost per column (partition.star_weights); the optimum is then in weighted stars."""
    reason = simplex_not_applicable(hist, models, patterns)
    if reason:
        raise AnonymizeError(reason)
    counts = hist.sizes.astype(np.int64)
    w = _weights(hist, weights)
    if (counts >= 2).all() or hist.m == 0:
        cover = None
        classes = np.arange(hist.n_classes)
        solution = solution_from_class_groups(hist, classes, classes, counts, "simplex")
        bound = 0.0
    else:
        cover = optimal_cover(hist.codes, counts, w)
        chosen = np.flatnonzero(cover["copies"])
        cls, grp, cnt = [], [], []
        for group, index in enumerate(chosen.tolist()):
            members = cover["members"][index]
            members = members[members >= 0]
            ids, times = np.unique(members, return_counts=True)
            cls += ids.tolist(); grp += [group] * len(ids); cnt += (times * cover["copies"][index]).tolist()
        solution = solution_from_class_groups(hist, np.array(cls), np.array(grp), np.array(cnt), "simplex")
        bound = cover["bound"]
        solution.notes.update({"listed_groups": cover["groups"], "milp_rounds": cover["rounds"]})
        if cover["lp_solves"]:  # (at most SIMPLEX_WHOLE_CLASSES classes: no LP, every group listed)
            solution.notes.update({"lp_bound": round(bound, 9), "lp_solves": cover["lp_solves"]})
        if cover["stopped"]:
            solution.notes["stopped"] = cover["stopped"]
    cost = solution.cost(weights)
    proven = cover is None or cover["proven"]
    solution.optimal = proven
    lower = cost if proven else max(0.0, bound - 1e-9 * max(1.0, abs(bound)))
    if weights is None:
        solution.lower_bound = int(lower) if proven else int(np.ceil(lower - 1e-6))
    else:
        solution.notes["weighted_lower_bound"] = float(lower)
    return solution
