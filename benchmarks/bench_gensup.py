"""Generalize then suppress (`gensup`) against generalization alone (`lattice` with record
suppression) and cell suppression alone (`auto`), on one loss scale.

    python benchmarks/bench_gensup.py

Loss per published cell, ARX's "loss" (generalization intensity): a value shown at hierarchy
level h costs (leaves under its node - 1) / (domain size - 1); a star costs 1; a removed row
costs 1 per QI. The table's loss is the mean over rows x QIs (0 = the raw table, 1 = nothing
left). Adult, 8 QIs (the 9 columns but salary-class), ARX hierarchies, k = 5 and 10,
suppression limit 5% for lattice; gensup tries 5%, 20% and 100% and keeps the lowest loss. Writes benchmarks/results/bench_gensup.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import duckanon
from duckanon.pipeline.problem import prepare
from duckanon.solver import solve
from duckanon.solver.generalize import generalization_loss

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def main() -> None:
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';')")
    lines = ["# Generalize then suppress (Adult, 8 QIs, ARX hierarchies)", "",
             "| k | method | loss (mean per cell) | stars | removed rows | seconds |", "|---|---|---|---|---|---|"]
    for k in (5, 10):
        for method in ("lattice", "gensup", "auto"):
            text = (f"ANONYMIZE adult WITH (k = {k}, qi = ({', '.join(chr(34) + c + chr(34) for c in QI)}), "
                    f"method = '{'lattice' if method == 'auto' else method}', suppression_limit = 0.05, "
                    f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")
            problem = prepare(con, text)
            started = time.perf_counter()
            solution = solve(problem.histogram, problem.models, method, domains=problem.domains)
            seconds = time.perf_counter() - started
            levels = solution.notes.get("levels", [0] * len(QI))
            value = generalization_loss(problem.histogram, problem.domains.hierarchies, solution, levels)
            lines.append(f"| {k} | {method} | {value:.4f} | {solution.stars} | {solution.removed_rows} | {seconds:.2f} |")
            print(lines[-1])
    (ROOT / "benchmarks" / "results" / "bench_gensup.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
