"""ARX's own JUnit anonymization cases that use issue 37's section 2 (the loss's gs-factor, sample
uniqueness, Grassberger's estimator, the monotonic entropy and DM*), read from ARX's test sources
and run with duckanon on the data here (Adult, CUP): per case ARX's expected value and node beside
duckanon's, and whether duckanon equals it (EQ), is lower (BEAT) or higher (WORSE); the cases it
cannot translate are counted by reason.

    python benchmarks/arx_models/suite_cases.py [--arx-git-dir DIR] [--out benchmarks/results/arx_models_suite.json]

ARX's sources: the git directory of arx-deidentifier/arx (default: the mirror's,
/work/.mirror/arx-deidentifier+arx/repo). A case is a line `new ARXAnonymizationTestCase(
ARXConfiguration.create(supp, metric).addPrivacyModel(...)..., sensitive, "./data/x.csv", expected,
new int[] {...}, practical)`; as AbstractAnonymizationTest sets it up, every hierarchy file of the
data set is a QI but the named sensitive column, and TestAnonymizationTCloseness adds hierarchical
t = 0.2 to its cases without a t. Lines of the other suites (local recoding's hash codes, utility
estimation) are not anonymization cases and are not read."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import duckanon  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SUITES = ("TestAnonymizationHeuristic", "TestAnonymizationGenetic", "TestAnonymizationHeuristicTopDown",
          "TestAnonymizationRiskBased", "TestAnonymizationEntropyLDiversity", "TestAnonymizationKAnonymity",
          "TestAnonymizationCombinations", "TestAnonymizationLDiversity", "TestAnonymizationTCloseness",
          "TestAnonymizationOrderedDistanceTCloseness", "TestAnonymizationDPresence", "TestAnonymizationProfitability",
          "TestAnonymizationKMap", "TestAnonymizationBLikeness", "TestAnonymizationSubset")
MODEL = re.compile(r"new (\w+)\(")


def metric_of(line: str):
    """duckanon's metric and gs_factor for ARX's, or None when the case is not section 2's."""
    gs = re.search(r"createLossMetric\(([\d.]+)d?\)", line)
    if gs and float(gs.group(1)) != 0.5:
        return "loss", float(gs.group(1))
    if "EntropyMetric(0.1d, true)" in line or "createEntropyMetric(true" in line:
        return "monotonic_entropy", None
    if "createDiscernabilityMetric(true)" in line:
        return "monotonic_discernibility", None
    if "SampleUniqueness" in line or "GRASSBERGER" in line:
        if "createPrecomputedEntropyMetric(0.1d, false)" in line or "createEntropyMetric()" in line:
            return "entropy", None
        if "LossMetric" in line:
            return "loss", None
    return None


def arguments(text: str) -> list[str]:
    """The top-level arguments of a constructor call starting at `text` (after its '(')."""
    depth, current, out = 0, "", []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                out.append(current.strip())
                return out
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
            continue
        current += ch
    return out


def number(text: str) -> str:
    return text.rstrip("dD") if re.fullmatch(r"[\d.E-]+[dD]?", text) else text


def models_of(line: str, suite: str):
    """(options, sensitive column) of the case's privacy models, or (None, reason)."""
    options, sensitive = [], None
    for found in MODEL.finditer(line):
        name = found.group(1)
        if name in ("ARXAnonymizationTestCase", "int", "Hierarchy", "Data", "DataSubset"):
            continue
        args = [number(a.strip('"')) for a in arguments(line[found.end():])]
        if name == "KAnonymity":
            options.append(f"k = {args[0]}")
        elif name == "SampleUniqueness":
            options.append(f"sample_uniqueness = {args[0]}")
        elif name == "EntropyLDiversity":
            sensitive = args[0]
            options += [f"l = {int(float(args[1]))}", "l_variant = entropy"]
            if len(args) > 2 and "GRASSBERGER" in args[2]:
                options.append("entropy_estimator = grassberger")
        elif name == "DistinctLDiversity":
            sensitive = args[0]
            options += [f"l = {int(float(args[1]))}", "l_variant = distinct"]
        elif name == "RecursiveCLDiversity":
            sensitive = args[0]
            options += [f"l = {int(float(args[2]))}", "l_variant = recursive", f"c = {args[1]}"]
        elif name in ("EqualDistanceTCloseness", "HierarchicalDistanceTCloseness", "OrderedDistanceTCloseness"):
            sensitive = args[0]
            distance = {"Equal": "equal", "Hierarchical": "hierarchical", "Ordered": "ordered"}[name[:-len("DistanceTCloseness")]]
            options += [f"t = {args[1]}", f"t_distance = {distance}"]
        elif name == "DPresence" and "DataSubset" in line:
            options += [f"delta_presence = ({args[0]}, {args[1]})", SUBSET_FILE, "population = src"]
        elif name == "KMap" and len(args) == 2 and str(args[1]).startswith("DataSubset"):
            options += [f"k_map = {args[0]}", SUBSET_FILE, "population = src"]
        elif name == "Inclusion":
            drawn = re.match(r"getSubset\((\d+)\)", args[0])
            if not drawn:
                return None, name
            options.append(f"{SUBSET_DRAWN}{drawn.group(1)}")
        else:
            return None, name
    return options, sensitive


# The research subsets of ARX's subset criteria (DPresence, KMap with a DataSubset, Inclusion): these
# markers in a case's options say which rows of the table are the subset; the statement publishes
# the subset's rows (table `sub`) and, for DPresence and KMap, the whole table is the population.
SUBSET_FILE = "-- subset: ARX's data/<table>_subset.csv"
SUBSET_DRAWN = "-- subset: getSubset "
SUBSET_ROWS = ROOT / "tests" / "solver" / "adult_subset_rows.txt"  # ARX's adult_subset.csv as rows of adult.csv


def subset_rows(table: str, marker: str) -> list[int] | None:
    """The subset's row numbers (0-based, in the table's file order), or None when not here."""
    if marker == SUBSET_FILE:
        if table != "adult":  # ARX's mirror holds adult_subset.csv only
            return None
        gaps = [int(x) for text in SUBSET_ROWS.read_text().splitlines() if not text.startswith("#") for x in text.split()]
        return [sum(gaps[:i + 1]) for i in range(len(gaps))]
    sys.path.insert(0, str(ROOT / "tests"))
    from support.java_random import ARX_SEED, JavaRandom  # TestAnonymizationSubset.getSubset's draws
    size, rng = int(marker[len(SUBSET_DRAWN):]), JavaRandom(ARX_SEED)
    return sorted({rng.next_int(size) for _ in range(size)})


def parse(line: str, suite: str):
    found = metric_of(line)
    if found is None:
        return None, "not section 2"
    metric, gs = found
    data = re.search(r'"\./data/(\w+)\.csv",\s*"?([-\d.E]+|null)"?,\s*(?:new int\[\]\s*\{([^}]*)\}|null)', line)
    if data is None:
        return None, "no expected optimum"
    table = data.group(1)
    if table not in ("adult", "cup"):
        return None, f"data {table} not here"
    options, sensitive = models_of(line, suite)
    if options is None:
        return None, f"model {sensitive}"
    if any(o.startswith("-- subset") for o in options) and subset_rows(table, next(
            o for o in options if o.startswith("-- subset"))) is None:
        return None, f"data {table}_subset not here"
    named = re.search(r'\)\s*,\s*"([^"]+)",\s*"\./data/', line)
    named = named.group(1) if named else None
    if suite == "TestAnonymizationTCloseness" and not any(o.startswith("t = ") for o in options):
        sensitive = named
        options += ["t = 0.2", "t_distance = hierarchical"]
    supp = float(re.search(r"ARXConfiguration\.create\(([\d.]+)d?", line).group(1))
    practical = bool(re.search(r"true\s*(?:,\s*[\d.Ee-]+d?)?\)\s*\},?\s*$", line.strip()))
    expected = None if data.group(2) == "null" else float(data.group(2))
    levels = [int(x) for x in data.group(3).split(",")] if data.group(3) else None
    return dict(suite=suite, table=table, supp=supp, metric=metric, gs=gs, options=options, sensitive=sensitive,
                named=named, expected=expected, levels=levels, practical=practical), None


_CONNECTIONS: dict = {}


def connection(table: str):
    if table not in _CONNECTIONS:
        con = duckanon.connect()
        con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv('{DATA / table / (table + '.csv')}', delim=';', "
                    "header=true, all_varchar=true)")
        _CONNECTIONS[table] = con
    return _CONNECTIONS[table]


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run(case: dict) -> dict:
    con = connection(case["table"])
    columns = [r[0] for r in con.execute("DESCRIBE src").fetchall()]
    qis = [c for c in columns if c != case["named"]]
    options = [o for o in case["options"] if not o.startswith("-- subset")]
    source = "src"
    marker = next((o for o in case["options"] if o.startswith("-- subset")), None)
    if marker is not None:
        rows = subset_rows(case["table"], marker)
        con.execute("CREATE OR REPLACE TEMP TABLE subset_numbers (i BIGINT)")
        con.executemany("INSERT INTO subset_numbers VALUES (?)", [[i] for i in rows])
        # rowid: the table's rows in the file's order (CREATE TABLE AS keeps the insertion order)
        con.execute("CREATE OR REPLACE TABLE sub AS SELECT * FROM src WHERE rowid IN (SELECT i FROM subset_numbers) "
                    "ORDER BY rowid")
        source = "sub"
    folder = DATA / case["table"]
    if case["sensitive"]:
        options.append(f"sensitive = {q(case['sensitive'])}")
        if "t_distance = hierarchical" in options:
            options.append(f"sa_hierarchy = '{folder}/{case['table']}_hierarchy_{case['sensitive']}.csv'")
    if case["gs"] is not None:
        options.append(f"gs_factor = {case['gs']}")
    statement = (f"ANONYMIZE {source} INTO out WITH ({', '.join(options)}, qi = ({', '.join(q(c) for c in qis)}), "
                 f"method = 'lattice', suppression_limit = {case['supp']}, metric = {case['metric']}, seed = 1, "
                 f"hierarchies = '{folder}/{case['table']}_hierarchy_{{column}}.csv')")
    started = time.perf_counter()
    try:
        info = json.loads(con.execute(statement).fetchone()[-1])
    except Exception as error:  # noqa: BLE001 (a refusal is a result: ARX may have no solution either)
        return {"outcome": "EQ (no solution)" if case["expected"] is None else "REFUSED", "message": str(error),
                "seconds": round(time.perf_counter() - started, 2)}
    value = info["metric_value"]
    expected = case["expected"]
    outcome = "WORSE (ARX: none)" if expected is None else "EQ" if math.isclose(value, expected, rel_tol=1e-9) \
        else "BEAT" if value < expected else "WORSE"
    return {"outcome": outcome, "value": value, "levels": info["levels"], "removed_rows": info["removed_rows"],
            "seconds": round(time.perf_counter() - started, 2)}


def cases(git_dir: str):
    for suite in SUITES:
        path = f"src/test/org/deidentifier/arx/test/{suite}.java"
        text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True,
                              text=True).stdout
        for number_, line in enumerate(l for l in text.splitlines() if "new ARXAnonymizationTestCase(ARXConfiguration" in l):
            yield suite, number_, line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arx-git-dir", default="/work/.mirror/arx-deidentifier+arx/repo")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "arx_models_suite.json"))
    args = parser.parse_args()
    results, skipped = [], Counter()
    for suite, index, line in cases(args.arx_git_dir):
        case, why = parse(line, suite)
        if case is None:
            if why != "not section 2":
                skipped[why] += 1
            continue
        found = run(case)
        found["found_levels"] = found.pop("levels", None)  # (case["levels"] are ARX's)
        result = {**case, "case": f"{suite}#{index}", **found}
        results.append(result)
        print(f"{result['outcome']:<6} {result['case']:<40} {case['table']} supp {case['supp']:<5} {case['metric']:<25} "
              f"ARX {case['expected']} {case['levels']}  duckanon {result.get('value')} {result.get('found_levels')} "
              f"{result['seconds']} s", flush=True)
    outcomes = Counter(r["outcome"].split(" ")[0] for r in results)
    print("outcomes:", dict(outcomes), "| not run (section 2 cases):", dict(skipped))
    Path(args.out).write_text(json.dumps({"cases": results, "outcomes": outcomes, "not_run": skipped}, indent=1) + "\n")


if __name__ == "__main__":
    main()
