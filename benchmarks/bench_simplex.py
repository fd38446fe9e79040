"""method = 'simplex' (optimal 2-anonymity) beside `exact` and `greedy` on rows that all need grouping.

    python benchmarks/bench_simplex.py                          # 5,000 Adult rows, 1 repetition
    python benchmarks/bench_simplex.py --rows 5000 --reps 3
    python benchmarks/bench_simplex.py --rows 50000 --source cup --exact-limit 900

Input: rows whose QI vector is unique in the file (so every row needs grouping), 8 QIs:
    adult  ../shared/data/adult/adult.csv, every column but occupation (8,841 unique rows of 30,162)
    cup    ../shared/data/cup/cup.csv, all 8 columns (all 63,441 rows are unique): for 50,000 rows,
           more than Adult has
The first --rows of them in the order of hash(rowid), rowid (deterministic for a DuckDB version).
The class histogram is built from those rows (duckanon.solver.Histogram.from_rows) and
duckanon.solver.solve(hist, [KAnonymity(2)], method) runs in its own subprocess per method and
repetition: wall and CPU seconds of solve, peak RSS of the subprocess (ru_maxrss), stars, optimal,
the proven lower bound. `exact` gets --exact-limit seconds (time_limit); simplex and greedy none.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from machine import cpu_model

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SOURCES = {
    "adult": (SHARED / "adult" / "adult.csv",
              ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]),
    "cup": (SHARED / "cup" / "cup.csv", ["ZIP", "AGE", "GENDER", "INCOME", "STATE", "RAMNTALL", "NGIFTALL", "MINRAMNT"]),
}
METHODS = ("simplex", "exact", "greedy")


def unique_rows(source: str, rows: int) -> list[tuple]:
    path, qi = SOURCES[source]
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM read_csv(?, delim=';')", [str(path)])
    columns = ", ".join(f'"{c}"' for c in qi)
    query = (f"SELECT {columns} FROM (SELECT *, rowid AS r, count(*) OVER (PARTITION BY {columns}) AS c FROM t) "
             f"WHERE c = 1 ORDER BY hash(r), r LIMIT {int(rows)}")  # (no user text in it)
    return [tuple(map(str, row)) for row in con.execute(query).fetchall()]


def run_one(source: str, rows: int, method: str, exact_limit: float) -> dict:
    from duckanon.solver import Histogram, KAnonymity, solve

    data = unique_rows(source, rows)
    hist = Histogram.from_rows(data, ["s"] * len(data))
    wall, cpu = time.perf_counter(), time.process_time()
    solution = solve(hist, [KAnonymity(2)], method, time_limit=exact_limit if method == "exact" else None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    keep = {key: solution.notes[key] for key in ("lp_bound", "lp_solves", "listed_groups", "milp_rounds", "stopped")
            if key in solution.notes}
    return {"method": method, "rows": len(data), "classes": hist.n_classes, "stars": solution.stars,
            "optimal": bool(solution.optimal), "lower_bound": solution.lower_bound, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "notes": keep}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--source", choices=sorted(SOURCES), default="adult")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--exact-limit", type=float, default=300.0)
    parser.add_argument("--watchdog", type=float, default=None, help="kill a run after this many seconds")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: run this method once, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.source, args.rows, args.one, args.exact_limit)))
        return
    print(f"# bench_simplex: {args.rows} {args.source} rows, CPU {cpu_model()}", flush=True)
    for rep in range(args.reps):
        for method in args.methods.split(","):
            load = Path("/proc/loadavg").read_text().split()[0]
            command = [sys.executable, __file__, "--one", method, "--rows", str(args.rows), "--source", args.source,
                       "--exact-limit", str(args.exact_limit)]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=args.watchdog)
            except subprocess.TimeoutExpired:
                print(json.dumps({"method": method, "rep": rep, "killed_after_s": args.watchdog,
                                  "load_before": float(load)}), flush=True)
                continue
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else json.dumps(
                {"method": method, "error": done.stderr.strip().splitlines()[-1:]})
            result = json.loads(line)
            result.update(rep=rep, load_before=float(load))
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
