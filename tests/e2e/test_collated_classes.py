"""What `classes` counts when a QI has a collation: the byte-by-byte classes of the published
text (docs/result.md, "The published table"). 'Ann' and 'ann' in a NOCASE column are published as
spelled, a reader comparing bytes tells them apart, so each spelling's class must hold k alone;
a reader's GROUP BY under NOCASE sees them merged, fewer and larger."""

from __future__ import annotations

import pytest

import duckanon

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("collation", ["NOCASE", "noaccent.nocase"])
def test_classes_are_counted_byte_by_byte_and_a_nocase_reader_sees_them_merged(collation):
    con = duckanon.connect()
    raw = con.duckdb
    raw.execute(f"CREATE TABLE t (n VARCHAR COLLATE {collation}, b INTEGER, s VARCHAR)")
    # 'Bob', 'bob', 'BOB': one value under NOCASE, three published spellings
    raw.execute("INSERT INTO t SELECT ['Ann', 'ann', 'Bob', 'bob', 'BOB'][i % 5 + 1], i % 2, ['x', 'y', 'z'][i % 3 + 1] "
                "FROM range(40) r(i)")
    cur = con.execute("ANONYMIZE t WITH (k = 3, qi = (n, b), seed = 1)")
    result = dict(zip([d[0] for d in cur.description], cur.fetchone()))
    byte_classes = raw.execute("SELECT count(*) c FROM t_anon GROUP BY n COLLATE c, b").fetchall()
    nocase_classes = raw.execute("SELECT count(*) c FROM t_anon GROUP BY n, b").fetchall()
    assert result["classes"] == len(byte_classes) == 10
    assert result["min_class_size"] == min(c for (c,) in byte_classes) == 4
    assert len(nocase_classes) == 4 and min(c for (c,) in nocase_classes) >= 3
    assert result["stars"] == 0 and result["optimal"] is True
    con.close()
