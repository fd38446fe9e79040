"""`method = 'mondrian'` with hierarchies: local recoding that publishes the hierarchies' labels.

Every published cell is a label of its column's hierarchy, at a level that may differ from one
group to the next (a value where a group's rows agree on it, a coarser label where they do not),
as in ARX's local recoding; unlike Mondrian's sets and ranges, no label is made up.

Top-down specialization (LeFevre et al.'s Mondrian with categorical hierarchies, Fung et al.'s
top-down specialization). The table starts as one group at the top label of every column; a
group is split on one column by replacing its label with the label's children:
  * every child whose rows satisfy the models becomes a group of its own;
  * the children that do not are pooled in a remainder, which keeps the parent's label; when the
    remainder violates the models, the smallest satisfying children join it until it satisfies
    them (the whole group does, and every model is closed under merging), or, within the
    suppression limit and when that costs less, its rows are removed (record suppression, as
    the lattice removes rows);
  * each new group then publishes, per column, the finest label its rows share (its tightest
    label: a split on one column can make the rows agree on another).
Every group of the result satisfies the models: it is a satisfying child, a remainder made to
satisfy them, or a group no split was applied to.

Besides that split into every child, a group may be split in two: its most frequent children
(up to a quarter, half or three quarters of its rows) and the rest, each part keeping the
parent's label unless its rows share a finer one.

Which split: the one that lowers the loss the most per part made (ARX's Loss, weighted per
column by the derivative of its geometric mean at the current loss), among every candidate of
every column of a group; groups are split in that order (a heap), so the suppression limit goes
to the splits worth most. A group too small to be split into two satisfying parts is final.

Measured against ARX's own local recoding on the harness's cases (BENCHMARKS.md): 0.76-0.95x its
loss at k = 2 and with l = 3, 1.06-1.7x elsewhere. Mondrian's sets (no hierarchies) lose far
less; labels are coarser than sets.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.generalize import TOP, whole_domain
from duckanon.solver.histogram import Histogram
from duckanon.solver.lattice_metrics import arx_loss, arx_weights
from duckanon.solver.models import all_satisfied, globally_satisfied
from duckanon.solver.recode import subset_starts
from duckanon.solver.partition import SHOW_VALUE, STAR, Solution, distribute_sa
from duckanon.solver.request import Request


# Binary splits tried per column: the most frequent children up to these shares of the rows.
BINARY_CUTS = (0.25, 0.5, 0.75)
# A group's splits are tried on this many columns at most: those whose cells cost it most (on a
# wide table every column's splits of every group would cost columns^2 x rows a level of splits).
SPLIT_COLUMNS = 16


@dataclass
class _Group:
    members: np.ndarray  # class ids
    levels: np.ndarray  # (m,) the level of the group's label per column
    size: float
    cost: np.ndarray  # (m,) the group's cells' loss per column (rows x cell loss)


@dataclass
class _Split:
    gain: float
    parts: list  # of _Group
    removed: _Group | None  # the remainder removed (record suppression), or None


class HierarchicalRecoding:
    """The search state: per column the level codes of every class and the loss of each label."""

    def __init__(self, hist: Histogram, hierarchies, models, suppression_limit: float = 0.0, weights=None):
        """`weights`: ARX's attribute weights per QI (None: all 1), in the loss the splits lower."""
        self.hist = hist
        self.models = Request.of(models)
        self.m = hist.m
        self.sizes = np.asarray(hist.sizes, dtype=np.float64)
        self.sa = np.asarray(hist.sa_counts, dtype=np.float64)
        self.k_only = self.models.k_only
        self.min_size = max(self.models.min_group_size, 1)
        self.heights = [h.height for h in hierarchies]
        # (classes, m, highest height + 1): every class's code per column and level (a column's top
        # code repeated above its height), in the smallest unsigned type that holds them;
        # `ancestors[j]` is column j's levels
        top = max(self.heights, default=0)
        largest = max((int(np.max(h.codes)) for h in hierarchies if np.size(h.codes)), default=0)
        self.codes = np.empty((hist.n_classes, self.m, top + 1), dtype=np.min_scalar_type(largest))
        for j, h in enumerate(hierarchies):
            column = np.asarray(h.codes)[hist.codes[:, j]]
            self.codes[:, j, :h.height + 1] = column
            self.codes[:, j, h.height + 1:] = column[:, -1:]
        self.ancestors = [self.codes[:, j, :h.height + 1] for j, h in enumerate(hierarchies)]
        self.columns = np.arange(self.m)
        self.level_range = np.arange(top + 1)
        # whether classes that share a code at a level share it at every level above (true of a
        # tree; a file may give one label two parents): then a group's tight label is counted
        self.nested = all(_nested(np.asarray(h.codes)) for h in hierarchies)
        # per level the loss of each code, and all of them in one array: column j's code c at
        # level h costs loss_of[at[j, h] + c] (a level above the height is the top's)
        self.cell_loss = [[h.loss(level) for level in range(h.height + 1)] for h in hierarchies]
        tables = [self.cell_loss[j][min(level, self.heights[j])] for j in range(self.m) for level in range(top + 1)]
        self.loss_of = np.concatenate(tables) if tables else np.zeros(0)
        self.loss_at = np.cumsum([0] + [len(t) for t in tables[:-1]]).reshape(self.m, top + 1) if tables else \
            np.zeros((self.m, top + 1), dtype=np.int64)
        self.budget = float(np.floor(suppression_limit * hist.n_rows + 1e-9))
        user = arx_weights(weights)
        self.user_weights = np.ones(self.m) if user is None else user
        self.weights = self.user_weights.copy()

    # -- groups ------------------------------------------------------------------------------
    def group(self, members: np.ndarray, levels: np.ndarray) -> _Group:
        """A group of `members` at its tightest labels: per column the finest level at or below
        `levels` from which up its classes share one code (one level above the highest level
        below `levels` where they do not)."""
        size = float(self.sizes[members].sum())
        columns = self.columns
        if len(members) == 1:  # one class: its values (level 0) in every column
            tight = np.zeros(self.m, dtype=np.int64)
            first = self.codes[members[0]]
        else:
            codes = self.codes[members]  # (classes, m, levels)
            first = codes[0]
            disagree = (codes != first).any(axis=0)
            if self.nested:  # the levels where the classes disagree are the lowest ones
                tight = np.minimum(disagree.sum(axis=1), levels).astype(np.int64)
            else:
                disagree &= self.level_range < levels[:, None]
                highest = codes.shape[2] - 1 - np.argmax(disagree[:, ::-1], axis=1)
                tight = np.where(disagree.any(axis=1), highest + 1, 0).astype(np.int64)
        cost = size * self.loss_of[self.loss_at[columns, tight] + first[columns, tight]]
        return _Group(members, tight, size, cost)

    def split_columns(self, group: _Group) -> list[int]:
        """The columns a split of `group` is tried on: those above level 0, at most SPLIT_COLUMNS
        of them, those whose cells cost the group most (weighted) first, ties in column order."""
        columns = np.flatnonzero(group.levels > 0)
        if len(columns) > SPLIT_COLUMNS:
            columns = np.sort(columns[np.argsort(-(self.weights * group.cost)[columns], kind="stable")[:SPLIT_COLUMNS]])
        return columns.tolist()

    def satisfied(self, sizes: np.ndarray, sa: np.ndarray) -> np.ndarray:
        return all_satisfied(self.models, sizes, sa)

    def best_split(self, group: _Group, budget: float) -> _Split | None:
        """The split of `group` that lowers the weighted loss most (module docstring), or None."""
        if group.size < 2 * self.min_size:
            return None
        best = None
        for j in self.split_columns(group):
            level = int(group.levels[j])
            split = self._split_on(group, j, level, budget)
            if split is not None and (best is None or split.gain > best.gain):
                best = split
        return best

    def _split_on(self, group: _Group, j: int, level: int, budget: float) -> _Split | None:
        members = group.members
        child = self.ancestors[j][members, level - 1]
        keys, inverse = np.unique(child, return_inverse=True)
        inverse = inverse.ravel()
        if len(keys) < 2:
            return None
        sizes = np.bincount(inverse, weights=self.sizes[members], minlength=len(keys))
        if self.k_only:
            sa = np.zeros((len(keys), self.sa.shape[1]))
        else:
            sa = np.stack([np.bincount(inverse, weights=self.sa[members, s], minlength=len(keys))
                           for s in range(self.sa.shape[1])], axis=1)
        binary = self._binary_splits(group, j, level, inverse, sizes, sa)
        multiway = self._multiway_split(group, j, level, inverse, sizes, sa, budget)
        options = [option for option in (*binary, multiway) if option is not None]
        return max(options, key=lambda option: option.gain) if options else None

    def _binary_splits(self, group: _Group, j: int, level: int, inverse, sizes, sa) -> list[_Split]:
        """Two parts: the most frequent children (a quarter, half, three quarters of the rows)
        and the rest; a part of several children keeps the parent's label (or its tightest)."""
        order = np.argsort(-sizes, kind="stable")
        cumulative = np.cumsum(sizes[order])
        splits, tried = [], set()
        for share in BINARY_CUTS:
            take = int(np.searchsorted(cumulative, cumulative[-1] * share)) + 1
            if take >= len(order) or take in tried:
                continue
            tried.add(take)
            left = np.zeros(len(sizes), dtype=bool)
            left[order[:take]] = True
            halves_sa = np.stack([sa[left].sum(axis=0), sa[~left].sum(axis=0)])
            if not self.satisfied(np.array([sizes[left].sum(), sizes[~left].sum()]), halves_sa).all():
                continue
            in_left = left[inverse]
            parts = [self.group(group.members[in_left], group.levels), self.group(group.members[~in_left], group.levels)]
            cost = parts[0].cost + parts[1].cost
            splits.append(_Split(float(self.weights @ (group.cost - cost)) / 2, parts, None))
        return splits

    def _multiway_split(self, group: _Group, j: int, level: int, inverse, sizes, sa, budget: float) -> _Split | None:
        """Every satisfying child a part of its own, the others pooled (module docstring)."""
        ok = self.satisfied(sizes, sa)
        if not ok.any():
            return None
        pooled = ~ok
        rest_size = float(sizes[pooled].sum())
        if rest_size > 0 and not self.satisfied(np.array([rest_size]), sa[pooled].sum(axis=0)[None, :])[0]:
            # join the smallest satisfying children until the remainder satisfies the models
            order = np.flatnonzero(ok)[np.argsort(sizes[ok], kind="stable")]
            joined_sizes = rest_size + np.cumsum(sizes[order])
            joined_sa = sa[pooled].sum(axis=0)[None, :] + np.cumsum(sa[order], axis=0)
            fits = np.flatnonzero(self.satisfied(joined_sizes, joined_sa))
            take = int(fits[0]) + 1 if len(fits) else len(order)
            merge_pooled = pooled.copy()
            merge_pooled[order[:take]] = True
            merged = None if merge_pooled.all() else self._parts(group, j, level, inverse, merge_pooled)
            cut = None
            if rest_size <= budget:  # or remove the remainder's rows
                cut = self._parts(group, j, level, inverse, pooled, remove=True)
            options = [option for option in (merged, cut) if option is not None]
            if not options:
                return None
            return max(options, key=lambda option: option.gain)
        return self._parts(group, j, level, inverse, pooled)

    def _parts(self, group: _Group, j: int, level: int, inverse: np.ndarray, pooled: np.ndarray,
               remove: bool = False) -> _Split:
        members = group.members
        parts = []
        finer = group.levels.copy()
        finer[j] = level - 1
        in_rest = pooled[inverse]
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(pooled) + 1))
        for key in np.flatnonzero(~pooled):
            parts.append(self.group(members[order[bounds[key]:bounds[key + 1]]], finer))
        rest = members[in_rest]
        removed = None
        cost = sum(part.cost for part in parts) if parts else np.zeros(self.m)
        if len(rest):
            remainder = self.group(rest, group.levels)
            if remove:
                removed = remainder
                cost = cost + remainder.size  # a removed row costs 1 in every column
            else:
                parts.append(remainder)
                cost = cost + remainder.cost
        # per part made: a split into many parts spends the rows later splits need (measured on
        # Adult: k = 100, 0.27 against 0.33 for the plain gain)
        return _Split(float(self.weights @ (group.cost - cost)) / max(len(parts), 1), parts, removed)

    def weigh(self, totals: np.ndarray) -> None:
        """Gains from now on weighted by the derivative of ARX's geometric mean at `totals` (per
        column, the cost of every row): a column already costly gains the mean less. With
        attribute weights w the mean is ARX's weighted one, whose derivative is w_j / (n + w_j T_j)."""
        self.weights = self.user_weights / (self.hist.n_rows + self.user_weights * totals)

    def _global_after(self, group: _Group, split: _Split, final: list, heap: list) -> bool:
        """Whether the global models (average risk, population uniqueness) hold on the release
        `group`'s split would leave if nothing else were split: the final groups, those waiting
        and the split's parts (a group waiting may stay whole, so each accepted split keeps the
        release valid)."""
        groups = final + [item[2] for item in heap] + list(split.parts)
        sizes = np.array([g.size for g in groups], dtype=np.int64)
        sa = np.array([self.sa[g.members].sum(axis=0) for g in groups], dtype=np.int64)
        return globally_satisfied(self.models, sizes, sa)

    # -- search ------------------------------------------------------------------------------
    def run(self, context: SolveContext = UNBOUNDED, start: list[_Group] | None = None,
            removed: list[_Group] | None = None) -> tuple[list[_Group], list[_Group]]:
        """The final groups and the groups removed, splitting from the root (one group at the top
        labels) or from `start` (valid groups) with `removed` already removed."""
        start = [self.group(np.arange(self.hist.n_classes), np.array(self.heights, dtype=np.int64))] \
            if start is None else start
        removed = list(removed or [])
        budget = self.budget - sum(group.size for group in removed)
        totals = sum((group.cost for group in start), np.zeros(self.m)) + sum(group.size for group in removed)
        self.weigh(totals)
        final = []
        heap: list = []
        counter = 0

        def push(group: _Group) -> None:
            nonlocal counter
            split = self.best_split(group, budget)
            if split is None or split.gain <= 0:
                final.append(group)
                return
            heapq.heappush(heap, (-split.gain, counter, group, split))
            counter += 1

        for group in start:
            push(group)
        while heap:
            _, _, group, split = heapq.heappop(heap)
            if split.removed is not None and split.removed.size > budget:
                push(group)  # the budget went to better splits since: decide again
                continue
            if context.expired():
                context.cut("mondrian specialization")
                final.append(group)
                final.extend(item[2] for item in heap)
                break
            if self.models.global_models and not self._global_after(group, split, final, heap):
                final.append(group)  # its split would break the whole release's condition
                continue
            if split.removed is not None:
                budget -= split.removed.size
                removed.append(split.removed)
                totals += split.removed.size
            totals += sum(part.cost for part in split.parts) - group.cost
            self.weigh(totals)
            for part in split.parts:
                push(part)
        return final, removed


def _nested(codes: np.ndarray) -> bool:
    """Whether each level's code (columns of a hierarchy's `codes`, values x levels) determines
    the next level's."""
    for h in range(codes.shape[1] - 1):
        low, high = codes[:, h].astype(np.int64), codes[:, h + 1].astype(np.int64)
        if len(np.unique(low * (int(high.max()) + 1) + high)) != len(np.unique(low)):
            return False
    return True


def hierarchical_solution(hist: Histogram, hierarchies, models, suppression_limit: float = 0.0,
                          context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """The Solution of the top-down recoding (module docstring): per group and column the label of
    its level; cells at a level with one label for the whole column are stars. `weights`: ARX's
    attribute weights per QI, in the loss it lowers and reports."""
    search = HierarchicalRecoding(hist, hierarchies, models, suppression_limit, weights)
    starts = []
    if not search.models.global_models:  # the rounds check each group, not the whole release

        def new_search() -> HierarchicalRecoding:
            return HierarchicalRecoding(hist, hierarchies, models, suppression_limit, weights)

        starts = [(_total_loss(hist, start, cut, weights), n, what, seeded, start, cut)
                  for n, (what, seeded, start, cut) in enumerate(subset_starts(new_search, context))]
    if not starts:
        final, removed = search.run(context)
        recoding = "hierarchy labels (top-down specialization)"
    else:
        # the start of lowest loss (the first among equals) is split further: splits rarely change
        # the order of the starts, and each costs a search per group. The splits from the root
        # are not run beside it: on the 8 harness cases measured (k = 2 to 100, l = 3, t = 0.2, CUP)
        # they lost more than the packing's start every time (e.g. Adult 9 QIs k = 2: 0.0253
        # against 0.0213, CUP k = 5: 0.0774 against 0.0681) and took the most time at small k
        _, _, what, search, start, cut = min(starts, key=lambda candidate: candidate[:2])
        final, removed = search.run(context, start, cut)
        recoding = f"hierarchy labels ({what}, then top-down)"
    return _labelled_solution(hist, hierarchies, search, final, removed, recoding, weights)


def _total_loss(hist: Histogram, final: list[_Group], removed: list[_Group], weights) -> float:
    columns = sum((group.cost for group in final), np.zeros(hist.m)) + sum(group.size for group in removed)
    return float(arx_loss(columns, hist.n_rows, weights))


def _labelled_solution(hist: Histogram, hierarchies, search: HierarchicalRecoding, final: list[_Group],
                       removed: list[_Group], recoding: str, weights, assignment=None) -> Solution:
    """`assignment`: (class, group, rows) arrays when a class's rows are in several groups (the
    simplex matching's); else each group holds its members' whole classes."""
    groups = final + removed
    group_of = np.empty(hist.n_classes, dtype=np.int64)
    for g, group in enumerate(groups):
        group_of[group.members] = g
    levels = np.array([group.levels for group in groups], dtype=np.int64).reshape(len(groups), hist.m)
    first = np.array([group.members[0] for group in groups], dtype=np.int64)
    group_rep = np.zeros((len(groups), hist.m), dtype=np.int64)
    masked = np.zeros((len(groups), hist.m), dtype=bool)
    labels = []
    for j, bound in enumerate(hierarchies):
        codes = search.ancestors[j][first, levels[:, j]]
        # one integer per (level, code), the values' own codes at level 0
        offsets = np.cumsum([0] + [int(bound.codes[:, h].max()) + 1 for h in range(bound.height + 1)])
        group_rep[:, j] = offsets[levels[:, j]] + codes
        whole = np.array([whole_domain(bound, h) for h in range(bound.height + 1)], dtype=bool)
        masked[:, j] = whole[levels[:, j]]
        shown = []
        for level, code in zip(levels[:, j].tolist(), codes.tolist()):
            shown.append(SHOW_VALUE if level == 0 else bound.labels[level][code])
        labels.append(shown)
        group_rep[:, j] = np.where(np.array([s == TOP for s in shown], dtype=bool), STAR, group_rep[:, j])
    parts = distribute_sa(hist, np.arange(hist.n_classes), group_of, hist.sizes) if assignment is None else \
        distribute_sa(hist, *assignment)
    dropped = np.zeros(len(groups), dtype=bool)
    dropped[len(final):] = True
    solution = Solution(*parts, group_rep=group_rep, method="mondrian", group_labels=labels, dropped=dropped,
                        masked=masked, group_levels=levels)
    solution.notes.update({
        "groups": len(final), "removed_rows": int(sum(group.size for group in removed)),
        "recoding": recoding, "metric": "loss", "metric_value": _total_loss(hist, final, removed, weights),
    })
    return solution
