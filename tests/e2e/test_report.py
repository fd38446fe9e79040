"""The HTML report: self-contained, right numbers, and it really renders in a browser."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")  # an optional dependency (extra "bench"), the report needs it

import duckdb  # noqa: E402
import matplotlib.image  # noqa: E402

import duckanon  # noqa: E402
from duckanon.report import write_report  # noqa: E402

from support.report_pages import section, table_rows  # noqa: E402

QI = ["zipcode", "age", "education"]
PARAMS = {"k": 3, "qi": QI, "sensitive": "disease", "note": "<b>not markup</b>"}
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def hospital(hospital_module):
    """This module's tests share one connection with the hospital table (conftest's hospital_module)."""
    return hospital_module


def anonymize(con, k: int, into: str = "hospital_anon") -> dict:
    cursor = con.execute(f"ANONYMIZE hospital INTO {into} WITH (k = {k}, qi = (zipcode, age, education), "
                         "sensitive = disease)")
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


@pytest.fixture(scope="module")
def report(hospital, tmp_path_factory):
    """(summary, path, page) of the k = 3 report, written once for the tests below."""
    summary = anonymize(hospital, 3)
    path = write_report(hospital, "hospital_anon", "hospital", QI, "disease",
                        tmp_path_factory.mktemp("report") / "report.html", summary=summary, params=PARAMS)
    return summary, path, path.read_text(encoding="utf-8")


def test_report_is_self_contained_with_plots_parameters_and_versions(report):
    summary, path, page = report
    assert isinstance(path, Path) and path.exists()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, flags=re.I)
    assert "<script" not in page and "<link" not in page
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(images) >= 4
    assert all(base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n") for data in images)
    assert page.count("<img") == len(images)  # no image from anywhere else

    params = table_rows(section(page, "Parameters"))
    assert params["k"] == ["3"] and params["qi"] == ["zipcode, age, education"]
    assert params["sensitive"] == ["disease"]
    assert "&lt;b&gt;not markup&lt;/b&gt;" in page and "<b>not markup</b>" not in page  # escaped
    assert f"duckanon {duckanon.__version__}" in page and f"DuckDB {duckdb.__version__}" in page


def test_report_numbers_match_the_summary_and_the_tables(report, hospital):
    summary, _, page = report
    stars_in_table = sum(v == "*" for row in hospital.execute("SELECT zipcode, age, education FROM hospital_anon")
                         .fetchall() for v in row)
    assert summary["stars"] == stars_in_table

    shown = table_rows(section(page, "ANONYMIZE summary"))
    assert shown["stars"] == [str(summary["stars"])] and shown["method"] == [summary["method"]]
    assert shown["optimal"] == ["yes" if summary["optimal"] else "no"]
    if summary["optimal"]:
        assert "Proven optimal" in page
    else:
        assert f"stars {summary['stars']} − proven lower bound {summary['lower_bound']}" in page
    assert "class=\"bad\"" not in page  # no mismatch warning

    per_column = table_rows(section(page, "Suppression per column"))
    assert sum(int(per_column[c][0]) for c in QI) == summary["stars"]
    assert all(per_column[c][1] == "0" for c in QI)  # suppression only: nothing generalized

    utility = table_rows(section(page, "Utility"))
    assert utility["stars ('*' cells)"] == [str(summary["stars"])]
    assert utility["rows with a '*'"] == [str(summary["suppressed_rows"])]
    assert utility["classes"] == [str(summary["classes"])]

    checks = table_rows(section(page, "Privacy checks"))
    assert checks["k"] == ["3", "1", str(summary["min_class_size"]), "met"]

    risk = table_rows(section(page, "Re-identification risk"))
    assert risk["highest_risk"] == ["1", f"{1 / summary['min_class_size']:.3g}"]  # risks: 3 significant digits
    assert risk["uniques"] == ["10", "0"]
    assert "Sensitive attribute <code>disease</code> per class" in page


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install -y chromium) for a real headless-browser screenshot")
@pytest.mark.parametrize("width", [700, 1200])
def test_report_renders_in_headless_chromium(report, tmp_path, width):
    _, path, _ = report
    shot = tmp_path / "out.png"
    subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    f"--window-size={width},4500", path.resolve().as_uri()],
                   cwd=tmp_path, check=True, capture_output=True, timeout=180)
    pixels = matplotlib.image.imread(shot)[..., :3]  # floats in [0, 1]
    assert pixels.shape[:2] == (4500, width)  # tall enough for the SA plot
    non_white = (pixels < 0.94).any(axis=-1).mean()
    assert non_white > 0.05, f"only {non_white:.1%} of the page is not white"

    def pixels_near(hex_colour: str) -> int:
        rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
        return int((np.abs(pixels - rgb).max(axis=-1) < 0.06).sum())

    # matplotlib's first three default colours fill the bars of the plots (original, published,
    # and the third SA value): a page of text alone has none of them.
    for colour in ("#1f77b4", "#ff7f0e", "#2ca02c"):
        assert pixels_near(colour) > 2000, f"no plot colour {colour} in the screenshot"


def test_report_sweep_over_three_k_values(hospital, tmp_path):
    sweep = []
    for k in (2, 3, 4):
        summary = anonymize(hospital, k, into="hospital_sweep")
        risk = hospital.duckdb.execute("SELECT highest_risk, average_risk FROM anon_risk('hospital_sweep', ?)",
                                       [QI]).fetchone()
        sweep.append({"k": k, "stars": summary["stars"], "suppressed_rows": summary["suppressed_rows"],
                      "highest_risk": risk[0], "average_risk": risk[1]})
    path = write_report(hospital, "hospital_sweep", "hospital", QI, "disease", tmp_path / "sweep.html",
                        summary=summary, params={"k": 4}, sweep=sweep)
    page = path.read_text(encoding="utf-8")
    part = section(page, "Sweep over k")
    assert part.count("data:image/png;base64,") == 1
    rows = table_rows(part)
    assert set(rows) == {"2", "3", "4"}
    for point in sweep:
        assert rows[str(point["k"])][:2] == [str(point["stars"]), str(point["suppressed_rows"])]
        assert rows[str(point["k"])][2] == f"{point['highest_risk']:.3g}"
    assert [p["stars"] for p in sweep] == sorted(p["stars"] for p in sweep)  # more k, more stars
    assert page.count("data:image/png;base64,") == 6  # with the loss per column (summary.details)


def test_report_without_sensitive_attribute(hospital, tmp_path):
    summary = anonymize(hospital, 2, into="hospital_k2")
    page = write_report(hospital, "hospital_k2", "hospital", QI, None, tmp_path / "no_sa.html",
                        summary=summary).read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 4  # no SA plot
    assert "Sensitive attribute" not in page and "KL divergence is not computed" in page
    # the loss per column is ANONYMIZE's, and for suppression alone it is the column's star share
    loss = table_rows(section(page, "Information loss per column"))
    rows = hospital.duckdb.execute("SELECT count(*) FROM hospital_k2").fetchone()[0]
    for column in QI:
        stars = hospital.duckdb.execute(f"SELECT count(*) FROM hospital_k2 WHERE {column} = '*'").fetchone()[0]
        assert float(loss[column][0]) == pytest.approx(stars / rows, abs=1e-3)
    assert table_rows(section(page, "Utility"))["stars ('*' cells)"] == [str(summary["stars"])]


def test_report_on_empty_tables_with_a_plain_duckdb_connection(tmp_path):
    con = duckdb.connect()  # not registered: write_report installs the macros itself
    con.execute('CREATE TABLE src ("zip code" VARCHAR, age INTEGER, disease VARCHAR)')
    con.execute("CREATE TABLE pub AS SELECT * FROM src")
    page = write_report(con, "pub", "src", ["zip code", "age"], "disease", tmp_path / "empty.html",
                        params={"k": 2}).read_text(encoding="utf-8")
    assert "The published table is empty." in page
    assert table_rows(section(page, "Utility"))["rows"] == ["0"]
