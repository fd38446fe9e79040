"""Pattern-guided greedy for k-anonymity (Bredereck et al., Algorithm 1).

A pattern is a set of columns that may be suppressed together. Patterns are tried in increasing
number of stars; for each, the remaining rows are grouped by the columns the pattern keeps, and
every group of at least k rows is released and removed. An m-approximation, tight.

Without user patterns all 2^m patterns are used, generated lazily. A kept column none of whose
values still has k remaining rows can never be part of a released group, so patterns keeping it
are skipped without being generated: only subsets of the "alive" columns are enumerated.

Rows left at the end (fewer than k) form one last group; the repair step merges it into the
cheapest group when it is too small. The zero-star pattern is always tried first (classes of
size >= k are released unchanged).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from duckanon.solver.histogram import Histogram, group_keys
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, solution_from_class_groups


def _default_kept_sets(m: int, alive_columns):
    """Kept-column sets in increasing star order, drawn from the currently alive columns.

    When a release kills a column, the current size restarts over the smaller alive set; sets
    tried again release nothing new (their groups only shrank), and the alive set can only
    shrink, so this ends.
    """
    for kept_size in range(m, -1, -1):
        restart = True
        while restart:
            restart = False
            alive = alive_columns()
            for kept in combinations(alive, kept_size):
                yield kept
                if len(alive_columns()) < len(alive):
                    restart = True
                    break


def greedy(hist: Histogram, k: int, patterns: list[list[int]] | None = None, models=()) -> Solution:
    """`patterns`: lists of column indices that may be starred together (None: all 2^m).

    With `models` (l-diversity, t-closeness, ...), a group is released only when it also
    satisfies them; otherwise only its size (>= k) counts, as in the paper.
    """
    m = hist.m
    remaining = hist.sizes.copy()
    remaining_sa = hist.sa_counts.copy()
    cls, group, count = [], [], []
    next_group = 0

    def alive_columns():
        alive = []
        for j in range(m):
            values = np.bincount(hist.codes[:, j], weights=remaining)
            if len(values) and values.max() >= k:
                alive.append(j)
        return alive

    if patterns is None:
        kept_sets = _default_kept_sets(m, alive_columns)
    else:
        starred = sorted({tuple(sorted(set(p))) for p in patterns} | {()}, key=len)
        kept_sets = (tuple(j for j in range(m) if j not in s) for s in starred)

    for kept in kept_sets:
        live = np.flatnonzero(remaining > 0)
        if remaining.sum() < k or len(live) == 0:
            break
        keys = group_keys(hist.codes[live][:, list(kept)])
        totals = np.bincount(keys, weights=remaining[live])
        ok = totals >= k
        if models:
            group_sa = np.zeros((len(totals), remaining_sa.shape[1]), dtype=np.int64)
            np.add.at(group_sa, keys, remaining_sa[live])
            ok &= all_satisfied(models, totals.astype(np.int64), group_sa)
        released = ok[keys]
        if not released.any():
            continue
        for c, key in zip(live[released], keys[released]):
            cls.append(c); group.append(next_group + key); count.append(remaining[c])
        next_group += len(totals)
        remaining[live[released]] = 0
        remaining_sa[live[released]] = 0

    leftover = np.flatnonzero(remaining > 0)
    for c in leftover:
        cls.append(c); group.append(next_group); count.append(remaining[c])
    return solution_from_class_groups(hist, cls, group, count, "greedy")
