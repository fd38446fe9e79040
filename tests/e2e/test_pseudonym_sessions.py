"""Issue 35 item 12: masked values do not depend on the session's settings. A TIMESTAMP WITH TIME
ZONE (alone or inside a LIST, STRUCT, MAP or UNION) is pseudonymized, partial-masked, and cut to its
year and month as its instant in UTC, whatever the session's TimeZone and Calendar, and the release
is the same row for row; every other type keeps the pseudonym it always had (releases published
before and after join)."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
from datetime import datetime, timedelta, timezone

import duckdb
import pytest
from sqlglot import exp

import duckanon
from duckanon.pipeline.canonical import canonical_text

from support.checks import check_published
from support.refusals import assert_refused_and_unchanged
from support.shell import duckdb_15_cli

pytestmark = pytest.mark.e2e

KEY = "duckanon-test-key: 7f3a9c0e51b24d68"
DUCKDB_MAJOR = int(duckdb.__version__.split(".")[0])

# 24 instants, six hours apart from 2023-12-31 00:00 UTC, so that New York and Tokyo see other
# days (and years: 2023-12-31 18:00 UTC is 2024-01-01 in Tokyo) than UTC does
INSTANTS = """CREATE TABLE events AS SELECT
    TIMESTAMPTZ '2023-12-31 00:00:00+00' + i * INTERVAL '6 hours' + i * INTERVAL '250 milliseconds' AS seen,
    i % 2 AS kind, (i // 2) % 2 AS site, i % 5 AS cost
    FROM range(24) t(i)"""
SESSIONS = [("UTC", "gregorian"), ("America/New_York", "gregorian"), ("Asia/Tokyo", "japanese")]
PUBLISH = ("ANONYMIZE events INTO events_anon WITH (k = 2, qi = (kind, site), keep = (cost), seed = 11, "
           "mask = ({masks}))")


def pseudonym(key: str, text: str) -> str:
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()[:20]


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def instants(con) -> list[datetime]:
    """The instants of events.seen, read as microseconds (DuckDB 1.5 needs pytz to fetch a TIMESTAMPTZ)."""
    return [EPOCH + timedelta(microseconds=r[0]) for r in con.execute("SELECT epoch_us(seen) FROM events").fetchall()]


def utc_text(moment: datetime) -> str:
    """DuckDB's text of an instant in a UTC session, written from Python's own datetime."""
    text = moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "+00"


def session(time_zone: str, calendar: str, create: str = INSTANTS):
    con = duckanon.connect()
    con.execute(f"SET TimeZone = '{time_zone}'")
    con.execute(f"SET Calendar = '{calendar}'")
    con.execute(create)
    return con


def release(con, masks: str, table: str = "events_anon") -> list[tuple]:
    con.execute(PUBLISH.format(masks=masks).replace("events_anon", table))
    return con.execute(f"SELECT * FROM {table}").fetchall()  # in the stored (published) order


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("DUCKANON_PSEUDONYM_KEY", KEY)


def test_a_timestamptz_gets_the_pseudonym_of_its_utc_instant_in_every_session():
    releases = {}
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        releases[time_zone] = release(con, "seen = 'pseudonym'")
        moments = instants(con)
        con.close()
    first = releases["UTC"]
    assert all(rows == first for rows in releases.values())  # the same release, row for row, in order
    expected = sorted(pseudonym(KEY, utc_text(m)) for m in moments)
    assert sorted(r[0] for r in first) == expected and len(set(expected)) == 24
    assert check_published([r[1:] for r in first], [0, 1], k=2)[2] == []
    assert utc_text(moments[1]) == "2023-12-31 06:00:00.25+00"  # (the text the pseudonyms are of)


def test_before_this_change_new_york_and_utc_disagreed_on_every_instant():
    """What the issue measured: the session's own text of the 24 instants differs in all 24."""
    texts = {}
    for time_zone, calendar in SESSIONS[:2]:
        con = session(time_zone, calendar)
        texts[time_zone] = [r[0] for r in con.execute("SELECT CAST(seen AS VARCHAR) FROM events").fetchall()]
        con.close()
    assert sum(a != b for a, b in zip(texts["UTC"], texts["America/New_York"])) == 24


def test_year_month_and_partial_of_a_timestamptz_read_its_utc_date():
    releases = {}
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        con.execute("ALTER TABLE events ADD COLUMN y TIMESTAMPTZ")
        con.execute("ALTER TABLE events ADD COLUMN m TIMESTAMPTZ")
        con.execute("UPDATE events SET y = seen, m = seen")
        releases[time_zone] = release(con, "seen = 'partial(4, 3)', y = 'year', m = 'month'")
        moments = instants(con)
        con.close()
    first = releases["UTC"]
    assert all(rows == first for rows in releases.values())
    utc = [m.astimezone(timezone.utc) for m in moments]
    assert sorted((r[0], r[4], r[5]) for r in first) == sorted(
        (t[:4] + "*" * (len(t) - 7) + t[-3:], u.year, f"{u.year:04d}-{u.month:02d}")
        for t, u in ((utc_text(m), m.astimezone(timezone.utc)) for m in moments))
    assert {r[4] for r in first} == {2023, 2024}  # Tokyo alone would have said 2024 sooner; Japanese: 5 and 6


NESTED = """CREATE TABLE events AS SELECT
    [TIMESTAMPTZ '2023-12-31 00:00:00+00' + i * INTERVAL '7 hours', NULL, TIMESTAMPTZ 'infinity'] AS seen_list,
    {'at': TIMESTAMPTZ '2023-12-31 00:00:00+00' + i * INTERVAL '7 hours', 'n': i} AS seen_struct,
    MAP {TIMESTAMPTZ '2024-06-01 00:00:00+00' + i * INTERVAL '1 hour': i} AS seen_map,
    CASE WHEN i % 2 = 0 THEN union_value(n := i)::UNION(n INTEGER, seen_at TIMESTAMPTZ)
         ELSE union_value(seen_at := TIMESTAMPTZ '2023-12-31 00:00:00+00' + i * INTERVAL '7 hours')::UNION(n INTEGER, seen_at TIMESTAMPTZ) END
        AS seen_union,
    i % 2 AS kind, (i // 2) % 2 AS site, i % 5 AS cost
    FROM range(12) t(i)"""
NESTED_COLUMNS = ["seen_list", "seen_struct", "seen_map", "seen_union"]


def test_lists_structs_maps_and_unions_of_timestamptz_get_their_utc_pseudonyms():
    masks = ", ".join(f"{c} = 'pseudonym'" for c in NESTED_COLUMNS)
    releases, utc_texts = {}, None
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar, NESTED)
        releases[time_zone] = release(con, masks)
        if time_zone == "UTC":  # what a UTC session prints is what the pseudonyms are of
            utc_texts = con.execute("SELECT " + ", ".join(f"CAST({c} AS VARCHAR)" for c in NESTED_COLUMNS)
                                    + " FROM events").fetchall()
        con.close()
    first = releases["UTC"]
    assert all(rows == first for rows in releases.values())
    for j in range(len(NESTED_COLUMNS)):
        assert sorted(r[j] for r in first) == sorted(pseudonym(KEY, t[j]) for t in utc_texts)
    assert utc_texts[1][0] == "['2023-12-31 07:00:00+00', NULL, infinity]"
    assert utc_texts[1][3] == "2023-12-31 07:00:00+00" and utc_texts[0][3] == "0"


def test_the_canonical_text_is_what_a_utc_session_prints_for_any_instant():
    """5,000 instants from 1700 to 2254 (and the infinities), alone and nested: the canonical text in
    New York under the Buddhist calendar equals DuckDB's own text in UTC."""
    con = duckdb.connect()
    con.execute("""CREATE TABLE t AS SELECT ts, [ts] AS l, {'x y': ts} AS s, CAST(ts AS TIMESTAMPTZ_NS) AS ns
        FROM (SELECT to_timestamp((hash(i) % 17500000000)::DOUBLE - 8520000000 + (hash(i * 7) % 1000000) / 1e6) ts
              FROM range(5000) t(i) UNION ALL SELECT TIMESTAMPTZ 'infinity' UNION ALL SELECT TIMESTAMPTZ '-infinity'
              UNION ALL SELECT NULL)""" if DUCKDB_MAJOR >= 2 else
                """CREATE TABLE t AS SELECT ts, [ts] AS l, {'x y': ts} AS s
        FROM (SELECT to_timestamp((hash(i) % 17500000000)::DOUBLE - 8520000000 + (hash(i * 7) % 1000000) / 1e6) ts
              FROM range(5000) t(i) UNION ALL SELECT TIMESTAMPTZ 'infinity' UNION ALL SELECT TIMESTAMPTZ '-infinity'
              UNION ALL SELECT NULL)""")
    types = con.execute("SELECT column_name, column_type FROM (DESCRIBE t)").fetchall()
    canonical = ", ".join(canonical_text(exp.column(n, quoted=True), t).sql("duckdb") for n, t in types)
    con.execute("SET TimeZone = 'UTC'")
    utc = con.execute("SELECT " + ", ".join(f"CAST({n} AS VARCHAR)" for n, _ in types) + " FROM t").fetchall()
    assert con.execute(f"SELECT {canonical} FROM t").fetchall() == utc
    con.execute("SET TimeZone = 'America/New_York'")
    con.execute("SET Calendar = 'buddhist'")
    assert con.execute(f"SELECT {canonical} FROM t").fetchall() == utc
    assert con.execute("SELECT count(DISTINCT ts) FROM t").fetchone()[0] >= 4990


@pytest.mark.parametrize("column, create", [
    ("v", "'Name ' || i"),
    ("v", "1000 + i"),
    ("v", "DATE '1940-01-01' + CAST(i * 211 AS INTEGER)"),
    ("v", "TIMESTAMP '1990-01-01 00:00:00' + i * INTERVAL '1 day 3 hours 0.25 seconds'"),
    ("v", "CAST(i AS DOUBLE) / 7 - 1"),
    ("v", "i * INTERVAL '5 hours'"),
    ("v", "[i, i + 1]"),
])
def test_other_types_keep_the_pseudonym_of_their_text_in_every_session(column, create):
    """VARCHAR, INTEGER, DATE, TIMESTAMP (and DOUBLE, INTERVAL, lists of them): the pseudonym is
    HMAC of DuckDB's text as before, so releases published before this change still join."""
    table = (f"CREATE TABLE events AS SELECT {create} AS v, i % 2 AS kind, (i // 2) % 2 AS site, i % 5 AS cost "
             "FROM range(40) t(i)")
    releases = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar, table)
        texts = [r[0] for r in con.execute("SELECT CAST(v AS VARCHAR) FROM events").fetchall()]
        releases.append(release(con, "v = 'pseudonym'"))
        con.close()
        assert sorted(r[0] for r in releases[-1]) == sorted(pseudonym(KEY, t) for t in texts)
    assert releases[0] == releases[1] == releases[2]


def test_pinned_pseudonyms_of_plain_types():
    """The pseudonyms a release made before issue 35 holds for these values (RFC 2104 over the text
    DuckDB has always printed): written out, so that a change of the text fails here."""
    con = session("America/New_York", "gregorian", """CREATE TABLE events AS SELECT * FROM (VALUES
        ('Ann', 1000, DATE '2024-02-29', TIMESTAMP '2024-02-29 13:45:00.5', 0, 0, 1),
        ('Ann', 1000, DATE '2024-02-29', TIMESTAMP '2024-02-29 13:45:00.5', 0, 0, 1)) t(s, n, d, ts, kind, site, cost)""")
    con.execute("ANONYMIZE events INTO events_anon WITH (k = 2, qi = (kind, site), keep = (cost), "
                "mask = (s = 'pseudonym', n = 'pseudonym', d = 'pseudonym', ts = 'pseudonym'))")
    row = con.execute("SELECT s, n, d, ts FROM events_anon").fetchone()
    assert row == tuple(pseudonym(KEY, t) for t in ("Ann", "1000", "2024-02-29", "2024-02-29 13:45:00.5"))


def test_a_timestamptz_in_a_utc_session_keeps_its_old_pseudonym():
    """Before issue 35 a TIMESTAMPTZ was pseudonymized as the session printed it: in a UTC session
    that is its canonical text, so those pseudonyms are unchanged."""
    con = session("UTC", "gregorian")
    old = con.execute("SELECT CAST(seen AS VARCHAR) FROM events").fetchall()
    published = release(con, "seen = 'pseudonym'")
    assert sorted(r[0] for r in published) == sorted(pseudonym(KEY, t[0]) for t in old)


@pytest.mark.skipif(DUCKDB_MAJOR < 2, reason="VARIANT is a DuckDB 2 type")
def test_a_variant_identifier_is_refused_for_rules_that_read_text():
    con = session("UTC", "gregorian", "CREATE TABLE events AS SELECT CAST(i AS VARIANT) AS v, i % 2 AS kind, "
                                      "(i // 2) % 2 AS site, i % 5 AS cost FROM range(8) t(i)")
    assert_refused_and_unchanged(
        con, "ANONYMIZE events WITH (k = 2, qi = (kind, site), mask = (v = 'pseudonym'))",
        r"^mask rule 'pseudonym' on column v cannot read its values' text: a VARIANT prints what it holds in the "
        r"session's settings \(a TIMESTAMP WITH TIME ZONE inside it in the session's TimeZone\), so it has no text "
        r"that every session shares: cast the column to a concrete type in a view first$")
    con.execute("ANONYMIZE events WITH (k = 2, qi = (kind, site), mask = (v = 'null'))")  # no text read: published
    assert con.execute("SELECT count(*), count(v) FROM events_anon").fetchone() == (8, 0)


@pytest.mark.skipif(DUCKDB_MAJOR < 2, reason="TIMESTAMPTZ_NS is a DuckDB 2 type")
def test_a_timestamptz_ns_is_masked_as_its_utc_instant():
    table = ("CREATE TABLE events AS SELECT CAST(seen AS TIMESTAMPTZ_NS) AS p, CAST(seen AS TIMESTAMPTZ_NS) AS y, "
             "CAST(seen AS TIMESTAMPTZ_NS) AS m, CAST(seen AS TIMESTAMPTZ_NS) AS z, kind, site, cost FROM ("
             + "SELECT " + INSTANTS.split(" AS SELECT", 1)[1] + ")")
    releases = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar, table)
        con.execute(PUBLISH.format(masks="p = 'pseudonym', y = 'year', m = 'month', z = 'null'"))
        releases.append(con.execute("SELECT * FROM events_anon").fetchall())
        texts = [r[0] for r in con.execute("SELECT epoch_us(CAST(p AS TIMESTAMPTZ)) FROM events").fetchall()]
        con.close()
    assert releases[0] == releases[1] == releases[2]
    moments = [EPOCH + timedelta(microseconds=us) for us in texts]
    assert sorted(r[0] for r in releases[0]) == sorted(pseudonym(KEY, utc_text(m)) for m in moments)
    assert sorted((r[1], r[2]) for r in releases[0]) == sorted((m.year, f"{m.year:04d}-{m.month:02d}") for m in moments)
    assert {r[3] for r in releases[0]} == {None}


def test_duckdb_15_prints_the_same_canonical_texts_and_floats():
    """The texts pseudonyms are made of, computed by the DuckDB 1.5 command-line client (in New
    York) and by the running DuckDB (in Tokyo): the same, for instants, nested instants and 20,000
    doubles (whose text is DuckDB's own, unchanged)."""
    cli = duckdb_15_cli()
    table = ("SELECT to_timestamp((hash(i) % 17500000000)::DOUBLE - 8520000000 + (hash(i * 7) % 1000000) / 1e6) AS ts, "
             "(CAST(hash(i) AS DOUBLE) / 18446744073709551616.0) * pow(10, (i % 60) - 30) * (1 - 2 * (i % 2)) AS f "
             "FROM range(20000) t(i)")
    pieces = [canonical_text(exp.column("ts", quoted=True), "TIMESTAMP WITH TIME ZONE").sql("duckdb"),
              canonical_text(exp.column("l", quoted=True), "STRUCT(a TIMESTAMP WITH TIME ZONE[])").sql("duckdb"),
              canonical_text(exp.column("f", quoted=True), "DOUBLE").sql("duckdb")]
    query = (f"SELECT md5(string_agg({pieces[0]} || '|' || {pieces[1]} || '|' || {pieces[2]}, ';' ORDER BY i)) "
             f"FROM (SELECT row_number() OVER () AS i, ts, {{'a': [ts, ts]}} AS l, f FROM ({table}))")
    old = subprocess.run([cli, "-noheader", "-csv", "-c", f"SET TimeZone = 'America/New_York'; {query}"],
                         capture_output=True, text=True, timeout=120)
    assert old.returncode == 0, old.stderr
    con = duckdb.connect()
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    assert old.stdout.strip() == con.execute(query).fetchone()[0]


def test_a_kept_timestamptz_does_not_change_the_published_order():
    releases = []
    for time_zone, calendar in SESSIONS[:2]:
        con = session(time_zone, calendar)
        con.execute("ANONYMIZE events INTO events_anon WITH (k = 2, qi = (kind, site), keep = (seen, cost), seed = 11)")
        releases.append(con.execute("SELECT epoch_us(seen), kind, site, cost FROM events_anon").fetchall())
        con.close()
    assert sorted(releases[0]) == sorted(releases[1])
    assert releases[0] == releases[1]
