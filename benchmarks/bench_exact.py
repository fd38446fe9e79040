"""Quality yardstick for the optimal solvers: how far are the heuristics from the optimum?

    python benchmarks/bench_exact.py                      # all 6 cases, exact with a 60 s limit
    python benchmarks/bench_exact.py --time-limit 10      # shorter limit for exact
    python benchmarks/bench_exact.py --sizes 1000 --requests k5
    python benchmarks/bench_exact.py --out benchmarks/results/bench_exact.md

Input: Adult (../shared/data/adult/adult.csv, ';'-delimited, 30,162 rows), loaded with DuckDB's
read_csv into a table (insertion order kept, so `rowid` is the row's 0-based position in the
file). Quasi-identifiers: sex, age, race, marital-status.

Subsets (seeded by DuckDB's hash, deterministic for a given DuckDB version):
    SELECT * FROM adult ORDER BY hash(rowid), rowid LIMIT n      n = 1,000 / 5,000 / 30,162
(n = 30,162 is the whole table.)

Requests:
    k5     k = 5
    k5l3   k = 5, l = 3 (frequency l-diversity, the engine's default) on sensitive = occupation

The class histogram is built exactly as ANONYMIZE builds it: `duckanon.pipeline.problem.prepare(con,
"ANONYMIZE sub WITH (<request>, qi = (...))")` parses and binds the statement, runs the GROUP BY
in DuckDB and builds the privacy models, and writes nothing. Then `duckanon.solver.solve(hist, models, method)` is called directly for greedy, mapprox,
merge and exact (time_limit = --time-limit for exact), so that each method's stars and proven
lower bound can be read and timed separately (the publish step of ANONYMIZE is left out: it
does not change the stars). `dp` (about 20 rows) and `matching` (k = 2 / l = 2 only) do not apply
to these instances.

Each case runs in its own subprocess (`--case N --request R`), which prints one JSON line per
method; a case that exceeds a hard watchdog (10 x time limit + 120 s) is killed and reported.

Reported per case:
    exact       wall time of solve(method='exact') (prepare + heuristic incumbent + HiGHS) and
                whether it proved the optimum; if not, the gap (stars - lower_bound) / stars
    <method>    stars and the ratio stars / OPT when exact proved the optimum, otherwise
                stars / LB (marked "<="), LB the best proven lower bound of all methods of the
                case: an upper bound on the true ratio to the optimum
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from machine import cpu_model

ADULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.csv"
QI = ["sex", "age", "race", "marital-status"]
SENSITIVE = "occupation"
SIZES = (1000, 5000, 30162)
REQUESTS = {
    "k5": ("k = 5", "k = 5"),
    "k5l3": ("k = 5, l = 3, sensitive = occupation", "k = 5, l = 3 (occupation)"),
}
HEURISTICS = ("greedy", "mapprox", "merge")
MARK = "@@BENCH@@ "


# ---------------------------------------------------------------- one case (in a subprocess)

def run_case(n: int, request: str, time_limit: float) -> None:
    from duckanon.pipeline.problem import prepare
    from duckanon.solver import solve
    from duckanon.solver.exact import prepare as exact_model

    def emit(record):
        print(MARK + json.dumps(record), flush=True)

    # Time the phases of `exact` by wrapping the module's helpers (the package attribute `exact`
    # is the function, hence importlib): prepare, heuristic incumbent, MILP build, HiGHS call.
    exact_module = importlib.import_module("duckanon.solver.exact")
    phases: dict[str, float] = {}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0
        return wrapper

    for name, attribute in (("prepare", "prepare"), ("incumbent", "_heuristic"), ("build", "_build_milp"), ("highs", "_milp")):
        setattr(exact_module, attribute, timed(name, getattr(exact_module, attribute)))

    con = duckdb.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT_CSV.as_posix()}', delim = ';', header = true)")
    con.execute(f"CREATE TABLE sub AS SELECT * FROM adult ORDER BY hash(rowid), rowid LIMIT {int(n)}")
    qi = ", ".join(f'"{c}"' for c in QI)
    text = f"ANONYMIZE sub WITH ({REQUESTS[request][0]}, qi = ({qi}))"
    started = time.perf_counter()
    problem = prepare(con, text)
    hist, models = problem.histogram, problem.models
    model = exact_model(hist, models)
    emit({
        "kind": "case", "statement": text, "rows": hist.n_rows, "classes": hist.n_classes,
        "small_classes": int((hist.sizes < 5).sum()),
        "sa_values": int(hist.sa_counts.shape[1]) if problem.plan.sensitive else 0,
        "models": [str(m) for m in models], "histogram_s": round(time.perf_counter() - started, 4),
        "exact_patterns": model.n_patterns, "exact_int_vars": model.n_int_vars,
    })
    for method in (*HEURISTICS, "exact"):
        phases.clear()
        t0 = time.perf_counter()
        solution = solve(hist, models, method, problem.patterns, time_limit=time_limit if method == "exact" else None)
        seconds = time.perf_counter() - t0
        notes = {key: value for key, value in solution.notes.items()
                 if key in ("milp_status", "milp_message", "objective", "dual_bound", "integer_variables",
                            "kernel_removed", "seconds", "incumbent_from")}
        emit({
            "kind": "method", "method": method, "stars": solution.stars, "optimal": bool(solution.optimal),
            "lower_bound": solution.lower_bound, "seconds": round(seconds, 3), "notes": notes,
            "phases": {key: round(value, 3) for key, value in phases.items()},
        })


# ---------------------------------------------------------------- driver

def machine() -> dict:
    cpu = cpu_model()
    import scipy

    try:
        import highspy  # noqa: F401
        from importlib.metadata import version

        highs = f"highspy {version('highspy')}"
    except Exception:
        highs = "HiGHS bundled with scipy"
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "duckdb": duckdb.__version__,
            "scipy": scipy.__version__, "highs": highs, "platform": platform.platform()}


def run_subprocess(n: int, request: str, time_limit: float) -> dict:
    command = [sys.executable, __file__, "--case", str(n), "--request", request, "--time-limit", str(time_limit)]
    watchdog = 10 * time_limit + 120
    started = time.perf_counter()
    killed = False
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=watchdog)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as error:
        killed = True
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        err = error.stderr.decode() if isinstance(error.stderr, bytes) else (error.stderr or "")
        code = None
    records = [json.loads(line[len(MARK):]) for line in out.splitlines() if line.startswith(MARK)]
    result = {"n": n, "request": request, "killed": killed, "returncode": code,
              "wall_s": round(time.perf_counter() - started, 2), "case": None, "methods": {}}
    for record in records:
        if record["kind"] == "case":
            result["case"] = record
        else:
            result["methods"][record["method"]] = record
    if code not in (0, None) or killed:
        result["stderr_tail"] = err[-2000:]
    return result


def fmt_ratio(stars: int, reference: int | None, proven: bool) -> str:
    if reference is None:
        return "n/a"
    if reference == 0:
        return "1.000" if stars == 0 else "inf"
    value = stars / reference
    return f"{value:.3f}" if proven else f"<= {value:.3f}"


def summarize(result: dict, time_limit: float) -> dict:
    methods = result["methods"]
    exact = methods.get("exact")
    proven = bool(exact and exact["optimal"])
    bounds = [m["lower_bound"] for m in methods.values() if m.get("lower_bound") is not None]
    lb = max(bounds) if bounds else None
    if proven:
        reference = exact["stars"]
        exact_cell = f"proved in {exact['seconds']:.1f} s"
    elif exact:
        gap = (exact["stars"] - exact["lower_bound"]) / exact["stars"] if exact["stars"] and exact["lower_bound"] is not None else None
        reference = lb
        exact_cell = f"not proved in {exact['seconds']:.1f} s: {exact['stars']:,} stars, LB {exact['lower_bound']:,}"
        if gap is not None:
            exact_cell += f", gap {gap:.1%}"
    else:
        reference = lb
        exact_cell = "killed by watchdog" if result["killed"] else "failed"
    if exact and exact["seconds"] > time_limit + 1:
        exact_cell += f" [overran limit by {exact['seconds'] - time_limit:.1f} s]"
    heuristic = {name: methods[name]["stars"] for name in HEURISTICS if name in methods}
    best_name = min(heuristic, key=heuristic.get) if heuristic else None
    return {"proven": proven, "reference": reference, "lb": lb, "exact_cell": exact_cell, "heuristic": heuristic,
            "best_name": best_name}


def markdown(results: list[dict], info: dict, time_limit: float, command: str) -> str:
    lines = [
        "# bench_exact: heuristics against the proven optimum (issue \"Optimal solvers\")",
        "",
        f"- date: {dt.date.today().isoformat()}",
        f"- machine: {info['cpu']}, {info['cores']} cores; {info['platform']}",
        f"- Python {info['python']}, DuckDB {info['duckdb']}, scipy {info['scipy']} ({info['highs']})",
        f"- command: `{command}`",
        f"- input: Adult (30,162 rows), QIs sex, age, race, marital-status; subsets "
        "`SELECT * FROM adult ORDER BY hash(rowid), rowid LIMIT n` (rowid = 0-based row position in the CSV; "
        "n = 30,162 is the whole table)",
        "- requests: k = 5; k = 5 and l = 3 (frequency l-diversity) with sensitive = occupation",
        "- histogram and models built by the engine itself (`duckanon.pipeline.problem.prepare`: duckanon's parser/binder, "
        "its GROUP BY in DuckDB, the privacy models), then `duckanon.solver.solve(hist, models, method)` called per method; "
        f"`exact` with time_limit = {time_limit:g} s",
        "",
        "**exact**: wall time of `solve(method='exact')` (model preparation + heuristic incumbent + HiGHS) when it "
        "proved the optimum; otherwise the gap (stars - lower_bound) / stars it reached within the limit. "
        "**ratio** = method stars / optimal stars when exact proved the optimum; when it did not, method stars / "
        "best proven lower bound of the case, written `<= x`: an upper bound on the true ratio to the optimum. "
        "**best heur.** = the fewest stars among greedy, mapprox and merge (merge runs on every case here: all "
        "have at most 3,000 classes).",
        "",
        "| rows | request | classes (< k) | exact MILP int vars | exact | OPT or LB | greedy (ratio) | mapprox (ratio) "
        "| merge (ratio) | best heur. (ratio) |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        s = summarize(result, time_limit)
        case = result["case"] or {}
        ref = s["reference"]
        ref_cell = f"{ref:,}" if s["proven"] else (f"LB {ref:,}" if ref is not None else "n/a")

        def cell(name):
            if name not in s["heuristic"]:
                return "-"
            stars = s["heuristic"][name]
            return f"{stars:,} ({fmt_ratio(stars, ref, s['proven'])})"

        best = f"{s['best_name']}: {cell(s['best_name'])}" if s["best_name"] else "-"
        lines.append(
            f"| {result['n']:,} | {REQUESTS[result['request']][1]} | {case.get('classes', '?'):,} ({case.get('small_classes', '?'):,}) "
            f"| {case.get('exact_int_vars', 0):,} | {s['exact_cell']} | {ref_cell} | {cell('greedy')} | {cell('mapprox')} "
            f"| {cell('merge')} | {best} |"
        )
    lines += ["", "Details per case (seconds are wall time of each `solve` call; LB = proven lower bound it returned):", "",
              "| rows | request | method | stars | optimal | LB | seconds | exact: prepare / incumbent / build / HiGHS s | HiGHS status; final solution from |",
              "|---:|---|---|---:|---|---:|---:|---|---|"]
    for result in results:
        for name, m in result["methods"].items():
            notes = m.get("notes", {})
            extra = phase_cell = ""
            if name == "exact":
                message = notes.get("milp_message", "")
                message = message[message.find("(") + 1:message.rfind(")")] if "(" in message else message
                extra = f"{message}; {notes.get('incumbent_from', '?')}"
                ph = m.get("phases", {})
                phase_cell = " / ".join(f"{ph.get(key, 0.0):.2f}" for key in ("prepare", "incumbent", "build", "highs"))
            lines.append(f"| {result['n']:,} | {result['request']} | {name} | {m['stars']:,} | {m['optimal']} "
                         f"| {m['lower_bound'] if m['lower_bound'] is not None else '-'} | {m['seconds']:.2f} | {phase_cell} | {extra} |")
        if result["killed"] or result.get("stderr_tail"):
            lines.append(f"| {result['n']:,} | {result['request']} | (case) | | | | {result['wall_s']} | "
                         f"| {'killed by watchdog' if result['killed'] else 'error'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds for exact (default 60)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--requests", nargs="+", choices=list(REQUESTS), default=list(REQUESTS))
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--request", choices=list(REQUESTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        run_case(args.case, args.request, args.time_limit)
        return

    info = machine()
    results = []
    for n in args.sizes:
        for request in args.requests:
            print(f"running n={n} {request} ...", file=sys.stderr, flush=True)
            result = run_subprocess(n, request, args.time_limit)
            results.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
    command = "python benchmarks/bench_exact.py " + " ".join(sys.argv[1:])
    report = markdown(results, info, args.time_limit, command.strip())
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)


if __name__ == "__main__":
    main()
