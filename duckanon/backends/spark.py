"""The Spark backend: the pipeline on a SparkSession.

The pipeline's expressions are rendered in Spark's dialect and run with `spark.sql`. The class
histogram is computed by Spark's GROUP BY and only it comes back to the driver; the solver is
unchanged. Spark has no multi-statement transactions. Temp views are dropped on any error. The target is
written by one CTAS after the solve (an existing target of that name is dropped just before it):
a failure up to the CTAS leaves the previous target as it was; a failed CTAS leaves no target; a
failure after it (the published-row check, the comment) leaves the new target and reports the
error. A folder that a killed write left at the target's managed location (files and no table of
that name in the catalog, which made Spark's CTAS fail with LOCATION_ALREADY_EXISTS) is deleted
just before the CTAS; a folder that holds the files of a table of the catalog is refused up front
(`SparkBackend._leftover_folder`).

This module sits below the pipeline (backends are loaded by name from `duckanon.backends`); the
Python API that runs statements on Spark is `duckanon.spark`.
"""


from __future__ import annotations

from contextlib import contextmanager

from sqlglot import exp

from duckanon.backends.base import Backend, BackendError, UnknownTable
from duckanon.backends.codings import ARRAY_POSITIONS
from duckanon.errors import AnonymizeError, one_line
from duckanon.names import shown_name


class _Result:
    def __init__(self, frame=None, rows=None, columns=None):
        self.frame = frame
        self._rows = rows
        self.description = [(name, None) for name in (columns or (frame.columns if frame is not None else []))]

    def _all(self):
        if self._rows is None:
            try:
                self._rows = [tuple(r) for r in self.frame.collect()] if self.frame is not None else []
            except Exception as error:  # a query fails when Spark runs it, not when it plans it
                raise BackendError(f"Spark: {one_line(error)}") from None
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


def stored_order(select: exp.Expr) -> exp.Expr:
    """`select` with every ORDER BY that has no LIMIT turned into DISTRIBUTE BY + SORT BY of the
    same keys, for a query whose rows Spark stores (a cached view, the target's Parquet files).

    Spark reads a stored table back in no promised order, so what an ORDER BY gives there is the
    order inside each stored partition or file. Spark runs a global ORDER BY as a range
    partitioning, which first samples its input by running the whole query below it once more
    (on the keep path: the source read and joined back a second time), then shuffles and sorts.
    DISTRIBUTE BY the keys + SORT BY the keys gives each partition the same inner order with one
    hash shuffle and no sampling pass. A row's partition and its place in it still depend on the
    sort keys alone (the pipeline sorts by a hash of the published values and the seed), never
    on the source's order. Rows are distributed by the first key only: every order the pipeline
    stores leads with a near-unique seeded hash (a part's, a row's), and the keys behind it (a
    row's values, which break the hash's ties) would only add to what the shuffle hashes."""
    select = select.copy()
    for node in list(select.find_all(exp.Select)):
        order = node.args.get("order")
        if order is None or node.args.get("limit") is not None or node.args.get("offset") is not None:
            continue
        first = order.expressions[0]
        node.set("order", None)
        node.set("distribute", exp.Distribute(expressions=[(first.this if isinstance(first, exp.Ordered) else first).copy()]))
        node.set("sort", exp.Sort(expressions=[o.copy() for o in order.expressions]))
    return select


def _as_xxhash64(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and node.name.lower() == "hash":
        return exp.Anonymous(this="xxhash64", expressions=node.expressions)
    return node


class SparkBackend(Backend):
    """The pipeline's backend on a SparkSession: expressions rendered in Spark's dialect and run
    with `spark.sql`; temp tables are cached temp views; the small mapping table goes to Spark as
    a DataFrame (broadcast-joined by Spark); the target is a managed Parquet table (CTAS).

    The pipeline's hash() runs as Spark's xxhash64, 64 bits wide like DuckDB's: Spark's own hash()
    is a 32-bit murmur3, under which 10M published rows share their order hash in about 11,600
    pairs (n^2 / 2^33) and the class keys of a few thousand cells collide too often to join on."""

    name = "spark"
    dialect = "spark"
    string_coding = ARRAY_POSITIONS  # one fixed 8-byte field through the shuffle and the sort
    hashes_64_bits = True
    codes_by_lookup = True  # 200 cached dictionary views stall the analyzer (pipeline/codes.py)

    def tie_key(self, value: exp.Expr, sortable: bool = False) -> exp.Expr:
        """Spark's sort compares an 8-byte prefix of the first key, the rest on its ties: a per-row
        value goes on by its text, which every type has and which tells apart what Spark's sort and
        hashes take as equal or cannot order (-0.0 and 0.0, a MAP kept where hashing maps is
        allowed); a QI's string or code as it is."""
        return value if sortable else exp.cast(value, exp.DataType.build("VARCHAR"))

    def render(self, expression: exp.Expr) -> str:
        return super().render(expression.transform(_as_xxhash64))

    def __init__(self, spark):
        super().__init__()
        self.spark = spark

    def _run(self, sql: str, parameters=None):
        if parameters:
            raise BackendError("Spark: parameters are not supported")
        try:
            return _Result(frame=self.spark.sql(sql))
        except Exception as error:  # pyspark's AnalysisException, ParseException, ...
            message = one_line(error)
            if "TABLE_OR_VIEW_NOT_FOUND" in message or "Table or view not found" in message:
                raise UnknownTable(message) from None
            raise BackendError(f"Spark: {message}") from None

    def create_temp(self, name: str, select: exp.Expr) -> None:
        """A cached temp view (CACHE TABLE ... AS, eager). Its shuffles run with one partition per
        core (defaultParallelism) instead of spark.sql.shuffle.partitions: a cached plan keeps the
        partitioning of its last shuffle (adaptive execution does not coalesce it unless
        spark.sql.optimizer.canChangeCachedPlanOutputPartitioning is on, and then it would make one
        partition of a small table), so the keyed table of 11,000 cells sat in 200 partitions,
        its ORDER BY sampled and shuffled them all, and the histogram-only publish expanded it in
        200 tasks writing 200 files. The temp tables on Spark hold one row per cell, never per
        source row, so one partition per core is what their readers want."""
        self.temps.append(name)
        with self._shuffle_partitions(self.spark.sparkContext.defaultParallelism):
            self.execute(exp.Cache(this=exp.to_identifier(name, quoted=True), expression=stored_order(select)))

    @contextmanager
    def _shuffle_partitions(self, count: int):
        """spark.sql.shuffle.partitions set to `count` for the session while inside, then restored."""
        key = "spark.sql.shuffle.partitions"
        before = self._catalog(self.spark.conf.get, key)
        self._catalog(self.spark.conf.set, key, str(max(1, int(count))))
        try:
            yield
        finally:
            self._catalog(self.spark.conf.set, key, before)

    def drop_temp(self, *names: str) -> None:
        """Through the catalog: it uncaches the view too, without resolving its plan (which may read
        a temp view dropped before it)."""
        for name in names:
            self._catalog(self.spark.catalog.dropTempView, name)
            if name in self.temps:
                self.temps.remove(name)

    def create_target(self, table, select: exp.Expr) -> None:
        """Spark has no CREATE OR REPLACE ... AS for managed tables: drop, then CTAS as Parquet. A
        folder a failed write left at the target's location (`_leftover_folder`) is deleted first:
        Spark refuses a CTAS whose managed location exists (LOCATION_ALREADY_EXISTS)."""
        leftover = self._leftover_folder(table)
        if leftover is not None:
            self._delete_folder(leftover)
        self.execute(exp.Drop(tables=[table.table.copy()], kind="TABLE", exists=True))
        select = self._broadcast_temps(stored_order(select))
        self.execute(exp.Create(this=table.table.copy(), kind="TABLE", expression=select,
                                properties=exp.Properties(expressions=[exp.FileFormatProperty(this=exp.Var(this="parquet"))])))

    def place(self, source, target, hierarchy_tables=()):
        """The generic placement, and a target whose folder stores another table refused now,
        before the histogram and the solve, with nothing written."""
        source, target = super().place(source, target, hierarchy_tables)
        self._leftover_folder(target)
        return source, target

    # ------------------------------------------------------------------ the target's folder
    def _session_identifier(self, table):
        """`table` as a TableIdentifier of Spark's session catalog (spark_catalog), with the current
        database filled in; None for a name in another catalog (a v2 catalog manages its own
        storage) or a database that does not exist (the CTAS then gives Spark's own error)."""
        parts = [part.name for part in table.table.parts]
        if len(parts) > 3:
            return None
        catalog = parts[0] if len(parts) == 3 else self._catalog(self.spark.catalog.currentCatalog)
        if catalog.lower() != "spark_catalog":
            return None
        database = parts[-2] if len(parts) >= 2 else self._catalog(self.spark.catalog.currentDatabase)
        jvm = self.spark._jvm
        identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(parts[-1], jvm.scala.Option.apply(database))
        if not self._catalog(self._session_catalog().databaseExists, database):
            return None
        return identifier

    def _session_catalog(self):
        return self.spark._jsparkSession.sessionState().catalog()

    def _qualified(self, location):
        """(file system, qualified Hadoop Path) of a location URI or string."""
        jvm = self.spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(location)
        fs = path.getFileSystem(self.spark._jsparkSession.sessionState().newHadoopConf())
        return fs, fs.makeQualified(path)

    def _table_locations(self):
        """(database.name, qualified location) of every table of the session catalog that has a
        location (views have none): one listing per database."""
        external = self._session_catalog().externalCatalog()
        found = []
        databases = external.listDatabases()
        for i in range(databases.size()):
            database = databases.apply(i)
            tables = external.getTablesByName(database, external.listTables(database))
            for j in range(tables.size()):
                entry = tables.apply(j)
                location = entry.storage().locationUri()
                if location.isDefined():
                    found.append((f"{database}.{entry.identifier().table()}",
                                  self._qualified(location.get())[1].toString()))
        return found

    def _leftover_folder(self, table) -> str | None:
        """The folder at `table`'s managed location when a failed write left it there: the folder
        exists, the session catalog has no table of that name stored in it, and no table of the
        catalog (in any database) is stored in it, inside it or around it. None when there is no
        such folder (or the name is not in the session catalog). A folder that stores another
        table is refused (AnonymizeError, nothing changed): it is never deleted.

        Spark's CTAS writes the files first and creates the catalog entry after them, so a write
        that was killed (or a driver that died between the two) leaves the folder and no table;
        the next CTAS of that name fails with LOCATION_ALREADY_EXISTS. With Spark's in-memory
        catalog (no Hive metastore) the catalog is the session's: a table another session wrote
        at that name is a folder without an entry here, and is replaced like a target of that
        name is."""
        identifier = self._session_identifier(table)
        if identifier is None:
            return None
        catalog = self._session_catalog()
        try:
            fs, folder = self._qualified(catalog.defaultTablePath(identifier))
            if not fs.exists(folder):
                return None
            if catalog.tableExists(identifier):
                entry = catalog.getTableMetadata(identifier)
                location = entry.storage().locationUri()
                if (entry.tableType().name() == "MANAGED" and location.isDefined()
                        and self._qualified(location.get())[1].toString() == folder.toString()):
                    return None  # the table's own folder: DROP TABLE removes it with the table
            path = folder.toString()
            for name, location in self._table_locations():
                if location == path or location.startswith(path + "/") or path.startswith(location.rstrip("/") + "/"):
                    raise AnonymizeError(
                        f"the target {shown_name(table)} cannot be written on Spark: its folder {path} holds the "
                        f"files of table {name}, which ANONYMIZE never deletes; choose another name with INTO")
        except AnonymizeError:
            raise
        except Exception as error:  # py4j and pyspark errors
            raise BackendError(f"Spark: {one_line(error)}") from None
        return path

    def _delete_folder(self, path: str) -> None:
        """Delete a leftover folder (through Hadoop's file system: local, HDFS, S3 alike)."""
        def delete() -> bool:
            fs, folder = self._qualified(path)
            return not fs.exists(folder) or fs.delete(folder, True)

        if not self._catalog(delete):
            raise BackendError(f"Spark: could not delete the folder {path} a failed write left at the target's location")

    BROADCAST_LIMIT = 256 << 20  # bytes of a cached temp view that a join may broadcast

    def _broadcast_temps(self, select: exp.Expr) -> exp.Expr:
        """`select` with a BROADCAST hint on every joined relation that reads only our temp views
        (cached, one row per cell, their size known exactly) when it is joined with one that
        does not (the source): the join back streams the source past the keyed table.

        Spark picks a join's broadcast side from size estimates, and a Parquet source's estimate
        is its size on disk: Adult replicated to 10M rows is 3.8 MB on disk, less than its keyed
        table's 3.8 MB in memory, so Spark broadcast the 10M-row source (a driver of 1 GB ran out
        of memory). Temp views larger than BROADCAST_LIMIT are left to Spark's choice."""
        small = set()
        for name in self.temps:
            try:
                size = int(self.spark.table(name)._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
            except Exception:  # no statistics: leave the join to Spark
                continue
            if size <= self.BROADCAST_LIMIT:
                small.add(name.lower())

        def reads_small(relation: exp.Expr) -> bool:
            tables = [relation] if isinstance(relation, exp.Table) else list(relation.find_all(exp.Table))
            return bool(tables) and all(t.name.lower() in small for t in tables)

        for node in select.find_all(exp.Select):
            joins, first = node.args.get("joins") or [], node.args.get("from_")
            if not small or not joins or first is None:
                continue
            relations = [first.this] + [join.this for join in joins]
            names = [r.alias_or_name for r in relations if reads_small(r)]
            if names and len(names) < len(relations):
                node.set("hint", exp.Hint(expressions=[
                    exp.Anonymous(this="BROADCAST", expressions=[exp.to_identifier(n) for n in names])]))
        return select

    def register_arrow(self, name: str, table) -> None:
        """The small mapping table to Spark (Spark broadcasts it in the join-back)."""
        import pyarrow as pa
        from pyspark.sql import types as T

        spark_type = {pa.int64(): T.LongType(), pa.bool_(): T.BooleanType(), pa.string(): T.StringType(),
                      pa.int32(): T.IntegerType(), pa.float64(): T.DoubleType()}
        schema = T.StructType([T.StructField(f.name, spark_type[f.type], True) for f in table.schema])
        rows = list(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)])) if table.num_rows else []
        self.spark.createDataFrame(rows, schema).createOrReplaceTempView(name)
        self.registered.add(name)

    def drop_inputs(self, *names: str) -> None:
        """Kept: a cached temp view built from them still reads them by name; they go with the
        statement's other temps at its end."""

    def unregister(self, name: str) -> None:
        """Spark's cached temp views still read it by name: it is dropped at the statement's end."""

    def release(self, names=None) -> None:
        for name in list(self.registered if names is None else names):
            self._catalog(self.spark.catalog.dropTempView, name)
            self.registered.discard(name)

    def _catalog(self, call, *args):
        """A call of Spark's catalog API, its errors as BackendError."""
        try:
            return call(*args)
        except Exception as error:  # py4j and pyspark errors
            raise BackendError(f"Spark: {one_line(error)}") from None


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


def connect(statement) -> SparkBackend:
    """The backend's factory (duckanon.backends.connect): the active session, or one on the
    statement's spark_master."""
    return SparkBackend(session(statement.spark_master))
