"""Step 3 of the pipeline: the solver's input (the problem) and the solve.

`prepare(con, text)` is the one public way to build what ANONYMIZE gives the solver, for
benchmarks and tests; the statements build it the same way (build_problem, solve_problem).
"""

from __future__ import annotations

import decimal
import math
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import numpy as np
from sqlglot import exp

from duckanon import hierarchy, methods, progress
from duckanon.backends import Backend, backend_for, work
from duckanon.errors import AnonymizeError
from duckanon.pipeline.histogram import (SA_ALIAS, SA_CODE, HistogramTooLarge, build_cells, code_alias, qcol, qi_alias,
                                         duckdb_sql, sa_values, temp_table)
from duckanon.pipeline.masking import masked_source
from duckanon.pipeline.plan import Plan, bind, hierarchy_specs
from duckanon.pipeline.population import (PopulationClasses, bind_with_population, check_contained, population_classes,
                                         population_size)
from duckanon.solver import GENERALIZING, Domains, KAnonymity, LDiversity, TCloseness, solve
from duckanon.solver.models import (AverageRisk, BetaLikeness, DeltaDisclosure, DeltaPresence, EstimatedKMap, KMap,
                                    OnAttribute, PopulationUniqueness)
from duckanon.solver.emd import SAHierarchy
from duckanon.solver.population import KMAP_SIGNIFICANCE
from duckanon.solver.generalize import FlatHierarchy
from duckanon.sql import AnonymizeStatement, statement_for
from duckanon.sql.names import shown_name



def models_for(plan: Plan, sa_total, sa_values=None, population_rows: int | None = None, marginals=None) -> list:
    """The privacy models of the statement; `sa_values` (SA values in code order) is needed for a
    declared SA order or an SA hierarchy, `population_rows` (the population table's rows or
    weights) for the population models, `marginals` (sensitive_marginals) with several
    sensitive columns: then each model of the sensitive values applies to each column."""
    statement = plan.statement
    models = []
    if statement.k is not None:
        models.append(KAnonymity(statement.k))
    if statement.highest_risk is not None:  # every record's risk 1 / (class size) at most r
        models.append(KAnonymity(max(1, math.ceil(1 / statement.highest_risk - 1e-9))))
    rows = int(np.asarray(sa_total).sum())
    if statement.k_map is not None:
        if statement.population is not None:
            models.append(KMap(statement.k_map))
        else:
            models.append(EstimatedKMap(statement.k_map, statement.population_size, rows,
                                        statement.estimator or "poisson", statement.significance or KMAP_SIGNIFICANCE))
    if statement.delta_presence is not None:
        models.append(DeltaPresence(*statement.delta_presence))
    if statement.average_risk is not None:
        models.append(AverageRisk(statement.average_risk))
    if statement.population_uniqueness is not None:
        size = statement.population_size if statement.population_size is not None else population_rows
        models.append(PopulationUniqueness(statement.population_uniqueness, size, statement.estimator or "dankar"))
    if marginals is None:
        return models + sensitive_models(plan, sa_total, sa_values)
    joint_total = np.asarray(sa_total, dtype=np.float64)
    for name, codes in zip(statement.sensitives, marginals):
        total = np.bincount(codes, weights=joint_total, minlength=int(codes.max()) + 1 if len(codes) else 1)
        models += [OnAttribute(model, codes, name) for model in sensitive_models(plan, total.astype(np.int64))]
    return models


def sensitive_models(plan: Plan, sa_total, sa_values=None) -> list:
    """The models of the sensitive values (l, t, beta-likeness, delta-disclosure) on one column's
    counts per value `sa_total`."""
    statement = plan.statement
    models = []
    if statement.l is not None:
        models.append(LDiversity(statement.l, statement.l_variant, statement.c))
    if statement.t is not None:
        total = tuple(int(x) for x in sa_total)
        if statement.t_distance == "hierarchical":
            hierarchy = SAHierarchy.from_rows(plan.sa_hierarchy_rows, source=statement.sa_hierarchy).for_values(
                [None if v is None else str(v) for v in sa_values], null_label="NULL")
            models.append(TCloseness(statement.t, total, "hierarchical", hierarchy=hierarchy))
        elif statement.t_distance == "ordered" and statement.sa_order is not None:
            models.append(TCloseness(statement.t, total, "ordered", order=_declared_ranks(
                statement.sa_order, sa_values, plan.sensitive, plan.source_shown)))
        else:
            models.append(TCloseness(statement.t, total, statement.t_distance))
    if statement.beta_likeness is not None:
        models.append(BetaLikeness(statement.beta_likeness, sa_total, statement.beta_variant))
    if statement.delta_disclosure is not None:
        models.append(DeltaDisclosure(statement.delta_disclosure, sa_total))
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


def _in_utc(value):
    """A zoned timestamp as its instant in UTC (DuckDB hands it over in the session's TimeZone), so
    labels and dates() read the same date whatever the session; anything else as it is."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        try:
            return value.astimezone(timezone.utc)
        except OverflowError:  # 'infinity' comes as datetime.max / min
            return value
    return value


def column_domains(backend: Backend, plan: Plan, cells, population: PopulationClasses | None = None) -> Domains:
    """Per QI: its values in code order, whether numeric, and its bound hierarchy (lattice); with
    a population, the values only it has follow the sample's (their codes) and the hierarchies
    are bound to both."""
    statement = plan.statement
    values, numeric = [], []
    for j in range(len(plan.qi)):
        rows = backend.rows(exp.select(qcol(code_alias(j)), qcol(qi_alias(j))).distinct().from_(
            exp.to_table(cells.table, quoted=True)).order_by(exp.Literal.number(1)))
        column = [_in_utc(v) for _, v in rows] + [_in_utc(v) for v in (population.extra_values[j] if population is not None else [])]
        values.append(column)
        sample = next((v for v in column if v is not None), None)
        numeric.append(isinstance(sample, (int, float, decimal.Decimal)) and not isinstance(sample, bool))
    hierarchies = None
    if methods.spec(statement.method).takes_hierarchies or statement.recodes or population is not None:
        specs = statement.hierarchies
        if isinstance(specs, dict):
            qi_lower = {c.lower() for c in plan.qi}
            for name in specs:
                if name.lower() not in qi_lower:
                    raise AnonymizeError(f"hierarchies names column {name}, which is not a quasi-identifier")
        by_column = hierarchy_specs(specs, plan.qi)
        hierarchies = []
        for j, column in enumerate(plan.qi):
            spec = by_column.get(column)
            if spec is None:  # no hierarchy: the value or '*' (suppression of the whole column)
                hierarchies.append(FlatHierarchy(len(values[j])))
            else:
                parsed = hierarchy.parse_spec(spec, column, backend)
                if population is None:
                    hierarchies.append(parsed.bind(values[j], column=column, source=plan.source_shown))
                else:  # a value only the population has is the population table's, and said so
                    hierarchies.append(bind_with_population(parsed, values[j], len(values[j]) - len(
                        population.extra_values[j]), plan, j))
    return Domains(values, numeric, hierarchies, statement.suppression_limit,
                   "loss" if statement.recodes else statement.metric, statement.recodes,
                   None if population is None else (population.codes, population.rows), statement.stable_levels)


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


def _cells(backend: Backend, plan: Plan, cells_table: str):
    """The cells table and histogram, and the plan the solver and the join-back use.

    With k alone the solver never looks at the sensitive values. When they would push the
    histogram (classes x SA values) over the memory budget, they are left out of it: the
    sensitive column is then published per row from the source, as a kept column is, and the
    histogram has one cell per class. (Only then: with the values in, a solver may place the rows
    of one class by SA value, so the published rows stay as they were for every request that fits.)
    """
    budget = memory_budget(plan.statement.memory_limit)
    if plan.masks:  # masked identifiers: read from a copy holding their masked values
        plan = masked_source(backend, plan, cells_table + "_masked")
    if len(plan.sensitives) > 1:
        plan = _joint_sensitive(backend, plan, cells_table + "_source")
    try:
        return plan, build_cells(backend, plan, cells_table, budget)
    except HistogramTooLarge:
        statement = plan.statement
        if plan.sensitive is None or statement.reads_sensitive:
            raise
    backend.drop_temp(cells_table)
    solver_plan = replace(plan, sensitive=None, keep=plan.keep + [plan.sensitive])
    return solver_plan, build_cells(backend, solver_plan, cells_table, budget)


def risk_notes(models, solution) -> dict:
    """What the release's risk models measure on the published classes (the result's details):
    the average risk, the population-uniqueness estimate and the estimated k-map, each said to
    be an estimate where it is one."""
    published = solution.published_classes()
    notes = {}
    for model in models:
        if isinstance(model, AverageRisk):
            notes["average_risk"] = round(AverageRisk.risk(published), 9)
        elif isinstance(model, PopulationUniqueness) and len(published):
            estimate = model.estimate(published)
            notes["population_uniqueness"] = {
                "estimate": estimate.fraction, "estimator": estimate.estimator, "population_size": model.population_size,
                "note": "an estimate of the share of the population that is unique, from the published class sizes"}
        elif isinstance(model, EstimatedKMap):
            notes["k_map"] = {"k_map": model.k_map, "derived_k": model.k, "population_size": model.population_size,
                              "estimator": model.estimator, "significance": model.significance,
                              "note": "an estimate: every class has at least derived_k rows, which the estimator says "
                                      "matches at least k_map people at this significance"}
    return notes


def column_weights(plan: Plan) -> list[float] | None:
    """The statement's `weights` per QI in QI order (1 where none is given), None without them."""
    given = plan.statement.weights
    if given is None:
        return None
    qi_lower = {c.lower(): c for c in plan.qi}
    unknown = [name for name in given if name.lower() not in qi_lower]
    if unknown:
        raise AnonymizeError(f"weights names column {unknown[0]}, which is not a quasi-identifier "
                             f"(quasi-identifiers: {', '.join(plan.qi)})")
    by_lower = {name.lower(): weight for name, weight in given.items()}
    return [by_lower.get(c.lower(), 1.0) for c in plan.qi]


# the one value several sensitive columns are counted as (Plan.hidden: never published), named
# apart from every source column
JOINT_SENSITIVE = "__duckanon_sensitive"


def _joint_sensitive(backend: Backend, plan: Plan, name: str) -> Plan:
    """Several sensitive columns: the histogram counts their combinations, one STRUCT value per
    row (field s{i}: the i-th sensitive column), read from a temp table of the published columns
    and that value; the columns themselves are published per row from it, as kept columns are."""
    joint = JOINT_SENSITIVE
    while joint.lower() in {c.lower() for c in plan.columns}:
        joint = "_" + joint
    fields = ", ".join(f"s{i} := {exp.to_identifier(c, quoted=True).sql('duckdb')}" for i, c in enumerate(plan.sensitives))
    backend.create_temp(name, exp.select(*[qcol(c) for c in plan.published], exp.alias_(
        duckdb_sql(f"struct_pack({fields})"), joint, quoted=True)).from_(plan.source.table.copy()))
    keep = plan.keep + [c for c in plan.sensitives]
    return replace(plan, source=temp_table(name), columns=list(plan.published) + [joint], sensitive=joint, keep=keep,
                   sensitives=[], hidden={joint})


def sensitive_marginals(backend: Backend, cells, sensitives: list[str]) -> list[np.ndarray]:
    """Per sensitive column, the code of its value for every joint code of the histogram (codes
    in the column's value order, NULL last)."""
    table = exp.to_table(cells.table, quoted=True).sql("duckdb")
    marginals = []
    for i in range(len(sensitives)):
        rows = backend.rows(duckdb_sql(f"SELECT code, dense_rank() OVER (ORDER BY struct_extract(s, 's{i}') NULLS LAST) - 1 "
            f'FROM (SELECT "{SA_CODE}" AS code, any_value("{SA_ALIAS}") AS s FROM {table} GROUP BY 1) ORDER BY 1'))
        marginals.append(np.array([code for _, code in rows], dtype=np.int64))
    return marginals


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
    weights: list[float] | None = None


def build_problem(backend: Backend, plan: Plan, cells_table: str, listener=None):
    """The histogram built in DuckDB (a temp table) and the solver's input, and the cells and plan
    they were built for (see _cells)."""
    statement = plan.statement
    progress.tell(listener, "building the class histogram (GROUP BY)")
    plan, cells = _cells(backend, plan, cells_table)
    hist = cells.histogram
    needs_values = statement.t is not None and (statement.t_distance == "hierarchical" or statement.sa_order is not None)
    population, people = None, None
    if statement.population_models:  # the population's classes: the lattice counts them per node
        progress.tell(listener, "counting the population table's classes (GROUP BY)")
        population = plan.population_classes = population_classes(backend, plan, cells_table, scratch_name)
        people = population.total
        if statement.delta_presence is not None:
            check_contained(hist, population, shown_name(statement.population))
        if statement.k_map is not None and hist.n_rows and population.total < statement.k_map:
            raise AnonymizeError(f"k_map = {statement.k_map} is infeasible: population table "
                                 f"{shown_name(statement.population)} has {population.total} rows")
    elif plan.population is not None:  # population_uniqueness alone: the table gives N
        people = population_size(backend, plan)
    marginals = sensitive_marginals(backend, cells, statement.sensitives) if plan.sensitive in plan.hidden else None
    models = models_for(plan, hist.sa_counts.sum(axis=0), sa_values(backend, cells) if needs_values else None,
                        people, marginals)
    generalizing = statement.method in GENERALIZING or statement.recodes or population is not None
    domains = column_domains(backend, plan, cells, population) if generalizing else None
    return cells, Problem(plan, hist, models, plan.patterns, domains, column_weights(plan))


def prepare(con, text: str) -> Problem:
    """The solver's input for an ANONYMIZE text, built exactly as the statement builds it, with
    nothing written: for benchmarks and tests that call the solver themselves. `con`: a DuckDB
    connection (or duckanon's), or a Backend."""
    statement = statement_for(text)
    if not isinstance(statement, AnonymizeStatement) or statement.explain:
        raise AnonymizeError("prepare() takes one ANONYMIZE statement")
    backend = backend_for(con, statement)
    plan = bind(backend, statement)
    with work(backend):  # never committed: the temp tables go, nothing is written
        return build_problem(backend, plan, scratch_name("cells"))[1]


def scratch_name(kind: str) -> str:
    """A temp object's name no user table has and no concurrent statement shares."""
    return f"__duckanon_{kind}_{uuid.uuid4().hex[:12]}"


def solve_problem(backend: Backend, plan: Plan, cells_table: str, started: float | None = None, listener=None):
    """Classes and solver: the histogram built by the backend (a temp table) and the Solution, and
    the plan they were built for (see _cells)."""
    statement = plan.statement
    cells, problem = build_problem(backend, plan, cells_table, listener)
    plan, hist, models, domains = problem.plan, problem.histogram, problem.models, problem.domains
    progress.tell(listener, f"solving: {statement.method}", classes=hist.n_classes, rows=hist.n_rows)
    # time_limit bounds the whole statement: the solver's deadline counts from the statement's start
    deadline = None if statement.time_limit is None or started is None else started + statement.time_limit
    solution = solve(hist, models, statement.method, plan.patterns, time_limit=statement.time_limit, domains=domains,
                     deadline=deadline, progress=listener, weights=problem.weights)
    if solution.masked is not None:  # stars published as a whole-domain label ('*****'), not as '*'
        solution.notes["whole_domain_cells"] = solution.whole_domain_cells
    solution.notes.update(risk_notes(models, solution))
    if plan.sensitive is None and statement.sensitive:
        solution.notes["sensitive_in_solver"] = False  # left out of the histogram: k alone, too large
    return plan, cells, hist, solution, models, domains
