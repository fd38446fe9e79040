"""Iterative global recoding of record subsets over the hierarchies, then top-down splits.

ARX's local recoding (`ARXResult.optimizeIterative*`) anonymizes the table with one full-domain
transformation, then re-anonymizes only the suppressed records with the best transformation for
them, and repeats: each round publishes the classes that satisfy the models at that round's node
and leaves the others for the next. It fixes the first transformation and never refines a class
once published.

Here the same rounds run over the histogram's classes (no rows), each a bounded search of the
lattice for the subset still unpublished:
  * a node's score is the weighted loss per row of the rows it publishes (their labels' cost),
    among the nodes that publish at least a share of the rows left (ARX's optimizeIterativeFast
    asks each round for 1% of the table, then minimises the loss with the rest suppressed); the
    search is a greedy descent from the top node, one level of one column at a time, down the
    child of lowest score, the best node seen on the way kept (at most the sum of the heights
    steps of m nodes each);
  * a round publishes the satisfying classes of its node as groups; the rest go to the next round;
  * the rounds end when every class is published, a round publishes nothing, or after MAX_ROUNDS.
What is left is removed when it fits the suppression limit, else merged into the published group
where the merge costs least and the group still satisfies the models (the whole table does).
Every group is then handed to the top-down specialization of hierarchical.py as its starting
point: a group published at a coarse node is split further wherever its parts stay valid.

Each share of SHARES is tried and the lowest loss kept (first among equals), beside the top-down
specialization from the root: work is bounded by counts (rounds, nodes), never by a clock.
Measured on Adult 9 QIs, k = 100, 5%: 0.198 (top-down alone 0.242, ARX's best local recoding
0.186); a fixed charge per row left instead of the share (0.35-1.0 of a row at the top labels)
lost 0.217-0.222.
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext

# The least share of the rows left that a round publishes; each is tried, the lowest loss kept.
SHARES = (0.05, 0.1, 0.2)
# Rounds of recoding per share.
MAX_ROUNDS = 400
# A key is compacted (to its rank) before its space would pass this many codes.
KEY_SPACE = 1 << 62


class SubsetRecoding:
    """The rounds (module docstring) over a HierarchicalRecoding's codes and label losses."""

    def __init__(self, search, share: float):
        self.search = search
        self.share = share
        self.quota = 0.0  # the rows a round must publish at least
        self.m = search.m
        self.heights = np.array(search.heights, dtype=np.int64)
        # per column and level the number of codes (a key's radix)
        self.radix = [[int(search.codes[:, j, h].max()) + 1 if search.codes.shape[0] else 1
                       for h in range(search.codes.shape[2])] for j in range(self.m)]
        self.columns = np.arange(self.m)

    def _groups_at(self, members: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, int]:
        """Each member's class at the node `levels` (dense ids) and the number of classes."""
        codes = self.search.codes[members][:, self.columns, levels]
        key = np.zeros(len(members), dtype=np.int64)
        space = 1
        for j in range(self.m):
            radix = self.radix[j][levels[j]]
            if radix == 1:
                continue
            if space * radix >= KEY_SPACE:
                _, key = np.unique(key, return_inverse=True)
                key = key.ravel().astype(np.int64)
                space = int(key.max()) + 1
            key = key * radix + codes[:, j]
            space *= radix
        _, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.ravel()
        return inverse, int(inverse.max()) + 1 if len(inverse) else 0

    def evaluate(self, members: np.ndarray, levels: np.ndarray) -> tuple[float, np.ndarray]:
        """The node's score on `members` and which members it publishes."""
        search = self.search
        inverse, count = self._groups_at(members, levels)
        sizes = search.sizes[members]
        group_sizes = np.bincount(inverse, weights=sizes, minlength=count)
        if search.k_only:
            group_sa = np.zeros((count, search.sa.shape[1]))
        else:
            group_sa = np.stack([np.bincount(inverse, weights=search.sa[members, s], minlength=count)
                                 for s in range(search.sa.shape[1])], axis=1)
        published = search.satisfied(group_sizes, group_sa)[inverse]
        codes = search.codes[members][:, self.columns, levels]
        cells = search.loss_of[search.loss_at[self.columns, levels] + codes]  # (members, m)
        cost = float((sizes[published] @ cells[published]) @ search.weights)
        rows = float(sizes[published].sum())
        if rows < self.quota:
            return np.inf, published
        return cost / rows, published

    def best_node(self, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The greedy descent's best node for `members` (module docstring) and what it publishes."""
        levels = self.heights.copy()
        best_score, best_published = self.evaluate(members, levels)
        best_levels = levels.copy()
        while (levels > 0).any():
            step = None
            for j in np.flatnonzero(levels > 0):
                child = levels.copy()
                child[j] -= 1
                score, published = self.evaluate(members, child)
                if step is None or score < step[0]:
                    step = (score, child, published)
            score, levels, published = step
            if score == np.inf:
                break
            if score < best_score:
                best_score, best_levels, best_published = score, levels.copy(), published
            if not published.any():
                break  # every finer node publishes nothing either (the models are closed under merging)
        return best_levels, best_published

    def rounds(self, context: SolveContext = UNBOUNDED) -> tuple[list, np.ndarray]:
        """The groups published (a _Group each, at its tightest labels) and the classes left."""
        search = self.search
        left = np.arange(search.hist.n_classes)
        groups = []
        for _ in range(MAX_ROUNDS):
            if not len(left) or context.expired():
                break
            self.quota = self.share * float(search.sizes[left].sum())
            levels, published = self.best_node(left)
            if not published.any():
                break
            inverse, _ = self._groups_at(left[published], levels)
            order = np.argsort(inverse, kind="stable")
            bounds = np.flatnonzero(np.diff(inverse[order])) + 1
            for part in np.split(left[published][order], bounds):
                groups.append(search.group(part, levels))
            left = left[~published]
        return groups, left

    def place_leftover(self, groups: list, left: np.ndarray, budget: float) -> tuple[list, list]:
        """`groups` with the classes `left` removed (within `budget`) or merged into the group
        where that costs least among those that stay valid; and the removed groups."""
        search = self.search
        if not len(left):
            return groups, []
        rest = search.group(left, self.heights)
        if rest.size <= budget:
            return groups, [rest]
        best = None
        for g, group in enumerate(groups):
            merged = search.group(np.concatenate([group.members, left]), self.heights)
            if not self._valid(merged):
                continue
            extra = float(search.weights @ (merged.cost - group.cost))
            if best is None or extra < best[0]:
                best = (extra, g, merged)
        if best is None:  # one group of every class: the whole table satisfies the models
            return [search.group(np.arange(search.hist.n_classes), self.heights)], []
        groups = list(groups)
        groups[best[1]] = best[2]
        return groups, []

    def _valid(self, group) -> bool:
        search = self.search
        sa = search.sa[group.members].sum(axis=0)[None, :]
        return bool(search.satisfied(np.array([group.size]), sa)[0])


def iterative_start(search, share: float, context: SolveContext = UNBOUNDED) -> tuple[list, list]:
    """The groups (and removed groups) of the rounds publishing at least `share` of the rows left
    each, every group valid."""
    recoding = SubsetRecoding(search, share)
    groups, left = recoding.rounds(context)
    return recoding.place_leftover(groups, left, search.budget)
