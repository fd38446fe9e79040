"""Cells split between published groups, published with kept columns (the join-back path).

A split cell's rows are dealt into its parts by their rank in the cell's seeded order: a window
over the cell for small cells, buckets of the row hash for large ones (keyed.SMALL_CELL).
Both must give every part exactly its count, each source row once, the same published multiset
of (QI, SA) rows per class, and the same table again for the same seed. The bucket path is forced
here on small tables by lowering SMALL_CELL and BUCKET_ROWS; the window path by raising SMALL_CELL.
"""

from __future__ import annotations

from collections import Counter

import pytest

import duckanon
import duckanon.pipeline.join_back as join_back
import duckanon.pipeline.keyed as keyed
import duckanon.pipeline.materialize as materialize

from support.spark import stored_files

# 800 rows in the proportions of benchmarks/bench_publish.py's split case: with k = 300 the
# solution moves 100 rows of class ('a', 'x') into the suppressed group with 'b' and 'c'
SPLIT = ("CREATE TABLE split AS SELECT v.q1, v.q2, row_number() OVER () AS id FROM (VALUES ('a', 'x'), "
         "('a', 'x'), ('a', 'x'), ('a', 'x'), ('a', 'x'), ('a', 'x'), ('b', 'x'), ('c', 'y')) v(q1, q2), range(100) r(i)")
SPLIT_STATEMENT = "ANONYMIZE split WITH (k = 300, qi = (q1, q2), keep = (id), seed = {seed})"

# many classes, each holding more rows of one sensitive value than 2-diversity allows: TP moves the
# excess into its residue group, so most (class, value) cells are split in two; a kept column of
# three values (rows that publish alike: ties in the order hash) and one of row ids
SKEWED = """
    CREATE TABLE skewed AS
    SELECT 'c' || (r % 40) AS q1, (r % 40) // 10 AS q2,
           CASE WHEN (r // 40) % 10 < 6 THEN (r % 40) % 3 WHEN (r // 40) % 10 < 8 THEN (r % 40 + 1) % 3
                ELSE (r % 40 + 2) % 3 END AS s,
           r AS id, r % 3 AS grp
    FROM range(6000) x(r)
"""
SKEWED_STATEMENT = "ANONYMIZE skewed WITH (l = 2, qi = (q1, q2), sensitive = s, keep = ({keep}), method = tp, seed = {seed})"

PATHS = {
    "window": {"SMALL_CELL": 1 << 62},
    "buckets": {"SMALL_CELL": 2, "BUCKET_ROWS": 4, "MAX_BUCKETS": 16},
}



def _set(monkeypatch, name: str, value: int) -> None:
    """A constant of the split path, in every module that reads it (keyed's own, join_back's copy)."""
    for module in (keyed, join_back):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


class Recorder:
    """keyed_arrow as the statement calls it, recording the bucket counts of split cells."""

    def __init__(self):
        self.buckets = []
        self.original = materialize.keyed_arrow

    def __call__(self, cells, solution):
        parts = self.original(cells, solution)
        self.buckets.append([b for b, s in zip(parts["buckets"].to_pylist(), parts["split"].to_pylist()) if s])
        return parts


def publish(monkeypatch, path: str, statement: str, target: str, create: str):
    """Run `statement` on a fresh connection with the split path `path`; the published rows (in
    their order) and the bucket counts its split cells got."""
    for name, value in PATHS[path].items():
        _set(monkeypatch, name, value)
    recorder = Recorder()
    monkeypatch.setattr(materialize, "keyed_arrow", recorder)
    con = duckanon.connect()
    con.execute(create)
    con.execute(statement)
    rows = con.execute(f"SELECT * FROM {target}").fetchall()
    source = {r[0]: r[1:] for r in con.execute(f"SELECT id, * EXCLUDE (id) FROM {target.removesuffix('_anon')}").fetchall()}
    con.close()
    monkeypatch.undo()
    split = [b for call in recorder.buckets for b in call]
    assert split, "no cell was split: the test does not reach the split path"
    assert all(b == 1 for b in split) if path == "window" else any(b > 1 for b in split)
    return rows, source


@pytest.mark.parametrize("path", list(PATHS))
def test_every_part_gets_its_count(monkeypatch, path):
    rows, source = publish(monkeypatch, path, SPLIT_STATEMENT.format(seed=1), "split_anon", SPLIT)
    assert len(rows) == 800 and sorted(r[2] for r in rows) == list(range(1, 801))
    # per source class, how many of its rows went to each published (q1, q2)
    moved = Counter((source[r[2]][:2], r[:2]) for r in rows)
    assert moved == {(("a", "x"), ("a", "x")): 500, (("a", "x"), ("*", "*")): 100,
                     (("b", "x"), ("*", "*")): 100, (("c", "y"), ("*", "*")): 100}


def test_buckets_take_consecutive_ranks(monkeypatch):
    """The bucket path deals the cell's rows in the order (bucket, hash): the 100 rows of ('a', 'x')
    that are suppressed are the first or the last 100 of the cell in that order (the hash of a
    row is hash(seed, its kept values); here the cell's 600 rows fall in 16 buckets)."""
    rows, _ = publish(monkeypatch, "buckets", SPLIT_STATEMENT.format(seed=1), "split_anon", SPLIT)
    starred = {r[2] for r in rows if r[:2] == ("*", "*")}
    con = duckanon.connect()
    con.execute(SPLIT)
    ranked = [r[0] for r in con.execute(
        "SELECT id FROM split WHERE q1 = 'a' ORDER BY (CAST(hash(1, id) % 16 AS BIGINT)) % 16, hash(1, id)").fetchall()]
    assert len(ranked) == 600
    assert starred & set(ranked) in (set(ranked[:100]), set(ranked[-100:]))


@pytest.mark.parametrize("path", list(PATHS))
def test_same_seed_same_table(monkeypatch, path):
    first, _ = publish(monkeypatch, path, SPLIT_STATEMENT.format(seed=7), "split_anon", SPLIT)
    again, _ = publish(monkeypatch, path, SPLIT_STATEMENT.format(seed=7), "split_anon", SPLIT)
    other, _ = publish(monkeypatch, path, SPLIT_STATEMENT.format(seed=8), "split_anon", SPLIT)
    assert first == again
    # another seed: other rows of ('a', 'x') are suppressed, in another order
    assert {r[2] for r in other if r[0] == "*"} != {r[2] for r in first if r[0] == "*"}


@pytest.mark.parametrize("keep", ["id", "grp"])
def test_both_paths_publish_the_same_multiset(monkeypatch, keep):
    """Many split cells (two parts each), with row ids or with a kept column of three values (whose
    rows tie in the order hash): both paths publish the same (QI, SA) rows per class, every part
    its count, the source's own sensitive value, and the same table for the same seed."""
    statement = SKEWED_STATEMENT.format(keep=keep, seed=3)
    results = {}
    for path in PATHS:
        rows, source = publish(monkeypatch, path, statement, "skewed_anon", SKEWED)
        again, _ = publish(monkeypatch, path, statement, "skewed_anon", SKEWED)
        assert rows == again
        assert len(rows) == 6000
        results[path] = rows
    window, buckets = results["window"], results["buckets"]
    # published rows are (q1, q2, s, kept); source[id] is (q1, q2, s, grp)
    assert Counter(r[:3] for r in window) == Counter(r[:3] for r in buckets)
    if keep == "id":
        per_class = {}
        for path, rows in results.items():
            assert sorted(r[3] for r in rows) == list(range(6000))
            assert all(r[2] == source[r[3]][2] for r in rows)  # its own sensitive value
            assert all(r[:2] in (("*", "*"), (source[r[3]][0], str(source[r[3]][1]))) for r in rows)
            # per source class and sensitive value, how many rows went to each published row
            per_class[path] = Counter((source[r[3]][:3], r[:3]) for r in rows)
        assert per_class["window"] == per_class["buckets"]
        assert sum(1 for (cell, shown) in per_class["window"] if shown[0] == "*") > 20  # many cells split
    else:
        assert Counter(r[3] for r in buckets) == Counter(r[3] for r in window) == {0: 2000, 1: 2000, 2: 2000}


@pytest.mark.parametrize("path", list(PATHS))
def test_on_spark(spark_session, monkeypatch, path):
    """The same split statement on Spark renders and publishes every part's count (Spark's hash is
    not DuckDB's, so which rows are suppressed may differ)."""
    from duckanon.spark import execute

    for name, value in PATHS[path].items():
        _set(monkeypatch, name, value)
    rows = [(q1, q2, i * 8 + j + 1) for i in range(100)
            for j, (q1, q2) in enumerate([("a", "x")] * 6 + [("b", "x"), ("c", "y")])]
    spark_session.createDataFrame(rows, ["q1", "q2", "id"]).createOrReplaceTempView("split")
    execute(spark_session, SPLIT_STATEMENT.format(seed=1))
    published = [tuple(r) for r in spark_session.table("split_anon").collect()]
    source = {r[2]: r[:2] for r in rows}
    assert sorted(r[2] for r in published) == list(range(1, 801))
    assert Counter((source[r[2]], r[:2]) for r in published) == {
        (("a", "x"), ("a", "x")): 500, (("a", "x"), ("*", "*")): 100,
        (("b", "x"), ("*", "*")): 100, (("c", "y"), ("*", "*")): 100}


@pytest.mark.parametrize("path", list(PATHS))
def test_on_spark_rows_whose_hashes_collide_are_placed_by_their_values(spark_session, monkeypatch, path):
    """Spark's hashes skip NULL arguments, so a row kept as (NULL, 'v') and one kept as ('v', NULL)
    share every order hash: here all 600 rows of the split cell ('a', 'x'). Which of them go to the
    suppressed part, and the order of every file, must still not depend on the order the source
    rows arrive in: the same table from the source read forwards and backwards."""
    from pyspark.sql import types as T

    from duckanon.spark import execute

    for name, value in PATHS[path].items():
        _set(monkeypatch, name, value)
    rows = ([("a", "x", None, "v")] * 300 + [("a", "x", "v", None)] * 300
            + [("b", "x", f"b{i % 7}", None) for i in range(100)] + [("c", "y", None, f"c{i % 5}") for i in range(100)])
    schema = T.StructType([T.StructField(c, T.StringType()) for c in ("q1", "q2", "a", "b")])
    published = []
    for ordered in (rows, rows[::-1]):
        spark_session.createDataFrame(ordered, schema).createOrReplaceTempView("collide")
        execute(spark_session, "ANONYMIZE collide WITH (k = 300, qi = (q1, q2), keep = (a, b), seed = 3)")
        published.append(stored_files(spark_session, "collide_anon"))
    forwards, backwards = published
    published_rows = Counter(r for file in forwards.values() for r in file)
    from_the_cell = {(None, "v"), ("v", None)}
    assert sum(n for r, n in published_rows.items() if r[:2] == ("*", "*") and r[2:] in from_the_cell) == 100
    assert sum(n for r, n in published_rows.items() if r[:2] == ("a", "x")) == 500
    assert backwards == forwards
