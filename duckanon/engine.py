"""The ANONYMIZE pipeline: plan -> classes -> solver -> materialize -> summary.

Everything before the final CREATE only reads the source (temp tables aside), and the final
CREATE OR REPLACE runs in the same transaction, so an error at any step leaves the database as
it was and a re-run replaces the target atomically.
"""

from __future__ import annotations

import decimal
import json
import time
import uuid
from dataclasses import asdict, dataclass

import duckdb
from sqlglot import exp

from duckanon.classes import build_cells, sa_values
from duckanon.errors import AnonymizeError
from duckanon.materialize import histogram_publish_select, keyed_arrow, keyed_select, publish_select
from duckanon.plan import Plan, bind, one_line
from duckanon import hierarchy
from duckanon.solver import GENERALIZING, Domains, KAnonymity, LDiversity, TCloseness, solve
from duckanon.solver.emd import SAHierarchy
from duckanon.solver.generalize import FlatHierarchy
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


def models_for(plan: Plan, sa_total, sa_values=None) -> list:
    """The privacy models of the statement; `sa_values` (SA values in code order) is needed for a
    declared SA order or an SA hierarchy."""
    statement = plan.statement
    models = []
    if statement.k is not None:
        models.append(KAnonymity(statement.k))
    if statement.l is not None:
        models.append(LDiversity(statement.l, statement.l_variant, statement.c))
    if statement.t is not None:
        total = tuple(int(x) for x in sa_total)
        if statement.t_distance == "hierarchical":
            hierarchy = SAHierarchy.from_csv(statement.sa_hierarchy).for_values(
                [None if v is None else str(v) for v in sa_values], null_label="NULL")
            models.append(TCloseness(statement.t, total, "hierarchical", hierarchy=hierarchy))
        elif statement.t_distance == "ordered" and statement.sa_order is not None:
            models.append(TCloseness(statement.t, total, "ordered", order=_declared_ranks(statement.sa_order, sa_values)))
        else:
            models.append(TCloseness(statement.t, total, statement.t_distance))
    return models


def _declared_ranks(order: list, sa_values: list) -> tuple[int, ...]:
    """Rank of each SA code in the user's declared order (values compared as text)."""
    position = {value: i for i, value in enumerate(order)}
    missing = [v for v in sa_values if (None if v is None else str(v)) not in position]
    if missing:
        shown = ", ".join("NULL" if v is None else repr(str(v)) for v in missing[:5])
        raise AnonymizeError(f"sa_order does not list the sensitive value(s) {shown}")
    present = sorted(position[None if v is None else str(v)] for v in sa_values)
    dense = {p: r for r, p in enumerate(present)}  # values absent from the table take no rank
    return tuple(dense[position[None if v is None else str(v)]] for v in sa_values)


def _labelled(solution) -> set[int]:
    return {j for j, labels in enumerate(solution.group_labels or []) if labels is not None}


def column_domains(con, plan: Plan, cells) -> Domains:
    """Per QI: its values in code order, whether numeric, and its bound hierarchy (lattice)."""
    statement = plan.statement
    values, numeric = [], []
    for j in range(len(plan.qi)):
        rows = con.execute(f'SELECT DISTINCT "c{j}", "q{j}" FROM "{cells.table}" ORDER BY 1').fetchall()
        column = [v for _, v in rows]
        values.append(column)
        sample = next((v for v in column if v is not None), None)
        numeric.append(isinstance(sample, (int, float, decimal.Decimal)) and not isinstance(sample, bool))
    hierarchies = None
    if statement.method == "lattice":
        specs = statement.hierarchies
        if isinstance(specs, dict):
            qi_lower = {c.lower(): c for c in plan.qi}
            for name in specs:
                if name.lower() not in qi_lower:
                    raise AnonymizeError(f"hierarchies names column {name}, which is not a quasi-identifier")
            by_column = {qi_lower[name.lower()]: spec for name, spec in specs.items()}
        elif isinstance(specs, str):
            by_column = {c: specs for c in plan.qi}
        else:
            by_column = {}
        hierarchies = []
        for j, column in enumerate(plan.qi):
            spec = by_column.get(column)
            if spec is None:  # no hierarchy: the value or '*' (suppression of the whole column)
                hierarchies.append(FlatHierarchy(len(values[j])))
            else:
                hierarchies.append(hierarchy.parse_spec(spec, column, con).bind(values[j], column=column))
    return Domains(values, numeric, hierarchies, statement.suppression_limit, statement.metric)


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
        needs_values = statement.t is not None and (statement.t_distance == "hierarchical" or statement.sa_order is not None)
        models = models_for(plan, hist.sa_counts.sum(axis=0), sa_values(con, cells) if needs_values else None)
        domains = column_domains(con, plan, cells) if statement.method in GENERALIZING else None
        solution = solve(hist, models, statement.method, plan.patterns,
                         time_limit=statement.time_limit, domains=domains)

        con.register(parts_view, keyed_arrow(cells, solution))
        create_keyed = exp.Create(
            this=exp.to_table(keyed_table, quoted=True), kind="TABLE", expression=keyed_select(plan, cells_table, parts_view, labelled=_labelled(solution)),
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
