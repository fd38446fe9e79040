"""The method registry (duckanon/methods.py) is the one table the front end, the solver, EXPLAIN,
the report and the docs (docs/statement.md's option table, docs/methods.md's list) agree on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import duckanon
from duckanon import methods
from duckanon.solver import BOUNDED, GENERALIZING, METHODS, RUNNERS
from duckanon.solver.heuristics import HEURISTICS, TAKE_PATTERNS

DOCS = Path(__file__).resolve().parents[2] / "docs"
OPTIONS_PAGE = (DOCS / "statement.md").read_text()
METHODS_PAGE = (DOCS / "methods.md").read_text()


def test_every_method_has_a_runner_and_the_solver_reads_the_registry():
    assert set(RUNNERS) | {"auto"} == set(methods.NAMES) == set(METHODS)
    assert GENERALIZING == ("lattice", "mondrian", "gensup")
    assert set(BOUNDED) == {"auto", "exact", "lattice", "gensup", "mondrian"}
    assert set(HEURISTICS) == {"mapprox", "greedy", "merge", "topdown", "carve"}
    assert set(TAKE_PATTERNS) == {"mapprox", "greedy"}


def test_the_docs_list_every_method_in_the_option_table_and_describe_each():
    row = next(line for line in OPTIONS_PAGE.splitlines() if line.startswith("| `method` |"))
    assert re.findall(r"`([a-z+]+)`", row.split("|")[2]) == [n for n in ("auto", "exact", "dp", "matching", "mapprox",
                                                                         "greedy", "merge", "tp", "tp+", "hilbert",
                                                                         "topdown", "carve", "lattice", "mondrian",
                                                                         "gensup")]
    assert set(re.findall(r"`([a-z+]+)`", row.split("|")[2])) == set(methods.NAMES)
    described = set(re.findall(r"^- `([a-z+]+)`", METHODS_PAGE, flags=re.M))
    assert set(methods.NAMES) <= described, set(methods.NAMES) - described


def test_the_front_end_checks_a_statement_without_loading_the_solvers():
    import subprocess
    import sys

    code = ("import sys; from duckanon.sql import parse_statement, bind_statement; "
            "text = 'ANONYMIZE t WITH (k = 2, method = lattice, metric = loss)'; "
            "bind_statement(parse_statement(text), text); "
            "print(sorted(m for m in sys.modules if m.startswith(('duckanon.solver', 'scipy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", methods.names(generalizes=True, takes_hierarchies=False))
def test_capabilities_drive_the_option_checks(con, name):
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute(f"ANONYMIZE hospital WITH (k = 2, method = {name}, suppression_limit = 0.1)")
    assert str(refused.value) == ("option suppression_limit needs method = 'lattice' or 'gensup', "
                                  "or hierarchies with 'mondrian' or 'auto'")


def test_explain_says_what_the_requested_method_is(con):
    rows = dict(con.execute("EXPLAIN ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age), method = mapprox)").fetchall())
    assert rows["why"] == f"requested method = mapprox: {methods.spec('mapprox').summary}"
