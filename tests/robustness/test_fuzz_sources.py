"""Guarantee fuzzing over where the data comes from and where it goes: source kinds (base tables,
views, sampling and random() views, temp tables, attached databases, search paths), collations
on text QIs (column collations and `default_collation`), and spellings of the target, including
spellings that name the source itself (which must be refused with the database unchanged).

Each published table is checked in plain SQL written here: grouped by its published strings
(byte-exact: COLLATE "binary") every class has at least k rows, the row count is the summary's
`published_rows`, and for deterministic sources the sensitive multiset is the source's.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon

SPELLINGS = ["Ann", "ann", "ANN", "Änn", "änn", "Bob", "bob", "BOB", "Cé", "ce", "CE", None]
COLLATIONS = [None, "NOCASE", "NOACCENT", "NOCASE.NOACCENT", "NFC"]
SOURCE_KINDS = ["table", "view", "sample_view", "random_view", "temp_table", "attached", "search_path"]
# A deterministic source reads the same rows every time; these do not (USING SAMPLE, random()).
RANDOM_KINDS = {"sample_view", "random_view"}


@st.composite
def cases(draw):
    n = draw(st.integers(0, 40))
    rows = [(draw(st.sampled_from(SPELLINGS)), draw(st.integers(0, 3)), draw(st.sampled_from(["x", "y", "z"])), i)
            for i in range(n)]
    return {
        "rows": rows,
        "collation": draw(st.sampled_from(COLLATIONS)),
        "default_collation": draw(st.sampled_from([None, "nocase", "noaccent"])),
        "kind": draw(st.sampled_from(SOURCE_KINDS)),
        "target": draw(st.sampled_from(["default", "plain", "schema", "catalog", "same"])),
        "keep": draw(st.booleans()),
        "k": draw(st.integers(1, 4)),
        "seed": draw(st.integers(0, 2**40)),
    }


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def setup(con, case) -> tuple[str, str, str | None]:
    """Create the source as drawn; return (source as written in the statement, the object that
    holds the rows for checks, the INTO spelling or None)."""
    raw = con.duckdb
    collate = f" COLLATE {case['collation']}" if case["collation"] else ""
    raw.execute(f"CREATE OR REPLACE TABLE memory.main.base (name VARCHAR{collate}, grp INTEGER, s VARCHAR, id INTEGER)")
    if case["rows"]:
        raw.executemany("INSERT INTO memory.main.base VALUES (?, ?, ?, ?)", case["rows"])
    kind = case["kind"]
    if kind == "table":
        source, rows = "base", "memory.main.base"
    elif kind == "view":
        raw.execute("CREATE VIEW memory.main.v AS SELECT * FROM memory.main.base")
        source, rows = "v", "memory.main.v"
    elif kind == "sample_view":
        raw.execute("CREATE VIEW memory.main.v AS SELECT * FROM memory.main.base USING SAMPLE 50 PERCENT (bernoulli)")
        source, rows = "v", None
    elif kind == "random_view":
        raw.execute("CREATE VIEW memory.main.v AS SELECT * FROM memory.main.base WHERE random() < 0.5")
        source, rows = "v", None
    elif kind == "temp_table":
        raw.execute("CREATE TEMP TABLE base AS SELECT * FROM memory.main.base")  # shadows main.base
        raw.execute("DELETE FROM memory.main.base WHERE id % 2 = 0")  # so reading the wrong one shows
        source, rows = "base", "temp.main.base"
    elif kind == "attached":
        raw.execute("ATTACH ':memory:' AS d2")
        raw.execute("CREATE TABLE d2.main.t AS SELECT * FROM memory.main.base")
        source, rows = "d2.t", "d2.main.t"
    else:  # search_path: an unqualified name found in another schema
        raw.execute("CREATE SCHEMA memory.other")
        raw.execute("CREATE TABLE memory.other.t AS SELECT * FROM memory.main.base")
        raw.execute("SET search_path = 'memory.main,memory.other'")
        source, rows = "t", "memory.other.t"
    into = {
        "default": None,
        "plain": "published",
        "schema": "main.published",
        "catalog": "memory.main.published",
        "same": {"table": "memory.main.base", "view": "memory.main.v", "sample_view": "memory.main.v",
                 "random_view": "memory.main.v", "temp_table": "temp.main.base", "attached": "d2.main.t",
                 "search_path": "memory.other.t"}[kind],
    }[case["target"]]
    return source, rows, into


def reset(con) -> None:
    raw = con.duckdb
    raw.execute("USE memory")
    raw.execute("RESET search_path")
    raw.execute("RESET default_collation")
    if raw.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = 'd2'").fetchone()[0]:
        raw.execute("DETACH d2")
    raw.execute("DROP SCHEMA IF EXISTS memory.other CASCADE")
    for schema, name, temporary in raw.execute("SELECT schema_name, table_name, temporary FROM duckdb_tables()").fetchall():
        raw.execute(f"DROP TABLE {'temp' if temporary else 'memory'}.{q(schema)}.{q(name)}")
    for schema, name in raw.execute("SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        raw.execute(f"DROP VIEW memory.{q(schema)}.{q(name)}")


def state(con) -> list:
    """Every table and view with its row count, checksum and comment."""
    raw = con.duckdb
    objects = []
    for database, schema, name, comment in raw.execute(
            "SELECT database_name, schema_name, table_name, comment FROM duckdb_tables() ORDER BY ALL").fetchall():
        full = f"{q(database)}.{q(schema)}.{q(name)}"
        objects.append((full, comment, raw.execute(f"SELECT count(*), sum(hash(t::VARCHAR)) FROM {full} AS t").fetchone()))
    return objects + raw.execute("SELECT database_name, schema_name, view_name FROM duckdb_views() "
                                 "WHERE NOT internal ORDER BY ALL").fetchall()


_CON = None


def connection():
    global _CON
    if _CON is None:
        _CON = duckanon.connect()
    return _CON


@settings(deadline=None, max_examples=60, suppress_health_check=list(HealthCheck))
@given(cases())
def test_sources_collations_and_targets(case):
    con = connection()
    reset(con)
    raw = con.duckdb
    source, rows, into = setup(con, case)
    if case["default_collation"]:
        raw.execute(f"SET default_collation = '{case['default_collation']}'")
    keep = ", keep = id" if case["keep"] else ""
    target_clause = f" INTO {into}" if into else ""
    statement = (f"ANONYMIZE {source}{target_clause} WITH (k = {case['k']}, qi = (name, grp), sensitive = s{keep}, "
                 f"seed = {case['seed']})")
    before = state(con)
    if case["target"] == "same":
        with pytest.raises(duckanon.AnonymizeError) as refused:
            con.execute(statement)
        assert "\n" not in str(refused.value) and "is the source" in str(refused.value), str(refused.value)
        assert state(con) == before
        return
    try:
        summary = con.execute(statement).fetchone()
    except duckanon.AnonymizeError as refused:
        message = str(refused)
        assert "\n" not in message
        assert state(con) == before
        # the only acceptable refusal here: fewer than k rows to publish
        assert "rows" in message and ("fewer than" in message or "k =" in message), (statement, message)
        return
    names = [d[0] for d in con.description]
    result = dict(zip(names, summary))
    target = result["target"]
    published = f"(SELECT name COLLATE \"binary\" AS name, grp::VARCHAR COLLATE \"binary\" AS grp, s{', id' if case['keep'] else ''} " \
                f"FROM {target})"
    count, smallest = raw.execute(f"SELECT sum(c), min(c) FROM (SELECT count(*) AS c FROM {published} "
                                  "GROUP BY name, grp)").fetchone()
    assert (count or 0) == result["published_rows"], (statement, count, result)
    if count:
        assert smallest >= case["k"], (statement, smallest)
    if rows is not None:  # deterministic source: the sensitive multiset is the source's
        difference = raw.execute(f"""SELECT count(*) FROM (
            (SELECT s COLLATE "binary" FROM {rows} EXCEPT ALL SELECT s COLLATE "binary" FROM {target})
            UNION ALL (SELECT s COLLATE "binary" FROM {target} EXCEPT ALL SELECT s COLLATE "binary" FROM {rows}))""").fetchone()[0]
        assert difference == 0 or result["removed_rows"], (statement, difference)
        if case["keep"]:  # row by row: the published name is the row's own spelling or '*'
            wrong = raw.execute(f"""SELECT count(*) FROM {target} AS p JOIN {rows} AS r ON p.id = r.id
                WHERE NOT (p.name = '*' OR p.name COLLATE "binary" IS NOT DISTINCT FROM CAST(r.name AS VARCHAR) COLLATE "binary")
                   OR p.s IS DISTINCT FROM r.s""").fetchone()[0]
            # a class's one published spelling may differ from a row's own spelling under a
            # collation: then it is one spelling for the whole class, which the k check covers
            if not case["collation"] and not case["default_collation"]:
                assert wrong == 0, statement
    # the provenance comment is on the published table and nowhere else
    commented = raw.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() "
                            "WHERE comment LIKE 'duckanon {%'").fetchall()
    assert len(commented) == 1, commented
