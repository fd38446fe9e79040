"""The listing remade after every statement verifies only the registry rows it has not verified
before (registry_state.read_registry's `remembered`), and remakes only the macro whose inputs
changed: a row edited in the same session is verified again and listed corrupt."""

from __future__ import annotations

import pytest

import duckanon
from duckanon.pipeline import registry_state

PUBLISH = "ANONYMIZE t INTO {target} WITH (k = 3, qi = (a, b), keep = (id))"


@pytest.fixture
def con():
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 7)::VARCHAR AS a, i % 5 AS b, i AS id FROM range(300) r(i)")
    yield con
    con.close()


def statuses(con) -> dict:
    return dict(con.execute("SELECT target, status FROM duckanon_publications()").fetchall())


def macro(con, name: str) -> str:
    return con.duckdb.execute("SELECT macro_definition FROM duckdb_functions() WHERE function_name = ?",
                              [name]).fetchone()[0]


def test_the_listing_verifies_only_the_rows_it_has_not_verified(con, monkeypatch):
    for n in range(3):
        con.execute(PUBLISH.format(target=f"p{n}"))
    verified = []
    real = registry_state.entry_of
    monkeypatch.setattr(registry_state, "entry_of", lambda database, row: verified.append(row["target_name"]) or
                        real(database, row))
    con.execute(PUBLISH.format(target="p3"))
    assert verified == ["p3"]
    con.execute(PUBLISH.format(target="p1"))  # republished: its row is replaced by a new one
    assert verified == ["p3", "p1"]
    assert set(statuses(con).values()) == {"current"}


def test_a_row_edited_after_it_was_verified_is_listed_corrupt(con):
    con.execute(PUBLISH.format(target="p0"))
    con.execute(PUBLISH.format(target="p1"))
    assert statuses(con) == {'"memory"."main"."p0"': "current", '"memory"."main"."p1"': "current"}
    # by hand, in the same session and process, keeping the digest: the row is no longer the one verified
    con.duckdb.execute("UPDATE duckanon_publications SET statement_text = 'ANONYMIZE x' WHERE target_name = 'p0'")
    con.execute(PUBLISH.format(target="p2"))  # the listing after a statement (not remade in any case)
    assert statuses(con) == {'"memory"."main"."p0"': "corrupt", '"memory"."main"."p1"': "current",
                             '"memory"."main"."p2"': "current"}


def test_a_release_from_the_same_source_remakes_only_the_verified_digests(con):
    con.execute(PUBLISH.format(target="p0"))
    listing, verified = macro(con, "duckanon_publications"), macro(con, "duckanon_publications_verified")
    con.execute(PUBLISH.format(target="p1"))
    assert macro(con, "duckanon_publications") == listing  # the same registries and source: the same listing
    assert macro(con, "duckanon_publications_verified") != verified  # p1's digest added
    con.execute("CREATE TABLE u AS SELECT * FROM t")
    con.execute(PUBLISH.replace("ANONYMIZE t", "ANONYMIZE u").format(target="q"))
    assert macro(con, "duckanon_publications") != listing  # a second source to fingerprint
    assert set(statuses(con).values()) == {"current"}
