"""The publication registry as data (issue 35): stored text never runs, a release file carries
nothing about its source, REFRESH uses the names resolved at publish time and resolves its own
name as DuckDB does, targets in another database refresh per database, a copied or re-aliased
file keeps its registry, and a user's own `duckanon_publications` is never adopted."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import duckdb
import pytest

import duckanon
from duckanon.pipeline import registry

from support.checks import check_table
from support.database import database_file
from support.refusals import assert_refused_and_unchanged

SETUP = ("CREATE TABLE t AS SELECT i % 5 AS a, 'x' || (i % 3) AS b, 'd' || (i % 2) AS s FROM range(30) r(i)",
         "CREATE TABLE victim AS SELECT 1 AS v")
PUBLISH = "ANONYMIZE t INTO t_anon WITH (k = 3, qi = (a, b), sensitive = s, seed = 7)"
APPEND = "INSERT INTO t SELECT i % 5, 'x' || (i % 4), 'd' || (i % 2) FROM range(6) r(i)"
QI = ["a", "b"]


def listing(con) -> dict:
    cursor = con.execute("SELECT * FROM duckanon_publications()")
    names = [d[0] for d in cursor.description]
    return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


def result(con, statement: str) -> list[dict]:
    cursor = con.execute(statement)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def summary_details(con, statement: str) -> dict:
    [row] = result(con, statement)
    return json.loads(row["details"])


def count(con, table: str) -> int:
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture
def clinic(tmp_path):
    """clinic.duckdb with the source t, the victim table and t_anon published from t; closed."""
    return database_file(tmp_path / "clinic.duckdb", [*SETUP, PUBLISH])


# ----------------------------------------------------------------------------- 1. stored text never runs

LEAK = "@LEAK@"  # replaced by the test's own path of the file a pasted COPY would write


def _injection(leak=LEAK) -> str:
    return f"\"db\".\"main\".\"t\"; COPY (SELECT 42) TO '{leak}'; DROP TABLE victim; SELECT * FROM t"


HOSTILE_TEXT = ["'; DROP TABLE victim; --", 'x"; DROP TABLE victim; --', "INJECTION"]  # INJECTION: _injection()
# per column: SQL literals of hostile values of its type (each a row that is not duckanon's structure)
HOSTILE = {
    "target_database": ["TEXT", "NULL_OK"], "target_schema": ["TEXT", "NULL"], "target_name": ["TEXT", "NULL"],
    "source_schema": ["TEXT", "NULL"], "source_name": ["TEXT", "NULL"],
    "statement": ["JSON", "NULL", """'{"format": 2, "options": [["k", "3); DROP TABLE victim; --"]]}'""",
                  """'{"format": 2, "options": [["qi", "a"], ["k", 3]]}'""", """'"not an object"'""",
                  # the hierarchy tables resolved at publish time (issue 35, item 6): parts, never SQL
                  """'{"format": 2, "options": [["qi", ["a", "b"]], ["k", 3], ["method", "lattice"], """
                  """["hierarchies", {"a": "table(h)"}]], "hierarchy_tables": {"a": [null, "main", """
                  """"h\\"; DROP TABLE victim; --"]}}'""",
                  """'{"format": 2, "options": [["qi", ["a", "b"]], ["k", 3]], "hierarchy_tables": """
                  """{"a": [null, "main", "t"]}}'""",
                  """'{"format": 2, "options": [["qi", ["a", "b"]], ["k", 3], ["method", "lattice"], """
                  """["hierarchies", {"a": "table(h)"}]], "hierarchy_tables": {"a": "table(t); DROP TABLE victim"}}'"""],
    "statement_text": ["TEXT", "NULL"], "parameters": ["JSON", "NULL", "'[1, 2]'"],
    "published_at": ["NULL", "TIMESTAMP '2001-01-01 00:00:00'"],
    "duckanon_version": ["TEXT", "NULL"], "duckdb_version": ["TEXT", "NULL"],
    "source_columns": ["['a; DROP TABLE victim; --', 'b']", "[NULL]", "[]", "NULL"],
    "source_rows": ["-1", "NULL", "31"], "source_checksum": ["0", "NULL"],
    "summary": ["JSON", "NULL", "'[]'"], "transformation": ["JSON", "NULL", """'{"method": 3}'""",
                                                               """'{"method": "lattice", "levels": ["0; DROP"]}'"""],
    "entry_digest": ["TEXT", "NULL"],
}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _hostile_values(kind: str) -> list[str]:
    if kind == "TEXT":
        return [_quote(_injection() if text == "INJECTION" else text) for text in HOSTILE_TEXT]
    if kind == "JSON":  # valid JSON holding the injection where a structure is expected
        return [_quote(json.dumps(_injection())), _quote(json.dumps({"format": 2, "options": [[
            "qi", [_injection()]], ["k", 3]], "x": "'; DROP TABLE victim; --"}))]
    if kind == "NULL_OK":  # NULL is this database: a valid value, so only the texts are hostile
        return []
    return [kind]


CASES = [(column, value) for column, kinds in HOSTILE.items() for kind in kinds for value in _hostile_values(kind)]


def _edit(path, column: str, value: str, tmp_path) -> None:
    with duckdb.connect(str(path)) as raw:
        raw.execute(f"UPDATE duckanon_publications SET {column} = {value.replace(LEAK, str(tmp_path / 'leak.csv'))}")


def _assert_harmless(con, path, tmp_path, victim="victim") -> None:
    assert count(con, victim) == 1
    assert not (tmp_path / "leak.csv").exists()


@pytest.mark.parametrize("column, value", CASES, ids=[f"{c}={v[:30]}" for c, v in CASES])
def test_a_hostile_registry_row_is_listed_corrupt_and_never_runs(clinic, tmp_path, column, value):
    _edit(clinic, column, value, tmp_path)
    con = duckanon.connect(str(clinic))  # opening the file lists the registry: nothing runs
    _assert_harmless(con, clinic, tmp_path)
    [entry] = listing(con).values()
    assert (entry["status"], entry["stale"], entry["current_rows"], entry["registry"]) == ("corrupt", False, None,
                                                                                           "clinic")
    assert entry["source"] is None and entry["summary"] is None  # nothing of a corrupt row is shown as data
    if column not in ("target_database", "target_schema", "target_name"):
        assert entry["target"] == '"clinic"."main"."t_anon"'
    # an edited target name too: the row is known by the release id t_anon carries (issue 35 follow-up, D5)
    assert_refused_and_unchanged(
        con, "REFRESH t_anon", r"^REFRESH t_anon: its registry entry in database clinic is corrupt \(it does not "
                               r"read back as duckanon's structure, so it is never run\); publish it again with "
                               r"ANONYMIZE$")
    con.execute(APPEND)
    assert result(con, "REFRESH ALL") == []  # a corrupt entry is never stale: it stays as it is
    _assert_harmless(con, clinic, tmp_path)
    con.close()
    reader = duckanon.connect()  # a read-only ATTACH lists it too, and writes nothing
    reader.execute(f"ATTACH '{clinic}' AS ro (READ_ONLY)")
    [entry] = listing(reader).values()
    assert (entry["status"], entry["registry"]) == ("corrupt", "ro")
    assert result(reader, "REFRESH ALL") == []
    _assert_harmless(reader, clinic, tmp_path, "ro.victim")
    reader.close()


def test_a_forged_entry_with_a_valid_digest_is_a_name_never_sql(clinic, tmp_path):
    """One who recomputes the digest gets an entry naming a table that does not exist: listed as
    source missing, refused by REFRESH, and its text is a quoted identifier, never SQL."""
    injection = _injection(tmp_path / "leak.csv")
    with duckdb.connect(str(clinic)) as raw:
        cursor = raw.execute(f"SELECT {', '.join(registry.COLUMNS)} FROM duckanon_publications")
        row = dict(zip(registry.COLUMNS, cursor.fetchone()))
        row["source_name"] = injection
        row["entry_digest"] = registry.digest(row)
        raw.execute("UPDATE duckanon_publications SET source_name = ?, entry_digest = ?",
                    [injection, row["entry_digest"]])
    con = duckanon.connect(str(clinic))
    [entry] = listing(con).values()
    quoted = '"' + injection.replace('"', '""') + '"'
    assert (entry["status"], entry["source"]) == ("source missing", f'"clinic"."main".{quoted}')
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH t_anon: its source .* no longer exists; nothing was "
                                                      r"changed$"):
        con.execute("REFRESH t_anon")
    assert result(con, "REFRESH ALL") == []
    _assert_harmless(con, clinic, tmp_path)
    con.close()


def test_a_forged_entry_without_its_release_never_replaces_a_users_table(clinic):
    """An entry rewritten by hand with a valid digest, its release id dropped (as an entry written
    before release ids) and its target renamed to a user's table: listed 'target replaced' and
    refused by REFRESH, the user's table untouched (the stored-text attack of 2026-12-04, b06:
    listed 'current', and REFRESH replaced the table with a release)."""
    with duckdb.connect(str(clinic)) as raw:
        cursor = raw.execute(f"SELECT {', '.join(registry.COLUMNS)} FROM duckanon_publications")
        row = dict(zip(registry.COLUMNS, cursor.fetchone()))
        statement = json.loads(row["statement"])
        statement["release"] = None
        row["statement"], row["target_name"] = json.dumps(statement), "victim"
        row["entry_digest"] = registry.digest(row)
        raw.execute("UPDATE duckanon_publications SET statement = ?, target_name = 'victim', entry_digest = ?",
                    [row["statement"], row["entry_digest"]])
        raw.execute("INSERT INTO t SELECT * FROM t LIMIT 1")  # the source changed: REFRESH would run
    con = duckanon.connect(str(clinic))
    [entry] = listing(con).values()
    assert entry["status"] == "target replaced"
    with pytest.raises(duckanon.AnonymizeError) as raised:
        con.execute("REFRESH victim")
    assert str(raised.value) == ("REFRESH victim: clinic.main.victim no longer holds the release its entry in database "
                                 "clinic recorded (a table duckanon did not publish is there now); nothing was changed")
    assert result(con, "REFRESH ALL") == []  # (REFRESH ALL skips entries whose target is not theirs)
    assert con.execute("SELECT * FROM victim").fetchall() == [(1,)]
    con.close()


def test_a_registry_of_the_previous_format_is_listed_outdated_and_never_runs(tmp_path):
    path = tmp_path / "old.duckdb"
    injection = _injection(tmp_path / "leak.csv")
    with duckdb.connect(str(path)) as raw:
        for statement in SETUP:
            raw.execute(statement)
        raw.execute("CREATE TABLE duckanon_publications (" + ", ".join(
            f'"{name}" {kind}' for name, kind in registry.PREVIOUS_COLUMNS.items()) + ")")
        raw.execute("INSERT INTO duckanon_publications (target, source, statement, source_columns, source_rows) "
                    "VALUES ('\"old\".\"main\".\"t_anon\"', ?, ?, ['a'], 30)",
                    [injection, f"ANONYMIZE {injection} WITH (k = 3)"])
    con = duckanon.connect(str(path))
    [entry] = listing(con).values()
    assert (entry["target"], entry["status"], entry["source"]) == ('"old"."main"."t_anon"', "outdated: publish again",
                                                                   None)
    assert_refused_and_unchanged(con, "REFRESH t_anon", r"^REFRESH t_anon: its registry entry in database old was "
                                                        r"written by an earlier duckanon and cannot be refreshed; "
                                                        r"publish it again with ANONYMIZE$")
    assert result(con, "REFRESH ALL") == []
    note = summary_details(con, PUBLISH)["registry"]  # the release goes through, unrecorded
    assert note == ("not recorded: old.main.duckanon_publications is the registry of an earlier duckanon (its entries "
                    "cannot be refreshed; drop it to record new releases)")
    assert check_table(con, "t_anon", "t", QI, k=3) == []
    assert con.execute("SELECT count(*) FROM duckanon_publications").fetchone()[0] == 1
    _assert_harmless(con, path, tmp_path)
    con.close()


# ----------------------------------------------------------------------------- 2. nothing about a source elsewhere

SOURCE_NAME = "patients_private_2024"
TEMPORARY = ("not recorded: the source is temporary (a TEMP table or view, or a registered DataFrame): the registry "
             "lives in the source's database, and this one ends with the connection")


def _release_bytes(path) -> bytes:
    return path.read_bytes()


def test_a_file_source_is_never_recorded_in_the_release_file(tmp_path):
    extract = tmp_path / "extract_private_2024.csv"
    with duckdb.connect() as raw:
        raw.execute(f"COPY (SELECT i % 5 AS a, 'x' || (i % 3) AS b FROM range(30) r(i)) TO '{extract}'")
    release = tmp_path / "release.duckdb"
    con = duckanon.connect(str(release))
    note = summary_details(con, f"ANONYMIZE '{extract}' INTO pub WITH (k = 3, qi = (a, b))")["registry"]
    assert note == ("not recorded: the source is not a table or view of a database (a file, a DataFrame): the "
                    "registry lives in the source's database, and nothing about a source is written anywhere else")
    assert check_table(con, "pub", f"'{extract}'", QI, k=3) == []
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'duckanon_publications'").fetchone() == (0,)
    assert listing(con) == {}
    con.execute("CHECKPOINT")
    con.close()
    assert b"extract_private_2024" not in _release_bytes(release)


@pytest.mark.parametrize("kind", ["read-only database", "temporary table", "DataFrame"])
def test_a_source_whose_database_cannot_take_the_entry_leaves_no_trace_in_the_target(tmp_path, kind):
    clinic, release = tmp_path / "clinic.duckdb", tmp_path / "release.duckdb"
    with duckdb.connect(str(clinic)) as raw:
        raw.execute(f"CREATE TABLE {SOURCE_NAME} AS SELECT i % 5 AS a, 'x' || (i % 3) AS b FROM range(30) r(i)")
    con = duckanon.connect(str(release))
    if kind == "read-only database":
        con.execute(f"ATTACH '{clinic}' AS clinic (READ_ONLY)")
        source = f"clinic.{SOURCE_NAME}"
        expected = ("not recorded: the source's database clinic is read-only (the registry lives in the source's "
                    "database, and nothing about a source is written anywhere else)")
    elif kind == "temporary table":
        con.execute(f"CREATE TEMP TABLE {SOURCE_NAME} AS SELECT i % 5 AS a, 'x' || (i % 3) AS b FROM range(30) r(i)")
        source = SOURCE_NAME
        expected = TEMPORARY
    else:
        frame = duckdb.connect().execute("SELECT i % 5 AS a, 'x' || (i % 3) AS b FROM range(30) r(i)").df()
        con.duckdb.register(SOURCE_NAME, frame)
        source = SOURCE_NAME
        expected = TEMPORARY
    note = summary_details(con, f"ANONYMIZE {source} INTO release.main.pub WITH (k = 3, qi = (a, b))")["registry"]
    assert note == expected
    assert check_table(con, "release.main.pub", source, QI, k=3) == []
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'duckanon_publications'").fetchone() == (0,)
    con.execute("CHECKPOINT")
    con.close()
    assert SOURCE_NAME.encode() not in _release_bytes(release)


def test_a_view_and_an_attached_database_record_in_the_sources_database(tmp_path):
    clinic, release = tmp_path / "clinic.duckdb", tmp_path / "release.duckdb"
    con = duckanon.connect(str(clinic))
    con.execute(f"CREATE TABLE {SOURCE_NAME} AS SELECT i % 5 AS a, 'x' || (i % 3) AS b FROM range(30) r(i)")
    con.execute(f"CREATE VIEW v AS SELECT * FROM {SOURCE_NAME} WHERE a < 4")
    con.execute(f"ATTACH '{release}' AS release")
    for source, target in ((SOURCE_NAME, "release.pub"), ("v", "release.pub_v")):
        assert "registry" not in summary_details(con, f"ANONYMIZE {source} INTO {target} WITH (k = 3, qi = (a, b))")
    listed = listing(con)
    assert {t: (e["source"], e["status"], e["current_rows"], e["registry"]) for t, e in listed.items()} == {
        '"release"."main"."pub"': (f'"clinic"."main"."{SOURCE_NAME}"', "current", 30, "clinic"),
        '"release"."main"."pub_v"': ('"clinic"."main"."v"', "current", 24, "clinic")}
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'release' "
                       "AND table_name = 'duckanon_publications'").fetchone() == (0,)
    con.execute("DETACH release")
    con.close()
    assert SOURCE_NAME.encode() not in _release_bytes(release)


# ----------------------------------------------------------------------------- 6. names resolved at publish time

@pytest.mark.parametrize("change", ["USE memory.s2", "SET search_path = 's2'"])
def test_refresh_reads_and_writes_the_objects_resolved_at_publish_time(change):
    con = duckanon.connect()
    con.execute(SETUP[0])
    con.execute("CREATE SCHEMA s2")
    con.execute("CREATE TABLE s2.t AS SELECT 9 AS a, 'y' AS b, 'd' AS s FROM range(50)")
    con.execute(PUBLISH)
    con.execute(APPEND)
    con.execute(change)
    [row] = result(con, "REFRESH memory.main.t_anon")
    assert (row["target"], row["source_rows_before"], row["source_rows_after"], row["published_rows_after"]) == (
        '"memory"."main"."t_anon"', 30, 36, 36)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 's2' AND table_name = 't_anon'"
                       ).fetchone() == (0,)
    assert count(con, "memory.main.t_anon") == 36
    assert check_table(con, "memory.main.t_anon", "memory.main.t", QI, k=3) == []
    assert listing(con)['"memory"."main"."t_anon"']["status"] == "current"
    con.close()


# ----------------------------------------------------------------------------- 7. REFRESH's name as DuckDB resolves it

@pytest.mark.parametrize("name", ["d2.t_anon", "d2.main.t_anon", '"D2"."T_ANON"'])
def test_refresh_of_a_target_in_an_attached_database(name):
    con = duckanon.connect()
    con.execute("ATTACH ':memory:' AS d2")
    con.execute(SETUP[0].replace("TABLE t", "TABLE d2.t"))
    con.execute("ANONYMIZE d2.t WITH (k = 3, qi = (a, b))")
    assert count(con, "d2.t_anon") == 30
    con.execute(APPEND.replace("INTO t", "INTO d2.t"))
    [row] = result(con, f"REFRESH {name}")
    assert (row["target"], row["source_rows_after"], row["committed_in"], row["entry"]) == (
        '"d2"."main"."t_anon"', 36, "d2", "updated")
    assert check_table(con, "d2.t_anon", "d2.t", QI, k=3) == []
    con.close()


def test_refresh_by_the_name_used_in_into_and_after_use():
    con = duckanon.connect()
    con.execute(SETUP[0])
    con.execute("ATTACH ':memory:' AS release")
    con.execute("ANONYMIZE t INTO release.patients WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    [row] = result(con, "REFRESH release.patients")
    assert (row["target"], row["source_rows_after"], row["entry"]) == ('"release"."main"."patients"', 36, "updated")
    con.execute("USE release")
    con.execute(APPEND.replace("INTO t", "INTO memory.main.t"))
    [row] = result(con, "REFRESH patients")  # resolved in the session, as a SELECT would read it
    assert (row["target"], row["source_rows_after"]) == ('"release"."main"."patients"', 42)
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH t: it was not published by ANONYMIZE"):
        con.execute("REFRESH t")  # release.main.t, which does not exist: not memory.main.t
    con.close()


# ----------------------------------------------------------------------------- 8. targets in another database

@pytest.fixture
def two_files(tmp_path):
    clinic, release = tmp_path / "clinic.duckdb", tmp_path / "release.duckdb"
    con = duckanon.connect(str(clinic))
    con.execute(SETUP[0])
    con.execute("CREATE TABLE t2 AS SELECT * FROM t")
    con.execute(f"ATTACH '{release}' AS release")
    yield con
    con.close()


def test_refresh_of_a_target_in_another_database_updates_its_entry(two_files):
    con = two_files
    con.execute("ANONYMIZE t INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    entry = listing(con)['"release"."main"."pub"']
    assert (entry["status"], entry["source_rows"], entry["current_rows"]) == ("stale", 30, 36)
    [row] = result(con, "REFRESH release.pub")
    assert (row["source_rows_before"], row["source_rows_after"], row["published_rows_after"], row["committed_in"],
            row["entry"]) == (30, 36, 36, "release", "updated")
    entry = listing(con)['"release"."main"."pub"']
    assert (entry["status"], entry["source_rows"], entry["current_rows"]) == ("current", 36, 36)
    assert check_table(con, "release.pub", "t", QI, k=3) == []


def test_refresh_all_commits_per_database_in_order(two_files):
    con = two_files
    con.execute("ANONYMIZE t INTO t_anon WITH (k = 3, qi = (a, b))")
    con.execute("ANONYMIZE t2 INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    con.execute(APPEND.replace("INTO t", "INTO t2"))
    rows = result(con, "REFRESH ALL")
    assert [(r["target"], r["committed_in"], r["source_rows_after"], r["entry"]) for r in rows] == [
        ('"clinic"."main"."t_anon"', "clinic", 36, "updated"), ('"release"."main"."pub"', "release", 36, "updated")]
    assert {t: (e["status"], e["current_rows"]) for t, e in listing(con).items()} == {
        '"clinic"."main"."t_anon"': ("current", 36), '"release"."main"."pub"': ("current", 36)}
    assert check_table(con, "release.pub", "t2", QI, k=3) == [] and check_table(con, "t_anon", "t", QI, k=3) == []


def test_a_failure_in_the_second_database_keeps_the_first_and_says_so(two_files):
    con = two_files
    con.execute("ANONYMIZE t INTO t_anon WITH (k = 3, qi = (a, b))")
    con.execute("ANONYMIZE t2 INTO release.pub WITH (k = 3, qi = (a, b))")
    old_pub = Counter(con.execute("SELECT * FROM release.pub").fetchall())
    con.execute(APPEND)
    con.execute("DELETE FROM t2 WHERE a > 0")  # 6 rows: a = 0, b in x0..x2, k = 3 still holds ...
    con.execute("DELETE FROM t2 WHERE b <> 'x0'")  # ... 2 rows: below k
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute("REFRESH ALL")
    message = str(caught.value)
    assert message.startswith("REFRESH ALL stopped in database release at release.main.pub: ") and "\n" not in message
    assert message.endswith("; committed before it: clinic.main.t_anon; not refreshed: release.main.pub")
    assert "k = 3 is greater than the number of rows" in message
    assert count(con, "t_anon") == 36  # committed, with its entry
    assert Counter(con.execute("SELECT * FROM release.pub").fetchall()) == old_pub
    assert {t: (e["status"], e["source_rows"]) for t, e in listing(con).items()} == {
        '"clinic"."main"."t_anon"': ("current", 36), '"release"."main"."pub"': ("stale", 30)}


def test_a_failure_in_the_first_database_changes_nothing(two_files):
    con = two_files
    con.execute("ANONYMIZE t INTO t_anon WITH (k = 3, qi = (a, b))")
    con.execute("ANONYMIZE t2 INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute("DELETE FROM t WHERE b <> 'x0' OR a > 0")
    con.execute(APPEND.replace("INTO t", "INTO t2"))
    before = Counter(con.execute("SELECT * FROM t_anon").fetchall()), Counter(con.execute("SELECT * FROM release.pub").fetchall())
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH ALL stopped in database clinic at clinic\.main\.t_anon: .*k = 3 is greater "
                                                      r"than the number of rows.*; committed before it: none; not "
                                                      r"refreshed: clinic\.main\.t_anon, release\.main\.pub$"):
        con.execute("REFRESH ALL")
    after = Counter(con.execute("SELECT * FROM t_anon").fetchall()), Counter(con.execute("SELECT * FROM release.pub").fetchall())
    assert after == before
    assert {e["status"] for e in listing(con).values()} == {"stale"}


def test_refresh_across_databases_inside_a_transaction_is_refused(two_files):
    con = two_files
    con.execute("ANONYMIZE t INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    con.execute("BEGIN")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH release\.pub: release\.main\.pub is published into "
                                                      r"database release and registered in database clinic, and DuckDB "
                                                      r"writes one database per transaction: run it outside BEGIN \.\.\. "
                                                      r"COMMIT$"):
        con.execute("REFRESH release.pub")
    con.execute("ROLLBACK")
    assert listing(con)['"release"."main"."pub"']["status"] == "stale"


def test_an_entry_that_cannot_be_written_after_the_commit_leaves_the_release_and_says_so(two_files, monkeypatch):
    con = two_files
    con.execute("ANONYMIZE t INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    real = registry.record

    def failing(backend, plan, database, *args, **kwargs):
        raise duckdb.IOException("IO Error: disk full")

    monkeypatch.setattr(registry, "record", failing)
    [row] = result(con, "REFRESH release.pub")
    assert row["entry"] == "not updated: not recorded in the source's database: IO Error: disk full"
    assert row["source_rows_after"] == 36 and count(con, "release.pub") == 36  # the rows it was made from
    monkeypatch.setattr(registry, "record", real)
    # the old entry, marked with the release that committed without it: REFRESH brings both up to date
    assert listing(con)['"release"."main"."pub"']["status"] == "unrecorded release"


# ----------------------------------------------------------------------------- 9. copies and aliases

def test_a_copied_file_keeps_its_registry(clinic, tmp_path):
    copy = tmp_path / "clinic_2024.duckdb"
    shutil.copy(clinic, copy)
    con = duckanon.connect(str(copy))
    entry = listing(con)['"clinic_2024"."main"."t_anon"']
    assert (entry["status"], entry["source"], entry["current_rows"]) == ("current", '"clinic_2024"."main"."t"', 30)
    con.execute(APPEND)
    [row] = result(con, "REFRESH t_anon")
    assert (row["target"], row["source_rows_after"], row["entry"]) == ('"clinic_2024"."main"."t_anon"', 36, "updated")
    con.close()
    original = duckanon.connect(str(clinic))  # the original is untouched
    assert count(original, "t_anon") == 30 and listing(original)['"clinic"."main"."t_anon"']["status"] == "current"
    original.close()


def test_a_file_attached_under_another_alias_keeps_its_registry(clinic):
    con = duckanon.connect()
    con.execute(f"ATTACH '{clinic}' AS other")
    entry = listing(con)['"other"."main"."t_anon"']
    assert (entry["status"], entry["source"], entry["registry"]) == ("current", '"other"."main"."t"', "other")
    con.execute(APPEND.replace("INTO t", "INTO other.t"))
    assert listing(con)['"other"."main"."t_anon"']["status"] == "stale"
    [row] = result(con, "REFRESH other.t_anon")
    assert (row["source_rows_after"], row["committed_in"]) == (36, "other")
    assert check_table(con, "other.t_anon", "other.t", QI, k=3) == []
    con.close()


# ----------------------------------------------------------------------------- 10. a user's own duckanon_publications

@pytest.mark.parametrize("own", [
    "CREATE TABLE duckanon_publications (id INTEGER, note VARCHAR); INSERT INTO duckanon_publications VALUES (1, 'mine')",
    "CREATE TABLE duckanon_publications AS SELECT 'x' AS target, 'y' AS source",
    "CREATE VIEW duckanon_publications AS SELECT 1 AS id",
    # duckanon's exact columns but not its mark
    "CREATE TABLE duckanon_publications (" + ", ".join(f'"{n}" {k}' for n, k in registry.COLUMNS.items()) + ")",
])
def test_a_users_own_table_named_duckanon_publications_is_never_adopted(tmp_path, own):
    path = tmp_path / "mine.duckdb"
    with duckdb.connect(str(path)) as raw:
        raw.execute(SETUP[0])
        raw.execute(own)
        mine = raw.execute("SELECT * FROM duckanon_publications").fetchall()
        columns = raw.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                              "'duckanon_publications'").fetchall()
    con = duckanon.connect(str(path))  # opens
    assert listing(con) == {}
    note = summary_details(con, PUBLISH)["registry"]
    assert note == "not recorded: mine.main.duckanon_publications is a table duckanon did not make (left untouched)"
    assert check_table(con, "t_anon", "t", QI, k=3) == []
    assert listing(con) == {}
    assert_refused_and_unchanged(con, "REFRESH t_anon", r"^REFRESH t_anon: it was not published by ANONYMIZE")
    assert result(con, "REFRESH ALL") == []
    assert con.execute("SELECT * FROM duckanon_publications").fetchall() == mine
    assert con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                       "'duckanon_publications'").fetchall() == columns
    con.close()


def test_duckanons_registry_is_marked(clinic):
    with duckdb.connect(str(clinic)) as raw:
        assert raw.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'duckanon_publications'"
                           ).fetchone() == ('duckanon registry {"format": 2}',)
        assert raw.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'duckanon_publications' "
                           "ORDER BY column_index").fetchall() == [(c,) for c in registry.COLUMNS]


# ----------------------------------------------------------------------------- the statement as data

def test_the_entry_holds_the_bound_statement_and_refresh_rebuilds_it(tmp_path):
    con = duckanon.connect()
    con.execute(SETUP[0])
    con.execute("CREATE TABLE pop AS SELECT * FROM t UNION ALL SELECT * FROM t")
    statement = ("ANONYMIZE t INTO \"pub\"\"x\" WITH (k = 2, l = 2, qi = (a, b), sensitive = s, method = 'lattice', "
                 "hierarchies = (a = 'intervals(2, 4)', b = 'prefix'), suppression_limit = 0.1, metric = 'loss', "
                 "weights = (a = 2), keep = (), seed = 3)").replace("keep = (), ", "")
    con.execute(statement)
    [stored] = con.execute("SELECT statement FROM duckanon_publications").fetchone()
    stored = json.loads(stored)
    assert len(stored.pop("release")) == 32  # the release's random id, also on the target's comment
    assert stored == {"format": 2, "options": [
        ["k", 2], ["l", 2], ["qi", ["a", "b"]], ["sensitive", ["s"]], ["method", "lattice"],
        ["hierarchies", {"a": "intervals(2, 4)", "b": "prefix"}], ["suppression_limit", 0.1], ["metric", "loss"],
        ["weights", {"a": 2.0}], ["seed", 3]]}
    before = con.execute('SELECT * FROM "pub""x"').fetchall()
    [row] = result(con, 'REFRESH "pub""x"')
    assert con.execute('SELECT * FROM "pub""x"').fetchall() == before  # same seed, same data: the same release
    assert row["source_rows_after"] == 30
    con.close()


def test_refresh_refuses_a_target_database_that_is_detached_or_read_only(tmp_path):
    clinic, release = tmp_path / "clinic.duckdb", tmp_path / "release.duckdb"
    con = duckanon.connect(str(clinic))
    con.execute(SETUP[0])
    con.execute(f"ATTACH '{release}' AS release")
    con.execute("ANONYMIZE t INTO release.pub WITH (k = 3, qi = (a, b))")
    con.execute(APPEND)
    con.execute("DETACH release")
    # REFRESH ALL refreshes what it reaches and says what it could not (issue 35 follow-up, D6)
    [row] = result(con, "REFRESH ALL")
    assert (row["committed_in"], row["entry"]) == (None, "not refreshed: its target's database release is not attached "
                                                         "(ATTACH it AS release)")
    assert_refused_and_unchanged(con, "REFRESH release.pub", r"^REFRESH release\.pub: its target's database release is "
                                                             r"not attached \(ATTACH it AS release\); nothing was changed$")
    con.execute(f"ATTACH '{release}' AS release (READ_ONLY)")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH release\.pub: its target's database release is "
                                                      r"read-only; nothing was changed$"):
        con.execute("REFRESH release.pub")
    assert count(con, "release.pub") == 30
    con.close()
    reader = duckanon.connect(str(release))  # the registry is in clinic, attached read-only
    reader.execute(f"ATTACH '{clinic}' AS clinic (READ_ONLY)")
    assert listing(reader)['"release"."main"."pub"']["status"] == ("stale (not refreshable: its registry's database "
                                                                   "clinic is read-only)")
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH pub: its registry entry is in database clinic, which "
                                                      r"is read-only; nothing was changed$"):
        reader.execute("REFRESH pub")
    assert count(reader, "pub") == 30
    reader.close()


def test_anonymize_across_databases_inside_a_transaction_says_it_was_not_recorded(two_files):
    con = two_files
    con.execute("BEGIN")
    note = summary_details(con, "ANONYMIZE t INTO release.pub WITH (k = 3, qi = (a, b))")["registry"]
    con.execute("COMMIT")
    assert note == ("not recorded: the target is in another database than the source, and the caller's transaction "
                    "may write one database only")
    assert count(con, "release.pub") == 30 and listing(con) == {}
