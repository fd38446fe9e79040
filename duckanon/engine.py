"""The ANONYMIZE pipeline: plan -> classes -> solver -> materialize -> summary.

Everything before the final CREATE only reads the source (temp tables aside), and the final
CREATE OR REPLACE runs in the same transaction, so an error at any step leaves the database as
it was and a re-run replaces the target atomically.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass

import duckdb
from sqlglot import exp

from duckanon.classes import build_cells
from duckanon.errors import AnonymizeError
from duckanon.materialize import histogram_publish_select, keyed_arrow, keyed_select, publish_select
from duckanon.plan import Plan, bind, one_line
from duckanon.solver import KAnonymity, LDiversity, TCloseness, solve
from duckanon.sql import bind_statement, parse_statement


@dataclass
class Summary:
    """The one-row result of ANONYMIZE."""

    rows: int
    classes: int
    min_class_size: int | None
    stars: int
    suppressed_rows: int
    method: str
    optimal: bool
    lower_bound: int | None
    seconds: float
    details: str = "{}"  # JSON: the solver's diagnostics (e.g. tp_phase, residue_rows, exact's status)

    SQL_TYPES = {
        "rows": "BIGINT", "classes": "BIGINT", "min_class_size": "BIGINT", "stars": "BIGINT",
        "suppressed_rows": "BIGINT", "method": "VARCHAR", "optimal": "BOOLEAN",
        "lower_bound": "BIGINT", "seconds": "DOUBLE", "details": "JSON",
    }

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def as_sql(self) -> tuple[str, list]:
        """A SELECT producing this row with proper column types, and its parameters."""
        items = [f"CAST(? AS {sql_type}) AS {name}" for name, sql_type in self.SQL_TYPES.items()]
        values = asdict(self)
        return "SELECT " + ", ".join(items), [values[name] for name in self.SQL_TYPES]


def models_for(plan: Plan, sa_total) -> list:
    statement = plan.statement
    models = []
    if statement.k is not None:
        models.append(KAnonymity(statement.k))
    if statement.l is not None:
        models.append(LDiversity(statement.l, statement.l_variant, statement.c))
    if statement.t is not None:
        models.append(TCloseness(statement.t, tuple(int(x) for x in sa_total), statement.t_distance))
    return models


def _begin(con) -> bool:
    """Start our own transaction unless the caller already has one open."""
    try:
        con.execute("BEGIN TRANSACTION")
        return True
    except duckdb.TransactionException:
        return False


def _drop_temp_tables(con, *tables: str) -> None:
    for table in tables:
        con.execute(f'DROP TABLE IF EXISTS "{table}"')


def run_anonymize(con: duckdb.DuckDBPyConnection, text: str) -> Summary:
    started = time.perf_counter()
    statement = bind_statement(parse_statement(text), text)
    plan = bind(con, statement)
    suffix = uuid.uuid4().hex[:12]
    cells_table, parts_view, keyed_table = (f"__duckanon_{name}_{suffix}" for name in ("cells", "parts", "keyed"))
    own_transaction = _begin(con)
    try:
        cells = build_cells(con, plan, cells_table)
        hist = cells.histogram
        solution = solve(hist, models_for(plan, hist.sa_counts.sum(axis=0)), statement.method, plan.patterns,
                         time_limit=statement.time_limit)

        con.register(parts_view, keyed_arrow(cells, solution))
        create_keyed = exp.Create(
            this=exp.to_table(keyed_table, quoted=True), kind="TABLE", expression=keyed_select(plan, cells_table, parts_view),
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        )
        con.execute(create_keyed.sql(dialect="duckdb"))
        con.unregister(parts_view)
        if plan.keep:  # per-row values are published: join the keyed table back to the source
            any_split = con.execute(f'SELECT bool_or(split) FROM "{keyed_table}"').fetchone()[0] or False
            published = publish_select(plan, keyed_table, any_split)
        else:  # every published row is determined by its cell: no second pass over the source
            published = histogram_publish_select(plan, keyed_table)
        create_target = exp.Create(this=plan.target.table.copy(), kind="TABLE", replace=True, expression=published)
        con.execute(create_target.sql(dialect="duckdb"))
        _drop_temp_tables(con, cells_table, keyed_table)
        if own_transaction:
            con.execute("COMMIT")
    except BaseException as error:
        if own_transaction:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass
        else:
            try:
                _drop_temp_tables(con, cells_table, keyed_table)
            except duckdb.Error:
                pass
        try:
            con.unregister(parts_view)
        except Exception:
            pass
        if isinstance(error, duckdb.Error):
            raise AnonymizeError(f"ANONYMIZE failed: {one_line(error)}") from None
        raise

    published = solution.published_classes()
    return Summary(
        rows=hist.n_rows,
        classes=len(published),
        min_class_size=int(published.min()) if len(published) else None,
        stars=solution.stars,
        suppressed_rows=solution.suppressed_rows,
        method=solution.method,
        optimal=bool(solution.optimal),
        lower_bound=solution.lower_bound,
        seconds=round(time.perf_counter() - started, 6),
        details=json.dumps(solution.notes, default=str, sort_keys=True),
    )
