"""method = 'simplex' (optimal 2-anonymity) beside `exact` and `greedy` on rows that all need grouping.

    python benchmarks/bench_simplex.py                          # 5,000 Adult rows, 1 repetition
    python benchmarks/bench_simplex.py --rows 5000 --reps 3
    python benchmarks/bench_simplex.py --rows 50000 --source cup --exact-limit 900
    python benchmarks/bench_simplex.py --exchange-sizes 25,50,100,150  # the exchange algorithm alone
    python benchmarks/bench_simplex.py --rows 5000 --methods simplex --milp-max-groups 2000  # a cut MILP

Input: rows whose QI vector is unique in the file (so every row needs grouping), 8 QIs:
    adult  ../shared/data/adult/adult.csv, every column but occupation (8,841 unique rows of 30,162)
    cup    ../shared/data/cup/cup.csv, all 8 columns (all 63,441 rows are unique): for 50,000 rows,
           more than Adult has
The first --rows of them in the order of hash(rowid), rowid (deterministic for a DuckDB version).
The class histogram is built from those rows (duckanon.solver.Histogram.from_rows) and
duckanon.solver.solve(hist, [KAnonymity(2)], method) runs in its own subprocess per method and
repetition: wall and CPU seconds of solve, peak RSS of the subprocess (ru_maxrss), stars, optimal,
the proven lower bound. `exact` gets --exact-limit seconds (time_limit); simplex and greedy none.
--milp-max-groups lowers simplex's MILP_MAX_GROUPS (a batch of more listed groups is covered in
pieces, not proven: a case whose MILP is cut, where the exchange algorithm runs on the components
of at most EXCHANGE_MAX_ROWS rows).

--exchange-sizes: the exchange algorithm (solver/exchange.py) alone, in a subprocess per size, on
the first n of those rows (one vertex per row, stars as costs): CPU and wall seconds, blossom
matchings, its stars beside simplex's optimal_cover on the same rows (proven or not).
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


def run_exchange(source: str, rows: int) -> dict:
    import numpy as np

    from duckanon.solver import Histogram
    from duckanon.solver.exchange import exchange_cover
    from duckanon.solver.simplex import optimal_cover

    data = unique_rows(source, rows)
    hist = Histogram.from_rows(data, ["s"] * len(data))
    codes = np.repeat(np.asarray(hist.codes), hist.sizes, axis=0)
    wall, cpu = time.perf_counter(), time.process_time()
    pair = 2.0 * (codes[:, None, :] != codes[None, :, :]).sum(axis=2)
    found = exchange_cover(pair, lambda a, b, c: 3.0 * ((codes[a] != codes[b]) | (codes[b] != codes[c])).sum(axis=-1),
                           upper=3.0 * codes.shape[1])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    other = time.process_time()
    cover = optimal_cover(np.asarray(hist.codes), hist.sizes.astype(np.int64), np.ones(hist.m))
    other = time.process_time() - other
    return {"exchange_rows": len(codes), "stars": found.cost, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "matchings": found.matchings, "mcpm_candidates": found.candidates, "ruled_out_by_bound": found.bounded,
            "simplex_stars": cover["cost"], "simplex_proven": bool(cover["proven"]),
            "simplex_bound": round(cover["bound"], 6), "simplex_cpu_s": round(other, 2),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def run_one(source: str, rows: int, method: str, exact_limit: float, milp_max_groups: int | None = None) -> dict:
    from duckanon.solver import Histogram, KAnonymity, solve

    if milp_max_groups is not None:
        import importlib

        importlib.import_module("duckanon.solver.simplex").MILP_MAX_GROUPS = milp_max_groups
    data = unique_rows(source, rows)
    hist = Histogram.from_rows(data, ["s"] * len(data))
    wall, cpu = time.perf_counter(), time.process_time()
    solution = solve(hist, [KAnonymity(2)], method, time_limit=exact_limit if method == "exact" else None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    keep = {key: solution.notes[key] for key in ("lp_bound", "lp_solves", "listed_groups", "milp_rounds", "stopped",
                                                 "exchange")
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
    parser.add_argument("--milp-max-groups", type=int, default=None)
    parser.add_argument("--exchange-sizes", default=None, help="comma-separated row counts: the exchange algorithm alone")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: run this method once, print JSON
    args = parser.parse_args()
    if args.one == "exchange":
        print(json.dumps(run_exchange(args.source, args.rows)))
        return
    if args.one:
        print(json.dumps(run_one(args.source, args.rows, args.one, args.exact_limit, args.milp_max_groups)))
        return
    if args.exchange_sizes:
        print(f"# bench_simplex --exchange-sizes: {args.source} rows, CPU {cpu_model()}", flush=True)
        for size in [int(x) for x in args.exchange_sizes.split(",")]:
            load = Path("/proc/loadavg").read_text().split()[0]
            command = [sys.executable, __file__, "--one", "exchange", "--rows", str(size), "--source", args.source]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=args.watchdog)
            except subprocess.TimeoutExpired:
                print(json.dumps({"exchange_rows": size, "killed_after_s": args.watchdog, "load_before": float(load)}),
                      flush=True)
                break
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else json.dumps(
                {"exchange_rows": size, "error": done.stderr.strip().splitlines()[-1:]})
            result = json.loads(line)
            result.update(load_before=float(load))
            print(json.dumps(result), flush=True)
        return
    print(f"# bench_simplex: {args.rows} {args.source} rows, CPU {cpu_model()}", flush=True)
    for rep in range(args.reps):
        for method in args.methods.split(","):
            load = Path("/proc/loadavg").read_text().split()[0]
            command = [sys.executable, __file__, "--one", method, "--rows", str(args.rows), "--source", args.source,
                       "--exact-limit", str(args.exact_limit)]
            if args.milp_max_groups is not None:
                command += ["--milp-max-groups", str(args.milp_max_groups)]
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
