"""The same ANONYMIZE on Spark (local[2]) and DuckDB: same result row and the same multiset of
published rows. Skipped where pyspark or Java is missing."""

import re
from collections import Counter

import pytest
from sqlglot import exp

import duckanon

from support.data import HOSPITAL
from support.spark import stored_files


@pytest.fixture
def spark(spark_session):
    return spark_session


@pytest.mark.parametrize("options", [
    "k = 3, qi = (zipcode, age, education), sensitive = disease, method = 'greedy'",
    "l = 2, qi = (zipcode, age, education), sensitive = disease, method = 'tp+'",
    "k = 3, qi = (zipcode, age), keep = (education), method = 'lattice', hierarchies = (zipcode = 'prefix', age = 'intervals(10, 20)')",
])
def test_same_result_as_duckdb(spark, options):
    from duckanon.spark import execute

    statement = f"ANONYMIZE hospital WITH ({options})"
    on_spark = execute(spark, statement)
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    on_duckdb = con.anonymize(statement)
    for field in ("rows", "classes", "min_class_size", "stars", "suppressed_rows", "method", "optimal"):
        assert getattr(on_spark, field) == getattr(on_duckdb, field), field
    spark_rows = Counter(tuple(None if v is None else str(v) for v in r) for r in spark.table("hospital_anon").collect())
    duck_rows = Counter(tuple(None if v is None else str(v) for v in r) for r in con.execute("SELECT * FROM hospital_anon").fetchall())
    assert spark_rows == duck_rows
    assert spark.table("hospital_anon").columns == [d[0] for d in con.execute("SELECT * FROM hospital_anon").description]


def test_errors_are_one_line_and_leave_no_target(spark):
    from duckanon.spark import execute

    with pytest.raises(duckanon.AnonymizeError, match="unknown table"):
        execute(spark, "ANONYMIZE missing_table WITH (k = 2)")
    with pytest.raises(duckanon.AnonymizeError, match="greater than the number of rows"):
        execute(spark, "ANONYMIZE hospital INTO nothing_here WITH (k = 50, qi = (zipcode))")
    assert not spark.catalog.tableExists("nothing_here")


def test_engine_option_from_a_duckanon_connection(spark):
    """`engine = 'spark'` in the statement: the duckanon connection (and so the shell) runs it on the
    active SparkSession; the result row comes back through DuckDB, the target is in Spark."""
    con = duckanon.connect()
    statement = ("ANONYMIZE hospital INTO hospital_engine WITH (k = 3, qi = (zipcode, age, education), "
                 "sensitive = disease, method = 'greedy', seed = 1{})")
    row = con.execute(statement.format(", engine = 'spark'")).fetchone()
    assert con.duckdb.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0  # nothing in DuckDB
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    local = con.execute(statement.format("")).fetchone()
    assert row[:8] == local[:8]
    spark_rows = Counter(tuple(str(v) for v in r) for r in spark.table("hospital_engine").collect())
    duck_rows = Counter(tuple(str(v) for v in r) for r in con.duckdb.execute("SELECT * FROM hospital_engine").fetchall())
    assert spark_rows == duck_rows


def test_python_api_with_a_session_and_a_table_name(spark):
    from duckanon.spark import anonymize

    summary = anonymize(spark, "hospital", into="hospital_api", k=2, qi=["zipcode", "age"], method="mapprox")
    assert summary.rows == 10 and summary.min_class_size >= 2
    assert spark.table("hospital_api").columns == ["zipcode", "age"]  # columns not mentioned are not published
    with pytest.raises(duckanon.AnonymizeError, match="option report needs engine = 'duckdb'"):
        duckanon.connect().execute("ANONYMIZE hospital WITH (k = 2, engine = 'spark', report = 'x.html')")


# Strings a literal must spell back byte for byte (a quote, a backslash, a tab, non-ASCII, the empty
# string) and NULL, as the values of a QI column of few published strings
PLACES = ["O'Hara", "back\\slash", "Zürich", "tab\tstop", "", None, "plain"]


def test_keep_columns_publish_what_duckdb_does_with_codes_through_the_sort(spark, monkeypatch):
    """With keep columns Spark sorts the published rows: a QI column of at most ENUM_LIMIT distinct
    published strings crosses the shuffle and the sort as its position in the column's strings
    (a bigint) and is decoded above it, one of more as strings; the published multiset is DuckDB's."""
    from pyspark.sql import types as T

    from duckanon.backends.spark import SparkBackend
    from duckanon.pipeline.dictionaries import ENUM_LIMIT
    from duckanon.spark import execute

    pairs = ENUM_LIMIT + 100  # classes of two rows, one per `many` value; then ten rows of classes of one
    rows = [(i, f"m{i // 2}", PLACES[(i // 2) % len(PLACES)], f"n{i % 3}", ["flu", "cold"][i % 2])
            for i in range(2 * pairs)]
    rows += [(i, f"u{i}", "plain", "n0", "flu") for i in range(2 * pairs, 2 * pairs + 10)]
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("many", T.StringType()),
                           T.StructField("place", T.StringType()), T.StructField("note", T.StringType()),
                           T.StructField("disease", T.StringType())])
    spark.createDataFrame(rows, schema).createOrReplaceTempView("coded")
    statement = ("ANONYMIZE coded INTO coded_anon WITH (k = 2, qi = (many, place), sensitive = disease, "
                 "keep = (id, note), method = 'greedy', seed = 5)")
    rendered, below = [], {}
    create_target, create_temp = SparkBackend.create_target, SparkBackend.create_temp

    def recording_temp(self, name, select, *args, **kwargs):
        rendered.append(self.render(select))
        return create_temp(self, name, select, *args, **kwargs)

    def recording(self, table, select, *args, **kwargs):
        rendered.append(self.render(select))
        sort = next(s for s in select.find_all(exp.Select) if s.args.get("order"))
        types = dict(self.spark.sql(self.render(sort)).dtypes)
        below.update({item.alias: types[item.find(exp.Column).name] for item in select.expressions})
        return create_target(self, table, select, *args, **kwargs)

    monkeypatch.setattr(SparkBackend, "create_target", recording)
    monkeypatch.setattr(SparkBackend, "create_temp", recording_temp)
    on_spark = execute(spark, statement)
    con = duckanon.connect()
    con.execute("CREATE TABLE coded (id BIGINT, many VARCHAR, place VARCHAR, note VARCHAR, disease VARCHAR)")
    con.executemany("INSERT INTO coded VALUES (?, ?, ?, ?, ?)", rows)
    on_duckdb = con.anonymize(statement)
    assert (on_spark.published_rows, on_spark.stars) == (on_duckdb.published_rows, on_duckdb.stars) == (len(rows), 10)
    spark_rows = Counter(tuple(r) for r in spark.table("coded_anon").collect())
    assert spark_rows == Counter(con.execute("SELECT * FROM coded_anon").fetchall())
    assert {r[2] for r in spark_rows} == set(PLACES) and len({r[1] for r in spark_rows}) > ENUM_LIMIT
    assert below == {"id": "bigint", "many": "string", "place": "int", "note": "string", "disease": "string"}
    # codes made in the coded keyed view (below the sort), strings taken back in the published SELECT
    assert any("ARRAY_POSITION(ARRAY(" in sql for sql in rendered[:-1]) and "ELEMENT_AT(ARRAY(" in rendered[-1]


def test_classes_whose_key_hashes_collide_join_back_on_their_keys(spark, monkeypatch):
    """Spark's hashes skip NULL arguments: the classes (NULL, 'x') and ('x', NULL) share their key
    hash, so the join back matches on the keys themselves, and each source row is published once,
    in its own class (with a hash join, every row of both would be joined to both)."""
    from pyspark.sql import types as T

    import duckanon.pipeline.materialize as materialize
    from duckanon.backends.spark import SparkBackend
    from duckanon.spark import execute

    rows = [(None, "x", i) for i in range(3)] + [("x", None, i) for i in range(3, 7)] + [("y", "y", i) for i in range(7, 9)]
    schema = T.StructType([T.StructField("q1", T.StringType()), T.StructField("q2", T.StringType()),
                           T.StructField("id", T.LongType())])
    spark.createDataFrame(rows, schema).createOrReplaceTempView("colliding")
    distinct, original = [], materialize.key_hashes_distinct

    def recording(backend, plan, facts, cells_table):
        distinct.append(original(backend, plan, facts, cells_table))
        return distinct[-1]

    monkeypatch.setattr(materialize, "key_hashes_distinct", recording)
    execute(spark, "ANONYMIZE colliding WITH (k = 2, qi = (q1, q2), keep = (id), method = 'greedy', seed = 1)")
    assert SparkBackend.hashes_64_bits and distinct == [False]
    published = sorted((r["id"], r["q1"], r["q2"]) for r in spark.table("colliding_anon").collect())
    assert published == [(i, q1, q2) for q1, q2, i in rows]


def test_rows_whose_order_hashes_collide_are_stored_by_their_values(spark):
    """A class published whole whose rows share their order hash in pairs: Spark's hashes skip NULL
    arguments ((NULL, 'v') and ('v', NULL)) and take -0.0 as 0.0, which its sort also does; a MAP
    column (kept where the session allows hashing maps) has no order at all. The files must be the
    same, row for row, whether the source is read forwards or backwards."""
    from pyspark.sql import types as T

    from duckanon.spark import execute

    rows = ([("a", "x", None, "v", 0.0, {"k": 1}) for _ in range(100)] + [("a", "x", "v", None, 0.0, {"k": 1}) for _ in range(150)]
            + [("a", "x", None, "v", -0.0, {"k": 1}) for _ in range(200)] + [("b", "y", f"b{i % 7}", None, 1.5, {}) for i in range(300)])
    schema = T.StructType([T.StructField(c, T.StringType()) for c in ("q1", "q2", "a", "b")]
                          + [T.StructField("d", T.DoubleType()), T.StructField("m", T.MapType(T.StringType(), T.LongType()))])
    key = "spark.sql.legacy.allowHashOnMapType"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        published = []
        for ordered in (rows, rows[::-1]):
            spark.createDataFrame(ordered, schema).createOrReplaceTempView("collide_whole")
            execute(spark, "ANONYMIZE collide_whole WITH (k = 2, qi = (q1, q2), keep = (a, b, d, m), seed = 3)")
            published.append({part: [tuple(repr(v) if isinstance(v, float) else v for v in row) for row in file]  # -0.0 == 0.0
                              for part, file in stored_files(spark, "collide_whole_anon").items()})
    finally:
        spark.conf.set(key, before)
    forwards, backwards = published
    kept = Counter(r[2:5] for file in forwards.values() for r in file if r[0] == "a")
    assert kept == {(None, "v", "0.0"): 100, ("v", None, "0.0"): 150, (None, "v", "-0.0"): 200}
    assert backwards == forwards


def test_a_wide_table_same_as_duckdb(spark, monkeypatch):
    """Twelve QIs (above 8 the codes come from dictionaries, codes.py: on Spark looked up in one row
    of sorted arrays) and `segments`, with NULLs among the values, strings that need escaping and
    doubles: Spark and DuckDB publish the same rows. (The columns of more than LOOKUP_UP_TO codes,
    joined to their dictionaries, cost Spark seconds a statement: tests/pipeline/test_codes_lookup.py
    runs that mix on DuckDB.)"""
    import numpy as np

    from duckanon.backends.spark import SparkBackend
    from duckanon.spark import execute

    rng = np.random.default_rng(8)
    m, n = 10, 200
    strings, doubles = ["O'Hara", "back\\slash", "Zürich", "", None, "plain"], [-2.25, 0.0, 1.5, None]
    rows = [tuple(None if (i + j) % 37 == 0 else int(v) for j, v in enumerate(rng.integers(0, 2 + np.arange(m) % 5)))
            + (strings[i % 6], doubles[(i // 3) % 4]) for i in range(n)]
    columns = [f"q{j}" for j in range(m)] + ["s", "d"]
    types = [("INT", "INTEGER")] * m + [("STRING", "VARCHAR"), ("DOUBLE", "DOUBLE")]
    spark.createDataFrame(rows, ", ".join(f"{c} {t[0]}" for c, t in zip(columns, types))).createOrReplaceTempView("wide")
    con = duckanon.connect()
    con.execute(f"CREATE TABLE wide ({', '.join(f'{c} {t[1]}' for c, t in zip(columns, types))})")
    con.duckdb.executemany(f"INSERT INTO wide VALUES ({', '.join('?' * len(columns))})", rows)
    statement = f"ANONYMIZE wide WITH (k = 3, qi = ({', '.join(columns)}), method = 'segments')"
    made, create_temp = [], SparkBackend.create_temp
    monkeypatch.setattr(SparkBackend, "create_temp", lambda self, name, select: (made.append(name), create_temp(self, name, select))[1])
    on_spark = execute(spark, statement)
    monkeypatch.undo()
    on_duckdb = con.anonymize(statement)
    # one table of arrays, no dictionary table per column (codes.py names those <table>_d<i>; a
    # temp name's random hex suffix may start with "d")
    assert any(t.endswith("_arrays") for t in made) and not any(re.fullmatch(r"d[0-9]+", t.rsplit("_", 1)[-1]) for t in made)
    for field in ("rows", "classes", "min_class_size", "stars", "suppressed_rows", "method"):
        assert getattr(on_spark, field) == getattr(on_duckdb, field), field
    spark_rows = Counter(tuple(None if v is None else str(v) for v in r) for r in spark.table("wide_anon").collect())
    duck_rows = Counter(tuple(None if v is None else str(v) for v in r) for r in con.execute("SELECT * FROM wide_anon").fetchall())
    assert spark_rows == duck_rows and on_duckdb.stars > 0


def test_differential_privacy_is_refused_on_spark(spark):
    from duckanon.errors import AnonymizeError
    from duckanon.spark import execute

    with pytest.raises(AnonymizeError) as raised:
        execute(spark, "ANONYMIZE hospital INTO dp_out WITH (epsilon = 1, delta = 1e-5, qi = (zipcode, age))")
    assert str(raised.value) == ("option epsilon is not available on Spark: the sample is drawn on the class "
                                 "histogram that DuckDB's release publishes from")
    assert not spark.catalog.tableExists("dp_out")
    # a statement that says engine = 'duckdb' is still run on Spark here: the message must not ask for it
    with pytest.raises(AnonymizeError) as raised:
        execute(spark, "ANONYMIZE hospital INTO dp_out WITH (epsilon = 1, delta = 1e-5, qi = (zipcode, age), "
                       "engine = 'duckdb')")
    assert str(raised.value).startswith("option epsilon is not available on Spark")
    assert not spark.catalog.tableExists("dp_out")
