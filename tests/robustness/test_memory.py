"""Resource bounds: the solver side's memory is estimated inside DuckDB before the histogram is
fetched, refused up front above the budget (the database unchanged), and the estimate is an upper
bound on what the histogram and the solvers really allocate (tracemalloc: numpy's buffers are
traced). The large-scale figures (10M rows, peak RSS, no OOM kill) are in benchmarks/bench_memory.py."""

import json
import tracemalloc

import pytest

import duckanon
from duckanon.pipeline.histogram import solver_memory_estimate

SOURCE = ("CREATE TABLE u AS SELECT i AS id, i % 7 AS b, (i * 31) % 1000 AS c, 'd' || (i % {n_sa}) AS s "
          "FROM range({rows}) r(i)")


def test_refused_up_front_and_nothing_written():
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=100_000, n_sa=13))
    con.duckdb.execute("CREATE TABLE u_anon AS SELECT 'old' AS v")
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute("ANONYMIZE u WITH (k = 5, l = 2, qi = (id, b), sensitive = s, memory_limit = '10MB')")
    assert str(caught.value) == (
        "the class histogram is too large for the memory limit: 100,000 classes x 13 sensitive values (100,000 "
        "cells) need about 147.9 MiB in the solver, above 9.5 MiB; use fewer or coarser quasi-identifiers "
        "(hierarchies), or raise the option memory_limit")
    assert con.duckdb.execute("SELECT * FROM u_anon").fetchall() == [("old",)]
    assert con.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0
    # with k alone the sensitive values are left out of the solver, and still it does not fit
    with pytest.raises(duckanon.AnonymizeError) as caught:
        con.execute("ANONYMIZE u WITH (k = 5, qi = (id, b), sensitive = s, memory_limit = '10MB')")
    assert str(caught.value).startswith(
        "the class histogram is too large for the memory limit: 100,000 classes (100,000 cells) need about 93.0 MiB")
    assert con.duckdb.execute("SELECT * FROM u_anon").fetchall() == [("old",)]
    assert con.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0] == 0


def test_k_alone_leaves_many_sensitive_values_out_of_the_solver():
    """7 classes x 5,000 SA values do not fit 68 MiB in the solver; with k alone the SA values are not
    needed there: the histogram has 7 classes, the sensitive column is published per row from the
    source, and the result is k-anonymous with the source's SA values row for row (per class). With
    l the same request is refused."""
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=100_000, n_sa=5000))
    assert solver_memory_estimate(7, 35_000, 1, 5000) > 68 * 2**20 > solver_memory_estimate(7, 7, 1, 1)
    with pytest.raises(duckanon.AnonymizeError, match="7 classes x 5,000 sensitive values"):
        con.execute("ANONYMIZE u WITH (k = 5, l = 2, qi = (b), sensitive = s, memory_limit = '68MiB')")
    summary = con.anonymize("ANONYMIZE u WITH (k = 5, qi = (b), sensitive = s, memory_limit = '68MiB', seed = 3)")
    assert summary.classes == 7 and summary.stars == 0 and summary.rows == 100_000
    assert json.loads(summary.details)["sensitive_in_solver"] is False
    assert [d[0] for d in con.duckdb.execute("SELECT * FROM u_anon LIMIT 0").description] == ["b", "s"]
    # the published (b, s) multiset is the source's (nothing needed starring), checked in SQL
    differ = con.duckdb.execute("SELECT count(*) FROM ((SELECT b, s FROM u EXCEPT ALL SELECT b, s FROM u_anon) "
                                "UNION ALL (SELECT b, s FROM u_anon EXCEPT ALL SELECT b, s FROM u))").fetchone()[0]
    assert differ == 0
    assert con.duckdb.execute("SELECT min(n) FROM (SELECT count(*) AS n FROM u_anon GROUP BY b)").fetchone()[0] >= 5
    # the provenance still names the sensitive column (REPORT reads it)
    comment = con.duckdb.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'u_anon'").fetchone()[0]
    assert json.loads(comment.removeprefix("duckanon "))["sensitive"] == "s"


def test_k_alone_with_suppression_and_too_many_sensitive_values():
    """Stars as well: a unique id with a coarse column; SA values left out of the solver; every
    published class has >= k rows, and each source row's s appears with its row's kept id."""
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=20_000, n_sa=4000))
    summary = con.anonymize("ANONYMIZE u WITH (k = 4, qi = (c, b), sensitive = s, keep = id, method = 'mapprox', "
                            "memory_limit = '70MB', seed = 1)")
    assert json.loads(summary.details)["sensitive_in_solver"] is False and summary.rows == 20_000
    assert con.duckdb.execute("SELECT min(n) FROM (SELECT count(*) AS n FROM u_anon GROUP BY c, b)").fetchone()[0] >= 4
    mismatched = con.duckdb.execute("SELECT count(*) FROM u_anon a JOIN u ON a.id = u.id WHERE a.s <> u.s").fetchone()[0]
    assert mismatched == 0 and con.duckdb.execute("SELECT count(DISTINCT id) FROM u_anon").fetchone()[0] == 20_000


@pytest.mark.parametrize("value,message", [
    ("'10 parsecs'", "option memory_limit must be a size such as '4GB' or '512MiB', got '10 parsecs'"),
    ("0", "option memory_limit must be a positive size"),
    ("'-1GB'", "option memory_limit must be a size such as"),
])
def test_bad_memory_limits(value, message):
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=10, n_sa=2))
    with pytest.raises(duckanon.AnonymizeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        con.execute(f"ANONYMIZE u WITH (k = 2, memory_limit = {value})")


@pytest.mark.parametrize("method,qi,n_sa,extra", [
    ("mapprox", "id, b", 13, ""), ("greedy", "id, b", 13, ""), ("auto", "id, b", 13, ""),
    ("auto", "id, b, c", 60, ""), ("tp+", "id, b", 13, ", l = 3"), ("topdown", "id, b", 13, ", t = 0.3"),
    ("carve", "id, b", 13, ", t = 0.3"), ("auto", "c, b", 13, ", l = 2"),
])
def test_estimate_bounds_the_measured_allocations(method, qi, n_sa, extra):
    rows = 40_000
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=rows, n_sa=n_sa))
    m = len(qi.split(","))
    classes = con.duckdb.execute(f"SELECT count(*) FROM (SELECT DISTINCT {qi} FROM u)").fetchone()[0]
    cells = con.duckdb.execute(f"SELECT count(*) FROM (SELECT DISTINCT {qi}, s FROM u)").fetchone()[0]
    tracemalloc.start()
    try:
        con.execute(f"ANONYMIZE u WITH (k = 5, qi = ({qi}), sensitive = s, method = '{method}'{extra})")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = solver_memory_estimate(classes, cells, m, n_sa)
    assert peak <= estimate, f"{method}: measured {peak / 2**20:.1f} MiB, estimated {estimate / 2**20:.1f} MiB"


def test_the_exact_class_count_is_used_when_the_cell_bound_is_too_coarse():
    """7 classes x 1,000 SA values: 7,000 cells would (as classes) exceed 100MB, 7 classes do not."""
    con = duckanon.connect()
    con.duckdb.execute(SOURCE.format(rows=100_000, n_sa=1000))
    assert solver_memory_estimate(7000, 7000, 1, 1000) > 100e6 > solver_memory_estimate(7, 7000, 1, 1000)
    summary = con.anonymize("ANONYMIZE u WITH (k = 5, qi = (b), sensitive = s, memory_limit = '100MB')")
    assert summary.classes == 7 and summary.stars == 0


def _wide_random(con, rows: int, m: int) -> None:
    """`rows` rows of m columns of uniform values (column j: 2 + j mod 25 values), seeded."""
    import numpy as np
    import pyarrow as pa
    rng = np.random.default_rng(11)
    table = pa.table({f"q{j}": rng.integers(0, 2 + j % 25, rows, dtype=np.int8) for j in range(m)})
    con.duckdb.register("generated", table)
    con.duckdb.execute("CREATE TABLE w AS SELECT * FROM generated")
    con.duckdb.unregister("generated")


def test_segments_keeps_codes_compact_where_int64_codes_would_not_fit():
    """40,000 rows x 30 QIs: as int64 codes the solver would need about 161 MiB, in segments' compact
    codes (a byte each) about 75 MiB; under 120 MiB segments publishes, greedy (which widens the
    codes) and auto (below WIDE_CELL_LIMIT it runs greedy too) are refused, the database unchanged."""
    con = duckanon.connect()
    _wide_random(con, 40_000, 30)
    qi = ", ".join(f"q{j}" for j in range(30))
    classes = con.duckdb.execute(f"SELECT count(*) FROM (SELECT DISTINCT {qi} FROM w)").fetchone()[0]
    assert solver_memory_estimate(classes, classes, 30, 1) > 120 * 2**20 > solver_memory_estimate(classes, classes, 30, 1, 1)
    for method in ("greedy", "auto"):
        with pytest.raises(duckanon.AnonymizeError, match="the class histogram is too large for the memory limit"):
            con.execute(f"ANONYMIZE w INTO w_anon WITH (k = 5, qi = ({qi}), method = '{method}', memory_limit = '120MiB')")
        assert con.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'w_anon'").fetchone()[0] == 0
    tracemalloc.start()
    try:
        summary = con.anonymize(f"ANONYMIZE w INTO w_anon WITH (k = 5, qi = ({qi}), method = 'segments', "
                                "memory_limit = '120MiB', seed = 2)")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= solver_memory_estimate(classes, classes, 30, 1, 1)
    assert summary.rows == 40_000 and summary.method == "segments"
    smallest = con.duckdb.execute(f"SELECT min(n) FROM (SELECT count(*) AS n FROM w_anon GROUP BY {qi})").fetchone()[0]
    assert smallest >= 5


def test_compact_estimate_bounds_segments_on_many_columns():
    """150 QIs of 3 values (an attack's case at 45,000 rows: 136 MiB measured where the estimate
    said 93 MiB before it counted segments' block of positions): the estimate bounds tracemalloc's peak."""
    con = duckanon.connect()
    qi = ", ".join(f"q{j}" for j in range(150))
    con.duckdb.execute(f"CREATE TABLE m AS SELECT {', '.join(f'(hash(i * {j + 3}) % 3)::INT AS q{j}' for j in range(150))} "
                       "FROM range(20000) t(i)")
    classes = con.duckdb.execute(f"SELECT count(*) FROM (SELECT DISTINCT {qi} FROM m)").fetchone()[0]
    tracemalloc.start()
    try:
        summary = con.anonymize(f"ANONYMIZE m WITH (k = 3, qi = ({qi}), method = 'segments', seed = 1)")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.method == "segments" and classes == 20_000
    assert peak <= solver_memory_estimate(classes, classes, 150, 1, 1)


WIDE = ("CREATE TABLE w AS SELECT i AS id, {cols} FROM range({rows}) r(i)")


@pytest.mark.parametrize("method, hierarchies", [
    ("mondrian", ", hierarchies = 'intervals(2, 4, 8)'"), ("auto", ", hierarchies = 'intervals(2, 4, 8)'"),
    ("mondrian", ""),
])
def test_estimate_bounds_the_local_recodings_on_a_wide_table(method, hierarchies):
    """1,000 rows x 40 QIs of 100 values (an attack: 3,000 rows took 771 MiB where the estimate said
    73.6): with hierarchies `mondrian` and `auto` run the recoding of record subsets (its packing
    holds a box per node and class) and without them mondrian's refinement holds counts per group
    and value; the statement's own estimate (the one its refusal states) counts both."""
    con = duckanon.connect()
    cols = ", ".join(f"(hash(i * {j + 7} + {j}) % 100)::INT AS q{j}" for j in range(40))
    con.duckdb.execute(WIDE.format(cols=cols, rows=1_000))
    statement = (f"ANONYMIZE w WITH (k = 3, qi = ({', '.join(f'q{j}' for j in range(40))}), seed = 1, "
                 f"method = '{method}'{hierarchies}")
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute(statement + ", memory_limit = '1MB')")
    stated = str(refused.value).split(" need about ")[1].split(" MiB in the solver")[0]
    estimate = float(stated) * 2**20
    tracemalloc.start()
    try:
        con.execute(statement + ", memory_limit = '4GB')")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= estimate - 0.1 * 2**20, f"{method}: measured {peak / 2**20:.1f} MiB, estimated {stated} MiB"
