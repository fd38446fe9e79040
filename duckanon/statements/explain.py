"""EXPLAIN ANONYMIZE: the plan and a dry run of the solver, nothing written; with a list of k, l
or t values, one problem built (one GROUP BY) and solved once per value."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from sqlglot import exp

from duckanon import methods
from duckanon.backends import Backend, work
from duckanon.pipeline import ledger
from duckanon.pipeline.columns import scratch_name
from duckanon.pipeline.plan import bind
from duckanon.pipeline.problem import Problem, build_problem, solve_problem, statement_context
from duckanon.pipeline.result import Table
from duckanon.solver.lattice_metrics import metric_of
from duckanon.solver.differential_privacy import SELECT_SHARE
from duckanon.sql.options import SWEEPABLE


def dry_run(backend: Backend, statement, listener=None):
    """Plan and solve without writing anything; returns (plan, problem, solution, seconds)."""
    started = time.perf_counter()
    plan = bind(backend, statement)
    with work(backend):  # never committed: the temp tables go, nothing is written
        problem = build_problem(backend, plan, scratch_name("cells"), listener)
        solution = solve_problem(problem, problem.models, statement.method,
                                 statement_context(statement, started, listener))
    return plan, problem, solution, time.perf_counter() - started


def _size_histogram(sizes) -> str:
    edges = [1, 2, 3, 5, 10, 20, 50, 100, 1000]
    counts = []
    for low, high in zip(edges, edges[1:] + [None]):
        n = int(((sizes >= low) & ((sizes < high) if high else True)).sum())
        if n:
            label = f"{low}" if high == low + 1 else (f"{low}-{high - 1}" if high else f">={low}")
            counts.append(f"{label}: {n}")
    return ", ".join(counts) or "none"


# what each dry run of a sweep measures besides the swept parameter
MEASURED_RISKS = ("highest_risk", "average_risk")


def swept_key(name: str) -> str:
    """The sweep's column of the requested values: the parameter's name, or requested_<name>
    where the measured risk of that name has a column of its own."""
    return f"requested_{name}" if name in MEASURED_RISKS else name


def sweep_rows(backend: Backend, statement, listener=None, problem: Problem | None = None) -> list[dict]:
    """One dry run per value of the swept parameter (k, l or t): loss and risk against it. The
    problem is built once (one GROUP BY; `problem`: the one the release was built from, for its
    report) and solved once per value, with that value's models; a value's seconds are the
    problem's building and its own solve, what a dry run of it alone would take."""
    name, values = statement.sweep
    if problem is None:
        with work(backend):  # never committed: the temp tables go, nothing is written
            problem = build_problem(backend, bind(backend, statement), scratch_name("cells"), listener)
    rows = []
    for value in values:
        started = time.perf_counter()
        swept = replace(statement, **{name: value})
        # each value's time_limit counts as it would for a dry run of it alone (the build included)
        context = statement_context(swept, started - problem.seconds, listener)
        solution = solve_problem(problem, problem.models_of(swept), swept.method, context)
        seconds = problem.seconds + time.perf_counter() - started
        published = solution.published_classes()
        kept_rows = int(published.sum())
        rows.append({swept_key(name): value, "stars": solution.stars, "suppressed_rows": solution.suppressed_rows,
                     "removed_rows": solution.removed_rows, "classes": len(published),
                     "min_class_size": int(published.min()) if len(published) else None,
                     "highest_risk": 1.0 / published.min() if len(published) else None,
                     "average_risk": len(published) / kept_rows if kept_rows else None,
                     "method": solution.method, "optimal": bool(solution.optimal), "seconds": round(seconds, 3)})
    return rows


def run_explain(backend: Backend, statement, listener=None) -> Table:
    """EXPLAIN ANONYMIZE: the plan and a dry run (nothing is written). With a list of k, l or t
    values, one row per value: loss and risk against the parameter."""
    if statement.sweep is not None:
        rows = sweep_rows(backend, statement, listener)
        name = statement.sweep[0]
        columns = [(swept_key(name), SWEEPABLE[name]), ("stars", "BIGINT"), ("suppressed_rows", "BIGINT"), ("removed_rows", "BIGINT"),
                   ("classes", "BIGINT"), ("min_class_size", "BIGINT"), ("highest_risk", "DOUBLE"),
                   ("average_risk", "DOUBLE"), ("method", "VARCHAR"), ("optimal", "BOOLEAN"), ("seconds", "DOUBLE")]
        return Table(columns, [tuple(row[c] for c, _ in columns) for row in rows])
    if statement.epsilon is not None:
        return _private_plan(backend, statement)
    plan, problem, solution, seconds = dry_run(backend, statement, listener)
    hist, models = problem.histogram, problem.models
    sizes = hist.sizes
    published = solution.published_classes()
    min_size = max([m.min_group_size() for m in models], default=1)  # the models the dry run used
    cells_total = hist.n_rows * hist.m
    why = (f"auto: {methods.spec('auto').summary}" if statement.method == "auto"
           else f"requested method = {statement.method}: {methods.spec(statement.method).summary}")
    if "portfolio" in solution.notes:  # the portfolio's choice on a wide table
        why += f"; {solution.notes['portfolio']}"
    if "choice" in solution.notes:  # auto with hierarchies: which label recoding, and why
        why += f"; {solution.notes['choice']}"
    search = lattice_search(solution.notes)
    proof = "yes: proven optimal" if solution.optimal else (
        f"no: {solution.notes['exact_skipped']}" if "exact_skipped" in solution.notes else
        "no: the heuristic lattice search did not prove its node optimal" if solution.notes.get("search") == "heuristic" else
        "no: exact hit the time limit" if solution.notes.get("exact") == "time limit reached" else
        "no: heuristic result without a matching lower bound")
    items = [
        ("source", plan.source.sql()), ("target (not written)", plan.target.sql()),
        ("quasi-identifiers", ", ".join(plan.qi)), ("sensitive", ", ".join(plan.sensitives)),
        ("privacy models", "; ".join(str(model) for model in models)),
        *metric_items(statement),
        ("column roles", "; ".join(f"{column}: {role}" for column, role in plan.roles().items())),
        ("dropped columns (not published)", ", ".join(plan.dropped) or "none"),
        *([("population", plan.population.sql())] if plan.population is not None else []),
        ("rows", str(hist.n_rows)), ("classes (distinct QI vectors)", str(hist.n_classes)),
        ("class sizes", _size_histogram(sizes)),
        ("classes below the smallest allowed group", f"{int((sizes < min_size).sum())} classes, "
                                                      f"{int(sizes[sizes < min_size].sum())} rows (minimum {min_size})"),
        ("method that would run", solution.method), ("why", why),
        *([("lattice search", search)] if search else []),
        ("estimated stars", f"{solution.stars} of {cells_total} QI cells ({solution.stars / max(cells_total, 1):.2%})"),
        ("estimated suppressed rows", str(solution.suppressed_rows)),
        ("published classes", f"{len(published)} (smallest {int(published.min()) if len(published) else '-'})"),
        ("lower bound on stars", "" if solution.lower_bound is None else str(solution.lower_bound)),
        ("optimum proven within the time limit", proof),
        ("solver details", json.dumps(solution.notes, default=str, sort_keys=True)),
        ("seconds (dry run)", f"{seconds:.3f}"),
    ]
    items += profile_items(backend, plan)
    return Table([("item", "VARCHAR"), ("value", "VARCHAR")], items)


def _private_plan(backend: Backend, statement) -> Table:
    """EXPLAIN of a differentially private statement: the plan and the derived parameters, from
    the statement and the catalog alone. No dry run: its sample and its search would be a run of
    the mechanism whose outcome the user sees, spending epsilon again without any record, and
    levels chosen from it would make the published "fixed" generalization data-dependent."""
    plan = bind(backend, statement)
    items = [("source", plan.source.sql()), ("target (not written)", plan.target.sql()),
             ("quasi-identifiers", ", ".join(plan.qi)), *privacy_items(statement),
             ("privacy ledger", ledger_item(backend, plan)),
             ("column roles", "; ".join(f"{column}: {role}" for column, role in plan.roles().items())),
             ("dropped columns (not published)", ", ".join(plan.dropped) or "none")]
    return Table([("item", "VARCHAR"), ("value", "VARCHAR")], items)


def ledger_item(backend: Backend, plan) -> str:
    """What the source's privacy ledger holds, and would hold after this statement (EXPLAIN reads
    it and records nothing; pipeline/ledger.py)."""
    found = ledger.state(backend, plan)
    refusal = found.refusal()
    if found.before is None:
        said = f"total spent on {found.source} unknown: {found.unknown}"
    else:
        before, after = found.before, found.after
        said = (f"spent on {found.source} before: epsilon {float(before.epsilon)!r}, delta {float(before.delta)!r} over "
                f"{before.releases} private releases; after this statement: epsilon {float(after.epsilon)!r}, delta "
                f"{float(after.delta)!r} (sequential composition)")
        if found.why_not is not None:
            said += f"; not recorded: {found.why_not}"
    if found.budget is not None:
        said += f"; budget ({found.budget[0]:g}, {found.budget[1]:g}): " + (
            f"ANONYMIZE would be refused ({refusal})" if refusal else "within it")
    return said


def _share(share: float) -> str:
    return f"{round(100 * share)}%"


def privacy_items(statement) -> list[tuple[str, str]]:
    """Differential privacy's derived parameters, known from the statement alone (bound before the
    dry run reads any row)."""
    if statement.epsilon is None:
        return []
    return [("differential privacy", f"(epsilon = {statement.epsilon:g}, delta = {statement.delta:g}): every row "
                                     f"sampled with beta = {statement.dp_beta!r}, classes below k = {statement.dp_k} "
                                     "removed (ARX's parameter calculation; epsilon_anonymization = "
                                     f"{statement.dp_epsilon_anonymization!r})"),
            ("generalization", f"searched: SafePub's search spends epsilon_search = {statement.epsilon_search:g} over "
                               f"{statement.search_steps} steps by {statement.metric} ({_share(1 - SELECT_SHARE)} on the walk, "
                               f"{_share(SELECT_SHARE)} on the final choice among the nodes it scored)"
             if statement.epsilon_search else
             "fixed: " + ", ".join(f"{name} = {level}" for name, level in statement.levels.items())
             if statement.levels else "none: the classes as they are"),
            ("this dry run", "none: EXPLAIN draws no sample and runs no search (each would spend epsilon again, "
                             "unrecorded); choose the levels without looking at the data, or the guarantee does not "
                             "cover that choice")]


def metric_items(statement) -> list[tuple[str, str]]:
    """The metric a lattice-like method minimises, with the loss's generalization/suppression
    factor when one is given (ARX's gsFactor and the two factors it derives)."""
    if not methods.spec(statement.method).takes_hierarchies or statement.epsilon is not None:
        return []
    if statement.gs_factor is None:
        return [("metric", statement.metric)]
    metric = metric_of("loss", statement.gs_factor)
    return [("metric", f"loss with gs_factor = {statement.gs_factor:g} (ARX's Loss(gsFactor)): a published cell "
                       f"counts {metric.generalization_factor:g} x its generalization, a removed cell its "
                       f"generalization + {metric.suppression_factor:g} x the rest up to 1")]


def lattice_search(notes: dict) -> str:
    """How the lattice was searched (its node, or auto's lattice candidate), in words: '' when no
    lattice ran or it was searched exhaustively with nothing to add."""
    search = notes.get("search") or notes.get("lattice_search")
    if search == "heuristic" or (isinstance(search, dict) and search.get("search") == "heuristic"):
        found = notes if search == "heuristic" else search
        return (f"heuristic: {found['search_reason']}; best-first from the bottom within at most "
                f"{found['evaluation_bound']:,} node evaluations a search ({found['nodes_evaluated']:,} made)")
    return "exhaustive: every node decided (pruned or evaluated)" if search == "exhaustive" else ""


def profile_items(backend: Backend, plan) -> list[tuple[str, str]]:
    """What sql/profile.sql's anon_profile and anon_safe_harbor find in the source, beside the role
    the statement gives each column (DuckDB only: the macros are DuckDB's)."""
    if not backend.writes_reports:
        return []
    backend.install_macros()  # also on a cursor of its own (the SQL function anonymize())
    roles = plan.roles()
    items = []
    profile = exp.select(*[exp.column(c, quoted=True) for c in ("column_name", "suggested_role", "reason")],
                         _pattern_names()).from_(_macro_table("anon_profile", plan))
    for column, suggested, reason, patterns in backend.rows(profile):
        found = f" ({', '.join(patterns)})" if patterns else ""
        items.append((f"profile: {column}", f"suggested {suggested}{found}: {reason}; role here: "
                                            f"{roles.get(column, 'dropped')}"))
    safe_harbor = (exp.select(exp.column("kind", quoted=True), exp.column("columns", quoted=True))
                   .from_(_macro_table("anon_safe_harbor", plan)).order_by(exp.column("kind_no", quoted=True)))
    for kind, columns in backend.rows(safe_harbor):
        shown = ", ".join(f"{c} ({roles.get(c, 'dropped')})" for c in columns)
        items.append((f"HIPAA Safe Harbor: {kind}", shown))
    return items


def _macro_table(macro: str, plan) -> exp.Table:
    """FROM <macro>('<the source>'): a table macro of sql/profile.sql over the statement's source."""
    return exp.Table(this=exp.Anonymous(this=macro, expressions=[exp.Literal.string(plan.source.sql())]))


def _pattern_names() -> exp.Expr:
    """[p.pattern FOR p IN patterns]: the names of the patterns anon_profile matched."""
    return exp.Array(expressions=[exp.Comprehension(
        this=exp.column("pattern", table="p", quoted=True), expression=exp.to_identifier("p", quoted=True),
        iterator=exp.column("patterns", quoted=True))])
