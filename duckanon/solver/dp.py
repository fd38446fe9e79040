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

Pattern-guided (user `patterns`): a group costs |G| * (stars of the cheapest allowed pattern that
stars every column on which G disagrees), as in Bredereck et al.; the published stars are then
recomputed from membership and can only be lower. Fully suppressing rows is always allowed, as in
`greedy` (the all-star pattern is added).

Time O(#states * #candidate groups) in the worst case (O(3^n) style for n distinct rows), memory
O(#states * #types). Meant for about 20 rows after the kernel; larger inputs raise.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram
from duckanon.solver.kernel import kernelize
from duckanon.solver.models import KAnonymity, LDiversity, all_satisfied
from duckanon.solver.partition import Solution, build_solution, solution_from_class_groups

DP_STATE_LIMIT = 1 << 20
DP_WORK_LIMIT = 4e9  # state x group element operations


def allowed_star_masks(patterns, m: int) -> list[int] | None:
    """User patterns (lists of column indices starred together) as bitmasks, plus {} and all-star."""
    if patterns is None:
        return None
    masks = {0, (1 << m) - 1}
    for pattern in patterns:
        mask = 0
        for j in pattern:
            j = int(j)
            if not 0 <= j < m:
                raise AnonymizeError(f"pattern column index {j} is out of range (0..{m - 1})")
            mask |= 1 << j
        masks.add(mask)
    return sorted(masks, key=lambda s: (bin(s).count("1"), s))


def _popcount(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.int64)
    out = np.zeros(a.shape, dtype=np.int64)
    while a.any():
        out += a & 1
        a = a >> 1
    return out


def _size_bound(models, k: int) -> int | None:
    if all(isinstance(m, KAnonymity) for m in models):
        return 2 * k - 1 if k > 1 else 1
    two_div = any(isinstance(m, LDiversity) and m.variant == "frequency" and m.l == 2 for m in models)
    rest_ok = all(
        (isinstance(m, KAnonymity) and m.k <= 2) or (isinstance(m, LDiversity) and m.variant == "frequency" and m.l <= 2)
        for m in models
    )
    if two_div and rest_ok:
        return 3
    return None


def dp(hist: Histogram, models, patterns=None, use_kernel: bool = True) -> Solution:
    """Optimal partition by the subset DP (see the module docstring). Raises on instances too large."""
    k = max([m.k for m in models if isinstance(m, KAnonymity)], default=1)
    k_only = all(isinstance(m, KAnonymity) for m in models)
    m = hist.m
    if m > 62:
        raise AnonymizeError("method 'dp' supports at most 62 quasi-identifiers")
    allowed = allowed_star_masks(patterns, m)
    work = hist
    kernel_parts: list[tuple[int, int]] = []
    if k_only and k > 1 and use_kernel:
        kern = kernelize(hist, k, None if allowed is None else len(allowed) - 1)
        work = kern.hist
        kernel_parts = [(c, int(sa.sum())) for c, sa in kern.emitted]

    # Row types: classes (k-anonymity only) or (class, SA value) cells.
    if k_only:
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
    if k_only:
        sa = np.zeros((n_states, 1), dtype=np.int64)
    else:
        sa = np.zeros((n_states, n_sa), dtype=np.int64)
        for t in range(n_types):
            sa[:, t_sa[t]] += digits[:, t]
    valid = (size > 0) & all_satisfied(models, size, sa)
    valid[0] = False

    # Columns on which a state's rows disagree, as a bitmask.
    present = digits > 0
    t_codes = work.codes[t_class]  # (T, m)
    disagree = np.zeros(n_states, dtype=np.int64)
    big = np.iinfo(np.int64).max
    for j in range(m):
        lo = np.full(n_states, big, dtype=np.int64)
        hi = np.full(n_states, -1, dtype=np.int64)
        for t in range(n_types):
            code = int(t_codes[t, j])
            mask = present[:, t]
            lo[mask] = np.minimum(lo[mask], code)
            hi[mask] = np.maximum(hi[mask], code)
        disagree |= (lo != hi).astype(np.int64) << j
    disagree[size == 0] = 0
    if allowed is None:
        stars = _popcount(disagree)
    else:
        stars = np.full(n_states, np.iinfo(np.int64).max, dtype=np.int64)
        uniq, inv = np.unique(disagree, return_inverse=True)
        best = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
        for mask in allowed:  # sorted by star count: first cover wins
            fits = (uniq & ~mask) == 0
            best = np.where(fits & (best == np.iinfo(np.int64).max), bin(mask).count("1"), best)
        stars = best[inv.ravel()]
    cost = (stars * size).astype(np.float64)

    bound = _size_bound(models, k)
    candidate = valid.copy()
    if bound is not None:
        candidate &= size <= bound
    first = np.where(present.any(axis=1), present.argmax(axis=1), -1)

    f = np.full(n_states, np.inf)
    f[0] = 0.0
    choice = np.full(n_states, -1, dtype=np.int64)
    work_estimate = 0.0
    layers = []
    for b in range(n_types):
        targets = np.flatnonzero(valid & (first == b))
        groups = np.flatnonzero(candidate & (first == b))
        work_estimate += float(len(targets)) * len(groups)
        layers.append((targets, groups))
    if work_estimate > DP_WORK_LIMIT:
        raise AnonymizeError(f"method 'dp': instance too large ({work_estimate:.3g} steps); use method = 'exact'")
    for b in range(n_types - 1, -1, -1):
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
    full = n_states - 1
    if not np.isfinite(f[full]):
        raise AnonymizeError("method 'dp': no partition satisfies the request")

    groups_out = []
    state = full
    while state:
        g = int(choice[state])
        groups_out.append(g)
        state -= g
    if k_only:
        cls, grp, cnt = [], [], []
        for gi, g in enumerate(groups_out):
            for t in np.flatnonzero(digits[g]):
                cls.append(int(t_class[t])); grp.append(gi); cnt.append(int(digits[g, t]))
        for i, (c, rows) in enumerate(kernel_parts):
            cls.append(c); grp.append(len(groups_out) + i); cnt.append(rows)
        solution = solution_from_class_groups(hist, cls, grp, cnt, "dp")
    else:
        pc, ps, pg, pn = [], [], [], []
        for gi, g in enumerate(groups_out):
            for t in np.flatnonzero(digits[g]):
                pc.append(int(t_class[t])); ps.append(int(t_sa[t])); pg.append(gi); pn.append(int(digits[g, t]))
        arrays = [np.asarray(a, dtype=np.int64) for a in (pc, ps, pg, pn)]
        solution = build_solution(hist, *arrays, method="dp")
    objective = int(f[full])
    solution.optimal = True
    solution.lower_bound = min(objective, solution.stars)
    solution.notes.update({"objective": objective, "states": n_states, "kernel_removed": sum(r for _, r in kernel_parts)})
    return solution
