"""The heuristic portfolio shared by `auto` and by `exact` (whose MILP starts from the best of it).

Under a deadline (the context's: a statement's `time_limit`, or exact's share for its
incumbent) every heuristic's loops check it; one interrupted is dropped (its partial state is no
solution), the ones that finished compete, and the local search stops with the best valid
partition it reached. When the deadline passes before any heuristic finished, the answer is the
whole table as one group: valid whenever the request is feasible (solve checked that). What the
deadline stopped or skipped is recorded with context.cut (context.py). Without a deadline every
heuristic runs to its end and the searches to their count bounds (local.py's passes and rounds).

Attribute weights (`weights`, partition.star_weights: a star's cost per column; None: 1 each)
reach every heuristic and the portfolio's choice: the best is the one of fewest weighted stars.
"""

from __future__ import annotations

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError
from duckanon.solver.context import UNBOUNDED, DeadlineExpired, SolveContext
from duckanon.solver.greedy import EXACT_PATTERN_LIMIT, carving_greedy, greedy
from duckanon.solver.histogram import Histogram
from duckanon.solver.local import CELL_SEARCH_CELL_LIMIT, CELL_SEARCH_CLASS_LIMIT, LOCAL_SEARCH_CLASS_LIMIT, cell_lns, local_search
from duckanon.solver.mapprox import mapprox
from duckanon.solver.partition import Solution, solution_from_class_groups
from duckanon.solver.repair import fold_outside_patterns, merge_classes, repair
from duckanon.solver.request import Request
from duckanon.solver.segments import segments
from duckanon.solver.topdown import topdown
from duckanon.solver.tp import tp_solution

# Above this many classes the quadratic `merge` heuristic is left out of the portfolio.
MERGE_CLASS_LIMIT = 3000
# With l-diversity and more classes than this, the portfolio is TP+ alone: it is linear and
# carries the (l*d) bound, while greedy's pattern search costs seconds per 10k classes.
TP_ONLY_CLASS_LIMIT = 20_000
# With t-closeness and more classes than this, the portfolio is carve and topdown: greedy's
# repair merges are quadratic in the groups it leaves violating.
T_FAST_CLASS_LIMIT = 3000
# With t-closeness on at most CELL_SEARCH_CLASS_LIMIT classes: carve also runs this many times
# with shuffled pattern orders and shares (a fixed seed), and the best two starts are improved
# row by row (local.cell_lns).
CARVE_RESTARTS = 12
CELL_SEARCH_ROW_LIMIT = 1000
# On a wide table (`wide`) with more cells (classes x QI columns) than this, the portfolio is
# `segments` (with l-diversity TP+ beside it): greedy's pattern search, topdown's splits and the
# local search grow with the classes squared or with the patterns (100,000 x 30 cells of random
# values: greedy 12.6 s, topdown 7.7 s, segments 0.5 s, within 0.2% of greedy's stars;
# benchmarks/bench_wide.py).
WIDE_CELL_LIMIT = 3_000_000
# A table of more QIs than this is wide (`wide`: more than EXACT_PATTERN_LIMIT = 2^12 star patterns).
WIDE_QIS = 12


def wide(hist: Histogram) -> bool:
    """More QI columns than greedy enumerates all patterns for (then it draws them from the
    data). There the portfolio leaves `merge` out (merging unique classes stars nearly every
    column, and local search on its few wide groups takes minutes), adds `topdown` (a few
    GROUP BYs per level, good on many columns) and improves only its best start locally."""
    return 2 ** hist.m > EXACT_PATTERN_LIMIT


def large_and_wide(hist: Histogram) -> bool:
    """A wide table with more cells than the quadratic heuristics handle (WIDE_CELL_LIMIT)."""
    return segments_alone(hist.n_classes, hist.m)


def segments_alone(n_classes: int, m: int) -> bool:
    """large_and_wide for these sizes: where auto's portfolio is `segments` (with TP+ under l),
    known before the histogram is fetched (the pipeline keeps the codes compact then)."""
    return 2 ** m > EXACT_PATTERN_LIMIT and n_classes * m > WIDE_CELL_LIMIT


def _mapprox(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    # k alone: the classes of >= k rows unchanged and one extra group (the leftover); with l or
    # t, repair's merges are folded back into one leftover group. (The k-only methods start from
    # groups of the size the models imply; repair does the rest.)
    solution = mapprox(hist, models.min_group_size, weights)
    return fold_outside_patterns(hist, repair(hist, solution, models, context, weights), patterns)


def _greedy(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    # With l or t, the release test can also require them (an extension of Algorithm 1); both
    # variants run and the cheaper one wins.
    k = models.min_group_size
    candidates = [repair(hist, greedy(hist, k, patterns, context=context, weights=weights), models, context, weights)]
    if models.needs_sa:
        candidates.append(repair(hist, greedy(hist, k, patterns, models, context, weights), models, context, weights))
    return min((fold_outside_patterns(hist, s, patterns) for s in candidates), key=lambda s: s.cost(weights))


def _merge(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    return merge_classes(hist, models, context, weights)


def _topdown(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    return repair(hist, topdown(hist, models, context=context, weights=weights), models, context, weights)


def _carve(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    return repair(hist, carving_greedy(hist, models, context, weights=weights), models, context, weights)


def _segments(hist: Histogram, models: Request, patterns, context: SolveContext, weights) -> Solution:
    return repair(hist, segments(hist, models, weights), models, context, weights)


# name -> run(hist, models, patterns, context, weights): one for each heuristic of
# duckanon.methods (heuristic=True), or this module does not import (methods.bound)
RUNS = methods.bound({"mapprox": _mapprox, "greedy": _greedy, "merge": _merge, "topdown": _topdown,
                      "carve": _carve, "segments": _segments}, heuristic=True)
HEURISTICS = tuple(RUNS)


def run_heuristic(method: str, hist: Histogram, models, patterns=None, context: SolveContext = UNBOUNDED,
                  weights=None) -> Solution:
    """One heuristic of the portfolio; one that takes no patterns refuses them (methods.refusal)."""
    if method not in RUNS:
        raise ValueError(f"not a heuristic: {method}")
    if patterns is not None and not methods.spec(method).takes_patterns:
        raise AnonymizeError(methods.refusal(method, "takes_patterns"))
    return RUNS[method](hist, Request.of(models), patterns, context, weights)


def whole_table(hist: Histogram) -> Solution:
    """Every row in one group: valid for every feasible request (all models are closed under
    merging and the whole table satisfies them); the answer when a deadline passes before any
    heuristic finished."""
    solution = solution_from_class_groups(hist, np.arange(hist.n_classes), np.zeros(hist.n_classes, dtype=np.int64),
                                          hist.sizes, "whole table")
    solution.notes["time_limit"] = "reached before any heuristic finished: the whole table is one group"
    return solution


def best_heuristic(hist: Histogram, models, patterns=None, context: SolveContext = UNBOUNDED,
                   weights=None, improve: bool = True) -> Solution:
    """The fewest stars among the heuristics that apply (user patterns: greedy only; l-diversity:
    TP+ too, and TP+ alone on large inputs). Under a deadline (module docstring): the best of
    those that finished in time, improved locally while time is left. `improve=False`: the
    starts alone, without the local and row-level searches (auto's incumbent for exact-first)."""
    models = Request.of(models)
    candidates: list[Solution] = []

    def attempt(name: str, run) -> None:
        if context.expired():
            context.cut(f"heuristic {name} (not started)")
            return
        try:
            candidates.append(run())
        except DeadlineExpired:  # interrupted: no valid solution from it
            context.cut(f"heuristic {name}")

    def best() -> Solution:
        if not candidates:
            return whole_table(hist)
        return min(candidates, key=lambda s: s.cost(weights))  # first wins ties

    diversity = patterns is None and bool(models.diversity)
    if patterns is None and large_and_wide(hist):
        if diversity:
            attempt("tp+", lambda: tp_solution(hist, models, True, context))
        attempt("segments", lambda: run_heuristic("segments", hist, models, None, context, weights))
        solution = best()
        beside = " (TP+ beside it, for l-diversity)" if diversity else ""
        solution.notes["portfolio"] = (f"segments alone{beside}: {hist.n_classes} classes x {hist.m} quasi-identifiers are "
                                       f"more than {WIDE_CELL_LIMIT} cells of a wide table, where the other heuristics "
                                       "grow with the classes squared")
        return solution
    if diversity and hist.n_classes > TP_ONLY_CLASS_LIMIT:
        attempt("tp+", lambda: tp_solution(hist, models, True, context))
        return best()
    closeness = patterns is None and bool(models.closeness)
    if closeness and hist.n_classes > T_FAST_CLASS_LIMIT:
        for name in ("carve", "topdown"):
            attempt(name, lambda name=name: run_heuristic(name, hist, models, None, context, weights))
        return best()
    names = ["greedy"] if patterns is not None else ["mapprox", "greedy"]
    if patterns is None and hist.n_classes <= MERGE_CLASS_LIMIT and not wide(hist):
        names.append("merge")
    if patterns is None and models.needs_sa:
        names += ["topdown", "carve"]
    elif patterns is None and wide(hist):
        names.append("topdown")
    if patterns is None and wide(hist):
        names.append("segments")
    if diversity:  # first: linear, with the (l*d) bound
        attempt("tp+", lambda: tp_solution(hist, models, True, context))
    for name in names:
        attempt(name, lambda name=name: run_heuristic(name, hist, models, patterns, context, weights))
    if improve and patterns is None and hist.n_classes <= LOCAL_SEARCH_CLASS_LIMIT:
        # improve the best few starts by local moves (never worse than the start); on wide
        # tables the best only (the runner-up is far behind there and costs seconds to improve)
        for start in sorted(candidates, key=lambda s: s.cost(weights))[:1 if wide(hist) else 2]:
            if context.expired():
                context.cut("local search (not started)")
                break
            improved = local_search(hist, start, models, context, weights)  # stops at the deadline with a valid partition
            if context.expired():
                context.cut("local search")
            if improved is not None:
                candidates.append(improved)
    if improve and closeness and row_search(hist):
        # t-closeness on a small input: groups that share classes by SA value (module local's
        # cell_lns) reach what moves of whole classes cannot; more carve starts to improve
        rng = np.random.default_rng(0)
        for _ in range(CARVE_RESTARTS):
            attempt("carve restarts", lambda: repair(hist, carving_greedy(hist, models, context, rng, weights), models,
                                                     context, weights))
        starts: list[Solution] = []
        for start in sorted(candidates, key=lambda s: s.cost(weights)):
            if len(starts) == 2:
                break
            if all(start.cost(weights) != other.cost(weights) for other in starts):
                starts.append(start)
        for start in starts:
            if context.expired():
                context.cut("cell search (not started)")
                break
            improved = cell_lns(hist, start, models, context, weights=weights)  # valid at every step, stops at the deadline
            if context.expired():
                context.cut("cell search")
            if improved is not None:
                candidates.append(improved)
    solution = best()
    if patterns is None and wide(hist):
        solution.notes.setdefault("portfolio", f"segments in the portfolio: {hist.m} quasi-identifiers make a wide table "
                                               f"(more than {WIDE_QIS})")
    return solution


def row_search(hist: Histogram) -> bool:
    """Whether the row-level search (local.cell_lns) runs: few rows, classes and (class, SA
    value) cells. Its rounds grow with the number of groups, so it is for the small inputs where
    whole-class moves are furthest from the optimum (bench_tcloseness part 2); `gensup` calls the
    portfolio on many rolled-up histograms of large tables, which it leaves alone."""
    return (hist.n_rows <= CELL_SEARCH_ROW_LIMIT and hist.n_classes <= CELL_SEARCH_CLASS_LIMIT
            and hist.n_classes * hist.sa_counts.shape[1] <= CELL_SEARCH_CELL_LIMIT)
