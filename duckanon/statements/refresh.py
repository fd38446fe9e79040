"""REFRESH <published> | REFRESH ALL [WITH (mode = 'fresh' | 'stable')]: re-run registered
ANONYMIZE statements against their sources' current rows, atomically.

Every refresh of one statement runs in one transaction (the caller's, or its own): REFRESH ALL
refreshes every stale publication and either all of them commit with their registry entries, or
none does. `fresh` re-solves with the registered options; `stable` keeps the published
transformation where it still satisfies the request (the lattice's levels: the same value gets
the same label month after month) and re-solves otherwise, saying so in `mode_used`.
"""

from __future__ import annotations

import json
import time

from sqlglot import exp

from duckanon.backends import Backend, work
from duckanon.backends.base import full_key
from duckanon.errors import AnonymizeError
from duckanon.pipeline import registry
from duckanon.pipeline.plan import bind
from duckanon.pipeline.result import Table, release_risks
from duckanon.sql.statement import AnonymizeStatement, RefreshStatement, TableName, shown_name, statement_for
from duckanon.statements.anonymize import publish

COLUMNS = [("target", "VARCHAR"), ("mode", "VARCHAR"), ("mode_used", "VARCHAR"),
           ("source_rows_before", "BIGINT"), ("source_rows_after", "BIGINT"),
           ("published_rows_before", "BIGINT"), ("published_rows_after", "BIGINT"),
           ("classes_before", "BIGINT"), ("classes_after", "BIGINT"), ("stars_before", "BIGINT"),
           ("stars_after", "BIGINT"), ("highest_risk_before", "DOUBLE"), ("highest_risk_after", "DOUBLE"),
           ("average_risk_before", "DOUBLE"), ("average_risk_after", "DOUBLE"), ("seconds", "DOUBLE")]


def _stable_levels(entry: dict) -> tuple[tuple[int, ...] | None, str | None]:
    """The levels a stable refresh keeps, or why there are none."""
    transformation = json.loads(entry["transformation"] or "{}")
    levels, method = transformation.get("levels"), transformation.get("method") or ""
    if levels is not None and method.split(": ")[-1] == "lattice":
        return tuple(int(level) for level in levels), None
    return None, (f"fresh: stable recoding keeps a full-domain generalization's levels, and this release was "
                  f"made by {method or 'an unknown method'} (its groups are re-solved)")


def refresh_one(backend: Backend, entry: dict, mode: str, listener=None) -> tuple:
    """Re-publish one registered target (inside the caller's work); its result row."""
    started = time.perf_counter()
    statement = statement_for(entry["statement"])
    if not isinstance(statement, AnonymizeStatement):  # the registry holds only ANONYMIZE texts
        raise AnonymizeError(f"REFRESH: the entry of {entry['target']} does not hold an ANONYMIZE statement")
    reason = None
    if mode == "stable":
        statement.stable_levels, reason = _stable_levels(entry)
    before = json.loads(entry["summary"] or "{}")
    statement.previous_release = {"summary": before, "source_rows": entry["source_rows"],
                                  "published_at": str(entry["published_at"])}
    plan = bind(backend, statement)
    summary = publish(backend, plan, started, listener)
    after = json.loads(summary.to_json())
    mode_used = "fresh" if mode == "fresh" else (reason or after["details"].get("mode_used", "fresh"))
    current = registry.entry(backend.con, plan.target)
    (highest_before, average_before), (highest_after, average_after) = release_risks(before), release_risks(after)
    return (entry["target"], mode, mode_used, entry["source_rows"], current["source_rows"] if current else None,
            before.get("published_rows"), after.get("published_rows"), before.get("classes"), after.get("classes"),
            before.get("stars"), after.get("stars"), highest_before, highest_after, average_before, average_after,
            round(time.perf_counter() - started, 6))


def run_refresh(backend: Backend, statement: RefreshStatement, listener=None) -> Table:
    if not backend.keeps_registry:
        raise AnonymizeError("REFRESH needs engine DuckDB (the publication registry is a DuckDB table)")
    con = backend.con
    known = registry.entries(con)
    if statement.target is not None:
        defaults = backend.session_defaults()
        key = full_key(statement.target, *defaults)
        entry = next((row for row in known if full_key(TableName(exp.to_table(row["target"], dialect="duckdb")),
                                                        *defaults) == key), None)
        if entry is None:
            raise registry.refresh_refused(statement.target)
        problem = registry.source_problem(con, entry)
        if problem == "source missing":
            raise AnonymizeError(f"REFRESH {shown_name(statement.target)}: its source {entry['source']} no longer "
                                 "exists; nothing was changed")
        if problem:
            raise AnonymizeError(f"REFRESH {shown_name(statement.target)}: its source {entry['source']} "
                                 f"{problem.removeprefix('source ')}; nothing was changed")
        chosen = [entry]
    else:  # every stale publication; those whose source cannot be read stay as they are
        chosen = [row for row in known if registry.source_state(con, row)[0] == "stale"]
    rows = []
    with work(backend) as refresh_work:
        for entry in chosen:
            rows.append(refresh_one(backend, entry, statement.mode, listener))
        refresh_work.commit()
    return Table(COLUMNS, rows)
