"""A solution: which rows of each class go to which output group, and what each group shows.

Rows are identified only by (class, SA value) and a count: the solver never sees rows. A group's
published vector keeps column j where all its rows agree and stars it otherwise, so its real
stars are always recomputed from membership (a solver's intended pattern may star more).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from duckanon.solver.histogram import Histogram

STAR = -1  # code of a suppressed cell in a group representative
SHOW_VALUE = "\x00value"  # a group label meaning "publish the value itself" (a one-value range)


@dataclass
class Solution:
    """Parts: `count` rows of class `part_class` with SA code `part_sa` are published in group `part_group`."""

    part_class: np.ndarray
    part_sa: np.ndarray
    part_group: np.ndarray
    part_count: np.ndarray
    group_rep: np.ndarray  # (G, m) codes, STAR where the group is suppressed
    method: str = ""
    optimal: bool = False
    lower_bound: int | None = None
    notes: dict = field(default_factory=dict)
    # Generalization (lattice, mondrian): per QI column, the published label of each group (None:
    # the column shows the value itself; a label None publishes NULL), and the groups removed
    # entirely by record suppression (not published, reported).
    group_labels: list | None = None
    dropped: np.ndarray | None = None
    # Generalization: (G, m) cells published as a label that stands for every value of the
    # column (a hierarchy level with one label for the whole domain: '*****', 'Any', ...). They
    # are fully masked, so they count as stars (and their rows as suppressed rows) although the
    # label is published as it is.
    masked: np.ndarray | None = None
    # Generalization over hierarchies (lattice, gensup, mondrian with hierarchies): (G, m) the
    # hierarchy level of each group's label per column, for the loss on the hierarchy's domain.
    group_levels: np.ndarray | None = None
    # Population models (lattice): (G,) the population table's rows each group's labels match.
    group_population: np.ndarray | None = None

    @property
    def kept_groups(self) -> np.ndarray:
        return np.ones(len(self.group_rep), dtype=bool) if self.dropped is None else ~self.dropped

    @property
    def removed_rows(self) -> int:
        return 0 if self.dropped is None else int(self.group_sizes()[self.dropped].sum())

    @property
    def starred(self) -> np.ndarray:
        """(G, m): the cells that count as stars: '*' and fully masked labels (`masked`)."""
        starred = self.group_rep == STAR
        return starred if self.masked is None else starred | self.masked

    @property
    def group_stars(self) -> np.ndarray:
        return self.starred.sum(axis=1)

    @property
    def stars(self) -> int:
        stars = self.group_stars * self.kept_groups
        return int((self.part_count * stars[self.part_group]).sum())

    def weighted_stars(self, weights) -> float:
        """`stars` with each star counted at its column's weight (ARX's attribute weights; None:
        every column weighs 1)."""
        if weights is None:
            return float(self.stars)
        cost = star_cost(self.starred, weights) * self.kept_groups
        return float((self.part_count * cost[self.part_group]).sum())

    def cost(self, weights) -> int | float:
        """What the cell-suppression methods minimise: `stars`, or with `weights` (star_weights)
        the weighted stars."""
        return self.stars if weights is None else self.weighted_stars(weights)

    @property
    def whole_domain_cells(self) -> int:
        """Of `stars`, the cells published as a whole-domain label ('*****') rather than '*'."""
        if self.masked is None:
            return 0
        labelled = (self.masked & (self.group_rep != STAR)).sum(axis=1) * self.kept_groups
        return int((self.part_count * labelled[self.part_group]).sum())

    @property
    def suppressed_rows(self) -> int:
        starred = (self.group_stars > 0) & self.kept_groups
        return int(self.part_count[starred[self.part_group]].sum())

    def group_sizes(self) -> np.ndarray:
        return np.bincount(self.part_group, weights=self.part_count, minlength=len(self.group_rep)).astype(np.int64)

    def group_sa(self, n_sa: int) -> np.ndarray:
        out = np.zeros((len(self.group_rep), n_sa), dtype=np.int64)
        np.add.at(out, (self.part_group, self.part_sa), self.part_count)
        return out

    def published_keys(self) -> np.ndarray:
        """Per group, an id equal exactly for groups that publish the same QI vector (the same
        codes or stars, or the same label texts); removed and empty groups get ids of their own."""
        def column(j: int) -> np.ndarray:
            if self.group_labels is None or self.group_labels[j] is None:
                return self.group_rep[:, j]
            texts = [f"value {code}" if label == SHOW_VALUE else repr(label)  # (a shown value: its code)
                     for label, code in zip(self.group_labels[j], self.group_rep[:, j].tolist())]
            return np.unique(np.array(texts, dtype=object), return_inverse=True)[1].ravel()

        columns = [column(j) for j in range(self.group_rep.shape[1])]
        vectors = np.stack(columns, axis=1) if columns else np.zeros((len(self.group_rep), 0), dtype=np.int64)
        alone = ~(((self.group_sizes() > 0) & self.kept_groups))
        vectors = np.column_stack([vectors, np.where(alone, np.arange(len(vectors)), -1)])
        return np.unique(vectors, axis=0, return_inverse=True)[1].ravel()

    def coalesced(self) -> "Solution":
        """The same release with its groups merged into the classes it publishes (groups with the
        same published vector are one class to a reader): the same rows and cells; per class the
        first group's representation, labels and levels. Itself when every group is its own class."""
        keys = self.published_keys()
        n_classes = int(keys.max()) + 1 if len(keys) else 0
        if n_classes == len(self.group_rep):
            return self
        first = np.full(n_classes, len(keys), dtype=np.int64)
        np.minimum.at(first, keys, np.arange(len(keys)))
        order = np.argsort(first, kind="stable")  # classes in the order of their first group
        renumber = np.empty(n_classes, dtype=np.int64)
        renumber[order] = np.arange(n_classes)
        group_of = renumber[keys]
        chosen = first[order]

        def pick(array):
            return None if array is None else np.asarray(array)[chosen]

        population = None
        if self.group_population is not None:
            population = np.bincount(group_of, weights=self.group_population, minlength=n_classes).astype(np.int64)
        labels = None if self.group_labels is None else [
            None if column is None else [column[g] for g in chosen.tolist()] for column in self.group_labels]
        merged = Solution(self.part_class, self.part_sa, group_of[self.part_group], self.part_count,
                          self.group_rep[chosen], self.method, self.optimal, self.lower_bound, dict(self.notes),
                          labels, pick(self.dropped), pick(self.masked), pick(self.group_levels), population)
        return merged

    def published_classes(self) -> np.ndarray:
        """Sizes of the published equivalence classes (groups with equal published vectors merge)."""
        sizes = self.group_sizes()
        keep = (sizes > 0) & self.kept_groups
        if not keep.any():
            return np.zeros(0, dtype=np.int64)
        _, inverse = np.unique(self.group_rep[keep], axis=0, return_inverse=True)
        return np.bincount(inverse.ravel(), weights=sizes[keep]).astype(np.int64)


def star_weights(weights) -> np.ndarray | None:
    """The cost of one star per column for the cell-suppression methods: the user's attribute
    weights (`weights`, ARX's setAttributeWeight), or None when there are none or all are equal
    (a star then costs the same in every column, the fewest stars are the fewest weighted stars,
    and every method runs exactly as without weights)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if not len(w) or bool((w == w[0]).all()):
        return None
    return w


def star_cost(starred: np.ndarray, weights) -> np.ndarray:
    """Per row of `starred` ((..., m) booleans): its stars, or with `weights` their weights' sum."""
    if weights is None:
        return starred.sum(axis=-1)
    return np.asarray(starred, dtype=np.float64) @ np.asarray(weights, dtype=np.float64)


def group_representatives(codes: np.ndarray, part_class: np.ndarray, part_group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group and column: the common code, or STAR where members disagree (or it has none).
    Reduced over the parts sorted by group, one column at a time: numpy's unbuffered minimum.at
    took 10 ms per call on 20k parts, and a reduceat over rows of (parts x m) codes 9.2 s at
    1,000,000 x 50 where the columns' one-dimensional reduceats took 3.3 s (a loaded machine),
    with no parts x m copy."""
    representatives = np.full((n_groups, codes.shape[1]), STAR, dtype=np.int64)
    if not len(part_group):
        return representatives
    order = np.argsort(part_group, kind="stable")
    groups = part_group[order]
    members = part_class[order]
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    rows = groups[starts]
    for j in range(codes.shape[1]):
        column = codes[members, j]
        low = np.minimum.reduceat(column, starts)
        high = np.maximum.reduceat(column, starts)
        # widened before STAR goes in: a compact code type would wrap -1 (uint8: 255)
        representatives[rows, j] = np.where(low == high, low.astype(np.int64, copy=False), STAR)
    return representatives


def distribute_sa(hist: Histogram, cls: np.ndarray, group: np.ndarray, count: np.ndarray):
    """Turn class-level parts (class, group, count) into (class, sa, group, count) parts.

    For methods that decide only how many rows of a class go where (k-anonymity), the SA values of
    a split class are dealt out in SA order; the repair step then fixes any l/t violation.
    """
    order = np.lexsort((group, cls))
    cls, group, count = cls[order], group[order], count[order]
    out_c, out_s, out_g, out_n = [], [], [], []
    single = np.ones(len(cls), dtype=bool)
    if len(cls):
        same = cls[1:] == cls[:-1]
        single[1:] &= ~same
        single[:-1] &= ~same
    # Whole classes (one part): every SA cell goes along, vectorised.
    whole = np.flatnonzero(single)
    if len(whole):
        sa = hist.sa_counts[cls[whole]]
        rows, cols = np.nonzero(sa)
        out_c.append(cls[whole][rows])
        out_s.append(cols)
        out_g.append(group[whole][rows])
        out_n.append(sa[rows, cols])
    # Split classes: deal the SA cells in order.
    split = np.flatnonzero(~single)
    i = 0
    while i < len(split):
        j = i
        c = cls[split[i]]
        while j < len(split) and cls[split[j]] == c:
            j += 1
        remaining = hist.sa_counts[c].copy()
        s = 0
        for p in split[i:j]:
            need = int(count[p])
            while need:
                while remaining[s] == 0:
                    s += 1
                take = min(need, int(remaining[s]))
                out_c.append([c]); out_s.append([s]); out_g.append([group[p]]); out_n.append([take])
                remaining[s] -= take
                need -= take
        i = j
    if not out_c:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    return tuple(np.concatenate(a).astype(np.int64) for a in (out_c, out_s, out_g, out_n))


def take_rows(remaining: np.ndarray, classes, sa: int, count: int) -> list[tuple[int, int]]:
    """Take `count` rows with SA code `sa` from `classes` in order, out of `remaining` (C, S),
    which is decremented; returns (class, rows taken) pairs. Rows of one class with the same SA
    value are interchangeable, so any such rows serve."""
    taken = []
    for c in classes:
        if count == 0:
            break
        got = min(count, int(remaining[c, sa]))
        if got:
            taken.append((c, got))
            remaining[c, sa] -= got
            count -= got
    return taken


def build_solution(hist: Histogram, part_class, part_sa, part_group, part_count, method: str) -> Solution:
    """Renumber groups densely and compute their representatives."""
    keep = part_count > 0
    part_class, part_sa, part_group, part_count = (a[keep] for a in (part_class, part_sa, part_group, part_count))
    used, part_group = np.unique(part_group, return_inverse=True)
    part_group = part_group.ravel()
    rep = group_representatives(hist.compact_codes, part_class, part_group, len(used))
    return Solution(part_class, part_sa, part_group, part_count, rep, method=method)


def solution_from_class_groups(hist: Histogram, cls, group, count, method: str) -> Solution:
    parts = distribute_sa(hist, np.asarray(cls, np.int64), np.asarray(group, np.int64), np.asarray(count, np.int64))
    return build_solution(hist, *parts, method=method)


def identity_solution(hist: Histogram, method: str) -> Solution:
    """Every class its own group: zero stars."""
    c = np.arange(hist.n_classes)
    return solution_from_class_groups(hist, c, c, hist.sizes, method)
