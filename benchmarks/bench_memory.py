"""Resource bounds: ANONYMIZE on histograms too large for memory, measured in subprocesses.

    python benchmarks/bench_memory.py [--rows 10000000]

Cases (a unique id as quasi-identifier, so every row is its own class):
  * fits: the estimate is under the budget; the statement runs, with DuckDB's own memory_limit
    set to 2GB so that DuckDB spills its side (GROUP BY, temp tables) to disk.
  * too large: 1,000 sensitive values make the dense class x SA matrix ~48 GB times a few. With
    l = 2 the statement is refused up front, before anything big reaches Python; with k alone the
    SA values are left out of the solver (it needs none) and the statement runs like the first.
Each case reports the solver-side estimate, the budget, the outcome, the time and the peak
resident memory (VmHWM) of its process; the process is never OOM-killed (a kill would show as
exit code -9). Results: benchmarks/results/bench_memory.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

CHILD = r"""
import json, sys, time
import duckanon
from duckanon.pipeline.histogram import solver_memory_estimate
from duckanon.pipeline.problem import memory_budget

rows, n_sa, duckdb_limit, extra = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[5]
con = duckanon.connect()
con.duckdb.execute(f"SET memory_limit = '{duckdb_limit}'")
con.duckdb.execute(f"SET temp_directory = '{sys.argv[4]}'")
con.duckdb.execute(f"CREATE TABLE u AS SELECT i AS id, i % 7 AS b, 'd' || (hash(i) % {n_sa}) AS s FROM range({rows}) r(i)")
budget = memory_budget(None)
estimate = solver_memory_estimate(rows, rows, 2, n_sa)
started = time.perf_counter()
try:
    summary = con.anonymize("ANONYMIZE u WITH (k = 5, qi = (id, b), sensitive = s, method = 'mapprox'" + extra + ")")
    outcome = f"published: {summary.classes} classes, {summary.stars} stars"
except duckanon.AnonymizeError as error:
    outcome = f"refused: {error}"
seconds = time.perf_counter() - started
peak = next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rows": rows, "sa_values": n_sa, "options": "k = 5" + extra, "duckdb_memory_limit": duckdb_limit,
                  "estimate_gib": round(estimate / 2**30, 2), "budget_gib": round(budget / 2**30, 2),
                  "outcome": outcome, "seconds": round(seconds, 1), "peak_rss_mib": round(peak)}))
"""


def run(rows: int, n_sa: int, duckdb_limit: str, tmp: Path, extra: str = "") -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(n_sa), duckdb_limit, str(tmp), extra],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"rows": rows, "sa_values": n_sa, "options": "k = 5" + extra, "outcome": f"process ended with code {proc.returncode}",
                "stderr": proc.stderr[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    tmp = Path("/tmp/duckanon_bench_memory")
    tmp.mkdir(exist_ok=True)
    results = [run(args.rows, 13, "2GB", tmp), run(args.rows, 1000, "2GB", tmp, ", l = 2"),
               run(args.rows, 1000, "2GB", tmp)]
    lines = ["| rows | SA values | options | DuckDB memory_limit | solver estimate (with SA) | budget | outcome | "
             "seconds | peak RSS |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['rows']:,} | {r['sa_values']:,} | {r['options']} | {r.get('duckdb_memory_limit', '')} | "
                     f"{r.get('estimate_gib', '')} GiB | {r.get('budget_gib', '')} GiB | {r['outcome']} | "
                     f"{r.get('seconds', '')} | {r.get('peak_rss_mib', '')} MiB |")
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_memory.json").write_text(json.dumps(results, indent=2))
    (RESULTS / "bench_memory.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
