"""Step 3 of the pipeline: the solver's input (the problem), built once, and the solve.

`build_problem` reads the cells and everything the solver needs from the engine once (the
histogram, the values the models and domains are made of); `solve_problem(problem, models,
method, context)` only computes, so EXPLAIN's sweep builds one problem and solves it once per
value. `prepare(con, text)` is the one public way to build what ANONYMIZE gives the solver, for
benchmarks and tests; the statements build it the same way.
"""

from __future__ import annotations

import decimal
import math
import time
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone

import numpy as np
from sqlglot import exp

from duckanon import hierarchy, methods, progress
from duckanon.backends import Backend, backend_for, work
from duckanon.errors import AnonymizeError
from duckanon.pipeline.columns import ColumnFacts, column_facts, qcol, scratch_name, temp_table
from duckanon.pipeline.histogram import (SA_ALIAS, SA_CODE, Cells, HistogramTooLarge, build_cells, code_alias, qi_alias,
                                         sa_values)
from duckanon.pipeline.masking import masked_source
from duckanon.pipeline.plan import Plan, bind
from duckanon.pipeline.population import (PopulationClasses, bind_with_population, check_contained, population_classes,
                                         population_size)
from duckanon.solver import GENERALIZING, Domains, KAnonymity, LDiversity, TCloseness, solve
from duckanon.solver.context import SolveContext
from duckanon.solver.differential_privacy import private_release, searched_levels
from duckanon.solver.emd import SAHierarchy
from duckanon.solver.generalize import FlatHierarchy
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import (AverageRisk, BetaLikeness, DeltaDisclosure, DeltaPresence, EstimatedKMap, KMap,
                                    OnAttribute, PopulationUniqueness, SampleUniqueness)
from duckanon.solver.partition import Solution
from duckanon.solver.population import KMAP_SIGNIFICANCE
from duckanon.names import shown_name
from duckanon.sql.statement import AnonymizeStatement, statement_for


@dataclass(frozen=True)
class ModelInputs:
    """What the privacy models are made of besides the statement's options, read once per problem
    (so a sweep makes each value's models without reading anything again): the rows per SA code,
    the SA values in code order (for a declared SA order or an SA hierarchy), the population
    table's rows or weights (the population models), and with several sensitive columns the code
    of each column's value per joint code (sensitive_marginals)."""

    sa_total: np.ndarray
    sa_values: list | None = None
    population_rows: int | None = None
    marginals: list[np.ndarray] | None = None


def models_for(plan: Plan, inputs: ModelInputs) -> list:
    """The privacy models of the plan's statement; with several sensitive columns each model of
    the sensitive values applies to each column. A k_map the population table cannot reach is
    refused."""
    statement = plan.statement
    sa_total, sa_values, population_rows, marginals = (inputs.sa_total, inputs.sa_values, inputs.population_rows,
                                                       inputs.marginals)
    models = []
    if statement.k is not None:
        models.append(KAnonymity(statement.k))
    if statement.dp_k is not None:  # differential privacy: the classes of the sample, k derived
        models.append(KAnonymity(statement.dp_k))
    if statement.highest_risk is not None:  # every record's risk 1 / (class size) at most r
        models.append(KAnonymity(max(1, math.ceil(1 / statement.highest_risk - 1e-9))))
    rows = int(np.asarray(sa_total).sum())
    if statement.k_map is not None:
        if statement.population is not None:
            if rows and population_rows < statement.k_map:
                raise AnonymizeError(f"k_map = {statement.k_map} is infeasible: population table "
                                     f"{shown_name(statement.population)} has {population_rows} rows")
            models.append(KMap(statement.k_map))
        else:
            models.append(EstimatedKMap(statement.k_map, statement.population_size, rows,
                                        statement.estimator or "poisson", statement.significance or KMAP_SIGNIFICANCE))
    if statement.delta_presence is not None:
        models.append(DeltaPresence(*statement.delta_presence))
    if statement.average_risk is not None:
        models.append(AverageRisk(statement.average_risk))
    if statement.sample_uniqueness is not None:
        models.append(SampleUniqueness(statement.sample_uniqueness))
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
        models.append(LDiversity(statement.l, statement.l_variant, statement.c, statement.entropy_estimator))
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


def column_domains(backend: Backend, plan: Plan, cells: Cells, population: PopulationClasses | None = None) -> Domains:
    """Per QI: its values in code order, whether numeric, and its hierarchy (the plan's, read when
    it was bound) bound to those values; with a population, the values only it has follow the
    sample's (their codes) and the hierarchies are bound to both."""
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
        given = plan.hierarchies or (None,) * len(plan.qi)
        if statement.epsilon is None:  # differential privacy puts infinite dates in the root (_bound)
            for j, parsed in enumerate(given):
                _refuse_infinite_dates(backend, plan, cells, j, parsed, values[j])
        hierarchies = [FlatHierarchy(len(values[j])) if given[j] is None  # the value or '*' (the whole column)
                       else _bound(plan, j, given[j], values[j], population) for j in range(len(plan.qi))]
    return Domains(values, numeric, hierarchies, statement.suppression_limit,
                   "loss" if statement.recodes else statement.metric, statement.recodes,
                   None if population is None else (population.codes, population.rows), statement.stable_levels,
                   0.5 if statement.gs_factor is None else statement.gs_factor)


# The values DuckDB hands to Python for infinity and -infinity (and for the real extreme dates)
_EXTREME_DATES = (date.max, date.min, datetime.max, datetime.min)


def _refuse_infinite_dates(backend: Backend, plan: Plan, cells: Cells, j: int, parsed, values: list) -> None:
    """dates() would label infinity as the year 9999 (and -infinity as 0001), which says what is
    not so; the engine is asked only when a value looks like one."""
    if not isinstance(parsed, hierarchy.Dates) or not any(v in _EXTREME_DATES for v in values if isinstance(v, date)):
        return
    if backend.holds_infinite_dates(cells.table, qi_alias(j)):
        raise AnonymizeError(f"dates: column {plan.qi[j]} holds infinite dates (infinity or -infinity), which have "
                             "no day, month or year: make them NULL or give the column another hierarchy")


def _bound(plan: Plan, j: int, parsed, values: list, population: PopulationClasses | None):
    """QI j's hierarchy bound to its values; a value only the population has is the population
    table's, and said so."""
    column = plan.qi[j]
    if population is None:
        # differential privacy: a value the hierarchy lacks goes to its root, never refused (whether
        # the source holds one must not decide whether the statement is refused: docs/models.md)
        uncovered = "root" if plan.statement.epsilon is not None else "refuse"
        return parsed.bind(values, column=column, source=plan.source_shown, uncovered=uncovered)
    return bind_with_population(parsed, values, len(values) - len(population.extra_values[j]), plan, j)


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


def _cells(backend: Backend, plan: Plan, cells_table: str,
           fingerprint_of=None) -> tuple[Plan, ColumnFacts, Cells]:
    """The plan the solver and the join-back use, the facts of the columns it reads, and its cells
    table and histogram.

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
    facts = column_facts(backend, plan.source, plan.published)
    try:
        return plan, facts, build_cells(backend, plan, facts, cells_table, budget, fingerprint_of)
    except HistogramTooLarge:
        if plan.sensitive is None or plan.statement.reads_sensitive:
            raise
    backend.drop_temp(cells_table)
    solver_plan = replace(plan, sensitive=None, keep=plan.keep + [plan.sensitive])
    return solver_plan, facts, build_cells(backend, solver_plan, facts, cells_table, budget, fingerprint_of)


def risk_notes(models, solution) -> dict:
    """What the release's risk models measure on the published classes (the result's details):
    the average risk, the population-uniqueness estimate and the estimated k-map, each said to
    be an estimate where it is one."""
    published = solution.published_classes()
    notes = {}
    for model in models:
        if isinstance(model, AverageRisk):
            notes["average_risk"] = round(AverageRisk.risk(published), 9)
        elif isinstance(model, SampleUniqueness):
            notes["sample_uniqueness"] = round(SampleUniqueness.fraction(published), 9)
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
    backend.create_temp(name, exp.select(*[qcol(c) for c in plan.published], exp.alias_(
        _struct_of(plan.sensitives), joint, quoted=True)).from_(plan.source.table.copy()))
    keep = plan.keep + [c for c in plan.sensitives]
    return replace(plan, source=temp_table(name), columns=list(plan.published) + [joint], sensitive=joint, keep=keep,
                   sensitives=[], hidden=frozenset({joint}))


def _struct_of(sensitives: list[str]) -> exp.Expr:
    """struct_pack(s0 := <first column>, s1 := ...): one value of several sensitive columns."""
    return exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"s{i}"), expression=qcol(column))
                                   for i, column in enumerate(sensitives)])


def _marginal_select(cells_table: str, i: int) -> exp.Select:
    """Per joint code of the cells table, the rank (from 0) of its i-th sensitive value in that
    column's value order, NULL last."""
    joint = (exp.select(exp.alias_(qcol(SA_CODE), "code", quoted=True),
                        exp.alias_(exp.IgnoreNulls(this=exp.AnyValue(this=qcol(SA_ALIAS))), "s", quoted=True))
             .from_(exp.to_table(cells_table, quoted=True)).group_by(exp.Literal.number(1)))
    value = exp.func("struct_extract", qcol("s"), exp.Literal.string(f"s{i}"), dialect="duckdb")
    rank = exp.Window(this=exp.func("dense_rank"), over="OVER",
                      order=exp.Order(expressions=[exp.Ordered(this=value, nulls_first=False)]))
    return (exp.select(qcol("code"), exp.Sub(this=rank, expression=exp.Literal.number(1)))
            .from_(joint.subquery()).order_by(exp.Ordered(this=exp.Literal.number(1), nulls_first=False)))


def sensitive_marginals(backend: Backend, cells, sensitives: list[str]) -> list[np.ndarray]:
    """Per sensitive column, the code of its value for every joint code of the histogram (codes
    in the column's value order, NULL last)."""
    marginals = []
    for i in range(len(sensitives)):
        rows = backend.rows(_marginal_select(cells.table, i))
        marginals.append(np.array([code for _, code in rows], dtype=np.int64))
    return marginals


@dataclass(frozen=True)
class Problem:
    """What the solver receives for one statement, and what it was built from: the plan the
    histogram was built for (it may read a masked or combined copy of the source, and publish the
    sensitive column per row), the class histogram, the privacy models, the user's patterns
    (column indexes), for generalizing methods the columns' domains, the attribute weights; the
    cells table, the facts of its columns, the population's classes, the models' inputs (for the
    models of another value of a swept parameter) and the seconds building it took.
    `solve(problem.histogram, problem.models, method, problem.patterns, domains=problem.domains)`
    is what ANONYMIZE runs (solve_problem)."""

    plan: Plan
    histogram: Histogram
    models: list
    patterns: list | None
    domains: Domains | None
    weights: list[float] | None = None
    cells: Cells | None = None
    facts: ColumnFacts = field(default_factory=ColumnFacts)
    population: PopulationClasses | None = None
    model_inputs: ModelInputs | None = None
    seconds: float = 0.0

    def models_of(self, statement: AnonymizeStatement) -> list:
        """The models of a variant of the statement (another value of a swept parameter)."""
        return models_for(replace(self.plan, statement=statement), self.model_inputs)


def build_problem(backend: Backend, plan: Plan, cells_table: str, listener=None, fingerprint: bool = False) -> Problem:
    """The solver's input for `plan`, read from the engine once: the cells table `cells_table` (a
    temp table) and its histogram, the population's classes, the models, the domains; with
    `fingerprint`, the registry's fingerprint of the source from the same GROUP BY. Nothing but
    temp tables is written."""
    started = time.perf_counter()
    statement = plan.statement
    progress.tell(listener, "building the class histogram (GROUP BY)")
    fingerprint_of = (plan.source.sql(), tuple(plan.published)) if fingerprint else None
    plan, facts, cells = _cells(backend, plan, cells_table, fingerprint_of)
    hist = cells.histogram
    population, people = _population(backend, plan, facts, cells, listener)
    needs_values = statement.t is not None and (statement.t_distance == "hierarchical" or statement.sa_order is not None)
    inputs = ModelInputs(hist.sa_counts.sum(axis=0), sa_values(backend, cells) if needs_values else None, people,
                         sensitive_marginals(backend, cells, statement.sensitives) if plan.sensitive in plan.hidden
                         else None)
    models = models_for(plan, inputs)
    generalizing = statement.method in GENERALIZING or statement.recodes or population is not None
    domains = column_domains(backend, plan, cells, population) if generalizing else None
    return Problem(plan, hist, models, plan.patterns, domains, plan.weights, cells, facts, population, inputs,
                   time.perf_counter() - started)


def _population(backend: Backend, plan: Plan, facts: ColumnFacts, cells: Cells,
                listener=None) -> tuple[PopulationClasses | None, int | None]:
    """The population's classes, where a model counts them per class (the lattice counts them per
    node), and the people the population holds (N for the estimates), where it is given."""
    statement = plan.statement
    if statement.population_models:
        progress.tell(listener, "counting the population table's classes (GROUP BY)")
        population = population_classes(backend, plan, facts, cells.table, scratch_name)
        if statement.delta_presence is not None:
            check_contained(cells.histogram, population, shown_name(statement.population))
        return population, population.total
    if plan.population is not None:  # population_uniqueness alone: the table gives N
        return None, population_size(backend, plan)
    return None, None


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
        return build_problem(backend, plan, scratch_name("cells"))


def statement_context(statement: AnonymizeStatement, started: float | None = None, listener=None) -> SolveContext:
    """The solve's bounds for a statement started at `started` (a time.perf_counter() value; None:
    now): time_limit bounds the whole statement, so the deadline counts from its start."""
    if statement.time_limit is None:
        return SolveContext(None, listener)
    return SolveContext((time.perf_counter() if started is None else started) + statement.time_limit, listener)


def solve_problem(problem: Problem, models: list, method: str, context: SolveContext) -> Solution:
    """The solver on the problem's histogram under `models` with `method`, stopped by `context`'s
    deadline (if any) and heard by its listener; nothing is read or written. The solution's notes
    add what the risk models measure on the published classes."""
    hist = problem.histogram
    progress.tell(context.progress, f"solving: {method}", classes=hist.n_classes, rows=hist.n_rows)
    if problem.plan.statement.epsilon is not None:
        solution = _private_solution(problem, models)
    else:
        solution = solve(hist, models, method, problem.patterns, domains=problem.domains, deadline=context.deadline,
                         progress=context.progress, weights=problem.weights)
    if solution.masked is not None:  # stars published as a whole-domain label ('*****'), not as '*'
        solution.notes["whole_domain_cells"] = solution.whole_domain_cells
    solution.notes.update(risk_notes(models, solution))
    if problem.plan.sensitive is None and problem.plan.statement.sensitive:
        solution.notes["sensitive_in_solver"] = False  # left out of the histogram: k alone, too large
    return solution


def _private_solution(problem: Problem, models: list) -> Solution:
    """Differential privacy (SafePub): the histogram sampled, generalized at the user's levels or
    at the node SafePub's search picks with epsilon_search (then the lattice's node there, never
    a search of the lattice's own: a sample whose every class falls below k publishes nothing),
    the classes below the derived k removed."""
    statement = problem.plan.statement
    generalize, chosen = None, {}
    if statement.levels or statement.epsilon_search:
        hierarchies = problem.domains.hierarchies
        fixed = _fixed_levels(problem.plan, hierarchies) if statement.levels else None

        def generalize(sample: Histogram) -> Solution | None:
            levels = fixed
            if levels is None:
                levels, chosen["search"] = searched_levels(hierarchies, sample, problem.histogram.n_rows,
                                                           statement.dp_k, statement.metric,
                                                           statement.epsilon_search, statement.search_steps)
            chosen["levels"] = levels
            solution = solve(sample, models, "lattice", domains=replace(problem.domains, stable_levels=levels))
            return solution if solution.notes.pop("mode_used", "").startswith("stable") else None
    solution = private_release(problem.histogram, statement.dp_beta, statement.dp_k, generalize)
    sampled = solution.notes.pop("sampled_rows")
    solution.notes["differential_privacy"] = {
        "epsilon": statement.epsilon, "epsilon_anonymization": statement.dp_epsilon_anonymization,
        "epsilon_search": statement.epsilon_search or 0.0, "delta": statement.delta, "beta": statement.dp_beta,
        "k": statement.dp_k, "search_steps": statement.search_steps or 0, "sampled_rows": sampled,
        "published_rows": problem.histogram.n_rows - solution.removed_rows,
        "levels": dict(zip(problem.plan.qi, chosen["levels"])) if "levels" in chosen else None,
        **chosen.get("search", {})}
    if problem.plan.hierarchies is not None:  # the rule, never whether it applied (that is the data's)
        solution.notes["differential_privacy"]["uncovered_values"] = UNCOVERED_RULE
    return solution


# details.differential_privacy.uncovered_values of a private release with hierarchies: the same
# text whatever the source holds (how many values it applied to is a function of the rows)
UNCOVERED_RULE = ("a value a hierarchy lacks or cannot place (no row for it, NULL without a NULL row, a category "
                  "not listed, a number intervals cannot number, an infinite date or a text that is no date) is "
                  "published as the hierarchy's top label at every level above 0 instead of being refused; this "
                  "release does not say whether the source holds such a value")


def _fixed_levels(plan: Plan, hierarchies) -> tuple[int, ...]:
    """The user's levels in the QIs' order, each within its hierarchy."""
    given = {name.lower(): level for name, level in plan.statement.levels.items()}
    levels = []
    for name, bound in zip(plan.qi, hierarchies):
        level, height = given[name.lower()], bound.codes.shape[1] - 1
        if level > height:
            raise AnonymizeError(f"option levels: the hierarchy of {name} has levels 0 to {height}, got {level}")
        levels.append(level)
    return tuple(levels)
