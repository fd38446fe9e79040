"""The empirical (epsilon, delta) check of tests/solver/test_differential_privacy_empirical.py through
whole ANONYMIZE statements (sampling, suppression, materialize): the toy table D (classes of 55, 60,
120 and 4 rows) and its neighbour D' (one row added to the first class), RUNS releases of each at
epsilon 1, delta 1e-3 (k 35, beta 0.632), the published count per class read back from the target.
Prints each event's frequencies and whether P_D(E) <= e^eps P_D'(E) + delta holds both ways within
4 standard errors; the raw result is recorded in benchmarks/results/dp_empirical.md.

    PYTHONPATH=$PWD python benchmarks/dp_empirical.py [RUNS]
"""

import math
import sys
import time

import duckanon

sys.path.insert(0, "tests/solver")
from test_differential_privacy_empirical import _events  # noqa: E402 (the test's events, the same list)

EPSILON, DELTA, K, BETA = 1.0, 1e-3, 35, 0.6321205588285574
SIZES = (55, 60, 120, 4)


def releases(extra: int, runs: int) -> list[tuple]:
    con = duckanon.connect()
    rows = " UNION ALL ".join(f"SELECT {c} AS a FROM range({size + (extra if c == 0 else 0)})"
                             for c, size in enumerate(SIZES))
    con.execute(f"CREATE TABLE t AS {rows}")
    out = []
    for _ in range(runs):
        con.execute(f"ANONYMIZE t INTO r WITH (epsilon = {EPSILON}, delta = {DELTA}, qi = (a))")
        counts = dict(con.execute("SELECT a::INT, count(*) FROM r GROUP BY a").fetchall())
        out.append(tuple(counts.get(c, 0) for c in range(len(SIZES))))
    return out


def main(runs: int) -> None:
    started = time.perf_counter()
    first, second = releases(0, runs), releases(1, runs)
    bound = math.exp(EPSILON)
    failed = 0
    print(f"| event | P_D | P_D' | holds both ways (4 s.e.) |\n|---|---|---|---|")
    for name, event in _events(K, BETA).items():
        p, q = sum(map(event, first)) / runs, sum(map(event, second)) / runs
        holds = all(a - bound * b - DELTA <= 4 * math.sqrt(a * (1 - a) / runs + bound ** 2 * b * (1 - b) / runs)
                    for a, b in ((p, q), (q, p)))
        failed += not holds
        print(f"| {name} | {p:.3f} | {q:.3f} | {'yes' if holds else 'NO'} |")
    print(f"\n{2 * runs} statements in {time.perf_counter() - started:.0f} s; events failing: {failed}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
