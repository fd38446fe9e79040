"""Tests for sql/risk_population.sql: k-map and delta-presence against a population table, and the
population uniqueness estimates, in plain DuckDB (the files loaded on a bare duckdb connection).

References: brute-force Python counts written here (a '*' in the sample matches anything, NULL
matches NULL, values compared as text) and duckanon.solver.population, whose agreement with ARX
tests/solver/test_population_estimators.py checks.
"""

from __future__ import annotations

import collections
import csv
import math
import random
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckanon.solver import population as pop
from duckanon.solver import special

from support.tiers import examples

SQL = Path(__file__).resolve().parents[2] / "sql"
FILES = ["checks.sql", "risk.sql", "risk_population.sql"]  # load order (risk_population uses both)
ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "adult.csv"
QI8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
       "salary-class"]


def plain_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name in FILES:
        con.execute((SQL / name).read_text())
    return con


@pytest.fixture(scope="module")
def con():
    c = plain_connection()
    yield c
    c.close()


def make_table(con, name, columns, rows, types=None):
    types = types or ["VARCHAR"] * len(columns)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" ('
                + ", ".join(f'"{c}" {t}' for c, t in zip(columns, types)) + ")")
    if rows:
        con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" for _ in columns)})',
                        [list(r) for r in rows])


def one(con, sql, params=None):
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return dict(zip(names, rows[0]))


# ----------------------------------------------------------------------------------------------
# brute force: k-map and delta-presence


def text(v):
    return None if v is None else str(v)


def matches(sample_key, population_row) -> bool:
    """A sample class key matches a population row: '*' matches anything, NULL matches NULL,
    other values compare as text."""
    for s, p in zip(sample_key, population_row):
        if s == "*":
            continue
        if s is None or p is None:
            if not (s is None and p is None):
                return False
        elif s != text(p):
            return False
    return True


def brute_classes(sample, population):
    """{class key: (size, matches)} by comparing every class with every population row."""
    sizes = collections.Counter(tuple(text(v) for v in r) for r in sample)
    return {key: (size, sum(1 for p in population if matches(key, p))) for key, size in sizes.items()}


def brute_kmap(sample, population):
    cls = brute_classes(sample, population)
    return dict(k_map=min((m for _, m in cls.values()), default=None), classes=len(cls),
                rows=len(sample), population_rows=len(population))


def brute_delta(sample, population):
    cls = brute_classes(sample, population)
    deltas = [s / m if m else math.inf for s, m in cls.values()]
    short = sum(s for s, m in cls.values() if m < s)
    return dict(delta_min=min(deltas, default=None), delta_max=max(deltas, default=None),
                contained=short == 0, rows_not_in_population=short, classes=len(cls),
                rows=len(sample), population_rows=len(population))


def check_population_macros(con, sample, population, qi):
    got = one(con, "SELECT * FROM anon_kmap('s', 'p', ?)", [qi])
    assert got == brute_kmap(sample, population)
    got = one(con, "SELECT * FROM anon_delta_presence('s', 'p', ?)", [qi])
    expected = brute_delta(sample, population)
    for key in ("delta_min", "delta_max"):
        if expected[key] is not None:
            assert got[key] == pytest.approx(expected[key], rel=1e-15)
            got[key] = expected[key]
    assert got == expected
    rows = con.execute("SELECT * FROM anon_kmap_classes('s', 'p', ?)", [qi]).fetchall()
    cls = brute_classes(sample, population)
    assert len(rows) == len(cls)
    for row in rows:
        key, size, found, delta = tuple(row[:-3]), row[-3], row[-2], row[-1]
        assert cls[key] == (size, found)
        assert delta == (size / found if found else math.inf)


VALUES = st.sampled_from(["a", "b", "c", None, "*"])


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 3), data=st.data())
def test_kmap_and_delta_presence_against_brute_force(con, m, data):
    """Random samples with stars and NULLs against random populations (which may hold a literal
    '*', matched only by a sample '*' cell, as any other value)."""
    qi = ["x", "y z", "Q"][:m]
    sample = data.draw(st.lists(st.tuples(*[VALUES] * m), max_size=12))
    population = data.draw(st.lists(st.tuples(*[VALUES] * m), max_size=25))
    make_table(con, "s", qi, sample)
    make_table(con, "p", qi, population)
    check_population_macros(con, sample, population, qi)


def test_kmap_by_hand(con):
    # population (INTEGER and VARCHAR columns): ages 30, 30, 31, 40 with zip 1, 2, 2, NULL
    make_table(con, "p", ["age", "zip"], [(30, "1"), (30, "2"), (31, "2"), (40, None)],
               ["INTEGER", "VARCHAR"])
    # published: (30, *) matches 2 rows, (*, 2) matches 2, (40, NULL) 1, (50, *) none
    make_table(con, "s", ["age", "zip"], [("30", "*"), ("30", "*"), ("*", "2"), ("40", None),
                                          ("50", "*")])
    assert one(con, "SELECT * FROM anon_kmap('s', 'p', ['age', 'zip'])") == dict(
        k_map=0, classes=4, rows=5, population_rows=4)
    rows = con.execute("SELECT age, zip, size, matches, delta FROM anon_kmap_classes('s', 'p', "
                       "['age', 'zip'])").fetchall()
    assert rows == [("*", "2", 1, 2, 0.5), ("30", "*", 2, 2, 1.0), ("40", None, 1, 1, 1.0),
                    ("50", "*", 1, 0, math.inf)]
    got = one(con, "SELECT * FROM anon_delta_presence('s', 'p', ['age', 'zip'])")
    assert (got["delta_min"], got["delta_max"], got["contained"], got["rows_not_in_population"]) \
        == (0.5, math.inf, False, 1)
    con.execute("DELETE FROM s WHERE age = '50'")
    got = one(con, "SELECT * FROM anon_delta_presence('s', 'p', ['age', 'zip'])")
    assert (got["delta_min"], got["delta_max"], got["contained"]) == (0.5, 1.0, True)
    assert one(con, "SELECT k_map FROM anon_kmap('s', 'p', ['age', 'zip'])") == {"k_map": 1}


def test_empty_sample(con):
    make_table(con, "s", ["a"], [])
    make_table(con, "p", ["a"], [("x",), ("y",)])
    assert one(con, "SELECT * FROM anon_kmap('s', 'p', ['a'])") == dict(
        k_map=None, classes=0, rows=0, population_rows=2)
    assert one(con, "SELECT * FROM anon_delta_presence('s', 'p', ['a'])") == dict(
        delta_min=None, delta_max=None, contained=True, rows_not_in_population=0, classes=0,
        rows=0, population_rows=2)
    assert one(con, "SELECT * FROM anon_population_uniqueness('s', ['a'], 10, 'dankar')") == dict(
        uniques=None, fraction=None, estimator="dankar", converged=None, sample_uniques=0,
        classes=0, rows=0, sampling_fraction=0.0)


@pytest.fixture(scope="module")
def adult(con):
    if not ADULT.exists():
        pytest.skip("../shared/data/adult is not available")
    con.execute(f"CREATE OR REPLACE TABLE adult AS SELECT * FROM read_csv('{ADULT}', delim=';', "
                "header=true, all_varchar=true)")
    with open(ADULT, newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    return rows[0], rows[1:]


def test_kmap_and_delta_presence_on_adult(con, adult):
    """Sample: Adult's rows 0, 10, 20, ... with native-country and workclass starred in half of
    them; population: Adult. Checked against a count of the population per star pattern."""
    header, rows = adult
    qi = ["sex", "age", "race", "native-country", "workclass"]
    idx = [header.index(c) for c in qi]
    sample = []
    for i, r in enumerate(rows[::10]):
        key = [r[j] for j in idx]
        if i % 2:
            key[3] = key[4] = "*"
        sample.append(tuple(key))
    population = [tuple(r[j] for j in idx) for r in rows]
    make_table(con, "s", qi, sample)
    classes = collections.Counter(sample)
    counted = {}
    for pattern in {tuple(v == "*" for v in key) for key in classes}:
        counted[pattern] = collections.Counter(
            tuple("*" if star else v for v, star in zip(p, pattern)) for p in population)
    expected = {key: (size, counted[tuple(v == "*" for v in key)][key]) for key, size in classes.items()}
    got = {tuple(r[:5]): (r[5], r[6]) for r in con.execute(
        "SELECT * FROM anon_kmap_classes('s', 'adult', ?)", [qi]).fetchall()}
    assert got == expected
    kmap = one(con, "SELECT * FROM anon_kmap('s', 'adult', ?)", [qi])
    assert kmap == dict(k_map=min(m for _, m in expected.values()), classes=len(classes),
                        rows=len(sample), population_rows=len(rows))
    delta = one(con, "SELECT * FROM anon_delta_presence('s', 'adult', ?)", [qi])
    assert delta["contained"] is True  # every sample row is an Adult row
    assert delta["delta_max"] == max(s / m for s, m in expected.values())
    assert delta["delta_min"] == min(s / m for s, m in expected.values())


# ----------------------------------------------------------------------------------------------
# population uniqueness: the same numbers as duckanon.solver.population


def sql_uniqueness(con, table, qi, big_n, estimator):
    return one(con, "SELECT * FROM anon_population_uniqueness(?, ?, ?, ?)", [table, qi, big_n, estimator])


def assert_same(got, sizes, big_n, estimator):
    expected = pop.population_uniques(sizes, big_n, estimator)
    assert got["uniques"] == pytest.approx(expected.uniques, rel=1e-9, abs=1e-300)
    assert got["fraction"] == pytest.approx(expected.fraction, rel=1e-9, abs=1e-300)
    assert (got["estimator"], got["converged"]) == (expected.estimator, expected.converged)
    n = sum(sizes)
    assert (got["sample_uniques"], got["classes"], got["rows"]) == (sizes.count(1), len(sizes), n)
    assert got["sampling_fraction"] == n / big_n


def class_table(con, sizes):
    """Table t(q) with one class per entry of `sizes` (q = the class number)."""
    con.execute("CREATE OR REPLACE TABLE t AS SELECT unnest(?::INTEGER[]) AS q",
                [[i for i, k in enumerate(sizes) for _ in range(k)]])


PROFILES = {  # the small profiles of the ARX reference values (tests/solver)
    "tiny_a": {1: 5, 2: 3, 3: 2, 5: 1},
    "tiny_b": {1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1},
    "no_pairs": {1: 4, 3: 2},
    "no_uniques": {2: 2, 3: 1},
    "snb_a": {1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1},
    "snb_b": {1: 8, 2: 5, 3: 3, 4: 3, 5: 1, 8: 3},
}


def profile_sizes(name):
    return [k for k, c in sorted(PROFILES[name].items()) for _ in range(c)]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_uniqueness_on_small_profiles(con, name):
    """Zayatz and SNB on every profile; Pitman where its fit converges in a few steps."""
    sizes = profile_sizes(name)
    class_table(con, sizes)
    n = sum(sizes)
    for big_n in (n + 2, 10 * n):
        for estimator in ("zayatz", "snb"):
            assert_same(sql_uniqueness(con, "t", ["q"], big_n, estimator), sizes, big_n, estimator)
    if name == "tiny_b":
        for big_n, estimator in ((10 * n, "dankar"), (1000 * n, "pitman")):
            assert_same(sql_uniqueness(con, "t", ["q"], big_n, estimator), sizes, big_n, estimator)
    if name == "no_uniques":
        for estimator in ("pitman", "dankar"):
            assert_same(sql_uniqueness(con, "t", ["q"], 10 * n, estimator), sizes, 10 * n, estimator)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_a", "no_pairs", "snb_a", "snb_b"])
def test_pitman_on_small_profiles_slow(con, name):
    """Pitman fits that wander (thousands of Newton steps on ARX's path, then 'not available'):
    a few seconds each in SQL."""
    sizes = profile_sizes(name)
    class_table(con, sizes)
    n = sum(sizes)
    for big_n in (n, 10 * n, 1000 * n):
        for estimator in ("pitman", "dankar"):
            assert_same(sql_uniqueness(con, "t", ["q"], big_n, estimator), sizes, big_n, estimator)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(profile=st.dictionaries(st.integers(1, 9), st.integers(1, 12), min_size=1, max_size=5),
       factor=st.sampled_from([1.0, 1.2, 3.0, 9.99, 10.0, 10.01, 40.0, 1e5]),
       estimator=st.sampled_from(pop.ESTIMATORS))
def test_uniqueness_same_as_python(con, profile, factor, estimator):
    """Random class-size profiles (a Pitman fit in which every start value fails takes ~30,000
    Newton steps, a few seconds in SQL: hence slow)."""
    sizes = [k for k, c in sorted(profile.items()) for _ in range(c)]
    random.Random(len(sizes)).shuffle(sizes)
    class_table(con, sizes)
    big_n = max(sum(sizes), int(sum(sizes) * factor))
    assert_same(sql_uniqueness(con, "t", ["q"], big_n, estimator), sizes, big_n, estimator)


@pytest.mark.parametrize("big_n, estimator", [
    (30162, "snb"), (30162, "dankar"), (37702, "zayatz"), (301620, "pitman"), (301620, "dankar"),
    (318_900_000, "pitman"), (318_900_000, "zayatz"),
])
def test_uniqueness_on_adult(con, adult, big_n, estimator):
    header, rows = adult
    idx = [header.index(c) for c in QI8]
    sizes = list(collections.Counter(tuple(r[i] for i in idx) for r in rows).values())
    got = sql_uniqueness(con, "adult", QI8, big_n, estimator)
    assert_same(got, sizes, big_n, estimator)


def test_uniqueness_on_adult_is_arxs(con, adult):
    # ARX 3.9.2 on Adult, 8 QIs (benchmarks/arx_population/run.py; ARX_UNIQUENESS in
    # tests/solver/test_population_estimators.py): Dankar at N = 301,620 picks Pitman, 42411.14...
    got = sql_uniqueness(con, "adult", QI8, 301620, "dankar")
    assert got["estimator"] == "pitman"
    assert got["uniques"] == pytest.approx(42411.14113232119, rel=1e-9)
    got = sql_uniqueness(con, "adult", QI8, 60324, "dankar")
    assert got["estimator"] == "zayatz"
    assert got["uniques"] == pytest.approx(13955.956236963684, rel=1e-12)


def test_numeric_helpers_are_pythons_bits(con):
    rng = random.Random(7)
    # (DuckDB 1.5's Python client turns a NaN inside a list parameter into NULL: NaN below)
    assert con.execute("SELECT isnan(anon_population_digamma('NaN'::DOUBLE)), "
                       "isnan(anon_population_trigamma('-Infinity'::DOUBLE))").fetchone() == (True, True)
    xs = [0.0, 1e-7, 1e-6, 5e-5, 2e-4, 0.3, 1.0, 7.9, 8.0, 11.99, 12.0, 40.0, 1e5, -0.5, -3.7,
          -2168.3, math.inf]
    xs += [rng.uniform(-50, 50) for _ in range(200)] + [10 ** rng.uniform(-8, 9) for _ in range(100)]
    rows = con.execute("SELECT x, anon_population_digamma(x), anon_population_trigamma(x) "
                       "FROM unnest(?::DOUBLE[]) AS v(x)", [xs]).fetchall()
    for x, d, t in rows:
        for got, expected in ((d, special.digamma_arx(x)), (t, special.trigamma_arx(x))):
            assert got == expected or (math.isnan(got) and math.isnan(expected)), x
    for k, n, big_n in [(1, 30162, 318_900_000), (3, 30162, 318_900_000), (40, 3017, 30162),
                        (9000, 30162, 40000), (5, 10, 12)]:
        got = con.execute("SELECT anon_population_hypergeometric_one(?, ?, ?)", [k, n, big_n]).fetchone()[0]
        assert got == pytest.approx(pop.hypergeometric_one(k, n, big_n), rel=1e-12, abs=1e-300)
    for x, h in [(40.5, 3.0), (3.2e8, 30162.0), (12.0, 0.7), (1e5, 0.6)]:
        got = con.execute("SELECT anon_population_lgamma_diff(?::DOUBLE, ?::DOUBLE)", [x, h]).fetchone()[0]
        assert got == pytest.approx(special.lgamma_diff(x, h), rel=1e-13)


# ----------------------------------------------------------------------------------------------
# bad input: one line each


@pytest.mark.parametrize("sql, words", [
    ("SELECT * FROM anon_population_uniqueness('s', ['a'], 100, 'poisson')",
     "known estimators: pitman, zayatz, snb, dankar"),
    ("SELECT * FROM anon_population_uniqueness('s', ['a'], 2, 'pitman')", "smaller than the sample"),
    ("SELECT * FROM anon_population_uniqueness('s', ['a'], 10.5, 'zayatz')", "whole number"),
    ("SELECT * FROM anon_population_uniqueness('s', ['a', 'nope'], 100, 'zayatz')",
     "table s has no column named nope"),
    ("SELECT * FROM anon_kmap('s', 'p', ['a', 'b'])", "table p has no column named b"),
    ("SELECT * FROM anon_delta_presence('s', 'p', ['a', 'b'])", "table p has no column named b"),
    ("SELECT * FROM anon_kmap_classes('s', 'p', ['a', 'c'])", "has no column named c"),
])
def test_bad_input_one_line(con, sql, words):
    make_table(con, "s", ["a", "b"], [("x", "1"), ("y", "1"), ("y", "2")])
    make_table(con, "p", ["a"], [("x",), ("y",), ("z",)])
    with pytest.raises(duckdb.Error) as err:
        con.execute(sql).fetchall()
    message = str(err.value)
    assert words in message and "\n" not in message.strip()
    assert "'x'" not in message and "'y'" not in message  # no data values
