"""Direct identifiers published through a masking rule, per row, as kept columns are.

The masked values are computed once, in the engine, into a temp copy of the published columns
(the identifiers replaced by their masked values), and the statement reads that copy: the class
histogram never sees an identifier, and the published row order (materialize) depends on the
masked values only.

`pseudonym` is HMAC-SHA-256 (RFC 2104) of the value's canonical text (UTF-8; canonical.py: the
text no session setting changes, a TIMESTAMP WITH TIME ZONE as its instant in UTC), keyed by a
secret that comes from an environment variable or a DuckDB variable, truncated to PSEUDONYM_HEX
hex digits: the same value gets the same pseudonym in every table, run and session under the same
key, so releases join on it, and without the key nobody can recompute it from candidate values (an
unkeyed hash can: refused). `partial` and `domain` read the same text; `year` and `month` of a
zoned timestamp are those of its UTC date. The key is XORed into HMAC's two pads in Python and handed to the engine as query
parameters of a temp table that is dropped right after the copy: it is never in SQL text, the
database file, the provenance, the report or a message.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

from sqlglot import exp

from duckanon.backends.base import Backend, temporary
from duckanon.errors import AnonymizeError
from duckanon.pipeline.canonical import NoCanonicalText, canonical_text, utc_wall_clock
from duckanon.pipeline.columns import qcol, temp_table
from duckanon.pipeline.plan import Plan
from duckanon.sql.options import MaskRule

# Where the key is read from when the statement does not say (mask_key = 'env:NAME' | 'variable:NAME').
KEY_ENVIRONMENT = "DUCKANON_PSEUDONYM_KEY"
KEY_VARIABLE = "duckanon_pseudonym_key"
MIN_KEY_BYTES = 16  # 128 bits
PSEUDONYM_HEX = 20  # 80 bits of the HMAC: collisions among 10^9 people have odds about 4e-7
HMAC_BLOCK = 64  # SHA-256's block size


def _variable(backend: Backend, name: str) -> str | None:
    try:
        row = backend.one(exp.select(exp.func("getvariable", exp.Literal.string(name))))
    except Exception:  # an engine without DuckDB's variables
        return None
    return None if row is None or row[0] is None else str(row[0])


def pseudonym_key(backend: Backend, mask_key: str | None) -> bytes:
    """The key (its bytes), from where `mask_key` says or the defaults; one line when missing or
    too short (never quoting it)."""
    if mask_key is not None:
        kind, _, name = mask_key.partition(":")
        key = os.environ.get(name) if kind == "env" else _variable(backend, name)
        where = f"the environment variable {name}" if kind == "env" else f"the DuckDB variable {name}"
    else:
        key = os.environ.get(KEY_ENVIRONMENT)
        where = f"the environment variable {KEY_ENVIRONMENT}"
        if key is None:
            key = _variable(backend, KEY_VARIABLE)
            where = f"the DuckDB variable {KEY_VARIABLE}"
    if not key and mask_key is not None:
        raise AnonymizeError(f"mask rule 'pseudonym' needs a key: none is set in {where} (mask_key)")
    if not key:
        raise AnonymizeError(f"mask rule 'pseudonym' needs a key: set the environment variable {KEY_ENVIRONMENT} or "
                             f"the DuckDB variable {KEY_VARIABLE} (SET VARIABLE), or name another with "
                             "mask_key = 'env:NAME' or 'variable:NAME'")
    raw = key.encode("utf-8")
    if len(raw) < MIN_KEY_BYTES:
        raise AnonymizeError(f"the pseudonym key in {where} is too short: {len(raw)} bytes, at least {MIN_KEY_BYTES} "
                             f"({MIN_KEY_BYTES * 8} bits) are needed")
    return raw


def hmac_pads(key: bytes) -> tuple[bytes, bytes]:
    """HMAC's inner and outer padded keys (RFC 2104): a key longer than a block is hashed first."""
    if len(key) > HMAC_BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(HMAC_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in key), bytes(b ^ 0x5C for b in key)


TEXT_RULES = ("pseudonym", "partial", "domain")  # the rules that read the value's text


def _text(rule: MaskRule, column: str, type_name: str) -> exp.Expr:
    """The canonical text of `column` (for the rules' templates); one line when its type has none."""
    try:
        return canonical_text(exp.column(column, quoted=True), type_name)
    except NoCanonicalText as reason:
        raise AnonymizeError(f"mask rule '{rule.kind}' on column {column} cannot read its values' text: {reason}") from None


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.func(name, *[arg.copy() for arg in args], dialect="duckdb")


def _number(value: int) -> exp.Literal:
    return exp.Literal.number(value)


def _concat(*parts: exp.Expr) -> exp.Expr:
    joined = parts[0].copy()
    for part in parts[1:]:
        joined = exp.DPipe(this=joined, expression=part.copy(), safe=True)
    return joined


def _null_or(value: exp.Expr, *whens: tuple[exp.Expr, exp.Expr], default: exp.Expr) -> exp.Case:
    """CASE WHEN value IS NULL THEN NULL WHEN ... ELSE default END."""
    ifs = [exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null())]
    return exp.Case(ifs=ifs + [exp.If(this=condition, true=result) for condition, result in whens], default=default)


def _pseudonym(text: exp.Expr, pads: str) -> exp.Expr:
    """HMAC-SHA-256 of the text's UTF-8 bytes under the pads of temp table alias `pads`, truncated."""
    inner = _fn("sha256", _concat(exp.column("ipad", table=pads, quoted=True), _fn("encode", text)))
    outer = _fn("sha256", _concat(exp.column("opad", table=pads, quoted=True), _fn("unhex", inner)))
    return _fn("left", outer, _number(PSEUDONYM_HEX))


def _partial(value: exp.Expr, text: exp.Expr, left: int, right: int) -> exp.Expr:
    """The first `left` and last `right` characters kept, the others starred (all, if that is all)."""
    length = _fn("length", text)
    hidden = _fn("repeat", exp.Literal.string("*"), exp.Sub(this=length.copy(), expression=_number(left + right)))
    return _null_or(value, (exp.LTE(this=length.copy(), expression=_number(left + right)),
                            _fn("repeat", exp.Literal.string("*"), length)),
                    default=_concat(_fn("left", text, _number(left)), hidden, _fn("right", text, _number(right))))


def _domain(value: exp.Expr, text: exp.Expr) -> exp.Expr:
    """An e-mail address's domain after '*@'; '*' for text without '@'."""
    domain = _fn("regexp_extract", text, exp.Literal.string("@([^@]*)$"), _number(1))
    return _null_or(value, (exp.GT(this=_fn("strpos", text, exp.Literal.string("@")), expression=_number(0)),
                            _concat(exp.Literal.string("*@"), domain)), default=exp.Literal.string("*"))


def masked_value(rule: MaskRule, column: str, type_name: str, pads: str | None) -> exp.Expr:
    """The engine's expression of `rule` on `column` (of type `type_name`); `pads`: the alias of the
    temp table holding HMAC's pads (pseudonym)."""
    value = exp.column(column, quoted=True)
    text = _text(rule, column, type_name) if rule.kind in TEXT_RULES else None
    if rule.kind == "pseudonym":
        return _pseudonym(text, pads)
    if rule.kind == "partial":
        return _partial(value, text, *rule.arguments)
    if rule.kind == "domain":
        return _domain(value, text)
    if rule.kind in ("year", "month"):
        if not type_name.upper().startswith(("DATE", "TIMESTAMP")):
            raise AnonymizeError(f"mask rule '{rule.kind}' on column {column} needs a DATE or TIMESTAMP column, "
                                 f"not {type_name}")
        # a zoned timestamp's year and month are those of its instant in UTC, whatever the session's
        # TimeZone and Calendar (year() follows both)
        date = utc_wall_clock(exp.column(column, quoted=True), type_name)
        return _fn("year", date) if rule.kind == "year" else _fn("strftime", date, exp.Literal.string("%Y-%m"))
    if rule.kind == "null":
        return exp.Cast(this=exp.Null(), to=exp.DataType.build(type_name, dialect="duckdb", udt=True))
    if rule.kind == "constant":
        return exp.Cast(this=exp.Literal.string(rule.arguments[0]), to=exp.DataType.build("VARCHAR"))
    raise AnonymizeError(f"unknown mask rule '{rule.kind}'")


def masked_source(backend: Backend, plan: Plan, name: str) -> Plan:
    """A plan reading the temp table `name`: the published columns with every masked identifier
    replaced by its masked value, the masked identifiers published per row as kept columns."""
    published = plan.published
    probe = exp.select(*[qcol(c) for c in published]).from_(plan.source.table.copy()).limit(0)
    types = dict(zip(published, backend.column_types(probe)))
    pads = None
    if any(rule.kind == "pseudonym" for rule in plan.masks.values()):
        inner, outer = hmac_pads(pseudonym_key(backend, plan.statement.mask_key))
        pads = name + "_pads"
        backend.temps.append(pads)
        pad_values = exp.select(*[exp.alias_(exp.cast(exp.Placeholder(), "BLOB"), pad, quoted=True)
                                  for pad in ("ipad", "opad")])
        backend.execute(temporary(exp.Create(this=exp.to_table(pads, quoted=True), kind="TABLE",
                                             expression=pad_values)), [inner, outer])
    columns = [exp.alias_(masked_value(plan.masks[c], c, types[c], "k") if c in plan.masks else qcol(c), c, quoted=True)
               for c in published]
    source = exp.select(*columns).from_(plan.source.table.copy())
    if pads is not None:
        source = source.join(exp.alias_(exp.to_table(pads, quoted=True), "k", table=True), join_type="CROSS")
    try:
        backend.create_temp(name, source)
    finally:
        if pads is not None:
            backend.drop_temp(pads)
    masked = [c for c in published if c in plan.masks]
    return replace(plan, source=temp_table(name), columns=list(published), keep=plan.keep + masked, masks={})
