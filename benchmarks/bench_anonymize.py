"""End-to-end benchmark of ANONYMIZE (k = 5, Adult, 8 QIs) against a plain GROUP BY + join floor.

    python benchmarks/bench_anonymize.py                 # Adult (30,162 rows) and Adult x 10M rows
    python benchmarks/bench_anonymize.py --quick         # Adult and Adult x 1M rows, one repetition
    python benchmarks/bench_anonymize.py --rows 2000000  # another size for the replicated input
    python benchmarks/bench_anonymize.py --profile       # also: per-step and per-operator profile
    python benchmarks/bench_anonymize.py --profile --out benchmarks/results/bench_anonymize_10m.json

Inputs (both loaded and replicated inside DuckDB, never through Python):
  adult  ../shared/data/adult/adult.csv, read with read_csv (';'-delimited, CRLF)
  big    Adult replicated to --rows rows with a cross join on range() (copy i of row r kept
         iff i * 30162 + r < rows); the same distinct (QI, SA) cells as Adult, so the class
         count is fixed and only the counts grow. Note: every class then has >= 331 rows, so
         the input is already 5-anonymous and the solver has nothing to suppress.
  scaled every Adult row exactly round(rows / 30162) times, with k = 5 x that copy count:
         the very same combinatorial problem as Adult with k = 5 (every class size and k
         scaled alike), so solver time can be compared with Adult's on equal terms

For each input the script measures, each as the best of --reps repetitions (the first warms up;
repetitions during which other processes took > 10% of a core are repeated, up to --max-reps):
  ANONYMIZE s   the summary row's `seconds` (parse, bind, class histogram, solver, publish)
  solver s      wall time inside duckanon.pipeline.problem.solve (the Python part), by wrapping it
  floor s       one GROUP BY over the QIs and the SA into a temp table (group s) plus one
                CREATE TABLE AS SELECT joining the source to it on the QI and SA columns with
                IS NOT DISTINCT FROM (join s): the same shape as ANONYMIZE's join-back
  ratio         ANONYMIZE s / floor s (when no column is kept ANONYMIZE publishes from the
                cell histogram without a join-back, so it can beat this "floor")
  peak RSS      ru_maxrss of a fresh subprocess per (input, phase), so figures never mix

Each (input, phase) runs in its own subprocess: the script re-invokes itself with
`--case adult|big|scaled --phase anonymize|floor|profile` and reads one JSON line back.
Per repetition the raw results also keep the process CPU time and the 1-minute load average,
to spot runs disturbed by other work on the machine (CPU ~ 2x wall = both cores busy).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import duckdb
from duckdb_profile import IO, operators, profiled

REPO = Path(__file__).resolve().parents[1]
ADULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.csv"
QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
SA = "salary-class"
K = 5
MARK = "@@BENCH@@ "
ADULT_ROWS = 30_162
CASES = ("adult", "big", "scaled")
# A repetition is "disturbed" when other processes used more than this share of one core.
FOREIGN_LIMIT = 0.10


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def anonymize_sql(table: str, k: int = K) -> str:
    return f"ANONYMIZE {table} WITH (k = {k}, qi = ({', '.join(q(c) for c in QI)}), sensitive = {q(SA)})"


def cpu_s() -> float:
    """CPU seconds (user + system, all threads) used by this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


# --------------------------------------------------------------------------------------------
# In the child process: load one input, run one phase.
# --------------------------------------------------------------------------------------------


def copies_for(rows: int, n_adult: int = ADULT_ROWS) -> int:
    return max(1, round(rows / n_adult))


def k_for(case: str, rows: int) -> int:
    """k = 5, except on the exact replica, where k is scaled with the copy count."""
    return K * copies_for(rows) if case == "scaled" else K


def load(con, case: str, rows: int) -> tuple[str, float]:
    started = time.perf_counter()
    con.execute(
        f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT_CSV.as_posix()}', delim = ';', header = true)"
    )
    table = "adult"
    if case == "big":
        (n_adult,) = con.execute("SELECT count(*) FROM adult").fetchone()
        copies = -(-rows // n_adult)
        # Deterministic: copy i of source row r is kept iff i * n_adult + rowid < rows.
        con.execute(
            f"CREATE TABLE big AS SELECT a.* EXCLUDE (rid) FROM (SELECT *, rowid AS rid FROM adult) a, "
            f"range({copies}) r(i) WHERE r.i * {n_adult} + a.rid < {rows}"
        )
        con.execute("DROP TABLE adult")
        table = "big"
    elif case == "scaled":
        # Every row exactly `copies` times: every class count is scaled by `copies`, so with
        # k scaled too the solver faces the very same problem as on Adult with k = 5.
        con.execute(f"CREATE TABLE big AS SELECT a.* FROM adult a, range({copies_for(rows)}) r(i)")
        con.execute("DROP TABLE adult")
        table = "big"
    return table, time.perf_counter() - started


class SolveTimer:
    """Wraps the `solve` that duckanon.pipeline.problem calls and accumulates its wall time."""

    def __init__(self):
        import duckanon.pipeline.problem

        self.pipeline_step = duckanon.pipeline.problem
        self.inner = duckanon.pipeline.problem.solve
        self.seconds = 0.0
        self.classes = None
        self.cells = None

    def __call__(self, hist, *args, **kwargs):
        self.classes = hist.n_classes
        self.cells = int((hist.sa_counts > 0).sum())
        started = time.perf_counter()
        try:
            return self.inner(hist, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started

    def __enter__(self):
        self.pipeline_step.solve = self
        return self

    def __exit__(self, *exc):
        self.pipeline_step.solve = self.inner


def machine_busy_s() -> float | None:
    """CPU seconds all processes on the machine have used since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time of one repetition, this process's CPU time, and the CPU time other processes
    (and the hypervisor) took meanwhile: `foreign` > FOREIGN_LIMIT x wall marks a disturbed run."""

    def __enter__(self):
        self.cpu, self.busy, self.load1 = cpu_s(), machine_busy_s(), os.getloadavg()[0]
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.started
        self.cpu = cpu_s() - self.cpu
        busy = machine_busy_s()
        self.foreign = max(0.0, busy - self.busy - self.cpu) if busy is not None and self.busy is not None else 0.0

    def record(self) -> dict:
        return {"wall": self.wall, "cpu": self.cpu, "foreign_cpu": self.foreign, "loadavg1_before": self.load1,
                "clean": self.foreign <= FOREIGN_LIMIT * self.wall}


def repeat(step, reps: int, max_reps: int) -> list[dict]:
    """Run `step` until `reps` clean repetitions (or `max_reps` in all); every run is kept."""
    runs = []
    while len(runs) < max_reps and sum(r["clean"] for r in runs) < reps:
        runs.append(step())
    return runs


def best(runs: list[dict], key: str) -> float:
    """Best (minimum) over the clean runs; over all runs when none was clean."""
    clean = [r[key] for r in runs if r["clean"]]
    return min(clean or [r[key] for r in runs])


def phase_anonymize(con, table: str, reps: int, max_reps: int, k: int) -> dict:
    state = {}

    def step() -> dict:
        con.execute(f"DROP TABLE IF EXISTS {table}_anon")
        with SolveTimer() as timer, Meter() as meter:
            con.execute(anonymize_sql(table, k))
            names = [d[0] for d in con.description]
            summary = dict(zip(names, con.fetchone()))
        state.update(summary=summary, timer=timer)
        return {"seconds": summary["seconds"], "solver": timer.seconds, **meter.record()}

    runs = repeat(step, reps, max_reps)
    (published_rows,) = con.execute(f"SELECT count(*) FROM {table}_anon").fetchone()
    return {
        "anonymize_s": best(runs, "seconds"),
        "solver_s": best(runs, "solver"),
        "clean_runs": sum(r["clean"] for r in runs),
        "runs": runs,
        "summary": state["summary"],
        "input_classes": state["timer"].classes,
        "input_cells": state["timer"].cells,
        "published_rows": published_rows,
    }


def floor_sql(table: str) -> tuple[str, str]:
    keys = QI + [SA]
    group = (
        f"CREATE TEMP TABLE floor_groups AS SELECT {', '.join(q(c) for c in keys)}, count(*) AS n "
        f"FROM {table} GROUP BY ALL"
    )
    on = " AND ".join(f"src.{q(c)} IS NOT DISTINCT FROM g.{q(c)}" for c in keys)
    join = f"CREATE TABLE floor_out AS SELECT src.* FROM {table} src JOIN floor_groups g ON {on}"
    return group, join


def phase_floor(con, table: str, reps: int, max_reps: int) -> dict:
    group, join = floor_sql(table)

    def step() -> dict:
        con.execute("DROP TABLE IF EXISTS floor_out")
        con.execute("DROP TABLE IF EXISTS floor_groups")
        with Meter() as meter:
            con.execute(group)
            middle = time.perf_counter()
            con.execute(join)
        group_s = middle - meter.started
        return {"group": group_s, "join": meter.wall - group_s, "floor": meter.wall, **meter.record()}

    runs = repeat(step, reps, max_reps)
    (out_rows,) = con.execute("SELECT count(*) FROM floor_out").fetchone()
    (groups,) = con.execute("SELECT count(*) FROM floor_groups").fetchone()
    # group s and join s come from the fastest clean run, so that they add up to floor s.
    clean = [r for r in runs if r["clean"]] or runs
    fastest = min(clean, key=lambda r: r["floor"])
    return {
        "floor_s": fastest["floor"],
        "group_s": fastest["group"],
        "join_s": fastest["join"],
        "clean_runs": sum(r["clean"] for r in runs),
        "runs": runs,
        "floor_rows": out_rows,
        "floor_groups": groups,
    }


class TimedConnection:
    """Stands in for the DuckDB connection inside run_anonymize and times every statement.

    The time of a statement includes fetching its result (fetchone / fetch_arrow_table), which
    is charged to the statement that produced it. Selected statements also get DuckDB's JSON
    operator profile.
    """

    def __init__(self, con, profile_dir: Path | None):
        self._con = con
        self.steps: list[dict] = []
        self.profile_dir = profile_dir

    def execute(self, sql, *args):
        step = {"sql": sql, "seconds": 0.0}
        self.steps.append(step)
        profile = self.profile_dir is not None and sql.lstrip().upper().startswith("CREATE")
        path = self.profile_dir / f"step{len(self.steps):02d}.json" if profile else None
        with profiled(self._con, path) if profile else nullcontext():
            started = time.perf_counter()
            self._con.execute(sql, *args)
            step["seconds"] += time.perf_counter() - started
        if profile:
            step["profile"] = str(path)
        return _TimedResult(self._con, step)

    def __getattr__(self, name):
        return getattr(self._con, name)


class _TimedResult:
    def __init__(self, con, step):
        self._con, self._step = con, step

    def __getattr__(self, name):
        target = getattr(self._con, name)
        if not name.startswith("fetch"):
            return target

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                self._step["seconds"] += time.perf_counter() - started

        return timed


def label(sql: str) -> str:
    text = " ".join(sql.split())
    upper = text.upper()
    if upper.startswith("CREATE TEMPORARY TABLE __DUCKANON_KEYED"):
        return "keyed: cells x parts -> published strings"
    if "__DUCKANON_CELLS" in upper and upper.startswith("CREATE"):
        return "cells: GROUP BY + DENSE_RANK codes"
    if upper.startswith("SELECT BOOL_OR") and "__DUCKANON_CELLS" in upper:
        return "cells: reject '*' values"
    if "__DUCKANON_CELLS" in upper and "ORDER BY" in upper:
        return "cells: fetch codes to Arrow"
    if upper.startswith("SELECT BOOL_OR(SPLIT)"):
        return "keyed: any split?"
    if upper.startswith("CREATE OR REPLACE") and "UNNEST(RANGE(" in upper:
        return "publish: expand keyed parts by count (no source pass)"
    if upper.startswith("CREATE OR REPLACE"):
        return "publish: join-back + ORDER BY hash"
    if upper.startswith("DROP"):
        return "drop temp tables"
    if upper.startswith(("BEGIN", "COMMIT")):
        return upper.split()[0].lower()
    return text[:60]


def phase_profile(con, table: str, out_dir: Path, k: int) -> dict:
    """One warm-up ANONYMIZE, then one with every statement timed and CREATEs profiled."""
    import duckanon.statements

    con.execute(anonymize_sql(table, k))
    con.execute(f"DROP TABLE IF EXISTS {table}_anon")
    out_dir.mkdir(parents=True, exist_ok=True)
    timed = TimedConnection(con.duckdb, out_dir)
    with SolveTimer() as timer:
        started = time.perf_counter()
        summary = duckanon.statements.run_anonymize(timed, anonymize_sql(table, k))
        wall = time.perf_counter() - started
    steps = [{"step": label(s["sql"]), "seconds": s["seconds"], "sql": s["sql"],
              "operators": operators(s["profile"]) if "profile" in s else None} for s in timed.steps]
    # The floor queries, profiled the same way, for comparison.
    floor = []
    for sql in floor_sql(table):
        path = out_dir / f"floor{len(floor)}.json"
        with profiled(con, path):
            started_floor = time.perf_counter()
            con.execute(sql)
            seconds = time.perf_counter() - started_floor
        floor.append({"sql": sql, "seconds": seconds, "operators": operators(path)})
    return {"wall": wall, "summary_seconds": summary.seconds, "solver_s": timer.seconds, "steps": steps, "floor": floor}


def child(args) -> None:
    import duckanon

    con = duckanon.connect()
    table, load_s = load(con, args.case, args.rows)
    (rows,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    k = k_for(args.case, args.rows)
    result = {"case": args.case, "phase": args.phase, "duckanon": duckanon.__file__, "rows": rows, "k": k, "load_s": load_s, "rss_after_load_mib": rss_mib(),
              "threads": con.execute("SELECT current_setting('threads')").fetchone()[0]}
    if args.phase == "anonymize":
        result.update(phase_anonymize(con, table, args.reps, args.max_reps, k))
    elif args.phase == "floor":
        result.update(phase_floor(con, table, args.reps, args.max_reps))
    else:
        result.update(phase_profile(con, table, Path(args.profile_dir) / args.case, k))
    result["peak_rss_mib"] = rss_mib()
    print(MARK + json.dumps(result, default=str), flush=True)


# --------------------------------------------------------------------------------------------
# In the parent: one subprocess per (input, phase), then the table.
# --------------------------------------------------------------------------------------------


def run_child(case: str, phase: str, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--case", case, "--phase", phase,
               "--rows", str(args.rows), "--reps", str(args.reps), "--max-reps", str(args.max_reps), "--profile-dir", args.profile_dir]
    print(f"  running {case}/{phase} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"{case}/{phase} failed with exit code {done.returncode}")
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    result = json.loads(lines[-1][len(MARK):])
    print(f"  {case}/{phase} done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return result


def table_rows(results: dict) -> list[dict]:
    rows = []
    names = {"adult": "Adult", "big": "Adult replicated", "scaled": "Adult x{copies} exact, k scaled"}
    for case in CASES:
        a, f = results[case]["anonymize"], results[case]["floor"]
        rows.append({
            "input": names[case].format(copies=a["rows"] // ADULT_ROWS),
            "k": a["k"],
            "rows": a["rows"],
            "classes": a["input_classes"],
            "cells": a["input_cells"],
            "anonymize_s": a["anonymize_s"],
            "solver_s": a["solver_s"],
            "floor_s": f["floor_s"],
            "group_s": f["group_s"],
            "join_s": f["join_s"],
            "ratio": a["anonymize_s"] / f["floor_s"],
            "rss_mib": a["peak_rss_mib"],
            "rss_load_mib": a["rss_after_load_mib"],
            "floor_rss_mib": f["peak_rss_mib"],
            "stars": a["summary"]["stars"],
            "method": a["summary"]["method"],
            "published_classes": a["summary"]["classes"],
            "suppressed_rows": a["summary"]["suppressed_rows"],
            "clean": f"{a['clean_runs']}/{len(a['runs'])}, {f['clean_runs']}/{len(f['runs'])}",
            "disturbed": a["clean_runs"] == 0 or f["clean_runs"] == 0,
        })
    return rows


def markdown_table(rows: list[dict]) -> str:
    header = ("| input | k | rows | classes | ANONYMIZE s | solver s | floor s (group by + join) | ratio "
              "| peak RSS MiB (ANONYMIZE / floor / after load) | stars | method | undisturbed reps (ANONYMIZE, floor) |")
    lines = [header, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['input']} | {r['k']:,} | {r['rows']:,} | {r['classes']:,} | {r['anonymize_s']:.3f} | {r['solver_s']:.3f} "
            f"| {r['floor_s']:.3f} ({r['group_s']:.3f} + {r['join_s']:.3f}) | {r['ratio']:.2f} "
            f"| {r['rss_mib']:,.0f} / {r['floor_rss_mib']:,.0f} / {r['rss_load_mib']:,.0f} "
            f"| {r['stars']:,} | {r['method']} | {r['clean']}{' DISTURBED' if r['disturbed'] else ''} |"
        )
    return "\n".join(lines)


def print_profile(result: dict) -> None:
    print(f"\nProfile of one ANONYMIZE on {result['case']} ({result['rows']:,} rows, k = {result['k']:,}) "
          f"(wall {result['wall']:.3f} s, solver {result['solver_s']:.3f} s):")
    def print_operators(ops) -> None:
        for op in ops or ():
            if op["seconds"] < 0.01:
                continue
            if op["operator"] == IO:
                print(f"  {'':10}  {IO:<24} {op['seconds']:7.3f} s reading + writing  {op['bytes']:,} bytes written")
            else:
                print(f"  {'':10}  {'  ' * op['depth']}{op['operator']:<24} {op['seconds']:7.3f} s (thread-summed)  rows {op['rows']:,}")

    for step in result["steps"]:
        print(f"  {step['seconds']:8.3f} s  {step['step']}")
        print_operators(step["operators"])
    for step in result["floor"]:
        print(f"  {step['seconds']:8.3f} s  floor: {step['sql'][:40]}...")
        print_operators(step["operators"])


def code_version() -> str:
    """Which duckanon the children import: the checkout's commit (and whether duckanon/ differs
    from it), or the directory it comes from when PYTHONPATH points elsewhere (a snapshot)."""
    found = subprocess.run([sys.executable, "-c", "import duckanon; print(duckanon.__file__)"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parent).stdout.strip()
    package = Path(found).resolve().parent if found else None
    if package is not None and package != REPO / "duckanon":
        return f"duckanon from {package}"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "duckanon"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    except OSError:
        return "unknown"
    return head + (" + uncommitted changes in duckanon/" if dirty else "")


def parent(args) -> None:
    if not ADULT_CSV.exists():
        raise SystemExit(f"missing {ADULT_CSV}")
    results: dict = {}
    for case in CASES:
        results[case] = {phase: run_child(case, phase, args) for phase in ("anonymize", "floor")}
    imported = {r["duckanon"] for phases in results.values() for r in phases.values()}
    if len(imported) != 1:
        print(f"WARNING: the children imported different duckanon packages: {sorted(imported)}", file=sys.stderr)
    rows = table_rows(results)
    meta = {
        "date": dt.date.today().isoformat(),
        "duckdb": duckdb.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "threads": results["big"]["anonymize"]["threads"],
        "reps": args.reps,
        "code": code_version(),
        "command": " ".join(["python", "benchmarks/bench_anonymize.py", *sys.argv[1:]]),
    }
    print(f"\nANONYMIZE end to end (k = {K}, Adult, {len(QI)} QIs); best of {args.reps}; "
          f"DuckDB {meta['duckdb']}, {meta['cpus']} cores, {meta['threads']} threads, {meta['date']}, code {meta['code']}\n")
    print(markdown_table(rows))
    print("\nclasses = distinct QI vectors in the input (the solver's input size); "
          "ratio = ANONYMIZE s / floor s; solver s = time inside duckanon.pipeline.problem.solve;\n"
          f"undisturbed = other processes used <= {FOREIGN_LIMIT:.0%} of a core during the repetition "
          "(best taken over those; over all runs if none)")
    for r in rows:
        print(f"  {r['input']}: published classes {r['published_classes']:,}, suppressed rows {r['suppressed_rows']:,}, "
              f"cells {r['cells']:,}")
    adult, big, scaled = rows
    print(f"\ntarget: ANONYMIZE <= 2x floor at {big['rows']:,} rows: ratio {big['ratio']:.2f} -> "
          f"{'MET' if big['ratio'] <= 2 else 'NOT MET'}")
    growth = big["solver_s"] / adult["solver_s"] if adult["solver_s"] else float("nan")
    print(f"target: solver time flat in rows at fixed classes ({adult['classes']:,} vs {big['classes']:,}): "
          f"{adult['solver_s']:.3f} s -> {big['solver_s']:.3f} s (x{growth:.2f})")
    growth = scaled["solver_s"] / adult["solver_s"] if adult["solver_s"] else float("nan")
    print(f"  same problem scaled (k = {scaled['k']:,}, {scaled['rows']:,} rows): {adult['solver_s']:.3f} s -> "
          f"{scaled['solver_s']:.3f} s (x{growth:.2f}); stars {adult['stars']:,} -> {scaled['stars']:,} "
          f"(x{scaled['stars'] / max(adult['stars'], 1):.0f})")
    if args.profile:
        for case in CASES:
            results[case]["profile"] = run_child(case, "profile", args)
            print_profile(results[case]["profile"])
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"meta": meta, "table": rows, "raw": results}, indent=2, default=str))
        print(f"\nraw results written to {out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="rows of the replicated input (default 10,000,000; 1,000,000 with --quick)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per timing, best taken (default 3; 1 with --quick)")
    parser.add_argument("--max-reps", type=int, default=None,
                        help="repeat up to this many times to get --reps undisturbed repetitions (default 2 x reps)")
    parser.add_argument("--quick", action="store_true", help="smaller and faster: 1M rows, one repetition")
    parser.add_argument("--profile", action="store_true", help="also profile each SQL step of one ANONYMIZE per input")
    parser.add_argument("--profile-dir", default=str(REPO / "benchmarks" / "results" / "profile"),
                        help="where DuckDB's JSON operator profiles go")
    parser.add_argument("--out", default=None, help="write the table and raw results as JSON here")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=("anonymize", "floor", "profile"), default="anonymize", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows is None:
        args.rows = 1_000_000 if args.quick else 10_000_000
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.max_reps is None:
        args.max_reps = 2 * args.reps
    args.max_reps = max(args.max_reps, args.reps)
    if args.case:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
