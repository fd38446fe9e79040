"""Local search over a partition of whole classes: move one class to the group where it costs
least, while every group keeps satisfying the models; then refine every group top-down.

Why it helps. Greedy-style heuristics decide a class's group once; with t-closeness the groups
must be large and mixed, and an early decision often puts a class where it adds stars that a
later group would not. A move changes two groups only, so its cost is exact and cheap: with each
group's per-column "single code" (or -1 when the group already disagrees there), the stars of
B + c are the columns where B's code is not c's. Every accepted move strictly lowers the stars
and keeps all groups valid, so the search stops at a local optimum no worse than its start.

Deadline. The passes are quadratic (pair re-splitting runs one top-down split per pair of
groups), which takes seconds on a few hundred classes. The context's deadline (context.py: a
statement's `time_limit`, or exact's share of it for its incumbent) stops the search: every state
it passes through is a valid partition no worse than the start, so it returns the best one
reached so far (the final top-down refinement is skipped, or dropped, once the deadline is past).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from duckanon.solver.context import UNBOUNDED, DeadlineExpired, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, solution_from_class_groups
from duckanon.solver.topdown import topdown, topdown_groups

# Above this many classes the quadratic passes are skipped.
LOCAL_SEARCH_CLASS_LIMIT = 3000
PAIR_GROUP_LIMIT = 60  # pair re-splitting is quadratic in groups, each pair a top-down run


def class_groups(solution: Solution, n_classes: int) -> np.ndarray | None:
    """The group of each class when no class is split across groups, else None."""
    group_of = np.full(n_classes, -1, dtype=np.int64)
    for c, g in zip(solution.part_class.tolist(), solution.part_group.tolist()):
        if group_of[c] not in (-1, g):
            return None
        group_of[c] = g
    return group_of


def improve(hist: Histogram, group_of: np.ndarray, models, max_passes: int = 30,
            context: SolveContext = UNBOUNDED) -> np.ndarray:
    group_of = np.unique(group_of, return_inverse=True)[1].ravel().astype(np.int64)
    n_groups = int(group_of.max()) + 1 if len(group_of) else 0
    capacity = n_groups + hist.n_classes  # room for classes that leave to form their own group
    sizes = np.zeros(capacity, dtype=np.int64)
    sa = np.zeros((capacity, hist.sa_counts.shape[1]), dtype=np.int64)
    np.add.at(sizes, group_of, hist.sizes)
    np.add.at(sa, group_of, hist.sa_counts)
    # per group and column: classes per code (codes with none are deleted, so len() is the
    # number of distinct codes and a move is O(m), not O(distinct codes of the group))
    counters = [[Counter() for _ in range(hist.m)] for _ in range(capacity)]
    for c, g in enumerate(group_of.tolist()):
        for j, code in enumerate(hist.codes[c].tolist()):
            counters[g][j][code] += 1
    single = np.full((capacity, hist.m), -1, dtype=np.int64)

    def refresh(g: int) -> None:
        for j in range(hist.m):
            counter = counters[g][j]
            single[g, j] = next(iter(counter)) if len(counter) == 1 else -1

    for g in range(n_groups):
        refresh(g)
    stars = lambda g: int((single[g] == -1).sum())  # noqa: E731
    next_free = n_groups
    alone_ok = all_satisfied(models, hist.sizes, hist.sa_counts)
    for _ in range(max_passes):
        moved = False
        order = np.argsort(-(hist.sizes * (single[group_of] == -1).sum(axis=1)), kind="stable")
        for step, c in enumerate(order.tolist()):
            if step % 16 == 0 and context.expired():
                return group_of  # every accepted move kept all groups valid
            a = int(group_of[c])
            s_c, sa_c, code_c = int(hist.sizes[c]), hist.sa_counts[c], hist.codes[c]
            rest_size = sizes[a] - s_c
            if rest_size and not all_satisfied(models, np.array([rest_size]), (sa[a] - sa_c)[None, :])[0]:
                continue
            # stars of A without c
            rest_stars = 0
            for j, code in enumerate(code_c.tolist()):
                counter = counters[a][j]
                rest_stars += len(counter) - (counter[code] == 1) > 1
            gain_a = sizes[a] * stars(a) - rest_size * rest_stars
            alive = np.flatnonzero(sizes[:next_free] > 0)
            alive = alive[alive != a]
            best_delta, best_b = 0, None
            if len(alive):
                merged_size = sizes[alive] + s_c
                ok = all_satisfied(models, merged_size, sa[alive] + sa_c)
                merged_stars = (single[alive] != code_c).sum(axis=1)
                delta = merged_size * merged_stars - sizes[alive] * (single[alive] == -1).sum(axis=1) - gain_a
                delta = np.where(ok, delta, np.iinfo(np.int64).max)
                pick = int(np.argmin(delta))
                if delta[pick] < best_delta:
                    best_delta, best_b = int(delta[pick]), int(alive[pick])
            if alone_ok[c] and -gain_a < best_delta and rest_size:
                best_delta, best_b = -gain_a, next_free
                next_free += 1
            if best_b is None:
                continue
            group_of[c] = best_b
            sizes[a] -= s_c
            sa[a] -= sa_c
            sizes[best_b] += s_c
            sa[best_b] += sa_c
            for j, code in enumerate(code_c.tolist()):
                counter = counters[a][j]
                counter[code] -= 1
                if not counter[code]:
                    del counter[code]
                counters[best_b][j][code] += 1
            refresh(a)
            refresh(best_b)
            moved = True
        if not moved:
            break
    return group_of


def _cost(hist: Histogram, members: np.ndarray) -> int:
    codes = hist.codes[members]
    varying = int((codes.min(axis=0) != codes.max(axis=0)).sum()) if len(members) else 0
    return int(hist.sizes[members].sum()) * varying


def pair_rebuild(hist: Histogram, groups: list[np.ndarray], models, max_rounds: int = 5,
                 context: SolveContext = UNBOUNDED) -> list[np.ndarray]:
    """Re-split the union of two groups top-down; keep the result when it costs less. The union
    of two valid groups is valid (closure under merging), so the split is always available.
    Stops at the context's deadline with the groups reached so far (each round keeps a valid
    partition)."""
    for _ in range(max_rounds):
        changed = False
        costs = [_cost(hist, g) for g in groups]
        order = sorted(range(len(groups)), key=lambda i: -costs[i])
        done = set()
        for a in order:
            if a in done or costs[a] == 0:
                continue
            best = None
            for b in range(len(groups)):
                if b == a or b in done:
                    continue
                if context.expired():
                    return groups
                union = np.concatenate([groups[a], groups[b]])
                try:  # the split's groups only: building a Solution over the whole histogram is O(classes)
                    parts = [np.sort(members) for members in topdown_groups(hist, models, [union], context)]
                except DeadlineExpired:
                    return groups
                cost = sum(_cost(hist, members) for members in parts)
                if cost < costs[a] + costs[b] and (best is None or cost - costs[a] - costs[b] < best[0]):
                    best = (cost - costs[a] - costs[b], b, parts)
            if best is not None:
                _, b, new = best
                done.update({a, b})
                groups = [g for i, g in enumerate(groups) if i not in (a, b)] + new
                done = {i for i in range(len(groups) - len(new), len(groups))}
                changed = True
                break
        if not changed:
            break
    return groups


def local_search(hist: Histogram, start: Solution, models, context: SolveContext = UNBOUNDED) -> Solution | None:
    """Moves, then top-down refinement of every group; None when `start` splits a class, or when
    the context's deadline is already past."""
    group_of = class_groups(start, hist.n_classes)
    if group_of is None or hist.n_classes > LOCAL_SEARCH_CLASS_LIMIT or context.expired():
        return None
    group_of = improve(hist, group_of, models, context=context)
    moved = solution_from_class_groups(hist, np.arange(hist.n_classes), group_of, hist.sizes, "local")
    roots = [np.flatnonzero(group_of == g) for g in np.unique(group_of)]
    if len(roots) <= PAIR_GROUP_LIMIT and not context.expired():
        roots = pair_rebuild(hist, roots, models, context=context)
    refined = None
    if not context.expired():
        try:
            refined = topdown(hist, models, roots, context)
        except DeadlineExpired:
            refined = None
    if refined is None:
        # no time for the top-down refinement: the best partition reached so far
        labels = np.empty(hist.n_classes, dtype=np.int64)
        for g, members in enumerate(roots):
            labels[members] = g
        refined = solution_from_class_groups(hist, np.arange(hist.n_classes), labels, hist.sizes, "local")
    best = refined if refined.stars <= moved.stars else moved
    best.method = f"{start.method}+local"
    return best
