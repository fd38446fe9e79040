"""The method registry (duckanon/methods.py) is the one table the front end, the solver, EXPLAIN,
the report and the docs (docs/statement.md's option table, docs/methods.md's list) agree on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import duckanon
from duckanon import methods
from duckanon.solver import BOUNDED, GENERALIZING, METHODS, RUNNERS
from duckanon.solver import models as solver_models
from duckanon.solver import population
from duckanon.solver.heuristics import HEURISTICS, RUNS

from support.data import HOSPITAL

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OPTIONS_PAGE = (DOCS / "statement.md").read_text()
METHODS_PAGE = (DOCS / "methods.md").read_text()


def test_every_method_has_a_runner_and_the_solver_reads_the_registry():
    assert list(RUNNERS) == list(methods.NAMES) == list(METHODS)
    assert GENERALIZING == ("lattice", "mondrian", "gensup")
    assert set(BOUNDED) == {"auto", "exact", "lattice", "gensup", "mondrian"}
    assert list(HEURISTICS) == list(RUNS) == ["mapprox", "greedy", "merge", "topdown", "carve", "segments"]
    assert methods.names(takes_patterns=True) == ("auto", "mapprox", "greedy", "exact", "dp")
    assert methods.names(several_sensitive=False) == ("exact", "matching", "simplex", "tp", "tp+")
    assert methods.names(any_k=False) == ("matching", "simplex")


def test_a_dispatch_table_with_a_gap_or_a_stranger_is_not_built():
    runs = {name: name.upper() for name in methods.NAMES}
    assert methods.bound(runs) == runs
    assert methods.bound({"segments": 6, "carve": 1, "greedy": 2, "merge": 3, "mapprox": 4, "topdown": 5},
                         heuristic=True) == \
        {"mapprox": 4, "greedy": 2, "merge": 3, "topdown": 5, "carve": 1, "segments": 6}  # in the table's order
    del runs["hilbert"]
    with pytest.raises(LookupError, match=r"no runner for \['hilbert'\], runners of no such method \[\]$"):
        methods.bound(runs)
    with pytest.raises(LookupError, match=r"no runner for \[\], runners of no such method \['tp'\]$"):
        methods.bound({"mapprox": 1, "greedy": 2, "merge": 3, "topdown": 4, "carve": 5, "segments": 7, "tp": 6},
                      heuristic=True)


def test_a_registered_method_without_a_runner_stops_the_solver_even_under_python_O():
    """No assert ties the table to the runners: the check is a raise, which -O keeps."""
    code = ("from duckanon import methods; "
            "methods.METHODS['newer'] = methods.MethodSpec('newer', 'a method nobody wrote'); "
            "import duckanon.solver")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "LookupError: the dispatch table does not match duckanon.methods: no runner for ['newer'], "
        "runners of no such method []")


def test_the_option_words_are_the_solvers_classes_and_estimators():
    """The front end accepts the words of duckanon.methods without loading the solver; each
    builds its own class, and each estimator runs (dankar picks one of the others)."""
    from duckanon.sql import options as statement  # the option readers take the words

    assert statement.L_VARIANTS is methods.L_VARIANTS and statement.BETA_VARIANTS is methods.BETA_VARIANTS
    assert statement.UNIQUENESS_ESTIMATORS is population.ESTIMATORS is methods.UNIQUENESS_ESTIMATORS
    assert statement.KMAP_ESTIMATORS is population.KMAP_ESTIMATORS is methods.KMAP_ESTIMATORS
    assert [solver_models.l_diversity(2, word, c=2.0 if word == "recursive" else None).variant
            for word in methods.L_VARIANTS] == list(methods.L_VARIANTS)
    assert [solver_models.BETA_VARIANTS[word](0.5, [3, 1]).variant for word in methods.BETA_VARIANTS] == \
        list(methods.BETA_VARIANTS)
    assert list(solver_models.T_CLOSENESS_DISTANCES) == [*methods.T_DISTANCES, "custom"]
    assert [cls.distance for cls in solver_models.T_CLOSENESS_DISTANCES.values()] == [*methods.T_DISTANCES, "custom"]
    sizes = [1, 1, 1, 2, 2, 3, 5, 8]
    chosen = [population.population_uniques(sizes, 1000, word).estimator for word in methods.UNIQUENESS_ESTIMATORS]
    assert chosen[:3] == ["pitman", "zayatz", "snb"] and chosen[3] in ("pitman", "zayatz", "snb")
    # ARX's KMap.getDerivedK() for k = 100, n = 30162, N = 60324 (test_population_estimators.ARX_KMAP)
    assert [population.kmap_derived_k(100, 30162, 60324, word) for word in methods.KMAP_ESTIMATORS] == [69, 68]


def test_the_docs_list_every_method_in_the_option_table_and_describe_each():
    row = next(line for line in OPTIONS_PAGE.splitlines() if line.startswith("| `method` |"))
    assert re.findall(r"`([a-z+]+)`", row.split("|")[2]) == [n for n in ("auto", "exact", "dp", "matching", "simplex", "mapprox",
                                                                         "greedy", "merge", "tp", "tp+", "hilbert",
                                                                         "topdown", "carve", "segments", "lattice", "mondrian",
                                                                         "gensup")]
    assert set(re.findall(r"`([a-z+]+)`", row.split("|")[2])) == set(methods.NAMES)
    described = set(re.findall(r"^- `([a-z+]+)`", METHODS_PAGE, flags=re.M))
    assert set(methods.NAMES) <= described, set(methods.NAMES) - described


def test_the_front_end_checks_a_statement_without_loading_the_solvers():
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
                                  "or hierarchies with 'auto', 'simplex' or 'mondrian'")


def test_explain_says_what_the_requested_method_is(con):
    rows = dict(con.execute("EXPLAIN ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age), method = mapprox)").fetchall())
    assert rows["why"] == f"requested method = mapprox: {methods.spec('mapprox').summary}"


PATTERN_TAKERS = "'auto', 'mapprox', 'greedy', 'exact' or 'dp'"
GLOBAL_TAKERS = "'auto', 'mapprox', 'greedy', 'merge', 'topdown', 'carve', 'segments', 'tp', 'tp+', 'hilbert', 'lattice' or 'mondrian'"
SEVERAL_SENSITIVE_TAKERS = ("'auto', 'mapprox', 'greedy', 'merge', 'topdown', 'carve', 'segments', 'dp', 'hilbert', 'lattice', "
                            "'mondrian' or 'gensup'")
REFUSED_THINGS = {  # statement (with the method to fill in), the refusal of a method lacking it, its takers
    "patterns": ("ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, qi = (zipcode, age), method = '{}', "
                 "patterns = ((zipcode), (age)))", "method {} does not take patterns: use " + PATTERN_TAKERS,
                 PATTERN_TAKERS),
    "average_risk": ("ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, qi = (zipcode, age), "
                     "average_risk = 0.5, method = '{}')", "method {} does not take average_risk: use " + GLOBAL_TAKERS,
                     GLOBAL_TAKERS),
    "several sensitive columns": (
        "ANONYMIZE hospital WITH (k = 2, l = 2, l_variant = distinct, qi = (zipcode, age), "
        "sensitive = (education, disease), method = '{}')",
        "method {} reads one sensitive column's counts: with several sensitive columns use " + SEVERAL_SENSITIVE_TAKERS,
        SEVERAL_SENSITIVE_TAKERS),
}


@pytest.mark.parametrize("name", methods.NAMES)
@pytest.mark.parametrize("thing", REFUSED_THINGS)
def test_a_refusal_lists_exactly_the_methods_that_take_the_thing(con, thing, name):
    """Each method listed publishes the statement; each other one refuses it in that one line,
    before anything is written."""
    statement, refused, takers = REFUSED_THINGS[thing]
    if f"'{name}'" in takers:
        con.execute(statement.format(name))
        assert con.execute("SELECT count(*) FROM hospital_anon").fetchone() == (10,)
        return
    with pytest.raises(duckanon.AnonymizeError) as refusal:
        con.execute(statement.format(name))
    assert str(refusal.value) == refused.format(name)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name <> 'hospital'").fetchone() == (0,)


def test_the_solver_refuses_from_the_same_flags_for_callers_of_its_api():
    """solve() called without the front end (benchmarks, the Python API) refuses with the same lines."""
    from duckanon.solver import Histogram, KAnonymity, solve
    from duckanon.solver.models import AverageRisk, DeltaPresence

    hist = Histogram.from_rows([("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")])
    for models, method, patterns, refused in (
            ([KAnonymity(2), DeltaPresence(0, 0.5)], "greedy", None,
             "method greedy does not take (0, 0.5)-presence: use 'auto' or 'lattice' (the lattice counts the "
             "population rows of each class)"),
            ([KAnonymity(2), AverageRisk(0.5)], "exact", None,
             f"method exact does not take average risk <= 0.5: use {GLOBAL_TAKERS}"),
            ([KAnonymity(2)], "merge", [[0]], f"method merge does not take patterns: use {PATTERN_TAKERS}"),
            ([KAnonymity(2)], "magic", None, "unknown method 'magic' (known: " + ", ".join(methods.NAMES) + ")")):
        with pytest.raises(duckanon.AnonymizeError) as refusal:
            solve(hist, models, method, patterns=patterns)
        assert str(refusal.value) == refused
    # greedy takes them: starring only the first column, (*, x) and (*, y) twice each
    assert solve(hist, [KAnonymity(2)], "greedy", patterns=[[0]]).stars == 4


def _named_methods(message: str) -> list[str]:
    return re.findall(r"'([a-z+]+)'", message.split("needs method = ", 1)[1].split(", or ")[0])


@pytest.mark.parametrize("option, statement", [
    ("hierarchies", "ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), method = {m}, hierarchies = (age = 'prefix'))"),
    ("metric", "ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), method = {m}, metric = 'loss')"),
])
def test_the_methods_an_option_refusal_names_take_the_option(con, option, statement):
    """The refusal is generated from the table's flags: every method it names takes the option
    (the statement publishes), and every method it leaves out is refused with the same line."""
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute(statement.format(m="carve"))
    named = _named_methods(str(refused.value))
    assert named and set(named) <= set(methods.NAMES)
    for name in methods.NAMES:
        text = statement.format(m=f"'{name}'")
        if name in named:
            con.execute(text)
        else:
            with pytest.raises(duckanon.AnonymizeError) as other:
                con.execute(text)
            assert str(other.value) == str(refused.value)


def test_a_statement_that_runs_no_lp_imports_neither_scipy_nor_pandas():
    # scipy is imported where an LP runs (solver/__init__.py), and the cells and the keyed table
    # go through Arrow's buffers (pipeline/arrays.py), since pyarrow's conversions import pandas
    code = ("import sys, duckanon; con = duckanon.connect(); "
            f"con.execute(\"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')\"); "
            "loaded = lambda: sorted({m.split('.')[0] for m in sys.modules if m.startswith(('scipy', 'pandas'))}); "
            "print(loaded()); con.execute('ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), "
            "method = mapprox)'); print(loaded()); "
            "con.execute('ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education))'); "
            "print(loaded(), con.fetchone()[5])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "[]", "['scipy'] exact"]  # auto's exact ran its LP
