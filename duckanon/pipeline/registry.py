"""The publication registry: what each ANONYMIZE published, from what, and whether it is current.

A table `duckanon_publications` in the source's database holds one row per published target,
written in the publishing transaction when the target is in that database too (else right after
the release commits, in a transaction of its own). Nothing derived from the source (names,
counts, checksums, the statement) is ever written into any other database: a source that is a
file, a DataFrame, a temporary table or in a read-only database gets no entry, and the release
says why in `details.registry`.

An entry holds the *bound* statement as data, never as SQL to run: the target and the source as
identifier parts (the registry's own database is "this database": NULL in `target_database`, and
the source is always in it; a target in another database is named by that database's alias), the
options as typed JSON values (with `hierarchy_tables`: each `table(name)` hierarchy as the table
DuckDB resolved at publish time, in identifier parts like the target's), the published
transformation, and a fingerprint of the source (its row count and an order-independent checksum
of the columns the statement reads: fingerprint_sql).
`entry_digest`, a SHA-256 of the other fields, tells an entry duckanon wrote from one edited by
hand. Every query built from an entry is a sqlglot expression with quoted identifiers and literal
values; an entry that does not read back as that structure is `corrupt`: listed so, never run.
The table is marked as duckanon's by its comment (REGISTRY_COMMENT) and its exact columns; a table
of that name that is not duckanon's is never written, read or dropped.

`duckanon_publications()` is a TEMP table macro, generated per connection from the registries of
every attached database (install_listing): each entry with the source's current fingerprint and
`status` current, stale (the fingerprint differs), source missing, source lost column x, corrupt,
or (a registry of the previous format, whose sources were SQL text) outdated: publish again.

Every release has a random id (Recording.release_id, a UUID: never derived from the source) on the
target's comment and in its entry; the listing and REFRESH compare them (target_state): an entry
whose target holds another release is `superseded` (or `target replaced` when the table there is
not duckanon's), and REFRESH never writes it. DuckDB cannot commit two databases at once, so an
entry kept in another database than its release is first marked with the new release as pending
(mark_pending), then the release commits, then the entry is written: a split between the last two
(a kill, a failed write) is listed as `unrecorded release`, which REFRESH brings up to date.

The registry asks the engine only through the backend's KeepsRegistry methods (backends.base).
This module places and writes an entry (Recording); the others are the statement as data
(registry_statement), the entry's format and digest (registry_entry), reading the registries and
the states of sources and targets (registry_state), the table's creation and drop
(registry_releases) and the listing macro (registry_listing). Their public names are imported here:
`registry.<name>` is the registry's interface.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlglot import exp

from duckanon import hierarchy
from duckanon._version import __version__
from duckanon.backends.base import Backend, BackendError, UnknownTable
from duckanon.errors import AnonymizeError
from duckanon.names import TableName, shown_name
from duckanon.pipeline.plan import Plan, hierarchy_specs
from duckanon.pipeline.provenance import release_parameters
from duckanon.pipeline.registry_entry import (  # noqa: F401 - the registry's interface
    COLUMNS, CORRUPT, JSON_COLUMNS, OUTDATED, PREVIOUS_COLUMNS, REGISTRY, REGISTRY_COMMENT, Entry, digest, entry_of,
    fingerprint, fingerprint_select, fingerprint_sql, hierarchy_parts, loads, registry_table, shown)
from duckanon.pipeline.registry_listing import (LISTING, VERIFIED, VERIFIED_PARAMETER, listing_inputs,
                                                listing_select, verified_macro)
from duckanon.pipeline.registry_releases import (  # noqa: F401
    CREATE_ATTEMPTS, begin_release, create_registry, end_release, prepare, unprepare)
from duckanon.pipeline.registry_state import (  # noqa: F401
    NOT_ATTACHED, OTHER_FILE, REPLACED, SUPERSEDED, UNRECORDED, carried_release, database_file, entries,
    not_ours, read_registries, read_registry, registries, registry_backend, registry_kind, source_problem, source_state,
    target_object, target_refusal, target_state)
from duckanon.pipeline.registry_statement import (  # noqa: F401
    FORMAT, OPTION_NAMES, Corrupt, given_options, options_set, quoted_identifier, rebuild, statement_data, table_of)


# ----------------------------------------------------------------------------- where an entry goes

@dataclass
class Placement:
    """The database whose registry takes the release's entry (the source's), or why none does."""

    database: str | None
    why_not: str | None = None
    with_release: bool = False  # the target is in that database too: the entry commits with the release


def placement(backend: Backend, plan: Plan) -> Placement:
    try:
        return _placement(registry_backend(backend), plan)
    except BackendError as error:  # the catalog could not be read: the release stands, unrecorded
        return Placement(None, f"not recorded: {str(error).splitlines()[0][:200]}")


def _placement(backend: Backend, plan: Plan) -> Placement:
    parts = [part.name for part in plan.source.table.parts]
    if len(parts) != 3 or backend.find_object(*parts) is None:
        return Placement(None, "not recorded: the source is not a table or view of a database (a file, a DataFrame): "
                               "the registry lives in the source's database, and nothing about a source is written "
                               "anywhere else")
    database_name = parts[0]
    if database_name.lower() == "temp":
        return Placement(None, "not recorded: the source is temporary (a TEMP table or view, or a registered "
                               "DataFrame): the registry lives in the source's database, and this one ends with the "
                               "connection")
    database = backend.database(database_name)
    if database.readonly:
        return Placement(None, f"not recorded: the source's database {database_name} is read-only (the registry lives in "
                               "the source's database, and nothing about a source is written anywhere else)")
    if (database.type or "").lower() != "duckdb":
        return Placement(None, f"not recorded: the source's database {database_name} is not a DuckDB database")
    target_catalog = plan.target.table.catalog
    if target_catalog.lower() == "temp":
        return Placement(None, "not recorded: the target is a temporary table (it ends with the connection)")
    for column, parts in hierarchy_tables(backend, plan).items():
        if parts[0].lower() == "temp":
            return Placement(None, f"not recorded: the hierarchy table of column {column} is temporary (a TEMP table "
                                   "or view): it ends with the connection, and REFRESH reads the hierarchy tables "
                                   "the release was made with")
    kind = registry_kind(backend, database_name)
    if kind not in (None, "ours"):
        return Placement(None, not_ours(database_name, kind))
    return Placement(database_name, None, with_release=target_catalog.lower() == database_name.lower())


def hierarchy_tables(backend: Backend, plan: Plan) -> dict[str, tuple[str, str, str]]:
    """QI column -> the table or view its `table(name)` hierarchy reads, fully qualified as DuckDB
    resolves the name now (parse_spec reads it with query_table(), in this session): kept in the
    entry so that REFRESH reads the same object. A name that is no catalog object, or whose
    reading by query_table() is not the object's, is left out (REFRESH reads the name again)."""
    specs = plan.statement.hierarchies
    if specs is None:
        return {}
    found = {}
    for column, spec in hierarchy_specs(specs, plan.qi).items():
        name = hierarchy.table_spec_name(spec, column)
        parts = None if name is None else backend.hierarchy_table(name)
        if parts is not None:
            found[column] = parts
    return found


# Tests set this to make a release into another database wait, between its commit and its entry's,
# until a line arrives on stdin (a subprocess test kills it with SIGKILL there).
WAIT_BETWEEN_COMMITS = "DUCKANON_TEST_WAIT_BETWEEN_COMMITS"


def _between_commits() -> None:
    if os.environ.get(WAIT_BETWEEN_COMMITS):
        print("between commits", flush=True)
        sys.stdin.readline()


def mark_pending(backend: Backend, database: str, target: tuple[str, str, str], release: str) -> None:
    """Before a release into another database commits: its entry in `database` (if it has one)
    records the release as pending, committed on a second cursor, so that a split between the two
    commits (a kill -9, an entry that cannot be written) is listed as an unrecorded release. Raises
    BackendError when the entry cannot be written (another transaction holds it)."""
    table = registry_table(database)
    target_catalog, schema, name = target
    target_database = None if target_catalog.lower() == database.lower() else target_catalog
    with registry_backend(backend).separate_session() as session:
        if registry_kind(session, database) != "ours":
            return
        session.begin()
        try:
            _mark(session, table, (target_database, schema, name), release)
            session.commit()
        except BaseException:
            session.rollback()
            raise


def _mark(session: Backend, table: exp.Table, target: tuple, release: str) -> None:
    query = exp.select(*[exp.column(c, quoted=True) for c in COLUMNS]).from_(table.copy()).where(_same_target())
    for values in session.rows(query, list(target)):
        row = dict(zip(COLUMNS, values))
        if row["entry_digest"] != digest(row):
            continue  # corrupt: left as it is
        data = loads(row["statement"])
        data["pending_release"] = release
        changed = {**row, "statement": json.dumps(data, sort_keys=True)}
        update = exp.Update(this=table.copy(), expressions=[
            exp.EQ(this=exp.column("statement", quoted=True), expression=exp.cast(exp.Placeholder(), "JSON")),
            exp.EQ(this=exp.column("entry_digest", quoted=True), expression=exp.Placeholder())],
            where=exp.Where(this=exp.EQ(this=exp.column("entry_digest", quoted=True), expression=exp.Placeholder())))
        session.execute(update, [changed["statement"], digest({**changed, "entry_digest": None}), row["entry_digest"]])


def _same_target() -> exp.Expr:
    return exp.and_(
        exp.NullSafeEQ(this=exp.func("lower", exp.column("target_database", quoted=True)),
                       expression=exp.func("lower", exp.Placeholder())),
        exp.EQ(this=exp.func("lower", exp.column("target_schema", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())),
        exp.EQ(this=exp.func("lower", exp.column("target_name", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())))


# ----------------------------------------------------------------------------- writing an entry

def record(backend: Backend, plan: Plan, database: str, read_source: TableName, summary, transformation: dict,
           given: list[str], source_fingerprint: tuple[int, int] | None = None,
           release: str | None = None) -> tuple[str | None, int | None]:
    """Write (or replace) the target's entry into `database`'s registry, inside the current
    transaction, with the source's fingerprint as the histogram's GROUP BY computed it (or read
    now). Returns (None, the source's rows), or (why it was not written, None): a table of that
    name that is not duckanon's is left untouched."""
    kind = registry_kind(backend, database)
    if kind is None:
        create_registry(backend, database)
    elif kind != "ours":
        return not_ours(database, kind), None
    table = registry_table(database)
    rows, checksum = source_fingerprint or fingerprint(backend, read_source, plan.published)
    target_catalog, target_schema, target_name = (part.name for part in plan.target.table.parts)
    _, source_schema, source_name = (part.name for part in plan.source.table.parts)
    target_database = None if target_catalog.lower() == database.lower() else target_catalog
    data = statement_data(plan, database, given)
    tables = hierarchy_tables(registry_backend(backend), plan)
    if tables:  # as the target is stored: None for this database, else its alias
        data["hierarchy_tables"] = {column: [None if catalog.lower() == database.lower() else catalog, schema, name]
                                    for column, (catalog, schema, name) in tables.items()}
    if release is not None:
        data["release"] = release  # the id written on the target's comment too (provenance.describe_target)
    if target_database is not None:  # which file the target's alias named: REFRESH never writes another one
        data["target_file"] = database_file(backend, target_database)
    summary_row = {name: value for name, value in summary.__dict__.items() if name not in ("details", "report")}
    summary_row["details"] = json.loads(summary.details)
    values = {
        "target_database": target_database, "target_schema": target_schema, "target_name": target_name,
        "source_schema": source_schema, "source_name": source_name,
        "statement": json.dumps(data, sort_keys=True),
        "statement_text": plan.statement.text.strip(),
        "parameters": json.dumps(release_parameters(plan.statement), default=str, sort_keys=True),
        "published_at": datetime.now(timezone.utc).replace(tzinfo=None), "duckanon_version": __version__,
        "duckdb_version": registry_backend(backend).engine_version(), "source_columns": list(plan.published),
        "source_rows": int(rows), "source_checksum": int(checksum), "summary": json.dumps(summary_row, default=str, sort_keys=True),
        "transformation": json.dumps(transformation, default=str, sort_keys=True),
    }
    values["entry_digest"] = digest({**values, "entry_digest": None})
    backend.execute(exp.delete(table.copy(), where=_same_target()), [target_database, target_schema, target_name])
    insert = exp.insert(exp.select(*[exp.cast(exp.Placeholder(), exp.DataType.build(kind, dialect="duckdb"))
                                     for kind in COLUMNS.values()]),
                        exp.Schema(this=table.copy(), expressions=[quoted_identifier(c) for c in COLUMNS]))
    backend.execute(insert, [values[c] for c in COLUMNS])
    return None, int(rows)


class Recording:
    """The registry's part in one release: where its entry goes (placement), the entry written in
    the release's transaction when the target is in the source's database, else right after the
    release commits (`after_commit`), or by the caller (`deferred`: REFRESH, which commits several
    releases at once). `note` says why no entry was written; `source_rows` is what was recorded."""

    def __init__(self, backend: Backend, plan: Plan, given: list[str] | None = None, deferred: bool = False):
        self.placement = placement(backend, plan) if backend.keeps_registry else Placement(None)
        self.note = self.placement.why_not if backend.keeps_registry else None
        self.given = given
        self.deferred = deferred
        self.key = None
        self.pending = None
        self.recorded = False
        self.source_rows = None
        self.release_id = uuid.uuid4().hex  # random, never derived from the source: on the target and in the entry

    @property
    def records(self) -> bool:
        return self.placement.database is not None

    def _given(self, plan: Plan) -> list[str]:
        if self.given is not None:
            return self.given
        try:
            return given_options(plan.statement.text)
        except AnonymizeError:  # no text to read (a statement built in Python)
            return options_set(plan.statement)

    def begin(self, backend: Backend, plan: Plan) -> None:
        if self.records and self.placement.with_release:
            self.key = begin_release(backend, self.placement.database,
                                     may_create=not backend.in_explicit_transaction())

    def in_release(self, backend: Backend, plan: Plan, read_source: TableName, summary, transformation: dict,
                   source_fingerprint) -> None:
        """Inside the release's transaction, before its commit."""
        if not self.records:
            return
        arguments = (plan, self.placement.database, read_source, summary, transformation, self._given(plan),
                     source_fingerprint, self.release_id)
        if self.placement.with_release:
            self._write(backend, arguments)
        else:
            # the source is read again after the commit only if the GROUP BY did not fingerprint it
            self.pending = arguments

    def _write(self, backend: Backend, arguments) -> None:
        note, rows = record(backend, *arguments)
        self.note, self.source_rows, self.recorded = note, rows, note is None

    def before_commit(self, backend: Backend) -> None:
        """An entry kept in another database than the release's: marked as having this release
        pending before the release commits (mark_pending), or the release is refused."""
        if self.pending is None:
            return
        plan = self.pending[0]
        target = tuple(part.name for part in plan.target.table.parts)
        try:
            mark_pending(backend, self.placement.database, target, self.release_id)
        except BackendError as error:
            verb = "REFRESH" if plan.statement.previous_release is not None else "ANONYMIZE"
            raise AnonymizeError(f"{verb} {shown_name(plan.target)}: its registry entry in database "
                                 f"{self.placement.database} cannot be written now ({str(error).splitlines()[0][:200]}): "
                                 f"nothing was written; run {verb} again") from None

    def after_commit(self, backend: Backend, own_transaction: bool) -> None:
        """The entry of a release committed in another database than its source's, in its own
        transaction (inside the caller's transaction it would write a second database, which
        DuckDB refuses); the release stands whatever happens here."""
        if self.pending is None or self.deferred:
            return
        if not own_transaction:
            self.note = ("not recorded: the target is in another database than the source, and the caller's "
                         "transaction may write one database only")
            return
        self.write_pending(backend)

    def write_pending(self, backend: Backend) -> None:
        _between_commits()
        try:
            backend.begin()
            self._write(backend, self.pending)
            backend.commit()
        except Exception as error:  # noqa: BLE001 - the release committed: never reported as failed
            try:
                backend.rollback()
            except Exception:  # noqa: BLE001
                pass
            self.note = f"not recorded in the source's database: {str(error).splitlines()[0][:200]}"
        self.pending = None

    def end(self, backend: Backend) -> None:
        if self.key is not None:
            end_release(backend, self.key)
            self.key = None


# ----------------------------------------------------------------------------- the listing macro

# Per session, what the listing's two macros last made on it where nothing can undo them (outside
# an explicit transaction, whose ROLLBACK would restore the ones before) were made of: (shape,
# verified digests). A statement after which either would be made of the same does not make it again.
_installed_listing: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# DuckDB binds a table macro's tables when it is made: made again when a registry vanished meanwhile
LISTING_ATTEMPTS = 3


def install_listing(handle, always: bool = False) -> None:
    """(Re)create the TEMP macro duckanon_publications(): every entry of every attached registry
    with `status` and `stale` from its source's current fingerprint. A source that is missing or
    lost a column when the macro is made is listed with that status. After a statement the macros
    are remade when what they list changed; `always`: remade in any case (connect, and a script
    that calls it, so that a macro dropped or replaced meanwhile comes back). The entries verified
    at the last listing are not verified again (read_registry's `remembered`)."""
    backend = registry_backend(handle)
    session = backend.session()
    made = None if always else _installed_listing.get(session)
    for attempt in range(LISTING_ATTEMPTS):
        kinds, read = [], []
        for database, kind in registries(backend):
            found = read_registry(backend, database, kind, remembered=True)
            if found is not None:  # else dropped since it was listed: not listed
                kinds.append((database, kind))
                read += found
        shape, verified = listing_inputs(backend, kinds, read)
        if made == (shape, verified):
            return
        undoable = backend.in_explicit_transaction()
        if made is None or made[1] != verified:
            backend.create_scalar_macro(VERIFIED, [VERIFIED_PARAMETER], verified_macro(verified))
        try:
            if made is None or made[0] != shape:
                backend.create_table_macro(LISTING, listing_select(backend, shape))
            break
        except UnknownTable:  # a registry read a moment ago was dropped before the macro was made
            made = None
            if attempt == LISTING_ATTEMPTS - 1:
                raise
    if undoable:
        _installed_listing.pop(session, None)
    else:
        _installed_listing[session] = (shape, verified)


def refresh_refused(target: TableName) -> AnonymizeError:
    return AnonymizeError(f"REFRESH {shown_name(target)}: it was not published by ANONYMIZE (no entry in "
                          f"{REGISTRY}; publish it first)")
