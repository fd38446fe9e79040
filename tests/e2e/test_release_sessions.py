"""Issue 35 item 12: the same statement, seed and data give the same release byte for byte whatever
the session's TimeZone and Calendar. A TIMESTAMPTZ quasi-identifier is published as its instant in
UTC ('2023-12-31 06:00:00+00' in every session), a kept TIMESTAMPTZ (or a LIST of them) no longer
moves the published order, and the same holds with and without keep, for split cells and for
materialize = 'view'. Releases of tables without such types are the rows they were before."""

from __future__ import annotations

import hashlib
from collections import Counter

import duckdb
import pytest

import duckanon

from support.checks import check_published
from support.data import HOSPITAL

pytestmark = pytest.mark.e2e

SESSIONS = [("UTC", "gregorian"), ("America/New_York", "gregorian"), ("Asia/Tokyo", "japanese")]

# 120 visits: `seen` takes six instants six hours apart around a New Year (New York and Tokyo see
# other days and years than UTC), `stamp` is unique per row, `stamps` a LIST of two instants
VISITS = """CREATE TABLE visits AS SELECT
    i AS id,
    TIMESTAMPTZ '2023-12-31 00:00:00+00' + (i % 6) * INTERVAL '6 hours' AS seen,
    i % 3 AS ward,
    TIMESTAMPTZ '2024-03-10 00:00:00+00' + i * INTERVAL '37 minutes' + i * INTERVAL '250 milliseconds' AS stamp,
    [TIMESTAMPTZ '2024-11-03 05:00:00+00' + (i % 4) * INTERVAL '30 minutes',
     TIMESTAMPTZ '2024-11-03 05:00:00+00' + (i % 5) * INTERVAL '1 hour'] AS stamps,
    CASE i % 4 WHEN 0 THEN 'flu' WHEN 1 THEN 'cold' WHEN 2 THEN 'asthma' ELSE 'gout' END AS disease
    FROM range(120) t(i)"""
# kept instants read as epochs: a TIMESTAMPTZ fetched as a datetime carries the session's zone
EPOCHS = {"TIMESTAMP WITH TIME ZONE": 'epoch_us("{}")',
          "TIMESTAMP WITH TIME ZONE[]": 'list_transform("{}", lambda x: epoch_us(x))'}

# as test_split_cells: with k = 300 the solution moves 100 rows of the first class into the
# suppressed group of the other two, so that class's cell is split over two parts
SPLIT = """CREATE TABLE split AS SELECT v.q1, v.q2, row_number() OVER () AS id,
    TIMESTAMPTZ '2024-03-10 00:00:00+00' + row_number() OVER () * INTERVAL '17 minutes' AS stamp
    FROM (VALUES (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'), (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'),
                 (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'), (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'),
                 (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'), (TIMESTAMPTZ '2024-01-01 02:00:00+00', 'x'),
                 (TIMESTAMPTZ '2024-06-30 23:30:00+00', 'x'), (TIMESTAMPTZ '2024-12-31 20:00:00+00', 'y')) v(q1, q2),
         range(100) r(i)"""


def session(time_zone: str, calendar: str):
    con = duckanon.connect()
    con.execute(f"SET TimeZone = '{time_zone}'")
    con.execute(f"SET Calendar = '{calendar}'")
    con.execute(VISITS)
    con.execute(SPLIT)
    return con


def published(con, statement: str, target: str) -> list[tuple]:
    """The release of `statement` into `target`, in its stored (published) order."""
    con.execute(statement)
    columns = [r[:2] for r in con.execute(f"DESCRIBE {target}").fetchall()]
    items = ", ".join(EPOCHS.get(t, '"{}"').format(c) for c, t in columns)
    return con.execute(f"SELECT {items} FROM {target}").fetchall()


def releases(statement: str, target: str) -> list[list[tuple]]:
    found = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        found.append(published(con, statement, target))
        con.close()
    return found


SEEN = ["2023-12-31 00:00:00+00", "2023-12-31 06:00:00+00", "2023-12-31 12:00:00+00", "2023-12-31 18:00:00+00",
        "2024-01-01 00:00:00+00", "2024-01-01 06:00:00+00"]


def test_a_timestamptz_qi_is_published_as_its_utc_instant_in_every_session():
    found = releases("ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), sensitive = disease, seed = 7)", "out")
    assert found[1] == found[0] and found[2] == found[0]  # row for row, in order
    rows = found[0]
    assert len(rows) == 120 and {r[0] for r in rows} <= set(SEEN) | {"*"}
    assert {r[0] for r in rows} & set(SEEN)  # instants published, not only stars
    assert check_published(rows, [0, 1], 2, k=4)[2] == []


def test_a_kept_timestamptz_and_a_kept_list_of_them_do_not_move_the_order():
    found = releases("ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), keep = (id, stamp, stamps), "
                     "sensitive = disease, seed = 7)", "out")
    assert found[1] == found[0] and found[2] == found[0]
    rows = found[0]
    # source order: id, seen, ward, stamp, stamps, disease
    assert sorted(r[0] for r in rows) == list(range(120)) and {r[1] for r in rows} <= set(SEEN) | {"*"}
    assert check_published([(r[1], r[2], r[5]) for r in rows], [0, 1], 2, k=4)[2] == []


def test_a_kept_list_of_timestamptz_alone_does_not_move_the_order():
    """The kept LIST is the only per-row value: the order within a part is its hash alone."""
    found = releases("ANONYMIZE visits INTO out WITH (k = 10, qi = (ward), keep = (stamps), seed = 3)", "out")
    assert found[1] == found[0] and found[2] == found[0]
    assert len({tuple(r[1]) for r in found[0]}) == 20


def test_a_list_of_timestamptz_qi_is_published_as_its_canonical_text():
    found = releases("ANONYMIZE visits INTO out WITH (k = 5, qi = (stamps, ward), keep = (stamp), seed = 5)", "out")
    assert found[1] == found[0] and found[2] == found[0]
    texts = {r[2] for r in found[0]} - {"*"}  # source order: ward, stamp, stamps
    # as a UTC session prints the LIST (DuckDB quotes a nested timestamp's text)
    assert texts and all(t.startswith("['2024-11-03 0") and t.endswith("+00']") for t in texts)
    assert "['2024-11-03 05:30:00+00', '2024-11-03 06:00:00+00']" in texts
    assert check_published(found[0], [0, 2], k=5)[2] == []


def test_a_sensitive_timestamptz_and_list_keep_their_order():
    for sensitive in ("stamps", "seen"):
        found = releases(f"ANONYMIZE visits INTO out WITH (l = 2, qi = (ward), sensitive = {sensitive}, seed = 2)",
                         "out")
        assert found[1] == found[0] and found[2] == found[0]


def test_materialize_view_publishes_the_same_rows_in_every_session():
    statement = ("ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), sensitive = disease, seed = 7, "
                 "materialize = 'view')")
    found = releases(statement, "out")
    assert found[1] == found[0] and found[2] == found[0]
    table = releases(statement.replace(", materialize = 'view'", ""), "out")[0]
    assert found[0] == table  # the view expands to the very rows and order of the table form


def test_split_cells_with_a_timestamptz_qi_and_kept_instants():
    found = releases("ANONYMIZE split INTO out WITH (k = 300, qi = (q1, q2), keep = (id, stamp), seed = 13)", "out")
    assert found[1] == found[0] and found[2] == found[0]
    rows = found[0]
    assert check_published(rows, [0, 1], k=300)[2] == []
    assert {r[0] for r in rows} == {"2024-01-01 02:00:00+00", "*"}
    # the first class kept 500 of its 600 rows: its cell was split
    assert sum(r[0] != "*" for r in rows) == 500


def test_the_published_text_is_what_a_utc_session_printed_before():
    """In a UTC session the canonical text is DuckDB's own: the text a TIMESTAMPTZ QI had there."""
    con = session("UTC", "gregorian")
    rows = published(con, "ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), seed = 7)", "out")
    old = {r[0] for r in con.execute("SELECT CAST(seen AS VARCHAR) FROM visits").fetchall()}
    assert {r[0] for r in rows} - {"*"} <= old
    con.close()


# ---------------------------------------------------------------------------- releases that did not change
#
# Recorded once from the code before this change (commit 90c0c82): sha256 of the rows (every
# column as DuckDB's text, in the published order). Tables without a TIMESTAMPTZ publish exactly
# what they did.

TYPED = """CREATE TABLE typed AS SELECT
    i AS id,
    CAST(round((i % 7) * 1.5 - 3, 1) AS DOUBLE) * CASE WHEN i % 11 = 0 THEN -0.0 ELSE 1 END AS d,
    CASE WHEN i % 3 = 0 THEN INTERVAL '36 hours' WHEN i % 3 = 1 THEN INTERVAL '1 day 12 hours' ELSE INTERVAL '2 days' END AS iv,
    TIMESTAMP '2024-03-10 00:00:00' + (i % 5) * INTERVAL '7 hours' AS ts,
    [i % 2, i % 3] AS l,
    (i % 4)::DOUBLE / 3 AS f,
    CASE i % 4 WHEN 0 THEN 'flu' WHEN 1 THEN 'cold' WHEN 2 THEN 'asthma' ELSE 'gout' END AS s
    FROM range(600) t(i)"""
UNCHANGED = {
    "ANONYMIZE hospital INTO h_out WITH (k = 2, qi = (zipcode, age, education), sensitive = disease, seed = 5)":
        "7dfaec67f4e6f8c30a7d9734a0c0f5f2",
    "ANONYMIZE hospital INTO h_out WITH (k = 3, qi = (zipcode, education), keep = (age), sensitive = disease, seed = 5)":
        "69092cb3a8e057897d61d1af4435d9f2",
    "ANONYMIZE hospital INTO h_out WITH (k = 2, qi = (zipcode, age, education), sensitive = disease, seed = 5, "
    "materialize = 'view')": "7dfaec67f4e6f8c30a7d9734a0c0f5f2",
    "ANONYMIZE typed INTO t_out WITH (k = 5, qi = (d, iv, ts), sensitive = s, seed = 9)":
        "f4e9fca0629c14259c7dc3da89474d30",
    "ANONYMIZE typed INTO t_out WITH (k = 40, qi = (iv, ts), keep = (id, d, f, l), seed = 9)":
        "d9e3ea8d904c55f9521d20a351eaca7c",
    "ANONYMIZE typed INTO t_out WITH (k = 250, qi = (iv, ts), keep = (d, l), sensitive = s, seed = 4)":
        "bf11d19ab41c1837943c129d4b0ccb4e",
    "ANONYMIZE typed INTO t_out WITH (k = 30, qi = (d, ts, l), keep = (iv, f), method = mondrian, seed = 9)":
        "667bc2d691d3c1e6c8cdd9be29c416d2",
    "ANONYMIZE typed INTO t_out WITH (k = 5, qi = (d, iv, l), sensitive = s, seed = 9, materialize = 'view')":
        "67c96ac036b68eb7139f0ed89d52565d",
}

# DuckDB 1.5 publishes this Mondrian release apart from 2.x (another row order among equal-loss
# cuts); measured on 1.5.6 from the code before and after the canonical text: the same hash
UNCHANGED_ON_DUCKDB_1_5 = {
    "ANONYMIZE typed INTO t_out WITH (k = 30, qi = (d, ts, l), keep = (iv, f), method = mondrian, seed = 9)":
        "08de85cb71d5bc448b83d8b63ff33ad8",
}


@pytest.mark.parametrize("statement", list(UNCHANGED))
def test_releases_without_timestamptz_are_the_rows_they_were(statement):
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.execute(TYPED)
    con.execute(statement)
    target = statement.split(" INTO ")[1].split()[0]
    columns = [r[0] for r in con.execute(f"DESCRIBE {target}").fetchall()]
    rows = con.execute("SELECT " + ", ".join(f'CAST("{c}" AS VARCHAR)' for c in columns) + f" FROM {target}").fetchall()
    con.close()
    assert len(rows) in (10, 600)
    expected = UNCHANGED_ON_DUCKDB_1_5.get(statement) if duckdb.__version__.startswith("1.5") else None
    assert hashlib.sha256(repr(rows).encode()).hexdigest()[:32] == (expected or UNCHANGED[statement])


# The solver's labels are made in Python from the QI values fetched from the cells table
# (problem.column_domains), which DuckDB hands over as datetimes in the session's TimeZone: they
# are converted to UTC there, so a Mondrian set and dates() read an instant's UTC date.

def test_mondrian_labels_of_a_timestamptz_are_the_same_in_every_session():
    found = releases("ANONYMIZE visits INTO out WITH (k = 40, qi = (seen, ward), method = mondrian, seed = 7)", "out")
    assert found[1] == found[0] and found[2] == found[0]


def test_a_dates_hierarchy_cuts_an_instant_at_its_utc_date_in_every_session():
    # 20 rows per instant, k = 30: in UTC the months 2023-12 (80 rows) and 2024-01 (40) suffice; New
    # York's 2024-01 holds only the instant 2024-01-01 06:00 UTC (01:00 there): 20 rows
    found = releases("ANONYMIZE visits INTO out WITH (k = 30, qi = (seen), hierarchies = (seen = 'dates(day, month, "
                     "year)'), seed = 7)", "out")
    assert Counter(r[0] for r in found[0]) == {"2023-12": 80, "2024-01": 40}
    assert found[1] == found[0] and found[2] == found[0]


def test_a_timestamptz_ns_qi_and_kept_value_are_the_same_in_every_session():
    found = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        try:
            con.execute("CREATE TABLE nano AS SELECT CAST(seen AS TIMESTAMPTZ_NS) + (id % 2) * INTERVAL '1 microsecond' "
                        "AS seen_ns, ward, CAST(stamp AS TIMESTAMPTZ_NS) AS stamp_ns FROM visits")
        except duckdb.Error as error:  # DuckDB 1.5 has no TIMESTAMPTZ_NS
            pytest.skip(f"no TIMESTAMPTZ_NS: {error}")
        con.execute("ANONYMIZE nano INTO out WITH (k = 4, qi = (seen_ns, ward), keep = (stamp_ns), seed = 7)")
        found.append(con.execute("SELECT seen_ns, ward, epoch_ns(stamp_ns) FROM out").fetchall())
        con.close()
    assert found[1] == found[0] and found[2] == found[0]
    texts = {r[0] for r in found[0]} - {"*"}
    assert "2023-12-31 06:00:00.000001+00" in texts and texts <= {s.replace("+00", suffix) for s in SEEN
                                                                   for suffix in ("+00", ".000001+00")}


def test_a_population_table_matches_a_timestamptz_qi_in_every_session():
    """k_map: the population's classes are keyed as the sample's (by value), in every session."""
    found = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        con.execute("CREATE TABLE people AS SELECT seen, ward FROM visits, range(3)")
        con.execute("ANONYMIZE visits INTO out WITH (k_map = 8, population = people, qi = (seen, ward), seed = 7)")
        found.append(con.execute("SELECT seen, ward FROM out").fetchall())
        con.close()
    assert found[1] == found[0] and found[2] == found[0]
    # every class of the sample has 20 rows in the sample and 60 in the population
    assert {r[0] for r in found[0]} == set(SEEN)


@pytest.mark.xfail(strict=True, reason="REPORT's column_counts compares the published text with the original's "
                                       "session text (report/facts.py, not ours): outside UTC every TIMESTAMPTZ cell "
                                       "counts as generalized; diff in the issue 35 report")
def test_the_report_counts_no_generalized_timestamptz_cell_in_any_session():
    from duckanon.report import facts
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        con.execute("ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), seed = 7)")
        counts = facts.column_counts(con, "out", "visits", ["seen", "ward"])
        con.close()
        assert counts["seen"] == {"stars": 0, "generalized": 0, "example": None}, time_zone


def test_explain_says_the_same_in_every_session():
    found = []
    for time_zone, calendar in SESSIONS:
        con = session(time_zone, calendar)
        found.append([row for row in con.execute(
            "EXPLAIN ANONYMIZE visits INTO out WITH (k = 4, qi = (seen, ward), keep = (stamp, stamps), "
            "sensitive = disease, seed = 7)").fetchall() if row[0] != "seconds (dry run)"])
        con.close()
    assert found[1] == found[0] and found[2] == found[0]
    assert dict(found[0])["quasi-identifiers"] == "seen, ward"
