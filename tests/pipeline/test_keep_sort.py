"""The `keep` path's join back and sort (join_back.publish_select): the join on one hash of the
class keys publishes what the join on the keys does, the QIs packed into part keys come back as
the very strings, and the published order still depends on the published values and the seed only.

Every check compares two ways of publishing the same statement (the faster path against the
plain one it replaces) or reads the published table with plain SQL and Python.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

import duckanon
from duckanon.backends import DuckDBBackend
from duckanon.pipeline import dictionaries as dictionaries_module, join_back, materialize
from duckanon.pipeline.columns import ColumnFacts, column_facts
from duckanon.backends.codings import ARRAY_POSITIONS
from duckanon.pipeline.dictionaries import PACK_LIMIT, Dictionary, part_key_layout
from duckanon.pipeline.keyed import key_hashes_distinct
from duckanon.pipeline.plan import bind
from duckanon.sql import statement_for

ENUM_CODING = DuckDBBackend.string_coding


@pytest.fixture
def db():
    connection = duckanon.connect()
    yield connection, connection.duckdb
    connection.close()


def rows_of(raw, table: str) -> list[tuple]:
    return raw.execute(f'SELECT * FROM "{table}"').fetchall()


def dictionary(size: int) -> Dictionary:
    return Dictionary(tuple(f"v{i}" for i in range(size)), ENUM_CODING)


# --------------------------------------------------------------------------- part keys


def test_part_key_layout_packs_the_small_columns_first_column_highest():
    """Numbers 0 (NULL) .. n take n.bit_length() bits; columns above PACK_LIMIT strings are not
    packed; the first packed column takes the highest bits of its word."""
    layout = part_key_layout({0: dictionary(2), 1: dictionary(60), 2: dictionary(PACK_LIMIT + 1),
                              3: dictionary(PACK_LIMIT)})
    # 2 bits (0..2), 6 bits (0..60), 9 bits (0..256): 17 bits in one word
    assert layout == {0: (0, 15), 1: (0, 9), 3: (0, 0)}


def test_part_keys_spill_into_a_second_word_past_64_bits():
    # eight columns of 255 strings take 8 bits each: one full word; the ninth starts another
    layout = part_key_layout({j: dictionary(255) for j in range(9)})
    assert [layout[j] for j in range(8)] == [(0, 56 - 8 * j) for j in range(8)]
    assert layout[8] == (1, 0)


def test_spark_coding_packs_nothing():
    assert part_key_layout({0: Dictionary(("a", "b"), ARRAY_POSITIONS)}) == {}


def _wide_table(raw, name: str = "t") -> None:
    """600 rows, ten QI columns: nine of 130-138 distinct strings and NULL (8 bits each: a word
    holds seven, the rest go to a second), with quotes and unicode; one of 300 strings (an ENUM,
    above PACK_LIMIT); every row twice (another id) so that k = 2 keeps every value."""
    values = []
    for i in range(300):
        row = [None if i % 61 == 0 else f"c{j}'{i % (130 + j)}é" for j in range(9)] + [f"wide{i}", i % 4, i]
        values.append(row)
        values.append(row[:-1] + [i + 300])
    columns = ", ".join(f"c{j} VARCHAR" for j in range(9))
    raw.execute(f"CREATE OR REPLACE TABLE {name} ({columns}, wide VARCHAR, s INTEGER, id INTEGER)")
    raw.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * 12)})", values)


WIDE = ("ANONYMIZE t WITH (k = 2, qi = (c0, c1, c2, c3, c4, c5, c6, c7, c8, wide), sensitive = s, keep = id, "
        "method = greedy, seed = 3)")


def test_packed_qis_come_back_as_the_strings_the_other_codings_publish(db, monkeypatch):
    """Two part key words, a column above PACK_LIMIT (an ENUM through the sort), NULLs: the same
    published multiset as with nothing packed (ENUMs) and with nothing coded (VARCHARs)."""
    con, raw = db
    _wide_table(raw)
    made = []
    real_layout = dictionaries_module.part_key_layout

    def recording(dictionaries):
        made.append(real_layout(dictionaries))
        return real_layout(dictionaries)

    monkeypatch.setattr(dictionaries_module, "part_key_layout", recording)
    monkeypatch.setattr(join_back, "part_key_layout", recording)
    con.execute(WIDE)
    packed = rows_of(raw, "t_anon")
    assert {word for word, _ in made[-1].values()} == {0, 1} and 9 not in made[-1]
    monkeypatch.setattr(dictionaries_module, "PACK_LIMIT", 0)
    con.execute(WIDE)
    assert made[-1] == {}
    enums = rows_of(raw, "t_anon")
    monkeypatch.setattr(dictionaries_module, "ENUM_LIMIT", 0)
    con.execute(WIDE)
    strings = rows_of(raw, "t_anon")
    assert Counter(packed) == Counter(enums) == Counter(strings)
    assert sum(r[0] is None for r in packed) >= 2 and any("'" in (r[1] or "") and "é" in (r[1] or "") for r in packed)
    assert sorted(r[11] for r in packed) == list(range(600))


def _published_type(raw, table: str, column: str) -> str:
    """The column's type as DuckDB writes the table's CREATE statement, collation included."""
    sql = raw.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0]
    return re.search(rf'\b{column} ([A-Z]+(?: COLLATE [^,)]+)?)', sql).group(1)


@pytest.mark.parametrize("collation", ["NOCASE", '"binary"', "noaccent.nocase"])
def test_a_collated_qi_keeps_its_collation_whatever_carries_it_through_the_sort(db, monkeypatch, collation):
    """A QI declared with a collation is published with it on every path: decoded from its part
    key bits, from an ENUM, carried as the string, and without `keep`. (Decoded from a constant
    list, it used to come back as a plain VARCHAR: under NOCASE, 'Ann' and 'ann' became two values.)"""
    con, raw = db
    raw.execute(f"CREATE TABLE t (n VARCHAR COLLATE {collation}, b INTEGER, s VARCHAR, id INTEGER)")
    raw.execute("INSERT INTO t SELECT ['Ann', 'ann', 'Bob'][i % 3 + 1], i % 2, ['x', 'y'][i % 2 + 1], i "
                "FROM range(60) r(i)")
    statement = "ANONYMIZE t WITH (k = 2, qi = (n, b), sensitive = s, keep = (id), seed = 1)"
    con.execute(statement.replace(", keep = (id)", ""))
    declared = _published_type(raw, "t_anon", "n")
    assert declared.startswith("VARCHAR COLLATE ")
    published = {}
    con.execute(statement)
    published["packed"] = (_published_type(raw, "t_anon", "n"), rows_of(raw, "t_anon"))
    monkeypatch.setattr(dictionaries_module, "PACK_LIMIT", 0)
    con.execute(statement)
    published["enum"] = (_published_type(raw, "t_anon", "n"), rows_of(raw, "t_anon"))
    monkeypatch.setattr(dictionaries_module, "ENUM_LIMIT", 0)
    con.execute(statement)
    published["string"] = (_published_type(raw, "t_anon", "n"), rows_of(raw, "t_anon"))
    assert {kind for kind, _ in published.values()} == {declared}
    assert Counter(published["packed"][1]) == Counter(published["enum"][1]) == Counter(published["string"][1])


def test_strings_with_a_nul_character_are_not_coded(db):
    """The codings write each published string into the statement, and DuckDB 1.5's parser ends a
    string literal at a NUL character: such a column crosses the sort as itself, and publishes the
    same rows as the table holds (on DuckDB 1.5 the statement failed with a parser error)."""
    con, raw = db
    raw.execute("CREATE TABLE t AS SELECT ['x', 'x' || chr(0) || 'y', chr(0), 'z'][i % 4 + 1] AS a, "
                "i % 3 AS b, i AS id FROM range(60) r(i)")
    statement = "ANONYMIZE t WITH (k = 2, qi = (a, b), keep = (id), seed = 1)"
    plan = bind(DuckDBBackend(raw), statement_for(statement))
    con.execute(statement)
    assert Counter(r[0] for r in rows_of(raw, "t_anon")) == Counter(r[0] for r in rows_of(raw, "t"))
    raw.execute("CREATE TEMP TABLE keyed AS SELECT a AS o0, b::VARCHAR AS o1 FROM t")
    backend = DuckDBBackend(raw)
    facts = column_facts(backend, plan.source, plan.published)
    dictionaries = dictionaries_module.published_dictionaries(backend, plan, facts, "keyed", 1)
    assert set(dictionaries) == {1}  # b is coded; a, with its NUL characters, is not


def runs_of(rows: list[tuple], columns: int) -> list[tuple]:
    """The values of the first `columns` columns, once per run of equal values."""
    return [r[:columns] for i, r in enumerate(rows) if i == 0 or r[:columns] != rows[i - 1][:columns]]


def test_rows_sharing_the_packed_qis_come_out_together_in_a_seeded_order(db):
    """The nine packed columns lead the sort: rows with the same strings there form one run; the
    300-string column (not packed) orders the rows within a run only through the row hash."""
    con, raw = db
    _wide_table(raw)
    con.execute(WIDE)
    first = rows_of(raw, "t_anon")
    con.execute(WIDE)
    assert rows_of(raw, "t_anon") == first  # same seed, same order
    runs = runs_of(first, 9)
    assert len(runs) == len(set(runs)) >= 250
    assert len(runs_of(first, 10)) > len(set(runs_of(first, 10)))  # the wide column's vectors interleave
    con.execute(WIDE.replace("seed = 3", "seed = 4"))
    other = rows_of(raw, "t_anon")
    assert Counter(other) == Counter(first) and runs_of(other, 9) != runs and set(runs_of(other, 9)) == set(runs)


# --------------------------------------------------------------------------- the join on one key hash


def test_key_hashes_distinct_sees_two_cells_sharing_a_hash(db):
    """Two cells with the same keys hash alike (as two distinct keys with one hash would):
    refused; distinct keys accepted; an engine with a narrower hash() never joins on it."""
    _, raw = db
    raw.execute("CREATE TABLE src (zip VARCHAR, age INTEGER, s VARCHAR)")
    backend = DuckDBBackend(raw)
    plan = bind(backend, statement_for("ANONYMIZE src WITH (k = 2, qi = (zip, age), sensitive = s)"))
    facts = ColumnFacts(strings=frozenset({"zip", "s"}))
    raw.execute("CREATE TABLE cells AS SELECT * FROM (VALUES ('a', 1, 'x'), ('a', 2, 'x'), (NULL, 1, 'x')) v(q0, q1, s)")
    assert key_hashes_distinct(backend, plan, facts, "cells")
    raw.execute("INSERT INTO cells VALUES ('a', 2, 'x')")
    assert not key_hashes_distinct(backend, plan, facts, "cells")
    raw.execute("DELETE FROM cells WHERE q1 = 2")
    backend.hashes_64_bits = False
    assert not key_hashes_distinct(backend, plan, facts, "cells")


def _hostile_table(raw) -> None:
    """NOCASE spellings, -0.0 and 0.0, NaN, NULLs in every column."""
    raw.execute("CREATE TABLE h (name VARCHAR COLLATE NOCASE, x DOUBLE, g INTEGER, s VARCHAR, id INTEGER)")
    names = ["Ann", "ann", "ANN", None, "Bob"]
    xs = [-0.0, 0.0, float("nan"), None, 1.5]
    raw.executemany("INSERT INTO h VALUES (?, ?, ?, ?, ?)",
                    [(names[i % 5], xs[(i // 5) % 5], i % 40, None if i % 13 == 0 else f"s{i % 3}", i)
                     for i in range(3000)])


def _split_table(raw, rows: int) -> None:
    """Classes ('a', 'x'), ('b', 'x'), ('c', 'y') in proportions 6:1:1: with k = 3/8 of the rows
    the solution moves a sixth of ('a', 'x') into the suppressed group, so that cell is split
    (dealt into buckets from SMALL_CELL rows, ranked by a window below)."""
    raw.execute(f"CREATE TABLE split{rows} AS SELECT CASE WHEN i % 8 < 6 THEN 'a' WHEN i % 8 = 6 THEN 'b' ELSE 'c' END "
                f"AS q1, CASE WHEN i % 8 = 7 THEN 'y' ELSE 'x' END AS q2, i AS id FROM range({rows}) r(i)")


CASES = {
    "types": (_hostile_table, "ANONYMIZE h WITH (k = 7, qi = (name, x, g), sensitive = s, keep = id, method = greedy, "
                              "seed = 2)", "h", 3000),
    "large split": (lambda raw: _split_table(raw, 8000),
                    "ANONYMIZE split8000 WITH (k = 3000, qi = (q1, q2), keep = id, seed = 1)", "split8000", 8000),
    "small split": (lambda raw: _split_table(raw, 800),
                    "ANONYMIZE split800 WITH (k = 300, qi = (q1, q2), keep = id, seed = 1)", "split800", 800),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_join_on_the_key_hash_publishes_the_rows_and_order_of_the_join_on_the_keys(db, monkeypatch, case):
    make, statement, table, rows = CASES[case]
    con, raw = db
    make(raw)
    by_hash = []
    real = materialize.publish_select

    def recording(*args, **kwargs):
        by_hash.append(kwargs.get("by_key_hash"))
        return real(*args, **kwargs)

    monkeypatch.setattr(materialize, "publish_select", recording)
    summary = con.anonymize(statement)
    hashed = rows_of(raw, f"{table}_anon")
    monkeypatch.setattr(materialize, "key_hashes_distinct", lambda *args: False)
    con.anonymize(statement)
    assert by_hash == [True, False]
    assert rows_of(raw, f"{table}_anon") == hashed
    ids = sorted(r[-1] for r in hashed)
    assert summary.published_rows == len(hashed) == rows and ids == list(range(rows))
    # nothing packed or coded (the strings themselves through the sort): the same rows
    monkeypatch.setattr(dictionaries_module, "PACK_LIMIT", 0)
    monkeypatch.setattr(dictionaries_module, "ENUM_LIMIT", 0)
    con.anonymize(statement)
    assert Counter(rows_of(raw, f"{table}_anon")) == Counter(hashed)
    if "split" in case:  # the cell ('a', 'x') went to two published groups
        source = dict(raw.execute(f"SELECT id, q1 FROM {table}").fetchall())
        assert len({r[:2] for r in hashed if source[r[-1]] == "a"}) == 2
