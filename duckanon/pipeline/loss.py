"""The information loss of a release, on ARX's scale (its Loss metric), whatever the method.

A published cell costs (d_L - 1) / (d - 1): d is the column's domain and d_L how many of its
values the cell's label stands for; 0 for a value shown as it is, 1 for '*' (and for a label
that stands for the whole column), in between for a generalized label. A removed row costs 1 in
every column. Per column the mean over the source's rows (`column_loss`); the release's loss is
ARX's geometric mean over the columns (`release_loss`, solver.lattice_metrics.arx_loss).

With attribute weights (the statement's `weights`, ARX's setAttributeWeight) the loss is ARX's
weighted geometric mean, prod(1 + w_j loss_j) ^ (1 / QIs) - 1 with each weight divided by the
largest (AbstractMetricMultiDimensional, ILMultiDimensionalGeometricMean); `column_loss` stays
unweighted.

The domain: with hierarchies, a hierarchy label's leaves and the domain are counted over the
hierarchy's rows (values the column lacks included, as ARX counts them); without, over the
column's values (Mondrian's sets and ranges, cell suppression).
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.lattice_metrics import arx_loss
from duckanon.solver.partition import SHOW_VALUE, STAR, Solution


def label_extents(j: int, hist, solution: Solution, domains=None) -> np.ndarray:
    """Per group, how many of column j's distinct values (its domain: the values in the source,
    NULL included) the group's published cell stands for, when no hierarchy labels it
    (cell_losses counts a hierarchy's leaves itself): 1 for a value shown as it is; for a
    generalized label its whole extent in the domain, not only the values of the group's rows:
    every value in a Mondrian range [lo, hi], the members of a Mondrian set. ('*' stands for all
    of them.)"""
    n_groups = len(solution.group_rep)
    extent = np.ones(n_groups, dtype=np.int64)
    labels = solution.group_labels[j] if solution.group_labels else None
    if labels is None or not len(solution.part_class):
        return extent
    generalized = np.array([label != SHOW_VALUE for label in labels], dtype=bool)
    codes = hist.compact_codes[solution.part_class, j]
    groups = solution.part_group
    numeric = domains.numeric[j] if domains is not None else all(
        str(label).startswith("[") for label, flag in zip(labels, generalized) if flag)
    if numeric:  # a Mondrian range: every value from its lowest to its highest
        low = np.full(n_groups, np.iinfo(np.int64).max)
        high = np.full(n_groups, -1)
        np.minimum.at(low, groups, codes)
        np.maximum.at(high, groups, codes)
        return np.where(generalized & (high >= low), high - low + 1, 1)
    members = np.unique(np.stack([groups, codes], axis=1), axis=0)  # a Mondrian set: its members
    return np.where(generalized, np.bincount(members[:, 0], minlength=n_groups), 1)


def cell_losses(hist, solution: Solution, domains=None) -> np.ndarray:
    """(G, m): what one published cell of each group costs per column."""
    n_groups = len(solution.group_rep)
    out = np.zeros((n_groups, hist.m))
    hierarchies = getattr(domains, "hierarchies", None)
    group_levels = solution.group_levels
    if group_levels is None and hierarchies is not None and solution.notes.get("levels") is not None:
        group_levels = np.tile(np.asarray(solution.notes["levels"], dtype=np.int64), (n_groups, 1))
    first = np.zeros(n_groups, dtype=np.int64)  # a class of each group (they share each label)
    first[solution.part_group[::-1]] = solution.part_class[::-1]
    # A '*' costs 1. A label that covers every value the column holds counts as a star (`stars`,
    # `whole_domain_cells`) but is published as that label, which costs its leaves among the
    # hierarchy's rows like any other label: the column may lack some of them (docs/result.md)
    costs_one = solution.starred.copy()
    for j in range(hist.m):
        if hierarchies is not None and group_levels is not None:
            bound = hierarchies[j]
            levels = group_levels[:, j]
            codes = np.asarray(bound.codes)[hist.compact_codes[first, j], levels]
            out[:, j] = [bound.loss(level)[code] for level, code in zip(levels.tolist(), codes.tolist())]
            costs_one[:, j] = solution.group_rep[:, j] == STAR
        else:
            d = int(hist.compact_codes[:, j].max()) + 1 if hist.n_classes else 0
            extent = label_extents(j, hist, solution, domains)
            out[:, j] = 0.0 if d <= 1 else (np.minimum(extent, d) - 1) / (d - 1)
    return np.where(costs_one, 1.0, out)


def column_totals(hist, solution: Solution, domains=None) -> np.ndarray:
    """(m,): per column the cost of every source row's cell (a removed row's cells cost 1)."""
    sizes = solution.group_sizes()
    kept = solution.kept_groups & (sizes > 0)
    cells = cell_losses(hist, solution, domains)
    return (sizes[kept, None] * cells[kept]).sum(axis=0) + solution.removed_rows


def column_loss(qi: list[str], hist, solution: Solution, domains=None) -> dict[str, float]:
    """Per QI column, the mean loss per source row (module docstring)."""
    return _per_column(qi, hist, column_totals(hist, solution, domains))


def loss_notes(qi: list[str], hist, solution: Solution, domains=None, weights=None) -> dict:
    """What a release reports of its loss: `column_loss` and ARX's Loss of the release (`loss`,
    the geometric mean of the columns' losses, weighted by `weights` (per QI), by default the
    weights the solver ran with, notes["weights"]), from one count of its cells."""
    totals = column_totals(hist, solution, domains)
    if weights is None:
        weights = release_weights(qi, solution)
    return {"column_loss": _per_column(qi, hist, totals),
            "loss": round(float(arx_loss(totals, hist.n_rows, weights)), 12)}


def release_weights(qi: list[str], solution: Solution) -> list[float] | None:
    """The attribute weights the solver ran with (notes["weights"]: column -> weight), in QI order."""
    given = solution.notes.get("weights")
    if not given:
        return None
    by_lower = {str(name).lower(): float(w) for name, w in given.items()}
    return [by_lower.get(column.lower(), 1.0) for column in qi]


def _per_column(qi: list[str], hist, totals: np.ndarray) -> dict[str, float]:
    rows = max(hist.n_rows, 1)
    return {column: round(float(total) / rows, 6) for column, total in zip(qi, totals)}
