"""ANONYMIZE: plan -> histogram -> solver -> materialize -> summary, in one transaction.

Everything before the final CREATE only reads the source (temp tables aside), and the CREATE OR
REPLACE of the target runs in the same transaction, so an error at any step leaves the database
as it was and a re-run replaces the target atomically.
"""

from __future__ import annotations

import json
from dataclasses import replace

from duckanon import progress
from duckanon.backends import Backend, BackendError, work
from duckanon.backends.base import Interrupted, WriteConflict
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import scratch_name
from duckanon.pipeline.histogram import snapshot_source
from duckanon.pipeline.loss import loss_notes
from duckanon.pipeline.materialize import check_published_rows, materialize, read_twice
from duckanon.pipeline.plan import Plan
from duckanon.pipeline import ledger, registry
from duckanon.pipeline.population import check_release
from duckanon.pipeline.problem import build_problem, solve_problem, statement_context
from duckanon.pipeline.provenance import describe_target
from duckanon.pipeline.result import Summary, summarize
from duckanon.names import shown_name
from duckanon.statements.report import place_report, render_report


def publish(backend: Backend, plan: Plan, started: float, listener=None,
            recording: registry.Recording | None = None) -> Summary:
    """Publish the plan's release in one transaction. `recording` is the registry's part (where
    the entry goes, registry.Recording), before and after the commit; REFRESH passes its own,
    ANONYMIZE the default."""
    pending = None  # the report rendered before the commit, placed after it
    # a private release's spend, checked against its budget before anything is read or written
    spend = ledger.account(backend, plan) if plan.statement.epsilon is not None else None
    recording = recording or registry.Recording(backend, plan)
    recording.begin(backend, plan)
    try:
        with work(backend) as statement_work:
            summary, pending = _release(backend, plan, started, listener, recording, spend)
            recording.before_commit(backend)  # an entry kept in another database says a release is pending
            statement_work.commit()
        recording.after_commit(backend, statement_work.own_transaction)
        if recording.note:
            summary = _say_unrecorded(summary, recording.note)
    except BaseException as error:
        if pending is not None:
            pending.unlink(missing_ok=True)
        failure = _failure(backend, plan, error, locals().get("statement_work"))
        if failure is error:
            raise
        raise failure from None
    finally:  # committed or not, the release leaves the registry's count (registry.end_release)
        recording.end(backend)
    if pending is not None:
        summary = replace(summary, report=place_report(pending, plan.statement.report))
    return summary


def _release(backend: Backend, plan: Plan, started: float, listener, recording: registry.Recording,
             spend: ledger.Account | None = None):
    """The steps of one release inside its transaction, up to the commit: the summary row and the
    report rendered to a temporary file (None without one)."""
    statement = plan.statement
    # a source that could read differently twice (a view with random() or USING SAMPLE) is copied
    # once; a base table reads the same within our transaction
    read = snapshot_source(backend, plan, scratch_name("source"))
    # the histogram's GROUP BY fingerprints the source for the registry
    problem = build_problem(backend, read, scratch_name("cells"), listener, fingerprint=recording.records)
    solution = solve_problem(problem, problem.models, statement.method, statement_context(statement, started, listener))
    progress.tell(listener, f"publishing {plan.target.sql()}", rows=problem.histogram.n_rows)
    written = materialize(backend, problem.plan, problem.facts, problem.cells, solution, statement.seed)
    if problem.population is not None:  # the population models, against the published table
        solution.notes["population"] = check_release(backend, problem.plan, problem.facts, problem.models,
                                                     problem.population, solution, problem.domains.hierarchies,
                                                     scratch_name)
    solution.notes.update(loss_notes(plan.qi, problem.histogram, solution, problem.domains))
    summary = summarize(problem.histogram, solution, started, plan)
    if spend is not None:  # the spend is recorded in the release's transaction, or says why not
        spend = ledger.record(backend, plan, recording.release_id)
        summary = _with_ledger(summary, spend.details(recorded=spend.records))
    # before anything is committed; the classes are checked only where the source was read
    # twice and could have changed in between (a stable or copied source cannot)
    check_published_rows(backend, problem.plan, problem.facts, summary.published_rows,
                         written.keyed_table if read_twice(backend, problem.plan, read) else None)
    describe_target(backend, plan, summary, release=recording.release_id)
    transformation = {"method": solution.method, "levels": solution.notes.get("levels")}
    # the registry entry commits with the release (or is kept for right after its commit)
    recording.in_release(backend, plan, read.source, summary, transformation, problem.cells.fingerprint)
    backend.drop_temp(problem.cells.table, *written.temps)
    if not statement.report:
        return summary, None
    pending = render_report(backend, plan, summary, read, listener, problem)
    return replace(summary, report=str(statement.report)), pending


def _failure(backend: Backend, plan: Plan, error: BaseException, statement_work) -> BaseException:
    """The error a failed release raises: one line in the user's terms for the engine's errors
    (REFRESH re-runs a registered statement through here: the message names the statement run)."""
    verb = "REFRESH" if plan.statement.previous_release is not None else "ANONYMIZE"
    written = statement_work is not None and statement_work.committed
    if isinstance(error, WriteConflict) and not written:
        own = statement_work is not None and statement_work.own_transaction
        return AnonymizeError(_conflict_message(backend, plan, error, verb, own))
    if isinstance(error, Interrupted) and not written:
        return AnonymizeError(f"{verb} {error}; nothing was written")
    if isinstance(error, BackendError):
        return AnonymizeError(f"{verb} failed: {error}")
    if _is_ctrl_c(error):  # DuckDB reports SIGINT during a query as RuntimeError
        return KeyboardInterrupt(f"{verb} interrupted; nothing was written")
    return error


def _with_ledger(summary: Summary, shown: dict) -> Summary:
    details = json.loads(summary.details)
    details.setdefault("differential_privacy", {})["ledger"] = shown
    return replace(summary, details=json.dumps(details, default=str, sort_keys=True))


def _say_unrecorded(summary: Summary, note: str) -> Summary:
    """The release stands without a registry entry: its details say why (`details.registry`)."""
    details = json.loads(summary.details)
    details["registry"] = note
    return replace(summary, details=json.dumps(details, default=str, sort_keys=True))


def _conflict_message(backend: Backend, plan: Plan, conflict: WriteConflict, verb: str, own_transaction: bool) -> str:
    """A write-write conflict in user terms: which object another statement changed while this one
    published (the target, fully qualified as the result row shows it, when the engine names it),
    that nothing was written, and that running the statement again publishes."""
    target = shown_name(plan.target)
    ours = {plan.target.name.lower()} | ({plan.counts.name.lower()} if plan.counts is not None else set())
    name = conflict.object_name
    if name is None:
        what = f"rows that this {verb} of {target} writes"
    elif name.lower() in ours:
        what = f"the target {target}"
    else:
        what = f"{name}, which this {verb} of {target} writes,"
    # DuckDB aborts the transaction a conflict happens in: the caller's, when ANONYMIZE ran inside it
    # (REFRESH runs in a transaction of its own, which it rolls back)
    inside_callers = verb == "ANONYMIZE" and backend.transactional and not own_transaction
    again = f"roll back the open transaction, then run {verb} again" if inside_callers else f"run {verb} again"
    return f"another statement changed {what} at the same time: nothing was written; {again}"


def _is_ctrl_c(error: BaseException) -> bool:
    return type(error) is RuntimeError and "interrupted" in str(error).lower()
