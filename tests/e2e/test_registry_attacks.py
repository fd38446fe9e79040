"""The attacks on the registry and REFRESH of issue 35 (items 1, 2, 8, 9 and follow-up), each
reproduced as a test: a target replaced under its alias, two registries claiming one target, a
kill -9 between a release's commit and its entry's, messages, unreachable targets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import duckanon
from duckanon.pipeline import registry
from support.refusals import refused_unchanged

ROOT = Path(__file__).resolve().parents[2]
HOSPITAL = ROOT.parent / "shared" / "data" / "hospital.csv"
WITH = "WITH (k = 2, qi = (zipcode, age), sensitive = disease)"


@pytest.fixture
def work(tmp_path):
    con = duckanon.connect(str(tmp_path / "w.duckdb"))
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    yield con, tmp_path
    con.close()


def listing(con):
    return {(row[0], row[2]): row[1] for row in con.execute(
        "SELECT target, status, registry FROM duckanon_publications()").fetchall()}


def result(con, text):
    cursor = con.execute(text)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def test_refresh_never_writes_an_unrelated_file_attached_under_the_alias(work):
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    con.execute(f"ANONYMIZE hospital INTO release.pub_missing {WITH}")
    con.execute("DETACH release")
    con.execute(f"ATTACH '{tmp / 'partner.duckdb'}' AS release")
    con.execute("CREATE TABLE release.pub AS SELECT 'partner precious data' AS note FROM range(3)")
    con.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    assert listing(con) == {
        ('"release"."main"."pub"', "w"): "target replaced",
        ('"release"."main"."pub_missing"', "w"): "stale (not refreshable: its target's database release is another "
                                                 "file than the one it was published into)"}
    rows = result(con, "REFRESH ALL")
    assert [(r["target"], r["committed_in"], r["entry"]) for r in rows] == [
        ('"release"."main"."pub_missing"', None, "not refreshed: its target's database release is another file than "
                                                 "the one it was published into (attach that file AS release)")]
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH release\.pub: release\.main\.pub no longer holds the "
                                                      r"release its entry in database w recorded \(a table duckanon "
                                                      r"did not publish is there now\); nothing was changed$"):
        con.execute("REFRESH release.pub")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH release\.pub_missing: its target's database release "
                                                      r"is another file than the one it was published into"):
        con.execute("REFRESH release.pub_missing")
    assert con.execute("SELECT note, count(*) FROM release.pub GROUP BY 1").fetchall() == [("partner precious data", 3)]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'release'").fetchone()[0] == 1


def test_two_registries_claiming_one_target_one_is_superseded(work):
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release; ATTACH '{tmp / 'clinic.duckdb'}' AS clinic")
    con.execute("CREATE TABLE clinic.src AS SELECT zipcode, age, 'CLINIC-' || disease AS disease FROM hospital")
    con.execute(f"ANONYMIZE clinic.src INTO release.pub {WITH}")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    assert listing(con) == {('"release"."main"."pub"', "clinic"): "superseded",
                            ('"release"."main"."pub"', "w"): "current"}
    con.execute("INSERT INTO clinic.src SELECT * FROM clinic.src LIMIT 1")
    assert result(con, "REFRESH ALL") == []  # a superseded entry is not stale
    [row] = result(con, "REFRESH release.pub")  # the entry whose release the target carries: hospital's
    assert row["source_rows_after"] == 10
    assert not con.execute("SELECT count(*) FROM release.pub WHERE disease LIKE 'CLINIC-%'").fetchone()[0]
    con.execute("DETACH clinic")
    con.execute(f"ATTACH '{tmp / 'clinic.duckdb'}' AS clinic")
    assert listing(con)[('"release"."main"."pub"', "clinic")] == "superseded"


CHILD = """
import sys
import duckanon
con = duckanon.connect(sys.argv[1])
con.execute("ATTACH '" + sys.argv[2] + "' AS release")
con.execute("REFRESH ALL")
print("done", flush=True)
"""


def test_a_kill_between_the_release_commit_and_its_entry_is_listed_and_refresh_repairs_it(work):
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    con.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    con.close()
    env = {**os.environ, registry.WAIT_BETWEEN_COMMITS: "1", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp / "w.duckdb"), str(tmp / "rel.duckdb")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert child.stdout.readline().strip() == "between commits"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    con = duckanon.connect(str(tmp / "w.duckdb"))
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    assert con.execute("SELECT count(*) FROM release.pub").fetchone()[0] == 12  # the release committed
    [(status, stale, rows)] = con.execute("SELECT status, stale, source_rows FROM duckanon_publications()").fetchall()
    assert (status, stale, rows) == ("unrecorded release", True, 10)  # its entry was not updated: said so
    [row] = result(con, "REFRESH ALL")
    assert (row["target"], row["source_rows_after"], row["entry"]) == ('"release"."main"."pub"', 12, "updated")
    assert con.execute("SELECT status, source_rows FROM duckanon_publications()").fetchall() == [("current", 12)]
    con.close()


def test_detached_target_messages_and_refresh_all_refreshes_what_it_reaches(work):
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    con.execute(f"ANONYMIZE hospital {WITH}")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    con.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 1")
    con.execute("DETACH release")
    for name in ("release.pub", "release.main.pub"):
        with pytest.raises(duckanon.AnonymizeError, match=rf"^REFRESH {name}: its target's database release is not "
                                                          r"attached \(ATTACH it AS release\); nothing was changed$"):
            con.execute(f"REFRESH {name}")
    rows = result(con, "REFRESH ALL")
    assert [(r["target"], r["source_rows_after"], r["committed_in"], r["entry"]) for r in rows] == [
        ('"w"."main"."hospital_anon"', 11, "w", "updated"),
        ('"release"."main"."pub"', 11, None, "not refreshed: its target's database release is not attached (ATTACH it "
                                             "AS release)")]
    assert listing(con)[('"release"."main"."pub"', "w")] == ("stale (not refreshable: its target's database release "
                                                             "is not attached)")
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release (READ_ONLY)")
    [row] = result(con, "REFRESH ALL")
    assert row["entry"] == "not refreshed: its target's database release is read-only"
    assert listing(con)[('"release"."main"."pub"', "w")] == ("stale (not refreshable: its target's database release "
                                                             "is read-only)")


def test_refresh_of_an_entry_whose_target_was_edited_says_it_is_corrupt(work):
    con, _ = work
    con.execute(f"ANONYMIZE hospital {WITH}")
    con.execute("UPDATE duckanon_publications SET target_name = 'elsewhere'")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH hospital_anon: its registry entry in database w is "
                                                      r"corrupt"):
        con.execute("REFRESH hospital_anon")


def test_refresh_all_names_the_publication_it_failed_at(work):
    con, _ = work
    con.execute("ANONYMIZE hospital WITH (k = 2, t = 0.9, qi = (zipcode, age), sensitive = disease, "
                "t_distance = ordered, sa_order = ('Cancer', 'Heart Disease', 'Viral Infection'))")
    con.execute("INSERT INTO hospital VALUES (12345, 44, 'x', 'SECRET-DIAGNOSIS-X')")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH ALL stopped in database w at w\.main\.hospital_anon: "
                                                      r"sa_order does not list 1 value .*; committed before it: none; "
                                                      r"not refreshed: w\.main\.hospital_anon$") as raised:
        con.execute("REFRESH ALL")
    assert "SECRET" not in str(raised.value)


def test_an_entry_that_could_not_be_updated_is_listed_unrecorded_and_refresh_repairs_it(work, monkeypatch):
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    con.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    real = registry.record

    def conflicting(*args, **kwargs):
        raise duckanon_conflict()

    monkeypatch.setattr(registry, "record", conflicting)
    [row] = result(con, "REFRESH release.pub")
    assert row["entry"] == ("not updated: not recorded in the source's database: TransactionContext Error: Conflict "
                            "on tuple deletion!")
    monkeypatch.setattr(registry, "record", real)
    assert listing(con)[('"release"."main"."pub"', "w")] == "unrecorded release"
    [row] = result(con, "REFRESH ALL")
    assert (row["source_rows_after"], row["entry"]) == (12, "updated")
    assert listing(con)[('"release"."main"."pub"', "w")] == "current"


def duckanon_conflict():
    import duckdb
    return duckdb.TransactionException("TransactionContext Error: Conflict on tuple deletion!")


def test_a_conflict_at_the_commit_of_a_refresh_gets_refreshs_own_message(work, monkeypatch):
    from duckanon.backends import DuckDBBackend
    from duckanon.backends.base import WriteConflict
    con, tmp = work
    con.execute(f"ATTACH '{tmp / 'rel.duckdb'}' AS release")
    con.execute(f"ANONYMIZE hospital INTO release.pub {WITH}")
    con.execute("INSERT INTO hospital SELECT * FROM hospital LIMIT 2")
    real = DuckDBBackend.commit

    def conflicting(self):
        if self.con is not con.duckdb:  # the entry's mark, committed on a cursor of its own first
            return real(self)
        monkeypatch.setattr(DuckDBBackend, "commit", real)
        raise WriteConflict("another statement changed pub at the same time", "pub")

    monkeypatch.setattr(DuckDBBackend, "commit", conflicting)
    with pytest.raises(duckanon.AnonymizeError, match=r"^another statement changed the target release\.main\.pub at the "
                                                      r"same time: nothing was written; run REFRESH again$"):
        con.execute("REFRESH release.pub")
    assert con.execute("SELECT count(*) FROM release.pub").fetchone()[0] == 10
    assert listing(con)[('"release"."main"."pub"', "w")] == "stale"


@pytest.mark.parametrize("statement, message", [
    # publishing into the registry replaced it: every entry was lost (found by the DP attack)
    (f"ANONYMIZE hospital INTO duckanon_publications {WITH}",
     "the target memory.main.duckanon_publications is the name of duckanon's publication registry: choose another "
     "name with INTO"),
    (f"ANONYMIZE hospital INTO main.DUCKANON_PUBLICATIONS {WITH}",
     "the target memory.main.duckanon_publications is the name of duckanon's publication registry: choose another "
     "name with INTO"),
    # publishing into a view release's counts broke the view while the listing said current
    ("ANONYMIZE hospital INTO v_counts WITH (k = 3, qi = (zipcode))",
     "the target memory.main.v_counts holds the rows of a view published with materialize = 'view': choose another "
     "name with INTO"),
])
def test_duckanon_bookkeeping_is_never_a_target(statement, message):
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.execute(f"ANONYMIZE hospital INTO kept {WITH}")
    con.execute(f"ANONYMIZE hospital INTO v {WITH[:-1]}, materialize = 'view')")
    refused_unchanged(con, statement, message)
    assert {row[0] for row in con.execute("SELECT target FROM duckanon_publications()").fetchall()} == {
        '"memory"."main"."kept"', '"memory"."main"."v"'}
    assert con.execute("SELECT count(*) FROM v").fetchone()[0] == 10
