"""Features behind an extra are refused before anything runs; a report that cannot be written
fails the statement with nothing published; a committed release is never reported as failed."""

from __future__ import annotations

import sys

import pytest

import duckanon
from duckanon import extras

from support.database import result_row

STATEMENT = "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), sensitive = disease{})"


def tables(con) -> list[str]:
    return [r[0] for r in con.duckdb.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]


@pytest.mark.parametrize("statement", [
    STATEMENT.format(", report = '{path}'"),
    "REPORT hospital_anon FROM hospital WITH (file = '{path}')",
])
def test_report_without_matplotlib_is_refused_before_anything_runs(con, tmp_path, monkeypatch, statement):
    if statement.startswith("REPORT"):
        con.execute(STATEMENT.format(""))
    before = tables(con)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    path = tmp_path / "r.html"
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute(statement.format(path=path))
    assert str(refused.value) == ("the HTML report needs matplotlib, which is not installed: "
                                  "pip install 'duckanon[report]'")
    assert tables(con) == before and not path.exists() and list(tmp_path.iterdir()) == []


def test_spark_without_pyspark_is_refused_before_anything_runs(con, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute(STATEMENT.format(", engine = 'spark'"))
    assert str(refused.value) == "engine = 'spark' needs pyspark, which is not installed: pip install 'duckanon[spark]'"
    assert tables(con) == ["hospital"]


@pytest.mark.parametrize("where,message", [
    ("/dev/full", "cannot write the report /dev/full: No space left on device; nothing was published"),
    ("{tmp}", "cannot write the report {tmp}: it is a directory"),
    ("{tmp}/no/such/dir/r.html", "cannot write the report {tmp}/no/such/dir/r.html: No such file or directory; "
                                 "nothing was published"),
])
def test_a_report_that_cannot_be_written_leaves_the_database_unchanged(con, tmp_path, where, message):
    path = where.format(tmp=tmp_path)
    with pytest.raises(duckanon.AnonymizeError) as failed:
        con.execute(STATEMENT.format(f", report = '{path}'"))
    assert str(failed.value) == message.format(tmp=tmp_path)
    assert tables(con) == ["hospital"]
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left behind


def test_an_empty_report_path_is_an_error(con):
    with pytest.raises(duckanon.AnonymizeError) as failed:
        con.execute(STATEMENT.format(", report = ''"))
    assert str(failed.value).startswith("option report must name a file, e.g. report = 'release_report.html'")
    assert tables(con) == ["hospital"]


def test_ctrl_c_while_rendering_the_report_publishes_nothing(con, tmp_path, monkeypatch):
    import duckanon.statements.report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(duckanon.statements.report, "write_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        con.execute(STATEMENT.format(f", report = '{tmp_path / 'r.html'}'"))
    assert tables(con) == ["hospital"] and list(tmp_path.iterdir()) == []


def test_the_result_row_names_the_target_and_the_report(con, tmp_path):
    path = tmp_path / "r.html"
    summary = result_row(con, STATEMENT.format(f", report = '{path}'"))
    assert summary["target"] == "memory.main.hospital_anon" and summary["report"] == str(path)
    assert path.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]
    assert result_row(con, STATEMENT.format(""))["report"] is None


def test_a_report_that_cannot_be_moved_into_place_after_commit_is_not_a_failure(con, tmp_path, monkeypatch):
    import duckanon.statements.report as engine

    def refuse(*args):
        raise OSError("simulated")

    monkeypatch.setattr(engine.os, "replace", refuse)
    summary = result_row(con, STATEMENT.format(f", report = '{tmp_path / 'r.html'}'"))
    assert "hospital_anon" in tables(con)  # committed
    left = [p for p in tmp_path.iterdir()]
    assert len(left) == 1 and summary["report"] == str(left[0]) and left[0].name.startswith(".r.html.")


def test_default_output_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(extras.OUTPUT_DIR_VARIABLE, raising=False)
    assert str(extras.default_report_path("t")) == "duckanon_output/t_report.html"
    monkeypatch.setenv(extras.OUTPUT_DIR_VARIABLE, str(tmp_path))
    assert extras.default_report_path("t") == tmp_path / "t_report.html"


def test_a_sweep_in_the_report_of_a_view_keeps_the_snapshot_it_reads(con, tmp_path):
    """A view is copied once (the snapshot the report reads); the sweep's dry runs inside the
    statement drop only their own temp tables, never the statement's."""
    con.execute("CREATE VIEW hospital_view AS SELECT * FROM hospital")
    path = tmp_path / "r.html"
    row = result_row(con, "ANONYMIZE hospital_view INTO released WITH (k = (2, 3), qi = (zipcode, age), "
                          f"sensitive = disease, report = '{path}')")
    assert row["report"] == str(path) and path.read_text().startswith("<!DOCTYPE html>")
    assert con.execute("SELECT count(*) FROM released").fetchone()[0] == 10
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0


def test_an_error_after_the_order_setting_is_one_line_and_restores_it(con, tmp_path, monkeypatch):
    """The target cannot be written (DuckDB refuses the CREATE) while preserve_insertion_order is
    switched on for the CREATEs: the user gets DuckDB's reason as one line, and the setting is
    theirs again. (A read-only target database is refused before any work now: the CREATE is made
    to fail here instead.)"""
    import duckdb

    from duckanon.backends import DuckDBBackend

    original = DuckDBBackend.create_target

    def read_only_create(backend, table, select, kind="TABLE"):
        backend._run("CREATE TABLE ro.main.x AS SELECT 1 AS x")  # refused by DuckDB
        return original(backend, table, select, kind)

    duckdb.connect(str(tmp_path / "ro.duckdb")).close()
    con.execute(f"ATTACH '{tmp_path / 'ro.duckdb'}' AS ro (READ_ONLY)")
    monkeypatch.setattr(DuckDBBackend, "create_target", read_only_create)
    con.execute("SET preserve_insertion_order = false")
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute("ANONYMIZE hospital INTO x WITH (k = 3, qi = (zipcode, age), keep = (education))")
    assert str(caught.value) == "ANONYMIZE failed: database ro is read-only"
    assert con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()[0] is False
