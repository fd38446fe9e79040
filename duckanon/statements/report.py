"""The release report: REPORT on a published table, and the `report` option of ANONYMIZE.

The report reads the tables through DuckDB's SQL macros (duckanon.macros), so it needs the DuckDB
backend; the front end refuses `report` with another engine.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

from sqlglot import exp

from duckanon import extras
from duckanon.backends import Backend, BackendError
from duckanon.backends.base import UnknownTable
from duckanon.errors import AnonymizeError
from duckanon.pipeline.plan import Plan, source_columns
from duckanon.pipeline.problem import Problem
from duckanon.pipeline.provenance import (GENERALIZATION_PARAMETERS, RELEASE_PARAMETERS, published_provenance,
                                          release_parameters)
from duckanon.pipeline.result import Summary, Table
from duckanon.report import at_risk_sql_threshold, resolve_risk_threshold, write_report
from duckanon.solver.differential_privacy import anonymization_budget
from duckanon.sql import ReportStatement
from duckanon.names import shown_name
from duckanon.statements.explain import sweep_rows

def _duckdb_of(backend: Backend):
    """The DuckDB connection the report's macros run on (Backend.report_connection)."""
    if not backend.writes_reports:
        raise AnonymizeError(f"the report needs engine = 'duckdb', not {backend.name}")
    return backend.report_connection()


def run_report(backend: Backend, statement: ReportStatement) -> Table:
    """REPORT: the HTML report of a published table against its original, written to a file.
    What the statement leaves out comes from the table's provenance comment (if ANONYMIZE made it)."""
    con = _duckdb_of(backend)

    # queries read the objects DuckDB resolves the names to; messages and the result row show the
    # names as written
    written_as = statement
    published, original = backend.resolved(statement.published), backend.resolved(statement.original)
    if published.key() == original.key():
        raise AnonymizeError("REPORT compares a published table with its original: they must differ")
    statement = replace(statement, published=published, original=original)
    published_columns = source_columns(backend, statement.published)
    original_columns = source_columns(backend, statement.original)
    provenance = published_provenance(backend, statement.published) or {}
    chosen = {name: getattr(statement, name) if name in statement.given else provenance.get(name)
              for name in ("qi", "sensitive", "k", "l", "t", "l_variant", "t_distance")}
    chosen.update({name: provenance[name] for name in ("c", "sa_hierarchy", "sa_order") + GENERALIZATION_PARAMETERS
                   if name in provenance})
    # the risk models' options as the release recorded them (population: that a table was used)
    chosen.update({name: provenance[name] for name in RELEASE_PARAMETERS + ("population",)
                   if name in provenance and name not in chosen and name != "method"})
    if "population_size" in written_as.given:  # (REPORT's own options: read from the statement as bound)
        chosen["population_size"] = getattr(written_as, "population_size")
    qi, sensitive = chosen["qi"], chosen["sensitive"]
    if not qi:
        raise AnonymizeError(f"REPORT needs qi = (...): {written_as.published.sql()} has no duckanon provenance "
                             "(it was not published by ANONYMIZE, or its comment was changed)")
    sensitives = [sensitive] if "sensitive" in statement.given else provenance.get("sensitives") or \
        ([sensitive] if sensitive else [])
    for column in qi + sensitives:
        for table, columns in ((written_as.published, published_columns), (written_as.original, original_columns)):
            if column.lower() not in {c.lower() for c in columns}:
                raise AnonymizeError(f"column {column} is not in {table.sql()}")
    population = _population(backend, written_as, qi)
    check_file_access(backend, statement.file, "file")
    if statement.file:
        path = statement.file
    else:
        path = extras.default_report_path(written_as.published.name)
        path.parent.mkdir(parents=True, exist_ok=True)
    params = {name: value for name, value in chosen.items() if value is not None and name not in ("qi", "sensitive")}
    params["method"] = provenance.get("method", "unknown (not published by ANONYMIZE)")
    params.update({"qi": ", ".join(qi), "sensitive": ", ".join(sensitives)})
    summary = _with_private_section(provenance)
    try:
        with backend.translating():
            written = write_report(con, statement.published.sql(), statement.original.sql(), qi, sensitive, path,
                                   summary=summary, params=params, risk_threshold=statement.risk_threshold,
                                   sensitives=sensitives, population=population and population.sql(),
                                   population_weight=getattr(written_as, "population_weight", None),
                                   population_shown=population and shown_name(written_as.population),
                                   roles=_roles(provenance.get("roles"), original_columns),
                                   profile_source=statement.original.sql())
    except OSError as error:
        raise AnonymizeError(f"cannot write the report {path}: {error.strerror or error}") from None
    except BackendError as error:
        raise AnonymizeError(f"REPORT failed: {error}") from None
    threshold, _ = resolve_risk_threshold(statement.risk_threshold, params.get("k"))
    risk_of = exp.Table(this=exp.Anonymous(this="anon_risk", expressions=[
        exp.Placeholder(), exp.Placeholder(),
        exp.PropertyEQ(this=exp.to_identifier("threshold"), expression=exp.Placeholder())]))
    risk = backend.one(exp.select("highest_risk", "average_risk", "records_at_risk").from_(risk_of),
                       [statement.published.sql(), qi, at_risk_sql_threshold(threshold)])
    columns = [("report", "VARCHAR"), ("published", "VARCHAR"), ("original", "VARCHAR"), ("highest_risk", "DOUBLE"),
               ("average_risk", "DOUBLE"), ("records_at_risk", "BIGINT"), ("risk_threshold", "DOUBLE")]
    shown = [name.table.sql(dialect="duckdb") for name in (written_as.published, written_as.original)]  # quoted if needed
    return Table(columns, [(str(written), *shown, *risk, threshold)])


def _roles(published: dict | None, original_columns: list[str]) -> dict | None:
    """The original's columns with their roles: the provenance names only the published columns
    (a dropped column's name is the source's), so REPORT, which reads the original, adds its
    other columns as dropped, in the original's order."""
    if not published:
        return published
    known = {name.lower(): (name, role) for name, role in published.items()}
    roles = {}
    for column in original_columns:
        name, role = known.pop(column.lower(), (column, "dropped"))
        roles[name] = role
    roles.update(dict(known.values()))  # (a published column the original no longer has)
    return roles


def _population(backend: Backend, statement: ReportStatement, qi: list[str]):
    """REPORT's population table, resolved, after checking it holds every QI and the weight
    column (matched without case, as ANONYMIZE matches them); None when none was given."""
    table = getattr(statement, "population", None)
    weight = getattr(statement, "population_weight", None)
    if table is None:
        if weight is not None:
            raise AnonymizeError("option population_weight needs population = <table>")
        return None
    shown = shown_name(table)
    try:
        columns = {c.lower() for c in backend.columns(table)}
    except UnknownTable:
        raise AnonymizeError(f"unknown population table {shown}") from None
    except BackendError as error:
        raise AnonymizeError(f"cannot read population table {shown}: {error}") from None
    missing = [c for c in qi if c.lower() not in columns]
    if missing:
        raise AnonymizeError(f"population table {shown} lacks the quasi-identifier column '{missing[0]}' "
                             f"(it must hold every QI: {', '.join(qi)})")
    if weight is not None and weight.lower() not in columns:
        raise AnonymizeError(f"unknown column '{weight}' in population_weight for population table {shown}")
    return backend.resolved(table)


# the report is one HTML page: a file named for another format would hold HTML under a false name
REPORT_SUFFIXES = (".html", ".htm")


def check_file_access(backend: Backend, path: str | None, option: str = "report") -> None:
    """Before anything runs: the report's file can be written. A report is a file written by Python:
    DuckDB's switch for file access is honoured all the same; and its name says HTML (`option` is
    the option that named it: `report`, or REPORT's `file`). A path that exists and is no regular
    file (a device, a pipe, a directory) keeps its own message, where the report is written."""
    if not backend.file_access_allowed():
        raise AnonymizeError(f"cannot write the report {path or 'the report'}: file access is disabled "
                             "(SET enable_external_access = false)")
    if path is None:  # REPORT without file =: a name of ours, '<published>_report.html'
        return
    file = Path(path)
    if file.suffix.lower() not in REPORT_SUFFIXES and not (file.exists() and not file.is_file()):
        html = str(file.with_suffix(".html")) if file.name else "release_report.html"
        raise AnonymizeError(f"option {option} must name an .html or .htm file (the report is an HTML page), got "
                             f"'{path}': write {option} = '{html}'")


def render_report(backend: Backend, plan: Plan, summary: Summary, read_plan: Plan | None = None,
                  listener=None, problem: Problem | None = None) -> Path | None:
    """Write the report of the release being published, inside the publishing transaction, so a
    report that cannot be written fails the statement before the commit. A regular file is written
    to a temporary file beside it and renamed into place after the commit (see place_report); a
    path that exists and is not a regular file (a device, a pipe) is written directly, now, and
    None is returned. With a list of values, its sweep solves `problem` (the release's) once per value."""
    statement = plan.statement
    final = Path(statement.report)
    if final.is_dir():
        raise AnonymizeError(f"cannot write the report {statement.report}: it is a directory")
    special = final.exists() and not final.is_file()
    sweep = sweep_rows(backend, statement, listener, problem) if statement.sweep else None  # the release's problem
    params = release_parameters(statement)
    sensitives = plan.sensitives or ([plan.sensitive] if plan.sensitive else [])
    params.update({"qi": ", ".join(plan.qi), "sensitive": ", ".join(sensitives)})
    population = plan.population.sql() if plan.population is not None else None
    pending = final if special else final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        # the rows as they were read (the snapshot of a changing source), named as the user wrote it
        with backend.translating():  # a failing query of the report fails the statement, as ANONYMIZE's own
            write_report(_duckdb_of(backend), plan.target.sql(), (read_plan or plan).source.sql(), plan.qi,
                         plan.sensitive, pending, summary=summary, params=params, sweep=sweep,
                         risk_threshold=statement.risk_threshold, original_shown=plan.source_shown,
                         sensitives=sensitives, population=population, population_weight=plan.population_weight,
                         population_shown=shown_name(plan.population) if population else None,
                         roles=plan.roles(), profile_source=plan.source.sql(), previous=statement.previous_release)
    except BackendError:
        if not special:
            pending.unlink(missing_ok=True)
        raise
    except OSError as error:
        if not special:
            pending.unlink(missing_ok=True)
        raise AnonymizeError(f"cannot write the report {statement.report}: {error.strerror or error}; "
                             "nothing was published") from None
    return None if special else pending


def place_report(pending: Path, path: str) -> str:
    """After the commit: move the rendered report into place. The table is published by now, so a
    failure here is not the statement's failure: the report stays at the temporary path we return."""
    try:
        os.replace(pending, path)
        return str(path)
    except OSError:
        return str(pending)


def _with_private_section(provenance: dict) -> dict | None:
    """The release's summary as its comment recorded it; for a private release, with
    `details.differential_privacy` rebuilt from what the comment holds (epsilon, delta, the derived
    k and beta, the levels, the published rows; read as data), so a later REPORT writes the same
    "Differential privacy" and "Privacy ledger" sections as the report ANONYMIZE wrote. What the
    comment leaves out (the rows sampled, the ledger's totals: functions of the source's rows and of
    its other releases) is said to be left out (`recorded_in_comment`)."""
    summary = provenance.get("summary")
    if provenance.get("epsilon") is None or not isinstance(summary, dict):
        return summary
    summary = dict(summary)
    details = dict(summary.get("details") or {})
    if "differential_privacy" not in details:
        epsilon = provenance.get("epsilon")
        searched = provenance.get("epsilon_search")
        searched = 0.0 if searched is None and provenance.get("levels") is not None else searched
        details["differential_privacy"] = {
            "epsilon": epsilon, "delta": provenance.get("delta"), "k": provenance.get("dp_k"),
            "beta": provenance.get("dp_beta"), "epsilon_search": searched,
            # the statement's own arithmetic (ARX's lower bound of epsilon - epsilon_search), not a
            # float subtraction: 1 - 0.1 is 0.9 in floats, 0.8999999999999999 in the statement's
            "epsilon_anonymization": None if searched is None or not isinstance(epsilon, (int, float))
            else anonymization_budget(epsilon, searched),
            "search_steps": provenance.get("search_steps", 0 if searched == 0.0 else None),
            "levels": _released_levels(provenance, summary),
            "published_rows": summary.get("published_rows"), "recorded_in_comment": True}
    summary["details"] = details
    return summary


def _released_levels(provenance: dict, summary: dict) -> dict | None:
    """The release's levels by QI: the statement's `levels` option when it fixed them, else (a
    search chose them) the summary's levels, a list in the order of `qi`. Read as data: a list or
    names that do not fit are shown as none, never guessed."""
    given = provenance.get("levels")
    if isinstance(given, dict):
        return given
    chosen, qi = (summary.get("details") or {}).get("levels"), provenance.get("qi")
    if (isinstance(chosen, list) and isinstance(qi, list) and len(chosen) == len(qi)
            and all(isinstance(name, str) for name in qi) and all(type(level) is int for level in chosen)):
        return dict(zip(qi, chosen))
    return None
