"""REFRESH reads the hierarchy tables resolved at publish time (issue 35, item 6): a `table(name)`
hierarchy is kept in the entry as identifier parts, so a later USE, search_path, TEMP table or a
table of the same name in another schema changes nothing; a dropped one is refused; hostile parts
are listed corrupt and never run."""

from __future__ import annotations

import json

import duckdb
import pytest

import duckanon
from duckanon.pipeline import registry

from support.checks import check_table
from support.database import database_file
from support.refusals import assert_refused_and_unchanged

SETUP = ("CREATE TABLE p AS SELECT (13050 + i % 6)::VARCHAR AS zipcode, ['flu', 'cold', 'hiv'][1 + i % 3] AS disease "
         "FROM range(60) r(i)",
         "CREATE TABLE zh AS SELECT (13050 + i)::VARCHAR AS value, '1305*' AS level1, '*' AS level2 FROM range(10) r(i)",
         "CREATE TABLE victim AS SELECT 1 AS v")
PUBLISH = ("ANONYMIZE p INTO p_anon WITH (k = 20, qi = (zipcode), sensitive = disease, method = 'lattice', "
           "hierarchies = (zipcode = 'table(zh)'), suppression_limit = 0, seed = 3)")
APPEND = "INSERT INTO memory.main.p SELECT * FROM memory.main.p LIMIT 6"
# another table that `zh` names once the session changes: its labels must never be published
OTHER = "SELECT value, '{label}' AS level1, '{label}2' AS level2 FROM memory.main.zh"


def listing(con) -> dict:
    cursor = con.execute("SELECT * FROM duckanon_publications()")
    names = [d[0] for d in cursor.description]
    return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


def labels(con, table: str = "memory.main.p_anon") -> list[str]:
    return [value for (value,) in con.execute(f"SELECT DISTINCT zipcode FROM {table} ORDER BY 1").fetchall()]


def stored_statement(con, database: str = "memory") -> dict:
    [(text,)] = con.execute(f'SELECT statement::VARCHAR FROM "{database}".main.duckanon_publications').fetchall()
    return json.loads(text)


@pytest.fixture
def db():
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    con.execute(PUBLISH)
    assert labels(con) == ["1305*"]
    assert stored_statement(con)["hierarchy_tables"] == {"zipcode": [None, "main", "zh"]}
    con.execute("CREATE SCHEMA s2")
    con.execute(f"CREATE TABLE s2.zh AS {OTHER.format(label='S2')}")
    yield con
    con.close()


@pytest.mark.parametrize("change", ["USE memory.s2", "SET search_path = 's2'", "TEMP", "TEMP and USE"])
def test_refresh_reads_the_hierarchy_table_of_the_release(db, change):
    if change.startswith("TEMP"):
        db.execute(f"CREATE TEMP TABLE zh AS {OTHER.format(label='TEMP')}")
        assert db.execute("SELECT DISTINCT level1 FROM zh").fetchall() == [("TEMP",)]  # the session's zh now
    if change != "TEMP":
        db.execute("USE memory.s2" if change == "TEMP and USE" else change)
    db.execute(APPEND)
    [row] = db.execute("REFRESH memory.main.p_anon").fetchall()
    assert row[0] == '"memory"."main"."p_anon"'
    assert labels(db) == ["1305*"]
    assert db.execute("SELECT count(*) FROM memory.main.p_anon").fetchone() == (66,)
    assert check_table(db, "memory.main.p_anon", "memory.main.p", ["zipcode"], k=20) == []
    assert listing(db)['"memory"."main"."p_anon"']["status"] == "current"
    assert stored_statement(db)["hierarchy_tables"] == {"zipcode": [None, "main", "zh"]}  # kept as resolved


def test_a_format_2_entry_without_the_resolved_parts_reads_the_name_again(db):
    """An entry written before the parts were kept: today's behaviour, the name in this session."""
    data = stored_statement(db)
    del data["hierarchy_tables"]
    cursor = db.execute(f"SELECT {', '.join(registry.COLUMNS)} FROM memory.main.duckanon_publications")
    row = dict(zip(registry.COLUMNS, cursor.fetchone()))
    row["statement"] = json.dumps(data, sort_keys=True)
    row["entry_digest"] = registry.digest(row)
    db.execute("UPDATE memory.main.duckanon_publications SET statement = ?, entry_digest = ?",
               [row["statement"], row["entry_digest"]])
    db.execute("SET search_path = 's2'")
    db.execute(APPEND)
    db.execute("REFRESH memory.main.p_anon")
    assert labels(db) == ["S2"]


def test_a_dropped_hierarchy_table_is_refused_and_nothing_changes(db):
    db.execute(APPEND)
    db.execute("DROP TABLE memory.main.zh")
    db.execute("CREATE TEMP TABLE zh AS SELECT * FROM memory.s2.zh")  # a zh the session could read instead
    assert_refused_and_unchanged(db, "REFRESH memory.main.p_anon",
                                 r"^REFRESH memory\.main\.p_anon: its hierarchy table memory\.main\.zh of column "
                                 r"zipcode no longer exists; nothing was changed$")
    assert labels(db) == ["1305*"]
    assert db.execute("SELECT count(*) FROM memory.main.p_anon").fetchone() == (60,)
    cursor = db.execute("REFRESH ALL")  # its row says why; nothing is committed for it
    names = [d[0] for d in cursor.description]
    [row] = [dict(zip(names, values)) for values in cursor.fetchall()]
    assert (row["target"], row["committed_in"], row["entry"]) == (
        '"memory"."main"."p_anon"', None,
        "not refreshed: its hierarchy table memory.main.zh of column zipcode no longer exists")
    assert labels(db) == ["1305*"]
    assert db.execute("SELECT count(*) FROM memory.main.p_anon").fetchone() == (60,)


def test_one_spec_for_every_qi_naming_a_table_is_kept_resolved_too():
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    con.execute("CREATE TABLE h_zipcode AS SELECT * FROM zh")
    con.execute(PUBLISH.replace("(zipcode = 'table(zh)')", "'table(h_{column})'"))
    assert labels(con) == ["1305*"]
    assert stored_statement(con)["hierarchy_tables"] == {"zipcode": [None, "main", "h_zipcode"]}
    con.execute("CREATE SCHEMA s2")
    con.execute(f"CREATE TABLE s2.h_zipcode AS {OTHER.format(label='S2')}")
    con.execute("SET search_path = 's2'")
    con.execute(APPEND)
    con.execute("REFRESH memory.main.p_anon")
    assert labels(con) == ["1305*"]
    con.close()


def test_a_temporary_hierarchy_table_is_not_recorded():
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    con.execute("CREATE TEMP TABLE tzh AS SELECT * FROM zh")
    cursor = con.execute(PUBLISH.replace("table(zh)", "table(tzh)"))
    details = json.loads(dict(zip([d[0] for d in cursor.description], cursor.fetchone()))["details"])
    assert details["registry"] == ("not recorded: the hierarchy table of column zipcode is temporary (a TEMP table or "
                                   "view): it ends with the connection, and REFRESH reads the hierarchy tables the "
                                   "release was made with")
    assert listing(con) == {}
    assert labels(con) == ["1305*"]
    con.close()


def test_a_hierarchy_table_in_another_database_is_kept_by_its_alias(tmp_path):
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    con.execute(f"ATTACH '{tmp_path / 'h.duckdb'}' AS hdb")
    con.execute("CREATE TABLE hdb.main.zh AS SELECT * FROM memory.main.zh")
    con.execute("UPDATE memory.main.zh SET level1 = 'LOCAL'")
    con.execute(PUBLISH.replace("table(zh)", "table(hdb.zh)"))
    assert labels(con) == ["1305*"]
    assert stored_statement(con)["hierarchy_tables"] == {"zipcode": ["hdb", "main", "zh"]}
    con.execute("USE hdb")
    con.execute(APPEND)
    con.execute("REFRESH memory.main.p_anon")
    assert labels(con) == ["1305*"]
    con.execute("USE memory")
    con.execute("DETACH hdb")
    con.execute(APPEND)
    assert_refused_and_unchanged(con, "REFRESH memory.main.p_anon",
                                 r"^REFRESH memory\.main\.p_anon: its hierarchy table hdb\.main\.zh of column zipcode "
                                 r"is in database hdb, which is not attached; nothing was changed$")
    con.close()


def test_a_hierarchy_table_named_with_commas_and_quotes_is_read_back_as_its_parts(tmp_path):
    con = duckanon.connect()
    for statement in SETUP:
        con.execute(statement)
    con.execute("""CREATE TABLE "h,1 'x'" AS SELECT * FROM zh""")
    con.execute("UPDATE zh SET level1 = 'PLAIN'")
    con.execute(PUBLISH.replace("table(zh)", """table(''"h,1 ''''x''''"'')"""))
    assert labels(con) == ["1305*"]
    assert stored_statement(con)["hierarchy_tables"] == {"zipcode": [None, "main", "h,1 'x'"]}
    con.execute(APPEND)
    con.execute("REFRESH memory.main.p_anon")
    assert labels(con) == ["1305*"]
    con.close()


# ----------------------------------------------------------------------------- hostile parts, with a valid digest

LEAK = "@LEAK@"


def _forge(path, tmp_path, hierarchy_tables) -> None:
    """Write `hierarchy_tables` into the entry's statement and recompute the digest (a forger)."""
    with duckdb.connect(str(path)) as raw:
        cursor = raw.execute(f"SELECT {', '.join(registry.COLUMNS)} FROM duckanon_publications")
        row = dict(zip(registry.COLUMNS, cursor.fetchone()))
        data = json.loads(row["statement"])
        data["hierarchy_tables"] = json.loads(json.dumps(hierarchy_tables).replace(LEAK, str(tmp_path / "leak.csv")))
        row["statement"] = json.dumps(data, sort_keys=True)
        row["entry_digest"] = registry.digest(row)
        raw.execute("UPDATE duckanon_publications SET statement = ?, entry_digest = ?",
                    [row["statement"], row["entry_digest"]])


@pytest.fixture
def clinic(tmp_path):
    return database_file(tmp_path / "clinic.duckdb", [*SETUP, PUBLISH])


INJECTION = f"zh\"; COPY (SELECT 42) TO '{LEAK}'; DROP TABLE victim; --"
CORRUPT_PARTS = [
    "not an object", {}, {"zipcode": [None, "main"]}, {"zipcode": [None, "main", "zh", "x"]},
    {"zipcode": [1, "main", "zh"]}, {"zipcode": [None, "main", ""]}, {"zipcode": [None, None, "zh"]},
    {"zipcode": [None, "main", "h_{column}"]}, {"zipcode": "table(zh); DROP TABLE victim"},
    {"disease": [None, "main", "zh"]},  # a column the statement gives no hierarchy
    {"zipcode": [None, "main", ["zh"]]}, {"": [None, "main", "zh"]},
]


@pytest.mark.parametrize("parts", CORRUPT_PARTS, ids=[json.dumps(p)[:40] for p in CORRUPT_PARTS])
def test_hostile_hierarchy_parts_are_listed_corrupt_and_never_run(clinic, tmp_path, parts):
    _forge(clinic, tmp_path, parts)
    con = duckanon.connect(str(clinic))
    [entry] = listing(con).values()
    assert (entry["status"], entry["source"]) == ("corrupt", None)
    con.execute(APPEND.replace("memory", "clinic"))
    assert_refused_and_unchanged(
        con, "REFRESH p_anon", r"^REFRESH p_anon: its registry entry in database clinic is corrupt \(it does not "
                               r"read back as duckanon's structure, so it is never run\); publish it again with "
                               r"ANONYMIZE$")
    assert con.execute("REFRESH ALL").fetchall() == []
    assert con.execute("SELECT count(*) FROM victim").fetchone() == (1,)
    assert not (tmp_path / "leak.csv").exists()
    con.close()


def test_an_injection_in_a_valid_part_is_a_name_never_sql(clinic, tmp_path):
    _forge(clinic, tmp_path, {"zipcode": [None, "main", INJECTION]})
    con = duckanon.connect(str(clinic))
    [entry] = listing(con).values()
    assert entry["status"] == "current"
    con.execute(APPEND.replace("memory", "clinic"))
    with pytest.raises(duckanon.AnonymizeError, match=r"^REFRESH clinic\.main\.p_anon: its hierarchy table clinic\.main\..* of "
                                                      r"column zipcode no longer exists; nothing was changed$"):
        con.execute("REFRESH p_anon")
    assert con.execute("SELECT count(*) FROM victim").fetchone() == (1,)
    assert not (tmp_path / "leak.csv").exists()
    con.close()
