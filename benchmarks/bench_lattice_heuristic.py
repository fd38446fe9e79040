"""The heuristic lattice search (duckanon/solver/lattice_heuristic.py) beside the exhaustive one
and beside ARX's own heuristic search, on the ARX side-by-side harness's cases and on wide
synthetic tables.

    python benchmarks/bench_lattice_heuristic.py [--only SUBSTR] [--reps 3] [--steps 1000] [--arx]
        [--arx-algorithms lightning,genetic] [--no-wide] [--wide-rows 100000] [--solve METHODS]

Harness cases (`harness.cases()` of ../shared/arx-side-by-side/py/harness.py: Adult 9 and 8 QIs x
k in 2, 5, 10, 100 x suppression 0 and 5%; distinct l = 3 and t = 0.2 on occupation with 4%; CUP 8
QIs k = 5 at 0 and 5%; ARX's hierarchies, metric loss), each prepared as bench_search_vs_arx.py
prepares it (the statement duck_case.py runs), then, in this process, --reps times each (median
seconds; the precomputation on the class histogram included, as ARX's anonymize() includes its
own):
  * exhaustive: `Lattice(...).search()` (what a statement runs on these lattices: all have at most
    100,000 nodes);
  * heuristic: `Lattice(...).search(exhaustive_nodes=0, steps=--steps)`, the heuristic forced;
  * --arx: ARX 3.9.2 (+ fixes, the harness's build) `anonymize()` with the algorithm and limits its
    own heuristic tests set (TestAnonymizationHeuristic: BEST_EFFORT_BOTTOM_UP, i.e. Lightning;
    TestAnonymizationGenetic: BEST_EFFORT_GENETIC, deterministic; setHeuristicSearchStepLimit(1000),
    no time limit), in one JVM (benchmarks/arx_heuristic/ArxHeuristic.java, 2 warm-ups, --reps timed
    runs, their median); its node's Loss (getHighestScore(), the scale of duckanon's metric_value)
    and duckanon's value of the same node (a cross-check of the scale).
Wide synthetic tables (unless --no-wide): m QIs of integers 0..19 with the hierarchy
intervals(5, 10) (4 levels, 4^m nodes), k = 5, 5% suppression, loss; every row distinct (uniform
random codes, seed 0): 30 QIs x 2,000 rows and 200 QIs x 2,000 rows from a CSV with ARX-format
hierarchy files in a temporary folder (the same files for ARX under --arx), and 200 QIs x
--wide-rows rows at the solver level (the histogram and hierarchies built in numpy: the pipeline's
GROUP BY of 200 columns is not what is measured). The heuristic's time, value and evaluations.
--solve lattice,gensup,mondrian,auto: each of those methods through solve() on that last table
(the hierarchies as Domains), once: seconds, CPU seconds, loss, peak memory.
Writes benchmarks/results/bench_lattice_heuristic.{json,md}.

ARX needs the harness built: ARXSIDE_WORK as for ../shared/arx-side-by-side/run.sh (its
classpath.txt; default /tmp/arxside).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness_cases import ROOT, anonymize, connection, harness, hierarchy_options, request_options
from machine import cpu_model

import numpy as np

from duckanon.hierarchy import parse_spec  # noqa: E402
from duckanon.pipeline.problem import prepare  # noqa: E402
from duckanon.solver.generalize import lattice_of  # noqa: E402
from duckanon.solver.histogram import Histogram  # noqa: E402
from duckanon.solver.lattice import EXHAUSTIVE_NODES  # noqa: E402
from duckanon.solver.models import KAnonymity  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
HERE = Path(__file__).resolve().parent / "arx_heuristic"
ARXSIDE_WORK = Path(os.environ.get("ARXSIDE_WORK", "/tmp/arxside"))


def timed(run, reps: int):
    """(the last result, the median seconds of `reps` runs)."""
    times, result = [], None
    for _ in range(reps):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return result, statistics.median(times)


def searched(result, seconds: float) -> dict:
    return {"levels": list(result.node.levels), "value": result.value, "evaluated": result.evaluated,
            "optimal": bool(result.optimal), "seconds": seconds}


def duck_case(problem, limit: float, reps: int, steps: int) -> dict:
    def lattice():
        return lattice_of(problem.histogram, problem.domains.hierarchies, problem.models, limit, "loss")

    exhaustive, exhaustive_s = timed(lambda: lattice().search(), reps)
    heuristic, heuristic_s = timed(lambda: lattice().search(exhaustive_nodes=0, steps=steps), reps)
    return {"classes": problem.histogram.n_classes, "lattice_nodes": lattice().size,
            "exhaustive": searched(exhaustive, exhaustive_s), "heuristic": searched(heuristic, heuristic_s)}


def compile_arx() -> str:
    classpath = (ARXSIDE_WORK / "classpath.txt").read_text().strip()
    classes = Path(tempfile.mkdtemp(prefix="arx_heuristic_"))
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), str(HERE / "ArxHeuristic.java")],
                   check=True)
    return f"{classes}{os.pathsep}{classpath}"


def run_arx(classpath: str, data: str, hier: str, case: dict, algorithm: str, steps: int, reps: int) -> dict:
    args = [f"data={data}", f"hier={hier}", f"qis={','.join(case['qis'])}", f"k={case['k']}", f"l={case['l']}",
            f"t={case['t']}", f"sensitive={case['sensitive']}", f"supp={case['supp']}", f"algorithm={algorithm}",
            f"steps={steps}", "warmup=2", f"repeat={reps}"]
    done = subprocess.run(["java", "-Xmx12g", "-cp", classpath, "ArxHeuristic", *args], capture_output=True, text=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"error": (done.stderr or done.stdout)[-400:]}
    result = json.loads(line[len("RESULT "):])
    result["seconds"] = result.pop("median_ms") / 1e3
    return result


def duck_value_at(problem, limit: float, levels) -> float | None:
    lattice = lattice_of(problem.histogram, problem.domains.hierarchies, problem.models, limit, "loss")
    node = lattice.node_at(levels)
    return None if node is None else lattice.result_at(node).value


def harness_cases(args, classpath) -> list[dict]:
    records = []
    for case in harness.cases():
        if args.only and args.only not in case["id"]:
            continue
        problem = prepare(connection(case["ds"]),
                          anonymize(request_options(case, "lattice") + ["metric = 'loss'"] + hierarchy_options(case)))
        record = {"case": case["id"], **duck_case(problem, case["supp"], args.reps, args.steps)}
        for algorithm in (args.arx_algorithms.split(",") if classpath else []):
            ds = harness.DATASETS[case["ds"]]
            arx = run_arx(classpath, ds["csv"], ds["hier"], case, algorithm, args.steps, args.reps)
            if "transformation" in arx:
                arx["duck_value"] = duck_value_at(problem, case["supp"], arx["transformation"])
            record[f"arx_{algorithm}"] = arx
        records.append(record)
        print(json.dumps(record), flush=True)
    return records


def synthetic_codes(m: int, n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 20, size=(n, m))


def write_synthetic(folder: Path, m: int, n: int) -> tuple[str, str]:
    """The synthetic table as a CSV (';') and one ARX hierarchy file per column (value; its interval
    of 5; of 10; *), as intervals(5, 10) builds them."""
    data = folder / f"wide_{m}_{n}.csv"
    with open(data, "w", newline="") as f:
        out = csv.writer(f, delimiter=";")
        out.writerow([f"q{j}" for j in range(m)])
        out.writerows(synthetic_codes(m, n).tolist())
    for j in range(m):
        with open(folder / f"wide_hierarchy_q{j}.csv", "w", newline="") as f:
            csv.writer(f, delimiter=";").writerows(
                [[v, f"[{v // 5 * 5}, {v // 5 * 5 + 5}[", f"[{v // 10 * 10}, {v // 10 * 10 + 10}[", "*"]
                 for v in range(20)])
    return str(data), str(folder / "wide_hierarchy_{col}.csv")


def wide_from_files(args, classpath, folder: Path, m: int, n: int) -> dict:
    import duckanon

    data, hier = write_synthetic(folder, m, n)
    con = duckanon.connect()
    con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv('{data}', delim=';', header=true, all_varchar=true)")
    case = {"id": f"wide{m}_{n}", "qis": [f"q{j}" for j in range(m)], "k": 5, "l": 0, "t": -1.0, "sensitive": "",
            "supp": 0.05}
    problem = prepare(con, anonymize(request_options(case, "lattice") + ["metric = 'loss'", "suppression_limit = 0.05",
                                     f"hierarchies = '{hier.replace('{col}', '{column}')}'"]))
    lattice = lattice_of(problem.histogram, problem.domains.hierarchies, problem.models, 0.05, "loss")
    result, seconds = timed(lambda: lattice_of(problem.histogram, problem.domains.hierarchies, problem.models, 0.05,
                                               "loss").search(steps=args.steps), args.reps)
    record = {"case": case["id"], "classes": problem.histogram.n_classes, "lattice_nodes": f"{lattice.size:.4g}",
              "heuristic": searched(result, seconds), "search": result.notes["search"]}
    for algorithm in (args.arx_algorithms.split(",") if classpath else []):
        arx = run_arx(classpath, data, hier, case, algorithm, args.steps, args.reps)
        if "transformation" in arx:
            arx["duck_value"] = duck_value_at(problem, 0.05, arx["transformation"])
        record[f"arx_{algorithm}"] = arx
    print(json.dumps(record), flush=True)
    return record


def wide_in_numpy(args, m: int, n: int) -> dict:
    """200 QIs x n rows at the solver level: the class histogram and the bound hierarchies made in
    numpy (the rows are distinct with overwhelming odds; duplicates merge into classes)."""
    codes, counts = np.unique(synthetic_codes(m, n), axis=0, return_counts=True)
    hist = Histogram(codes, counts.reshape(-1, 1).astype(np.int64), [f"q{j}" for j in range(m)])
    bound = parse_spec("intervals(5, 10)").bind(list(range(20)))
    from duckanon.solver.generalize import lattice_of as bound_lattice

    result, seconds = timed(lambda: bound_lattice(hist, [bound] * m, [KAnonymity(5)], 0.05, "loss").search(
        steps=args.steps), 1)
    record = {"case": f"wide{m}_{n}_numpy", "classes": hist.n_classes, "lattice_nodes": f"{4.0 ** m:.4g}",
              "heuristic": searched(result, seconds), "search": result.notes["search"]}
    print(json.dumps(record), flush=True)
    return record


def solve_methods(m: int, n: int, methods: list[str]) -> list[dict]:
    """solve() with each method on the numpy synthetic table (wide_in_numpy's), its hierarchies
    as Domains: what a statement's solver step does at that size, once each (seconds and CPU
    seconds, the loss it reports, peak memory)."""
    import resource

    from duckanon.solver import solve
    from duckanon.solver.request import Domains

    codes, counts = np.unique(synthetic_codes(m, n), axis=0, return_counts=True)
    hist = Histogram(codes, counts.reshape(-1, 1).astype(np.int64), [f"q{j}" for j in range(m)])
    bound = parse_spec("intervals(5, 10)").bind(list(range(20)))
    domains = Domains([list(range(20))] * m, [True] * m, [bound] * m, 0.05, "loss", recode=True)
    records = []
    for method in methods:
        started, cpu = time.perf_counter(), time.process_time()
        solution = solve(hist, [KAnonymity(5)], method, domains=domains)
        notes = solution.notes
        loss = notes.get("loss", notes.get("metric_value"))
        record = {"case": f"solve_{method}_{m}_{n}", "method": solution.method, "loss": loss,
                  "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "search": notes.get("search") or (notes.get("lattice_search") or {}).get("search"),
                  "candidates": notes.get("candidates")}
        print(json.dumps(record), flush=True)
        records.append(record)
    return records


def fmt(value, digits: int = 6) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(records: list[dict], meta: dict) -> str:
    lines = [f"# Lattice search: the heuristic beside the exhaustive search and ARX's heuristics",
             "", f"{meta['machine']}; duckanon {meta['commit']}; steps {meta['steps']}; reps {meta['reps']}; "
             f"load {meta['load']}.", "",
             "| case | nodes | exhaustive loss | s | heuristic loss | evals | proven | s | ARX Lightning loss | s "
             "| ARX genetic loss | s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in records if "heuristic" in r):
        ex, he = r.get("exhaustive"), r["heuristic"]
        arx = [r.get(f"arx_{a}", {}) for a in ("lightning", "genetic")]
        cells = [r["case"], str(r["lattice_nodes"]), fmt(ex and ex["value"]), fmt(ex and ex["seconds"], 3),
                 fmt(he["value"]), str(he["evaluated"]), "yes" if he["optimal"] else "no", fmt(he["seconds"], 3)]
        for a in arx:
            cells += [fmt(a.get("score")), fmt(a.get("seconds"), 3)]
        lines.append("| " + " | ".join(cells) + " |")
    solved = [r for r in records if "cpu_seconds" in r]
    if solved:
        lines += ["", "| solve() | published | loss | s | CPU s | peak RSS MB |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['method']} | {fmt(r['loss'])} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} "
                  f"| {r['peak_rss_mb']} |" for r in solved]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--arx", action="store_true")
    parser.add_argument("--arx-algorithms", default="lightning,genetic")
    parser.add_argument("--no-wide", action="store_true")
    parser.add_argument("--wide-rows", type=int, default=100_000)
    parser.add_argument("--solve", default="", help="methods to run through solve() on 200 QIs x --wide-rows "
                        "(e.g. lattice,gensup,mondrian,auto)")
    parser.add_argument("--out", default=str(RESULTS / "bench_lattice_heuristic"))
    args = parser.parse_args()
    classpath = compile_arx() if args.arx else None
    records = harness_cases(args, classpath)
    if not args.no_wide and not args.only:
        with tempfile.TemporaryDirectory() as folder:
            for m in (30, 200):
                records.append(wide_from_files(args, classpath if m == 30 else None, Path(folder), m, 2000))
        records.append(wide_in_numpy(args, 200, args.wide_rows))
    if args.solve:
        records += solve_methods(200, args.wide_rows, args.solve.split(","))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    meta = {"machine": cpu_model(), "commit": commit, "steps": args.steps, "reps": args.reps,
            "load": open("/proc/loadavg").read().split()[0], "exhaustive_nodes": EXHAUSTIVE_NODES}
    Path(args.out + ".json").write_text(json.dumps({"meta": meta, "records": records}, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(records, meta))
    print(markdown(records, meta))


if __name__ == "__main__":
    sys.exit(main())
