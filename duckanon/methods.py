"""The method registry: every solver method's name and what it takes and promises, in one table.

The front end (option checks), the engine (which inputs to build), EXPLAIN, the report and the
method tables of docs/statement.md and docs/methods.md read this table; the solver binds each
name to the function that runs it (`duckanon.solver.RUNNERS`, built by `bound`: the solver does
not import when a method has no runner). A method that lacks a capability is refused by `refusal`, whose message lists the
methods that have it. The words of the models' options (l_variant, t_distance, beta_variant,
estimator) are here too, once, for the front end's checks and the solver's model classes.

This module imports nothing, so the front end can check a statement without loading the
solvers (numpy, scipy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, TypeVar


@dataclass(frozen=True)
class MethodSpec:
    name: str
    summary: str
    takes_patterns: bool = False  # honours user `patterns` (pattern-guided k-anonymity)
    generalizes: bool = False  # publishes labels (ranges, sets, hierarchy levels), not only '*'
    takes_hierarchies: bool = False  # hierarchies, suppression_limit and metric apply
    exact: bool = False  # proves an optimum (of stars, or of the metric over its search space)
    time_bounded: bool = False  # time_limit stops it with the best valid solution found
    heuristic: bool = False  # one of the cell-suppression heuristics `auto` runs as a portfolio
    recodes: bool = False  # given hierarchies, publishes their labels by local recoding (and a suppression limit)
    # takes conditions on the whole release (average_risk, population_uniqueness): the lattice
    # suppresses classes for them, mondrian stops splitting, the others merge groups
    takes_global: bool = True
    # takes the models that count a population table's rows per class (k_map with population,
    # delta_presence): the lattice counts them for each node's labels
    takes_population: bool = False
    # reads the counts of each of several sensitive columns (their joint values' marginals); the
    # others encode one column's counts (TP's phases, the matching, the MILP's constraints)
    several_sensitive: bool = True
    # solves every k and every model the solver has (False: simplex, 2-anonymity alone; matching, k <= 2)
    any_k: bool = True


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("auto", "matching when it applies, simplex for 2-anonymity alone, else the heuristic portfolio (with l: TP+; with t: carve), "
                       "then exact when its model is small enough; with hierarchies, the lowest-loss of lattice, "
                       "gensup and mondrian over the hierarchies; with a population table, lattice", takes_patterns=True,
               time_bounded=True, recodes=True, takes_population=True),
    MethodSpec("mapprox", "Liang & Yuan's m-approximation for k-anonymity", takes_patterns=True, heuristic=True),
    MethodSpec("greedy", "pattern-guided greedy (Bredereck et al.)", takes_patterns=True, heuristic=True),
    MethodSpec("merge", "merges violating groups into their cheapest partners", heuristic=True),
    MethodSpec("topdown", "top-down refinement of the suppression lattice", heuristic=True),
    MethodSpec("carve", "pattern-ordered greedy on (class, sensitive value) cells", heuristic=True),
    MethodSpec("segments", "the classes sorted by their values, least-entropy column first, cut into the groups of "
                           "fewest stars (linear in rows x columns: for wide tables)", heuristic=True),
    MethodSpec("exact", "mixed ILP of Liang & Yuan on the class histogram (HiGHS)", takes_patterns=True, exact=True,
               time_bounded=True, takes_global=False, several_sensitive=False),
    MethodSpec("dp", "exact subset DP for tiny inputs", takes_patterns=True, exact=True, takes_global=False),
    MethodSpec("matching", "minimum-cost bipartite matching: frequency 2-diversity with two sensitive values",
               exact=True, takes_global=False, several_sensitive=False, any_k=False),
    MethodSpec("simplex", "minimum-cost simplex matching of pairs and triples (LP-dual pruning, HiGHS): optimal "
                          "2-anonymity under cell suppression (with hierarchies: of the summed cells' loss, publishing their labels)",
               exact=True, takes_global=False, several_sensitive=False, any_k=False, recodes=True),
    MethodSpec("tp", "Xiao, Yi & Tao's three-phase algorithm for l-diversity", several_sensitive=False),
    MethodSpec("tp+", "TP, then the Hilbert cut on its residue", several_sensitive=False),
    MethodSpec("hilbert", "Ghinita et al.'s Hilbert-curve baseline"),
    MethodSpec("lattice", "optimal full-domain generalization over the hierarchies' level lattice (beyond 100,000 "
                          "nodes a heuristic search within 1,000 node evaluations)", generalizes=True,
               takes_hierarchies=True, exact=True, time_bounded=True, takes_population=True),
    MethodSpec("mondrian", "LeFevre et al.'s strict multidimensional partitioning (with hierarchies: top-down "
                           "specialization publishing their labels, from the root or from a recoding of "
                           "record subsets)", generalizes=True, time_bounded=True, recodes=True),
    MethodSpec("gensup", "full-domain generalization plus cell suppression of what remains", generalizes=True,
               takes_hierarchies=True, time_bounded=True, takes_global=False),
)}

NAMES = tuple(METHODS)
# The metrics `lattice` and `gensup` minimise (solver/lattice_metrics.py computes them).
LATTICE_METRICS = ("entropy", "loss", "precision", "discernibility", "aecs", "stars", "monotonic_entropy",
                   "monotonic_discernibility")

# How a method without a capability is refused (`refusal`): {name} the method, {thing} what it
# was asked to take (an option or a model), {methods} the methods that have the capability.
REFUSALS = {
    "takes_patterns": "method {name} does not take patterns: use {methods}",
    "takes_global": "method {name} does not take {thing}: use {methods}",
    "takes_population": "method {name} does not take {thing}: use {methods} (the lattice counts the population "
                        "rows of each class)",
    "any_k": "method {name} solves 2-anonymity alone (k = 2 and no other model), not {thing}: use {methods}",
    "several_sensitive": "method {name} reads one sensitive column's counts: with several sensitive columns use "
                         "{methods}",
}

# The words of the models' options, in the order messages list them. The solver's model
# classes are bound to these words (solver/models.py), the estimators' code to theirs
# (solver/population.py).
L_VARIANTS = ("frequency", "distinct", "entropy", "recursive")
# entropy l-diversity's estimators of the entropy (ARX's EntropyLDiversity.EntropyEstimator)
ENTROPY_ESTIMATORS = ("shannon", "grassberger")
T_DISTANCES = ("equal", "ordered", "hierarchical")
BETA_VARIANTS = ("basic", "enhanced")
KMAP_ESTIMATORS = ("poisson", "zero_truncated_poisson")  # ARX's KMap.CellSizeEstimator
UNIQUENESS_ESTIMATORS = ("pitman", "zayatz", "snb", "dankar")  # ARX's PopulationUniquenessModel


def spec(name: str) -> MethodSpec:
    return METHODS[name]


def names(**capabilities: bool) -> tuple[str, ...]:
    """The methods whose flags are as given, e.g. names(generalizes=True)."""
    return tuple(name for name, method in METHODS.items()
                 if all(getattr(method, flag) == wanted for flag, wanted in capabilities.items()))


def either(choices) -> str:
    """'a', 'b' or 'c': the choices as a message lists them."""
    quoted = [f"'{choice}'" for choice in choices]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def having(*capabilities: str) -> tuple[str, ...]:
    """The methods that have any of the flags `capabilities`, in the table's order."""
    return tuple(name for name, method in METHODS.items() if any(getattr(method, flag) for flag in capabilities))


def requirement(option: str, *capabilities: str, why: str = "") -> str:
    """The one line refusing `option` for a method without any of `capabilities`: the option
    needs one of the methods that have one (generated, so a new method is named when it has it)."""
    return f"option {option} needs method = {either(having(*capabilities))}{why}"


def refusal(name: str, capability: str, thing: str = "") -> str:
    """The one line refusing method `name`, which lacks `capability` (a flag of REFUSALS), with
    every method that has it."""
    having_it = names(**{capability: True})
    if capability == "any_k":  # the methods that prove an optimum for every k on stars, and auto
        having_it = ("auto",) + names(any_k=True, exact=True, generalizes=False)
    return REFUSALS[capability].format(name=name, thing=thing, methods=either(having_it))


Bound = TypeVar("Bound")


def bound(runs: Mapping[str, Bound], **capabilities: bool) -> dict[str, Bound]:
    """`runs` (method name -> what runs it) in the table's order, when it has exactly the methods
    whose flags are as given (names(**capabilities)); otherwise a LookupError naming the methods
    without one and the names that are no such method, so a dispatch table with a gap cannot be
    built (the solver's import fails, whatever python's -O)."""
    wanted = names(**capabilities)
    missing = [name for name in wanted if name not in runs]
    extra = [name for name in runs if name not in wanted]
    if missing or extra:
        raise LookupError(f"the dispatch table does not match duckanon.methods: no runner for {missing}, "
                          f"runners of no such method {extra}")
    return {name: runs[name] for name in wanted}
