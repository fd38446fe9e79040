"""ANONYMIZE on Apache Spark from Python: the same pipeline on the Spark backend
(`duckanon.backends.spark`, which says how the SQL is transpiled and what runs where).

    from duckanon.spark import anonymize, execute
    execute(spark, "ANONYMIZE patients WITH (k = 3, qi = (zipcode, age), sensitive = disease)")
    anonymize(spark, "patients", k=3, qi=["zipcode", "age"], sensitive="disease")

From the duckanon shell or a duckanon connection, `engine = 'spark'` runs the statement on the
active SparkSession (or a new one, `spark_master = 'local[2]'` by default), reading the source
from Spark's catalog; the result row comes back to DuckDB as usual.

Spark has no multi-statement transactions. Temp views are dropped on any error. The target is
written by one CTAS after the solve (an existing target of that name is dropped just before it):
a failure up to the CTAS leaves the previous target as it was; a failed CTAS leaves no target; a
failure after it (the published-row check, the comment) leaves the new target and reports the
error. A folder a killed write left at the target's location (no table of that name in the
catalog) is replaced; one that holds another table's files is refused before anything runs.
"""

from __future__ import annotations

from sqlglot import exp

from duckanon.backends.spark import SparkBackend, session
from duckanon.errors import AnonymizeError
from duckanon.statements import run_statement

__all__ = ["SparkBackend", "anonymize", "execute", "session"]


def execute(spark, text: str, progress=None):
    """Run one ANONYMIZE (or EXPLAIN ANONYMIZE) on Spark; returns its Summary (or Table)."""
    return run_statement(SparkBackend(spark), text, progress)


def anonymize(spark, table: str, into: str | None = None, **options):
    """ANONYMIZE `table` (a name in Spark's catalog) on `spark`, options as keywords:

        anonymize(spark, "patients", k=3, qi=["zipcode", "age"], sensitive="disease", method="tp+")

    Lists become tuples of names, strings are quoted, numbers written as they are; returns the
    Summary. The statement text is built from sqlglot expressions, so names are quoted properly.
    """
    def value(item) -> exp.Expr:
        if isinstance(item, (list, tuple)):
            return exp.Tuple(expressions=[exp.to_identifier(str(v), quoted=True) for v in item])
        if isinstance(item, bool) or item is None:
            raise AnonymizeError(f"anonymize(): option values must be numbers, strings or lists, got {item!r}")
        if isinstance(item, (int, float)):
            return exp.Literal.number(item)
        return exp.Literal.string(str(item))

    options.pop("engine", None)
    written = ", ".join(f"{name} = {value(v).sql(dialect='duckdb')}" for name, v in options.items())
    head = exp.to_table(table, dialect="duckdb").sql(dialect="duckdb")
    target = f" INTO {exp.to_table(into, dialect='duckdb').sql(dialect='duckdb')}" if into else ""
    return execute(spark, f"ANONYMIZE {head}{target} WITH ({written})")
