"""Generalization benchmark: the optimal lattice search on Adult (ARX's set-up), and lattice and
Mondrian end to end on Adult replicated to 10M rows against the GROUP BY + join-back floor.

    pip install -e ".[bench]" && python benchmarks/bench_lattice.py [--rows 10000000]

Part 1: Adult, all 9 columns as QIs, ARX hierarchies, k = 5, entropy metric, suppression limits 0
and 5%: solver seconds (the search on the class histogram, in-process, best of 3), nodes
evaluated of the 12,960, whole ANONYMIZE seconds, peak RSS of a fresh process. ARX's pruning
benchmark reports about 1.2 s for this set-up with 5% suppression.
Part 2: Adult replicated to --rows rows, the 8 columns other than salary-class as QIs, k = 5,
lattice (no hierarchy given for them is needed: the ARX files) and mondrian, each against the
floor: a GROUP BY over the QIs into a temp table plus a CREATE TABLE AS joining the source back.
Every (part, case) runs in its own subprocess so peak RSS figures never mix.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
RESULTS = ROOT / "benchmarks" / "results"
COLUMNS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
           "salary-class"]


def q(name: str) -> str:
    return '"' + name + '"'


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def statement(table: str, method: str, limit: float, columns=COLUMNS) -> str:
    hierarchies = f", hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv', suppression_limit = {limit}" \
        if method == "lattice" else ""
    return f"ANONYMIZE {table} WITH (k = 5, qi = ({', '.join(map(q, columns))}), method = '{method}'{hierarchies})"


def case_search(limit: float) -> dict:
    import duckanon
    from duckanon.pipeline.problem import prepare
    from duckanon.solver.lattice import Lattice

    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';')")
    text = statement("adult", "lattice", limit)
    problem = prepare(con, text)
    hist, models, domains = problem.histogram, problem.models, problem.domains
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        result = Lattice(hist, [h.codes for h in domains.hierarchies], models, limit, "entropy").search()
        runs.append(time.perf_counter() - started)
    anonymize = []
    for _ in range(3):
        started = time.perf_counter()
        row = con.execute(text).fetchone()
        anonymize.append(time.perf_counter() - started)
    info = json.loads(row[-1])
    return {"limit": limit, "search_s": min(runs), "anonymize_s": min(anonymize), "nodes_evaluated": result.evaluated,
            "lattice_nodes": result.nodes, "levels": list(result.node.levels), "metric_value": result.value,
            "removed_rows": info["removed_rows"], "classes": hist.n_classes, "peak_rss_mib": rss_mib()}


def case_big(rows: int, what: str) -> dict:
    import duckanon

    con = duckanon.connect()
    copies = -(-rows // 30162)
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';')")
    con.execute(f"CREATE TABLE big AS SELECT a.* FROM adult a, range({copies}) r LIMIT {rows}")
    con.execute("DROP TABLE adult")
    qi = COLUMNS[:-1]  # 8 QIs
    started = time.perf_counter()
    if what == "floor":
        keys = ", ".join(map(q, qi))
        on = " AND ".join(f"src.{q(c)} IS NOT DISTINCT FROM g.{q(c)}" for c in qi)
        con.execute(f"CREATE TEMP TABLE floor_groups AS SELECT {keys}, count(*) AS n FROM big GROUP BY ALL")
        con.execute(f"CREATE TABLE floor_out AS SELECT {', '.join('src.' + q(c) for c in qi)} FROM big src "
                    f"JOIN floor_groups g ON {on}")
        details = {}
    else:
        row = con.execute(statement("big", what, 0.0, qi)).fetchone()
        details = json.loads(row[-1])
    seconds = time.perf_counter() - started
    return {"rows": rows, "what": what, "seconds": seconds, "peak_rss_mib": rss_mib(),
            "levels": details.get("levels"), "groups": details.get("groups")}


def run(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--case", choices=["search", "big"])
    parser.add_argument("--limit", type=float, default=0.0)
    parser.add_argument("--what", default="lattice")
    args = parser.parse_args()
    if args.case == "search":
        print(json.dumps(case_search(args.limit)))
        return
    if args.case == "big":
        print(json.dumps(case_big(args.rows, args.what)))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    search = [run(["--case", "search", "--limit", str(limit)]) for limit in (0.0, 0.05)]
    big = [run(["--case", "big", "--rows", str(args.rows), "--what", what]) for what in ("floor", "lattice", "mondrian")]
    floor = big[0]["seconds"]
    lines = ["# Lattice (full-domain generalization) and Mondrian", "",
             "## Adult, 9 QIs, ARX hierarchies, k = 5, entropy metric", "",
             "| suppression limit | search s (in-process) | whole ANONYMIZE s | nodes evaluated / lattice | levels | "
             "metric | removed rows | peak RSS MiB | vs ARX ~1.2 s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in search:
        lines.append(f"| {r['limit']:.0%} | {r['search_s']:.3f} | {r['anonymize_s']:.3f} | {r['nodes_evaluated']} / "
                     f"{r['lattice_nodes']} | {tuple(r['levels'])} | {r['metric_value']:.2f} | {r['removed_rows']} | "
                     f"{r['peak_rss_mib']:.0f} | {r['search_s'] / 1.2:.2f}x |")
    lines += ["", f"## Adult replicated to {args.rows:,} rows, 8 QIs, k = 5, end to end", "",
              "| run | seconds | ratio to floor | peak RSS MiB |", "|---|---|---|---|"]
    for r in big:
        lines.append(f"| {r['what']} | {r['seconds']:.2f} | {r['seconds'] / floor:.2f}x | {r['peak_rss_mib']:.0f} |")
    (RESULTS / "bench_lattice.json").write_text(json.dumps({"search": search, "big": big}, indent=1))
    (RESULTS / "bench_lattice.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
