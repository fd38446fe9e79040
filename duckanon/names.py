"""Table names as sqlglot identifiers: a leaf every layer may use (the front end binds them,
the backends resolve them, the pipeline writes them), importing nothing of duckanon's."""

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


# duckanon's publication registry in every database it records in (pipeline/registry_entry.py):
# never a target, whoever made a table of that name
REGISTRY_TABLE = "duckanon_publications"
# and its privacy ledger (pipeline/ledger.py), likewise never a target: a release into it replaced
# the ledger and every spend it held (the ledger attack's B1)
LEDGER_TABLE = "duckanon_privacy_ledger"
