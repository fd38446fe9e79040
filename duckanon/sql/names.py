"""Table names as the statements hold them: sqlglot identifiers, so quoting survives."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class TableName:
    """A possibly qualified table name, kept as sqlglot identifiers so quoting survives."""

    table: exp.Table

    @property
    def name(self) -> str:
        return self.table.name

    def sql(self) -> str:
        return self.table.sql(dialect="duckdb", identify=True)

    def key(self) -> tuple[str, ...]:
        return tuple(part.name.lower() for part in self.table.parts)


def shown_name(table: TableName) -> str:
    """A table name for messages: its parts quoted only where DuckDB needs quotes."""
    return exp.Table(**{arg: exp.to_identifier(part.name) for arg, part in
                        (("this", table.table.this), ("db", table.table.args.get("db")),
                         ("catalog", table.table.args.get("catalog"))) if part is not None}
                     ).sql(dialect="duckdb")
