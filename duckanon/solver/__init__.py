"""Solver core: pure functions from a class histogram and privacy models to a Solution.

One module per algorithm family: `mapprox` (Liang & Yuan m-approximation), `greedy`
(pattern-guided, Bredereck et al.), `repair` (merging until l/t hold, and the `merge`
heuristic). `solve` runs the requested method, repairs what k-only methods leave violating, and
attaches a proven lower bound where one is known.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.greedy import greedy
from duckanon.solver.histogram import Histogram
from duckanon.solver.mapprox import mapprox
from duckanon.solver.models import KAnonymity, LDiversity, PrivacyModel, TCloseness, all_satisfied
from duckanon.solver.partition import Solution, identity_solution
from duckanon.solver.repair import merge_classes, repair

__all__ = ["Histogram", "KAnonymity", "LDiversity", "TCloseness", "Solution", "solve", "METHODS"]

# Above this many classes the quadratic `merge` heuristic is left out of `auto`.
MERGE_CLASS_LIMIT = 3000


def _k_of(models) -> int:
    return max([m.k for m in models if isinstance(m, KAnonymity)], default=1)


def _run(method: str, hist: Histogram, models, patterns) -> Solution:
    k = _k_of(models)
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
    raise AnonymizeError(f"unknown method '{method}'")


METHODS = ("auto", "mapprox", "greedy", "merge")


def solve(hist: Histogram, models: list[PrivacyModel], method: str = "auto", patterns=None) -> Solution:
    """Anonymize `hist` under all `models`; the result satisfies every model (checked here)."""
    total = hist.sa_counts.sum(axis=0)
    for model in models:
        model.check_feasible(total)
    if hist.n_classes == 0:
        solution = identity_solution(hist, method if method != "auto" else "mapprox")
    elif method == "auto":
        names = ["mapprox", "greedy"]
        if hist.n_classes <= MERGE_CLASS_LIMIT:
            names.append("merge")
        candidates = [_run(name, hist, models, patterns) for name in names]
        solution = min(candidates, key=lambda s: s.stars)  # first wins ties
    else:
        solution = _run(method, hist, models, patterns)

    sizes = solution.group_sizes()
    used = sizes > 0
    valid = all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used])
    if not valid.all():  # a bug, never a published violation
        raise AnonymizeError(f"internal error: method {solution.method} produced a group that violates the request")

    if any(isinstance(m, KAnonymity) for m in models):
        solution.lower_bound = k_anonymity_lower_bound(hist, _k_of(models))
    elif solution.stars == 0:
        solution.lower_bound = 0
    solution.optimal = solution.lower_bound is not None and solution.stars <= solution.lower_bound
    return solution
