"""The heuristic portfolio shared by `auto` and by `exact` (whose MILP starts from the best of it)."""

from __future__ import annotations

from duckanon.solver.greedy import greedy
from duckanon.solver.histogram import Histogram
from duckanon.solver.mapprox import mapprox
from duckanon.solver.models import KAnonymity
from duckanon.solver.partition import Solution
from duckanon.solver.repair import merge_classes, repair

# Above this many classes the quadratic `merge` heuristic is left out of the portfolio.
MERGE_CLASS_LIMIT = 3000
HEURISTICS = ("mapprox", "greedy", "merge")


def implied_k(models) -> int:
    """The smallest group any model allows: l-diversity needs l rows, t-closeness some size too."""
    return max([m.min_group_size() for m in models], default=1)


def run_heuristic(method: str, hist: Histogram, models, patterns=None) -> Solution:
    # The k-only methods start from groups of the size the models imply; repair does the rest.
    k = implied_k(models)
    if method == "mapprox":
        return repair(hist, mapprox(hist, k), models)
    if method == "greedy":
        # With l or t, the release test can also require them (an extension of Algorithm 1);
        # both variants run and the cheaper one wins.
        candidates = [repair(hist, greedy(hist, k, patterns), models)]
        if any(not isinstance(m, KAnonymity) for m in models):
            candidates.append(repair(hist, greedy(hist, k, patterns, models=models), models))
        return min(candidates, key=lambda s: s.stars)
    if method == "merge":
        return merge_classes(hist, models)
    raise ValueError(f"not a heuristic: {method}")


def best_heuristic(hist: Histogram, models, patterns=None) -> Solution:
    """The fewest stars among the heuristics that apply (user patterns: greedy only)."""
    names = ["greedy"] if patterns is not None else ["mapprox", "greedy"]
    if patterns is None and hist.n_classes <= MERGE_CLASS_LIMIT:
        names.append("merge")
    candidates = [run_heuristic(name, hist, models, patterns) for name in names]
    return min(candidates, key=lambda s: s.stars)  # first wins ties
