"""Every publish path against the floor at 10M rows, side by side (issue 18, targets 1 and 6).

    python benchmarks/bench_publish.py                     # 10M rows, 5 repetitions
    python benchmarks/bench_publish.py --copies 33 --reps 2  # ~1M rows, a quick look
    python benchmarks/bench_publish.py --out benchmarks/results/bench_publish.json

Input: Adult (30,162 rows, ../shared/data) with every row repeated `--copies` times (330: 9,953,460
rows) and an `id` column (row_number), built inside DuckDB; QIs `sex, age, race, marital-status,
education, native-country, workclass, occupation`, sensitive `salary-class`, k = 5 x copies (the
combinatorial problem of Adult with k = 5, scaled).

Each repetition runs, in this order and in one process (so the ratios are measured side by side):
  floor            one GROUP BY over the QIs and the SA into a temp table, plus one CREATE TABLE AS
                   SELECT joining the source back to it on those columns (IS NOT DISTINCT FROM),
                   publishing the source's columns (with id for the keep cases)
  table            ANONYMIZE, no kept column (rows generated from the class counts: from blocks of the
                   parts, generated.rows_per_block, so that both threads write them)
  table, one thread  the same with the rows generated from the keyed table itself (one row group,
                   so one thread: the path before blocks); same rows in the same order as `table`
  keep             ANONYMIZE ... keep = (id): the join back to the source and the seeded sort
  keep, split      a table `split` of as many rows, QIs (q1, q2) and an id: the rows ('a', 'x'),
                   ('b', 'x'), ('c', 'y') in proportions 6:1:1, k = 3/8 of the rows: the solution
                   moves a sixth of class ('a', 'x') into the suppressed group, so one cell of 75%
                   of the rows is split (the split path at its heaviest: its rows are dealt into
                   the parts by buckets of their order hash, keyed.SMALL_CELL); its floor is
                   the same GROUP BY + join on that table
  keep, split, window  the same statement with the cell ranked by a window over the whole cell
                   (keyed.SMALL_CELL raised above it), the split path before the buckets
  view             ANONYMIZE ... materialize = 'view' (a view over a table of counts)
Ratios are ANONYMIZE's wall time over the floor's of the same repetition (with id in the floor
for the keep cases). A repetition counts as disturbed when other processes took more than 10% of
a core meanwhile (bench_anonymize.Meter); the medians use every repetition, the spread is shown.

Same answer: before the repetitions the split case is published once by the window (as before the
buckets); every split release of the repetitions must publish the same multiset as it: per source
class (q1, q2) the number of its rows under each published (q1, q2), every id once.

Then, once, the bytes on disk: each form published INTO its own attached database file (table,
view and its table of counts), the file's size after DETACH.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path

import duckdb

import duckanon
import duckanon.pipeline.generated as generated
import duckanon.pipeline.keyed as keyed
import duckanon.pipeline.materialize as materialize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anonymize import ADULT_CSV, QI, SA, Meter, q  # noqa: E402
from machine import cpu_model  # noqa: E402

CASES = {
    "table": "",
    "table, one thread": "",  # generated.BLOCKED_FROM_ROWS raised above the table's rows
    "keep": ", keep = (id)",
    "keep, split": None,  # its own table and statement: split_statement
    "keep, split, window": None,  # the same, its cell ranked by a window (the split path before buckets)
    "view": ", materialize = 'view'",
}
SPLIT_CASES = ("keep, split", "keep, split, window")
FLOOR_OF = {"table": "floor", "table, one thread": "floor", "keep": "floor with id", "keep, split": "floor of split",
            "keep, split, window": "floor of split", "view": "floor"}


def statement(copies: int, extra: str, into: str = "") -> str:
    return (f"ANONYMIZE big {into}WITH (k = {5 * copies}, qi = ({', '.join(q(c) for c in QI)}), "
            f"sensitive = {q(SA)}, seed = 1{extra})")


def split_statement(rows: int) -> str:
    return f"ANONYMIZE split INTO big_anon WITH (k = {3 * rows // 8}, qi = (q1, q2), keep = (id), seed = 1)"


def load_big(raw, copies: int) -> None:
    """Adult as `adult`, and `big`: every row of it `copies` times, with an `id` (row_number)."""
    raw.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT_CSV.as_posix()}', delim = ';', header = true)")
    raw.execute(f"CREATE TABLE big AS SELECT a.*, row_number() OVER () AS id FROM adult a, range({copies}) r(i)")


def floor(raw, table: str, keys: list[str], published: str) -> None:
    """GROUP BY the keys into a temp table, then CREATE TABLE AS the source joined back to it."""
    raw.execute("DROP TABLE IF EXISTS floor_groups")
    raw.execute(f"CREATE TEMP TABLE floor_groups AS SELECT {', '.join(q(c) for c in keys)}, count(*) AS n "
                f"FROM {table} GROUP BY ALL")
    floor_join(raw, table, keys, published)


def floor_join(raw, table: str, keys: list[str], published: str) -> None:
    """The floor's second statement: CREATE TABLE AS the source joined back to floor_groups."""
    raw.execute("DROP TABLE IF EXISTS floor_out")
    on = " AND ".join(f"src.{q(c)} IS NOT DISTINCT FROM g.{q(c)}" for c in keys)
    raw.execute(f"CREATE TABLE floor_out AS SELECT {published} FROM {table} src JOIN floor_groups g ON {on}")


FLOORS = {
    "floor": lambda raw: floor(raw, "big", QI + [SA], ", ".join(f"src.{q(c)}" for c in QI + [SA])),
    "floor with id": lambda raw: floor(raw, "big", QI + [SA], "src.*"),
    "floor of split": lambda raw: floor(raw, "split", ["q1", "q2"], "src.*"),
}


def split_answer(raw) -> tuple[list, int]:
    """The split release's multiset per class: (source q1, q2, published q1, q2, rows), and its
    number of distinct ids."""
    per_class = raw.execute("SELECT s.q1, s.q2, p.q1, p.q2, count(*) FROM split s JOIN big_anon p USING (id) "
                            "GROUP BY ALL ORDER BY ALL").fetchall()
    return per_class, raw.execute("SELECT count(DISTINCT id) FROM big_anon").fetchone()[0]


def by_window(con, split_rows: int) -> None:
    """The split case with its cell ranked by a window over the whole cell (SMALL_CELL raised above
    it: how every split cell was ranked before the buckets)."""
    small_cell = keyed.SMALL_CELL
    keyed.SMALL_CELL = 1 << 62
    try:
        con.execute(split_statement(split_rows))
    finally:
        keyed.SMALL_CELL = small_cell


def unblocked(con, copies: int) -> None:
    """The table path with its rows generated from the keyed table on one thread (no blocks)."""
    blocked_from = generated.BLOCKED_FROM_ROWS
    generated.BLOCKED_FROM_ROWS = 1 << 62
    try:
        con.execute(statement(copies, CASES["table, one thread"]))
    finally:
        generated.BLOCKED_FROM_ROWS = blocked_from


def ordered_fingerprint(raw) -> int:
    """The published rows with their positions, as one number: equal for equal rows in equal order."""
    columns = ", ".join(q(c) for c in QI + [SA])
    return raw.execute(f"SELECT sum(hash(r, {columns})::HUGEINT) FROM "
                       f"(SELECT row_number() OVER () AS r, {columns} FROM big_anon)").fetchone()[0]


class SplitSeen:
    """Whether the keyed table had split cells (rows of one cell in several published groups)."""

    def __init__(self):
        self.seen = []
        self.original = materialize.any_split

    def __call__(self, parts):
        found = self.original(parts)
        self.seen.append(found)
        return found


def run(copies: int, reps: int, only: list[str] | None = None) -> dict:
    con = duckanon.connect()
    raw = con.duckdb
    load_big(raw, copies)
    rows = raw.execute("SELECT count(*) FROM big").fetchone()[0]
    raw.execute(f"CREATE TABLE split AS SELECT v.q1, v.q2, row_number() OVER () AS id FROM (VALUES ('a', 'x'), "
                f"('a', 'x'), ('a', 'x'), ('a', 'x'), ('a', 'x'), ('a', 'x'), ('b', 'x'), ('c', 'y')) v(q1, q2), "
                f"range({rows // 8}) r(i)")
    split_rows = raw.execute("SELECT count(*) FROM split").fetchone()[0]
    wanted = [name for name in CASES if only is None or name in only]
    reference = ([], 0)
    if any(name in SPLIT_CASES for name in wanted):
        by_window(con, split_rows)
        reference = split_answer(raw)
        assert reference[1] == split_rows, "the window path did not publish every id once"
    split = SplitSeen()
    materialize.any_split = split
    results = {name: [] for name in [*dict.fromkeys(FLOOR_OF[n] for n in wanted), *wanted]}
    order_of_table = None
    for rep in range(reps):
        for name in results:
            with Meter() as meter:
                if name in FLOORS:
                    FLOORS[name](raw)
                elif name == "keep, split":
                    con.execute(split_statement(split_rows))
                elif name == "keep, split, window":
                    by_window(con, split_rows)
                elif name == "table, one thread":
                    unblocked(con, copies)
                else:
                    con.execute(statement(copies, CASES[name]))
            record = meter.record()
            if name in CASES:
                record["published_rows"] = raw.execute("SELECT count(*) FROM big_anon").fetchone()[0]
            if name in ("table", "table, one thread"):
                fingerprint = ordered_fingerprint(raw)
                order_of_table = order_of_table or fingerprint
                record["same_answer"] = fingerprint == order_of_table
                assert record["same_answer"], "the blocks published other rows or another order"
            if name in SPLIT_CASES:
                record["same_answer"] = split_answer(raw) == reference
                assert record["same_answer"], "the split release differs from the window path's multiset"
                assert split.seen and split.seen[-1], "the split case had no split cell: it does not measure that path"
            results[name].append(record)
            print(f"rep {rep + 1} {name:12s} {record['wall']:6.2f} s  cpu {record['cpu']:6.2f} s"
                  f"{'' if record['clean'] else '  (disturbed)'}", flush=True)
    materialize.any_split = split.original
    summary = {}
    for name in wanted:
        base = FLOOR_OF[name]
        ratios = [case["wall"] / ref["wall"] for case, ref in zip(results[name], results[base])]
        summary[name] = {
            "median_s": statistics.median(r["wall"] for r in results[name]),
            "floor_median_s": statistics.median(r["wall"] for r in results[base]),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "cpu_ratio_median": statistics.median(
                case["cpu"] / ref["cpu"] for case, ref in zip(results[name], results[base])),
            "clean_reps": sum(case["clean"] and ref["clean"] for case, ref in zip(results[name], results[base])),
        }
    return {"rows": rows, "split_rows": split_rows, "copies": copies, "reps": reps, "runs": results, "summary": summary,
            "split_reference": [list(r) for r in reference[0]],
            "split_cells_seen": split.seen, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def bytes_on_disk(copies: int) -> dict:
    """Each form published into its own database file: the file's size after DETACH."""
    sizes = {}
    with tempfile.TemporaryDirectory() as work:
        con = duckanon.connect()
        raw = con.duckdb
        load_big(raw, copies)
        for name in ("table", "view"):
            path = Path(work) / f"{name}.duckdb"
            raw.execute(f"ATTACH '{path}' AS out_{name}")
            with Meter() as meter:
                con.execute(statement(copies, CASES[name], into=f"INTO out_{name}.big_anon "))
            raw.execute(f"DETACH out_{name}")
            sizes[name] = {"bytes": path.stat().st_size, "seconds": meter.wall}
        check = duckdb.connect(str(Path(work) / "view.duckdb"), read_only=True)
        sizes["view"]["counts_rows"] = check.execute("SELECT count(*) FROM big_anon_counts").fetchone()[0]
        sizes["view"]["rows"] = check.execute("SELECT count(*) FROM big_anon").fetchone()[0]
        check.close()
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=330)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), help="only these paths (and their floors)")
    parser.add_argument("--no-disk", action="store_true", help="skip the bytes-on-disk step")
    args = parser.parse_args()
    result = run(args.copies, args.reps, args.cases)
    if not args.no_disk:
        result["disk"] = bytes_on_disk(args.copies)
    result["machine"] = {"cpu": cpu_model(), "duckdb": duckdb.__version__}
    print(f"\n{result['rows']:,} rows, {args.reps} repetitions, DuckDB {duckdb.__version__}, {cpu_model()}")
    print("| path | ANONYMIZE s (median) | floor s (median) | ratio median (min-max) | CPU ratio | undisturbed reps |")
    print("|---|---|---|---|---|---|")
    for name, s in result["summary"].items():
        print(f"| {name} | {s['median_s']:.2f} | {s['floor_median_s']:.2f} | {s['ratio_median']:.2f} "
              f"({s['ratio_min']:.2f}-{s['ratio_max']:.2f}) | {s['cpu_ratio_median']:.2f} | {s['clean_reps']} |")
    disk = result.get("disk")
    if disk:
        print(f"\nbytes on disk: table {disk['table']['bytes']:,} ({disk['table']['seconds']:.2f} s), "
              f"view {disk['view']['bytes']:,} ({disk['view']['seconds']:.2f} s; {disk['view']['counts_rows']:,} "
              f"rows of counts for {disk['view']['rows']:,} published rows)")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
