"""Tests for the SQL-only privacy checks in sql/checks.sql (DuckDB table macros).

Every expected number is either computed by hand (see the comments) or by the small pure-Python
reference `reference()` below, which shares no code with the SQL.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SQL_FILE = Path(__file__).parents[2] / "sql" / "checks.sql"
HOSPITAL_QI = ["zipcode", "age", "education"]


def new_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(SQL_FILE.read_text())
    return con


@pytest.fixture
def con():
    c = new_connection()
    yield c
    c.close()


@pytest.fixture(scope="module")
def mcon():
    """One connection for the hypothesis test (function-scoped fixtures are reset per example)."""
    c = new_connection()
    yield c
    c.close()


def one(con, sql, params=None):
    """Run a query returning one row, as a dict."""
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return dict(zip(names, rows[0]))


def columns_of(con, sql, params=None):
    return [d[0] for d in con.execute(sql, params).description]


# ---------------------------------------------------------------------------------------------
# pure-Python reference


def _sa_key(v):
    """Ascending order with NULL (None) last, as in the ordered EMD."""
    return (v is None, v)


def reference(rows, qi_idx, sa_idx=None):
    """All numbers of the model, computed directly from the rows (tuples, None = NULL)."""
    classes = defaultdict(list)
    for r in rows:
        classes[tuple(r[i] for i in qi_idx)].append(r[sa_idx] if sa_idx is not None else None)
    stars_per_row = [sum(1 for i in qi_idx if r[i] == "*") for r in rows]
    out = {
        "sizes": Counter({key: len(v) for key, v in classes.items()}),
        "k": min((len(v) for v in classes.values()), default=None),
        "classes": len(classes),
        "stars": sum(stars_per_row),
        "suppressed_rows": sum(1 for s in stars_per_row if s > 0),
        "rows": len(rows),
    }
    if sa_idx is None:
        return out
    out["distinct_l"] = min((len(set(v)) for v in classes.values()), default=None)
    out["frequency_l"] = min(
        (len(v) // max(Counter(v).values()) for v in classes.values()), default=None
    )
    out["entropy_l"] = min(
        (
            math.exp(-sum(c / len(v) * math.log(c / len(v)) for c in Counter(v).values()))
            for v in classes.values()
        ),
        default=None,
    )
    table = Counter(r[sa_idx] for r in rows)
    values = sorted(table, key=_sa_key)
    n = len(rows)
    t_eq, t_ord = None, None
    for v in classes.values():
        cnt = Counter(v)
        diffs = [Fraction(cnt.get(s, 0), len(v)) - Fraction(table[s], n) for s in values]
        eq = sum(abs(d) for d in diffs) / 2
        if len(values) == 1:
            od = Fraction(0)
        else:
            cum, acc = Fraction(0), Fraction(0)
            for d in diffs:
                cum += d
                acc += abs(cum)
            od = acc / (len(values) - 1)
        t_eq = eq if t_eq is None else max(t_eq, eq)
        t_ord = od if t_ord is None else max(t_ord, od)
    out["t"], out["t_ordered"] = t_eq, t_ord
    return out


def approx_or_none(x):
    return None if x is None else pytest.approx(float(x), rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# the file itself


def test_file_runs_in_one_execute_and_is_idempotent(con):
    con.execute(SQL_FILE.read_text())  # second time: CREATE OR REPLACE
    names = {
        r[0]
        for r in con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE function_type = 'table_macro'"
        ).fetchall()
    }
    expected = {
        "anon_class_sizes",
        "anon_k",
        "anon_l",
        "anon_t",
        "anon_stars",
        "anon_report",
        "anon_report_k",
        "anon_missing_columns",
        "anon_require_columns",
        "anon_sa_counts",
        "anon_l_recursive",
    }
    assert expected <= names


def test_every_macro_has_a_comment_and_only_macros_are_defined():
    lines = SQL_FILE.read_text().splitlines()
    creates = [i for i, line in enumerate(lines) if line.startswith("CREATE")]
    assert len(creates) == 12
    for i in creates:
        assert lines[i].startswith("CREATE OR REPLACE TEMP MACRO anon_")
        assert lines[i].endswith("AS TABLE")
        assert lines[i - 1].startswith("-- "), lines[i]
    # no semicolon hides in a comment (keeps naive statement splitters happy)
    assert not any(";" in line for line in lines if "--" in line)


def test_works_with_arrow_lambdas_disabled(hospital):
    hospital.execute("SET lambda_syntax = 'DISABLE_SINGLE_ARROW'")
    hospital.execute(SQL_FILE.read_text())
    assert one(hospital, "FROM anon_report('hospital', ['education'], 'disease')")["k"] == 2


# ---------------------------------------------------------------------------------------------
# hospital table (hand-computed)


def test_hospital_all_qi(hospital):
    qi = HOSPITAL_QI
    sizes = hospital.execute("FROM anon_class_sizes('hospital', ?)", [qi]).fetchall()
    assert len(sizes) == 10 and all(r[-1] == 1 for r in sizes)
    assert sizes == sorted(sizes)
    assert columns_of(hospital, "FROM anon_class_sizes('hospital', ?)", [qi]) == qi + ["size"]
    assert one(hospital, "FROM anon_k('hospital', ?)", [qi]) == {"k": 1, "classes": 10}
    assert one(hospital, "FROM anon_l('hospital', ?, 'disease')", [qi]) == {
        "distinct_l": 1,
        "frequency_l": 1,
        "entropy_l": 1.0,
        "classes": 10,
    }
    # P(T) = Cancer .4, Heart .3, Viral .3. A one-row Viral class: 1/2 (.7 + .3 + .4) = .7.
    # Ordered (Cancer < Heart Disease < Viral Infection): Viral class cumulative diffs
    # -.4, -.7, 0 -> 1.1 / 2 = .55 (Cancer class .45, Heart class .35).
    t = one(hospital, "FROM anon_t('hospital', ?, 'disease')", [qi])
    assert t == {"t": pytest.approx(0.7), "t_ordered": pytest.approx(0.55)}
    assert one(hospital, "FROM anon_stars('hospital', ?)", [qi]) == {
        "stars": 0,
        "suppressed_rows": 0,
    }
    assert one(hospital, "FROM anon_report('hospital', ?, 'disease')", [qi]) == {
        "k": 1,
        "classes": 10,
        "distinct_l": 1,
        "frequency_l": 1,
        "t": pytest.approx(0.7),
        "stars": 0,
        "suppressed_rows": 0,
        "rows": 10,
    }
    assert one(hospital, "FROM anon_report_k('hospital', ?)", [qi]) == {
        "k": 1,
        "classes": 10,
        "stars": 0,
        "suppressed_rows": 0,
        "rows": 10,
    }


def test_hospital_education_only(hospital):
    # Bachelor rows 1,4,5,6,7,10: V3 H1 C2. Doctorate rows 2,8: H C. Master rows 3,9: H C.
    assert hospital.execute("FROM anon_class_sizes('hospital', ['education'])").fetchall() == [
        ("Bachelor", 6),
        ("Doctorate", 2),
        ("Master", 2),
    ]
    assert one(hospital, "FROM anon_k('hospital', ['education'])") == {"k": 2, "classes": 3}
    l_ = one(hospital, "FROM anon_l('hospital', ['education'], 'disease')")
    assert l_ == {
        "distinct_l": 2,  # Doctorate / Master
        "frequency_l": 2,  # Bachelor 6 // 3, Doctorate 2 // 1
        "entropy_l": pytest.approx(2.0),  # Doctorate: exp(ln 2); Bachelor is higher
        "classes": 3,
    }
    # Bachelor: 1/2 (|1/3-.4| + |1/6-.3| + |1/2-.3|) = .2. Doctorate: 1/2 (.1 + .2 + .3) = .3.
    # Ordered, Doctorate: diffs +.1, +.2, -.3 -> cumulative .1, .3 -> .4 / 2 = .2.
    t = one(hospital, "FROM anon_t('hospital', ['education'], 'disease')")
    assert t == {"t": pytest.approx(0.3), "t_ordered": pytest.approx(0.2)}


def test_hospital_sa_counts(hospital):
    got = hospital.execute(
        "SELECT cls, sa_value, n FROM anon_sa_counts('hospital', ['education'], 'disease') "
        "ORDER BY ALL"
    ).fetchall()
    assert got == [
        (("Bachelor",), "Cancer", 2),
        (("Bachelor",), "Heart Disease", 1),
        (("Bachelor",), "Viral Infection", 3),
        (("Doctorate",), "Cancer", 1),
        (("Doctorate",), "Heart Disease", 1),
        (("Master",), "Cancer", 1),
        (("Master",), "Heart Disease", 1),
    ]


def test_hospital_single_class_is_exactly_t_zero(hospital):
    hospital.execute("CREATE VIEW hv AS SELECT 'all' AS everyone, * FROM hospital")
    t = one(hospital, "FROM anon_t('hv', ['everyone'], 'disease')")
    assert t == {"t": 0.0, "t_ordered": 0.0}  # exact, no float residue
    l_ = one(hospital, "FROM anon_l('hv', ['everyone'], 'disease')")
    assert l_["distinct_l"] == 3
    assert l_["frequency_l"] == 2  # 10 // 4
    h = -(0.3 * math.log(0.3) * 2 + 0.4 * math.log(0.4))
    assert l_["entropy_l"] == pytest.approx(math.exp(h))
    assert one(hospital, "FROM anon_k('hv', ['everyone'])") == {"k": 10, "classes": 1}


def test_hospital_published_with_stars(con):
    """Hospital published as groups {1,2,3} {4,5,6,7} {8,9,10} with suppression: groups 1 and 3
    both become (*, *, *), so the published table has 2 classes, of 6 and 4 rows."""
    con.execute(
        "CREATE TABLE pub(zipcode VARCHAR, age VARCHAR, education VARCHAR, disease VARCHAR)"
    )
    stars3 = ("*", "*", "*")
    rows = [
        (*stars3, "Viral Infection"),
        (*stars3, "Heart Disease"),
        (*stars3, "Heart Disease"),
        ("*", "*", "Bachelor", "Cancer"),
        ("*", "*", "Bachelor", "Viral Infection"),
        ("*", "*", "Bachelor", "Viral Infection"),
        ("*", "*", "Bachelor", "Heart Disease"),
        (*stars3, "Cancer"),
        (*stars3, "Cancer"),
        (*stars3, "Cancer"),
    ]
    con.executemany("INSERT INTO pub VALUES (?, ?, ?, ?)", rows)
    qi = HOSPITAL_QI
    assert con.execute("FROM anon_class_sizes('pub', ?)", [qi]).fetchall() == [
        ("*", "*", "*", 6),
        ("*", "*", "Bachelor", 4),
    ]
    # stars: 6 * 3 + 4 * 2 = 26, every row has a star
    assert one(con, "FROM anon_report('pub', ?, 'disease')", [qi]) == {
        "k": 4,
        "classes": 2,
        "distinct_l": 3,
        "frequency_l": 2,  # 6 // 3 and 4 // 2
        # (*,*,*): C 1/2, H 1/3, V 1/6 -> 1/2 (.1 + 1/30 + 4/30) = 2/15
        # (*,*,Bachelor): C 1/4, H 1/4, V 1/2 -> 1/2 (.15 + .05 + .2) = .2
        "t": pytest.approx(0.2),
        "stars": 26,
        "suppressed_rows": 10,
        "rows": 10,
    }
    # ordered: (*,*,*) cumulative .1, 2/15 -> 7/60; (*,*,Bachelor) -.15, -.2 -> .175
    assert one(con, "FROM anon_t('pub', ?, 'disease')", [qi])["t_ordered"] == pytest.approx(0.175)
    e1 = math.exp(-(0.5 * math.log(0.5) + 1 / 3 * math.log(1 / 3) + 1 / 6 * math.log(1 / 6)))
    e2 = math.exp(-(2 * 0.25 * math.log(0.25) + 0.5 * math.log(0.5)))  # 2 ** 1.5
    assert e1 < e2
    assert one(con, "FROM anon_l('pub', ?, 'disease')", [qi])["entropy_l"] == pytest.approx(e1)


# ---------------------------------------------------------------------------------------------
# stars, NULLs, names, empty tables


def test_stars_only_exact_star_cells_count(con):
    con.execute("CREATE TABLE s(zip VARCHAR, age INTEGER, edu VARCHAR, other VARCHAR)")
    con.executemany(
        "INSERT INTO s VALUES (?, ?, ?, ?)",
        [
            ("987**", 38, "*", "*"),  # 1 star ('987**' is generalised, not suppressed)
            ("*", 39, "*", "*"),  # 2
            ("*", None, "Master", "x"),  # 1
            ("98765", 40, "Bachelor", "*"),  # 0 (other is not a QI)
            (None, 41, " *", "*"),  # 0 (NULL and ' *' are not stars)
        ],
    )
    assert one(con, "FROM anon_stars('s', ['zip', 'age', 'edu'])") == {
        "stars": 4,
        "suppressed_rows": 3,
    }
    # integer QI only: no stars possible
    assert one(con, "FROM anon_stars('s', ['age'])") == {"stars": 0, "suppressed_rows": 0}
    assert one(con, "FROM anon_report_k('s', ['zip', 'age', 'edu'])") == {
        "k": 1,
        "classes": 5,
        "stars": 4,
        "suppressed_rows": 3,
        "rows": 5,
    }


def test_stars_on_non_varchar_columns(con):
    con.execute(
        "CREATE TABLE nv AS SELECT range::INTEGER AS i, range::DOUBLE AS d, DATE '2020-01-01' + "
        "range::INTEGER AS dt, [range] AS l, range % 2 = 0 AS b FROM range(5)"
    )
    assert one(con, "FROM anon_stars('nv', ['i', 'd', 'dt', 'l', 'b'])") == {
        "stars": 0,
        "suppressed_rows": 0,
    }
    assert one(con, "FROM anon_k('nv', ['b'])") == {"k": 2, "classes": 2}


def test_nulls_in_qi_and_sa(con):
    con.execute("CREATE TABLE nul(a VARCHAR, b INTEGER, sa INTEGER)")
    con.executemany(
        "INSERT INTO nul VALUES (?, ?, ?)",
        [(None, 1, 0), (None, 1, None), ("x", None, 5), ("x", None, 5)],
    )
    assert con.execute("FROM anon_class_sizes('nul', ['a', 'b'])").fetchall() == [
        ("x", None, 2),
        (None, 1, 2),
    ]
    assert one(con, "FROM anon_k('nul', ['a', 'b'])") == {"k": 2, "classes": 2}
    # class (NULL, 1) holds SA 0 and NULL: two values (a coalesce-to-0 bug would say one)
    l_ = one(con, "FROM anon_l('nul', ['a', 'b'], 'sa')")
    assert l_ == {"distinct_l": 1, "frequency_l": 1, "entropy_l": 1.0, "classes": 2}
    assert one(con, "FROM anon_l('nul', ['b'], 'sa')")["distinct_l"] == 1
    assert one(con, "FROM anon_l('nul', ['a'], 'sa')")["frequency_l"] == 1
    con.execute("CREATE VIEW nul1 AS SELECT * FROM nul WHERE a IS NULL")
    assert one(con, "FROM anon_l('nul1', ['a'], 'sa')") == {
        "distinct_l": 2,
        "frequency_l": 2,
        "entropy_l": pytest.approx(2.0),
        "classes": 1,
    }
    # P(T): 0 -> 1/4, 5 -> 1/2, NULL -> 1/4, sorted 0, 5, NULL.
    # class {0, NULL}: diffs +1/4, -1/2, +1/4 -> equal 1/2, cumulative 1/4, -1/4, 0 -> 1/2 / 2 = 1/4
    # (with NULL sorted first it would be 3/8). class {5, 5}: equal 1/2, ordered 1/4.
    t = one(con, "FROM anon_t('nul', ['a', 'b'], 'sa')")
    assert t == {"t": pytest.approx(0.5), "t_ordered": pytest.approx(0.25)}
    rows = con.execute("SELECT * FROM nul").fetchall()
    ref = reference(rows, [0, 1], 2)
    assert t["t"] == pytest.approx(float(ref["t"]))
    assert t["t_ordered"] == pytest.approx(float(ref["t_ordered"]))


def test_null_is_not_the_string_null_nor_empty(con):
    con.execute("CREATE TABLE ns(q VARCHAR, sa VARCHAR)")
    con.executemany(
        "INSERT INTO ns VALUES (?, ?)",
        [(None, None), ("NULL", "NULL"), ("", ""), (None, "NULL"), ("NULL", None)],
    )
    assert one(con, "FROM anon_k('ns', ['q'])") == {"k": 1, "classes": 3}
    # class NULL: {NULL, 'NULL'}, class 'NULL': {'NULL', NULL} -> 2 distinct values each
    con.execute("CREATE VIEW ns2 AS SELECT * FROM ns WHERE q IS DISTINCT FROM ''")
    assert one(con, "FROM anon_l('ns2', ['q'], 'sa')")["distinct_l"] == 2


def test_quoted_and_colliding_column_names(con):
    names = [
        "Zip Code",
        "select",
        "Ünïcödé",
        "MixedCase",
        'a"b',
        "qi",
        "tbl",
        "sa",
        "c",
        "x",
        "q",
        "n",
        "names",
        "__cls",
        "__sa",
        "ok",
    ]
    cols = ", ".join('"' + n.replace('"', '""') + '" VARCHAR' for n in names)
    con.execute(f'CREATE TABLE "weird table"({cols}, "Sensitive Value" VARCHAR)')
    data = [
        ("1", "*", "u", "m", "q", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "flu"),
        ("1", "*", "u", "m", "q", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "cold"),
        ("2", "*", "*", "m", "q", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "flu"),
        ("2", "*", "*", "m", "q", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "flu"),
    ]
    con.executemany(f'INSERT INTO "weird table" VALUES ({", ".join("?" * 17)})', data)
    tbl = '"weird table"'
    rows = con.execute('SELECT * FROM "weird table"').fetchall()
    for qi in (names, names[:3], names[5:], ["Ünïcödé"], ['a"b', "select"]):
        idx = [names.index(q) for q in qi]
        ref = reference(rows, idx, 16)
        sizes = con.execute("FROM anon_class_sizes(?, ?)", [tbl, qi])
        assert [d[0] for d in sizes.description] == [n for n in names if n in qi] + ["size"]
        got = one(con, "FROM anon_report(?, ?, 'Sensitive Value')", [tbl, qi])
        assert got == {
            "k": ref["k"],
            "classes": ref["classes"],
            "distinct_l": ref["distinct_l"],
            "frequency_l": ref["frequency_l"],
            "t": approx_or_none(ref["t"]),
            "stars": ref["stars"],
            "suppressed_rows": ref["suppressed_rows"],
            "rows": 4,
        }
    # SA with a colliding name
    assert one(con, "FROM anon_l(?, ['Zip Code'], 'sa')", [tbl])["distinct_l"] == 1
    assert one(con, "FROM anon_t(?, ['Zip Code'], 'select')", [tbl]) == {"t": 0.0, "t_ordered": 0.0}
    # hand values for ['Zip Code']: classes '1' {flu, cold} and '2' {flu, flu}
    assert one(con, "FROM anon_report(?, ['Zip Code'], 'Sensitive Value')", [tbl]) == {
        "k": 2,
        "classes": 2,
        "distinct_l": 1,
        "frequency_l": 1,
        "t": pytest.approx(0.25),  # P(T) = flu 3/4, cold 1/4
        "stars": 0,
        "suppressed_rows": 0,
        "rows": 4,
    }
    assert one(con, "FROM anon_stars(?, ['select', 'Ünïcödé'])", [tbl]) == {
        "stars": 6,
        "suppressed_rows": 4,
    }


def test_empty_table(con):
    con.execute("CREATE TABLE e(a VARCHAR, b INTEGER, sa VARCHAR)")
    assert con.execute("FROM anon_class_sizes('e', ['a', 'b'])").fetchall() == []
    assert one(con, "FROM anon_k('e', ['a', 'b'])") == {"k": None, "classes": 0}
    assert one(con, "FROM anon_l('e', ['a', 'b'], 'sa')") == {
        "distinct_l": None,
        "frequency_l": None,
        "entropy_l": None,
        "classes": 0,
    }
    assert one(con, "FROM anon_t('e', ['a', 'b'], 'sa')") == {"t": None, "t_ordered": None}
    assert one(con, "FROM anon_stars('e', ['a', 'b'])") == {"stars": 0, "suppressed_rows": 0}
    assert one(con, "FROM anon_report('e', ['a'], 'sa')") == {
        "k": None,
        "classes": 0,
        "distinct_l": None,
        "frequency_l": None,
        "t": None,
        "stars": 0,
        "suppressed_rows": 0,
        "rows": 0,
    }
    assert one(con, "FROM anon_report_k('e', ['a'])") == {
        "k": None,
        "classes": 0,
        "stars": 0,
        "suppressed_rows": 0,
        "rows": 0,
    }


def test_single_sa_value_gives_zero_ordered_distance(con):
    con.execute("CREATE TABLE one_v AS SELECT range % 3 AS q, 'same' AS sa FROM range(7)")
    assert one(con, "FROM anon_t('one_v', ['q'], 'sa')") == {"t": 0.0, "t_ordered": 0.0}
    assert one(con, "FROM anon_l('one_v', ['q'], 'sa')") == {
        "distinct_l": 1,
        "frequency_l": 1,
        "entropy_l": 1.0,
        "classes": 3,
    }


@pytest.mark.parametrize("empty", [False, True])
def test_missing_columns_raise(con, empty):
    con.execute("CREATE TABLE m(a VARCHAR, b INTEGER, sa VARCHAR)")
    if not empty:
        con.execute("INSERT INTO m VALUES ('x', 1, 'y')")
    assert one(con, "FROM anon_missing_columns('m', ['a', 'B', 'zz', 'a'])")["missing"] in (
        ["B", "zz"],
        ["zz", "B"],
    )
    assert one(con, "FROM anon_missing_columns('m', ['a', 'b'])")["missing"] == []
    assert one(con, "FROM anon_require_columns('m', ['a', 'b', 'sa'])") == {"ok": True}
    # a misspelt QI next to good ones would silently vanish from COLUMNS(...): the guard names it
    partly_bad = [
        "FROM anon_class_sizes('m', ['a', 'B'])",
        "FROM anon_k('m', ['a', 'B'])",
        "FROM anon_l('m', ['a', 'B'], 'sa')",
        "FROM anon_t('m', ['a', 'B'], 'sa')",
        "FROM anon_stars('m', ['a', 'B'])",
        "FROM anon_report('m', ['a', 'B'], 'sa')",
        "FROM anon_report_k('m', ['a', 'B'])",
    ]
    for sql in partly_bad:
        with pytest.raises(duckdb.InvalidInputException, match="has no column named B"):
            con.execute(sql).fetchall()
    # a missing SA, no matching QI at all, or an empty QI list: COLUMNS(...) is empty at bind time
    all_bad = [
        "FROM anon_l('m', ['a'], 'SA')",
        "FROM anon_t('m', ['a'], 'nope')",
        "FROM anon_report('m', ['a'], 'nope')",
        "FROM anon_k('m', ['A'])",
        "FROM anon_k('m', [])",
    ]
    for sql in all_bad:
        with pytest.raises(duckdb.BinderException, match="empty set of columns"):
            con.execute(sql).fetchall()


def test_view_schema_and_parameters(hospital):
    hospital.execute("CREATE SCHEMA s2")
    hospital.execute("CREATE TABLE s2.h AS SELECT * FROM hospital")
    hospital.execute("CREATE VIEW hview AS SELECT * FROM hospital WHERE age < 60")
    assert one(hospital, "FROM anon_k($t, $q)", {"t": "s2.h", "q": ["education"]}) == {
        "k": 2,
        "classes": 3,
    }
    # age < 60 drops rows 4, 8, 10 (65, 69, 62): Bachelor 1,5,6,7 / Doctorate 2 / Master 3, 9
    assert one(hospital, "FROM anon_k('hview', ['education'])") == {"k": 1, "classes": 3}


def test_t_closeness_li_et_al_salary_example(con):
    """Li, Li, Venkatasubramanian's salary example: nine salaries 3k..11k, ordered distance.
    {3k,4k,5k}: 0.375, {6k,8k,11k}: 1/6, {7k,9k,10k}: 17/72. Equal distance: 2/3 for each.
    Integer SA, so the order is numeric (10000 after 9000)."""
    groups = {"A": [3, 4, 5], "B": [6, 8, 11], "C": [7, 9, 10]}
    rows = [(g, s * 1000) for g, vals in groups.items() for s in vals]
    con.execute("CREATE TABLE sal(g VARCHAR, salary INTEGER)")
    con.executemany("INSERT INTO sal VALUES (?, ?)", rows)
    t = one(con, "FROM anon_t('sal', ['g'], 'salary')")
    assert t == {"t": pytest.approx(2 / 3), "t_ordered": pytest.approx(0.375)}
    for g, expected in (("B", Fraction(1, 6)), ("C", Fraction(17, 72))):
        # t of one class against the whole table: filter with a class-indicator QI
        con.execute(
            f"CREATE OR REPLACE VIEW sal_{g} AS SELECT g = '{g}' AS is_g, salary FROM sal"
        )
        ref = reference([(r[0] == g, r[1]) for r in rows], [0], 1)
        got = one(con, f"FROM anon_t('sal_{g}', ['is_g'], 'salary')")
        assert got["t_ordered"] == pytest.approx(float(ref["t_ordered"]))
        assert got["t"] == pytest.approx(float(ref["t"]))
    # the independent computation agrees with the hand numbers
    ref = reference(rows, [0], 1)
    assert ref["t"] == Fraction(2, 3) and ref["t_ordered"] == Fraction(3, 8)


# ---------------------------------------------------------------------------------------------
# the duckdb CLI


def test_cli_reads_the_file():
    exe = shutil.which("duckdb")
    if exe is None:
        pytest.skip("duckdb CLI not installed")
    script = (
        "CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1), ('a', 2), ('b', 3), ('b', 4), "
        "('b', 5)) v(q, s);\n"
        f".read '{SQL_FILE}'\n"
        "FROM anon_k('t', ['q']);\n"
        "FROM anon_report('t', ['q'], 's');\n"
    )
    res = subprocess.run(
        [exe, "-csv", "-init", "/dev/null", ":memory:"],
        input=script,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "Error" not in res.stderr, res.stderr
    out = res.stdout.splitlines()
    assert out[:2] == ["k,classes", "2,2"]
    assert out[2] == "k,classes,distinct_l,frequency_l,t,stars,suppressed_rows,rows"
    assert out[3].split(",")[:4] == ["2", "2", "2", "2"]  # 2 // 1 and 3 // 1
    assert out[3].split(",")[5:] == ["0", "0", "5"]


# ---------------------------------------------------------------------------------------------
# property test against the pure-Python reference

QI_POOL = ["q1", "Q 2", "select", "ü3"]
VARCHAR_VALUES = st.sampled_from(["a", "b", "*", "", None])
INT_VALUES = st.sampled_from([0, 1, 2, None])
SA_VARCHAR = st.sampled_from(["x", "y", "Z", "10", "9", "NULL", None])
SA_INT = st.sampled_from([-1, 0, 2, 9, 10, None])


@st.composite
def tables(draw):
    m = draw(st.integers(1, 3))
    qi_types = [draw(st.sampled_from(["VARCHAR", "INTEGER"])) for _ in range(m)]
    sa_type = draw(st.sampled_from(["VARCHAR", "INTEGER"]))
    n = draw(st.integers(0, 14))
    rows = []
    for _ in range(n):
        row = [draw(VARCHAR_VALUES if t == "VARCHAR" else INT_VALUES) for t in qi_types]
        row.append(draw(SA_VARCHAR if sa_type == "VARCHAR" else SA_INT))
        row.append(draw(st.integers(0, 3)))  # a non-QI column that must be ignored
        rows.append(tuple(row))
    return qi_types, sa_type, rows


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tables())
def test_macros_match_python_reference(mcon, table):
    qi_types, sa_type, rows = table
    m = len(qi_types)
    qi = QI_POOL[:m]
    cols = [f'"{n}" {t}' for n, t in zip(qi, qi_types)] + [f"sens {sa_type}", "extra INTEGER"]
    mcon.execute(f"CREATE OR REPLACE TABLE prop({', '.join(cols)})")
    if rows:  # one INSERT: executemany is slow for tiny batches
        tuple_sql = f"({', '.join('?' * (m + 2))})"
        mcon.execute(
            f"INSERT INTO prop VALUES {', '.join([tuple_sql] * len(rows))}",
            [v for r in rows for v in r],
        )
    ref = reference(rows, list(range(m)), m)

    sizes = mcon.execute("FROM anon_class_sizes('prop', ?)", [qi]).fetchall()
    assert Counter({r[:-1]: r[-1] for r in sizes}) == ref["sizes"]
    assert len(sizes) == ref["classes"]

    assert one(mcon, "FROM anon_k('prop', ?)", [qi]) == {"k": ref["k"], "classes": ref["classes"]}
    assert one(mcon, "FROM anon_l('prop', ?, 'sens')", [qi]) == {
        "distinct_l": ref["distinct_l"],
        "frequency_l": ref["frequency_l"],
        "entropy_l": approx_or_none(ref["entropy_l"]),
        "classes": ref["classes"],
    }
    assert one(mcon, "FROM anon_t('prop', ?, 'sens')", [qi]) == {
        "t": approx_or_none(ref["t"]),
        "t_ordered": approx_or_none(ref["t_ordered"]),
    }
    assert one(mcon, "FROM anon_stars('prop', ?)", [qi]) == {
        "stars": ref["stars"],
        "suppressed_rows": ref["suppressed_rows"],
    }
    assert one(mcon, "FROM anon_report('prop', ?, 'sens')", [qi]) == {
        "k": ref["k"],
        "classes": ref["classes"],
        "distinct_l": ref["distinct_l"],
        "frequency_l": ref["frequency_l"],
        "t": approx_or_none(ref["t"]),
        "stars": ref["stars"],
        "suppressed_rows": ref["suppressed_rows"],
        "rows": ref["rows"],
    }
    assert one(mcon, "FROM anon_report_k('prop', ?)", [qi]) == {
        "k": ref["k"],
        "classes": ref["classes"],
        "stars": ref["stars"],
        "suppressed_rows": ref["suppressed_rows"],
        "rows": ref["rows"],
    }
