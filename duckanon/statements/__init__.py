"""Our statements over the pipeline: ANONYMIZE, EXPLAIN ANONYMIZE, REPORT and REFRESH.

`run_statement(con, text)` binds the text (the front end, duckanon.sql), picks the backend the
statement runs on (duckanon.backends) and hands both to the statement's runner, from one table.
"""

from __future__ import annotations

import time

from duckanon import extras
from duckanon.backends import Backend, backend_for
from duckanon.errors import AnonymizeError
from duckanon.pipeline.plan import bind
from duckanon.pipeline.result import Summary, Table
from duckanon.pipeline import registry
from duckanon.sql import AnonymizeStatement, ReportStatement, statement_for
from duckanon.sql.statement import RefreshStatement
from duckanon.statements.anonymize import publish
from duckanon.statements.explain import run_explain
from duckanon.statements.refresh import run_refresh
from duckanon.statements.report import check_file_access, run_report

__all__ = ["Summary", "Table", "run_anonymize", "run_statement"]


def _anonymize(backend: Backend, statement: AnonymizeStatement, started: float, listener) -> Summary:
    if statement.report:
        check_file_access(backend, statement.report)  # before anything is published
    return publish(backend, bind(backend, statement), started, listener)


def _explain(backend: Backend, statement: AnonymizeStatement, started: float, listener) -> Table:
    return run_explain(backend, statement, listener)


def _report(backend: Backend, statement: ReportStatement, started: float, listener) -> Table:
    return run_report(backend, statement)


def _refresh(backend: Backend, statement: RefreshStatement, started: float, listener) -> Table:
    return run_refresh(backend, statement, listener)


def _runner(statement):
    if isinstance(statement, RefreshStatement):
        return _refresh
    if isinstance(statement, ReportStatement):
        return _report
    return _explain if statement.explain else _anonymize


def run_statement(con, text: str, progress=None):
    """Run ANONYMIZE (returns its Summary), EXPLAIN ANONYMIZE or REPORT (return a Table) on `con`
    (a DuckDB connection, or a Backend). `progress(phase, info)`, if given, hears the phases."""
    started = time.perf_counter()
    statement = statement_for(text)
    if isinstance(statement, ReportStatement) or getattr(statement, "report", None):
        extras.require("matplotlib")  # before anything runs, so nothing is published without its report
    backend = backend_for(con, statement)
    try:
        result = _runner(statement)(backend, statement, started, progress)
        if backend.keeps_registry:  # duckanon_publications() lists what the registries hold now
            registry.install_listing(backend.con)
        return result
    finally:
        backend.close()


def run_anonymize(con, text: str, progress=None) -> Summary:
    result = run_statement(con, text, progress)
    if not isinstance(result, Summary):
        raise AnonymizeError("expected ANONYMIZE, got EXPLAIN ANONYMIZE")
    return result
