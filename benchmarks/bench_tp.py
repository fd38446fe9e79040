"""Reproduce Xiao, Yi & Tao (2010) Section 6.1 on Adult: TP, TP+ and Hilbert for l-diversity.

    pip install -e ".[bench]" && python benchmarks/bench_tp.py [--quick]

Adult (../shared/data/adult), SA = occupation (14 values), QI families Adult-d (d = 1..8 of the
8 other columns; all subsets of size d, or a seeded sample of 10 when there are more), l = 2..7.
Prints and writes benchmarks/results/bench_tp.{json,md} and three PNG figures:
  stars vs l (Adult-4), stars vs d (l = 6), solver time vs n (Adult-4, l = 6, Adult replicated
  up to 600k rows), and the whole ANONYMIZE against the GROUP BY + join-back floor at 600k.
Solver time is the solver alone on the class histogram (what the paper times); the histogram is
built by duckanon's own GROUP BY, once per table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

import duckanon
from duckanon.pipeline.problem import prepare
from duckanon.solver import LDiversity, solve

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"
RESULTS = ROOT / "benchmarks" / "results"
COLUMNS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]
METHODS = ["tp", "tp+", "hilbert"]


def q(name: str) -> str:
    return '"' + name + '"'


def histogram(con, table: str, qi: list[str]):
    text = f"ANONYMIZE {table} WITH (l = 2, qi = ({', '.join(map(q, qi))}), sensitive = occupation)"
    return prepare(con, text).histogram


def run(hist, l: int, method: str):
    started = time.perf_counter()
    solution = solve(hist, [LDiversity(l)], method=method)
    return solution, time.perf_counter() - started


def families(quick: bool):
    rng = random.Random(2010)
    out = {}
    for d in range(1, len(COLUMNS) + 1):
        subsets = [list(c) for c in itertools.combinations(COLUMNS, d)]
        limit = 3 if quick else 10
        out[d] = subsets if len(subsets) <= limit else rng.sample(subsets, limit)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="3 subsets per d, n up to 300k")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT}', delim=';')")
    fams = families(args.quick)
    records = []
    phases = defaultdict(int)
    cache = {}

    def measure(qi, l):
        key = tuple(qi)
        if key not in cache:
            cache[key] = histogram(con, "adult", qi)
        hist = cache[key]
        row = {"d": len(qi), "qi": qi, "l": l}
        for method in METHODS:
            solution, seconds = run(hist, l, method)
            row[method] = {"stars": solution.stars, "suppressed": solution.suppressed_rows, "seconds": seconds}
            if method == "tp":
                row["tp_phase"] = solution.notes["tp_phase"]
                phases[solution.notes["tp_phase"]] += 1
        records.append(row)
        return row

    for qi in fams[4]:  # stars vs l on Adult-4
        for l in range(2, 8):
            measure(qi, l)
    for d, subsets in fams.items():  # stars vs d at l = 6
        if d == 4:
            continue
        for qi in subsets:
            measure(qi, 6)

    def average(rows, method, field="stars"):
        return float(np.mean([r[method][field] for r in rows]))

    by_l = {l: {m: average([r for r in records if r["d"] == 4 and r["l"] == l], m) for m in METHODS} for l in range(2, 8)}
    by_d = {d: {m: average([r for r in records if r["d"] == d and r["l"] == 6], m) for m in METHODS}
            for d in range(1, len(COLUMNS) + 1)}
    violations = [r for r in records if r["tp+"]["stars"] > min(r["tp"]["stars"], r["hilbert"]["stars"])]

    # time vs n: Adult-4 (the first sampled subset), l = 6, Adult replicated
    qi4 = fams[4][0]
    sizes = [100_000, 200_000, 300_000] if args.quick else [100_000, 200_000, 300_000, 400_000, 500_000, 600_000]
    scaling = []
    for n in sizes:
        con.execute(f"""CREATE OR REPLACE TABLE adult_n AS
                        SELECT a.* FROM adult a, range({-(-n // 30162)}) r LIMIT {n}""")
        hist = histogram(con, "adult_n", qi4)
        row = {"n": n, "classes": hist.n_classes}
        for method in METHODS:
            best = min(run(hist, 6, method)[1] for _ in range(3))
            row[method] = best
        scaling.append(row)

    # the whole ANONYMIZE at the largest n against the floor: the GROUP BY that builds the
    # histogram plus writing a table of the same size (a join-back-shaped CREATE TABLE AS)
    qi_sql = ", ".join(map(q, qi4))
    floor_runs, anon_runs = [], []
    for _ in range(3):
        started = time.perf_counter()
        con.execute(f"""CREATE OR REPLACE TEMP TABLE floor_cells AS
                        SELECT {qi_sql}, occupation, count(*) AS n FROM adult_n GROUP BY ALL""")
        con.execute(f"""CREATE OR REPLACE TABLE floor_out AS
                        SELECT {', '.join(f'c.{q(c)}' for c in qi4)}, c.occupation
                        FROM floor_cells c, LATERAL (SELECT * FROM range(c.n)) r""")
        floor_runs.append(time.perf_counter() - started)
        started = time.perf_counter()
        con.execute(f"ANONYMIZE adult_n WITH (l = 6, qi = ({qi_sql}), sensitive = occupation, method = 'tp+')")
        anon_runs.append(time.perf_counter() - started)
    end_to_end = {"n": sizes[-1], "floor_seconds": min(floor_runs), "anonymize_seconds": min(anon_runs),
                  "ratio": min(anon_runs) / min(floor_runs)}

    summary = {"by_l": by_l, "by_d": by_d, "tp_phases": dict(phases), "tp_plus_worse": len(violations),
               "runs": len(records), "scaling": scaling, "end_to_end": end_to_end, "records": records}
    (RESULTS / "bench_tp.json").write_text(json.dumps(summary, indent=1, default=str))
    lines = ["# TP / TP+ / Hilbert on Adult (SA occupation)", "",
             f"{len(records)} (table, l) runs; TP ended in phase: {dict(phases)}; "
             f"runs where TP+ used more stars than min(TP, Hilbert): {len(violations)}", "",
             "## Average stars vs l (Adult-4)", "", "| l | TP | TP+ | Hilbert |", "|---|---|---|---|"]
    lines += [f"| {l} | {v['tp']:.0f} | {v['tp+']:.0f} | {v['hilbert']:.0f} |" for l, v in by_l.items()]
    lines += ["", "## Average stars vs d (l = 6)", "", "| d | TP | TP+ | Hilbert |", "|---|---|---|---|"]
    lines += [f"| {d} | {v['tp']:.0f} | {v['tp+']:.0f} | {v['hilbert']:.0f} |" for d, v in by_d.items()]
    lines += ["", f"## Solver seconds vs n (Adult-4 = {qi4}, l = 6, best of 3)", "",
              "| n | classes | TP | TP+ | Hilbert |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']} | {r['classes']} | {r['tp']:.3f} | {r['tp+']:.3f} | {r['hilbert']:.3f} |" for r in scaling]
    lines += ["", f"Whole ANONYMIZE (tp+, l = 6) at n = {end_to_end['n']}: {end_to_end['anonymize_seconds']:.2f} s, "
              f"floor (GROUP BY + write) {end_to_end['floor_seconds']:.2f} s, ratio {end_to_end['ratio']:.2f}x"]
    (RESULTS / "bench_tp.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(by_l, by_d, scaling)


def plot(by_l, by_d, scaling) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, data, xlabel in (("stars_vs_l", by_l, "l (Adult-4)"), ("stars_vs_d", by_d, "d (l = 6)")):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        xs = list(data)
        for method in METHODS:
            ax.plot(xs, [data[x][method] for x in xs], marker="o", label=method.upper() if method != "hilbert" else "Hilbert")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("average stars")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / f"bench_tp_{name}.png", dpi=120)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ns = [r["n"] / 1000 for r in scaling]
    for method in METHODS:
        ax.plot(ns, [r[method] for r in scaling], marker="o", label=method)
    ax.set_xlabel("rows (thousands), Adult-4, l = 6")
    ax.set_ylabel("solver seconds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_tp_time_vs_n.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
