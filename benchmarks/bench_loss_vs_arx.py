"""Information loss against ARX's local recoding, on ARX's own metric (issue 22).

For each case of the ARX side-by-side harness (../shared/arx-side-by-side/py/harness.py: Adult 9
and 8 QIs x k in {2, 5, 10, 100} x suppression {0, 5%}, distinct l = 3 and t = 0.2 on occupation
with 4%, CUP k = 5 at 0 and 5%), every duckanon method that generalizes runs the case in this
process, its published table is scored by the harness's independent oracle (arxloss.loss: ARX's
Loss, validated against ARX's own scores) and checked by the harness's independent checker
(arxloss.check), and compared with the better of ARX's two local recodings, whose oracle losses
are read from a harness results folder (`run.sh` writes them to <results>/raw.jsonl; no ARX runs
here).

    python benchmarks/bench_loss_vs_arx.py --arx-results /tmp/arxside/results/<run> [--only adult9_k100]

Methods: lattice (metric loss), gensup (metric loss), mondrian over the hierarchies (labels),
mondrian without them (sets; numeric columns as text), auto with the hierarchies (the lowest of
the first three). Prints a markdown table (loss, ratio to ARX's best local recoding, seconds of
the whole statement, privacy check) and writes it with the raw figures to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness_cases import ROOT, anonymize, connection, harness, hierarchy_options, q, request_options

import arxloss  # noqa: E402  (the harness's independent oracle and checker, on the path harness_cases set)

RESULTS = ROOT / "benchmarks" / "results"

METHODS = ("lattice", "gensup", "mondrian_hierarchies", "mondrian_sets", "auto_hierarchies")
TARGET = 0.8  # the best duckanon output loses at least 20% less than ARX's best local recoding


def statement(case: dict, method: str) -> str:
    name = method.split("_")[0]
    options = request_options(case, name)
    if method in ("lattice", "gensup"):
        options.append("metric = 'loss'")
    if method != "mondrian_sets":
        options += hierarchy_options(case)
    return anonymize(options)


def arx_local_recoding(results: Path) -> dict[str, dict]:
    """Per case, the oracle's loss of ARX's two local recodings (harness steps arx_lr_case and
    arx_lr_fast), from a harness results folder."""
    out: dict[str, dict] = {}
    for line in (results / "raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        oracle = record.get("oracle") or {}
        if record.get("step") in ("arx_lr_case", "arx_lr_fast") and "loss_geo" in oracle:
            out.setdefault(record["case"], {})[record["step"]] = oracle["loss_geo"]
    return out


def run_case(case: dict, method: str, hierarchies: dict) -> dict:
    con = connection(case["ds"])
    text = statement(case, method)
    started = time.perf_counter()
    cursor = con.execute(text)
    names = [d[0] for d in cursor.description]
    result = dict(zip(names, cursor.fetchone()))
    seconds = time.perf_counter() - started
    details = json.loads(result["details"] or "{}")
    columns = case["qis"] + ([case["sensitive"]] if case["sensitive"] and (case["l"] or case["t"] >= 0) else [])
    rows = [["*" if v is None else str(v) for v in row]
            for row in con.execute(f"SELECT {', '.join(q(c) for c in columns)} FROM out").fetchall()]
    n_source = con.execute("SELECT count(*) FROM src").fetchone()[0]
    scored = arxloss.loss(rows, columns, case["qis"], hierarchies, n_source)
    source_sa = None
    if case["sensitive"] and case["t"] >= 0:
        source_sa = [r[0] for r in con.execute(f"SELECT {q(case['sensitive'])} FROM src").fetchall()]
    check = arxloss.check(rows, columns, case["qis"], n_source, k=case["k"], l=case["l"], t=case["t"],
                          sensitive=case["sensitive"] or None, source_sa=source_sa)
    return {"method": method, "statement": text, "seconds": seconds, "oracle_loss": scored["loss_geo"],
            "duckanon_loss": details.get("loss"), "removed_rows": scored["removed_rows"],
            "ok": bool(check["ok_strict"]), "check": check, "chosen": result.get("method"),
            "candidates": details.get("candidates")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arx-results", type=Path, required=True, help="a harness results folder (raw.jsonl)")
    parser.add_argument("--only", default="", help="cases whose id contains this")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_loss_vs_arx.md")
    args = parser.parse_args()
    arx = arx_local_recoding(args.arx_results)
    methods = args.methods.split(",")
    records = []
    for case in harness.cases():
        if args.only not in case["id"]:
            continue
        pattern = harness.DATASETS[case["ds"]]["hier"].replace("{col}", "{}")
        hierarchies = {c: arxloss.Hierarchy(pattern.format(c)) for c in case["qis"]}
        for method in methods:
            record = {"case": case["id"], **run_case(case, method, hierarchies)}
            records.append(record)
            print(json.dumps({k: record[k] for k in ("case", "method", "oracle_loss", "duckanon_loss", "seconds", "ok")}),
                  flush=True)
    lines = ["# Information loss against ARX's local recoding (ARX's Loss, geometric mean)", "",
             f"ARX's local recodings from `{args.arx_results}` (the better of `arx_lr_case` and `arx_lr_fast`); "
             "duckanon's outputs scored by the harness's oracle (`arxloss.loss`) and checked by its checker "
             "(`arxloss.check`, every class). Ratio < 1: duckanon loses less. Seconds: the whole statement.", "",
             "| case | ARX best LR | " + " | ".join(methods) + " | best ratio | target <= 0.8 |",
             "|---|---|" + "---|" * len(methods) + "---|---|"]
    for case in harness.cases():
        mine = {r["method"]: r for r in records if r["case"] == case["id"]}
        if not mine:
            continue
        lr = min(arx.get(case["id"], {}).values(), default=None)
        cells = []
        for method in methods:
            r = mine.get(method)
            if r is None:
                cells.append("-")
                continue
            ratio = f" ({r['oracle_loss'] / lr:.2f}x)" if lr else ""
            cells.append(f"{r['oracle_loss']:.4f}{ratio}, {r['seconds']:.2f} s{'' if r['ok'] else ' FAILS CHECK'}")
        best = min((r["oracle_loss"] for r in mine.values() if r["ok"]), default=None)
        ratio = best / lr if lr and best is not None else None
        met = "-" if ratio is None else ("yes" if ratio <= TARGET else "no")
        lines.append(f"| {case['id']} | {lr if lr is None else f'{lr:.4f}'} | " + " | ".join(cells)
                     + f" | {'-' if ratio is None else f'{ratio:.2f}'} | {met} |")
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    args.out.with_suffix(".json").write_text(json.dumps(records, indent=1, default=str))


if __name__ == "__main__":
    main()
