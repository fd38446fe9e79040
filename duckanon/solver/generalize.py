"""Generalization methods as Solutions: `lattice` (full-domain, optimal), `mondrian`
(multidimensional local recoding) and `gensup` (a lattice level, then cell suppression).

A generalized Solution keeps whole classes together (a class's rows publish the same labels) and
carries per group and column the published label; `group_rep` holds codes that are equal exactly
when the published labels are, with STAR where a column is published as '*'.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.lattice import Lattice
from duckanon.solver.lattice_metrics import METRICS, arx_loss, arx_weights
from duckanon.solver.models import all_satisfied, globally_satisfied
from duckanon.solver.partition import SHOW_VALUE, STAR, Solution, distribute_sa, take_rows
from duckanon.solver.refine import refine_groups
from duckanon.solver.request import Request

TOP = "*"


class FlatHierarchy:
    """The hierarchy of a QI given none: level 0 the value, level 1 '*'."""

    def __init__(self, n_values: int):
        self.codes = np.stack([np.arange(n_values), np.zeros(n_values, dtype=np.int64)], axis=1)
        self.labels = [[str(i) for i in range(n_values)], [TOP]]
        self.height = 1
        self.domain_size = n_values

    def domain_leaves(self, level: int) -> np.ndarray:
        return np.ones(self.domain_size, dtype=np.int64) if level == 0 else np.array([self.domain_size])

    # the interface of hierarchy.BoundHierarchy that the lattice's readers use (SafePub's scores)
    def level_labels(self, level: int) -> list:
        return self.labels[level]

    def n_groups(self, level: int) -> int:
        return len(self.labels[level])

    def loss(self, level: int) -> np.ndarray:
        """As BoundHierarchy.loss: (leaves - 1) / (domain - 1) per code of `level`."""
        return (self.domain_leaves(level) - 1) / max(self.domain_size - 1, 1)


def hierarchy_domains(hierarchies) -> list:
    """Per QI, what ARX's loss counts as its domain: the hierarchy's leaves, and per level the
    leaves under each code (BoundHierarchy.domain_leaves)."""
    return [(h.domain_size, [h.domain_leaves(level) for level in range(h.height + 1)]) for h in hierarchies]


def lattice_of(hist: Histogram, hierarchies, models, suppression_limit=0.0, metric="entropy", **options) -> Lattice:
    """The level lattice of bound `hierarchies`, with their domains for the loss."""
    return Lattice(hist, [h.codes for h in hierarchies], models, suppression_limit, metric,
                   domains=hierarchy_domains(hierarchies), **options)


def whole_domain(bound, level: int) -> bool:
    """Whether level `level` (> 0) of a bound hierarchy has one label for every value of the
    column: a cell published there is fully masked, whatever the label's text ('*', '*****',
    'Any', ...), and counts as a star. Under differential privacy (`bound.whole_from` set) it is
    decided from the hierarchy alone: the levels from its lowest one-group level up (its top for a
    builder), whatever values the source holds (a label covering every SOURCE value would tell
    whether the source holds a value the hierarchy lacks)."""
    whole_from = getattr(bound, "whole_from", None)
    if whole_from is not None:
        return level >= whole_from
    codes = bound.codes
    return level > 0 and len(codes) > 0 and bool((codes[:, level] == codes[0, level]).all())


def _text(value) -> str:
    return "NULL" if value is None else str(value)


def _whole_class_parts(hist: Histogram, group_of_class: np.ndarray):
    classes = np.arange(hist.n_classes)
    return distribute_sa(hist, classes, np.asarray(group_of_class, dtype=np.int64), hist.sizes)


def lattice_solution(hist: Histogram, hierarchies, models, suppression_limit=0.0, metric="entropy",
                     context: SolveContext = UNBOUNDED, population=None, weights=None,
                     stable_levels=None, gs_factor: float = 0.5) -> Solution:
    """`hierarchies[j]` is a bound hierarchy of QI j (hierarchy.BoundHierarchy: `codes`, `labels`).
    `search_seconds` in the notes is the search alone: the lattice's precomputation on the
    histogram and the search, not the solution built from its node. `weights`: ARX's attribute
    weights per QI (Lattice). `stable_levels` (REFRESH's stable mode): publish at those levels when
    they still satisfy the request within the suppression limit (`mode_used` says whether they
    did); else search as usual. `gs_factor`: the loss's generalization/suppression factor (ARX's
    gsFactor; lattice_metrics.LossMetric)."""
    started = time.perf_counter()
    lattice = lattice_of(hist, hierarchies, models, suppression_limit, metric, population=population, weights=weights,
                         gs_factor=gs_factor)
    kept = lattice.node_at(stable_levels) if stable_levels is not None else None
    search = lattice.result_at(kept) if kept is not None else lattice.search(context)  # records a cut itself
    search_seconds = time.perf_counter() - started
    node = search.node
    n_groups = len(node.sa_counts)
    group_rep = np.zeros((n_groups, hist.m), dtype=np.int64)
    masked = np.zeros((n_groups, hist.m), dtype=bool)
    labels = []
    for j, (bound, level) in enumerate(zip(hierarchies, node.levels)):
        codes = bound.codes[hist.codes[:, j], level]
        group_code = np.zeros(n_groups, dtype=np.int64)
        group_code[node.member_of] = codes
        names = bound.labels[level]
        shown = [names[c] for c in group_code.tolist()]
        group_rep[:, j] = np.where(np.array([s == TOP for s in shown], dtype=bool), STAR, group_code)
        masked[:, j] = whole_domain(bound, level)
        labels.append(shown if level > 0 else None)
    parts = _whole_class_parts(hist, node.member_of)
    solution = Solution(*parts, group_rep=group_rep, method="lattice", optimal=search.optimal, group_labels=labels,
                        dropped=~node.ok, masked=masked, group_population=node.population)
    solution.notes.update({
        "levels": list(node.levels), "metric": metric, "metric_value": search.value,
        "nodes_evaluated": search.evaluated, "search_seconds": round(search_seconds, 4), "lattice_nodes": search.nodes,
        "removed_rows": int(node.sa_counts[~node.ok].sum()),
        **search.notes,
    })
    shown = metric
    if gs_factor != 0.5:
        solution.notes["gs_factor"] = gs_factor
        shown = f"{metric} (gs_factor {gs_factor:g})"
    if search.optimal:  # what is proven, never said of a heuristic search's best node
        solution.notes["optimal_for"] = f"{shown} among full-domain generalizations"
    if weights is not None and not METRICS[metric].separable:
        solution.notes["weights_ignored"] = f"{metric} is single-dimensional in ARX: attribute weights do not apply"
    if stable_levels is not None:
        solution.notes["mode_used"] = "stable: the published levels still satisfy the request" if kept is not None \
            else "fresh: the published levels no longer satisfy the request within the suppression limit"
    elif not search.optimal and search.notes.get("search") == "exhaustive":
        solution.notes["time_limit"] = "reached: the best node found so far, not proven optimal"
    return solution


# Cut points Mondrian tries per column: quantiles of the region's rows in the column's order.
MONDRIAN_CUTS = (0.25, 0.5, 0.75)


def mondrian_groups(hist: Histogram, models, numeric: list[bool] | None = None, weights=None) -> np.ndarray:
    """LeFevre et al.'s strict multidimensional partitioning on the class histogram, with the
    split chosen for the loss it saves.

    Recursively split a region in two, keeping a split only when both halves satisfy every model;
    a region no split can divide becomes one group. Splits fall on value boundaries, so classes
    are never divided, and every group satisfies the models because the whole table does and only
    valid halves are kept. The candidate splits of a region: per column, a cut at each of
    MONDRIAN_CUTS (row quantiles) in the column's order, which is its code order for a numeric
    column (published as a range) and, for any other column (published as a set), its values
    from the most to the least frequent in the region, so a cut can set the few common values
    apart from the many rare ones. The split made is the one that lowers the loss most: per
    column, (distinct values - 1) / (the column's values - 1) for each row, weighted by the
    derivative of ARX's geometric mean over the columns at the current loss. (LeFevre et al.
    split the widest column at its median; on Adult at k = 100 that loses 0.22 against 0.13.)
    With attribute `weights` the mean is ARX's weighted one, sum_j log(1 + w_j T_j / rows), whose
    derivative w_j / (rows + w_j T_j) weighs column j.
    """
    codes = hist.codes
    sizes = np.asarray(hist.sizes, dtype=np.float64)
    n_classes, m = codes.shape
    group_of = np.zeros(n_classes, dtype=np.int64)
    if not n_classes:
        return group_of
    numeric = list(numeric) if numeric is not None else [False] * m
    loss = _RegionLoss(codes, sizes)
    user = arx_weights(weights)
    user = np.ones(m) if user is None else user
    total = loss(np.arange(n_classes))
    rows = float(sizes.sum())
    stack = [(np.arange(n_classes), total.copy())]
    next_group = 0
    request = Request.of(models)
    min_size = request.min_group_size
    sizes_made = np.zeros(n_classes, dtype=np.int64)  # rows per group made (global models)
    while stack:
        members, region_cost = stack.pop()
        best = None
        if sizes[members].sum() >= 2 * min_size:
            gains = user / (rows + user * total)  # d/dT_j of sum_j log(1 + w_j T_j / rows)
            best = _best_split(hist, models, members, region_cost, gains, loss, numeric, min_size)
        if best is not None and request.global_models:
            # the release if nothing else were split: the groups made, the regions waiting, the halves
            member_sizes, left = sizes[members], best[1]
            parts = [sizes_made[:next_group].tolist(), [sizes[region].sum() for region, _ in stack],
                     [member_sizes[left].sum(), member_sizes[~left].sum()]]
            release = np.array([size for part in parts for size in part], dtype=np.int64)
            if not globally_satisfied(request, release, None):
                best = None
        if best is None:
            group_of[members] = next_group
            sizes_made[next_group] = sizes[members].sum()
            next_group += 1
            continue
        _, left, left_cost, right_cost = best
        total += left_cost + right_cost - region_cost
        stack.append((members[~left], right_cost))
        stack.append((members[left], left_cost))
    return group_of


class _RegionLoss:
    """Mondrian's loss of a region (the classes `members`), per column: rows x (distinct values -
    1) / (the column's values - 1)."""

    def __init__(self, codes: np.ndarray, sizes: np.ndarray):
        m = codes.shape[1]
        self.m, self.sizes = m, sizes
        self.values = np.array([int(codes[:, j].max()) + 1 for j in range(m)], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.values)])
        self.flat = codes + self.offsets[:-1]  # every column's codes in one space: one unique per region
        self.scale = 1.0 / np.maximum(self.values - 1, 1)

    def __call__(self, members: np.ndarray) -> np.ndarray:
        """(m,): rows x (distinct values - 1) / (values - 1) per column."""
        present = np.unique(self.flat[members])
        distinct = np.bincount(np.searchsorted(self.offsets, present, side="right") - 1, minlength=self.m)
        return float(self.sizes[members].sum()) * (distinct - 1) * self.scale


def _best_split(hist: Histogram, models, members: np.ndarray, region_cost: np.ndarray, weights: np.ndarray,
                loss: _RegionLoss, numeric: list[bool], min_size: int):
    """The split of the region `members` that lowers the weighted loss most, of the cuts at
    MONDRIAN_CUTS in each column's order (mondrian_groups): (gain, left half as a mask of
    `members`, the halves' losses), or None when no cut leaves two halves that satisfy the
    models."""
    sub = hist.codes[members]
    member_sizes = loss.sizes[members]
    values = loss.values
    best = None
    for j in range(loss.m):
        column = sub[:, j]
        if column.min() == column.max():
            continue
        if numeric[j]:
            key = column
        else:  # most frequent value first
            frequency = np.bincount(column, weights=member_sizes, minlength=int(values[j]))
            rank = np.empty(int(values[j]), dtype=np.int64)
            rank[np.argsort(-frequency, kind="stable")] = np.arange(int(values[j]))
            key = rank[column]
        order = np.argsort(key, kind="stable")
        cumulative = np.cumsum(member_sizes[order])
        tried = set()
        for share in MONDRIAN_CUTS:
            at = key[order][min(int(np.searchsorted(cumulative, cumulative[-1] * share)), len(order) - 1)]
            for cut in (at, at - 1):  # left = key <= cut; the quantile's both sides
                if cut in tried:
                    continue
                tried.add(cut)
                left = key <= cut
                left_rows = float(member_sizes[left].sum())
                if min(left_rows, cumulative[-1] - left_rows) < min_size:
                    continue
                halves = np.stack([hist.sa_counts[members[left]].sum(axis=0),
                                   hist.sa_counts[members[~left]].sum(axis=0)])
                if not all_satisfied(models, halves.sum(axis=1), halves).all():
                    continue
                left_cost, right_cost = loss(members[left]), loss(members[~left])
                gain = float((region_cost - left_cost - right_cost) @ weights)
                if best is None or gain > best[0]:
                    best = (gain, left, left_cost, right_cost)
                break
    return best


def _global_holds(hist: Histogram, group_of: np.ndarray, models) -> bool:
    sizes = np.bincount(group_of, weights=hist.sizes).astype(np.int64)
    sa = np.zeros((len(sizes), hist.sa_counts.shape[1]), dtype=np.int64)
    np.add.at(sa, group_of, hist.sa_counts)
    return globally_satisfied(models, sizes, sa)


def mondrian_solution(hist: Histogram, models, values: list[list], numeric: list[bool],
                      context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """`values[j]` are QI j's values in code order. A group publishes per column its single value,
    the range "[min, max]" of a numeric column, or the set "{a, b}" of a categorical one; '*'
    where it spans every value of the column. The groups are Mondrian's, then refined by class
    moves (solver/refine.py), up to its passes or the context's deadline. `weights`: ARX's attribute weights
    per QI, in the loss the cuts and moves lower."""
    group_of = mondrian_groups(hist, models, numeric, weights)
    refined = refine_groups(hist, group_of, models, numeric, context, weights)
    if not Request.of(models).global_models or _global_holds(hist, refined, models):
        group_of = refined  # (class moves can break a condition on the whole release: then not)
    n_groups = int(group_of.max()) + 1 if hist.n_classes else 0
    group_rep = np.zeros((n_groups, hist.m), dtype=np.int64)
    labels = []
    for j in range(hist.m):
        column = hist.codes[:, j]
        low = np.full(n_groups, np.iinfo(np.int64).max)
        high = np.full(n_groups, -1)
        np.minimum.at(low, group_of, column)
        np.maximum.at(high, group_of, column)
        n_values = len(values[j])
        present = {}
        if not numeric[j]:
            for g, c in set(zip(group_of.tolist(), column.tolist())):
                present.setdefault(g, []).append(c)
        shown, rep = [], []
        everything = len(np.unique(column))
        for g in range(n_groups):
            lo, hi = int(low[g]), int(high[g])
            if lo == hi:
                shown.append(SHOW_VALUE)
                rep.append(lo)
            elif (numeric[j] and hi - lo + 1 >= n_values) or (not numeric[j] and len(present[g]) >= everything):
                shown.append(TOP)
                rep.append(STAR)
            elif numeric[j]:
                shown.append(f"[{_text(values[j][lo])}, {_text(values[j][hi])}]")
                rep.append(n_values + lo * n_values + hi)
            else:
                members = sorted(present[g])
                shown.append("{" + ", ".join(_text(values[j][c]) for c in members) + "}")
                rep.append(n_values + g)  # a set is unique to its group
        labels.append(shown)
        group_rep[:, j] = rep
    parts = _whole_class_parts(hist, group_of)
    solution = Solution(*parts, group_rep=group_rep, method="mondrian", group_labels=labels)
    solution.notes.update({"groups": n_groups})
    return solution


def loss_row_costs(hist: Histogram, hierarchies) -> list[np.ndarray]:
    """Per QI, (n_values, H+1): ARX's loss of one cell with value v published at level h."""
    return lattice_of(hist, hierarchies, [], 0.0, "loss").row_cost


def generalization_loss(hist: Histogram, hierarchies, solution: Solution, levels, costs=None, weights=None) -> float:
    """ARX's Loss of a full-domain solution (lattice_metrics.arx_loss): a value at level h costs (leaves
    under its node - 1) / (leaves of the hierarchy - 1), a star 1, a removed row 1 per QI.
    `costs`: loss_row_costs, when the caller has them; `weights`: ARX's attribute weights."""
    costs = loss_row_costs(hist, hierarchies) if costs is None else costs
    kept = solution.kept_groups[solution.part_group]
    stars = solution.group_rep[solution.part_group] == STAR
    removed = float(solution.part_count[~kept].sum())
    columns = np.zeros(hist.m)
    for j, level in enumerate(levels):
        cell = np.where(stars[:, j], 1.0, costs[j][hist.codes[solution.part_class, j], level])
        columns[j] = removed + float((solution.part_count[kept] * cell[kept]).sum())
    return float(arx_loss(columns, hist.n_rows, weights))


def gensup_loss_bound(hist: Histogram, node, models, costs, weights=None) -> float:
    """A lower bound on the loss of any cell suppression of the classes of `node` (a lattice
    NodeResult): every cell costs at least its level's loss, and a row left unstarred shares its
    group only with rows of its own class, so the unstarred rows of a class form a part of it
    that satisfies the models (closed under merging): beyond the models' kept_rows_bound, each
    row of the class gets a star, which adds at least 1 - (the cheapest of its cells)."""
    n_groups = len(node.sa_counts)
    group_cost = np.zeros((n_groups, hist.m))
    columns = np.zeros(hist.m)
    for j, level in enumerate(node.levels):
        cell = costs[j][hist.codes[:, j], level]  # the same for every class of a group
        group_cost[node.member_of, j] = cell
        columns[j] = float((hist.sizes * cell).sum())
    sizes = node.sa_counts.sum(axis=1)
    kept = sizes
    for model in models:
        kept = np.minimum(kept, model.kept_rows_bound(sizes, node.sa_counts))
    kept = np.where(kept >= Request.of(models).min_group_size, kept, 0)  # a smaller part satisfies no model
    cheapest_star = (1.0 - group_cost.max(axis=1)) if hist.m else np.zeros(n_groups)
    return float(METRICS["loss"].lower(columns, float(((sizes - kept) * cheapest_star).sum()), hist.n_rows, weights))


# Suppression limits tried by `gensup`: the user's, then more room for cell suppression, up to
# 1.0 (the bottom node: cell suppression alone), so it is never worse than suppression alone.
GENSUP_LIMITS = (0.2, 1.0)


# Cell suppression of a histogram under a context: the caller's full pipeline (duckanon.solver's
# `auto`, validated), handed to gensup so that this module does not import the package above it.
CellSuppression = Callable[[Histogram, SolveContext], Solution]


class GensupCannotWin(AnonymizeError):
    """gensup_solution with `beat`: no node's loss bound is below it, so no cell suppression ran."""


def gensup_solution(hist: Histogram, hierarchies, models, suppression_limit=0.05, metric="entropy", *,
                    suppress: CellSuppression, context: SolveContext = UNBOUNDED, weights=None,
                    beat: float | None = None) -> Solution:
    """Generalize, then suppress cells (Xiao, Yi & Tao, Section 5.6): for a few suppression
    limits, the optimal lattice node that needs at most that share of rows removed; then, instead
    of removing the violating rows, `suppress` (the best cell-suppression heuristic) runs on the
    generalized classes, so outliers lose only the cells that make them stand out. The candidate
    with the lowest ARX loss (generalized cells plus stars, on one scale) is published; among
    equal losses the one of the smallest limit.

    One lattice serves every limit, largest first: a node optimal at a limit that removes no
    more rows than a smaller limit allows is that limit's optimum too, and needs no search.
    Limits that reach the same node share one cell suppression, and a node is suppressed only
    when `gensup_loss_bound` says it could beat the best loss found: nodes are tried in
    increasing bound. `weights`: ARX's attribute weights per QI, in the lattice's metric and the
    loss (`suppress` is expected to weigh its stars by them too). `beat` (auto with hierarchies: the
    lowest loss of the candidates before it): when every node's bound is at least that, gensup
    cannot publish less and no cell suppression runs (GensupCannotWin: its bound, never a loss)."""
    started = time.perf_counter()
    lattice = lattice_of(hist, hierarchies, models, 0.0, metric, cell_suppression_after=True, weights=weights)
    limits = sorted({suppression_limit, *GENSUP_LIMITS})
    optimum = {}  # limit -> its LatticeResult
    evaluated = 0
    for limit in reversed(limits):
        lattice.set_suppression_limit(limit)
        covering = [found for found in optimum.values() if found.node.suppressed_rows <= lattice.limit_rows]
        if covering:
            optimum[limit] = min(covering, key=lambda found: found.value)
            continue
        optimum[limit] = lattice.search(context)
        evaluated += optimum[limit].evaluated
        if context.expired():
            context.cut("gensup lattice search")
    search_seconds = time.perf_counter() - started
    costs = loss_row_costs(hist, hierarchies)
    first_limit = {}  # node levels -> the smallest limit whose optimum it is
    for limit in limits:
        first_limit.setdefault(optimum[limit].node.levels, limit)
    bounds = {levels: gensup_loss_bound(hist, optimum[limit].node, models, costs, weights)
              for levels, limit in first_limit.items()}
    if beat is not None and min(bounds.values()) >= beat:
        raise GensupCannotWin(f"not run: its loss would be at least {min(bounds.values()):.4g}, not below the best "
                              f"candidate's {beat:.4g}")
    best = None
    for levels in sorted(first_limit, key=lambda levels: (bounds[levels], first_limit[levels])):
        limit = first_limit[levels]
        if best is not None and (bounds[levels], limit) >= (best.notes["loss"], best.notes["suppression_limit"]):
            continue  # cannot beat the best: its loss is at least its bound
        candidate = _gensup_at(hist, hierarchies, optimum[limit], suppress, context)
        value = generalization_loss(hist, hierarchies, candidate, candidate.notes["levels"], costs, weights)
        candidate.notes.update({"loss": value, "suppression_limit": limit})
        if best is None or (value, limit) < (best.notes["loss"], best.notes["suppression_limit"]):
            best = candidate
    best.notes.update({"nodes_evaluated": evaluated, "search_seconds": round(search_seconds, 4)})
    heuristic = [found.notes for found in optimum.values() if found.notes.get("search") == "heuristic"]
    best.notes.update(heuristic[0] if heuristic else {"search": "exhaustive"})  # (one lattice: the same reason)
    return best


def _gensup_at(hist: Histogram, hierarchies, search, suppress: CellSuppression, context: SolveContext) -> Solution:
    """Cell suppression on the classes of the node `search` found (the violating rows are
    suppressed cell by cell, not removed), mapped back onto the original classes."""
    node = search.node
    n_rolled = len(node.sa_counts)
    rolled_codes = np.zeros((n_rolled, hist.m), dtype=np.int64)
    for j, (bound, level) in enumerate(zip(hierarchies, node.levels)):
        rolled_codes[node.member_of, j] = bound.codes[hist.codes[:, j], level]
    rolled = Histogram(codes=rolled_codes, sa_counts=node.sa_counts)
    inner = suppress(rolled, context)  # at limit 1.0 this is exactly cell suppression alone
    # map the rolled parts back onto the original classes (rows of one rolled class and SA value
    # are interchangeable)
    left = hist.sa_counts.copy()
    members = {}
    for c, r in enumerate(node.member_of.tolist()):
        members.setdefault(r, []).append(c)
    out_c, out_s, out_g, out_n = [], [], [], []
    for r, s, g, n in zip(inner.part_class.tolist(), inner.part_sa.tolist(), inner.part_group.tolist(),
                          inner.part_count.tolist()):
        for c, taken in take_rows(left, members[r], s, n):
            out_c.append(c); out_s.append(s); out_g.append(g); out_n.append(taken)
    labels = []
    for j, (bound, level) in enumerate(zip(hierarchies, node.levels)):
        rep = inner.group_rep[:, j]
        if level == 0:
            labels.append(None)
        else:
            names = bound.labels[level]
            labels.append([TOP if code == STAR else names[code] for code in rep.tolist()])
    group_rep = inner.group_rep.copy()
    masked = np.zeros(group_rep.shape, dtype=bool)
    for j, shown in enumerate(labels):  # a label that is the top '*' counts as a star
        if shown is not None:
            group_rep[:, j] = np.where(np.array([x == TOP for x in shown], dtype=bool), STAR, group_rep[:, j])
        masked[:, j] = whole_domain(hierarchies[j], node.levels[j])  # one label for everything: a star
    parts = [np.asarray(a, dtype=np.int64) for a in (out_c, out_s, out_g, out_n)]
    solution = Solution(*parts, group_rep=group_rep, method="gensup", group_labels=labels, masked=masked)
    solution.notes.update({"levels": list(node.levels), "metric": search.metric,
                           "generalization_metric_value": search.value, "cell_suppression": inner.method})
    return solution
