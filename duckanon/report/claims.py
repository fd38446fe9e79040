"""What the report says about the release in words: what was published, which options mattered,
what is proven optimal, and why a divergence is infinite.

The sentences are tested word for word and the shell prints the same optimality claim, so each is
built in one place from the release's facts (see `release`).
"""

from __future__ import annotations

import math

from duckanon import methods
from duckanon.pipeline.provenance import HIERARCHY_FILE, HIERARCHY_TABLE, SA_HIERARCHY_FILE
from duckanon.report.markup import escape, format_value, percent, rows_text
from duckanon.solver.population import ESTIMATORS as UNIQUENESS_ESTIMATORS, KMAP_SIGNIFICANCE

LATTICE_LIKE = methods.names(takes_hierarchies=True)  # hierarchies, suppression_limit and metric apply

METRIC_WORDS = {"entropy": "entropy", "loss": "loss", "precision": "precision loss",
                "discernibility": "discernibility", "aecs": "average class size", "stars": "number of stars",
                "monotonic_entropy": "monotonic entropy", "monotonic_discernibility": "monotonic discernibility (DM*)"}


def release(params: dict, summary: dict, details: dict, counts: dict) -> dict:
    """What was published, merged from the statement's options, the summary row, its details and
    the tables themselves (a REPORT of an older table may lack some of the summary's fields)."""
    method = summary.get("method") or params.get("method")
    lattice_like = ran(method) in LATTICE_LIKE or params.get("method") in LATTICE_LIKE
    limit = params.get("suppression_limit")
    if limit is None:
        limit = details.get("suppression_limit")
    if params.get("epsilon") is not None:  # every class below the derived k is removed: no limit was set
        limit = None
    if params.get("epsilon") is not None:
        # a private release: the original's row count and how many rows were sampled or removed are
        # exact functions of the source's rows, outside the guarantee: left out of the report
        return {"method": method, "lattice_like": lattice_like, "generalizing": lattice_like or
                params.get("hierarchies") is not None, "suppression_limit": None,
                "metric": details.get("metric") or params.get("metric") if lattice_like else None,
                "levels": details.get("levels"), "rows": None, "removed_rows": None, "private": True,
                "published_rows": summary.get("published_rows") if summary.get("published_rows") is not None
                else counts["published"]}
    total = summary.get("rows") if summary.get("rows") is not None else counts["original"]
    published_rows = summary.get("published_rows")
    if published_rows is None:
        published_rows = counts["published"]
    removed = summary.get("removed_rows")
    if removed is None:
        removed = details.get("removed_rows")
    if removed is None:
        removed = max(total - published_rows, 0)
    # hierarchies and the suppression limit also shape mondrian's and auto's releases over hierarchies
    generalizing = lattice_like or params.get("hierarchies") is not None
    return {"method": method, "lattice_like": lattice_like, "generalizing": generalizing,
            "suppression_limit": limit if generalizing else None,
            # what ran (auto's lattice minimises loss, whatever the statement's metric)
            "metric": details.get("metric") or params.get("metric") if lattice_like else None,
            "levels": details.get("levels"), "rows": total, "published_rows": published_rows,
            "removed_rows": removed}


def ran(method: str | None) -> str | None:
    """The method that produced the release: 'auto: lattice' -> 'lattice'."""
    return method.split(": ")[-1] if method else method


PRIVATE_NOTE = ("A differentially private release: the original table's figures (its row count, how many rows "
                "were sampled or removed, its risk, class sizes, privacy measures and column profile) are left "
                "out of this report, as they are exact functions of the original's rows, outside the "
                "guarantee; every figure below is of the published table.")


def removed_sentence(release: dict) -> str:
    """'473 rows (1.6%) removed, limit 2%.' and how many rows are published."""
    removed, total, kept = release["removed_rows"], release["rows"], release["published_rows"]
    if release.get("private"):
        return (f"The published table holds {rows_text(kept)}. {PRIVATE_NOTE}")
    limit = release["suppression_limit"]
    limit_text = f", limit {percent(limit, exact=True)}" if limit is not None else ""
    if kept > total:
        return (f"The published table holds {rows_text(kept)}, more than the original's {format_value(total)}: it "
                "is not a subset of the original's rows.")
    if not removed:
        return f"No rows removed{limit_text}: the published table holds all {rows_text(total)}."
    share = f" ({percent(removed / total)})" if total else ""
    return (f"{rows_text(removed)}{share} removed{limit_text}. "
            f"The published table holds {format_value(kept)} of the original's {rows_text(total)}.")


def _rows_within(limit: float, rows: int) -> str:
    """How many of `rows` a suppression limit lets go: '12 rows'."""
    return rows_text(math.floor(limit * rows + 1e-9))


def parameter_rows(params: dict, release: dict, qi, threshold, threshold_why,
                   sweep: tuple | None = None) -> list[tuple]:
    """The statement's options that mattered, in a fixed order, each stated once: l_variant only
    with l, t_distance only with t; the hierarchies and the suppression limit whenever the release
    was generalized over hierarchies (lattice, gensup, and mondrian or auto given hierarchies), the
    metric and the levels for a lattice-like method. `sweep`: (parameter, its values as typed)."""
    given, params = params, {name: value for name, value in params.items() if value is not None}
    shown = {}
    requested, used = params.get("method"), release["method"]
    if requested or used:
        shown["method"] = (f"{requested} (chose {ran(used)})" if requested and used and requested != used
                           else requested or used)
    for name in ("qi", "sensitive", "k"):
        if name in params:
            shown[name] = params[name]
    if shown.get("sensitive") == "":
        shown["sensitive"] = "none"
    if "l" in params:
        shown["l"] = params["l"]
        shown["l_variant"] = params.get("l_variant", "frequency")
        if "c" in params and shown["l_variant"] == "recursive":
            shown["c"] = params["c"]
    if "t" in params:
        shown["t"] = params["t"]
        shown["t_distance"] = params.get("t_distance", "equal")
        for name in ("sa_hierarchy", "sa_order"):
            if name in params:
                shown[name] = _spec_text(params[name])
    shown.update(_risk_parameters(params))
    if release["generalizing"] and ("hierarchies" in given or not release["lattice_like"]):
        shown["hierarchies"] = _hierarchies_text(given.get("hierarchies"), qi)  # None: the statement had none
    if release["lattice_like"] and release["levels"] is not None and len(release["levels"]) == len(qi):
        shown["hierarchy levels chosen (0 = original values)"] = ", ".join(
            f"{column} {level}" for column, level in zip(qi, release["levels"]))
    limit = release["suppression_limit"]
    if limit is not None:
        shown["suppression_limit"] = (f"{percent(limit, exact=True)} of the rows "
                                      f"(at most {_rows_within(limit, release['rows'])})")
    if release["metric"]:
        shown["metric"] = release["metric"]
    if sweep is not None:
        _swept(shown, *sweep)
    shown["risk_threshold"] = f"{format_value(threshold)} ({threshold_why})"
    skip = {"method", "qi", "sensitive", "k", "l", "l_variant", "c", "t", "t_distance", "sa_hierarchy",
            "sa_order", "hierarchies", "suppression_limit", "metric", "risk_threshold", *RISK_PARAMETERS}
    for name, value in params.items():  # anything else the caller passed, as given
        if name not in skip:
            shown[name] = value
    return list(shown.items())


# the risk-based models' options, in the order the parameters table lists them
RISK_PARAMETERS = ("k_map", "population", "population_weight", "population_size", "delta_presence", "average_risk",
                   "highest_risk", "population_uniqueness", "estimator", "significance", "beta_likeness",
                   "beta_variant", "delta_disclosure", "weights")


def _risk_parameters(params: dict) -> dict:
    """The risk-based models' options as the others are listed: each model's value, its variant
    or estimator beside it with the default when none was given (beta_variant only with
    beta_likeness; the estimator with the model it estimates for, significance only with k_map
    estimated from population_size)."""
    shown = {}
    estimated_kmap = "k_map" in params and "population" not in params and "population_size" in params
    for name in ("k_map", "population", "population_weight", "population_size"):
        if name in params:
            shown[name] = params[name]
    if "delta_presence" in params:
        shown["delta_presence"] = "(" + format_value(params["delta_presence"]) + ")"
    for name in ("average_risk", "highest_risk", "population_uniqueness"):
        if name in params:
            shown[name] = params[name]
    estimator = params.get("estimator")
    roles = []
    if estimated_kmap:
        given = estimator if estimator is not None and estimator not in UNIQUENESS_ESTIMATORS else None
        roles.append(f"{given} (k_map)" if given else "poisson (k_map, the default)")
    if "population_uniqueness" in params:
        given = estimator if estimator in UNIQUENESS_ESTIMATORS else None
        roles.append(f"{given} (population_uniqueness)" if given else "dankar (population_uniqueness, the default)")
    if roles:
        shown["estimator"] = "; ".join(roles)
    elif estimator is not None:
        shown["estimator"] = estimator
    if estimated_kmap or "significance" in params:
        shown["significance"] = params.get("significance", KMAP_SIGNIFICANCE)
    if "beta_likeness" in params:
        shown["beta_likeness"] = params["beta_likeness"]
        shown["beta_variant"] = params.get("beta_variant", "basic")
    if "delta_disclosure" in params:
        shown["delta_disclosure"] = params["delta_disclosure"]
    if "weights" in params:
        weights = params["weights"]
        shown["weights"] = (", ".join(f"{column} = {format_value(weight)}" for column, weight in weights.items())
                            if isinstance(weights, dict) else weights)
    return shown


def _swept(shown: dict, name: str, values) -> None:
    """The swept parameter's row: the value published, and the values the sweep compared."""
    base = name.removeprefix("requested_")
    compared = ", ".join(format_value(v) for v in sorted(values))
    if base in shown:
        shown[base] = f"{format_value(shown[base])} (published; the sweep below compares {compared})"
    else:
        shown[base] = f"the sweep below compares {compared}"


# how the provenance comment records a file or table hierarchy (pipeline.provenance), in words
_RECORDED_KINDS = {HIERARCHY_FILE: "an ARX hierarchy file (its path is not recorded with the release)",
                   HIERARCHY_TABLE: "a hierarchy table (its name is not recorded with the release)",
                   SA_HIERARCHY_FILE: "an ARX hierarchy file (its path is not recorded with the release)"}


def _spec_text(spec) -> str:
    """A hierarchy spec as the page shows it: as given (a builder, or the file or table named by
    the statement that wrote this report), or the kind the provenance recorded, in words."""
    return _RECORDED_KINDS.get(spec, str(spec)) if isinstance(spec, str) else str(spec)


def _hierarchies_text(hierarchies, qi) -> str:
    if not hierarchies:
        return "none: each quasi-identifier is published as it is or as '*'"
    if isinstance(hierarchies, str):
        return f"{_spec_text(hierarchies)} for every quasi-identifier"
    if isinstance(hierarchies, dict):
        named = {name.lower() for name in hierarchies}
        text = "; ".join(f"{column}: {_spec_text(spec)}" for column, spec in hierarchies.items())
        others = [c for c in qi if c.lower() not in named]
        if others:
            text += f"; {', '.join(others)}: none (the value or '*')"
        return text
    return str(hierarchies)


def optimality(summary: dict, release: dict | None = None) -> str:
    """What is proven, in the words of the summary's `optimal_for` (the shell prints the same)."""
    release = release or {}
    stars, bound = summary.get("stars"), summary.get("lower_bound")
    optimal_for = summary.get("optimal_for")
    method = ran(summary.get("method") or release.get("method"))
    if summary.get("optimal"):
        if optimal_for in (None, "stars") and method == "lattice":  # without optimal_for, or auto's lattice
            optimal_for = f"{release.get('metric') or 'its metric'} among full-domain generalizations"
        if optimal_for is None or optimal_for == "stars":
            return ("<span class=\"good\">Proven optimal</span>: no cell suppression with fewer stars "
                    "satisfies the request.")
        if method == "lattice":
            metric = release.get("metric")
            limit = release.get("suppression_limit")
            if limit is None:
                removing = "removes no more rows than the suppression limit allows"
            elif limit == 0:
                removing = "removes no rows"
            else:
                removing = (f"removes at most {percent(limit, exact=True)} of the rows "
                            f"({_rows_within(limit, release.get('rows', 0))})")
            lower = f"a lower {METRIC_WORDS.get(metric, metric)}" if metric else "a better value of its metric"
            return (f"<span class=\"good\">Proven optimal for {escape(optimal_for)}</span>: no release that "
                    f"generalizes each quasi-identifier to one level of its hierarchy (the same level for "
                    f"every row) and {escape(removing)} has {escape(lower)}. Other kinds of release (cell "
                    "suppression, local recoding) may lose less.")
        return f"<span class=\"good\">Proven optimal for {escape(optimal_for)}</span>."
    if stars is None or bound is None:
        return "Not proven optimal, and no lower bound is known."
    gap = stars - bound
    share = f" ({gap / stars:.1%} of the stars)" if stars else ""
    return (f"Not proven optimal: at most {escape(format_value(gap))} stars{escape(share)} could be saved "
            f"(stars {escape(format_value(stars))} − proven lower bound {escape(format_value(bound))}).")


def kl_infinite_text(columns: dict[str, dict], release: dict) -> str:
    """Why anon_utility's KL divergence is infinite, in one sentence after the ∞."""
    generalized = {c: v for c, v in columns.items() if v["generalized"]}
    if generalized:
        cells = sum(v["generalized"] for v in generalized.values())
        column, first = next(iter(generalized.items()))
        return (f"∞ (a published cell has no original counterpart: {format_value(cells)} published "
                f"{'cell holds a generalized value' if cells == 1 else 'cells hold generalized values'} "
                f"such as '{first['example']}' in {column}, which the original column does not contain, "
                "so the original rows behind them get probability 0; this KL divergence reads only a "
                "'*' as any value and is infinite for every generalization, so see the information "
                "loss per column instead)")
    if release.get("removed_rows"):
        removed = release["removed_rows"]
        return (f"∞ (a removed row has no published counterpart: {format_value(removed)} "
                f"{'row was' if removed == 1 else 'rows were'} removed and some of their value "
                "combinations occur in no published row, even with a '*' read as any value, so the "
                "published table gives them probability 0)")
    return ("∞ (an original row has no published counterpart: some combination of quasi-identifier "
            "and sensitive values occurs in no published row, even with a '*' read as any value, so the "
            "published table gives it probability 0; it is not a cell suppression of the original)")
