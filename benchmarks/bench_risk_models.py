"""The lattice under the population models on Adult (issue 19): the optimal node, its ARX Loss,
the search time and the nodes evaluated, and the exhaustive search over every node as the check.

    python benchmarks/bench_risk_models.py [--reps 3] [--qi 8|9] [--no-exhaustive]

Population: all of Adult (30,162 rows, ../shared/data/adult); sample: `USING SAMPLE 10%
(bernoulli, 42)` of it (3,089 rows); ARX's hierarchies; metric 'loss'. Cases: k_map = 5 and
delta_presence = (0, 0.5), at 0% and 5% suppression. Per case, --reps runs of the whole
statement (median and range of the statement and of `search_seconds`), and the exhaustive
search of tests/solver/test_risk_lattice.py (every node grouped from the hierarchy files' labels,
independently of the solver) must find the same loss. Writes
benchmarks/results/bench_risk_models.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import duckanon

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
QI9 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
       "salary-class"]
CASES = [("k_map = 5", 0.0), ("k_map = 5", 0.05), ("delta_presence = (0, 0.5)", 0.0), ("delta_presence = (0, 0.5)", 0.05)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--qi", type=int, choices=(8, 9), default=8)
    parser.add_argument("--no-exhaustive", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "solver"))
    from test_risk_lattice import Labels, exhaustive, fetch_text  # the tests' independent search

    qi = QI9[:args.qi]
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';', all_varchar=true)")
    con.execute("CREATE TABLE sample AS SELECT * FROM adult USING SAMPLE 10% (bernoulli, 42)")
    columns = ", ".join(f'"{c}"' for c in qi)
    lines = [f"# The lattice under the population models, Adult {args.qi} QIs (sample 10%, population Adult)", "",
             "| model | suppression | node | loss | statement s (median, range) | search s (median) | nodes evaluated "
             "| of | k-map level | presence range | exhaustive loss |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    sample = fetch_text(con, "sample", qi)
    population = fetch_text(con, "adult", qi)
    for model, limit in CASES:
        statement = (f"ANONYMIZE sample INTO sample_anon WITH ({model}, population = adult, qi = ({columns}), "
                     f"method = 'lattice', metric = 'loss', suppression_limit = {limit}, "
                     f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")
        seconds, searches = [], []
        for _ in range(args.reps):
            started = time.perf_counter()
            cursor = con.execute(statement)
            row = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
            seconds.append(time.perf_counter() - started)
            details = json.loads(row["details"])
            searches.append(details["search_seconds"])
        best = "-"
        if not args.no_exhaustive:
            from duckanon.pipeline.problem import prepare
            problem = prepare(con, statement.replace("INTO sample_anon ", ""))
            value, levels = exhaustive(Labels(qi), sample, population, None, problem.models,
                                       int(math.floor(limit * len(sample[0]) + 1e-9)))
            best = f"{value:.12f} {list(levels)}"
            assert math.isclose(value, details["metric_value"], rel_tol=1e-9), (model, limit, value, details)
        found = details["population"]
        lines.append(f"| {model} | {limit:.0%} | {details['levels']} | {details['metric_value']:.12f} | "
                     f"{statistics.median(seconds):.3f} ({min(seconds):.3f}-{max(seconds):.3f}) | "
                     f"{statistics.median(searches):.4f} | {details['nodes_evaluated']} | {details['lattice_nodes']} | "
                     f"{found['k_map_level']} | {found['delta_presence_range']} | {best} |")
        print(lines[-1], flush=True)
    out = ROOT / "benchmarks" / "results" / f"bench_risk_models_{args.qi}qi.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
