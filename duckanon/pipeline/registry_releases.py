"""The registry table's life: created before a release that will write it (`prepare`, in a
transaction of its own), and dropped again while still empty when every release of this process
that counted on it failed (`begin_release`/`end_release`).
"""

from __future__ import annotations

import threading

from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.names import TableName
from duckanon.pipeline.registry_entry import COLUMNS, REGISTRY_COMMENT, registry_table
from duckanon.pipeline.registry_state import registry_backend, registry_kind
from duckanon.pipeline.registry_statement import quoted_identifier


def create_registry(backend: Backend, database: str) -> None:
    """The registry table, marked as duckanon's by its comment (and its exact columns)."""
    table = registry_table(database)
    backend.execute(exp.Create(this=exp.Schema(this=table, expressions=[
        exp.ColumnDef(this=quoted_identifier(name), kind=exp.DataType.build(kind, dialect="duckdb"))
        for name, kind in COLUMNS.items()]), kind="TABLE"))
    backend.set_comment(TableName(registry_table(database)), REGISTRY_COMMENT)


# Statements that create the registry at once (two cursors publishing) conflict on the catalog:
# the loser retries, and then finds it.
CREATE_ATTEMPTS = 5


def prepare(backend: Backend, database: str) -> bool:
    """The registry table, created before the release's transaction when there is none yet: in
    its own transaction, so publications running at once (two cursors, two threads) do not
    conflict on creating it inside theirs. True when this call created it (`unprepare` then drops
    it if the release fails: a refused statement leaves the database as it was)."""
    if registry_kind(backend, database) is not None:
        return False
    for _ in range(CREATE_ATTEMPTS):
        try:
            backend.begin()
            create_registry(backend, database)
            backend.commit()
            return True
        except Exception:  # noqa: BLE001 - another release created it meanwhile
            try:
                backend.rollback()
            except Exception:  # noqa: BLE001
                pass
            if registry_kind(backend, database) is not None:
                return False
    return False  # record() creates it in the release's transaction, or says why not


def unprepare(backend: Backend, database: str) -> None:
    """Drop the registry `prepare` created when it is still empty (the release failed)."""
    table = registry_table(database)
    try:
        if registry_kind(backend, database) == "ours" and backend.one(
                exp.select(exp.func("count", exp.Star())).from_(table))[0] == 0:
            backend.execute(exp.Drop(tables=[table], kind="TABLE", exists=True))
    except Exception:  # noqa: BLE001
        pass


# Releases of this process that write into a registry, per registry: [how many are running,
# whether one of them created it]. A failed release that created the registry used to drop it at
# once, under a release of another thread that was writing its entry into it or listing it: that
# one then failed too (all eight threads of a test failed a round), or raised after its commit.
# Now the last release out drops it, when it is still empty (every release of the group failed).
# One DuckDB writer process holds a database file, so the releases that can race are this
# process's; in-memory databases are told apart by name only, so two of them both named `memory`
# share the count, and the last release out of both does the drop.
_RELEASES: dict[tuple, list] = {}
_RELEASES_LOCK = threading.Lock()


def begin_release(backend: Backend, database: str, may_create: bool) -> tuple:
    """Count a release that will write the registry's entry; create the registry first
    (`prepare`) when `may_create`. Returns what `end_release` takes."""
    attached = registry_backend(backend).database(database)
    key = (database, attached.path if attached else None)
    with _RELEASES_LOCK:
        _RELEASES.setdefault(key, [0, False])[0] += 1
    try:
        created = may_create and prepare(backend, database)
    except BaseException:
        end_release(backend, key)
        raise
    if created:
        with _RELEASES_LOCK:
            _RELEASES[key][1] = True
    return key


def end_release(backend: Backend, key: tuple) -> None:
    """The release is over, committed or not. The last release of its group drops the registry a
    release of the group created while it is empty; under the lock, so that no release begins
    between the count and the drop."""
    with _RELEASES_LOCK:
        entry = _RELEASES[key]
        entry[0] -= 1
        if entry[0] > 0:
            return
        del _RELEASES[key]
        if entry[1]:
            unprepare(backend, key[0])
