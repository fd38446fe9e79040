"""Optimal 2-anonymity: the minimum-cost simplex matching (method 'simplex'), under cell
suppression and, with generalization hierarchies, over their labels (Blocki & Williams Thm 8).

Blocki & Williams (Thm 1): an optimal 2-anonymous partition has groups of 2 and 3 rows only, so
optimal 2-anonymity is a minimum-cost perfect cover of the rows by pairs (cost 2 * the columns
where the two rows differ) and triples (3 * the columns where the three are not all equal), and
these costs satisfy the simplex condition c(uv) + c(vw) + c(uw) <= 2 c(uvw) column by column
(three rows differ on 0, 2 or 3 of their pairs in a column that is not all equal, against 2 * 1).
With attribute weights a column counts at its weight: the condition still holds column by column.
With hierarchies a group's cell costs the loss of its lowest common label (_LabelLosses says why
the condition holds there: the lowest common level of three values is the largest pairwise one).

What runs, on the class histogram (a class of n_c identical rows is one node with demand n_c):

1. The linear program of the fractional perfect b-matching over class pairs (x_cd >= 0, every
   class covered n_c times, a class with n_c >= 2 may pair with itself at cost 0), by HiGHS with
   column generation, the LP kept in one HiGHS instance (warm_lp.WarmLP: each round starts from
   the last basis; re-solving from scratch took 14-30 s per round at 50,000 classes). The first columns come from a sparse candidate graph (the classes adjacent
   in their lexicographic orders, each column first in turn); each round solves the LP, then
   scans every pair of classes against its dual y (_scan: the classes in decreasing y, by
   blocks, one uint8 comparison per column; 2 h <= y_i + y_max + limit filters a block before any
   reduced cost), and adds the violated pairs. Each round's dual is made feasible exactly by a
   small LP (_repair: lower the ends of the violated pairs, a fractional vertex cover of them), and
   the best of those is kept; the rounds end when nothing is violated, when that bound rounds up
   to the LP's optimum (integral costs), or after LP_STALL_ROUNDS rounds not raising it by
   LP_STALL (or LP_ROUNDS): counts, not a clock.
2. That dual is feasible for every triple too, by the simplex condition:
   y_u + y_v + y_w = ((y_u + y_v) + (y_v + y_w) + (y_u + y_w)) / 2 <= (c(uv) + c(vw) + c(uw)) / 2
   <= c(uvw)
   (for a triple {c, c, d}: 2 y_c + y_d = y_c + y_c + y_d <= 0 / 2 + c(cd) <= c(ccd), since
   2 y_c <= c(cc) = 0). So L = sum n_c y_c is a proven lower bound on the optimum of the whole
   pairs-and-triples set partitioning. Every cover then costs L + the sum of its groups' reduced
   costs rc(G) = c(G) - sum y >= 0.
3. Pruning (proved): a cover cheaper than a cover of cost U uses only groups with rc(G) < U - L.
   A triple with rc <= g has its three pairs' reduced costs summing to at most 2 g (the same
   inequality), so the candidate triples come from the pairs with rc <= 2 g. With a gap g, the
   groups with rc <= g are listed (pairs from a scan, triples from those pairs) and the set
   partitioning over them is solved by HiGHS's MILP, split into the connected components of the
   listed groups, in batches of at most MILP_BATCH_CLASSES classes. A cover rounded from the LP's
   last primal (_rounded_cover: its half-integral cycles cut into pairs and one triple) is listed
   beside them (in later rounds the best cover found so far), so every component has a solution;
   a batch of more than MILP_MAX_GROUPS groups is not given to one MILP: that cover is improved
   in pieces of at most PIECE_CLASSES classes (_in_pieces), which proves nothing by itself (only
   a cover that meets ceil(L) is proven, by the bound). A cover cheaper than the best V
   found costs at most V - u (u = 1 with integral costs: every cover costs an integer; else 0),
   so its groups have rc <= V - u - L: if that is <= g and every batch was solved to optimality,
   V is the global optimum (the listed groups plus the rounded ones are a superset of the groups
   any cheaper cover uses). Else g grows (doubling, at most to V - u - L) and the listing and the
   MILP run again, up to SIMPLEX_MAX_ROUNDS, while a scan finds at most SIMPLEX_MAX_PAIRS pairs.
   The first g is ceil(L) - L (integral costs), or one star more when that listing has at most
   MILP_MAX_GROUPS groups (_listing_ahead). Up to SIMPLEX_WHOLE_CLASSES classes every pair
   and triple is listed at once (no LP).

4. The exchange algorithm (solver/exchange.py: ALGORITHMS.md's vertex-incremental exchange,
   networkx's blossom matchings) on the components whose set partitioning was cut (a batch past
   MILP_MAX_GROUPS or stopped at SIMPLEX_MILP_NODES), when a component has at most
   EXCHANGE_MAX_ROWS rows: over every pair and triple of its rows (not only the listed ones), its
   cover replaces the component's when cheaper (_exchanged). Its work is bounded by counts of
   blossom matchings (EXCHANGE_MATCHINGS_PER_ROW per row, EXCHANGE_MATCHINGS per solve); past
   them the component keeps its cover. details.exchange says what ran.

**Proven**: a release with optimal = True is optimal: either by the pruning argument with
HiGHS's MILP optimum on every batch (the LP bound, no lemma assumed), or because its cost meets
the proven bound ceil(L) (integral costs: no cover costs less), whichever cover reached it.
Any other release is a valid cover published with optimal = False and the proven bound ceil(L)
(lower_bound; with hierarchies details.cell_loss_bound). **Polynomial**: the LP part, and the
exchange algorithm (n - 2 steps of at most C(n, 3) + n/3 minimum-cost perfect matchings, each
O(n^3)). **Verified, not proven**: that the exchange cover is optimal. Its key lemma (some
optimal cover of S + z has the triples of any optimal cover of S with one triple added or one
removed) has no counterexample in ALGORITHMS.md's random instances nor in this repository's
tests (2,000 tables against an independent brute force), but is not proved; so an exchange
cover is claimed optimal only where it meets ceil(L). **Not polynomial**: the method as a
whole. The set partitioning is a branch and bound (worst case exponential), and the exchange
algorithm is run only on components of at most EXCHANGE_MAX_ROWS rows (its pure-Python
matchings take 9 s of CPU at 100 rows and 90 s at 150, BENCHMARKS.md), so the large components
where the MILP is cut (at 50,000 CUP rows one of 30,852 classes) keep the pieces' cover, not
proven. The polynomial algorithm of Anshelevich & Karagiozova is not implemented (its text is
not available).

With hierarchies (simplex_with_hierarchies) the objective is the sum of the cells' ARX loss
(per cell (leaves under its label - 1) / (leaves - 1), times ARX's attribute weight), which is
linear over the groups; the metric the hierarchy methods publish, ARX's Loss, is the columns'
geometric mean, which is not, so the release is proven optimal for the sum only
(optimal_for says so) and reports ARX's Loss beside it. No rows are removed.

Size: everything is on classes, with their counts as demands, so the work grows with the number
of classes, not rows (the exchange algorithm alone works on a component's rows, one vertex per
row, at most EXCHANGE_MAX_ROWS). The matching LP and the set partitioning are HiGHS's; the
exchange algorithm's perfect matchings are networkx's blossom (max_weight_matching).
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
SCAN_PAIRS_PER_BLOCK = 1 << 22
# the column generation adds at most this many violated pairs per class and round
PAIRS_PER_CLASS = 8
# the column generation's rounds (lp_bound): at most LP_ROUNDS, and it stops after LP_STALL_ROUNDS
# rounds in a row that did not raise the best repaired bound by LP_STALL (counts, not a clock)
LP_ROUNDS = 60
LP_STALL = 0.5
LP_STALL_ROUNDS = 6
# pairs of pairs joined at a time when listing triangles (memory: a few arrays of this size)
TRIANGLE_CHUNK = 1 << 22
# the sparse candidate graph (lp_bound's first pool): classes this close in a sorted order
NEIGHBOURS_IN_ORDER = 4
# violations below this are numerical noise (the dual is shifted down by the largest one left)
TOLERANCE = 1e-9
# the MILP's branch and bound stops after this many nodes (a count, not seconds: the same release
# whatever the load); listing more than this many groups is refused
SIMPLEX_MILP_NODES = 100_000
SIMPLEX_MAX_GROUPS = 3_000_000
_TRACE = None  # (benchmarks/profiling: called with each MILP's classes, groups and nodes)
# the set partitioning's connected components are solved in batches of at most this many classes
MILP_BATCH_CLASSES = 2_000
# a batch of more groups than this is not given to the MILP (its root alone took 85 s at 80,000)
MILP_MAX_GROUPS = 120_000
# such a batch is improved in pieces of at most this many classes (_in_pieces: a better cover, not
# a proof), each MILP stopped after PIECE_MILP_NODES nodes (a count: the same cover whatever the load)
PIECE_CLASSES = 1_000
PIECE_MILP_NODES = 200
# a pruning round whose scan finds more pairs than this (within twice the gap) is not run
SIMPLEX_MAX_PAIRS = 2_000_000
# up to this many classes every pair and triple is listed (one MILP, no LP)
SIMPLEX_WHOLE_CLASSES = 24
# the gap grows at most this many times (each round lists more groups)
SIMPLEX_MAX_ROUNDS = 12
# a component whose set partitioning is cut (not proven) gets the exchange algorithm's cover
# (solver/exchange.py) when it has at most this many rows, each run stopped after
# EXCHANGE_MATCHINGS_PER_ROW times its rows blossom matchings (counts, not a clock)
EXCHANGE_MAX_ROWS = 100
EXCHANGE_MATCHINGS_PER_ROW = 8
# and at most this many blossom matchings in all per solve (the components in label order)
EXCHANGE_MATCHINGS = 1_000


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
    """Weighted Hamming distances between classes by blocks: per column one comparison of its
    codes (ranked to the smallest integer type), summed in uint8 when the weights are integers
    summing to at most 255 (exact), else in float64."""

    def __init__(self, codes, w):
        self.codes, self.w = codes, np.asarray(w, dtype=np.float64)
        self.columns = []
        for j in range(codes.shape[1]):
            _, ranks = np.unique(codes[:, j], return_inverse=True)
            self.columns.append(ranks.ravel().astype(np.min_scalar_type(max(int(ranks.max(initial=0)), 1))))
        self.small = bool((self.w == np.rint(self.w)).all() and (self.w >= 0).all() and self.w.sum() <= 255)
        self.dtype = np.uint8 if self.small else np.float64

    def __len__(self):
        return len(self.codes)

    def ordered(self, order):
        """The same distances with the classes in `order` (a copy of the ranked columns)."""
        other = object.__new__(_Distances)
        other.codes, other.w, other.small, other.dtype = self.codes[order], self.w, self.small, self.dtype
        other.columns = [c[order] for c in self.columns]
        return other

    def block(self, rows: slice, cols: slice = slice(None)):
        first = self.columns[0]
        shape = (len(range(*rows.indices(len(first)))), len(range(*cols.indices(len(first)))))
        out = np.zeros(shape, dtype=self.dtype)
        differ = np.empty(shape, dtype=bool)
        for column, weight in zip(self.columns, self.w.tolist()):
            if weight == 0:
                continue
            np.not_equal(column[rows, None], column[None, cols], out=differ)
            if weight == 1:
                np.add(out, differ, out=out, casting="unsafe")
            else:
                np.add(out, differ * self.dtype(weight), out=out, casting="unsafe")
        return out

    def pairs(self, i, j):
        """The distances of the pairs (i, j) (float64)."""
        return (self.w * (self.codes[i] != self.codes[j])).sum(axis=1)

    def triples(self, a, b, c):
        """The cost per row of the triples (a, b, c): the columns where they are not all equal."""
        return (self.w * ((self.codes[a] != self.codes[b]) | (self.codes[b] != self.codes[c]))).sum(axis=1)

    def integral(self) -> bool:
        """Whether every cover costs an integer (integral weights)."""
        return bool((self.w == np.rint(self.w)).all())


class _LabelLosses:
    """The same interface with generalization hierarchies (Blocki & Williams Thm 8): a set of
    classes costs per row and column the loss of its lowest common label, the label of the
    lowest level from which up they share one code (a star, loss 1, when they differ at the top),
    times the column's weight. A pair costs 2 and a triple 3 times that. The simplex condition
    holds column by column: if the three pairs' levels are l1 <= l2 <= l3, then l2 = l3 (two
    classes that agree from l1 up and from l2 up with the third all agree from l2 up), which is
    the triple's level, so two pairs have the triple's label and the third a label on the same
    chain of ancestors below it; with losses that never decrease up a value's chain
    (check_monotone) the three pairs cost 2 (2 L + l) <= 2 * 3 L. Groups above 3 rows never help
    for the same reason (a subset's label is on the chain below the group's)."""

    small = False
    dtype = np.float64

    def __init__(self, codes: np.ndarray, levels: list[np.ndarray], losses: list[list[np.ndarray]], w):
        # levels[j]: (classes, height + 1) the code of each class per level; losses[j][h][code]
        self.codes, self.levels, self.losses, self.w = codes, levels, losses, np.asarray(w, dtype=np.float64)
        self.columns = [np.unique(codes[:, j], return_inverse=True)[1].ravel() for j in range(codes.shape[1])]

    def __len__(self):
        return len(self.codes)

    def ordered(self, order):
        other = object.__new__(_LabelLosses)
        other.codes, other.w, other.losses = self.codes[order], self.w, self.losses
        other.levels = [lv[order] for lv in self.levels]
        other.columns = [c[order] for c in self.columns]
        return other

    def _cost(self, j: int, members: list) -> np.ndarray:
        """Column j's loss of the lowest common label of the classes `members` (index arrays
        broadcasting together)."""
        levels, losses = self.levels[j], self.losses[j]
        shared = np.ones(np.broadcast_shapes(*(np.shape(m) for m in members)), dtype=bool)
        cost = np.ones(shared.shape)
        for level in range(levels.shape[1] - 1, -1, -1):
            first = levels[members[0], level]
            for other in members[1:]:
                shared &= first == levels[other, level]
            if not shared.any():
                break
            cost = np.where(shared, losses[level][first], cost)
        return cost

    def block(self, rows: slice, cols: slice = slice(None)):
        n = len(self.codes)
        r = np.arange(n)[rows][:, None]
        c = np.arange(n)[cols][None, :]
        out = np.zeros((r.shape[0], c.shape[1]))
        for j, weight in enumerate(self.w.tolist()):
            if weight:
                out += weight * self._cost(j, [r, c])
        return out

    def pairs(self, i, j):
        out = np.zeros(len(i))
        for column, weight in enumerate(self.w.tolist()):
            if weight:
                out += weight * self._cost(column, [np.asarray(i), np.asarray(j)])
        return out

    def triples(self, a, b, c):
        out = np.zeros(len(a))
        for column, weight in enumerate(self.w.tolist()):
            if weight:
                out += weight * self._cost(column, [np.asarray(a), np.asarray(b), np.asarray(c)])
        return out

    def integral(self) -> bool:
        return False


class _TooMany(Exception):
    """A scan found more pairs than its cap (the listing would exceed SIMPLEX_MAX_GROUPS)."""


def _scan(distances: _Distances, y: np.ndarray, limit: float, cap: int | None = None):
    """Every pair i < j of distinct classes with reduced cost 2 h(i, j) - y_i - y_j <= limit:
    (i, j, reduced cost) arrays. The classes are taken in decreasing y, and each block of rows
    is compared with the classes after its first row only (every pair once); there y_j is at
    most the block's first y, so 2 h <= y_i + that + limit filters the block before any reduced
    cost is computed. Raises _TooMany past `cap` pairs."""
    n = len(distances)
    order = np.argsort(-y, kind="stable")
    ys = y[order]
    ordered = distances.ordered(order)
    step = max(1, SCAN_PAIRS_PER_BLOCK // max(n, 1))
    found_i, found_j, found_rc, total = [], [], [], 0
    for start in range(0, n - 1, step):
        stop = min(n, start + step)
        bound = (ys[start:stop] + ys[start] + limit) / 2 + TOLERANCE  # h(p, q) can be at most this
        if bound.max() < 0:
            break  # (later blocks have smaller y: no pair left)
        h = ordered.block(slice(start, stop), slice(start, n))
        if ordered.small:
            near = h <= np.clip(np.floor(bound), 0, 255).astype(np.uint8)[:, None]
        else:
            near = h <= bound[:, None]
        r, c = np.nonzero(near)
        keep = (c > r) & (bound[r] >= 0)  # c = r is the class itself
        r, c = r[keep], c[keep]
        rc = 2 * h[r, c].astype(np.float64) - ys[start + r] - ys[start + c]
        fits = rc <= limit
        a, b = order[start + r[fits]], order[start + c[fits]]
        found_i.append(np.minimum(a, b)); found_j.append(np.maximum(a, b)); found_rc.append(rc[fits])
        total += len(a)
        if cap is not None and total > cap:
            raise _TooMany(total)
    if not found_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_rc)


def _repair(y, counts, i, j, violation) -> np.ndarray:
    """The least-cost d >= 0 (sum n_c d_c) with d_i + d_j >= violation per pair and d_c >= y_c for
    the classes of n_c >= 2 (lp_bound's repair of its last dual)."""
    from scipy import sparse
    from scipy.optimize import linprog

    least = np.where(counts >= 2, np.maximum(y, 0.0), 0.0)
    touched = np.unique(np.concatenate([i, j]))
    if len(touched) == 0:
        return least
    at_i, at_j = np.searchsorted(touched, i), np.searchsorted(touched, j)
    rows = np.repeat(np.arange(len(i)), 2)
    matrix = sparse.csr_array((np.full(2 * len(i), -1.0), (rows, np.column_stack([at_i, at_j]).ravel())),
                              shape=(len(i), len(touched)))
    result = linprog(counts[touched].astype(float), A_ub=matrix, b_ub=-violation,
                     bounds=np.column_stack([least[touched], np.full(len(touched), np.inf)]), method="highs")
    d = least.copy()
    if result.status == 0:
        # (HiGHS's tolerance: the pairs' own check below makes it exact)
        d[touched] = np.maximum(result.x, least[touched])
    short = violation - d[i] - d[j]
    np.maximum.at(d, i, d[i] + np.maximum(short, 0.0))
    return d


def _sorted_neighbours(distances: _Distances) -> tuple[np.ndarray, np.ndarray]:
    """A sparse candidate graph: the pairs of classes at most NEIGHBOURS_IN_ORDER apart in the
    lexicographic order of their codes, once per column put first (the columns of most values
    first, then rotated), so classes agreeing on a long run of columns are joined (i < j)."""
    n = len(distances)
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    codes = np.column_stack(distances.columns).astype(np.int64)
    base = np.argsort([-int(c.max(initial=0)) for c in distances.columns], kind="stable")
    keys = []
    for turn in range(len(base)):
        columns = np.roll(base, -turn)
        order = np.lexsort(codes[:, columns[::-1]].T)
        for step in range(1, min(NEIGHBOURS_IN_ORDER, n - 1) + 1):
            a, b = order[:-step], order[step:]
            keys.append(np.minimum(a, b) * n + np.maximum(a, b))
    key = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    return key // n, key % n


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
    """The LP's pair columns: distinct class pairs (i < j), kept in the order added."""

    def __init__(self, n: int):
        self.n = n
        self.i = np.zeros(0, dtype=np.int64)
        self.j = np.zeros(0, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.int64)  # sorted i * n + j

    def add(self, i, j) -> int:
        """Adds the new ones; returns how many were new."""
        key = np.unique(np.asarray(i, dtype=np.int64) * self.n + np.asarray(j, dtype=np.int64))
        new = key[~np.isin(key, self.keys, assume_unique=True)]
        if len(new):
            self.i, self.j = np.concatenate([self.i, new // self.n]), np.concatenate([self.j, new % self.n])
            self.keys = np.union1d(self.keys, new)
        return len(new)


class _MatchingLP:
    """The fractional b-matching LP (module docstring, 1) kept in one HiGHS instance (WarmLP):
    the self pairs of the classes with n_c >= 2 first, then the pair columns in the order added,
    each solve starting from the last basis."""

    def __init__(self, distances, counts: np.ndarray):
        from duckanon.solver.warm_lp import warm_lp

        self.distances, self.lp = distances, warm_lp(counts.astype(np.float64))
        selfs = np.flatnonzero(counts >= 2)
        self.lp.add_columns(np.zeros(len(selfs)), selfs, np.full(len(selfs), 2.0), 1)
        self.selfs, self.priced = len(selfs), 0

    def solve(self, pairs: _Pairs) -> tuple[np.ndarray, float]:
        """Its dual y (one per class) and optimum with every column of `pairs` (those not yet in
        the LP added); the pairs' primal is left in pairs.x (_rounded_cover)."""
        i, j = pairs.i[self.priced:], pairs.j[self.priced:]
        self.lp.add_columns(2 * self.distances.pairs(i, j), np.column_stack([i, j]).ravel(), np.ones(2 * len(i)), 2)
        self.priced = len(pairs.i)
        x, y, objective = self.lp.solve()
        pairs.x = x[self.selfs:]
        return y, objective


def lp_bound(distances: _Distances, counts: np.ndarray) -> tuple[np.ndarray, float, int, int]:
    """Column generation for the fractional perfect b-matching LP (module docstring, 1): a dual y
    feasible for every pair of classes (and so every triple), its value sum n_c y_c (a proven lower
    bound on the optimum), the number of LP solves and of scans of all pairs."""
    n = len(counts)
    if n == 1:
        return np.zeros(1), 0.0, 0, 0
    codes = distances.codes
    # the first LP's columns: the sparse candidate graph of the classes' sorted orders, each
    # class's PAIRS_PER_CLASS cheapest
    first_i, first_j = _sorted_neighbours(distances)
    pairs = _Pairs(n)
    keep = _per_class(first_i, first_j, 2 * distances.pairs(first_i, first_j), PAIRS_PER_CLASS)
    pairs.add(first_i[keep], first_j[keep])
    # and a cycle through the classes in lexicographic order, so the first LP is feasible (half
    # of every cycle edge covers each class once; a class of n_c >= 2 pairs with itself for the rest)
    order = lexicographic_order(codes)
    ring = np.roll(order, -1)
    pairs.add(np.minimum(order, ring)[: n if n > 2 else 1], np.maximum(order, ring)[: n if n > 2 else 1])
    # then each round: the LP, a scan of every pair against its dual, the violated pairs added
    # (each class's PAIRS_PER_CLASS most violated); it ends when none is violated, or after
    # LP_ROUNDS rounds or LP_STALL_ROUNDS in a row lowering the LP by less than LP_STALL (then the
    # dual is repaired below: any feasible dual bounds the optimum)
    solves = stalled = 0
    best, best_y, best_x = -np.inf, None, None
    whole = distances.integral()
    lp = _MatchingLP(distances, counts)
    while True:
        y, objective = lp.solve(pairs)
        solves += 1
        i, j, rc = _scan(distances, y, 0.0)
        # this dual made feasible (lowered where the scan found violated pairs): the best kept
        violated = rc < 0
        feasible = y - _repair(y, counts, i[violated], j[violated], -rc[violated])
        stalled = stalled + 1 if float(counts @ feasible) < best + LP_STALL else 0
        if float(counts @ feasible) > best:
            best, best_y, best_x = float(counts @ feasible), feasible, pairs.x
        bad = rc < -TOLERANCE
        # done when nothing is violated, or the repaired bound rounds up to the LP's (integral
        # costs), or after LP_ROUNDS rounds or LP_STALL_ROUNDS in a row not raising it by LP_STALL
        if not bad.any() or (whole and np.ceil(best - 1e-6) >= np.ceil(objective - 1e-6)) or \
                solves >= LP_ROUNDS or stalled >= LP_STALL_ROUNDS:
            break
        keep = _per_class(i[bad], j[bad], rc[bad], PAIRS_PER_CLASS)
        if pairs.add(i[bad][keep], j[bad][keep]) == 0:
            break
    scans = solves
    y = best_y
    pairs.x = np.concatenate([best_x, np.zeros(len(pairs.i) - len(best_x))])
    lp_bound.last_pairs = pairs  # (its primal x: _rounded_cover)
    return y, float(counts @ y), solves, scans


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




def _triangles(i: np.ndarray, j: np.ndarray, rc: np.ndarray, n: int, limit: float) -> np.ndarray:
    """Every (a, b, c), a < b < c, whose three pairs are among the pairs (i < j) with reduced costs
    `rc` summing to at most `limit`: joins the pairs (a, b) and (a, c) on a (by chunks of pairs,
    TRIANGLE_CHUNK joined at a time), then looks (b, c) up."""
    order = np.lexsort((j, i))
    i, j, rc = i[order], j[order], rc[order]
    key = i * n + j  # sorted
    if len(key) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    ends = np.searchsorted(i, i, side="right")
    after = ends - np.arange(len(i)) - 1  # the pairs (a, c), c > b, after each (a, b)
    found = []
    start = 0
    while start < len(i):
        stop = start + max(1, int(np.searchsorted(np.cumsum(after[start:]), TRIANGLE_CHUNK)))
        stop = min(stop, len(i))
        left = np.repeat(np.arange(start, stop), after[start:stop])
        first = np.cumsum(after[start:stop]) - after[start:stop]
        right = left + 1 + np.arange(len(left)) - np.repeat(first, after[start:stop])
        two = rc[left] + rc[right]
        left, right, two = left[two <= limit], right[two <= limit], two[two <= limit]
        wanted = j[left] * n + j[right]
        at = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
        hit = (key[at] == wanted) & (two + rc[at] <= limit)
        found.append(np.column_stack([i[left[hit]], j[left[hit]], j[right[hit]]]))
        start = stop
    return np.concatenate(found)


def list_groups(distances: _Distances, counts, y, gap: float, cap: int | None = None):
    """Every group (pair or triple of rows, as classes) whose reduced cost against `y` is at most
    `gap` (module docstring, 3), and the pure groups (c, c) and (c, c, c): (members, cost).
    Raises _TooMany when the scan finds more than `cap` pairs within 2 gap."""
    n, codes, w = len(counts), distances.codes, distances.w
    groups = _Groups()
    twice = np.flatnonzero(counts >= 2)
    groups.add(np.column_stack([twice, twice, np.full(len(twice), -1)]), np.zeros(len(twice)))
    thrice = np.flatnonzero(counts >= 3)
    groups.add(np.column_stack([thrice, thrice, thrice]), np.zeros(len(thrice)))
    i, j, rc = _scan(distances, y, 2 * gap + TOLERANCE, cap)
    near = rc <= gap + TOLERANCE
    pair_cost = 2 * distances.pairs(i[near], j[near])
    groups.add(np.column_stack([i[near], j[near], np.full(int(near.sum()), -1)]), pair_cost)
    for double, single in ((i[near], j[near]), (j[near], i[near])):  # (c, c, d): n_c >= 2
        ok = counts[double] >= 2
        a, b = double[ok], single[ok]
        cost = 3 * distances.triples(a, a, b)
        fits = cost - 2 * y[a] - y[b] <= gap + TOLERANCE
        groups.add(np.column_stack([a[fits], a[fits], b[fits]]), cost[fits])
    triples = _triangles(i, j, rc, n, 2 * gap + TOLERANCE)
    if len(triples):
        a, b, c = triples.T
        cost = 3 * distances.triples(a, b, c)
        fits = cost - y[a] - y[b] - y[c] <= gap + TOLERANCE
        groups.add(triples[fits], cost[fits])
    members, cost = groups.arrays()
    return members, cost


def _set_partitioning(members: np.ndarray, cost: np.ndarray, counts: np.ndarray, below: float | None = None,
                      nodes: int = SIMPLEX_MILP_NODES):
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
                  options={"disp": False, "mip_rel_gap": 0.0, "node_limit": nodes})
    if _TRACE is not None:
        _TRACE(len(counts), g, getattr(result, "mip_node_count", None))
    if result.x is None:
        return None, result.status == 2, str(result.message)
    return np.rint(result.x).astype(np.int64), result.status == 0, str(result.message)


def optimal_cover(codes: np.ndarray, counts: np.ndarray, w: np.ndarray, whole: int | None = None,
                  distances=None) -> dict:
    """The minimum-cost cover of the classes' rows by pairs and triples (module docstring, 3):
    {"members", "copies", "cost", "bound", "proven", "rounds", "lp_solves", "groups", "gap",
    "stopped"}. At most `whole` classes (default SIMPLEX_WHOLE_CLASSES): one MILP over every
    pair and triple, no LP and no pruning. `distances`: the costs (default the weighted Hamming
    distances of cell suppression; _LabelLosses with hierarchies)."""
    distances = _Distances(codes, w) if distances is None else distances
    stats = _exchange_stats()
    if len(counts) <= (SIMPLEX_WHOLE_CLASSES if whole is None else whole):
        members, cost = list_groups(distances, counts, np.zeros(len(counts)), np.inf)
        copies, solved, message = _set_partitioning(members, cost, counts)
        if not solved:  # the exchange algorithm's cover where cheaper (a valid cover, not proven)
            copies = np.zeros(len(cost), dtype=np.int64) if copies is None else copies
            members, cost, copies = _exchanged(distances, members, cost, copies, counts,
                                               np.zeros(len(counts), dtype=np.int64), [0], stats)
            if not _covers(np.repeat(members, copies, axis=0), counts):
                raise AnonymizeError(f"method 'simplex' found no cover ({message})")
        value = float(cost @ copies)
        return {"members": members, "copies": copies, "cost": value, "bound": value if solved else 0.0,
                "proven": solved, "rounds": 1, "lp_solves": 0, "groups": len(cost), "gap": np.inf,
                "stopped": "" if solved else message, "exchange": stats}
    y, bound, solves, scans = lp_bound(distances, counts)
    rounded = _rounded_cover(distances, counts, lp_bound.last_pairs)
    if not _covers(rounded[0], counts):  # (a safety net: then _partitioned makes its own)
        rounded = None
    # with integral weights every cover costs an integer: a cheaper one costs at most best - 1
    unit = 1.0 if distances.integral() else 0.0
    gap = (float(np.ceil(bound - 1e-6) - bound) if unit else 0.0) + TOLERANCE
    ahead = _listing_ahead(distances, counts, y, gap, unit)
    if ahead is not None:
        gap = ahead[0]
    best = None
    proven, rounds, listed, why = False, 0, 0, ""
    while rounds < SIMPLEX_MAX_ROUNDS:
        rounds += 1
        try:
            if ahead is not None and rounds == 1:
                members, cost = ahead[1:]
            else:
                members, cost = list_groups(distances, counts, y, gap, cap=SIMPLEX_MAX_PAIRS)
        except _TooMany as many:
            why = f"the pruning at a gap of {gap:.6g} finds more than {SIMPLEX_MAX_PAIRS:,} pairs ({many.args[0]:,})"
            break
        listed = len(cost)
        if listed > SIMPLEX_MAX_GROUPS:
            why = f"the pruning lists {listed:,} groups, more than {SIMPLEX_MAX_GROUPS:,}"
            break
        members, cost, copies, solved, message = _partitioned(distances, members, cost, counts, rounded, stats)
        value = float(cost @ copies)
        if best is None or value < best["cost"] - 1e-9:
            best = {"members": members, "copies": copies, "cost": value}
            # the next round's spare cover: the best so far (its pieces then only improve on it)
            rounded = (np.repeat(members, copies, axis=0), np.repeat(cost, copies))
        if unit and best["cost"] <= np.ceil(bound - 1e-6):
            proven = True  # the bound closes: no cover costs less than ceil(L) (integral costs)
            break
        if not solved:
            why = f"the set partitioning stopped ({message})"
            break
        needed = best["cost"] - unit - bound  # the largest reduced cost in a cheaper cover
        if needed <= gap + 1e-9 * max(1.0, abs(value)):
            proven = True  # every group of a cheaper cover was listed, and the MILP found none
            break
        # widen step by step (each round lists more groups; a round past the caps is not run)
        gap = min(needed, max(2 * gap, float(w.min()))) + TOLERANCE
    else:
        why = f"{SIMPLEX_MAX_ROUNDS} rounds of pruning"
    if best is None:  # the first listing was too large: the spare cover alone
        none = np.zeros((0, 3), dtype=np.int64)
        members, cost, copies, _, _ = _partitioned(distances, none, np.zeros(0), counts, rounded, stats)
        best = {"members": members, "copies": copies, "cost": float(cost @ copies)}
    return dict(best, bound=bound, proven=proven, rounds=rounds, lp_solves=solves, scans=scans, groups=listed,
                gap=gap, stopped="" if proven else why, exchange=stats)


def _listing_ahead(distances, counts, y, gap: float, unit: float):
    """The first round's listing one star past the first gap, (gap, members, cost), when it has
    at most MILP_MAX_GROUPS groups; else None (the rounds start at the first gap). With integral
    costs the round at the first gap ceil(L) - L proves only a cover of cost ceil(L), which the
    round one star further proves too (its listing holds every group the first one does), so
    when that listing is small enough for the MILP the first round is skipped: on Adult 5,000
    rows it took a third of the set partitioning's time and proved nothing (issue 39)."""
    if not unit:
        return None
    ahead = gap + unit
    try:
        members, cost = list_groups(distances, counts, y, ahead, cap=SIMPLEX_MAX_PAIRS)
    except _TooMany:
        return None
    return (ahead, members, cost) if len(cost) <= MILP_MAX_GROUPS else None


def _exchange_stats() -> dict:
    return {"components": 0, "improved": 0, "stopped": 0, "spent": 0, "saved": 0.0}


def _partitioned(distances, members: np.ndarray, cost: np.ndarray, counts: np.ndarray, spare=None, stats=None):
    """The set partitioning over the listed groups, split into their connected components (a
    class that no listed group joins to another is joined to its neighbour in lexicographic
    order), each given a cover that always exists (_consecutive_cover), the components packed
    into batches of at most MILP_BATCH_CLASSES classes, one HiGHS MILP per batch. The listed
    groups plus the spare ones are a superset of the listed ones, so their optimum is at most any
    cover of listed groups. Returns (members, cost, copies, all proven optimal?, message)."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    n = len(counts)
    rank = np.empty(n, dtype=np.int64)
    order = lexicographic_order(distances.codes)
    rank[order] = np.arange(n)
    a, b = members[:, 0], members[:, 1]
    c = np.where(members[:, 2] >= 0, members[:, 2], members[:, 0])
    mixed = (a != b) | (a != c)
    joined = np.zeros(n, dtype=bool)
    joined[np.concatenate([a[mixed], b[mixed], c[mixed]])] = True
    # a class of one row that no listed group joins to another cannot be covered alone
    lone = np.flatnonzero((counts == 1) & ~joined)
    neighbour = order[np.where(rank[lone] + 1 < n, rank[lone] + 1, rank[lone] - 1)]
    left = np.concatenate([a, a, lone])
    right = np.concatenate([b, c, neighbour])
    if spare is not None:  # a cover given (_rounded_cover): its groups join the graph
        spare_members, spare_cost = spare
        left = np.concatenate([left, spare_members[:, 0], spare_members[:, 0]])
        right = np.concatenate([right, spare_members[:, 1],
                                np.where(spare_members[:, 2] >= 0, spare_members[:, 2], spare_members[:, 0])])
    graph = sparse.coo_array((np.ones(len(left)), (left, right)), shape=(n, n))
    parts, label = connected_components(graph, directed=False)
    if spare is None:
        spare_members, spare_cost = _consecutive_cover(distances, counts, label, rank)
    members, cost = np.concatenate([members, spare_members]), np.concatenate([cost, spare_cost])
    spare = np.zeros(len(cost), dtype=bool)
    spare[len(cost) - len(spare_cost):] = True
    # batches of whole components, in component order
    sizes = np.bincount(label, minlength=parts)
    batch_of_part = np.zeros(parts, dtype=np.int64)
    batch, filled = 0, 0
    for part, size in enumerate(sizes.tolist()):
        if filled and filled + size > MILP_BATCH_CLASSES:
            batch, filled = batch + 1, 0
        batch_of_part[part] = batch
        filled += size
    class_batch = batch_of_part[label]
    group_batch = class_batch[members[:, 0]]
    copies = np.zeros(len(cost), dtype=np.int64)
    proven, messages, cut = True, [], []
    for which in range(batch + 1):
        classes = np.flatnonzero(class_batch == which)
        groups = np.flatnonzero(group_batch == which)
        local = np.full(n + 1, -1, dtype=np.int64)  # (index -1, a pair's empty third, stays -1)
        local[classes] = np.arange(len(classes))
        if len(groups) > MILP_MAX_GROUPS:  # too large for one MILP: its spare cover improved in pieces
            x, solved = _in_pieces(local[members[groups]], cost[groups], counts[classes], spare[groups]), False
            message = f"a component of {len(classes):,} classes and {len(groups):,} groups"
        else:
            x, solved, message = _set_partitioning(local[members[groups]], cost[groups], counts[classes])
        if x is None:  # (no incumbent within the node budget) the batch's spare cover
            x = spare[groups].astype(np.int64)
        copies[groups] = x
        if not solved:
            proven = False
            messages.append(message)
            cut.extend(np.unique(label[classes]).tolist())
    if cut:  # the components whose cover is not proven: the exchange algorithm's where cheaper
        members, cost, copies = _exchanged(distances, members, cost, copies, counts, label, cut, stats)
    return members, cost, copies, proven, messages[0] if messages else ""


def _exchanged(distances, members, cost, copies, counts, label, components, stats=None):
    """The covers of the given components (`label` of each class) replaced by the exchange
    algorithm's (solver/exchange.py, over every pair and triple of the component's rows, not only
    the listed ones) where it is cheaper; components of more than EXCHANGE_MAX_ROWS rows, or whose
    run would pass EXCHANGE_MATCHINGS_PER_ROW blossom matchings per row or the solve's
    EXCHANGE_MATCHINGS in all, keep theirs. The
    exchange cover is verified, not proven optimal (its lemma is not proved); it is a valid cover.
    Adds what it did to `stats` (components run, improved, stopped at their budget, blossom
    matchings spent, cost saved)."""
    from duckanon.solver.exchange import exchange_cover

    rows_of = np.bincount(label, weights=counts, minlength=int(label.max(initial=-1)) + 1)
    order = lexicographic_order(distances.codes)
    group_part = label[members[:, 0]]
    upper = 3.0 * float(np.sum(distances.w))
    stats = _exchange_stats() if stats is None else stats
    extra_members, extra_cost = [], []
    for part in sorted(set(components)):
        rows = int(rows_of[part])
        if rows < 2 or rows > EXCHANGE_MAX_ROWS:
            continue
        classes = order[label[order] == part]  # (the component's classes in lexicographic order)
        vertex = np.repeat(classes, counts[classes])
        a, b = np.meshgrid(np.arange(rows), np.arange(rows), indexing="ij")
        pair = (2 * distances.pairs(vertex[a.ravel()], vertex[b.ravel()])).reshape(rows, rows)
        np.fill_diagonal(pair, 0.0)

        def triple(x, y, z, vertex=vertex):
            return 3 * distances.triples(vertex[x.ravel()], vertex[y.ravel()], vertex[z.ravel()])

        budget = min(EXCHANGE_MATCHINGS_PER_ROW * rows, EXCHANGE_MATCHINGS - stats["spent"])
        if budget <= 0:
            break
        found = exchange_cover(pair, triple, max_matchings=budget, upper=upper)
        stats["components"] += 1
        if found is None:  # (stopped at its budget: it spent all of it)
            stats["spent"] += budget
            stats["stopped"] += 1
            continue
        stats["spent"] += found.matchings
        if not found.feasible:
            continue
        inside = np.flatnonzero((group_part == part) & (copies > 0))
        held = int(((members[inside] >= 0).sum(axis=1) * copies[inside]).sum())
        now = float(cost[inside] @ copies[inside]) if held == rows else np.inf  # (no cover yet: inf)
        groups = np.array([sorted(vertex[list(g)].tolist()) + [-1] * (3 - len(g)) for g in found.groups],
                          dtype=np.int64)
        triple_rows = groups[:, 2] >= 0
        value = np.zeros(len(groups))
        value[~triple_rows] = 2 * distances.pairs(groups[~triple_rows, 0], groups[~triple_rows, 1])
        value[triple_rows] = 3 * distances.triples(groups[triple_rows, 0], groups[triple_rows, 1],
                                                   groups[triple_rows, 2])
        if float(value.sum()) < now - 1e-9 * max(1.0, abs(now) if np.isfinite(now) else 1.0):
            copies[inside] = 0
            extra_members.append(groups)
            extra_cost.append(value)
            stats["improved"] += 1
            stats["saved"] += now - float(value.sum())
    if extra_members:
        added = np.concatenate(extra_cost)
        members = np.concatenate([members] + extra_members)
        cost = np.concatenate([cost, added])
        copies = np.concatenate([copies, np.ones(len(added), dtype=np.int64)])
    return members, cost, copies


def _in_pieces(members: np.ndarray, cost: np.ndarray, counts: np.ndarray, spare: np.ndarray) -> np.ndarray:
    """Copies of the groups (members in local ids) covering every class n_c times, no costlier
    than the spare groups' cover (`spare` marks them, one copy each), from one MILP per piece:
    the spare groups taken in breadth-first order of the listed groups' graph (locality) and cut
    into pieces of at most PIECE_CLASSES classes; a piece covers the rows its spare groups hold,
    by the listed groups whose classes are all in it (its spare groups among them, so the MILP
    never does worse). Groups across two pieces are not used: the cover is not proven optimal."""
    from scipy import sparse
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n = len(counts)
    third = np.where(members[:, 2] >= 0, members[:, 2], members[:, 0])
    graph = sparse.coo_array((np.ones(2 * len(cost)), (np.concatenate([members[:, 0], members[:, 0]]),
                                                       np.concatenate([members[:, 1], third]))), shape=(n, n)).tocsr()
    _, label = connected_components(graph, directed=False)
    position = np.full(n, -1, dtype=np.int64)
    at = 0
    for start in np.unique(label, return_index=True)[1].tolist():  # (each component from its first class)
        reached = breadth_first_order(graph, start, directed=False, return_predecessors=False)
        position[reached] = np.arange(at, at + len(reached))
        at += len(reached)
    held = members.copy()
    held[held < 0] = n  # (a pair's empty third: position n, past every class)
    place = np.append(position, np.iinfo(np.int64).max)
    which = np.flatnonzero(spare)
    which = which[np.argsort(place[held[which]].min(axis=1), kind="stable")]
    copies = spare.astype(np.int64)
    piece = np.zeros(n + 1, dtype=np.int64)  # this piece's rows of each class (n: the empty third)
    start = 0
    while start < len(which):
        seen, stop = set(), start
        while stop < len(which) and (len(seen) < PIECE_CLASSES or stop == start):
            seen.update(int(c) for c in members[which[stop]] if c >= 0)
            stop += 1
        piece[:] = 0
        np.add.at(piece, held[which[start:stop]].ravel(), 1)
        piece[n] = 1
        inside = np.flatnonzero((piece[held] > 0).all(axis=1))
        classes = np.flatnonzero(piece[:n])
        local = np.full(n + 1, -1, dtype=np.int64)
        local[classes] = np.arange(len(classes))
        x, _, _ = _set_partitioning(local[held[inside]], cost[inside], piece[classes], nodes=PIECE_MILP_NODES)
        if x is not None:
            copies[which[start:stop]] -= 1
            copies[inside] += x
        start = stop
    return copies


def _rounded_cover(distances, counts: np.ndarray, pairs) -> tuple[np.ndarray, np.ndarray]:
    """A cover from the matching LP's last primal x (lp_bound): each pair floor(x) times, each
    class's self pairs for what is left of an even demand; the rest are the rows on the cycles of
    half edges (the LP's vertices are half-integral), each cycle cut into consecutive pairs
    along it (the cheaper of its two ways), an odd one with one triple of three consecutive
    rows (the cheapest rotation); rows left over otherwise (irregular fractions) by
    _consecutive_cover. (members, cost) as list_groups, copies one each."""
    n = len(counts)
    x = getattr(pairs, "x", np.zeros(len(pairs.i)))
    whole = np.floor(x + 1e-7).astype(np.int64)
    left = counts.astype(np.int64).copy()
    np.subtract.at(left, pairs.i, whole)
    np.subtract.at(left, pairs.j, whole)
    members = [np.repeat(np.column_stack([pairs.i, pairs.j, np.full(len(whole), -1)]), whole, axis=0)]
    half = np.flatnonzero(np.abs(x - whole - 0.5) < 1e-6)
    a, b = pairs.i[half], pairs.j[half]
    ok = (left[a] == 1) & (left[b] == 1)
    a, b = a[ok], b[ok]
    degree = np.bincount(np.concatenate([a, b]), minlength=n)
    regular = degree[a] == 2
    regular &= degree[b] == 2
    a, b = a[regular], b[regular]
    neighbours = {}
    for u, v in zip(a.tolist(), b.tolist()):
        neighbours.setdefault(u, []).append(v)
        neighbours.setdefault(v, []).append(u)
    seen = set()
    groups = []
    for start in sorted(neighbours):
        if start in seen:
            continue
        cycle, previous, at = [start], None, start
        seen.add(start)
        while True:
            options = [v for v in neighbours[at] if v != previous]
            step = options[0] if options else None
            if step is None or step == start:
                break
            cycle.append(step)
            seen.add(step)
            previous, at = at, step
        groups.extend(_cut_cycle(distances, cycle))
    for group in groups:
        for c in group:
            left[c] -= 1
    pure = np.flatnonzero(left >= 2)
    members.append(np.repeat(np.column_stack([pure, pure, np.full(len(pure), -1)]), left[pure] // 2, axis=0))
    left[pure] -= 2 * (left[pure] // 2)
    if groups:
        members.append(np.array([sorted(g) + [-1] * (3 - len(g)) for g in groups], dtype=np.int64))
    rest = np.flatnonzero(left > 0)
    members = np.concatenate(members).astype(np.int64)
    triple = members[:, 2] >= 0
    cost = np.zeros(len(members))
    cost[~triple] = 2 * distances.pairs(members[~triple, 0], members[~triple, 1])
    cost[triple] = 3 * distances.triples(members[triple, 0], members[triple, 1], members[triple, 2])
    if len(rest):  # rows no regular cycle holds: consecutive groups of them (and one odd row's)
        counts_left = np.zeros(n, dtype=np.int64)
        counts_left[rest] = left[rest]
        if counts_left.sum() == 1 and (~triple).any():  # one row: it joins a pair as a triple
            (c,) = rest.tolist()
            pair = int(np.flatnonzero(~triple)[0])
            members[pair] = np.sort([members[pair, 0], members[pair, 1], c])
            cost[pair] = 3 * distances.triples(members[pair:pair + 1, 0], members[pair:pair + 1, 1],
                                               members[pair:pair + 1, 2])[0]
        else:
            order = lexicographic_order(distances.codes)
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n)
            extra_members, extra_cost = _consecutive_cover(distances, counts_left, np.zeros(n, dtype=np.int64), rank)
            members, cost = np.concatenate([members, extra_members]), np.concatenate([cost, extra_cost])
    return members, cost


def _covers(members: np.ndarray, counts: np.ndarray) -> bool:
    """Whether the groups (one copy each) hold every class exactly n_c times."""
    held = np.bincount(members[members >= 0], minlength=len(counts))
    return len(held) == len(counts) and bool((held == counts).all())


def _cut_cycle(distances, cycle: list) -> list:
    """A cycle of rows cut into consecutive pairs, with one triple of three consecutive rows when
    it is odd: the cheapest such cut (a 3-cycle is its triple)."""
    size = len(cycle)
    ring = np.array(cycle + cycle, dtype=np.int64)
    edge = 2 * distances.pairs(ring[:size], ring[1:size + 1])  # edge k: cycle[k], cycle[k + 1]
    if size % 2 == 0:
        starts = [0, 1]
        costs = [edge[s::2].sum() if s == 0 else edge[1::2].sum() for s in starts]
        s = starts[int(np.argmin(costs))]
        return [[int(ring[s + 2 * t]), int(ring[s + 2 * t + 1])] for t in range(size // 2)]
    best, best_cost = None, np.inf
    triples = 3 * distances.triples(ring[:size], ring[1:size + 1], ring[2:size + 2])
    doubled = np.concatenate([edge, edge])
    for s in range(size):
        value = triples[s] + doubled[s + 3:s + size:2].sum()
        if value < best_cost:
            best, best_cost = s, value
    s = best
    groups = [[int(ring[s]), int(ring[s + 1]), int(ring[s + 2])]]
    groups += [[int(ring[s + 3 + 2 * t]), int(ring[s + 4 + 2 * t])] for t in range((size - 3) // 2)]
    return groups


def _consecutive_cover(distances, counts: np.ndarray, label: np.ndarray, rank: np.ndarray):
    """Per component (`label`), its rows (each class n_c times) in lexicographic order (`rank`)
    cut into consecutive pairs, the last three a triple when their number is odd: (members, cost)
    as list_groups. Every component has at least 2 rows (_partitioned)."""
    by = np.lexsort((rank, label))
    rows = np.repeat(by, counts[by])
    part = label[rows]
    start = np.searchsorted(part, part, side="left")
    size = np.bincount(part)[part]
    position = np.arange(len(rows)) - start
    odd = size % 2 == 1
    in_triple = odd & (position >= size - 3)
    # pairs: the even positions not in a triple with the next row
    first = np.flatnonzero(~in_triple & (position % 2 == 0))
    pair_a, pair_b = rows[first], rows[first + 1]
    head = np.flatnonzero(in_triple & (position == size - 3))
    triple = np.sort(np.column_stack([rows[head], rows[head + 1], rows[head + 2]]), axis=1)
    members = np.concatenate([np.column_stack([np.minimum(pair_a, pair_b), np.maximum(pair_a, pair_b),
                                               np.full(len(first), -1)]), triple]).astype(np.int64)
    cost = np.concatenate([2 * distances.pairs(pair_a, pair_b),
                           3 * distances.triples(triple[:, 0], triple[:, 1], triple[:, 2])])
    return members, cost


def _chosen_groups(cover: dict):
    """(class, group, rows) arrays of a cover's chosen groups (copies of a group are one group:
    the same label or stars, the same cost per row)."""
    cls, grp, cnt = [], [], []
    for group, index in enumerate(np.flatnonzero(cover["copies"]).tolist()):
        members = cover["members"][index]
        ids, times = np.unique(members[members >= 0], return_counts=True)
        cls += ids.tolist(); grp += [group] * len(ids); cnt += (times * cover["copies"][index]).tolist()
    return np.array(cls, dtype=np.int64), np.array(grp, dtype=np.int64), np.array(cnt, dtype=np.int64)


def _exchange_notes(solution, cover: dict):
    """details.exchange when the exchange algorithm ran on a component whose set partitioning
    was cut: components run, improved (their cover replaced by a cheaper exchange cover), stopped
    at their matching budget, blossom matchings solved, cost saved."""
    stats = cover.get("exchange") or {}
    if stats.get("components"):
        solution.notes["exchange"] = {"components": stats["components"], "improved": stats["improved"],
                                      "stopped": stats["stopped"], "matchings": stats["spent"],
                                      "saved": round(stats["saved"], 9)}


def hierarchy_refusal(hierarchies, suppression_limit) -> str | None:
    """Why 'simplex' cannot take these hierarchies (one line), or None: it removes no rows, and
    its proof needs every hierarchy to end in one top label and its cell losses never to
    decrease up a value's chain of labels (_LabelLosses)."""
    if suppression_limit:
        return f"method simplex with hierarchies removes no rows: suppression_limit must be 0, not {suppression_limit:g}"
    for j, bound in enumerate(hierarchies):
        codes = np.asarray(bound.codes)
        if len(codes) and len(np.unique(codes[:, -1])) != 1:
            return f"method simplex needs hierarchies that end in one top label (QI {j + 1} does not)"
        for level in range(bound.height):
            lower, upper = bound.loss(level)[codes[:, level]], bound.loss(level + 1)[codes[:, level + 1]]
            if (upper < lower - 1e-12).any():
                return f"method simplex needs cell losses that never decrease up a hierarchy (QI {j + 1} at level {level + 1})"
    return None


def simplex_with_hierarchies(hist: Histogram, hierarchies, models, suppression_limit: float = 0.0,
                             weights=None) -> Solution:
    """Optimal 2-anonymity by generalization to the hierarchies' labels (Blocki & Williams Thm 8):
    the cover of fewest summed cell losses (ARX's per-cell loss, times ARX's attribute weights),
    each group published at its lowest common labels as mondrian with hierarchies publishes
    them. Proven optimal for that sum; the published metric, ARX's Loss, is its columns'
    geometric mean, which this does not minimise."""
    from duckanon.solver.hierarchical import HierarchicalRecoding, _Group, _labelled_solution

    reason = simplex_not_applicable(hist, models) or hierarchy_refusal(hierarchies, suppression_limit)
    if reason:
        raise AnonymizeError(reason)
    search = HierarchicalRecoding(hist, hierarchies, models, 0.0, weights)
    counts = hist.sizes.astype(np.int64)
    w = search.user_weights
    if (counts >= 2).all() or hist.m == 0:
        cover = None
        classes = np.arange(hist.n_classes)
        assignment = (classes, classes, counts)
    else:
        distances = _LabelLosses(hist.codes, search.ancestors, search.cell_loss, w)
        cover = optimal_cover(hist.codes, counts, w, distances=distances)
        assignment = _chosen_groups(cover)
    cls, grp, cnt = assignment
    top = np.array(search.heights, dtype=np.int64)
    groups = []
    for g in range(int(grp.max(initial=-1)) + 1):
        members, rows = cls[grp == g], cnt[grp == g]
        tight = search.group(members, top)  # its lowest common labels (whole classes' sizes)
        groups.append(_Group(members, tight.levels, float(rows.sum()), tight.cost / tight.size * rows.sum()))
    solution = _labelled_solution(hist, hierarchies, search, groups, [], "hierarchy labels (simplex matching)",
                                  weights, assignment)
    solution.method = "simplex"
    summed = float(sum(float(w @ group.cost) for group in groups))
    solution.notes["cell_loss_sum"] = round(summed, 9)
    if cover is not None:
        solution.notes.update({"listed_groups": cover["groups"], "milp_rounds": cover["rounds"],
                               "lp_bound": round(cover["bound"], 9)})
        if cover["stopped"]:
            solution.notes["stopped"] = cover["stopped"]
        _exchange_notes(solution, cover)
    solution.optimal = cover is None or cover["proven"]
    solution.notes["cell_loss_bound"] = round(summed if solution.optimal else cover["bound"], 9)
    return solution


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
        solution = solution_from_class_groups(hist, *_chosen_groups(cover), "simplex")
        bound = cover["bound"]
        solution.notes.update({"listed_groups": cover["groups"], "milp_rounds": cover["rounds"]})
        if cover["lp_solves"]:  # (at most SIMPLEX_WHOLE_CLASSES classes: no LP, every group listed)
            solution.notes.update({"lp_bound": round(bound, 9), "lp_solves": cover["lp_solves"]})
        if cover["stopped"]:
            solution.notes["stopped"] = cover["stopped"]
        _exchange_notes(solution, cover)
    cost = solution.cost(weights)
    proven = cover is None or cover["proven"]
    solution.optimal = proven
    lower = cost if proven else max(0.0, bound - 1e-9 * max(1.0, abs(bound)))
    if weights is None:
        solution.lower_bound = int(lower) if proven else int(np.ceil(lower - 1e-6))
    else:
        solution.notes["weighted_lower_bound"] = float(lower)
    return solution
