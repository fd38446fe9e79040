"""Issue 36, the report: its first line (a verdict computed from the release), why a column
generalized to its top level makes every published row a row with a star, every option in
Parameters (the suppression limit and the hierarchies, as the provenance allows), the per-QI chart
with stars and generalized cells as two series (each label on its own bar, the legend off the
bars), the sweep in increasing order (in its plot and its table, which fits a 700 px page), and
thousands separators on every count."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")  # the report's optional dependency

import duckanon  # noqa: E402
from duckanon.report import figures, write_report  # noqa: E402

from support.data import SHARED  # noqa: E402
from support.report_pages import LAYOUT_SCRIPT, section, table_rows  # noqa: E402

ADULT = SHARED / "adult"
HIERARCHIES = f"{ADULT}/adult_hierarchy_{{column}}.csv"
CHROMIUM = Path("/usr/bin/chromium")
# Adult at k = 20 over three QIs: the optimal lattice node keeps age and sex and takes
# native-country to level 2 of its hierarchy ('*'), removing 215 rows within the 4% limit.
TOP_LEVEL = ("ANONYMIZE adult INTO top_anon WITH (k = 20, qi = (age, sex, \"native-country\"), method = 'lattice', "
             f"hierarchies = '{HIERARCHIES}', suppression_limit = 0.04, report = '{{path}}')")  # (path: str.replace)
# A sweep typed out of order over a local recoding that publishes both '*' and hierarchy labels.
SWEEP = ("ANONYMIZE adult INTO sweep_anon WITH (k = (5, 2, 10), qi = (age, sex, race, \"marital-status\"), "
         f"sensitive = occupation, method = 'auto', hierarchies = '{HIERARCHIES}', suppression_limit = 0.02, "
         "report = '{path}')")
SWEEP_QI = ["age", "sex", "race", "marital-status"]


@pytest.fixture(scope="module")
def hospital(hospital_module):
    """This module's tests share one connection with the hospital table (conftest's hospital_module)."""
    return hospital_module


def row_of(cursor) -> dict:
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


def plain(page: str) -> str:
    """The page's text as a reader sees it (no style, images, solver-details JSON or tags)."""
    page = re.sub(r"<style>.*?</style>|<img[^>]*>|<details><summary>solver details.*?</details>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).replace(" .", ".").replace(" ;", ";")


def one(db, sql: str, *args):
    return db.execute(sql, list(args)).fetchone()[0]


@pytest.fixture(scope="module")
def top_level(adult, tmp_path_factory):
    """(summary, details, page) of the release that takes native-country to its top level."""
    path = tmp_path_factory.mktemp("top") / "top.html"
    summary = row_of(adult.execute(TOP_LEVEL.replace("{path}", str(path))))
    return summary, json.loads(summary["details"]), path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sweep_release(adult, tmp_path_factory):
    """(summary, page, {alt: matplotlib Figure}) of the sweep's release, the figures kept as drawn."""
    drawn = {}
    original = figures._img

    def keep(fig, alt):
        drawn[alt] = fig
        return original(fig, alt)

    figures._img = keep
    try:
        path = tmp_path_factory.mktemp("sweep") / "sweep.html"
        summary = row_of(adult.execute(SWEEP.replace("{path}", str(path))))
    finally:
        figures._img = original
    return summary, path.read_text(encoding="utf-8"), drawn


# ------------------------------------------------------------------------------ the verdict

def test_the_verdict_of_a_top_level_release_is_computed_from_it(adult, top_level):
    summary, details, page = top_level
    db = adult.duckdb
    published = one(db, "SELECT count(*) FROM top_anon")
    assert (published, summary["removed_rows"], details["levels"]) == (29947, 215, [0, 0, 2])
    assert one(db, "SELECT k FROM anon_k('top_anon', ['age', 'sex', 'native-country'])") >= 20
    stars = one(db, "SELECT count(*) FROM top_anon WHERE \"native-country\" = '*'")
    assert stars == published == summary["stars"] == summary["suppressed_rows"]
    verdict = plain(page.split("<h2>")[0])
    assert ("Verdict: k = 20 holds on all 29,947 published rows; 215 of the original's 30,162 rows (0.71%) removed; "
            f"29,947 cells fully masked (stars); loss {details['loss']:.3g} (ARX's Loss).") in verdict
    assert page.index('class="verdict"') < page.index("<p>Published table")  # the first thing under the title


def test_why_every_published_row_has_a_star(top_level):
    summary, _, page = top_level
    text = plain(page)
    assert ("Why 29,947 stars: a star is a published cell that hides its value entirely, a '*' or a hierarchy label "
            "that covers every value of its column. Every published native-country cell is '*' (level 2 of its "
            "hierarchy). So this column alone gives 29,947 stars, although no cell was suppressed on its own: the "
            "lattice suppresses no single cell, it generalized the column to that level for every row. Every "
            "published row holds such a cell, so suppressed_rows, the rows with at least one star, is every "
            "published row (29,947).") in text
    assert "The other" not in text.split("Why 29,947 stars")[1].split("Equivalence classes")[0]  # no other stars


def test_a_model_that_does_not_hold_and_one_not_measured_are_said(hospital, tmp_path):
    db = hospital.duckdb
    db.execute("CREATE OR REPLACE TABLE h_copy AS SELECT * FROM hospital")
    k = one(db, "SELECT k FROM anon_k('h_copy', ['zipcode', 'age', 'education'])")
    page = write_report(hospital, "h_copy", "hospital", ["zipcode", "age", "education"], "disease",
                        tmp_path / "r.html", params={"k": 2, "l": 2, "l_variant": "recursive", "c": 3}
                        ).read_text(encoding="utf-8")
    assert k == 1
    assert (f"Verdict: k = 2 does NOT hold (published: {k}); l = 2 (recursive) not measured by this report; "
            "no rows removed (all 10 rows published).") in plain(page)
    assert '<span class="bad">k = 2 does NOT hold' in page


def test_the_verdict_of_a_k_and_l_release(hospital, tmp_path):
    path = tmp_path / "r.html"
    summary = row_of(hospital.execute("ANONYMIZE hospital INTO h_kl WITH (k = 3, l = 2, "
                                      "qi = (zipcode, age, education), "
                                      f"sensitive = disease, report = '{path}')"))
    loss = json.loads(summary["details"])["loss"]
    frequency_l = one(hospital.duckdb, "SELECT frequency_l FROM anon_l('h_kl', ['zipcode', 'age', 'education'], "
                                       "'disease')")
    assert frequency_l >= 2 and summary["min_class_size"] >= 3
    assert (f"Verdict: k = 3 and l = 2 (frequency) hold on all 10 published rows; no rows removed (all 10 rows "
            f"published); {summary['stars']} cells fully masked (stars); loss {loss:.3g} (ARX's Loss).") \
        in plain(path.read_text(encoding="utf-8"))


def test_the_verdict_of_an_empty_release(tmp_path):
    con = duckanon.connect()
    con.duckdb.execute("CREATE TABLE src (q VARCHAR, s VARCHAR)")
    con.duckdb.execute("CREATE TABLE pub AS SELECT * FROM src")
    page = write_report(con, "pub", "src", ["q"], "s", tmp_path / "r.html", params={"k": 2}).read_text(encoding="utf-8")
    assert "Verdict: nothing is published: the published table is empty." in plain(page)
    con.close()


# ------------------------------------------------------------------------------ parameters

def test_parameters_name_the_hierarchy_file_and_the_limit(top_level):
    _, _, page = top_level
    params = table_rows(section(page, "Parameters"))
    assert params["hierarchies"] == [f"{HIERARCHIES} for every quasi-identifier"]  # written beside the source
    assert params["suppression_limit"] == ["4% of the rows (at most 1,206 rows)"]  # floor(0.04 x 30,162)
    assert params["hierarchy levels chosen (0 = original values)"] == ["age 0, sex 0, native-country 2"]
    assert params["metric"] == ["entropy"] and params["k"] == ["20"] and params["sensitive"] == ["none"]


def test_report_later_shows_the_hierarchy_as_the_provenance_recorded_it(adult, top_level, tmp_path):
    path = tmp_path / "later.html"
    adult.execute(f"REPORT top_anon FROM adult WITH (file = '{path}')")
    page = path.read_text(encoding="utf-8")
    params = table_rows(section(page, "Parameters"))
    assert params["hierarchies"] == ["an ARX hierarchy file (its path is not recorded with the release) "
                                     "for every quasi-identifier"]
    assert params["suppression_limit"] == ["4% of the rows (at most 1,206 rows)"]
    assert str(ADULT) not in page and "adult_hierarchy" not in page  # what the provenance omits stays out


def test_hierarchies_and_limit_of_a_local_recoding_are_listed(adult, sweep_release, tmp_path):
    """auto chose mondrian over the hierarchies: the hierarchies and the suppression limit shaped
    it all the same (given to the report, as REPORT of a lattice release gives them)."""
    summary, _, _ = sweep_release
    assert summary["method"] == "auto: mondrian"
    params = {"k": 5, "method": "auto", "hierarchies": {"age": "intervals(5, 10)", "sex": "table(h_sex)"},
              "suppression_limit": 0.02, "metric": "entropy", "qi": ", ".join(SWEEP_QI), "sensitive": "occupation"}
    page = write_report(adult, "sweep_anon", "adult", SWEEP_QI, "occupation", tmp_path / "r.html",
                        summary=summary, params=params).read_text(encoding="utf-8")
    shown = table_rows(section(page, "Parameters"))
    assert shown["method"] == ["auto (chose mondrian)"]
    assert shown["hierarchies"] == ["age: intervals(5, 10); sex: table(h_sex); race, marital-status: none "
                                    "(the value or '*')"]
    assert shown["suppression_limit"] == ["2% of the rows (at most 603 rows)"]
    assert "metric" not in shown  # mondrian minimises its loss, not the statement's metric
    assert f"{summary['removed_rows']} rows" in plain(page) and "limit 2%" in plain(page)


def test_anonymize_passes_the_hierarchies_of_a_local_recoding(sweep_release):
    _, page, _ = sweep_release
    params = table_rows(section(page, "Parameters"))
    assert params["hierarchies"] == [f"{HIERARCHIES} for every quasi-identifier"]
    assert params["suppression_limit"] == ["2% of the rows (at most 603 rows)"]


# ------------------------------------------------------------------------------ the per-QI chart

def test_the_per_column_chart_plots_stars_and_generalized_cells_apart(adult, sweep_release):
    _, page, drawn = sweep_release
    db = adult.duckdb
    stars, generalized = [], []
    for column in SWEEP_QI:
        quoted = f'"{column}"'
        stars.append(one(db, f"SELECT count(*) FROM sweep_anon WHERE {quoted} = '*'"))
        generalized.append(one(db, f"SELECT count(*) FROM sweep_anon WHERE {quoted} <> '*' AND {quoted} NOT IN "
                                   f"(SELECT DISTINCT {quoted}::VARCHAR FROM adult)"))
    assert sum(stars) > 0 and sum(generalized) > 0 and one(db, "SELECT count(*) FROM sweep_anon WHERE age LIKE '%-%'")

    fig = drawn["stars and generalized cells per column"]
    fig.canvas.draw()
    [ax] = fig.axes
    assert ax.get_title() == "Stars and generalized cells per quasi-identifier"
    series = {container.get_label(): container for container in ax.containers}
    assert list(series) == ["stars ('*' or one label for every value)", "generalized (other labels)"]
    star_bars, label_bars = series.values()
    assert [bar.get_height() for bar in star_bars] == stars
    assert [bar.get_height() for bar in label_bars] == generalized
    # each value sits over its own bar, written as the tables write counts
    texts = ax.texts
    bars = list(star_bars) + list(label_bars)
    assert len(texts) == len(bars)
    for text, bar in zip(texts, bars):
        assert text.get_text() == f"{int(bar.get_height()):,}"
        assert text.xy == pytest.approx((bar.get_x() + bar.get_width() / 2, bar.get_height()))
    # the legend covers neither a bar nor a value
    legend = ax.get_legend().get_window_extent()
    renderer = fig.canvas.get_renderer()
    for artist in bars + texts:
        assert not legend.overlaps(artist.get_window_extent(renderer)), artist
    shown = table_rows(section(page, "Suppression per column"))
    assert [shown[c] for c in SWEEP_QI] == [[f"{s:,}", f"{g:,}"] for s, g in zip(stars, generalized)]


# ------------------------------------------------------------------------------ the sweep

def test_the_sweep_is_shown_in_increasing_order(adult, sweep_release):
    summary, page, drawn = sweep_release
    part = section(page, "Sweep over k")
    rows = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", part) if "<td" in row]
    assert [r[0] for r in rows] == ["2", "5", "10"]  # typed 5, 2, 10
    assert rows[1][1] == f"{summary['stars']:,}"  # k = 5 is the release itself
    explained = adult.execute("EXPLAIN ANONYMIZE adult WITH (k = (5, 2, 10), "
                              "qi = (age, sex, race, \"marital-status\"), "
                              f"sensitive = occupation, method = 'auto', hierarchies = '{HIERARCHIES}', "
                              "suppression_limit = 0.02)").fetchall()
    assert [r[1] for r in rows] == [f"{row[1]:,}" for row in sorted(explained)]  # stars of each dry run
    assert "seconds" not in re.findall(r"<th>(.*?)</th>", part)
    assert table_rows(section(page, "Parameters"))["k"] == ["5 (published; the sweep below compares 2, 5, 10)"]
    assert "One dry run per value, in increasing k. k = 5 is the one published" in plain(part)

    fig = drawn["sweep over k"]
    loss_ax, risk_ax = fig.axes
    assert [text.get_text() for text in risk_ax.get_xticklabels()] == ["2", "5", "10"]
    for line in loss_ax.get_lines()[:3] + risk_ax.get_lines()[:2]:
        assert list(line.get_xdata()) == [2.0, 5.0, 10.0], line.get_label()
    assert list(loss_ax.get_lines()[0].get_ydata()) == [float(row[1]) for row in sorted(explained)]


# ------------------------------------------------------------------------------ thousands separators

def test_every_count_has_thousands_separators(top_level, sweep_release):
    for page in (top_level[2], sweep_release[1]):
        text = plain(page)
        assert not re.findall(r"(?<![\d.,])\d{4,}(?![\d])", text)  # no count of 1,000 or more without them
        numbers = [html.unescape(n) for n in re.findall(r'<td class="num">([^<]*)</td>', page)]
        assert numbers and all(re.fullmatch(r"-?\d{1,3}(,\d{3})*|-?\d+\.\d+", n) for n in numbers), [
            n for n in numbers if not re.fullmatch(r"-?\d{1,3}(,\d{3})*|-?\d+\.\d+", n)]
    assert "30,162" in plain(top_level[2]) and "1,206 rows" in plain(top_level[2])


# ------------------------------------------------------------------------------ layout at 700 px

@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install -y chromium) to lay the page out")
@pytest.mark.parametrize("width", [700, 1200])
def test_the_sweep_table_fits_the_page(sweep_release, tmp_path, width):
    probe = tmp_path / "probe.html"
    probe.write_text(sweep_release[1].replace("</body>", LAYOUT_SCRIPT + "</body>"), encoding="utf-8")
    dom = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},2000",
                          "--dump-dom", probe.resolve().as_uri()],
                         cwd=tmp_path, check=True, capture_output=True, text=True, timeout=180).stdout
    assert re.search(r'<div id="layout">LAYOUT=([^<]*)</div>', dom).group(1) == "fits"
