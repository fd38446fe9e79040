"""REPORT <published> FROM <original> [WITH (...)]: the report as a statement of its own, from
the provenance ANONYMIZE leaves on the published table, from the shell too; and its errors."""

import json

import duckdb
import pytest

import duckanon
from duckanon.cli import main

from support.data import HOSPITAL
from support.report_pages import section, table_rows

LATTICE = ("ANONYMIZE hospital INTO released WITH (k = 3, qi = (zipcode, age, education), sensitive = disease, "
           "method = 'lattice', hierarchies = (zipcode = 'prefix', age = 'intervals(5, 10, 20)'))")


@pytest.fixture
def released(con):
    row = con.execute(LATTICE).fetchone()
    return con, json.loads(row[-1])


def test_report_reads_the_provenance_of_the_release(released, tmp_path):
    con, details = released
    path = tmp_path / "release.html"
    row = con.execute(f"REPORT released FROM hospital WITH (file = '{path}', risk_threshold = 0.25)").fetchone()
    risk = con.duckdb.execute("SELECT highest_risk, average_risk, records_at_risk FROM anon_risk('released', "
                              "['zipcode', 'age', 'education'], threshold := 0.25)").fetchone()
    assert row == (str(path), "released", "hospital", *risk, 0.25)
    page = path.read_text(encoding="utf-8")
    params = table_rows(section(page, "Parameters"))
    assert params["k"] == ["3"] and params["method"] == ["lattice"]
    assert params["qi"] == ["zipcode, age, education"] and params["sensitive"] == ["disease"]
    loss = table_rows(section(page, "Information loss per column"))
    for column, value in details["column_loss"].items():
        assert float(loss[column][0]) == pytest.approx(value, abs=1e-3)
    assert 0 < details["column_loss"]["age"] < 1  # age was generalized, not suppressed
    assert "Records at risk: risk above 0.25 (classes of fewer than 4 rows)" in page
    assert page.count("data:image/png;base64,") == 5  # sizes, stars, loss, SA, risk


def test_report_of_a_table_not_published_by_anonymize(con, tmp_path):
    con.duckdb.execute("CREATE TABLE by_hand AS SELECT '*' AS zipcode, age, disease FROM hospital")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REPORT needs qi = \(\.\.\.\): \"by_hand\" has no duckanon provenance"):
        con.execute("REPORT by_hand FROM hospital")
    path = tmp_path / "by_hand.html"
    row = con.execute(f"REPORT by_hand FROM hospital WITH (qi = (zipcode, age), sensitive = disease, k = 2, "
                      f"file = '{path}')").fetchone()
    assert row[0] == str(path)
    page = path.read_text(encoding="utf-8")
    stars = table_rows(section(page, "Suppression per column"))
    assert stars["zipcode"][0] == "10" and stars["age"][0] == "0"
    assert "Information loss per column" not in page  # no ANONYMIZE summary: loss not measured
    assert table_rows(section(page, "Privacy checks"))["k"][-1] in ("met", "NOT met")


def test_default_file_goes_to_the_output_directory(released, tmp_path, monkeypatch):
    con, _ = released
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DUCKANON_OUTPUT_DIR", raising=False)
    assert con.execute("REPORT released FROM hospital").fetchone()[0] == "duckanon_output/released_report.html"
    assert (tmp_path / "duckanon_output" / "released_report.html").stat().st_size > 10_000
    monkeypatch.setenv("DUCKANON_OUTPUT_DIR", str(tmp_path / "reports"))
    assert con.execute("REPORT released FROM hospital").fetchone()[0] == str(tmp_path / "reports" / "released_report.html")
    assert (tmp_path / "reports" / "released_report.html").stat().st_size > 10_000


@pytest.mark.parametrize("statement,message", [
    ("REPORT released FROM released", "REPORT compares a published table with its original: they must differ"),
    ("REPORT missing FROM hospital", 'unknown table "missing"'),
    ("REPORT released FROM hospital WITH (qi = (nope))", 'column nope is not in "released"'),
    ("REPORT released FROM hospital WITH (risk_threshold = 0)", "option risk_threshold must be in (0, 1], got 0 (at line 1, column 37)"),
    ("REPORT released FROM hospital WITH (method = exact)", "unknown REPORT option 'method'"),
    ("REPORT released", "syntax error at line 1, column 15: expected FROM <original table> after the published table"),
    ("REPORT released FROM hospital extra", "syntax error at line 1, column 35: expected WITH (option = value, ...), got 'extra'"),
    ("REPORT released FROM hospital WITH (file = '/no/such/dir/r.html')", "cannot write the report /no/such/dir/r.html: No such file or directory"),
])
def test_report_errors_are_one_line(released, statement, message):
    con, _ = released
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(statement)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value), str(caught.value)


def test_no_file_is_written_when_file_access_is_disabled(con, tmp_path):
    con.duckdb.execute("SET enable_external_access = false")
    path = tmp_path / "r.html"
    with pytest.raises(duckanon.AnonymizeError, match="file access is disabled"):
        con.execute(f"ANONYMIZE hospital WITH (k = 2, report = '{path}')")
    assert con.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'hospital_anon'").fetchone()[0] == 0
    assert not path.exists()


def test_risk_threshold_needs_a_report(con):
    with pytest.raises(duckanon.AnonymizeError, match="option risk_threshold applies to the report"):
        con.execute("ANONYMIZE hospital WITH (k = 2, risk_threshold = 0.1)")


def test_report_from_the_command_line(tmp_path, capsys):
    database = tmp_path / "h.duckdb"
    with duckdb.connect(str(database)) as raw:
        raw.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    path = tmp_path / "cli.html"
    code = main([str(database), "--csv", "-c", f"ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age)); "
                                              f"REPORT hospital_anon FROM hospital WITH (file = '{path}')"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[2].startswith("report,published,original,highest_risk"), out
    assert f"{path},hospital_anon,hospital," in out and path.stat().st_size > 10_000
