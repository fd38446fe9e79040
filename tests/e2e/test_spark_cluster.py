"""A real distributed run: ANONYMIZE on a Spark standalone cluster (a master and two workers, each
its own JVM process on this machine, started by benchmarks/spark_cluster.py) publishes the same
multiset as DuckDB on Adult, with and without a kept column, and the independent checker accepts
it. The cluster runs in a child process (one SparkContext per process: the session-wide local
Spark of the other tests may already live in this one), which stops the cluster however it ends.

Long (a cluster start and two statements: a minute or two on two cores): selected with -m slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import duckanon

from support.checks import check_published
from support.data import SHARED
from support.spark import spark_missing

REPO = Path(__file__).resolve().parents[2]
ADULT = SHARED / "adult" / "adult.csv"
QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass"]
STATEMENT = ("ANONYMIZE adult INTO {target} WITH (k = 5, qi = ({qi}), sensitive = occupation, {extra}"
             "method = 'mapprox', seed = 3)")



def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


@pytest.mark.slow
def test_a_standalone_cluster_publishes_what_duckdb_publishes(tmp_path):
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    parquet = tmp_path / "adult.parquet"
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT}', delim=';')")
    con.execute(f"COPY adult TO '{parquet}' (FORMAT parquet)")  # both engines read the same values and types
    qi = ", ".join(f'"{c}"' for c in QI)
    jobs = [{"sql": STATEMENT.format(target=target, qi=qi, extra=extra), "target": target}
            for target, extra in (("adult_plain", ""), ("adult_keep", 'keep = ("salary-class"), '))]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    out = tmp_path / "out.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "spark_cluster.py"), "--parquet", str(parquet), "--table", "adult",
         "--jobs", str(tmp_path / "jobs.json"), "--out", str(out)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    cluster = json.loads(out.read_text())

    # distributed: two executors (one per worker process), and each ran tasks of the statements
    assert cluster["executors"] == 2 and cluster["master"].startswith("spark://127.0.0.1:")
    assert all(count > 0 for count in cluster["tasks_per_worker"].values()), cluster["tasks_per_worker"]
    assert len(cluster["tasks_per_worker"]) == 2
    # the master and the workers are gone
    assert len(cluster["pids"]) == 3 and not [pid for pid in cluster["pids"] if alive(pid)]

    for job, result in zip(jobs, cluster["results"]):
        summary = con.execute(job["sql"]).fetchone()
        columns = [d[0] for d in con.description]
        expected = sorted(tuple(None if v is None else str(v) for v in row)
                          for row in con.execute(f'SELECT * FROM {job["target"]}').fetchall())
        published = sorted(tuple(row) for row in result["rows"])
        assert result["columns"] == QI + ["occupation"] + (["salary-class"] if "keep" in job["sql"] else [])
        assert len(published) == 30162
        assert published == expected  # the same multiset as DuckDB's, every column
        stars, suppressed, problems = check_published(published, list(range(7)), 7, k=5)
        assert problems == []
        duckdb_summary = dict(zip(columns, summary))
        assert (result["summary"]["stars"], result["summary"]["suppressed_rows"]) == (stars, suppressed)
        assert (duckdb_summary["stars"], duckdb_summary["suppressed_rows"]) == (stars, suppressed)
        assert result["summary"]["published_rows"] == 30162
    con.close()


def test_an_order_spark_stores_becomes_distribute_and_sort_by():
    """What Spark stores (a cached view, the target) keeps an ORDER BY as DISTRIBUTE BY its first
    key (the leading hash) + SORT BY all its keys (no range partitioning, whose sampling pass
    re-runs the query); an ORDER BY with a LIMIT selects rows and stays."""
    from sqlglot import parse_one

    from duckanon.backends.spark import stored_order  # sqlglot only: no pyspark needed

    query = parse_one("SELECT a FROM (SELECT a, h FROM t ORDER BY hash(1, a) NULLS LAST, a) AS s", read="spark")
    assert stored_order(query).sql("spark") == (
        "SELECT a FROM (SELECT a, h FROM t DISTRIBUTE BY HASH(1, a) SORT BY HASH(1, a) NULLS LAST, a) AS s")
    limited = parse_one("SELECT a FROM t ORDER BY a LIMIT 3", read="spark")
    assert stored_order(limited).sql("spark") == "SELECT a FROM t ORDER BY a LIMIT 3"
