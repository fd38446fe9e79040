"""The breaks a black-box attack found in differential privacy (/work/attack_dp), each turned
into a test: a private release must not tell whether the source holds a value the hierarchy lacks
(docs/models.md, "uncovered values") through anything but its sampled rows."""

from __future__ import annotations

import json
import re

import pytest

import duckanon
from duckanon.errors import AnonymizeError

pytestmark = pytest.mark.e2e

BASE = ("CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN 'Ann' ELSE 'Bob' END AS a,"
        " (DATE '2020-01-01' + (i % 300)::INT) AS d FROM range(3000) r(i)")
NEIGHBOURS = {"D": None,
              "lacking value": "INSERT INTO t VALUES ('Dan', DATE '2020-03-03')",
              "infinite date": "INSERT INTO t VALUES ('Ann', 'infinity'::DATE)"}


def _row(con, text: str) -> dict:
    cur = con.execute(text)
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def _hierarchy(tmp_path, text: str) -> str:
    path = tmp_path / "h.csv"
    path.write_text(text)
    return str(path)


# -- B01: a label covering every value of the SOURCE column counted as a star -------------------

@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_private_stars_are_decided_from_the_hierarchy_alone(tmp_path, neighbour):
    h = _hierarchy(tmp_path, "Ann;AB;*\nBob;AB;*\nCy;C;*\n")
    report = tmp_path / "r.html"
    con = duckanon.connect()
    con.execute(BASE)
    if NEIGHBOURS[neighbour]:
        con.execute(NEIGHBOURS[neighbour])
    row = _row(con, f"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a, d), hierarchies=(a='{h}', "
                    f"d='dates(month, year)'), levels=(a=1, d=2), report='{report}')")
    details = json.loads(row["details"])
    assert row["published_rows"] > 0
    # 'AB' and '2020' cover every value of the source here, not every value of their hierarchy
    assert (row["stars"], row["suppressed_rows"], details.get("whole_domain_cells", 0)) == (0, 0, 0)
    html = report.read_text()
    assert "Why " not in html or " stars: " not in html
    assert not re.search(r"The summary's [\d,]+ stars include", html)
    # REFRESH of the release: the same whatever the inserted row
    con.execute("INSERT INTO t VALUES ('Dan', DATE '2020-03-04')")
    after = _row(con, "REFRESH t_anon")
    assert after["stars_after"] == 0


def test_private_stars_at_the_hierarchys_one_group_level_count_every_published_cell(tmp_path):
    h = _hierarchy(tmp_path, "Ann;AB;Any\nBob;AB;Any\nCy;C;Any\n")
    for extra in (None, "INSERT INTO t VALUES ('Dan', DATE '2020-03-03')"):
        con = duckanon.connect()
        con.execute(BASE)
        if extra:
            con.execute(extra)
        row = _row(con, f"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a, d), hierarchies=(a='{h}', "
                        "d='dates(month, year)'), levels=(a=2, d=2))")
        published = row["published_rows"]
        assert published > 0
        # 'Any' is the one group of the whole hierarchy: a star in every published row; '2020' is not
        assert (row["stars"], row["suppressed_rows"]) == (published, published)
        assert json.loads(row["details"])["whole_domain_cells"] == published
        assert con.execute("SELECT count(*) FROM t_anon WHERE a = 'Any'").fetchone()[0] == published


def test_without_epsilon_a_label_covering_every_source_value_stays_a_star(tmp_path):
    h = _hierarchy(tmp_path, "Ann;AB;*\nBob;AB;*\nCy;C;*\n")
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i = 0 THEN 'Ann' ELSE 'Bob' END AS a FROM range(3000) r(i)")
    row = _row(con, f"ANONYMIZE t WITH (k=2, qi=(a), hierarchies=(a='{h}'), method='lattice')")
    # 'AB' (level 1) covers every value of the source column: a star without differential privacy
    assert json.loads(row["details"])["levels"] == [1]
    assert (row["published_rows"], row["stars"], row["suppressed_rows"]) == (3000, 3000, 3000)
    assert json.loads(row["details"])["whole_domain_cells"] == 3000


# -- B03: intervals() labelled a large DOUBLE with an interval that excluded it ------------------

def _interval_bounds(label: str):
    from decimal import Decimal
    lo, hi = label.strip("[)").split(", ")
    return Decimal(lo), Decimal(hi)


@pytest.mark.parametrize("private", [True, False])
@pytest.mark.parametrize("value, width, label", [
    ("1e15", "5", "[1000000000000000, 1000000000000005)"),
    ("6e14", "3", "[600000000000000, 600000000000003)"),
    ("0.7", "0.1", "[0.7, 0.8)"), ("0.3", "0.1", "[0.3, 0.4)"), ("2.3", "0.1", "[2.3, 2.4)"),
    ("1e12", "5", "[1000000000000, 1000000000005)"),
    ("2.9999999995", "1", "[2, 3)"), ("-0.3", "0.1", "[-0.3, -0.2)"), ("123456789012.3", "0.1",
                                                                        "[123456789012.3, 123456789012.4)"),
])
def test_an_interval_label_contains_its_value(private, value, width, label):
    con = duckanon.connect()
    con.execute(f"CREATE TABLE t AS SELECT 'x' AS a, {value}::DOUBLE AS b FROM range(400) r(i)")
    options = "epsilon=2, delta=1e-5, levels=(a=0, b=1)" if private else "k=2, method='lattice'"
    con.execute(f"ANONYMIZE t WITH ({options}, qi=(a, b), hierarchies=(a='prefix(1)', b='intervals({width})'))")
    assert [r[0] for r in con.execute("SELECT DISTINCT b FROM t_anon").fetchall()] == [label]


def test_a_sweep_of_doubles_is_labelled_by_intervals_that_contain_them():
    from decimal import Decimal

    import numpy as np

    from duckanon.hierarchy import intervals

    rng = np.random.default_rng(7)
    every = sorted({float(v) for v in np.concatenate([
        [round(x, int(d)) for x, d in zip(rng.uniform(-1e3, 1e3, 300), rng.integers(0, 6, 300))],  # short decimals
        rng.uniform(-1e15, 1e15, 300).round(), 10.0 ** np.arange(-3, 15),
        np.arange(-30, 31) * 0.1, np.arange(0, 50) * 3.0 ** 30])})
    for widths in ((5,), (0.1, 0.5, 1), (3,), (0.25, 1.0), (7, 70)):
        values = [v for v in every if abs(v) / widths[0] < 2.0 ** 53]  # else refused: row 'too large'
        bound = intervals(*widths).bind(values, "b")
        for level, width in enumerate(widths, start=1):
            labels = bound.labels[level]
            for v, code in zip(values, bound.codes[:, level].tolist()):
                lo, hi = _interval_bounds(labels[code])
                assert lo <= Decimal(repr(v)) < hi and hi - lo == Decimal(repr(width)), (v, widths, labels[code])


def test_a_width_not_an_exact_multiple_of_the_previous_is_refused():
    from duckanon.errors import AnonymizeError
    from duckanon.hierarchy import intervals

    intervals(0.1, 0.3, 0.9)  # exact multiples as written
    with pytest.raises(AnonymizeError) as refused:
        intervals(0.1, 0.30000000001)
    assert str(refused.value) == ("intervals: each width must be a larger multiple of the previous one, "
                                  "got 0.1 then 0.30000000001")


# -- B07: a top label equal to a leaf value published the lacking values under that value's name --

@pytest.mark.parametrize("with_lacking", [True, False])
def test_a_top_label_equal_to_a_leaf_is_refused_whatever_the_values(tmp_path, with_lacking):
    from duckanon.errors import AnonymizeError

    h = _hierarchy(tmp_path, "Ann;AB;Ann\nBob;AB;Ann\nCy;C;Ann\n")
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT CASE i % 4 WHEN 0 THEN 'Ann' WHEN 1 THEN 'Bob' WHEN 2 THEN 'Cy' "
                "ELSE 'Dan' END AS a, 1 AS b FROM range(3000) r(i)")
    if not with_lacking:
        con.execute("DELETE FROM t WHERE a = 'Dan'")
    with pytest.raises(AnonymizeError) as refused:
        con.execute(f"ANONYMIZE t WITH (epsilon=2, delta=1e-5, levels=(a=1, b=0), qi=(a, b), "
                    f"hierarchies=(a='{h}', b='intervals(5)'))")
    assert str(refused.value) == (
        f"hierarchy {h} gives its top label to one of its values (line 1): under differential privacy a value the "
        "hierarchy lacks is published as the top label, which would read as that value; give the top a label of "
        "its own")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 't_anon'").fetchone()[0] == 0


def test_an_ordered_category_spelled_as_the_top_is_refused_under_epsilon():
    from duckanon.errors import AnonymizeError
    from duckanon.hierarchy import ordered_groups

    for values in (["y"], ["y", "zzz"]):
        with pytest.raises(AnonymizeError) as refused:
            ordered_groups(["x", "*", "y", "z"], [2]).bind(values, uncovered="root")
        assert str(refused.value).startswith("hierarchy ordered(4 categories; 2) labels a group below the top '*': ")


# -- B05: an engine error while reading a view quoted a source value ------------------------------

@pytest.mark.parametrize("options", ["epsilon=1, delta=1e-5, qi=(b)", "k=2, qi=(b)"])
@pytest.mark.parametrize("view, others, message", [
    ("SELECT json_extract(a, '$.x')::VARCHAR AS b FROM t", '{"x": 1}',
     "ANONYMIZE failed: Invalid Input Error: a value is not valid JSON (the value is not shown)"),
    ("SELECT regexp_matches('x', a) AS b FROM t", "x",
     "ANONYMIZE failed: Invalid Input Error: an input was refused (its text is not shown: it may quote a value)"),
    ("SELECT CAST(a AS INT) AS b FROM t", "1",
     "ANONYMIZE failed: Conversion Error: a value could not be converted to INT32 (the value is not shown)"),
])
def test_an_engine_error_reading_a_view_does_not_quote_the_value(options, view, others, message):
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i = 5 THEN 'patient-Jane-Doe-HIV(' ELSE ? END AS a "
                "FROM range(3000) r(i)", [others])
    con.execute("CREATE VIEW v AS " + view)
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(f"ANONYMIZE v WITH ({options})")
    assert str(caught.value) == message
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'v_anon'").fetchone()[0] == 0


def test_duckanons_own_macro_messages_keep_their_text():
    import duckdb

    from duckanon.backends.duckdb import _translated

    with pytest.raises(duckdb.Error) as caught:
        duckdb.connect().execute("SELECT error('duckanon: table t has no column named B')")
    assert str(_translated(caught.value)) == "Invalid Input Error: duckanon: table t has no column named B"


# -- B02: the report of a private release printed the original's exact risk figures and profile ---

def _report_text(path) -> str:
    html = re.sub(r"<style.*?</style>", "", path.read_text(), flags=re.S)
    html = re.sub(r"<img[^>]*>", "", html)  # the plots (their pixels are of the published table)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_private_report_leaves_the_originals_figures_out(tmp_path):
    pytest.importorskip("matplotlib")
    h = _hierarchy(tmp_path, "Ann;AB;*\nBob;AB;*\nCy;C;*\n")
    texts = []
    for extra in (None, "INSERT INTO t VALUES ('Dan', DATE '2020-03-03')"):
        con = duckanon.connect()
        con.execute(BASE)
        if extra:
            con.execute(extra)
        report = tmp_path / "r.html"
        con.execute(f"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a, d), hierarchies=(a='{h}', "
                    f"d='dates(month, year)'), levels=(a=1, d=1), report='{report}')")
        text = _report_text(report)
        published = con.execute("SELECT count(*) FROM t_anon").fetchone()[0]
        classes = con.execute("SELECT count(*) FROM (SELECT DISTINCT a, d FROM t_anon)").fetchone()[0]
        # the source's counts (3,000 or 3,001 rows, 300 or 301 classes) appear nowhere
        assert "3,000" not in text and "3,001" not in text and "3000" not in text and "3001" not in text
        assert "A differentially private release: the original table's figures" in text.replace("&#x27;", "'")
        # the risk table has one column, the published table's
        assert re.search(r"measure published highest_risk [\d.]+ average_risk", text)
        assert f"classes {classes} rows {published:,}" in text
        assert "HIPAA" not in text or "profile of the original's columns is left out" in text.replace("&#x27;", "'")
        texts.append(re.sub(r"[\d.,]+", "#", text))
    # the two reports differ in published figures only (and the release's id and time)
    assert texts[0].replace("#", "") != "" and len(texts[0]) > 1000


def test_a_non_private_report_still_compares_with_the_original(tmp_path):
    pytest.importorskip("matplotlib")
    con = duckanon.connect()
    con.execute(BASE)
    report = tmp_path / "r.html"
    con.execute(f"ANONYMIZE t WITH (k=2, qi=(a, d), report='{report}')")
    text = _report_text(report)
    assert re.search(r"measure original published highest_risk", text)
    assert "3,000" in text


# -- B04: numpy warnings on stderr for a TIMESTAMPTZ past year 9999 under dates(...) --------------

@pytest.mark.parametrize("far", [False, True])
def test_a_far_future_zoned_timestamp_prints_no_warning(far):
    import subprocess
    import sys

    child = (
        "import sys, warnings, duckanon\n"
        "warnings.simplefilter('always')\n"
        "con = duckanon.connect()\n"
        "con.execute(\"CREATE TABLE t AS SELECT (DATE '2020-01-01' + (i % 300)::INT)::TIMESTAMPTZ AS d, "
        "(i % 2)::INT AS b FROM range(3000) r(i)\")\n"
        f"if {far}: con.execute(\"INSERT INTO t VALUES ('12000-01-01'::TIMESTAMPTZ, 1)\")\n"
        "con.execute(\"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(d, b), hierarchies=(d='dates(month, year)', "
        "b='intervals(5)'), levels=(d=1, b=0))\").fetchall()\n"
        "print('released')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(duckanon.__file__)))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, env=env)
    assert (done.stdout, done.stderr) == ("released\n", "")


# -- B06: a later REPORT of a private release had no differential-privacy or ledger section -------

def _section_table(text: str) -> str:
    start = text.index("Differential privacy parameter value")
    return text[start:text.index("What it means", start)]


def test_a_later_report_of_a_private_release_writes_the_privacy_sections(tmp_path):
    pytest.importorskip("matplotlib")
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 50)::INT AS a FROM range(3000) r(i)")
    at_release, later = tmp_path / "at.html", tmp_path / "later.html"
    row = _row(con, "ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a), hierarchies=(a='intervals(10,20)'), "
                    f"levels=(a=1), report='{at_release}')")
    con.execute(f"REPORT t_anon FROM t WITH (file='{later}')").fetchall()
    first, second = _report_text(at_release), _report_text(later)
    dp = json.loads(row["details"])["differential_privacy"]
    for text in (first, second):
        assert "Privacy ledger" in text and "What it means: this table was published by an (epsilon, delta)" in text
    # the same parameters but the rows sampled, which the comment does not record
    expected = _section_table(first).replace(f"rows sampled {dp['sampled_rows']:,}", "rows sampled —")
    assert _section_table(second) == expected
    assert f"smallest class published, k {dp['k']}" in expected
    assert "written by a later REPORT from the published table's comment" in second.replace("&#x27;", "'")
    assert "The source's totals are not in this report" in second.replace("&#x27;", "'")


def test_a_later_report_derives_the_anonymizations_epsilon_as_the_statement_did(tmp_path):
    """With a search, epsilon_anonymization is ARX's lower bound of epsilon - epsilon_search
    (0.8999999999999999 at 1 - 0.1), not the float subtraction (0.9): a later REPORT, which reads
    epsilon and epsilon_search from the comment, derives it the same way."""
    pytest.importorskip("matplotlib")
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 50)::INT AS a, (i % 7)::INT AS b FROM range(3000) r(i)")
    at_release, later = tmp_path / "at.html", tmp_path / "later.html"
    row = _row(con, "ANONYMIZE t WITH (epsilon=1, delta=1e-5, epsilon_search=0.1, search_steps=5, qi=(a, b), "
                    "hierarchies=(a='intervals(10,20)', b='intervals(7)'), "
                    f"report='{at_release}')")
    dp = json.loads(row["details"])["differential_privacy"]
    assert dp["epsilon_anonymization"] == 0.8999999999999999 and dp["epsilon_search"] == 0.1
    con.execute(f"REPORT t_anon FROM t WITH (file='{later}')").fetchall()
    expected = _section_table(_report_text(at_release)).replace(f"rows sampled {dp['sampled_rows']:,}",
                                                                 "rows sampled —")
    assert _section_table(_report_text(later)) == expected


@pytest.mark.parametrize("edit", [
    ("summary", "details", "levels", ["x'; DROP TABLE t; --", 1]),
    ("summary", "details", "levels", "3"),
    ("summary", "stars", "many"),
    ("summary", "optimal", "yes"),
    ("summary", "details", "column_loss", {"a": "high"}),
    ("summary", "details", "loss", [0.5]),
    ("qi", "a"),
    ("qi", ["a", 2]),
    ("roles", {"a": 1}),
    ("epsilon", "1"),
    ("dp_k", 1.5),
    ("levels", {"a": "top"}),
    ("summary", ["not", "a", "summary"]),
    ("delta", None),  # (the attack of stored text, 2026-12-04: KeyError 'delta')
    ("epsilon", 1e308),  # (OverflowError in e^epsilon)
    ("epsilon", 1000.0),
    ("epsilon_search", 2.0),
    ("dp_beta", 1.5),
    ("summary", "details", "levels", [3]),  # (b04: one level short, KeyError 'b')
    ("delta", 2.0),  # (b05: a report asserting a guarantee "except with probability 2")
    ("epsilon", -1.0),
    ("dp_k", 0),
])
def test_a_hand_edited_comment_is_not_taken_as_duckanons(tmp_path, edit):
    """The comment is stored text anyone may edit: a value of another type than ANONYMIZE writes
    makes REPORT say the table has no duckanon provenance, in one line, and write nothing (it
    reached the report's arithmetic as "'>' not supported between instances of 'str' and 'int'")."""
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 50)::INT AS a, (i % 7)::INT AS b FROM range(3000) r(i)")
    con.execute("ANONYMIZE t WITH (epsilon=1, delta=1e-5, epsilon_search=0.1, search_steps=5, qi=(a, b), "
                "hierarchies=(a='intervals(10,20)', b='intervals(7)'))").fetchall()
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 't_anon'").fetchone()[0]
    provenance = json.loads(comment.removeprefix("duckanon "))
    *path, key, value = edit
    record = provenance
    for step in path:
        record = record[step]
    record[key] = value
    con.execute("COMMENT ON TABLE t_anon IS " + "$$duckanon " + json.dumps(provenance) + "$$")
    report = tmp_path / "r.html"
    with pytest.raises(AnonymizeError) as raised:
        con.execute(f"REPORT t_anon FROM t WITH (file='{report}')").fetchall()
    assert str(raised.value) == ('REPORT needs qi = (...): "t_anon" has no duckanon provenance (it was not '
                                      'published by ANONYMIZE, or its comment was changed)')
    assert not report.exists() and con.execute("SELECT count(*) FROM t").fetchone() == (3000,)
    # named by hand, the table is reported as one published by hand
    con.execute(f"REPORT t_anon FROM t WITH (file='{report}', qi = (a, b))").fetchall()
    assert report.exists()
