"""Wide tables: ANONYMIZE ... WITH (k = 5, qi = (q0, ..., q{m-1})), default method, each run a
process of its own (its peak resident memory is its own).

    python benchmarks/bench_wide.py [--repeat 3] [--huge] [--cases 100000x30,1000000x30]

The table: `rows` rows of `m` columns of uniform random values, column j taking 2 + (j mod 25)
values (numpy's PCG64, seed 7), and an `id` column left out of the statement. Independent
uniform columns are the hard case for cell suppression: a group of g rows agrees on a column
of v values with probability v^-(g-1), so what a method keeps is what it lines up.

Each run reports the whole statement's seconds (from the text to the committed table), the
method `auto` ran, the stars and their share of the QI cells, the peak resident memory of the
process (VmHWM) and the most DuckDB had spilled to its temp directory (sampled every 0.2 s).
The reference share is today's portfolio on the 100,000 x 30 table (greedy, topdown, local
search: the table is at WIDE_CELL_LIMIT, so auto still runs them there), measured in the same
run; the ratio printed is each case's share over it. --huge adds 10,000,000 x 50, under
DuckDB's default memory limit or --duckdb-memory-limit (the published table of 10M x 50 VARCHARs
and the keyed table are ~8 GB each in DuckDB: its default 80% of RAM leaves no room for the
solver's side on a 24 GiB machine). Results: benchmarks/results/bench_wide.json (--out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

CHILD = r"""
import json, os, sys, threading, time
import numpy as np, pyarrow as pa
import duckanon

rows, m, temp, duckdb_limit = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
con = duckanon.connect()
con.duckdb.execute(f"SET temp_directory = '{temp}'")
if duckdb_limit:
    con.duckdb.execute(f"SET memory_limit = '{duckdb_limit}'")
rng = np.random.default_rng(7)
table = pa.table({"id": np.arange(rows), **{f"q{j}": rng.integers(0, 2 + j % 25, rows, dtype=np.int8) for j in range(m)}})
con.duckdb.register("generated", table)
con.duckdb.execute("CREATE TABLE w AS SELECT * FROM generated")
con.duckdb.unregister("generated")
del table
spill = [0]
done = threading.Event()

def sample():
    while not done.wait(0.2):
        size = sum(f.stat().st_size for f in os.scandir(temp) if f.is_file())
        spill[0] = max(spill[0], size)

threading.Thread(target=sample, daemon=True).start()
qi = ", ".join(f"q{j}" for j in range(m))
started = time.perf_counter()
summary = con.anonymize(f"ANONYMIZE w INTO w_anon WITH (k = 5, qi = ({qi}))")
seconds = time.perf_counter() - started
done.set()
peak = next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rows": rows, "qis": m, "method": summary.method, "stars": summary.stars,
                  "share": summary.stars / (rows * m), "classes": summary.classes, "seconds": round(seconds, 2),
                  "peak_rss_mib": round(peak), "duckdb_spill_mib": round(spill[0] / 2**20),
                  "duckdb_memory_limit": con.duckdb.execute("SELECT current_setting('memory_limit')").fetchone()[0]}))
"""


def run(rows: int, m: int, duckdb_limit: str = "") -> dict:
    with tempfile.TemporaryDirectory() as temp:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(m), temp, duckdb_limit], capture_output=True,
                              text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"rows": rows, "qis": m, "outcome": f"process ended with code {proc.returncode}",
                "stderr": proc.stderr[-800:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--huge", action="store_true", help="also 10,000,000 x 50 (once)")
    parser.add_argument("--cases", default="100000x30,1000000x30,100000x200")
    parser.add_argument("--duckdb-memory-limit", default="",
                        help="SET memory_limit for the --huge case (e.g. 12GB; default: DuckDB's own, 80%% of RAM)")
    parser.add_argument("--out", default="bench_wide.json", help="the results file in benchmarks/results/")
    args = parser.parse_args()
    cases = [tuple(int(x) for x in case.split("x")) for case in args.cases.split(",")]
    results = []
    for rows, m in cases:
        runs = [run(rows, m) for _ in range(args.repeat if rows * m <= 30_000_000 else 1)]
        results.append({"rows": rows, "qis": m, "runs": runs})
        ok = [r for r in runs if "seconds" in r]
        print(f"{rows:>10,} x {m:>3}: " + (
            f"{ok[0]['method']}, {ok[0]['stars']:,} stars ({ok[0]['share']:.2%}), median "
            f"{statistics.median(r['seconds'] for r in ok):.1f} s of {[r['seconds'] for r in ok]}, peak RSS "
            f"{max(r['peak_rss_mib'] for r in ok):,} MiB, spill {max(r['duckdb_spill_mib'] for r in ok):,} MiB"
            if ok else runs[0]["outcome"] + " " + runs[0].get("stderr", "")), flush=True)
    if args.huge:
        runs = [run(10_000_000, 50, args.duckdb_memory_limit)]
        results.append({"rows": 10_000_000, "qis": 50, "runs": runs})
        print(f"10,000,000 x 50: {runs[0]}", flush=True)
    reference = next((r["runs"][0] for r in results if (r["rows"], r["qis"]) == (100_000, 30) and "share" in r["runs"][0]),
                     None)
    if reference is not None:
        for r in results:
            if "share" in r["runs"][0]:
                print(f"share {r['rows']:,} x {r['qis']} / share 100,000 x 30 (today's portfolio): "
                      f"{r['runs'][0]['share'] / reference['share']:.3f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
