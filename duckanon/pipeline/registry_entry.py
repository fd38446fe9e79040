"""A registry entry: the table's columns, the digest that tells an entry duckanon wrote from one
edited since, the source's fingerprint, and a row read back as an Entry, or as `corrupt` when it
does not read back as duckanon's structure (whatever a row holds, it never breaks the listing and
is never run).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from sqlglot import exp

from duckanon.backends.base import Backend
from duckanon.names import REGISTRY_TABLE, TableName, shown_name
from duckanon.pipeline.histogram import FINGERPRINT_LANES, fingerprint_checksum, fingerprint_factor, fingerprint_product
from duckanon.pipeline.registry_statement import (Corrupt, checked_text, rebuild, stored_hierarchy_parts,
                                                  table_of)

REGISTRY = REGISTRY_TABLE
REGISTRY_COMMENT = 'duckanon registry {"format": 2}'
COLUMNS = {
    "target_database": "VARCHAR",  # NULL: this database (the registry's own); else the alias of another
    "target_schema": "VARCHAR", "target_name": "VARCHAR",
    "source_schema": "VARCHAR", "source_name": "VARCHAR",  # the source is always in this database
    "statement": "JSON",  # {"format": 2, "options": [[name, value], ...]}: the bound options as typed values
    "statement_text": "VARCHAR",  # the statement as written, for people: never parsed nor run
    "parameters": "JSON", "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "source_checksum": "HUGEINT",
    "summary": "JSON", "transformation": "JSON", "entry_digest": "VARCHAR",
}
# the registry of duckanon before format 2 (source and statement as SQL text): listed as outdated
PREVIOUS_COLUMNS = {
    "target": "VARCHAR", "source": "VARCHAR", "statement": "VARCHAR", "parameters": "JSON",
    "published_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "duckdb_version": "VARCHAR",
    "source_columns": "VARCHAR[]", "source_rows": "BIGINT", "source_checksum": "HUGEINT",
    "summary": "JSON", "transformation": "JSON",
}
JSON_COLUMNS = ("statement", "parameters", "summary", "transformation")
CORRUPT = "corrupt"
OUTDATED = "outdated: publish again"


def shown(catalog: str, schema: str, name: str) -> str:
    return shown_name(TableName(table_of(catalog, schema, name)))


def registry_table(catalog: str) -> exp.Table:
    return table_of(catalog, "main", REGISTRY)


# ----------------------------------------------------------------------------- the fingerprint

def fingerprint_select(source: exp.Table, columns) -> exp.Select:
    """SELECT (rows, checksum) of `source` over `columns`: per lane, the sum over the rows of the
    product of one factor per column, modulo a prime (histogram.fingerprint_factor); the order
    of the rows does not matter and every row counts. The histogram's GROUP BY computes the same
    number when it publishes (histogram.source_fingerprint)."""
    return exp.select(exp.alias_(exp.func("count", exp.Star()), "n"),
                      exp.alias_(exp.func("coalesce", _checksum_of(tuple(columns)), exp.Literal.number(0)), "checksum")
                      ).from_(source.copy())


@lru_cache(maxsize=256)
def _checksum_expression(columns: tuple[str, ...]) -> exp.Expr:
    lanes = [exp.func("sum", fingerprint_product([fingerprint_factor(exp.column(c, quoted=True), i, lane)
                                                  for i, c in enumerate(columns)]))
             for lane in FINGERPRINT_LANES]
    return fingerprint_checksum(lanes)


def _checksum_of(columns: tuple[str, ...]) -> exp.Expr:
    return _checksum_expression(columns).copy()


def fingerprint_sql(source, columns) -> str:
    """fingerprint_select as DuckDB SQL; `source` a TableName, an exp.Table, or (in tests and
    benchmarks) a table name as text, read as a table name only."""
    if isinstance(source, TableName):
        source = source.table
    elif isinstance(source, str):
        source = exp.to_table(source, dialect="duckdb")
    return fingerprint_select(source, columns).sql("duckdb")


def fingerprint(backend: Backend, source: TableName, columns: list[str]) -> tuple[int, int]:
    rows, checksum = backend.one(fingerprint_select(source.table, columns))
    return int(rows), int(checksum)


def hierarchy_parts(entry: Entry) -> dict[str, tuple[str, str, str]]:
    """The hierarchy tables an entry's release was made with, as table parts
    (registry_statement.stored_hierarchy_parts)."""
    return stored_hierarchy_parts(entry.statement, entry.registry)


# ----------------------------------------------------------------------------- entries, read as data

def digest(values: dict) -> str:
    """SHA-256 of an entry's fields (JSON fields as their parsed values): tells an entry duckanon
    wrote from one edited since. Not a secret: it detects edits, it does not stop a forger (no
    entry is ever run as SQL, so a forged one can at most name a table of this database)."""
    canonical = {}
    for name in COLUMNS:
        if name == "entry_digest":
            continue
        value = values[name]
        if name in JSON_COLUMNS and value is not None:
            value = loads(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        canonical[name] = value
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _refuse_constant(text):
    raise Corrupt(f"non-finite number {text}")


def loads(text):
    if not isinstance(text, str):
        raise Corrupt("JSON")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        raise Corrupt(f"JSON: {error}") from None


@dataclass
class Entry:
    """One registry row as read: the database holding it (`registry`, its alias now) and, unless
    `problem` says it is corrupt or outdated, its fields checked."""

    registry: str
    problem: str | None = None
    target: tuple[str, str, str] | None = None  # catalog (alias now), schema, name
    target_database: str | None = None  # as stored: None for this database
    source: tuple[str, str, str] | None = None
    row: dict = field(default_factory=dict)
    statement: dict | None = None
    summary: dict | None = None
    transformation: dict | None = None
    shown_target: str | None = None  # for a corrupt or outdated row, what can be shown of its target
    guessed: tuple[str, str, str] | None = None  # and the target it seems to name, to refuse REFRESH of it

    def target_key(self) -> tuple[str, str, str]:
        return tuple(part.lower() for part in self.target)

    def guessed_key(self) -> tuple[str, str, str] | None:
        return tuple(part.lower() for part in self.guessed) if self.guessed else None

    def target_name(self) -> TableName:
        return TableName(table_of(*self.target))

    def source_name(self) -> TableName:
        return TableName(table_of(*self.source))

    @property
    def shown(self) -> str:
        return shown(*self.target) if self.target else (self.shown_target or "?")

    @property
    def source_shown(self) -> str:
        return shown(*self.source)

    def _recorded(self, key: str):
        return self.statement.get(key) if isinstance(self.statement, dict) else None

    @property
    def release(self) -> str | None:
        """The random id of the release this entry describes (written on the target's comment too);
        None for an entry written before release ids."""
        return self._recorded("release")

    @property
    def pending_release(self) -> str | None:
        """The id of a release into another database that was about to commit when this entry was
        last written (the entry is updated in a second transaction, after the release's)."""
        return self._recorded("pending_release")

    def lenient_release(self) -> str | None:
        """A corrupt row's release id, if its statement still reads as JSON (only to name it in REFRESH's refusal)."""
        try:
            data = json.loads(self.row.get("statement") or "")
        except (TypeError, ValueError):
            return None
        value = data.get("release") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None


@lru_cache(maxsize=4096)
def _statement_checked(text: str, database: str, source: tuple, target: tuple) -> bool:
    """rebuild() accepts the entry's statement (raises Corrupt otherwise): checked once per
    statement and names (the listing reads every entry after every statement)."""
    rebuild(loads(text), database, table_of(*source), table_of(*target))
    return True


def entry_of(registry: str, row: dict) -> Entry:
    """The row as an Entry, or an Entry whose problem is `corrupt`."""
    try:
        target_database = row["target_database"]
        if target_database is not None:
            checked_text(target_database, "target_database")
        names = [checked_text(row[c], c) for c in ("target_schema", "target_name", "source_schema", "source_name")]
        for column in COLUMNS:
            if column != "target_database" and row[column] is None:
                raise Corrupt(column)
        if row["entry_digest"] != digest(row):
            raise Corrupt("entry_digest")
        statement, summary, transformation, parameters = (loads(row[c]) for c in
                                                          ("statement", "summary", "transformation", "parameters"))
        if not (isinstance(summary, dict) and isinstance(transformation, dict) and isinstance(parameters, dict)):
            raise Corrupt("summary")
        levels = transformation.get("levels")
        if not (transformation.get("method") is None or isinstance(transformation.get("method"), str)) or not (
                levels is None or (isinstance(levels, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                                                     for v in levels))):
            raise Corrupt("transformation")
        columns = row["source_columns"]
        if not (isinstance(columns, list) and columns and all(isinstance(c, str) and c for c in columns)):
            raise Corrupt("source_columns")
        if not isinstance(row["source_rows"], int) or row["source_rows"] < 0:
            raise Corrupt("source_rows")
        target = (target_database or registry, names[0], names[1])
        source = (registry, names[2], names[3])
        _statement_checked(row["statement"], registry, source, target)  # a statement ANONYMIZE's binder accepts
    except Exception:  # noqa: BLE001 - whatever a row holds, it is listed as corrupt, never breaks the listing
        parts = (row.get("target_database") or registry, row.get("target_schema"), row.get("target_name"))
        guessed = parts if all(isinstance(part, str) and part for part in parts) else None
        return Entry(registry, CORRUPT, shown_target=TableName(table_of(*guessed)).sql() if guessed else None,
                     guessed=guessed, row=row)
    return Entry(registry, None, target, target_database, source, row, statement, summary, transformation)


def previous_target_parts(text: str | None, database: str) -> tuple[str, str, str] | None:
    """A previous-format entry's target text read as a plain table name of 1 to 3 identifiers
    and nothing else (only to match REFRESH's name and refuse it; never run), or None."""
    if not text:
        return None
    try:
        table = exp.to_table(text, dialect="duckdb")
    except Exception:  # noqa: BLE001 - not a name
        return None
    parts = table.parts
    if not 1 <= len(parts) <= 3 or not all(isinstance(part, exp.Identifier) for part in parts) or \
            table.sql("duckdb", identify=True) != exp.Table(**{k: v for k, v in table.args.items()
                                                               if k in ("this", "db", "catalog")}).sql("duckdb", identify=True):
        return None
    names = [part.name for part in parts]
    return tuple([database, "main"][:3 - len(names)] + names)


def previous_entry(database: str, row: dict) -> Entry:
    """A row of the previous format's registry (its source and statement as SQL text): listed as
    outdated, never read further."""
    target = row["target"] if isinstance(row["target"], str) else None
    return Entry(database, OUTDATED, shown_target=target, guessed=previous_target_parts(target, database))
