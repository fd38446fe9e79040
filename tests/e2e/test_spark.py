"""The same ANONYMIZE on Spark (local[2]) and DuckDB: same result row and the same multiset of
published rows. Skipped where pyspark or Java is missing."""

from collections import Counter

import pytest

import duckanon
from conftest import HOSPITAL


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
