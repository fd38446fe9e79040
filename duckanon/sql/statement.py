"""Turn a parsed ANONYMIZE into a typed, validated request (no database access here): the frozen
AnonymizeStatement, its binder and the checks of its options against one another. The options'
values are read in options.py; REPORT and REFRESH are in report_refresh.py."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from sqlglot import exp

from duckanon.errors import AnonymizeError, unknown_name
from duckanon.names import TableName, shown_name  # noqa: F401 - re-exported for the front end's importers
from duckanon import methods
from duckanon.sql.options import (ANONYMIZE_OPTIONS, KMAP_ESTIMATORS, MODEL_OPTIONS, OPTIONS_LISTED, SENSITIVE_MODELS,
                                  SWEEPABLE, UNIQUENESS_ESTIMATORS)
from duckanon.sql.parser import Anonymize, AnonOption, Refresh, Report, parse_statement, position_error, strip_explain
from duckanon.sql.privacy import check_privacy
from duckanon.sql.report_refresh import bind_refresh, bind_report


@dataclass(frozen=True)
class AnonymizeStatement:
    """A bound ANONYMIZE (or EXPLAIN ANONYMIZE): every option typed and checked, names as written
    (the pipeline's plan resolves them). A variant is made with dataclasses.replace."""

    source: TableName
    target: TableName | None
    k: int | None = None
    l: int | None = None
    t: float | None = None
    qi: list[str] | None = None
    sensitive: str | None = None  # the first sensitive column (the only one, mostly)
    keep: list[str] = field(default_factory=list)
    method: str = "auto"
    seed: int | None = None  # the binder draws a fresh one when none is given (bind_statement)
    time_limit: float | None = None
    patterns: list[list[str]] | None = None
    l_variant: str = "frequency"
    c: float | None = None
    entropy_estimator: str | None = None  # l_variant = entropy: shannon (None) or grassberger (ARX's estimators)
    t_distance: str = "equal"
    sa_hierarchy: str | None = None  # t_distance = hierarchical: ARX CSV file of the SA's hierarchy
    sa_order: list | None = None  # t_distance = ordered: the SA values from lowest to highest
    hierarchies: dict | str | None = None  # column -> spec, or one spec with {column} for every QI
    suppression_limit: float = 0.0  # lattice: fraction of rows that may be removed
    metric: str = "entropy"  # lattice: the utility metric minimised
    gs_factor: float | None = None  # metric = loss: ARX's generalization/suppression factor (None: its 0.5)
    report: str | None = None  # write an HTML report of the published table to this path
    risk_threshold: float | None = None  # the report's "records at risk": risk above this (None: 1/k, else 0.2)
    engine: str = "duckdb"  # where the GROUP BY and the join-back run: duckdb or spark
    spark_master: str | None = None  # engine = spark: the master of a new session (default local[2])
    memory_limit: int | None = None  # bytes for the histogram and solver; None: 80% of the available memory
    # 'view': the target is a view over a small table of (published values, count), see materialize
    materialize: str = "table"
    explain: bool = False  # EXPLAIN ANONYMIZE: plan and dry-run, write nothing
    sweep: tuple[str, list] | None = None  # a SWEEPABLE parameter given as a list: compare the values
    # risk-based models (ARX's criteria): see docs/models.md, "Risk-based models"
    k_map: int | None = None  # every class matches >= k_map people of the population
    delta_presence: tuple[float, float] | None = None  # (dmin, dmax): sample share of each class's population rows
    average_risk: float | None = None  # published classes / published rows at most this
    highest_risk: float | None = None  # the same as k = ceil(1 / highest_risk)
    population_uniqueness: float | None = None  # estimated share of population uniques at most this
    sample_uniqueness: float | None = None  # share of the published rows unique in their class at most this
    beta_likeness: float | None = None
    beta_variant: str = "basic"
    delta_disclosure: float | None = None
    population: TableName | None = None  # the population table (same QI columns), where it lies
    population_weight: str | None = None  # a column of the population table counting people per row
    population_size: int | None = None  # N, for the estimates (default: the population table's rows)
    estimator: str | None = None  # k_map: poisson | zero_truncated_poisson; uniqueness: pitman | zayatz | snb | dankar
    significance: float | None = None  # k_map's estimate: its significance level (default 0.01)
    weights: dict | None = None  # QI column -> attribute weight (ARX's setAttributeWeight); others weigh 1
    # sensitive = (a, b): every sensitive column; l, t, beta and delta_disclosure apply to each
    sensitives: list[str] = field(default_factory=list)
    # direct identifiers: dropped, or published per row through a masking rule (never in the histogram)
    identifiers: list[str] = field(default_factory=list)
    mask: dict = field(default_factory=dict)  # column -> MaskRule
    mask_key: str | None = None  # where the pseudonym key comes from: 'env:NAME' or 'variable:NAME'
    # REFRESH ... WITH (mode = 'stable'): the lattice levels of the release refreshed, kept if they still satisfy it
    stable_levels: tuple | None = None
    # REFRESH: the release it replaces (its registry entry's summary and source rows), for the report
    previous_release: dict | None = None
    # (epsilon, delta)-differential privacy (SafePub): the budget, and its derived k and beta (check_privacy)
    epsilon: float | None = None
    delta: float | None = None
    epsilon_search: float | None = None
    search_steps: int | None = None
    levels: dict | None = None  # QI -> hierarchy level: the generalization fixed before the data is seen
    # (epsilon_total, delta_total): the most the source's privacy ledger may hold after this release
    budget: tuple[float, float] | None = None
    dp_k: int | None = None
    dp_beta: float | None = None
    dp_epsilon_anonymization: float | None = None
    text: str = ""

    @property
    def reads_sensitive(self) -> bool:
        """A model reads the sensitive values (l, t, beta, delta-disclosure)."""
        return any(getattr(self, name) is not None for name in SENSITIVE_MODELS)

    @property
    def population_models(self) -> bool:
        """A model counts the population table's rows per class (k_map with it, delta_presence)."""
        return self.delta_presence is not None or (self.k_map is not None and self.population is not None)

    @property
    def kmap_estimated(self) -> bool:
        return self.k_map is not None and self.population is None

    @property
    def recodes(self) -> bool:
        """The method publishes the user's hierarchies' labels by local recoding (mondrian, auto
        given hierarchies)."""
        return self.hierarchies is not None and methods.spec(self.method).recodes


def _option_values(parsed: Anonymize, text: str) -> dict:
    """Every option's value, typed and checked alone (errors carry the option's position); a
    SWEEPABLE parameter given as a list takes its first value, the list kept as `sweep`."""
    values: dict = {}
    option: AnonOption
    for option in parsed.args["options"]:
        name, position = option.name, option.args["position"]
        if name not in ANONYMIZE_OPTIONS:
            raise position_error(text, position, unknown_name("option", name, tuple(ANONYMIZE_OPTIONS),
                                                              where=OPTIONS_LISTED))
        if name in values:
            raise position_error(text, position, f"duplicate option '{name}'")
        try:
            value = option.expression
            if name in SWEEPABLE and isinstance(value, (exp.Tuple, exp.Array)):
                swept = [ANONYMIZE_OPTIONS[name](item) for item in value.expressions]
                if not swept:
                    raise AnonymizeError(f"option {name} lists no values")
                if "sweep" in values:
                    raise AnonymizeError(f"only one of {', '.join(SWEEPABLE)} can list values")
                values["sweep"] = (name, swept)
                values[name] = swept[0]
                continue
            values[name] = ANONYMIZE_OPTIONS[name](value)
        except AnonymizeError as error:
            raise position_error(text, position, str(error)) from None
    return values


def bind_statement(parsed: Anonymize, text: str = "", explain: bool = False) -> AnonymizeStatement:
    """Check every option's name, type and range (errors carry the option's position), then the
    options against one another. No seed given: a fresh 63-bit one from the OS's CSPRNG, never reused."""
    target = parsed.args.get("into")
    values = _option_values(parsed, text)
    seen = {name for name in values if name != "sweep"}
    if "sensitive" in values:  # the option gives a list of names
        sensitives = list(values["sensitive"])
        if not sensitives:
            raise AnonymizeError("option sensitive lists no column: name one, sensitive = <column>, or leave it out")
        lowered = [name.lower() for name in sensitives]
        if len(set(lowered)) != len(lowered):
            raise AnonymizeError("option sensitive names a column twice")
        values.update(sensitives=sensitives, sensitive=sensitives[0])
    values.setdefault("seed", secrets.randbelow(2**63))
    if "epsilon" in values and "hierarchies" in values:  # a private release generalizes at one lattice node
        values.setdefault("method", "lattice")
    statement = AnonymizeStatement(source=TableName(parsed.this), target=TableName(target) if target is not None else None,
                                   text=text, explain=explain, **values)
    _check_options(statement, seen)
    return check_privacy(statement, seen)


def _check_options(statement: AnonymizeStatement, seen: set) -> None:
    """The options against one another, after each was read alone; `seen`: the options written."""
    if len(statement.sensitives) > 1:
        _check_several_sensitive(statement)
    _check_masks(statement)
    if statement.sweep is not None and not (statement.explain or statement.report):
        raise AnonymizeError(f"a list of {statement.sweep[0]} values compares them: use EXPLAIN ANONYMIZE, "
                             "or add report = '<file>.html' (the first value is published)")
    if all(getattr(statement, name) is None for name in MODEL_OPTIONS):
        raise AnonymizeError("ANONYMIZE needs at least one of the options k, l or t "
                             f"(or a risk-based model: {', '.join(MODEL_OPTIONS[3:-1])}; or epsilon)")
    if statement.reads_sensitive and statement.sensitive is None:
        which = next(name for name in SENSITIVE_MODELS if getattr(statement, name) is not None)
        raise AnonymizeError(f"option {which} needs a sensitive column: add sensitive = <column>")
    _check_risk_options(statement, seen)
    if statement.l_variant == "recursive" and statement.c is None:
        raise AnonymizeError("l_variant = recursive needs c: add c = <number> (recursive (c, l)-diversity)")
    if statement.c is not None and statement.l_variant != "recursive":
        raise AnonymizeError("option c applies only to l_variant = recursive")
    if statement.entropy_estimator is not None and statement.l_variant != "entropy":
        raise AnonymizeError("option entropy_estimator applies only to l_variant = entropy")
    _check_method_options(statement, seen)
    _check_sensitive_order(statement)
    _check_output(statement, seen)
    if statement.t_distance != "equal" and statement.t is None:
        raise AnonymizeError("option t_distance needs t")
    if statement.l_variant != "frequency" and statement.l is None:
        raise AnonymizeError("option l_variant needs l")


def _check_masks(statement: AnonymizeStatement) -> None:
    if statement.mask_key is not None and not any(rule.kind == "pseudonym" for rule in statement.mask.values()):
        raise AnonymizeError("option mask_key applies to the mask rule 'pseudonym'")
    if statement.mask and statement.engine != "duckdb":
        raise AnonymizeError("option mask needs engine = 'duckdb' (the masked values are computed by DuckDB's functions)")
    if statement.mask and statement.materialize == "view":
        raise AnonymizeError("masked identifiers are published per row: materialize = 'view' holds no per-row column")


def _check_method_options(statement: AnonymizeStatement, seen: set) -> None:
    """The options that only some methods take (hierarchies, suppression_limit, patterns, metric)."""
    method = methods.spec(statement.method)
    generalizing, lattice_like = method.generalizes, method.takes_hierarchies
    recoding = statement.recodes
    if statement.hierarchies is not None and not (lattice_like or method.recodes):
        raise AnonymizeError(methods.requirement("hierarchies", "takes_hierarchies", "recodes"))
    if "suppression_limit" in seen and not (lattice_like or recoding):
        raise AnonymizeError(methods.requirement("suppression_limit", "takes_hierarchies", why=(
            f", or hierarchies with {methods.either(methods.having('recodes'))}")))
    if recoding and statement.patterns is not None:
        raise AnonymizeError("option patterns does not apply with hierarchies: the labels generalize, "
                             "no pattern of stars is chosen")
    if "metric" in seen and not lattice_like:
        raise AnonymizeError(methods.requirement("metric", "takes_hierarchies"))
    if "gs_factor" in seen:
        _check_gs_factor(statement)
    if statement.patterns is not None and not method.takes_patterns and generalizing:
        raise AnonymizeError(methods.refusal(statement.method, "takes_patterns"))


def _check_gs_factor(statement: AnonymizeStatement) -> None:
    """ARX's generalization/suppression factor weighs generalized cells against removed records:
    only the loss takes it (as in ARX), and only where records are removed (method lattice)."""
    if statement.metric != "loss":
        raise AnonymizeError(f"option gs_factor applies only to metric = loss (ARX's Loss weighs generalization "
                             f"against suppression), not to metric = {statement.metric}")
    if statement.method != "lattice":
        raise AnonymizeError("option gs_factor needs method = 'lattice' (it weighs the records the lattice removes; "
                             f"method '{statement.method}' suppresses cells instead)")


def _check_sensitive_order(statement: AnonymizeStatement) -> None:
    """t's distances: a hierarchy or an order of the sensitive values, each with its own t_distance."""
    if statement.t_distance == "hierarchical" and statement.sa_hierarchy is None:
        raise AnonymizeError("t_distance = hierarchical needs sa_hierarchy = '<ARX hierarchy CSV of the sensitive column>'")
    if statement.sa_hierarchy is not None and statement.t_distance != "hierarchical":
        raise AnonymizeError("option sa_hierarchy applies only to t_distance = hierarchical")
    if statement.sa_order is not None and statement.t_distance != "ordered":
        raise AnonymizeError("option sa_order applies only to t_distance = ordered")


def _check_output(statement: AnonymizeStatement, seen: set) -> None:
    """The report, the engine and the materialize form against each other."""
    if "risk_threshold" in seen and not statement.report:
        raise AnonymizeError("option risk_threshold applies to the report: add report = '<file>.html'")
    if statement.engine == "spark" and statement.report:
        raise AnonymizeError("option report needs engine = 'duckdb' (the report reads the tables with DuckDB's "
                             "macros): publish on Spark, then run REPORT on the tables in DuckDB")
    if "spark_master" in seen and statement.engine != "spark":
        raise AnonymizeError("option spark_master needs engine = 'spark'")
    if statement.materialize == "view" and statement.keep:
        raise AnonymizeError("materialize = 'view' generates the rows from the count of each published row, which "
                             "holds no kept column: drop keep, or publish a table")
    if statement.materialize == "view" and statement.engine != "duckdb":
        raise AnonymizeError("materialize = 'view' needs engine = 'duckdb'")


def _check_several_sensitive(statement: AnonymizeStatement) -> None:
    """Several sensitive columns are published per row (as kept columns are) and each model of
    the sensitive values applies to each of them, by its own distribution."""
    if statement.materialize == "view":
        raise AnonymizeError("several sensitive columns are published per row: materialize = 'view' needs one")
    if statement.engine != "duckdb":
        raise AnonymizeError("several sensitive columns need engine = 'duckdb'")
    if statement.t is not None and statement.t_distance != "equal":
        raise AnonymizeError("with several sensitive columns t applies with t_distance = equal only (an order or a "
                             "hierarchy would be one column's)")
    if not methods.spec(statement.method).several_sensitive:
        raise AnonymizeError(methods.refusal(statement.method, "several_sensitive"))


def _check_risk_options(statement: AnonymizeStatement, seen: set) -> None:
    """The population and estimate options against the models that use them, and the method."""
    if statement.delta_presence is not None and statement.population is None:
        raise AnonymizeError("option delta_presence needs population = <table> (the population the sample was drawn from)")
    if statement.k_map is not None and statement.population is None and statement.population_size is None:
        raise AnonymizeError("option k_map needs population = <table>, or population_size = <people> for an estimate")
    if statement.population_uniqueness is not None and statement.population_size is None and statement.population is None:
        raise AnonymizeError("option population_uniqueness needs population_size = <people> (or population = <table>)")
    if statement.population is not None and statement.k_map is None and statement.delta_presence is None \
            and statement.population_uniqueness is None:
        raise AnonymizeError("option population applies to k_map, delta_presence and population_uniqueness")
    if statement.population is not None and statement.engine != "duckdb":
        raise AnonymizeError("option population needs engine = 'duckdb' (the population is joined where it lies)")
    if statement.population_weight is not None and statement.population is None:
        raise AnonymizeError("option population_weight needs population = <table>")
    if statement.population_size is not None and statement.population is not None:
        raise AnonymizeError("population_size is the population table's rows: give population or population_size, "
                             "not both")
    if statement.population_size is not None and not statement.kmap_estimated \
            and statement.population_uniqueness is None:
        raise AnonymizeError("option population_size applies to k_map (an estimate) and population_uniqueness")
    estimator = statement.estimator
    if estimator is not None:
        if statement.population_size is None and statement.population is None:
            raise AnonymizeError(f"option estimator needs population_size = <people> (the population it estimates for)")
        if estimator in KMAP_ESTIMATORS and not statement.kmap_estimated:
            raise AnonymizeError(f"estimator '{estimator}' estimates k_map's class sizes: it needs k_map with "
                                 "population_size")
        if estimator in UNIQUENESS_ESTIMATORS and statement.population_uniqueness is None:
            raise AnonymizeError(f"estimator '{estimator}' estimates population uniques: it needs population_uniqueness "
                                 f"(k_map's estimators: {', '.join(KMAP_ESTIMATORS)})")
    if statement.significance is not None and not statement.kmap_estimated:
        raise AnonymizeError("option significance applies to k_map estimated with population_size")
    if "beta_variant" in seen and statement.beta_likeness is None:
        raise AnonymizeError("option beta_variant needs beta_likeness")
    method = methods.spec(statement.method)
    population_model = "k_map" if statement.k_map is not None and statement.population is not None else \
        "delta_presence" if statement.delta_presence is not None else None
    if population_model and not method.takes_population:
        raise AnonymizeError(methods.requirement(f"{population_model} with a population table", "takes_population",
                                                 why=" (the lattice counts the population rows of each generalized class)"))
    whole = next((name for name in ("average_risk", "population_uniqueness", "sample_uniqueness") if getattr(statement, name) is not None),
                 None)
    if whole and not method.takes_global:
        raise AnonymizeError(methods.refusal(statement.method, "takes_global", whole))


def statement_for(text: str):
    """The bound statement of an ANONYMIZE, EXPLAIN ANONYMIZE, REPORT or REFRESH text."""
    explain, body = strip_explain(text)
    parsed = parse_statement(body)
    if isinstance(parsed, Report):
        return bind_report(parsed, body)
    if isinstance(parsed, Refresh):
        return bind_refresh(parsed, body)
    return bind_statement(parsed, body, explain=explain)
