"""ARX's own population-risk numbers, the reference values of
tests/solver/test_population_estimators.py.

Compiles ArxPopulation.java (beside this file) against an ARX build, feeds it the inputs below and
prints the results as the Python literals pasted into the test (ARX_UNIQUENESS, ARX_KMAP).

    python benchmarks/arx_population/run.py [--classpath CP]

CP is the Java classpath of an ARX build (arx-core jar and ARX's lib/ jars): by default the
contents of $ARX_CLASSPATH, else of /tmp/arxside-solver/classpath.txt, the build made by
../shared/arx-side-by-side/build.sh (ARX 3.9.2 + fixes, commit aacd487f). Needs Java 17 (javac).

Inputs (the test rebuilds the same class-size profiles from the same files, with no Java):
- small profiles written out below ({class size: number of classes});
- Adult (../shared/data/adult/adult.csv, 30,162 rows) grouped on 8 QIs (every column but
  occupation), on 4 QIs (sex, age, race, marital-status) and on 3 QIs (sex, age, race), and the
  10% subset of rows 0, 10, 20, ... (3,017 rows) on 8 QIs;
- each with several population sizes N (from N = n up to the US population);
- k-map: k, n, N, estimator and significance on a grid.
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADULT = HERE.parents[2] / "shared" / "data" / "adult" / "adult.csv"

# small profiles: {size: classes}
SMALL = {
    "tiny_a": ({1: 5, 2: 3, 3: 2, 5: 1}, (40, 200, 5000)),
    "tiny_b": ({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}, (150, 1000, 100000)),
    "no_pairs": ({1: 4, 3: 2}, (10, 100)),
    "no_uniques": ({2: 2, 3: 1}, (100,)),
    "snb_a": ({1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1}, (42, 100)),
    "snb_b": ({1: 8, 2: 5, 3: 3, 4: 3, 5: 1, 8: 3}, (75, 750)),
}
QI8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
       "salary-class"]
QI4 = ["sex", "age", "race", "marital-status"]
QI3 = ["sex", "age", "race"]
US_POPULATION = 318_900_000
# (name, QI, every 10th row only, population sizes)
ADULT_CASES = [
    ("adult8", QI8, False, (30162, 37702, 60324, 301620, 3016200, US_POPULATION)),
    ("adult4", QI4, False, (30162, 37702, 301620)),
    ("adult3", QI3, False, (60324, 301620)),
    ("adult8_tenth", QI8, True, (6034, 30162, 301700)),
]
KMAP_K = (1, 2, 3, 5, 10, 20, 100)
KMAP_SIZES = ((30162, 301620), (30162, 60324), (3017, 30162), (100, 1_000_000), (500, 600))
KMAP_ESTIMATORS = (("poisson", "poisson"), ("zero_truncated_poisson", "ztp"))
KMAP_SIGNIFICANCE = (0.01, 0.05, 0.2)


def adult_profile(qi: list[str], tenth: bool) -> dict[int, int]:
    """{class size: classes} of Adult grouped on `qi` (all rows, or rows 0, 10, 20, ...)."""
    with open(ADULT, newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    header, data = rows[0], rows[1:]
    if tenth:
        data = data[::10]
    idx = [header.index(c) for c in qi]
    classes = collections.Counter(tuple(r[i] for i in idx) for r in data)
    return dict(sorted(collections.Counter(classes.values()).items()))


def inputs() -> tuple[list[str], list[tuple]]:
    lines, uniq = [], []
    for name, (profile, sizes) in SMALL.items():
        for big_n in sizes:
            uniq.append((name, big_n, profile))
    for name, qi, tenth, sizes in ADULT_CASES:
        profile = adult_profile(qi, tenth)
        for big_n in sizes:
            uniq.append((name, big_n, profile))
    for i, (name, big_n, profile) in enumerate(uniq):
        lines.append(f"uniq u{i} {big_n} " + " ".join(f"{k}:{c}" for k, c in profile.items()))
    kmap = []
    for k in KMAP_K:
        for n, big_n in KMAP_SIZES:
            for estimator, arg in KMAP_ESTIMATORS:
                for significance in KMAP_SIGNIFICANCE:
                    lines.append(f"kmap m{len(kmap)} {k} {n} {big_n} {arg} {significance}")
                    kmap.append((k, n, big_n, estimator, significance))
    return lines, [uniq, kmap]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--classpath", default=os.environ.get("ARX_CLASSPATH"))
    args = parser.parse_args()
    classpath = args.classpath or Path("/tmp/arxside-solver/classpath.txt").read_text().strip()
    lines, (uniq, kmap) = inputs()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", tmp, str(HERE / "ArxPopulation.java")],
                       check=True)
        out = subprocess.run(["java", "-cp", f"{tmp}{os.pathsep}{classpath}", "ArxPopulation"],
                             input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    results = {}
    for line in out.stdout.splitlines():
        fields = line.split("\t")
        results[fields[1]] = fields[2:]

    print("# (case, N): {estimator: (ARX's getNumUniqueTuples, isAvailableEstimate)}, dankar's model")
    print("ARX_UNIQUENESS = {")
    for i, (name, big_n, _) in enumerate(uniq):
        fields = results[f"u{i}"]
        values = {}
        for field in fields[:4]:
            model, value = field.split("=")
            number, _fraction, available = value.split(",")
            values[model] = (float(number), available == "true")
        dankar_model = fields[4].split("=")[1]
        body = ", ".join(f"{m!r}: ({v!r}, {a})" for m, (v, a) in values.items())
        print(f"    ({name!r}, {big_n}): ({{{body}}}, {dankar_model!r}),")
    print("}")
    print(f"# (n, N, estimator, significance): KMap.getDerivedK() for k = {KMAP_K}")
    print("ARX_KMAP = {")
    derived = collections.defaultdict(list)
    for i, (_k, *key) in enumerate(kmap):
        derived[tuple(key)].append(int(results[f"m{i}"][0]))
    for key, values in sorted(derived.items(), key=lambda kv: (-kv[0][0], kv[0][1:])):
        print(f"    {key!r}: {tuple(values)!r},")
    print("}")


if __name__ == "__main__":
    sys.exit(main())
