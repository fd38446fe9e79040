"""REFRESH ... WITH (mode = 'stable') on monthly batches of Adult (issue 21).

    python benchmarks/bench_refresh_stable.py [--k 5] [--limit 0.05] [--batches 6] [--seed 7]

Adult (30,162 rows, ../shared/data/adult, ARX hierarchies, 8 QIs: every column but salary-class)
split by a seeded hash into --batches batches; month 1 publishes batch 1 with the lattice (metric
loss), each later month appends the next batch and runs REFRESH pub WITH (mode = 'stable'). Per
month: the mode used, the share of the rows published the month before whose published QI values
are the same now (rows matched by a kept row id), the share for a fresh solve instead (ANONYMIZE
of the same rows into another table), and both releases' ARX Loss (details.loss). Writes
benchmarks/results/bench_refresh_stable.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckanon

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def published(con, table: str) -> dict:
    columns = ", ".join(f'"{c}"' for c in QI)
    return {row[0]: row[1:] for row in con.execute(f"SELECT rid, {columns} FROM {table}").fetchall()}


def same_share(before: dict, after: dict) -> float:
    common = [rid for rid in before if rid in after]
    return sum(before[rid] == after[rid] for rid in common) / len(common) if common else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--limit", type=float, default=0.05)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT row_number() OVER () AS rid, * FROM read_csv('{ADULT / 'adult.csv'}', "
                "delim=';', all_varchar=true)")
    con.execute(f"CREATE TABLE batches AS SELECT *, hash(rid, {args.seed}) % {args.batches} AS batch FROM adult")
    con.execute("CREATE TABLE src AS SELECT * EXCLUDE (batch) FROM batches WHERE batch = 0")
    columns = ", ".join(f'"{c}"' for c in QI)
    options = (f"k = {args.k}, qi = ({columns}), keep = (rid), method = 'lattice', metric = 'loss', "
               f"suppression_limit = {args.limit}, hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv', seed = 1")
    cursor = con.execute(f"ANONYMIZE src INTO pub WITH ({options})")
    row = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
    details = json.loads(row["details"])
    lines = [f"# REFRESH stable on {args.batches} monthly batches of Adult (k = {args.k}, {args.limit:.0%} suppression, "
             "8 QIs, lattice, loss)", "",
             "| month | rows | mode used | levels (stable) | same QI values, stable | same, fresh solve | "
             "loss stable | loss fresh | loss stable / fresh |", "|---|---|---|---|---|---|---|---|---|",
             f"| 1 | {row['rows']} | publish | {details['levels']} | - | - | {details['loss']:.6f} | "
             f"{details['loss']:.6f} | 1.000 |"]
    print(lines[-1], flush=True)
    before_stable = before_fresh = published(con, "pub")
    for month in range(1, args.batches):
        con.execute(f"INSERT INTO src SELECT * EXCLUDE (batch) FROM batches WHERE batch = {month}")
        cursor = con.execute("REFRESH pub WITH (mode = 'stable')")
        refreshed = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
        stable = json.loads(con.execute("SELECT summary FROM duckanon_publications WHERE target_name = 'pub'"
                                        ).fetchone()[0])["details"]
        cursor = con.execute(f"ANONYMIZE src INTO fresh WITH ({options})")
        fresh = json.loads(dict(zip([d[0] for d in cursor.description], cursor.fetchone()))["details"])
        after_stable, after_fresh = published(con, "pub"), published(con, "fresh")
        lines.append(f"| {month + 1} | {refreshed['source_rows_after']} | {refreshed['mode_used'].split(':')[0]} | "
                     f"{stable['levels']} | {same_share(before_stable, after_stable):.4f} | "
                     f"{same_share(before_fresh, after_fresh):.4f} | {stable['loss']:.6f} | {fresh['loss']:.6f} | "
                     f"{stable['loss'] / fresh['loss']:.3f} |")
        print(lines[-1], flush=True)
        before_stable, before_fresh = after_stable, after_fresh
    out = ROOT / "benchmarks" / "results" / "bench_refresh_stable.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
