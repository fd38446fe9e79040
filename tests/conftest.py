"""The suite's pytest hooks (xdist's scheduling, the tiers, the markers set by area) and its
shared fixtures. The helpers the test modules import live in tests/support/."""

from __future__ import annotations

import os

import pytest

import duckanon
from support.data import ADULT_TABLE, HOSPITAL, HOSPITAL_TABLE
from support.database import connection_with
from support.spark import spark_missing
from support.tiers import E2E_AREAS, SMOKE_ONLY, SMOKE_TESTS, SOLVER_RESULTS_E2E, THOROUGH


def pytest_configure(config):
    """With -n, xdist's work stealing instead of its default `load`: an idle worker takes queued
    tests from a busy one, so the long tests at the end of the suite do not leave a core idle (the
    suite on two cores: 592 -> 570 s). Set here rather than in addopts, which would make pytest
    refuse to start without xdist (`-p no:xdist`)."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "load":
        config.option.dist = "worksteal"


def _runs_spark(item) -> bool:
    """Whether the test starts Spark: it asks for the Spark session, or for the `backend` fixture
    (test_backends) with its Spark parameter."""
    callspec = getattr(item, "callspec", None)
    return "spark_session" in item.fixturenames or (callspec is not None and callspec.params.get("backend") == "spark")


def pytest_collection_modifyitems(config, items):
    run_slow = THOROUGH or "slow" in (config.getoption("markexpr") or "")
    for item in items:
        if item.get_closest_marker("slow") and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow tier: DUCKANON_THOROUGH=1 (or -m slow) runs it"))
        if item.path.parent.name in E2E_AREAS:
            item.add_marker(pytest.mark.e2e)
        if _runs_spark(item):
            item.add_marker(pytest.mark.spark)
        test = item.nodeid.split("tests/")[-1]
        if test.split("::")[0] in SOLVER_RESULTS_E2E:
            item.add_marker(pytest.mark.solver_results)
        if test.split("[")[0] in SMOKE_TESTS or test.split("::")[0] in SMOKE_TESTS:
            item.add_marker(pytest.mark.smoke)
    if os.environ.get(SMOKE_ONLY):
        selected = [item for item in items if item.get_closest_marker("smoke")]
        config.hook.pytest_deselected(items=[item for item in items if item not in selected])
        items[:] = selected


@pytest.fixture
def con():
    yield from connection_with(HOSPITAL_TABLE)


@pytest.fixture
def hospital(con):
    """The hospital table on `con`, whatever connection a module's own `con` fixture makes (the
    SQL checks install their macros on plain DuckDB or through duckanon)."""
    con.execute("CREATE TABLE IF NOT EXISTS hospital AS SELECT * FROM read_csv(?)", [str(HOSPITAL)])
    return con


@pytest.fixture(scope="module")
def hospital_module():
    """The hospital table on one connection shared by the tests of a module (reports)."""
    yield from connection_with(HOSPITAL_TABLE)


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory):
    """One local Spark session for the whole run (a JVM start costs seconds), the hospital table
    as a temp view; skipped where Spark cannot run."""
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (SparkSession.builder.master("local[2]").appName("duckanon-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.read.csv(str(HOSPITAL), header=True, inferSchema=True).createOrReplaceTempView("hospital")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def adult():
    """Adult (30,162 rows) as table `adult`, one connection shared by the tests of a module."""
    yield from connection_with(ADULT_TABLE)


@pytest.fixture
def hospital_and_people():
    """An in-memory duckanon connection with the hospital table and a small table `people`
    (id, name, age, sex) whose names are direct identifiers."""
    con = duckanon.connect()
    con.execute(HOSPITAL_TABLE)
    con.execute("CREATE TABLE people AS SELECT i AS id, 'person ' || i AS name, i % 3 AS age, i % 2 AS sex "
                "FROM range(12) r(i)")
    yield con
    con.close()
