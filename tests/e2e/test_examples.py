"""Every example runs and does what it says (run as users would, in a subprocess)."""

import subprocess
import sys
from pathlib import Path

import duckdb

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *args, cwd=None) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True, text=True,
                            cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_hospital_example(tmp_path):
    out = run("hospital.py", tmp_path, cwd=tmp_path)
    provenance = next(line for line in out.splitlines() if line.startswith("Provenance: duckanon {"))
    assert '"k": 3' in provenance and '"l": 2' in provenance and "hospital" not in provenance.split("{", 1)[1]
    page = (tmp_path / "hospital_report.html").read_text()
    assert page.count("data:image/png;base64,") == 5  # class sizes, stars, loss, SA mix, risk
    assert "hospital_report.html" in out


def test_adult_with_hierarchies_and_report(tmp_path):
    report = tmp_path / "adult.html"
    out = run("adult_hierarchies.py", report, cwd=tmp_path)
    assert "Loss and risk against k" in out
    html = report.read_text()
    assert html.count("data:image/png;base64,") >= 4  # class sizes, stars, SA mix, risk (+ the sweep)


def test_publish_to_bi(tmp_path):
    out = run("publish_to_bi.py", tmp_path / "release", cwd=tmp_path)
    assert "SQLAlchemy/duckdb-engine: [('Cancer', 4), ('Heart Disease', 3), ('Viral Infection', 3)]" in out
    assert "duckdb CLI: n,zips | 10," in out
    # the release file holds only the anonymized table, readable by plain DuckDB
    con = duckdb.connect(str(tmp_path / "release" / "release.duckdb"), read_only=True)
    assert [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()] == ["patients"]
    columns = [r[0] for r in con.execute("DESCRIBE patients").fetchall()]
    assert columns == ["zipcode", "age", "education", "disease"]
    assert con.execute("SELECT min(n) FROM (SELECT count(*) n FROM patients GROUP BY zipcode, age, education)").fetchone()[0] >= 3
