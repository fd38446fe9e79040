"""EXPLAIN ANONYMIZE, parameter sweeps, the report option, and the shell's progress line."""

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import duckanon

from support.data import SHARED

QI = "qi = (zipcode, age, education), sensitive = disease"


def tables(con):
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def test_explain_writes_nothing_and_describes_the_plan(con):
    before = tables(con)
    rows = dict(con.execute(f"EXPLAIN ANONYMIZE hospital WITH (k = 3, {QI})").fetchall())
    assert tables(con) == before  # no target, no temp tables
    assert rows["rows"] == "10" and rows["classes (distinct QI vectors)"] == "10"
    assert rows["class sizes"] == "1: 10"
    assert rows["classes below the smallest allowed group"].startswith("10 classes, 10 rows")
    # the dry run is the real solve: the same numbers as the ANONYMIZE that follows
    summary = con.execute(f"ANONYMIZE hospital WITH (k = 3, {QI})").fetchone()
    assert rows["method that would run"] == summary[5]
    assert rows["estimated stars"].startswith(f"{summary[3]} of 30 QI cells")
    assert rows["optimum proven within the time limit"] == "yes: proven optimal"
    assert rows["lower bound on stars"] == str(summary[7])


def test_explain_reports_when_no_proof_is_possible():
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';')")
    rows = dict(con.execute("EXPLAIN ANONYMIZE adult WITH (k = 5, qi = (sex, age, race, education, workclass))").fetchall())
    assert rows["optimum proven within the time limit"].startswith("no")


def test_sweep_over_k(con):
    rows = con.execute(f"EXPLAIN ANONYMIZE hospital WITH (k = (2, 3, 5), {QI})").fetchall()
    columns = [d[0] for d in con.description]
    assert columns[:3] == ["k", "stars", "suppressed_rows"]
    assert [r[0] for r in rows] == [2, 3, 5]
    stars = [r[1] for r in rows]
    assert stars == sorted(stars) and stars[1] == 24  # the proven 3-anonymity optimum... of 3 QIs
    by_k = {r[0]: dict(zip(columns, r)) for r in rows}
    assert by_k[3]["highest_risk"] <= 1 / 3 and by_k[5]["min_class_size"] >= 5
    assert "hospital_anon" not in tables(con)


def test_sweep_needs_explain_or_report(con):
    with pytest.raises(duckanon.AnonymizeError, match="use EXPLAIN ANONYMIZE"):
        con.execute(f"ANONYMIZE hospital WITH (k = (2, 3), {QI})")
    with pytest.raises(duckanon.AnonymizeError, match="only one of k, l, t, k_map, average_risk, highest_risk, population_uniqueness, beta_likeness, delta_disclosure can list values"):
        con.execute(f"EXPLAIN ANONYMIZE hospital WITH (k = (2, 3), l = (2, 3), {QI})")


def test_report_option_with_a_sweep(con, tmp_path):
    path = tmp_path / "release.html"
    summary = con.execute(f"ANONYMIZE hospital WITH (k = (2, 3), {QI}, report = '{path}')").fetchone()
    html = path.read_text()
    assert "data:image/png;base64," in html and "http://" not in html
    assert summary[2] >= 2  # the first value (k = 2) is published
    assert con.execute("SELECT count(*) FROM hospital_anon").fetchone()[0] == 10


def _run_in_terminal(script: str, interrupt_after: float | None = None, timeout: float = 900,
                     interrupt_on: bytes = b"Ctrl-C", progress_delay: str = "1"):
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "duckanon.cli", *script], stdin=slave, stdout=slave,
                               stderr=slave, close_fds=True,
                               env={**os.environ, "DUCKANON_PROGRESS_DELAY": progress_delay})
    os.close(slave)
    out, started, sent = b"", time.time(), False
    while process.poll() is None and time.time() - started < timeout:
        if interrupt_after is not None and not sent and interrupt_on in out:
            process.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
            sent = True
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    process.wait(timeout=30)
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                break
            out += os.read(master, 65536)
    except OSError:
        pass
    os.close(master)
    return process.returncode, out.decode(errors="replace")


# Under a second or two: DUCKANON_PROGRESS_DELAY = 0 shows the progress line from the start, so
# every phase is drawn however fast the solver has become (the lattice search alone now takes
# milliseconds)
LONG = ("ANONYMIZE a WITH (k = 5, t = 0.2, sensitive = occupation, method = 'lattice', suppression_limit = 0.05, "
        "hierarchies = '" + str(SHARED / "adult") + "/adult_hierarchy_{column}.csv')")
# The statement that Ctrl-C interrupts reads a view that hashes a long string per row: its
# histogram's GROUP BY takes seconds, so the signal sent when that phase is drawn lands before
# the commit however loaded the machine is (DuckDB 2 stops the query; 1.5 finishes the query and
# Python raises at its return). With the table alone the whole statement took under a second, and
# once a SIGINT delayed by load arrived after it had committed.
SLOW_VIEW = ("CREATE VIEW a AS SELECT * FROM adult_copies WHERE md5(repeat(occupation, 100)) <> ''")


@pytest.mark.parametrize("interrupt", [False, True])
def test_shell_progress_and_ctrl_c(tmp_path, interrupt):
    database = tmp_path / "db.duckdb"
    setup = duckanon.connect(str(database))
    rows = f"SELECT a.* FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';') a, range(40)"
    if interrupt:
        setup.execute(f"CREATE TABLE adult_copies AS {rows}")
        setup.execute(SLOW_VIEW)
    else:
        setup.execute(f"CREATE TABLE a AS {rows}")
    setup.close()
    code, out = _run_in_terminal([str(database), "-c", LONG], interrupt_after=0.0 if interrupt else None,
                                 interrupt_on=b"building the class histogram", progress_delay="0")
    assert "building the class histogram" in out and "Ctrl-C stops" in out  # the phase and elapsed time
    if not interrupt:
        assert "rows 1206480)" in out  # a later phase with its counters (solving or publishing)
    check = duckanon.connect(str(database))
    published = {r[0] for r in check.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if interrupt:
        assert "interrupted (the statement was rolled back)" in out and "Traceback" not in out
        assert published == {"adult_copies"} and code == 1
    else:
        assert code == 0 and "a_anon" in published


def test_explain_with_a_declared_sa_order(con):
    """EXPLAIN uses the dry run's own models (it used to rebuild them without the SA values and
    failed with a TypeError for sa_order)."""
    statement = ("ANONYMIZE hospital WITH (t = 0.3, sensitive = disease, qi = (zipcode, age), t_distance = ordered, "
                 "sa_order = ('Viral Infection', 'Heart Disease', 'Cancer'))")
    rows = dict(con.execute("EXPLAIN " + statement).fetchall())
    summary = con.execute(statement).fetchone()
    assert rows["estimated stars"].startswith(f"{summary[3]} of 20 QI cells")


def test_exact_reports_its_phases_and_bounds(con):
    """Progress from the exact solver: its phases, the incumbent's stars as the upper bound
    before HiGHS, and after it the bounds the result carries."""
    seen = []
    summary = con.execute(f"ANONYMIZE hospital WITH (k = 3, {QI}, method = 'exact')",
                          progress=lambda phase, info: seen.append((phase, dict(info)))).fetchone()
    phases = [phase for phase, _ in seen]
    assert phases.index("exact: kernel and model") < phases.index("exact: MILP (HiGHS)") < phases.index("exact: MILP done")
    before = dict(seen)["exact: MILP (HiGHS)"]
    after = dict(seen)["exact: MILP done"]
    stars, lower = summary[3], summary[7]
    assert before["upper"] >= stars  # the incumbent heuristic's stars bound the optimum from above
    assert after == {"upper": stars, "lower": lower, "proven": True} and lower == stars


def test_shell_progress_line_ticks_while_a_step_reports_nothing():
    """The status line's elapsed time moves while the solver is silent (inside HiGHS, say)."""
    import io

    from rich.console import Console

    from duckanon import progress

    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with progress.ShellProgress(console, delay=0.0) as shown:
        shown("exact: MILP (HiGHS)", {"upper": 7})
        time.sleep(0.1)
        first = shown._text()
        updates = []
        original = shown.status.update
        shown.status.update = lambda text: (updates.append(text), original(text))
        # at least two ticks, however long a loaded machine takes to schedule the ticker (the
        # bound is a hang guard, not a claim about speed)
        end = time.monotonic() + 300
        while len(updates) < 2 and time.monotonic() < end:
            time.sleep(progress.ShellProgress.TICK)
    assert "exact: MILP (HiGHS) (upper 7)" in first and "Ctrl-C stops" in first
    elapsed = [float(text.split("  ")[1].split(" s")[0]) for text in updates]
    assert len(elapsed) >= 2 and elapsed == sorted(elapsed) and elapsed[-1] > elapsed[0]
