"""The Spark backend: the pipeline's connection interface on a SparkSession.

The pipeline builds all its SQL as sqlglot expressions and runs it through a small connection
interface (`execute`, `register`, `unregister`, fetch methods). `SparkConnection` implements
that interface on a SparkSession: every statement is transpiled with sqlglot (duckdb -> spark)
and run with `spark.sql`; temp tables become cached temp views; the small mapping table goes to
Spark as a DataFrame (broadcast-joined by Spark); the target is written with CREATE TABLE AS
(a managed Parquet table). The class histogram is computed by Spark's GROUP BY and only it
comes back to the driver; the solver is unchanged.

Spark has no multi-statement transactions: the target is created by one CTAS after everything
else succeeded, and temp views are dropped on any error, so a failure leaves no target.

This module sits below the engine (the engine loads it by name from `duckanon.backends`); the
Python API that runs statements on Spark is `duckanon.spark`, above the engine.
"""


from __future__ import annotations

import duckdb
import sqlglot
from sqlglot import exp

from duckanon.errors import AnonymizeError, one_line


class _Result:
    def __init__(self, frame=None, rows=None, columns=None):
        self.frame = frame
        self._rows = rows
        self.description = [(name, None) for name in (columns or (frame.columns if frame is not None else []))]

    def _all(self):
        if self._rows is None:
            self._rows = [tuple(r) for r in self.frame.collect()] if self.frame is not None else []
        return self._rows

    def fetchall(self):
        return self._all()

    def fetchone(self):
        rows = self._all()
        return rows[0] if rows else None

    def to_arrow_table(self):
        """The (small: cells, never rows) result as Arrow, collected on the driver without pandas."""
        import pyarrow as pa

        rows = self._all()
        names = [name for name, _ in self.description]
        return pa.table({name: [row[i] for row in rows] for i, name in enumerate(names)})


class SparkConnection:
    """The subset of a DuckDB connection the pipeline uses, on a SparkSession."""

    def __init__(self, spark):
        self.spark = spark
        self.temp_views: set[str] = set()
        self.registered: set[str] = set()

    def _error(self, error: Exception) -> duckdb.Error:
        message = one_line(error)
        if "TABLE_OR_VIEW_NOT_FOUND" in message or "Table or view not found" in message:
            return duckdb.CatalogException(message)
        return duckdb.Error(f"Spark: {message}")

    def execute(self, sql: str, parameters=None):
        if parameters:
            raise duckdb.Error("Spark: parameters are not supported")
        upper = sql.strip().upper()
        if upper in ("BEGIN TRANSACTION", "COMMIT", "ROLLBACK"):
            if upper != "BEGIN TRANSACTION":
                self._finish()
            return _Result(rows=[], columns=[])
        try:
            statements = sqlglot.parse(sql, read="duckdb")
        except sqlglot.errors.ParseError as error:
            raise duckdb.ParserException(str(error)) from None
        result = _Result(rows=[], columns=[])
        for statement in statements:
            for spark_sql in self._translate(statement):
                try:
                    frame = self.spark.sql(spark_sql)
                except Exception as error:  # pyspark's AnalysisException, ParseException, ...
                    raise self._error(error) from None
                result = _Result(frame=frame)
        return result

    def _translate(self, statement: exp.Expr) -> list[str]:
        """DuckDB statement -> Spark SQL statements (temp tables become cached temp views)."""
        if isinstance(statement, exp.Create) and statement.kind == "TABLE":
            name = statement.this.name
            query = statement.expression
            properties = statement.args.get("properties")
            temporary = properties is not None and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
            body = query.sql(dialect="spark")
            if temporary:
                self.temp_views.add(name)
                return [f"CACHE TABLE `{name}` AS {body}"]
            target = statement.this.sql(dialect="spark")
            return [f"DROP TABLE IF EXISTS {target}", f"CREATE TABLE {target} USING parquet AS {body}"]
        if isinstance(statement, exp.Drop) and statement.this is not None and statement.this.name in self.temp_views:
            name = statement.this.name
            self.temp_views.discard(name)
            return [f"UNCACHE TABLE IF EXISTS `{name}`", f"DROP VIEW IF EXISTS `{name}`"]
        return [statement.sql(dialect="spark")]

    def register(self, name: str, table) -> None:
        """The small mapping table to Spark (Spark broadcasts it in the join-back)."""
        import pyarrow as pa
        from pyspark.sql import types as T

        spark_type = {pa.int64(): T.LongType(), pa.bool_(): T.BooleanType(), pa.string(): T.StringType(),
                      pa.int32(): T.IntegerType(), pa.float64(): T.DoubleType()}
        schema = T.StructType([T.StructField(f.name, spark_type[f.type], True) for f in table.schema])
        rows = list(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)])) if table.num_rows else []
        self.spark.createDataFrame(rows, schema).createOrReplaceTempView(name)

    def unregister(self, name: str) -> None:
        # Spark's cached temp views still refer to it by name: drop it at the end of the statement
        self.registered.add(name)

    def _finish(self) -> None:
        for name in self.registered:
            self.spark.catalog.dropTempView(name)
        self.registered.clear()

    def cursor(self):
        return self

    def in_transaction(self) -> bool:
        """Spark has no transactions; BEGIN/COMMIT/ROLLBACK above only mark the statement's
        start and end (the end drops the temp views)."""
        return False


def session(master: str | None = None):
    """The active SparkSession, or a new one on `master` (default SPARK_MASTER or local[2])."""
    import os

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise AnonymizeError("engine = 'spark' needs pyspark: pip install 'duckanon[spark]' (and Java 17)") from None
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    master = master or os.environ.get("SPARK_MASTER", "local[2]")
    try:
        spark = (SparkSession.builder.master(master).appName("duckanon")
                 .config("spark.ui.enabled", "false").getOrCreate())
    except Exception as error:  # no Java, bad master URL, ...
        first = one_line(error)
        raise AnonymizeError(f"could not start Spark on {master}: {first} (Spark needs Java 17: java -version)") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def connect(statement) -> SparkConnection:
    """The backend's factory (duckanon.backends.connect): the active session, or one on the
    statement's spark_master."""
    return SparkConnection(session(statement.spark_master))
