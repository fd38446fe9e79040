"""duckanon's lattice optimum beside ARX's under the risk-based models (issue 19), on Adult.

    /work/venv/bin/python benchmarks/arx_risk_models/run.py [--reps 5] [--arx-warmup 2]
        [--arx-repeat 5] [--only SUBSTR] [--exhaustive auto|all|none] [--no-write]

Adult (../shared/data/adult/adult.csv, 30,162 rows) with ARX's hierarchies; QIs: every column but
salary-class (8), or, with occupation as the sensitive attribute, the 7 others. Metric: ARX's Loss
(Metric.createLossMetric(): gs-factor 0.5, geometric mean) / duckanon's metric = 'loss'; global
recoding: ARX's optimal search (Flash) / duckanon's method = 'lattice'. Suppression 0% and 5%.

Sample (k-map, delta-presence): the rows whose 0-based row number in the CSV is divisible by 10
(3,017 rows), ARX's DataSubset of the whole file (the population); in duckanon the table `sample`
made from `adult` (read in file order, checked row by row against the CSV) with
row_number() OVER () - 1 % 10 = 0, and population = adult.

Per case:
  * duckanon: the ANONYMIZE statement, one warm-up and --reps timed runs (median of the whole
    statement and of details.search_seconds); details.levels, details.metric_value,
    removed_rows; its published table;
  * ARX: ArxRisk.java (beside this file, compiled here against the ARX build of
    ../shared/arx-side-by-side: $ARXSIDE_WORK/classpath.txt, default /tmp/arxside-solver) in one
    JVM, --arx-warmup + --arx-repeat runs of anonymize() (median of the timed ones); the global
    optimum's transformation and getHighestScore() (ARX's Loss, the scale duckanon's
    metric_value is on), its published rows (the subset's for k-map and delta-presence);
  * cross-evaluation: ARX evaluates duckanon's node (ARXResult.getOutput(node): its anonymity
    verdict and Loss) and duckanon evaluates ARX's node (prepare + Lattice.evaluate/value, as the
    search does);
  * independent checks: both published tables scored by the harness's Loss oracle
    (../shared/arx-side-by-side/py/arxloss.py, written from ARX's MetricMDNMLoss) and checked
    against the model by `check_published` below (written from the models' definitions, the
    population grouped from the hierarchy files);
  * --exhaustive auto (default): where the two optima differ in Loss, the exhaustive search of
    tests/solver/test_risk_lattice.py (formerly test_risk_models.py: every node, grouped from
    the hierarchy files' labels, with duckanon's model objects, the global models enforced by
    removing the fewest smallest classes) gives the optimum under duckanon's reading of the
    model (all: for every case; none: never; Dankar is skipped in auto: hours).

Writes benchmarks/arx_risk_models/results.json and benchmarks/results/arx_risk_models.md.
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import duckanon

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARED = Path(os.environ.get("SHARED_DATA", ROOT.parent / "shared" / "data"))
ADULT = SHARED / "adult"
CSV = ADULT / "adult.csv"
HIER = str(ADULT / "adult_hierarchy_{col}.csv")
HARNESS = ROOT.parent / "shared" / "arx-side-by-side" / "py"
ARXSIDE_WORK = Path(os.environ.get("ARXSIDE_WORK", "/tmp/arxside-solver"))
ARX_GIT_DIR = os.environ.get("ARX_GIT_DIR", "/work/.mirror/arx-deidentifier+arx/repo")
RESULTS_MD = ROOT / "benchmarks" / "results" / "arx_risk_models.md"
RESULTS_JSON = HERE / "results.json"

sys.path.insert(0, str(HARNESS))
import arxloss  # noqa: E402  (the harness's independent Loss oracle)

QI8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
QI7 = QI8[:-1]
N_POPULATION_MODEL = 10 * 30162

# (id, what, table, qis, sensitive, ARX arguments, duckanon options, model for check_published)
MODELS = [
    ("kmap5", "k-map k = 5, population Adult", "sample", QI8, None,
     ["model=kmap", "k=5", "subset=10"], "k_map = 5, population = adult", ("kmap", 5)),
    ("dpresence", "delta-presence (0, 0.5), population Adult", "sample", QI8, None,
     ["model=dpresence", "dmin=0", "dmax=0.5", "subset=10"], "delta_presence = (0, 0.5), population = adult",
     ("dpresence", 0.0, 0.5)),
    ("avgrisk", "average risk 0.05", "adult", QI8, None,
     ["model=avgrisk", "risk=0.05"], "average_risk = 0.05", ("avgrisk", 0.05)),
    ("uniq_zayatz", f"population uniqueness 0.01, Zayatz, N = {N_POPULATION_MODEL:,}", "adult", QI8, None,
     ["model=uniq", "risk=0.01", "estimator=zayatz", f"population={N_POPULATION_MODEL}"],
     f"population_uniqueness = 0.01, population_size = {N_POPULATION_MODEL}, estimator = 'zayatz'",
     ("uniq", "zayatz", N_POPULATION_MODEL, 0.01)),
    ("uniq_dankar", f"population uniqueness 0.01, Dankar, N = {N_POPULATION_MODEL:,}", "adult", QI8, None,
     ["model=uniq", "risk=0.01", "estimator=dankar", f"population={N_POPULATION_MODEL}"],
     f"population_uniqueness = 0.01, population_size = {N_POPULATION_MODEL}, estimator = 'dankar'",
     ("uniq", "dankar", N_POPULATION_MODEL, 0.01)),
    ("blike", "basic beta-likeness 1.0 on occupation", "adult", QI7, "occupation",
     ["model=blike", "beta=1.0"], "beta_likeness = 1.0", ("blike", 1.0)),
    ("ddisc", "delta-disclosure 1.0 on occupation", "adult", QI7, "occupation",
     ["model=ddisc", "delta=1.0"], "delta_disclosure = 1.0", ("ddisc", 1.0)),
]
LIMITS = (0.0, 0.05)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- data ---------------------------------------------------------------------------------------
def read_adult() -> tuple[list[str], list[list[str]]]:
    with open(CSV, newline="") as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    return rows[0], rows[1:]


def connect(header, rows):
    """duckanon's connection with `adult` (the CSV, all text) and `sample` (every 10th row),
    both checked row by row against the file."""
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{CSV}', delim=';', header=true, all_varchar=true)")
    con.execute("CREATE TABLE sample AS SELECT * EXCLUDE (rn) FROM "
                "(SELECT *, row_number() OVER () - 1 AS rn FROM adult) WHERE rn % 10 = 0")
    names = ", ".join(q(c) for c in header)
    assert con.execute(f"SELECT {names} FROM adult").fetchall() == [tuple(r) for r in rows], "adult != the CSV"
    sample = con.execute(f"SELECT {names} FROM sample").fetchall()
    assert sample == [tuple(r) for r in rows[::10]], "sample != rows 0, 10, 20, ... of the CSV"
    assert len(sample) == 3017, len(sample)
    return con


# -- duckanon -----------------------------------------------------------------------------------
def statement(case: dict, limit: float, into: bool = True) -> str:
    options = [case["duck"], f"qi = ({', '.join(q(c) for c in case['qis'])})"]
    if case["sensitive"]:
        options.append(f"sensitive = {q(case['sensitive'])}")
    options += ["method = 'lattice'", "metric = 'loss'", f"suppression_limit = {limit}", "seed = 1",
                f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv'"]
    return f"ANONYMIZE {case['table']}{' INTO out' if into else ''} WITH ({', '.join(options)})"


def run_duck(con, case: dict, limit: float, reps: int) -> dict:
    text = statement(case, limit)
    seconds, searches, details = [], [], None
    for rep in range(reps + 1):  # the first run warms up, untimed
        started = time.perf_counter()
        cursor = con.execute(text)
        row = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
        elapsed = time.perf_counter() - started
        details = json.loads(row["details"])
        if rep:
            seconds.append(elapsed)
            searches.append(details["search_seconds"])
    columns = case["qis"] + ([case["sensitive"]] if case["sensitive"] else [])
    published = [list(r) for r in con.execute(f"SELECT {', '.join(q(c) for c in columns)} FROM out").fetchall()]
    return {"statement": text, "levels": details["levels"], "metric_value": details["metric_value"],
            "removed_rows": details["removed_rows"], "nodes_evaluated": details["nodes_evaluated"],
            "lattice_nodes": details["lattice_nodes"], "loss": details.get("loss"), "optimal": row["optimal"],
            "statement_s": seconds, "search_s": searches, "header": columns, "published": published,
            "details": {k: v for k, v in details.items() if k not in ("column_loss",)}}


def duck_evaluates(con, case: dict, limit: float, levels) -> dict:
    """duckanon's verdict and Loss at `levels`, as its search computes them."""
    from duckanon.pipeline.problem import prepare
    from duckanon.solver.generalize import lattice_of

    problem = prepare(con, statement(case, limit, into=False))
    lattice = lattice_of(problem.histogram, problem.domains.hierarchies, problem.models,
                         problem.domains.suppression_limit, "loss", population=problem.domains.population,
                         weights=problem.weights)
    node = lattice.evaluate(tuple(int(v) for v in levels))
    value = lattice.value(node)
    removed = int(node.suppressed_rows)
    return {"levels": list(levels), "removed_rows": removed, "limit_rows": lattice.limit_rows,
            "satisfied": removed <= lattice.limit_rows and removed < lattice.n, "value": float(value)}


# -- ARX ----------------------------------------------------------------------------------------
def arx_classpath() -> str:
    path = ARXSIDE_WORK / "classpath.txt"
    if not path.exists():
        raise SystemExit(f"{path} missing: build ARX with ARX_GIT_DIR={ARX_GIT_DIR} "
                         f"{ROOT.parent / 'shared' / 'arx-side-by-side' / 'run.sh'} (see its README)")
    return path.read_text().strip()


def compile_arx(classes: Path) -> str:
    classpath = arx_classpath()
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), str(HERE / "ArxRisk.java"),
                    str(HERE / "ArxUniqueness.java")], check=True)
    return f"{classes}{os.pathsep}{classpath}"


def run_arx(classpath: str, case: dict, limit: float, warmup: int, repeat: int, cross, out: Path) -> dict:
    args = [f"data={CSV}", f"hier={HIER}", f"qis={','.join(case['qis'])}", *case["arx"], f"supp={limit}",
            f"warmup={warmup}", f"repeat={repeat}", f"out={out}"]
    if case["sensitive"]:
        args.append(f"sensitive={case['sensitive']}")
    if cross:
        args.append("cross=" + ";".join(",".join(str(v) for v in levels) for levels in cross))
    jvm = os.environ.get("ARXRISK_JVM_OPTS", "-Xmx4g").split()
    done = subprocess.run(["java", *jvm, "-cp", classpath, "ArxRisk", *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ARX failed on {case['id']} {limit}: {done.stderr[-2000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    result["args"] = args
    for cell in result.get("cross", []):
        cell["transformation"] = json.loads(cell["transformation"])
    if result.get("solution"):
        header, rows = arxloss.read_csv_rows(str(out))
        result["header"], result["published"] = header, rows
    return result


# -- independent checks -------------------------------------------------------------------------
class Labels:
    """value -> label per column and level, from the hierarchy files."""

    def __init__(self, qis):
        self.maps = {}
        for c in qis:
            with open(HIER.replace("{col}", c), newline="") as handle:
                rows = [r for r in csv.reader(handle, delimiter=";") if r]
            self.maps[c] = [{r[0]: r[h] for r in rows} for h in range(len(rows[0]))]

    def key(self, row, qis, levels):
        return tuple(self.maps[c][h][v] for c, v, h in zip(qis, row, levels))


def check_published(case: dict, levels, header, published, source_header, source_rows, labels: Labels,
                    classpath: str | None = None) -> dict:
    """The model checked on a published table from its definition: classes = rows with equal QI
    texts; a row whose QIs are all '*' is a suppressed record (ARX's output) and not a class, as
    rows left out (duckanon's removed rows) are not. Population models: the population's rows
    matching a class = the CSV's rows whose values have the class's labels at `levels`."""
    qis, model = case["qis"], case["check"]
    idx = [header.index(c) for c in qis]
    star = tuple("*" for _ in qis)
    classes = collections.defaultdict(list)
    for r in published:
        key = tuple(r[i] for i in idx)
        if key != star:
            classes[key].append(r[header.index(case["sensitive"])] if case["sensitive"] else None)
    published_rows = sum(len(v) for v in classes.values())
    out = {"classes": len(classes), "published_rows": published_rows}
    if model is None:
        out["ok"] = None
        return out
    kind = model[0]
    if kind in ("kmap", "dpresence"):
        sidx = [source_header.index(c) for c in qis]
        population = collections.Counter(labels.key([r[i] for i in sidx], qis, levels) for r in source_rows)
        if kind == "kmap":
            worst = min((population[key] for key in classes), default=None)
            out.update({"min_population_matches": worst, "ok": worst is None or worst >= model[1]})
        else:
            shares = [len(v) / population[key] if population[key] else math.inf for key, v in classes.items()]
            out.update({"delta_range": [min(shares, default=None), max(shares, default=None)],
                        "ok": all(model[1] <= s <= model[2] for s in shares)})
    elif kind == "avgrisk":
        risk = len(classes) / published_rows if published_rows else 0.0
        out.update({"average_risk": risk, "ok": risk <= model[1]})
    elif kind == "uniq":
        # the estimate is not re-derived here: the published class sizes through ARX's estimator
        # (ArxUniqueness.java) and duckanon's, each with its acceptance rule
        from duckanon.solver.models import PopulationUniqueness

        sizes = collections.Counter(len(v) for v in classes.values())
        line = f"t {model[1]} {model[2]} {model[3]} " + " ".join(f"{s}:{c}" for s, c in sorted(sizes.items()))
        done = subprocess.run(["java", "-cp", classpath, "ArxUniqueness"], input=line + "\n", capture_output=True,
                              text=True, check=True)
        _, estimate, verdict = done.stdout.split()
        duck_model = PopulationUniqueness(model[3], model[2], model[1])
        all_sizes = np.array([len(v) for v in classes.values()], dtype=np.int64)
        duck_estimate = duck_model.estimate(all_sizes) if len(all_sizes) else None
        out.update({"arx_estimate": float(estimate), "duck_estimate": duck_estimate.fraction if duck_estimate else 0.0,
                    "duck_estimator": duck_estimate.estimator if duck_estimate else None,
                    "duck_holds": bool(duck_model.holds(all_sizes)), "ok": verdict == "true"})
    elif kind in ("blike", "ddisc"):
        sa = collections.Counter(r[source_header.index(case["sensitive"])] for r in source_rows)
        n = len(source_rows)
        worst = 0.0
        for values in classes.values():
            counts = collections.Counter(values)
            for value, c in counts.items():
                p, qv = c / len(values), sa[value] / n
                worst = max(worst, (p - qv) / qv if kind == "blike" else abs(math.log2(p / qv)))
        ok = worst <= model[1] if kind == "blike" else worst < model[1]
        out.update({"worst": worst, "ok": ok})
    return out


def oracle_loss(header, published, qis, hierarchies, n_source, levels) -> float:
    return arxloss.loss(published, header, qis, hierarchies, n_source, dict(zip(qis, levels)))["loss_geo"]


def exhaustive_optimum(con, case: dict, limit: float) -> dict:
    """The tests' exhaustive search over every node (tests/solver/test_risk_lattice.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "solver"))
    try:  # the tests' module (renamed from test_risk_models.py)
        import test_risk_lattice as t
    except ImportError:
        import test_risk_models as t
    from duckanon.pipeline.problem import prepare
    from duckanon.solver.models import globally_satisfied

    def enforce_global(sizes, keep, models):
        """The tests' enforcement (smallest groups first, by size then position), stopping once
        more rows than the limit are removed: such a node is out anyway (all removed = skipped)."""
        order = sorted((s, g) for g, s in enumerate(sizes) if keep[g] and s > 0)
        rest_sizes = np.array([s for s, _ in order], dtype=np.int64)
        removed_rows = 0
        for removed in range(len(order) + 1):
            if globally_satisfied(models, rest_sizes[removed:], None):
                for _, g in order[:removed]:
                    keep[g] = False
                return keep
            if removed < len(order):
                removed_rows += order[removed][0]
            if removed_rows > limit_rows:
                keep[:] = False
                return keep
        return keep

    problem = prepare(con, statement(case, limit, into=False))
    texts = t.fetch_text(con, case["table"], case["qis"], case["sensitive"])
    sample, sa = texts[:len(case["qis"])], (texts[len(case["qis"])] if case["sensitive"] else None)
    population = t.fetch_text(con, "adult", case["qis"]) if "population" in case["duck"] else None
    limit_rows = int(math.floor(limit * len(sample[0]) + 1e-9))
    saved, t.enforce_global = t.enforce_global, enforce_global
    started = time.perf_counter()
    try:
        value, levels = t.exhaustive(t.Labels(case["qis"]), sample, population, sa, problem.models, limit_rows)
    finally:
        t.enforce_global = saved
    return {"value": value, "levels": list(levels) if levels is not None else None,
            "seconds": time.perf_counter() - started}


# -- report -------------------------------------------------------------------------------------
def med(xs):
    return statistics.median(xs) if xs else None


def write_report(results: list[dict], meta: dict) -> str:
    out = []
    p = out.append
    p("# duckanon's lattice optimum beside ARX's under the risk-based models (issue 19)\n")
    p(f"Date: {meta['date']}. ARX: commit `{meta['arx_commit']}` (the build of ../shared/arx-side-by-side, "
      f"3.9.2 + fixes). DuckDB {meta['duckdb']}, duckanon {meta['duckanon']} (HEAD `{meta['commit']}` at the run, in a tree other "
      f"engineers were editing), "
      f"Java {meta['java']}, Python {meta['python']}; {meta['machine']}. Repetitions: duckanon one warm-up + "
      f"{meta['reps']} timed statements (median); ARX {meta['arx_warmup']} warm-up + {meta['arx_repeat']} timed "
      f"`anonymize()` runs in one JVM (median). The machine is shared (2 cores, other jobs running): times "
      f"are indicative.\n")
    p("Run: `/work/venv/bin/python benchmarks/arx_risk_models/run.py` (compiles and runs "
      "`benchmarks/arx_risk_models/ArxRisk.java` against ARX's build, runs duckanon in process; raw figures in "
      "`benchmarks/arx_risk_models/results.json`); the analysis of the differences: "
      "`/work/venv/bin/python benchmarks/arx_risk_models/explain.py` (output in "
      "`benchmarks/arx_risk_models/explain.txt`).\n")
    p("Data: Adult (30,162 rows), ARX's hierarchies. QIs in this order: sex, age, race, marital-status, "
      "education, native-country, workclass, occupation (8 QIs, 6,480 nodes); for beta-likeness and "
      "delta-disclosure occupation is the sensitive attribute and the 7 others the QIs (2,160 nodes). "
      "Metric: ARX's Loss (`Metric.createLossMetric()`, gs-factor 0.5, geometric mean) / duckanon "
      "`metric = 'loss'` (`details.metric_value`, on ARX's scale: `arx_loss` in duckanon/solver/lattice_metrics.py); "
      "ARX's optimal search (Flash) / `method = 'lattice'`. k-map and delta-presence: the sample is the "
      "3,017 rows whose 0-based row number is divisible by 10 (ARX: `DataSubset` of the whole file, which is "
      "the population; duckanon: table `sample` made with `row_number() OVER () - 1` on the table read in file "
      "order, checked row by row against the CSV; `population = adult`); the other models on all of Adult. "
      "Levels are in the QI order above.\n")
    p("## Optima\n")
    p("| case | supp. | ARX node | ARX Loss (getHighestScore) | ARX supp. rows | duckanon node | duckanon Loss "
      "(metric_value) | duckanon removed rows | same node | Loss equal |")
    p("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a, d = r["arx"], r["duck"]
        an = a.get("transformation")
        same = "yes" if an == d["levels"] else "no"
        equal = r["loss_equal"]
        p(f"| {r['what']} | {r['limit']:.0%} | {an} | {a.get('score', '–')} | {a.get('suppressed', '–')} | "
          f"{d['levels']} | {d['metric_value']!r} | {d['removed_rows']} | {same} | {equal} |")
    p("\n## Each tool on the other's node, and independent checks of both outputs\n")
    p("ARX at duckanon's node: `ARXResult.getOutput(node)` (ARX's anonymity verdict and Loss). duckanon at ARX's "
      "node: `prepare` + `Lattice.evaluate(levels)` / `value` (removed rows within the limit = satisfied). "
      "Oracle: the published table scored by ../shared/arx-side-by-side/py/arxloss.py (ARX's Loss written from "
      "MetricMDNMLoss; removed and suppressed rows cost 1 per QI). Check: the model checked on the published "
      "table from its definition (`check_published` in run.py; population uniqueness is not re-estimated: "
      "'–'). Exhaustive: every node, the search of tests/solver/test_risk_lattice.py, formerly test_risk_models.py (duckanon's model objects, "
      "grouping from the hierarchy files), run where the optima's Loss differ.\n")
    p("| case | supp. | ARX at duckanon's node | duckanon at ARX's node | oracle: ARX output / duckanon output | "
      "check: ARX output / duckanon output | exhaustive optimum |")
    p("|---|---|---|---|---|---|---|")
    for r in results:
        a, d = r["arx"], r["duck"]
        cross = next(iter(a.get("cross", [])), None)
        ac = "–" if cross is None else (f"{cross.get('anonymity', 'not found')}, {cross.get('score', '–')}, "
                                        f"{cross.get('suppressed', '–')} supp.")
        de = r.get("duck_at_arx")
        dc = "–" if de is None else (f"{'satisfied' if de['satisfied'] else 'NOT satisfied'}, {de['value']!r}, "
                                     f"{de['removed_rows']} removed")
        oc = f"{r['oracle_arx']!r} / {r['oracle_duck']!r}"

        def c(x):
            if x is None:
                return "–"
            return "–" if x.get("ok") is None else ("ok" if x["ok"] else "VIOLATED") + _detail(x)
        ex = r.get("exhaustive")
        exs = "–" if not ex else (ex["skipped"] if "skipped" in ex else f"{ex['levels']} = {ex['value']!r}")
        p(f"| {r['what']} | {r['limit']:.0%} | {ac} | {dc} | {oc} | {c(r['check_arx'])} / {c(r['check_duck'])} | "
          f"{exs} |")
    p("\n## Search times\n")
    p("| case | supp. | ARX anonymize() s (median) | ARX nodes checked | duckanon search_seconds (median) | "
      "duckanon statement s (median, range) | duckanon nodes evaluated |")
    p("|---|---|---|---|---|---|---|")
    for r in results:
        a, d = r["arx"], r["duck"]
        st = d["statement_s"]
        p(f"| {r['what']} | {r['limit']:.0%} | {a['median_ms'] / 1000:.3f} | {a.get('checked', '–')} | "
          f"{med(d['search_s']):.3f} | {med(st):.3f} ({min(st):.3f}-{max(st):.3f}) | {d['nodes_evaluated']} / "
          f"{d['lattice_nodes']} |")
    findings = HERE / "findings.md"
    if findings.exists():
        p("\n" + findings.read_text().strip())
    return "\n".join(out) + "\n"


def _detail(x: dict) -> str:
    if "arx_estimate" in x:
        return (f" (ARX's estimate {x['arx_estimate']:.6g}; duckanon's {x['duck_estimate']:.6g} by "
                f"{x['duck_estimator']}, {'holds' if x['duck_holds'] else 'fails'})")
    for key in ("min_population_matches", "delta_range", "average_risk", "worst"):
        if key in x:
            v = x[key]
            if isinstance(v, list):
                return f" ({key.replace('_', ' ')} [{v[0]:.4f}, {v[1]:.4f}])" if v[0] is not None else ""
            return f" ({key.replace('_', ' ')} {v:.4g})" if isinstance(v, float) else f" ({key.replace('_', ' ')} {v})"
    return ""


def git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--arx-warmup", type=int, default=2)
    parser.add_argument("--arx-repeat", type=int, default=5)
    parser.add_argument("--only", default="")
    parser.add_argument("--exhaustive", choices=("auto", "all", "none"), default="auto")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report from results.json (and findings.md) without running")
    args = parser.parse_args()
    if args.report_only:
        stored = json.loads(RESULTS_JSON.read_text())
        RESULTS_MD.write_text(write_report(stored["results"], stored["meta"]))
        return

    header, rows = read_adult()
    con = connect(header, rows)
    sample_rows = rows[::10]
    cases = [dict(id=i, what=w, table=tb, qis=qs, sensitive=s, arx=ax, duck=dk, check=ck)
             for i, w, tb, qs, s, ax, dk, ck in MODELS]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        classpath = compile_arx(Path(tmp))
        for case in cases:
            hierarchies = arxloss.load_hierarchies(HIER, case["qis"])
            labels = Labels(case["qis"])
            for limit in LIMITS:
                cid = f"{case['id']}_s{int(limit * 100)}"
                if args.only and args.only not in cid:
                    continue
                source = sample_rows if case["table"] == "sample" else rows
                duck = run_duck(con, case, limit, args.reps)
                arx = run_arx(classpath, case, limit, args.arx_warmup, args.arx_repeat, [duck["levels"]],
                              Path(tmp) / f"{cid}.csv")
                r = {"id": cid, "what": case["what"], "limit": limit, "duck": duck, "arx": arx}
                r["duck_at_arx"] = duck_evaluates(con, case, limit, arx["transformation"]) if arx.get("solution") else None
                n = len(source)
                r["oracle_duck"] = oracle_loss(duck["header"], duck["published"], case["qis"], hierarchies, n,
                                               duck["levels"])
                r["check_duck"] = check_published(case, duck["levels"], duck["header"], duck["published"], header,
                                                  rows, labels, classpath)
                if arx.get("solution"):
                    r["oracle_arx"] = oracle_loss(arx["header"], arx["published"], case["qis"], hierarchies, n,
                                                  arx["transformation"])
                    r["check_arx"] = check_published(case, arx["transformation"], arx["header"], arx["published"],
                                                     header, rows, labels, classpath)
                    gap = duck["metric_value"] - float(arx["score"])
                    r["loss_gap"] = gap
                    r["loss_equal"] = "yes" if abs(gap) <= 1e-12 else f"no (duckanon {gap:+.3g})"
                else:
                    r["oracle_arx"], r["check_arx"], r["loss_equal"] = None, None, "ARX: no solution"
                if args.exhaustive == "all" or (args.exhaustive == "auto" and r["loss_equal"] != "yes"):
                    if case["id"] == "uniq_dankar" and args.exhaustive == "auto":
                        # a Pitman fit per count of removed classes and per node: hours
                        r["exhaustive"] = {"skipped": "not run (a Pitman fit per node and count removed)"}
                    else:
                        r["exhaustive"] = exhaustive_optimum(con, case, limit)
                for side in ("duck", "arx"):  # the tables are not kept in results.json
                    r[side].pop("published", None)
                results.append(r)
                print(json.dumps({k: r[k] for k in ("id", "loss_equal")}),
                      "arx", arx.get("transformation"), arx.get("score"), f"{arx['median_ms'] / 1000:.3f}s",
                      "duck", duck["levels"], duck["metric_value"], f"{med(duck['search_s']) or 0:.3f}s",
                      "| arx@duck", arx.get("cross"), "| duck@arx", r["duck_at_arx"],
                      "| oracle", r["oracle_arx"], r["oracle_duck"], "| check", r["check_arx"], r["check_duck"],
                      "| exhaustive", r.get("exhaustive"), flush=True)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    meta = {"date": datetime.date.today().isoformat(),
            "arx_commit": (ARXSIDE_WORK / "arx-core.commit").read_text().strip()
            if (ARXSIDE_WORK / "arx-core.commit").exists() else git("rev-parse", "HEAD", cwd=ARX_GIT_DIR),
            "duckdb": duckdb.__version__, "duckanon": getattr(duckanon, "__version__", "?"),
            "commit": git("rev-parse", "--short", "HEAD"), "java": java, "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "reps": args.reps,
            "arx_warmup": args.arx_warmup, "arx_repeat": args.arx_repeat}
    if args.no_write:
        return
    RESULTS_JSON.write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str) + "\n")
    report = write_report(results, meta)
    RESULTS_MD.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
