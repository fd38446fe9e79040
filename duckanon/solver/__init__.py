"""Solver core: pure functions from a class histogram and privacy models to a Solution.

One module per algorithm family: `mapprox` (Liang & Yuan m-approximation), `greedy`
(pattern-guided, Bredereck et al.), `repair` (merging until l/t hold, and the `merge`
heuristic). `solve` runs the requested method, repairs what k-only methods leave violating, and
attaches a proven lower bound where one is known.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.deadline import DeadlineExpired, deadline_passed, deadline_scope, seconds_left
from duckanon.solver.dp import dp
from duckanon.solver.generalize import gensup_solution, lattice_solution, mondrian_solution
from duckanon.solver.exact import HEURISTIC_SHARE, ExactTimeout, ExactTooLarge, exact, prepare, solve_model
from duckanon.solver.heuristics import HEURISTICS, best_heuristic, run_heuristic, whole_table
from duckanon.solver.hilbert import hilbert_solution
from duckanon.solver.histogram import Histogram
from duckanon.solver.matching import matching, matching_not_applicable
from duckanon.solver.models import KAnonymity, LDiversity, PrivacyModel, TCloseness, all_satisfied
from duckanon.solver.partition import Solution, identity_solution
from duckanon.solver.repair import repair
from duckanon.solver.tp import tp_solution

__all__ = ["Histogram", "KAnonymity", "LDiversity", "TCloseness", "Solution", "solve", "METHODS"]

# `auto` tries `exact` when the pruned model has at most this many integer variables, until the
# statement's deadline (time_limit) or for AUTO_TIME_LIMIT seconds when none is given; not when
# less than AUTO_EXACT_MIN_SECONDS are left.
AUTO_EXACT_MAX_INT_VARS = 20_000
AUTO_TIME_LIMIT = 3.0
AUTO_EXACT_MIN_SECONDS = 0.05
# Under a time_limit, a HiGHS run that overruns the time left is stopped this long after it.
AUTO_MILP_GRACE = 0.2
# ... and when building its model looks affordable. Exact enumerates its candidate patterns
# either by one GROUP BY per star set (2^m of them) or by the closure of the classes under meets
# (its size times classes x columns), which includes every meet of two classes. `auto` skips
# exact when both costs exceed this many element operations (about a second): on wide tables
# (40 QIs x 300 rows have ~45,000 distinct pair meets) building the model ran for minutes.
AUTO_ENUMERATION_WORK = 50_000_000
GROUP_BY_OVERHEAD = 2_000  # one small GROUP BY costs about as much as this many elements
AUTO_MEET_PAIRS = 4_000_000  # at most this many class pairs are looked at for that estimate


def _enumeration_too_costly(hist: Histogram) -> bool:
    """Whether exact's pattern enumeration would cost more than AUTO_ENUMERATION_WORK both by
    star sets and by closure (lower bound on the closure's size: the distinct meets of pairs of
    classes); False when undecided."""
    codes = hist.codes[hist.sizes > 0]
    n, m = codes.shape
    if n < 2 or m == 0 or 2.0**m * (n * m + GROUP_BY_OVERHEAD) <= AUTO_ENUMERATION_WORK:
        return False
    limit = AUTO_ENUMERATION_WORK // (n * m)  # closed patterns within budget
    if n > limit:  # the class vectors themselves are closed
        return True
    # at most prod(values + 1) vectors with stars exist: then no closure can be that large
    if np.sum(np.log2(codes.max(axis=0) + 2.0)) <= np.log2(limit):
        return False
    weights = np.random.default_rng(0).integers(1, 2**62, size=m, dtype=np.int64) | 1
    seen = np.zeros(0, dtype=np.int64)
    chunk = max(1, 1_000_000 // (n * m))
    for start in range(0, n, chunk):
        if start * n > AUTO_MEET_PAIRS:
            return False
        if deadline_passed():
            return True  # undecided, and no time left for exact anyway
        block = codes[start:start + chunk]
        meets = np.where(block[:, None, :] == codes[None, :, :], codes[None, :, :] + 1, 0)  # 0: star
        hashes = (meets.reshape(-1, m) * weights).sum(axis=1)  # wraps around: a hash of the vector
        seen = np.union1d(seen, hashes)
        if len(seen) > limit:
            return True
    return False


def _k_of(models) -> int:
    return max([m.k for m in models if isinstance(m, KAnonymity)], default=1)


def _generalizing(run):
    """A generalizing method's runner: no star patterns, and the columns' domains are required."""
    def checked(method, hist, models, patterns, time_limit, domains):
        if patterns is not None:  # they generalize: star patterns do not apply
            raise AnonymizeError(f"method {method} does not take patterns")
        if domains is None:
            raise AnonymizeError(f"method {method} needs the columns' domains (hierarchies, values)")
        return run(hist, models, domains)
    return checked


def _no_patterns(run):
    def checked(method, hist, models, patterns, time_limit, domains):
        if patterns is not None:
            raise AnonymizeError(f"method {method} does not take patterns (use greedy, exact or dp)")
        return run(hist, models)
    return checked


def _hilbert(hist, models):
    solution = repair(hist, hilbert_solution(hist, models), models)
    solution.method = "hilbert"
    return solution


# name -> run(method, hist, models, patterns, time_limit, domains); `auto` is solve's own (below).
# Every name of duckanon.methods but auto has a runner (checked at import).
RUNNERS = {
    **{name: (lambda method, hist, models, patterns, time_limit, domains: run_heuristic(method, hist, models, patterns))
       for name in HEURISTICS},
    "exact": lambda method, hist, models, patterns, time_limit, domains: exact(hist, models, patterns, time_limit=time_limit),
    "dp": lambda method, hist, models, patterns, time_limit, domains: dp(hist, models, patterns),
    "matching": lambda method, hist, models, patterns, time_limit, domains: matching(hist, models, patterns),
    "tp": _no_patterns(lambda hist, models: tp_solution(hist, models, plus=False)),
    "tp+": _no_patterns(lambda hist, models: tp_solution(hist, models, plus=True)),
    "hilbert": _no_patterns(_hilbert),
    "lattice": _generalizing(lambda hist, models, domains: lattice_solution(
        hist, domains.hierarchies, models, domains.suppression_limit, domains.metric)),
    "gensup": _generalizing(lambda hist, models, domains: gensup_solution(
        hist, domains.hierarchies, models, domains.suppression_limit or 0.05, domains.metric)),
    "mondrian": _generalizing(lambda hist, models, domains: mondrian_solution(
        hist, models, domains.values, domains.numeric)),
}
assert set(RUNNERS) | {"auto"} == set(methods.NAMES), "every registered method needs a runner"


def _run(method: str, hist: Histogram, models, patterns, time_limit=None, domains=None) -> Solution:
    runner = RUNNERS.get(method)
    if runner is None:
        raise AnonymizeError(f"unknown method '{method}'")
    return runner(method, hist, models, patterns, time_limit, domains)


METHODS = methods.NAMES
GENERALIZING = methods.names(generalizes=True)
# The methods a time_limit bounds (solve's docstring).
BOUNDED = methods.names(time_bounded=True)


def _auto(hist: Histogram, models, patterns, time_limit, k_bound=None) -> Solution:
    """A polynomial optimum when one applies; else the best heuristic, improved on or proven by
    `exact` when its pruned model is small enough to be proven within the time limit.

    Runs inside solve's deadline scope: with a `time_limit` every step stops at that one deadline
    (the heuristics as heuristics.py says, exact gets what is left), so the limit bounds the
    whole call; without one, exact gets AUTO_TIME_LIMIT seconds."""
    if matching_not_applicable(hist, models, patterns) is None:
        return matching(hist, models, patterns)
    too_costly = patterns is None and _enumeration_too_costly(hist)  # (with patterns: one GROUP BY per pattern)
    left = seconds_left()
    # under a time limit the heuristics get HEURISTIC_SHARE of it when exact may run after them
    share = None if left is None or too_costly else time.perf_counter() + HEURISTIC_SHARE * left
    with deadline_scope(share):
        best = best_heuristic(hist, models, patterns)
    if best.stars == 0:
        return best
    k_bound = k_bound or (lambda: k_anonymity_lower_bound(hist, _k_of(models)))
    if any(isinstance(m, KAnonymity) for m in models) and best.stars <= k_bound():
        return best  # already proven optimal
    if too_costly:
        best.notes["exact_skipped"] = "too many candidate patterns (many quasi-identifiers)"
        return best
    left = seconds_left()
    if left is not None and left < AUTO_EXACT_MIN_SECONDS:
        best.notes["exact_skipped"] = "time limit reached"
        return best
    deadline = None if left is None else time.perf_counter() + left  # the statement's deadline
    try:
        model = prepare(hist, models, patterns, max_pairs=AUTO_EXACT_MAX_INT_VARS, deadline=deadline)
    except ExactTooLarge as error:
        best.notes["exact_skipped"] = str(error)
        return best
    except ExactTimeout:
        best.notes["exact_skipped"] = "time limit reached while building the model"
        return best
    except AnonymizeError:  # a model exact does not support
        return best
    if model.n_int_vars > AUTO_EXACT_MAX_INT_VARS:
        best.notes["exact_skipped"] = f"{model.n_int_vars} integer variables"
        return best
    if deadline is None:  # no time_limit: the MILP gets AUTO_TIME_LIMIT seconds
        deadline = time.perf_counter() + AUTO_TIME_LIMIT
    proven = solve_model(model, incumbent=best, patterns=patterns, deadline=deadline,
                         max_grace=None if left is None else AUTO_MILP_GRACE)
    if proven.optimal or proven.stars < best.stars:
        return proven
    # not proven and no better: keep the heuristic, with exact's proven bound (with user
    # patterns that bound is on pattern stars, not on the heuristic's published stars)
    if proven.lower_bound is not None and not model.pattern_guided:
        best.lower_bound = proven.lower_bound
    best.notes["exact"] = "time limit reached"
    return best


@dataclass
class Domains:
    """What generalization needs beyond the histogram: per QI its values in code order, whether
    it is numeric, and (lattice) its bound hierarchy; the suppression limit and the metric."""

    values: list
    numeric: list
    hierarchies: list | None = None
    suppression_limit: float = 0.0
    metric: str = "entropy"


def solve(
    hist: Histogram, models: list[PrivacyModel], method: str = "auto", patterns=None, time_limit: float | None = None,
    domains: Domains | None = None, deadline: float | None = None,
) -> Solution:
    """Anonymize `hist` under all `models`; the result satisfies every model (checked here).

    `time_limit` (seconds from this call) and/or `deadline` (a time.perf_counter() value, e.g.
    the statement's start plus its time_limit) bound the whole call for `auto` (its heuristics,
    local search and exact attempt; exact gets AUTO_TIME_LIMIT seconds when neither is given),
    `exact`, `lattice` and `gensup` (the lattice search stops with the best node found): the best
    valid solution found by then is returned, with optimal=False (and, for exact, a proven
    lower_bound when one is known). The other methods are single polynomial heuristics and run
    to completion.
    """
    if time_limit is not None:
        limit_deadline = time.perf_counter() + float(time_limit)
        deadline = limit_deadline if deadline is None else min(deadline, limit_deadline)
    total = hist.sa_counts.sum(axis=0)
    for model in models:
        model.check_feasible(total)
    memo = {}

    def k_bound() -> int:  # computed once (it compares every small class with every class)
        if "k" not in memo:
            memo["k"] = k_anonymity_lower_bound(hist, _k_of(models))
        return memo["k"]

    with deadline_scope(deadline if method in BOUNDED else None):
        left = seconds_left()
        try:
            if hist.n_classes == 0:
                solution = identity_solution(hist, method if method != "auto" else "mapprox")
            elif method == "auto":
                solution = _auto(hist, models, patterns, left, k_bound)
            else:
                solution = _run(method, hist, models, patterns, left, domains)
        except DeadlineExpired:  # (an enclosing deadline reached a heuristic run on its own)
            solution = whole_table(hist)

    sizes = solution.group_sizes()
    used = (sizes > 0) & solution.kept_groups  # removed groups (record suppression) are not published
    valid = all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used])
    if not valid.all():  # a bug, never a published violation
        raise AnonymizeError(f"internal error: method {solution.method} produced a group that violates the request")

    if method in GENERALIZING:  # optimality there is about the metric, not about stars
        return solution
    bounds = [solution.lower_bound] if solution.lower_bound is not None else []  # exact/dp/matching
    if any(isinstance(m, KAnonymity) for m in models):
        bounds.append(k_bound())
    elif solution.stars == 0:
        bounds.append(0)
    solution.lower_bound = max(bounds) if bounds else None
    solution.optimal = solution.optimal or (solution.lower_bound is not None and solution.stars <= solution.lower_bound)
    return solution
