"""Exact optimum by a mixed ILP on the class histogram (Liang & Yuan 2012, Theorem 9), with HiGHS.

Variables: integer x(p, v, s) = rows of class v with SA value s released under the output vector
p ("pattern": v with some columns starred); for k-anonymity alone the SA is irrelevant and the
variables are x(p, v). All rows released as p form one output group G_p.

    minimise  sum stars(p) * x(p, v, s)
    s.t.      sum_p x(p, v, s) = r(v, s)                                  every row released once
    k:        sum x(p, .) >= k * y_p,   x(p, v, s) <= r(v, s) * y_p,  y_p binary   (empty or >= k)
    l (frequency):  l * X_s(p) <= |G_p|  for every SA value s           (X_s = rows of G_p with s)
    l (distinct):   z_{p,s} <= X_s(p),  sum_s z_{p,s} >= l * y_p,  z binary
    t:        EMD(P(G_p), P(T)) <= t, linearised after multiplying by n |G_p| (integer data):
              equal distance    sum_s max(0, n X_s - r_s |G_p|) <= t n |G_p|   (= half the L1 sum)
              ordered distance  sum_i |sum_{j<=i} (n X_j - r_j |G_p|)| <= t (v-1) n |G_p|
              (the closed forms of the optimal transport for these two metrics), or with
              t_form='flow' Liang & Yuan's transport flows g(p, i, j) >= 0:
              sum_j g = n X_i,  sum_i g = r_j |G_p|,  sum d_ij g <= t n |G_p|.
    All constraints except k and distinct-l hold trivially for an empty group.

Before building: the Blocki-Williams kernel for k-anonymity alone (kernel.py), and pattern pruning.

Which patterns p are created (each argument keeps at least one optimal solution representable):
1. Closure. A group's published vector is the *meet* of its rows (keep a column iff all agree),
   so in any solution every non-empty group publishes a "closed" vector: p equals the meet of all
   classes compatible with p (equivalently, on every starred column the compatible classes take
   at least two values). A non-closed p is dominated by its closure, which has the same compatible
   classes and fewer stars. Closed vectors are exactly the meets of *some* set of classes; the
   meets of *pairs* are not enough: for 110, 101, 011 with k = 3 the optimum *** is no pair's meet.
   Patterns with a star are closed only if at least two classes are compatible. With the
   closed-vector restriction the MILP optimum equals the optimum in real stars: an optimal
   partition is representable at its real cost, and any MILP solution's real stars (recomputed
   from membership) are at most its objective.
2. Feasibility. A pattern whose compatible rows cannot hold even one satisfying group is dropped:
   fewer than max(k, l) rows; fewer than l distinct SA values (l-diversity, either form); for
   t-closeness, a group's SA support lies inside the support A of the compatible rows, and its
   EMD is at least the cost of moving P(T) onto A, sum_{s not in A} q_s * d(s, A); if that is > t
   no group of p is t-close.
3. Pattern-guided (user `patterns`, Bredereck et al. Thm 3): only star sets from the user's list,
   plus no stars and (as in `greedy`, where leftover rows are fully suppressed) all stars; the
   all-star vector is one output vector, so the fully suppressed rows form one group. Cost
   counts the pattern's stars (Bredereck's model; published stars are recomputed and can be
   lower: see "Published stars under patterns" below). Rule 1 becomes: p with star set S is dropped if the compatible classes agree on a set
   J of starred columns and some allowed S' with S \\ J <= S' < S exists (p' with star set S'
   has the same compatible classes and fewer stars; groups released under p move to p').

Candidate enumeration: per star set, group the classes by the kept columns (2^m group-bys) when
2^m * C is moderate; otherwise closure of the class vectors under meets (breadth first).

Incumbent and cutoff: the best heuristic (or the `incumbent` passed in) is computed first and
HiGHS is told to look only for strictly better solutions (option objective_bound = stars - 0.5;
objectives are integers). "Infeasible" then proves the incumbent optimal. Not with user patterns,
whose MILP objective counts pattern stars rather than published stars.

Published stars under patterns. The pattern MILP's optimum (Bredereck's, notes["objective"];
the brute force of tests/solver/test_exact.py) is no bound on what a correct output *publishes*: each
group publishes its meet, which can star fewer columns than its pattern (a user pattern starring
every column allows any meet). An output honours the patterns when every published class stars a
subset of a user pattern (or nothing), except at most one class (the fully suppressed rows, one
group as in greedy and dp). The fewest published stars over such outputs is the unrestricted
model (all closed vectors, cost = their stars) in which at most one vector outside every pattern
holds rows (sum of their indicators <= 1): any honouring output, grouped by published vector, is
a solution at its published stars, and any solution honours the patterns with at most its
objective in stars. It is solved after the pattern MILP, with that MILP's output as cutoff, and
its solution is published when it has fewer stars. So with patterns `stars`, `optimal` and
`lower_bound` are about published stars, as for every other method, and exact and dp agree.

Work budget (WorkBudget, what `auto` runs exact under): the LP relaxation within a number of
simplex iterations, then at most a number of branch-and-bound nodes; no clock, so the answer is
the same whatever the load.

Time limit: one deadline for the whole call (time.perf_counter() + time_limit): the model's
enumeration checks it (ExactTimeout: the heuristic answer is returned), the incumbent
heuristics' local search stops at HEURISTIC_SHARE of it with the best partition so far (before,
it ran unbounded: seconds on 400 rows), and HiGHS gets the rest (with patterns, PATTERN_MILP_SHARE
of it, the rest going to the published-star model). HiGHS stops at its limit (it can overrun by
the time of an uninterruptible presolve on large models; the forked solve is killed after a
grace) with its incumbent and proven dual bound D; the result has optimal=False and lower_bound =
min(ceil(D), incumbent stars), and is the better of HiGHS's solution and the incumbent.

Attribute weights (`weights`, partition.star_weights: a star's cost per column). The objective
is then sum cost(p) * x(p, v, s) with cost(p) the weights of the columns p stars. Every pruning
above keeps an optimal solution for any positive weights: a closure stars a subset of the
columns of what it dominates (rule 1 and 3), and the kernel's exchanges save a positive cost. When
the weights are multiples of one step (decimals of up to 6 digits: their gcd, `_cost_unit`) the
objective is counted in that step, integral, and the cutoff and the bounds are exact as above;
otherwise they hold up to a relative 1e-9. `optimal` is then about weighted stars and the proven
bound goes to notes["weighted_lower_bound"] (lower_bound, about unweighted stars, stays None).

Complexity: exponential in the worst case (all these problems are NP-hard for k >= 3, l >= 3,
t < 1). Model size: one integer variable per (surviving pattern, row type) pair, at most 2^m per
row type, plus one binary per pattern for k-anonymity / distinct l-diversity, plus O(|SA|) (closed
forms) or O(|SA|^2) (flows) continuous variables per pattern for t-closeness. Building it takes
O(2^m * C log C) (star sets) or O(P * C * m) (closure, P closed patterns).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.dp import allowed_star_masks, user_star_masks
from duckanon.solver.heuristics import best_heuristic
from duckanon.solver.highs_child import run_milp as _milp  # (the name bench_exact.py times)
from duckanon.solver.histogram import Histogram, first_positions, group_keys
from duckanon.solver.kernel import kernelize
from duckanon.solver.models import OrderedDistanceTCloseness, TCloseness, all_satisfied
from duckanon.solver.partition import STAR, Solution, build_solution, solution_from_class_groups
from duckanon.solver.request import Request

# HiGHS presolve is off: with it, HiGHS 1.12 (scipy 1.17) reported wrong "optimal" values on a
# few small t-closeness models (caught by the brute-force cross-check in tests/solver/test_exact.py),
# and without it the solver was as fast or faster on our models (Adult, 4 QIs, k = 5: 1.6 s
# instead of 7.7 s on 30k rows).
PRESOLVE = False
# Star-set enumeration is used while 2^m * classes stays below this; above, meet closure.
ENUM_LIMIT = 20_000_000
# Refuse to build models with more x variables than this (auto checks a much smaller gate).
MAX_PAIRS = 3_000_000
MAX_CLOSED_PATTERNS = 200_000
# With this few classes the meet closure is cheaper than 2^m group-bys.
CLOSURE_CLASS_LIMIT = 32
# The closure (used for many columns) is quadratic-ish in the classes: refuse beyond this.
CLOSURE_MAX_CLASSES = 20_000


class ExactTooLarge(AnonymizeError):
    """The exact model would be too large to build."""


class ExactTimeout(AnonymizeError):
    """The time limit ran out before the model was built."""


@dataclass
class ExactModel:
    """The pruned MILP instance (before any solver call); `n_int_vars` is its integer size."""

    hist: Histogram  # the original histogram
    work: Histogram  # after the kernel
    models: Request
    kernel_emitted: list
    k: int
    l_freq: int
    l_dist: int
    t_models: list
    k_only: bool
    t_class: np.ndarray  # row types: class
    t_sa: np.ndarray  # row types: SA code (0 when k-only)
    t_count: np.ndarray
    cand_rep: np.ndarray  # (P, m) codes, STAR where starred
    cand_stars: np.ndarray  # (P,)
    pair_p: np.ndarray  # x variables: pattern
    pair_t: np.ndarray  # x variables: row type
    pattern_guided: bool
    notes: dict = field(default_factory=dict)
    # (published-star bound under user patterns) candidates outside every pattern: at most one
    # of them may hold rows (the fully suppressed leftover group)
    leftover: np.ndarray | None = None
    # attribute weights (a star's cost per column; None: 1 each), the step the objective counts
    # (None: the weighted costs are not multiples of one step) and each candidate's cost in steps
    weights: np.ndarray | None = None
    unit: float | None = 1.0
    cand_cost: np.ndarray | None = None

    def cost_of(self, solution: Solution) -> int | float:
        """A solution's objective value: its stars, or weighted stars in steps of `unit`."""
        if self.weights is None:
            return int(solution.stars)
        value = solution.weighted_stars(self.weights)
        return int(round(value / self.unit)) if self.unit is not None else value

    def better_than(self, value) -> float:
        """HiGHS's objective_bound for solutions strictly better than `value`."""
        return value - 0.5 if self.unit is not None else value - 1e-9 * max(1.0, abs(value))

    def objective(self, x: np.ndarray) -> int | float:
        value = float((self.cand_cost[self.pair_p] * x).sum())
        return int(np.rint(value)) if self.unit is not None else value

    def bound(self, dual: float) -> int | float:
        """A proven lower bound from HiGHS's dual bound (integral: rounded up)."""
        if self.unit is not None:
            return max(int(math.ceil(float(dual) - 1e-6)), 0)
        return max(float(dual) - 1e-9 * max(1.0, abs(float(dual))), 0.0)

    def at_least(self, a, b) -> bool:
        return a >= b if self.unit is not None else a >= b - 1e-9 * max(1.0, abs(b))

    def in_stars(self, value):
        """An objective value in (weighted) stars."""
        return value if self.weights is None or self.unit is None else value * self.unit

    @property
    def n_patterns(self) -> int:
        return len(self.cand_rep)

    @property
    def needs_indicator(self) -> bool:
        return self.k > 1 or self.l_dist > 1 or (self.leftover is not None and bool(self.leftover.any()))

    @property
    def n_int_vars(self) -> int:
        n = len(self.pair_p)
        if self.needs_indicator:
            n += self.n_patterns
        return n


def _cost_unit(weights: np.ndarray) -> float | None:
    """The step every weighted star total is a multiple of: for weights that are decimals of up
    to 6 digits, their greatest common divisor (1 for integers); None otherwise."""
    for digits in range(7):
        scaled = np.asarray(weights, dtype=np.float64) * 10.0 ** digits
        ints = np.rint(scaled)
        if (np.abs(scaled - ints) <= 1e-9 * np.maximum(1.0, scaled)).all() and (ints >= 1).all() and ints.max() < 1e9:
            return float(np.gcd.reduce(ints.astype(np.int64))) / 10.0 ** digits
    return None


def _classify(request: Request):
    """The MILP's parameters: k, the frequency and distinct l (1: none), the t models that
    constrain (t >= 1 holds for every group)."""
    unsupported = request.not_milp_encodable
    if unsupported is not None:
        raise AnonymizeError(f"method 'exact' does not support {unsupported}")
    t_models = [model for model in request.closeness if model.t < 1]
    return request.k, max(request.frequency_l, 1), max(request.distinct_l, 1), t_models


def _ground_distance(model: TCloseness, v: int) -> np.ndarray:
    return model.distance_matrix()


def _feasible(model_k, l_need, t_models, q, dist_cache, rows, sa_avail) -> np.ndarray:
    """Necessary condition for a set of rows (per candidate) to contain one satisfying group."""
    ok = rows >= max(model_k, l_need, 1)
    if l_need > 1:
        ok &= (sa_avail > 0).sum(axis=1) >= l_need
    for model in t_models:
        d = dist_cache[id(model)]
        avail = sa_avail > 0  # (P, S)
        # distance of each SA value to the nearest available value
        masked = np.where(avail[:, None, :], d[None, :, :], np.inf)  # (P, S, S)
        nearest = masked.min(axis=2)
        nearest = np.where(np.isfinite(nearest), nearest, 1.0)
        ok &= (nearest * q[None, :]).sum(axis=1) <= model.t + 1e-9
    return ok


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() >= deadline:
        raise ExactTimeout("method 'exact': the time limit ran out while building the model")


def _enumerate_by_star_sets(work, active, star_masks, all_mode, k_need, deadline=None, max_pairs=None):
    """Yield (star_mask, member arrays, group rows, group sa) for every surviving candidate block.
    Raises ExactTooLarge before yielding a star set's blocks once they would take the (pattern,
    class) pairs beyond `max_pairs` (prepare would refuse at one of them: counted here, they cost
    no Python loop)."""
    codes = work.codes[active]
    sizes = work.sizes[active]
    sa = work.sa_counts[active]
    m = work.m
    allowed_list = None if all_mode else list(star_masks)
    pairs = 0
    for mask in star_masks:
        _check_deadline(deadline)
        starred = [j for j in range(m) if mask >> j & 1]
        kept = [j for j in range(m) if not mask >> j & 1]
        keys = group_keys(codes[:, kept])
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        ends = np.append(starts[1:], len(sk))
        counts = ends - starts
        rows = np.add.reduceat(sizes[order], starts) if len(order) else np.zeros(0, np.int64)
        keep = rows >= k_need
        if mask:
            keep &= counts >= 2
        if not keep.any():
            continue
        if mask:
            sub = codes[order][:, starred]
            lo = np.minimum.reduceat(sub, starts, axis=0)
            hi = np.maximum.reduceat(sub, starts, axis=0)
            varying = lo != hi  # (G, |S|)
            if all_mode:
                keep &= varying.all(axis=1)
            else:
                vary_mask = np.zeros(len(starts), dtype=np.int64)
                for i, j in enumerate(starred):
                    vary_mask |= varying[:, i].astype(np.int64) << j
                dominated = np.zeros(len(starts), dtype=bool)
                for other in allowed_list:
                    if other != mask and (other & ~mask) == 0:
                        dominated |= (vary_mask & ~other) == 0
                keep &= ~dominated
        if max_pairs is not None:
            pairs += int(counts[keep].sum())
            if pairs > max_pairs:
                raise ExactTooLarge(f"method 'exact': more than {max_pairs} (pattern, class) variables")
        group_sa = np.add.reduceat(sa[order], starts, axis=0)
        for g in np.flatnonzero(keep):
            yield mask, active[order[starts[g] : ends[g]]], int(rows[g]), group_sa[g]


def _distinct_rows(rows: np.ndarray) -> np.ndarray:
    """np.unique(rows, axis=0): the distinct rows in lexicographic order, through group_keys's
    few packed int64 keys (np.unique's sort of m-field records took 90% of the closure's time
    on 100 classes x 30 columns)."""
    if len(rows) == 0:
        return rows
    ids = group_keys(rows)
    return rows[first_positions(ids, int(ids.max()) + 1)]


def _enumerate_closed(work, active, k_need, deadline=None):
    """Closed vectors by meet closure of the class vectors, breadth first (meet(S + c) =
    meet(meet(S), c), so this reaches the meet of every set of classes)."""
    codes = work.codes[active]
    C, m = codes.shape
    if C > CLOSURE_MAX_CLASSES:
        raise ExactTooLarge(f"method 'exact': {C} classes on {m} columns are too many for the pattern closure")
    seen = {row.tobytes() for row in codes}
    closed = [codes]
    frontier = codes
    chunk = max(1, 2_000_000 // max(C * max(m, 1), 1))
    while len(frontier):
        fresh = []
        for start in range(0, len(frontier), chunk):
            _check_deadline(deadline)
            block = frontier[start : start + chunk]
            meets = np.where(codes[None, :, :] == block[:, None, :], codes[None, :, :], STAR).reshape(-1, m)
            for row in _distinct_rows(meets):
                key = row.tobytes()
                if key not in seen:
                    seen.add(key)
                    fresh.append(row)
            if len(seen) > MAX_CLOSED_PATTERNS:
                raise ExactTooLarge(f"method 'exact': more than {MAX_CLOSED_PATTERNS} candidate patterns")
        frontier = np.array(fresh, dtype=np.int64).reshape(len(fresh), m)
        closed.append(frontier)
    patterns = np.concatenate(closed)
    sizes = work.sizes[active]
    sa = work.sa_counts[active]
    weights = 1 << np.arange(m, dtype=np.int64)
    for i, p in enumerate(patterns):
        if i % 256 == 0:
            _check_deadline(deadline)
        compatible = np.flatnonzero(((codes == p[None, :]) | (p[None, :] == STAR)).all(axis=1))
        rows = int(sizes[compatible].sum())
        if rows < k_need:
            continue
        yield int(((p == STAR) * weights).sum()), active[compatible], rows, sa[compatible].sum(axis=0)


def prepare(hist: Histogram, models, patterns=None, use_kernel: bool = True, max_pairs: int | None = None,
            deadline: float | None = None, weights=None) -> ExactModel:
    """Kernel, row types and pruned candidate patterns (no solver call). `weights`: a star's cost
    per column (partition.star_weights; module docstring).

    Raises ExactTooLarge as soon as more than `max_pairs` (pattern, class) pairs survive, and
    ExactTimeout when `deadline` (a time.perf_counter() value) passes during the enumeration.
    """
    models = Request.of(models)
    k, l_freq, l_dist, t_models = _classify(models)
    k_only = l_freq <= 1 and l_dist <= 1 and not t_models
    m = hist.m
    allowed = allowed_star_masks(patterns, m)
    all_mode = allowed is None
    work, emitted = hist, []
    if k_only and k > 1 and use_kernel:
        kern = kernelize(hist, k, None if all_mode else len(allowed) - 1)
        work, emitted = kern.hist, kern.emitted
    t_class, t_sa, t_count = _row_types(work, k_only)

    total = hist.sa_counts.sum(axis=0).astype(np.float64)
    q = total / max(total.sum(), 1.0)
    v = hist.sa_counts.shape[1]
    dist_cache = {id(model): _ground_distance(model, v) for model in t_models}
    l_need = max(l_freq, l_dist)
    k_need = max(k, l_need, 1)

    limit = MAX_PAIRS if max_pairs is None else min(MAX_PAIRS, max_pairs)
    blocks = _candidate_blocks(work, allowed, k_need, deadline, limit)
    reps, stars, members, rows_l, sa_l = _collect_candidates(work, blocks, limit)
    if reps:
        feasible = _feasible(k, l_need, t_models, q, dist_cache, np.array(rows_l), np.array(sa_l))
    else:
        feasible = np.zeros(0, dtype=bool)
    keep = np.flatnonzero(feasible)
    cand_rep = np.array([reps[i] for i in keep], dtype=np.int64).reshape(len(keep), m)
    cand_stars = np.array([stars[i] for i in keep], dtype=np.int64)
    unit, cand_cost = 1.0, cand_stars
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        unit = _cost_unit(weights)
        cand_cost = (cand_rep == STAR).astype(np.float64) @ weights
        if unit is not None:
            cand_cost = np.rint(cand_cost / unit).astype(np.int64)
    pair_p, pair_t = _pairs(keep, members, t_class)
    return ExactModel(
        hist=hist, work=work, models=models, kernel_emitted=emitted, k=k, l_freq=l_freq, l_dist=l_dist,
        t_models=t_models, k_only=k_only, t_class=t_class, t_sa=t_sa, t_count=t_count,
        cand_rep=cand_rep, cand_stars=cand_stars, pair_p=pair_p, pair_t=pair_t,
        pattern_guided=not all_mode,
        notes={"patterns_before_feasibility": len(reps), "patterns": len(keep)},
        weights=weights, unit=unit, cand_cost=cand_cost,
    )


def _row_types(work: Histogram, k_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row types (class, SA code, rows): classes for k-anonymity alone (SA code 0), else
    (class, SA value) cells."""
    if k_only:
        t_class = np.flatnonzero(work.sizes > 0)
        return t_class, np.zeros(len(t_class), dtype=np.int64), work.sizes[t_class]
    t_class, t_sa = np.nonzero(work.sa_counts)
    return t_class, t_sa, work.sa_counts[t_class, t_sa]


def _candidate_blocks(work: Histogram, allowed: list[int] | None, k_need: int, deadline, limit: int):
    """The candidate patterns' blocks (star mask, member classes, rows, SA counts), lazily: per
    star set while 2^m group-bys are cheap, else by meet closure (module docstring, "Candidate
    enumeration"); under user patterns, their star sets."""
    active = np.flatnonzero(work.sizes > 0)
    m = work.m
    if allowed is not None:
        return _enumerate_by_star_sets(work, active, allowed, False, k_need, deadline, limit)
    if len(active) > CLOSURE_CLASS_LIMIT and m < 40 and (1 << m) * max(len(active), 1) <= ENUM_LIMIT:
        star_masks = sorted(range(1 << m), key=lambda s: (bin(s).count("1"), s))
        return _enumerate_by_star_sets(work, active, star_masks, True, k_need, deadline, limit)
    return _enumerate_closed(work, active, k_need, deadline)


def _collect_candidates(work: Histogram, blocks, limit: int):
    """Per candidate block: its representative vector (STAR where starred), stars, member
    classes, rows and SA counts; ExactTooLarge beyond `limit` (pattern, class) pairs."""
    m = work.m
    reps, stars, members, rows_l, sa_l = [], [], [], [], []
    n_pairs = 0
    for mask, member, rows, group_sa in blocks:
        rep = work.codes[member[0]].copy()
        for j in range(m):
            if mask >> j & 1:
                rep[j] = STAR
        reps.append(rep)
        stars.append(bin(mask).count("1"))
        members.append(member)
        rows_l.append(rows)
        sa_l.append(group_sa)
        n_pairs += len(member)
        if n_pairs > limit:
            raise ExactTooLarge(f"method 'exact': more than {limit} (pattern, class) variables")
    return reps, stars, members, rows_l, sa_l


def _pairs(keep: np.ndarray, members: list, t_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The x variables: (pattern, row type) for the kept patterns and the types whose class is
    compatible, pattern by pattern."""
    types_of_class: dict[int, list[int]] = {}
    for t, c in enumerate(t_class):
        types_of_class.setdefault(int(c), []).append(t)
    pair_p, pair_t = [], []
    for new_p, i in enumerate(keep):
        for c in members[i]:
            for t in types_of_class.get(int(c), ()):
                pair_p.append(new_p)
                pair_t.append(t)
    return np.asarray(pair_p, dtype=np.int64), np.asarray(pair_t, dtype=np.int64)


class _Rows:
    """Sparse constraint rows collected as COO triplets."""

    def __init__(self):
        self.r, self.c, self.v, self.lo, self.hi = [], [], [], [], []
        self.n = 0

    def add(self, cols, vals, lo, hi):
        cols = np.asarray(cols, dtype=np.int64)
        self.r.append(np.full(len(cols), self.n, dtype=np.int64))
        self.c.append(cols)
        self.v.append(np.asarray(vals, dtype=np.float64))
        self.lo.append(lo)
        self.hi.append(hi)
        self.n += 1

    def add_many(self, rows, cols, vals, lo, hi, count):
        """`count` rows at once; `rows` are 0-based within the block."""
        self.r.append(np.asarray(rows, dtype=np.int64) + self.n)
        self.c.append(np.asarray(cols, dtype=np.int64))
        self.v.append(np.asarray(vals, dtype=np.float64))
        self.lo.extend(np.broadcast_to(lo, (count,)).tolist())
        self.hi.extend(np.broadcast_to(hi, (count,)).tolist())
        self.n += count

    def constraint(self, n_vars):
        if self.n == 0:
            return None
        r = np.concatenate(self.r) if self.r else np.zeros(0, np.int64)
        c = np.concatenate(self.c) if self.c else np.zeros(0, np.int64)
        v = np.concatenate(self.v) if self.v else np.zeros(0)
        from scipy.optimize import LinearConstraint  # (scipy where an LP runs: solver/__init__.py)
        from scipy.sparse import csr_array

        matrix = csr_array((v, (r, c)), shape=(self.n, n_vars))
        return LinearConstraint(matrix, np.array(self.lo, dtype=np.float64), np.array(self.hi, dtype=np.float64))


class _Variables:
    """The MILP's variables in blocks (the x variables first): per variable its cost,
    integrality and bounds."""

    def __init__(self, cost: np.ndarray, upper: np.ndarray):
        count = len(cost)
        self.cost, self.integrality, self.lower, self.upper = [cost], [np.ones(count)], [np.zeros(count)], [upper]
        self.n = count

    def new(self, count, integer, ub=np.inf) -> int:
        """`count` new variables of cost 0 in [0, ub]; the index of the first."""
        start = self.n
        self.cost.append(np.zeros(count))
        self.integrality.append(np.full(count, 1.0 if integer else 0.0))
        self.lower.append(np.zeros(count))
        self.upper.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (count,)).copy())
        self.n += count
        return start


def _build_milp(model: ExactModel, t_form: str):
    """The MILP of the module docstring for a prepared model: (cost, integrality, bounds,
    constraint or None), as scipy's milp takes them."""
    variables = _Variables(model.cand_cost[model.pair_p].astype(np.float64),
                           model.t_count[model.pair_t].astype(np.float64))
    rows = _Rows()
    y0 = _add_group_rows(rows, variables, model)
    if not model.k_only:
        _add_sa_rows(rows, variables, model, y0, t_form)
    c = np.concatenate(variables.cost)
    integ = np.concatenate(variables.integrality)
    lb = np.concatenate(variables.lower)
    ub = np.concatenate(variables.upper)
    from scipy.optimize import Bounds  # (scipy where an LP runs: solver/__init__.py)

    return c, integ, Bounds(lb, ub), rows.constraint(variables.n)


def _add_group_rows(rows: _Rows, variables: _Variables, model: ExactModel) -> int | None:
    """Every row released exactly once; with indicators y_p (k, distinct l, a leftover limit),
    x <= r y, at most one leftover pattern used, and k y_p <= |G_p|. The first y's index, or
    None without them."""
    P = model.n_patterns
    X = len(model.pair_p)
    pair_p, pair_t, t_count = model.pair_p, model.pair_t, model.t_count
    x_idx = np.arange(X)
    rows.add_many(pair_t, x_idx, np.ones(X), t_count.astype(np.float64), t_count.astype(np.float64), len(t_count))
    y0 = None
    if model.needs_indicator:
        y0 = variables.new(P, True, 1.0)
        # link: x - r * y <= 0
        rr = np.repeat(np.arange(X), 2)
        cc = np.empty(2 * X, dtype=np.int64)
        cc[0::2] = x_idx
        cc[1::2] = y0 + pair_p
        vv = np.empty(2 * X)
        vv[0::2] = 1.0
        vv[1::2] = -t_count[pair_t]
        rows.add_many(rr, cc, vv, -np.inf, 0.0, X)
    if model.leftover is not None and model.leftover.any():
        out = np.flatnonzero(model.leftover)
        rows.add(y0 + out, np.ones(len(out)), -np.inf, 1.0)
    if model.k > 1:
        rr = np.concatenate([pair_p, np.arange(P)])
        cc = np.concatenate([x_idx, y0 + np.arange(P)])
        vv = np.concatenate([np.ones(X), np.full(P, -float(model.k))])
        rows.add_many(rr, cc, vv, 0.0, np.inf, P)
    return y0


def _add_sa_rows(rows: _Rows, variables: _Variables, model: ExactModel, y0: int | None, t_form: str) -> None:
    """The models that read the SA: frequency and distinct l-diversity per (pattern, SA value)
    cell present, t-closeness per pattern (`_add_t_constraints`)."""
    P = model.n_patterns
    X = len(model.pair_p)
    pair_p, pair_t, t_sa = model.pair_p, model.pair_t, model.t_sa
    n_sa = model.hist.sa_counts.shape[1]
    x_idx = np.arange(X)
    # group x SA cells present: (p, s) -> list of x
    cell = pair_p * n_sa + t_sa[pair_t]
    cells, cell_of_x = np.unique(cell, return_inverse=True)
    cell_of_x = cell_of_x.ravel()
    cell_p, cell_s = cells // n_sa, cells % n_sa
    C = len(cells)
    if model.l_freq > 1:
        # l * X_s - N <= 0 for each present (p, s): rows indexed by cell
        # N_p part: every x of pattern p appears in every cell row of p
        order = np.argsort(pair_p, kind="stable")
        bounds = np.searchsorted(pair_p[order], np.arange(P + 1))
        r_list, c_list, v_list = [cell_of_x], [x_idx], [np.full(X, float(model.l_freq))]
        for ci in range(C):
            p = cell_p[ci]
            xs = order[bounds[p] : bounds[p + 1]]
            r_list.append(np.full(len(xs), ci))
            c_list.append(xs)
            v_list.append(np.full(len(xs), -1.0))
        rows.add_many(np.concatenate(r_list), np.concatenate(c_list), np.concatenate(v_list), -np.inf, 0.0, C)
    if model.l_dist > 1:
        z0 = variables.new(C, True, 1.0)
        # z - X_s <= 0
        rows.add_many(np.concatenate([np.arange(C), cell_of_x]), np.concatenate([z0 + np.arange(C), x_idx]),
                      np.concatenate([np.ones(C), -np.ones(X)]), -np.inf, 0.0, C)
        # sum_s z - l y >= 0
        rows.add_many(np.concatenate([cell_p, np.arange(P)]), np.concatenate([z0 + np.arange(C), y0 + np.arange(P)]),
                      np.concatenate([np.ones(C), np.full(P, -float(model.l_dist))]), 0.0, np.inf, P)
    if model.t_models:
        total = model.hist.sa_counts.sum(axis=0).astype(np.int64)  # P(T) of the whole table
        n = int(total.sum())
        order = np.argsort(pair_p, kind="stable")
        bounds = np.searchsorted(pair_p[order], np.arange(P + 1))
        present = np.zeros((P, n_sa), dtype=bool)
        present[cell_p, cell_s] = True
        for tm in model.t_models:
            _add_t_constraints(rows, variables.new, tm, model, t_form, order, bounds, present, total, n, n_sa)


def _add_t_constraints(rows, new_vars, tm, model, t_form, order, bounds, present, total, n, n_sa):
    t_sa = model.t_sa
    pair_t = model.pair_t
    P = model.n_patterns
    v = n_sa
    d = _ground_distance(tm, v)
    for p in range(P):
        xs = order[bounds[p] : bounds[p + 1]]
        if len(xs) == 0:
            continue
        sa_of = t_sa[pair_t[xs]]
        if t_form == "flow" or not tm.linear_emd:
            sources = np.flatnonzero(present[p])
            sinks = np.flatnonzero(total > 0)
            g0 = new_vars(len(sources) * len(sinks), False)
            gi = lambda a, b: g0 + a * len(sinks) + b  # noqa: E731
            # sum_j g(i, j) - n X_i = 0
            for a, i in enumerate(sources):
                cols = [gi(a, b) for b in range(len(sinks))] + list(xs[sa_of == i])
                vals = [1.0] * len(sinks) + [-float(n)] * int((sa_of == i).sum())
                rows.add(cols, vals, 0.0, 0.0)
            # sum_i g(i, j) - r_j N = 0
            for b, j in enumerate(sinks):
                cols = [gi(a, b) for a in range(len(sources))] + list(xs)
                vals = [1.0] * len(sources) + [-float(total[j])] * len(xs)
                rows.add(cols, vals, 0.0, 0.0)
            # sum d g - t n N <= 0
            cols = [gi(a, b) for a in range(len(sources)) for b in range(len(sinks))] + list(xs)
            vals = [float(d[i, j]) for i in sources for j in sinks] + [-tm.t * n] * len(xs)
            rows.add(cols, vals, -np.inf, 0.0)
            continue
        if isinstance(tm, OrderedDistanceTCloseness):  # each distance has its own closed form
            # cumulative differences Y_i = sum_{j<=i} (n X_j - r_j N), i = 0..v-2
            cum_r = np.cumsum(total)
            e0 = new_vars(max(v - 1, 0), False)
            for i in range(v - 1):
                coef = np.where(sa_of <= i, float(n), 0.0) - float(cum_r[i])
                for sign in (1.0, -1.0):
                    rows.add(list(xs) + [e0 + i], list(sign * coef) + [-1.0], -np.inf, 0.0)
            rows.add(list(range(e0, e0 + v - 1)) + list(xs), [1.0] * (v - 1) + [-tm.t * (v - 1) * n] * len(xs), -np.inf, 0.0)
        else:
            # EMD = 1/2 sum_s |a_s| = sum_s max(a_s, 0) with a_s = n X_s - r_s N (the a_s sum to
            # zero); absent SA values have a_s <= 0. So d_s >= a_s, d_s >= 0, sum d_s <= t n N.
            ss = np.flatnonzero(present[p])
            d0 = new_vars(len(ss), False)
            for a, s in enumerate(ss):
                coef = np.where(sa_of == s, float(n), 0.0) - float(total[s])
                rows.add(list(xs) + [d0 + a], list(coef) + [-1.0], -np.inf, 0.0)
            rows.add(list(range(d0, d0 + len(ss))) + list(xs),
                     [1.0] * len(ss) + [-tm.t * n] * len(xs), -np.inf, 0.0)


def _heuristic(hist: Histogram, models, patterns, context: SolveContext, weights=None) -> Solution:
    """The best heuristic; its local search (the slow, quadratic part) stops at the context's
    deadline with the best partition reached."""
    return best_heuristic(hist, models, patterns, context, weights)


def _valid(hist, solution, models) -> bool:
    sizes = solution.group_sizes()
    used = sizes > 0
    return bool(all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used]).all())


@dataclass(frozen=True)
class WorkBudget:
    """A bound on HiGHS's work that does not depend on the clock, so a solve under it gives the
    same answer whatever the machine's load (HiGHS's branch and bound is deterministic for given
    options). The MILP's root node is not bounded by HiGHS's node limit (one root ran for 117 s
    with node_limit = 1), so the LP relaxation is solved first by the dual simplex (linprog),
    stopped after `lp_iterations` iterations: one that does not finish within them skips the
    MILP; else its bound is a proven lower bound, the MILP is skipped when that bound already
    proves the incumbent optimal, and otherwise the branch and bound stops after `nodes` nodes
    with its best solution and dual bound. HiGHS's root node (cut rounds, its sub-MIP heuristic)
    takes seconds of CPU from about 2,000 integer variables on our models and no option bounds
    it, so above `max_int_vars` only the relaxation runs (its bound, and the proof when the
    bound reaches the incumbent)."""
    nodes: int
    lp_iterations: int
    max_int_vars: int | None = None


def _relaxation(c, bounds, constraint, max_iterations: int, time_limit: float | None):
    """The LP relaxation of a built MILP by HiGHS's dual simplex: (status, value), status 0
    solved (value: its optimum), 1 stopped at `max_iterations` or `time_limit`, 2 infeasible."""
    from scipy.optimize import linprog  # (scipy where an LP runs: solver/__init__.py)
    from scipy.sparse import csr_array, vstack

    A = csr_array(constraint.A) if constraint is not None else csr_array((0, len(c)))
    lower, upper = (np.asarray(constraint.lb, dtype=np.float64), np.asarray(constraint.ub, dtype=np.float64)) \
        if constraint is not None else (np.zeros(0), np.zeros(0))
    equal = lower == upper
    above, below = np.isfinite(upper) & ~equal, np.isfinite(lower) & ~equal
    a_ub = vstack([A[np.flatnonzero(above)], -A[np.flatnonzero(below)]]).tocsr()
    b_ub = np.concatenate([upper[above], -lower[below]])
    options = {"maxiter": int(max_iterations), "presolve": PRESOLVE, "disp": False}
    if time_limit is not None:
        options["time_limit"] = max(float(time_limit), 0.05)
    result = linprog(c, A_ub=a_ub if a_ub.shape[0] else None, b_ub=b_ub if a_ub.shape[0] else None,
                     A_eq=A[np.flatnonzero(equal)] if equal.any() else None, b_eq=lower[equal] if equal.any() else None,
                     bounds=np.column_stack([bounds.lb, bounds.ub]), method="highs-ds", options=options)
    if result.status == 0:
        return 0, float(result.fun), str(result.message)
    return (2 if result.status == 2 else 1), None, str(result.message)


def _budgeted_milp(model: ExactModel, c, integrality, bounds, constraint, options, budget: WorkBudget | None,
                   cutoff, max_grace=None, context: SolveContext = UNBOUNDED):
    """HiGHS on a built model under `options` and, when given, the work budget (WorkBudget):
    the result's status, x, message and mip_dual_bound as milp's (the LP relaxation's bound when
    the MILP is skipped or has none)."""
    from types import SimpleNamespace

    if budget is None:
        return _milp(c, integrality, bounds, constraint, options, max_grace)
    started = time.perf_counter()
    status, value, message = _relaxation(c, bounds, constraint, budget.lp_iterations, options.get("time_limit"))
    if status == 1:
        if "time limit" in message.lower():
            context.cut("exact LP relaxation")
            message = "not started: the time limit was reached in its LP relaxation"
        else:
            message = f"not started: its LP relaxation needs more than {budget.lp_iterations} simplex iterations"
        return SimpleNamespace(x=None, status=1, message=message, mip_dual_bound=None, budget=True)
    if status == 2 or (cutoff is not None and model.at_least(model.bound(value), cutoff)):
        # nothing (strictly better than the incumbent) exists: "infeasible", as milp says it
        return SimpleNamespace(x=None, status=2, message="the LP relaxation's bound proves it", mip_dual_bound=value,
                               budget=False)
    if budget.max_int_vars is not None and model.n_int_vars > budget.max_int_vars:
        return SimpleNamespace(x=None, status=1, mip_dual_bound=value, budget=True,
                               message=f"not started: {model.n_int_vars} integer variables, more than its work budget "
                                       f"of {budget.max_int_vars} (the LP relaxation's bound only)")
    options = dict(options, node_limit=int(budget.nodes))
    if options.get("time_limit") is not None:  # what the relaxation left of it
        options["time_limit"] = max(options["time_limit"] - (time.perf_counter() - started), 0.05)
    res = _milp(c, integrality, bounds, constraint, options, max_grace)
    dual = getattr(res, "mip_dual_bound", None)
    dual = value if dual is None or not np.isfinite(dual) else max(float(dual), value)
    text = str(res.message)
    stopped = res.status not in (0, 2) and "time limit" not in text.lower()
    if stopped:
        text = f"stopped at its work budget of {budget.nodes} branch-and-bound nodes ({text})"
    return SimpleNamespace(x=res.x, status=res.status, message=text, mip_dual_bound=dual, budget=stopped)


# Under a time limit: the share of the time left that the incumbent heuristics may use (their
# local search stops there with the best partition so far), and, with user patterns, the share
# of the rest that the main MILP gets before the published-star bound (_published_bound).
HEURISTIC_SHARE = 0.4
PATTERN_MILP_SHARE = 0.6
# Without a time limit, the published-star bound under patterns runs under this work budget
# (deterministic: WorkBudget), on a model of at most max(4 x the main model, this) pairs.
PUBLISHED_BOUND_BUDGET = WorkBudget(nodes=2_000, lp_iterations=50_000, max_int_vars=5_000)
PUBLISHED_BOUND_MIN_PAIRS = 200_000


def _published_optimum(model: ExactModel, upper: int, deadline: float | None, t_form: str, patterns,
                       budget: WorkBudget | None, context: SolveContext = UNBOUNDED):
    """The fewest *published* stars of an output that honours the user patterns (module
    docstring, "Published stars under patterns"). `upper`: the published stars of a known such
    output (HiGHS looks only for strictly better ones). Returns (lower bound or None, proven,
    solution strictly better than `upper` or None, notes).
    """
    notes: dict = {}
    if upper <= 0:
        return 0, True, None, notes
    hist = model.hist
    m = hist.m
    user = user_star_masks(patterns, m) | {0}
    full = (1 << m) - 1
    budget = PUBLISHED_BOUND_BUDGET if budget is None else budget
    if deadline is not None and deadline - time.perf_counter() < 0.05:
        context.cut("exact published-star bound (not started)")
        notes["published_bound"] = "skipped: no time left"
        return None, False, None, notes
    max_pairs = min(MAX_PAIRS, max(PUBLISHED_BOUND_MIN_PAIRS, 4 * len(model.pair_p)))
    try:
        # the kernel holds here too: its proof bounds the starred groups holding a row by 2^m - 1
        published = prepare(hist, model.models, None, max_pairs=max_pairs, deadline=deadline, weights=model.weights)
    except (ExactTooLarge, ExactTimeout) as error:
        if isinstance(error, ExactTimeout):
            context.cut("exact published-star model")
        notes["published_bound"] = f"skipped: {error}"
        return None, False, None, notes
    if full not in user:
        weights = 1 << np.arange(m, dtype=np.int64)
        masks = ((published.cand_rep == STAR) * weights).sum(axis=1)
        inside = np.zeros(published.n_patterns, dtype=bool)
        for mask in user:
            inside |= (masks & ~mask) == 0
        published.leftover = ~inside
    context.report("exact: published-star bound (HiGHS)", upper=upper)
    c, integrality, bounds, constraint = _build_milp(published, t_form)
    options = {"disp": False, "mip_rel_gap": 0.0, "presolve": PRESOLVE, "objective_bound": published.better_than(upper)}
    if deadline is not None:
        options["time_limit"] = max(deadline - time.perf_counter(), 0.05)
    res = _budgeted_milp(published, c, integrality, bounds, constraint, options, budget, upper, context=context)
    if "time limit" in str(res.message).lower():
        context.cut("exact published-star bound")
    n_x = len(published.pair_p)
    objective, better = None, None
    if res.x is not None:
        x = np.rint(res.x[:n_x]).astype(np.int64)
        placed = np.bincount(published.pair_t, weights=x, minlength=len(published.t_count)).astype(np.int64)
        if (placed == published.t_count).all():
            objective = published.objective(x)
            if not published.at_least(objective, upper):
                better = _to_solution(published, x)
                if not _valid(hist, better, model.models) or published.at_least(published.cost_of(better), upper):
                    better = None
    dual = getattr(res, "mip_dual_bound", None)
    proven = False
    if res.status == 2 or (res.status == 0 and objective is not None and published.at_least(objective, upper)):
        bound, proven = upper, True  # nothing honouring the patterns publishes fewer stars
    elif res.status == 0 and objective is not None:
        bound, proven = objective, better is not None
    elif dual is not None and np.isfinite(dual):
        bound = min(published.bound(dual), upper)
    else:
        bound = None
    notes["published_bound"] = bound
    notes["published_milp_status"] = int(res.status)
    notes["published_milp_message"] = str(res.message)
    return bound, proven, better, notes


def solve_model(model: ExactModel, time_limit: float | None = None, incumbent: Solution | None = None,
                t_form: str = "closed", patterns=None, deadline: float | None = None,
                max_grace: float | None = None, context: SolveContext = UNBOUNDED,
                budget: WorkBudget | None = None) -> Solution:
    """Solve a prepared model with HiGHS; see the module docstring for the result's fields.

    `incumbent` (a valid solution of model.hist; by default the best heuristic) gives HiGHS an
    objective cutoff: it searches only for strictly better solutions, so "infeasible" proves the
    incumbent optimal. (Not with user patterns, where the MILP objective counts pattern stars.)
    `deadline` (a time.perf_counter() value; by default now + time_limit), and the context's,
    bound the whole call: the heuristics' local search, the MILP and, with patterns, the
    published-star bound. The context also hears the phases and their bounds.
    `max_grace` caps how long a HiGHS run that overruns its limit is waited for (auto under a
    statement's time_limit: the incumbent is kept, only the MILP's answer is lost).
    `budget` (WorkBudget; None: none) bounds HiGHS's work by counts, whatever the deadline; with
    patterns the published-star bound runs under it too (PUBLISHED_BOUND_BUDGET without one).
    """
    started = time.perf_counter()
    if deadline is None and time_limit is not None:
        deadline = started + float(time_limit)
    context = context.narrowed(deadline)
    deadline = context.deadline
    hist = model.hist
    if incumbent is None:
        context.report("exact: incumbent heuristics", pairs=len(model.pair_p))
        heuristic_deadline = None if deadline is None else started + HEURISTIC_SHARE * max(deadline - started, 0.0)
        incumbent = _heuristic(hist, model.models, patterns, context.narrowed(heuristic_deadline), model.weights)
    cutoff = None if model.pattern_guided else model.cost_of(incumbent)
    res = _run_main_milp(model, incumbent, cutoff, deadline, t_form, budget, max_grace, context)
    solution, objective = _milp_solution(model, res)
    proven, lower, solution = _milp_proof(model, res, cutoff, solution, objective)
    if res.status == 2 and cutoff is None:
        raise AnonymizeError("method 'exact': no solution satisfies the request with the given patterns")

    if solution is None or model.cost_of(incumbent) < model.cost_of(solution):
        solution = build_solution(hist, incumbent.part_class, incumbent.part_sa, incumbent.part_group,
                                  incumbent.part_count, "exact")
        solution.notes["incumbent_from"] = incumbent.method
    else:
        solution.notes["incumbent_from"] = "milp"
    solution.method = "exact"
    solution.optimal = bool(proven)
    if model.pattern_guided:
        solution, lower = _with_published_optimum(model, solution, proven, deadline, t_form, patterns, budget,
                                                  context)
    if lower is not None and model.weights is None:
        solution.lower_bound = min(lower, solution.stars)
    elif lower is not None:  # weighted stars: a float, not the lower_bound on stars
        solution.notes["weighted_lower_bound"] = min(model.in_stars(lower), solution.weighted_stars(model.weights))
    solution.notes.update(model.notes)
    solution.notes.update({
        "milp_status": int(res.status), "milp_message": str(res.message),
        "objective": None if objective is None else model.in_stars(objective),
        "dual_bound": getattr(res, "mip_dual_bound", None), "integer_variables": model.n_int_vars,
        "kernel_removed": sum(int(s.sum()) for _, s in model.kernel_emitted),
        "seconds": round(time.perf_counter() - started, 4),
    })
    if getattr(res, "budget", False):
        solution.notes["milp_budget"] = {"nodes": budget.nodes, "lp_iterations": budget.lp_iterations,
                                         "max_int_vars": budget.max_int_vars}
    # the published stars and their bounds (with patterns, after the published-star bound)
    context.report("exact: MILP done", upper=int(solution.stars), lower=solution.lower_bound,
                    proven=bool(solution.optimal))
    return solution


def _run_main_milp(model: ExactModel, incumbent: Solution, cutoff, deadline: float | None, t_form: str,
                   budget: WorkBudget | None, max_grace: float | None, context: SolveContext):
    """HiGHS on the model, looking only for solutions strictly better than `cutoff` (when
    given), within the time left (with patterns, PATTERN_MILP_SHARE of it) and the budget."""
    # the bounds known before HiGHS runs: the incumbent's stars above; below, what it proves
    context.report("exact: MILP (HiGHS)", upper=int(incumbent.stars), integer_variables=model.n_int_vars)
    c, integrality, bounds, constraint = _build_milp(model, t_form)
    options = {"disp": False, "mip_rel_gap": 0.0, "presolve": PRESOLVE}
    if cutoff is not None:
        options["objective_bound"] = model.better_than(cutoff)  # integral objective: strictly better than the incumbent
    if deadline is not None:
        left = deadline - time.perf_counter()
        if model.pattern_guided:
            left *= PATTERN_MILP_SHARE  # the rest is for the published-star bound
        options["time_limit"] = max(left, 0.05)
    res = _budgeted_milp(model, c, integrality, bounds, constraint, options, budget, cutoff, max_grace, context)
    if "time limit" in str(res.message).lower():
        context.cut("exact MILP")
    return res


def _milp_solution(model: ExactModel, res) -> tuple[Solution | None, int | float | None]:
    """HiGHS's solution as a Solution, and its objective: (None, None) without one, or when it
    does not place every row; (None, objective) when it fails the models (numerical trouble)."""
    if res.x is None:
        return None, None
    x = np.rint(res.x[:len(model.pair_p)]).astype(np.int64)
    placed = np.bincount(model.pair_t, weights=x, minlength=len(model.t_count)).astype(np.int64)
    if not (placed == model.t_count).all():
        return None, None
    objective = model.objective(x)
    solution = _to_solution(model, x)
    if not _valid(model.hist, solution, model.models):
        solution = None  # numerical trouble: fall back to the incumbent
    return solution, objective


def _milp_proof(model: ExactModel, res, cutoff, solution: Solution | None, objective):
    """What HiGHS's answer proves: (proven optimal, lower bound or None, the MILP's solution to
    keep or None)."""
    dual = getattr(res, "mip_dual_bound", None)
    if cutoff is not None and (res.status == 2 or (res.status == 0 and objective is not None
                                                   and model.at_least(objective, cutoff))):
        # nothing strictly better than the incumbent exists (HiGHS reports either "infeasible" or,
        # when a heuristic found a worse point first, that point as "optimal")
        return True, cutoff, None
    if res.status == 0 and solution is not None:
        return True, objective, solution  # optimal with zero gap; the objective is integral
    lower = model.bound(dual) if dual is not None and np.isfinite(dual) else None
    if cutoff is not None and lower is not None:
        # the cutoff removed only solutions costing >= the incumbent; with no dual bound
        # (stopped before the root LP, or killed at the deadline) nothing is proven
        lower = min(lower, cutoff)
    return False, lower, solution


def _with_published_optimum(model: ExactModel, solution: Solution, proven: bool, deadline: float | None,
                            t_form: str, patterns, budget: WorkBudget | None, context: SolveContext):
    """With user patterns: `proven` is about Bredereck's cost (pattern stars); what is published,
    proven optimal and bounded is the published stars (module docstring). The solution to
    publish (the published-star model's when it has fewer) and its lower bound."""
    solution.notes["pattern_milp_optimal"] = bool(proven)
    lower, proven, better, bound_notes = _published_optimum(model, model.cost_of(solution), deadline, t_form,
                                                            patterns, budget, context)
    if better is not None:
        notes = solution.notes
        solution = better
        solution.method = "exact"
        solution.notes.update(notes)
        solution.notes["incumbent_from"] = "published milp"
    solution.notes.update(bound_notes)
    solution.optimal = bool(proven) or (lower is not None and model.at_least(lower, model.cost_of(solution)))
    return solution, lower


def _to_solution(model: ExactModel, x: np.ndarray) -> Solution:
    hist = model.hist
    nz = np.flatnonzero(x)
    P = model.n_patterns
    groups = model.pair_p[nz]
    classes = model.t_class[model.pair_t[nz]]
    counts = x[nz]
    if model.k_only:
        cls = list(classes)
        grp = list(groups)
        cnt = list(counts)
        for i, (c, sa) in enumerate(model.kernel_emitted):
            cls.append(c); grp.append(P + i); cnt.append(int(sa.sum()))
        # the kernel kept the SA values in code order; a k-only request ignores them
        return solution_from_class_groups(hist, cls, grp, cnt, "exact")
    sas = model.t_sa[model.pair_t[nz]]
    return build_solution(hist, classes.astype(np.int64), sas.astype(np.int64), groups.astype(np.int64),
                          counts.astype(np.int64), "exact")


def exact(hist: Histogram, models, patterns=None, time_limit: float | None = None,
          incumbent: Solution | None = None, t_form: str = "closed", use_kernel: bool = True,
          context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """Optimal (or, under `time_limit`, best found with a proven lower bound) solution.

    `time_limit` (seconds from now) and the context's deadline are one deadline for the whole
    pipeline: building the model, the incumbent heuristics, the MILP (and, with patterns, the
    published-star bound); when it runs out the best valid solution found so far is returned
    with optimal=False.

    Complexity: exponential in the worst case (the problems are NP-hard); the model has one
    integer variable per (surviving pattern, row type) pair, at most 2^m per row type, plus one
    binary per pattern for k-anonymity and distinct l-diversity.

    `weights` (partition.star_weights): the optimum in weighted stars (module docstring).
    """
    started = time.perf_counter()
    context = context.narrowed(None if time_limit is None else started + float(time_limit))
    deadline = context.deadline
    context.report("exact: kernel and model", classes=hist.n_classes)
    try:
        model = prepare(hist, models, patterns, use_kernel=use_kernel, deadline=deadline, weights=weights)
    except ExactTimeout as error:
        context.cut("exact model")
        if incumbent is None:
            incumbent = _heuristic(hist, models, patterns, context, weights)
        solution = build_solution(hist, incumbent.part_class, incumbent.part_sa, incumbent.part_group,
                                  incumbent.part_count, "exact")
        solution.optimal = False
        solution.notes.update({"incumbent_from": incumbent.method, "milp_message": str(error),
                               "seconds": round(time.perf_counter() - started, 4)})
        return solution
    return solve_model(model, incumbent=incumbent, t_form=t_form, patterns=patterns, deadline=deadline,
                       context=context)
