"""The `duckanon` command line: -c, -f, --csv, errors, and the shell fed through stdin."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from duckanon.cli import is_complete, main, split_script

HOSPITAL_CSV = Path(__file__).parents[3] / "shared" / "data" / "hospital.csv"
ANONYMIZE = "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), sensitive = disease)"
SUMMARY_COLUMNS = ["rows", "classes", "min_class_size", "stars", "suppressed_rows", "method", "optimal",
                   "lower_bound", "seconds", "published_rows", "removed_rows", "optimal_for", "target", "report",
                   "dropped", "details"]


def _make_db(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE hospital AS SELECT * FROM read_csv(?, header = true, all_varchar = true)",
                [str(HOSPITAL_CSV)])
    con.close()
    return path


@pytest.fixture
def db(tmp_path) -> Path:
    return _make_db(tmp_path / "hospital.duckdb")


def _cli_command() -> list[str]:
    script = shutil.which("duckanon")
    return [script] if script else [sys.executable, "-m", "duckanon.cli"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """The console script run for real, in parallel (each on its own database file) to stay fast."""
    base = tmp_path_factory.mktemp("cli")
    shell_input = (ANONYMIZE.replace(", sensitive", ",\n  sensitive")  # one statement over three lines
                   + "\n;\nSELECT count(*)\nFROM hospital_anon;\n.quit\nSELECT 'not run';\n")
    specs = {
        "csv": (["--csv", "-c", f"{ANONYMIZE}; SELECT count(*) FROM hospital_anon"], None),
        "bad": (["-c", "ANONYMIZE hospital WITH k=0; SELECT 42 AS later"], None),
        "shell": ([], shell_input),
    }
    env = {**os.environ, "HOME": str(base)}  # history file, if any, stays in the temporary directory
    started = {}
    for name, (args, stdin) in specs.items():
        database = _make_db(base / f"{name}.duckdb")
        started[name] = (subprocess.Popen(
            _cli_command() + [str(database)] + args, env=env, text=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE), stdin)
    results = {}
    for name, (process, stdin) in started.items():
        out, err = process.communicate(stdin, timeout=600)
        results[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return results


def _csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


# ------------------------------------------------------------------------------- splitting


def test_split_script_respects_strings_and_comments():
    text = "SELECT 'a;b' AS x; -- c;omment\nSELECT 2 /* ; */ ;\n\n-- only a comment;\n"
    assert split_script(text) == ["SELECT 'a;b' AS x", "-- c;omment\nSELECT 2 /* ; */"]
    mixed = f"CREATE TABLE t AS SELECT 1; {ANONYMIZE}; SELECT 3"
    assert split_script(mixed) == ["CREATE TABLE t AS SELECT 1", ANONYMIZE, "SELECT 3"]


def test_is_complete():
    assert is_complete("SELECT 1;")
    assert is_complete("SELECT 1; -- trailing comment")
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT 'a;")
    assert not is_complete("SELECT 1 /* ; ")
    assert not is_complete("SELECT 'a;b'")


# ------------------------------------------------------------------------------- in process


def test_command_csv_prints_summary_and_count(db, capsys):
    code = main([str(db), "--csv", "-c", f"{ANONYMIZE}; SELECT count(*) FROM hospital_anon"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    rows = _csv_rows(out)
    assert rows[0] == SUMMARY_COLUMNS
    summary = dict(zip(rows[0], rows[1]))
    assert summary["rows"] == "10"
    assert int(summary["min_class_size"]) >= 3
    assert rows[2] == ["count_star()"]
    assert rows[3] == ["10"]
    assert len(rows) == 4


def test_table_output_has_names_types_and_row_limit(capsys):
    code = main(["--max-rows", "5", "-c", "SELECT range AS n, 'x' AS label FROM range(12); SELECT 1 AS one"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "n" in out and "label" in out
    assert "bigint" in out and "varchar" in out
    assert "12 rows (5 shown)" in out
    assert "│ 11 │" not in out.replace("  ", " ")
    assert "1 row" in out


def test_script_file(db, tmp_path, capsys):
    script = tmp_path / "script.sql"
    script.write_text(
        "-- anonymize, then look\n"
        + ANONYMIZE.replace(", ", ",\n    ") + ";\n"
        "SELECT count(*) AS n\nFROM hospital_anon; -- a comment; with a semicolon\n"
        "SELECT 'semi;colon' AS s;\n"
    )
    code = main([str(db), "--csv", "-f", str(script)])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = _csv_rows(out)
    assert rows[0] == SUMMARY_COLUMNS
    assert rows[2:] == [["n"], ["10"], ["s"], ["semi;colon"]]


def test_error_stops_the_run(db, capsys):
    code = main([str(db), "--csv", "-c", "SELECT 1 AS a; ANONYMIZE hospital WITH k=0; SELECT 2 AS b"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines() == ["a", "1"]  # the statement after the error did not run
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_duckdb_error_is_one_line(db, capsys):
    code = main([str(db), "-c", "SELECT * FROM no_such_table"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.startswith("Error: Catalog Error") and err.count("\n") == 1


def test_missing_script_file(tmp_path, capsys):
    code = main(["-f", str(tmp_path / "missing.sql")])
    _, err = capsys.readouterr()
    assert code == 1 and err.startswith("Error: cannot read")


def test_shell_from_piped_stdin_in_process(db, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        "SELECT count(*)\n  AS n\nFROM hospital\n;\n"
        "SELECT nope;\n"  # an error: the shell goes on
        ".tables\n"
        ".mode csv\n"
        "SELECT 'a;\nb' AS s;\n"
        ".quit\n"
        "SELECT 'not run' AS s;\n"
    ))
    code = main([str(db)])
    out, err = capsys.readouterr()
    assert code == 1  # piped input reports that a statement failed
    assert "10" in out and "1 row" in out
    assert "hospital" in out
    assert 's\n"a;\nb"\n' in out
    assert "not run" not in out
    assert len(err.splitlines()) == 1 and err.startswith("Error: ") and "Traceback" not in err


# ------------------------------------------------------------------------------- real subprocesses


def test_console_script_command_csv(runs):
    result = runs["csv"]
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = _csv_rows(result.stdout)
    assert rows[0] == SUMMARY_COLUMNS
    assert rows[1][0] == "10"
    assert rows[2:] == [["count_star()"], ["10"]]


def test_console_script_bad_statement(runs):
    result = runs["bad"]
    assert result.returncode == 1
    assert result.stdout == ""  # the statement after the error did not run
    assert result.stderr.startswith("Error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_console_script_shell_with_stdin(runs):
    result = runs["shell"]
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for column in SUMMARY_COLUMNS:
        assert column in result.stdout
    assert "count_star()" in result.stdout
    assert "│           10 │" in result.stdout
    assert "not run" not in result.stdout  # .quit stopped the shell
