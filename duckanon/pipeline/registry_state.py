"""Reading the registries, and the state of an entry's source and target.

Every question to the catalog goes through the backend's KeepsRegistry methods; the entries are
read with a sqlglot SELECT of the exact columns. `registry_rows` keeps, per registry, the entries it
verified last, keyed by the whole row as read: the listing, remade after every statement, then
verifies only the rows that are new or changed since (a row equal in every column to one verified
before is that entry; any edit makes it another key, verified again).
"""

from __future__ import annotations

import json
import threading

from sqlglot import exp

from duckanon.backends import backend_for
from duckanon.backends.base import Backend, BackendError, KeepsRegistry
from duckanon.errors import AnonymizeError
from duckanon.names import TableName
from duckanon.pipeline.registry_entry import (COLUMNS, PREVIOUS_COLUMNS, REGISTRY, REGISTRY_COMMENT, Entry, entry_of,
                                              fingerprint_select, previous_entry, registry_table, shown)
from duckanon.pipeline.registry_statement import table_of


def registry_backend(handle) -> Backend:
    """The backend that keeps the registry: `handle` itself, or, for callers that still hold the
    DuckDB connection, the DuckDB backend on it (backends.backend_for)."""
    backend = backend_for(handle)
    if not isinstance(backend, KeepsRegistry):
        raise AnonymizeError(f"the publication registry needs engine DuckDB, not {backend.name}")
    return backend


# ----------------------------------------------------------------------------- which table is ours

def registry_kind(handle, catalog_name: str) -> str | None:
    """What `<catalog>.main.duckanon_publications` is: 'ours' (duckanon's comment and exact
    columns), 'previous' (the registry of an earlier duckanon: its exact columns, no comment),
    'foreign' (anything else of that name, a view too: never written, read or dropped), or None."""
    backend = registry_backend(handle)
    found = backend.find_object(catalog_name, "main", REGISTRY)
    if found is None:
        return None
    kind, comment = found
    if kind != "table":
        return "foreign"
    columns = backend.table_columns(catalog_name, "main", REGISTRY)
    if comment == REGISTRY_COMMENT and columns == list(COLUMNS.items()):
        return "ours"
    if not comment and columns == list(PREVIOUS_COLUMNS.items()):
        return "previous"
    return "foreign"


def not_ours(catalog_name: str, kind: str) -> str:
    where = shown(catalog_name, "main", REGISTRY)
    if kind == "previous":
        return (f"not recorded: {where} is the registry of an earlier duckanon (its entries cannot be refreshed; "
                "drop it to record new releases)")
    return f"not recorded: {where} is a table duckanon did not make (left untouched)"


def registries(handle) -> list[tuple[str, str]]:
    """(database, kind) of every attached database's registry table that duckanon may read:
    its own ('ours') and the previous format's ('previous'); a table of that name that is not
    duckanon's is never read."""
    backend = registry_backend(handle)
    found = []
    for database in backend.databases_holding("main", REGISTRY):
        kind = registry_kind(backend, database)
        if kind in ("ours", "previous"):
            found.append((database, kind))
    return found


# ----------------------------------------------------------------------------- the entries

# Per registry alias, the entries verified at its last reading, by the row as read (lists as tuples).
_verified: dict[str, dict[tuple, Entry]] = {}
_verified_lock = threading.Lock()


def _row_key(values) -> tuple:
    return tuple(tuple(value) if isinstance(value, list) else value for value in values)


def read_registry(handle, database: str, kind: str, remembered: bool = False) -> list[Entry] | None:
    """The entries of one registry, or None when it is gone: one listed a moment before can be,
    since a release on another cursor that created the registry and then failed drops it again
    while it is empty (unprepare). `remembered`: a row equal to one verified at the registry's
    last reading is that entry (the listing's case); else every row is verified."""
    backend = registry_backend(handle)
    columns = COLUMNS if kind == "ours" else PREVIOUS_COLUMNS
    query = exp.select(*[exp.column(c, quoted=True) for c in columns]).from_(registry_table(database))
    try:
        rows = backend.rows(query)
    except BackendError:  # dropped since it was listed (or unreadable): nothing of it is listed
        return None
    if kind != "ours":
        return [previous_entry(database, dict(zip(columns, values))) for values in rows]
    with _verified_lock:
        known = _verified.get(database, {}) if remembered else {}
    now = {}
    for values in rows:
        key = _row_key(values)
        now[key] = known.get(key) or now.get(key) or entry_of(database, dict(zip(columns, values)))
    if remembered:
        with _verified_lock:
            _verified[database] = now
    return [now[_row_key(values)] for values in rows]


def read_registries(handle, kinds=None) -> list[Entry]:
    """Every entry of every registry that still exists when read, each row verified now."""
    backend = registry_backend(handle)
    read = []
    for database, kind in (registries(backend) if kinds is None else kinds):
        read += read_registry(backend, database, kind) or []
    return read


def entries(handle) -> list[Entry]:
    """Every entry, each row verified as it is read now (REFRESH runs what it reads)."""
    return read_registries(handle)


# ----------------------------------------------------------------------------- the state of a source

def source_columns(handle, sources) -> dict[tuple, frozenset[str] | None]:
    """Per source (catalog, schema, name), its columns lowercased, or None where it cannot be
    read: one probe per distinct source, however many entries share it."""
    backend = registry_backend(handle)
    found = {}
    for source in dict.fromkeys(sources):
        try:
            found[source] = frozenset(name.lower() for name in backend.columns(TableName(table_of(*source))))
        except BackendError:
            found[source] = None
    return found


def column_problem(columns: frozenset[str] | None, recorded) -> str | None:
    if columns is None:
        return "source missing"
    lost = [c for c in recorded if c.lower() not in columns]
    return f"source lost column {lost[0]}" if lost else None


def source_problem(handle, entry: Entry) -> str | None:
    """Why the entry's source cannot be compared ('source missing', 'source lost column x'), or None."""
    return column_problem(source_columns(handle, [entry.source])[entry.source], entry.row["source_columns"])


def source_state(handle, entry: Entry) -> tuple[str, int | None]:
    """'current', 'stale', the entry's problem or its source's, and the source's current rows."""
    if entry.problem:
        return entry.problem, None
    problem = source_problem(handle, entry)
    if problem:
        return problem, None
    rows, checksum = registry_backend(handle).one(fingerprint_select(table_of(*entry.source), entry.row["source_columns"]))
    same = rows == entry.row["source_rows"] and int(checksum) == int(entry.row["source_checksum"])
    return ("current" if same else "stale"), int(rows)


# ----------------------------------------------------------------------------- the state of a target

# What the table at an entry's target is, against the release the entry recorded (its random id,
# written on the target's comment): REFRESH only ever replaces the release its entry recorded.
SUPERSEDED = "superseded"  # the target carries another release of duckanon: published again from elsewhere
REPLACED = "target replaced"  # the target carries no release id: a table or view duckanon did not publish
UNRECORDED = "unrecorded release"  # the target carries the release the entry was marked as pending
NOT_ATTACHED = "not attached"
OTHER_FILE = "another file"


def database_file(handle, alias: str) -> str | None:
    found = registry_backend(handle).database(alias)
    return found.path if found else None


def carried_release(comment) -> str | None:
    """The release id a published table's comment carries (provenance.describe_target), or None."""
    if not isinstance(comment, str) or not comment.startswith("duckanon {"):
        return None
    try:
        value = json.loads(comment[len("duckanon "):]).get("release")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def target_object(handle, catalog_name: str, schema: str, name: str) -> tuple[bool, str | None]:
    """Whether a table or view exists at the target, and the release id its comment carries."""
    found = registry_backend(handle).find_object(catalog_name, schema, name)
    return (True, carried_release(found[1])) if found else (False, None)


def target_state(handle, entry: Entry) -> str | None:
    """None when REFRESH may replace the entry's target (it carries the entry's release, or it is
    gone from the very database the entry recorded); UNRECORDED (may too: the release committed, its
    entry was not updated); else SUPERSEDED, REPLACED, NOT_ATTACHED or OTHER_FILE. An entry written
    before release ids is checked only for a comment of duckanon's: its release cannot be compared,
    but a table whose comment is not duckanon's (a user's, or an entry edited by hand to drop its
    release and name another table) is never replaced."""
    backend = registry_backend(handle)
    attached = backend.database(entry.target[0])
    if attached is None:
        return NOT_ATTACHED
    if entry.release is None:
        found = backend.find_object(*entry.target)
        return REPLACED if found and not str(found[1] or "").startswith("duckanon {") else None
    exists, carried = target_object(backend, *entry.target)
    if exists:
        if carried == entry.release:
            return None
        if carried is not None and carried == entry.pending_release:
            return UNRECORDED
        return SUPERSEDED if carried is not None else REPLACED
    if entry.target_database is not None and "target_file" in entry.statement and \
            attached.path != entry.statement["target_file"]:
        return OTHER_FILE
    return None


def target_refusal(state: str, entry: Entry) -> str:
    """Why REFRESH does not write the entry's target, in the words of a result row or a refusal."""
    catalog_name = entry.target[0]
    if state == NOT_ATTACHED:
        return f"its target's database {catalog_name} is not attached (ATTACH it AS {catalog_name})"
    if state == OTHER_FILE:
        return (f"its target's database {catalog_name} is another file than the one it was published into (attach "
                f"that file AS {catalog_name})")
    if state == SUPERSEDED:
        return (f"{entry.shown} no longer holds the release its entry in database {entry.registry} recorded (it was "
                "published again from elsewhere, or its comment was changed)")
    return (f"{entry.shown} no longer holds the release its entry in database {entry.registry} recorded (a table "
            "duckanon did not publish is there now)")
