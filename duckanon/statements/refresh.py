"""REFRESH <published> | REFRESH ALL [WITH (mode = 'fresh' | 'stable')]: re-run registered
ANONYMIZE statements against their sources' current rows.

A registered statement is rebuilt from its entry's structure (registry.rebuild: identifier parts
and typed option values, bound by ANONYMIZE's own binder), with the names resolved when it was
published, never re-parsed from text and never re-bound in the current session (USE, search_path).

DuckDB writes one database per transaction, so "all or none" holds per database written:
REFRESH ALL groups the stale publications by the database their release is written into and runs
one transaction per group, the groups in the order of their database names. A group's releases,
and the entries of those whose source is in the same database, commit together or not at all;
an entry kept in another database (the source's) is written right after its group commits, in a
transaction of its own. A failure stops before the next group, with a message that names what
committed and what was not refreshed. Inside the caller's transaction only what writes one
database is run (anything else is refused up front).

REFRESH only replaces the release its entry recorded (registry.target_state: the target carries
the entry's release id, or is gone from the file the entry recorded); REFRESH ALL skips superseded
entries and returns a row, nothing committed, for each stale one whose target or entry it cannot
write now (detached, read-only, another file).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

from duckanon.backends import Backend, BackendError, work
from duckanon.backends.base import KeepsRegistry, WriteConflict
from duckanon.errors import AnonymizeError, one_line
from duckanon.pipeline import registry
from duckanon.pipeline.plan import bind
from duckanon.pipeline.result import Table, release_risks
from duckanon.names import TableName, shown_name
from duckanon.sql.report_refresh import RefreshStatement
from duckanon.statements.anonymize import publish

COLUMNS = [("target", "VARCHAR"), ("mode", "VARCHAR"), ("mode_used", "VARCHAR"),
           ("source_rows_before", "BIGINT"), ("source_rows_after", "BIGINT"),
           ("published_rows_before", "BIGINT"), ("published_rows_after", "BIGINT"),
           ("classes_before", "BIGINT"), ("classes_after", "BIGINT"), ("stars_before", "BIGINT"),
           ("stars_after", "BIGINT"), ("highest_risk_before", "DOUBLE"), ("highest_risk_after", "DOUBLE"),
           ("average_risk_before", "DOUBLE"), ("average_risk_after", "DOUBLE"),
           ("committed_in", "VARCHAR"), ("entry", "VARCHAR"), ("seconds", "DOUBLE")]


def _stable_levels(entry: registry.Entry) -> tuple[tuple[int, ...] | None, str | None]:
    """The levels a stable refresh keeps, or why there are none."""
    levels, method = entry.transformation.get("levels"), entry.transformation.get("method") or ""
    if levels is not None and method.split(": ")[-1] == "lattice":
        return tuple(int(level) for level in levels), None
    return None, (f"fresh: stable recoding keeps a full-domain generalization's levels, and this release was "
                  f"made by {method or 'an unknown method'} (its groups are re-solved)")


class _Refreshed:
    """One refresh inside its group's transaction: its recording and what its result row needs."""

    def __init__(self, entry, mode, mode_used, recording, before, after, started):
        self.entry, self.mode, self.mode_used, self.recording = entry, mode, mode_used, recording
        self.before, self.after, self.started = before, after, started

    def row(self) -> tuple:
        before, after, entry = self.before, self.after, self.entry
        (highest_before, average_before), (highest_after, average_after) = release_risks(before), release_risks(after)
        updated = "updated" if self.recording.recorded else f"not updated: {self.recording.note}"
        source_rows = self.recording.source_rows if self.recording.recorded else after.get("rows")
        return (entry.target_name().sql(), self.mode, self.mode_used, entry.row["source_rows"],
                source_rows, before.get("published_rows"), after.get("published_rows"),
                before.get("classes"), after.get("classes"), before.get("stars"), after.get("stars"),
                highest_before, highest_after, average_before, average_after, entry.target[0], updated,
                round(time.perf_counter() - self.started, 6))


def refresh_one(backend: Backend, entry: registry.Entry, mode: str, listener=None) -> _Refreshed:
    """Re-publish one registered target inside the caller's work (its group's transaction)."""
    started = time.perf_counter()
    shown = entry.shown
    try:
        statement, given = registry.rebuild(entry.statement, entry.registry, registry.table_of(*entry.source),
                                            registry.table_of(*entry.target))
    except registry.Corrupt:  # checked when read: not expected
        raise AnonymizeError(f"REFRESH {shown}: its registry entry in database {entry.registry} is corrupt") from None
    _check_hierarchy_tables(backend, shown, entry)
    if statement.epsilon is not None and mode == "stable":
        raise AnonymizeError(f"REFRESH {shown} in stable mode is refused: a differentially private release is "
                             "refreshed with a fresh sample and a fresh budget only (mode = 'fresh' spends epsilon "
                             "again); nothing was changed")
    levels, reason = _stable_levels(entry) if mode == "stable" else (None, None)
    before = entry.summary
    statement = replace(statement, stable_levels=levels, previous_release={
        "summary": before, "source_rows": entry.row["source_rows"], "published_at": str(entry.row["published_at"])})
    plan = bind(backend, statement)
    recording = registry.Recording(backend, plan, given=given, deferred=True)
    if (recording.placement.database or "").lower() != entry.registry.lower():
        raise AnonymizeError(f"REFRESH {shown}: its registry entry cannot be updated "
                             f"({recording.note or 'the source is no longer in the database of its entry'}); "
                             "nothing was changed")
    summary = publish(backend, plan, started, listener, recording)
    after = json.loads(summary.to_json())
    mode_used = "fresh" if mode == "fresh" else (reason or after["details"].get("mode_used", "fresh"))
    return _Refreshed(entry, mode, mode_used, recording, before, after, started)


def _attached(backend: KeepsRegistry) -> dict[str, bool]:
    """The attached databases' aliases, lower case, and whether each is read-only."""
    return {database.name.lower(): database.readonly for database in backend.databases()}


def _detached_key(backend: KeepsRegistry, name: TableName) -> tuple[str, str, str] | None:
    """`a.t` or `a.s.t` whose database `a` is not attached: the key it names when `a` is attached
    (DuckDB would read `a.t` as a schema `a` of the default database meanwhile)."""
    parts = [part.name.lower() for part in name.table.parts]
    if len(parts) < 2:
        return None
    attached = _attached(backend)
    if parts[-3 if len(parts) == 3 else 0] in attached:
        return None
    return (parts[0], "main", parts[1]) if len(parts) == 2 else tuple(parts)


def _the_entry(backend: KeepsRegistry, name: TableName, known: list[registry.Entry]) -> registry.Entry:
    """The entry of the table REFRESH names, resolved as DuckDB resolves the name in a SELECT, then
    matched to the entries' stored targets. Of several entries naming it (several registries, a
    copied file attached beside the original), the one whose release the target carries; else the
    latest (whose refusal then says why)."""
    key = backend.named_object(name).key()
    valid = [e for e in known if not e.problem and e.target_key() == key]
    if not valid:
        detached = _detached_key(backend, name)
        if detached is not None:
            valid = [e for e in known if not e.problem and e.target_key() == detached]
            key = detached if valid else key
    if valid:
        holding = [e for e in valid if registry.target_state(backend, e) in (None, registry.UNRECORDED)]
        if len(holding) > 1:  # a copied file attached beside its original: both record the same release
            current = backend.session_defaults()[0].lower()
            holding = [e for e in holding if e.registry.lower() == current] or holding
            if len(holding) > 1:
                raise AnonymizeError(f"REFRESH {shown_name(name)}: the registries of databases "
                                     f"{', '.join(sorted(e.registry for e in holding))} all record its release (a "
                                     "copied file?): detach all but one, or refresh from a connection to one of them; "
                                     "nothing was changed")
        return max(holding or valid, key=lambda e: e.row["published_at"])
    broken = next((e for e in known if e.problem and e.guessed_key() == key), None)
    if broken is None:  # a corrupt row whose target fields were edited: known by the release the target carries
        exists, carried = registry.target_object(backend, *key)
        broken = next((e for e in known if e.problem == registry.CORRUPT and carried is not None
                       and e.lenient_release() == carried), None) if exists else None
    if broken is not None and broken.problem == registry.CORRUPT:
        raise AnonymizeError(f"REFRESH {shown_name(name)}: its registry entry in database {broken.registry} is corrupt "
                             "(it does not read back as duckanon's structure, so it is never run); publish it again "
                             "with ANONYMIZE")
    if broken is not None:
        raise AnonymizeError(f"REFRESH {shown_name(name)}: its registry entry in database {broken.registry} was "
                             "written by an earlier duckanon and cannot be refreshed; publish it again with ANONYMIZE")
    raise registry.refresh_refused(name)


def _check_source(backend: KeepsRegistry, shown: str, entry: registry.Entry) -> None:
    problem = registry.source_problem(backend, entry)
    source = entry.source_name().sql()
    if problem == "source missing":
        raise AnonymizeError(f"REFRESH {shown}: its source {source} no longer exists; nothing was changed")
    if problem:
        raise AnonymizeError(f"REFRESH {shown}: its source {source} {problem.removeprefix('source ')}; "
                             "nothing was changed")


def _hierarchy_problem(backend: KeepsRegistry, entry: registry.Entry) -> str | None:
    """Why a hierarchy table the release was made with (resolved at publish time) cannot be read
    now, or None: REFRESH never reads another table of the same name instead."""
    attached = _attached(backend)
    for column, parts in sorted(registry.hierarchy_parts(entry).items()):
        table = registry.shown(*parts)
        if parts[0].lower() not in attached:
            return f"its hierarchy table {table} of column {column} is in database {parts[0]}, which is not attached"
        if not registry.target_object(backend, *parts)[0]:
            return f"its hierarchy table {table} of column {column} no longer exists"
    return None


def _check_hierarchy_tables(backend: KeepsRegistry, shown: str, entry: registry.Entry) -> None:
    problem = _hierarchy_problem(backend, entry)
    if problem is not None:
        raise AnonymizeError(f"REFRESH {shown}: {problem}; nothing was changed")


def _check_target(backend: KeepsRegistry, shown: str, entry: registry.Entry) -> None:
    """The table at the target is the release the entry recorded (or gone from the database it
    recorded): REFRESH never replaces anything else."""
    state = registry.target_state(backend, entry)
    if state not in (None, registry.UNRECORDED):
        raise AnonymizeError(f"REFRESH {shown}: {registry.target_refusal(state, entry)}; nothing was changed")


def _unreachable(backend: KeepsRegistry, entry: registry.Entry) -> str | None:
    """Why REFRESH ALL cannot write the entry's target or its entry, or read its hierarchy tables,
    now; or None."""
    state = registry.target_state(backend, entry)
    if state in (registry.NOT_ATTACHED, registry.OTHER_FILE):
        return registry.target_refusal(state, entry)
    hierarchy_problem = _hierarchy_problem(backend, entry)
    if hierarchy_problem is not None:
        return hierarchy_problem
    readonly = _attached(backend)
    if readonly.get(entry.target[0].lower()):
        return f"its target's database {entry.target[0]} is read-only"
    if readonly.get(entry.registry.lower()):
        return f"its registry entry is in database {entry.registry}, which is read-only"
    return None


def _not_refreshed_row(entry: registry.Entry, mode: str, why: str, current_rows) -> tuple:
    """REFRESH ALL's row for a stale publication it could not reach: nothing committed."""
    before = entry.summary or {}
    highest, average = release_risks(before)
    return (entry.target_name().sql(), mode, None, entry.row["source_rows"], current_rows,
            before.get("published_rows"), None, before.get("classes"), None, before.get("stars"), None,
            highest, None, average, None, None, f"not refreshed: {why}", 0.0)


def _check_writable(backend: KeepsRegistry, shown: str, entry: registry.Entry) -> None:
    """The target's database and the entry's are attached and writable, before anything runs."""
    databases = _attached(backend)
    target = entry.target[0]
    if target.lower() not in databases:
        raise AnonymizeError(f"REFRESH {shown}: its target's database {target} is not attached (ATTACH it AS "
                             f"{target}); nothing was changed")
    if databases[target.lower()]:
        raise AnonymizeError(f"REFRESH {shown}: its target's database {target} is read-only; nothing was changed")
    if databases.get(entry.registry.lower()):
        raise AnonymizeError(f"REFRESH {shown}: its registry entry is in database {entry.registry}, which is "
                             "read-only; nothing was changed")


def _groups(chosen: list[registry.Entry]) -> list[tuple[str, list[registry.Entry]]]:
    """The entries by the database their release writes, in the order of the databases' names."""
    grouped: dict[str, list] = {}
    for entry in sorted(chosen, key=lambda e: e.target_key()):
        grouped.setdefault(entry.target[0].lower(), []).append(entry)
    return [(group[0].target[0], group) for _, group in sorted(grouped.items())]


class _Failed(Exception):
    """A group's failure, with the publication it failed at (None: at its commit)."""

    def __init__(self, entry, error):
        super().__init__(str(error))
        self.entry, self.error = entry, error


def _refresh_group(backend: Backend, group: list[registry.Entry], mode: str, listener) -> list[tuple]:
    """One transaction: the group's releases (and the entries kept in the same database); then
    each entry kept in another database, right after the commit."""
    with work(backend) as group_work:
        done = []
        for entry in group:
            try:
                done.append(refresh_one(backend, entry, mode, listener))
            except (AnonymizeError, BackendError) as error:
                raise _Failed(entry, error) from None
        try:
            group_work.commit()
        except BackendError as error:
            raise _Failed(None, error) from None
    for refreshed in done:
        if refreshed.recording.pending is not None:
            refreshed.recording.write_pending(backend)
    return [refreshed.row() for refreshed in done]


def _names(entries) -> str:
    return ", ".join(entry.shown for entry in entries) or "none"


def run_refresh(backend: Backend, statement: RefreshStatement, listener=None) -> Table:
    if not backend.keeps_registry:
        raise AnonymizeError("REFRESH needs engine DuckDB (the publication registry is a DuckDB table)")
    known = registry.entries(backend)
    unreachable = []  # REFRESH ALL: stale publications whose target or entry cannot be written now
    if statement.target is not None:
        shown = shown_name(statement.target)
        entry = _the_entry(backend, statement.target, known)
        _check_source(backend, shown, entry)
        if registry.target_state(backend, entry) != registry.NOT_ATTACHED:
            _check_target(backend, shown, entry)
        _check_writable(backend, shown, entry)
        chosen = [entry]
    else:  # every stale publication; those whose source cannot be read or whose target is no longer theirs stay
        chosen, shown = [], None
        for entry in known:
            if entry.problem:
                continue
            state = registry.target_state(backend, entry)
            if state in (registry.SUPERSEDED, registry.REPLACED):
                continue  # the target holds another release now: this entry is not stale, it is superseded
            source, current_rows = registry.source_state(backend, entry)
            if not (source == "stale" or (source == "current" and state == registry.UNRECORDED)):
                continue
            why = _unreachable(backend, entry)
            if why is None:
                chosen.append(entry)
            else:
                unreachable.append(_not_refreshed_row(entry, statement.mode, why, current_rows))
    if statement.target is None:  # one entry per target: several holding one release (a copied file) refresh it once
        current = backend.session_defaults()[0].lower()
        by_target: dict = {}
        for entry in sorted(chosen, key=lambda e: (e.registry.lower() != current, e.registry.lower())):
            by_target.setdefault(entry.target_key(), []).append(entry)
        chosen = []
        for first, *others in by_target.values():
            chosen.append(first)
            unreachable += [_not_refreshed_row(e, statement.mode, f"{first.shown} is refreshed from the entry in "
                                               f"database {first.registry}, which records the same release",
                                               registry.source_state(backend, e)[1]) for e in others]
    groups = _groups(chosen)
    if backend.in_explicit_transaction():
        crossing = next((e for e in chosen if e.target[0].lower() != e.registry.lower()), None)
        if crossing is not None:
            raise AnonymizeError(f"REFRESH {shown or 'ALL'}: {crossing.shown} is published into database "
                                 f"{crossing.target[0]} and registered in database {crossing.registry}, and DuckDB "
                                 "writes one database per transaction: run it outside BEGIN ... COMMIT")
        if len(groups) > 1:
            raise AnonymizeError(f"REFRESH ALL: the stale publications are in databases "
                                 f"{', '.join(database for database, _ in groups)}, and DuckDB writes one database "
                                 "per transaction: run it outside BEGIN ... COMMIT")
    rows, committed = [], []
    for position, (database, group) in enumerate(groups):
        try:
            rows += _refresh_group(backend, group, statement.mode, listener)
        except _Failed as failed:
            error = failed.error
            if isinstance(error, WriteConflict):  # at the group's commit: named as publish names its own conflicts
                named = next((e for e in group if (error.object_name or "").lower() == e.target[2].lower()), None)
                what = (f"the target {named.shown}" if named is not None else error.object_name
                        or "rows this REFRESH writes")
                error = AnonymizeError(f"another statement changed {what} at the same time: nothing was written; "
                                       "run REFRESH again")
            elif isinstance(error, BackendError):
                error = AnonymizeError(f"REFRESH failed: {error}")
            if statement.target is not None:
                message = one_line(error)
                raise AnonymizeError(message if message.startswith("REFRESH") or message.startswith("another")
                                     else f"REFRESH {shown}: {message}") from None
            at = f" at {failed.entry.shown}" if failed.entry is not None else " at its commit"
            left = [entry for _, later in groups[position:] for entry in later]
            raise AnonymizeError(f"REFRESH ALL stopped in database {database}{at}: {one_line(error)}; committed "
                                 f"before it: {_names(committed)}; not refreshed: {_names(left)}") from None
        committed += group
    return Table(COLUMNS, rows + unreachable)
