"""Turn a parsed ANONYMIZE into a typed, validated request (no database access here)."""

from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass, field

from sqlglot import exp

from duckanon.errors import AnonymizeError, unknown_name
from duckanon.names import TableName, shown_name  # noqa: F401 - re-exported for the front end's importers
from duckanon import methods
from duckanon.methods import LATTICE_METRICS as METRICS
from duckanon.methods import BETA_VARIANTS, KMAP_ESTIMATORS, L_VARIANTS, T_DISTANCES, UNIQUENESS_ESTIMATORS
from duckanon.sql.parser import Anonymize, AnonOption, Refresh, Report, parse_statement, position_error, strip_explain

ENGINES = ("duckdb", "spark")
MATERIALIZE_FORMS = ("table", "view")


@dataclass
class AnonymizeStatement:
    source: TableName
    target: TableName | None
    k: int | None = None
    l: int | None = None
    t: float | None = None
    qi: list[str] | None = None
    sensitive: str | None = None  # the first sensitive column (the only one, mostly)
    keep: list[str] = field(default_factory=list)
    method: str = "auto"
    seed: int | None = None  # None: a fresh random seed per run (the published order differs)
    time_limit: float | None = None
    patterns: list[list[str]] | None = None
    l_variant: str = "frequency"
    c: float | None = None
    t_distance: str = "equal"
    sa_hierarchy: str | None = None  # t_distance = hierarchical: ARX CSV file of the SA's hierarchy
    sa_order: list | None = None  # t_distance = ordered: the SA values from lowest to highest
    hierarchies: dict | str | None = None  # column -> spec, or one spec with {column} for every QI
    suppression_limit: float = 0.0  # lattice: fraction of rows that may be removed
    metric: str = "entropy"  # lattice: the utility metric minimised
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


def _names(value: exp.Expr, what: str) -> list[str]:
    """Column list: `a`, `(a, b)`, `[a, b]`, or strings."""
    if isinstance(value, (exp.Tuple, exp.Array)):
        items = value.expressions
    elif isinstance(value, exp.Paren):
        items = [value.this]
    else:
        items = [value]
    names = []
    for item in items:
        if isinstance(item, exp.Column) and not item.table:
            names.append(item.name)
        elif isinstance(item, exp.Literal) and item.is_string:
            names.append(item.this)
        else:
            raise AnonymizeError(f"{what} must list column names, got {item.sql(dialect='duckdb')}")
    return names


def _number(value: exp.Expr, option: str) -> float:
    negative = False
    if isinstance(value, exp.Neg):
        negative, value = True, value.this
    if isinstance(value, exp.Literal) and value.is_number:
        try:
            number = float(value.this)
        except ValueError:  # the tokenizer takes e.g. `1e` for a number
            raise AnonymizeError(f"option {option} must be a number, got {value.this}") from None
        return -number if negative else number
    raise AnonymizeError(f"option {option} must be a number, got {value.sql(dialect='duckdb')}")


def _integer(value: exp.Expr, option: str, minimum: int) -> int:
    negative = isinstance(value, exp.Neg)
    literal = value.this if negative else value
    if isinstance(literal, exp.Literal) and literal.is_number and literal.this.isdigit():
        number = int(literal.this) * (-1 if negative else 1)  # exactly as written, no float detour
    else:
        real = _number(value, option)
        if not math.isfinite(real) or real != int(real):
            raise AnonymizeError(f"option {option} must be an integer, got {value.sql(dialect='duckdb')}")
        number = int(real)
    if number < minimum:
        raise AnonymizeError(f"option {option} must be at least {minimum}, got {number}")
    return number


# how a message names a word of an option's closed set, where the option's name alone reads badly
_WORD_NOUNS = {"materialize": "materialize form", "mode": "REFRESH mode"}


def _word(value: exp.Expr, option: str, allowed: tuple[str, ...]) -> str:
    """A word of a closed set (method, engine, l_variant, ...), matched without case; an unknown
    word gets the nearest known one (errors.unknown_name)."""
    if isinstance(value, exp.Literal) and value.is_string:
        word = value.this
    elif isinstance(value, exp.Column) and not value.table:
        word = value.name
    else:
        raise AnonymizeError(f"option {option} must be one of {', '.join(allowed)}, got {value.sql(dialect='duckdb')}")
    word = word.lower()
    if word not in allowed:
        raise AnonymizeError(unknown_name(_WORD_NOUNS.get(option, option), word, allowed))
    return word


def _one_name(value: exp.Expr, option: str) -> str:
    names = _names(value, option)
    if len(names) != 1:
        raise AnonymizeError(f"option {option} takes one column")
    return names[0]


def _patterns(value: exp.Expr) -> list[list[str]]:
    if isinstance(value, exp.Paren) and isinstance(value.this, (exp.Tuple, exp.Paren)):
        value = exp.Tuple(expressions=[value.this])  # ((a, b)): one pattern of two columns
    if isinstance(value, (exp.Tuple, exp.Array)):
        items = value.expressions
    else:
        items = [value]
    patterns = [_names(item, "patterns") if not isinstance(item, exp.Null) else [] for item in items]
    if not patterns:
        raise AnonymizeError("option patterns must list at least one pattern")
    return patterns


def _t(value: exp.Expr) -> float:
    number = _number(value, "t")
    if not (0.0 <= number <= 1.0):
        raise AnonymizeError(f"option t must be in [0, 1], got {number:g}")
    return number


def _c(value: exp.Expr) -> float:
    number = _number(value, "c")
    if not (math.isfinite(number) and number > 0):
        raise AnonymizeError("option c must be a positive number")
    return number


def _string(value: exp.Expr, option: str) -> str:
    if isinstance(value, exp.Literal) and value.is_string:
        return value.this
    raise AnonymizeError(f"option {option} must be a string, e.g. {option} = 'path/to/file.csv'")


def _path(value: exp.Expr, option: str) -> str:
    path = _string(value, option)
    if not path.strip():
        raise AnonymizeError(f"option {option} must name a file, e.g. {option} = 'release_report.html'")
    return path


def _values(value: exp.Expr, option: str) -> list:
    """A list of literal values: ('low', 'mid', 'high'), (1, 2, 3); NULL for the NULL value."""
    items = value.expressions if isinstance(value, (exp.Tuple, exp.Array)) else [value.this if isinstance(value, exp.Paren) else value]
    out = []
    for item in items:
        if isinstance(item, exp.Null):
            out.append(None)
        elif isinstance(item, exp.Literal):
            out.append(item.this)
        elif isinstance(item, exp.Neg) and isinstance(item.this, exp.Literal) and item.this.is_number:
            out.append("-" + item.this.this)
        elif isinstance(item, exp.Column) and not item.table:
            out.append(item.name)
        else:
            raise AnonymizeError(f"option {option} must list values, got {item.sql(dialect='duckdb')}")
    if len(set(out)) != len(out):
        raise AnonymizeError(f"option {option} lists a value twice")
    return out


def _assignments(value: exp.Expr, option: str, fits, usage: str, convert) -> dict:
    """`(a = x, b = y, ...)`: column name -> convert(name, x), in order; an item that is not
    `column = value` with `fits(item)` is refused with `usage`, a column named twice too."""
    items = value.expressions if isinstance(value, (exp.Tuple, exp.Array)) else [value.this if isinstance(value, exp.Paren) else value]
    found = {}
    for item in items:
        if not (isinstance(item, exp.EQ) and isinstance(item.this, exp.Column) and fits(item)):
            raise AnonymizeError(f"{usage}, got {item.sql(dialect='duckdb')}")
        name = item.this.name
        if name.lower() in {c.lower() for c in found}:
            raise AnonymizeError(f"option {option} names column {name} twice")
        found[name] = convert(name, item.expression)
    return found


def _is_text(expression: exp.Expr) -> bool:
    return isinstance(expression, exp.Literal) and expression.is_string


def _hierarchies(value: exp.Expr):
    """`'spec_{column}.csv'` for every QI, or `(age = 'file.csv', zipcode = 'prefix', ...)`."""
    if _is_text(value):
        return value.this
    return _assignments(value, "hierarchies", lambda item: _is_text(item.expression),
                        "option hierarchies must be a string or a list of column = 'spec' "
                        "(e.g. (age = 'intervals(5, 10)', zip = 'prefix'))", lambda name, spec: spec.this)


def _fraction(value: exp.Expr, option: str) -> float:
    number = _number(value, option)
    if not (0.0 <= number <= 1.0):
        raise AnonymizeError(f"option {option} must be a fraction in [0, 1], got {number:g}")
    return number


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _memory(value: exp.Expr) -> int:
    """'4GB', '512 MiB' (DuckDB's units: KB = 1000 bytes, KiB = 1024) or a number of bytes."""
    if isinstance(value, exp.Literal) and value.is_string:
        import re

        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value.this)
        if not match or match.group(2).lower() not in _UNITS:
            raise AnonymizeError(f"option memory_limit must be a size such as '4GB' or '512MiB', got '{value.this}'")
        number = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        number = _number(value, "memory_limit")
    if not (math.isfinite(number) and number >= 1):
        raise AnonymizeError("option memory_limit must be a positive size, such as '4GB'")
    return int(number)


def _risk_threshold(value: exp.Expr) -> float:
    number = _number(value, "risk_threshold")
    if not (0.0 < number <= 1.0):
        raise AnonymizeError(f"option risk_threshold must be in (0, 1], got {number:g}")
    return number


def _time_limit(value: exp.Expr) -> float:
    number = _number(value, "time_limit")
    if not (math.isfinite(number) and number > 0):
        raise AnonymizeError("option time_limit must be a positive number of seconds")
    return number


def _table(value: exp.Expr, option: str) -> TableName:
    """A table name: `census`, `main.census`, or a string."""
    if isinstance(value, exp.Column):
        parts = [part for part in (value.args.get("catalog"), value.args.get("db"), value.args.get("table"), value.this)
                 if part is not None]
        names = dict(zip(("this", "db", "catalog"), reversed(parts)))
        return TableName(exp.Table(**names))
    if isinstance(value, exp.Literal) and value.is_string and value.this.strip():
        return TableName(exp.to_table(value.this, dialect="duckdb"))
    raise AnonymizeError(f"option {option} must name a table, got {value.sql(dialect='duckdb')}")


def _open_fraction(value: exp.Expr, option: str) -> float:
    number = _number(value, option)
    if not (0.0 < number <= 1.0):
        raise AnonymizeError(f"option {option} must be in (0, 1], got {number:g}")
    return number


def _positive(value: exp.Expr, option: str) -> float:
    number = _number(value, option)
    if not (math.isfinite(number) and number > 0):
        raise AnonymizeError(f"option {option} must be a positive number, got {number:g}")
    return number


@dataclass(frozen=True)
class MaskRule:
    """A masking rule of an identifier column: its kind and arguments (docs/identifiers.md)."""

    kind: str
    arguments: tuple = ()

    def __str__(self):
        if self.kind == "partial":
            return f"partial({self.arguments[0]}, {self.arguments[1]})"
        if self.kind == "constant":
            return "constant('" + self.arguments[0].replace("'", "''") + "')"
        return self.kind


# the masking rules by name, as messages show them
MASK_RULES = {"pseudonym": "pseudonym", "partial": "partial(left, right)", "domain": "domain", "year": "year",
              "month": "month", "null": "null", "constant": "constant('text')"}
_ARGUMENTLESS_RULES = ("pseudonym", "domain", "year", "month", "null")
_RULE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)
# partial(left, right): the characters kept at each end, bound here so the engine gets a sane integer
PARTIAL_LIMIT = 1_000_000


def mask_rule(text: str, column: str) -> MaskRule:
    """`'pseudonym'`, `'partial(0, 2)'`, `"constant('x')"`, ...: the rule, or one line naming the problem."""
    match = _RULE.match(text)
    kind = match.group(1).lower() if match else None
    arguments = match.group(2) if match else None
    if kind == "hash":
        raise AnonymizeError(f"mask rule 'hash' on column {column} is refused: an unkeyed hash of an identifier is "
                             "reversed by hashing candidate values (a dictionary); use 'pseudonym', a keyed "
                             "HMAC-SHA-256")
    if kind in _ARGUMENTLESS_RULES:
        if arguments is None:
            return MaskRule(kind)
        raise AnonymizeError(f"mask rule {kind} on column {column} takes no arguments: write '{kind}'")
    if kind == "partial":
        parts = [p.strip() for p in (arguments or "").split(",")]
        if len(parts) == 2 and all(re.fullmatch(r"[0-9]+", p) for p in parts) and \
                all(int(p) <= PARTIAL_LIMIT for p in parts):
            return MaskRule("partial", (int(parts[0]), int(parts[1])))
        raise AnonymizeError(f"mask rule partial on column {column} needs two whole numbers from 0 to "
                             f"{PARTIAL_LIMIT:,}: partial(left, right), the characters kept at each end")
    if kind == "constant":
        literal = re.fullmatch(r"\s*'((?:[^']|'')*)'\s*", arguments or "")
        if literal:
            return MaskRule("constant", (literal.group(1).replace("''", "'"),))
        raise AnonymizeError(f"mask rule constant on column {column} needs a quoted text: constant('x')")
    shown = kind if kind else " ".join(text.split())[:40]
    raise AnonymizeError(unknown_name("mask rule", shown, MASK_RULES, context=f" for column {column}"))


def _mask(value: exp.Expr) -> dict:
    """`(mrn = 'pseudonym', phone = 'partial(0, 2)')`: a rule per column."""
    return _assignments(value, "mask", lambda item: not item.this.table and _is_text(item.expression),
                        "option mask must list column = 'rule', e.g. mask = (mrn = 'pseudonym', phone = 'partial(0, 2)')",
                        lambda name, rule: mask_rule(rule.this, name))


def _mask_key(value: exp.Expr) -> str:
    text = _string(value, "mask_key")
    source, _, name = text.partition(":")
    if source not in ("env", "variable") or not name.strip():
        raise AnonymizeError("option mask_key must be 'env:<environment variable>' or 'variable:<DuckDB variable>' "
                             "(where the pseudonym key is read from, never the key itself)")
    return text


def _weights(value: exp.Expr) -> dict:
    """`(age = 2, zipcode = 1)`: a positive number per column."""
    return _assignments(value, "weights", lambda item: not item.this.table,
                        "option weights must list column = number, e.g. weights = (age = 2, zipcode = 1)",
                        lambda name, weight: _positive(weight, "weights"))


def _delta_presence(value: exp.Expr) -> tuple[float, float]:
    items = value.expressions if isinstance(value, (exp.Tuple, exp.Array)) else []
    if len(items) != 2:
        raise AnonymizeError("option delta_presence must be (dmin, dmax), e.g. delta_presence = (0, 0.5)")
    low, high = (_number(item, "delta_presence") for item in items)
    if not (0.0 <= low <= high <= 1.0):
        raise AnonymizeError(f"option delta_presence needs 0 <= dmin <= dmax <= 1, got ({low:g}, {high:g})")
    return low, high


def _significance(value: exp.Expr) -> float:
    number = _number(value, "significance")
    if not (0.0 < number < 1.0):
        raise AnonymizeError(f"option significance must be in (0, 1), got {number:g}")
    return number


SENSITIVE_MODELS = ("l", "t", "beta_likeness", "delta_disclosure")
# the privacy models' options: ANONYMIZE needs at least one
MODEL_OPTIONS = ("k", "l", "t", "k_map", "delta_presence", "average_risk", "highest_risk", "population_uniqueness",
                 "beta_likeness", "delta_disclosure")

_OPTIONS = {
    "k": lambda v: _integer(v, "k", 1),
    "l": lambda v: _integer(v, "l", 2),
    "t": _t,
    "report": lambda v: _path(v, "report"),
    "risk_threshold": lambda v: _risk_threshold(v),
    "engine": lambda v: _word(v, "engine", ENGINES),
    "spark_master": lambda v: _string(v, "spark_master"),
    "memory_limit": lambda v: _memory(v),
    "materialize": lambda v: _word(v, "materialize", MATERIALIZE_FORMS),
    "qi": lambda v: _names(v, "qi"),
    "sensitive": lambda v: _names(v, "sensitive"),
    "keep": lambda v: _names(v, "keep"),
    "method": lambda v: _word(v, "method", methods.NAMES),
    "seed": lambda v: _integer(v, "seed", 0),
    "time_limit": _time_limit,
    "patterns": _patterns,
    "l_variant": lambda v: _word(v, "l_variant", L_VARIANTS),
    "c": _c,
    "sa_hierarchy": lambda v: _string(v, "sa_hierarchy"),
    "sa_order": lambda v: _values(v, "sa_order"),
    "hierarchies": _hierarchies,
    "suppression_limit": lambda v: _fraction(v, "suppression_limit"),
    "metric": lambda v: _word(v, "metric", METRICS),
    "t_distance": lambda v: _word(v, "t_distance", T_DISTANCES),
    "k_map": lambda v: _integer(v, "k_map", 1),
    "delta_presence": _delta_presence,
    "average_risk": lambda v: _open_fraction(v, "average_risk"),
    "highest_risk": lambda v: _open_fraction(v, "highest_risk"),
    "population_uniqueness": lambda v: _open_fraction(v, "population_uniqueness"),
    "beta_likeness": lambda v: _positive(v, "beta_likeness"),
    "beta_variant": lambda v: _word(v, "beta_variant", BETA_VARIANTS),
    "delta_disclosure": lambda v: _positive(v, "delta_disclosure"),
    "population": lambda v: _table(v, "population"),
    "population_weight": lambda v: _one_name(v, "population_weight"),
    "population_size": lambda v: _integer(v, "population_size", 1),
    "estimator": lambda v: _word(v, "estimator", KMAP_ESTIMATORS + UNIQUENESS_ESTIMATORS),
    "significance": _significance,
    "weights": _weights,
    "identifiers": lambda v: _names(v, "identifiers"),
    "mask": _mask,
    "mask_key": _mask_key,
}


# where an unknown option's message points (the options are too many to list in one line)
OPTIONS_LISTED = "the options are listed in docs/statement.md"

# the parameters a list of values compares (EXPLAIN or the report's sweep), with their SQL types
SWEEPABLE = {"k": "BIGINT", "l": "BIGINT", "t": "DOUBLE", "k_map": "BIGINT", "average_risk": "DOUBLE",
             "highest_risk": "DOUBLE", "population_uniqueness": "DOUBLE", "beta_likeness": "DOUBLE",
             "delta_disclosure": "DOUBLE"}


def bind_statement(parsed: Anonymize, text: str = "", explain: bool = False) -> AnonymizeStatement:
    """Check every option's name, type and range; errors carry the option's position."""
    target = parsed.args.get("into")
    statement = AnonymizeStatement(
        source=TableName(parsed.this), target=TableName(target) if target is not None else None, text=text
    )
    seen: set[str] = set()
    option: AnonOption
    for option in parsed.args["options"]:
        name, position = option.name, option.args["position"]
        if name not in _OPTIONS:
            raise position_error(text, position, unknown_name("option", name, tuple(_OPTIONS), where=OPTIONS_LISTED))
        if name in seen:
            raise position_error(text, position, f"duplicate option '{name}'")
        seen.add(name)
        try:
            value = option.expression
            if name in SWEEPABLE and isinstance(value, (exp.Tuple, exp.Array)):
                values = [_OPTIONS[name](item) for item in value.expressions]
                if not values:
                    raise AnonymizeError(f"option {name} lists no values")
                if statement.sweep is not None:
                    raise AnonymizeError(f"only one of {', '.join(SWEEPABLE)} can list values")
                statement.sweep = (name, values)
                setattr(statement, name, values[0])
                continue
            setattr(statement, name, _OPTIONS[name](value))
        except AnonymizeError as error:
            raise position_error(text, position, str(error)) from None
    statement.explain = explain
    if statement.sensitive is not None:  # the option gives a list of names
        statement.sensitives = list(statement.sensitive)
        lowered = [name.lower() for name in statement.sensitives]
        if len(set(lowered)) != len(lowered):
            raise AnonymizeError("option sensitive names a column twice")
        statement.sensitive = statement.sensitives[0]
    if len(statement.sensitives) > 1:
        _check_several_sensitive(statement)
    if statement.mask_key is not None and not any(rule.kind == "pseudonym" for rule in statement.mask.values()):
        raise AnonymizeError("option mask_key applies to the mask rule 'pseudonym'")
    if statement.mask and statement.engine != "duckdb":
        raise AnonymizeError("option mask needs engine = 'duckdb' (the masked values are computed by DuckDB's functions)")
    if statement.mask and statement.materialize == "view":
        raise AnonymizeError("masked identifiers are published per row: materialize = 'view' holds no per-row column")
    if statement.sweep is not None and not (explain or statement.report):
        raise AnonymizeError(f"a list of {statement.sweep[0]} values compares them: use EXPLAIN ANONYMIZE, "
                             "or add report = '<file>.html' (the first value is published)")
    if all(getattr(statement, name) is None for name in MODEL_OPTIONS):
        raise AnonymizeError("ANONYMIZE needs at least one of the options k, l or t "
                             f"(or a risk-based model: {', '.join(MODEL_OPTIONS[3:])})")
    if statement.reads_sensitive and statement.sensitive is None:
        which = next(name for name in SENSITIVE_MODELS if getattr(statement, name) is not None)
        raise AnonymizeError(f"option {which} needs a sensitive column: add sensitive = <column>")
    _check_risk_options(statement, seen)
    if statement.l_variant == "recursive" and statement.c is None:
        raise AnonymizeError("l_variant = recursive needs c: add c = <number> (recursive (c, l)-diversity)")
    if statement.c is not None and statement.l_variant != "recursive":
        raise AnonymizeError("option c applies only to l_variant = recursive")
    method = methods.spec(statement.method)
    generalizing, lattice_like = method.generalizes, method.takes_hierarchies
    recoding = statement.recodes
    if statement.hierarchies is not None and not (lattice_like or method.recodes):
        raise AnonymizeError("option hierarchies needs method = 'lattice', 'gensup', 'mondrian' or 'auto'")
    if "suppression_limit" in seen and not (lattice_like or recoding):
        raise AnonymizeError("option suppression_limit needs method = 'lattice' or 'gensup', "
                             "or hierarchies with 'mondrian' or 'auto'")
    if recoding and statement.patterns is not None:
        raise AnonymizeError("option patterns does not apply with hierarchies: the labels generalize, "
                             "no pattern of stars is chosen")
    if "metric" in seen and not lattice_like:
        raise AnonymizeError("option metric needs method = 'lattice' (or 'gensup')")
    if statement.patterns is not None and not method.takes_patterns and generalizing:
        raise AnonymizeError(methods.refusal(statement.method, "takes_patterns"))
    if statement.t_distance == "hierarchical" and statement.sa_hierarchy is None:
        raise AnonymizeError("t_distance = hierarchical needs sa_hierarchy = '<ARX hierarchy CSV of the sensitive column>'")
    if statement.sa_hierarchy is not None and statement.t_distance != "hierarchical":
        raise AnonymizeError("option sa_hierarchy applies only to t_distance = hierarchical")
    if statement.sa_order is not None and statement.t_distance != "ordered":
        raise AnonymizeError("option sa_order applies only to t_distance = ordered")
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
    if statement.t_distance != "equal" and statement.t is None:
        raise AnonymizeError("option t_distance needs t")
    if statement.l_variant != "frequency" and statement.l is None:
        raise AnonymizeError("option l_variant needs l")
    return statement


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
        raise AnonymizeError(f"option {population_model} with a population table needs method = 'lattice' or 'auto' "
                             "(the lattice counts the population rows of each generalized class)")
    whole = next((name for name in ("average_risk", "population_uniqueness") if getattr(statement, name) is not None),
                 None)
    if whole and not method.takes_global:
        raise AnonymizeError(methods.refusal(statement.method, "takes_global", whole))


@dataclass
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
    given: set = field(default_factory=set)  # the options written in the statement
    text: str = ""


_REPORT_OPTIONS = {
    "file": lambda v: _path(v, "file"),
    "sensitive": lambda v: _one_name(v, "sensitive"),
    **{name: _OPTIONS[name] for name in ("qi", "k", "l", "t", "l_variant", "t_distance", "risk_threshold",
                                          "population", "population_weight", "population_size")},
}


def bind_report(parsed: Report, text: str = "") -> ReportStatement:
    statement = ReportStatement(published=TableName(parsed.this), original=TableName(parsed.args["original"]), text=text)
    for option in parsed.args.get("options") or []:
        name, position = option.name, option.args["position"]
        if name not in _REPORT_OPTIONS:
            raise position_error(text, position, unknown_name("REPORT option", name, tuple(_REPORT_OPTIONS)))
        if name in statement.given:
            raise position_error(text, position, f"duplicate option '{name}'")
        statement.given.add(name)
        try:
            setattr(statement, name, _REPORT_OPTIONS[name](option.expression))
        except AnonymizeError as error:
            raise position_error(text, position, str(error)) from None
    if statement.published.key() == statement.original.key():
        raise AnonymizeError("REPORT compares a published table with its original: they must differ")
    return statement


REFRESH_MODES = ("fresh", "stable")


@dataclass
class RefreshStatement:
    """REFRESH <published> | REFRESH ALL [WITH (mode = 'fresh' | 'stable')]: re-run registered
    ANONYMIZE statements against their sources' current rows (statements/refresh.py)."""

    target: TableName | None  # None: every stale publication
    mode: str = "fresh"
    text: str = ""


def bind_refresh(parsed: Refresh, text: str = "") -> RefreshStatement:
    target = parsed.args.get("this")
    statement = RefreshStatement(TableName(target) if target is not None else None, text=text)
    seen = set()
    for option in parsed.args.get("options") or []:
        name, position = option.name, option.args["position"]
        if name != "mode":
            raise position_error(text, position, unknown_name("REFRESH option", name, ("mode",)))
        if name in seen:
            raise position_error(text, position, f"duplicate option '{name}'")
        seen.add(name)
        try:
            statement.mode = _word(option.expression, "mode", REFRESH_MODES)
        except AnonymizeError as error:
            raise position_error(text, position, str(error)) from None
    return statement


def statement_for(text: str):
    """The bound statement of an ANONYMIZE, EXPLAIN ANONYMIZE, REPORT or REFRESH text."""
    explain, body = strip_explain(text)
    parsed = parse_statement(body)
    if isinstance(parsed, Report):
        return bind_report(parsed, body)
    if isinstance(parsed, Refresh):
        return bind_refresh(parsed, body)
    statement = bind_statement(parsed, body, explain=explain)
    if statement.seed is None:  # no seed given: a fresh 63-bit one from the OS's CSPRNG, never reused
        statement.seed = secrets.randbelow(2**63)
    return statement
