"""Trust: the target never overwrites what the source reads under another spelling, the published
table (and no other) receives the provenance comment, no error message shows a value of the
source, and statements ANONYMIZE cannot take are refused in one line of user terms.

Names are compared as the objects DuckDB resolves them to (temp schema, search path, USE,
attached databases), checked here against DuckDB itself: the object a CREATE TABLE really makes,
and the rows a SELECT of the written name really reads."""

from __future__ import annotations

import re

import duckdb
import pytest

import duckanon
from duckanon.backends.duckdb_names import _resolve_read, _Session, resolved
from duckanon.sql import split_statements
from duckanon.sql.parser import parse_statement
from duckanon.sql.statement import TableName

from support.database import qident, result_row

pytestmark = pytest.mark.e2e

K2 = "WITH (k = 2, sensitive = disease)"


def snapshot(con) -> tuple:
    """Every table (all databases, temp too) with its comment and rows, every view with its
    definition and comment, and the session's name resolution settings."""
    raw = con.duckdb if hasattr(con, "duckdb") else con
    tables = raw.execute("SELECT database_name, schema_name, table_name, comment FROM duckdb_tables() "
                         "ORDER BY ALL").fetchall()
    contents = {t[:3]: sorted(map(repr, raw.execute(f"SELECT * FROM {'.'.join(map(qident, t[:3]))}").fetchall()))
                for t in tables}
    views = raw.execute("SELECT database_name, schema_name, view_name, sql, comment FROM duckdb_views() "
                        "WHERE NOT internal ORDER BY ALL").fetchall()
    session = raw.execute("SELECT current_database(), current_schema(), current_setting('search_path')").fetchone()
    return tables, contents, views, session


def refused(con, statement: str) -> str:
    """The one-line message `statement` is refused with; the database is exactly as it was."""
    before = snapshot(con)
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute(statement)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert snapshot(con) == before
    return message


@pytest.fixture
def db(con):
    """hospital in memory.main; d2 and d3 attached, each with a copy `t`; d2 has a schema s with
    another copy; an earlier release that every refusal must leave alone."""
    raw = con.duckdb
    raw.execute("ATTACH ':memory:' AS d2")
    raw.execute("ATTACH ':memory:' AS d3")
    raw.execute("CREATE SCHEMA d2.s")
    for table in ("d2.main.t", "d3.main.t", "d2.s.t"):
        raw.execute(f"CREATE TABLE {table} AS SELECT * FROM memory.main.hospital")
    con.execute(f"ANONYMIZE hospital {K2}")
    return con


# --------------------------------------------------------------------------- item 4: spellings of the source


SAME = "the target {target} is the source table {source}: choose another name with INTO"

SPELLINGS = [
    # (setup, statement, message)
    ([], f"ANONYMIZE hospital INTO hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    ([], f"ANONYMIZE hospital INTO main.hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    ([], f"ANONYMIZE hospital INTO memory.hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    ([], f"ANONYMIZE hospital INTO memory.main.hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    ([], f'ANONYMIZE hospital INTO "HOSPITAL" {K2}', SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    ([], f"ANONYMIZE Memory.Main.Hospital INTO hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    (["USE d2"], f"ANONYMIZE memory.hospital INTO memory.main.hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
    (["SET search_path = 'd2.main'"], f"ANONYMIZE t INTO d2.t {K2}", SAME.format(target="d2.main.t", source="d2.main.t")),
    (["SET search_path = 'd2'"], f"ANONYMIZE t INTO t {K2}", SAME.format(target="d2.main.t", source="d2.main.t")),
    (["SET search_path = 'd2.s'"], f"ANONYMIZE t INTO s.t {K2}", SAME.format(target="d2.s.t", source="d2.s.t")),
    (["SET search_path = 'd2.s,d2.main'"], f"ANONYMIZE t INTO d2.t {K2}", SAME.format(target="d2.s.t", source="d2.s.t")),
    (["USE d3"], f"ANONYMIZE t INTO d3.t {K2}", SAME.format(target="d3.main.t", source="d3.main.t")),
    (["USE d3"], f"ANONYMIZE t INTO main.t {K2}", SAME.format(target="d3.main.t", source="d3.main.t")),
    (["USE d3"], f"ANONYMIZE d3.t INTO t {K2}", SAME.format(target="d3.main.t", source="d3.main.t")),
    ([], f"ANONYMIZE d2.t INTO d2.main.t {K2}", SAME.format(target="d2.main.t", source="d2.main.t")),
    ([], f"ANONYMIZE d2.main.t INTO d2.t {K2}", SAME.format(target="d2.main.t", source="d2.main.t")),
    (["CREATE TEMP TABLE x AS SELECT * FROM hospital"], f"ANONYMIZE x INTO temp.main.x {K2}",
     SAME.format(target="temp.main.x", source="temp.main.x")),
    # the source reads the target through views
    (["CREATE VIEW v AS SELECT * FROM hospital"], f"ANONYMIZE v INTO hospital {K2}",
     "the target memory.main.hospital is read by the source view memory.main.v: choose another name with INTO"),
    (["CREATE VIEW v AS SELECT * FROM hospital"], f"ANONYMIZE v INTO v {K2}",
     "the target memory.main.v is the source view memory.main.v: choose another name with INTO"),
    (["CREATE VIEW v1 AS SELECT * FROM d2.t", "CREATE VIEW v2 AS SELECT * FROM v1 WHERE age > 0"],
     f"ANONYMIZE v2 INTO d2.t {K2}",
     "the target d2.main.t is read by the source view memory.main.v2: choose another name with INTO"),
    (["CREATE TEMP VIEW hospital AS SELECT * FROM memory.main.hospital"], f"ANONYMIZE hospital INTO memory.main.hospital {K2}",
     "the target memory.main.hospital is read by the source view temp.main.hospital: choose another name with INTO"),
    (["CREATE VIEW j AS SELECT h.* FROM hospital h JOIN d3.t USING (zipcode, age, education, disease)"],
     f"ANONYMIZE j INTO d3.main.t {K2}",
     "the target d3.main.t is read by the source view memory.main.j: choose another name with INTO"),
    # a hierarchy table the statement reads
    (["CREATE TABLE h_age AS SELECT DISTINCT age, '*' AS top FROM hospital"],
     "ANONYMIZE hospital INTO h_age WITH (k = 2, qi = (age), method = lattice, hierarchies = (age = 'table(h_age)'))",
     "the target memory.main.h_age is the hierarchy table of column age (table(h_age)): choose another name with INTO"),
    (["CREATE TABLE h_age AS SELECT DISTINCT age, '*' AS top FROM hospital"],
     "ANONYMIZE hospital INTO memory.h_age WITH (k = 2, qi = (age), method = gensup, hierarchies = 'table(h_{column})')",
     "the target memory.main.h_age is the hierarchy table of column age (table(h_age)): choose another name with INTO"),
    # DuckDB itself refuses this spelling of a CREATE as ambiguous
    (["CREATE SCHEMA memory.d2"], f"ANONYMIZE hospital INTO d2.x {K2}",
     "the name d2.x is ambiguous: d2 is both an attached database and a schema of memory; write memory.d2.x or d2.main.x"),
    # the dry run refuses too
    ([], f"EXPLAIN ANONYMIZE hospital INTO memory.hospital {K2}", SAME.format(target="memory.main.hospital", source="memory.main.hospital")),
]


@pytest.mark.parametrize("setup,statement,message", SPELLINGS, ids=[s for _, s, _ in SPELLINGS])
def test_every_spelling_of_the_source_is_refused_and_nothing_changes(db, setup, statement, message):
    for sql in setup:
        db.duckdb.execute(sql)
    assert refused(db, statement) == message


def test_the_sql_function_refuses_the_same(db):
    before = snapshot(db)
    with pytest.raises(duckdb.Error, match=re.escape(SAME.format(target="memory.main.hospital",
                                                                 source="memory.main.hospital"))):
        db.duckdb.execute("SELECT anonymize('ANONYMIZE hospital INTO memory.hospital WITH (k = 2)')").fetchall()
    assert snapshot(db) == before


DIFFERENT = [
    # (setup, statement, the table published, the source read)
    (["CREATE TEMP TABLE x AS SELECT * FROM hospital"], f"ANONYMIZE x INTO x {K2}", "memory.main.x", "temp.main.x"),
    ([], f"ANONYMIZE d2.t {K2}", "d2.main.t_anon", "d2.main.t"),
    (["USE d3"], f"ANONYMIZE t {K2}", "d3.main.t_anon", "d3.main.t"),
    (["USE d3"], f"ANONYMIZE t INTO memory.t {K2}", "memory.main.t", "d3.main.t"),
    (["SET search_path = 'd2.main,memory.main'"], f"ANONYMIZE hospital INTO hospital_pub {K2}",
     "d2.main.hospital_pub", "memory.main.hospital"),
    (["SET search_path = 'd2.s'"], f"ANONYMIZE t INTO main.t {K2}", "d2.main.t", "d2.s.t"),
]


@pytest.mark.parametrize("setup,statement,published,source", DIFFERENT, ids=[s for _, s, _, _ in DIFFERENT])
def test_different_objects_of_one_name_are_published(db, setup, statement, published, source):
    raw = db.duckdb
    for sql in setup:
        raw.execute(sql)
    source_rows = sorted(map(repr, raw.execute(f"SELECT * FROM {source}").fetchall()))
    summary = result_row(db, statement)
    assert summary["target"] == published
    assert sorted(map(repr, raw.execute(f"SELECT * FROM {source}").fetchall())) == source_rows  # untouched
    assert raw.execute(f"SELECT count(*) FROM {published}").fetchone()[0] == summary["rows"] == 10
    catalog, schema, name = published.split(".")
    comment = raw.execute("SELECT comment FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? "
                          "AND table_name = ?", [catalog, schema, name]).fetchone()[0]
    assert comment.startswith("duckanon {")


def test_a_source_found_on_the_search_path_is_read_from_where_it_was_found(db):
    """The source is read fully qualified: the target created on the way (an earlier entry of the
    search path) does not take its place for the steps that read it after the CREATE."""
    raw = db.duckdb
    raw.execute("DELETE FROM d2.main.t WHERE age < 30")  # d2's copy differs from the others
    raw.execute("SET search_path = 'memory.main,d2.main'")
    summary = result_row(db, f"ANONYMIZE t INTO memory.t {K2}")
    rows = raw.execute("SELECT count(*) FROM d2.main.t").fetchone()[0]
    assert summary["target"] == "memory.main.t" and summary["rows"] == rows
    assert raw.execute("SELECT count(*) FROM memory.main.t").fetchone()[0] == rows


def test_resolved_names_the_object_a_select_reads(db):
    raw = db.duckdb
    raw.execute("CREATE TEMP TABLE hospital_anon AS SELECT 1 AS x")
    assert resolved(raw, _table("hospital_anon")).sql() == '"temp"."main"."hospital_anon"'
    assert resolved(db, _table("memory.hospital_anon")).sql() == '"memory"."main"."hospital_anon"'
    raw.execute("USE d3")
    assert resolved(raw, _table("t")).sql() == '"d3"."main"."t"'
    assert resolved(raw, _table("nosuch")).sql() == '"nosuch"'  # not an object: as written


# --------------------------------------------------------------------------- item 5: the comment


def test_a_temp_table_of_the_target_name_gets_no_comment(con):
    raw = con.duckdb
    raw.execute("CREATE TEMP TABLE hospital_anon AS SELECT 1 AS raw_value")
    summary = result_row(con, f"ANONYMIZE hospital {K2}")
    assert summary["target"] == "memory.main.hospital_anon"
    comments = dict(((d, s), c) for d, s, c in raw.execute(
        "SELECT database_name, schema_name, comment FROM duckdb_tables() WHERE table_name = 'hospital_anon'").fetchall())
    assert comments[("temp", "main")] is None
    assert comments[("memory", "main")].startswith("duckanon {")
    assert raw.execute("SELECT * FROM temp.main.hospital_anon").fetchall() == [(1,)]  # untouched
    assert raw.execute("SELECT count(*) FROM memory.main.hospital_anon").fetchone()[0] == 10
    # run again: the same objects again, the temp table still bare
    con.execute(f"ANONYMIZE hospital {K2}")
    assert raw.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'hospital_anon' AND temporary"
                       ).fetchone()[0] is None


def test_the_published_table_is_written_where_the_summary_says(db):
    raw = db.duckdb
    raw.execute("USE d2.s")
    summary = result_row(db, f"ANONYMIZE memory.hospital INTO pub {K2}")
    assert summary["target"] == "d2.s.pub"
    assert raw.execute("SELECT database_name, schema_name FROM duckdb_tables() WHERE table_name = 'pub'"
                       ).fetchall() == [("d2", "s")]


# --------------------------------------------------------------------------- resolution against DuckDB itself


SETUPS = [
    [],
    ["USE d3"],
    ["USE d2.s"],
    ["SET search_path = 'd2.main,memory.main'"],
    ["SET search_path = 'd2.s,memory.main'"],
    ["SET search_path = 'memory.s2,d2.main'"],
    ["SET search_path = 'd2.s,d2.main'"],
    ["CREATE SCHEMA memory.d2"],
    ["CREATE SCHEMA d2.d3"],
    ["USE d2", "CREATE SCHEMA d2.d3"],
    ["SET search_path = 'd2'"],
    ['ATTACH \':memory:\' AS "My Db"', 'CREATE SCHEMA "My Db"."Sch ema"', 'USE "My Db"."Sch ema"'],
]
NAMES = ["x", "main.x", "d2.x", "d3.x", "s.x", "s2.x", "memory.x", "memory.main.x", "d2.s.x", "d2.main.x",
         "MEMORY.x", "temp.x", "system.x", "information_schema.x", '"My Db".x', '"Sch ema".x', "d3.main.x"]


def _session(setup: list[str]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for sql in ["ATTACH ':memory:' AS d2", "ATTACH ':memory:' AS d3", "CREATE SCHEMA d2.s", "CREATE SCHEMA memory.s2",
                "ATTACH ':memory:' AS \"My Db\"", *setup]:
        try:
            con.execute(sql)
        except duckdb.Error:  # "My Db" attached twice
            pass
    return con


def _table(name: str) -> TableName:
    return TableName(parse_statement(f"ANONYMIZE {name} WITH (k = 1)").this)


@pytest.mark.parametrize("setup", SETUPS, ids=[" ; ".join(s) or "default" for s in SETUPS])
def test_the_target_is_the_table_create_would_make(setup):
    """For every spelling: the table DuckDB's CREATE TABLE makes, or an error from both."""
    for name in NAMES:
        con = _session(setup)
        try:
            ours = _Session(con).create_location(_table(name))
        except duckanon.AnonymizeError as error:
            ours = ("refused", str(error))
        before = set(con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables()").fetchall())
        try:
            con.execute(f"CREATE TABLE {name} AS SELECT 1 AS a")
        except duckdb.Error as error:
            made = ("error", str(error).splitlines()[0])
        else:
            (made,) = set(con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables()"
                                      ).fetchall()) - before
        if made[0] == "error":
            # DuckDB refuses: ambiguity we refuse as well; a missing schema or a system/temp catalog
            # fails the same way at the CREATE of our fully qualified name
            if "Ambiguous" in made[1]:
                assert ours[0] == "refused" and "ambiguous" in ours[1], (name, made)
            else:
                with pytest.raises(duckdb.Error):
                    con.execute(f"CREATE TABLE {ours.table_name().sql()} AS SELECT 1 AS a")
        else:
            assert ours != "refused" and (ours.catalog, ours.schema, ours.name) == made, (name, setup, ours, made)
        con.close()


READ_SETUPS = [
    [],
    ["USE d3"],
    ["USE d2.s"],
    ["SET search_path = 'd2.main,memory.main'"],
    ["SET search_path = 'memory.s2,d2.s'"],
    ["CREATE TEMP TABLE x AS SELECT 'temp.main.x' AS label"],
    ["CREATE TEMP VIEW x AS SELECT 'temp view x' AS label"],
    ["CREATE TEMP VIEW x AS SELECT * FROM memory.main.x", "USE d2"],
]
READ_NAMES = ["x", "main.x", "d2.x", "d3.x", "s.x", "s2.x", "memory.x", "d2.s.x", "d2.main.x", "temp.x", "MAIN.X"]


@pytest.mark.parametrize("setup", READ_SETUPS, ids=[" ; ".join(s) or "default" for s in READ_SETUPS])
def test_the_source_is_the_object_select_reads(setup):
    """Tables and views named x everywhere, each giving its own label: the object resolved reads
    what `SELECT * FROM <name as written>` reads."""
    con = _session([])
    for place in ("memory.main", "memory.s2", "d2.main", "d2.s", "d3.main"):
        con.execute(f"CREATE TABLE {place}.x AS SELECT '{place}.x' AS label")
    con.execute("CREATE VIEW d3.main.xv AS SELECT 'd3 view' AS label")
    for sql in setup:
        con.execute(sql)
    session = _Session(con)
    for name in READ_NAMES:
        try:
            expected = con.execute(f"SELECT * FROM {name}").fetchall()
        except duckdb.Error:
            continue  # DuckDB cannot read it: ANONYMIZE says "unknown table" before resolving
        read = _resolve_read(con, session, _table(name))
        assert read.object is not None, name
        assert con.execute(f"SELECT * FROM {read.object.table_name().sql()}").fetchall() == expected, (name, read)


# --------------------------------------------------------------------------- item 12: statements ANONYMIZE cannot take


UNSUPPORTED = [
    ("WITH c AS (SELECT * FROM hospital) ANONYMIZE c WITH (k = 2)",
     "ANONYMIZE reads a table or view: a WITH clause cannot precede it; create a view first "
     "(CREATE TEMP VIEW c AS ...) and anonymize the view"),
    ('WITH RECURSIVE "my c"(a) AS MATERIALIZED (SELECT 1) ANONYMIZE "my c" WITH (k = 2)',
     'ANONYMIZE reads a table or view: a WITH clause cannot precede it; create a view first '
     '(CREATE TEMP VIEW "my c" AS ...) and anonymize the view'),
    ("with c as (select * from hospital), d as (select 1) anonymize c into x with (k = 2)",
     "ANONYMIZE reads a table or view: a WITH clause cannot precede it; create a view first "
     "(CREATE TEMP VIEW c AS ...) and anonymize the view"),
    ("WITH c AS (SELECT * FROM hospital) REPORT hospital_anon FROM c",
     "REPORT reads tables or views: a WITH clause cannot precede it; create a view first "
     "(CREATE TEMP VIEW c AS ...) and report the view"),
    ("EXPLAIN ANALYZE ANONYMIZE hospital WITH (k = 2)",
     "EXPLAIN ANALYZE is not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)"),
    ("explain analyse verbose anonymize hospital with (k = 2)",
     "EXPLAIN ANALYZE is not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)"),
    ("EXPLAIN (ANALYZE, FORMAT JSON) ANONYMIZE hospital WITH (k = 2)",
     "EXPLAIN ANALYZE is not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)"),
    ("EXPLAIN (FORMAT JSON) ANONYMIZE hospital WITH (k = 2)",
     "EXPLAIN options are not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)"),
    ("EXPLAIN VERBOSE ANONYMIZE hospital WITH (k = 2)",
     "EXPLAIN options are not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)"),
    ("EXPLAIN REPORT hospital_anon FROM hospital",
     "EXPLAIN applies to ANONYMIZE only (a dry run): run REPORT without it"),
    ("ANONYMIZE a.b.c.d WITH (k = 2)",
     "syntax error at line 1, column 11: table name a.b.c.d has 4 parts: use catalog.schema.table at most"),
    ("ANONYMIZE hospital INTO memory.main.x.y WITH (k = 2)",
     "syntax error at line 1, column 30: table name memory.main.x.y has 4 parts: use catalog.schema.table at most"),
    ('ANONYMIZE hospital INTO "a"."b"."c"."d"."e" WITH (k = 2)',
     'syntax error at line 1, column 27: table name "a"."b"."c"."d"."e" has 5 parts: use catalog.schema.table at most'),
    ("REPORT hospital_anon FROM memory.main.hospital.x",
     "syntax error at line 1, column 32: table name memory.main.hospital.x has 4 parts: use catalog.schema.table at most"),
]


@pytest.mark.parametrize("statement,message", UNSUPPORTED, ids=[s for s, _ in UNSUPPORTED])
def test_unsupported_forms_are_one_line_in_user_terms(db, statement, message):
    assert refused(db, statement) == message


@pytest.mark.parametrize("statement,message", UNSUPPORTED[:1] + UNSUPPORTED[4:5] + UNSUPPORTED[10:11])
def test_unsupported_forms_through_the_sql_function(db, statement, message):
    before = snapshot(db)
    quoted = statement.replace("'", "''")
    with pytest.raises(duckdb.Error, match=re.escape(message)):
        db.duckdb.execute(f"SELECT anonymize('{quoted}')").fetchall()
    assert snapshot(db) == before


def test_unsupported_forms_stop_a_script(db):
    before = snapshot(db)
    with pytest.raises(duckanon.AnonymizeError, match="^EXPLAIN ANALYZE is not supported"):
        db.execute("SELECT 1; EXPLAIN ANALYZE ANONYMIZE hospital WITH (k = 2); CREATE TABLE after_error AS SELECT 1")
    assert snapshot(db) == before


PLAIN = [
    ("WITH c AS (SELECT 1 AS x) SELECT * FROM c", [(1,)]),
    ("WITH anonymize AS (SELECT 1 AS x) SELECT * FROM anonymize", [(1,)]),
    ("WITH report AS (SELECT 2 AS x) SELECT x FROM report", [(2,)]),
    ("WITH anonymize AS (SELECT 3 AS x) SELECT * FROM (SELECT * FROM anonymize) report", [(3,)]),
    ("WITH c(anonymize) AS (SELECT 4) SELECT anonymize FROM c", [(4,)]),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM r", [(3,)]),
    ("EXPLAIN ANALYZE SELECT 'anonymize'", None),
]


@pytest.mark.parametrize("statement,rows", PLAIN, ids=[s for s, _ in PLAIN])
def test_plain_duckdb_with_and_explain_pass_through_untouched(db, statement, rows):
    assert split_statements(statement) == [(statement, False)]
    result = db.execute(statement).fetchall()
    if rows is not None:
        assert result == rows
    assert split_statements(f"{statement}; ANONYMIZE hospital WITH (k = 2)") == [
        (statement, False), ("ANONYMIZE hospital WITH (k = 2)", True)]


def test_explain_with_comments_between_is_still_explain(db):
    rows = db.execute("-- a comment\nEXPLAIN /* another */ ANONYMIZE hospital INTO pub WITH (k = 2)").fetchall()
    assert dict(rows)["target (not written)"] == '"memory"."main"."pub"'
    assert db.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pub'").fetchone()[0] == 0


# --------------------------------------------------------------------------- item 11: no value in a message


@pytest.fixture
def people(con, tmp_path):
    """A table whose ages 117 and 118 (and no others) are missing from the hierarchy file."""
    raw = con.duckdb
    raw.execute("CREATE TABLE people AS SELECT * FROM (VALUES (30, 'Bachelors', 'flu'), (31, 'Bachelors', 'flu'), "
                "(117, 'Masters', 'hiv'), (118, 'Masters', 'hiv'), (NULL, 'Masters', 'flu'), (30, 'Zebra', 'flu')) "
                "v(age, edu, disease)")
    path = tmp_path / "age.csv"
    path.write_text("30;30-39;*\n31;30-39;*\n;unknown;*\n")
    return con, path


def _listing(message: str) -> str:
    """The query the message suggests, runnable (the engine may name the source, or say <table>)."""
    return message.split("; list them with: ", 1)[1].replace("<table>", "people")


def test_values_missing_from_a_hierarchy_file_are_counted_not_shown(people):
    con, path = people
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (age), sensitive = disease, method = lattice, "
                           f"hierarchies = (age = '{path}'))")
    assert message.startswith(f"2 values of column age are missing from hierarchy {path}; list them with: SELECT ")
    outside_the_path = message.replace(str(path), "")  # (pytest's folder may be pytest-117)
    assert "117" not in outside_the_path and "118" not in outside_the_path
    assert sorted(con.duckdb.execute(_listing(message)).fetchall()) == [(117,), (118,)]


def test_values_missing_from_a_hierarchy_table_are_counted_not_shown(people):
    con, _ = people
    con.duckdb.execute("CREATE TABLE h_age AS SELECT * FROM (VALUES (30, '30-39', '*'), (31, '30-39', '*'), "
                       "(NULL, 'unknown', '*')) v(value, l1, l2)")
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (age), sensitive = disease, method = lattice, "
                           "hierarchies = (age = 'table(h_age)'))")
    assert message.startswith("2 values of column age are missing from hierarchy table h_age; list them with: SELECT ")
    assert "117" not in message and "118" not in message
    assert sorted(con.duckdb.execute(_listing(message)).fetchall()) == [(117,), (118,)]


def test_values_missing_from_an_ordered_hierarchy_are_counted_not_shown(people):
    con, _ = people
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (edu), sensitive = disease, method = lattice, "
                           "hierarchies = (edu = 'ordered(Bachelors, Masters; 2)'))")
    assert message == ("1 value of column edu is missing from hierarchy ordered(2 categories; 2); list it with: "
                       "SELECT DISTINCT edu FROM <table> WHERE encode(CAST(edu AS VARCHAR)) NOT IN (SELECT encode(v) FROM "
                       "(SELECT unnest(['Bachelors', 'Masters'])) h(v))"
                       ).replace("<table>", message.split(" FROM ")[1].split(" WHERE")[0])
    assert "Zebra" not in message
    query = message.split("; list it with: ", 1)[1].replace("<table>", "people")
    assert con.duckdb.execute(query).fetchall() == [("Zebra",)]


def test_builders_name_the_type_not_the_value(people):
    con, _ = people
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (edu), sensitive = disease, method = lattice, "
                           "hierarchies = (edu = 'intervals(5, 10)'))")
    assert message == "intervals need numbers; column edu holds text values"
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (edu), sensitive = disease, method = lattice, "
                           "hierarchies = (edu = 'dates(year)'))")
    assert message == "dates need DATE or TIMESTAMP values; 3 text values of column edu are not a date (YYYY-MM-DD)"


def test_a_bad_hierarchy_file_is_named_by_lines_not_text(people, tmp_path):
    con, _ = people
    path = tmp_path / "bad.csv"
    path.write_text("30;secret-x;*\n31;secret-x;other\n")
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (age), sensitive = disease, method = lattice, "
                           f"hierarchies = (age = '{path}'))")
    assert message == (f"hierarchy {path} is not monotone: lines 1 and 2 have the same label at level 1 but "
                       "different labels at level 2")


def test_sa_order_refusal_counts_the_values(con):
    message = refused(con, "ANONYMIZE hospital WITH (k = 2, t = 0.5, sensitive = disease, t_distance = ordered, "
                           "sa_order = ('Cancer'))")
    assert message.startswith("sa_order does not list 2 ")
    assert "Viral" not in message and "Heart" not in message


def test_the_suggested_query_names_the_source(people):
    con, path = people
    message = refused(con, "ANONYMIZE people WITH (k = 2, qi = (age), sensitive = disease, method = lattice, "
                           f"hierarchies = (age = '{path}'))")
    assert " FROM memory.main.people WHERE " in message


def test_sa_hierarchy_refusal_counts_the_values(con, tmp_path):
    path = tmp_path / "sa.csv"
    path.write_text("Cancer;Serious;*\nFlu;Mild;*\n")
    message = refused(con, "ANONYMIZE hospital WITH (k = 2, t = 0.5, sensitive = disease, t_distance = hierarchical, "
                           f"sa_hierarchy = '{path}')")
    assert "Viral" not in message and "Heart" not in message


def test_missing_values_of_a_nocase_column_are_listed_by_bytes(tmp_path):
    """The attack's B2: bind matches texts byte by byte, so 'ann' lacks the row 'Ann'; the listing
    query compared under the column's NOCASE collation and listed nothing."""
    import duckanon
    path = tmp_path / "h.csv"
    path.write_text("Ann;A;*\nBob;B;*\n")
    con = duckanon.connect()
    con.execute("CREATE TABLE t (z VARCHAR COLLATE NOCASE)")
    con.execute("INSERT INTO t SELECT ['Ann', 'ann', 'Bob', 'bob'][i % 4 + 1] FROM range(20) r(i)")
    with pytest.raises(duckanon.AnonymizeError) as raised:
        con.execute(f"ANONYMIZE t WITH (k = 2, qi = (z), method = lattice, hierarchies = (z = '{path}'))")
    message = str(raised.value).split(" (at line")[0]
    assert message.startswith(f"2 values of column z are missing from hierarchy {path}; list them with: SELECT ")
    assert sorted(con.duckdb.execute(message.split("; list them with: ", 1)[1]).fetchall()) == [("ann",), ("bob",)]


@pytest.mark.parametrize("text, row", [("NULL", "NULL"), ("", '""')])
def test_a_text_spelled_as_null_is_told_it_can_have_no_row(tmp_path, text, row):
    import duckanon
    path = tmp_path / "h.csv"
    path.write_text(f"{row};N;*\nb;B;*\n")
    con = duckanon.connect()
    con.execute(f"CREATE TABLE t AS SELECT ['{text}', 'b'][i % 2 + 1] AS z FROM range(20) r(i)")
    with pytest.raises(duckanon.AnonymizeError) as raised:
        con.execute(f"ANONYMIZE t WITH (k = 2, qi = (z), method = lattice, hierarchies = (z = '{path}'))")
    assert str(raised.value).split(" (at line")[0] == (
        f"a text value of column z is spelled as hierarchy {path} spells NULL (an empty text or NULL), so no row can "
        "stand for it: replace it in the column (e.g. by SQL NULL) or use another hierarchy")
