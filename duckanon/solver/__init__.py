"""Solver core: pure functions from a class histogram and privacy models to a Solution.

One module per algorithm family: `mapprox` (Liang & Yuan m-approximation), `greedy`
(pattern-guided, Bredereck et al.), `repair` (merging until l/t hold, and the `merge`
heuristic), ... `solve` builds the `Request` (request.py: what the models ask, derived once) and
the `SolveContext` (context.py: the deadline and the progress callback), runs the requested
method through its runner in RUNNERS (every runner is `run(problem, context) -> Solution`),
checks the result against every model, and attaches a proven lower bound where one is known.

scipy (HiGHS's LP and MILP, the assignment solver) is imported inside the functions that run
one (exact.py, matching.py, emd.emd_lp, highs_child.py), not when the solver is: a statement
that runs none, or a connection that runs no statement, does not pay its import (about 0.4 s of
CPU, more than the rest of a small statement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError, unknown_name
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.context import DeadlineExpired, SolveContext
from duckanon.solver.dp import dp
from duckanon.solver.generalize import gensup_solution, lattice_solution, mondrian_solution
from duckanon.solver.exact import ExactModel, ExactTimeout, ExactTooLarge, WorkBudget, exact, prepare, solve_model
from duckanon.solver.heuristics import HEURISTICS, best_heuristic, row_search, run_heuristic, whole_table
from duckanon.solver.hierarchical import hierarchical_solution
from duckanon.solver.hilbert import hilbert_solution
from duckanon.solver.histogram import Histogram
from duckanon.solver.matching import matching, matching_not_applicable
from duckanon.solver.models import (KAnonymity, LDiversity, OnAttribute, PrivacyModel, TCloseness, all_satisfied,
                                    globally_satisfied, l_diversity, t_closeness)
from duckanon.solver.partition import Solution, identity_solution, star_weights
from duckanon.solver.repair import merge_until_global, repair
from duckanon.solver.request import Domains, Instance, Request
from duckanon.solver.simplex import simplex, simplex_not_applicable, simplex_with_hierarchies
from duckanon.solver.tp import tp_solution

__all__ = ["Histogram", "KAnonymity", "LDiversity", "TCloseness", "l_diversity", "t_closeness", "Request",
           "SolveContext", "Domains", "Solution", "solve", "METHODS"]

# `auto` tries `exact` when the pruned model has at most this many integer variables, under
# AUTO_MILP_BUDGET (counts, not seconds: the same release whatever the load; exact.WorkBudget),
# and, with a time_limit, until the statement's deadline; not when less than
# AUTO_EXACT_MIN_SECONDS are left of it.
AUTO_EXACT_MAX_INT_VARS = 20_000
# (chosen so that on an idle machine it costs about what the 3 s wall-clock limit it replaces did:
# the MILP's root alone took 5-13 s of CPU on models of 2,000-9,600 integer variables)
AUTO_MILP_BUDGET = WorkBudget(nodes=200, lp_iterations=5_000, max_int_vars=1_500)
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


def _enumeration_too_costly(hist: Histogram, context: SolveContext) -> bool:
    """Whether exact's pattern enumeration would cost more than AUTO_ENUMERATION_WORK both by
    star sets and by closure (lower bound on the closure's size: the distinct meets of pairs of
    classes); False when undecided."""
    occupied = hist.sizes > 0
    n, m = int(occupied.sum()), hist.m
    if n < 2 or m == 0 or 2.0**m * (n * m + GROUP_BY_OVERHEAD) <= AUTO_ENUMERATION_WORK:
        return False
    limit = AUTO_ENUMERATION_WORK // (n * m)  # closed patterns within budget
    if n > limit:  # the class vectors themselves are closed (decided before the codes are read)
        return True
    codes = hist.codes[occupied]
    # at most prod(values + 1) vectors with stars exist: then no closure can be that large
    if np.sum(np.log2(codes.max(axis=0) + 2.0)) <= np.log2(limit):
        return False
    weights = np.random.default_rng(0).integers(1, 2**62, size=m, dtype=np.int64) | 1
    seen = np.zeros(0, dtype=np.int64)
    chunk = max(1, 1_000_000 // (n * m))
    for start in range(0, n, chunk):
        if start * n > AUTO_MEET_PAIRS:
            return False
        if context.expired():
            context.cut("exact (not started)")
            return True  # undecided, and no time left for exact anyway
        block = codes[start:start + chunk]
        meets = np.where(block[:, None, :] == codes[None, :, :], codes[None, :, :] + 1, 0)  # 0: star
        hashes = (meets.reshape(-1, m) * weights).sum(axis=1)  # wraps around: a hash of the vector
        seen = np.union1d(seen, hashes)
        if len(seen) > limit:
            return True
    return False


def _stars(problem: Instance):
    """A star's cost per column for the cell-suppression methods: the attribute weights, or None
    when there are none or all are equal (partition.star_weights)."""
    return star_weights(problem.weights)


def _k_bound(problem: Instance) -> int | float:
    """The proven lower bound on the (weighted) stars that k-anonymity implies, computed once per
    problem: it compares every small class with every class (auto reads it, then solve)."""
    if "k_bound" not in problem.memo:
        problem.memo["k_bound"] = k_anonymity_lower_bound(problem.hist, problem.request.k, _stars(problem))
    return problem.memo["k_bound"]


def _heuristic(method: str):
    return lambda problem, context: run_heuristic(method, problem.hist, problem.request, problem.patterns, context,
                                                  _stars(problem))


def _exact(problem: Instance, context: SolveContext) -> Solution:
    return exact(problem.hist, problem.request, problem.patterns, context=context, weights=_stars(problem))


def _dp(problem: Instance, context: SolveContext) -> Solution:
    return dp(problem.hist, problem.request, problem.patterns, weights=_stars(problem))


def _matching(problem: Instance, context: SolveContext) -> Solution:
    return matching(problem.hist, problem.request, problem.patterns, _stars(problem))


def _simplex(problem: Instance, context: SolveContext) -> Solution:
    domains = problem.domains
    if domains is not None and domains.recode:  # the user's hierarchies: publish their labels
        if problem.patterns is not None:
            raise AnonymizeError(methods.refusal("simplex", "takes_patterns"))
        return simplex_with_hierarchies(problem.hist, domains.hierarchies, problem.request,
                                        domains.suppression_limit, problem.weights)
    return simplex(problem.hist, problem.request, problem.patterns, _stars(problem))


def _tp(problem: Instance, context: SolveContext) -> Solution:
    return tp_solution(problem.hist, problem.request, False, context)


def _tp_plus(problem: Instance, context: SolveContext) -> Solution:
    return tp_solution(problem.hist, problem.request, True, context)


def _hilbert(problem: Instance, context: SolveContext) -> Solution:
    solution = repair(problem.hist, hilbert_solution(problem.hist, problem.request), problem.request, context,
                      _stars(problem))
    solution.method = "hilbert"
    return solution


def _lattice(problem: Instance, context: SolveContext) -> Solution:
    domains = problem.domains
    return lattice_solution(problem.hist, domains.hierarchies, problem.request, domains.suppression_limit,
                            domains.metric, context, domains.population, problem.weights, domains.stable_levels,
                            domains.gs_factor)


def _gensup(problem: Instance, context: SolveContext, beat: float | None = None) -> Solution:
    def suppress(rolled: Histogram, inner: SolveContext) -> Solution:
        return _solve(Instance(rolled, problem.request, weights=problem.weights, simplex_first=False), "auto", inner)

    domains = problem.domains
    return gensup_solution(problem.hist, domains.hierarchies, problem.request, domains.suppression_limit or 0.05,
                           domains.metric, suppress=suppress, context=context, weights=problem.weights, beat=beat)


def _mondrian(problem: Instance, context: SolveContext) -> Solution:
    domains = problem.domains
    if domains.recode:  # the user's hierarchies: publish their labels
        return hierarchical_solution(problem.hist, domains.hierarchies, problem.request, domains.suppression_limit,
                                     context, problem.weights)
    return mondrian_solution(problem.hist, problem.request, domains.values, domains.numeric, context, problem.weights)


def _lowest_loss_recoding(problem: Instance, context: SolveContext) -> Solution:
    """`auto` with hierarchies: every method that publishes the hierarchies' labels (the optimal
    full-domain node, the top-down local recoding, gensup), and the one of lowest ARX Loss; among
    equal losses the first in that order. A method that finds no valid output within the
    suppression limit is left out. Without a time_limit each runs to the end of its count
    bounds (lattice: every node decided; mondrian: its splits and REFINE_PASSES passes of class
    moves; gensup: its limits' lattice searches and cell suppressions, which run `auto` under its
    work budgets). With one they run in that order until the deadline: each stops at it with a
    valid output, and one not started by then is skipped ("time limit reached"). gensup's cell
    suppressions are not run when its lower bound is not below the lowest loss of the two before
    it (details.candidates says "not run: ..." with that bound): it could not be published."""
    domains = problem.domains
    candidates = []
    losses = {}
    searched = None  # the lattice candidate's heuristic search, if it ran one
    for name, run, loss_of in (
            ("lattice", lambda: lattice_solution(problem.hist, domains.hierarchies, problem.request,
                                                 domains.suppression_limit, "loss", context, weights=problem.weights),
             lambda solution: solution.notes["metric_value"]),
            ("mondrian", lambda: _mondrian(problem, context), lambda solution: solution.notes["metric_value"]),
            # gensup last, and only when its bound says it could publish less than the lowest loss
            # so far (on the harness's 20 cases it never did; its cell suppressions took 33-44% of
            # the statement's time)
            ("gensup", lambda: _gensup(problem, context, beat=min(candidates)[0] if candidates else None),
             lambda solution: solution.notes["loss"])):
        if candidates and context.expired():
            losses[name] = "time limit reached"
            context.cut(f"candidate {name} (not started)")
            continue
        try:
            solution = run()
        except AnonymizeError as refused:  # e.g. no node within the suppression limit
            losses[name] = str(refused)
            continue
        losses[name] = round(float(loss_of(solution)), 12)
        candidates.append((losses[name], len(candidates), solution))
        if name == "lattice" and solution.notes.get("search") == "heuristic":  # (EXPLAIN says why)
            searched = {key: solution.notes[key] for key in ("search", "search_reason", "evaluation_bound",
                                                             "nodes_evaluated")}
    if not candidates:
        raise AnonymizeError("no method publishes the hierarchies' labels within the suppression limit")
    best = min(candidates, key=lambda candidate: candidate[:2])[2]
    best.notes["candidates"] = losses
    shown = ", ".join(f"{name} {loss:.4g}" if isinstance(loss, float) else f"{name}: {loss}"
                      for name, loss in losses.items())
    best.notes["choice"] = f"with hierarchies the lowest ARX Loss of {shown}" + (
        f"; {best.method}: {best.notes['recoding']}" if "recoding" in best.notes else "")
    if isinstance(losses.get("gensup"), float) and simplex_not_applicable(problem.hist, problem.request) is None:
        best.notes["choice"] += "; gensup's cell suppression without simplex (simplex is not bounded by work)"
    if searched is not None and "search" not in best.notes:
        best.notes["lattice_search"] = searched
    best.method = f"auto: {best.method}"
    return best


def _held_on_published_classes(hist: Histogram, solution: Solution, request: Request, context: SolveContext,
                               weights) -> Solution:
    """A reader sees classes, not the solver's groups: two groups that publish the same vector are
    one class, and a model that is not closed under merging (delta-disclosure) or holds on the
    whole release (average risk, population uniqueness) must hold on those. The groups are merged
    into their published classes; cell suppression then merges further (merge_until_global for the
    global models, repair for the others) until they hold, each round leaving fewer classes, so it
    ends; a generalization that breaks them there is refused by solve()'s check."""
    solution = solution.coalesced()
    if solution.group_labels is not None:
        return solution
    for _ in range(len(solution.group_rep) + 1):
        if request.global_models:
            solution = merge_until_global(hist, solution, request, context, weights)
        solution = repair(hist, solution, request, context, weights).coalesced()
        if _holds(hist, solution, request):
            break
    return solution


def _holds(hist: Histogram, solution: Solution, request: Request) -> bool:
    """Whether every published group meets every model, and the release the global ones (removed
    groups, record suppression, are not published)."""
    sizes = solution.group_sizes()
    used = (sizes > 0) & solution.kept_groups
    group_sa = solution.group_sa(hist.sa_counts.shape[1])[used]
    population = None if solution.group_population is None else solution.group_population[used]
    return bool(all_satisfied(request, sizes[used], group_sa, population).all()) and \
        globally_satisfied(request, sizes[used], group_sa)


def refusal(method: str, request: Request) -> str | None:
    """Why `method` cannot honour the request's models (one line listing the methods that can),
    or None: the population models are counted by the lattice only, the global ones are not taken
    by the methods whose formulation has no place for them, and the models of several sensitive
    columns not by those that encode one column's counts (methods.MethodSpec)."""
    spec = methods.spec(method)
    population = next((m for m in request if m.needs_population), None)
    if population is not None and not spec.takes_population:
        return methods.refusal(method, "takes_population", str(population))
    whole = next(iter(request.global_models), None)
    if whole is not None and not spec.takes_global:
        return methods.refusal(method, "takes_global", str(whole))
    if request.of_type(OnAttribute) and not spec.several_sensitive:
        return methods.refusal(method, "several_sensitive")
    return None


def _run(method: str, problem: Instance, context: SolveContext) -> Solution:
    """`method`'s runner on `problem`, after the checks its flags ask for: user patterns for a
    method that takes none are refused (an empty table too), a generalizing method needs the
    columns' domains. An empty table publishes nothing, whatever the method."""
    spec = methods.spec(method)
    if problem.patterns is not None and not spec.takes_patterns:
        raise AnonymizeError(methods.refusal(method, "takes_patterns"))
    if problem.hist.n_classes == 0:
        return identity_solution(problem.hist, method if method != "auto" else "mapprox")
    if spec.generalizes and problem.domains is None:
        raise AnonymizeError(f"method {method} needs the columns' domains (hierarchies, values)")
    return RUNNERS[method](problem, context)


def _auto(problem: Instance, context: SolveContext) -> Solution:
    """`auto`: with a population table the lattice (the one method that counts the population's
    rows per class); with the user's hierarchies the lowest-loss recoding; else _cell_suppression."""
    if problem.request.needs_population:
        solution = _run("lattice", problem, context)
        solution.method = "auto: lattice"
        return solution
    if problem.domains is not None and problem.domains.recode:
        return _lowest_loss_recoding(problem, context)
    return _cell_suppression(problem, context)


def _cell_suppression(problem: Instance, context: SolveContext) -> Solution:
    """`auto` on stars: a polynomial optimum when one applies; on small inputs exact first
    (_exact_first), its answer at once when it proves it optimal; else the best heuristic,
    improved on or proven by `exact` when its pruned model is small enough
    (AUTO_EXACT_MAX_INT_VARS), under AUTO_MILP_BUDGET, and the better of that and exact-first's.

    Without a deadline nothing here reads the clock: the heuristics run to their ends and their
    searches to their count bounds, exact to its work budget. With one (time_limit) every step
    also stops at it (the heuristics as heuristics.py says, exact gets what is left), and what it
    stopped is recorded in the context's cuts."""
    hist, request, patterns = problem.hist, problem.request, problem.patterns
    weights = _stars(problem)  # (None: unweighted stars, or all weights equal)
    if matching_not_applicable(hist, request, patterns) is None:
        return matching(hist, request, patterns, weights)
    if _simplex_first(problem, context):
        try:
            solution = simplex(hist, request, patterns, weights)
        except AnonymizeError:  # no cover within its bounds (simplex.py): the portfolio runs
            solution = None
        if solution is not None:
            solution.method = "auto: simplex"
            if solution.optimal:
                return solution
            return _better(solution, best_heuristic(hist, request, patterns, context, weights), weights)
    too_costly = patterns is None and _enumeration_too_costly(hist, context)  # (with patterns: one GROUP BY per pattern)
    model = _AutoModel(problem)
    first = None if too_costly else _exact_first(problem, context, model)
    if first is not None and first.optimal:
        return first
    best = best_heuristic(hist, request, patterns, context, weights)
    solution = _prove(problem, best, too_costly, context, first, model)
    return solution if first is None else _better(solution, first, weights)


# `auto` runs `simplex` on 2-anonymity alone (no other model, no patterns, no time_limit: it is not
# time-bounded; not inside gensup: Instance.simplex_first) when at most this many classes hold fewer than 2 rows, and at most
# AUTO_SIMPLEX_MAX_CLASSES classes in all (its LP scans every pair of classes)
AUTO_SIMPLEX_MAX_SINGLETONS = 2_000
AUTO_SIMPLEX_MAX_CLASSES = 10_000


def _simplex_first(problem: Instance, context: SolveContext) -> bool:
    hist = problem.hist
    return problem.simplex_first and context.seconds_left() is None and simplex_not_applicable(hist, problem.request, problem.patterns) is None \
        and hist.n_classes <= AUTO_SIMPLEX_MAX_CLASSES and int((hist.sizes < 2).sum()) <= AUTO_SIMPLEX_MAX_SINGLETONS


def _prove(problem: Instance, best: Solution, too_costly: bool, context: SolveContext,
           first: Solution | None, model: _AutoModel) -> Solution:
    """The portfolio's `best`, improved on or proven by exact under AUTO_MILP_BUDGET. After an
    unproven exact-first, on the model it built, and only when the portfolio found fewer stars
    than it did: then HiGHS looks for fewer than the portfolio's (else exact-first's answer and
    bound stand: on 30 Adult samples a second MILP never beat them there and cost 4-11 s); not
    at all when exact-first's bound proves `best`."""
    hist, request, patterns = problem.hist, problem.request, problem.patterns
    weights = _stars(problem)
    if best.stars == 0:
        return best
    if request.k_anonymity and _within(best.cost(weights), _k_bound(problem)):
        return best  # already proven optimal
    if first is not None and _proven_bound(first, weights) is not None \
            and _within(best.cost(weights), _proven_bound(first, weights)):
        return best  # exact-first's bound proves it (_better carries the bound over)
    if too_costly:
        best.notes["exact_skipped"] = "too many candidate patterns (many quasi-identifiers)"
        return best
    left = context.seconds_left()
    if left is not None and left < AUTO_EXACT_MIN_SECONDS:
        best.notes["exact_skipped"] = "time limit reached"
        context.cut("exact (not started)")
        return best
    deadline = None if left is None else time.perf_counter() + left  # the statement's deadline
    try:
        built = model.build(deadline)
    except ExactTooLarge as error:
        best.notes["exact_skipped"] = str(error)
        return best
    except ExactTimeout:
        best.notes["exact_skipped"] = "time limit reached while building the model"
        context.cut("exact model")
        return best
    except AnonymizeError:  # a model exact does not support
        return best
    if built.n_int_vars > AUTO_EXACT_MAX_INT_VARS:
        best.notes["exact_skipped"] = f"{built.n_int_vars} integer variables"
        return best
    if first is not None and model.solved_first and first.cost(weights) <= best.cost(weights):
        proven = first  # exact-first's MILP already found as good
    else:
        proven = solve_model(built, incumbent=best, patterns=patterns, deadline=deadline,
                             max_grace=None if left is None else AUTO_MILP_GRACE, context=context,
                             budget=AUTO_MILP_BUDGET)
    if proven.optimal or proven.cost(weights) < best.cost(weights):
        return proven
    # not proven and no better: keep the heuristic, with exact's proven bound (with user
    # patterns that bound is on pattern stars, not on the heuristic's published stars)
    if proven.lower_bound is not None and not built.pattern_guided:
        best.lower_bound = proven.lower_bound
    if proven.notes.get("weighted_lower_bound") is not None and not built.pattern_guided:
        best.notes["weighted_lower_bound"] = proven.notes["weighted_lower_bound"]
    message = str(proven.notes.get("milp_message", ""))
    best.notes["exact"] = "time limit reached" if "time limit" in message.lower() else message
    if proven.notes.get("milp_budget") is not None:
        best.notes["milp_budget"] = proven.notes["milp_budget"]
    return best


# `auto` sends small inputs to exact first (_exact_first): the ones heuristics.row_search admits
# (at most 1,000 rows and 300 classes; there the portfolio's row-level search costs seconds),
# without user patterns, under models the MILP encodes whose groups are the release (no global
# model, closed under merging), when the pruned model has at most AUTO_MILP_BUDGET.max_int_vars
# integer variables (so its MILP runs). With a time_limit it gets this share of the time left.
AUTO_EXACT_FIRST_SHARE = 0.5


class _AutoModel:
    """exact's model of one `auto` run, built at most once: exact-first and _prove ask for the same
    one (no patterns: exact-first runs only without them; prepare's model does not depend on
    max_pairs, which only refuses), and on 100 classes x 30 columns it was built twice. A refusal
    (ExactTooLarge, a model exact does not support) is kept too; a timeout is not, since _prove's
    deadline is later than exact-first's share. `solved_first`: exact-first ran its MILP on it."""

    def __init__(self, problem: Instance):
        self.problem = problem
        self.solved_first = False
        self._built: ExactModel | AnonymizeError | None = None

    def build(self, deadline: float | None) -> ExactModel:
        if self._built is None:
            problem = self.problem
            try:
                self._built = prepare(problem.hist, problem.request, problem.patterns, max_pairs=AUTO_EXACT_MAX_INT_VARS,
                                      deadline=deadline, weights=_stars(problem))
            except ExactTimeout:
                raise
            except AnonymizeError as error:
                self._built = error
        if isinstance(self._built, AnonymizeError):
            raise self._built
        return self._built


def _exact_first(problem: Instance, context: SolveContext, model: _AutoModel) -> Solution | None:
    """On a small input (AUTO_EXACT_FIRST_SHARE's comment), exact under AUTO_MILP_BUDGET with
    the portfolio's starts (best_heuristic without its searches) as incumbent; that incumbent
    alone when it has no stars or meets the k-anonymity bound (then marked optimal). None when it
    does not apply, or when the model has more integer variables than AUTO_MILP_BUDGET's MILP
    takes (`model` keeps it for _prove)."""
    hist, request = problem.hist, problem.request
    left = context.seconds_left()
    if problem.patterns is not None or not row_search(hist) or request.not_milp_encodable is not None \
            or not request.group_only or not request.closed_under_merging \
            or (left is not None and left < AUTO_EXACT_MIN_SECONDS):
        return None
    deadline = None if left is None else time.perf_counter() + AUTO_EXACT_FIRST_SHARE * left
    inner = context.narrowed(deadline)
    weights = _stars(problem)
    start = best_heuristic(hist, request, None, inner, weights, improve=False)
    if start.stars == 0 or (request.k_anonymity and _within(start.cost(weights), _k_bound(problem))):
        start.optimal = True
        return start
    budget = AUTO_MILP_BUDGET.max_int_vars
    try:
        built = model.build(deadline)
    except ExactTimeout:
        context.cut("exact model")
        return None
    except AnonymizeError:  # too large (ExactTooLarge), or a model exact does not support
        return None
    if budget is not None and built.n_int_vars > budget:
        return None
    model.solved_first = True
    return solve_model(built, incumbent=start, deadline=deadline,
                       max_grace=None if left is None else AUTO_MILP_GRACE, context=inner, budget=AUTO_MILP_BUDGET)


def _proven_bound(solution: Solution, weights):
    """The proven lower bound a solution carries on the cost auto minimises (weighted stars under
    differing weights: notes["weighted_lower_bound"]), or None."""
    return solution.lower_bound if weights is None else solution.notes.get("weighted_lower_bound")


def _better(solution: Solution, other: Solution, weights) -> Solution:
    """The cheaper of two valid solutions of one problem (`solution` on ties), with the higher of
    their proven lower bounds."""
    if other.cost(weights) < solution.cost(weights):
        solution, other = other, solution
    bound, bounds = _proven_bound(solution, weights), _proven_bound(other, weights)
    if bounds is not None and (bound is None or bounds > bound):
        if weights is None:
            solution.lower_bound = bounds
        else:
            solution.notes["weighted_lower_bound"] = bounds
    return solution


# name -> run(problem, context) -> Solution, for every method of duckanon.methods (methods.bound
# refuses to build it with one missing: then the solver does not import). solve and _run read it.
Runner = Callable[[Instance, SolveContext], Solution]
RUNNERS: dict[str, Runner] = methods.bound({
    "auto": _auto, **{name: _heuristic(name) for name in HEURISTICS}, "exact": _exact, "dp": _dp,
    "matching": _matching, "simplex": _simplex, "tp": _tp, "tp+": _tp_plus, "hilbert": _hilbert, "lattice": _lattice,
    "mondrian": _mondrian, "gensup": _gensup,
})
METHODS = tuple(RUNNERS)
GENERALIZING = methods.names(generalizes=True)
# The methods a time_limit bounds (solve's docstring).
BOUNDED = methods.names(time_bounded=True)


def solve(
    hist: Histogram, models: list[PrivacyModel], method: str = "auto", patterns=None, time_limit: float | None = None,
    domains: Domains | None = None, deadline: float | None = None,
    progress: Callable[[str, dict], None] | None = None, weights=None,
) -> Solution:
    """Anonymize `hist` under all `models`; the result satisfies every model (checked here).

    Without `time_limit` and `deadline` nothing reads the clock: every method is bounded by
    counts (auto's exact by AUTO_MILP_BUDGET), so the same input gives the same solution
    whatever the load. `time_limit` (seconds from this call) and/or `deadline` (a
    time.perf_counter() value, e.g. the statement's start plus its time_limit) also bound the
    whole call for `auto` (its heuristics, local search, exact attempt and, with hierarchies,
    its candidates), `exact`, `lattice`, `gensup` and `mondrian` (the searches stop with the
    best valid state found): the best valid solution found by then is returned, with
    optimal=False unless proven (and, for exact, a proven lower_bound when one is known), and
    notes["time_limit_cut"] lists the phases the deadline stopped or skipped. The other methods are single polynomial heuristics and run
    to completion. `progress(phase, info)`, when given, hears the long phases (the lattice's
    nodes, exact's bounds). `weights` (one positive number per QI, None: all 1) are ARX's attribute
    weights: how much a column's information loss or stars count (see `weights` in docs/statement.md).
    The lattice's metrics and the loss weigh each column as ARX does (normalised by the largest
    weight); the cell-suppression methods minimise the weighted stars, sum of stars x their
    column's weight. With weights that differ, `optimal` is about weighted stars, `lower_bound`
    (about stars) is None and the proven bound is notes["weighted_lower_bound"]; the notes hold
    the weights and the release's `weighted_stars` (user's weights) in every case.
    """
    if time_limit is not None:
        limit_deadline = time.perf_counter() + float(time_limit)
        deadline = limit_deadline if deadline is None else min(deadline, limit_deadline)
    context = SolveContext(deadline if method in BOUNDED else None, progress)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if len(weights) != hist.m or not (weights > 0).all() or not np.isfinite(weights).all():
            raise AnonymizeError(f"weights: one positive number per quasi-identifier ({hist.m}), "
                                 f"got {weights.tolist()}")
    solution = _solve(Instance(hist, Request.of(models), patterns, domains, weights), method, context)
    if context.cuts:  # what the time_limit stopped or skipped (context.py); never without one
        solution.notes["time_limit_cut"] = list(context.cuts)
    if weights is not None:
        names = hist.columns if len(hist.columns) == hist.m else [str(j) for j in range(hist.m)]
        solution.notes["weights"] = {name: float(w) for name, w in zip(names, weights.tolist())}
        solution.notes["weighted_stars"] = solution.weighted_stars(weights)
    return solution


def _within(value: float, bound) -> bool:
    """value <= bound, up to a relative 1e-9 for weighted (float) costs."""
    return value <= bound + 1e-9 * max(1.0, abs(float(bound)))


def _weighted_bounds(solution: Solution, request: Request, weights: np.ndarray, k_bound) -> Solution:
    """Under attribute weights that differ, optimality is about weighted stars: the bound a
    method proved on them (exact, dp, matching: notes["weighted_lower_bound"]), the weighted
    k-anonymity bound, and 0; `lower_bound`, about unweighted stars, is None (a bound on stars
    proves nothing about the weighted optimum)."""
    cost = solution.weighted_stars(weights)
    bounds = [solution.notes["weighted_lower_bound"]] if solution.notes.get("weighted_lower_bound") is not None else []
    if request.k_anonymity:
        bounds.append(k_bound())
    elif cost == 0:
        bounds.append(0.0)
    lower = max(bounds) if bounds else None
    solution.lower_bound = None
    if lower is not None:
        solution.notes["weighted_lower_bound"] = min(float(lower), cost)
    solution.optimal = bool(solution.optimal) or (lower is not None and _within(cost, lower))
    return solution


def _solve(problem: Instance, method: str, context: SolveContext) -> Solution:
    """`solve` on a built problem under a context (gensup's cell suppression runs it too)."""
    if method not in RUNNERS:
        raise AnonymizeError(unknown_name("method", method, METHODS))
    hist, request = problem.hist, problem.request
    weights = _stars(problem)
    total = hist.sa_counts.sum(axis=0)
    for model in request:
        model.check_feasible(total)
    refused = refusal(method, request)
    if refused:
        raise AnonymizeError(refused)
    try:
        solution = _run(method, problem, context)
    except DeadlineExpired:  # (the deadline reached a heuristic run on its own)
        context.cut(f"method {method}")
        solution = whole_table(hist)

    if request.global_models or not request.closed_under_merging:
        solution = _held_on_published_classes(hist, solution, request, context, weights)
    if not _holds(hist, solution, request):  # a bug, never a published violation
        raise AnonymizeError(f"internal error: method {solution.method} produced a group that violates the request")

    if method in GENERALIZING or solution.group_labels is not None:  # optimality is about the metric, not stars
        return solution
    if weights is not None:
        return _weighted_bounds(solution, request, weights, lambda: _k_bound(problem))
    bounds = [solution.lower_bound] if solution.lower_bound is not None else []  # exact/dp/matching
    if request.k_anonymity:
        bounds.append(_k_bound(problem))
    elif solution.stars == 0:
        bounds.append(0)
    solution.lower_bound = max(bounds) if bounds else None
    solution.optimal = solution.optimal or (solution.lower_bound is not None and solution.stars <= solution.lower_bound)
    return solution
