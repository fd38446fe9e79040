"""The privacy ledger (pipeline/ledger.py): every private release's (epsilon, delta) recorded
against its source in the release's transaction, the totals before and after in details and
EXPLAIN, `budget = (epsilon_total, delta_total)` refusing before any row is read, sources of other
schemas and attached databases kept apart, rows edited by hand read as data."""

import json
from fractions import Fraction

import pytest

import duckanon
from duckanon.errors import AnonymizeError

PRIVATE = "epsilon = 0.5, delta = 1e-5, qi = (a, b)"
LEDGER = "duckanon_privacy_ledger"


@pytest.fixture
def con():
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 7) AS a, (i % 3) AS b FROM range(3000) r(i)")
    yield con
    con.close()


def _ledger(con, database="memory"):
    return con.execute(f"SELECT source_schema, source_name, epsilon, delta, statement, target_name "
                       f"FROM {database}.main.{LEDGER} ORDER BY spent_at").fetchall()


def _spent(result) -> dict:
    return json.loads(result[-1])["differential_privacy"]["ledger"]


def _state(con):
    """Every table of every database with its rows, and the registry's and the ledger's rows."""
    tables = con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
    return tables, [con.execute(f'SELECT * FROM "{d}"."{s}"."{n}" ORDER BY ALL').fetchall() for d, s, n in tables]


def _refusal(con, statement: str) -> str:
    """The one-line message of a refused statement, the database left as it was."""
    before = _state(con)
    with pytest.raises(AnonymizeError) as raised:
        con.execute(statement)
    assert _state(con) == before
    return str(raised.value)


def test_three_releases_add_up_and_each_shows_before_and_after(con):
    shown = [_spent(con.execute(f"ANONYMIZE t INTO out{i} WITH (epsilon = {e}, delta = {d}, qi = (a, b))").fetchone())
             for i, (e, d) in enumerate([(0.5, 1e-5), (0.25, 1e-5), (1, 2e-6)])]
    assert [s["spent_before"] for s in shown] == [
        {"epsilon": 0.0, "delta": 0.0, "releases": 0}, {"epsilon": 0.5, "delta": 1e-5, "releases": 1},
        {"epsilon": 0.75, "delta": 2e-5, "releases": 2}]
    # exact sums of the doubles spent, then one float (3 x 1e-5 is not 3e-5 in binary)
    assert shown[2]["spent_after"] == {"epsilon": 1.75, "delta": float(2 * Fraction(1e-5) + Fraction(2e-6)),
                                       "releases": 3}
    assert all(s["recorded"] is True and s["source"] == "memory.main.t" for s in shown)
    assert _ledger(con) == [("main", "t", 0.5, 1e-5, "ANONYMIZE", "out0"), ("main", "t", 0.25, 1e-5, "ANONYMIZE", "out1"),
                            ("main", "t", 1.0, 2e-6, "ANONYMIZE", "out2")]
    # the ledger is duckanon's record of the source, not part of the release: off the target's comment
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'out2'").fetchone()[0]
    assert "spent_before" not in comment and "ledger" not in comment


def test_budget_refuses_in_one_line_before_any_row_is_read_and_changes_nothing(con):
    con.execute(f"ANONYMIZE t INTO out0 WITH ({PRIVATE}, budget = (1, 1e-4))")
    con.execute(f"ANONYMIZE t INTO out1 WITH ({PRIVATE}, budget = (1, 1e-4))")
    assert _refusal(con, "ANONYMIZE t INTO out2 WITH (epsilon = 0.125, delta = 1e-5, qi = (a, b), budget = (1, 1e-4))") == (
        "ANONYMIZE refused: budget (1, 0.0001) of memory.main.t would be exceeded: 2 private releases spent "
        "(epsilon 1.0, delta 2e-05), this statement would bring the total to (epsilon 1.125, delta "
        "3.0000000000000004e-05); nothing was read or written")
    # a source whose reading fails: the refusal comes first, so no row was read
    con.execute("CREATE VIEW v AS SELECT a, b FROM t WHERE CASE WHEN a >= 0 THEN error('a row was read') END")
    con.execute(f"INSERT INTO {LEDGER} SELECT 'main', 'v', 2.0, 0.0, 'ANONYMIZE', NULL, 'main', 'x', 'r', "
                "now()::TIMESTAMP, 'by hand', NULL")
    with pytest.raises(AnonymizeError, match="^ANONYMIZE refused: budget \\(2, 0.0001\\) of memory.main.v"):
        con.execute(f"ANONYMIZE v INTO out3 WITH ({PRIVATE}, budget = (2, 1e-4))")
    # without a budget the same statement reads the view, fails, and records nothing
    rows = _ledger(con)
    # (the view's error() text is not shown: an engine's Invalid Input Error may quote a value, row 330)
    with pytest.raises(AnonymizeError, match=r"^ANONYMIZE failed: Invalid Input Error: an input was refused "):
        con.execute(f"ANONYMIZE v INTO out3 WITH ({PRIVATE})")
    assert _ledger(con) == rows


def test_explain_shows_the_totals_and_records_nothing(con):
    con.execute(f"ANONYMIZE t INTO out0 WITH ({PRIVATE})")
    rows = _ledger(con)
    items = dict(con.execute(f"EXPLAIN ANONYMIZE t INTO out1 WITH ({PRIVATE}, budget = (0.75, 1e-4))").fetchall())
    assert items["privacy ledger"] == (
        "spent on memory.main.t before: epsilon 0.5, delta 1e-05 over 1 private releases; after this statement: "
        "epsilon 1.0, delta 2e-05 (sequential composition); budget (0.75, 0.0001): ANONYMIZE would be refused "
        "(budget (0.75, 0.0001) of memory.main.t would be exceeded: 1 private releases spent (epsilon 0.5, delta "
        "1e-05), this statement would bring the total to (epsilon 1.0, delta 2e-05))")
    assert _ledger(con) == rows
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'out1'").fetchone()[0] == 0


def test_refresh_and_each_call_of_the_function_are_spends(con):
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    con.execute("REFRESH out")
    got = con.execute("SELECT anonymize('ANONYMIZE t INTO f' || i || ' WITH (epsilon = 0.25, delta = 1e-6, "
                      "qi = (a, b))') ->> '$.details.differential_privacy.ledger.spent_after.releases' "
                      "FROM range(2) r(i) ORDER BY 1").fetchall()
    assert got == [("3",), ("4",)]
    assert [(row[4], row[2]) for row in _ledger(con)] == [("ANONYMIZE", 0.5), ("REFRESH", 0.5)] + [("ANONYMIZE", 0.25)] * 2


def test_releases_at_the_same_moment_cannot_spend_past_the_budget(con):
    """Three cursors publish from one source at once, with room in the budget for one: every
    release updates the ledger's rows in its transaction, so DuckDB commits one and aborts the
    others (without that, each checked the total before the others' spends and all committed)."""
    import threading

    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    outcomes = []

    def publish(i):
        cursor = con.cursor()
        try:
            cursor.execute(f"ANONYMIZE t INTO out{i} WITH ({PRIVATE}, budget = (1, 0.5))")
            outcomes.append("published")
        except AnonymizeError as error:
            outcomes.append(str(error).split(":")[0])
    threads = [threading.Thread(target=publish, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("published") <= 1
    assert con.execute(f"SELECT sum(epsilon) FROM {LEDGER}").fetchone()[0] <= 1


@pytest.mark.parametrize("into", [LEDGER, '"DUCKANON_PRIVACY_LEDGER"', f"memory.main.{LEDGER}",
                                  f"{LEDGER} WITH (materialize = 'view', k = 2, qi = (a, b))"])
def test_a_release_into_the_ledgers_name_is_refused_and_the_ledger_stands(con, into):
    """The ledger attack's B1: ANONYMIZE ... INTO duckanon_privacy_ledger replaced the ledger with the
    release, and every spend with it; it is duckanon's bookkeeping, like the registry."""
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    statement = f"ANONYMIZE t INTO {into}" if " WITH " in into else f"ANONYMIZE t INTO {into} WITH (k = 2, qi = (a, b))"
    assert _refusal(con, statement) == (f"the target memory.main.{LEDGER} is the name of duckanon's privacy ledger: "
                                        "choose another name with INTO")
    assert [row[5] for row in _ledger(con)] == ["out"]


def test_a_ledger_emptied_by_hand_leaves_a_budget_unchecked(con):
    """The ledger attack's B2: two first spends into an empty ledger both committed past a budget
    (each release updates every row, and there was none to conflict on). duckanon never leaves its
    ledger empty, so an empty one has lost its rows: a budget is refused; without one, the release
    is recorded and the ledger serializes the next ones again."""
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    con.execute(f"DELETE FROM {LEDGER}")
    assert _refusal(con, f"ANONYMIZE t INTO out1 WITH ({PRIVATE}, budget = (5, 1e-3))") == (
        "ANONYMIZE refused: option budget cannot be checked: the total spent on memory.main.t is unknown "
        f"(memory.main.{LEDGER} holds no row, and duckanon never leaves it empty: its rows were deleted by hand, or "
        "the table was made by hand; drop it to start a new ledger); nothing was read or written")
    con.execute(f"ANONYMIZE t INTO out1 WITH ({PRIVATE})")
    con.execute(f"ANONYMIZE t INTO out2 WITH ({PRIVATE}, budget = (5, 1e-3))")
    assert [row[5] for row in _ledger(con)] == ["out1", "out2"]


def test_a_total_that_rounds_to_the_budget_says_it_is_above_it(con):
    """The ledger attack's B6: 0.3 + 0.2 + 0.1 is above 0.6 in the exact sum of the doubles but
    prints as 0.6; the refusal says why rather than refusing a total shown equal to its budget."""
    for i, epsilon in enumerate((0.3, 0.2)):
        con.execute(f"ANONYMIZE t INTO out{i} WITH (epsilon = {epsilon}, delta = 1e-5, qi = (a, b))")
    assert _refusal(con, "ANONYMIZE t INTO out2 WITH (epsilon = 0.1, delta = 1e-5, qi = (a, b), budget = (0.6, 1e-3))") == (
        "ANONYMIZE refused: budget (0.6, 0.001) of memory.main.t would be exceeded: 2 private releases spent "
        "(epsilon 0.5, delta 2e-05), this statement would bring the total to (epsilon 0.6, above 0.6 in the exact "
        "sum of the spends as stored, delta 3.0000000000000004e-05); nothing was read or written")


def test_other_schemas_and_attached_databases_keep_their_own_totals(con, tmp_path):
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    con.execute("CREATE SCHEMA s2")
    con.execute("CREATE TABLE s2.t AS SELECT * FROM t")
    con.execute("CREATE TABLE other.main.t AS SELECT * FROM t")
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    second = _spent(con.execute(f"ANONYMIZE s2.t INTO s2.out WITH ({PRIVATE})").fetchone())
    third = _spent(con.execute(f"ANONYMIZE other.main.t INTO other.main.out WITH ({PRIVATE})").fetchone())
    assert second["spent_before"]["releases"] == third["spent_before"]["releases"] == 0
    assert (second["source"], third["source"]) == ("memory.s2.t", "other.main.t")
    assert [row[:2] for row in _ledger(con)] == [("main", "t"), ("s2", "t")]
    assert [row[:2] for row in _ledger(con, "other")] == [("main", "t")]


def test_a_target_in_another_database_is_not_recorded_and_a_budget_refuses_it(con, tmp_path):
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    shown = _spent(con.execute(f"ANONYMIZE t INTO other.main.out WITH ({PRIVATE})").fetchone())
    assert shown["recorded"].startswith("not recorded: the target is in another database than the source")
    assert _refusal(con, f"ANONYMIZE t INTO other.main.out2 WITH ({PRIVATE}, budget = (3, 1e-3))") == (
        "ANONYMIZE refused: option budget needs the spend recorded in the privacy ledger of memory.main.t: the "
        "target is in another database than the source, and DuckDB commits one database per transaction: publish "
        "into the source's database to record the spend with the release; nothing was read or written")


def test_rows_edited_by_hand_are_read_as_data(con):
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    # a name that would be SQL if pasted, and an epsilon set by hand: both plain values
    con.execute(f"INSERT INTO {LEDGER} VALUES ('main', 't''; DROP TABLE t; --', 9, 0, 'x', NULL, 'main', 'x', 'r', "
                "now()::TIMESTAMP, 'by hand', NULL), ('MAIN', 'T', 1.5, 0, 'x''); DROP TABLE t; --', NULL, 'main', 'x', "
                "'r', now()::TIMESTAMP, 'by hand', NULL)")
    shown = _spent(con.execute(f"ANONYMIZE t INTO out2 WITH ({PRIVATE})").fetchone())
    assert shown["spent_before"] == {"epsilon": 2.0, "delta": 1e-5, "releases": 2}
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 3000
    # a row that is no spend makes the total unknown: a budget cannot be checked
    con.execute(f"UPDATE {LEDGER} SET epsilon = 'nan'::DOUBLE WHERE source_name = 'T'")
    with pytest.raises(AnonymizeError) as raised:  # (not _refusal: a NaN row never equals itself)
        con.execute(f"ANONYMIZE t INTO out3 WITH ({PRIVATE}, budget = (100, 0.5))")
    assert str(raised.value) == (
        "ANONYMIZE refused: option budget cannot be checked: the total spent on memory.main.t is unknown (1 row(s) "
        "of memory.main.duckanon_privacy_ledger for this source hold no spend: epsilon or delta missing, negative, "
        "not finite or above what one statement can spend (epsilon 3, delta below 0.1); mend or delete them); nothing "
        "was read or written")


def test_spends_no_statement_can_make_are_unreadable(con):
    """Two rows edited to epsilon 1e308 (finite, not negative): their exact sum has no float, and
    every private statement on the source died with OverflowError; such a row (above what one
    statement can spend) now makes the total unknown like a NaN row."""
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})")
    con.execute(f"UPDATE {LEDGER} SET epsilon = 1e308")
    with pytest.raises(AnonymizeError) as raised:
        con.execute(f"ANONYMIZE t INTO out3 WITH ({PRIVATE}, budget = (100, 0.5))")
    assert str(raised.value) == (
        "ANONYMIZE refused: option budget cannot be checked: the total spent on memory.main.t is unknown (2 row(s) "
        "of memory.main.duckanon_privacy_ledger for this source hold no spend: epsilon or delta missing, negative, "
        "not finite or above what one statement can spend (epsilon 3, delta below 0.1); mend or delete them); nothing "
        "was read or written")
    con.execute(f"EXPLAIN ANONYMIZE t WITH ({PRIVATE}, budget = (100, 0.5))").fetchall()
    con.execute(f"ANONYMIZE t INTO out4 WITH ({PRIVATE})").fetchall()  # without a budget: published, recorded
    assert con.execute(f"SELECT count(*) FROM {LEDGER}").fetchone()[0] == 3


def test_a_ledger_duckanon_did_not_make_is_left_untouched(con):
    con.execute(f"CREATE TABLE {LEDGER} (note VARCHAR)")
    shown = _spent(con.execute(f"ANONYMIZE t INTO out WITH ({PRIVATE})").fetchone())
    assert shown["recorded"] == ("not recorded: memory.main.duckanon_privacy_ledger is a table duckanon did not "
                                 "make (left untouched)")
    assert con.execute(f"SELECT count(*) FROM {LEDGER}").fetchone()[0] == 0


@pytest.mark.parametrize("options, message", [
    ("epsilon = 1, delta = 1e-5, qi = (a), budget = 3", "option budget must be (epsilon_total, delta_total), e.g. "
     "budget = (3, 1e-5)"),
    ("epsilon = 1, delta = 1e-5, qi = (a), budget = (0, 1e-5)", "option budget needs epsilon_total > 0 and 0 <= "
     "delta_total < 1, got (0, 1e-05)"),
    ("k = 2, qi = (a), budget = (1, 1e-5)", "option budget applies to differential privacy: add epsilon = <budget>"),
])
def test_budget_refusals(con, options, message):
    with pytest.raises(AnonymizeError) as raised:
        con.execute(f"ANONYMIZE t INTO out WITH ({options})")
    assert str(raised.value).split(" (at line")[0] == message


def _ledger_section(page: str) -> str:
    """The text of the report's ledger part, tags dropped (html_table's cells one per line)."""
    import html
    import re
    start = page.index("<h3>Privacy ledger</h3>")
    end = page.index("<h2>", start)
    return html.unescape(re.sub(r"(\s*<[^>]+>\s*)+", " | ", page[start:end]))


def test_the_report_shows_the_ledger_of_the_release(con, tmp_path):
    pytest.importorskip("matplotlib")
    for target in ("p1", "p2"):
        con.execute(f"ANONYMIZE t INTO {target} WITH ({PRIVATE})")
    path = tmp_path / "release.html"
    con.execute(f"ANONYMIZE t INTO p3 WITH (epsilon = 0.125, delta = 1e-5, qi = (a, b), budget = (2, 1e-4), "
                f"report = '{path}')")
    text = _ledger_section(path.read_text())
    assert "| source | memory.main.t |" in text
    assert "| spent before this release | epsilon 1.0, delta 2e-05 over 2 private releases |" in text
    assert ("| spent after this release | epsilon 1.125, delta 3.0000000000000004e-05 over 3 private releases |"
            in text)
    assert "| budget | epsilon 2.0, delta 0.0001 |" in text
    # what is left: the budget minus the total shown, exactly, then one float
    left = float(Fraction(1e-4) - Fraction(3.0000000000000004e-05))
    assert left == 6.999999999999999e-05
    assert f"| left of the budget after this release | epsilon 0.875, delta {left!r} |" in text
    assert "| this release's spend | recorded in the privacy ledger, in the release's transaction |" in text
    assert ("the releases of one source are (the sum of their epsilons, the sum of their deltas)-differentially "
            "private") in text
    assert "A view over the source, a copy of it, another table holding the same people" in text


def test_the_report_says_why_a_spend_was_not_recorded(con, tmp_path):
    pytest.importorskip("matplotlib")
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    path = tmp_path / "release.html"
    con.execute(f"ANONYMIZE t INTO other.main.out WITH ({PRIVATE}, report = '{path}')")
    text = _ledger_section(path.read_text())
    assert "| budget | none given |" in text and "left of the budget" not in text
    assert ("| this release's spend | not recorded: the target is in another database than the source, and DuckDB "
            "commits one database per transaction: publish into the source's database to record the spend with the "
            "release |") in text
    assert "This release's spend is not in the ledger" in text


def test_a_release_without_epsilon_has_no_ledger_section(con, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "plain.html"
    con.execute(f"ANONYMIZE t INTO plain WITH (k = 2, qi = (a, b), report = '{path}')")
    page = path.read_text()
    assert "Privacy ledger" not in page and "<h2>Differential privacy</h2>" not in page
