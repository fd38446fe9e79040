"""t-closeness on Adult: stars, suppressed rows and time of the heuristics, and their distance to
the proven optimum on samples small enough for `exact`.

    pip install -e ".[bench]" && python benchmarks/bench_tcloseness.py [--quick]

Part 1, full Adult (30,162 rows), whole ANONYMIZE statements timed end to end:
  SA occupation (equal distance), t = 0.1, 0.2, 0.3, QIs = 4 (sex, age, race, marital-status)
  and all 8 non-SA columns; SA age (ordered distance), QIs = 4 (sex, race, marital-status,
  education) and the 8 other columns. Methods: topdown, greedy, auto (the portfolio).
Part 2, ratio to the optimum: seeded samples of 40-80 rows, 3-4 QIs; `exact` with a time limit;
where it proves optimality, heuristic stars / optimum for topdown, greedy and the portfolio.
Writes benchmarks/results/bench_tcloseness.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import duckanon
from duckanon.pipeline.problem import prepare
from duckanon.solver import solve
from duckanon.solver.heuristics import best_heuristic, run_heuristic

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"
RESULTS = ROOT / "benchmarks" / "results"
ALL = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation", "salary-class"]
SETTINGS = [
    ("occupation", "equal", ["sex", "age", "race", "marital-status"]),
    ("occupation", "equal", [c for c in ALL if c != "occupation"]),
    ("age", "ordered", ["sex", "race", "marital-status", "education"]),
    ("age", "ordered", [c for c in ALL if c != "age"]),
]
METHODS = ["topdown", "carve", "greedy", "auto"]


def q(name: str) -> str:
    return '"' + name + '"'


def statement(table, sa, distance, qi, t, method):
    return (f"ANONYMIZE {table} WITH (t = {t}, t_distance = {distance}, qi = ({', '.join(map(q, qi))}), "
            f"sensitive = {q(sa)}, method = '{method}')")


def full_table(con, quick):
    rows = []
    for sa, distance, qi in SETTINGS[:2] if quick else SETTINGS:
        for t in (0.1, 0.2, 0.3):
            for method in METHODS:
                started = time.perf_counter()
                summary = con.execute(statement("adult", sa, distance, qi, t, method)).fetchone()
                seconds = time.perf_counter() - started
                rows.append({"sa": sa, "distance": distance, "d": len(qi), "t": t, "method": method,
                             "stars": summary[3], "suppressed": summary[4], "picked": summary[5], "seconds": seconds})
                print(rows[-1])
    return rows


def ratios(con, quick):
    rng = np.random.default_rng(5)
    out = []
    samples = 6 if quick else 24
    for trial in range(samples):
        n = int(rng.integers(40, 81))
        qi = list(rng.choice([c for c in ALL if c not in ("occupation", "age")], size=int(rng.integers(3, 5)), replace=False))
        t = float(rng.choice([0.2, 0.3, 0.4]))
        con.execute(f"CREATE OR REPLACE TABLE sample AS SELECT * FROM adult USING SAMPLE {n} ROWS (reservoir, {trial})")
        text = statement("sample", "occupation", "equal", qi, t, "exact")
        problem = prepare(con, text)
        hist, models = problem.histogram, problem.models
        started = time.perf_counter()
        optimum = solve(hist, models, method="exact", time_limit=20)
        exact_seconds = time.perf_counter() - started
        row = {"n": n, "qi": qi, "t": t, "classes": hist.n_classes, "optimal": bool(optimum.optimal),
               "optimum": optimum.stars, "exact_seconds": exact_seconds}
        for method in ("topdown", "carve", "greedy"):
            row[method] = run_heuristic(method, hist, models).stars
        row["portfolio"] = best_heuristic(hist, models).stars
        out.append(row)
        print(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT}', delim=';')")
    full = full_table(con, args.quick)
    small = ratios(con, args.quick)
    proven = [r for r in small if r["optimal"] and r["optimum"] > 0]
    summary = {}
    for method in ("topdown", "carve", "greedy", "portfolio"):
        values = [r[method] / r["optimum"] for r in proven]
        summary[method] = {"max": max(values, default=None), "mean": float(np.mean(values)) if values else None}
    (RESULTS / "bench_tcloseness.json").write_text(json.dumps({"full": full, "small": small, "ratios": summary}, indent=1))
    lines = ["# t-closeness on Adult", "", "## Full table (30,162 rows), whole ANONYMIZE", "",
             "| SA (distance) | QIs | t | method | stars | suppressed rows | picked | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['sa']} ({r['distance']}) | {r['d']} | {r['t']} | {r['method']} | {r['stars']} | {r['suppressed']} | "
              f"{r['picked']} | {r['seconds']:.2f} |" for r in full]
    lines += ["", f"## Heuristic / optimum on {len(small)} samples of 40-80 rows ({len(proven)} with a proven "
              "non-zero optimum, exact time limit 20 s)", "", "| method | max ratio | mean ratio |", "|---|---|---|"]
    lines += [f"| {m} | {v['max']:.3f} | {v['mean']:.3f} |" if v["max"] is not None else f"| {m} | - | - |"
              for m, v in summary.items()]
    (RESULTS / "bench_tcloseness.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
