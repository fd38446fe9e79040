"""Checks that use duckanon's solver on purpose, kept apart from the independent ones
(support.checks, support.risk_checks): a solution's groups satisfy duckanon's model predicates and
place every row once (its stars recounted from membership), and population uniqueness, an
estimate, computed by duckanon's estimator (tested against ARX elsewhere)."""

from __future__ import annotations

import numpy as np

from duckanon.solver.models import all_satisfied
from duckanon.solver.population import population_uniques
from support.risk_checks import class_sizes


def independent_stars(hist, solution):
    """Recount stars from membership, without using the solution's representatives."""
    total = 0
    for g in np.unique(solution.part_group):
        members = solution.part_class[solution.part_group == g]
        counts = solution.part_count[solution.part_group == g]
        varying = sum(len(set(hist.codes[members, j])) > 1 for j in range(hist.m))
        total += varying * counts.sum()
    return total


def assert_valid(hist, solution, models):
    sizes = solution.group_sizes()
    used = sizes > 0
    assert all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used]).all()
    # every row of every class is published exactly once, with its own SA value
    placed = np.zeros_like(hist.sa_counts)
    np.add.at(placed, (solution.part_class, solution.part_sa), solution.part_count)
    assert (placed == hist.sa_counts).all()
    assert solution.stars == independent_stars(hist, solution)


def check_population_uniqueness(published_rows, qi_idx, u, population_size, estimator) -> list[str]:
    """Population uniqueness is an estimate (Pitman, Zayatz, SNB, Dankar's rule): the class sizes
    are counted here from the published rows and handed to duckanon's estimator (tested against
    ARX elsewhere); the release holds when, as ARX accepts it, the estimated share of population
    uniques is in (0, u], or 0 with no sample unique."""
    sizes = class_sizes(published_rows, qi_idx)
    if not sizes:
        return []
    fraction = population_uniques(sizes, population_size, estimator).fraction
    if fraction > 0 and fraction > u * (1 + 1e-12):
        return [f"estimated population uniques {fraction:.6g} > {u}"]
    if fraction == 0 and 1 in sizes:
        return ["no estimate (0) while the release has sample uniques"]
    return []
