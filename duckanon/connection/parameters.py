"""The parameters of our statements: `?`, `?n`, `$n` and `$name` in an ANONYMIZE (EXPLAIN
ANONYMIZE, REPORT) text, bound as DuckDB binds a prepared statement's, each value written into the
statement as an SQL literal, never as SQL text of the caller's."""

from __future__ import annotations

import decimal
import math
import numbers
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from duckanon.errors import AnonymizeError
from duckanon.sql import AnonDialect
from duckanon.sql.parser import strip_explain


@dataclass
class _Placeholder:
    start: int  # character span in the statement text (inclusive end, as sqlglot's tokens)
    end: int
    key: int | str  # 1-based position (?, ?2, $2) or name ($name)
    text: str  # as written: ?, $1, $name
    option: str | None  # the option it gives a value to (None: before WITH, e.g. a table name)


def placeholders(text: str) -> list[_Placeholder]:
    """The parameter placeholders of one ANONYMIZE / EXPLAIN ANONYMIZE / REPORT text: `?` (numbered
    in order), `?n`, `$n` and `$name`, as DuckDB reads them. Text the tokenizer cannot read has
    none here (the parser then reports the real problem)."""
    if "?" not in text and "$" not in text:
        return []
    _, body = strip_explain(text)  # EXPLAIN is blanked, positions are kept
    try:
        tokens = AnonDialect().tokenize(body)
    except TokenError:
        return []
    found: list[_Placeholder] = []
    depth, options_started, option, auto = 0, False, None, 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.token_type
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        glued = after is not None and after.start == token.end + 1  # `$1`, not `$ 1`
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif kind == TokenType.WITH and depth == 0:
            options_started = True
        elif kind == TokenType.EQ and options_started and depth <= 1 and i > 0:
            option = tokens[i - 1].text.lower()
        elif kind == TokenType.PLACEHOLDER or (kind == TokenType.PARAMETER and token.text == "$" and glued):
            if glued and after.token_type == TokenType.NUMBER and after.text.isdigit():
                key: int | str = int(after.text)
                end, i = after.end, i + 1
            elif kind == TokenType.PARAMETER:
                if not after.text.replace("_", "").isalnum():
                    i += 1
                    continue
                key, end, i = after.text, after.end, i + 1
            else:
                auto += 1
                key, end = auto, token.end
            found.append(_Placeholder(token.start, end, key, body[token.start:end + 1],
                                      option if options_started else None))
        i += 1
    return found


def _literal(value, shown: str) -> str:
    """`value` as an SQL literal (never SQL text of the caller's): strings quoted, numbers as numbers,
    lists and tuples as [...] lists of literals."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        if not (value.is_finite() if isinstance(value, decimal.Decimal) else math.isfinite(value)):
            raise AnonymizeError(f"parameter {shown} is {value}: an option value must be a finite number")
        return format(value, "f") if isinstance(value, decimal.Decimal) else repr(float(value))
    if isinstance(value, str):
        return exp.Literal.string(value).sql(dialect=AnonDialect)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(item, shown) for item in value) + "]"
    raise AnonymizeError(f"parameter {shown} has type {type(value).__name__}: an option value must be a number, "
                         "a string, a boolean, None, or a list of them")


_NO_PADDING = set(" \t\r\n(),[]")


def bind_parameters(text: str, parameters) -> str:
    """The ANONYMIZE (or EXPLAIN ANONYMIZE, REPORT) text with its placeholders replaced by SQL
    literals of `parameters` (a list or tuple for `?`/`$1`, a dict for `$name`), as DuckDB binds a
    prepared statement's. Only option values can be parameters."""
    found = placeholders(text)
    if parameters is None:
        if found:
            first = found[0]
            where = f"{first.option} = {first.text}" if first.option else first.text
            raise AnonymizeError(f"ANONYMIZE has a parameter ({where}) but no values were given: "
                                 "pass them as execute(text, [values])")
        return text
    before_with = next((p for p in found if p.option is None), None)
    if before_with is not None:
        raise AnonymizeError(f"ANONYMIZE takes parameters only as option values: write the table name itself, "
                             f"not {before_with.text}")
    named = [p for p in found if isinstance(p.key, str)]
    if named and len(named) != len(found):
        raise AnonymizeError("ANONYMIZE mixes named ($name) and positional (?, $1) parameters")
    if named:
        if not isinstance(parameters, dict):
            raise AnonymizeError(f"ANONYMIZE has named parameters ({named[0].text}): pass the values as a dict")
        names = {p.key for p in named}
        missing = sorted(name for name in names if name not in parameters)
        extra = sorted(str(name) for name in parameters if name not in names)
        if missing or extra:
            what = f"no value for ${missing[0]}" if missing else f"no parameter ${extra[0]}"
            raise AnonymizeError(f"ANONYMIZE parameters and values do not match: {what}")
        values = parameters
    elif isinstance(parameters, dict):
        if found:
            raise AnonymizeError(f"ANONYMIZE has positional parameters ({found[0].text}): pass the values as a list")
        if parameters:
            raise AnonymizeError("ANONYMIZE has no named parameters, but a dict of values was given")
        values = {}
    else:
        if isinstance(parameters, (str, bytes)) or not hasattr(parameters, "__len__"):
            raise AnonymizeError(f"parameters must be a list or tuple of values, got {type(parameters).__name__}")
        used = {p.key for p in found}
        if used != set(range(1, len(parameters) + 1)):
            raise AnonymizeError(f"ANONYMIZE has {len(used)} parameter(s) but {len(parameters)} value(s) were given")
        values = {i + 1: value for i, value in enumerate(parameters)}
    out, last = [], 0
    for p in found:
        literal = _literal(values[p.key], p.text)
        # a space where the literal would otherwise run into the text around it (e.g. `-?` and -5: `--5`)
        if p.start > 0 and text[p.start - 1] not in _NO_PADDING:
            literal = " " + literal
        if p.end + 1 < len(text) and text[p.end + 1] not in _NO_PADDING:
            literal += " "
        out += [text[last:p.start], literal]
        last = p.end + 1
    return "".join(out) + text[last:]
