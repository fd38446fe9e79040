"""DuckDB, Spark local[2] and a Spark standalone cluster (a master and two 1-core workers, each its
own JVM process on this machine) on Adult replicated to 10M rows, the same ANONYMIZE statements
(issue 18, target 5).

    pip install -e ".[spark]" && python benchmarks/bench_spark.py [--rows 10000000] [--repetitions 3]
    python benchmarks/bench_spark.py --engines local --package /tmp/wt-before --tag before  # another checkout
    python benchmarks/bench_spark.py --ab before=ab_before after=ab_after --tag ab  # alternating runs, one table

Input: Adult (../shared/data/adult/adult.csv) replicated with a cross join on range() to --rows
rows, written once by DuckDB to one Parquet file; every engine reads that file (DuckDB through a
view over read_parquet, Spark through a temp view over spark.read.parquet). The replicated file
compresses to ~4 MB, which Spark's default split size (128 MB, 4 MB per file open) would read in
one task, so the Spark sessions read it in 1 MB splits (spark.sql.files.maxPartitionBytes), as
they would read a real 10M-row table in several.

Statements (seeded, so every engine publishes the same multiset):
  plain  k = 5, 7 QIs, sensitive occupation, mapprox: no kept column, so the published rows are
         generated from the class histogram (no second read of the source)
  keep   the same with keep = ("salary-class"): the source is joined back to the keyed table

Each (repetition, engine) is a fresh subprocess (engines alternate within a repetition). A Spark
process first runs an untimed warm-up statement on Adult itself (JIT, codegen), the cluster is
started before and stopped after (its start is reported apart). Per statement: wall time around
duckanon.spark.execute / con.anonymize; the steps from the phases the statement tells its
progress listener (bind, histogram = the GROUP BY into the cells table, solve, publish = keyed
table + target + check + comment); on Spark also the time of every statement the backend ran
(wrapping SparkBackend._run and the collect of its result). After timing, the published
multiset's fingerprint (sha256 of the sorted GROUP BY ALL counts) is compared across engines,
and the engine's copy floor is timed: CREATE TABLE AS SELECT of the published columns from the
source (Spark: a Parquet table), the cost of reading the source once and writing 10M rows.
Peak RSS: VmHWM of the Python process, plus the driver JVM, plus (cluster) each executor JVM.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"
RESULTS = ROOT / "benchmarks" / "results"
QI = '(sex, age, race, "marital-status", education, "native-country", workclass)'
STATEMENTS = {
    "plain": f"ANONYMIZE big INTO big_anon WITH (k = 5, qi = {QI}, sensitive = occupation, method = 'mapprox', seed = 1)",
    "keep": (f"ANONYMIZE big INTO big_anon_keep WITH (k = 5, qi = {QI}, sensitive = occupation, "
             "keep = (\"salary-class\"), method = 'mapprox', seed = 1)"),
}
TARGETS = {"plain": "big_anon", "keep": "big_anon_keep"}
PUBLISHED = ('sex, age, race, "marital-status", education, "native-country", workclass, occupation')
FLOOR = {"plain": PUBLISHED, "keep": PUBLISHED + ', "salary-class"'}  # the columns each statement publishes
WARMUP = f"ANONYMIZE adult INTO adult_warm WITH (k = 5, qi = {QI}, sensitive = occupation, method = 'mapprox', seed = 1)"
ENGINES = {"duckdb": "duckdb", "local": "spark local[2]", "cluster": "spark standalone (2 workers x 1 core)"}
STEPS = {"building the class histogram": "histogram", "solving": "solve", "publishing": "publish"}
SPARK_CONFIG = {"spark.ui.enabled": "false", "spark.sql.files.maxPartitionBytes": str(1 << 20)}


def high_water_mib(pid: int | str = "self") -> float:
    """VmHWM (peak resident set) of a process. Not ru_maxrss: on Linux that survives fork+exec,
    so a child would report its parent's peak."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def listener():
    """The phases the statement tells, with the time each began (passed as progress=)."""
    marks = []
    return marks, lambda phase, info: marks.append((phase, time.perf_counter()))


def step_times(marks, started: float, ended: float) -> dict[str, float]:
    out, previous, name = {}, started, "bind"
    for phase, when in marks + [("end", ended)]:
        out[name] = round(out.get(name, 0.0) + when - previous, 3)
        previous = when
        name = next((short for prefix, short in STEPS.items() if phase.startswith(prefix)), phase)
    return out


def fingerprint(rows) -> str:
    """Order-free digest of a published multiset given as (values..., count) rows."""
    text = sorted(json.dumps([None if v is None else str(v) for v in row]) for row in rows)
    return hashlib.sha256("\n".join(text).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------- engines


def measure(name: str, anonymize, query, floor_format: str = "", extra=dict) -> dict:
    """One statement on one engine: its time and steps (progress listener), its result, `extra()`
    taken right after it (before anything else runs), the fingerprint of what it published, then
    the engine's copy floor. `anonymize(text, listener)` runs it, `query(sql)` returns rows."""
    marks, told = listener()
    started = time.perf_counter()
    summary = anonymize(STATEMENTS[name], told)
    ended = time.perf_counter()
    record = {"seconds": round(ended - started, 3), "steps": step_times(marks, started, ended),
              "stars": summary.stars, "published_rows": summary.published_rows, **extra()}
    record["fingerprint"] = fingerprint(query(f"SELECT *, count(*) FROM {TARGETS[name]} GROUP BY ALL"))
    query(f"DROP TABLE IF EXISTS {TARGETS[name]}")
    started = time.perf_counter()
    query(f"CREATE TABLE copy_floor {floor_format}AS SELECT {FLOOR[name]} FROM big")
    record["copy_floor_seconds"] = round(time.perf_counter() - started, 3)
    query("DROP TABLE copy_floor")
    return record


def run_duckdb(parquet: str, adult: str, names: list[str]) -> dict:
    import duckanon

    con = duckanon.connect()
    con.execute(f"CREATE VIEW big AS SELECT * FROM read_parquet('{parquet}')")
    out = {"engine": "duckdb", "statements": {}}
    for name in names:
        out["statements"][name] = measure(name, lambda text, told: con.anonymize(text, progress=told),
                                          lambda query: con.execute(query).fetchall())
    out["peak_rss_mib"] = round(high_water_mib())
    return out


class StatementTimer:
    """Times every statement SparkBackend runs (its spark.sql call plus the collect of its result)."""

    def __init__(self):
        import duckanon.backends.spark as spark_backend

        self.log: list[list] = []
        run, collect = spark_backend.SparkBackend._run, spark_backend._Result._all
        timer = self

        def timed_run(backend, sql, parameters=None):
            began = time.perf_counter()
            result = run(backend, sql, parameters)
            timer.log.append([label(sql), time.perf_counter() - began])
            result._timing = timer.log[-1]
            return result

        def timed_collect(result):
            began = time.perf_counter()
            try:
                return collect(result)
            finally:
                if getattr(result, "_timing", None) is not None:
                    result._timing[1] += time.perf_counter() - began
                    result._timing = None

        spark_backend.SparkBackend._run = timed_run
        spark_backend._Result._all = timed_collect

    def take(self) -> list[list]:
        out = [[name, round(seconds, 3)] for name, seconds in self.log]
        self.log.clear()
        return out


def label(sql: str) -> str:
    """A statement's kind, without the scratch names' random suffixes."""
    import re

    head = re.sub(r"__duckanon_([a-z]+)_[0-9a-f]+", r"\1", sql)
    return head[:70]


def local_session(app: str, warehouse: str):
    """A SparkSession on local[2] (4 GB driver, SPARK_CONFIG), its tables under `warehouse`."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.driver.memory", "4g")
               .config("spark.sql.warehouse.dir", warehouse))
    for key, value in SPARK_CONFIG.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cluster_session(app: str):
    """A standalone cluster of two 1-core workers (2 GB executors) and a session on it (SPARK_CONFIG)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from spark_cluster import StandaloneCluster

    cluster = StandaloneCluster(workers=2, cores=1, memory="2560m").start()
    try:
        return cluster, cluster.session(app=app, executor_memory="2g", driver_memory="2g", config=SPARK_CONFIG)
    except BaseException:
        cluster.stop()
        raise


def spark_peak_rss(spark, cluster=None) -> dict:
    """Peak RSS (VmHWM) of this Python process, the driver JVM and (cluster) each executor JVM."""
    jvm = spark._jvm.ProcessHandle.current().pid()
    executors = [pid for worker in (cluster.worker_pids() if cluster else []) for pid in children(worker)]
    return {"driver_jvm_peak_rss_mib": round(high_water_mib(jvm)),
            "executor_peak_rss_mib": [round(high_water_mib(pid)) for pid in executors],
            "peak_rss_mib": round(high_water_mib() + high_water_mib(jvm) + sum(map(high_water_mib, executors)))}


def run_spark(engine: str, parquet: str, adult: str, names: list[str]) -> dict:
    from duckanon.spark import execute

    timer = StatementTimer()
    cluster = None
    warehouse = tempfile.mkdtemp(prefix="duckanon-bench-spark-warehouse-")  # local[2]'s tables, removed at the end
    out = {"engine": ENGINES[engine], "statements": {}}
    try:
        if engine == "cluster":
            began = time.perf_counter()
            cluster, spark = cluster_session("bench_spark")
            out["cluster_start_seconds"] = round(time.perf_counter() - began, 1)
        else:
            spark = local_session("bench_spark", warehouse)
        spark.read.parquet(parquet).createOrReplaceTempView("big")
        spark.read.parquet(adult).createOrReplaceTempView("adult")
        out["source_partitions"] = spark.table("big").rdd.getNumPartitions()
        out["default_parallelism"] = spark.sparkContext.defaultParallelism
        began = time.perf_counter()
        execute(spark, WARMUP)
        out["warmup_seconds"] = round(time.perf_counter() - began, 1)
        timer.take()
        for name in names:
            out["statements"][name] = measure(
                name, lambda text, told: execute(spark, text, progress=told), lambda query: spark.sql(query).collect(),
                floor_format="USING PARQUET ",
                extra=lambda name=name: {"queries": timer.take(),
                                         "target_files": len(spark.table(TARGETS[name]).inputFiles())})
        out.update(spark_peak_rss(spark, cluster))
        spark.sql("DROP TABLE IF EXISTS adult_warm")
        spark.stop()
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------- report


def spread(values: list[float]) -> str:
    values = sorted(values)
    digits = 0 if all(isinstance(v, int) for v in values) else 1
    if len(values) == 1 or values[0] == values[-1]:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({values[0]:.{digits}f}-{values[-1]:.{digits}f})"


def markdown(results: list[dict], args) -> str:
    by_engine: dict[str, list[dict]] = {}
    for r in results:
        by_engine.setdefault(r["engine"], []).append(r)
    lines = [f"Adult replicated to {args.rows:,} rows, one Parquet file; {args.repetitions} repetition(s), each engine "
             f"a fresh process; median (min-max) seconds; steps from the progress listener.", ""]
    for name in args.statements.split(","):
        lines += [f"**{name}**: `{STATEMENTS[name]}`", "",
                  "| engine | ANONYMIZE s | histogram | solve | publish | shares h/s/p | copy floor s | stars | same multiset |",
                  "|---|---|---|---|---|---|---|---|---|"]
        fingerprints = {r["statements"][name]["fingerprint"] for rs in by_engine.values() for r in rs}
        for engine, runs in by_engine.items():
            stats = [r["statements"][name] for r in runs]
            step = {s: [x["steps"].get(s, 0.0) for x in stats] for s in ("histogram", "solve", "publish")}
            total = [x["seconds"] for x in stats]
            shares = "/".join(f"{statistics.median(step[s]) / statistics.median(total):.0%}" for s in step)
            floor = [x["copy_floor_seconds"] for x in stats if "copy_floor_seconds" in x]
            lines.append(f"| {engine} | {spread(total)} | {spread(step['histogram'])} | {spread(step['solve'])} | "
                         f"{spread(step['publish'])} | {shares} | {spread(floor) if floor else '-'} | {stats[0]['stars']} | "
                         f"{'yes' if len(fingerprints) == 1 else 'NO: ' + stats[0]['fingerprint']} |")
        lines.append("")
        for engine, runs in by_engine.items():
            if "queries" not in runs[0]["statements"][name]:
                continue
            lines.append(f"{engine}, {name}: the backend's statements (median s): " + "; ".join(
                f"`{q[0][:40]}` {statistics.median(r['statements'][name]['queries'][i][1] for r in runs):.1f}"
                for i, q in enumerate(runs[0]["statements"][name]["queries"]) if q[1] >= 0.2)
                + f"; target files {runs[0]['statements'][name]['target_files']}")
        lines.append("")
    lines.append("| engine | peak RSS MiB (all its processes) | other |")
    lines.append("|---|---|---|")
    for engine, runs in by_engine.items():
        other = ", ".join(f"{k} {spread([r[k] for r in runs]) if isinstance(runs[0][k], (int, float)) else runs[0][k]}"
                          for k in ("cluster_start_seconds", "warmup_seconds", "source_partitions",
                                    "default_parallelism") if k in runs[0])
        lines.append(f"| {engine} | {spread([r['peak_rss_mib'] for r in runs])} | {other} |")
    return "\n".join(lines) + "\n"


# the backend's statements an A/B table shows apart, by the start of their label (`label`)
AB_QUERIES = {"keyed view": "CACHE TABLE `keyed`", "dictionaries": "SELECT ARRAY_SORT(COLLECT_SET(",
              "target CTAS": "CREATE TABLE big_anon", "count check": "SELECT COUNT(*) FROM big_anon"}


def ab_report(sides: dict[str, list[Path]], note: str = "") -> tuple[str, dict]:
    """Runs of two (or more) checkouts, each a list of result files of this script (one repetition
    each, run alternately), as one table per statement: median (min-max) seconds of the whole
    statement, its steps and the backend's statements of AB_QUERIES, the 1-minute load when each
    run ended, and whether every run published the same multiset."""
    runs = {side: [] for side in sides}
    commits = {}
    for side, files in sides.items():
        for path in files:
            data = json.loads(path.read_text())
            commits[side] = data["meta"]["commit"]
            runs[side] += data["results"]
    names = list(next(iter(runs.values()))[0]["statements"])
    columns = ["ANONYMIZE", "histogram", "publish", *AB_QUERIES, "target files", "load"]
    lines = [f"Spark local[2], {', '.join(f'{side} = {commits[side]}' for side in sides)}; "
             f"{max(len(r) for r in runs.values())} alternating runs per side, each a fresh process; "
             "median (min-max) seconds; load: the 1-minute load average when the run ended.", ""]
    if note:
        lines += [note, ""]
    lines += ["| statement | side | " + " | ".join(columns) + " |", "|---" * (len(columns) + 2) + "|"]
    fingerprints = set()
    for name in names:
        for side, results in runs.items():
            stats = [r["statements"][name] for r in results]
            fingerprints |= {(name, x["fingerprint"]) for x in stats}

            def query_seconds(prefix: str) -> str:
                found = [sum(q[1] for q in x["queries"] if q[0].startswith(prefix)) for x in stats
                         if any(q[0].startswith(prefix) for q in x["queries"])]
                return spread(found) if found else "-"

            cells = [spread([x["seconds"] for x in stats]),
                     *[spread([x["steps"].get(step, 0.0) for x in stats]) for step in ("histogram", "publish")],
                     *[query_seconds(prefix) for prefix in AB_QUERIES.values()],
                     spread([x["target_files"] for x in stats]), spread([r["load_1min"] for r in results])]
            lines.append(f"| {name} | {side} ({commits[side]}) | " + " | ".join(cells) + " |")
    same = len({f for _, f in fingerprints}) == len(names)
    lines += ["", f"Same published multiset on every run of every side: {'yes' if same else 'NO'} "
              f"(fingerprints {sorted(fingerprints)})"]
    return "\n".join(lines) + "\n", {"commits": commits, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--engines", default="duckdb,local,cluster")
    parser.add_argument("--statements", default="plain,keep")
    parser.add_argument("--data", default="/tmp/duckanon-bench-spark", help="where the Parquet inputs are written")
    parser.add_argument("--package", help="import duckanon from this checkout instead (e.g. a worktree of another commit)")
    parser.add_argument("--tag", default="", help="results go to benchmarks/results/bench_spark[_TAG].{json,md}")
    parser.add_argument("--ab", nargs="+", metavar="SIDE=TAG_PREFIX",
                        help="no run: combine the results tagged TAG_PREFIX_* of each side into one table "
                             "(e.g. before=codes_before after=codes_after), written under --tag")
    parser.add_argument("--note", default="", help="a line under the --ab table's heading")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # a child: one engine, one JSON line
    args = parser.parse_args()
    if args.ab:
        sides = {side: sorted(RESULTS.glob(f"bench_spark_{prefix}_*.json"))
                 for side, prefix in (item.split("=", 1) for item in args.ab)}
        missing = [side for side, files in sides.items() if not files]
        if missing:
            sys.exit(f"no results for {', '.join(missing)} in {RESULTS}")
        text, data = ab_report(sides, args.note)
        suffix = f"_{args.tag}" if args.tag else "_ab"
        (RESULTS / f"bench_spark{suffix}.json").write_text(json.dumps(data, indent=1))
        (RESULTS / f"bench_spark{suffix}.md").write_text(text)
        print(text)
        return
    data = Path(args.data)
    parquet, adult = data / f"adult_{args.rows}.parquet", data / "adult.parquet"
    names = args.statements.split(",")
    if args.engine:
        result = (run_duckdb(str(parquet), str(adult), names) if args.engine == "duckdb"
                  else run_spark(args.engine, str(parquet), str(adult), names))
        print(json.dumps(result))
        return
    import duckdb

    data.mkdir(parents=True, exist_ok=True)
    if not parquet.exists():
        copies = -(-args.rows // 30162)
        duckdb.sql(f"COPY (SELECT a.* FROM read_csv('{ADULT}', delim=';') a, range({copies}) r LIMIT {args.rows}) "
                   f"TO '{parquet}' (FORMAT parquet)")
    if not adult.exists():
        duckdb.sql(f"COPY (SELECT * FROM read_csv('{ADULT}', delim=';')) TO '{adult}' (FORMAT parquet)")
    env = dict(os.environ)
    if args.package:
        env["PYTHONPATH"] = args.package + os.pathsep + env.get("PYTHONPATH", "")
    results = []
    for repetition in range(args.repetitions):
        for engine in args.engines.split(","):
            run = subprocess.run([sys.executable, __file__, "--engine", engine, "--rows", str(args.rows),
                                  "--data", str(data), "--statements", args.statements],
                                 capture_output=True, text=True, env=env)
            if run.returncode != 0:
                sys.exit(f"{engine} failed:\n{run.stderr[-4000:]}")
            result = json.loads(run.stdout.strip().splitlines()[-1])
            result["repetition"], result["load_1min"] = repetition, round(os.getloadavg()[0], 2)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items()}), flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import cpu_model

    head = subprocess.run(["git", "-C", args.package or str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    meta = {"rows": args.rows, "repetitions": args.repetitions, "commit": head, "cpu": cpu_model(),
            "cores": os.cpu_count(), "statements": {n: STATEMENTS[n] for n in names}}
    suffix = f"_{args.tag}" if args.tag else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"bench_spark{suffix}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    text = f"commit {head}, {meta['cpu']}, {meta['cores']} cores\n\n" + markdown(results, args)
    (RESULTS / f"bench_spark{suffix}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
