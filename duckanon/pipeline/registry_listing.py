"""The listing `duckanon_publications()`: a TEMP table macro over the registries of every attached
database, built as one sqlglot expression from literals and quoted names.

Each registry's branch reads its table when the listing is called: a row is valid when its digest
is one of those verified when the listing was last brought up to date (an entry edited or added
by hand since is corrupt), and only a valid row's values are shown, with `status` from its
source's fingerprint (computed when the listing is read) and its target's state (target_state, in
SQL: the release id the target's comment carries now). The verified digests are a second TEMP
macro, `duckanon_publications_verified(registry)`, which the listing calls: after a statement that
wrote an entry only that small macro is made again; the listing itself only when its shape (the
registries, and the sources and column lists their valid entries were read from) changed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.pipeline.registry_entry import CORRUPT, OUTDATED, Entry, fingerprint_select, registry_table
from duckanon.pipeline.registry_state import (NOT_ATTACHED, OTHER_FILE, REPLACED, SUPERSEDED, UNRECORDED,
                                              column_problem, source_columns)
from duckanon.pipeline.registry_statement import table_of

LISTING = "duckanon_publications"
VERIFIED, VERIFIED_PARAMETER = "duckanon_publications_verified", "registry"
LISTED = {
    "target": "VARCHAR", "source": "VARCHAR", "statement": "VARCHAR", "parameters": "JSON",
    "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "summary": "JSON", "transformation": "JSON",
    "current_rows": "BIGINT", "status": "VARCHAR", "stale": "BOOLEAN", "registry": "VARCHAR",
}


@dataclass(frozen=True)
class Check:
    """A distinct source and column list of a registry's valid entries, and why it cannot be
    fingerprinted when the listing is read (None: it can)."""

    schema: str
    name: str
    columns: tuple[str, ...]
    problem: str | None


@dataclass(frozen=True)
class RegistryShape:
    """What one registry's branch of the listing is made of (its digests aside)."""

    database: str
    kind: str  # 'ours' or 'previous'
    checks: tuple[Check, ...] = ()


Shape = tuple[RegistryShape, ...]
Verified = tuple[tuple[str, tuple[str, ...]], ...]  # per registry of ours, its valid entries' digests (sorted)


def listing_inputs(backend: Backend, kinds: list[tuple[str, str]], read: list[Entry]) -> tuple[Shape, Verified]:
    """What the listing over the registries `kinds`, whose entries as read now are `read`, is made of."""
    shape, verified = [], []
    for database, kind in kinds:
        if kind != "ours":
            shape.append(RegistryShape(database, kind))
            continue
        valid = [e for e in read if e.registry == database and not e.problem]
        keys = sorted({(e.source[1], e.source[2], tuple(e.row["source_columns"])) for e in valid})
        columns_of = source_columns(backend, [(database, schema, name) for schema, name, _ in keys])
        checks = tuple(Check(schema, name, columns, column_problem(columns_of[(database, schema, name)], columns))
                       for schema, name, columns in keys)
        shape.append(RegistryShape(database, kind, checks))
        verified.append((database, tuple(sorted(e.row["entry_digest"] for e in valid))))
    return tuple(shape), tuple(verified)


def verified_macro(verified: Verified) -> exp.Expr:
    """The body of duckanon_publications_verified(registry): the registry's verified digests
    (NULL for a registry without any: no row of it is valid)."""
    whens = [(exp.EQ(this=exp.column(VERIFIED_PARAMETER, quoted=True), expression=_text(database)),
              exp.cast(exp.Array(expressions=[_text(d) for d in digests]),
                       exp.DataType.build("VARCHAR[]", dialect="duckdb"))) for database, digests in verified]
    return _case(*whens) if whens else _typed_null("VARCHAR[]")


# ----------------------------------------------------------------------------- expression helpers

def _col(table: str, name: str) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _text(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def _typed_null(kind: str) -> exp.Expr:
    return exp.cast(exp.Null(), exp.DataType.build(kind, dialect="duckdb"))


def _concat(*parts: exp.Expr) -> exp.Expr:
    return reduce(lambda left, right: exp.DPipe(this=left, expression=right, safe=True), parts)


def _quoted(value: exp.Expr) -> exp.Expr:
    """A VARCHAR as a quoted identifier's text: '"' || replace(x, '"', '""') || '"'."""
    return _concat(_text('"'), exp.func("replace", value, _text('"'), _text('""')), _text('"'))


def _dotted(*parts: exp.Expr) -> exp.Expr:
    pieces = [_quoted(parts[0])]
    for part in parts[1:]:
        pieces += [_text("."), _quoted(part)]
    return _concat(*pieces)


def _case(*whens: tuple[exp.Expr, exp.Expr], default: exp.Expr | None = None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=condition, true=value) for condition, value in whens], default=default)


def _is_null(value: exp.Expr) -> exp.Expr:
    return exp.Is(this=value, expression=exp.Null())


def _not_null(value: exp.Expr) -> exp.Expr:
    return exp.not_(_is_null(value))


def _lower_eq(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.EQ(this=exp.func("lower", left), expression=exp.func("lower", right))


def _json_text(document: exp.Expr, path: str) -> exp.Expr:
    return exp.func("json_extract_string", document, _text(path))


# ----------------------------------------------------------------------------- the source checks

def _checks(database: str, checks: tuple[Check, ...]) -> exp.Query:
    """One row per check: the source's current fingerprint (computed when the listing is read), or
    why it cannot be compared."""
    branches = []
    for check in checks:
        key = [exp.alias_(_text(check.schema), "source_schema", quoted=True),
               exp.alias_(_text(check.name), "source_name", quoted=True),
               exp.alias_(exp.cast(exp.Array(expressions=[_text(c) for c in check.columns]),
                                   exp.DataType.build("VARCHAR[]", dialect="duckdb")), "source_columns", quoted=True)]
        if check.problem is None:
            fingerprint = fingerprint_select(table_of(database, check.schema, check.name), check.columns)
            branches.append(exp.select(*key, exp.alias_(_col("f", "n"), "n", quoted=True),
                                       exp.alias_(_col("f", "checksum"), "checksum", quoted=True),
                                       exp.alias_(_typed_null("VARCHAR"), "problem", quoted=True))
                            .from_(fingerprint.subquery("f", copy=False)))
        else:
            branches.append(exp.select(*key, exp.alias_(_typed_null("BIGINT"), "n", quoted=True),
                                       exp.alias_(_typed_null("HUGEINT"), "checksum", quoted=True),
                                       exp.alias_(_text(check.problem), "problem", quoted=True)))
    if not branches:
        return exp.select(*[exp.alias_(_typed_null(kind), name, quoted=True) for name, kind in (
            ("source_schema", "VARCHAR"), ("source_name", "VARCHAR"), ("source_columns", "VARCHAR[]"),
            ("n", "BIGINT"), ("checksum", "HUGEINT"), ("problem", "VARCHAR"))]).where(exp.false())
    return reduce(lambda left, right: exp.union(left, right, distinct=False), branches)


# ----------------------------------------------------------------------------- one registry's rows

def _target_state() -> exp.Expr:
    """target_state in SQL, over the registry row r, its target's database d and object o."""
    def described():
        return exp.func("substr", _col("o", "comment"), exp.Literal.number(10))

    def carried():  # the release id the target's comment carries (provenance.describe_target)
        return _case((exp.and_(exp.func("starts_with", _col("o", "comment"), _text("duckanon {")),
                               exp.func("json_valid", described())), _json_text(described(), "$.release")))

    def recorded(key: str):
        return _json_text(_col("r", "statement"), f"$.{key}")

    held = _case((exp.EQ(this=carried(), expression=recorded("release")), exp.Null()),
                 (exp.EQ(this=carried(), expression=recorded("pending_release")), _text(UNRECORDED)),
                 (_not_null(carried()), _text(SUPERSEDED)), default=_text(REPLACED))
    elsewhere = exp.and_(_not_null(_col("r", "target_database")),
                         exp.func("json_exists", _col("r", "statement"), _text("$.target_file")),
                         exp.NullSafeNEQ(this=_col("d", "path"), expression=recorded("target_file")))
    # an entry without a release id: only a target whose comment is not duckanon's counts as replaced
    foreign = exp.and_(_not_null(_col("o", "name")), exp.not_(exp.func(
        "coalesce", exp.func("starts_with", _col("o", "comment"), _text("duckanon {")), exp.false())))
    unchecked = _case((foreign, _text(REPLACED)))
    return _case((_is_null(_col("d", "database_name")), _text(NOT_ATTACHED)), (_is_null(recorded("release")), unchecked),
                 (_not_null(_col("o", "name")), held), (elsewhere, _text(OTHER_FILE)))


def _with_state(backend: Backend, inputs: RegistryShape, target_catalog: exp.Expr) -> exp.Select:
    """The registry's rows with `valid` (its digest was verified), its target database's
    `target_readonly` and the target's `state` (None where the entry is not valid)."""
    verified = exp.Anonymous(this=VERIFIED, expressions=[_text(inputs.database)])
    valid = exp.func("coalesce", exp.func("list_contains", verified, _col("r", "entry_digest")), exp.false())
    rows = exp.select(exp.Star(), exp.alias_(valid, "valid", quoted=True)).from_(
        registry_table(inputs.database).as_("r", quoted=True))
    same_object = exp.and_(_lower_eq(_col("o", "database_name"), target_catalog.copy()),
                           _lower_eq(_col("o", "schema_name"), _col("r", "target_schema")),
                           _lower_eq(_col("o", "name"), _col("r", "target_name")))
    return (exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("r", quoted=True)),
                       exp.alias_(_col("d", "readonly"), "target_readonly", quoted=True),
                       exp.alias_(_case((_col("r", "valid"), _target_state())), "state", quoted=True))
            .from_(rows.subquery("r", copy=False))
            .join(backend.databases_relation().subquery("d", copy=False), join_type="LEFT",
                  on=_lower_eq(_col("d", "database_name"), target_catalog.copy()))
            .join(backend.objects_relation().subquery("o", copy=False), join_type="LEFT", on=same_object))


def _status(backend: Backend, alias: exp.Expr, target_catalog: exp.Expr, same: exp.Expr) -> exp.Expr:
    state, valid, problem = _col("r", "state"), _col("r", "valid"), _col("c", "problem")
    unreachable = _concat(_text(" (not refreshable: its target's database "), target_catalog.copy(), _case(
        (exp.EQ(this=state.copy(), expression=_text(NOT_ATTACHED)), _text(" is not attached)")),
        default=_text(" is another file than the one it was published into)")))
    registry_readonly = exp.select(exp.func("bool_or", _col("rd", "readonly"))).from_(
        backend.databases_relation().subquery("rd", copy=False)).where(
        exp.EQ(this=_col("rd", "database_name"), expression=alias.copy()))
    return _case(
        (exp.not_(valid), _text(CORRUPT)), (_not_null(problem), problem.copy()),
        (exp.In(this=state, expressions=[_text(SUPERSEDED), _text(REPLACED), _text(UNRECORDED)]), state.copy()),
        (same, _text("current")), (_not_null(state.copy()), _concat(_text("stale"), unreachable)),
        (_col("r", "target_readonly"), _concat(_text("stale (not refreshable: its target's database "),
                                               target_catalog.copy(), _text(" is read-only)"))),
        (exp.Subquery(this=registry_readonly), _concat(_text("stale (not refreshable: its registry's database "),
                                                       alias.copy(), _text(" is read-only)"))),
        default=_text("stale"))


def _registry_rows(backend: Backend, inputs: RegistryShape) -> exp.Select:
    """The listing's rows of one registry: every name a quoted identifier, every value a literal."""
    alias = _text(inputs.database)
    table = registry_table(inputs.database).as_("r", quoted=True)
    if inputs.kind != "ours":
        return exp.select(
            exp.alias_(exp.cast(_col("r", "target"), "VARCHAR"), "target", quoted=True),
            *[exp.alias_(_typed_null(kind), c, quoted=True) for c, kind in LISTED.items()
              if c not in ("target", "status", "stale", "registry")],
            exp.alias_(_text(OUTDATED), "status", quoted=True), exp.alias_(exp.false(), "stale", quoted=True),
            exp.alias_(alias, "registry", quoted=True)).from_(table)
    target_catalog = exp.func("coalesce", _col("r", "target_database"), alias.copy())
    parts = [target_catalog.copy(), _col("r", "target_schema"), _col("r", "target_name")]
    target = _case((exp.and_(*[exp.NEQ(this=part.copy(), expression=_text("")) for part in parts]), _dotted(*parts)))
    shown = {"statement": _col("r", "statement_text"),
             "source": _dotted(alias.copy(), _col("r", "source_schema"), _col("r", "source_name"))}
    values = [exp.alias_(_case((_col("r", "valid"), shown.get(c, _col("r", c)))), c, quoted=True) for c in LISTED
              if c not in ("target", "current_rows", "status", "stale", "registry")]
    same = exp.paren(exp.and_(exp.EQ(this=_col("c", "n"), expression=_col("r", "source_rows")),
                              exp.EQ(this=_col("c", "checksum"), expression=_col("r", "source_checksum"))))
    state, comparable = _col("r", "state"), exp.and_(_col("r", "valid"), _is_null(_col("c", "problem")))
    stale = exp.or_(exp.and_(exp.NullSafeNEQ(this=state, expression=_text(SUPERSEDED)),
                             exp.NullSafeNEQ(this=state.copy(), expression=_text(REPLACED)), exp.not_(same.copy())),
                    exp.EQ(this=state.copy(), expression=_text(UNRECORDED)))
    checks = _checks(inputs.database, inputs.checks).subquery("c", copy=False)
    matches = exp.and_(_col("r", "valid"), *[exp.EQ(this=_col("c", c), expression=_col("r", c))
                                             for c in ("source_schema", "source_name", "source_columns")])
    return (exp.select(exp.alias_(target, "target", quoted=True), *values,
                       exp.alias_(_case((comparable, _col("c", "n"))), "current_rows", quoted=True),
                       exp.alias_(_status(backend, alias, target_catalog, same), "status", quoted=True),
                       exp.alias_(exp.func("coalesce", exp.and_(comparable.copy(), exp.paren(stale)), exp.false()),
                                  "stale", quoted=True),
                       exp.alias_(alias.copy(), "registry", quoted=True))
            .from_(_with_state(backend, inputs, target_catalog).subquery("r", copy=False))
            .join(checks, join_type="LEFT", on=matches))


def listing_select(backend: Backend, shape: Shape) -> exp.Select:
    """The SELECT the listing macro returns: every registry's rows, ordered by target and registry."""
    branches = [_registry_rows(backend, registry) for registry in shape]
    if not branches:
        branches = [exp.select(*[exp.alias_(_typed_null(kind), c, quoted=True) for c, kind in LISTED.items()])
                    .where(exp.false())]
    union = reduce(lambda left, right: exp.union(left, right, distinct=False), branches)
    return exp.select(exp.Star()).from_(union.subquery("listed", copy=False)).order_by(
        exp.column("target", quoted=True), exp.column("registry", quoted=True))
