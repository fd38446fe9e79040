"""The report claims only what is true: what "optimal" is proven for, every parameter that shaped the
release (and none that did not), removed rows in plain words, the risk threshold and where it came
from, an infinite KL divergence explained, the least diverse classes, 3 significant digits, and no
table wider than the page (issue "Trust: ... claims what is not true", items 13 and 16)."""

from __future__ import annotations

import html
import math
import re
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")  # the report's optional dependency

import duckanon  # noqa: E402
from duckanon.report import at_risk_sql_threshold, smallest_safe_size, write_report  # noqa: E402

from support.data import SHARED  # noqa: E402
from support.report_pages import LAYOUT_SCRIPT, section, table_rows  # noqa: E402

ADULT = SHARED / "adult"
ADULT_QI = ["sex", "age", "race", "marital-status", "education"]
HOSPITAL_QI = ["zipcode", "age", "education"]
CHROMIUM = Path("/usr/bin/chromium")
# The report, as ANONYMIZE's lattice release of Adult: every level of the ARX hierarchies, 2% of the rows may go.
ADULT_STATEMENT = (
    "ANONYMIZE adult WITH (k = 5, qi = (sex, age, race, \"marital-status\", education), sensitive = \"salary-class\", "
    "method = 'lattice', suppression_limit = 0.02, metric = entropy, "
    f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv'"
)
# What the engine is asked to pass for that statement (the report reads params with .get()).
ADULT_PARAMS = {"k": 5, "l_variant": "frequency", "t_distance": "equal", "method": "lattice",
                "hierarchies": f"{ADULT}/adult_hierarchy_{{column}}.csv", "suppression_limit": 0.02,
                "metric": "entropy", "qi": ", ".join(ADULT_QI), "sensitive": "salary-class"}


@pytest.fixture(scope="module")
def hospital(hospital_module):
    """This module's tests share one connection with the hospital table (conftest's hospital_module)."""
    return hospital_module


def row_of(cursor) -> dict:
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


def plain(page: str) -> str:
    """The page's text as a reader sees it: no style, images or tags; entities decoded, spaces collapsed."""
    page = re.sub(r"<style>.*?</style>|<img[^>]*>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).replace(" :", ":").replace(" .", ".")


def bare_infinity(text: str) -> list[str]:
    """'inf', 'Infinity', 'nan' as words (not 'information')."""
    return re.findall(r"(?<![A-Za-z])(?:inf|infinity|nan)(?![A-Za-z])", text, flags=re.I)


@pytest.fixture(scope="module")
def adult_release(adult, tmp_path_factory):
    """(summary, page written by ANONYMIZE ... report =) of the Adult lattice release."""
    path = tmp_path_factory.mktemp("adult") / "r.html"
    summary = row_of(adult.execute(ADULT_STATEMENT + f", report = '{path}')"))
    return summary, path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def adult_page(adult, adult_release, tmp_path_factory):
    """The same release's report with the parameters the engine is asked to pass."""
    summary, _ = adult_release
    path = write_report(adult, "adult_anon", "adult", ADULT_QI, "salary-class",
                        tmp_path_factory.mktemp("adult_params") / "r.html", summary=summary, params=ADULT_PARAMS)
    return path.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ item 13: optimal for what

def test_hospital_k3_l2_report_says_optimal_in_stars(hospital, tmp_path):
    path = tmp_path / "r.html"
    summary = row_of(hospital.execute("ANONYMIZE hospital WITH (k = 3, l = 2, qi = (zipcode, age, education), "
                                      f"sensitive = disease, report = '{path}')"))
    page = path.read_text(encoding="utf-8")
    text = plain(page)
    assert summary["optimal"] and summary["optimal_for"] == "stars"
    assert "Proven optimal: no cell suppression with fewer stars satisfies the request." in text
    assert "No rows removed: the published table holds all 10 rows." in text
    params = table_rows(section(page, "Parameters"))
    assert params["k"] == ["3"] and params["l"] == ["2"] and params["l_variant"] == ["frequency"]
    assert params["method"] == [f"auto (chose {summary['method'].removeprefix('auto: ')})"]
    for absent in ("t", "t_distance", "c", "hierarchies", "suppression_limit", "metric"):
        assert absent not in params, absent
    assert not bare_infinity(text)


def test_adult_lattice_report_says_what_the_optimum_is_for(adult_page, adult_release):
    summary, _ = adult_release
    text = plain(adult_page)
    assert summary["optimal"] and summary["method"] == "lattice"
    assert summary["optimal_for"].startswith("entropy among full-domain generalizations")
    assert (f"Proven optimal for {summary['optimal_for']}: no release that generalizes each quasi-identifier to one "
            "level of its hierarchy (the same level for every row) and removes at most 2% of the rows (603 rows) has "
            "a lower entropy. Other kinds of release (cell suppression, local recoding) may lose less.") in text
    assert "no suppression with fewer stars" not in text and "no cell suppression with fewer stars" not in text


def test_not_proven_optimal_states_the_bound(hospital, tmp_path):
    summary = row_of(hospital.execute("ANONYMIZE hospital INTO h_greedy WITH (k = 3, qi = (zipcode, age, education), "
                                      "method = 'greedy')"))
    summary.update(optimal=False, lower_bound=summary["stars"] - 2, optimal_for=None)
    text = plain(write_report(hospital, "h_greedy", "hospital", HOSPITAL_QI, None, tmp_path / "r.html",
                              summary=summary, params={"k": 3}).read_text(encoding="utf-8"))
    stars = summary["stars"]
    assert (f"Not proven optimal: at most 2 stars ({2 / stars:.1%} of the stars) could be saved "
            f"(stars {stars} − proven lower bound {stars - 2}).") in text
    summary.update(lower_bound=None)
    text = plain(write_report(hospital, "h_greedy", "hospital", HOSPITAL_QI, None, tmp_path / "r2.html",
                              summary=summary, params={"k": 3}).read_text(encoding="utf-8"))
    assert "Not proven optimal, and no lower bound is known." in text and "Proven optimal" not in text


# ------------------------------------------------------------------------------ item 16: parameters, removed rows

def test_adult_parameters_and_removed_rows(adult_page, adult_release):
    summary, _ = adult_release
    text = plain(adult_page)
    assert summary["removed_rows"] == 473 and summary["published_rows"] == 30162 - 473
    assert "473 rows (1.6%) removed, limit 2%. The published table holds 29,689 of the original's 30,162 rows." in text
    params = table_rows(section(adult_page, "Parameters"))
    assert params["hierarchies"] == [f"{ADULT}/adult_hierarchy_{{column}}.csv for every quasi-identifier"]
    assert params["suppression_limit"] == ["2% of the rows (at most 603 rows)"]
    assert params["metric"] == ["entropy"]
    assert params["hierarchy levels chosen (0 = original values)"] == [
        "sex 0, age 0, race 1, marital-status 1, education 2"]
    assert params["risk_threshold"] == ["0.2 (the default: 1/k for k = 5)"]
    for absent in ("l", "l_variant", "t", "t_distance"):  # passed, but no l and no t were asked for
        assert absent not in params, absent


def test_adult_report_written_by_anonymize(adult_release):
    """What ANONYMIZE ... report = writes today (before the engine passes the lattice's options)."""
    summary, page = adult_release
    text = plain(page)
    assert f"Proven optimal for {summary['optimal_for']}: no release that generalizes each quasi-identifier" in text
    assert "Other kinds of release (cell suppression, local recoding) may lose less." in text
    assert "473 rows (1.6%) removed" in text
    assert not bare_infinity(text)
    assert "∞ (a published cell has no original counterpart: " in text


def test_adult_report_written_by_anonymize_has_every_parameter(adult_release):
    _, page = adult_release
    text = plain(page)
    assert "473 rows (1.6%) removed, limit 2%." in text
    assert "removes at most 2% of the rows (603 rows) has a lower entropy" in text
    params = table_rows(section(page, "Parameters"))
    assert params["suppression_limit"] == ["2% of the rows (at most 603 rows)"]
    assert params["risk_threshold"] == ["0.2 (the default: 1/k for k = 5)"]


def test_hierarchies_per_column_and_variants_only_with_l_and_t(hospital, tmp_path):
    summary = row_of(hospital.execute("ANONYMIZE hospital INTO h_lattice WITH (k = 2, qi = (zipcode, age, education), "
                                      "sensitive = disease, method = 'lattice', "
                                      "hierarchies = (age = 'intervals(10, 20)'))"))
    params = {"k": 2, "l_variant": "frequency", "t_distance": "equal", "c": 2.0, "method": "lattice",
              "hierarchies": {"age": "intervals(10, 20)"}, "suppression_limit": 0.0, "metric": "entropy"}
    page = write_report(hospital, "h_lattice", "hospital", HOSPITAL_QI, "disease", tmp_path / "r.html",
                        summary=summary, params=params).read_text(encoding="utf-8")
    shown = table_rows(section(page, "Parameters"))
    assert shown["hierarchies"] == ["age: intervals(10, 20); zipcode, education: none (the value or '*')"]
    assert shown["suppression_limit"] == ["0% of the rows (at most 0 rows)"]
    assert not {"l_variant", "t_distance", "c"} & set(shown)
    assert "No rows removed, limit 0%: the published table holds all 10 rows." in plain(page)

    params.update(l=2, t=0.6, l_variant="recursive", t_distance="ordered")
    page = write_report(hospital, "h_lattice", "hospital", HOSPITAL_QI, "disease", tmp_path / "r2.html",
                        summary=summary, params=params).read_text(encoding="utf-8")
    shown = table_rows(section(page, "Parameters"))
    assert shown["l_variant"] == ["recursive"] and shown["c"] == ["2"]
    assert shown["t"] == ["0.6"] and shown["t_distance"] == ["ordered"]


# ------------------------------------------------------------------------------ risk threshold, 3 digits

@pytest.fixture(scope="module")
def k3_release(hospital):
    """Hospital published as three classes of 3, 3 and 4 rows: 3-anonymous, highest risk 1/3."""
    hospital.duckdb.execute("""
        CREATE OR REPLACE TABLE h_k3 AS
        SELECT '*' AS zipcode, '*' AS age,
               CASE WHEN rank <= 3 THEN 'A' WHEN rank <= 6 THEN 'B' ELSE 'C' END AS education, disease
        FROM (SELECT *, row_number() OVER (ORDER BY zipcode) AS rank FROM hospital)""")
    return "h_k3"


def test_k3_release_has_no_record_at_risk_by_default(hospital, k3_release, tmp_path):
    page = write_report(hospital, k3_release, "hospital", HOSPITAL_QI, "disease", tmp_path / "r.html",
                        params={"k": 3}).read_text(encoding="utf-8")
    text = plain(page)
    assert ("0 published records at risk: risk above 0.333 (the default: 1/k for k = 3), "
            "i.e. in classes of fewer than 3 rows.") in text
    risk = table_rows(section(page, "Re-identification risk"))
    assert risk["highest_risk"] == ["1", "0.333"] and risk["records_at_risk"] == ["10", "0"]
    assert risk["average_risk"] == ["1", "0.3"]
    assert table_rows(section(page, "Parameters"))["risk_threshold"] == ["0.333 (the default: 1/k for k = 3)"]

    given = plain(write_report(hospital, k3_release, "hospital", HOSPITAL_QI, "disease", tmp_path / "r2.html",
                               params={"k": 3}, risk_threshold=0.2).read_text(encoding="utf-8"))
    assert ("10 published records at risk: risk above 0.2 (as given), i.e. in classes of fewer than 5 rows."
            in given)
    without_k = plain(write_report(hospital, k3_release, "hospital", HOSPITAL_QI, "disease", tmp_path / "r3.html")
                      .read_text(encoding="utf-8"))
    assert ("10 published records at risk: risk above 0.2 (the default without k), "
            "i.e. in classes of fewer than 5 rows.") in without_k


def test_threshold_one_over_k_is_exact_for_every_k(hospital):
    """1/k is not exact in floating point: a class of exactly k rows is never 'at risk' at 1/k."""
    db = hospital.duckdb
    for k in range(1, 200):
        assert smallest_safe_size(1 / k) == k
        risk = 1.0 / k  # the macro's own 1.0 / size
        assert not risk > at_risk_sql_threshold(1 / k)
        if k > 1:
            assert 1.0 / (k - 1) > at_risk_sql_threshold(1 / k)
    db.execute("CREATE OR REPLACE TABLE sizes7 AS SELECT (i % 3)::VARCHAR AS q FROM range(21) AS r(i)")  # 3 x 7 rows
    at_risk = db.execute("SELECT records_at_risk FROM anon_risk('sizes7', ['q'], threshold := ?)",
                         [at_risk_sql_threshold(1 / 7)]).fetchone()[0]
    assert at_risk == 0
    assert smallest_safe_size(0.2) == 5 and smallest_safe_size(0.25) == 4 and smallest_safe_size(0.3) == 4


def test_numbers_have_three_significant_digits(hospital, k3_release, tmp_path, adult_page):
    page = write_report(hospital, k3_release, "hospital", HOSPITAL_QI, "disease", tmp_path / "r.html",
                        params={"k": 3}).read_text(encoding="utf-8")
    for report in (page, adult_page):
        numbers = [html.unescape(n) for n in re.findall(r'<td class="num">([^<]*)</td>', report)]
        assert numbers
        for number in numbers:
            if re.fullmatch(r"-?\d{1,3}(,\d{3})*", number):
                continue  # counts, and whole numbers of 1000 and more, with thousands separators
            assert re.fullmatch(r"-?\d+\.\d+", number), number
            significant = re.sub(r"^[-0.]+", "", number).replace(".", "")
            assert len(significant) <= 3, number
    assert "0.3333" not in page and "0.333" in page


# ------------------------------------------------------------------------------ KL divergence

def kl_cell(page: str) -> str:
    return table_rows(section(page, "Utility"))["KL divergence (original ‖ published)"][0]


def test_infinite_kl_divergence_is_explained(hospital, tmp_path):
    db = hospital.duckdb
    db.execute("""CREATE OR REPLACE TABLE kl_generalized AS
                  SELECT zipcode::VARCHAR AS zipcode,
                         CASE WHEN age = 38 THEN '[30, 40)' ELSE age::VARCHAR END AS age, education, disease
                  FROM hospital""")
    db.execute("CREATE OR REPLACE TABLE kl_removed AS SELECT * FROM hospital WHERE age <> 38")
    db.execute("""CREATE OR REPLACE TABLE kl_changed AS
                  SELECT zipcode, age, education, CASE WHEN age = 38 THEN 'Flu' ELSE disease END AS disease
                  FROM hospital""")
    expected = {
        "kl_generalized": "∞ (a published cell has no original counterpart: 1 published cell holds a generalized "
                          "value such as '[30, 40)' in age, which the original column does not contain, so the "
                          "original rows behind them get probability 0; this KL divergence reads only a '*' as "
                          "any value and is infinite for every generalization, so see the information loss per "
                          "column instead)",
        "kl_removed": "∞ (a removed row has no published counterpart: 1 row was removed and some of their value "
                      "combinations occur in no published row, even with a '*' read as any value, so the published "
                      "table gives them probability 0)",
        "kl_changed": "∞ (an original row has no published counterpart: some combination of quasi-identifier and "
                      "sensitive values occurs in no published row, even with a '*' read as any value, so the "
                      "published table gives it probability 0; it is not a cell suppression of the original)",
    }
    for table, sentence in expected.items():
        assert db.execute("SELECT kl_divergence FROM anon_utility(?, 'hospital', ?, 'disease')",
                          [table, HOSPITAL_QI]).fetchone()[0] == math.inf
        page = write_report(hospital, table, "hospital", HOSPITAL_QI, "disease", tmp_path / f"{table}.html",
                            params={"k": 1}).read_text(encoding="utf-8")
        assert kl_cell(page) == sentence
        assert not bare_infinity(plain(page)), table
    removed = plain((tmp_path / "kl_removed.html").read_text(encoding="utf-8"))
    assert "1 row (10%) removed. The published table holds 9 of the original's 10 rows." in removed


def test_finite_kl_divergence_is_a_number(hospital, tmp_path):
    summary = row_of(hospital.execute("ANONYMIZE hospital INTO h_cells WITH (k = 3, qi = (zipcode, age, education), "
                                      "sensitive = disease)"))
    page = write_report(hospital, "h_cells", "hospital", HOSPITAL_QI, "disease", tmp_path / "r.html",
                        summary=summary, params={"k": 3}).read_text(encoding="utf-8")
    value = hospital.duckdb.execute("SELECT kl_divergence FROM anon_utility('h_cells', 'hospital', ?, 'disease')",
                                    [HOSPITAL_QI]).fetchone()[0]
    assert math.isfinite(value) and kl_cell(page) == f"{value:.3g}"


# ------------------------------------------------------------------------------ SA chart: least diverse classes

def test_sa_section_shows_the_least_diverse_classes(tmp_path):
    con = duckanon.connect()
    # 35 big classes (10 rows, 5 diseases each) and 5 small ones of one disease: by size the big
    # ones fill the 30 bars; by diversity the small ones come first.
    con.duckdb.execute("""
        CREATE TABLE src AS
        SELECT 'z' || (i // 10) AS zip, 'd' || (i % 5) AS disease FROM range(350) AS r(i)
        UNION ALL
        SELECT 'small' || (i // 3), 'rare' || (i // 3) FROM range(15) AS r(i)""")
    page = write_report(con, "src", "src", ["zip"], "disease", tmp_path / "r.html", params={"k": 3}) \
        .read_text(encoding="utf-8")
    part = section(page, "Sensitive attribute")
    assert "Shown: the 30 least diverse of the 40 classes (fewest distinct values of disease, then the largest " \
           "share of one value, then the farthest from the whole table)" in plain(part)
    rows = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", part) if "<td" in row]
    assert len(rows) == 30
    assert [r[1] for r in rows[:5]] == [f"(small{i})" for i in range(5)]  # one QI: the same text on DuckDB 1.5 and 2
    assert all(r[3] == "1" and r[4] == "1" for r in rows[:5])
    assert all(r[3] == "5" for r in rows[5:])
    con.close()


# ------------------------------------------------------------------------------ layout


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install -y chromium) to lay the page out")
@pytest.mark.parametrize("width", [700, 1200])
def test_no_table_wider_than_the_page(adult, adult_release, tmp_path, width):
    summary, _ = adult_release
    params = dict(ADULT_PARAMS, note="x" * 400, hierarchies={c: f"{ADULT}/{'deep/' * 20}h_{c}.csv" for c in ADULT_QI})
    page = write_report(adult, "adult_anon", "adult", ADULT_QI, "salary-class", tmp_path / "r.html",
                        summary=summary, params=params).read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", LAYOUT_SCRIPT + "</body>"), encoding="utf-8")
    dom = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},2000",
                          "--dump-dom", probe.resolve().as_uri()],
                         cwd=tmp_path, check=True, capture_output=True, text=True, timeout=180).stdout
    assert re.search(r'<div id="layout">LAYOUT=([^<]*)</div>', dom).group(1) == "fits"


def test_sa_section_keeps_classes_that_print_alike_apart(tmp_path):
    con = duckanon.connect()
    con.duckdb.execute("""CREATE TABLE alike AS SELECT * FROM (VALUES ('x, y', 'z', 'flu'), ('x, y', 'z', 'flu'),
                          ('x', 'y, z', 'cold'), ('x', 'y, z', 'flu')) AS v(a, b, disease)""")
    page = write_report(con, "alike", "alike", ["a", "b"], "disease", tmp_path / "r.html", params={"k": 2}) \
        .read_text(encoding="utf-8")
    part = section(page, "Sensitive attribute")
    assert "Shown: all 2 classes, least diverse first" in plain(part)
    rows = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", part) if "<td" in row]
    assert [(r[2], r[3]) for r in rows] == [("2", "1"), ("2", "2")]  # rows, distinct values
    con.close()
