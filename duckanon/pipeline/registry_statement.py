"""The registry's statement as data: the bound ANONYMIZE statement's options as typed JSON values
(statement_data), and back (rebuild: each value made an option expression of literals and quoted
names, bound by ANONYMIZE's own binder). A value that does not read back as that structure raises
Corrupt: the entry is listed as corrupt, never run.
"""

from __future__ import annotations

import math

from sqlglot import exp

from duckanon import hierarchy
from duckanon.errors import AnonymizeError
from duckanon.pipeline.plan import Plan
from duckanon.sql.parser import AnonDialect, Anonymize, AnonOption, parse_statement
from duckanon.sql.statement import AnonymizeStatement, bind_statement

FORMAT = 2


class Corrupt(ValueError):
    """A registry row that does not read back as duckanon's structure."""


def quoted_identifier(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def table_of(catalog: str | None, schema: str, name: str) -> exp.Table:
    """catalog.schema.name with every part quoted (identifiers, never SQL text)."""
    return exp.Table(this=quoted_identifier(name), db=quoted_identifier(schema),
                     catalog=quoted_identifier(catalog) if catalog is not None else None)


def stored_hierarchy_parts(data: dict, database: str) -> dict[str, tuple[str, str, str]]:
    """The entry's `hierarchy_tables` (QI column -> [database or None for this one, schema,
    name]) as table parts with this database's alias now; {} for an entry without them (an
    older format-2 entry: its `table(name)` hierarchies are read by name)."""
    stored = data.get("hierarchy_tables")
    if stored is None:
        return {}
    if not isinstance(stored, dict) or not stored:
        raise Corrupt("hierarchy_tables")
    parts_of = {}
    for column, parts in stored.items():
        if not (isinstance(parts, list) and len(parts) == 3) or not column:
            raise Corrupt("hierarchy_tables")
        catalog = database if parts[0] is None else checked_text(parts[0], "hierarchy_tables")
        resolved = (catalog, checked_text(parts[1], "hierarchy_tables"), checked_text(parts[2], "hierarchy_tables"))
        if any(hierarchy.PLACEHOLDER_PATTERN.search(part) for part in resolved):
            raise Corrupt("hierarchy_tables")  # parse_spec would read a `{word}` in a name as a placeholder
        parts_of[column] = resolved
    return parts_of


def _resolved_hierarchies(value, resolved: dict, options: list) -> dict:
    """The `hierarchies` option with each resolved column's spec made `table("db"."schema"."name")`."""
    if isinstance(value, str):
        qi = next((item[1] for item in options if isinstance(item, list) and len(item) == 2 and item[0] == "qi"), None)
        if not isinstance(qi, list) or not all(isinstance(c, str) and c for c in qi):
            raise Corrupt("hierarchy_tables")
        value = {column: value for column in qi}
    if not isinstance(value, dict):
        raise Corrupt("hierarchies")
    value = dict(value)
    for column, parts in resolved.items():
        key = next((name for name in value if isinstance(name, str) and name.lower() == column.lower()), None)
        if key is None:
            raise Corrupt("hierarchy_tables")  # a table for a column the statement gives no hierarchy
        value[key] = hierarchy.table_spec(*parts)
    return value


# ----------------------------------------------------------------------------- the statement as data

_NAME_LISTS = ("qi", "keep", "identifiers", "sensitive")
_NUMBERS = ("k", "l", "t", "c", "seed", "time_limit", "suppression_limit", "k_map", "average_risk", "highest_risk",
            "population_uniqueness", "beta_likeness", "delta_disclosure", "population_size", "significance",
            "risk_threshold", "memory_limit", "epsilon", "delta", "epsilon_search", "search_steps",
            "gs_factor", "sample_uniqueness")
_TEXTS = ("report", "spark_master", "sa_hierarchy", "mask_key", "engine", "materialize", "method", "l_variant",
          "entropy_estimator",
          "metric", "t_distance", "beta_variant", "estimator", "population_weight")
_SHAPED = ("patterns", "sa_order", "hierarchies", "delta_presence", "population", "weights", "mask", "levels",
           "budget")
OPTION_NAMES = _NAME_LISTS + _NUMBERS + _TEXTS + _SHAPED


def given_options(text: str) -> list[str]:
    """The option names an ANONYMIZE statement being run was written with (its live text)."""
    return [option.name for option in parse_statement(text).args["options"]]


def options_set(statement: AnonymizeStatement) -> list[str]:
    """The options of a statement built without a text (from Python): those that differ from
    ANONYMIZE's defaults, the seed always (it orders the published rows)."""
    default = AnonymizeStatement(source=statement.source, target=statement.target)
    differ = [name for name in OPTION_NAMES if name != "sensitive" and getattr(statement, name, None) !=
              getattr(default, name, None)]
    seeded = "seed" in differ or statement.epsilon is not None  # a private release takes no seed
    return differ + (["sensitive"] if statement.sensitives else []) + ([] if seeded else ["seed"])


def statement_data(plan: Plan, database: str, given: list[str]) -> dict:
    """The bound statement's options `given`, as typed JSON values (no SQL)."""
    statement = plan.statement
    options = []
    for name in given:
        if statement.sweep is not None and statement.sweep[0] == name:
            value = list(statement.sweep[1])
        elif name == "sensitive":
            value = list(statement.sensitives)
        elif name == "population":
            parts = [part.name for part in (plan.population or statement.population).table.parts]
            if len(parts) == 3 and parts[0].lower() == database.lower():
                parts[0] = None  # this database
            value = parts
        elif name == "mask":
            value = {column: str(rule) for column, rule in statement.mask.items()}
        elif name in ("delta_presence", "budget"):
            value = list(getattr(statement, name))
        else:
            value = getattr(statement, name)
        options.append([name, value])
    return {"format": FORMAT, "options": options}


def checked_text(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Corrupt(what)
    return value


def _number_literal(value, what: str) -> exp.Expr:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Corrupt(what)
    return exp.Literal.number(str(value) if isinstance(value, int) else repr(value))


def _names_expression(value, what: str) -> exp.Expr:
    if not isinstance(value, list) or not value:
        raise Corrupt(what)
    return exp.Tuple(expressions=[exp.Literal.string(checked_text(item, what)) for item in value])


def _option_expression(name: str, value) -> exp.Expr:
    """The option's value as the expression ANONYMIZE's binder reads (literals and quoted names)."""
    if name in _NAME_LISTS:
        return _names_expression(value, name)
    if name in _NUMBERS:
        if isinstance(value, list):  # a sweep
            if not value:
                raise Corrupt(name)
            return exp.Tuple(expressions=[_number_literal(item, name) for item in value])
        return _number_literal(value, name)
    if name in _TEXTS:
        return exp.Literal.string(checked_text(value, name))
    if name == "patterns":
        if not isinstance(value, list) or not value:
            raise Corrupt(name)
        return exp.Tuple(expressions=[_names_expression(item, name) if item else exp.Null() for item in value])
    if name == "sa_order":
        if not isinstance(value, list) or not value:
            raise Corrupt(name)
        return exp.Tuple(expressions=[exp.Null() if item is None else exp.Literal.string(checked_text(item, name))
                                      for item in value])
    if name in ("hierarchies", "weights", "mask", "levels"):
        if name == "hierarchies" and isinstance(value, str):
            return exp.Literal.string(value)
        if not isinstance(value, dict) or not value:
            raise Corrupt(name)
        convert = _number_literal if name in ("weights", "levels") else (lambda item, what: exp.Literal.string(checked_text(item, what)))
        return exp.Tuple(expressions=[exp.EQ(this=exp.column(checked_text(column, name), quoted=True),
                                             expression=convert(item, name)) for column, item in value.items()])
    if name in ("delta_presence", "budget"):
        if not isinstance(value, list) or len(value) != 2:
            raise Corrupt(name)
        return exp.Tuple(expressions=[_number_literal(item, name) for item in value])
    if name == "population":
        if not isinstance(value, list) or not 1 <= len(value) <= 3:
            raise Corrupt(name)
        return value  # made into a name by rebuild(), which knows this database's alias
    raise Corrupt(f"unknown option {name}")


def rebuild(data, database: str, source: exp.Table, target: exp.Table) -> tuple[AnonymizeStatement, list[str]]:
    """The ANONYMIZE statement an entry holds, rebuilt from its structure (never from text) and
    bound by ANONYMIZE's own binder, which checks every value again; and its option names. A
    statement without a seed of its own gets a fresh one (as ANONYMIZE does)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("options"), list):
        raise Corrupt("statement")
    options, given = [], []
    resolved = stored_hierarchy_parts(data, database)
    if resolved and not any(isinstance(item, list) and item[:1] == ["hierarchies"] for item in data["options"]):
        raise Corrupt("hierarchy_tables")
    for item in data["options"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)) or item[0] not in OPTION_NAMES \
                or item[0] in given:
            raise Corrupt("statement")
        name, value = item
        if name == "hierarchies" and resolved:  # the tables resolved at publish time, never the session's
            value = _resolved_hierarchies(value, resolved, data["options"])
        expression = _option_expression(name, value)
        if name == "population":
            parts = [database if part is None and i == 0 and len(value) == 3 else checked_text(part, name)
                     for i, part in enumerate(value)]
            expression = exp.Column(this=quoted_identifier(parts[-1]),
                                    table=quoted_identifier(parts[-2]) if len(parts) >= 2 else None,
                                    db=quoted_identifier(parts[-3]) if len(parts) == 3 else None)
        options.append(AnonOption(this=name, expression=expression, position=0))
        given.append(name)
    parsed = Anonymize(this=source.copy(), into=target.copy(), options=options)
    try:
        statement = bind_statement(parsed, parsed.sql(dialect=AnonDialect))
    except AnonymizeError as error:
        raise Corrupt(f"statement: {error}") from None
    return statement, given

