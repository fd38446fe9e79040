"""Wide tables: the default method's stars against the lower bounds `exact` proves (issue 40, item 4).

    python benchmarks/bench_wide_quality.py [--rows 100,300,1000,3000] [--qis 10,30,100] [--k 5]
                                            [--watchdog 100] [--out bench_wide_quality.json]

The tables are subsets of bench_wide.py's: its generator (numpy PCG64, seed 7, column j drawn as
100,000 uniform values of 2 + (j mod 25) values, int8), the first `rows` rows of its first `m`
columns, so 1,000 x 30 is the top-left corner of bench_wide's 100,000 x 30 (and of its 100,000 x
200) table. Each case runs in a process of its own:

1. the default method: `ANONYMIZE w INTO w_anon WITH (k = 5, qi = (q0, ..., q{m-1}), seed = 1)`,
   the whole statement timed (3 times in the process on cases of at most --cheap cells, the
   table dropped between: the same release each time; the median is printed); the summary's
   method, stars, optimal and lower_bound (auto's own proven bound: the class-structure bound,
   and the bound of the exact attempt when auto ran one under its own work budget).
2. `exact` on the same histogram (duckanon.pipeline.problem.prepare builds it as the statement
   does), bounded by counts, not by a clock (no time_limit): exact.prepare builds the model
   (ExactTooLarge: more than 3,000,000 (pattern, class) pairs or 200,000 closed patterns: the
   case is reported as one exact cannot take), then exact.solve_model under a WorkBudget
   (--nodes branch-and-bound nodes, --lp-iterations dual simplex iterations for the LP
   relaxation, the MILP only on models of at most --max-int-vars integer variables; above, the
   LP relaxation's bound alone). Its incumbent is exact's own (the best heuristic), as with
   `method = 'exact'`. Reported: its stars, whether it proved the optimum, its lower bound (the
   MILP's dual bound or the LP relaxation's, rounded up), milp_status and message, seconds of
   the model and of the solve.
3. the class-structure bound (solver.bounds.k_anonymity_lower_bound) on its own.

The ratio printed is the default's stars over the best proven bound (exact's or the class
bound, whichever is higher): it is an upper bound on the default's distance to the optimum (1.000
with a proof means optimal). A case whose child runs past --watchdog seconds is killed (the
benchmark's guard, not part of any release) and reported with the phase it was in.
Results: benchmarks/results/<--out>.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MARK = "@@CASE@@ "
GENERATED_ROWS = 100_000  # bench_wide.py's table: each column is drawn this long


def child(rows: int, m: int, k: int, nodes: int, lp_iterations: int, max_int_vars: int, repetitions: int) -> None:
    import numpy as np
    import pyarrow as pa

    import duckanon
    from duckanon.pipeline.problem import prepare as prepare_problem
    from duckanon.solver.bounds import k_anonymity_lower_bound
    from duckanon.solver.exact import ExactTooLarge, WorkBudget, prepare, solve_model

    def emit(record):
        print(MARK + json.dumps(record), flush=True)

    rng = np.random.default_rng(7)
    columns = {f"q{j}": rng.integers(0, 2 + j % 25, GENERATED_ROWS, dtype=np.int8)[:rows] for j in range(m)}
    con = duckanon.connect()
    con.duckdb.register("generated", pa.table({"id": np.arange(rows), **columns}))
    con.duckdb.execute("CREATE TABLE w AS SELECT * FROM generated")
    con.duckdb.unregister("generated")
    qi = ", ".join(f"q{j}" for j in range(m))
    text = f"ANONYMIZE w INTO w_anon WITH (k = {k}, qi = ({qi}), seed = 1)"

    emit({"phase": "default"})
    seconds = []
    for _ in range(repetitions):  # the same statement and seed: the same release each time
        con.duckdb.execute("DROP TABLE IF EXISTS w_anon")
        started = time.perf_counter()
        summary = con.anonymize(text)
        seconds.append(round(time.perf_counter() - started, 3))
    emit({"default": {"method": summary.method, "stars": summary.stars, "classes": summary.classes,
                      "optimal": bool(summary.optimal), "lower_bound": summary.lower_bound,
                      "seconds": statistics.median(seconds), "repetitions": seconds,
                      "details": json.loads(summary.details)}})

    problem = prepare_problem(con.duckdb, text.replace(" INTO w_anon", ""))
    hist, models = problem.histogram, problem.models
    started = time.perf_counter()
    class_bound = int(k_anonymity_lower_bound(hist, k))
    emit({"class_bound": class_bound, "class_bound_seconds": round(time.perf_counter() - started, 3),
          "histogram_classes": int(hist.n_classes)})

    emit({"phase": "exact model"})
    started = time.perf_counter()
    try:
        model = prepare(hist, models)
    except ExactTooLarge as error:
        emit({"exact": {"outcome": "too large", "reason": str(error),
                        "model_seconds": round(time.perf_counter() - started, 3)}})
        return
    model_seconds = time.perf_counter() - started
    emit({"phase": "exact solve", "patterns": model.n_patterns, "integer_variables": model.n_int_vars,
          "model_seconds": round(model_seconds, 3)})
    started = time.perf_counter()
    solution = solve_model(model, budget=WorkBudget(nodes=nodes, lp_iterations=lp_iterations,
                                                    max_int_vars=max_int_vars))
    notes = solution.notes
    emit({"exact": {"outcome": "solved", "stars": int(solution.stars), "optimal": bool(solution.optimal),
                    "lower_bound": solution.lower_bound, "milp_status": notes.get("milp_status"),
                    "milp_message": notes.get("milp_message"), "dual_bound": notes.get("dual_bound"),
                    "incumbent_from": notes.get("incumbent_from"), "patterns": model.n_patterns,
                    "integer_variables": model.n_int_vars, "kernel_removed": notes.get("kernel_removed"),
                    "milp_budget": notes.get("milp_budget"), "model_seconds": round(model_seconds, 3),
                    "solve_seconds": round(time.perf_counter() - started, 3)}})


def run_case(rows: int, m: int, args) -> dict:
    command = [sys.executable, __file__, "--child", f"{rows}x{m}", "--k", str(args.k), "--nodes", str(args.nodes),
               "--lp-iterations", str(args.lp_iterations), "--max-int-vars", str(args.max_int_vars),
               "--repetitions", str(3 if rows * m <= args.cheap else 1)]
    load_before = Path("/proc/loadavg").read_text().split()[0]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.watchdog, cwd=ROOT)
        out, err, code, killed = proc.stdout, proc.stderr, proc.returncode, False
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        err = error.stderr.decode() if isinstance(error.stderr, bytes) else (error.stderr or "")
        code, killed = None, True
    result = {"rows": rows, "qis": m, "k": args.k, "wall_s": round(time.perf_counter() - started, 2),
              "load_before": float(load_before), "load_after": float(Path("/proc/loadavg").read_text().split()[0])}
    for line in out.splitlines():
        if line.startswith(MARK):
            result.update(json.loads(line[len(MARK):]))
    if killed:
        result["killed"] = f"stopped by the benchmark's watchdog after {args.watchdog} s in phase {result.get('phase')}"
    elif code != 0:
        result["failed"] = f"exit code {code}: {err[-600:]}"
    return result


def best_bound(result: dict) -> tuple[int | None, str]:
    candidates = []
    if result.get("class_bound") is not None:
        candidates.append((result["class_bound"], "class"))
    exact = result.get("exact") or {}
    if exact.get("lower_bound") is not None:
        candidates.append((exact["lower_bound"], "exact (optimum)" if exact.get("optimal") else "exact"))
    default = result.get("default") or {}
    if default.get("lower_bound") is not None:
        candidates.append((default["lower_bound"], "default's own"))
    if not candidates:
        return None, "-"
    return max(candidates, key=lambda c: (c[0], c[1].startswith("exact")))


def line(case: list[dict]) -> str:
    first = case[0]
    default = first.get("default")
    name = f"{first['rows']:>5,} x {first['qis']:>3}"
    if default is None:
        return f"{name}: {first.get('killed') or first.get('failed')}"
    seconds = default["repetitions"]
    bound, source = best_bound(first)
    ratio = "-" if not bound else f"{default['stars'] / bound:.3f}"
    exact = first.get("exact") or {}
    if exact.get("outcome") == "solved":
        exact_text = (f"exact {exact['stars']:,} stars, {'optimal' if exact['optimal'] else 'not proven'}, "
                      f"bound {exact['lower_bound']}, status {exact['milp_status']} ({exact['milp_message']}), "
                      f"model {exact['model_seconds']} s + solve {exact['solve_seconds']} s, "
                      f"{exact['integer_variables']:,} int vars")
    elif exact:
        exact_text = f"exact: {exact['outcome']}: {exact['reason']}"
    else:
        exact_text = f"exact: {first.get('killed') or first.get('failed') or 'no answer'}"
    return (f"{name}: default {default['method']} {default['stars']:,} stars "
            f"({'optimal' if default['optimal'] else 'not proven'}), median {statistics.median(seconds):.2f} s "
            f"of {seconds}; class bound {first.get('class_bound')}; {exact_text}; best bound {bound} ({source}); "
            f"ratio {ratio}; load {first['load_before']}-{first['load_after']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="100,300,1000,3000")
    parser.add_argument("--qis", default="10,30,100")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--lp-iterations", type=int, default=200_000)
    parser.add_argument("--max-int-vars", type=int, default=5_000)
    parser.add_argument("--watchdog", type=float, default=100)
    parser.add_argument("--cheap", type=int, default=30_000,
                        help="the default statement runs 3 times (in one process) on cases of at most this many cells")
    parser.add_argument("--repetitions", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--out", default="bench_wide_quality.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        rows, m = (int(x) for x in args.child.split("x"))
        child(rows, m, args.k, args.nodes, args.lp_iterations, args.max_int_vars, args.repetitions)
        return
    results = []
    for m in (int(x) for x in args.qis.split(",")):
        for rows in (int(x) for x in args.rows.split(",")):
            case = [run_case(rows, m, args)]
            results.append(case)
            print(line(case), flush=True)
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
