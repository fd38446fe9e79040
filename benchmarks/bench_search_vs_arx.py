"""The lattice search and `gensup` on the cases of the ARX side-by-side harness (issue 18,
targets 2 and 3), with a same-answer check against answers stored from an earlier solver.

    python benchmarks/bench_search_vs_arx.py [--only SUBSTR] [--reps 5] [--gensup-reps 3]
        [--no-gensup] [--write-reference FILE] [--reference FILE]

Cases: `harness.cases()` of ../shared/arx-side-by-side/py/harness.py (Adult 9 and 8 QIs x k in
2, 5, 10, 100 x suppression 0 and 5%; distinct l = 3 and t = 0.2 on occupation with 4%; CUP 8
QIs k = 5 at 0 and 5%), each stated as that harness's duck_case.py states it (the table read with
all_varchar, ARX's hierarchies, metric = 'loss').

Per case, in this process:
  * search: `Lattice(...).search()` on the problem `prepare` builds for the statement, --reps
    times (median, min, max seconds); its levels, metric value, removed rows, nodes evaluated;
  * lattice: the whole ANONYMIZE statement, --reps times, and the `search_seconds` its details
    report;
  * gensup: the whole ANONYMIZE ... method = 'gensup' statement, --gensup-reps times; its levels,
    stars, suppression limit and loss (generalization_loss: ARX's loss per cell, a star 1).
--write-reference stores the answers (not the times); --reference compares with stored answers:
the same levels, metric value and removed rows, no more nodes evaluated, and for gensup a loss
no higher. Writes benchmarks/results/bench_search_vs_arx.{json,md} (not with --write-reference).

--before PATH: a checkout of the solver before (git worktree add PATH c51a3ae): its lattice.py's
search is timed alternately with this one's on the same problem, --reps times each (the
"search_before_s" column).

--arx: ARX's anonymize() time for the same case in the same run, through the harness's own
command (harness.arx_cmd with its timing step's warm-up 2 and 5 repetitions, CUP 5%: 1 and 3, in
one JVM; the median of ARX's in-JVM runs). Needs the harness built: ARXSIDE_WORK as for
../shared/arx-side-by-side/run.sh (its classpath.txt).

--breakdown: where the whole lattice statement's time goes, per case (median of --reps runs):
the pipeline's steps timed by wrapping the functions ANONYMIZE calls (the GROUP BY into the cells
table, the columns' domains, the solve and within it the search, the keyed table, the target,
the check of the published rows, the rest). Writes benchmarks/results/bench_search_breakdown.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from harness_cases import ROOT, anonymize, connection, harness, hierarchy_options, request_options

RESULTS = ROOT / "benchmarks" / "results"
from duckanon.pipeline.problem import prepare  # noqa: E402
from duckanon.solver import solve  # noqa: E402
from duckanon.solver.generalize import generalization_loss, lattice_of  # noqa: E402


def statement(case: dict, method: str) -> str:
    """The statement duck_case.py runs for `case` (metric loss, seed 1)."""
    return anonymize(request_options(case, method) + ["metric = 'loss'"] + hierarchy_options(case))


def spread(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "reps": len(times)}


def timed_statement(con, text: str, reps: int) -> tuple[dict, dict]:
    times, details = [], {}
    for _ in range(reps):
        started = time.perf_counter()
        row = con.execute(text).fetchone()
        times.append(time.perf_counter() - started)
        details = json.loads(row[-1])
    return spread(times), details


def lattice_before(checkout: str):
    """The Lattice class of `checkout`'s duckanon/solver/lattice.py, run against this package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("lattice_before", Path(checkout) / "duckanon/solver/lattice.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["lattice_before"] = module
    spec.loader.exec_module(module)
    return module.Lattice


def run_case(case: dict, reps: int, gensup_reps: int, before=None) -> dict:
    con = connection(case["ds"])
    problem = prepare(con, statement(case, "lattice"))
    codes = [h.codes for h in problem.domains.hierarchies]
    times, times_before = [], []
    for _ in range(reps):
        if before is not None:
            started = time.perf_counter()
            before(problem.histogram, codes, problem.models, case["supp"], "loss").search()
            times_before.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = lattice_of(problem.histogram, problem.domains.hierarchies, problem.models, case["supp"], "loss").search()
        times.append(time.perf_counter() - started)
    out = {"case": case["id"], "classes": problem.histogram.n_classes, "lattice_nodes": result.nodes,
           "search": {"levels": list(result.node.levels), "value": result.value,
                      "removed_rows": int(result.node.sa_counts[~result.node.ok].sum()),
                      "nodes_evaluated": result.evaluated, "optimal": result.optimal},
           "search_s": spread(times)}
    if times_before:
        out["search_before_s"] = spread(times_before)
    whole, details = timed_statement(con, statement(case, "lattice"), reps)
    out["lattice_statement_s"] = whole
    out["lattice_search_seconds"] = details.get("search_seconds")
    if gensup_reps:
        text = statement(case, "gensup")
        whole, details = timed_statement(con, text, gensup_reps)
        gensup_problem = prepare(con, text)
        solution = solve(gensup_problem.histogram, gensup_problem.models, "gensup", domains=gensup_problem.domains)
        loss = generalization_loss(gensup_problem.histogram, gensup_problem.domains.hierarchies, solution,
                                   solution.notes["levels"])
        out["gensup"] = {"levels": solution.notes["levels"], "stars": int(solution.stars), "loss": loss,
                         "suppression_limit": solution.notes.get("suppression_limit"),
                         "cell_suppression": solution.notes.get("cell_suppression")}
        out["gensup_statement_s"] = whole
        out["gensup_search_seconds"] = details.get("search_seconds")
    return out


def arx_time(case: dict) -> dict:
    """ARX's time for `case`, as the harness's arx_time step measures it."""
    slow = case["ds"] == "cup" and case["supp"] > 0
    warmup, repeat = (1, 3) if slow else (2, 5)
    records, wall, _, rc, tail, load = harness.run(harness.arx_cmd(case, warmup=warmup, repeat=repeat, stats=0), ["RESULT"])
    result = records.get("RESULT", {})
    if rc or not result.get("runs_ms"):
        return {"error": tail or f"rc {rc}"}
    runs = [ms / 1e3 for ms in result["runs_ms"]]
    return {**spread(runs), "transformation": result.get("transformation"), "load1": load}


def answers(record: dict) -> dict:
    return {key: record[key] for key in ("case", "search", "gensup") if key in record}


def compare(record: dict, reference: dict) -> list[str]:
    """What differs from the stored answer (empty: the same answer)."""
    problems = []
    new, old = record["search"], reference["search"]
    if new["levels"] != old["levels"]:
        problems.append(f"levels {new['levels']} != {old['levels']}")
    if not math.isclose(new["value"], old["value"], rel_tol=1e-9, abs_tol=1e-9):
        problems.append(f"value {new['value']} != {old['value']}")
    if new["removed_rows"] != old["removed_rows"]:
        problems.append(f"removed rows {new['removed_rows']} != {old['removed_rows']}")
    if new["nodes_evaluated"] > old["nodes_evaluated"]:
        problems.append(f"nodes evaluated {new['nodes_evaluated']} > {old['nodes_evaluated']}")
    if "gensup" in record and "gensup" in reference:
        if record["gensup"]["loss"] > reference["gensup"]["loss"] + 1e-12:
            problems.append(f"gensup loss {record['gensup']['loss']:.6f} > {reference['gensup']['loss']:.6f}")
    return problems


def fmt(s: dict | None) -> str:
    if not s:
        return "-"
    return f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})"


def markdown(records: list[dict], reference_path: str | None) -> str:
    lines = ["# Lattice search and gensup on the ARX side-by-side cases", "",
             "Search: `Lattice.search()` in-process; statement: the whole ANONYMIZE; seconds as median (min-max).",
             f"Same-answer check against {reference_path or '(no reference)'}.", "",
             "| case | classes | search s | search before s | ARX s | nodes evaluated (ref) | levels | removed | lattice statement s | "
             "gensup statement s | gensup loss (ref) | same answer |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        ref = r.get("reference") or {}
        nodes = f"{r['search']['nodes_evaluated']} / {r['lattice_nodes']}"
        if ref:
            nodes += f" ({ref['search']['nodes_evaluated']})"
        gensup = r.get("gensup")
        loss = "-" if not gensup else f"{gensup['loss']:.4f}"
        if gensup and ref.get("gensup"):
            loss += f" ({ref['gensup']['loss']:.4f})"
        same = "-" if not ref else ("yes" if not r["differences"] else "; ".join(r["differences"]))
        arx = r.get("arx")
        arx_text = "-" if not arx else (arx.get("error", "error")[:40] if "median" not in arx else fmt(arx))
        if arx and arx.get("transformation") is not None and list(arx["transformation"]) != r["search"]["levels"]:
            arx_text += f" (ARX's levels {tuple(arx['transformation'])})"
        lines.append(f"| {r['case']} | {r['classes']} | {fmt(r['search_s'])} | {fmt(r.get('search_before_s'))} | "
                     f"{arx_text} | {nodes} | {tuple(r['search']['levels'])} | "
                     f"{r['search']['removed_rows']} | {fmt(r['lattice_statement_s'])} | {fmt(r.get('gensup_statement_s'))} | "
                     f"{loss} | {same} |")
    return "\n".join(lines) + "\n"


# The steps of one ANONYMIZE statement, as (module, function, label) wrapped by --breakdown; the
# search is inside the solve, reported on its own.
STEPS = [
    ("duckanon.pipeline.problem", "build_cells", "histogram"),
    ("duckanon.pipeline.problem", "column_domains", "domains"),
    ("duckanon.pipeline.problem", "solve", "solve"),
    ("duckanon.solver.generalize", "Lattice", "search"),
    ("duckanon.pipeline.materialize", "keyed_arrow", "keyed arrow"),
    ("duckanon.statements.anonymize", "check_published_rows", "check"),
    ("duckanon.statements.anonymize", "column_loss", "column loss"),
    ("duckanon.statements.anonymize", "describe_target", "provenance"),
]
# written through the backend: the keyed temp table (the cells table is inside `histogram`) and
# the target
WRITES = ["keyed table", "target"]


def breakdown(cases: list[dict], reps: int) -> str:
    """Wall time of each step of the lattice statement (STEPS, WRITES), the statement, and the
    rest (parse, bind, the transaction, the summary)."""
    import importlib

    from duckanon.backends.duckdb import DuckDBBackend

    spent: dict[str, float] = {}

    def add(label, started):
        spent[label] = spent.get(label, 0.0) + time.perf_counter() - started

    def timed(label, function):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                add(label, started)
        return wrapper

    originals = []
    for module_name, name, label in STEPS:
        module = importlib.import_module(module_name)
        original = getattr(module, name)
        if name == "Lattice":  # the search: the lattice built, then searched
            class Timed(original):
                def __init__(self, *args, **kwargs):
                    started = time.perf_counter()
                    super().__init__(*args, **kwargs)
                    add("search", started)

                def search(self, *args, **kwargs):
                    started = time.perf_counter()
                    try:
                        return super().search(*args, **kwargs)
                    finally:
                        add("search", started)
            setattr(module, name, Timed)
        else:
            setattr(module, name, timed(label, original))
        originals.append((module, name, original))
    create_temp, create_target = DuckDBBackend.create_temp, DuckDBBackend.create_target

    def keyed_temp(self, name, *args, **kwargs):
        started = time.perf_counter()
        try:
            return create_temp(self, name, *args, **kwargs)
        finally:
            if "_keyed_" in name:
                add("keyed table", started)
    DuckDBBackend.create_temp = keyed_temp
    DuckDBBackend.create_target = timed("target", create_target)
    originals += [(DuckDBBackend, "create_temp", create_temp), (DuckDBBackend, "create_target", create_target)]
    labels = [label for *_, label in STEPS] + WRITES
    top = [label for label in labels if label != "search"]
    lines = ["# Where the lattice statement's time goes (ARX harness cases)", "",
             f"Median run of {reps} per case (by statement time), milliseconds. `histogram`: the GROUP BY into the "
             "cells temp table and its Arrow transfer; `search` is part of `solve`; `rest` is the statement minus "
             "the other columns (parse, bind, transaction, summary).", "",
             "| case | statement | " + " | ".join(labels) + " | rest |", "|---|" + "---|" * (len(labels) + 2)]
    try:
        for case in cases:
            con = connection(case["ds"])
            text = statement(case, "lattice")
            con.execute(text).fetchone()  # warm-up
            runs = []
            for _ in range(reps):
                spent.clear()
                started = time.perf_counter()
                con.execute(text).fetchone()
                total = time.perf_counter() - started
                runs.append((total, dict(spent), total - sum(spent.get(label, 0.0) for label in top)))
            runs.sort(key=lambda run: run[0])
            total, parts, rest = runs[len(runs) // 2]
            lines.append(f"| {case['id']} | {total * 1e3:.0f} | " +
                         " | ".join(f"{parts.get(label, 0.0) * 1e3:.0f}" for label in labels) + f" | {rest * 1e3:.0f} |")
            print(lines[-1], flush=True)
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--gensup-reps", type=int, default=3)
    parser.add_argument("--no-gensup", action="store_true")
    parser.add_argument("--write-reference")
    parser.add_argument("--reference", help="answers stored by --write-reference (benchmarks/results/"
                        "bench_search_vs_arx_reference_c51a3ae.json: the solver before issue 18)")
    parser.add_argument("--out", default=str(RESULTS / "bench_search_vs_arx"))
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--arx", action="store_true")
    parser.add_argument("--before")
    args = parser.parse_args()
    if args.breakdown:
        text = breakdown([c for c in harness.cases() if args.only in c["id"]], args.reps)
        (RESULTS / "bench_search_breakdown.md").write_text(text)
        print(text)
        return
    reference = {}
    if args.reference:
        reference = {r["case"]: r for r in json.loads(Path(args.reference).read_text())["answers"]}
    records = []
    before = lattice_before(args.before) if args.before else None
    for case in harness.cases():
        if args.only and args.only not in case["id"]:
            continue
        record = run_case(case, args.reps, 0 if args.no_gensup else args.gensup_reps, before)
        if args.arx:
            record["arx"] = arx_time(case)
        if case["id"] in reference:
            record["reference"] = answers(reference[case["id"]])
            record["differences"] = compare(record, reference[case["id"]])
        records.append(record)
        print(json.dumps({key: record.get(key) for key in ("case", "search", "search_s", "search_before_s",
                                                             "lattice_statement_s",
                                                             "lattice_search_seconds", "gensup", "gensup_statement_s",
                                                             "gensup_search_seconds", "arx",
                                                             "differences")}), flush=True)
    if args.write_reference:
        Path(args.write_reference).write_text(json.dumps({"answers": [answers(r) for r in records]}, indent=1))
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(records, indent=1))
    out.with_suffix(".md").write_text(markdown(records, args.reference))
    print(markdown(records, args.reference))
    if any(r.get("differences") for r in records):
        sys.exit(1)


if __name__ == "__main__":
    main()
