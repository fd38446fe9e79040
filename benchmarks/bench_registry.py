"""What a registry of many publications costs every statement.

    python benchmarks/bench_registry.py [--entries 0,50,200,500] [--reps 7] [--sources shared|distinct]

After each of duckanon's statements the registry's listing, the TEMP macro
duckanon_publications(), is brought up to date: one branch per registered publication, with its
source's fingerprint. This measures one small ANONYMIZE (1,000 rows, 2 QIs, keep = (id)) on a
connection whose registry already holds N entries (all from one source table, or with --sources
distinct each from a view of its own over it), two ways:
  new          a release into a new target (the listing gains an entry, so its macro is remade)
  republished  the same statement into an existing target (the listing's text does not change)
and, as the yardstick measured in the same run, the same statements with an empty registry (the
first size). Ratios are median over median against that yardstick; reps alternate the two kinds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckanon

STATEMENT = "ANONYMIZE t INTO {target} WITH (k = 3, qi = (a, b), keep = (id))"


def measure(entries: int, reps: int, distinct: bool) -> dict:
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 7)::VARCHAR AS a, i % 5 AS b, i AS id FROM range(1000) r(i)")
    for n in range(entries):
        if distinct:
            con.execute(f"CREATE VIEW v{n} AS SELECT * FROM t")
            con.execute(STATEMENT.replace("ANONYMIZE t ", f"ANONYMIZE v{n} ").format(target=f"entry{n}"))
        else:
            con.execute(STATEMENT.format(target=f"entry{n}"))
    con.execute(STATEMENT.format(target="again"))
    new, again = [], []
    for rep in range(reps):
        started = time.perf_counter()
        con.execute(STATEMENT.format(target=f"new{rep}"))
        new.append(time.perf_counter() - started)
        started = time.perf_counter()
        con.execute(STATEMENT.format(target="again"))
        again.append(time.perf_counter() - started)
    con.close()
    return {"new": statistics.median(new), "republished": statistics.median(again)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", default="0,50,200,500")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--sources", choices=("shared", "distinct"), default="shared")
    args = parser.parse_args()
    sizes = [int(n) for n in args.entries.split(",")]
    results = {n: measure(n, args.reps, args.sources == "distinct") for n in sizes}
    base = results[sizes[0]]
    print(f"duckanon {duckanon.__version__}, sources {args.sources}, {args.reps} repetitions, "
          f"median ms (ratio to {sizes[0]} entries)")
    print("| entries | new release | republished |")
    print("|---|---|---|")
    for n, r in results.items():
        print(f"| {n} | {r['new'] * 1000:.0f} ({r['new'] / base['new']:.2f}) "
              f"| {r['republished'] * 1000:.0f} ({r['republished'] / base['republished']:.2f}) |")


if __name__ == "__main__":
    main()
