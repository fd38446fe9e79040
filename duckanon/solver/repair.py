"""Greedy merging until every group satisfies every model (and the `merge` heuristic built on it).

Every model we support is closed under merging satisfying groups (k and frequency/distinct l
trivially; t-closeness because EMD is convex), and the whole table satisfies them whenever the
request is feasible. So repeatedly merging a violating group into another one terminates with a
valid solution, at the latest with the whole table as one group.

Cost: O(G * (m + S)) per merge with G groups, O(G^2 (m + S)) in all; meant for the few groups a
k-anonymous solution leaves violating, or for tables with a few thousand classes.

`weights` (partition.star_weights: a star's cost per column, None: 1 each) makes a merge's cost
the weighted stars it adds.
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import all_satisfied, globally_satisfied
from duckanon.solver.partition import STAR, Solution, build_solution, identity_solution, star_cost


def deficit(models, sizes: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """How far groups are from satisfying the models (the sum of each model's `deficit`, scaled to
    ~[0, 1]): 0 for a group that satisfies them all; a proxy, which may stay above 0 on a group
    that satisfies them (see LDiversity.deficit)."""
    total = np.zeros(len(sizes))
    for model in models:
        total += model.deficit(sizes, sa)
    return total


def _merges(v: int, others: np.ndarray, rep, sizes, sa, stars, weights) -> tuple:
    """Group v merged with each of `others`: the merged representatives, their (weighted) stars
    per row, sizes and SA counts, and the stars each merge adds in all."""
    merged_rep = np.where(rep[others] == rep[v], rep[v], STAR)
    merged_stars = star_cost(merged_rep == STAR, weights)
    merged_sizes = sizes[others] + sizes[v]
    merged_sa = sa[others] + sa[v]
    delta = merged_sizes * merged_stars - sizes[others] * stars[others] - sizes[v] * stars[v]
    return merged_rep, merged_stars, merged_sizes, merged_sa, delta


def repair(hist: Histogram, solution: Solution, models, context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """Merge violating groups into their cheapest partners until all groups satisfy `models`."""
    sizes = solution.group_sizes()
    sa = solution.group_sa(hist.sa_counts.shape[1])
    rep = solution.group_rep.copy()
    alive = sizes > 0
    ok = all_satisfied(models, sizes, sa) | ~alive
    if ok.all():
        return solution
    label = np.arange(len(sizes))
    stars = star_cost(rep == STAR, weights)
    while True:
        context.check()
        bad = np.flatnonzero(alive & ~ok)
        if len(bad) == 0:
            break
        v = bad[np.argmin(sizes[bad])]
        others = np.flatnonzero(alive)
        others = others[others != v]
        if len(others) == 0:
            break  # the whole table violates: the caller checked feasibility, so this cannot happen
        merged_rep, merged_stars, merged_sizes, merged_sa, delta = _merges(v, others, rep, sizes, sa, stars, weights)
        good = all_satisfied(models, merged_sizes, merged_sa)
        if good.any():
            candidates = np.flatnonzero(good)
            pick = candidates[np.lexsort((merged_sizes[candidates], delta[candidates]))[0]]
        else:
            before = deficit(models, sizes[v : v + 1], sa[v : v + 1])[0] + deficit(models, sizes[others], sa[others])
            gain = before - deficit(models, merged_sizes, merged_sa)
            if (gain > 1e-12).any():
                score = np.where(gain > 1e-12, (delta + 1) / np.maximum(gain, 1e-12), np.inf)
                pick = int(np.argmin(score))
            else:
                pick = int(np.argmin(delta))
        g = others[pick]
        sizes[g], sa[g], rep[g], stars[g] = merged_sizes[pick], merged_sa[pick], merged_rep[pick], merged_stars[pick]
        ok[g] = good[pick]
        alive[v] = False
        sizes[v] = 0
        label[label == v] = g
    repaired = build_solution(
        hist, solution.part_class, solution.part_sa, label[solution.part_group], solution.part_count, solution.method
    )
    return repaired


def merge_until_global(hist: Histogram, solution: Solution, models, context: SolveContext = UNBOUNDED,
                       weights=None) -> Solution:
    """Merge groups until the global models (average risk, population uniqueness) hold on the
    published groups: the smallest group first (as ARX suppresses the smallest classes first)
    into the partner that adds the fewest stars while the merged group still satisfies the
    per-group models, else the fewest stars. Each merge removes a group, so this ends, at the
    latest with the whole table as one group (the caller checked that it meets them)."""
    sizes = solution.group_sizes()
    sa = solution.group_sa(hist.sa_counts.shape[1])
    alive = (sizes > 0) & solution.kept_groups
    if globally_satisfied(models, sizes[alive], sa[alive]):
        return solution
    rep = solution.group_rep.copy()
    stars = star_cost(rep == STAR, weights)
    label = np.arange(len(sizes))
    while not globally_satisfied(models, sizes[alive], sa[alive]):
        context.check()
        others = np.flatnonzero(alive)
        if len(others) < 2:
            break
        v = others[np.argmin(sizes[others])]
        others = others[others != v]
        merged_rep, merged_stars, merged_sizes, merged_sa, delta = _merges(v, others, rep, sizes, sa, stars, weights)
        good = all_satisfied(models, merged_sizes, merged_sa)
        pick = int(np.lexsort((merged_sizes, delta, ~good))[0])
        g = others[pick]
        sizes[g], sa[g], rep[g], stars[g] = merged_sizes[pick], merged_sa[pick], merged_rep[pick], merged_stars[pick]
        alive[v] = False
        sizes[v] = 0
        label[label == v] = g
    merged = build_solution(hist, solution.part_class, solution.part_sa, label[solution.part_group],
                            solution.part_count, solution.method)
    merged.notes.update(solution.notes)
    merged.notes["merged_for"] = ", ".join(str(model) for model in models if model.global_constraint)
    return repair(hist, merged, models, context, weights)


def merge_classes(hist: Histogram, models, context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """The `merge` heuristic: start from the equivalence classes and repair."""
    return repair(hist, identity_solution(hist, "merge"), models, context, weights)


def fold_outside_patterns(hist: Histogram, solution: Solution, patterns) -> Solution:
    """Make `solution` honour user `patterns` (lists of column indices that may be starred
    together): every group whose published stars are no subset of a pattern goes into one group,
    the fully suppressed leftover of Bredereck's model (greedy's last group, exact's all-star
    vector). Needed after `repair`, whose merges publish meets that no pattern may allow; the
    union of groups that satisfy the models satisfies them too (closure under merging, above),
    so the result stays valid."""
    if patterns is None:
        return solution
    allowed = [set(p) for p in patterns]
    starred = [set(np.flatnonzero(row).tolist()) for row in solution.group_rep == STAR]
    outside = np.array([bool(s) and not any(s <= p for p in allowed) for s in starred], dtype=bool)
    outside &= solution.group_sizes() > 0
    if outside.sum() <= 1:
        return solution
    label = np.arange(len(solution.group_rep))
    label[outside] = np.flatnonzero(outside)[0]
    return build_solution(hist, solution.part_class, solution.part_sa, label[solution.part_group], solution.part_count,
                          solution.method)
