"""REPORT and REFRESH: their bound statements (frozen values) and binders."""

from __future__ import annotations

from dataclasses import dataclass, field

from duckanon.errors import AnonymizeError, unknown_name
from duckanon.names import TableName
from duckanon.sql.options import REFRESH_OPTIONS, REPORT_OPTIONS
from duckanon.sql.parser import Refresh, Report, position_error


@dataclass(frozen=True)
class ReportStatement:
    """REPORT <published> FROM <original> [WITH (...)]: an HTML report of a published table.

    Options left out are read from the provenance ANONYMIZE wrote on the published table (qi,
    sensitive, k, l, t, ...); `file` defaults to '<published>_report.html'."""

    published: TableName
    original: TableName
    file: str | None = None
    qi: list[str] | None = None
    sensitive: str | None = None
    k: int | None = None
    l: int | None = None
    t: float | None = None
    l_variant: str | None = None
    t_distance: str | None = None
    risk_threshold: float | None = None  # None: 1/k when k is known, else report.RISK_THRESHOLD
    # the population the release was checked against (the provenance never names it), counting
    # population_weight people per row, and N for the population-uniqueness estimate
    population: TableName | None = None
    population_weight: str | None = None
    population_size: int | None = None
    given: frozenset = field(default_factory=frozenset)  # the options written in the statement
    text: str = ""


def _option_values(options, text: str, table: dict, what: str) -> dict:
    """Each option's value by its reader in `table` (name -> reader); an unknown or repeated
    option, or a value its reader refuses, is one line pointing at the option."""
    values = {}
    for option in options or []:
        name, position = option.name, option.args["position"]
        if name not in table:
            raise position_error(text, position, unknown_name(what, name, tuple(table)))
        if name in values:
            raise position_error(text, position, f"duplicate option '{name}'")
        try:
            values[name] = table[name](option.expression)
        except AnonymizeError as error:
            raise position_error(text, position, str(error)) from None
    return values


def bind_report(parsed: Report, text: str = "") -> ReportStatement:
    values = _option_values(parsed.args.get("options"), text, REPORT_OPTIONS, "REPORT option")
    statement = ReportStatement(published=TableName(parsed.this), original=TableName(parsed.args["original"]),
                                given=frozenset(values), text=text, **values)
    if statement.published.key() == statement.original.key():
        raise AnonymizeError("REPORT compares a published table with its original: they must differ")
    return statement


@dataclass(frozen=True)
class RefreshStatement:
    """REFRESH <published> | REFRESH ALL [WITH (mode = 'fresh' | 'stable')]: re-run registered
    ANONYMIZE statements against their sources' current rows (statements/refresh.py)."""

    target: TableName | None  # None: every stale publication
    mode: str = "fresh"
    text: str = ""


def bind_refresh(parsed: Refresh, text: str = "") -> RefreshStatement:
    target = parsed.args.get("this")
    values = _option_values(parsed.args.get("options"), text, REFRESH_OPTIONS, "REFRESH option")
    return RefreshStatement(TableName(target) if target is not None else None, text=text, **values)
