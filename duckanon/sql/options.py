"""The options of our statements: each option's value read from its expression, typed and
checked (no database access here), and the tables of option name -> reader."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sqlglot import exp

from duckanon.errors import AnonymizeError, unknown_name
from duckanon import methods
from duckanon.methods import LATTICE_METRICS as METRICS
from duckanon.methods import BETA_VARIANTS, ENTROPY_ESTIMATORS, KMAP_ESTIMATORS, L_VARIANTS, T_DISTANCES, UNIQUENESS_ESTIMATORS  # noqa: F401 (re-exported)
from duckanon.names import TableName

ENGINES = ("duckdb", "spark")
MATERIALIZE_FORMS = ("table", "view")


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
        raise AnonymizeError(f"option t must be in [0, 1], got {_shown(number)}")
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


def _shown(number: float) -> str:
    """A number as short as it reads, but never rounded onto the other side of a bound it broke
    (3.0000000000000004 is not '3')."""
    short = f"{number:g}"
    return short if not math.isfinite(number) or float(short) == number else repr(number)


def _positive(value: exp.Expr, option: str) -> float:
    number = _number(value, option)
    if not (math.isfinite(number) and number > 0):
        raise AnonymizeError(f"option {option} must be a positive number, got {number:g}")
    return number


def _epsilon(value: exp.Expr, option: str) -> float:
    number = _positive(value, option)
    if not math.isfinite(number) or number > EPSILON_LIMIT:
        raise AnonymizeError(f"option {option} must be at most {EPSILON_LIMIT:g}, got {_shown(number)}")
    return number


def _delta(value: exp.Expr) -> float:
    number = _number(value, "delta")
    if not (DELTA_RANGE[0] <= number < DELTA_RANGE[1]):
        raise AnonymizeError(f"option delta must be in [{DELTA_RANGE[0]:g}, {DELTA_RANGE[1]:g}), got {_shown(number)}")
    return number


def _budget(value: exp.Expr) -> tuple[float, float]:
    """`(epsilon_total, delta_total)`: what the privacy ledger may hold for the source after this
    release (pipeline/ledger.py); epsilon_total in (0, inf), delta_total in [0, 1)."""
    items = value.expressions if isinstance(value, (exp.Tuple, exp.Array)) else []
    if len(items) != 2:
        raise AnonymizeError("option budget must be (epsilon_total, delta_total), e.g. budget = (3, 1e-5)")
    epsilon_total, delta_total = (_number(item, "budget") for item in items)
    if not (math.isfinite(epsilon_total) and epsilon_total > 0 and 0 <= delta_total < 1):
        raise AnonymizeError(f"option budget needs epsilon_total > 0 and 0 <= delta_total < 1, got "
                             f"({_shown(epsilon_total)}, {_shown(delta_total)})")
    return epsilon_total, delta_total


def _levels(value: exp.Expr) -> dict:
    """`(age = 2, zipcode = 1)`: the hierarchy level each QI is published at."""
    return _assignments(value, "levels", lambda item: not item.this.table,
                        "option levels must list column = level, e.g. levels = (age = 2, zipcode = 1)",
                        lambda name, level: _integer(level, "levels", 0))


# differential privacy (SafePub): above this epsilon ARX's parameter calculation grows fast (1-5 s at 3;
# ARX's own did not finish epsilon 5 in 25 minutes); delta in this range (0.1 or more protects no one)
EPSILON_LIMIT = 3.0
DELTA_RANGE = (1e-12, 0.1)


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
                 "sample_uniqueness",
                 "beta_likeness", "delta_disclosure", "epsilon")
# the options of differential privacy; every other model is refused beside it
PRIVACY_OPTIONS = ("epsilon", "delta", "epsilon_search", "search_steps", "levels", "budget")

ANONYMIZE_OPTIONS = {
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
    "entropy_estimator": lambda v: _word(v, "entropy_estimator", ENTROPY_ESTIMATORS),
    "c": _c,
    "sa_hierarchy": lambda v: _string(v, "sa_hierarchy"),
    "sa_order": lambda v: _values(v, "sa_order"),
    "hierarchies": _hierarchies,
    "suppression_limit": lambda v: _fraction(v, "suppression_limit"),
    "metric": lambda v: _word(v, "metric", METRICS),
    "gs_factor": lambda v: _fraction(v, "gs_factor"),
    "t_distance": lambda v: _word(v, "t_distance", T_DISTANCES),
    "k_map": lambda v: _integer(v, "k_map", 1),
    "delta_presence": _delta_presence,
    "average_risk": lambda v: _open_fraction(v, "average_risk"),
    "highest_risk": lambda v: _open_fraction(v, "highest_risk"),
    "population_uniqueness": lambda v: _open_fraction(v, "population_uniqueness"),
    "sample_uniqueness": lambda v: _fraction(v, "sample_uniqueness"),
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
    "epsilon": lambda v: _epsilon(v, "epsilon"),
    "delta": _delta,
    "epsilon_search": lambda v: _epsilon(v, "epsilon_search"),
    "search_steps": lambda v: _integer(v, "search_steps", 1),
    "levels": _levels,
    "budget": _budget,
}


# where an unknown option's message points (the options are too many to list in one line)
OPTIONS_LISTED = "the options are listed in docs/statement.md"

# the parameters a list of values compares (EXPLAIN or the report's sweep), with their SQL types
SWEEPABLE = {"k": "BIGINT", "l": "BIGINT", "t": "DOUBLE", "k_map": "BIGINT", "average_risk": "DOUBLE",
             "highest_risk": "DOUBLE", "population_uniqueness": "DOUBLE", "beta_likeness": "DOUBLE",
             "delta_disclosure": "DOUBLE"}


# REPORT's options: its own, and ANONYMIZE's that a report reads
REPORT_OPTIONS = {
    "file": lambda v: _path(v, "file"),
    "sensitive": lambda v: _one_name(v, "sensitive"),
    **{name: ANONYMIZE_OPTIONS[name] for name in ("qi", "k", "l", "t", "l_variant", "t_distance", "risk_threshold",
                                                   "population", "population_weight", "population_size")},
}

REFRESH_MODES = ("fresh", "stable")
REFRESH_OPTIONS = {"mode": lambda v: _word(v, "mode", REFRESH_MODES)}
