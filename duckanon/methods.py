"""The method registry: every solver method's name and what it takes and promises, in one table.

The front end (option checks), the engine (which inputs to build), EXPLAIN, the report and the
method tables of docs/statement.md and docs/methods.md read this table; the solver maps the same names to the functions that run
them (`duckanon.solver.RUNNERS`). This module imports nothing, so the front end can check a
statement without loading the solvers (numpy, scipy).
"""

from __future__ import annotations

from dataclasses import dataclass


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


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("auto", "matching when it applies, else the heuristic portfolio (with l: TP+; with t: carve), "
                       "then exact when its model is small enough; with hierarchies, the lowest-loss of lattice, "
                       "gensup and mondrian over the hierarchies; with a population table, lattice", takes_patterns=True,
               time_bounded=True, recodes=True, takes_population=True),
    MethodSpec("mapprox", "Liang & Yuan's m-approximation for k-anonymity", takes_patterns=True, heuristic=True),
    MethodSpec("greedy", "pattern-guided greedy (Bredereck et al.)", takes_patterns=True, heuristic=True),
    MethodSpec("merge", "merges violating groups into their cheapest partners", heuristic=True),
    MethodSpec("topdown", "top-down refinement of the suppression lattice", heuristic=True),
    MethodSpec("carve", "pattern-ordered greedy on (class, sensitive value) cells", heuristic=True),
    MethodSpec("exact", "mixed ILP of Liang & Yuan on the class histogram (HiGHS)", takes_patterns=True, exact=True,
               time_bounded=True, takes_global=False),
    MethodSpec("dp", "exact subset DP for tiny inputs", takes_patterns=True, exact=True, takes_global=False),
    MethodSpec("matching", "minimum-cost bipartite matching: frequency 2-diversity with two sensitive values",
               exact=True, takes_global=False),
    MethodSpec("tp", "Xiao, Yi & Tao's three-phase algorithm for l-diversity"),
    MethodSpec("tp+", "TP, then the Hilbert cut on its residue"),
    MethodSpec("hilbert", "Ghinita et al.'s Hilbert-curve baseline"),
    MethodSpec("lattice", "optimal full-domain generalization over the hierarchies' level lattice", generalizes=True,
               takes_hierarchies=True, exact=True, time_bounded=True, takes_population=True),
    MethodSpec("mondrian", "LeFevre et al.'s strict multidimensional partitioning (with hierarchies: top-down "
                           "specialization publishing their labels)", generalizes=True, time_bounded=True, recodes=True),
    MethodSpec("gensup", "full-domain generalization plus cell suppression of what remains", generalizes=True,
               takes_hierarchies=True, time_bounded=True, takes_global=False),
)}

NAMES = tuple(METHODS)
# The metrics `lattice` and `gensup` minimise (solver/lattice.py computes them).
LATTICE_METRICS = ("entropy", "loss", "precision", "discernibility", "aecs", "stars")


def spec(name: str) -> MethodSpec:
    return METHODS[name]


def names(**capabilities: bool) -> tuple[str, ...]:
    """The methods whose flags are as given, e.g. names(generalizes=True)."""
    return tuple(name for name, method in METHODS.items()
                 if all(getattr(method, flag) == wanted for flag, wanted in capabilities.items()))
