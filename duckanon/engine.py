"""The ANONYMIZE pipeline: plan -> classes -> solver -> materialize -> summary.

Everything before the final CREATE only reads the source (temp tables aside), and the final
CREATE OR REPLACE runs in the same transaction, so an error at any step leaves the database as
it was and a re-run replaces the target atomically.
"""

from __future__ import annotations

import decimal
import os
import secrets
import json
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import duckdb
from sqlglot import exp

from duckanon.classes import HistogramTooLarge, build_cells, sa_values, snapshot_source
from duckanon.errors import AnonymizeError, one_line
from duckanon.materialize import (
    check_published_rows, column_loss, histogram_publish_select, insertion_order_kept, keyed_arrow, keyed_select,
    publish_select,
)
from duckanon.plan import Plan, bind
from duckanon import backends, extras, hierarchy, methods, progress
from duckanon._version import __version__
from duckanon.solver import GENERALIZING, Domains, KAnonymity, LDiversity, TCloseness, solve
from duckanon.solver.emd import SAHierarchy
from duckanon.solver.generalize import FlatHierarchy
from duckanon.sql import AnonymizeStatement, ReportStatement, bind_report, bind_statement, parse_statement
from duckanon.sql.parser import Report
from duckanon.sql.parser import strip_explain


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
    published_rows: int | None = None  # rows in the published table
    removed_rows: int = 0  # source rows left out (record suppression: lattice's suppression_limit)
    optimal_for: str | None = None  # what `optimal` is proven for: "stars", or a metric and its search space
    target: str | None = None  # the published table, as SQL
    report: str | None = None  # the HTML report's path, when one was written
    details: str = "{}"  # JSON: the solver's diagnostics (e.g. tp_phase, residue_rows, exact's status)

    SQL_TYPES = {
        "rows": "BIGINT", "classes": "BIGINT", "min_class_size": "BIGINT", "stars": "BIGINT",
        "suppressed_rows": "BIGINT", "method": "VARCHAR", "optimal": "BOOLEAN",
        "lower_bound": "BIGINT", "seconds": "DOUBLE", "published_rows": "BIGINT", "removed_rows": "BIGINT",
        "optimal_for": "VARCHAR", "target": "VARCHAR", "report": "VARCHAR", "details": "JSON",
    }

    def to_json(self) -> str:
        """The row as one JSON object; `details` nested as an object (so `s->'details'->'x'` works)."""
        row = asdict(self)
        row["details"] = json.loads(self.details)
        return json.dumps(row, default=str)

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
            hierarchy = SAHierarchy.from_rows(plan.sa_hierarchy_rows, source=statement.sa_hierarchy).for_values(
                [None if v is None else str(v) for v in sa_values], null_label="NULL")
            models.append(TCloseness(statement.t, total, "hierarchical", hierarchy=hierarchy))
        elif statement.t_distance == "ordered" and statement.sa_order is not None:
            models.append(TCloseness(statement.t, total, "ordered", order=_declared_ranks(statement.sa_order, sa_values, plan.sensitive,
                                                                                      plan.source_shown)))
        else:
            models.append(TCloseness(statement.t, total, statement.t_distance))
    return models


def _declared_ranks(order: list, sa_values: list, column: str | None = None, source: str | None = None) -> tuple[int, ...]:
    """Rank of each SA code in the user's declared order (values compared as text)."""
    position = {value: i for i, value in enumerate(order)}
    missing = [v for v in sa_values if (None if v is None else str(v)) not in position]
    if missing:  # counted, never quoted: a message must not carry a value of the source
        raise AnonymizeError(hierarchy.sa_order_missing(len(missing), order, column, source))
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
    if methods.spec(statement.method).takes_hierarchies:
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
                hierarchies.append(hierarchy.parse_spec(spec, column, con).bind(values[j], column=column,
                                                                                 source=plan.source_shown))
    return Domains(values, numeric, hierarchies, statement.suppression_limit, statement.metric)


def in_explicit_transaction(con) -> bool:
    """Whether the caller has a transaction open on `con`: in autocommit mode every statement is
    its own transaction (two txid_current() differ); inside an explicit one they are equal."""
    if hasattr(con, "in_transaction"):  # another engine (Spark) says for itself
        return con.in_transaction()
    first = con.execute("SELECT txid_current()").fetchone()[0]
    return con.execute("SELECT txid_current()").fetchone()[0] == first


def _begin(con) -> bool:
    """Start our own transaction unless the caller already has one open (a failed BEGIN inside the
    caller's transaction would abort it, so probe first). The caller then owns COMMIT and ROLLBACK."""
    if in_explicit_transaction(con):
        return False
    con.execute("BEGIN TRANSACTION")
    return True


def _drop_temp_tables(con, *tables: str) -> None:
    for table in tables:
        con.execute(f'DROP TABLE IF EXISTS "{table}"')


def _build_cells(con, plan: Plan, cells_table: str):
    """The cells table and histogram, and the plan the solver and the join-back use.

    With k alone the solver never looks at the sensitive values. When they would push the
    histogram (classes x SA values) over the memory budget, they are left out of it: the
    sensitive column is then published per row from the source, as a kept column is, and the
    histogram has one cell per class. (Only then: with the values in, a solver may place the rows
    of one class by SA value, so the published rows stay as they were for every request that fits.)
    """
    budget = memory_budget(plan.statement.memory_limit)
    try:
        return plan, build_cells(con, plan, cells_table, budget)
    except HistogramTooLarge:
        statement = plan.statement
        if plan.sensitive is None or statement.l is not None or statement.t is not None:
            raise
    _drop_temp_tables(con, cells_table)
    solver_plan = replace(plan, sensitive=None, keep=plan.keep + [plan.sensitive])
    return solver_plan, build_cells(con, solver_plan, cells_table, budget)


@dataclass
class Problem:
    """What the solver receives for one statement: the bound plan, the class histogram, the
    privacy models, the user's patterns (column indexes) and, for generalizing methods, the
    columns' domains. `solve(problem.histogram, problem.models, method, problem.patterns,
    domains=problem.domains)` is what ANONYMIZE runs."""

    plan: Plan
    histogram: object
    models: list
    patterns: list | None
    domains: Domains | None


def _problem(con, plan: Plan, cells_table: str):
    """The histogram built in DuckDB (a temp table) and the solver's input, and the cells and plan
    they were built for (see _build_cells)."""
    statement = plan.statement
    progress.report("building the class histogram (GROUP BY)")
    plan, cells = _build_cells(con, plan, cells_table)
    hist = cells.histogram
    needs_values = statement.t is not None and (statement.t_distance == "hierarchical" or statement.sa_order is not None)
    models = models_for(plan, hist.sa_counts.sum(axis=0), sa_values(con, cells) if needs_values else None)
    domains = column_domains(con, plan, cells) if statement.method in GENERALIZING else None
    return cells, Problem(plan, hist, models, plan.patterns, domains)


def prepare(con, text: str) -> Problem:
    """The solver's input for an ANONYMIZE text, built exactly as the statement builds it, with
    nothing written: for benchmarks and tests that call the solver themselves."""
    con = getattr(con, "duckdb", con)  # the histogram is read through a DuckDB relation
    statement = statement_for(text)
    if not isinstance(statement, AnonymizeStatement) or statement.explain:
        raise AnonymizeError("prepare() takes one ANONYMIZE statement")
    plan = bind(con, statement)
    cells_table = f"__duckanon_cells_{uuid.uuid4().hex[:12]}"
    own_transaction = _begin(con)
    try:
        return _problem(con, plan, cells_table)[1]
    finally:
        _abort(con, own_transaction, cells_table)


def _solve(con, plan: Plan, cells_table: str, started: float | None = None):
    """Classes and solver: the histogram built in DuckDB (a temp table) and the Solution, and the
    plan they were built for (see _build_cells)."""
    statement = plan.statement
    cells, problem = _problem(con, plan, cells_table)
    plan, hist, models, domains = problem.plan, problem.histogram, problem.models, problem.domains
    progress.report(f"solving: {statement.method}", classes=hist.n_classes, rows=hist.n_rows)
    # time_limit bounds the whole statement: the solver's deadline counts from the statement's start
    deadline = None if statement.time_limit is None or started is None else started + statement.time_limit
    solution = solve(hist, models, statement.method, plan.patterns, time_limit=statement.time_limit, domains=domains,
                     deadline=deadline)
    if solution.masked is not None:  # stars published as a whole-domain label ('*****'), not as '*'
        solution.notes["whole_domain_cells"] = solution.whole_domain_cells
    if plan.sensitive is None and statement.sensitive:
        solution.notes["sensitive_in_solver"] = False  # left out of the histogram: k alone, too large
    return plan, cells, hist, solution, models, domains


# Without memory_limit, the solver side may use this share of the memory available when the
# statement starts (DuckDB keeps its own data within its own memory_limit, spilling beyond it).
AVAILABLE_MEMORY_SHARE = 0.8


def memory_budget(limit: int | None) -> int | None:
    """Bytes the histogram and solver may use: the option, or a share of the available memory."""
    if limit is not None:
        return limit
    try:
        with open("/proc/meminfo") as info:
            fields = dict(line.split(":", 1) for line in info)
        return int(AVAILABLE_MEMORY_SHARE * int(fields["MemAvailable"].split()[0]) * 1024)
    except (OSError, KeyError, ValueError):  # not Linux: no default limit
        return None


def optimal_for(solution, statement) -> str | None:
    """What a proven optimum is optimal for, in the words the report and the shell use."""
    if not solution.optimal:
        return None
    if solution.method == "lattice":
        limit = statement.suppression_limit or 0
        return (f"{statement.metric} among full-domain generalizations of the given hierarchies"
                + (f" within a {limit:.4g} record-suppression limit" if limit else " with no rows removed"))
    return "stars"


def _summary(hist, solution, started: float, plan: Plan | None = None) -> Summary:
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
        published_rows=int(published.sum()),
        removed_rows=int(solution.removed_rows),
        optimal_for=optimal_for(solution, plan.statement) if plan is not None else None,
        details=json.dumps(solution.notes, default=str, sort_keys=True),
        target=exp.table_name(plan.target.table, dialect="duckdb") if plan is not None else None,
    )


def statement_for(text: str):
    """The bound statement of an ANONYMIZE, EXPLAIN ANONYMIZE or REPORT text."""
    explain, body = strip_explain(text)
    parsed = parse_statement(body)
    if isinstance(parsed, Report):
        return bind_report(parsed, body)
    statement = bind_statement(parsed, body, explain=explain)
    if statement.seed is None:  # no seed given: a fresh 63-bit one from the OS's CSPRNG, never reused
        statement.seed = secrets.randbelow(2**63)
    return statement


def run_statement(con: duckdb.DuckDBPyConnection, text: str):
    """Run ANONYMIZE (returns its Summary), EXPLAIN ANONYMIZE or REPORT (return a Table)."""
    try:
        return _run_statement(con, text)
    finally:
        if isinstance(con, duckdb.DuckDBPyConnection) and hasattr(con, "abort"):
            con.abort()  # DuckDB 2 streams results: leave none of ours unread to block the caller's next query


def _run_statement(con, text: str):
    started = time.perf_counter()
    statement = statement_for(text)
    if isinstance(statement, ReportStatement) or statement.report:
        extras.require("matplotlib")  # before anything runs, so nothing is published without its report
    if isinstance(statement, ReportStatement):
        return run_report(con, statement)
    if statement.engine != "duckdb" and not hasattr(con, "spark"):
        # the same pipeline on another engine: its SQL is transpiled, the source read from its catalog
        con = backends.connect(statement.engine, statement)
    if statement.explain:
        return run_explain(con, statement)
    if statement.report:
        _check_file_access(con, statement.report)  # before anything is published
    plan = bind(con, statement)
    return _publish(con, plan, started)


def run_anonymize(con: duckdb.DuckDBPyConnection, text: str) -> Summary:
    result = run_statement(con, text)
    if not isinstance(result, Summary):
        raise AnonymizeError("expected ANONYMIZE, got EXPLAIN ANONYMIZE")
    return result


def _publish(con: duckdb.DuckDBPyConnection, plan: Plan, started: float) -> Summary:
    suffix = uuid.uuid4().hex[:12]
    cells_table, parts_view, keyed_table, source_table = (
        f"__duckanon_{name}_{suffix}" for name in ("cells", "parts", "keyed", "source"))
    pending_report = None
    own_transaction = _begin(con)
    try:
        # a source that could read differently twice (a view with random() or USING SAMPLE) is
        # copied once; a base table reads the same within our transaction
        read_plan = snapshot_source(con, plan, source_table)
        solver_plan, cells, hist, solution, _, domains = _solve(con, read_plan, cells_table, started)
        progress.report(f"publishing {plan.target.sql()}", rows=hist.n_rows)
        con.register(parts_view, keyed_arrow(cells, solution))
        create_keyed = exp.Create(
            this=exp.to_table(keyed_table, quoted=True), kind="TABLE",
            expression=keyed_select(solver_plan, cells_table, parts_view, labelled=_labelled(solution)),
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        )
        with insertion_order_kept(con):  # the published order is the keyed table's (seeded) order
            con.execute(create_keyed.sql(dialect="duckdb"))
            con.unregister(parts_view)
            if solver_plan.keep:  # per-row values are published: join the keyed table back to the source
                any_split = con.execute(f'SELECT bool_or(split) FROM "{keyed_table}"').fetchone()[0] or False
                published = publish_select(solver_plan, keyed_table, any_split)
            else:  # every published row is determined by its cell: no second pass over the source
                published = histogram_publish_select(solver_plan, keyed_table)
            create_target = exp.Create(this=plan.target.table.copy(), kind="TABLE", replace=True, expression=published)
            con.execute(create_target.sql(dialect="duckdb"))
        solution.notes["column_loss"] = column_loss(plan.qi, hist, solution, domains)
        summary = _summary(hist, solution, started, plan)
        check_published_rows(con, plan, summary.published_rows, keyed_table)  # before anything is committed
        _describe_target(con, plan, summary)
        _drop_temp_tables(con, cells_table, keyed_table)
        pending_report = _render_report(con, plan, summary, read_plan) if plan.statement.report else None
        _drop_temp_tables(con, source_table)
        if plan.statement.report:
            summary.report = str(plan.statement.report)
        if own_transaction:
            con.execute("COMMIT")
    except BaseException as error:
        _abort(con, own_transaction, cells_table, keyed_table, parts_view, source_table)
        if pending_report is not None:
            pending_report.unlink(missing_ok=True)
        if isinstance(error, duckdb.Error):
            raise AnonymizeError(f"ANONYMIZE failed: {one_line(error)}") from None
        if _is_ctrl_c(error):  # DuckDB reports SIGINT during a query as RuntimeError
            raise KeyboardInterrupt("ANONYMIZE interrupted; nothing was written") from None
        raise
    if pending_report is not None:
        summary.report = _place_report(pending_report, plan.statement.report)
    return summary


def _describe_target(con, plan: Plan, summary: Summary) -> None:
    """The published table's comment says how it was made (parameters and result, never the
    source's name or values), so REPORT and a privacy officer can read its provenance later."""
    statement = plan.statement
    provenance = {"duckanon": __version__, "qi": plan.qi, "sensitive": plan.sensitive}
    provenance.update(release_parameters(statement))
    provenance["summary"] = {name: value for name, value in asdict(summary).items()
                             if name not in ("details", "target", "report")}
    provenance["summary"]["details"] = json.loads(summary.details)
    text = "duckanon " + json.dumps(provenance, default=str, sort_keys=True)
    con.execute(exp.Comment(this=plan.target.table.copy(), kind="TABLE",
                            expression=exp.Literal.string(text)).sql(dialect="duckdb"))


def published_provenance(con, table) -> dict | None:
    """What `_describe_target` wrote on a published table, or None (not made by ANONYMIZE)."""
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE database_name = coalesce(?, current_database()) "
                          "AND schema_name = coalesce(?, current_schema()) AND lower(table_name) = lower(?)",
                          [table.table.catalog or None, table.table.db or None, table.name]).fetchone()
    if not comment or not comment[0] or not comment[0].startswith("duckanon {"):
        return None
    try:
        return json.loads(comment[0][len("duckanon "):])
    except ValueError:
        return None


def _is_ctrl_c(error: BaseException) -> bool:
    return type(error) is RuntimeError and "interrupted" in str(error).lower()


def _abort(con, own_transaction: bool, *temp: str) -> None:
    """Undo everything of a failed or dry run: roll back, or drop our temp tables."""
    cells_table, keyed_table, parts_view, source_table = (list(temp) + [None, None, None, None])[:4]
    if own_transaction:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
    else:
        try:
            _drop_temp_tables(con, *[t for t in (cells_table, keyed_table, source_table) if t])
        except duckdb.Error:
            pass
    if parts_view:
        try:
            con.unregister(parts_view)
        except Exception:
            pass


@dataclass
class Table:
    """A small result table (EXPLAIN's rows), returned like the summary row."""

    columns: list[tuple[str, str]]  # (name, SQL type)
    rows: list[tuple]

    def as_sql(self) -> tuple[str, list]:
        names = ", ".join(f'"{name}"' for name, _ in self.columns)
        if not self.rows:
            items = ", ".join(f'CAST(NULL AS {sql_type}) AS "{name}"' for name, sql_type in self.columns)
            return f"SELECT {items} WHERE false", []
        cells = ", ".join("(" + ", ".join(f"CAST(? AS {sql_type})" for _, sql_type in self.columns) + ")" for _ in self.rows)
        return f"SELECT * FROM (VALUES {cells}) AS explain({names})", [v for row in self.rows for v in row]


def _dry_run(con, statement):
    """Plan and solve without writing anything; returns (plan, hist, solution, models, seconds)."""
    started = time.perf_counter()
    plan = bind(con, statement)
    cells_table = f"__duckanon_cells_{uuid.uuid4().hex[:12]}"
    own_transaction = _begin(con)
    try:
        _, _, hist, solution, models, _ = _solve(con, plan, cells_table, started)
    finally:
        _abort(con, own_transaction, cells_table)
    return plan, hist, solution, models, time.perf_counter() - started


def _size_histogram(sizes) -> str:
    edges = [1, 2, 3, 5, 10, 20, 50, 100, 1000]
    counts = []
    for low, high in zip(edges, edges[1:] + [None]):
        n = int(((sizes >= low) & ((sizes < high) if high else True)).sum())
        if n:
            label = f"{low}" if high == low + 1 else (f"{low}-{high - 1}" if high else f">={low}")
            counts.append(f"{label}: {n}")
    return ", ".join(counts) or "none"


def _sweep_rows(con, statement) -> list[dict]:
    name, values = statement.sweep
    rows = []
    for value in values:
        setattr(statement, name, value)
        _, _, solution, _, seconds = _dry_run(con, statement)
        published = solution.published_classes()
        kept_rows = int(published.sum())
        rows.append({name: value, "stars": solution.stars, "suppressed_rows": solution.suppressed_rows,
                     "removed_rows": solution.removed_rows, "classes": len(published),
                     "min_class_size": int(published.min()) if len(published) else None,
                     "highest_risk": 1.0 / published.min() if len(published) else None,
                     "average_risk": len(published) / kept_rows if kept_rows else None,
                     "method": solution.method, "optimal": bool(solution.optimal), "seconds": round(seconds, 3)})
    setattr(statement, name, values[0])
    return rows


def run_explain(con, statement) -> Table:
    """EXPLAIN ANONYMIZE: the plan and a dry run (nothing is written). With a list of k, l or t
    values, one row per value: loss and risk against the parameter."""
    if statement.sweep is not None:
        rows = _sweep_rows(con, statement)
        name = statement.sweep[0]
        types = {"k": "BIGINT", "l": "BIGINT", "t": "DOUBLE"}
        columns = [(name, types[name]), ("stars", "BIGINT"), ("suppressed_rows", "BIGINT"), ("removed_rows", "BIGINT"),
                   ("classes", "BIGINT"), ("min_class_size", "BIGINT"), ("highest_risk", "DOUBLE"),
                   ("average_risk", "DOUBLE"), ("method", "VARCHAR"), ("optimal", "BOOLEAN"), ("seconds", "DOUBLE")]
        return Table(columns, [tuple(row[c] for c, _ in columns) for row in rows])
    plan, hist, solution, models, seconds = _dry_run(con, statement)
    sizes = hist.sizes
    published = solution.published_classes()
    min_size = max([m.min_group_size() for m in models], default=1)  # the models the dry run used
    cells_total = hist.n_rows * hist.m
    why = (f"auto: {methods.spec('auto').summary}" if statement.method == "auto"
           else f"requested method = {statement.method}: {methods.spec(statement.method).summary}")
    proof = "yes: proven optimal" if solution.optimal else (
        f"no: {solution.notes['exact_skipped']}" if "exact_skipped" in solution.notes else
        "no: exact hit the time limit" if solution.notes.get("exact") == "time limit reached" else
        "no: heuristic result without a matching lower bound")
    items = [
        ("source", plan.source.sql()), ("target (not written)", plan.target.sql()),
        ("quasi-identifiers", ", ".join(plan.qi)), ("sensitive", plan.sensitive or ""),
        ("rows", str(hist.n_rows)), ("classes (distinct QI vectors)", str(hist.n_classes)),
        ("class sizes", _size_histogram(sizes)),
        ("classes below the smallest allowed group", f"{int((sizes < min_size).sum())} classes, "
                                                      f"{int(sizes[sizes < min_size].sum())} rows (minimum {min_size})"),
        ("method that would run", solution.method), ("why", why),
        ("estimated stars", f"{solution.stars} of {cells_total} QI cells ({solution.stars / max(cells_total, 1):.2%})"),
        ("estimated suppressed rows", str(solution.suppressed_rows)),
        ("published classes", f"{len(published)} (smallest {int(published.min()) if len(published) else '-'})"),
        ("lower bound on stars", "" if solution.lower_bound is None else str(solution.lower_bound)),
        ("optimum proven within the time limit", proof),
        ("solver details", json.dumps(solution.notes, default=str, sort_keys=True)),
        ("seconds (dry run)", f"{seconds:.3f}"),
    ]
    return Table([("item", "VARCHAR"), ("value", "VARCHAR")], items)


def run_report(con, statement: ReportStatement) -> Table:
    """REPORT: the HTML report of a published table against its original, written to a file.
    What the statement leaves out comes from the table's provenance comment (if ANONYMIZE made it)."""
    from duckanon.plan import _table_columns, resolved
    from duckanon.report import at_risk_sql_threshold, resolve_risk_threshold, write_report

    # queries read the objects DuckDB resolves the names to; messages and the result row show the
    # names as written
    written_as = statement
    published, original = resolved(con, statement.published), resolved(con, statement.original)
    if published.key() == original.key():
        raise AnonymizeError("REPORT compares a published table with its original: they must differ")
    statement = replace(statement, published=published, original=original)
    published_columns = _table_columns(con, statement.published)
    original_columns = _table_columns(con, statement.original)
    provenance = published_provenance(con, statement.published) or {}
    chosen = {name: getattr(statement, name) if name in statement.given else provenance.get(name)
              for name in ("qi", "sensitive", "k", "l", "t", "l_variant", "t_distance")}
    chosen.update({name: provenance[name] for name in ("c", "sa_hierarchy", "sa_order") + GENERALIZATION_PARAMETERS
                   if name in provenance})
    qi, sensitive = chosen["qi"], chosen["sensitive"]
    if not qi:
        raise AnonymizeError(f"REPORT needs qi = (...): {written_as.published.sql()} has no duckanon provenance "
                             "(it was not published by ANONYMIZE, or its comment was changed)")
    for column in qi + ([sensitive] if sensitive else []):
        for table, columns in ((written_as.published, published_columns), (written_as.original, original_columns)):
            if column.lower() not in {c.lower() for c in columns}:
                raise AnonymizeError(f"column {column} is not in {table.sql()}")
    _check_file_access(con, statement.file or "the report")
    if statement.file:
        path = statement.file
    else:
        path = extras.default_report_path(written_as.published.name)
        path.parent.mkdir(parents=True, exist_ok=True)
    params = {name: value for name, value in chosen.items() if value is not None and name not in ("qi", "sensitive")}
    params["method"] = provenance.get("method", "unknown (not published by ANONYMIZE)")
    params.update({"qi": ", ".join(qi), "sensitive": sensitive or ""})
    summary = provenance.get("summary")
    try:
        written = write_report(con, statement.published.sql(), statement.original.sql(), qi, sensitive, path,
                               summary=summary, params=params, risk_threshold=statement.risk_threshold)
    except OSError as error:
        raise AnonymizeError(f"the report could not be written to {path}: {error}") from None
    threshold, _ = resolve_risk_threshold(statement.risk_threshold, params.get("k"))
    risk = con.execute("SELECT highest_risk, average_risk, records_at_risk FROM anon_risk(?, ?, threshold := ?)",
                       [statement.published.sql(), qi, at_risk_sql_threshold(threshold)]).fetchone()
    columns = [("report", "VARCHAR"), ("published", "VARCHAR"), ("original", "VARCHAR"), ("highest_risk", "DOUBLE"),
               ("average_risk", "DOUBLE"), ("records_at_risk", "BIGINT"), ("risk_threshold", "DOUBLE")]
    shown = [name.table.sql(dialect="duckdb") for name in (written_as.published, written_as.original)]  # quoted if needed
    return Table(columns, [(str(written), *shown, *risk, threshold)])


def _check_file_access(con, path: str) -> None:
    """A report is a file written by Python: honour DuckDB's switch for file access all the same."""
    enabled = con.execute("SELECT current_setting('enable_external_access')").fetchone()[0]
    if not enabled:
        raise AnonymizeError(f"cannot write the report {path}: file access is disabled "
                             "(SET enable_external_access = false)")


# What shaped a release, as the provenance comment, the report and REPORT show it.
RELEASE_PARAMETERS = ("k", "l", "t", "l_variant", "c", "t_distance", "sa_hierarchy", "sa_order", "method")
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
    if methods.spec(statement.method).takes_hierarchies:  # hierarchies = None means "none given": shown as such
        params.update({name: getattr(statement, name) for name in GENERALIZATION_PARAMETERS})
    return params


def _render_report(con, plan: Plan, summary: Summary, read_plan: Plan | None = None) -> Path | None:
    """Write the report of the release being published, inside the publishing transaction, so a
    report that cannot be written fails the statement before the commit. A regular file is written
    to a temporary file beside it and renamed into place after the commit (see _place_report); a
    path that exists and is not a regular file (a device, a pipe) is written directly, now, and
    None is returned."""
    from duckanon.report import write_report

    statement = plan.statement
    final = Path(statement.report)
    if final.is_dir():
        raise AnonymizeError(f"cannot write the report {statement.report}: it is a directory")
    special = final.exists() and not final.is_file()
    sweep = _sweep_rows(con, statement) if statement.sweep else None
    params = release_parameters(statement)
    params.update({"qi": ", ".join(plan.qi), "sensitive": plan.sensitive or ""})
    pending = final if special else final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        # the rows as they were read (the snapshot of a changing source), named as the user wrote it
        write_report(con, plan.target.sql(), (read_plan or plan).source.sql(), plan.qi, plan.sensitive, pending,
                     summary=summary, params=params, sweep=sweep, risk_threshold=statement.risk_threshold,
                     original_shown=plan.source_shown)
    except OSError as error:
        if not special:
            pending.unlink(missing_ok=True)
        raise AnonymizeError(f"cannot write the report {statement.report}: {error.strerror or error}; "
                             "nothing was published") from None
    return None if special else pending


def _place_report(pending: Path, path: str) -> str:
    """After the commit: move the rendered report into place. The table is published by now, so a
    failure here is not the statement's failure: the report stays at the temporary path we return."""
    try:
        os.replace(pending, path)
        return str(path)
    except OSError:
        return str(pending)
