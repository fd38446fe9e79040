"""The publication registry under releases running at once: a failed release that created the
registry drops it only when it is the last release of this process writing into it, so a
release of another thread never loses the table it is writing its entry into (which made every
thread of a round fail, or one raise after its commit)."""

from __future__ import annotations

import threading

import duckanon
from duckanon.backends import DuckDBBackend
from duckanon.pipeline import registry
from duckanon.pipeline.plan import bind
from duckanon.sql import statement_for


def _exists(raw) -> bool:
    return raw.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'duckanon_publications'").fetchone()[0] == 1


def _setup():
    con = duckanon.connect()
    raw = con.duckdb
    raw.execute("CREATE TABLE t AS SELECT i % 5 AS a FROM range(20) r(i)")
    backend = DuckDBBackend(raw)
    return con, raw, backend, bind(backend, statement_for("ANONYMIZE t WITH (k = 2, qi = (a))"))


def test_the_registry_stays_while_another_release_is_running():
    con, raw, backend, plan = _setup()
    first = registry.begin_release(backend, "memory", may_create=True)  # creates the registry
    assert _exists(raw)
    second = registry.begin_release(backend, "memory", may_create=True)  # finds it
    registry.end_release(backend, first)  # the creator fails: the other one still writes
    assert _exists(raw)
    registry.end_release(backend, second)  # the last one out, and nothing was recorded
    assert not _exists(raw)
    con.close()


def test_a_recorded_entry_keeps_the_registry_when_the_creator_fails_last():
    con, raw, backend, plan = _setup()
    first = registry.begin_release(backend, "memory", may_create=True)
    second = registry.begin_release(backend, "memory", may_create=True)
    con.execute("ANONYMIZE t WITH (k = 2, qi = (a))")  # a third release, committed, with its entry
    registry.end_release(backend, second)
    registry.end_release(backend, first)
    assert _exists(raw) and raw.execute("SELECT count(*) FROM duckanon_publications").fetchone()[0] == 1
    con.close()


def test_concurrent_first_releases_of_one_target_leave_a_winner_every_round():
    """Eight threads publish one target at once into a database without a registry yet, six
    times: every round has a release that commits (the others get DuckDB's one-line conflict),
    and none raises anything else."""
    for _ in range(6):
        con = duckanon.connect()
        con.duckdb.execute("CREATE TABLE t AS SELECT i % 13 AS a, i % 7 AS b FROM range(200) r(i)")
        outcomes, unexpected = [], []

        def work():
            try:
                con.execute("ANONYMIZE t WITH (k = 3, qi = (a, b))")
                outcomes.append("committed")
            except duckanon.AnonymizeError as error:
                outcomes.append("conflict" if "at the same time: nothing was written" in str(error)
                                and "\n" not in str(error) else str(error))
            except Exception as error:  # noqa: BLE001 - what must never escape
                unexpected.append(repr(error))

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert unexpected == [] and set(outcomes) <= {"committed", "conflict"}, (unexpected, outcomes)
        assert "committed" in outcomes
        assert con.duckdb.execute("SELECT count(*) FROM duckanon_publications").fetchone()[0] == 1
        con.close()
