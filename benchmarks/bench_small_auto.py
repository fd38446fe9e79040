"""`auto` (the default method) on small tables, and a statement's fixed cost: whole ANONYMIZE
statements, each in a fresh interpreter, so the figures include what a first statement pays
(imports, the connection, the macros, the registry).

    python benchmarks/bench_small_auto.py                        # this checkout, 3 repetitions
    python benchmarks/bench_small_auto.py --trees OLD .          # two checkouts side by side
    python benchmarks/bench_small_auto.py --cases t04 adult_t02 --reps 5
    python benchmarks/bench_small_auto.py --bytecode-cache /tmp/pycache   # with .pyc files

`--trees` takes checkouts of the project (e.g. `git worktree add /tmp/old <rev>`); each case
runs in each tree in turn, repetition by repetition (PYTHONPATH=tree), so a shared machine's
load falls on both alike. Per case and tree: the median whole-process wall time and CPU
seconds (time.process_time: on a loaded machine closer to the work done than wall time), the
CPU seconds up to a connection (imports and connect()), the median statement wall time
(ANONYMIZE alone, after connect and the CREATE TABLE) and CPU seconds, the stars, `optimal`, the
lower bound and the published method (the same in every repetition: a release does not depend
on the load).

Bytecode: with PYTHONDONTWRITEBYTECODE set (as on the machine these figures come from) every
interpreter compiles duckanon's sources again (0.3-0.4 CPU s); `--bytecode-cache DIR` runs the
children without it and with PYTHONPYCACHEPREFIX=DIR, as an installed package runs.

Cases:
    hospital_k3   the 10-row hospital table, k = 3 over zipcode, age, education
    t04           60 rows, 3 QIs, t = 0.4 (tests/solver/test_auto_small.py's table)
    t04_b, t04_c  two more deterministic 60-row tables of that shape
    adult60_<s>   60 rows sampled from Adult (reservoir, seed s), 3 QIs drawn with seed s,
                  t = 0.4 on occupation (12-14 values: the MILP, not the heuristics, costs there)
    adult_t02     full Adult (30,162 rows), the 8 QIs but occupation, t = 0.2 on occupation
                  (auto publishes carve's 98,066 stars; not in the default list)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
ADULT_QI = ["sex", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]

SYNTHETIC = {
    "t04": "SELECT i % 5 AS a, (i * 7) % 4 AS b, (i // 3) % 3 AS c, 's' || (i % 3) AS s FROM range(60) r(i)",
    "t04_b": "SELECT i % 5 AS a, (i * 7) % 4 AS b, (i // 3) % 3 AS c, 's' || ((i // 2) % 3) AS s FROM range(60) r(i)",
    "t04_c": "SELECT hash(i, 1) % 5 AS a, hash(i, 2) % 4 AS b, hash(i, 3) % 3 AS c, 's' || (hash(i, 5) % 3) AS s "
             "FROM range(60) r(i)",
}
CASES = ["hospital_k3", "t04", "t04_b", "t04_c"] + [f"adult60_{seed}" for seed in range(6)]

# What one child runs: the case's table, then one timed ANONYMIZE; prints one JSON line.
CHILD = r'''
import json, sys, time
started = time.perf_counter()
import duckanon
con = duckanon.connect()
connected = time.perf_counter()
connected_cpu = time.process_time()
case, shared = sys.argv[1], sys.argv[2]
setup, statement = json.loads(sys.argv[3])
con.duckdb.execute(setup)
begun, begun_cpu = time.perf_counter(), time.process_time()
result = con.execute(statement)
cursor = con if result is None else result  # (older checkouts return the DuckDB cursor)
names = [d[0] for d in cursor.description]
row = dict(zip(names, cursor.fetchone()))
done, done_cpu = time.perf_counter(), time.process_time()
print(json.dumps({"connect": connected - started, "connect_cpu": connected_cpu, "statement": done - begun,
                  "statement_cpu": done_cpu - begun_cpu, "process_cpu": done_cpu, "stars": row["stars"],
                  "optimal": bool(row["optimal"]), "lower_bound": row["lower_bound"], "method": row["method"]}))
'''


def case_sql(case: str) -> tuple[str, str]:
    """(the CREATE TABLE, the ANONYMIZE) of a case."""
    if case == "hospital_k3":
        return (f"CREATE TABLE hospital AS SELECT * FROM read_csv('{SHARED / 'hospital.csv'}')",
                "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education))")
    if case == "adult_t02":
        qi = ", ".join('"' + name + '"' for name in ["sex", "age"] + ADULT_QI[1:])  # adult.csv's order
        return (f"CREATE TABLE adult AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';')",
                f"ANONYMIZE adult WITH (t = 0.2, qi = ({qi}), sensitive = occupation)")
    if case in SYNTHETIC:
        return f"CREATE TABLE t AS {SYNTHETIC[case]}", "ANONYMIZE t WITH (t = 0.4, sensitive = s, qi = (a, b, c))"
    seed = int(case.rsplit("_", 1)[1])
    import numpy as np
    qi = list(np.random.default_rng(seed).choice(ADULT_QI, size=3, replace=False))
    quoted = ", ".join('"' + name + '"' for name in qi)
    return (f"CREATE TABLE t AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';') "
            f"USING SAMPLE 60 ROWS (reservoir, {seed})",
            f"ANONYMIZE t WITH (t = 0.4, sensitive = occupation, qi = ({quoted}))")


def run_once(tree: Path, case: str, bytecode_cache: str | None) -> dict:
    import os
    import time
    env = dict(os.environ, PYTHONPATH=str(tree))
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode_cache
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, case, str(SHARED), json.dumps(case_sql(case))],
                         env=env, capture_output=True, text=True, check=True, cwd=str(tree))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", nargs="+", default=[str(ROOT)])
    parser.add_argument("--cases", nargs="+", default=CASES)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--bytecode-cache", default=None, help="run the children with .pyc files kept in this folder")
    args = parser.parse_args()
    trees = [Path(tree).resolve() for tree in args.trees]
    print("| case | tree | process s (median) | process CPU s | to connect, CPU s | statement s (median, min-max) | "
          "statement CPU s | stars | optimal | lower bound | method |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        runs: dict[Path, list[dict]] = {tree: [] for tree in trees}
        for _ in range(args.reps):
            for tree in trees:
                runs[tree].append(run_once(tree, case, args.bytecode_cache))
        for tree in trees:
            results = runs[tree]
            answers = {(r["stars"], r["optimal"], r["lower_bound"], r["method"]) for r in results}
            stars, optimal, lower, method = sorted(answers, key=str)[0]
            times = [r["statement"] for r in results]
            shown = f"{stars}" if len(answers) == 1 else f"{stars} (differs between runs: {sorted(answers, key=str)})"
            cpu = statistics.median(r["statement_cpu"] for r in results)
            print(f"| {case} | {tree.name} | {statistics.median(r['process'] for r in results):.2f} | "
                  f"{statistics.median(r['process_cpu'] for r in results):.2f} | "
                  f"{statistics.median(r['connect_cpu'] for r in results):.2f} | "
                  f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f}) | {cpu:.2f} | {shown} | "
                  f"{optimal} | "
                  f"{lower} | {method} |", flush=True)


if __name__ == "__main__":
    main()
