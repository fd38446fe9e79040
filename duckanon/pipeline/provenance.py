"""What shaped a release, written on the published table (its comment) and read back by REPORT."""

from __future__ import annotations

import json
from dataclasses import asdict

from duckanon import methods
from duckanon._version import __version__
from duckanon.backends import Backend
from duckanon.pipeline.plan import COUNTS_COMMENT, Plan
from duckanon.sql.statement import shown_name
from duckanon.pipeline.result import Summary

# What shaped a release, as the provenance comment, the report and REPORT show it.
RELEASE_PARAMETERS = ("k", "l", "t", "l_variant", "c", "t_distance", "sa_hierarchy", "sa_order", "method",
                      "k_map", "delta_presence", "average_risk", "highest_risk", "population_uniqueness",
                      "beta_likeness", "beta_variant", "delta_disclosure", "population_size", "estimator",
                      "significance", "weights")
GENERALIZATION_PARAMETERS = ("hierarchies", "suppression_limit", "metric")


def release_parameters(statement) -> dict:
    """The options that shaped the release: the variants only with the model they qualify."""
    params = {name: getattr(statement, name) for name in RELEASE_PARAMETERS if getattr(statement, name) is not None}
    if statement.l is None:
        params.pop("l_variant", None)
        params.pop("c", None)
    if statement.t is None:
        for name in ("t_distance", "sa_hierarchy", "sa_order"):
            params.pop(name, None)
    if statement.beta_likeness is None:
        params.pop("beta_variant", None)
    if statement.population is not None:  # its name is a source's: only that one was used
        params["population"] = "a table (k_map, delta_presence)"
    if methods.spec(statement.method).takes_hierarchies:  # hierarchies = None means "none given": shown as such
        params.update({name: getattr(statement, name) for name in GENERALIZATION_PARAMETERS})
    return params


def describe_target(backend: Backend, plan: Plan, summary: Summary, release: str | None = None) -> None:
    """The published table's comment says how it was made (parameters and result, never the
    source's name or values), so REPORT and a privacy officer can read its provenance later;
    `release` is the release's random id (registry.Recording), which REFRESH checks."""
    statement = plan.statement
    provenance = {"duckanon": __version__, "qi": plan.qi, "sensitive": plan.sensitive}
    if release is not None:
        provenance["release"] = release
    if len(plan.sensitives) > 1:
        provenance["sensitives"] = plan.sensitives
    provenance["roles"] = plan.roles()  # every source column's role (names only, as qi)
    provenance.update(release_parameters(statement))
    if plan.counts is not None:
        provenance["materialize"] = "view"
    provenance["summary"] = {name: value for name, value in asdict(summary).items()
                             if name not in ("details", "target", "report")}
    provenance["summary"]["details"] = json.loads(summary.details)
    text = "duckanon " + json.dumps(provenance, default=str, sort_keys=True)
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
        return json.loads(comment[len("duckanon "):])
    except ValueError:
        return None
