"""The ARX side-by-side harness's cases as duckanon statements, for the benchmarks that run them
in process (bench_search_vs_arx.py, bench_loss_vs_arx.py). The harness (../shared/arx-side-by-side/
py/harness.py) defines the cases; its `duck_case.py` states them the same way."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT.parent / "shared" / "arx-side-by-side" / "py"
sys.path.insert(0, str(HARNESS))

import harness  # noqa: E402  (the harness defines the cases)

import duckanon  # noqa: E402


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def hierarchy_pattern(case: dict) -> str:
    """The case's ARX hierarchy files as duckanon's `hierarchies = '..._{column}.csv'`."""
    return harness.DATASETS[case["ds"]]["hier"].replace("{col}", "{column}")


def request_options(case: dict, method: str) -> list[str]:
    """qi, method, seed 1 and the privacy request of `case` (k, distinct l, equal-distance t)."""
    options = [f"qi = ({', '.join(q(c) for c in case['qis'])})", f"method = '{method}'", "seed = 1"]
    if case["k"]:
        options.append(f"k = {case['k']}")
    if case["l"]:
        options += [f"l = {case['l']}", "l_variant = 'distinct'"]
    if case["t"] >= 0:
        options += [f"t = {case['t']}", "t_distance = 'equal'"]
    if case["sensitive"] and (case["l"] or case["t"] >= 0):
        options.append(f"sensitive = {q(case['sensitive'])}")
    return options


def hierarchy_options(case: dict) -> list[str]:
    return [f"suppression_limit = {case['supp']}", f"hierarchies = '{hierarchy_pattern(case)}'"]


def anonymize(options: list[str]) -> str:
    return f"ANONYMIZE src INTO out WITH ({', '.join(options)})"


_CONNECTIONS: dict[str, object] = {}


def connection(dataset: str):
    """One connection per data set with the harness's file loaded as table src (all text)."""
    if dataset not in _CONNECTIONS:
        con = duckanon.connect()
        con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv('{harness.DATASETS[dataset]['csv']}', delim=';', "
                    f"header=true, all_varchar=true)")
        _CONNECTIONS[dataset] = con
    return _CONNECTIONS[dataset]
