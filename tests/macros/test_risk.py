"""Tests for the risk and utility macros in sql/risk.sql (DuckDB table macros).

Every expected number is computed by hand (see the comments) or by the small pure-Python references
below (`risk_reference`, `kl_reference`), which share no code with the SQL: the KL reference walks
the whole domain Omega with itertools.product, exactly as Xiao, Yi & Tao (2010) formula (2) reads.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon

QI = ["zipcode", "age", "education"]


@pytest.fixture
def con():
    c = duckanon.connect()
    yield c
    c.close()


@pytest.fixture(scope="module")
def mcon():
    """One connection for the hypothesis tests (function-scoped fixtures are reset per example)."""
    c = duckanon.connect()
    yield c
    c.close()


def one(con, sql):
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return dict(zip(names, rows[0]))


def make_table(con, name, columns, rows):
    """CREATE TABLE name(columns) with rows (columns: list of (name, type))."""
    con.execute(f'DROP TABLE IF EXISTS "{name}"')
    con.execute(f'CREATE TABLE "{name}" ({", ".join(f"{chr(34)}{c}{chr(34)} {t}" for c, t in columns)})')
    if rows:
        marks = ", ".join("?" for _ in columns)
        con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', [list(r) for r in rows])


# --------------------------------------------------------------------------------------------
# independent references


def risk_reference(rows, threshold=0.2):
    """Prosecutor risk of a list of QI tuples."""
    sizes = Counter(rows)
    n = len(rows)
    at_risk = sum(f for f in sizes.values() if 1 / f > threshold)
    uniques = sum(1 for f in sizes.values() if f == 1)
    return dict(
        highest_risk=1 / min(sizes.values()),
        average_risk=len(sizes) / n,
        records_at_risk=at_risk,
        records_at_risk_fraction=at_risk / n,
        marketer_risk=len(sizes) / n,
        uniques=uniques,
        uniques_fraction=uniques / n,
        classes=len(sizes),
        rows=n,
    )


def kl_reference(original, published, m):
    """KL(f, f*) of Xiao, Yi & Tao (2010) formula (2), by brute force over Omega.

    original, published: lists of tuples (QI_1..QI_m, SA) of strings or None; '*' in a published
    QI cell is uniform over the original's domain of that column.
    """
    domains = [sorted({r[i] for r in original}, key=lambda v: (v is None, v)) for i in range(m)]
    sa_domain = sorted({r[m] for r in original}, key=lambda v: (v is None, v))
    n, n_pub = len(original), len(published)
    f = Counter(original)
    kl = 0.0
    for p in itertools.product(*domains, sa_domain):
        fp = f.get(p, 0) / n
        if fp == 0:
            continue
        mass = 0.0
        for r in published:
            if r[m] != p[m]:
                continue
            w = 1.0
            for i in range(m):
                if r[i] == "*":
                    w /= len(domains[i])
                elif r[i] != p[i]:
                    w = 0.0
                    break
            mass += w
        fstar = mass / n_pub
        if fstar == 0:
            return math.inf
        kl += fp * math.log(fp / fstar)
    return kl


# --------------------------------------------------------------------------------------------
# anon_risk


def test_risk_hospital_all_unique(hospital):
    # every hospital row has its own zipcode, so 10 classes of 1: everybody is unique
    r = one(hospital, f"SELECT * FROM anon_risk('hospital', {QI})")
    assert r == dict(highest_risk=1.0, average_risk=1.0, records_at_risk=10, records_at_risk_fraction=1.0,
                     marketer_risk=1.0, uniques=10, uniques_fraction=1.0, classes=10, rows=10)


def test_risk_hospital_education(hospital):
    # education: Bachelor 6, Doctorate 2, Master 2 -> highest 1/2, average 3/10,
    # at risk (1/f > 0.2): the two classes of 2 -> 4 records
    r = one(hospital, "SELECT * FROM anon_risk('hospital', ['education'])")
    assert r["highest_risk"] == 0.5
    assert r["average_risk"] == pytest.approx(0.3)
    assert r["marketer_risk"] == pytest.approx(0.3)
    assert (r["records_at_risk"], r["records_at_risk_fraction"]) == (4, pytest.approx(0.4))
    assert (r["uniques"], r["uniques_fraction"], r["classes"], r["rows"]) == (0, 0.0, 3, 10)
    # threshold 0.1: the Bachelor class (1/6 > 0.1) is at risk too
    assert one(hospital, "SELECT records_at_risk FROM anon_risk('hospital', ['education'], 0.1)") == {
        "records_at_risk": 10}


def test_risk_hospital_anonymized(hospital):
    # star zipcode and age: the classes are the education values again
    hospital.execute("CREATE TABLE pub AS SELECT '*' AS zipcode, '*' AS age, education, disease FROM hospital")
    r = one(hospital, f"SELECT * FROM anon_risk('pub', {QI})")
    assert (r["highest_risk"], r["classes"], r["uniques"], r["records_at_risk"]) == (0.5, 3, 0, 4)


@pytest.fixture
def sizes_1234(con):
    # classes of sizes 1, 2, 3, 4 (10 rows); the class of 3 has a NULL, a value of its own
    rows = [("a", 1)] + [("b", 2)] * 2 + [(None, 3)] * 3 + [("d", 4)] * 4
    make_table(con, "t", [("x", "VARCHAR"), ("y", "INTEGER")], rows)
    return con


def test_risk_sizes_1234(sizes_1234):
    # highest 1/1, average 4 classes / 10 rows, one unique record
    r = one(sizes_1234, "SELECT * FROM anon_risk('t', ['x', 'y'], 0.3)")
    assert r["highest_risk"] == 1.0
    assert r["average_risk"] == pytest.approx(0.4)
    assert r["marketer_risk"] == pytest.approx(0.4)
    assert (r["uniques"], r["uniques_fraction"]) == (1, pytest.approx(0.1))
    assert (r["classes"], r["rows"]) == (4, 10)
    # 1/1, 1/2, 1/3 are above 0.3 (1/4 = 0.25 is not): 1 + 2 + 3 = 6 records
    assert (r["records_at_risk"], r["records_at_risk_fraction"]) == (6, pytest.approx(0.6))


@pytest.mark.parametrize("threshold, expected", [
    ("", 10),                   # default 0.2: 1/4 = 0.25 > 0.2, every record
    (", 0.2", 10),
    (", threshold := 0.4", 3),  # 1/1, 1/2: 1 + 2
    (", 0.25", 6),              # 1/4 is not strictly above 0.25
    (", 0.5", 1),               # 1/2 is not strictly above 0.5
    (", 1", 0),
    (", 0", 10),
])
def test_risk_threshold(sizes_1234, threshold, expected):
    r = one(sizes_1234, f"SELECT records_at_risk FROM anon_risk('t', ['x', 'y']{threshold})")
    assert r["records_at_risk"] == expected


def test_risk_empty(con):
    make_table(con, "e", [("x", "VARCHAR")], [])
    r = one(con, "SELECT * FROM anon_risk('e', ['x'])")
    assert r == dict(highest_risk=None, average_risk=None, records_at_risk=0, records_at_risk_fraction=None,
                     marketer_risk=None, uniques=0, uniques_fraction=None, classes=0, rows=0)
    assert con.execute("SELECT * FROM anon_risk_classes('e', ['x'])").fetchall() == []


def test_risk_classes(sizes_1234):
    rows = sizes_1234.execute("SELECT * FROM anon_risk_classes('t', ['y', 'x'])").fetchall()
    cur = sizes_1234.execute("SELECT * FROM anon_risk_classes('t', ['y', 'x'])")
    assert [d[0] for d in cur.description] == ["x", "y", "size", "risk"]  # table order, like anon_class_sizes
    assert [(x, y, s) for x, y, s, _ in rows] == [("a", 1, 1), ("b", 2, 2), ("d", 4, 4), (None, 3, 3)]
    assert [r for *_, r in rows] == pytest.approx([1.0, 0.5, 0.25, 1 / 3])


def test_risk_classes_hospital(hospital):
    rows = hospital.execute("SELECT education, size, risk FROM anon_risk_classes('hospital', ['education'])").fetchall()
    assert rows == [("Bachelor", 6, pytest.approx(1 / 6)), ("Doctorate", 2, 0.5), ("Master", 2, 0.5)]


# --------------------------------------------------------------------------------------------
# anon_risk_journalist


@pytest.fixture
def journalist(con):
    # sample: X = (1, 'x') once, Y = (2, 'y') twice, Z = (NULL, 'z') once: 4 rows, 3 classes
    make_table(con, "sample", [("a", "INTEGER"), ("b", "VARCHAR"), ("other", "INTEGER")],
               [(1, "x", 0), (2, "y", 0), (2, "y", 1), (None, "z", 0)])
    # population (a superset), columns in another order, a as VARCHAR: X 4, Y 3, Z 2, W 5 rows
    make_table(con, "population", [("b", "VARCHAR"), ("a", "VARCHAR")],
               [("x", "1")] * 4 + [("y", "2")] * 3 + [("z", None)] * 2 + [("w", "9")] * 5)
    return con


def test_journalist(journalist):
    r = one(journalist, "SELECT * FROM anon_risk_journalist('sample', ['a', 'b'], 'population', 0.3)")
    # F: X 4, Y 3, Z 2 -> highest 1/2
    assert r["highest_risk"] == 0.5
    # marketer = mean of 1/F over the records = (1/4 + 2/3 + 1/2) / 4 = (17/12) / 4 = 17/48,
    # average = max(C / sum F, marketer) = max(3/9, 17/48) = 17/48
    assert r["average_risk"] == pytest.approx(17 / 48)
    assert r["marketer_risk"] == pytest.approx(17 / 48)
    # above 0.3: Y (1/3, 2 records) and Z (1/2, 1 record)
    assert (r["records_at_risk"], r["records_at_risk_fraction"]) == (3, pytest.approx(3 / 4))
    assert (r["records_not_in_population"], r["classes"], r["rows"], r["population_rows"]) == (0, 3, 4, 14)
    # default threshold 0.2: every record (1/4 > 0.2)
    assert one(journalist, "SELECT records_at_risk FROM anon_risk_journalist('sample', ['a', 'b'], 'population')") == {
        "records_at_risk": 4}


def test_journalist_average_classes_term(con):
    # sample X 1 row, Y 9 rows; population X 2, Y 9 rows.
    # marketer = (1/2 + 9/9) / 10 = 0.15 < C / sum F = 2 / 11, so average_risk = 2/11 (El Emam, ARX)
    make_table(con, "smp", [("q", "VARCHAR")], [("X",)] + [("Y",)] * 9)
    make_table(con, "pop", [("q", "VARCHAR")], [("X",)] * 2 + [("Y",)] * 9)
    r = one(con, "SELECT * FROM anon_risk_journalist('smp', ['q'], 'pop')")
    assert r["average_risk"] == pytest.approx(2 / 11)
    assert r["marketer_risk"] == pytest.approx(0.15)
    assert r["highest_risk"] == 0.5
    # only X (1/2 > 0.2) is at risk
    assert (r["records_at_risk"], r["records_at_risk_fraction"]) == (1, pytest.approx(0.1))
    assert (r["classes"], r["rows"], r["population_rows"]) == (2, 10, 11)


def test_journalist_sample_as_population(hospital):
    # the table as its own population: the prosecutor numbers
    j = one(hospital, "SELECT * FROM anon_risk_journalist('hospital', ['education'], 'hospital')")
    p = one(hospital, "SELECT * FROM anon_risk('hospital', ['education'])")
    for key in ["highest_risk", "average_risk", "records_at_risk", "marketer_risk", "classes", "rows"]:
        assert j[key] == pytest.approx(p[key]), key
    assert (j["records_not_in_population"], j["population_rows"]) == (0, 10)


def test_journalist_not_in_population(journalist):
    # Q = (7, 'q') is not in the population: F = 0 is raised to f = 1, and reported
    journalist.execute("INSERT INTO sample VALUES (7, 'q', 0)")
    r = one(journalist, "SELECT * FROM anon_risk_journalist('sample', ['a', 'b'], 'population')")
    assert r["highest_risk"] == 1.0
    # marketer (1/4 + 2/3 + 1/2 + 1) / 5 = 0.483 > C / sum F' = 4 / 10
    assert r["average_risk"] == pytest.approx((1 / 4 + 2 / 3 + 1 / 2 + 1) / 5)
    assert r["marketer_risk"] == pytest.approx((1 / 4 + 2 / 3 + 1 / 2 + 1) / 5)
    assert (r["records_not_in_population"], r["classes"], r["rows"]) == (1, 4, 5)


def test_journalist_suppressed_sample(hospital):
    # values are matched exactly: '*' is not expanded, so a starred sample class matches only a
    # starred population class. Sample: education starred for the Doctorate rows (2 rows '*').
    hospital.execute("CREATE TABLE s AS SELECT CASE WHEN education = 'Doctorate' THEN '*' ELSE education END"
                     " AS education FROM hospital")
    r = one(hospital, "SELECT * FROM anon_risk_journalist('s', ['education'], 'hospital')")
    # Bachelor F = 6, Master F = 2, '*' F = 0 -> raised to 2
    assert r["records_not_in_population"] == 2
    assert r["average_risk"] == pytest.approx((6 / 6 + 2 / 2 + 2 / 2) / 10)


def test_journalist_empty(journalist):
    make_table(journalist, "e", [("a", "INTEGER"), ("b", "VARCHAR")], [])
    r = one(journalist, "SELECT * FROM anon_risk_journalist('e', ['a', 'b'], 'population')")
    assert r == dict(highest_risk=None, average_risk=None, records_at_risk=0, records_at_risk_fraction=None,
                     marketer_risk=None, records_not_in_population=0, classes=0, rows=0, population_rows=14)


# --------------------------------------------------------------------------------------------
# anon_utility


@pytest.fixture
def small_utility(con):
    # original: the 4 points of {a1,a2} x {b1,b2}, SA s1 for a1 and s2 for a2
    make_table(con, "orig", [("A", "VARCHAR"), ("B", "VARCHAR"), ("S", "VARCHAR")],
               [("a1", "b1", "s1"), ("a1", "b2", "s1"), ("a2", "b1", "s2"), ("a2", "b2", "s2")])
    # published, columns in another order: 3 stars on 3 rows
    make_table(con, "pub", [("S", "VARCHAR"), ("B", "VARCHAR"), ("A", "VARCHAR")],
               [("s1", "*", "a1"), ("s1", "*", "a1"), ("s2", "b1", "a2"), ("s2", "b2", "*")])
    return con


def test_utility_small(small_utility):
    r = one(small_utility, "SELECT * FROM anon_utility('pub', 'orig', ['A', 'B'], 'S', k := 2)")
    # classes (a1,*) x2, (a2,b1), (*,b2): discernibility 4 + 1 + 1, aecs 4/3, normalized 4/(3*2)
    assert (r["stars"], r["suppressed_rows"], r["classes"], r["rows"], r["discernibility"]) == (3, 3, 3, 4, 6)
    assert r["aecs"] == pytest.approx(4 / 3)
    assert r["normalized_aecs"] == pytest.approx(2 / 3)
    # |D_A| = |D_B| = 2. f = 1/4 on each original point. f*: (a1,*,s1) x2 put 2 * 1/2 on each of
    # (a1,b1,s1), (a1,b2,s1) -> 1/4 each; (a2,b1,s2) -> 1/4; (*,b2,s2) puts 1/2 on (a2,b2,s2) -> 1/8.
    # KL = 3 * 1/4 ln 1 + 1/4 ln((1/4)/(1/8)) = ln(2) / 4
    assert r["kl_divergence"] == pytest.approx(math.log(2) / 4)
    rows = small_utility.execute("SELECT A, B, S FROM orig").fetchall()
    pub = small_utility.execute("SELECT A, B, S FROM pub").fetchall()
    assert kl_reference(rows, pub, 2) == pytest.approx(math.log(2) / 4)
    # no k: no normalized_aecs
    assert one(small_utility, "SELECT normalized_aecs FROM anon_utility('pub', 'orig', ['A', 'B'], 'S')") == {
        "normalized_aecs": None}


def test_utility_identity(hospital):
    # publishing the table unchanged: no stars, 10 classes of 1, KL 0
    r = one(hospital, f"SELECT * FROM anon_utility('hospital', 'hospital', {QI}, 'disease')")
    assert r == dict(stars=0, suppressed_rows=0, classes=10, rows=10, discernibility=10, aecs=1.0,
                     normalized_aecs=None, kl_divergence=0.0)


def test_utility_hospital(hospital):
    # zipcode and age starred everywhere; published columns in another order, all VARCHAR
    hospital.execute("CREATE TABLE pub AS SELECT disease, education, '*' AS age, '*' AS zipcode FROM hospital")
    r = one(hospital, f"SELECT * FROM anon_utility('pub', 'hospital', {QI}, 'disease', 3)")
    # 20 stars on 10 rows; classes Bachelor 6, Doctorate 2, Master 2: DM = 36 + 4 + 4 = 44
    assert (r["stars"], r["suppressed_rows"], r["classes"], r["rows"], r["discernibility"]) == (20, 10, 3, 10, 44)
    assert r["aecs"] == pytest.approx(10 / 3)
    assert r["normalized_aecs"] == pytest.approx(10 / 9)
    # |D_zip| = |D_age| = 10: a published row (*, *, e, d) puts 1/100 on each (z, a, e, d), so for
    # an original row p = (z, a, e, d): f*(p) = n(e, d) / (100 * 10), f(p) = 1/10 (all rows
    # distinct). n(e, d): Bachelor/Viral 3, Bachelor/Cancer 2, five pairs with 1. So
    # KL = 1/10 * [3 ln(100/3) + 2 ln(100/2) + 5 ln(100)] = ln 100 - 0.3 ln 3 - 0.2 ln 2
    expected = math.log(100) - 0.3 * math.log(3) - 0.2 * math.log(2)
    assert r["kl_divergence"] == pytest.approx(expected)
    orig = [tuple(None if v is None else str(v) for v in row)
            for row in hospital.execute("SELECT zipcode, age, education, disease FROM hospital").fetchall()]
    pub = hospital.execute("SELECT zipcode, age, education, disease FROM pub").fetchall()
    assert kl_reference(orig, pub, 3) == pytest.approx(expected)


def test_utility_hospital_partial(hospital):
    # a mixed suppression: age starred on odd rows, zipcode on rows with age > 50, education kept
    hospital.execute("""
        CREATE TABLE pub AS
        SELECT CASE WHEN age > 50 THEN '*' ELSE zipcode::VARCHAR END AS zipcode,
               CASE WHEN zipcode % 2 = 1 THEN '*' ELSE age::VARCHAR END AS age,
               education, disease
        FROM hospital""")
    r = one(hospital, f"SELECT * FROM anon_utility('pub', 'hospital', {QI}, 'disease')")
    orig = [tuple(str(v) for v in row)
            for row in hospital.execute("SELECT zipcode, age, education, disease FROM hospital").fetchall()]
    pub = hospital.execute("SELECT zipcode, age, education, disease FROM pub").fetchall()
    assert r["kl_divergence"] == pytest.approx(kl_reference(orig, pub, 3))
    stars = sum(v == "*" for row in pub for v in row[:3])
    assert (r["stars"], r["suppressed_rows"]) == (stars, sum(any(v == "*" for v in row[:3]) for row in pub))
    sizes = Counter(row[:3] for row in pub)
    assert (r["classes"], r["discernibility"]) == (len(sizes), sum(s * s for s in sizes.values()))


def test_utility_not_a_suppression(small_utility):
    # a published row that is no suppression of the original leaves (a2,b2,s2) with f* = 0
    small_utility.execute("UPDATE pub SET A = 'a9', B = 'b2' WHERE S = 's2' AND A = '*'")
    r = one(small_utility, "SELECT kl_divergence FROM anon_utility('pub', 'orig', ['A', 'B'], 'S')")
    assert r["kl_divergence"] == math.inf


def test_utility_nulls(con):
    # NULL is a value of its own, both in classes and in the domain (|D_A| = 2: 'x' and NULL)
    make_table(con, "o", [("A", "VARCHAR"), ("S", "INTEGER")], [("x", 1), (None, 1), (None, 2)])
    make_table(con, "p", [("A", "VARCHAR"), ("S", "INTEGER")], [("*", 1), (None, 1), (None, 2)])
    r = one(con, "SELECT * FROM anon_utility('p', 'o', ['A'], 'S')")
    # f* : (x,1) 1/2 / 3, (NULL,1) (1/2 + 1) / 3, (NULL,2) 1/3
    expected = 1 / 3 * math.log((1 / 3) / (1 / 6)) + 1 / 3 * math.log((1 / 3) / (1 / 2))
    assert r["kl_divergence"] == pytest.approx(expected)
    assert kl_reference([("x", "1"), (None, "1"), (None, "2")], [("*", "1"), (None, "1"), (None, "2")], 1) == \
        pytest.approx(expected)
    assert (r["stars"], r["classes"], r["discernibility"]) == (1, 2, 5)


def test_utility_empty(small_utility):
    make_table(small_utility, "e", [("A", "VARCHAR"), ("B", "VARCHAR"), ("S", "VARCHAR")], [])
    r = one(small_utility, "SELECT * FROM anon_utility('e', 'orig', ['A', 'B'], 'S', k := 2)")
    assert r == dict(stars=0, suppressed_rows=0, classes=0, rows=0, discernibility=0, aecs=None,
                     normalized_aecs=None, kl_divergence=None)
    r = one(small_utility, "SELECT * FROM anon_utility('pub', 'e', ['A', 'B'], 'S')")
    assert (r["stars"], r["classes"], r["kl_divergence"]) == (3, 3, None)


# --------------------------------------------------------------------------------------------
# errors and names


@pytest.mark.parametrize("sql", [
    "SELECT * FROM anon_risk('hospital', ['zipcode', 'nope'])",
    "SELECT * FROM anon_risk_classes('hospital', ['zipcode', 'nope'])",
    "SELECT * FROM anon_risk_journalist('hospital', ['zipcode', 'nope'], 'hospital')",
    "SELECT * FROM anon_risk_journalist('hospital', ['zipcode', 'nope'], 'hospital2')",
    "SELECT * FROM anon_risk_journalist('hospital2', ['zipcode', 'nope'], 'hospital')",
    "SELECT * FROM anon_utility('hospital', 'hospital', ['zipcode', 'nope'], 'disease')",
    "SELECT * FROM anon_utility('hospital', 'hospital', ['zipcode'], 'nope')",
    "SELECT * FROM anon_utility('hospital2', 'hospital', ['zipcode', 'nope'], 'disease')",
    "SELECT * FROM anon_utility('hospital', 'hospital2', ['zipcode', 'nope'], 'disease')",
    "SELECT * FROM anon_risk('hospital', ['Zipcode', 'age'])",  # case-sensitive
])
def test_missing_column(hospital, sql):
    hospital.execute("CREATE TABLE hospital2 AS SELECT zipcode, nope, disease FROM (SELECT *, 1 AS nope FROM hospital)")
    with pytest.raises(duckdb.InvalidInputException, match="has no column named (nope|Zipcode)"):
        hospital.execute(sql).fetchall()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM anon_risk('hospital', ['Zipcode'])",
    "SELECT * FROM anon_risk('hospital', [])",
    "SELECT * FROM anon_risk_classes('hospital', ['nope'])",
    "SELECT * FROM anon_risk_journalist('hospital', ['nope'], 'hospital')",
    "SELECT * FROM anon_utility('hospital', 'hospital', [], 'disease')",
])
def test_no_column_at_all(hospital, sql):
    # as in checks.sql: no matching column at all leaves COLUMNS(...) empty at bind time
    with pytest.raises(duckdb.BinderException, match="empty set of columns"):
        hospital.execute(sql).fetchall()


def test_missing_population_column(journalist):
    journalist.execute("CREATE TABLE pop2 AS SELECT b FROM population")
    with pytest.raises(duckdb.InvalidInputException, match="table pop2 has no column named a"):
        journalist.execute("SELECT * FROM anon_risk_journalist('sample', ['a', 'b'], 'pop2')").fetchall()


@pytest.mark.parametrize("name", ["s", "p", "j", "pub", "orig", "cl", "kl", "tot"])
def test_table_names_not_shadowed(con, name):
    # a user table named like a common CTE name is read, not shadowed by the macros' internals
    make_table(con, name, [("A", "VARCHAR"), ("S", "VARCHAR")], [("x", "1"), ("y", "1"), ("y", "2")])
    assert one(con, f"SELECT classes, rows FROM anon_risk('{name}', ['A'])") == {"classes": 2, "rows": 3}
    assert one(con, f"SELECT classes FROM anon_risk_journalist('{name}', ['A'], '{name}')") == {"classes": 2}
    r = one(con, f"SELECT classes, kl_divergence FROM anon_utility('{name}', '{name}', ['A'], 'S')")
    assert r == {"classes": 2, "kl_divergence": 0.0}


def test_quoted_names(con):
    make_table(con, "My Table", [("Zip Code", "VARCHAR"), ("select", "INTEGER"), ("sa", "VARCHAR")],
               [("1", 1, "u"), ("1", 1, "v"), ("2", 3, "u")])
    make_table(con, "My Pub", [("sa", "VARCHAR"), ("select", "VARCHAR"), ("Zip Code", "VARCHAR")],
               [("u", "1", "*"), ("v", "1", "*"), ("u", "3", "*")])
    r = one(con, "SELECT * FROM anon_risk('My Table', ['Zip Code', 'select'])")
    assert (r["classes"], r["uniques"]) == (2, 1)
    u = one(con, "SELECT * FROM anon_utility('My Pub', 'My Table', ['Zip Code', 'select'], 'sa')")
    orig = [("1", "1", "u"), ("1", "1", "v"), ("2", "3", "u")]
    pub = [("*", "1", "u"), ("*", "1", "v"), ("*", "3", "u")]
    assert u["kl_divergence"] == pytest.approx(kl_reference(orig, pub, 2))
    assert u["stars"] == 3


# --------------------------------------------------------------------------------------------
# properties against the references

VALUES = st.sampled_from(["a", "b", "c", None])
ROW = st.tuples(VALUES, VALUES, st.sampled_from(["s", "t"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=12), stars=st.lists(st.tuples(st.booleans(), st.booleans()),
                                                                    min_size=12, max_size=12),
       threshold=st.sampled_from([0.0, 0.2, 0.3, 0.5, 1.0]))
def test_property_against_reference(mcon, rows, stars, threshold):
    make_table(mcon, "po", [("q1", "VARCHAR"), ("q2", "VARCHAR"), ("sa", "VARCHAR")], rows)
    pub = [tuple("*" if s else v for v, s in zip(r[:2], st_)) + (r[2],) for r, st_ in zip(rows, stars)]
    make_table(mcon, "pp", [("sa", "VARCHAR"), ("q2", "VARCHAR"), ("q1", "VARCHAR")],
               [(r[2], r[1], r[0]) for r in pub])
    r = one(mcon, f"SELECT * FROM anon_risk('pp', ['q1', 'q2'], {threshold})")
    expected = risk_reference([p[:2] for p in pub], threshold)
    assert r == pytest.approx(expected)
    u = one(mcon, "SELECT * FROM anon_utility('pp', 'po', ['q1', 'q2'], 'sa')")
    assert u["kl_divergence"] == pytest.approx(kl_reference(rows, pub, 2), abs=1e-9)
    sizes = Counter(p[:2] for p in pub)
    assert u["discernibility"] == sum(s * s for s in sizes.values())
    assert u["stars"] == sum(v == "*" for p in pub for v in p[:2])
    # journalist: the published table against itself as population equals the prosecutor numbers
    j = one(mcon, f"SELECT * FROM anon_risk_journalist('pp', ['q1', 'q2'], 'pp', {threshold})")
    for key in ["highest_risk", "average_risk", "records_at_risk", "classes", "rows"]:
        assert j[key] == pytest.approx(expected[key]), key
    # and the original sample against the published table + original as population
    mcon.execute("CREATE OR REPLACE TABLE popu AS SELECT q1, q2 FROM po UNION ALL SELECT q1, q2 FROM pp")
    js = one(mcon, "SELECT * FROM anon_risk_journalist('po', ['q1', 'q2'], 'popu')")
    pop = Counter([r[:2] for r in rows] + [p[:2] for p in pub])
    sample = Counter(r[:2] for r in rows)
    marketer = sum(f / pop[c] for c, f in sample.items()) / len(rows)
    assert js["marketer_risk"] == pytest.approx(marketer)
    assert js["average_risk"] == pytest.approx(max(len(sample) / sum(pop[c] for c in sample), marketer))
    assert js["highest_risk"] == pytest.approx(max(1 / pop[c] for c in sample))


def test_a_quasi_identifier_named_like_the_macros_output_columns(con):
    """anon_k and anon_risk group by a struct of the QI values, so QI columns named `size`, `k` or
    `classes` do not collide with their own count columns (anon_class_sizes returns the QI
    columns themselves, which is why those two macros do not build on it)."""
    con.execute('CREATE TABLE clash AS SELECT * FROM (VALUES (1, 7, 0), (1, 7, 0), (1, 7, 0), (2, 7, 0), (2, 7, 0)) '
                't("size", "k", "classes")')
    qi = ["size", "k", "classes"]
    assert con.execute("SELECT k, classes FROM anon_k('clash', ?)", [qi]).fetchone() == (2, 2)
    highest, average, at_risk, classes, rows = con.execute(
        "SELECT highest_risk, average_risk, records_at_risk, classes, rows FROM anon_risk('clash', ?, 0.4)",
        [qi]).fetchone()
    assert (highest, average, at_risk, classes, rows) == (0.5, 0.4, 2, 2, 5)
