"""A folder a failed write left at the target's location on Spark (issue 18): Spark's CTAS writes
the files before it creates the catalog entry, so a failed or killed write leaves the managed
table's folder and no table, and the next CTAS of that name failed with LOCATION_ALREADY_EXISTS.
ANONYMIZE now replaces such a leftover; a folder that stores a table of the catalog is refused with
one line and never deleted. Skipped where pyspark or Java is missing."""

import os
import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

import duckanon

from support.data import HOSPITAL

STATEMENT = "ANONYMIZE hospital INTO {target} WITH (k = 3, qi = (zipcode, age), keep = (education), method = 'greedy')"


@pytest.fixture
def spark(spark_session):
    return spark_session


def database_folder(spark, database: str = "default") -> Path:
    """The folder of a database as Spark's catalog describes it (its managed tables live inside)."""
    info = {row.info_name: row.info_value for row in spark.sql(f"DESCRIBE DATABASE `{database}`").collect()}
    return Path(urlparse(info["Location"]).path)


def rows(spark, table: str) -> Counter:
    return Counter(tuple(None if v is None else str(v) for v in r) for r in spark.table(table).collect())


def duckdb_rows(target: str) -> Counter:
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.anonymize(STATEMENT.format(target="published"))
    return Counter(tuple(None if v is None else str(v) for v in r) for r in con.execute("SELECT * FROM published").fetchall())


def killed_mid_write(spark, folder: Path) -> None:
    """What a driver killed while its tasks wrote leaves: task attempts in _temporary (Parquet
    files Spark wrote), nothing committed, no catalog entry. (A CTAS that fails on its own cleans
    up after itself: Spark aborts the job and deletes _temporary.)"""
    scratch = folder.parent / f".{folder.name}-scratch"
    spark.range(5).selectExpr("id AS junk").write.parquet(str(scratch))
    attempt = folder / "_temporary" / "0" / "_temporary" / "attempt_202601010000_0001_m_000000_0"
    attempt.mkdir(parents=True)
    for part in scratch.glob("part-*.parquet"):
        shutil.copy(part, attempt / part.name)
    shutil.rmtree(scratch)


def killed_after_commit(spark, folder: Path) -> None:
    """What a driver killed between committing the files and creating the catalog entry leaves:
    committed Parquet files (of other rows and columns) and _SUCCESS, no catalog entry."""
    spark.range(5).selectExpr("id AS junk").write.parquet(str(folder))


@pytest.mark.parametrize("leftover", [killed_mid_write, killed_after_commit])
def test_a_leftover_folder_is_replaced(spark, leftover):
    target = f"stale_{leftover.__name__}"
    folder = database_folder(spark) / target
    leftover(spark, folder)
    assert any(folder.rglob("*.parquet")) and not spark.catalog.tableExists(target)
    with pytest.raises(Exception, match="LOCATION_ALREADY_EXISTS"):  # what Spark's own CTAS of that name gets
        spark.sql(f"CREATE TABLE {target} USING parquet AS SELECT 1 AS x")
    assert not spark.catalog.tableExists(target)

    from duckanon.spark import execute

    summary = execute(spark, STATEMENT.format(target=target))
    assert summary.rows == 10 and summary.target == target
    assert spark.table(target).columns == ["zipcode", "age", "education"]  # nothing of the leftover's schema
    assert rows(spark, target) == duckdb_rows(target)  # the published rows and nothing else
    assert not (folder / "_temporary").exists() and not list(folder.rglob("attempt_*"))
    table_location = spark.sql(f"DESCRIBE TABLE EXTENDED {target}").where("col_name = 'Location'").first().data_type
    assert Path(urlparse(table_location).path) == folder
    execute(spark, STATEMENT.format(target=target))  # a re-run replaces its own table as before
    assert rows(spark, target) == duckdb_rows(target)


def test_a_leftover_in_another_database(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS stale_db")
    folder = database_folder(spark, "stale_db") / "published"
    killed_mid_write(spark, folder)
    from duckanon.spark import execute

    execute(spark, STATEMENT.format(target="stale_db.published"))
    assert rows(spark, "stale_db.published") == duckdb_rows("published")
    assert not spark.catalog.tableExists("published")  # written where it was asked, not in default


@pytest.mark.parametrize("where", ["at", "inside"])
def test_a_folder_that_stores_another_table_is_refused(spark, where):
    """An external table whose files are the target's folder (or inside it) keeps them: refused up
    front with one line, the catalog and the files unchanged."""
    target, keeper = f"guarded_{where}", f"keeper_{where}"
    folder = database_folder(spark) / target
    location = folder if where == "at" else folder / "nested"
    spark.sql(f"CREATE TABLE {keeper} USING parquet LOCATION '{location}' AS SELECT id AS kept FROM range(7)")
    files = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    tables = sorted(t.name for t in spark.catalog.listTables())

    from duckanon.spark import execute

    with pytest.raises(duckanon.AnonymizeError) as refused:
        execute(spark, STATEMENT.format(target=target))
    message = str(refused.value)
    assert "\n" not in message
    assert f"the target {target} cannot be written on Spark" in message
    assert f"holds the files of table default.{keeper}" in message and "choose another name with INTO" in message
    assert not spark.catalog.tableExists(target)
    assert sorted(t.name for t in spark.catalog.listTables()) == tables
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == files
    assert sorted(r.kept for r in spark.table(keeper).collect()) == list(range(7))
    spark.sql(f"DROP TABLE {keeper}")  # external: its files stay, and are now a leftover like any other
    assert os.path.isdir(location)
    execute(spark, STATEMENT.format(target=target))
    assert rows(spark, target) == duckdb_rows(target)


def test_a_target_stored_externally_at_its_own_folder_is_refused(spark):
    """The target exists as an external table at the folder a managed table of its name would
    have: DROP TABLE would keep the files and the CTAS fail after the drop. Refused before it."""
    folder = database_folder(spark) / "external_target"
    spark.sql(f"CREATE TABLE external_target USING parquet LOCATION '{folder}' AS SELECT id AS kept FROM range(3)")
    from duckanon.spark import execute

    with pytest.raises(duckanon.AnonymizeError, match="holds the files of table default.external_target"):
        execute(spark, STATEMENT.format(target="external_target"))
    assert sorted(r.kept for r in spark.table("external_target").collect()) == [0, 1, 2]
