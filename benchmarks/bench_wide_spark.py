"""Wide tables on DuckDB, Spark local[2] and a Spark standalone cluster (two 1-core workers), the
same statement (issue 40): ANONYMIZE w INTO w_anon WITH (k = 5, qi = (q0, ..., q{m-1}), seed = 1),
default method.

    python benchmarks/bench_wide_spark.py [--cases 100000x30,20000x200] [--repetitions 3]
    python benchmarks/bench_wide_spark.py --cases 1000000x30 --repetitions 1 --tag huge
    python benchmarks/bench_wide_spark.py --report  # the Markdown again from the JSON files

The table is bench_wide.py's: `rows` rows of `m` uniform columns, column j taking 2 + (j mod 25)
values (numpy PCG64, seed 7), plus an `id` the statement leaves out, written once to a Parquet
file (--data) that every engine reads (DuckDB into a table before the clock starts, Spark as a
temp view over spark.read.parquet, in 1 MB splits as in bench_spark.py).

Each (repetition, engine) is a fresh subprocess, one at a time, engines alternating within a
repetition; a Spark process first runs an untimed warm-up statement (qi = (q0, q1)) on the first
2,000 rows.
Per run: the whole statement's seconds (wall time around con.anonymize / duckanon.spark.execute),
the method `auto` ran, stars and their share of the QI cells, peak RSS (VmHWM of the Python
process plus the driver JVM plus each executor JVM), and `uptime` before and after. Then the
guarantee is checked here, independently of duckanon: the published table grouped by its QI
columns (a suppressed cell is '*'), every group must hold >= 5 rows, the groups' rows must add up
to the source's row count, and the '*' cells counted over the groups must equal the summary's
stars. The published multiset's fingerprint (bench_spark.fingerprint) is compared with DuckDB's.
Results: benchmarks/results/bench_wide_spark[_TAG].json, all of them as bench_wide_spark.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spark import (ENGINES, StatementTimer, cluster_session, fingerprint, high_water_mib,  # noqa: E402
                         local_session, spark_peak_rss)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
K = 5
WARMUP_ROWS = 2_000


def statement(m: int, source: str = "w", target: str = "w_anon") -> str:
    qi = ", ".join(f"q{j}" for j in range(m))
    return f"ANONYMIZE {source} INTO {target} WITH (k = {K}, qi = ({qi}), seed = 1)"


def generate(rows: int, m: int, path: Path) -> None:
    """bench_wide.py's table (numpy PCG64 seed 7, column j of 2 + (j mod 25) values) as Parquet."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    table = pa.table({"id": np.arange(rows),
                      **{f"q{j}": rng.integers(0, 2 + j % 25, rows, dtype=np.int8) for j in range(m)}})
    pq.write_table(table, path)


def check(groups: list, columns: list[str], m: int, rows: int, stars: int) -> dict:
    """The guarantee on the published rows, given as (published values..., count) groups of
    GROUP BY ALL: per QI vector (cells as published, '*' where suppressed) at least K rows; as
    many rows as the source; as many '*' cells as the summary says."""
    qi = [columns.index(f"q{j}") for j in range(m)]
    vectors: dict[tuple, int] = {}
    starred = 0
    for group in groups:
        vector = tuple(None if group[i] is None else str(group[i]) for i in qi)
        vectors[vector] = vectors.get(vector, 0) + group[-1]
        starred += group[-1] * sum(v == "*" for v in vector)
    smallest = min(vectors.values())
    published = sum(vectors.values())
    return {"qi_vectors": len(vectors), "smallest_vector": smallest, "published_rows": published,
            "starred_cells": starred, "nulls": sum(v is None for vec in vectors for v in vec),
            "holds": smallest >= K and published == rows and starred == stars}


def outcome(summary, seconds: float, rows: int, m: int, columns: list[str], groups: list) -> dict:
    return {"seconds": round(seconds, 2), "method": summary.method, "stars": summary.stars,
            "share": round(summary.stars / (rows * m), 6), "classes": summary.classes,
            "published_columns": columns, "check": check(groups, columns, m, rows, summary.stars),
            "fingerprint": fingerprint(groups)}


def run_duckdb(parquet: str, rows: int, m: int) -> dict:
    import duckanon

    con = duckanon.connect()
    con.execute(f"CREATE TABLE w AS SELECT * FROM read_parquet('{parquet}')")
    began = time.perf_counter()
    summary = con.anonymize(statement(m))
    seconds = time.perf_counter() - began
    peak = high_water_mib()
    cursor = con.execute("SELECT *, count(*) FROM w_anon GROUP BY ALL")
    columns = [d[0] for d in cursor.description][:-1]
    out = outcome(summary, seconds, rows, m, columns, cursor.fetchall())
    return {"engine": "duckdb", **out, "peak_rss_mib": round(peak)}


def run_spark(engine: str, parquet: str, rows: int, m: int) -> dict:
    from duckanon.spark import execute

    timer = StatementTimer()
    cluster, warehouse = None, tempfile.mkdtemp(prefix="duckanon-bench-wide-spark-")
    try:
        began = time.perf_counter()
        if engine == "cluster":
            cluster, spark = cluster_session("bench_wide_spark")
        else:
            spark = local_session("bench_wide_spark", warehouse)
        start = time.perf_counter() - began
        spark.read.parquet(parquet).createOrReplaceTempView("w")
        spark.table("w").limit(WARMUP_ROWS).createOrReplaceTempView("warm")
        began = time.perf_counter()
        execute(spark, statement(2, "warm", "warm_anon"))
        warmup = time.perf_counter() - began
        timer.take()
        began = time.perf_counter()
        summary = execute(spark, statement(m), progress=lambda phase, info: print(
            f"phase: {time.perf_counter() - began:.1f} s {phase}", file=sys.stderr, flush=True))
        seconds = time.perf_counter() - began
        queries = timer.take()
        peak = spark_peak_rss(spark, cluster)
        frame = spark.sql("SELECT *, count(*) FROM w_anon GROUP BY ALL")
        columns = frame.columns[:-1]
        out = outcome(summary, seconds, rows, m, columns, [tuple(r) for r in frame.collect()])
        out.update(engine=ENGINES[engine], session_start_seconds=round(start, 1), warmup_seconds=round(warmup, 1),
                   source_partitions=spark.table("w").rdd.getNumPartitions(), **peak,
                   backend_statements=len(queries), backend_seconds=round(sum(q[1] for q in queries), 1),
                   slowest_statements=sorted(queries, key=lambda q: -q[1])[:5])
        for table in ("warm_anon", "w_anon"):
            spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.stop()
        return out
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


# ---------------------------------------------------------------------------------------- driver


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def child(engine: str, parquet: Path, rows: int, m: int, timeout: float) -> dict:
    """One run in a fresh process (its own process group, ended by that group's id on timeout:
    SIGTERM first, so that a cluster's finally stops its JVMs)."""
    before = uptime()
    process = subprocess.Popen([sys.executable, __file__, "--engine", engine, "--parquet", str(parquet),
                                "--rows", str(rows), "--qis", str(m)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        result = {"engine": ENGINES[engine], "outcome": f"stopped after {timeout:.0f} s", "stderr": stderr[-2000:],
                  "phases": [line[7:] for line in stderr.splitlines() if line.startswith("phase: ")]}
    else:
        lines = stdout.strip().splitlines()
        result = json.loads(lines[-1]) if process.returncode == 0 and lines else {
            "engine": ENGINES[engine], "outcome": f"process ended with code {process.returncode}",
            "stderr": stderr[-4000:]}
    return {**result, "uptime_before": before, "uptime_after": uptime()}


def measure(cases: list[tuple[int, int]], args) -> list[dict]:
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    out_path = RESULTS / f"bench_wide_spark{'_' + args.tag if args.tag else ''}.json"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    results = []
    for rows, m in cases:
        parquet = data / f"wide_{rows}x{m}.parquet"
        if not parquet.exists():
            generate(rows, m, parquet)
        for repetition in range(args.repetitions):
            for engine in args.engines.split(","):
                run = child(engine, parquet, rows, m, args.timeout)
                results.append({"rows": rows, "qis": m, "batch": args.tag, "repetition": repetition, **run})
                print(json.dumps({k: v for k, v in results[-1].items() if k != "published_columns"}), flush=True)
                RESULTS.mkdir(parents=True, exist_ok=True)
                out_path.write_text(json.dumps({"commit": head, "results": results}, indent=1))
    return results


# ---------------------------------------------------------------------------------------- report


def load(text: str) -> float:
    return float(text.rsplit("load average:", 1)[1].split(",")[0])


def key(run: dict) -> tuple:
    """A repetition: the batch (--tag) it was run in and its number there."""
    return run.get("batch", ""), run["repetition"]


def row(rows: int, m: int, engine: str, runs: list[dict], duckdb: dict[tuple, dict]) -> str:
    """One table row: an engine's runs of one case, the ratios to DuckDB's run of the same repetition."""
    from bench_spark import spread

    loads = [load(r[key]) for r in runs for key in ("uptime_before", "uptime_after")]
    ok = [r for r in runs if "seconds" in r]
    if not ok:
        return (f"| {rows:,} x {m} | {engine} | {runs[0]['outcome']} | - | - | - | - | - | - | "
                f"{min(loads):.1f}-{max(loads):.1f} |")
    paired = [(r, duckdb[key(r)]) for r in ok if key(r) in duckdb]
    ratios = [r["seconds"] / d["seconds"] for r, d in paired]
    prints = {d["fingerprint"] for d in duckdb.values()}  # a run of a batch without DuckDB: any DuckDB run
    same = "-" if engine == "duckdb" or not prints else "yes" if all(r["fingerprint"] in prints for r in ok) else "NO"
    holds = all(r["check"]["holds"] for r in ok)
    smallest = min(r["check"]["smallest_vector"] for r in ok)
    return (f"| {rows:,} x {m} | {engine} | {spread([r['seconds'] for r in ok])} | "
            f"{spread(ratios) if ratios and engine != 'duckdb' else '-'} | {ok[0]['method']} | "
            f"{ok[0]['stars']:,} ({ok[0]['share']:.2%}) | {spread([r['peak_rss_mib'] for r in ok])} | "
            f"{'yes' if holds else 'NO'} (smallest {smallest}) | {same} | {min(loads):.1f}-{max(loads):.1f}"
            + ("" if len(ok) == len(runs) else f" ({len(runs) - len(ok)} stopped or failed)") + " |")


def markdown(files: list[Path]) -> str:
    results, commits = [], set()
    for path in files:
        data = json.loads(path.read_text())
        commits.add(data["commit"])
        results += data["results"]
    lines = [f"commit {', '.join(sorted(commits))}; each run a fresh process, one at a time; median (min-max); "
             "ratio: the engine's seconds over DuckDB's of the same repetition; load: the 1-minute load "
             "average (`uptime`) before and after each run.", "",
             "| table | engine | whole statement s | ratio to DuckDB | method | stars (share) | peak RSS MiB | "
             "guarantee (>= 5 per QI vector, rows, stars) | same multiset as DuckDB | load |",
             "|---" * 10 + "|"]
    cases = sorted({(r["rows"], r["qis"]) for r in results}, key=lambda c: (c[1], c[0]))
    for rows, m in cases:
        runs = [r for r in results if (r["rows"], r["qis"]) == (rows, m)]
        duckdb = {key(r): r for r in runs if r["engine"] == "duckdb" and "seconds" in r}
        for engine in dict.fromkeys(r["engine"] for r in runs):
            lines.append(row(rows, m, engine, [r for r in runs if r["engine"] == engine], duckdb))
    failures = [r for r in results if "outcome" in r]  # a stopped run's last line is what the stop itself raised
    for r in failures:
        lines += ["", f"{r['rows']:,} x {r['qis']} on {r['engine']}, repetition {r['repetition']}: {r['outcome']}: "
                  f"`{r['stderr'].strip().splitlines()[-1] if r['stderr'].strip() else ''}`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="100000x30,20000x200")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--engines", default="duckdb,local,cluster")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a run may take before it is stopped")
    parser.add_argument("--data", default="/tmp/duckanon-bench-wide-spark", help="where the Parquet inputs are written")
    parser.add_argument("--tag", default="", help="results go to benchmarks/results/bench_wide_spark[_TAG].json")
    parser.add_argument("--report", action="store_true", help="no run: the Markdown from the JSON files")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # a child: one run, one JSON line
    parser.add_argument("--parquet", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--qis", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))  # finally blocks stop a cluster
        result = (run_duckdb(args.parquet, args.rows, args.qis) if args.engine == "duckdb"
                  else run_spark(args.engine, args.parquet, args.rows, args.qis))
        print(json.dumps(result))
        return
    if not args.report:
        measure([tuple(int(x) for x in case.split("x")) for case in args.cases.split(",")], args)
    text = markdown(sorted(RESULTS.glob("bench_wide_spark*.json")))
    (RESULTS / "bench_wide_spark.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
