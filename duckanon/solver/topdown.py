"""`method = 'topdown'`: top-down refinement of the suppression lattice, built for t-closeness.

Why it works. Three facts:
  1. The whole table is t-close (EMD 0) and, for every model we support, k-anonymous and
     l-diverse whenever the request is feasible: the root of the lattice, every column starred,
     is a valid one-group solution.
  2. Un-starring column j in a group G splits G by the values of j (one GROUP BY). A part S that
     satisfies the models can be published on its own with j kept, provided what stays behind,
     G \\ S, still satisfies them: then every group is valid at every step, by construction.
  3. EMD is convex, so the union of parts released from G is t-close as well, and released parts
     and remainders can be refined further, independently, down the lattice.

So each group is refined greedily: try every still-starred column, release the parts that
satisfy the models (closest to the table's SA distribution first, as long as the remainder keeps
satisfying them), keep the column whose split releases the most rows, and recurse into the
released parts (that column now kept) and into the remainder (that column no longer tried).
Splitting stops when a group is smaller than twice the smallest group the models allow.

With attribute weights (a star's cost per column) the column chosen is the one whose split
saves the most weighted stars: the rows it releases times the column's weight.

Only whole classes move (a split is by QI values), so the work per level is a few vectorised
numpy passes over the group's classes: O(m^2 * C) per level of refinement, independent of the
row count. Works for any mix of k, l (every form) and t (every distance).
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, solution_from_class_groups
from duckanon.solver.request import Request


def _closeness(request: Request, sizes, sa) -> np.ndarray:
    """Sort key for releasing parts: the largest EMD to the table over the t models (0 without t)."""
    key = np.zeros(len(sizes))
    for model in request.closeness:
        key = np.maximum(key, model.emd(sizes, sa))
    return key


def _split(hist: Histogram, members: np.ndarray, column: int, models: Request, group_sa: np.ndarray):
    """Parts of `members` (class ids) by the value of `column` that can leave the group, and the
    rows they release: (released parts as arrays of class ids, remainder class ids, rows)."""
    values = hist.codes[members, column]
    order = np.argsort(values, kind="stable")
    sorted_members = members[order]
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    if len(starts) < 2:
        return [], members, 0
    part_sa = np.add.reduceat(hist.sa_counts[sorted_members], starts, axis=0)
    part_sizes = part_sa.sum(axis=1)
    ok = all_satisfied(models, part_sizes, part_sa)
    candidates = np.flatnonzero(ok)
    if len(candidates) == 0:
        return [], members, 0
    candidates = candidates[np.lexsort((-part_sizes[candidates], _closeness(models, part_sizes[candidates], part_sa[candidates])))]
    ends = np.r_[starts[1:], len(sorted_members)]
    remainder_sa = group_sa.copy()
    released = []
    released_rows = 0
    for p in candidates.tolist():
        rest = remainder_sa - part_sa[p]
        rest_size = int(rest.sum())
        if rest_size and not all_satisfied(models, np.array([rest_size]), rest[None, :])[0]:
            continue
        remainder_sa = rest
        released.append(p)
        released_rows += int(part_sizes[p])
    if not released:
        return [], members, 0
    keep = np.ones(len(starts), dtype=bool)
    keep[released] = False
    parts = [sorted_members[starts[p]:ends[p]] for p in released]
    remainder = np.concatenate([sorted_members[starts[p]:ends[p]] for p in np.flatnonzero(keep)]) if keep.any() \
        else np.zeros(0, dtype=np.int64)
    return parts, remainder, released_rows


def topdown(hist: Histogram, models, roots: list[np.ndarray] | None = None,
            context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """Refine from the whole table, or from each of `roots` (valid groups of whole classes, e.g.
    another method's output): refining a valid group never adds stars, since every part
    publishes the meet of fewer rows."""
    groups = topdown_groups(hist, models, roots, context, weights)
    labels = np.empty(hist.n_classes, dtype=np.int64)
    for g, members in enumerate(groups):
        labels[members] = g
    classes = np.arange(hist.n_classes)
    return solution_from_class_groups(hist, classes, labels, hist.sizes, "topdown")


class SplitTally:
    """The column splits (_split calls) topdown_groups has made, for a caller that bounds its work
    by them (local.pair_rebuild: a count, not a clock, so the release does not depend on load)."""

    def __init__(self):
        self.splits = 0


def topdown_groups(hist: Histogram, models, roots: list[np.ndarray] | None = None,
                   context: SolveContext = UNBOUNDED, weights=None, tally: SplitTally | None = None) -> list[np.ndarray]:
    """The groups (class ids) `topdown` publishes, without building the Solution (for callers
    that refine a few classes of a large histogram many times, as local search does). `tally`,
    when given, counts the column splits made."""
    models = Request.of(models)
    min_size = models.min_group_size
    groups: list[np.ndarray] = []
    # stack of (class ids, columns still starred and worth trying)
    if roots is None:
        roots = [np.arange(hist.n_classes)]
    stack = [(members, tuple(j for j in range(hist.m) if len(np.unique(hist.codes[members, j])) > 1)) for members in roots]
    while stack:
        context.check()
        members, starred = stack.pop()
        if len(members) == 0:
            continue
        group_sa = hist.sa_counts[members].sum(axis=0)
        if len(members) == 1 or int(group_sa.sum()) < 2 * min_size or not starred:
            groups.append(members)
            continue
        best = None
        if tally is not None:
            tally.splits += len(starred)
        for column in starred:
            parts, remainder, rows = _split(hist, members, column, models, group_sa)
            if weights is not None:
                rows = rows * float(weights[column])  # the weighted stars the split saves
            if rows and (best is None or rows > best[2]):
                best = (column, parts, rows, remainder)
        if best is None:
            groups.append(members)
            continue
        column, parts, _, remainder = best
        rest = tuple(c for c in starred if c != column)
        for part in parts:
            stack.append((part, rest))
        if len(remainder):
            stack.append((remainder, rest))
    return groups
