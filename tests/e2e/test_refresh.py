"""Publications that stay current (issue 21): the registry, staleness, REFRESH (fresh and
stable), atomicity (kill -9 during REFRESH leaves the old release) and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

import duckanon

from support.checks import check_table
from support.data import SHARED
from support.refusals import assert_refused_and_unchanged

ADULT = SHARED / "adult"
HIERARCHIES = f"'{ADULT}/adult_hierarchy_{{column}}.csv'"
QI = ["sex", "age", "race", "education"]
PUBLISH = (f"ANONYMIZE src INTO pub WITH (k = 5, qi = (sex, age, race, education), method = 'lattice', "
           f"hierarchies = {HIERARCHIES}, suppression_limit = 0.05, metric = 'loss')")
SETUP = [f"CREATE TABLE adult AS SELECT row_number() OVER () AS rid, * FROM read_csv('{ADULT / 'adult.csv'}', "
         "delim=';', all_varchar=true)",
         "CREATE TABLE src AS SELECT * FROM adult WHERE rid % 10 < 5"]


@pytest.fixture
def db():
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    yield con
    con.close()


def listing(con) -> dict:
    cursor = con.execute("SELECT * FROM duckanon_publications()")
    names = [d[0] for d in cursor.description]
    return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


def refresh(con, statement: str) -> list[dict]:
    cursor = con.execute(statement)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def rows(con, table: str) -> int:
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_publish_append_stale_refresh(db):
    db.execute(PUBLISH)
    first = rows(db, "src")
    entry = listing(db)['"memory"."main"."pub"']
    assert (entry["status"], entry["stale"], entry["source_rows"]) == ("current", False, first)
    assert entry["statement"] == PUBLISH and entry["source"] == '"memory"."main"."src"'
    assert json.loads(entry["parameters"])["k"] == 5 and entry["duckanon_version"] == duckanon.__version__
    assert "src" not in db.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'pub'").fetchone()[0]
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")  # 10% more rows
    now = rows(db, "src")
    entry = listing(db)['"memory"."main"."pub"']
    assert (entry["status"], entry["stale"], entry["current_rows"]) == ("stale", True, now)
    [row] = refresh(db, "REFRESH pub")
    assert (row["mode_used"], row["source_rows_before"], row["source_rows_after"]) == ("fresh", first, now)
    assert row["published_rows_after"] == db.execute("SELECT count(*) FROM pub").fetchone()[0]
    assert check_table(db, "pub", "src", QI, k=5) == []
    entry = listing(db)['"memory"."main"."pub"']
    assert (entry["status"], entry["source_rows"]) == ("current", now)
    assert refresh(db, "REFRESH ALL") == []  # nothing stale


def test_a_registry_dropped_between_listing_and_reading_does_not_fail_a_committed_release(db, monkeypatch):
    """Another cursor's release that created a registry and then failed drops it again while it is
    empty (registry.unprepare); the listing made after our commit may have seen it a moment before."""
    from duckanon.pipeline import registry

    db.execute("ATTACH ':memory:' AS other")
    columns = ", ".join(f'"{name}" {kind}' for name, kind in registry.PREVIOUS_COLUMNS.items())
    db.execute(f"CREATE TABLE other.main.{registry.REGISTRY} ({columns})")  # listed: a registry duckanon reads
    listed = registry.registries

    def listed_then_dropped(backend):
        tables = listed(backend)
        assert ("other", "previous") in tables
        db.duckdb.execute(f"DROP TABLE IF EXISTS other.main.{registry.REGISTRY}")  # not through duckanon
        return tables

    monkeypatch.setattr(registry, "registries", listed_then_dropped)
    db.execute(PUBLISH)  # commits, and the listing made after it skips the dropped registry
    assert db.fetchall() and check_table(db, "pub", "src", QI, k=5) == []
    monkeypatch.undo()
    assert list(listing(db)) == ['"memory"."main"."pub"']


def test_a_change_to_a_column_the_release_reads_makes_it_stale_and_others_do_not(db):
    db.execute(PUBLISH)
    db.execute("UPDATE src SET occupation = 'x' WHERE rid = 2")  # not read by the statement
    assert listing(db)['"memory"."main"."pub"']["status"] == "current"
    db.execute("UPDATE src SET age = '99' WHERE rid = 2")
    assert listing(db)['"memory"."main"."pub"']["status"] == "stale"


def test_refresh_all_refreshes_every_stale_publication_in_one_transaction(db):
    db.execute(PUBLISH)
    db.execute("CREATE TABLE other AS SELECT * FROM adult WHERE rid % 10 >= 5")
    db.execute(PUBLISH.replace("ANONYMIZE src INTO pub", "ANONYMIZE other INTO pub2"))
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")
    db.execute("INSERT INTO other SELECT * FROM adult WHERE rid % 10 = 1")
    rows = refresh(db, "REFRESH ALL")
    assert sorted(r["target"] for r in rows) == ['"memory"."main"."pub"', '"memory"."main"."pub2"']
    assert {e["status"] for e in listing(db).values()} == {"current"}
    # an error in one refresh leaves both as they were: the second's source falls below k rows
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 6")
    db.execute("DELETE FROM other WHERE rid > 6")  # 3 rows left
    before = sorted(db.execute("SELECT * FROM pub").fetchall()), sorted(db.execute("SELECT * FROM pub2").fetchall())
    with pytest.raises(duckanon.AnonymizeError, match="k = 5 is greater than the number of rows"):
        db.execute("REFRESH ALL")
    after = sorted(db.execute("SELECT * FROM pub").fetchall()), sorted(db.execute("SELECT * FROM pub2").fetchall())
    assert after == before
    assert {e["status"] for e in listing(db).values()} == {"stale"}


def test_stable_refresh_keeps_the_labels_of_the_rows_already_published(db):
    db.execute(PUBLISH.replace("suppression_limit = 0.05", "suppression_limit = 0.05, keep = (rid)"))
    levels = json.loads(db.execute("SELECT transformation FROM duckanon_publications").fetchone()[0])["levels"]
    first = {r[0]: r[1:] for r in db.execute("SELECT rid, sex, age, race, education FROM pub").fetchall()}
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")
    [row] = refresh(db, "REFRESH pub WITH (mode = 'stable')")
    assert row["mode_used"] == "stable: the published levels still satisfy the request"
    assert json.loads(db.execute("SELECT transformation FROM duckanon_publications").fetchone()[0])["levels"] == levels
    again = {r[0]: r[1:] for r in db.execute("SELECT rid, sex, age, race, education FROM pub").fetchall()}
    assert all(again[rid] == labels for rid, labels in first.items() if rid in again)
    assert check_table(db, "pub", "src", QI, k=5) == []


def test_stable_refresh_re_solves_when_the_levels_no_longer_hold(db):
    db.execute(PUBLISH.replace("k = 5", "k = 2").replace("suppression_limit = 0.05", "suppression_limit = 0"))
    db.execute("DELETE FROM src WHERE rid % 3 = 0")  # fewer rows: some classes fall below k at those levels
    levels = json.loads(db.execute("SELECT transformation FROM duckanon_publications").fetchone()[0])["levels"]
    [row] = refresh(db, "REFRESH pub WITH (mode = 'stable')")
    moved = json.loads(db.execute("SELECT transformation FROM duckanon_publications").fetchone()[0])["levels"]
    if moved == levels:
        assert row["mode_used"].startswith("stable")
    else:
        assert row["mode_used"] == "fresh: the published levels no longer satisfy the request within the suppression limit"
    assert check_table(db, "pub", "src", QI, k=2) == []


def test_stable_mode_on_a_release_without_levels_says_it_re_solved(db):
    db.execute("ANONYMIZE src INTO pub WITH (k = 5, qi = (sex, age, race, education), method = 'greedy')")
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")
    [row] = refresh(db, "REFRESH pub WITH (mode = 'stable')")
    assert row["mode_used"] == ("fresh: stable recoding keeps a full-domain generalization's levels, and this release "
                                "was made by greedy (its groups are re-solved)")


@pytest.mark.parametrize("statement, message", [
    ("REFRESH src", r"^REFRESH src: it was not published by ANONYMIZE \(no entry in duckanon_publications; publish it "
                    r"first\)$"),
    ("REFRESH pub WITH (mode = 'later')", r"^unknown REFRESH mode 'later' \(known: fresh, stable\) \(at line 1, column 19\)$"),
    ("REFRESH pub WITH (k = 3)", r"^unknown REFRESH option 'k' \(known: mode\) \(at line 1, column 19\)$"),
])
def test_bad_refresh_statements(db, statement, message):
    db.execute(PUBLISH)
    assert_refused_and_unchanged(db, statement, message)


def test_refresh_after_the_source_was_dropped_or_lost_a_column(db):
    db.execute(PUBLISH)
    db.execute("ALTER TABLE src DROP COLUMN race")
    assert listing(db)['"memory"."main"."pub"']["status"] == "source lost column race"
    assert_refused_and_unchanged(db, "REFRESH pub", r'^REFRESH pub: its source "memory"\."main"\."src" lost column '
                                                    r"race; nothing was changed$")
    db.execute("DROP TABLE src")
    assert listing(db)['"memory"."main"."pub"']["status"] == "source missing"
    assert_refused_and_unchanged(db, "REFRESH pub", r'^REFRESH pub: its source "memory"\."main"\."src" no longer '
                                                    r"exists; nothing was changed$")
    assert refresh(db, "REFRESH ALL") == []


KILLED = textwrap.dedent("""
    import os, sys, time
    import duckanon
    con = duckanon.connect(sys.argv[1])
    def listen(phase, info):
        if phase.startswith("publishing"):
            print("publishing", flush=True)
            time.sleep(60)  # killed here, inside REFRESH's transaction
    con.execute("REFRESH pub", progress=listen)
""")


def test_kill_during_refresh_leaves_the_old_release(tmp_path):
    path = tmp_path / "db.duckdb"
    con = duckanon.connect(str(path))
    for statement in SETUP:
        con.execute(statement)
    con.execute(PUBLISH)
    first = rows(con, "src")
    old = Counter(con.execute("SELECT * FROM pub").fetchall())
    con.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")
    con.execute("CHECKPOINT")
    con.close()
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ})
    try:
        assert child.stdout.readline().strip() == "publishing"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    con = duckanon.connect(str(path))
    assert Counter(con.execute("SELECT * FROM pub").fetchall()) == old
    [entry] = listing(con).values()
    assert entry["status"] == "stale"  # the old entry, against the appended source
    assert con.execute("SELECT source_rows FROM duckanon_publications").fetchone() == (first,)
    con.close()


def test_the_report_of_a_refresh_says_what_changed(db, tmp_path):
    from support.report_pages import table_rows

    report = tmp_path / "pub.html"
    db.execute(PUBLISH.replace("metric = 'loss'", f"metric = 'loss', report = '{report}'"))
    first = json.loads(db.execute("SELECT summary FROM duckanon_publications").fetchone()[0])
    db.execute("INSERT INTO src SELECT * FROM adult WHERE rid % 10 = 5")
    [row] = refresh(db, "REFRESH pub")
    page = report.read_text()
    assert "Changes since the previous release" in page
    start = page.index("<h2>Changes since the previous release")
    changes = table_rows(page[start:page.index("<h2>", start + 4)])
    assert changes["source rows"] == [f"{first['rows']:,}", f"{rows(db, 'src'):,}"]  # counts: 15,082
    assert changes["classes"] == [f"{row['classes_before']:,}", f"{row['classes_after']:,}"]
    assert changes["stars"] == [f"{row['stars_before']:,}", f"{row['stars_after']:,}"]


FINGERPRINTED = {
    # (columns, statement options): every path the histogram's GROUP BY fingerprints the source on
    "integers and plain strings, per cell": ("a INTEGER, b VARCHAR, s VARCHAR", "qi = (a, b), sensitive = s"),
    "a kept column, per row": ("a INTEGER, b VARCHAR, s VARCHAR", "qi = (a), sensitive = s, keep = b"),
    "a NOCASE column, per row": ("a INTEGER, b VARCHAR COLLATE NOCASE, s VARCHAR", "qi = (a, b), sensitive = s"),
    "a DOUBLE sensitive column, per row": ("a INTEGER, b VARCHAR, s DOUBLE", "qi = (a, b), sensitive = s"),
    "a masked identifier (a copy is read: scanned)": ("a INTEGER, b VARCHAR, s VARCHAR",
                                                      "qi = (a), sensitive = s, identifiers = (b), mask = (b = 'pseudonym')"),
}


@pytest.mark.parametrize("case", FINGERPRINTED)
def test_the_recorded_fingerprint_is_the_sources(case, monkeypatch):
    """The registry's (rows, checksum), computed by the histogram's GROUP BY, equal
    fingerprint_sql's scan of the source, whichever way the cells computed it (per cell: no column
    hashed per row); the entry is then current, and stale after one value changes."""
    from duckanon.pipeline import histogram, registry

    scans, ways = [], set()
    real_way = histogram._fingerprint
    monkeypatch.setattr(histogram, "_fingerprint", lambda *args: (lambda found: ways.add(
        "none" if not found[0] else "per row" if "HASH(" in found[0][0].sql("duckdb").upper() else "per cell")
        or found)(real_way(*args)))
    real_fingerprint = registry.fingerprint
    monkeypatch.setattr(registry, "fingerprint", lambda *args: scans.append(1) or real_fingerprint(*args))
    columns, options = FINGERPRINTED[case]
    con = duckanon.connect()
    con.execute(f"CREATE TABLE t ({columns})")
    con.execute("INSERT INTO t SELECT i % 7, CASE WHEN i % 3 = 0 THEN 'x' WHEN i % 3 = 1 THEN 'X' ELSE 'y' END, "
                "CASE WHEN i % 2 = 0 THEN '1.5' ELSE '-0.0' END FROM range(300) r(i)")
    monkeypatch.setenv("DUCKANON_TEST_MASK_KEY", "a-test-key-of-32-characters-0123")
    con.execute(f"ANONYMIZE t INTO pub WITH (k = 5, {options}, mask_key = 'env:DUCKANON_TEST_MASK_KEY')"
                if "mask" in options else f"ANONYMIZE t INTO pub WITH (k = 5, {options})")
    recorded = con.execute("SELECT source_rows, source_checksum, source_columns FROM duckanon_publications").fetchone()
    scanned = con.execute(registry.fingerprint_sql('"memory"."main"."t"', recorded[2])).fetchone()
    assert (recorded[0], int(recorded[1])) == (scanned[0], int(scanned[1])) and recorded[0] == 300
    assert len(scans) == ("scanned" in case)
    assert ways == {"none" if "scanned" in case else "per cell" if "per cell" in case else "per row"}
    assert listing(con)['"memory"."main"."pub"']["status"] == "current"
    con.execute("UPDATE t SET b = 'z' WHERE rowid = 17")
    assert listing(con)['"memory"."main"."pub"']["status"] == "stale"
    con.close()


def test_the_fingerprint_tells_rows_apart_not_their_order():
    """Equal for the same rows in another order; different when two rows swap a value, when a row's
    two columns swap values, or when a row is replaced by another row of the same sums."""
    from duckanon.pipeline import registry

    con = duckanon.connect()
    tables = {
        "base": "(1, 'x'), (2, 'y'), (3, 'z')",
        "reordered": "(3, 'z'), (1, 'x'), (2, 'y')",
        "swapped between rows": "(1, 'y'), (2, 'x'), (3, 'z')",
        "duplicated": "(1, 'x'), (1, 'x'), (3, 'z')",
    }
    found = {}
    for name, values in tables.items():
        con.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES {values}) v(a, b)")
        found[name] = con.execute(registry.fingerprint_sql("t", ["a", "b"])).fetchone()
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES ('1', '2'), ('3', '3')) v(a, b)")
    within = con.execute(registry.fingerprint_sql("t", ["a", "b"])).fetchone()
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES ('2', '1'), ('3', '3')) v(a, b)")
    assert con.execute(registry.fingerprint_sql("t", ["a", "b"])).fetchone() != within
    assert found["reordered"] == found["base"]
    assert len({found[name] for name in tables if name != "reordered"}) == 3
    con.close()


def test_the_listing_follows_rollbacks_and_republications(db):
    """The listing macro is remade only when what it lists changed; a macro created inside a
    transaction that is rolled back is never taken for the one in place."""
    small = "ANONYMIZE src INTO {target} WITH (k = 5, qi = (sex, race))"
    db.execute(small.format(target="first"))
    db.execute("BEGIN")
    db.execute(small.format(target="second"))
    assert set(listing(db)) == {'"memory"."main"."first"', '"memory"."main"."second"'}
    db.execute("ROLLBACK")
    db.execute(small.format(target="second"))  # the same listing as the one rolled back
    # read as DuckDB itself (a BI tool) reads it: duckanon's execute would remake it first
    assert {target: entry["status"] for target, entry in listing(db.duckdb).items()} == {
        '"memory"."main"."first"': "current", '"memory"."main"."second"': "current"}
    db.execute(small.format(target="first"))  # republished: the same entries, the macro kept
    db.execute("DELETE FROM src WHERE rid % 10 = 0")
    db.execute(small.format(target="third"))
    assert {target: entry["status"] for target, entry in listing(db.duckdb).items()} == {
        '"memory"."main"."first"': "stale", '"memory"."main"."second"': "stale", '"memory"."main"."third"': "current"}


def test_the_listing_checks_each_source_and_column_list_once_for_all_its_entries(db):
    db.execute("CREATE TABLE other AS SELECT * FROM adult WHERE rid % 10 >= 5")
    for target, source, qi in (("a", "src", "sex, race"), ("b", "src", "sex, race"), ("c", "src", "sex, education"),
                               ("d", "other", "sex, race")):
        db.execute(f"ANONYMIZE {source} INTO {target} WITH (k = 5, qi = ({qi}))")
    db.execute("DROP TABLE a")  # an entry whose release is gone still lists its source's state
    db.duckdb.execute("DELETE FROM other WHERE rid % 10 = 5")
    db.execute("ANONYMIZE src INTO e WITH (k = 5, qi = (sex, race))")  # remakes the listing
    status = {target.split(".")[-1].strip('"'): entry["status"] for target, entry in listing(db.duckdb).items()}
    assert status == {"a": "current", "b": "current", "c": "current", "d": "stale", "e": "current"}
    db.duckdb.execute("ALTER TABLE src DROP COLUMN education")
    db.duckdb.execute("DROP TABLE other")
    status = {target.split(".")[-1].strip('"'): entry["status"] for target, entry in listing(db).items()}
    assert status == {"a": "current", "b": "current", "c": "source lost column education", "d": "source missing",
                      "e": "current"}


def test_a_dropped_listing_comes_back_when_a_script_calls_it_and_hand_made_rows_are_listed(db):
    small = "ANONYMIZE src INTO {target} WITH (k = 5, qi = (sex, race))"
    db.execute(small.format(target="first"))
    db.execute("DROP MACRO TABLE duckanon_publications")
    db.execute(small.format(target="first"))  # republished: the listing's text is the same as before
    assert listing(db) == listing(db.duckdb)  # a script naming it remade it first; DuckDB now sees it too
    assert listing(db)['"memory"."main"."first"']["status"] == "current"
    # rows made by hand (no digest, a NULL source) are corrupt: listed so, never run
    db.duckdb.execute("""INSERT INTO duckanon_publications (target_schema, target_name, source_schema, source_name,
                         source_columns) VALUES ('main', 'x', NULL, 'src', ['a']), ('main', 'y', 'main', 'src', NULL)""")
    status = {target: (entry["status"], entry["stale"]) for target, entry in listing(db).items()}
    assert status == {'"memory"."main"."first"': ("current", False), '"memory"."main"."x"': ("corrupt", False),
                      '"memory"."main"."y"': ("corrupt", False)}
