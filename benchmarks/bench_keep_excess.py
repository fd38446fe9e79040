"""What the keep path's published order costs at 10M rows, against the floor (issue 18, target 1).

    python benchmarks/bench_keep_excess.py              # 10M rows, 4 repetitions
    python benchmarks/bench_keep_excess.py --copies 33  # ~1M rows, a quick look

The input, the statement and the floor are bench_publish.py's `keep` case: Adult repeated `--copies`
times with an `id`, ANONYMIZE ... keep = (id), k = 5 x copies. One ANONYMIZE runs first and its
publish statement (the CREATE TABLE AS that joins the source back and sorts the published rows)
is captured, with the scratch tables it reads kept. Then, per repetition and in one process:

  floor                the floor's two statements (bench_publish.floor): GROUP BY, join-back CTAS
  floor CTAS           the floor's join-back CTAS alone, on the groups the floor just made
  ANONYMIZE            the whole statement, keep = (id)
  publish              the captured publish statement alone
  publish, unsorted    the same statement without its ORDER BY: everything the publish does except
                       the sort that makes the published order independent of the source order
                       (its rows are not in the published order; it only prices the sort)

Each is timed wall and CPU (user + system of this process: DuckDB's threads run in it). The
report prints the medians and two ratios per repetition: ANONYMIZE over the floor, and the same
with the sort's price (publish - publish unsorted) taken off, i.e. the ratio the keep path would
have if ordering its rows were free.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

from sqlglot import exp, parse_one

import duckanon
from duckanon.backends import duckdb as duckdb_backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anonymize import QI, SA, cpu_s  # noqa: E402
from bench_publish import floor, floor_join, load_big, statement  # noqa: E402
from machine import cpu_model  # noqa: E402

TARGET = "big_anon"


def timed(action) -> tuple[float, float]:
    """(wall s, CPU s) of `action()`."""
    cpu, wall = cpu_s(), time.perf_counter()
    action()
    return time.perf_counter() - wall, cpu_s() - cpu


def capture_publish(con, copies: int) -> str:
    """Run the keep statement once; return its publish statement, the scratch tables it reads kept."""
    captured = []
    run, drop = duckdb_backend.DuckDBBackend._run, duckdb_backend.DuckDBBackend.drop_temp

    def capturing(self, sql, parameters=None):
        if re.match(rf'CREATE OR REPLACE TABLE .*"{TARGET}" AS', sql[:80]):
            captured.append(sql)
        return run(self, sql, parameters)

    duckdb_backend.DuckDBBackend._run = capturing
    duckdb_backend.DuckDBBackend.drop_temp = lambda self, *names: None
    try:
        con.execute(statement(copies, ", keep = (id)"))
    finally:
        duckdb_backend.DuckDBBackend._run, duckdb_backend.DuckDBBackend.drop_temp = run, drop
    if len(captured) != 1:
        raise SystemExit(f"expected one publish statement, captured {len(captured)}")
    return captured[0]


def unsorted(publish: str) -> str:
    """The publish statement without its ORDER BY (the sort of the published rows)."""
    tree = parse_one(publish, dialect="duckdb")
    orders = list(tree.find_all(exp.Order))
    if len(orders) != 1:
        raise SystemExit(f"expected one ORDER BY in the publish statement, found {len(orders)}")
    orders[0].pop()
    return tree.sql(dialect="duckdb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=330)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()

    con = duckanon.connect()
    raw = con.duckdb
    load_big(raw, args.copies)
    rows = raw.execute("SELECT count(*) FROM big").fetchone()[0]
    publish = capture_publish(con, args.copies)
    publish_unsorted = unsorted(publish)
    keys = QI + [SA]

    steps = {
        "floor": lambda: floor(raw, "big", keys, "src.*"),
        "floor CTAS": lambda: floor_join(raw, "big", keys, "src.*"),  # on the floor's GROUP BY just made
        "ANONYMIZE": lambda: con.execute(statement(args.copies, ", keep = (id)")),
        "publish": lambda: raw.execute(publish),
        "publish, unsorted": lambda: raw.execute(publish_unsorted),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for rep in range(args.reps):
        for name, step in steps.items():
            times[name].append(timed(step))
        line = "  ".join(f"{name} {wall:.2f}/{cpu:.2f}" for name, (wall, cpu) in
                         ((n, times[n][-1]) for n in steps))
        print(f"rep {rep + 1}: {line}", flush=True)

    def median(name: str, index: int) -> float:
        return statistics.median(t[index] for t in times[name])

    ratio = [a[0] / f[0] for a, f in zip(times["ANONYMIZE"], times["floor"])]
    sort_price = [p[0] - u[0] for p, u in zip(times["publish"], times["publish, unsorted"])]
    without_sort = [(a[0] - s) / f[0] for a, s, f in zip(times["ANONYMIZE"], sort_price, times["floor"])]
    print(f"\n{rows:,} rows, {args.reps} repetitions, DuckDB {raw.execute('PRAGMA version').fetchone()[0]}, "
          f"{cpu_model()}")
    print("| step | wall s (median) | CPU s (median) | cores busy |\n|---|---|---|---|")
    for name in steps:
        wall, cpu = median(name, 0), median(name, 1)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / wall:.2f} |")
    print(f"\nANONYMIZE / floor: {statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
    print(f"the sort's price (publish - publish unsorted): {statistics.median(sort_price):.2f} s wall, "
          f"{statistics.median(s / f[0] for s, f in zip(sort_price, times['floor'])):.2f}x the floor")
    print(f"ANONYMIZE / floor with the sort free: {statistics.median(without_sort):.2f} "
          f"({min(without_sort):.2f}-{max(without_sort):.2f})")


if __name__ == "__main__":
    main()
