"""Differential privacy (SafePub) beside ARX: utility of ARX's SafePub against duckanon's search.

ARX side: benchmarks/arx_dp/ArxDp.java (EDDifferentialPrivacy(epsilon, delta) with a search
budget, ARX's data-dependent search, the Loss metric, suppression limit 1; ARX's own sampling from
SecureRandom), each run's output saved and scored here. duckanon side: a minimal pipeline of its
own until the core is wired (dpcore37): every row sampled with probability beta (numpy's
generator seeded from the OS's cryptographic source), k and beta as ARX derives them (read from
ARX's runs of the same (epsilon_anonymization, delta): a deterministic function of them),
duckanon.solver.safepub_search's walk with the loss score, the sampled rows published at the
node with classes below k removed. Both outputs are scored by ONE oracle, the side-by-side
harness's arxloss.loss (ARX's Loss; rows not published count as suppressed) over all N rows.

    ARXSIDE_WORK=/tmp/arxside-l40 python benchmarks/bench_safepub.py [--runs 10] [--steps 100]
        [--only adult] [--publish last,select,select:0.9,select:0.9:pf,best_pivot,anonymize] [--epsilons 0.5,1,2]
        [--search-share 0.1] [--delta 1e-6] [--out bench_safepub]

`anonymize` runs the whole private ANONYMIZE statement instead (the data set loaded into DuckDB as
text, ARX's hierarchy files, metric = 'loss'), scored from the published table by the same oracle.

Prints a markdown table (median loss over the runs, median seconds per run) and writes it with
the raw figures to benchmarks/results/bench_safepub.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from harness_cases import ROOT, harness

import arxloss  # noqa: E402  (the harness's oracle, on the path harness_cases set)

from duckanon.solver import safepub_search as ss
from duckanon.solver.histogram import Histogram

HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "benchmarks" / "results"
ARXSIDE_WORK = Path(os.environ.get("ARXSIDE_WORK", "/tmp/arxside"))
CASES = {"adult": harness.ADULT9, "cup": harness.CUP8}
EPSILONS = (0.5, 1.0, 2.0)
SEARCH_SHARE = 0.1  # the share of epsilon for the search (the issue: ARX's GUI default, 10%)
DELTA = 1e-6


class Data:
    """One data set: rows, the QIs' value codes per row, the score space, labels per level."""

    def __init__(self, name: str, qis: list[str]):
        ds = harness.DATASETS[name]
        self.name, self.qis, self.csv, self.hier = name, qis, ds["csv"], ds["hier"]
        self.header, self.rows = arxloss.read_csv_rows(ds["csv"])
        index = [self.header.index(q) for q in qis]
        values = [sorted({r[i] for r in self.rows}) for i in index]
        hierarchy_rows = [arxloss.read_csv_rows(ds["hier"].replace("{col}", q), header=False)[1] for q in qis]
        self.space = ss.ScoreSpace.from_rows(hierarchy_rows, values)
        code_of = [{v: c for c, v in enumerate(vals)} for vals in values]
        self.codes = np.array([[code_of[j][r[i]] for j, i in enumerate(index)] for r in self.rows], dtype=np.int64)
        by_value = [{r[0]: r + [r[-1]] * (len(max(rows, key=len)) - len(r)) for r in rows} for rows in hierarchy_rows]
        self.labels = [[by_value[j][v] for v in vals] for j, vals in enumerate(values)]  # [j][code][level]
        self.oracle = arxloss.load_hierarchies(ds["hier"], qis)


def sample_histogram(data: Data, beta: float, rng: np.random.Generator) -> tuple[np.ndarray, Histogram, np.ndarray]:
    chosen = np.flatnonzero(rng.random(len(data.rows)) < beta)
    classes, inverse, counts = np.unique(data.codes[chosen], axis=0, return_inverse=True, return_counts=True)
    return chosen, Histogram(classes, counts.reshape(-1, 1)), inverse.ravel()


def duck_run(data: Data, k: int, beta: float, epsilon_search: float, steps: int, choice: str) -> dict:
    """One run; `choice` is a publish choice, 'select' optionally with its share ('select:0.9')
    and its mechanism ('select:0.9:pf': permute-and-flip for every draw; 'select:0.5:rb': the
    exponential mechanism range-bounded, safepub_search.score_range; default ARX's exponential)."""
    publish, share, mechanism = (choice.split(":") + ["", ""])[:3]
    rng = np.random.default_rng(secrets.randbits(128))
    started = time.perf_counter()
    chosen, hist, member = sample_histogram(data, beta, rng)
    result = ss.data_dependent_search(data.space, hist, len(data.rows), k, "loss", epsilon_search, steps, publish,
                                      select_share=float(share or 0.5),  # 0.5: the module's default
                                      mechanism="permute_and_flip" if mechanism == "pf" else "exponential",
                                      range_bounded=mechanism == "rb")
    group, sizes = ss.node_groups(data.space, hist, result.levels)
    kept_rows = chosen[(sizes[group] >= k)[member]]
    seconds = time.perf_counter() - started
    published = [[data.labels[j][data.codes[r, j]][h] for j, h in enumerate(result.levels)] for r in kept_rows]
    loss = arxloss.loss(published, data.qis, data.qis, data.oracle, len(data.rows),
                        dict(zip(data.qis, result.levels)))["loss_geo"]
    return {"loss": loss, "seconds": seconds, "levels": list(result.levels), "steps": result.steps,
            "sampled": len(chosen), "published": len(kept_rows)}


def anonymize_run(data: Data, epsilon: float, delta: float, epsilon_search: float, steps: int, con) -> dict:
    """One whole private ANONYMIZE on `con` (the data set loaded as `src`, all text, as the
    harness's duck_case.py loads it): the release as published, scored by the same oracle."""
    quoted = lambda name: '"' + name.replace('"', '""') + '"'  # noqa: E731
    statement = (f"ANONYMIZE src INTO out WITH (epsilon = {epsilon!r}, delta = {delta!r}, "
                 f"epsilon_search = {epsilon_search!r}, search_steps = {steps}, metric = 'loss', "
                 f"qi = ({', '.join(quoted(c) for c in data.qis)}), "
                 f"hierarchies = '{data.hier.replace('{col}', '{column}')}')")
    started = time.perf_counter()
    cursor = con.execute(statement)
    names = [d[0] for d in cursor.description]
    result = dict(zip(names, cursor.fetchone()))
    seconds = time.perf_counter() - started
    private = json.loads(result["details"])["differential_privacy"]
    published = [list(r) for r in con.execute(f"SELECT {', '.join(quoted(c) for c in data.qis)} FROM out").fetchall()]
    levels = private["levels"]
    loss = arxloss.loss(published, data.qis, data.qis, data.oracle, len(data.rows),
                        {q: levels[q] for q in data.qis})["loss_geo"]
    return {"loss": loss, "seconds": seconds, "levels": [levels[q] for q in data.qis],
            "steps": private.get("search_steps_taken"), "sampled": private["sampled_rows"],
            "published": private["published_rows"], "k": private["k"], "beta": private["beta"]}


def loaded(data: Data):
    import duckanon

    con = duckanon.connect()
    con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv('{data.csv}', delim=';', header=true, all_varchar=true)")
    return con


def compile_arx() -> str:
    classpath = (ARXSIDE_WORK / "classpath.txt").read_text().strip()
    classes = Path(tempfile.mkdtemp(prefix="arx_dp_"))
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), str(HERE / "arx_dp" / "ArxDp.java")],
                   check=True)
    return f"{classes}{os.pathsep}{classpath}"


def arx_runs(classpath: str, data: Data, epsilon: float, steps: int, runs: int, share: float,
             delta: float) -> list[dict]:
    """`runs` runs of ARX's SafePub. ARX's exponential mechanism sometimes throws ("Encountered a
    value with insufficient precision", DataDependentEDDPAlgorithm.toDouble: seen on CUP at
    epsilon 2), ending its JVM: the runs printed before it count, the JVM is started again for
    the rest, and the throws are counted (`arx_failures` on the first record) up to `runs` of them."""
    out_dir = Path(tempfile.mkdtemp(prefix="arx_dp_out_"))
    records, failures = [], 0
    while len(records) < runs:
        args = [f"data={data.csv}", f"hier={data.hier}", f"qis={','.join(data.qis)}", "metric=loss",
                f"epsilon={epsilon}", f"delta={delta}", f"budget={share * epsilon}", f"steps={steps}",
                f"repeat={runs - len(records)}", f"out={out_dir}/batch{failures}_run"]
        done = subprocess.run(["java", "-Xmx8g", "-cp", classpath, "ArxDp", *args], capture_output=True, text=True)
        got = [json.loads(x[len("RUN "):]) for x in done.stdout.splitlines() if x.startswith("RUN ")]
        for r in got:
            r["path"] = out_dir / f"batch{failures}_run{r['run']}.csv"
        records += got
        if done.returncode != 0:
            failures += 1
            if failures >= runs:
                raise RuntimeError((done.stderr or done.stdout)[-800:])
    records[0]["arx_failures"] = failures
    for r in records:
        path = r.pop("path")
        header, rows = arxloss.read_csv_rows(str(path))
        r["loss"] = arxloss.loss(rows, header, data.qis, data.oracle, len(data.rows))["loss_geo"]
        r["seconds"] = r.pop("ms") / 1e3
        path.unlink()
    return records


def summary(runs: list[dict]) -> dict:
    return {"loss_median": statistics.median(r["loss"] for r in runs),
            "loss_min": min(r["loss"] for r in runs), "loss_max": max(r["loss"] for r in runs),
            "seconds_median": statistics.median(r["seconds"] for r in runs), "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--only", default="")
    ap.add_argument("--publish", default="last,select,select:0.9,best_pivot")
    ap.add_argument("--out", default="bench_safepub")
    ap.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    ap.add_argument("--search-share", type=float, default=SEARCH_SHARE)
    ap.add_argument("--delta", type=float, default=DELTA)
    a = ap.parse_args()
    classpath = compile_arx()
    choices = a.publish.split(",")
    table, raw = [], []
    for name, qis in CASES.items():
        if a.only and a.only != name:
            continue
        data = Data(name, qis)
        for epsilon in (float(e) for e in a.epsilons.split(",")):
            share = a.search_share
            arx = summary(arx_runs(classpath, data, epsilon, a.steps, a.runs, share, a.delta))
            k, beta = arx["runs"][0]["k"], arx["runs"][0]["beta"]
            row = {"data": name, "epsilon": epsilon, "epsilon_search": share * epsilon, "delta": a.delta,
                   "steps": a.steps, "k": k, "beta": beta, "arx": arx}
            for publish in choices:
                if publish == "anonymize":  # the whole statement, as a user runs it
                    con = loaded(data)
                    row[publish] = summary([anonymize_run(data, epsilon, a.delta, share * epsilon, a.steps, con)
                                            for _ in range(a.runs)])
                    con.close()
                    continue
                row[publish] = summary([duck_run(data, k, beta, share * epsilon, a.steps, publish)
                                        for _ in range(a.runs)])
            raw.append(row)
            cells = [f"{row[p]['loss_median']:.4f} ({row[p]['seconds_median']:.2f} s)" for p in choices]
            line = (f"| {name} | {epsilon:g} | {k} | {beta:.4f} | {arx['loss_median']:.4f} "
                    f"({arx['seconds_median']:.2f} s) | " + " | ".join(cells) + " |")
            table.append(line)
            print(line, flush=True)
    head = ("| data | epsilon | k | beta | ARX SafePub (best pivot) | "
            + " | ".join(f"duckanon {p}" for p in choices) + " |")
    md = "\n".join([f"ARX Loss (oracle arxloss.loss over all N rows), median of {a.runs} runs each side, "
                    f"median seconds per run in parentheses; epsilon_search = {a.search_share:g} x epsilon, "
                    f"delta = {a.delta:g}, {a.steps} steps (expansions).", "", head,
                    "|" + "---|" * (5 + len(choices)), *table, ""])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{a.out}.md").write_text(md)
    (RESULTS / f"{a.out}.json").write_text(json.dumps(raw, indent=1))
    print(md)


if __name__ == "__main__":
    main()
