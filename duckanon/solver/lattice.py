"""`method = 'lattice'`: optimal full-domain generalization with a record-suppression limit.

A node of the lattice is a level vector (one hierarchy level per QI). Publishing at a node maps
every value to its ancestor at that level; classes then merge. Classes that still violate the
models may be removed ("suppressed" records, as in ARX) if they hold at most `suppression_limit`
of the rows; otherwise the node is not a solution. The search returns the solution node with the
smallest `metric`, and proves it optimal.

How a node is evaluated: from the one class histogram, never by SQL. Each QI's level codes are
precomputed per value (hierarchy.BoundHierarchy.codes). Consecutive QIs form blocks; per block and
level combination every class gets a dense id once (cached), so a node's key per class combines a
few block ids, and its key space (the product of the blocks' distinct values) is usually small
enough to count classes with bincount instead of sorting. With k-anonymity alone a node is decided
by its suppressed-row count, computed from the weighted class counts only (no SA counts, no
regrouping); the full grouping is built for solutions whose metric needs it and for the result.

Removed rows cost what ARX charges for them (its metrics of the same names, gsFactor 0.5; the
loss with another gsFactor charges s x (1 - cost) per removed cell, lattice_metrics.LossMetric):
  * entropy: ARX's default non-uniform entropy (Metric.createEntropyMetric(), the non-monotonic
    variant): the precomputed entropy of the levels over every row, plus, per column, the
    entropy of the removed rows' generalized values within the removed set,
    sum_v c_v * log2(S / c_v) (S removed rows, c_v of them with value v at the node's level);
    removing every row costs exactly as much as publishing the top label everywhere;
  * loss, precision: 1 per removed cell (the most a cell can cost); stars: 1 per removed cell;
  * discernibility: |T| per removed row (ARX's DM); aecs: |T| / (published classes + 1 when
    rows are removed), the removed rows counting as one class (groups of population rows alone
    publish nothing and are no class).
  A node that removes every row is never chosen while some node publishes rows; when none does,
  the search fails with "would publish no rows".

With a population table, its classes that no sample row reaches join the histogram without rows.
Delta-presence with dmin > 0 gives them presence 0: a node with one fails, with every finer node
(it splits into such classes), unless a model sets a minimal class size (ARX's HashGroupify:
the class fails that first and counts as suppressed; models.rejects_unreached).

Attribute weights (the statement's `weights`, ARX's setAttributeWeight): divided by the largest,
as ARX's AbstractMetricMultiDimensional does, they weigh each column's total in the metric's
aggregate, as ARX's aggregate functions do: loss is prod(1 + w_j loss_j) ^ (1 / m) - 1
(ILMultiDimensionalGeometricMean), entropy (ILMultiDimensionalSum) and precision
(ILMultiDimensionalArithmeticMean, here without its constant 1 / m) sum w_j x column j, and so does
stars. Discernibility and aecs are ARX's single-dimensional metrics: weights do not apply. Every
aggregate stays non-decreasing in each column, so the bounds and floors below stay lower bounds.

Search (branch and bound over the lattice, with Flash-style predictive tagging):
  * Monotonicity. With no suppression, if a node satisfies the models so does every coarser
    node (its classes are unions of satisfying classes, and all our models are closed under
    merging), and if a node fails so does every finer node. k-anonymity keeps this with a
    suppression limit too (coarser classes only grow). Failing nodes tag everything below them;
    with no suppression limit, satisfying nodes tag everything above them (every metric is
    monotone in generalization when nothing is removed). With a limit a metric is not monotone
    (a coarser node removes fewer rows, which can cost less), so a solution tags only itself.
  * Removed rows at finer nodes. For the other models (l-diversity, t-closeness) a node's
    violating classes split at finer nodes, and the parts that satisfy the models form a
    sub-multiset of the class that satisfies them (all are closed under merging). Each model
    bounds how many rows such a sub-multiset can hold (`kept_rows_bound`: 0 below l distinct
    values, the t-close share of the SA counts, ...), so a node whose classes must lose more
    rows than the limit fails with every finer node.
  * Bounds. Every metric is at least its value on the node computed as if nothing were removed
    (ARX's lower bound): each charge above is >= 0 on top of it (a removed cell's 1 is at least
    its cost at any level, the removed rows' entropy is >= 0, |T| >= a class size). For the
    separable metrics (entropy, loss, precision, stars) that bound needs no grouping at all; for
    discernibility and aecs it is 0. With k-anonymity alone the rows a node removes are removed
    at every finer node too, at finer levels, so the charge a solution pays is a floor added to
    the bound of every finer node; for the other models the rows every finer node must remove
    (above) are priced the same way for the metrics charged by the cell. Nodes are decided
    coarsest first; the search stops when no undecided node's bound (plus floor) is below the
    best solution found: that one is optimal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram, group_keys
from duckanon.solver.lattice_heuristic import SEARCH_STEPS, HeuristicSearch
from duckanon.solver.lattice_metrics import METRICS, arx_weights, metric_of
from duckanon.solver.models import all_satisfied, globally_satisfied, rejects_unreached
from duckanon.solver.request import Request


def fewest_removed(count: int, holds) -> int:
    """How many of `count` classes (smallest first) to remove so that `holds(removed)`: a binary
    search, as ARX's RiskBasedCriterion.enforce, which assumes removing more never breaks what
    removing fewer achieved; where it does, the counts up from where it lands are tried. Removing
    all of them publishes nothing, which holds."""
    if holds(0):
        return 0
    low, high = 1, count
    while low < high:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid + 1
    while low < count and not holds(low):
        low += 1
    return low


@dataclass
class NodeResult:
    levels: tuple[int, ...]
    sa_counts: np.ndarray  # (G, S)
    member_of: np.ndarray  # original class -> rolled-up class
    ok: np.ndarray  # (G,) class satisfies the models
    suppressed_rows: int
    value: float | None = None  # metric value when the node is a solution
    population: np.ndarray | None = None  # (G,) population rows matching each group (population models)
    # groups of population rows that no sample row reaches, and their people, when they fail a
    # population model that nothing suppresses (models.rejects_unreached): the node is no solution
    unreached: int = 0
    unreached_rows: int = 0


def with_population(hist: Histogram, population, request) -> tuple[Histogram, np.ndarray | None]:
    """The histogram with the population's vectors the sample lacks appended as classes without
    rows, and per class (the sample's first, in order) the population rows with its vector."""
    if population is None:
        if request.needs_population:
            raise AnonymizeError("the population models need the population table's classes")
        return hist, None
    codes = np.asarray(population[0], dtype=np.int64).reshape(-1, hist.m)
    rows = np.asarray(population[1], dtype=np.int64)
    ids = group_keys(np.vstack([hist.codes, codes]))  # equal vectors, equal ids
    sample_ids, population_ids = ids[:hist.n_classes], ids[hist.n_classes:]
    class_of_id = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
    class_of_id[sample_ids] = np.arange(hist.n_classes)
    missing = np.unique(population_ids[class_of_id[population_ids] < 0])
    class_of_id[missing] = hist.n_classes + np.arange(len(missing))
    first = np.zeros(len(missing), dtype=np.int64)  # a population vector of each missing id
    at = class_of_id[population_ids] - hist.n_classes
    first[at[at >= 0]] = np.flatnonzero(at >= 0)
    extended = Histogram(np.vstack([hist.codes, codes[first]]),
                         np.vstack([hist.sa_counts, np.zeros((len(missing), hist.sa_counts.shape[1]), np.int64)]),
                         hist.columns)
    counts = np.bincount(class_of_id[population_ids], weights=rows, minlength=extended.n_classes).astype(np.int64)
    return extended, counts

# A lattice of more nodes than this is searched by the heuristic (lattice_heuristic.py), within a
# bound on node evaluations: the exhaustive search keeps a few numbers per node and per node and
# column, and decides nodes one by one. (ARX's heuristicSearchThreshold has the same default.)
EXHAUSTIVE_NODES = 100_000


@dataclass
class LatticeResult:
    node: NodeResult
    metric: str
    value: float
    optimal: bool
    evaluated: int
    nodes: int
    notes: dict = field(default_factory=dict)


def _compact(codes: np.ndarray, count: int) -> np.ndarray:
    """`codes` (0 .. count - 1) contiguous, in the smallest unsigned type that holds them."""
    kind = np.min_scalar_type(max(count - 1, 0))
    return np.ascontiguousarray(codes, dtype=kind if kind.kind == "u" else np.int64)


class _ClassCodes:
    """`rolled[j][h]` of a Lattice: every class's code of one column at level h, computed when
    first read and kept in the smallest integer type that holds the level's codes (a wide table's
    classes x columns x levels in int64 would not fit); `class_values`, the classes' value codes
    of the column, contiguous (gathers from a column of the class matrix stride a whole row)."""

    def __init__(self, level_codes: np.ndarray, class_values: np.ndarray, cardinality: list[int]):
        self.level_codes, self.class_values, self.cardinality = level_codes, class_values, cardinality
        self.levels: dict[int, np.ndarray] = {}

    def __getitem__(self, h: int) -> np.ndarray:
        codes = self.levels.get(h)
        if codes is None:
            codes = self.levels[h] = _compact(self.level_codes[self.class_values, h], self.cardinality[h])
        return codes


class Lattice:
    """The level lattice of the QIs of `hist`, with precomputed per-column level codes.

    `level_codes[j]` is (n_values_j, H_j + 1): the code of value-code v of column j at level h.
    `leaves[j]` is per level the number of distinct values each generalized code covers.
    """

    def __init__(self, hist: Histogram, level_codes: list[np.ndarray], models, suppression_limit: float = 0.0,
                 metric: str = "entropy", cell_suppression_after: bool = False, domains: list | None = None,
                 population: tuple[np.ndarray, np.ndarray] | None = None, weights=None, gs_factor: float = 0.5):
        """`cell_suppression_after` (gensup): the violating rows are not removed but cell-suppressed
        afterwards, so entropy does not charge them and a node whose classes all violate is
        allowed (at limit 1.0 the bottom node is cell suppression alone). `domains`: per column
        the hierarchy's leaves and the leaves under each code per level (hierarchy_domains), for
        the loss; None: a column's domain is its values. `population`: the population table's
        distinct QI vectors (codes in the columns' value codes, which the level codes cover)
        and their rows, for the population models: they join the classes as classes without
        sample rows, so a node's groups count the population rows their labels match.
        `weights`: ARX's attribute weights per QI (None: all 1), normalised as ARX normalises them
        (arx_weights) and applied by the metric's aggregate; discernibility and aecs are
        single-dimensional in ARX and ignore them. `gs_factor`: the loss's generalization/suppression
        factor (ARX's gsFactor, lattice_metrics.LossMetric; 0.5 for every other metric)."""
        if metric not in METRICS:
            raise AnonymizeError(f"unknown metric '{metric}' (known: {', '.join(METRICS)})")
        request = Request.of(models)
        self.n_sample_classes = hist.n_classes
        hist, self.population = with_population(hist, population, request)
        self.rejects_unreached = self.population is not None and rejects_unreached(request)
        self.hist = hist
        self.level_codes = [np.asarray(c, dtype=np.int64) for c in level_codes]
        self.heights = [c.shape[1] - 1 for c in self.level_codes]
        self.models = request
        self.metric = metric
        self.measure = metric_of(metric, gs_factor)
        self.weights = arx_weights(weights) if self.measure.separable else None
        self.cell_suppression_after = cell_suppression_after
        self.domains = domains if domains is not None else [None] * len(self.level_codes)
        self.sizes = hist.sizes
        self.n = hist.n_rows
        self.m = hist.m
        self.set_suppression_limit(suppression_limit)
        # per column, per level: rows per generalized code (for entropy), leaves per code (loss)
        self.value_rows = [np.bincount(hist.codes[:, j], weights=self.sizes, minlength=len(c)).astype(np.float64)
                           for j, c in enumerate(self.level_codes)]
        self.cache: dict[tuple[int, ...], NodeResult] = {}
        # per column and level: every class's code at that level (when first read), and the number of codes
        self.cardinality = [[int(c[:, h].max()) + 1 if len(c) else 1 for h in range(c.shape[1])] for c in self.level_codes]
        self.rolled = [_ClassCodes(c, _compact(hist.codes[:, j], len(c)), self.cardinality[j])
                       for j, c in enumerate(self.level_codes)]
        self.row_cost = [self._row_costs(j) for j in range(self.m)]
        self.level_cost = [np.ascontiguousarray(costs.T) for costs in self.row_cost]  # [j][h]: per value
        self._class_costs: dict[tuple[int, int], np.ndarray] = {}
        self._level_rows: dict[tuple[int, int], np.ndarray] = {}
        self.column_total = [(self.value_rows[j][:, None] * self.row_cost[j]).sum(axis=0) for j in range(self.m)]
        # k-anonymity alone: a node is decided by its suppressed-row count, no SA counts needed
        self.k_only = request.k_only
        self.global_models = request.global_models
        self.monotone_with_generalization = request.monotone_with_generalization
        self.k = request.k
        self.float_sizes = np.asarray(self.sizes, dtype=np.float64)  # weights for bincount
        self.dense_limit = max(16 * hist.n_classes, 1 << 16)  # key spaces counted with bincount
        self.blocks = self._make_blocks()
        self.block_cache: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, int]] = {}
        self._last_groups: tuple = (None, None)
        # the nonzero SA counts as (class, SA code, rows): a node's group SA counts are one
        # bincount over them (a strided column at a time is ten times slower)
        sa = hist.sa_counts
        self.sa_width = sa.shape[1]
        self.sa_class, self.sa_code = np.nonzero(sa)
        self.sa_rows = sa[self.sa_class, self.sa_code].astype(np.float64)

    def set_suppression_limit(self, suppression_limit: float) -> None:
        """The share of rows a solution may remove, for the next search (the precomputation and
        the cached groupings do not depend on it, so one lattice serves several limits)."""
        self.limit_rows = int(np.floor(suppression_limit * self.n + 1e-9))
        self.monotone_with_suppression = self.models.monotone_with_generalization and (
            self.models.monotone_with_suppression or self.limit_rows == 0)

    # -- keys ----------------------------------------------------------------------------------
    BLOCK_COMBINATIONS = 64  # level combinations of one block of columns (its cached code arrays)
    BLOCK_MEMORY = 1 << 24  # cached block code elements (int64) at most

    def _make_blocks(self) -> list[tuple[int, ...]]:
        """Consecutive columns grouped into blocks. A block's classes at a level combination get
        dense ids once (cached), so a node's key combines a few block ids instead of every column,
        and its key space is the product of the blocks' distinct values, not of the radices."""
        n = max(self.hist.n_classes, 1)
        cap = self.BLOCK_COMBINATIONS
        while True:
            blocks, current, combos = [], [], 1
            for j, h in enumerate(self.heights):
                if current and combos * (h + 1) > cap:
                    blocks.append(tuple(current))
                    current, combos = [], 1
                current.append(j)
                combos *= h + 1
            if current:
                blocks.append(tuple(current))
            total = sum(int(np.prod([self.heights[j] + 1 for j in b])) for b in blocks if len(b) > 1)
            if total * n <= self.BLOCK_MEMORY or cap <= 1:
                return blocks
            cap //= 2

    def _densify(self, key: np.ndarray, space: int) -> tuple[np.ndarray, int]:
        if space <= self.dense_limit:
            present = np.bincount(key, minlength=space) > 0
            dense = np.cumsum(present) - 1
            return dense[key], int(dense[-1]) + 1 if space else 0
        ids = np.unique(key, return_inverse=True)[1].ravel().astype(np.int64)
        return ids, int(ids.max()) + 1 if len(ids) else 0

    def _block_ids(self, block: tuple[int, ...], levels: tuple[int, ...]) -> tuple[np.ndarray, int]:
        """Per class: a dense id of its values at `levels` in the block's columns, and how many."""
        if len(block) == 1:
            j, h = block[0], levels[0]
            return self.rolled[j][h], self.cardinality[j][h]
        cached = self.block_cache.get((block[0], levels))
        if cached is None:
            key = np.zeros(self.hist.n_classes, dtype=np.int64)
            space = 1
            for j, h in zip(block, levels):
                key = key * self.cardinality[j][h] + self.rolled[j][h]
                space *= self.cardinality[j][h]
            cached = self._densify(key, space)
            self.block_cache[(block[0], levels)] = cached
        return cached

    def _keys(self, levels, rows: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Per class (or per class of `rows`) its class id at `levels` (equal exactly when the
        generalized rows are), and the size of the id space."""
        key, space = None, 1
        for block in self.blocks:
            if all(self.cardinality[j][levels[j]] == 1 for j in block):
                continue  # one label for everything: no part of the key
            ids, count = self._block_ids(block, tuple(levels[j] for j in block))
            if rows is not None:
                ids = ids[rows]
            if key is None:
                key, space = ids.astype(np.int64), count
                continue
            if space * count >= 1 << 62:
                key, space = self._densify(key, space)
                if space == len(key):  # every class apart already: the other columns split nothing
                    return key, space
            key *= count
            key += ids
            space *= count
        if key is None:
            return np.zeros(self.hist.n_classes if rows is None else len(rows), dtype=np.int64), 1
        return key, space

    def _group_rows(self, levels) -> tuple[np.ndarray, np.ndarray]:
        """Per class its group id at `levels`, and the rows per group id (the last node's kept:
        a solution's removed classes are asked for right after its count)."""
        levels = tuple(levels)
        if self._last_groups[0] == levels:
            return self._last_groups[1]
        key, space = self._keys(levels)
        if space > self.dense_limit:
            key, space = self._densify(key, space)
        groups = key, np.bincount(key, weights=self.float_sizes, minlength=space)
        self._last_groups = (levels, groups)
        return groups

    def removed_classes(self, levels) -> np.ndarray:
        """k-anonymity alone: per class whether it is in a class of fewer than k rows at `levels`."""
        if self.k <= 1 or not self.hist.n_classes:
            return np.zeros(self.hist.n_classes, dtype=bool)
        key, counts = self._group_rows(levels)
        return counts[key] < self.k

    def suppressed_rows(self, levels) -> int:
        """k-anonymity alone: the rows in classes of fewer than k rows at `levels` (summed over
        the group ids when there are fewer ids than classes: an id no class has counts 0)."""
        if self.k <= 1 or not self.hist.n_classes:
            return 0
        key, counts = self._group_rows(levels)
        if len(counts) <= len(key):
            return int(counts[counts < self.k].sum())
        return int(self.sizes[counts[key] < self.k].sum())

    # -- metrics -------------------------------------------------------------------------------
    def aggregate(self, columns: np.ndarray) -> np.ndarray | float:
        """The metric from per-column totals (last axis), with the attribute weights. Every
        aggregate is non-decreasing in each column (the weights are positive), so a bound or a
        floor on the columns bounds the metric."""
        return self.measure.aggregate(columns, self.n, self.weights)

    def _row_costs(self, j: int) -> np.ndarray:
        """(n_values, H+1): what one row with value v of column j costs when published at level h."""
        codes = self.level_codes[j]
        out = np.zeros(codes.shape, dtype=np.float64)
        for h in range(codes.shape[1]):
            out[:, h] = self.measure.level_costs(codes, self.value_rows[j], h, self.domains[j])
        return out

    CLASS_COSTS = 1 << 24  # per-class costs kept (8 bytes each), a column and level's array at a time

    def class_costs(self, j: int, h: int, which: np.ndarray | None = None) -> np.ndarray:
        """Per class (of `which`), what one of its cells in column j costs at level h: the array of
        every class is kept while CLASS_COSTS allows; a few classes, or any once it is spent, are
        looked up directly."""
        costs = self._class_costs.get((j, h))
        if costs is None and which is not None and (
                8 * len(which) < self.hist.n_classes or (len(self._class_costs) + 1) * self.hist.n_classes > self.CLASS_COSTS):
            return self.level_cost[j][h][self.rolled[j].class_values[which]]
        if costs is None:
            costs = self._class_costs[(j, h)] = self.row_cost[j][self.hist.codes[:, j], h]
        return costs if which is None else costs[which]

    def column_totals(self, levels) -> np.ndarray:
        """Per column, what its cells cost at `levels` with nothing removed."""
        return np.array([self.column_total[j][h] for j, h in enumerate(levels)], dtype=np.float64)

    def bound(self, levels) -> float:
        """The metric with nothing removed; never above the real value (a removed row costs the
        top level, the most any level costs). Separable: no grouping needed."""
        if self.measure.separable:
            return float(self.aggregate(self.column_totals(levels)))
        return 0.0

    def removal_charge(self, levels, removed: np.ndarray, complement: bool = False) -> np.ndarray:
        """Per column, what the rows of the classes flagged in `removed` (per original class) cost
        on top of the column's total at `levels` for a separable metric (module docstring: ARX's
        charges). `complement`: from the classes kept when they are fewer (the same up to
        rounding; the heuristic search's shortcut, never the exhaustive search's)."""
        which = np.flatnonzero(removed)
        if not len(which):
            return np.zeros(len(levels))
        if complement and 2 * len(which) > len(removed):
            kept = np.flatnonzero(~removed)
            removed_rows = float(self.float_sizes[which].sum())
            return self.measure.removal_charge_kept(self, levels, kept, self.float_sizes[kept], removed_rows)
        return self.measure.removal_charge(self, levels, which, self.float_sizes[which])

    def node_value(self, levels, removed: np.ndarray, complement: bool = False) -> float:
        """A separable metric at `levels` with the classes flagged in `removed` removed."""
        return float(self.aggregate(self.column_totals(levels) + self.removal_charge(levels, removed, complement)))

    def level_rows(self, j: int, h: int) -> np.ndarray:
        """Rows per code of column j at level h (cached)."""
        rows = self._level_rows.get((j, h))
        if rows is None:
            codes = self.level_codes[j][:, h]
            rows = self._level_rows[(j, h)] = np.bincount(codes, weights=self.value_rows[j], minlength=self.cardinality[j][h])
        return rows

    def value(self, node: NodeResult) -> float:
        """The metric of publishing at `node` with its violating classes removed (ARX's charges
        for removed rows: see the module docstring)."""
        return self.measure.value(self, node)

    # -- nodes ---------------------------------------------------------------------------------
    def evaluate(self, levels: tuple[int, ...]) -> NodeResult:
        """Classes at `levels`, rolled up from the histogram: each class's key is a mixed-radix
        number over the blocks' dense ids (see `_keys`); when the key space is small (the usual
        case) classes are numbered with bincount, without sorting. Groups are in the order of the
        columns' level codes, lexicographically."""
        if levels in self.cache:
            return self.cache[levels]
        key, space = self._keys(levels)
        member_of, n_groups = self._densify(key, space)
        width = self.sa_width
        group_sa = np.bincount(member_of[self.sa_class] * width + self.sa_code, weights=self.sa_rows,
                               minlength=n_groups * width).reshape(n_groups, width).astype(np.int64)
        sizes = group_sa.sum(axis=1)
        group_population = None if self.population is None else \
            np.bincount(member_of, weights=self.population, minlength=n_groups).astype(np.int64)
        ok = all_satisfied(self.models, sizes, group_sa, group_population) | (sizes == 0)
        if self.global_models:
            ok = self._enforce_global(sizes, group_sa, ok)
        node = NodeResult(levels, group_sa, member_of, ok, int(group_sa[~ok].sum()))
        if self.rejects_unreached:
            unreached = (sizes == 0) & (group_population > 0)
            node.unreached, node.unreached_rows = int(unreached.sum()), int(group_population[unreached].sum())
        if len(self.cache) > 64:
            self.cache.clear()
        self.cache[levels] = node
        return node

    def _enforce_global(self, sizes: np.ndarray, group_sa: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """`ok` with the smallest satisfying groups removed, fewest first, until the global models
        hold on what is published (as ARX's RiskBasedCriterion.enforce: classes by size and a
        binary search for how many to remove, which assumes removing more never breaks what
        removing fewer achieved; where it does, the next counts up are tried, which finds nodes
        ARX's search misses). Classes of equal size are taken in group order, where ARX takes the
        least generalized first: the same node then removes other rows of the same count, and
        the loss can differ (benchmarks/results/arx_risk_models.md). Models that read only the
        published classes' sizes are asked about the size profile (`_profile_holds`): the same
        answers, each profile's computed once a search."""
        kept = np.flatnonzero(ok & (sizes > 0))
        order = kept[np.argsort(sizes[kept], kind="stable")]

        def holds(removed: int) -> bool:
            rest = order[removed:]
            return globally_satisfied(self.global_models, sizes[rest], group_sa[rest])

        if all(hasattr(model, "holds_profile") for model in self.global_models):
            holds = self._profile_holds(sizes[order])

        low = fewest_removed(len(order), holds)
        if low == 0:
            return ok
        ok = ok.copy()
        ok[order[:low]] = False
        return ok

    def _profile_holds(self, ordered: np.ndarray):
        """`holds(removed)` of `_enforce_global` for global models that read only the published
        classes' sizes (`holds_profile`: PopulationUniqueness), from the class-size profile: with
        the classes in ascending size (`ordered`), removing the first `removed` leaves every
        distinct size from the one at position `removed` on, that one with fewer classes. The
        answers are kept for the whole search by profile (nodes and removal counts that publish
        the same multiset of sizes ask the same question)."""
        ends = np.append(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, len(ordered)) if len(ordered) \
            else np.zeros(0, dtype=np.int64)  # where each run of equal sizes ends
        distinct = ordered[ends - 1]
        counts = np.diff(ends, prepend=0)
        answers = self.__dict__.setdefault("_profile_answers", {})
        models = self.global_models

        def holds(removed: int) -> bool:
            if removed >= len(ordered):
                sizes_left, counts_left = distinct[:0], counts[:0]
            else:
                at = int(ends.searchsorted(removed, side="right"))  # the size block holding `removed`
                sizes_left, counts_left = distinct[at:], counts[at:].copy()
                counts_left[0] = ends[at] - removed
            key = sizes_left.tobytes() + b"|" + counts_left.tobytes()
            answer = answers.get(key)
            if answer is None:
                if len(answers) >= 20000:  # (a profile's key is 16 bytes a distinct size)
                    answers.clear()
                answer = answers[key] = all(model.holds_profile(sizes_left, counts_left) for model in models)
            return answer

        return holds

    def node_at(self, levels) -> NodeResult | None:
        """The node at `levels` (REFRESH's stable mode) when it is a valid publication: levels
        within the hierarchies, the rows it removes within the limit, some rows published."""
        levels = tuple(int(level) for level in levels)
        if len(levels) != self.m or any(not 0 <= h <= height for h, height in zip(levels, self.heights)):
            return None
        node = self.evaluate(levels)
        if node.unreached or node.suppressed_rows > self.limit_rows or (node.suppressed_rows >= self.n > 0):
            return None
        return node

    def result_at(self, node: NodeResult) -> LatticeResult:
        """`node` as the search's result, valued by the metric, not claimed optimal."""
        if self.measure.separable:
            removed = ~node.ok[node.member_of]
            value = self.node_value(node.levels, removed)
        else:
            value = self.value(node)
        node = self.sample_node(node)
        node.value = value
        return LatticeResult(node, self.metric, value, False, 1, self.size)

    def sample_node(self, node: NodeResult) -> NodeResult:
        """`node` over the sample's classes alone: the groups made only of population rows
        dropped, the others renumbered in order."""
        if self.population is None:
            return node
        member_of = node.member_of[:self.n_sample_classes]
        present = np.zeros(len(node.ok), dtype=bool)
        present[member_of] = True
        renumber = np.cumsum(present) - 1
        result = NodeResult(node.levels, node.sa_counts[present], renumber[member_of], node.ok[present],
                            node.suppressed_rows, node.value, unreached=node.unreached,
                            unreached_rows=node.unreached_rows)
        result.population = np.bincount(node.member_of, weights=self.population,
                                        minlength=len(node.ok)).astype(np.int64)[present]
        return result

    def removed_floor(self, node: NodeResult) -> int:
        """Rows removed at `node` and at every finer node, at least: at a finer node each group
        of `node` splits into parts, and the parts kept form a sub-multiset of the group that
        satisfies every model (all are closed under merging), so each group loses at least its
        size minus the models' `kept_rows_bound`. ARX prunes models that are not monotone with
        suppression by their minimal group size alone; this is the same bound for every model."""
        return int(self._lost_rows(node)[1].sum())

    def _lost_rows(self, node: NodeResult) -> tuple[np.ndarray, np.ndarray]:
        """The violating groups of `node` and the rows each loses at every finer node, at least
        (a satisfying group is its own satisfying part: it need lose none; a part needs the
        request's minimal group size)."""
        violating = np.flatnonzero(~node.ok)
        counts = node.sa_counts[violating]
        sizes = counts.sum(axis=1)
        kept = sizes
        for model in self.models:
            kept = np.minimum(kept, model.kept_rows_bound(sizes, counts))
        kept = np.where(kept >= self.models.min_group_size, kept, 0)  # a part smaller is no satisfying part
        return violating, sizes - kept

    def charge_floor(self, node: NodeResult) -> np.ndarray:
        """Per column, what the rows removed at any finer node cost, at least, for a metric that
        charges a removed row its cells' 1 - cost: each group of `node` loses at least its size
        minus the kept-rows bound there (removed_floor), and a row's cells cost no more at finer
        levels, so each such row is charged at least what a row of its group is charged at
        `node`, column by column."""
        violating, lost = self._lost_rows(node)
        if not lost.any():
            return np.zeros(self.m)
        member = np.empty(len(node.ok), dtype=np.int64)
        member[node.member_of] = np.arange(len(node.member_of))  # a class of each group
        # a group's classes share their codes at its levels
        return self.measure.suppression_factor * np.array(
            [float((lost * (1.0 - self.class_costs(j, h, member[violating]))).sum()) for j, h in enumerate(node.levels)])

    # -- search --------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The lattice's nodes (a Python integer: 4^200 does not fit a machine word)."""
        return math.prod(h + 1 for h in self.heights)

    def search(self, context: SolveContext = UNBOUNDED, exhaustive_nodes: int = EXHAUSTIVE_NODES,
               steps: int = SEARCH_STEPS) -> LatticeResult:
        """The best node (module docstring); at the context's deadline the best found so far,
        optimal only if no undecided node could beat it. Reports the nodes decided. A lattice of
        more than `exhaustive_nodes` nodes is searched by the heuristic (lattice_heuristic.py),
        within `steps` node evaluations."""
        if self.size > exhaustive_nodes:
            return self._heuristic_search(context, exhaustive_nodes, steps)
        run = _LatticeSearch(self, context)
        run.find_first_solutions()
        optimal = run.close_the_gap()
        self._refuse_none_found(run.best, run.empty)
        best = self.sample_node(self.evaluate(run.best))
        best.value = run.best_value
        return LatticeResult(best, self.metric, run.best_value, optimal, run.evaluated, len(run.nodes),
                             notes={"search": "exhaustive"})

    def _heuristic_search(self, context: SolveContext, exhaustive_nodes: int, steps: int) -> LatticeResult:
        run = HeuristicSearch(self, context, steps)
        run.run()
        self._refuse_none_found(run.best, run.empty)
        result = self.result_at(self.evaluate(run.best))  # its value as the exhaustive search computes it
        result.optimal, result.evaluated = run.complete, run.evaluated
        result.notes = {"search": "heuristic", "search_reason": f"the lattice has {self.size:.4g} nodes, more than the "
                 f"{exhaustive_nodes:,} an exhaustive search visits", "evaluation_bound": run.steps}
        if run.stopped:
            result.notes["time_limit"] = "reached: the best node found so far"
        return result

    def _refuse_none_found(self, best, empty) -> None:
        if best is None and empty is not None:
            raise AnonymizeError(
                f"method 'lattice' would publish no rows: every generalization that satisfies the request within "
                f"the suppression limit removes all {self.n} rows (give each QI a hierarchy whose top level is one "
                f"label, so the whole table can be one class)")
        if best is None:
            raise AnonymizeError("no generalization satisfies the request within the suppression limit")


class _LatticeSearch:
    """One run of Lattice.search (module docstring, "Search"): per node of the lattice, every
    level vector in product order, its bound with nothing removed, its status (+1 solution or no
    better, -1 fails, 0 undecided), the floor of what removed rows cost there and its value once
    valued in full; and the best solution found so far."""

    def __init__(self, lattice: Lattice, context: SolveContext):
        self.lattice, self.context = lattice, context
        m = lattice.m
        radices = [h + 1 for h in lattice.heights]  # every level vector, in product order
        nodes = np.stack(np.unravel_index(np.arange(int(np.prod(radices))), radices), axis=1).astype(np.int64) \
            if m else np.zeros((1, 0), dtype=np.int64)
        self.nodes = nodes
        self.heights = np.array(lattice.heights)
        columns = np.zeros((len(nodes), m))  # per node and column: the cells' cost with nothing removed
        if lattice.measure.separable:
            for j in range(m):
                columns[:, j] = lattice.column_total[j][nodes[:, j]]
        self.columns = columns
        self.bounds = lattice.aggregate(columns) if lattice.measure.separable else np.zeros(len(nodes))
        self.status = np.zeros(len(nodes), dtype=np.int8)  # +1 solution / no better, -1 fails
        self.strides = np.cumprod([1] + [h + 1 for h in lattice.heights[::-1]])[:-1][::-1]  # product order
        self.best, self.best_value, self.evaluated, self.empty = None, np.inf, 0, None
        # then a coarser node is never better (a monotonic metric: whatever is removed)
        self.monotone_metric = lattice.limit_rows == 0 or lattice.measure.monotone
        # When removed rows stay removed at finer nodes (monotone models), what a node's removed
        # rows cost is a floor for every finer node: they are removed there too, at finer levels,
        # and each metric's charge grows with the rows removed and with finer levels (1 - a
        # cell's cost; the entropy of the removed set, n * H, grows under both). For the other
        # models the rows removed at finer nodes are bounded by count (charge_floor), which
        # prices them for the metrics charged by the cell. A node whose bound plus floor is no
        # better than the best cannot be the answer.
        self.charge_floors = lattice.measure.separable and lattice.limit_rows > 0 and (
            lattice.monotone_with_suppression or lattice.measure.per_cell_charge)
        # per node and column: what removed rows cost there at least (a floor per column: each
        # charge is known column by column, so floors combine by their elementwise maximum)
        self.floor = np.zeros((len(nodes), m))
        self.value_of = np.full(len(nodes), np.inf)  # the value of the solutions valued in full
        # per column and level: which nodes are at most / at least that level (cone tagging)
        self.at_most = [[nodes[:, j] <= h for h in range(height + 1)] for j, height in enumerate(lattice.heights)]
        self.at_least = [[nodes[:, j] >= h for h in range(height + 1)] for j, height in enumerate(lattice.heights)]
        # whether some node can fail: else the frontier of the nodes within the limit is the bottom
        self.can_fail = lattice.limit_rows < lattice.n or lattice.rejects_unreached
        self.deferred: list[int] = []  # nodes ruled out by their charge floor alone, in the gap's order

    def _cone(self, levels, sides) -> np.ndarray:
        inside = np.ones(len(self.nodes), dtype=bool)
        for j, h in enumerate(levels):
            np.logical_and(inside, sides[j][int(h)], out=inside)
        return inside

    def _raise_floor(self, levels, charge: np.ndarray) -> None:
        if charge.any():
            finer = self._cone(levels, self.at_most)
            self.floor[finer] = np.maximum(self.floor[finer], charge)

    def visit(self, levels: np.ndarray) -> bool:
        """Evaluate one node, tag its cones, keep the best solution; True if it is a solution."""
        lattice, status = self.lattice, self.status
        index = int(levels @ self.strides)
        if status[index] == -1:
            return False
        key = tuple(int(x) for x in levels)
        node = None
        if lattice.k_only:  # decided by the suppressed-row count alone
            removed = None  # (the classes, only for a solution's charge)
            suppressed = lattice.suppressed_rows(key)
        else:
            node = lattice.evaluate(key)
            suppressed = node.suppressed_rows
            removed = ~node.ok[node.member_of]
        self.evaluated += 1
        if self.evaluated % 50 == 0:
            self.context.report("lattice search", nodes=self.evaluated, of=len(self.nodes),
                                best=None if self.best is None else round(self.best_value, 2))
        if node is not None and node.unreached:
            # a population class no sample row reaches fails the model and cannot be
            # suppressed: at every finer node it splits into such classes, which fail too
            status[self._cone(levels, self.at_most)] = -1
            return False
        if suppressed > lattice.limit_rows:
            if lattice.monotone_with_suppression or lattice.removed_floor(node) > lattice.limit_rows:
                status[self._cone(levels, self.at_most)] = -1  # every finer node fails too
            else:
                status[index] = -1
                if self.charge_floors:
                    self._raise_floor(levels, lattice.charge_floor(node))
            return False
        if suppressed >= lattice.n > 0 and not lattice.cell_suppression_after:
            # publishes nothing: never the answer while a node publishes rows
            self.empty = key
            status[index] = 1
            return True
        if lattice.measure.separable:  # no grouping needed beyond the removed classes
            value = self.bounds[index]
            if self.charge_floors or value < self.best_value:  # else the charge (>= 0) cannot make it better
                if removed is None:
                    removed = lattice.removed_classes(key)
                charge = lattice.removal_charge(key, removed)
                value = float(lattice.aggregate(self.columns[index] + charge))
                self.value_of[index] = value
                if self.charge_floors:
                    self._raise_floor(levels, charge if lattice.monotone_with_suppression else lattice.charge_floor(node))
        else:
            node = node or lattice.evaluate(key)
            value = self.value_of[index] = node.value = lattice.value(node)
        if value < self.best_value:
            self.best, self.best_value = key, value
        if self.monotone_metric and lattice.monotone_with_suppression:
            status[self._cone(levels, self.at_least)] = 1  # coarser nodes: solutions, no better
        else:
            status[index] = 1
        return True

    # 1. A good first solution: binary searches along a few bottom-to-top chains (Flash) for the
    #    frontier of the nodes within the limit. When every node is (a limit that allows removing
    #    every row, as gensup's cell suppression afterwards does), the frontier is the bottom; a
    #    descent from the top to a node no finer neighbour improves finds a better first solution
    #    there.
    def find_first_solutions(self) -> None:
        m = self.lattice.m
        if not self.can_fail and m:
            self._descend_from_top()
        for first in range(max(m, 1) if self.can_fail else 0):
            self._bisect_chain(self._chain(first))

    def _descend_from_top(self) -> None:
        """From the top, step to the finer neighbour of least value while it improves (every
        neighbour is visited on the way)."""
        m, status, strides, value_of = self.lattice.m, self.status, self.strides, self.value_of
        current = self.heights.copy()
        self.visit(current)
        while True:
            finer = [current - np.eye(m, dtype=np.int64)[j] for j in range(m) if current[j] > 0]
            for levels in finer:
                if status[int(levels @ strides)] == 0:
                    self.visit(levels)
            if not finer:
                break
            step = min(finer, key=lambda levels: value_of[int(levels @ strides)])
            if not value_of[int(step @ strides)] < value_of[int(current @ strides)]:
                break
            current = step

    def _chain(self, first: int) -> list[np.ndarray]:
        """A bottom-to-top chain of nodes, one level up a step (one chain per column): the first
        step raises column `first`, each later one the column least far up its hierarchy."""
        m, heights = self.lattice.m, self.heights
        chain, current = [np.zeros(m, dtype=np.int64)], np.zeros(m, dtype=np.int64)
        while (current < heights).any():
            ranked = np.argsort(np.where(current < heights, current / np.maximum(heights, 1), np.inf), kind="stable")
            j = int(ranked[0]) if (current > 0).any() or first >= m else first % m
            if current[j] >= heights[j]:
                j = int(ranked[0])
            current = current.copy()
            current[j] += 1
            chain.append(current)
        return chain

    def _bisect_chain(self, chain: list[np.ndarray]) -> None:
        """A binary search along `chain` for its finest node within the limit (exact when coarser
        nodes satisfy whenever finer ones do; else the frontier is guessed, which only seeds the
        best value)."""
        status, strides = self.status, self.strides
        low, high = 0, len(chain) - 1
        while low <= high:
            mid = (low + high) // 2
            index = int(chain[mid] @ strides)
            good = status[index] == 1 or (status[index] == 0 and self.visit(chain[mid]))
            if good:
                high = mid - 1
            else:
                low = mid + 1

    # 2. Close the gap: every node that could beat the best (bound below it) is decided,
    #    coarsest first, so a failure tags the most finer nodes at once.
    #    A node whose charge floor rules it out is deferred, not evaluated: evaluating it could
    #    only tag its finer nodes as failing, so before a finer node is evaluated the deferred
    #    nodes above it that could still fail are evaluated first, in this order, until one tags
    #    it. The nodes evaluated are then a subset of those the bound alone would evaluate, and
    #    the best found is the same.
    def close_the_gap(self) -> bool:
        """Whether the best found is proven optimal: False when the context's deadline cut the
        search while an undecided node could still beat it."""
        lattice, context = self.lattice, self.context
        status, floor, columns, bounds, nodes = self.status, self.floor, self.columns, self.bounds, self.nodes
        can_fail, charge_floors, deferred = self.can_fail, self.charge_floors, self.deferred
        order = np.lexsort((bounds, -nodes.sum(axis=1)))
        for pick in order.tolist():
            best = self.best_value  # (inf while only empty publications were found)
            if self.evaluated % 16 == 0 and self.best is not None and context.expired():
                context.cut("lattice search")  # the release depends on how far the search got
                # the time limit: the best node found so far, optimal only if no undecided node
                # could still beat it
                return not ((status == 0) & (lattice.aggregate(columns + floor)
                                             < best - 1e-9 * max(1.0, abs(best)))).any()
            if status[pick] != 0:
                continue
            if best == np.inf or (lattice.aggregate(columns[pick] + floor[pick]) if floor[pick].any()
                                  else bounds[pick]) < best - 1e-9 * max(1.0, abs(best)):
                if can_fail and charge_floors and deferred:
                    self._evaluate_deferred_above(pick)
                    if status[pick] != 0:
                        continue
                self.visit(nodes[pick])
            elif can_fail and bounds[pick] < best - 1e-9 * max(1.0, abs(best)):
                deferred.append(pick)
        return True

    def _evaluate_deferred_above(self, pick: int) -> None:
        status, nodes, deferred = self.status, self.nodes, self.deferred
        waiting = np.array(deferred, dtype=np.int64)
        waiting = waiting[status[waiting] == 0]
        above = waiting[(nodes[waiting] >= nodes[pick]).all(axis=1)]
        deferred[:] = waiting.tolist()
        for index in above.tolist():
            deferred.remove(index)
            self.visit(nodes[index])
            if status[pick] == -1:
                return
