"""Bind a statement to the catalog: resolve the tables and columns, check them, pick the models."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from sqlglot import exp

from duckanon import hierarchy
from duckanon.errors import AnonymizeError
from duckanon.sql.statement import AnonymizeStatement, TableName


@dataclass
class Plan:
    statement: AnonymizeStatement
    source: TableName
    target: TableName
    columns: list[str]  # every source column, in source order
    qi: list[str]
    sensitive: str | None
    keep: list[str]
    patterns: list[list[int]] | None  # QI indices that may be starred together
    # t_distance = hierarchical: the rows of the sa_hierarchy file, read through DuckDB (so its file
    # access rules apply) and checked; for duckanon.solver.emd.SAHierarchy.from_rows
    sa_hierarchy_rows: list[list[str]] | None = None

    @property
    def published(self) -> list[str]:
        """Published columns in source order; every other column is dropped (privacy by default)."""
        chosen = {c.lower() for c in self.qi + self.keep + ([self.sensitive] if self.sensitive else [])}
        return [c for c in self.columns if c.lower() in chosen]


def one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _table_columns(con: duckdb.DuckDBPyConnection, table: TableName) -> list[str]:
    try:
        relation = con.execute(f"SELECT * FROM {table.sql()} LIMIT 0")
    except duckdb.CatalogException:
        raise AnonymizeError(f"unknown table {table.sql()}") from None
    except duckdb.Error as error:
        raise AnonymizeError(f"cannot read table {table.sql()}: {one_line(error)}") from None
    return [d[0] for d in relation.description]


def _full_key(con, table: TableName) -> tuple[str, str, str]:
    """(catalog, schema, name), lower case, with the session defaults filled in (DuckDB is case-insensitive)."""
    database, schema = con.execute("SELECT current_database(), current_schema()").fetchone()
    parts = [p.name.lower() for p in table.table.parts]
    if len(parts) == 1:
        return (database.lower(), schema.lower(), parts[0])
    if len(parts) == 2:
        return (database.lower(), parts[0], parts[1])
    return tuple(parts[-3:])


def bind(con: duckdb.DuckDBPyConnection, statement: AnonymizeStatement) -> Plan:
    columns = _table_columns(con, statement.source)
    by_lower = {c.lower(): c for c in columns}

    def resolve(name: str, role: str) -> str:
        found = by_lower.get(name.lower())
        if found is None:
            raise AnonymizeError(
                f"unknown column '{name}' in {role} for table {statement.source.sql()} (columns: {', '.join(columns)})"
            )
        return found

    sensitive = resolve(statement.sensitive, "sensitive") if statement.sensitive else None
    keep = [resolve(c, "keep") for c in statement.keep]
    if statement.qi is not None:
        qi = [resolve(c, "qi") for c in statement.qi]
    else:
        excluded = {c.lower() for c in keep + ([sensitive] if sensitive else [])}
        qi = [c for c in columns if c.lower() not in excluded]
    for role, names in (("qi", qi), ("keep", keep)):
        lowered = [c.lower() for c in names]
        duplicates = sorted({c for c in lowered if lowered.count(c) > 1})
        if duplicates:
            raise AnonymizeError(f"column '{duplicates[0]}' is listed twice in {role}")
    if not qi:
        raise AnonymizeError("no quasi-identifier columns: name them with qi = (...)")
    qi_lower = {c.lower() for c in qi}
    if sensitive and sensitive.lower() in qi_lower:
        raise AnonymizeError(f"column '{sensitive}' cannot be both sensitive and a quasi-identifier")
    for c in keep:
        if c.lower() in qi_lower:
            raise AnonymizeError(f"column '{c}' cannot be both kept and a quasi-identifier")
        if sensitive and c.lower() == sensitive.lower():
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
    if _full_key(con, target) == _full_key(con, statement.source):
        raise AnonymizeError(f"the target {target.sql()} is the source table: choose another name with INTO")
    sa_hierarchy_rows = None
    if statement.t_distance == "hierarchical" and statement.sa_hierarchy is not None:
        sa_hierarchy_rows = hierarchy.read_sa_hierarchy(con, statement.sa_hierarchy)
    return Plan(statement, statement.source, target, columns, qi, sensitive, keep, patterns, sa_hierarchy_rows)
