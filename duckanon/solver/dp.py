"""Exact subset DP for tiny instances (Blocki & Williams Thm 3; Liang & Yuan Thm 8).

    f(X) = min over groups G containing the first row of X, G satisfying every model,
           of cost(G) + f(X \\ G),        f(empty) = 0.

The DP runs on rows expanded from the class histogram, but identical rows (same class, and same
SA value when the SA matters) are interchangeable, so a state is a vector of remaining counts per
row type rather than a bitmask: prod(count_t + 1) states, which is 2^n when all n rows differ and
far fewer with duplicates. For k-anonymity alone the Blocki-Williams kernel runs first.

Safe restrictions (each keeps at least one optimal partition reachable):
- Splitting a group never raises its cost (every column constant on G is constant on a part),
  and every supported model is closed under merging satisfying groups (models.py). So a state X
  can only be partitioned into satisfying groups if X itself satisfies the models: only
  satisfying states are ever expanded (Liang & Yuan's pruning of non-t-close subsets).
- k-anonymity alone: groups of k..2k-1 rows (a group of >= 2k rows splits into two of >= k).
- 2-diversity (frequency), possibly with k <= 2: groups of 2 or 3 rows. Proof: a 2-diverse group
  of size >= 4 splits into two 2-diverse groups. Take one row of the most frequent value a and
  one of a second most frequent value b; if the three most frequent counts are not all equal to
  the maximum h, the rest has max <= h - 1 and 2(h - 1) <= N - 2; if they are, N >= 3h and the
  rest has max h with 2h <= N - 2 when h >= 2; if h = 1 all values differ and any two rows go.
- Otherwise (t-closeness, l >= 3, distinct l-diversity) no size bound is used.

Pattern-guided (user `patterns`), Bredereck et al.: a group is released under an allowed star
set and publishes its meet, so an output honours the patterns when every published class stars a
subset of a user pattern (or nothing), except at most one class: the rows fully suppressed
*together* (greedy's leftover group; exact's single all-star output vector). Fully suppressing
rows is always allowed, but as one group: unless a user pattern stars every column, the added
all-star pattern may be used by one group only. (Letting any number of groups take it, each
published at its own meet, published several classes outside every pattern: the patterns were
then meaningless for the published table, and dp reported fewer stars than any output honouring
them, e.g. 14 instead of 18 on six rows where no pair fits pattern (c).) With L the leftover
group (possibly empty) and h the DP over the groups a user pattern (or none) covers:

    OPT = min over L of  cost(L) + h(all \\ L)

The output minimises the published stars (|G| * #columns G disagrees on), ties broken by
Bredereck's cost (|G| * stars of the cheapest user pattern covering G; m |L| for the leftover);
`optimal` and `lower_bound` are about published stars, like every other method's. Bredereck's
optimum (the pattern-star objective of the paper and of `exact`'s pattern MILP; the brute force
in tests/solver/test_exact.py) is the same DP with his cost, reported as notes["objective"]; it is at
least the published optimum.

Attribute weights (`weights`, a star's cost per column): a group costs |G| * the weights of the
columns it disagrees on. Every restriction above holds for any positive weights (splitting still
never raises a group's cost; the kernel's exchanges save a positive cost), so the DP is optimal
in weighted stars. With patterns the tie-break by Bredereck's cost is left out under weights
(weighted costs are not integers to pack two costs into one); the optimum is the same.

Time O(#states * #candidate groups) in the worst case (O(3^n) style for n distinct rows), memory
O(#states * #types). Meant for about 20 rows after the kernel; larger inputs raise.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram
from duckanon.solver.kernel import kernelize
from duckanon.solver.models import FrequencyLDiversity, KAnonymity, all_satisfied
from duckanon.solver.partition import Solution, build_solution, solution_from_class_groups
from duckanon.solver.request import Request

DP_STATE_LIMIT = 1 << 20
DP_WORK_LIMIT = 4e9  # state x group element operations


def user_star_masks(patterns, m: int) -> set[int]:
    """The user's patterns (lists of column indices starred together) as bitmasks, checked."""
    masks = set()
    for pattern in patterns:
        mask = 0
        for j in pattern:
            j = int(j)
            if not 0 <= j < m:
                raise AnonymizeError(f"pattern column index {j} is out of range (0..{m - 1})")
            mask |= 1 << j
        masks.add(mask)
    return masks


def allowed_star_masks(patterns, m: int) -> list[int] | None:
    """User patterns (lists of column indices starred together) as bitmasks, plus {} and all-star."""
    if patterns is None:
        return None
    masks = {0, (1 << m) - 1} | user_star_masks(patterns, m)
    return sorted(masks, key=lambda s: (bin(s).count("1"), s))


def covered_star_sets(patterns, m: int, limit: int = 1 << 16) -> int | None:
    """How many non-empty star sets are a subset of some user pattern (None: more than `limit`,
    or every set because a pattern stars all columns)."""
    full = (1 << m) - 1
    subsets: set[int] = set()
    for mask in user_star_masks(patterns, m):
        if mask == full or bin(mask).count("1") > 16:
            return None
        sub = mask
        while sub:
            subsets.add(sub)
            if len(subsets) > limit:
                return None
            sub = (sub - 1) & mask
    return len(subsets)


def _popcount(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.int64)
    out = np.zeros(a.shape, dtype=np.int64)
    while a.any():
        out += a & 1
        a = a >> 1
    return out


def _weighted_popcount(a: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per bitmask of columns, the sum of their weights."""
    out = np.zeros(a.shape, dtype=np.float64)
    for j, w in enumerate(np.asarray(weights, dtype=np.float64).tolist()):
        out += ((a >> j) & 1) * w
    return out


def _size_bound(request: Request) -> int | None:
    """The largest group an optimal partition needs (module docstring), None when unbounded."""
    if request.k_only:
        return 2 * request.k - 1 if request.k > 1 else 1
    if request.only(KAnonymity, FrequencyLDiversity) and request.k <= 2 and request.frequency_l == 2:
        return 3  # frequency 2-diversity, possibly with k <= 2
    return None


def _layers(valid, candidate, first, n_types):
    """Per first row type b: the states to solve and the groups that can hold their first row."""
    layers, work = [], 0.0
    for b in range(n_types):
        targets = np.flatnonzero(valid & (first == b))
        groups = np.flatnonzero(candidate & (first == b))
        work += float(len(targets)) * len(groups)
        layers.append((targets, groups))
    return layers, work


def _run(layers, cost, digits, t_count, n_states):
    """f(X) = min over candidate groups G holding X's first row of cost(G) + f(X \\ G)."""
    f = np.full(n_states, np.inf)
    f[0] = 0.0
    choice = np.full(n_states, -1, dtype=np.int64)
    for b in range(len(layers) - 1, -1, -1):
        targets, groups = layers[b]
        if len(targets) == 0 or len(groups) == 0:
            continue
        for d in range(1, int(t_count[b]) + 1):
            sub = targets[digits[targets, b] == d]
            if len(sub) == 0:
                continue
            sub_digits = digits[sub]
            best = np.full(len(sub), np.inf)
            arg = np.full(len(sub), -1, dtype=np.int64)
            for g in groups[digits[groups, b] <= d]:
                need = digits[g]
                support = np.flatnonzero(need)
                ok = np.flatnonzero((sub_digits[:, support] >= need[support]).all(axis=1))
                if len(ok) == 0:
                    continue
                value = cost[g] + f[sub[ok] - g]
                better = value < best[ok]
                best[ok[better]] = value[better]
                arg[ok[better]] = g
            f[sub] = best
            choice[sub] = arg
    return f, choice


def _with_leftover(f, leftover_cost, full: int):
    """min(f(all), min over one leftover group L of leftover_cost(L) + f(all \\ L)); (value, L or 0)."""
    best, pick = float(f[full]), 0
    states = np.flatnonzero(np.isfinite(leftover_cost))
    if len(states):
        totals = leftover_cost[states] + f[full - states]
        i = int(np.argmin(totals))
        if totals[i] < best:
            best, pick = float(totals[i]), int(states[i])
    return best, pick


def dp(hist: Histogram, models, patterns=None, use_kernel: bool = True, weights=None) -> Solution:
    """Optimal partition by the subset DP (see the module docstring). Raises on instances too large.
    `weights` (partition.star_weights): optimal in weighted stars, whose optimum is then
    notes["weighted_lower_bound"] (lower_bound stays None: it is about unweighted stars)."""
    models = Request.of(models)
    m = hist.m
    if m > 62:
        raise AnonymizeError("method 'dp' supports at most 62 quasi-identifiers")
    allowed = allowed_star_masks(patterns, m)
    user = None if allowed is None else user_star_masks(patterns, m) | {0}
    # the all-star pattern that is not the user's: one fully suppressed (leftover) group only
    leftover_only = user is not None and (1 << m) - 1 not in user
    work, kernel_parts = _kernelized(hist, models, patterns, allowed, leftover_only, use_kernel)
    space = _StateSpace(work, models)
    if weights is None:
        published = (_popcount(space.disagree) * space.size).astype(np.float64)
    else:
        published = _weighted_popcount(space.disagree, weights) * space.size
    bound = _size_bound(models)
    candidate = space.valid.copy()
    if bound is not None:
        candidate &= space.size <= bound
    if user is None:
        optimum = _unrestricted_optimum(space, candidate, published)
    else:
        optimum = _pattern_guided_optimum(space, candidate, published, user, leftover_only, m, weights)
    best, leftover, objective, published_bound, choice = optimum
    if not np.isfinite(best):
        raise AnonymizeError("method 'dp': no partition satisfies the request")
    solution = _solution(hist, space, choice, leftover, kernel_parts, models.k_only)
    solution.optimal = True
    # with patterns: the fewest published stars of any output that honours them (the docstring)
    if weights is None:
        solution.lower_bound = min(int(published_bound), solution.stars)
    else:
        solution.notes["weighted_lower_bound"] = min(float(published_bound), solution.weighted_stars(weights))
    solution.notes.update({"objective": int(objective) if weights is None else float(objective),
                           "states": space.n_states, "kernel_removed": sum(r for _, r in kernel_parts)})
    return solution


def _kernelized(hist: Histogram, models: Request, patterns, allowed, leftover_only: bool,
                use_kernel: bool) -> tuple[Histogram, list[tuple[int, int]]]:
    """The histogram the DP runs on, and the (class, rows) groups the Blocki-Williams kernel
    emitted (k-anonymity alone; else none)."""
    k = models.k
    if not (models.k_only and k > 1 and use_kernel):
        return hist, []
    # the kernel bounds the starred groups holding a row by the star sets they can publish:
    # subsets of a pattern, plus the leftover group (valid for both costs below)
    covered = None if allowed is None else covered_star_sets(patterns, hist.m)
    kern = kernelize(hist, k, None if covered is None else covered + int(leftover_only))
    return kern.hist, [(c, int(sa.sum())) for c, sa in kern.emitted]


class _StateSpace:
    """The DP's states: the rows left per row type (a class, or a (class, SA value) cell when
    the SA matters), numbered in mixed radix (count + 1 per type), with per state its rows, its
    SA counts' verdict (`valid`: the rows can form one satisfying group), its first row type and
    the columns its rows disagree on."""

    def __init__(self, work: Histogram, models: Request):
        # Row types: classes (k-anonymity only) or (class, SA value) cells.
        if models.k_only:
            t_class = np.flatnonzero(work.sizes > 0)
            t_sa = np.zeros(len(t_class), dtype=np.int64)
            t_count = work.sizes[t_class]
            n_sa = 1
        else:
            t_class, t_sa = np.nonzero(work.sa_counts)
            t_count = work.sa_counts[t_class, t_sa]
            n_sa = work.sa_counts.shape[1]
        n_types = len(t_class)
        radix = t_count + 1
        n_states = int(np.prod(radix.astype(np.float64))) if n_types else 1
        if n_states > DP_STATE_LIMIT:
            raise AnonymizeError(
                f"method 'dp' is for tiny inputs: {int(t_count.sum())} rows in {n_types} row types give "
                f"{n_states} states (limit {DP_STATE_LIMIT}); use method = 'exact'"
            )
        mult = np.ones(n_types, dtype=np.int64)
        for t in range(1, n_types):
            mult[t] = mult[t - 1] * radix[t - 1]
        index = np.arange(n_states, dtype=np.int64)
        digits = np.empty((n_states, n_types), dtype=np.int16)
        for t in range(n_types):
            digits[:, t] = (index // mult[t]) % radix[t]
        size = digits.sum(axis=1, dtype=np.int64)
        if models.k_only:
            sa = np.zeros((n_states, 1), dtype=np.int64)
        else:
            sa = np.zeros((n_states, n_sa), dtype=np.int64)
            for t in range(n_types):
                sa[:, t_sa[t]] += digits[:, t]
        valid = (size > 0) & all_satisfied(models, size, sa)
        valid[0] = False
        present = digits > 0
        self.t_class, self.t_sa, self.t_count, self.n_types, self.n_states = t_class, t_sa, t_count, n_types, n_states
        self.digits, self.size, self.valid = digits, size, valid
        self.disagree = _disagreeing_columns(present, work.codes[t_class], size)
        self.first = np.where(present.any(axis=1), present.argmax(axis=1), -1)
        self.full = n_states - 1


def _disagreeing_columns(present: np.ndarray, t_codes: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per state, the columns on which its rows disagree, as a bitmask (`present`: the row types
    a state holds; `t_codes`: (T, m) each type's codes)."""
    n_states, n_types = present.shape
    disagree = np.zeros(n_states, dtype=np.int64)
    big = np.iinfo(np.int64).max
    for j in range(t_codes.shape[1]):
        lo = np.full(n_states, big, dtype=np.int64)
        hi = np.full(n_states, -1, dtype=np.int64)
        for t in range(n_types):
            code = int(t_codes[t, j])
            mask = present[:, t]
            lo[mask] = np.minimum(lo[mask], code)
            hi[mask] = np.maximum(hi[mask], code)
        disagree |= (lo != hi).astype(np.int64) << j
    disagree[size == 0] = 0
    return disagree


def _unrestricted_optimum(space: _StateSpace, candidate: np.ndarray, published: np.ndarray):
    """Without patterns: (fewest published stars, leftover state 0, objective, bound, choice)."""
    layers, work_estimate = _layers(space.valid, candidate, space.first, space.n_types)
    if work_estimate > DP_WORK_LIMIT:
        raise AnonymizeError(f"method 'dp': instance too large ({work_estimate:.3g} steps); use method = 'exact'")
    f, choice = _run(layers, published, space.digits, space.t_count, space.n_states)
    best = float(f[space.full])
    return best, 0, best, best, choice


def _pattern_guided_optimum(space: _StateSpace, candidate: np.ndarray, published: np.ndarray, user: set[int],
                            leftover_only: bool, m: int, weights):
    """With user patterns (module docstring): (the fewest published stars in the tie-broken
    order's units, the leftover group's state or 0, Bredereck's optimum, the published-star
    bound, choice)."""
    size, valid, full = space.size, space.valid, space.full
    # Bredereck's cost of a group a user pattern covers: |G| * stars of the cheapest such pattern
    uniq, inv = np.unique(space.disagree, return_inverse=True)
    cheapest = np.full(len(uniq), np.inf)
    for mask in sorted(user, key=lambda s: bin(s).count("1")):
        fits = ((uniq & ~mask) == 0) & ~np.isfinite(cheapest)
        cheapest[fits] = bin(mask).count("1") if weights is None else \
            float(_weighted_popcount(np.array(mask), weights))
    bredereck = cheapest[inv.ravel()] * size
    covered = np.isfinite(bredereck)
    layers, work_estimate = _layers(valid, candidate & covered, space.first, space.n_types)
    if 2 * work_estimate > DP_WORK_LIMIT:
        raise AnonymizeError(f"method 'dp': instance too large ({2 * work_estimate:.3g} steps); use method = 'exact'")
    # the output: fewest published stars, ties broken by Bredereck's cost (< scale; not
    # under weights, module docstring)
    scale = float(int(size[full]) * m + 1) if weights is None else 1.0
    tie = bredereck if weights is None else 0.0
    lex = np.where(covered, published * scale + tie, np.inf)
    f, choice = _run(layers, lex, space.digits, space.t_count, space.n_states)
    # Bredereck's optimum (the pattern-star objective), reported in the notes
    g, _ = _run(layers, bredereck, space.digits, space.t_count, space.n_states)
    if leftover_only:
        all_stars = float(m) if weights is None else float(np.sum(weights))
        leftover_tie = m * size if weights is None else 0.0
        best, leftover = _with_leftover(f, np.where(valid, published * scale + leftover_tie, np.inf), full)
        objective, _ = _with_leftover(g, np.where(valid, all_stars * size, np.inf), full)
    else:
        best, leftover = float(f[full]), 0
        objective = float(g[full])
    published_bound = (best // scale if weights is None else best) if np.isfinite(best) else best
    return best, leftover, objective, published_bound, choice


def _solution(hist: Histogram, space: _StateSpace, choice: np.ndarray, leftover: int, kernel_parts, k_only: bool
              ) -> Solution:
    """The partition the DP chose: the leftover group (if any), then the groups `choice` takes
    from the full state down, then the kernel's groups."""
    digits, t_class = space.digits, space.t_class
    groups_out = [leftover] if leftover else []
    state = space.full - leftover
    while state:
        g_state = int(choice[state])
        groups_out.append(g_state)
        state -= g_state
    if k_only:
        cls, grp, cnt = [], [], []
        for gi, g_state in enumerate(groups_out):
            for t in np.flatnonzero(digits[g_state]):
                cls.append(int(t_class[t])); grp.append(gi); cnt.append(int(digits[g_state, t]))
        for i, (c, rows) in enumerate(kernel_parts):
            cls.append(c); grp.append(len(groups_out) + i); cnt.append(rows)
        return solution_from_class_groups(hist, cls, grp, cnt, "dp")
    pc, ps, pg, pn = [], [], [], []
    t_sa = space.t_sa
    for gi, g_state in enumerate(groups_out):
        for t in np.flatnonzero(digits[g_state]):
            pc.append(int(t_class[t])); ps.append(int(t_sa[t])); pg.append(gi); pn.append(int(digits[g_state, t]))
    arrays = [np.asarray(a, dtype=np.int64) for a in (pc, ps, pg, pn)]
    return build_solution(hist, *arrays, method="dp")
