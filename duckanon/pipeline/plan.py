"""Step 1 of the pipeline: bind a statement to the catalog. Every name is resolved and checked here,
before any scan: tables, columns and roles, the hierarchies (their specs parsed once and read), the
weights mapped to QI positions, the population's columns."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from duckanon import hierarchy
from duckanon.backends.base import Backend, BackendError, UnknownTable, full_key
from duckanon.errors import AnonymizeError
from duckanon.names import LEDGER_TABLE, REGISTRY_TABLE, TableName, shown_name
from duckanon.sql.statement import AnonymizeStatement


@dataclass(frozen=True)
class Plan:
    """A statement bound to the catalog: every name resolved (tables as the backend resolves them,
    columns as the source spells them) and checked before anything is read; the hierarchies parsed
    and read, the weights mapped to the QIs. A variant (a copy of the source to read instead, the
    columns published per row) is a dataclasses.replace."""

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
    # materialize = 'view': the table holding one row per distinct published row and its count,
    # which the view (the target) expands
    counts: TableName | None = None
    # population = <table> (k_map, delta_presence): the table as the backend resolved it, its QI
    # columns in the order of `qi` (names as the population spells them) and its weight column
    population: TableName | None = None
    population_qi: list[str] = field(default_factory=list)
    population_weight: str | None = None
    # sensitive = (a, b, ...): every sensitive column (empty or one: `sensitive` alone)
    sensitives: list[str] = field(default_factory=list)
    # direct identifiers (names as the source spells them) and the masking rule of those published
    identifiers: list[str] = field(default_factory=list)
    masks: dict = field(default_factory=dict)
    # columns the pipeline added to what it reads (several sensitive columns as one value): never published
    hidden: frozenset = frozenset()
    # hierarchies = ...: per QI (in `qi`'s order) its hierarchy as read from its spec (not yet bound
    # to the column's values), None for a QI without one; None when the statement gives none
    hierarchies: tuple | None = None
    # QI column -> the table its `table(name)` spec reads, as written (placed by bind, so the target
    # never replaces one, whatever the method: mondrian reads them without taking them as lattice does)
    hierarchy_tables: dict = field(default_factory=dict)
    # weights = ...: per QI (in `qi`'s order) its attribute weight (1 where none is given); None without
    weights: list[float] | None = None

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


def _refuse_bookkeeping_target(backend: Backend, target: TableName) -> None:
    """duckanon's own bookkeeping is never a target: publishing into the registry replaced it (every
    entry lost), and into a view release's table of counts broke that view (the DP attack)."""
    if target.name.lower() == REGISTRY_TABLE:
        raise AnonymizeError(f"the target {shown_name(target)} is the name of duckanon's publication registry: "
                             "choose another name with INTO")
    if target.name.lower() == LEDGER_TABLE:
        raise AnonymizeError(f"the target {shown_name(target)} is the name of duckanon's privacy ledger: "
                             "choose another name with INTO")
    if is_counts_of(backend.catalog_entry(target), None):
        raise AnonymizeError(f"the target {shown_name(target)} holds the rows of a view published with "
                             "materialize = 'view': choose another name with INTO")


def counts_table(backend: Backend, statement: AnonymizeStatement, target: TableName) -> TableName:
    """materialize = 'view': the table of counts beside the view, named after it (`<view>_counts`),
    placed and checked like the target. A table of that name that duckanon did not make is refused:
    publishing never replaces the user's own tables."""
    counts = backend.place(statement.source, counts_name(target))[1]
    entry = backend.catalog_entry(counts)
    if entry is not None and not is_counts_of(entry, None):
        raise AnonymizeError(f"materialize = 'view' keeps the view's rows in a table {shown_name(counts)}, which "
                             "already exists and was not made by duckanon: drop it or choose another name with INTO")
    if entry is not None and not is_counts_of(entry, target):
        raise AnonymizeError(f"materialize = 'view' keeps the view's rows in a table {shown_name(counts)}, which "
                             "holds the rows of another view: choose another name with INTO")
    return counts


def hierarchy_specs(specs, qi: list[str]) -> dict[str, str]:
    """QI column -> the hierarchy spec the statement's `hierarchies` gives it (one string: every
    QI; names matched without case)."""
    if isinstance(specs, str):
        return {c: specs for c in qi}
    if isinstance(specs, dict):
        return {c: spec for name, spec in specs.items() for c in qi if c.lower() == name.lower()}
    return {}


def _hierarchy_specs(statement: AnonymizeStatement, qi: list[str]) -> dict[int, hierarchy.HierarchySpec]:
    """QI position -> its hierarchy's spec, parsed (hierarchy.read_spec, `{column}` replaced by the
    QI's name); a name in `hierarchies` that is no QI is refused."""
    specs = statement.hierarchies
    if isinstance(specs, dict):
        qi_lower = {c.lower() for c in qi}
        for name in specs:
            if name.lower() not in qi_lower:
                raise AnonymizeError(f"hierarchies names column {name}, which is not a quasi-identifier")
    by_column = hierarchy_specs(specs, qi)
    parsed = {j: hierarchy.read_spec(by_column[column], column) for j, column in enumerate(qi) if column in by_column}
    if statement.epsilon is not None and statement.levels and not statement.epsilon_search:
        for j, spec in parsed.items():
            if spec.built is not None and spec.built.height is None:
                # whether a level given exists would depend on the longest value (a refusal that
                # read the data, which epsilon does not cover)
                raise AnonymizeError(f"the hierarchy of {qi[j]} ({spec.built.name}) takes its height from the data, "
                                     "so whether option levels' level exists would depend on the rows: give it a "
                                     "fixed height (e.g. prefix(5))")
    if statement.epsilon_search:
        for j, spec in parsed.items():
            if spec.built is not None and spec.built.height is None:
                # the search's lattice would be as high as the data makes it (prefix: the longest
                # value), so the levels it publishes would tell a row's presence (the DP attack:
                # the level moved from 0-3 to 8-14 in 30 of 30 releases with one long value added)
                raise AnonymizeError(f"the hierarchy of {qi[j]} ({spec.built.name}) takes its height from the data, "
                                     "which the search's levels would tell: give it a fixed height (e.g. prefix(5))")
    return parsed


def _hierarchies(backend: Backend, specs: dict[int, hierarchy.HierarchySpec], qi: list[str]) -> tuple | None:
    """Per QI its hierarchy, read from its spec through the backend (a file or table: DuckDB's
    file-access rules apply), None where it has none; None when the statement gives none."""
    if not specs:
        return None
    return tuple(specs[j].load(backend) if j in specs else None for j in range(len(qi)))


def _weights(statement: AnonymizeStatement, qi: list[str]) -> list[float] | None:
    """The statement's `weights` per QI in QI order (1 where none is given), None without them;
    a name that is no QI is refused."""
    given = statement.weights
    if given is None:
        return None
    qi_lower = {c.lower() for c in qi}
    unknown = [name for name in given if name.lower() not in qi_lower]
    if unknown:
        raise AnonymizeError(f"weights names column {unknown[0]}, which is not a quasi-identifier "
                             f"(quasi-identifiers: {', '.join(qi)})")
    by_lower = {name.lower(): weight for name, weight in given.items()}
    return [by_lower.get(c.lower(), 1.0) for c in qi]


def source_columns(backend: Backend, table: TableName) -> list[str]:
    try:
        return backend.columns(table)
    except UnknownTable:
        raise AnonymizeError(f"unknown table {table.sql()}") from None
    except BackendError as error:
        raise AnonymizeError(f"cannot read table {table.sql()}: {error}") from None


def bind(backend: Backend, statement: AnonymizeStatement) -> Plan:
    """The statement bound to the catalog (Plan): every name the statement holds resolved and
    checked here, before anything is read."""
    columns = source_columns(backend, statement.source)
    roles = _Roles.of(statement, columns)
    qi = roles.qi
    patterns = _patterns(statement, qi, roles.resolve)
    weights = _weights(statement, qi)
    specs = _hierarchy_specs(statement, qi)
    tables = {qi[j]: spec.table for j, spec in specs.items() if spec.table is not None}
    source, target = backend.place(statement.source, _target(statement), list(tables.items()))
    _refuse_bookkeeping_target(backend, target)
    sa_hierarchy_rows = None
    if statement.t_distance == "hierarchical" and statement.sa_hierarchy is not None:
        sa_hierarchy_rows = hierarchy.read_sa_hierarchy(backend, statement.sa_hierarchy)
    counts = counts_table(backend, statement, target) if statement.materialize == "view" else None
    population, population_qi, population_weight = (
        _population(backend, statement, qi, target) if statement.population is not None else (None, [], None))
    hierarchies = _hierarchies(backend, specs, qi)
    if statement.epsilon is not None and statement.levels:
        _check_private_levels(statement, qi, hierarchies)
    return Plan(statement, source, target, columns, qi, roles.sensitives[0] if roles.sensitives else None, roles.keep,
                patterns, sa_hierarchy_rows, counts=counts, population=population, population_qi=population_qi,
                population_weight=population_weight, sensitives=roles.sensitives, identifiers=roles.identifiers,
                masks=roles.masks, hierarchies=hierarchies, hierarchy_tables=tables,
                weights=weights)


def _check_private_levels(statement: AnonymizeStatement, qi: list[str], hierarchies: tuple | None) -> None:
    """A private statement's levels against its hierarchies' heights, before any row is read (every
    height is the hierarchy's own: a height from the data is refused above), so that whether a
    level is refused never depends on the rows; the same words as after the read."""
    given = {name.lower(): level for name, level in statement.levels.items()}
    for j, name in enumerate(qi):
        parsed = hierarchies[j] if hierarchies is not None else None
        height = 1 if parsed is None else parsed.height  # without a hierarchy: the value or '*'
        level = given.get(name.lower())
        if level is not None and height is not None and level > height:
            raise AnonymizeError(f"option levels: the hierarchy of {name} has levels 0 to {height}, got {level}")


@dataclass(frozen=True)
class _Roles:
    """The columns of each role, as the source spells them, checked against one another."""

    columns: list[str]
    qi: list[str]
    sensitives: list[str]
    keep: list[str]
    masks: dict
    identifiers: list[str]
    source: str  # the source as the statement names it, for messages

    def resolve(self, name: str, role: str) -> str:
        """The source's spelling of a column the statement names (matched without case)."""
        found = {c.lower(): c for c in self.columns}.get(name.lower())
        if found is None:
            raise AnonymizeError(f"unknown column '{name}' in {role} for table {self.source} "
                                 f"(columns: {', '.join(self.columns)})")
        return found

    @classmethod
    def of(cls, statement: AnonymizeStatement, columns: list[str]) -> _Roles:
        named = cls(columns, [], [], [], {}, [], statement.source.sql())
        sensitives = [named.resolve(c, "sensitive") for c in statement.sensitives]
        keep = [named.resolve(c, "keep") for c in statement.keep]
        masks = {named.resolve(c, "mask"): rule for c, rule in statement.mask.items()}
        identifiers = [named.resolve(c, "identifiers") for c in statement.identifiers]
        identifiers += [c for c in masks if c.lower() not in {i.lower() for i in identifiers}]  # a masked column is one
        if statement.qi is not None:
            qi = [named.resolve(c, "qi") for c in statement.qi]
        else:
            excluded = {c.lower() for c in keep + sensitives + identifiers}
            qi = [c for c in columns if c.lower() not in excluded]
        roles = cls(columns, qi, sensitives, keep, masks, identifiers, named.source)
        roles._check()
        return roles

    def _check(self) -> None:
        for role, names in (("qi", self.qi), ("keep", self.keep)):
            lowered = [c.lower() for c in names]
            duplicates = sorted({c for c in lowered if lowered.count(c) > 1})
            if duplicates:
                raise AnonymizeError(f"column '{duplicates[0]}' is listed twice in {role}")
        if not self.qi:
            raise AnonymizeError("no quasi-identifier columns: name them with qi = (...)")
        qi_lower = {c.lower() for c in self.qi}
        for column in self.sensitives:
            if column.lower() in qi_lower:
                raise AnonymizeError(f"column '{column}' cannot be both sensitive and a quasi-identifier")
        _check_identifiers(self.identifiers, self.masks, self.qi, self.sensitives, self.keep)
        for c in self.keep:
            if c.lower() in qi_lower:
                raise AnonymizeError(f"column '{c}' cannot be both kept and a quasi-identifier")
            if c.lower() in {s.lower() for s in self.sensitives}:
                raise AnonymizeError(f"column '{c}' cannot be both kept and sensitive")


def _patterns(statement: AnonymizeStatement, qi: list[str], resolve) -> list[list[int]] | None:
    """The statement's patterns as QI positions (each sorted)."""
    if statement.patterns is None:
        return None
    index = {c.lower(): j for j, c in enumerate(qi)}
    patterns = []
    for pattern in statement.patterns:
        resolved = [resolve(c, "patterns").lower() for c in pattern]
        missing = [c for c in resolved if c not in index]
        if missing:
            raise AnonymizeError(f"pattern column '{missing[0]}' is not a quasi-identifier")
        patterns.append(sorted(index[c] for c in resolved))
    return patterns


def _target(statement: AnonymizeStatement) -> TableName:
    """The target as the statement names it: INTO's, else `<source>_anon` beside the source."""
    if statement.target is not None:
        return statement.target
    source_table = statement.source.table
    return TableName(exp.Table(this=exp.to_identifier(f"{source_table.name}_anon", quoted=True),
                               db=source_table.args.get("db"), catalog=source_table.args.get("catalog")))


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


def _population(backend: Backend, statement: AnonymizeStatement, qi: list[str],
                target: TableName) -> tuple[TableName, list[str], str | None]:
    """The population table as the backend resolves it, its QI columns (matched without case) in
    `qi`'s order and its weight column: the table found, holding every QI and the weight column."""
    shown = shown_name(statement.population)
    try:
        columns = backend.columns(statement.population)
    except UnknownTable:
        raise AnonymizeError(f"unknown population table {shown}") from None
    except BackendError as error:
        raise AnonymizeError(f"cannot read population table {shown}: {error}") from None
    by_lower = {c.lower(): c for c in columns}
    missing = [c for c in qi if c.lower() not in by_lower]
    if missing:
        raise AnonymizeError(f"population table {shown} lacks the quasi-identifier column '{missing[0]}' "
                             f"(it must hold every QI: {', '.join(qi)})")
    population = backend.resolved(statement.population)
    weight = None
    if statement.population_weight is not None:
        weight = by_lower.get(statement.population_weight.lower())
        if weight is None:
            raise AnonymizeError(f"unknown column '{statement.population_weight}' in population_weight for population "
                                 f"table {shown}")
    _refuse_population_target(backend, statement, target, population)
    return population, [by_lower[c.lower()] for c in qi], weight


def _refuse_population_target(backend: Backend, statement: AnonymizeStatement, target: TableName,
                              population: TableName) -> None:
    """The release never replaces the population table: the target is compared with it as with
    the source (Backend.place: the objects the engine resolves, and the tables a view reads), so
    every spelling of the same table (quoted, other case, qualified, an attached alias, the
    search path, a view over it) is refused."""
    try:
        backend.place(statement.population, target)
    except AnonymizeError:
        shown_target, shown_population = shown_name(target), shown_name(population)
        kind = (backend.catalog_entry(population) or ("table",))[0].lower()
        defaults = backend.session_defaults()
        if full_key(target, *defaults) == full_key(population, *defaults):
            raise AnonymizeError(f"the target {shown_target} is the population {kind} {shown_population}: choose "
                                 "another name with INTO") from None
        raise AnonymizeError(f"the target {shown_target} is read by the population {kind} {shown_population}: choose "
                             "another name with INTO") from None
