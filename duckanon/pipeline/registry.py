"""The publication registry: what each ANONYMIZE published, from what, and whether it is current.

A table `duckanon_publications` in the source's database (in the target's when the source's is
read-only) holds one row per published target: its source, the ANONYMIZE text, the release's
parameters and result, when, the duckanon and DuckDB versions, the published transformation
(the lattice's levels, for REFRESH's stable mode) and a fingerprint of the source at publish
time: its row count and an order-independent checksum of the columns the statement reads (a
change to a column the statement does not read changes nothing published): fingerprint_sql. It
is written in the publishing transaction, so a release and its entry commit together. The published table's own comment still never names the source.

`duckanon_publications()` is a TEMP table macro, generated per connection from the registries of
every attached database (install_listing): each entry with the source's current fingerprint and
`status` current, stale (the fingerprint differs), or source missing.
"""

from __future__ import annotations

import json
import threading
import weakref
from datetime import datetime, timezone
from functools import lru_cache

import duckdb
from sqlglot import exp

from duckanon._version import __version__
from duckanon.backends.base import Backend
from duckanon.backends.duckdb import in_explicit_transaction
from duckanon.errors import AnonymizeError
from duckanon.pipeline.histogram import (
    FINGERPRINT_LANES, duckdb_sql, fingerprint_checksum, fingerprint_factor, fingerprint_product, quoted,
)
from duckanon.pipeline.plan import Plan
from duckanon.pipeline.provenance import release_parameters
from duckanon.sql.statement import TableName, shown_name

REGISTRY = "duckanon_publications"
COLUMNS = {
    "target": "VARCHAR", "source": "VARCHAR", "statement": "VARCHAR", "parameters": "JSON",
    "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "source_checksum": "HUGEINT",
    "summary": "JSON", "transformation": "JSON",
}


def fingerprint_sql(source: str, columns: list[str]) -> str:
    """SELECT (rows, checksum) of `source` (SQL) over `columns`: per lane, the sum over the rows of
    the product of one factor per column, modulo a prime (histogram.fingerprint_factor); the order
    of the rows does not matter and every row counts. The histogram's GROUP BY computes the same
    number when it publishes (histogram.source_fingerprint)."""
    return f"SELECT count(*) AS n, coalesce({_checksum_of(tuple(columns))}, 0) AS checksum FROM {source}"


@lru_cache(maxsize=256)
def _checksum_of(columns: tuple[str, ...]) -> str:
    """The checksum's SQL over `columns`: built and rendered once per column list (the registry's
    listing writes it for every entry each time it is remade)."""
    lanes = [exp.func("sum", fingerprint_product([fingerprint_factor(exp.column(c, quoted=True), i, lane)
                                                  for i, c in enumerate(columns)]))
             for lane in FINGERPRINT_LANES]
    return fingerprint_checksum(lanes).sql("duckdb")


def fingerprint(backend: Backend, source: TableName, columns: list[str]) -> tuple[int, int]:
    rows, checksum = backend.one(duckdb_sql(fingerprint_sql(source.sql(), columns)))
    return int(rows), int(checksum)


def registry_of(plan: Plan) -> TableName:
    """Where the entry goes: `duckanon_publications` in the source's database."""
    catalog = plan.source.table.catalog
    return TableName(exp.Table(this=exp.to_identifier(REGISTRY, quoted=True), db=exp.to_identifier("main", quoted=True),
                               catalog=exp.to_identifier(catalog, quoted=True) if catalog else None))


def with_the_release(plan: Plan) -> bool:
    """Whether the entry can commit in the release's transaction: DuckDB writes one database per
    transaction, so only when the target is in the source's database (else it is written right
    after the release commits, in a transaction of its own: `record_after`)."""
    return (plan.source.table.catalog or "").lower() == (plan.target.table.catalog or "").lower()


def record_after(backend: Backend, plan: Plan, read_source: TableName, summary, transformation: dict,
                 source_fingerprint: tuple[int, int] | None = None) -> str | None:
    """The entry of a release committed in another database than its source's, in its own
    transaction; None, or why it could not be written (the release stands: never reported as
    failed after its commit)."""
    try:
        backend.begin()
        record(backend, plan, read_source, summary, transformation, source_fingerprint)
        backend.commit()
        return None
    except Exception as error:  # a read-only source database, a vanished temp source, ...
        try:
            backend.rollback()
        except Exception:
            pass
        return f"not recorded in the source's database: {str(error).splitlines()[0][:200]}"


def _create(registry: TableName) -> exp.Expr:
    return duckdb_sql(f"CREATE TABLE IF NOT EXISTS {registry.sql()} ("
                + ", ".join(f"{quoted(name)} {kind}" for name, kind in COLUMNS.items()) + ")")


# Statements that create the registry at once (two cursors publishing) conflict on the catalog:
# the loser retries, and then finds it.
CREATE_ATTEMPTS = 5


def prepare(backend: Backend, plan: Plan) -> bool:
    """The registry table, created before the release's transaction when there is none yet: in
    its own statement, so publications running at once (two cursors, two threads) do not conflict
    on creating it inside theirs. True when this call created it (`unprepare` then drops it if the
    release fails: a refused statement leaves the database as it was)."""
    registry = registry_of(plan)
    if _exists(backend, registry):
        return False
    for _ in range(CREATE_ATTEMPTS):
        try:
            backend.execute(_create(registry))
            return True
        except Exception:
            if _exists(backend, registry):
                return False
    return False  # record() creates it in the release's transaction, or says why not


def unprepare(backend: Backend, plan: Plan) -> None:
    """Drop the registry `prepare` created when it is still empty (the release failed)."""
    registry = registry_of(plan)
    try:
        if _exists(backend, registry) and backend.one(duckdb_sql(f"SELECT count(*) FROM {registry.sql()}"))[0] == 0:
            backend.execute(duckdb_sql(f"DROP TABLE IF EXISTS {registry.sql()}"))
    except Exception:
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


def begin_release(backend: Backend, plan: Plan, may_create: bool) -> tuple:
    """Count a release that will write the registry's entry; create the registry first
    (`prepare`) when `may_create`. Returns what `end_release` takes."""
    key = _registry_key(backend, plan)
    with _RELEASES_LOCK:
        _RELEASES.setdefault(key, [0, False])[0] += 1
    try:
        created = may_create and prepare(backend, plan)
    except BaseException:
        end_release(backend, plan, key)
        raise
    if created:
        with _RELEASES_LOCK:
            _RELEASES[key][1] = True
    return key


def end_release(backend: Backend, plan: Plan, key: tuple) -> None:
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
            unprepare(backend, plan)


def _registry_key(backend: Backend, plan: Plan) -> tuple:
    registry = registry_of(plan)
    catalog = registry.table.catalog or backend.one(duckdb_sql("SELECT current_database()"))[0]
    path = backend.one(duckdb_sql(f"SELECT max(path) FROM duckdb_databases() WHERE database_name = "
                                  f"{exp.Literal.string(catalog).sql('duckdb')}"))[0]
    return catalog, path, registry.sql()


def _exists(backend: Backend, registry: TableName) -> bool:
    catalog = registry.table.catalog
    where = f" AND database_name = {exp.Literal.string(catalog).sql('duckdb')}" if catalog else \
        " AND database_name = current_database()"
    return bool(backend.one(duckdb_sql(f"SELECT count(*) FROM duckdb_tables() WHERE table_name = '{REGISTRY}' "
                                 f"AND schema_name = 'main' AND NOT temporary{where}"))[0])


def record(backend: Backend, plan: Plan, read_source: TableName, summary, transformation: dict,
           source_fingerprint: tuple[int, int] | None = None) -> None:
    """Write (or replace) the target's entry, inside the publishing transaction, with the source's
    fingerprint as the histogram's GROUP BY computed it, or else read now."""
    registry = registry_of(plan)
    backend.execute(_create(registry))
    rows, checksum = source_fingerprint or fingerprint(backend, read_source, plan.published)
    target = plan.target.sql()
    backend.execute(duckdb_sql(f"DELETE FROM {registry.sql()} WHERE target = ?"), [target])
    summary_row = {name: value for name, value in summary.__dict__.items() if name not in ("details", "report")}
    summary_row["details"] = json.loads(summary.details)
    values = {
        "target": target, "source": plan.source.sql(), "statement": plan.statement.text.strip(),
        "parameters": json.dumps(release_parameters(plan.statement), default=str, sort_keys=True),
        "published_at": datetime.now(timezone.utc).replace(tzinfo=None), "duckanon_version": __version__,
        "duckdb_version": duckdb.__version__, "source_columns": list(plan.published), "source_rows": rows,
        "source_checksum": checksum, "summary": json.dumps(summary_row, default=str, sort_keys=True),
        "transformation": json.dumps(transformation, default=str, sort_keys=True),
    }
    placeholders = ", ".join(f"CAST(? AS {kind})" for kind in COLUMNS.values())
    backend.execute(duckdb_sql(f"INSERT INTO {registry.sql()} SELECT {placeholders}"), [values[c] for c in COLUMNS])


def registries(con) -> list[str]:
    """Every registry table of the attached databases, as SQL."""
    rows = con.execute("SELECT database_name, schema_name FROM duckdb_tables() WHERE table_name = ? "
                       "AND NOT temporary ORDER BY ALL", [REGISTRY]).fetchall()
    return [f"{quoted(catalog)}.{quoted(schema)}.{quoted(REGISTRY)}" for catalog, schema in rows]


def _read_registries(con) -> dict[str, list[dict]]:
    """Each registry table that still exists when read, with its entries as dicts of its columns.
    One listed a moment before can be gone: a release on another cursor that created the registry
    and then failed drops it again while it is empty (unprepare)."""
    read = {}
    for table in registries(con):
        try:
            cursor = con.execute(f"SELECT * FROM {table}")
        except duckdb.CatalogException:
            continue
        names = [d[0] for d in cursor.description]
        read[table] = [dict(zip(names, row)) for row in cursor.fetchall()]
    return read


def entries(con) -> list[dict]:
    """Every registered publication, as dicts of the registry's columns."""
    return [row for rows in _read_registries(con).values() for row in rows]


def entry(con, target: TableName) -> dict | None:
    key = target.sql()
    return next((row for row in entries(con) if row["target"] == key), None)


def source_problem(con, row: dict) -> str | None:
    """Why the entry's source cannot be compared ('source missing', 'source lost column x'), or None."""
    return _problem(_source_columns(con, [row["source"]])[row["source"]], row["source_columns"])


def _problem(columns: frozenset[str] | None, recorded) -> str | None:
    """source_problem, given the source's columns as _source_columns read them."""
    if columns is None:
        return "source missing"
    lost = [c for c in recorded if c.lower() not in columns]
    return f"source lost column {lost[0]}" if lost else None


def _source_columns(con, sources) -> dict[str, frozenset[str] | None]:
    """Per source (SQL), its columns lowercased, or None where it cannot be read: one probe per
    distinct source, however many entries share it."""
    found = {}
    for source in dict.fromkeys(sources):
        try:
            found[source] = frozenset(d[0].lower() for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description)
        except duckdb.Error:
            found[source] = None
    return found


def source_state(con, row: dict) -> tuple[str, int | None]:
    """'current', 'stale', or source_problem's reason, and the source's current rows."""
    problem = source_problem(con, row)
    if problem:
        return problem, None
    rows, checksum = con.execute(fingerprint_sql(row["source"], row["source_columns"])).fetchone()
    same = rows == row["source_rows"] and int(checksum) == int(row["source_checksum"])
    return ("current" if same else "stale"), int(rows)


# Per connection, the listing macro last created on it where nothing can undo it (outside an
# explicit transaction, whose ROLLBACK would restore the one before): a statement whose listing
# would be the same does not create it again (each creation took about 1 ms per registered
# release, on every statement).
_installed_listing: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def install_listing(con, always: bool = False) -> None:
    """(Re)create the TEMP macro duckanon_publications(): every entry of every attached registry
    with `status` and `stale` from its source's current fingerprint. A source that is missing or
    lost a column when the macro is made is listed with that status. After a statement the macro
    is remade when its sources, their column lists or those statuses changed (it reads the entries
    themselves when called); `always`: remade in any case (connect, and a script that calls it, so
    that a macro dropped or replaced meanwhile comes back)."""
    text = _listing_sql(con, _read_registries(con))
    if not always and _installed_listing.get(con) == text:
        return
    undoable = in_explicit_transaction(con)
    con.execute(text)
    if undoable:
        _installed_listing.pop(con, None)
    else:
        _installed_listing[con] = text


def _listing_sql(con, read: dict[str, list[dict]]) -> str:
    """The CREATE MACRO statement of duckanon_publications() for the registries `read`."""
    tables = list(read)
    listed = ", ".join(f"r.{quoted(c)}" for c in COLUMNS if c not in ("source_checksum",))
    if not tables:
        empty = ", ".join(f"CAST(NULL AS {kind}) AS {quoted(name)}" for name, kind in COLUMNS.items()
                          if name != "source_checksum")
        return (f"CREATE OR REPLACE TEMP MACRO duckanon_publications() AS TABLE SELECT {empty}, "
                "CAST(NULL AS BIGINT) AS current_rows, CAST(NULL AS VARCHAR) AS status, "
                "CAST(NULL AS BOOLEAN) AS stale WHERE false")
    union = " UNION ALL ".join(f"SELECT * FROM {table}" for table in tables)
    # one check per source and column list, however many entries share it; sorted: a stable text
    # (an entry without a source or a column list, which only a hand-made row can be, is listed as
    # 'source missing' by the macro itself)
    sources = sorted({(row["source"], tuple(row["source_columns"])) for rows in read.values() for row in rows
                      if row["source"] is not None and row["source_columns"] is not None})
    columns_of = _source_columns(con, [source for source, _ in sources])
    checks = []
    for source, columns in sources:
        state = _problem(columns_of[source], columns)
        key = (f"{exp.Literal.string(source).sql('duckdb')} AS source, "
               f"CAST([{', '.join(exp.Literal.string(c).sql('duckdb') for c in columns)}] AS VARCHAR[]) AS source_columns")
        if state is None:
            checks.append(f"SELECT {key}, f.n AS current_rows, f.checksum AS current_checksum, "
                          "CAST(NULL AS VARCHAR) AS problem "
                          f"FROM ({fingerprint_sql(source, list(columns))}) AS f")
        else:
            checks.append(f"SELECT {key}, CAST(NULL AS BIGINT) AS current_rows, "
                          f"CAST(NULL AS HUGEINT) AS current_checksum, {exp.Literal.string(state).sql('duckdb')} AS problem")
    now = " UNION ALL ".join(checks) or ("SELECT CAST(NULL AS VARCHAR) AS source, CAST(NULL AS VARCHAR[]) AS source_columns, "
                                         "CAST(NULL AS BIGINT) AS current_rows, CAST(NULL AS HUGEINT) AS current_checksum, "
                                         "CAST(NULL AS VARCHAR) AS problem WHERE false")
    problem = "CASE WHEN r.source IS NULL OR r.source_columns IS NULL THEN 'source missing' ELSE c.problem END"
    same = "c.current_rows = r.source_rows AND c.current_checksum = r.source_checksum"
    return (
        f"CREATE OR REPLACE TEMP MACRO duckanon_publications() AS TABLE "
        f"SELECT {listed}, c.current_rows, "
        f"CASE WHEN {problem} IS NOT NULL THEN {problem} WHEN {same} THEN 'current' ELSE 'stale' END AS status, "
        f"{problem} IS NULL AND NOT ({same}) AS stale "
        f"FROM ({union}) AS r LEFT JOIN ({now}) AS c ON c.source = r.source AND c.source_columns = r.source_columns "
        f"ORDER BY r.target")


def refresh_refused(target: TableName) -> AnonymizeError:
    return AnonymizeError(f"REFRESH {shown_name(target)}: it was not published by ANONYMIZE (no entry in "
                          f"{REGISTRY}; publish it first)")
