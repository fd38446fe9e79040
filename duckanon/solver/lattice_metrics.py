"""The metrics `lattice` and `gensup` minimise over full-domain generalizations, as ARX's metrics
of the same names (gsFactor 0.5; the loss takes ARX's other factors too, LossMetric): what
publishing at a lattice node costs, and what its removed rows cost on top (solver/lattice.py's module docstring: the charges, and why each aggregate
keeps the search's bounds and floors lower bounds).

A metric reads the lattice's precomputed per-column costs and codes (Lattice.class_costs,
rolled, cardinality, node_value); it holds no state of its own, so one object per metric serves
every lattice (METRICS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from duckanon.methods import LATTICE_METRICS

if TYPE_CHECKING:  # (annotations only: the lattice imports the metrics)
    from duckanon.solver.lattice import Lattice, NodeResult


class LatticeMetric:
    """What publishing at a node costs (lower is better), as ARX's metric of the same name.

    A separable metric is a sum of per-cell costs: `level_costs` gives what one row with each
    value costs at a level, so a node's value with nothing removed (its bound) needs no grouping,
    and `removal_charge` adds what the removed rows cost. The others (`separable = False`) are
    computed from the node's classes by `value`, and bound by 0."""

    name = "metric"
    separable = True
    # what a removed row costs is its cells' 1 - cost at the node's levels (removal_charge below):
    # known per group of a node, whichever of its rows are removed
    per_cell_charge = True
    # the share of that 1 - cost a removed cell is charged (ARX's suppression factor; LossMetric)
    suppression_factor = 1.0
    # never lower at a coarser node, whatever is removed (ARX's monotonic variants): the search
    # then tags a solution's coarser nodes as no better even with a suppression limit
    monotone = False

    def level_costs(self, codes: np.ndarray, rows: np.ndarray, h: int, domain=None) -> np.ndarray:
        """(n_values,): what one row with value v costs published at level h, given the
        hierarchy's `codes` (n_values, H+1), the rows per value and the hierarchy's `domain`
        (its leaves, and per level the leaves under each code; None: the column's values)."""
        return np.zeros(len(codes))

    def removal_charge(self, lattice: Lattice, levels, which: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Per column, what the rows of the classes `which` (original class ids, `weights` rows
        each) cost on top of the bound: 1 per removed cell (the most a cell can cost) unless
        said otherwise."""
        removed = float(weights.sum())
        # (a BLAS dot spins threads)
        return self.suppression_factor * np.array([removed - float((weights * lattice.class_costs(j, h, which)).sum())
                                                   for j, h in enumerate(levels)])

    def removal_charge_kept(self, lattice: Lattice, levels, kept: np.ndarray, weights: np.ndarray,
                            removed: float) -> np.ndarray:
        """removal_charge from the classes `kept` (`weights` rows each) instead, when they are
        fewer than those removed (`removed` rows): the removed rows' cells cost a column's total
        less the kept rows' (the same up to rounding)."""
        return self.suppression_factor * np.array(
            [removed - (lattice.column_total[j][h] - float((weights * lattice.class_costs(j, h, kept)).sum()))
             for j, h in enumerate(levels)])

    def aggregate(self, columns: np.ndarray, rows: int, weights: np.ndarray | None = None) -> np.ndarray | float:
        """The metric from its per-column totals (last axis): their sum unless said otherwise;
        with ARX's attribute `weights` (arx_weights) the weighted sum, as ARX's
        ILMultiDimensionalSum (entropy) and ILMultiDimensionalArithmeticMean (precision) weigh
        each column's value."""
        if weights is None:
            return columns.sum(axis=-1)
        return (columns * weights).sum(axis=-1)

    def value(self, lattice: Lattice, node: NodeResult) -> float:
        return lattice.node_value(node.levels, ~node.ok[node.member_of])


class EntropyMetric(LatticeMetric):
    """ARX's default non-uniform entropy: -log2(P(v) / P(gen(v))) per cell; the removed rows pay
    the entropy of their generalized values within the removed set."""

    name = "entropy"
    per_cell_charge = False

    def level_costs(self, codes, rows, h, domain=None):
        g = codes[:, h]
        present = rows > 0
        out = np.zeros(len(codes))
        generalized = np.bincount(g, weights=rows)
        out[present] = np.log2(generalized[g[present]] / rows[present])
        return out

    def removal_charge(self, lattice, levels, which, weights):
        if lattice.cell_suppression_after:
            return np.zeros(len(levels))
        # one bincount over every column's generalized codes (offset per column)
        offsets = np.cumsum([0] + [lattice.cardinality[j][h] for j, h in enumerate(levels)])
        codes = np.concatenate([lattice.rolled[j][h][which] + offsets[j] for j, h in enumerate(levels)])
        counts = np.bincount(codes, weights=np.tile(weights, len(levels)), minlength=int(offsets[-1]))
        present = counts > 0
        charge = np.zeros(len(counts))
        charge[present] = counts[present] * np.log2(float(weights.sum()) / counts[present])
        return np.add.reduceat(charge, offsets[:-1]) if len(levels) else np.zeros(0)

    def removal_charge_kept(self, lattice, levels, kept, weights, removed):
        if lattice.cell_suppression_after:
            return np.zeros(len(levels))
        charge = np.zeros(len(levels))
        for j, h in enumerate(levels):  # the removed rows per label: every row's less the kept rows'
            counts = lattice.level_rows(j, h) - np.bincount(lattice.rolled[j][h][kept], weights=weights,
                                                            minlength=lattice.cardinality[j][h])
            present = counts > 0.5  # (row counts, up to rounding)
            charge[j] = float((counts[present] * np.log2(removed / counts[present])).sum())
        return charge


class MonotonicEntropyMetric(EntropyMetric):
    """ARX's monotonic non-uniform entropy (Metric.createEntropyMetric(true), MetricMDNUEntropy):
    the entropy of the levels over every row, the removed rows counted as if published at the
    node's levels, so removing rows costs nothing and the metric never falls at a coarser node.
    ARX's suites use it with a suppression limit above 0 (TestAnonymizationKAnonymity, ...)."""

    name = "monotonic_entropy"
    suppression_factor = 0.0
    monotone = True

    def removal_charge(self, lattice, levels, which, weights):
        return np.zeros(len(levels))

    def removal_charge_kept(self, lattice, levels, kept, weights, removed):
        return np.zeros(len(levels))


# ARX rounds each column's loss down to 1e-10 (Metric.round) before aggregating
ARX_ROUNDING = 1e10


def arx_weights(weights) -> np.ndarray | None:
    """ARX's attribute weights as its multi-dimensional metrics use them
    (AbstractMetricMultiDimensional.initializeInternal): each divided by the largest, so the
    heaviest column weighs 1. None without weights or when all are equal (then every weight is 1,
    which is the metric without weights)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if not len(w) or bool((w == w[0]).all()):
        return None
    return w / w.max()


def arx_loss(columns: np.ndarray, rows: int, weights=None) -> np.ndarray | float:
    """ARX's Loss from per-column totals of cell losses over `rows` rows (last axis): each
    column's mean loss, rounded down as ARX rounds it, aggregated by ARX's geometric mean
    prod(1 + loss_j) ** (1 / m) - 1 (ILMultiDimensionalGeometricMean). With attribute `weights`
    (normalised here by arx_weights), prod(1 + w_j loss_j) ** (1 / m) - 1, as ARX weighs them."""
    columns = np.asarray(columns, dtype=np.float64)
    if columns.shape[-1] == 0:
        return columns.sum(axis=-1)
    mean = np.floor(np.maximum(columns / max(rows, 1), 0.0) * ARX_ROUNDING) / ARX_ROUNDING
    weights = arx_weights(weights)
    if weights is not None:
        mean = mean * weights
    factors = (mean + 1.0) ** (1.0 / columns.shape[-1])
    product = factors[..., 0]
    for j in range(1, columns.shape[-1]):  # in column order, as ARX multiplies (same last bits)
        product = product * factors[..., j]
    return product - 1.0


class LossMetric(LatticeMetric):
    """ARX's Loss (Metric.createLossMetric(gsFactor), MetricMDNMLoss): a cell costs (leaves under
    its label - 1) / (leaves of the hierarchy - 1), a suppressed or removed cell 1; per column the
    mean over the rows, and the columns' geometric mean (arx_loss).

    `gs_factor` in [0, 1] weighs generalization against suppression as ARX's does (0.5, its
    default: both as above). ARX derives a generalization factor g = 1 - 2 (gs - 0.5) above 0.5
    (else 1) and a suppression factor s = 2 gs below 0.5 (else 1); a published cell counts g x
    its share of the domain (leaves / size), a removed one its share + s x (1 - share), and each
    column is normalised by (total - g rows / size) / (rows - g rows / size). Per cell that is
      published: g (leaves - 1) / (size - g),   removed: cost + s (1 - cost),
    where cost is what the removed cell would cost published at the node's levels: with g = 1 the
    gsFactor-0.5 cost, and at 0.5 both are the metric above. So the charge on top of publishing
    stays s x (1 - cost) per removed cell, >= 0 and growing at finer levels (the search's bounds
    and floors hold); gs = 0 makes removal free of charge, gs = 1 makes generalization free."""

    name = "loss"

    def __init__(self, gs_factor: float = 0.5):
        if not 0.0 <= gs_factor <= 1.0:
            raise ValueError("the generalization/suppression factor is a fraction in [0, 1]")
        self.gs_factor = gs_factor
        self.suppression_factor = 2.0 * gs_factor if gs_factor < 0.5 else 1.0
        self.generalization_factor = 1.0 if gs_factor <= 0.5 else 1.0 - 2.0 * (gs_factor - 0.5)

    def level_costs(self, codes, rows, h, domain=None):
        g = codes[:, h]
        if domain is not None:
            size, leaves = domain
            under = np.asarray(leaves[h], dtype=np.float64)[g]
        else:
            present = rows > 0
            size = max(int(present.sum()), 1)
            under = np.bincount(g, weights=present.astype(np.float64))[g]
        factor = self.generalization_factor
        if factor == 1.0:  # (the same figure; kept apart so gsFactor 0.5 stays bit for bit what it was)
            return (under - 1) / max(size - 1, 1)
        return factor * (under - 1) / max(size - factor, 1e-300) if size > 1 else np.zeros(len(codes))

    def aggregate(self, columns, rows, weights=None):
        return arx_loss(columns, rows, weights)

    def lower(self, columns: np.ndarray, floor: float, rows: int, weights=None) -> float:
        """The least the loss can be when the per-column totals are at least `columns` and grow
        by `floor` in all, shared among the columns in a way not known: the geometric mean grows
        least when all of it goes to the costliest column (log(1 + x) is concave). With weights
        the sum of log(1 + w_j x_j) is still concave in the shares, so its least is where all of
        the floor goes to one column: the least over the columns."""
        columns = np.array(columns, dtype=np.float64)
        weights = arx_weights(weights)
        if weights is not None and len(columns):
            grown = np.tile(columns, (len(columns), 1)) + floor * np.eye(len(columns))
            return float(np.min(arx_loss(grown, rows, weights)))
        if len(columns):
            columns[np.argmax(columns)] += floor
        return float(arx_loss(columns, rows))


class PrecisionMetric(LatticeMetric):
    """Sweeney's precision: level / height per cell."""

    name = "precision"

    def level_costs(self, codes, rows, h, domain=None):
        return np.full(len(codes), h / max(codes.shape[1] - 1, 1))


class StarsMetric(LatticeMetric):
    """1 per cell published as one label for the whole domain (a star)."""

    name = "stars"

    def level_costs(self, codes, rows, h, domain=None):
        return np.full(len(codes), 1.0 if h > 0 and len(np.unique(codes[:, h])) == 1 else 0.0)


class DiscernibilityMetric(LatticeMetric):
    """ARX's DM: each row costs its class's size; a removed row costs |T|."""

    name = "discernibility"
    separable = False

    def value(self, lattice, node):
        sizes = node.sa_counts.sum(axis=1)
        kept = node.ok
        return float((sizes[kept] ** 2).sum() + lattice.n * sizes[~kept].sum())


class AverageClassSizeMetric(LatticeMetric):
    """ARX's AECS: rows / published classes, the removed rows counting as one class. Groups of
    population rows alone (no sample row) publish nothing: they are no class."""

    name = "aecs"
    separable = False

    def value(self, lattice, node):
        kept = node.ok
        published = kept & (node.sa_counts.sum(axis=1) > 0)
        classes = int(published.sum()) + (1 if (~kept).any() else 0)
        return float(lattice.n) / max(classes, 1)


def metric_of(name: str, gs_factor: float = 0.5) -> LatticeMetric:
    """The metric object of `name`; the loss with another generalization/suppression factor is
    its own object (the shared one is ARX's default, 0.5)."""
    if name == "loss" and gs_factor != 0.5:
        return LossMetric(gs_factor)
    return METRICS[name]


class MonotonicDiscernibilityMetric(DiscernibilityMetric):
    """ARX's monotonic discernibility DM* (Metric.createDiscernabilityMetric(true),
    MetricSDDiscernability): each row costs its class's size, a removed row too (not |T|), so
    it is the sum of the squared class sizes at the node, whatever is removed."""

    name = "monotonic_discernibility"
    monotone = True

    def value(self, lattice, node):
        sizes = node.sa_counts.sum(axis=1)
        return float((sizes.astype(np.float64) ** 2).sum())


_METRIC_OBJECTS = {metric.name: metric for metric in (EntropyMetric(), LossMetric(), PrecisionMetric(), StarsMetric(),
                                                      DiscernibilityMetric(), AverageClassSizeMetric(),
                                                      MonotonicEntropyMetric(), MonotonicDiscernibilityMetric())}
assert set(_METRIC_OBJECTS) == set(LATTICE_METRICS), "one metric object per registered lattice metric"
# name -> metric, in the registry's order (duckanon.methods.LATTICE_METRICS)
METRICS = {name: _METRIC_OBJECTS[name] for name in LATTICE_METRICS}
