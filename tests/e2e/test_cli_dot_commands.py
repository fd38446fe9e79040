"""The shell's DuckDB-CLI dot commands: .mode (table/csv/line/json/markdown), .schema, .timer,
.read, .output/.once, .help, and dot commands inside -c text, -f scripts and piped input.

The line, json and markdown texts below are what the DuckDB 1.5 CLI prints for the same table."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import duckdb
import pytest

from duckanon.cli import main

SMALL = ("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a', NULL::INTEGER, 1.50::DECIMAL(3,2), true), "
         "(22, 'b c', 3, 2.25, false)) v(x, yy, z, dec, b)")
RUN_TIME = re.compile(r"Run Time \(s\): real \d+\.\d{3} user \d+\.\d{6} sys \d+\.\d{6}")

MODE_TEXT = {
    "table": (
        "╭─────────┬─────────┬─────────┬──────────────┬─────────╮\n"
        "│       x │ yy      │       z │          dec │ b       │\n"
        "│ integer │ varchar │ integer │ decimal(3,2) │ boolean │\n"
        "├─────────┼─────────┼─────────┼──────────────┼─────────┤\n"
        "│       1 │ a       │    NULL │         1.50 │ true    │\n"
        "│      22 │ b c     │       3 │         2.25 │ false   │\n"
        "╰─────────┴─────────┴─────────┴──────────────┴─────────╯\n"
        "2 rows\n"),
    "csv": (
        "x,yy,z,dec,b\n"
        "1,a,,1.50,true\n"
        "22,b c,3,2.25,false\n"),
    "line": (
        "    x = 1\n"
        "   yy = a\n"
        "    z = NULL\n"
        "  dec = 1.50\n"
        "    b = true\n"
        "\n"
        "    x = 22\n"
        "   yy = b c\n"
        "    z = 3\n"
        "  dec = 2.25\n"
        "    b = false\n"),
    "json": (
        '[{"x":1,"yy":"a","z":null,"dec":"1.50","b":true},\n'
        '{"x":22,"yy":"b c","z":3,"dec":"2.25","b":false}]\n'),
    "markdown": (
        "| x  | yy  |  z   | dec  |   b   |\n"
        "|---:|-----|-----:|-----:|-------|\n"
        "| 1  | a   | NULL | 1.50 | true  |\n"
        "| 22 | b c | 3    | 2.25 | false |\n"),
}
EMPTY_TEXT = {"csv": "x\n", "line": "", "json": "[]\n", "markdown": "| x |\n|--:|\n"}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "small.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(SMALL)
        con.execute("CREATE VIEW v AS SELECT x FROM t")
        con.execute("CREATE INDEX t_x ON t(x)")
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------- .mode


@pytest.mark.parametrize("mode", sorted(MODE_TEXT))
def test_mode_prints_exact_text(db, capsys, monkeypatch, mode):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    code, out, err = run(capsys, db, "-c", f".mode {mode}", "-c", "FROM t ORDER BY x")
    assert (code, err) == (0, "")
    assert out == MODE_TEXT[mode]


@pytest.mark.parametrize("mode", sorted(EMPTY_TEXT))
def test_mode_with_no_rows(db, capsys, mode):
    code, out, err = run(capsys, db, "-c", f".mode {mode}", "-c", "SELECT x FROM t WHERE false")
    assert (code, err) == (0, "")
    assert out == EMPTY_TEXT[mode]


def test_json_and_markdown_values(capsys):
    code, out, err = run(capsys, "-c", ".mode json", "-c",
                         "SELECT [1, 2] AS l, {'a': 'q\"'} AS s, 'x\ny' AS nl, 12::HUGEINT AS h, 0.5::DOUBLE AS d, "
                         "DATE '2024-02-29' AS day", "-c", ".mode markdown", "-c", "SELECT 'a|b' AS p, 7 AS n")
    assert (code, err) == (0, "")
    assert out == ('[{"l":[1,2],"s":{"a":"q\\""},"nl":"x\\ny","h":"12","d":0.5,"day":"2024-02-29"}]\n'
                   "|  p   | n |\n"
                   "|------|--:|\n"
                   "| a\\|b | 7 |\n")


def test_mode_without_argument_shows_the_current_one(capsys):
    code, out, err = run(capsys, "--csv", "-c", ".mode")
    assert (code, out, err) == (0, "current output mode: csv\n", "")


def test_unknown_mode_is_one_line_and_stops_the_run(capsys):
    code, out, err = run(capsys, "-c", ".mode bogus", "-c", "SELECT 'not run'")
    assert code == 1
    assert out == ""
    assert err == "Error: unknown mode bogus: use one of table, csv, line, json, markdown\n"


# ------------------------------------------------------------------------------ other commands


def test_unknown_command_and_bad_usage(capsys):
    code, out, err = run(capsys, "-c", ".bogus", "-c", "SELECT 'not run'")
    assert (code, out, err) == (1, "", "Error: unknown command .bogus (try .help)\n")
    code, out, err = run(capsys, "-c", ".timer maybe")
    assert (code, out, err) == (1, "", "Error: usage: .timer on|off\n")
    code, out, err = run(capsys, "-c", ".read")
    assert (code, out, err) == (1, "", "Error: usage: .read FILE\n")


def test_help_lists_every_command(capsys):
    code, out, err = run(capsys, "-c", ".help")
    assert (code, err) == (0, "")
    listed = set(re.findall(r"^  (\.[a-z]+)", out, re.MULTILINE))
    assert listed == {".help", ".tables", ".schema", ".mode", ".output", ".once", ".read", ".timer", ".quit"}
    assert "table|csv" not in out and "table, csv, line, json or markdown" in out


def test_schema_prints_create_statements(db, capsys):
    code, out, err = run(capsys, db, "-c", ".schema", "-c", ".schema v%", "-c", ".schema nothing%")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "CREATE INDEX t_x ON t(x);",
        'CREATE TABLE t(x INTEGER, yy VARCHAR, z INTEGER, "dec" DECIMAL(3,2), b BOOLEAN);',
        "CREATE VIEW v AS SELECT x FROM t;",
        "CREATE VIEW v AS SELECT x FROM t;",  # .schema v%; nothing matches nothing%
    ]


def test_timer_prints_run_time_after_each_statement(capsys):
    code, out, err = run(capsys, "--csv", "-c", ".timer on", "-c", "SELECT 1 AS one; SELECT 2 AS two",
                         "-c", ".timer off", "-c", "SELECT 3 AS three")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["one", "1"] and lines[3:5] == ["two", "2"] and lines[6:] == ["three", "3"]
    assert RUN_TIME.fullmatch(lines[2]) and RUN_TIME.fullmatch(lines[5])


# ------------------------------------------------------------------------------------- .read


def test_read_runs_a_file_with_anonymize(tmp_path, capsys):
    script = tmp_path / "anon.sql"
    script.write_text(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1,'a'),(1,'a'),(2,'b'),(2,'b')) v(x,y);\n"
        "ANONYMIZE t WITH (k = 2, qi = (x, y));\n"
        ".mode line\n"
        "SELECT count(*) AS n FROM t_anon;\n")
    code, out, err = run(capsys, "--csv", "-c", f".read {script}", "-c", "SELECT 'after' AS s")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["Count", "4"]  # the CREATE TABLE, still in csv mode
    summary = dict(zip(lines[2].split(","), lines[3].split(",")))
    assert summary["rows"] == "4" and summary["min_class_size"] == "2"
    assert lines[4:] == ["    n = 4", "    s = after"]  # the file's .mode line outlives it


def test_read_errors_and_quit(tmp_path, capsys):
    missing = tmp_path / "missing.sql"
    code, out, err = run(capsys, "-c", "SELECT 1 AS a", "-c", f".read {missing}", "-c", "SELECT 2 AS b")
    assert code == 1
    assert "│ 2 │" not in out
    assert err == f'Error: cannot open "{missing}": No such file or directory\n'

    quits = tmp_path / "quits.sql"
    quits.write_text("SELECT 1 AS a;\n.quit\nSELECT 2 AS b;\n")
    code, out, err = run(capsys, "--csv", "-c", f".read '{quits}'", "-c", "SELECT 3 AS c")
    assert (code, err) == (0, "")
    assert out == "a\n1\nc\n3\n"  # .quit ends only the file, as in the DuckDB CLI

    loop = tmp_path / "loop.sql"
    loop.write_text(f".read {loop}\n")
    code, out, err = run(capsys, "-c", f".read {loop}")
    assert code == 1 and out == ""
    assert err.startswith("Error: .read nested more than 25 deep") and err.count("\n") == 1


def test_failing_statement_inside_read_stops_the_run(tmp_path, capsys):
    script = tmp_path / "bad.sql"
    script.write_text("SELECT 1 AS a;\nSELECT nope;\nSELECT 2 AS b;\n")
    code, out, err = run(capsys, "--csv", "-c", f".read {script}", "-c", "SELECT 3 AS c")
    assert code == 1
    assert out == "a\n1\n"
    assert err.startswith("Error: Binder Error") and err.count("\n") == 1 and "Traceback" not in err


# ----------------------------------------------------------------------------- .output, .once


def test_output_sends_results_to_a_truncated_file(tmp_path, capsys):
    target = tmp_path / "out.csv"
    target.write_text("old content that must go\n" * 10)
    code, out, err = run(capsys, "--csv", "-c", f".output {target}", "-c", "SELECT 42 AS answer", "-c", ".tables",
                         "-c", ".output", "-c", "SELECT 7 AS seven")
    assert (code, err) == (0, "")
    assert target.read_text() == "answer\n42\nname,kind\n"
    assert out == "seven\n7\n"


def test_output_only_to_file_leaves_stdout_empty(tmp_path, capsys):
    target = tmp_path / "out.json"
    code, out, err = run(capsys, "-c", f".output {target}\n.mode json\nSELECT 1 AS a;\nSELECT 2 AS b;")
    assert (code, out, err) == (0, "", "")
    assert target.read_text() == '[{"a":1}]\n[{"b":2}]\n'


def test_once_redirects_the_next_command_only(tmp_path, capsys):
    once, script = tmp_path / "once.csv", tmp_path / "two.sql"
    script.write_text("SELECT 2 AS b;\nSELECT 3 AS c;\n")
    code, out, err = run(capsys, "--csv", "-c", f".once {once}", "-c", "SELECT 1 AS a", "-c", "SELECT 9 AS z")
    assert (code, err) == (0, "")
    assert once.read_text() == "a\n1\n" and out == "z\n9\n"
    code, out, err = run(capsys, "--csv", "-c", f".once {once}", "-c", f".read {script}", "-c", "SELECT 9 AS z")
    assert once.read_text() == "b\n2\nc\n3\n" and out == "z\n9\n"  # all of the .read file


def test_output_to_an_unopenable_file(tmp_path, capsys):
    target = tmp_path / "no_such_dir" / "out.txt"
    code, out, err = run(capsys, "-c", f".output {target}", "-c", "SELECT 1")
    assert (code, out) == (1, "")
    assert err == f'Error: cannot open "{target}": No such file or directory\n'


# ------------------------------------------------------------------- dot commands inside input


def test_dot_commands_inside_a_script_file(tmp_path, capsys):
    script = tmp_path / "script.sql"
    script.write_text(
        "-- settings come first\n"
        ".mode json\n"
        "SELECT 1 AS a;\n"
        "\n"
        "  .mode csv\n"
        "SELECT 'x;y' AS s,\n"
        "       'line one\n"
        ".mode markdown' AS not_a_command;\n"  # inside a statement: SQL, not a command
        ".mode markdown\n"
        "SELECT 3 AS m\n")  # the last statement may lack its ';'
    code, out, err = run(capsys, "-f", str(script))
    assert (code, err) == (0, "")
    assert out == ('[{"a":1}]\n'
                   's,not_a_command\n'
                   'x;y,"line one\n.mode markdown"\n'
                   "| m |\n|--:|\n| 3 |\n")


def test_dot_commands_in_piped_shell_input(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        ".mode json\nSELECT 1 AS a;\n.mode nope\n.timer on\nSELECT 2 AS b;\n.timer off\n.quit\nSELECT 3;\n"))
    code, out, err = run(capsys)
    assert code == 1  # piped input reports the failed command, and goes on after it
    lines = out.splitlines()
    assert lines[0] == '[{"a":1}]' and lines[1] == '[{"b":2}]' and RUN_TIME.fullmatch(lines[2])
    assert len(lines) == 3
    assert err == "Error: unknown mode nope: use one of table, csv, line, json, markdown\n"


def test_several_c_options_in_a_real_process():
    result = subprocess.run([sys.executable, "-m", "duckanon.cli", "-c", ".mode csv", "-c", "SELECT 1 AS one",
                             "-c", ".mode line", "-c", "SELECT 2 AS two"],
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "one\n1\n  two = 2\n"
