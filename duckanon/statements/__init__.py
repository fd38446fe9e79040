"""Our statements over the pipeline: ANONYMIZE, EXPLAIN ANONYMIZE, REPORT and REFRESH.

`run_statement(con, text)` binds the text (the front end, duckanon.sql), picks the backend the
statement runs on (duckanon.backends) and hands both to the statement's runner, from one table.
A table the statement reads by a lone name that no table or view carries may be a Python object
of the caller's (a pandas DataFrame, an Arrow table: `caller`, duckanon.connection.Caller): it is
registered on the connection under that name for the statement, as DuckDB's replacement scan
would read it, and unregistered after.
"""

from __future__ import annotations

import time


from duckanon import extras
from duckanon.backends import Backend, DuckDBBackend, backend_for
from duckanon.errors import AnonymizeError
from duckanon.pipeline.plan import bind
from duckanon.pipeline.result import Summary, Table
from duckanon.pipeline import registry
from duckanon.sql import AnonymizeStatement, ReportStatement, privacy, statement_for
from duckanon.names import shown_name
from duckanon.sql.report_refresh import RefreshStatement
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


def _lone_names_read(statement) -> list[str]:
    """The tables the statement reads that are written as a lone name (no schema or database): only
    those can be a Python variable, as in DuckDB. Never the target, which the statement writes."""
    if isinstance(statement, RefreshStatement):
        return []
    if isinstance(statement, ReportStatement):
        tables = [statement.published, statement.original, statement.population]
    else:
        tables = [statement.source, statement.population]
    return list(dict.fromkeys(t.name for t in tables if t is not None and len(t.table.parts) == 1))


def _register_python_objects(backend: Backend, statement, caller) -> list[str]:
    """Register on the statement's DuckDB connection the caller's Python objects (DataFrames, Arrow
    tables) that the statement reads by a name no table or view carries; returns their names."""
    if caller is None or not isinstance(backend, DuckDBBackend):
        return []
    registered = []
    try:
        for name in _lone_names_read(statement):
            value = caller.find(backend, name)
            if value is not None and not backend.lone_name_in_catalog(name):
                backend.register_python(name, caller.readable(value))
                registered.append(name)
        _refuse_target_shadowing(backend, statement, registered)
    except BaseException:
        _unregister(backend, registered)
        raise
    return registered


def _refuse_target_shadowing(backend: DuckDBBackend, statement, registered: list[str]) -> None:
    """A release written under the name of a Python object the statement reads would take that
    name's place from then on: the next statement naming the DataFrame (a REFRESH, the same
    ANONYMIZE again) would read the release instead, since DuckDB's binder finds a table before any
    replacement scan. So a target that the lone name would find is refused, as the source is."""
    target = getattr(statement, "target", None)
    if target is None or not registered:
        return
    place = backend.read_by_lone_name(target)
    read_as = {name.lower(): name for name in registered}
    if place is not None and place.name.lower() in read_as:
        role = "source" if statement.source.name.lower() == place.name.lower() else "population"
        raise AnonymizeError(f"the target {shown_name(target)} would take the name of the Python object "
                             f"{read_as[place.name.lower()]} this statement reads as its {role}: choose another "
                             "name with INTO")


def _unregister(backend: Backend, names: list[str]) -> None:
    for name in names:
        backend.unregister_python(name)


def run_statement(con, text: str, progress=None, caller=None):
    """Run ANONYMIZE (returns its Summary), EXPLAIN ANONYMIZE or REPORT (return a Table) on `con`
    (a DuckDB connection, or a Backend). `progress(phase, info)`, if given, hears the phases;
    `caller` (duckanon.connection.Caller), if given, finds the Python objects read by name."""
    started = time.perf_counter()
    statement = statement_for(text)
    if isinstance(statement, ReportStatement) or getattr(statement, "report", None):
        extras.require("matplotlib")  # before anything runs, so nothing is published without its report
    backend = backend_for(con, statement)
    try:
        if getattr(statement, "epsilon", None) is not None and not isinstance(backend, DuckDBBackend):
            raise AnonymizeError(privacy.NOT_ON_SPARK)
        registered = _register_python_objects(backend, statement, caller)
        try:
            result = _runner(statement)(backend, statement, started, progress)
            if backend.keeps_registry:  # duckanon_publications() lists what the registries hold now
                registry.install_listing(backend)
            return result
        finally:
            _unregister(backend, registered)
    finally:
        backend.close()


def run_anonymize(con, text: str, progress=None, caller=None) -> Summary:
    result = run_statement(con, text, progress, caller)
    if not isinstance(result, Summary):
        raise AnonymizeError("expected ANONYMIZE, got EXPLAIN ANONYMIZE")
    return result
