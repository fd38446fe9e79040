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
Then a packing over every node those rounds evaluated (BoxPacking): each node's classes that
satisfy the models (its boxes) are candidates at once, taken the cheapest per row first while what
is left of a box (its classes not yet taken) still satisfies the models, the boxes' counts kept
current class by class as they are taken (incremental counts over the histogram); each node's
groups over the whole histogram are computed once for the rounds and the packing (NodeGroups).
Unlike the
rounds, a box of a node is taken without the node's costlier boxes, whose rows may find cheaper
boxes at other nodes.

What is left is removed when it fits the suppression limit, else merged into the published group
where the merge costs least and the group still satisfies the models (the whole table does).
The start of lowest loss is handed to the top-down specialization of hierarchical.py: a group
published at a coarse node is split further wherever its parts stay valid.

Work is bounded by counts (rounds, RECODE_EVALUATIONS node evaluations per share, the packing's
PACK_NODES and PACK_BYTES), never by a clock (a time_limit stops the rounds at its deadline too). Measured on Adult 9 QIs, k = 100, 5%
(ARX's best local recoding 0.186; the top-down splits alone 0.242): the rounds 0.198 at a share
of 5%, 0.216 at 20%; a fixed charge per row left instead of the share (0.35-1.0 of a row at the
top labels) 0.217-0.222; the packing over the rounds' 320 nodes 0.183. Adult 8 QIs, k = 100: the
packing over the rounds' 231 nodes 0.1255, over the whole lattice (4,320 nodes, 20x the time)
0.1243.
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import first_positions

# The least share of the rows left that a round publishes; each is tried, the lowest loss kept.
SHARES = (0.05, 0.2)
# Rounds of recoding per share.
MAX_ROUNDS = 400
# A key is compacted (to its rank) before its space would pass this many codes.
KEY_SPACE = 1 << 62
# The bytes of node groups NodeGroups keeps (each node's class codes, 4 bytes a class, and its
# groups' losses, 8 bytes a group): 64 MiB.
MAX_CACHED_BYTES = 1 << 26
# Keys are ranked by a table of their space up to this size (or 4 per key), by sorting above.
DENSE_SPACE = 1 << 14
# Node evaluations per share's rounds: a descent costs up to (QIs x the sum of the heights)
# evaluations, so on a wide table the rounds grew without bound (1,000 rows x 40 QIs: 164,922
# evaluations, 33 s). The harness's Adult and CUP cases make at most 8,821 for both shares together.
RECODE_EVALUATIONS = 12_000
# The packing's candidate nodes: at most PACK_NODES, and at most PACK_BYTES of its arrays (per node
# and class the box, 4 bytes, twice while they are stacked; per box its size, cost and node, 8 bytes
# each, and its SA counts): 128,773 nodes x 500 classes took 250 MB. The harness's cases use at
# most 1,299 nodes (CUP, 63,441 classes: 660 MB stacked).
PACK_NODES = 2_000
PACK_BYTES = 1 << 30


def packing_bytes(n_classes: int, n_sa: int, k_only: bool) -> tuple[int, int]:
    """(per node, per box) bytes of the packing's arrays."""
    return 8 * n_classes, 24 + (0 if k_only else 8 * n_sa)


def recoding_memory_bound(n_classes: int, m: int, n_sa: int, levels: int) -> int:
    """An upper bound on the bytes the recoding of this module and the top-down splits hold
    beyond the histogram (the memory estimate's term, pipeline/histogram.py): the packing's
    arrays, NodeGroups' cache and its codes per column and level (8 bytes each), and the
    HierarchicalRecoding searches' codes (one per start and the splits', 8 bytes per class,
    column and level at most)."""
    node, box = packing_bytes(n_classes, n_sa, False)
    packing = min(PACK_BYTES, PACK_NODES * (node + box * n_classes))
    codes = 8 * n_classes * m * levels
    # NodeGroups' codes, and one search's per start (SHARES and the packing) and the splits'
    return packing + MAX_CACHED_BYTES + (1 + len(SHARES) + 2) * codes


def _ranks(key: np.ndarray, space: int) -> tuple[np.ndarray, int]:
    """Each key's rank among the distinct keys and their number: by a table of the key space
    when it is small (no sort), else by sorting."""
    if space <= max(DENSE_SPACE, 4 * len(key)):
        present = np.zeros(space, dtype=bool)
        present[key] = True
        rank = np.cumsum(present) - 1
        return rank[key], int(rank[-1]) + 1 if space else 0
    _, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.ravel()
    return inverse, int(inverse.max()) + 1 if len(inverse) else 0


class NodeGroups:
    """Per node of the lattice, every class's group over the whole histogram (dense ids in key
    order) and each group's weighted loss per row, computed once and shared by the rounds of
    every share and the packing: a descent's nodes recur from round to round, and the packing
    takes the nodes the rounds tried. Holds at most MAX_CACHED_BYTES of them (then computes
    again): the answers are the same either way."""

    def __init__(self, search):
        self.search = search
        self.m = search.m
        # per column and level the number of codes (a key's radix)
        self.radix = [[int(search.codes[:, j, h].max()) + 1 if search.codes.shape[0] else 1
                       for h in range(search.codes.shape[2])] for j in range(self.m)]
        self.columns = np.arange(self.m)
        # per column and level every class's code, as int64 (a key's digits)
        self.level_codes = [[search.codes[:, j, h].astype(np.int64) for h in range(search.codes.shape[2])]
                            for j in range(self.m)]
        self.everyone = np.arange(search.hist.n_classes)
        self.weights = search.weights.copy()  # (a search's weights change once its splits run)
        self._cache: dict = {}
        self._held = 0

    def _groups_at(self, levels: np.ndarray) -> tuple[np.ndarray, int]:
        """Each class's group at the node `levels` (dense ids in key order) and their number."""
        key = np.zeros(len(self.everyone), dtype=np.int64)
        space = 1
        for j in range(self.m):
            radix = self.radix[j][levels[j]]
            if radix == 1:
                continue
            if space * radix >= KEY_SPACE:
                key, space = _ranks(key, space)
            key = key * radix + self.level_codes[j][levels[j]]
            space *= radix
        return _ranks(key, space)

    def at(self, levels: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
        """At the node `levels`: every class's group, the number of groups and each group's
        weighted loss per row (its labels')."""
        node = tuple(levels.tolist())
        found = self._cache.get(node)
        if found is not None:
            return found
        search = self.search
        inverse, count = self._groups_at(levels)
        inverse = inverse.astype(np.int32 if count < 2 ** 31 else np.int64)
        first = first_positions(inverse, count)  # the first class of each group
        codes = search.codes[first][:, self.columns, levels]
        per_row = search.loss_of[search.loss_at[self.columns, levels] + codes] @ self.weights
        found = (inverse, count, per_row)
        size = inverse.nbytes + per_row.nbytes
        if self._held + size <= MAX_CACHED_BYTES:
            self._cache[node] = found
            self._held += size
        return found


class SubsetRecoding:
    """The rounds (module docstring) over a HierarchicalRecoding's codes and label losses."""

    def __init__(self, search, share: float, nodes: NodeGroups | None = None):
        self.search = search
        self.share = share
        self.quota = 0.0  # the rows a round must publish at least
        self.seen: dict = {}  # the nodes evaluated, in order (candidates of the packing)
        self.evaluations = 0  # (bounded by RECODE_EVALUATIONS)
        self.m = search.m
        self.heights = np.array(search.heights, dtype=np.int64)
        self.nodes = NodeGroups(search) if nodes is None else nodes

    def evaluate(self, members: np.ndarray, levels: np.ndarray) -> tuple[float, np.ndarray]:
        """The node's score on `members` and which members it publishes."""
        search = self.search
        self.evaluations += 1
        self.seen.setdefault(tuple(levels.tolist()), None)
        groups_of, count, per_row = self.nodes.at(levels)
        inverse = groups_of[members]
        if count > 4 * len(members):  # few members left: their groups numbered among themselves
            present_groups, inverse = np.unique(inverse, return_inverse=True)
            inverse = inverse.ravel()
            count, per_row = len(present_groups), per_row[present_groups]
        group_sizes = np.bincount(inverse, weights=search.sizes[members], minlength=count)
        present = np.flatnonzero(group_sizes)
        if search.k_only:
            group_sa = np.zeros((len(present), search.sa.shape[1]))
        else:
            group_sa = np.stack([np.bincount(inverse, weights=search.sa[members, s], minlength=count)[present]
                                 for s in range(search.sa.shape[1])], axis=1)
        held = np.zeros(count, dtype=bool)
        held[present] = search.satisfied(group_sizes[present], group_sa)
        published = held[inverse]
        rows = float(group_sizes[held].sum())
        if rows < self.quota:
            return np.inf, published
        return float(group_sizes[held] @ per_row[held]) / rows if rows else np.inf, published

    def spent(self, context: SolveContext) -> bool:
        """Whether the rounds must stop: RECODE_EVALUATIONS made, or the context's deadline."""
        return self.evaluations >= RECODE_EVALUATIONS or context.expired()

    def best_node(self, members: np.ndarray, context: SolveContext = UNBOUNDED) -> tuple[np.ndarray, np.ndarray]:
        """The greedy descent's best node for `members` (module docstring) and what it publishes;
        the best seen so far once the rounds are spent (checked before each step)."""
        levels = self.heights.copy()
        best_score, best_published = self.evaluate(members, levels)
        best_levels = levels.copy()
        while (levels > 0).any() and not self.spent(context):
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
            if not len(left) or self.spent(context):
                if context.expired():
                    context.cut("mondrian recoding rounds")
                break
            self.quota = self.share * float(search.sizes[left].sum())
            levels, published = self.best_node(left, context)
            if not published.any():
                break
            inverse = self.nodes.at(levels)[0][left[published]]
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
        if search.nested and groups:
            return self._merge_leftover(groups, rest), []
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

    def _merge_leftover(self, groups: list, rest) -> list:
        """place_leftover's merge for nested hierarchies, every group at once: the classes of a
        group and of `rest` disagree on a column at the levels where either disagrees within
        itself or their codes differ (the lowest levels), so the merged group's tight level per
        column is the largest of the three."""
        search = self.search
        columns = np.arange(self.m)
        first = np.array([group.members[0] for group in groups])
        codes = search.codes[first]  # (groups, m, levels)
        across = (codes != search.codes[rest.members[0]]).sum(axis=2)
        inside = np.array([group.levels for group in groups], dtype=np.int64)
        tight = np.minimum(np.maximum(np.maximum(inside, rest.levels), across), self.heights)
        sizes = np.array([group.size for group in groups]) + rest.size
        merged_cost = sizes[:, None] * search.loss_of[search.loss_at[columns, tight]
                                                      + np.take_along_axis(codes, tight[:, :, None], axis=2)[:, :, 0]]
        extra = (merged_cost - np.array([group.cost for group in groups])) @ search.weights
        if search.k_only:
            sa = np.zeros((len(groups), search.sa.shape[1]))
        else:
            sa = np.array([search.sa[group.members].sum(axis=0) for group in groups]) + search.sa[rest.members].sum(axis=0)
        valid = np.flatnonzero(search.satisfied(sizes, sa))
        if not len(valid):  # one group of every class: the whole table satisfies the models
            return [search.group(np.arange(search.hist.n_classes), self.heights)]
        g = int(valid[np.argmin(extra[valid])])  # the first of the cheapest
        groups = list(groups)
        groups[g] = search.group(np.concatenate([groups[g].members, rest.members]), self.heights)
        return groups

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


def subset_starts(new_search, context: SolveContext = UNBOUNDED):
    """The starts of the top-down splits this module makes, each (what it is, the search it was
    made on, its groups, its removed groups): the rounds at each share of SHARES, then the
    packing over every node those rounds evaluated. `new_search()`: a fresh HierarchicalRecoding."""
    seen: dict = {}
    nodes = None  # (every search starts with the same codes, losses and weights)
    for share in SHARES:
        search = new_search()
        recoding = SubsetRecoding(search, share, nodes)
        nodes = recoding.nodes
        groups, left = recoding.rounds(context)
        seen.update(recoding.seen)
        yield (f"iterative recoding of subsets, each round at least {share:.0%} of the rows left", search,
               *recoding.place_leftover(groups, left, search.budget))
    if context.expired():
        return
    search = new_search()
    top = tuple(search.heights)
    candidates = list(dict.fromkeys([*seen, top]))  # (in the order evaluated: the top first)
    if len(candidates) > PACK_NODES:
        candidates = list(dict.fromkeys([top, *candidates]))[:PACK_NODES]
    packing = BoxPacking(search, candidates, nodes)
    groups, left = packing.pack()
    yield (f"the groups of the {len(packing.nodes)} nodes those rounds tried that satisfy the models, the cheapest "
           "per row first", search, *packing.recoding.place_leftover(groups, left, search.budget))


class BoxPacking:
    """Groups taken from several nodes at once: every group (box) of every candidate node, the
    cheapest per row first, taken whole (its classes not yet taken) while what is left of it
    satisfies the models; the counts of every box are kept current as classes are taken
    (incremental class counts over the histogram: one subtraction per node and class taken)."""

    def __init__(self, search, nodes: list[tuple[int, ...]], groups: NodeGroups | None = None):
        self.search = search
        self.recoding = SubsetRecoding(search, 0.0, groups)
        self.nodes, box_of, sizes, sa, costs = [], [], [], [], []
        start = 0
        per_node, per_box = packing_bytes(search.hist.n_classes, search.sa.shape[1], search.k_only)
        used = 0
        for levels in (np.array(node, dtype=np.int64) for node in nodes):
            inverse, count, cost = self.recoding.nodes.at(levels)
            if self.nodes and used + per_node + per_box * count > PACK_BYTES:
                break  # (the nodes in the order evaluated: the top first)
            used += per_node + per_box * count
            node_sizes = np.bincount(inverse, weights=search.sizes, minlength=count)
            node_sa = np.zeros((count, search.sa.shape[1])) if search.k_only else \
                np.stack([np.bincount(inverse, weights=search.sa[:, s], minlength=count)
                          for s in range(search.sa.shape[1])], axis=1)
            # a box that does not satisfy the models now never will: classes are only taken from it
            held = search.satisfied(node_sizes, node_sa)
            if not held.any():
                continue  # a node without a satisfying box is left out
            self.nodes.append(levels)
            box_of.append((inverse + start).astype(np.int32))  # boxes numbered across the nodes
            sizes.append(node_sizes)
            sa.append(None if search.k_only else node_sa)
            costs.append(np.where(held, cost, np.inf))
            start += count
        self.box_of = np.stack(box_of)  # (nodes, classes)
        self.sizes = np.concatenate(sizes)
        self.sa = None if search.k_only else np.concatenate(sa)
        self.costs = np.concatenate(costs)
        self.node_of = np.repeat(np.arange(len(self.nodes)), [len(c) for c in costs])

    def _holds(self, box: int) -> bool:
        search = self.search
        sa = np.zeros((1, search.sa.shape[1])) if self.sa is None else self.sa[box][None, :]
        return bool(search.satisfied(self.sizes[box:box + 1], sa)[0])

    def _take(self, classes: np.ndarray) -> None:
        boxes = self.box_of[:, classes].ravel()  # node by node, every class
        np.subtract.at(self.sizes, boxes, np.tile(self.search.sizes[classes], len(self.nodes)))
        if self.sa is not None:
            np.subtract.at(self.sa, boxes, np.tile(self.search.sa[classes], (len(self.nodes), 1)))

    def pack(self) -> tuple[list, np.ndarray]:
        """The groups taken (at their tightest labels) and the classes left."""
        search = self.search
        taken = np.zeros(search.hist.n_classes, dtype=bool)
        valid = np.flatnonzero(self.costs < np.inf)
        least = search.min_size - 0.5
        groups = []
        for box in valid[np.argsort(self.costs[valid], kind="stable")]:  # cheapest first, ties in box order
            if self.sizes[box] < least or not (search.k_only or self._holds(box)):  # (k alone: the size says it)
                continue
            n = int(self.node_of[box])
            members = np.flatnonzero((self.box_of[n] == box) & ~taken)
            taken[members] = True
            self._take(members)
            groups.append(search.group(members, self.nodes[n]))
        return groups, np.flatnonzero(~taken)
