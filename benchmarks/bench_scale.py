"""100 million rows on one machine (issue 18, target 4): ANONYMIZE on a file-backed database of
Adult replicated to 10M / 30M / 100M rows, k scaled with the copies, against the floor.

    python benchmarks/bench_scale.py                          # 10M, 30M, 100M; reps 3/3/2
    python benchmarks/bench_scale.py --rows 10000000 --reps 1 # one size, one repetition
    python benchmarks/bench_scale.py --operators              # also DuckDB's operator profile (one extra run each)
    python benchmarks/bench_scale.py --clean                  # delete the work dir's databases at the end

Input. `big` in /tmp/bench_scale/adult_<rows>.duckdb (--work-dir): every Adult row
(../shared/data/adult/adult.csv, read as bench_anonymize reads it) exactly `copies` times, with an
`id` BIGINT column (copy * 30,162 + Adult rowid), written inside DuckDB by one CREATE TABLE AS over
a cross join with range(copies), never through Python. Built once and reused while its row
count matches (--rebuild forces it). k = 5 x copies: the same combinatorial problem as Adult
with k = 5 (bench_anonymize's "scaled" case), 18,109 classes whatever the size.

Phases, each repetition of each in a fresh subprocess (so ru_maxrss never mixes, and DuckDB's
buffer pool starts empty for both; the OS page cache is warm for both), alternating within a
repetition (the order rotates from one repetition to the next):
  floor       bench_anonymize.floor_sql: one GROUP BY over the QIs and the SA into a temp table,
              plus one CREATE TABLE AS SELECT src.* joining the source to it with IS NOT DISTINCT FROM
  table       ANONYMIZE big WITH (k, qi = 8 QIs, sensitive = salary-class): no kept column
  keep        the same with keep = (id): the join-back path users with an id column take
  view        the same as `table` with materialize = 'view', when the option exists (probed)
Every connection is opened with DuckDB's memory_limit (--memory-limit, default 4GB) and a
temp_directory of its own under the work dir. Measured per run: wall and CPU seconds of the
statement, the run's CPU taken by other processes (bench_anonymize.Meter; > 10% of a core marks it
disturbed), ru_maxrss of the child, and, polled by the parent every 0.2 s: the child's RSS, the
bytes allocated in its temp directory and the database file's size (+ WAL). After the statement:
CHECKPOINT, the published object's bytes (used blocks of pragma_database_size before and after
dropping it), then it is dropped so every run starts from the source alone.

Profile (every ANONYMIZE run): the steps the progress listener hears (plan, histogram GROUP BY,
solver, publish), each with the peak RSS and temp bytes polled inside it, and the wall time of
every SQL statement the DuckDB backend runs (DuckDBBackend._run and .arrow wrapped in the child),
labelled as bench_anonymize labels them. --operators adds one profiled run per size and path with
DuckDB's JSON operator timings for each CREATE.

Results: benchmarks/results/bench_scale.{json,md} (--out), with the projection to 1 billion rows
from a least-squares line through the measured sizes, and what binds first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import duckdb

from bench_anonymize import (
    ADULT_CSV, ADULT_ROWS, FOREIGN_LIMIT, K, MARK, QI, SA, Meter, anonymize_sql, code_version, copies_for, floor_sql,
    label, q,
)
from duckdb_profile import operators, profiled
from machine import cpu_model

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
TABLE = "big"
SIZES = (10_000_000, 30_000_000, 100_000_000)
PATHS = ("table", "keep", "view")
RSS_LIMIT_GIB = 6.0
POLL_S = 0.2
GIB = 2**30


# --------------------------------------------------------------------------------------------
# In a child: build one database, or run one phase once.
# --------------------------------------------------------------------------------------------


def db_path(work: Path, rows: int) -> Path:
    return work / f"adult_{rows // 1_000_000}m.duckdb"


def statement_for(path: str, k: int) -> str:
    text = anonymize_sql(TABLE, k)  # "ANONYMIZE big WITH (k = .., qi = (..), sensitive = ..)"
    extra = {"table": "", "keep": ", keep = (id)", "view": ", materialize = 'view'"}[path]
    return text[:-1] + extra + ")"


def open_config(args) -> dict:
    config = {"temp_directory": args.temp_dir}
    if args.memory_limit != "none":  # none: DuckDB's default (80% of the machine's memory)
        config["memory_limit"] = args.memory_limit
    if args.threads:
        config["threads"] = args.threads
    return config


def build(args) -> dict:
    copies = copies_for(args.rows_one)
    final = Path(args.db)
    partial = final.with_suffix(".building")
    for stale in (partial, Path(str(partial) + ".wal")):
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    con = duckdb.connect(str(partial), config=open_config(args))
    con.execute(f"CREATE TEMP TABLE adult AS SELECT * FROM read_csv('{ADULT_CSV.as_posix()}', delim = ';', header = true)")
    (n_adult,) = con.execute("SELECT count(*) FROM adult").fetchone()
    con.execute(
        f"CREATE TABLE {TABLE} AS SELECT (r.i * {n_adult} + a.rid)::BIGINT AS id, a.* EXCLUDE (rid) "
        f"FROM (SELECT *, rowid AS rid FROM adult) a, range({copies}) r(i)")
    con.execute("DROP TABLE adult")
    con.execute("CHECKPOINT")
    (rows,) = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    con.close()
    partial.rename(final)
    return {"rows": rows, "copies": copies, "build_s": time.perf_counter() - started, "db_bytes": final.stat().st_size,
            "seconds": time.perf_counter() - started,
            "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def used_bytes(con) -> int:
    used, block = con.execute(
        "SELECT used_blocks, block_size FROM pragma_database_size() WHERE database_name = current_database()").fetchone()
    return int(used) * int(block)


class Steps:
    """The progress listener and the backend's SQL statements, with their times (epoch seconds, so
    the parent can line them up with what it polled)."""

    def __init__(self, profile_dir: Path | None = None):
        self.events: list[tuple[float, str]] = []
        self.sql: list[dict] = []
        self.profile_dir = profile_dir

    def listener(self, phase: str, info: dict) -> None:
        if len(self.events) < 500:
            self.events.append((time.time(), phase))

    def install(self) -> None:
        from duckanon.backends.duckdb import DuckDBBackend

        steps, run, arrow = self, DuckDBBackend._run, DuckDBBackend.arrow

        def timed_run(backend, sql, parameters=None):
            profile = steps.profile_dir is not None and sql.lstrip().upper().startswith("CREATE")
            record = {"step": step_label(sql), "start": time.time(), "sql": sql[:400]}
            path = steps.profile_dir / f"step{len(steps.sql):02d}.json" if profile else None
            started = time.perf_counter()
            try:
                with profiled(backend.con, path) if profile else nullcontext():
                    return run(backend, sql, parameters)
            finally:
                record["seconds"] = time.perf_counter() - started
                if profile:
                    found = operators(path, min_seconds=0.05)
                    if found is not None:  # a CREATE VIEW runs no query: no profile
                        record["operators"] = found
                steps.sql.append(record)

        def timed_arrow(backend, expression):
            sql = backend.render(expression)
            record = {"step": step_label(sql), "start": time.time(), "sql": sql[:400]}
            started = time.perf_counter()
            try:
                return arrow(backend, expression)
            finally:
                record["seconds"] = time.perf_counter() - started
                steps.sql.append(record)

        DuckDBBackend._run, DuckDBBackend.arrow = timed_run, timed_arrow


def step_label(sql: str) -> str:
    """bench_anonymize.label, told apart for the statements of materialize = 'view'."""
    upper = " ".join(sql.split()).upper()
    if upper.startswith("CREATE OR REPLACE VIEW"):
        return "publish: CREATE VIEW over the counts"
    if upper.startswith("CREATE OR REPLACE TABLE") and '_COUNTS"' in upper.split(" AS ", 1)[0]:
        return "publish: counts table (view form)"
    return label(sql)


def coarse(events: list[tuple[float, str]], started: float, ended: float) -> list[dict]:
    """plan -> histogram -> solve -> publish, from the phases the listener heard."""
    marks = [("plan", started)]
    for when, phase in events:
        name = ("histogram" if phase.startswith("building the class histogram") else
                "solve" if phase.startswith("solving") else "publish" if phase.startswith("publishing") else None)
        if name and name not in [m[0] for m in marks]:
            marks.append((name, when))
    marks.append(("end", ended))
    return [{"step": a[0], "start": a[1], "end": b[1], "seconds": b[1] - a[1]} for a, b in zip(marks, marks[1:])]


def run_phase(args) -> dict:
    import duckanon

    rows_one = args.rows_one
    k = K * copies_for(rows_one)
    con = duckanon.connect(args.db, config=open_config(args))
    raw = con.duckdb
    settings = dict(raw.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', 'threads', 'temp_directory', "
        "'preserve_insertion_order', 'max_temp_directory_size')").fetchall())
    target = "floor_out" if args.phase == "floor" else f"{TABLE}_anon"
    for stale in ("floor_out", f"{TABLE}_anon"):
        drop_object(raw, stale)
    raw.execute("CHECKPOINT")
    (rows,) = raw.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    source_used = used_bytes(raw)
    result = {"phase": args.phase, "rows": rows, "k": k, "settings": settings, "duckanon": duckanon.__file__,
              "source_used_bytes": source_used, "loadavg_before": os.getloadavg()}
    profile_dir = Path(args.profile_dir) if args.profile_dir else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    if args.phase == "floor":
        group, join = floor_sql(TABLE)
        raw.execute("DROP TABLE IF EXISTS floor_groups")
        epoch = time.time()
        profiles = {}

        def run(sql, name):
            if profile_dir is None:
                return raw.execute(sql)
            path = profile_dir / f"{name}.json"
            with profiled(raw, path):
                raw.execute(sql)
            profiles[name] = operators(path, min_seconds=0.05)

        with Meter() as meter:
            run(group, "group")
            middle = time.perf_counter()
            run(join, "join")
        group_s = middle - meter.started
        result["operators"] = profiles
        result.update(seconds=meter.wall, group_s=group_s, join_s=meter.wall - group_s,
                      steps=[{"step": "floor: GROUP BY -> temp", "start": epoch, "end": epoch + group_s, "seconds": group_s},
                             {"step": "floor: join-back CTAS", "start": epoch + group_s, "end": epoch + meter.wall,
                              "seconds": meter.wall - group_s}])
        (result["groups"],) = raw.execute("SELECT count(*) FROM floor_groups").fetchone()
    else:
        steps = Steps(profile_dir)
        steps.install()
        text = statement_for(args.phase, k)
        result["statement"] = text
        epoch = time.time()
        with Meter() as meter:
            summary = con.anonymize(text, progress=steps.listener)
        ended = epoch + meter.wall
        result.update(seconds=meter.wall, summary_seconds=summary.seconds, summary={
            key: getattr(summary, key) for key in ("rows", "classes", "min_class_size", "stars", "suppressed_rows",
                                                    "method", "optimal", "published_rows", "target")},
            steps=coarse(steps.events, epoch, ended), sql=steps.sql, events=steps.events[:50])
    result.update(meter.record())
    result["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    raw.execute("CHECKPOINT")
    result["checkpoint_after_s"] = time.perf_counter() - started
    (result["published_count"],) = raw.execute(f"SELECT count(*) FROM {target}").fetchone()
    if args.phase == "view":
        started = time.perf_counter()
        raw.execute(f"SELECT count(DISTINCT {q(QI[0])}), sum(hash({', '.join(q(c) for c in QI + [SA])})) FROM {target}").fetchone()
        result["view_scan_s"] = time.perf_counter() - started
    result["with_output_used_bytes"] = used_bytes(raw)
    result["object_kind"] = drop_object(raw, target)
    raw.execute("DROP TABLE IF EXISTS floor_groups")
    raw.execute("CHECKPOINT")
    result["after_drop_used_bytes"] = used_bytes(raw)
    result["output_bytes"] = result["with_output_used_bytes"] - result["after_drop_used_bytes"]
    result["file_bytes_after"] = Path(args.db).stat().st_size
    con.close()
    return result


def drop_object(raw, name: str) -> str | None:
    """Drop the table or view `name` (and a view's own tables: whatever duckanon made for it)."""
    kind = raw.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()
    if kind is None:
        return None
    if kind[0] == "VIEW":
        raw.execute(f"DROP VIEW {name}")
        # materialize = 'view' keeps its counts in a table of its own: drop any table the view named
        for (other,) in raw.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND table_name NOT IN (?, 'floor_out')",
                                    [TABLE]).fetchall():
            raw.execute(f'DROP TABLE "{other}"')
    else:
        raw.execute(f"DROP TABLE {name}")
    return kind[0]


def child(args) -> None:
    result = build(args) if args.phase == "build" else run_phase(args)
    print(MARK + json.dumps(result, default=str), flush=True)


# --------------------------------------------------------------------------------------------
# In the parent: the polling, one subprocess per run, the table and the projection.
# --------------------------------------------------------------------------------------------


def dir_bytes(path: Path) -> tuple[int, int]:
    """(allocated, apparent) bytes of the files under `path`."""
    allocated = apparent = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return allocated, apparent


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Poller(threading.Thread):
    """Samples (epoch, RSS KiB, temp allocated, temp apparent, database file + WAL bytes)."""

    def __init__(self, pid: int, temp: Path, db: Path):
        super().__init__(daemon=True)
        self.pid, self.temp, self.db = pid, temp, db
        self.samples: list[tuple[float, int, int, int, int]] = []
        self.stop = threading.Event()

    def run(self):
        wal = Path(str(self.db) + ".wal")
        while not self.stop.is_set():
            allocated, apparent = dir_bytes(self.temp)
            db = sum(p.stat().st_size for p in (self.db, wal) if p.exists())
            self.samples.append((time.time(), rss_kib(self.pid), allocated, apparent, db))
            self.stop.wait(POLL_S)


def run_child(phase: str, rows: int, args, db: Path, profile_dir: Path | None = None) -> dict:
    temp = args.work_dir / "tmp" / f"{rows // 1_000_000}m_{phase}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.parent.mkdir(parents=True, exist_ok=True)  # DuckDB creates the temp directory, not its parents
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--rows-one", str(rows), "--db", str(db),
               "--temp-dir", str(temp), "--memory-limit", args.memory_limit]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if profile_dir is not None:
        command += ["--profile-dir", str(profile_dir)]
    print(f"  {rows:,} rows: {phase}{' (operator profile)' if profile_dir else ''} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO / "benchmarks",
                            env=args.env)
    poller = Poller(proc.pid, temp, db)
    poller.start()
    out, err = proc.communicate()
    poller.stop.set()
    poller.join()
    shutil.rmtree(temp, ignore_errors=True)
    lines = [line for line in out.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (out + err)[-3000:]
        print(f"  {phase} at {rows:,} rows FAILED (exit code {proc.returncode}):\n{tail}", file=sys.stderr, flush=True)
        return {"phase": phase, "rows_one": rows, "failed": True, "returncode": proc.returncode, "error": tail,
                **peaks(poller.samples)}
    result = json.loads(lines[-1][len(MARK):])
    result.update(peaks(poller.samples))
    for step in result.get("steps", []):
        step.update(peaks([s for s in poller.samples if step["start"] <= s[0] <= step["end"]]))
    result["samples_1s"] = [s for i, s in enumerate(poller.samples) if i % int(1 / POLL_S) == 0]
    print(f"  {rows:,} rows: {phase} {result.get('seconds', float('nan')):.1f} s, peak RSS {result['ru_maxrss_mib']:,.0f} MiB, "
          f"temp {result['peak_temp_bytes'] / GIB:.2f} GiB (child {time.perf_counter() - started:.0f} s)",
          file=sys.stderr, flush=True)
    return result


def peaks(samples) -> dict:
    if not samples:
        return {"peak_rss_polled_mib": 0.0, "peak_temp_bytes": 0, "peak_temp_apparent_bytes": 0, "peak_db_file_bytes": 0}
    return {"peak_rss_polled_mib": max(s[1] for s in samples) / 1024, "peak_temp_bytes": max(s[2] for s in samples),
            "peak_temp_apparent_bytes": max(s[3] for s in samples), "peak_db_file_bytes": max(s[4] for s in samples)}


def ensure_db(rows: int, args) -> dict:
    db = db_path(args.work_dir, rows)
    want = copies_for(rows) * ADULT_ROWS
    if db.exists() and not args.rebuild:
        try:
            con = duckdb.connect(str(db), read_only=True)
            (have,) = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
            con.close()
            if have == want:
                print(f"  reusing {db} ({have:,} rows, {db.stat().st_size / GIB:.2f} GiB)", file=sys.stderr, flush=True)
                return {"rows": have, "reused": True, "db_bytes": db.stat().st_size}
        except duckdb.Error as error:
            print(f"  {db} unusable ({error}); rebuilding", file=sys.stderr)
    for old in (db, Path(str(db) + ".wal")):
        old.unlink(missing_ok=True)
    built = run_child("build", rows, args, db)
    if built.get("failed"):
        raise SystemExit(f"could not build {db}")
    return {**built, "reused": False}


PROBE = """
import duckanon
con = duckanon.connect()
con.execute("CREATE TABLE t AS SELECT 'a' AS x, 'b' AS s FROM range(3)")
try:
    con.anonymize("ANONYMIZE t WITH (k = 1, qi = (x), sensitive = s, materialize = 'view')")
    print("yes", duckanon.__file__)
except Exception as error:
    print("no", duckanon.__file__, error)
"""


def view_supported(env: dict) -> bool:
    """Whether the duckanon under test takes materialize = 'view' (the lead adds it; absent before)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd="/")
    print(f"  materialize = 'view' probe: {done.stdout.strip() or done.stderr.strip()[-300:]}", file=sys.stderr)
    return done.stdout.startswith("yes")


def snapshot_code(args) -> tuple[dict, str]:
    """A frozen copy of the code under test, so that edits made in the working tree while the
    benchmark runs (other sessions share it) cannot change the code between runs: --code head
    (default) or --code <commit> extracts the committed duckanon/ and sql/ (git archive), --code worktree copies
    them as they are now, --code installed uses whatever `import duckanon` finds. Returns the
    children's environment and a description."""
    env = dict(os.environ)
    if args.code == "installed":
        return env, code_version()
    ref = "HEAD" if args.code in ("head", "worktree") else args.code
    head = subprocess.run(["git", "rev-parse", "--short", ref], capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%H%M%S")
    target = args.work_dir / "code" / (f"{head}-worktree-{stamp}" if args.code == "worktree" else head)
    if args.code != "worktree":
        if not (target / "duckanon").exists():
            target.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(["git", "archive", head, "duckanon", "sql"], capture_output=True, cwd=REPO, check=True)
            subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        description = f"{head} (committed, extracted to {target})"
    else:
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for part in ("duckanon", "sql"):
            shutil.copytree(REPO / part, target / part, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "duckanon", "sql"],
                               capture_output=True, text=True, cwd=REPO).stdout.split("\n")
        changed = sorted(line[3:] for line in dirty if line.strip())
        description = f"{head} + the working tree at {stamp} UTC (uncommitted: {', '.join(changed) or 'none'})"
    env["PYTHONPATH"] = str(target) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env, description


def median(values):
    values = sorted(values)
    n = len(values)
    return (values[(n - 1) // 2] + values[n // 2]) / 2 if n else float("nan")


def summarize(results: dict, sizes, paths) -> list[dict]:
    table = []
    for rows in sizes:
        runs = results[str(rows)]
        floors = [r for r in runs["floor"] if not r.get("failed")]
        for path in paths:
            anon = runs.get(path, [])
            ok = [r for r in anon if not r.get("failed")]
            if not anon:
                continue
            # paired ratios: the ANONYMIZE and floor runs of the same repetition
            pairs = [(a, f) for a, f in zip(anon, runs["floor"]) if not a.get("failed") and not f.get("failed")]
            ratios = [a["seconds"] / f["seconds"] for a, f in pairs]
            # CPU seconds of the two processes: less sensitive than wall time to other work on the machine
            cpu_ratios = [a["cpu"] / f["cpu"] for a, f in pairs]
            row = {
                "rows": ok[0]["rows"] if ok else rows, "path": path, "k": K * copies_for(rows), "reps": len(anon),
                "failed": len(anon) - len(ok),
                "anonymize_s": [r["seconds"] for r in ok], "floor_s": [r["seconds"] for r in floors],
                "ratio_median": median(ratios), "ratios": ratios,
                "cpu_ratio_median": median(cpu_ratios), "cpu_ratios": cpu_ratios,
                "ratio_of_best": min(r["seconds"] for r in ok) / min(f["seconds"] for f in floors) if ok and floors else None,
                "peak_rss_mib": max((r.get("ru_maxrss_mib", 0) for r in anon), default=0),
                "peak_rss_polled_mib": max((r["peak_rss_polled_mib"] for r in anon), default=0),
                "floor_peak_rss_mib": max((f.get("ru_maxrss_mib", 0) for f in floors), default=0),
                "peak_temp_bytes": max((r["peak_temp_bytes"] for r in anon), default=0),
                "floor_peak_temp_bytes": max((f["peak_temp_bytes"] for f in floors), default=0),
                "output_bytes": median([r["output_bytes"] for r in ok]) if ok else None,
                "floor_output_bytes": median([f["output_bytes"] for f in floors]) if floors else None,
                "source_bytes": ok[0]["source_used_bytes"] if ok else None,
                "peak_db_file_bytes": max((r["peak_db_file_bytes"] for r in anon), default=0),
                "cpu_s": median([r["cpu"] for r in ok]) if ok else None,
                "floor_cpu_s": median([f["cpu"] for f in floors]) if floors else None,
                "foreign_cpu_share": [round(r["foreign_cpu"] / r["wall"], 2) for r in ok],
                "floor_foreign_cpu_share": [round(f["foreign_cpu"] / f["wall"], 2) for f in floors],
                "clean": sum(r["clean"] for r in ok), "floor_clean": sum(f["clean"] for f in floors),
                "stars": ok[0]["summary"]["stars"] if ok else None, "method": ok[0]["summary"]["method"] if ok else None,
                "published_rows": ok[0]["published_count"] if ok else None,
                "view_scan_s": median([r["view_scan_s"] for r in ok if "view_scan_s" in r]) if path == "view" else None,
            }
            table.append(row)
    return table


def fmt_spread(values) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def markdown_table(table: list[dict]) -> str:
    lines = ["| rows | path | k | ANONYMIZE s | floor s | ratio (paired: median, range) | CPU ratio | peak RSS MiB (ANONYMIZE / floor) "
             "| peak temp GiB (ANONYMIZE / floor) | source DB GiB | output GiB (ANONYMIZE / floor) | CPU s (ANONYMIZE / floor) "
             "| reps (undisturbed) | stars |",
             "|" + "---|" * 14]
    for r in table:
        ratio = (f"{r['ratio_median']:.2f} ({min(r['ratios']):.2f}-{max(r['ratios']):.2f})" if r["ratios"] else "-")
        cpu_ratio = (f"{r['cpu_ratio_median']:.2f} ({min(r['cpu_ratios']):.2f}-{max(r['cpu_ratios']):.2f})"
                     if r["cpu_ratios"] else "-")
        out = r["output_bytes"] / GIB if r["output_bytes"] is not None else float("nan")
        lines.append(
            f"| {r['rows']:,} | {r['path']} | {r['k']:,} | {fmt_spread(r['anonymize_s'])} | {fmt_spread(r['floor_s'])} | {ratio} | {cpu_ratio} "
            f"| {r['peak_rss_mib']:,.0f} / {r['floor_peak_rss_mib']:,.0f} "
            f"| {r['peak_temp_bytes'] / GIB:.2f} / {r['floor_peak_temp_bytes'] / GIB:.2f} "
            f"| {(r['source_bytes'] or 0) / GIB:.2f} | {out:.3f} / {(r['floor_output_bytes'] or 0) / GIB:.3f} "
            f"| {r['cpu_s'] or 0:.1f} / {r['floor_cpu_s'] or 0:.1f} "
            f"| {r['reps']} ({r['clean']}, floor {r['floor_clean']}){' FAILED x' + str(r['failed']) if r['failed'] else ''} "
            f"| {r['stars'] if r['stars'] is None else format(r['stars'], ',')} |")
    return "\n".join(lines)


def profile_of(runs: list[dict]) -> dict | None:
    """The per-step profile of the fastest successful run."""
    ok = [r for r in runs if not r.get("failed") and "sql" in r]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["seconds"])
    statements = {}
    for s in best["sql"]:
        statements.setdefault(s["step"], 0.0)
        statements[s["step"]] += s["seconds"]
    return {"seconds": best["seconds"], "steps": best["steps"],
            "sql": sorted(({"step": k, "seconds": v} for k, v in statements.items()), key=lambda s: -s["seconds"]),
            "operators": [s for s in best["sql"] if s.get("operators")]}


def markdown_profile(results: dict, sizes, paths) -> str:
    lines = []
    for rows in sizes:
        for path in paths:
            prof = profile_of(results[str(rows)].get(path, []))
            if prof is None:
                continue
            steps = ", ".join(f"{s['step']} {s['seconds']:.2f} s" + (
                f" (RSS {s['peak_rss_polled_mib']:,.0f} MiB, temp {s['peak_temp_bytes'] / GIB:.2f} GiB)"
                if s["peak_rss_polled_mib"] else "") for s in prof["steps"])
            lines.append(f"- {rows // 1_000_000}M `{path}` ({prof['seconds']:.1f} s): {steps}")
            top = [s for s in prof["sql"] if s["seconds"] >= 0.05][:6]
            lines.append("  - SQL: " + "; ".join(f"{s['step']} {s['seconds']:.2f} s" for s in top))
        floors = [f for f in results[str(rows)]["floor"] if not f.get("failed")]
        if floors:
            best = min(floors, key=lambda f: f["seconds"])
            lines.append(f"- {rows // 1_000_000}M floor ({best['seconds']:.1f} s): GROUP BY {best['group_s']:.2f} s, "
                         f"join-back CTAS {best['join_s']:.2f} s")
    return "\n".join(lines)


def markdown_operators(results: dict, sizes) -> str:
    lines = []
    for rows in sizes:
        for path, run in (results[str(rows)].get("operators") or {}).items():
            if run.get("failed"):
                continue
            if path == "floor":
                statements = [(f"floor {name}", ops) for name, ops in run.get("operators", {}).items()]
            else:
                statements = [(s["step"], s["operators"]) for s in run.get("sql", []) if s.get("operators")]
            for name, ops in statements:
                big = sorted(ops, key=lambda o: -o["seconds"])[:6]
                if any(o["operator"] != "(io)" for o in big):
                    lines.append(f"- {rows // 1_000_000}M `{path}` {name}: " + ", ".join(
                        f"{o['operator']} {o['seconds']:.1f} s" + (f" ({o['bytes'] / GIB:.2f} GiB written)" if o["operator"] == "(io)"
                                                                     else f" ({o['rows']:,} rows)") for o in big))
    return "\n".join(lines)


def fit(xs, ys):
    """Least-squares line y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def limit_bytes(memory_limit: str) -> float:
    """DuckDB's memory_limit as bytes ('4GB' = 4e9, '4GiB' = 4 x 2^30; 'none': 80% of RAM)."""
    if memory_limit == "none":
        return 0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    text = memory_limit.strip().upper()
    for unit, scale in (("KIB", 2**10), ("MIB", 2**20), ("GIB", 2**30), ("TIB", 2**40),
                        ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("B", 1)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * scale
    return float(text)


def project(table: list[dict], target_rows: int, free_disk: int, memory_limit: str = "4GB") -> dict:
    """Per path, at `target_rows`: time and CPU from the least-squares line through the sizes
    measured; disk (source, output) likewise. Memory: what the statement holds (peak RSS plus what
    it spilled to the temp directory) grows linearly, but DuckDB keeps its part within
    memory_limit and spills the rest: RSS = min(that line, memory_limit + the RSS above DuckDB's
    buffer pool, measured as the smallest size's RSS), temp = the line minus that cap."""
    out = {}
    cap_bytes = limit_bytes(memory_limit)
    for path in sorted({r["path"] for r in table}):
        rows = [r for r in table if r["path"] == path and r["anonymize_s"]]
        if len(rows) < 2:
            continue
        xs = [r["rows"] for r in rows]

        def at(values, xs=xs):
            a, b = fit(xs, values)
            return a + b * target_rows, b

        anon_s, anon_slope = at([median(r["anonymize_s"]) for r in rows])
        floor_s, _ = at([median(r["floor_s"]) for r in rows])
        cpu_s, cpu_slope = at([r["cpu_s"] for r in rows])
        floor_cpu_s, _ = at([r["floor_cpu_s"] for r in rows])
        held, held_slope = at([r["peak_rss_mib"] * 2**20 + r["peak_temp_bytes"] for r in rows])
        overhead = min(r["peak_rss_mib"] for r in rows) * 2**20  # Python, duckanon, the histogram, DuckDB's own
        rss = min(held, cap_bytes + overhead)
        # Only a path that spilled at a measured size holds temporary data (the keep path's sort):
        # elsewhere RSS grows with DuckDB's cache of the blocks the statement writes to the file,
        # which DuckDB evicts to the file, not to the temp directory. An upper bound (that cache
        # is counted as if it spilled too).
        spilled = any(r["peak_temp_bytes"] > 0 for r in rows)
        temp = max(0.0, held - (cap_bytes + overhead)) if spilled else 0.0
        source, _ = at([r["source_bytes"] for r in rows])
        output, _ = at([r["output_bytes"] for r in rows])
        need = temp + max(output, 0)
        out[path] = {
            "anonymize_s": anon_s, "s_per_100m_rows": anon_slope * 1e8, "floor_s": floor_s, "ratio": anon_s / floor_s,
            "cpu_s": cpu_s, "cpu_s_per_100m_rows": cpu_slope * 1e8, "floor_cpu_s": floor_cpu_s,
            "held_bytes": held, "held_bytes_per_100m_rows": held_slope * 1e8, "spilled_when_measured": spilled,
            "peak_rss_mib": rss / 2**20, "peak_temp_bytes": temp, "rows_at_which_spilling_starts":
                (cap_bytes + overhead - (held - held_slope * target_rows)) / held_slope if held_slope > 0 and spilled else None,
            "source_bytes": source, "output_bytes": output, "disk_needed_beyond_source": need,
            "disk_total_with_source": source + need, "free_disk_now": free_disk,
        }
    return out


def binding(p: dict) -> str:
    """Where the path's disk need beyond the source (temp files + output) reaches the free disk,
    with RSS held at DuckDB's memory_limit: the size at which this machine runs out first."""
    cap = p["held_bytes"] - p["peak_rss_mib"] * 2**20 - p["peak_temp_bytes"]  # 0 unless the cap binds

    def need(n):
        held = p["held_bytes"] + p["held_bytes_per_100m_rows"] / 1e8 * (n - 1e9)
        temp = max(0.0, held - p["peak_rss_mib"] * 2**20 - cap) if p["spilled_when_measured"] else 0.0
        return temp + max(p["output_bytes"], 0.0) * n / 1e9

    low, high = 1e6, 1e13
    if need(high) < p["free_disk_now"]:
        return "nothing within 10^13 rows but time"
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if need(middle) < p["free_disk_now"] else (low, middle)
    return (f"RSS stays at {p['peak_rss_mib'] / 1024:.1f} GiB (DuckDB's limit); the disk "
            f"({p['free_disk_now'] / GIB:.0f} GiB free: {'temp files + ' if p['spilled_when_measured'] else ''}output) "
            f"is full at about {low / 1e9:.1f} billion rows; 1B rows take ~{p['cpu_s'] / 60:.0f} CPU minutes")


def parent(args) -> None:
    if not ADULT_CSV.exists():
        raise SystemExit(f"missing {ADULT_CSV}")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    paths = [p for p in args.paths.split(",") if p]
    args.env, code = snapshot_code(args)
    if "view" in paths and not view_supported(args.env):
        print("  materialize = 'view' is not supported by this duckanon: the view path is skipped", file=sys.stderr)
        paths.remove("view")
    sizes = sorted(args.rows)
    df = shutil.disk_usage(args.work_dir)
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "duckdb": duckdb.__version__,
        "python": platform.python_version(), "cpu": cpu_model(), "cpus": os.cpu_count(),
        "mem_total_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB,
        "code": code, "memory_limit": args.memory_limit, "threads": args.threads or "DuckDB default",
        "work_dir": str(args.work_dir), "free_disk_before": df.free, "paths": paths,
        "command": " ".join(["python", "benchmarks/bench_scale.py", *sys.argv[1:]]),
        "loadavg_start": os.getloadavg(),
    }
    print(f"bench_scale: sizes {[f'{s:,}' for s in sizes]}, paths {paths}, memory_limit {args.memory_limit}, "
          f"code {meta['code']}, free disk {df.free / GIB:.0f} GiB", file=sys.stderr, flush=True)
    results: dict = {}
    builds = {}
    saved = Path(args.out).with_suffix(".json")
    if args.merge and saved.exists():  # keep the sizes measured before that this run does not measure
        before = json.loads(saved.read_text())
        for rows, runs in before["raw"].items():
            if int(rows) not in sizes:
                results[rows] = runs
                builds[rows] = {**before["builds"][rows], "meta": before["meta"]}
        sizes = sorted({*sizes, *(int(r) for r in results)})
    for rows in sizes:
        if str(rows) in results:
            continue
        builds[str(rows)] = ensure_db(rows, args)
        db = db_path(args.work_dir, rows)
        reps = args.reps or (3 if rows <= 30_000_000 else 2)
        phases = ["floor", *paths]
        runs = {phase: [] for phase in phases}
        for rep in range(reps):
            order = phases[rep % len(phases):] + phases[:rep % len(phases)]
            for phase in order:
                result = run_child(phase, rows, args, db)
                result["rep"] = rep
                runs[phase].append(result)
        if args.operators:
            runs["operators"] = {p: run_child(p, rows, args, db, args.work_dir / "profile" / f"{rows // 1_000_000}m_{p}")
                                 for p in phases}
        results[str(rows)] = runs
        save(args, meta, builds, results, sizes, paths)  # after each size: a partial run leaves its figures
    save(args, meta, builds, results, sizes, paths, final=True)
    if args.clean:
        for rows in sizes:
            db = db_path(args.work_dir, rows)
            for old in (db, Path(str(db) + ".wal")):
                old.unlink(missing_ok=True)


def save(args, meta, builds, results, sizes, paths, final=False) -> None:
    done = [s for s in sizes if str(s) in results]
    table = summarize(results, done, paths)
    meta["loadavg_end"] = os.getloadavg()
    projection = (project(table, 1_000_000_000, shutil.disk_usage(args.work_dir).free, meta["memory_limit"])
                  if len(done) >= 2 else {})
    text = render(meta, builds, table, results, done, paths, projection)
    if final:
        print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "builds": builds, "table": table, "projection_1b": projection, "raw": results}, indent=1, default=str))
    out.with_suffix(".md").write_text(text + "\n")


def rerender(args) -> None:
    out = Path(args.out)
    saved = json.loads(out.with_suffix(".json").read_text())
    results, meta = saved["raw"], saved["meta"]
    sizes = sorted(int(r) for r in results)
    paths = meta["paths"]
    table = summarize(results, sizes, paths)
    free = meta.get("free_disk_before", shutil.disk_usage("/tmp").free)
    projection = project(table, 1_000_000_000, free, meta["memory_limit"]) if len(sizes) >= 2 else {}
    text = render(meta, saved["builds"], table, results, sizes, paths, projection)
    saved.update(table=table, projection_1b=projection)
    out.with_suffix(".json").write_text(json.dumps(saved, indent=1, default=str))
    out.with_suffix(".md").write_text(text + "\n")
    print(text)


def render(meta, builds, table, results, sizes, paths, projection) -> str:
    lines = [
        f"# bench_scale: ANONYMIZE on Adult replicated to {', '.join(f'{s // 1_000_000}M' for s in sizes)} rows (file-backed)",
        "",
        f"{meta['date']}; code {meta['code']}; DuckDB {meta['duckdb']}; Python {meta['python']}; {meta['cpu']}, "
        f"{meta['cpus']} cores, {meta['mem_total_gib']:.0f} GiB; DuckDB memory_limit {meta['memory_limit']}, threads "
        f"{meta['threads']}; load average at start {meta['loadavg_start'][0]:.1f}, at end {meta['loadavg_end'][0]:.1f}.",
        f"Command: `{meta['command']}`",
        "",
        "Builds: " + "; ".join(f"{int(r) // 1_000_000}M: {b['rows']:,} rows, {b['db_bytes'] / GIB:.2f} GiB"
                               + (f", built in {b['build_s']:.0f} s" if "build_s" in b else ", reused")
                               + (f" (measured in an earlier run: {b['meta']['date']}, code {b['meta']['code']}, load "
                                  f"{b['meta']['loadavg_start'][0]:.1f})" if "meta" in b else "")
                               for r, b in sorted(builds.items(), key=lambda item: int(item[0]))),
        "",
        "Each cell: median (min-max) over the repetitions; every repetition of every phase in its own process, "
        "floor and ANONYMIZE alternating. Ratio: ANONYMIZE s / floor s of the same repetition. "
        "Peak RSS: ru_maxrss of the process (max over repetitions). Peak temp: bytes allocated in the "
        "connection's temp_directory, polled every 0.2 s. Output: bytes the published table (or view and its "
        "table) occupies in the file after CHECKPOINT. Undisturbed: other processes took <= "
        f"{FOREIGN_LIMIT:.0%} of a core during the run.",
        "",
        markdown_table(table),
        "",
        "## Where the time goes (fastest run of each)",
        "",
        markdown_profile(results, sizes, paths),
    ]
    operator_lines = markdown_operators(results, sizes)
    if operator_lines:
        lines += ["", "## DuckDB operators of the long statements (one extra profiled run; seconds summed over threads)", "",
                  operator_lines]
    if projection:
        lines += ["", "## Projection to 1,000,000,000 rows (least-squares line through the sizes measured)", ""]
        lines.append("| path | ANONYMIZE s | floor s | ratio | CPU s (ANONYMIZE / floor) | held in memory + temp GiB "
                     "| peak RSS MiB | temp GiB | spills from (rows) | source GiB | output GiB | disk beyond the source GiB "
                     "| free disk now GiB |")
        lines.append("|" + "---|" * 13)
        for path, p in projection.items():
            spill = p["rows_at_which_spilling_starts"]
            lines.append(f"| {path} | {p['anonymize_s']:,.0f} | {p['floor_s']:,.0f} | {p['ratio']:.2f} "
                         f"| {p['cpu_s']:,.0f} / {p['floor_cpu_s']:,.0f} | {p['held_bytes'] / GIB:.1f} | {p['peak_rss_mib']:,.0f} "
                         f"| {p['peak_temp_bytes'] / GIB:.1f} | {'-' if spill is None else format(spill, ',.0f')} "
                         f"| {p['source_bytes'] / GIB:.1f} | {p['output_bytes'] / GIB:.1f} "
                         f"| {p['disk_needed_beyond_source'] / GIB:.1f} | {p['free_disk_now'] / GIB:.0f} |")
        lines += ["", "What binds first (same lines, DuckDB memory_limit " + meta["memory_limit"] + "): " + "; ".join(
            f"`{path}`: {binding(p)}" for path, p in projection.items())]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES),
                        help="comma-separated sizes (default 10M,30M,100M); each is rounded to whole copies of Adult")
    parser.add_argument("--paths", default=",".join(PATHS), help="table,keep,view (view only where supported)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per size (default 3 up to 30M, 2 above)")
    parser.add_argument("--memory-limit", default="4GB",
                        help="DuckDB's memory_limit for every connection ('none': DuckDB's default, 80%% of RAM)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/bench_scale"))
    parser.add_argument("--rebuild", action="store_true", help="rebuild the databases even when they exist")
    parser.add_argument("--operators", action="store_true", help="one more run per size and path with operator profiles")
    parser.add_argument("--code", default="head",
                        help="the duckanon under test: head (committed HEAD, the default), a commit, worktree (a copy "
                             "of the working tree as it is now) or installed (whatever `import duckanon` finds)")
    parser.add_argument("--clean", action="store_true", help="delete the databases at the end")
    parser.add_argument("--out", default=str(RESULTS / "bench_scale"), help="results: <out>.json and <out>.md")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other sizes already in <out>.json (measured by an earlier run) and add these")
    parser.add_argument("--render", action="store_true", help="only rewrite <out>.md (and the table in <out>.json) from <out>.json")
    # in a child
    parser.add_argument("--phase", choices=("build", "floor", *PATHS), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rows-one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--temp-dir", help=argparse.SUPPRESS)
    parser.add_argument("--profile-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render:
        rerender(args)
    elif args.phase:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
