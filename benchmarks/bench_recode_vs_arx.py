"""Hierarchy labels against ARX's local recoding, loss and time (issue 38).

For each case of the ARX side-by-side harness, `mondrian` with the hierarchies (the top-down
splits, the recodings of record subsets of solver/recode.py, the lowest loss kept) and `auto` with
them run in this process `--repeat` times; each published table is scored by the harness's oracle
(arxloss.loss, ARX's Loss) and checked by its checker (arxloss.check), exactly as
bench_loss_vs_arx.py does (its run_case). ARX's best local recoding (the better of `arx_lr_case`
and `arx_lr_fast`) and the time of that recoding (its `lr_ms`: optimize* alone, in the JVM, after
the first anonymization) are read from a harness results folder; no ARX runs here.

    python benchmarks/bench_recode_vs_arx.py --arx-results /work/arxside/results/<run> [--only adult9] [--repeat 3]

Prints a markdown table (loss ratio to ARX's best local recoding, median seconds of the whole
statement against ARX's local recoding's milliseconds) and writes it with the raw figures to
benchmarks/results/bench_recode_vs_arx.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench_loss_vs_arx import RESULTS, TARGET, run_case
from harness_cases import harness

import arxloss  # noqa: E402  (the harness's oracle and checker, on the path harness_cases set)

METHODS = ("mondrian_hierarchies", "auto_hierarchies")


def arx_best_local_recoding(results: Path) -> dict[str, dict]:
    """Per case, ARX's better local recoding: its oracle loss, recipe and seconds (lr_ms)."""
    best: dict[str, dict] = {}
    for line in (results / "raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        oracle = record.get("oracle") or {}
        if record.get("step") not in ("arx_lr_case", "arx_lr_fast") or "loss_geo" not in oracle:
            continue
        mine = {"loss": oracle["loss_geo"], "recipe": record["step"], "seconds": record["lr"]["lr_ms"] / 1e3}
        if record["case"] not in best or mine["loss"] < best[record["case"]]["loss"]:
            best[record["case"]] = mine
    return best


def recorded_arx(earlier: Path) -> dict[str, dict]:
    """ARX's best local recoding per case as an earlier run of this script recorded it."""
    return {r["case"]: r["arx_best_lr"] for r in json.loads(earlier.read_text()) if r.get("arx_best_lr")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--arx-results", type=Path, help="a harness results folder (raw.jsonl)")
    source.add_argument("--arx-from", type=Path, help="an earlier run's bench_recode_vs_arx.json: ARX's figures it "
                        "recorded (`arx_best_lr`), when the harness's results folder is not on this machine")
    parser.add_argument("--only", default="", help="cases whose id contains this")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS), help="auto_hierarchies alone: its details name "
                        "mondrian's loss among its candidates")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_recode_vs_arx.md")
    args = parser.parse_args()
    arx = arx_best_local_recoding(args.arx_results) if args.arx_results else recorded_arx(args.arx_from)
    methods = args.methods.split(",")
    records = []
    for case in harness.cases():
        if args.only not in case["id"]:
            continue
        pattern = harness.DATASETS[case["ds"]]["hier"].replace("{col}", "{}")
        hierarchies = {c: arxloss.Hierarchy(pattern.format(c)) for c in case["qis"]}
        for method in methods:
            runs = [run_case(case, method, hierarchies) for _ in range(args.repeat)]
            losses = {round(r["oracle_loss"], 12) for r in runs}
            record = {"case": case["id"], **runs[0], "seconds_runs": [r["seconds"] for r in runs],
                      "seconds": statistics.median(r["seconds"] for r in runs), "same_loss_every_run": len(losses) == 1,
                      "ok": all(r["ok"] for r in runs)}
            lr = arx.get(case["id"])
            if lr:  # kept with the run, so that a later run can read ARX's figures back (--arx-from)
                record.update(arx_best_lr=lr, loss_ratio=record["oracle_loss"] / lr["loss"],
                              time_ratio=record["seconds"] / lr["seconds"])
            records.append(record)
            print(json.dumps({k: record[k] for k in ("case", "method", "oracle_loss", "seconds", "ok")}), flush=True)
    lines = ["# Hierarchy labels against ARX's local recoding (ARX's Loss, geometric mean)", "",
             f"ARX from `{args.arx_results or args.arx_from}`; {args.repeat} run(s) per statement, median seconds of the whole "
             "statement; ARX's seconds are its local recoding's (`lr_ms`). Ratio < 1: duckanon loses less.", "",
             "| case | ARX best LR (recipe, s) | " + " | ".join(methods) + " | auto's pick (mondrian's loss) "
             "| loss ratio (auto) | <= 0.8 | time ratio (auto) |",
             "|---|---|" + "---|" * len(methods) + "---|---|---|---|"]
    for case in harness.cases():
        mine = {r["method"]: r for r in records if r["case"] == case["id"]}
        if not mine:
            continue
        lr = arx.get(case["id"])
        cells = []
        for method in methods:
            r = mine[method]
            ratio = f" ({r['oracle_loss'] / lr['loss']:.2f}x)" if lr else ""
            cells.append(f"{r['oracle_loss']:.4f}{ratio}, {r['seconds']:.2f} s{'' if r['ok'] else ' FAILS CHECK'}")
        auto = mine["auto_hierarchies"]
        pick = f"{auto['chosen']} ({(auto['candidates'] or {}).get('mondrian')})"
        ratio = auto["oracle_loss"] / lr["loss"] if lr else None
        head = "-" if lr is None else f"{lr['loss']:.4f} ({lr['recipe']}, {lr['seconds']:.2f} s)"
        met = "-" if ratio is None else ("yes" if ratio <= TARGET and auto["ok"] else "no")
        time_ratio = "-" if lr is None else f"{auto['seconds'] / lr['seconds']:.2f}"
        lines.append(f"| {case['id']} | {head} | " + " | ".join(cells)
                     + f" | {pick} | {'-' if ratio is None else f'{ratio:.2f}'} | {met} | {time_ratio} |")
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    args.out.with_suffix(".json").write_text(json.dumps(records, indent=1, default=str))


if __name__ == "__main__":
    main()
