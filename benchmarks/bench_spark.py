"""Spark local[2] against DuckDB on Adult replicated to 10M rows, the same ANONYMIZE statement.

    pip install -e ".[spark,bench]" && python benchmarks/bench_spark.py [--rows 10000000]

Both read the same Parquet file (written once by DuckDB). Each engine runs in its own
subprocess; peak memory is the process's VmHWM plus, for Spark, its JVM's.
Step times: Spark's are read from the phases duckanon reports to a progress listener, DuckDB's too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"
RESULTS = ROOT / "benchmarks" / "results"
STATEMENT = ('ANONYMIZE big INTO big_anon WITH (k = 5, qi = (sex, age, race, "marital-status", education, '
             '"native-country", workclass), sensitive = occupation, method = \'mapprox\')')


def high_water_mib(pid: str = "self") -> float:
    """VmHWM (peak resident set) of a process. Not ru_maxrss: on Linux that survives fork+exec,
    so a child would report its parent's peak."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def phases():
    """The phases the statement reports, with the time each began (the listener passed as progress=)."""
    marks = []
    return marks, lambda phase, info: marks.append((phase, time.perf_counter()))


def step_times(marks, started, ended):
    out, previous = {}, started
    names = ["bind"] + [p for p, _ in marks]
    for name, (_, when) in zip(names, marks + [(None, ended)]):
        out[name] = round(when - previous, 3)
        previous = when
    return out


def run_duckdb(parquet: str) -> dict:
    import duckanon

    con = duckanon.connect()
    con.execute(f"CREATE VIEW big AS SELECT * FROM read_parquet('{parquet}')")
    marks, listener = phases()
    started = time.perf_counter()
    summary = con.anonymize(STATEMENT, progress=listener)
    ended = time.perf_counter()
    return {"engine": "duckdb", "seconds": ended - started, "steps": step_times(marks, started, ended),
            "stars": summary.stars, "peak_rss_mib": high_water_mib()}


def run_spark(parquet: str) -> dict:
    from pyspark.sql import SparkSession

    from duckanon.spark import execute

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "8g").config("spark.sql.warehouse.dir", "/tmp/duckanon-bench-wh")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(parquet).createOrReplaceTempView("big")
    marks, listener = phases()
    started = time.perf_counter()
    summary = execute(spark, STATEMENT, progress=listener)
    ended = time.perf_counter()
    spark.sql("DROP TABLE IF EXISTS big_anon")
    jvm = high_water_mib(str(spark._jvm.ProcessHandle.current().pid()))
    own = high_water_mib()
    spark.stop()
    return {"engine": "spark local[2]", "seconds": ended - started, "steps": step_times(marks, started, ended),
            "stars": summary.stars, "peak_rss_mib": own + jvm, "jvm_peak_rss_mib": jvm}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--engine")
    parser.add_argument("--parquet", default="/tmp/duckanon_adult_big.parquet")
    args = parser.parse_args()
    if args.engine:
        print(json.dumps(run_duckdb(args.parquet) if args.engine == "duckdb" else run_spark(args.parquet)))
        return
    import duckdb

    copies = -(-args.rows // 30162)
    duckdb.sql(f"COPY (SELECT a.* FROM read_csv('{ADULT}', delim=';') a, range({copies}) r LIMIT {args.rows}) "
               f"TO '{args.parquet}' (FORMAT parquet)")
    results = []
    for engine in ("duckdb", "spark"):
        out = subprocess.run([sys.executable, __file__, "--engine", engine, "--parquet", args.parquet],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(results[-1])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_spark.json").write_text(json.dumps(results, indent=1))
    lines = [f"| engine | seconds | steps (s) | peak RSS MiB | stars |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['engine']} | {r['seconds']:.1f} | {r['steps']} | {r['peak_rss_mib']:.0f} | {r['stars']} |")
    (RESULTS / "bench_spark.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
