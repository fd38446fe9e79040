"""Step 1 of the pipeline: bind a statement to the catalog (tables and columns resolved and checked)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from duckanon import hierarchy
from duckanon.backends.base import Backend, BackendError, UnknownTable, full_key
from duckanon.errors import AnonymizeError
from duckanon.sql.names import TableName, shown_name
from duckanon.sql.statement import AnonymizeStatement


@dataclass
class Plan:
    statement: AnonymizeStatement
    source: TableName  # catalog.schema.name of the object read, as the backend resolved it (Backend.place)
    target: TableName  # the table written and commented, as the backend resolved it
    columns: list[str]  # every source column, in source order
    qi: list[str]
    sensitive: str | None  # the first sensitive column (the solver's plan: the one its histogram counts)
    keep: list[str]
    patterns: list[list[int]] | None  # QI indices that may be starred together
    # t_distance = hierarchical: the rows of the sa_hierarchy file, read through DuckDB (so its file
    # access rules apply) and checked; for duckanon.solver.emd.SAHierarchy.from_rows
    sa_hierarchy_rows: list[list[str]] | None = None
    # How each published column is keyed and published (histogram.column_kinds: lower-case name ->
    # VALUE / STRING / TYPED / TEXT), which columns are strings, and whether the engine has
    # COLLATE c: set by histogram.build_cells from the source's bound types, read by materialize.
    column_kinds: dict[str, str] = field(default_factory=dict)
    string_columns: set[str] = field(default_factory=set)
    collations: bool = False
    # the VARCHAR columns declared with a collation (lower-case name -> the collation, as the
    # engine writes it): a QI that the keep path decodes from a code gets it back (materialize)
    column_collations: dict[str, str] = field(default_factory=dict)
    # materialize = 'view': the table holding one row per distinct published row and its count,
    # which the view (the target) expands
    counts: TableName | None = None
    # population = <table> (k_map, delta_presence): the table as the backend resolved it, its QI
    # columns in the order of `qi` (names as the population spells them) and its weight column
    population: TableName | None = None
    population_qi: list[str] = field(default_factory=list)
    population_weight: str | None = None
    # set by problem.build_problem: the population's classes and the temp tables they were
    # counted in (population.PopulationClasses), which the release's check reads again
    population_classes: object = None
    # sensitive = (a, b, ...): every sensitive column (empty or one: `sensitive` alone)
    sensitives: list[str] = field(default_factory=list)
    # direct identifiers (names as the source spells them) and the masking rule of those published
    identifiers: list[str] = field(default_factory=list)
    masks: dict = field(default_factory=dict)
    # columns the pipeline added to what it reads (several sensitive columns as one value): never published
    hidden: set = field(default_factory=set)
    # the publication registry's fingerprint of the source (registry.fingerprint_sql): (the source
    # as SQL, the columns it covers); build_cells computes it in its GROUP BY when it reads that source
    fingerprint_of: tuple[str, tuple[str, ...]] | None = None

    @property
    def source_shown(self) -> str:
        """The source for messages and suggested queries: catalog.schema.name as DuckDB resolved
        it, quoted only where needed."""
        return shown_name(self.source)

    @property
    def published(self) -> list[str]:
        """Published columns in source order; every other column is dropped (privacy by default)."""
        chosen = {c.lower() for c in self.qi + self.keep + self.sensitives + list(self.masks)
                  + ([self.sensitive] if self.sensitive else [])}
        return [c for c in self.columns if c.lower() in chosen and c not in self.hidden]

    def roles(self) -> dict[str, str]:
        """Every source column's one role: quasi-identifier, sensitive, keep, identifier (masked by
        its rule, or dropped), or dropped (not mentioned: privacy by default)."""
        qi, keep = {c.lower() for c in self.qi}, {c.lower() for c in self.keep}
        sensitive = {c.lower() for c in self.sensitives + ([self.sensitive] if self.sensitive else [])}
        masks = {c.lower(): rule for c, rule in self.masks.items()}
        identifiers = {c.lower() for c in self.identifiers}
        roles = {}
        for column in self.columns:
            name = column.lower()
            if column in self.hidden:
                continue
            roles[column] = ("quasi-identifier" if name in qi else "sensitive" if name in sensitive else
                             "keep" if name in keep else f"identifier, masked: {masks[name]}" if name in masks else
                             "identifier, dropped" if name in identifiers else "dropped")
        return roles

    @property
    def dropped(self) -> list[str]:
        """The source columns the release does not publish, in source order."""
        return [c for c, role in self.roles().items() if role in ("dropped", "identifier, dropped")]


# The comment that marks a table of counts as duckanon's (so a re-run may replace it), followed by
# the name of its view.
COUNTS_COMMENT = "duckanon: the published rows of view "


def counts_name(target: TableName) -> TableName:
    return TableName(exp.Table(this=exp.to_identifier(f"{target.name}_counts", quoted=True),
                               db=target.table.args.get("db"), catalog=target.table.args.get("catalog")))


def is_counts_of(entry: tuple[str, str | None] | None, view: TableName | None) -> bool:
    """Whether a catalog entry (Backend.catalog_entry) is a table of counts duckanon made (for
    `view`, if given)."""
    kind, comment = entry or (None, None)
    if kind != "TABLE" or not (comment or "").startswith(COUNTS_COMMENT):
        return False
    return view is None or comment == COUNTS_COMMENT + shown_name(view)


def counts_table(backend: Backend, statement: AnonymizeStatement, target: TableName) -> TableName:
    """materialize = 'view': the table of counts beside the view, named after it (`<view>_counts`),
    placed and checked like the target. A table of that name that duckanon did not make is refused:
    publishing never replaces the user's own tables."""
    counts = backend.place(statement.source, counts_name(target))[1]
    entry = backend.catalog_entry(counts)
    if entry is not None and not is_counts_of(entry, None):
        raise AnonymizeError(f"materialize = 'view' keeps the view's rows in a table {shown_name(counts)}, which "
                             "already exists and was not made by duckanon: drop it or choose another name with INTO")
    return counts


def hierarchy_specs(specs, qi: list[str]) -> dict[str, str]:
    """QI column -> the hierarchy spec the statement's `hierarchies` gives it (one string: every
    QI; names matched without case)."""
    if isinstance(specs, str):
        return {c: specs for c in qi}
    if isinstance(specs, dict):
        return {c: spec for name, spec in specs.items() for c in qi if c.lower() == name.lower()}
    return {}


def _hierarchy_tables(statement: AnonymizeStatement, qi: list[str]) -> list[tuple[str, str]]:
    """(QI column, table name) of every `table(name)` hierarchy the statement names: whatever the
    method (mondrian reads them for its local recoding without taking them as `lattice` does), so
    the target can never replace one."""
    if statement.hierarchies is None:
        return []
    # the spec's table as the hierarchy reader takes it (also a name of quoted parts with commas)
    named = ((column, hierarchy.table_spec_name(spec, column))
             for column, spec in hierarchy_specs(statement.hierarchies, qi).items())
    return [(column, name) for column, name in named if name is not None]


def source_columns(backend: Backend, table: TableName) -> list[str]:
    try:
        return backend.columns(table)
    except UnknownTable:
        raise AnonymizeError(f"unknown table {table.sql()}") from None
    except BackendError as error:
        raise AnonymizeError(f"cannot read table {table.sql()}: {error}") from None


def bind(backend: Backend, statement: AnonymizeStatement) -> Plan:
    columns = source_columns(backend, statement.source)
    by_lower = {c.lower(): c for c in columns}

    def resolve(name: str, role: str) -> str:
        found = by_lower.get(name.lower())
        if found is None:
            raise AnonymizeError(
                f"unknown column '{name}' in {role} for table {statement.source.sql()} (columns: {', '.join(columns)})"
            )
        return found

    sensitives = [resolve(c, "sensitive") for c in statement.sensitives]
    sensitive = sensitives[0] if sensitives else None
    keep = [resolve(c, "keep") for c in statement.keep]
    masks = {resolve(c, "mask"): rule for c, rule in statement.mask.items()}
    identifiers = [resolve(c, "identifiers") for c in statement.identifiers]
    identifiers += [c for c in masks if c.lower() not in {i.lower() for i in identifiers}]  # a masked column is one
    if statement.qi is not None:
        qi = [resolve(c, "qi") for c in statement.qi]
    else:
        excluded = {c.lower() for c in keep + sensitives + identifiers}
        qi = [c for c in columns if c.lower() not in excluded]
    for role, names in (("qi", qi), ("keep", keep)):
        lowered = [c.lower() for c in names]
        duplicates = sorted({c for c in lowered if lowered.count(c) > 1})
        if duplicates:
            raise AnonymizeError(f"column '{duplicates[0]}' is listed twice in {role}")
    if not qi:
        raise AnonymizeError("no quasi-identifier columns: name them with qi = (...)")
    qi_lower = {c.lower() for c in qi}
    for column in sensitives:
        if column.lower() in qi_lower:
            raise AnonymizeError(f"column '{column}' cannot be both sensitive and a quasi-identifier")
    _check_identifiers(identifiers, masks, qi, sensitives, keep)
    for c in keep:
        if c.lower() in qi_lower:
            raise AnonymizeError(f"column '{c}' cannot be both kept and a quasi-identifier")
        if c.lower() in {s.lower() for s in sensitives}:
            raise AnonymizeError(f"column '{c}' cannot be both kept and sensitive")

    patterns = None
    if statement.patterns is not None:
        index = {c.lower(): j for j, c in enumerate(qi)}
        patterns = []
        for pattern in statement.patterns:
            resolved = [resolve(c, "patterns").lower() for c in pattern]
            missing = [c for c in resolved if c not in index]
            if missing:
                raise AnonymizeError(f"pattern column '{missing[0]}' is not a quasi-identifier")
            patterns.append(sorted(index[c] for c in resolved))

    if statement.target is not None:
        target = statement.target
    else:
        source_table = statement.source.table
        target = TableName(
            exp.Table(
                this=exp.to_identifier(f"{source_table.name}_anon", quoted=True),
                db=source_table.args.get("db"),
                catalog=source_table.args.get("catalog"),
            )
        )
    source, target = backend.place(statement.source, target, _hierarchy_tables(statement, qi))
    sa_hierarchy_rows = None
    if statement.t_distance == "hierarchical" and statement.sa_hierarchy is not None:
        sa_hierarchy_rows = hierarchy.read_sa_hierarchy(backend, statement.sa_hierarchy)
    counts = counts_table(backend, statement, target) if statement.materialize == "view" else None
    plan = Plan(statement, source, target, columns, qi, sensitive, keep, patterns, sa_hierarchy_rows, counts=counts,
                sensitives=sensitives, identifiers=identifiers, masks=masks)
    if statement.population is not None:
        _bind_population(backend, plan)
    return plan


def _check_identifiers(identifiers: list[str], masks: dict, qi: list[str], sensitives: list[str], keep: list[str]) -> None:
    """A direct identifier has no other role: a mask rule on a QI, a sensitive or a kept column is refused."""
    lowered = [c.lower() for c in identifiers]
    twice = sorted({c for c in lowered if lowered.count(c) > 1})
    if twice:
        raise AnonymizeError(f"column '{twice[0]}' is listed twice in identifiers")
    for role, names in (("a quasi-identifier", qi), ("sensitive", sensitives), ("kept", keep)):
        taken = {c.lower() for c in names}
        for column in identifiers:
            if column.lower() in taken:
                what = "a mask rule applies" if column in masks else "it is listed in identifiers"
                raise AnonymizeError(f"column '{column}' is {role}, but {what}: mask rules and identifiers are for "
                                     "direct identifiers only")


def _bind_population(backend: Backend, plan: Plan) -> None:
    """The population table: found, holding every QI (matched without case) and the weight column."""
    statement = plan.statement
    shown = shown_name(statement.population)
    try:
        columns = backend.columns(statement.population)
    except UnknownTable:
        raise AnonymizeError(f"unknown population table {shown}") from None
    except BackendError as error:
        raise AnonymizeError(f"cannot read population table {shown}: {error}") from None
    by_lower = {c.lower(): c for c in columns}
    missing = [c for c in plan.qi if c.lower() not in by_lower]
    if missing:
        raise AnonymizeError(f"population table {shown} lacks the quasi-identifier column '{missing[0]}' "
                             f"(it must hold every QI: {', '.join(plan.qi)})")
    plan.population = backend.resolved(statement.population)
    plan.population_qi = [by_lower[c.lower()] for c in plan.qi]
    if statement.population_weight is not None:
        weight = by_lower.get(statement.population_weight.lower())
        if weight is None:
            raise AnonymizeError(f"unknown column '{statement.population_weight}' in population_weight for population "
                                 f"table {shown}")
        plan.population_weight = weight
    _refuse_population_target(backend, plan)


def _refuse_population_target(backend: Backend, plan: Plan) -> None:
    """The release never replaces the population table: the target is compared with it as with
    the source (Backend.place: the objects the engine resolves, and the tables a view reads), so
    every spelling of the same table (quoted, other case, qualified, an attached alias, the
    search path, a view over it) is refused."""
    try:
        backend.place(plan.statement.population, plan.target)
    except AnonymizeError:
        target, population = shown_name(plan.target), shown_name(plan.population)
        kind = (backend.catalog_entry(plan.population) or ("table",))[0].lower()
        defaults = backend.session_defaults()
        if full_key(plan.target, *defaults) == full_key(plan.population, *defaults):
            raise AnonymizeError(f"the target {target} is the population {kind} {population}: choose another name "
                                 "with INTO") from None
        raise AnonymizeError(f"the target {target} is read by the population {kind} {population}: choose another "
                             "name with INTO") from None
