"""DuckDB 2 first, 1.5 still working: files of either storage format open and anonymize, and a
release meant for 1.5 readers opens in the DuckDB 1.5 command-line client (the `duckdb-cli`
package of the test extra)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

import duckanon

from support.data import HOSPITAL
from support.shell import duckdb_15_cli

pytestmark = pytest.mark.e2e

DUCKDB_MAJOR = int(duckdb.__version__.split(".")[0])


def cli_query(path: Path, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run([duckdb_15_cli(), "-readonly", "-csv", str(path), "-c", sql],
                          capture_output=True, text=True, timeout=600)


def test_a_file_of_the_running_duckdb_opens_and_anonymizes(tmp_path):
    """Written by plain DuckDB (version 69 storage on DuckDB 2), then opened by duckanon."""
    path = tmp_path / "native.duckdb"
    with duckdb.connect(str(path)) as plain:
        plain.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    if DUCKDB_MAJOR >= 2:  # it really is a DuckDB 2 file: the 1.5 client refuses it
        refused = cli_query(path, "SELECT 1")
        assert refused.returncode != 0 and "version number 69" in refused.stderr
    with duckanon.connect(str(path)) as con:
        row = con.execute("ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), sensitive = disease)"
                          ).fetchone()
        assert row[0] == 10
        sizes = con.execute("SELECT min(n), sum(n) FROM (SELECT count(*) n FROM hospital_anon "
                            "GROUP BY zipcode, age, education)").fetchone()
        assert sizes[0] >= 3 and sizes[1] == 10


def test_a_release_for_15_readers_opens_in_the_15_cli(tmp_path):
    path = tmp_path / "release.duckdb"
    with duckanon.connect(str(tmp_path / "work.duckdb")) as con:
        con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
        con.execute(f"ATTACH '{path}' AS release (STORAGE_VERSION 'v1.5.0')")
        con.execute("ANONYMIZE hospital INTO release.patients WITH (k = 3, qi = (zipcode, age, education), "
                    "sensitive = disease)")
        con.execute("DETACH release")
    classes = "SELECT sum(c) AS n, min(c) AS smallest FROM (SELECT count(*) AS c FROM patients GROUP BY ALL)"
    out = cli_query(path, classes.replace("GROUP BY ALL", "GROUP BY zipcode, age, education"))
    assert out.returncode == 0, out.stderr
    n, smallest = map(int, out.stdout.strip().splitlines()[-1].split(","))
    assert n == 10 and smallest >= 3
    with duckdb.connect(str(path), read_only=True) as reader:  # the running DuckDB reads the same rows
        assert reader.execute(classes.replace("GROUP BY ALL", "GROUP BY zipcode, age, education")).fetchone() == (n, smallest)
    # the comment with the provenance travels with the file
    comment = cli_query(path, "SELECT comment LIKE 'duckanon {%' FROM duckdb_tables() WHERE table_name = 'patients'")
    assert comment.stdout.strip().splitlines()[-1] == "true"


def test_the_files_left_out_on_duckdb_15_exist():
    """CI's DuckDB 1.5 step leaves out the files of tests/support/tiers.py's SOLVER_RESULTS_E2E: a
    misspelled or renamed one would silently stay in (or a new file of that kind stay out)."""
    from support.tiers import SOLVER_RESULTS_E2E

    tests = Path(__file__).resolve().parents[1]
    assert sorted(name for name in SOLVER_RESULTS_E2E if not (tests / name).is_file()) == []
