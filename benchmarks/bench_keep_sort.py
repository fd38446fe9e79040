"""Where the `keep` path's time goes beyond the floor: the seeded sort against the writing of strings.

    python benchmarks/bench_keep_sort.py               # 10M rows, 5 repetitions
    python benchmarks/bench_keep_sort.py --copies 33   # ~1M rows, a quick look

Input: as bench_publish.py (Adult with every row repeated `--copies` times and an `id` column;
QIs `sex, age, race, marital-status, education, native-country, workclass, occupation`, sensitive
`salary-class`, k = 5 x copies). ANONYMIZE ... keep = (id) runs once; its publish statement and its
keyed table (kept, not dropped) are then re-run in four forms, made from the statement's own tree:

  published     the statement as ANONYMIZE runs it: the QIs cross the sort as ENUMs and are cast
                back to VARCHAR above it
  no sort       the same without its ORDER BY
  enum out      the same, sorted, with the QIs written as the ENUMs (no cast back)
  neither       no ORDER BY and the QIs written as ENUMs
and the floor of bench_publish.py's keep case (the source joined back to a GROUP BY of its QIs and
SA, writing every source column). Every form and the floor run in each repetition, in one process;
wall and CPU seconds, median (min-max). published - no sort is what the seeded sort costs where the
strings are written; enum out - neither the same where ENUMs are written; published - enum out is
what writing the QIs as VARCHAR costs after the sort, no sort - neither the same without it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from sqlglot import exp, parse_one

import duckanon
import duckanon.backends.base as backends

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anonymize import ADULT_CSV, Meter  # noqa: E402
from bench_publish import FLOORS, statement  # noqa: E402


def captured_publish(con, copies: int) -> str:
    """Run ANONYMIZE ... keep = (id) once; return its publish statement's SQL, its temp tables kept."""
    seen = []
    run, drop = backends.Backend.execute, backends.Backend.drop_temp

    def execute(self, expression, parameters=None):
        seen.append(expression)
        return run(self, expression, parameters)

    backends.Backend.execute, backends.Backend.drop_temp = execute, lambda self, *names: None
    try:
        con.execute(statement(copies, ", keep = (id)"))
    finally:
        backends.Backend.execute, backends.Backend.drop_temp = run, drop
    [publish] = [e for e in seen if isinstance(e, exp.Create) and "big_anon" in e.this.sql()]
    return publish.sql(dialect="duckdb")


def forms(publish_sql: str) -> dict[str, str]:
    def variant(sort: bool, cast_back: bool) -> str:
        tree = parse_one(publish_sql, dialect="duckdb")
        tree.this.replace(exp.to_table("keep_sort_out"))
        if not sort:
            for order in list(tree.find_all(exp.Order)):
                order.pop()
        if not cast_back:
            outer = tree.expression
            for alias in outer.expressions:
                if isinstance(alias.this, exp.Cast):
                    alias.this.replace(alias.this.this)
        return tree.sql(dialect="duckdb")

    return {"published": variant(True, True), "no sort": variant(False, True),
            "enum out": variant(True, False), "neither": variant(False, False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=330)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    con = duckanon.connect()
    raw = con.duckdb
    raw.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT_CSV.as_posix()}', delim = ';', header = true)")
    raw.execute(f"CREATE TABLE big AS SELECT a.*, row_number() OVER () AS id FROM adult a, range({args.copies}) r(i)")
    rows = raw.execute("SELECT count(*) FROM big").fetchone()[0]
    queries = forms(captured_publish(con, args.copies))
    expected = raw.execute("SELECT count(*) FROM big_anon").fetchone()[0]
    results = {name: [] for name in ["floor", *queries]}
    for rep in range(args.reps):
        for name in results:
            with Meter() as meter:
                if name == "floor":
                    FLOORS["floor with id"](raw)
                else:
                    raw.execute(queries[name])
            results[name].append(meter.record())
            if name != "floor":
                assert raw.execute("SELECT count(*) FROM keep_sort_out").fetchone()[0] == expected
        print(f"rep {rep + 1}: " + ", ".join(f"{n} {r[-1]['wall']:.2f}" for n, r in results.items()), flush=True)

    def spread(name: str, key: str) -> str:
        values = [r[key] for r in results[name]]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print(f"\n{rows:,} rows, {args.reps} repetitions, undisturbed: "
          f"{sum(all(results[n][i]['clean'] for n in results) for i in range(args.reps))}")
    print("| form | wall s | CPU s |\n|---|---|---|")
    for name in results:
        print(f"| {name} | {spread(name, 'wall')} | {spread(name, 'cpu')} |")
    median = {n: {k: statistics.median(r[k] for r in results[n]) for k in ("wall", "cpu")} for n in results}
    for label, a, b in (("the sort, strings written", "published", "no sort"),
                        ("the sort, ENUMs written", "enum out", "neither"),
                        ("VARCHAR over ENUM written, sorted", "published", "enum out"),
                        ("VARCHAR over ENUM written, unsorted", "no sort", "neither")):
        print(f"{label}: {median[a]['wall'] - median[b]['wall']:+.2f} s wall, "
              f"{median[a]['cpu'] - median[b]['cpu']:+.2f} s CPU")


if __name__ == "__main__":
    main()
