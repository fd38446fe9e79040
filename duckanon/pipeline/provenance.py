"""What shaped a release, written on the published table (its comment) and read back by REPORT."""

from __future__ import annotations

import json
from dataclasses import asdict

from duckanon import hierarchy, methods
from duckanon._version import __version__
from duckanon.backends import Backend
from duckanon.pipeline.plan import COUNTS_COMMENT, Plan
from duckanon.names import shown_name
from duckanon.pipeline.result import Summary
from duckanon.sql.options import DELTA_RANGE, EPSILON_LIMIT

# What shaped a release, as the provenance comment, the report and REPORT show it.
RELEASE_PARAMETERS = ("k", "l", "t", "l_variant", "c", "entropy_estimator", "t_distance", "sa_hierarchy", "sa_order", "method",
                      "k_map", "delta_presence", "average_risk", "highest_risk", "population_uniqueness",
                      "sample_uniqueness", "beta_likeness", "beta_variant", "delta_disclosure", "population_size", "estimator",
                      "significance", "weights", "epsilon", "delta", "epsilon_search", "search_steps", "levels",
                      "budget", "dp_k", "dp_beta", "gs_factor")
GENERALIZATION_PARAMETERS = ("hierarchies", "suppression_limit", "metric")


def release_parameters(statement) -> dict:
    """The options that shaped the release: the variants only with the model they qualify."""
    params = {name: getattr(statement, name) for name in RELEASE_PARAMETERS if getattr(statement, name) is not None}
    if statement.l is None:
        params.pop("l_variant", None)
        params.pop("c", None)
        params.pop("entropy_estimator", None)
    if statement.t is None:
        for name in ("t_distance", "sa_hierarchy", "sa_order"):
            params.pop(name, None)
    if statement.beta_likeness is None:
        params.pop("beta_variant", None)
    if statement.population is not None:  # its name is a source's: only that one was used
        params["population"] = "a table (k_map, delta_presence)"
    method = methods.spec(statement.method)
    if method.takes_hierarchies:  # hierarchies = None means "none given": shown as such
        params.update({name: getattr(statement, name) for name in GENERALIZATION_PARAMETERS})
    elif method.recodes and statement.hierarchies is not None:  # auto, mondrian over hierarchies
        params.update(hierarchies=statement.hierarchies, suppression_limit=statement.suppression_limit)
    return params


# What the comment holds (issue 35, item 2). The comment travels with the published table: into
# another database, a file handed to someone who never sees the source. The rule is the
# registry's: nothing derived from the source or the user's side (names, paths, counts,
# checksums, statement text) is written where the source is not. So the comment holds only what
# describes the release itself (its columns, its figures, which anyone holding the file could
# recount) and the options' values that are no name or path of the user's side. The same rule
# holds whether the target is in the source's database or not: one promise is easier to keep,
# and a table copied out later (COPY, ATTACH, EXPORT) keeps its comment. The result row returned
# to the caller and the registry entry beside the source keep everything.
#
# Top level: duckanon (version), qi, sensitive(s), materialize: the release's own columns.
#   roles: published columns only (quasi-identifier, sensitive, keep, "identifier, masked: rule");
#     dropped columns and dropped identifiers are source names that the file does not hold: left out.
#   release_parameters: values of the options (k, l, t, method, risk models, population_size,
#     weights (per published QI), suppression_limit, metric); `population` says only that a table was used.
#   hierarchies: builders (prefix, intervals(5, 10), dates(...), ordered(...)) are parameters and stay;
#     a file or `table(name)` spec becomes its kind (HIERARCHY_FILE, HIERARCHY_TABLE): its path or name is
#     the user's side. sa_hierarchy (a file) likewise.
# summary: kept: published_rows, classes, min_class_size, stars, suppressed_rows (rows published
#     with a star), method, optimal, optimal_for (words from method and options).
#   dropped: rows (the source's row count), removed_rows (source rows not published: with the
#     published rows it is the source's count), lower_bound (a bound on stars over every release of
#     the source: a property of the source, not recountable from the release), dropped (source
#     column names), seconds (how long the source took to read and solve: a measure of its size).
# summary.details: loss and column_loss only without removed rows (a removed row costs 1 over the
#   source's rows: a QI at level 0 has column_loss = removed / source rows, which with the published
#   rows gives the source's count); population_uniqueness only with the population_size option (else
#   its size was the population table's rows, and the estimate over the published class sizes
#   gives it back); k_map's estimate (options only) stays.
#   Otherwise an allow-list (RELEASE_DETAILS); every other key the solvers and the pipeline
#   write is a count of the source's rows, classes or search, or a population count, and is left out:
#   removed_rows, residue_rows, groups, states, patterns, patterns_before_feasibility, integer_variables,
#   kernel_removed, objective, dual_bound, milp_status, milp_message, published_bound,
#   published_milp_status, pattern_milp_optimal, weighted_lower_bound, metric_value,
#   generalization_metric_value, nodes_evaluated, lattice_nodes, search_seconds, seconds, candidates
#   (losses of releases not published), exact_skipped (may count integer variables), registry;
#   population (population_rows, population_only_*, unpublished_*, k_map_level and
#   delta_presence_range all count the population's rows; classes_checked is `classes`).
HIERARCHY_FILE = "<a hierarchy file: its path is not recorded>"
HIERARCHY_TABLE = "<a hierarchy table: its name is not recorded>"
SA_HIERARCHY_FILE = "<a hierarchy file of the sensitive column: its path is not recorded>"
RELEASE_SUMMARY = ("published_rows", "classes", "min_class_size", "stars", "suppressed_rows", "method", "optimal",
                   "optimal_for")
# details that describe the release: its loss, levels and labels, the options the solver ran
# with, the words of how it ran, and risk figures of the published classes
# (not the solver's diagnostics: `exact` can count the integer variables of the source's histogram,
# `sensitive_in_solver` says the histogram was too large, and `time_limit`, `merged_for`, `bound`,
# `tp_phase`, `incumbent_from`, `algorithm` say how the search over the source's classes went)
RELEASE_DETAILS = ("loss", "column_loss", "levels", "metric", "gs_factor", "suppression_limit", "whole_domain_cells", "weights",
                   "weighted_stars", "weights_ignored", "mode_used", "optimal_for", "recoding", "cell_suppression",
                   "average_risk", "population_uniqueness", "sample_uniqueness", "k_map")


def released_hierarchy_spec(spec):
    """A hierarchy spec as the comment holds it: a builder as given, a file or table as its kind."""
    if not isinstance(spec, str):
        return spec
    kind = hierarchy.spec_kind(spec)  # the parser's own test of a builder
    if kind == "file":
        return HIERARCHY_FILE
    return HIERARCHY_TABLE if kind == "table" else spec


def _released_parameters(statement, qi: list[str]) -> dict:
    params = release_parameters(statement)
    hierarchies = params.get("hierarchies")
    if isinstance(hierarchies, dict):  # only the published QIs' (names matched without case)
        published = {c.lower() for c in qi}
        params["hierarchies"] = {name: released_hierarchy_spec(spec) for name, spec in hierarchies.items()
                                 if name.lower() in published}
    elif hierarchies is not None:
        params["hierarchies"] = released_hierarchy_spec(hierarchies)
    if params.get("sa_hierarchy") is not None:
        params["sa_hierarchy"] = SA_HIERARCHY_FILE
    return params


def _released_details(details: dict, statement, summary: Summary) -> dict:
    kept = {name: value for name, value in details.items() if name in RELEASE_DETAILS}
    if summary.removed_rows:  # a removed row costs 1 over the source's rows: a column at level 0 has
        kept.pop("loss", None)  # loss removed / source rows, and so gives away the source's count
        kept.pop("column_loss", None)
    if statement.population_size is None:  # the population size was the population table's rows:
        kept.pop("population_uniqueness", None)  # the estimate, with the published class sizes, gives it back
    if isinstance(kept.get("k_map"), dict) and statement.population_size is None:
        kept["k_map"] = {name: value for name, value in kept["k_map"].items() if name != "population_size"}
    return kept


def release_provenance(plan: Plan, summary: Summary, release: str | None = None) -> dict:
    """What the published table's comment holds (see above): the release, never the source;
    `release` is the release's random id (registry.Recording), which REFRESH checks."""
    statement = plan.statement
    provenance = {"duckanon": __version__, "qi": plan.qi, "sensitive": plan.sensitive}
    if release is not None:
        provenance["release"] = release
    if len(plan.sensitives) > 1:
        provenance["sensitives"] = plan.sensitives
    provenance["roles"] = {column: role for column, role in plan.roles().items()
                           if role not in ("dropped", "identifier, dropped")}
    provenance.update(_released_parameters(statement, plan.qi))
    if plan.counts is not None:
        provenance["materialize"] = "view"
    row = asdict(summary)
    provenance["summary"] = {name: row[name] for name in RELEASE_SUMMARY}
    provenance["summary"]["details"] = _released_details(json.loads(summary.details), statement, summary)
    if statement.epsilon is not None:
        provenance.pop("suppression_limit", None)
        _private_summary(provenance["summary"])
    return provenance


# A private release's comment is part of what it publishes, so it holds only functions of the
# published rows and of the mechanism's outputs (its levels). Stars and loss are not: a label is a
# star when it covers every value of the SOURCE column, and the loss divides by the source's
# domain, so one row the release removed changes them (the DP attack: stars > 0 in 10 of 10 releases
# of a table, 0 in 10 of 10 of its neighbour with one outlier row). The suppression limit is
# duckanon's internal 100%, not an option the user set.
PRIVATE_OMITTED_SUMMARY = ("stars", "suppressed_rows")
PRIVATE_OMITTED_DETAILS = ("whole_domain_cells", "loss", "column_loss", "suppression_limit", "weighted_stars")


def _private_summary(summary: dict) -> None:
    for name in PRIVATE_OMITTED_SUMMARY:
        summary.pop(name, None)
    for name in PRIVATE_OMITTED_DETAILS:
        summary["details"].pop(name, None)
    # the ledger's totals tell how often the source was released, not what this release holds:
    # they stay in the result row and the registry (pipeline/ledger.py), off the published comment
    summary["details"].get("differential_privacy", {}).pop("ledger", None)


def describe_target(backend: Backend, plan: Plan, summary: Summary, release: str | None = None) -> None:
    """The published table's comment says how it was made (release_provenance), so REPORT and a
    privacy officer can read its provenance later."""
    text = "duckanon " + json.dumps(release_provenance(plan, summary, release), default=str, sort_keys=True)
    if plan.counts is None:
        backend.set_comment(plan.target, text)
    else:
        backend.set_comment(plan.target, text, kind="VIEW")
        backend.set_comment(plan.counts, COUNTS_COMMENT + shown_name(plan.target))


def published_provenance(backend: Backend, table) -> dict | None:
    """What `describe_target` wrote on a published table, or None (not made by ANONYMIZE)."""
    comment = backend.table_comment(table)
    if not comment or not comment.startswith("duckanon {"):
        return None
    try:
        provenance = json.loads(comment[len("duckanon "):])
    except ValueError:
        return None
    return provenance if _has_recorded_shape(provenance) else None


# The comment is stored text anyone with write access may edit: what REPORT and the report read
# from it must have the types describe_target writes, or the comment is not taken as duckanon's
# (a level "x" would otherwise reach the report's arithmetic as a Python error). Keys not listed
# are not read as figures; a key may be absent or null.
def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value) -> bool:
    return type(value) is int


def _text(value) -> bool:
    return isinstance(value, str)


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _named(check):
    return lambda value: isinstance(value, dict) and all(isinstance(name, str) and check(item)
                                                         for name, item in value.items())


def _wholes(value) -> bool:
    return isinstance(value, list) and all(type(item) is int for item in value)


_RECORDED_TOP = {
    "duckanon": _text, "qi": _texts, "sensitive": _text, "sensitives": _texts, "roles": _named(_text),
    "method": _text, "metric": _text, "release": _text, "levels": _named(_whole), "weights": _named(_number),
    "k": _whole, "l": _number, "t": _number, "c": _number, "l_variant": _text, "t_distance": _text,
    "epsilon": _number, "delta": _number, "epsilon_search": _number, "search_steps": _whole, "dp_k": _whole,
    "dp_beta": _number, "suppression_limit": _number, "gs_factor": _number, "summary": lambda value: isinstance(value, dict),
}
_RECORDED_SUMMARY = {
    "published_rows": _whole, "classes": _whole, "min_class_size": _whole, "stars": _whole,
    "suppressed_rows": _whole, "method": _text, "optimal": lambda value: isinstance(value, bool),
    "optimal_for": _text, "details": lambda value: isinstance(value, dict),
}
_RECORDED_DETAILS = {
    "loss": _number, "column_loss": _named(_number), "levels": _wholes, "metric": _text,
    "whole_domain_cells": _whole, "suppression_limit": _number, "gs_factor": _number,
}


def _private_fits(provenance: dict) -> bool:
    """A private release's parameters within what a statement accepts (sql/options.py's limits):
    epsilon and delta always there, so a later REPORT never meets a missing delta or an epsilon
    whose e^epsilon overflows."""
    epsilon = provenance.get("epsilon")
    if epsilon is None:
        return True
    search, delta = provenance.get("epsilon_search"), provenance.get("delta")
    beta, k, steps = provenance.get("dp_beta"), provenance.get("dp_k"), provenance.get("search_steps")
    return (0 < epsilon <= EPSILON_LIMIT and _number(delta) and DELTA_RANGE[0] <= delta < DELTA_RANGE[1]
            and (search is None or 0 <= search < epsilon)
            and (beta is None or 0 < beta <= 1) and (k is None or k >= 1) and (steps is None or steps >= 0))


def _has_recorded_shape(provenance) -> bool:
    def fits(record, shapes) -> bool:
        return isinstance(record, dict) and all(record.get(key) is None or check(record[key])
                                                for key, check in shapes.items())
    if not fits(provenance, _RECORDED_TOP) or not _private_fits(provenance):
        return False
    summary = provenance.get("summary")
    if summary is None:
        return True
    details = summary.get("details") if isinstance(summary, dict) else None
    qi, levels = provenance.get("qi"), (details or {}).get("levels") if isinstance(details, dict) else None
    return (fits(summary, _RECORDED_SUMMARY) and (details is None or fits(details, _RECORDED_DETAILS))
            and (levels is None or qi is None or len(levels) == len(qi)))  # one level per QI
