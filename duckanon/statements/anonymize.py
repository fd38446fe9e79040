"""ANONYMIZE: plan -> histogram -> solver -> materialize -> summary, in one transaction.

Everything before the final CREATE only reads the source (temp tables aside), and the CREATE OR
REPLACE of the target runs in the same transaction, so an error at any step leaves the database
as it was and a re-run replaces the target atomically.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from duckanon import progress
from duckanon.backends import Backend, BackendError, work
from duckanon.backends.base import Interrupted, WriteConflict
from duckanon.errors import AnonymizeError
from duckanon.pipeline.histogram import snapshot_source
from duckanon.pipeline.loss import loss_notes
from duckanon.pipeline.materialize import (
    blocks_select, check_published_rows, counts_select, histogram_publish_select, key_hashes_distinct, keyed_arrow,
    keyed_select, coded_select, published_dictionaries, publish_select, rows_per_block, view_select,
)
from duckanon.pipeline.plan import Plan, counts_name, is_counts_of
from duckanon.pipeline import registry
from duckanon.pipeline.population import check_release
from duckanon.pipeline.problem import scratch_name, solve_problem
from duckanon.pipeline.provenance import describe_target
from duckanon.pipeline.result import Summary, summarize
from duckanon.sql.names import shown_name
from duckanon.statements.report import place_report, render_report


def labelled_columns(solution) -> set[int]:
    """The QI columns the solution publishes as labels (ranges, sets, hierarchy levels)."""
    return {j for j, labels in enumerate(solution.group_labels or []) if labels is not None}


def _any_split(parts: pa.Table) -> bool:
    """Whether some cell's rows go to several parts (keyed_arrow's `split`)."""
    return bool(pc.any(parts["split"]).as_py())


def _drop_replaced_counts(backend: Backend, plan: Plan) -> None:
    """A view published with materialize = 'view' and now replaced by a table leaves its table of
    counts behind: dropped with it (only the one duckanon made for that view)."""
    if backend.existing_kind(plan.target) == "VIEW":
        counts = counts_name(plan.target)
        if is_counts_of(backend.catalog_entry(counts), plan.target):
            backend.drop_object(counts, "TABLE")


def publish(backend: Backend, plan: Plan, started: float, listener=None,
            recording: registry.Recording | None = None) -> Summary:
    """Publish the plan's release in one transaction. `recording` is the registry's part (where
    the entry goes, registry.Recording); REFRESH passes its own, ANONYMIZE the default."""
    cells_table, parts_view, keyed_table, coded_table, blocks_table, source_table = (
        scratch_name(kind) for kind in ("cells", "parts", "keyed", "coded", "blocks", "source"))
    pending_report = None
    seed = plan.statement.seed  # orders the published rows (materialize)
    recording = recording or registry.Recording(backend, plan)
    recording.begin(backend, plan)
    try:
        with work(backend) as statement_work:
            # a source that could read differently twice (a view with random() or USING SAMPLE) is
            # copied once; a base table reads the same within our transaction
            read_plan = snapshot_source(backend, plan, source_table)
            if recording.records:  # the histogram's GROUP BY fingerprints the source for the registry
                read_plan = replace(read_plan, fingerprint_of=(read_plan.source.sql(), tuple(plan.published)))
            solver_plan, cells, hist, solution, models, domains = solve_problem(backend, read_plan, cells_table, started,
                                                                           listener)
            progress.tell(listener, f"publishing {plan.target.sql()}", rows=hist.n_rows)
            parts = keyed_arrow(cells, solution)
            backend.register_arrow(parts_view, parts)
            # without kept columns the published order is the keyed table's (seeded) order; with them
            # the published rows are sorted by their own keys, and the keyed table's order is not read
            with backend.keeping_insertion_order():
                backend.create_temp(keyed_table, keyed_select(solver_plan, cells_table, parts_view, seed,
                                                              labelled=labelled_columns(solution),
                                                              ordered=not solver_plan.keep))
                backend.unregister(parts_view)
                if plan.counts is not None:  # materialize = 'view': a view over the count of each published row
                    backend.create_target(plan.counts, counts_select(solver_plan, keyed_table))
                    backend.create_target(plan.target, view_select(solver_plan, plan.counts), kind="VIEW")
                else:
                    _drop_replaced_counts(backend, plan)
                    if solver_plan.keep:  # per-row values are published: join the keyed table back to the source
                        dictionaries = published_dictionaries(backend, solver_plan, keyed_table, seed)
                        backend.create_temp(coded_table, coded_select(solver_plan, keyed_table, dictionaries))
                        published = publish_select(
                            solver_plan, coded_table, _any_split(parts), seed, dictionaries,
                            by_key_hash=key_hashes_distinct(backend, solver_plan, cells_table),
                            break_ties=backend.breaks_hash_ties)
                    else:  # every published row is determined by its cell: no second pass over the source
                        block_rows = rows_per_block(hist.n_rows, backend.threads(), backend.scan_unit_rows)
                        if block_rows is not None:
                            backend.create_temp(blocks_table, blocks_select(solver_plan, keyed_table, block_rows))
                        published = histogram_publish_select(solver_plan, keyed_table,
                                                             None if block_rows is None else blocks_table)
                    backend.create_target(plan.target, published)
            if solver_plan.population_classes is not None:  # the population models, against the published table
                solution.notes["population"] = check_release(backend, solver_plan, models, solver_plan.population_classes,
                                                             solution, domains.hierarchies, scratch_name)
            solution.notes.update(loss_notes(plan.qi, hist, solution, domains))
            summary = summarize(hist, solution, started, plan)
            # before anything is committed; the classes are checked only where the source was read
            # twice and could have changed in between (a stable or copied source cannot)
            reread = solver_plan.keep and not (backend.reads_stably and backend.source_is_stable(
                read_plan.source, read_plan.published))
            check_published_rows(backend, plan, summary.published_rows, keyed_table if reread else None)
            describe_target(backend, plan, summary, release=recording.release_id)
            transformation = {"method": solution.method, "levels": solution.notes.get("levels")}
            # the registry entry commits with the release (or is kept for right after its commit)
            recording.in_release(backend, plan, read_plan.source, summary, transformation, cells.fingerprint)
            backend.drop_temp(cells_table, keyed_table, coded_table, blocks_table)
            if plan.statement.report:
                pending_report = render_report(backend, plan, summary, read_plan, listener)
                summary.report = str(plan.statement.report)
            recording.before_commit(backend)  # an entry kept in another database says a release is pending
            statement_work.commit()
        recording.after_commit(backend, statement_work.own_transaction)
        if recording.note:
            _say_unrecorded(summary, recording.note)
    except BaseException as error:
        if pending_report is not None:
            pending_report.unlink(missing_ok=True)
        # REFRESH re-runs a registered statement through here: the message names the statement run
        verb = "REFRESH" if plan.statement.previous_release is not None else "ANONYMIZE"
        written = "statement_work" in locals() and statement_work.committed
        if isinstance(error, WriteConflict) and not written:
            raise AnonymizeError(_conflict_message(backend, plan, error, verb,
                                                   "statement_work" in locals() and statement_work.own_transaction)
                                 ) from None
        if isinstance(error, Interrupted) and not written:
            raise AnonymizeError(f"{verb} {error}; nothing was written") from None
        if isinstance(error, BackendError):
            raise AnonymizeError(f"{verb} failed: {error}") from None
        if _is_ctrl_c(error):  # DuckDB reports SIGINT during a query as RuntimeError
            raise KeyboardInterrupt(f"{verb} interrupted; nothing was written") from None
        raise
    finally:  # committed or not, the release leaves the registry's count (registry.end_release)
        recording.end(backend)
    if pending_report is not None:
        summary.report = place_report(pending_report, plan.statement.report)
    return summary


def _say_unrecorded(summary: Summary, note: str) -> None:
    """The release stands without a registry entry: its details say why (`details.registry`)."""
    details = json.loads(summary.details)
    details["registry"] = note
    summary.details = json.dumps(details, default=str, sort_keys=True)


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
