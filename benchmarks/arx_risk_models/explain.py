"""Why duckanon's and ARX's Loss differ on the cases where run.py finds them apart: the global
models (average risk, population uniqueness) remove the smallest classes until the model holds,
and the tools break ties between classes of equal size, and search for the count, differently.

    /work/venv/bin/python benchmarks/arx_risk_models/explain.py [--out FILE]

Everything here is computed from the CSV and the hierarchy files (not by either tool), except the
population-uniqueness verdicts, which come from each tool's own estimator (ARX's through
ArxUniqueness.java, compiled by run.compile_arx; duckanon's PopulationUniqueness.holds). Writes
explain.txt beside this file.

1. Tie-breaking, at the node both tools chose (average risk 5%, Zayatz 5%) and at ARX's node for
   Dankar 5%: the classes at the node, the number of classes each tool removed (read off its
   published table) and the sizes removed; the Loss of removing that many classes in ARX's order
   (HashGroupifyDistribution: size, then the class's own information loss ascending - for Loss,
   prod(1 + size * share_j)^(1/m) - 1 with share_j = leaves / domain - then its first row) and in
   the order that costs least (size, then most generalized first).
2. The Dankar case: per number c of smallest classes removed (ARX's order), ARX's verdict and
   duckanon's (and the estimator Dankar's rule used in duckanon), and where each tool's search
   for c lands: ARX's binary search (HashGroupifyDistribution.suppressWhileNotFulfilledBinary
   with RiskBasedCriterion's abort once more rows than the limit are removed), duckanon's
   (Lattice._enforce_global).
"""

from __future__ import annotations

import argparse
import collections
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (the cases, the data, the tools' runs)

from duckanon.solver.lattice import fewest_removed  # noqa: E402
from duckanon.solver.models import PopulationUniqueness  # noqa: E402


class Node:
    """The classes of `rows` at `levels`: size, first row, per QI the label's leaves / domain."""

    def __init__(self, rows, header, qis, levels):
        self.qis, self.levels = qis, list(levels)
        self.labels = run.Labels(qis)
        self.domain, self.leaves = {}, {}
        for c, h in zip(qis, levels):
            hier = self.labels.maps[c]
            self.domain[c] = len(hier[0])
            self.leaves[c] = collections.Counter(hier[h].values())
        idx = [header.index(c) for c in qis]
        first, size = {}, collections.Counter()
        for i, r in enumerate(rows):
            key = self.labels.key([r[j] for j in idx], qis, levels)
            size[key] += 1
            first.setdefault(key, i)
        self.keys = list(size)
        self.size = np.array([size[k] for k in self.keys], dtype=np.int64)
        self.first = np.array([first[k] for k in self.keys], dtype=np.int64)
        # per class and QI: leaves under its label / domain (ARX's share); cell loss (leaves-1)/(d-1)
        self.share = np.array([[self.leaves[c][k[j]] / self.domain[c] for j, c in enumerate(qis)] for k in self.keys])
        self.cell = np.array([[(self.leaves[c][k[j]] - 1) / (self.domain[c] - 1) for j, c in enumerate(qis)]
                              for k in self.keys])
        self.n = int(self.size.sum())

    def arx_order(self) -> np.ndarray:
        """ARX's order of suppression (HashGroupifyDistribution with the Loss metric)."""
        m = len(self.qis)
        entry = np.prod((self.size[:, None] * self.share + 1.0) ** (1.0 / m), axis=1) - 1.0
        return np.lexsort((self.first, entry, self.size))

    def cheapest_order(self) -> np.ndarray:
        """Smallest first, and among equal sizes the most generalized (least Loss added) first."""
        return np.lexsort((self.first, -self.cell.sum(axis=1), self.size))

    def loss(self, removed: np.ndarray) -> float:
        """ARX's Loss with the classes flagged in `removed` suppressed (a cell costs 1)."""
        cost = np.where(removed[:, None], 1.0, self.cell)
        columns = (self.size[:, None] * cost).sum(axis=0) / self.n
        columns = np.floor(np.maximum(columns, 0) * 1e10) / 1e10
        product = 1.0
        for v in columns:
            product *= (v + 1.0) ** (1.0 / len(columns))
        return product - 1.0

    def prefix(self, order, count) -> np.ndarray:
        removed = np.zeros(len(self.keys), dtype=bool)
        removed[order[:count]] = True
        return removed

    def removed_in(self, header, published) -> np.ndarray:
        """Classes absent from a published table (or published as all '*': ARX's suppressed)."""
        idx = [header.index(c) for c in self.qis]
        present = {tuple(r[i] for i in idx) for r in published}
        return np.array([k not in present for k in self.keys])


def tie_breaking(node: Node, tools: dict, limit_rows: int) -> list[str]:
    """Lines of the tie-breaking analysis at `node`; `tools`: name -> (header, published)."""
    out = []
    arx_order, cheap = node.arx_order(), node.cheapest_order()
    for name, (header, published) in tools.items():
        removed = node.removed_in(header, published)
        count = int(removed.sum())
        sizes = collections.Counter(node.size[removed].tolist())
        boundary = max(sizes) if sizes else 0
        of = int((node.size == boundary).sum())
        out.append(f"- {name}: {count} classes removed, {int(node.size[removed].sum())} rows (limit {limit_rows}); "
                   f"sizes removed {dict(sorted(sizes.items()))}; of the {of} classes of size {boundary}, "
                   f"{sizes.get(boundary, 0)} removed. Loss of its table: {float(node.loss(removed))!r}; "
                   f"the same count in ARX's order: {float(node.loss(node.prefix(arx_order, count)))!r}; "
                   f"in the cheapest order: {float(node.loss(node.prefix(cheap, count)))!r}.")
    return out


# -- population uniqueness ------------------------------------------------------------------------
def arx_verdicts(classpath: str, estimator: str, population: int, u: float, histograms) -> list[tuple[float, bool]]:
    lines = [f"h{i} {estimator} {population} {u} " + " ".join(f"{s}:{c}" for s, c in sorted(h.items()))
             for i, h in enumerate(histograms)]
    done = subprocess.run(["java", "-cp", classpath, "ArxUniqueness"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True)
    result = []
    for line in done.stdout.splitlines():
        _, estimate, ok = line.split()
        result.append((float(estimate), ok == "true"))
    return result


def arx_binary_search(count: int, fulfilled, rows_removed, limit_rows: int) -> tuple[int, bool]:
    """ARX's search for the number of classes to suppress (entries in its order), re-stated from
    HashGroupifyDistribution.suppressWhileNotFulfilledBinary and RiskBasedCriterion.enforce:
    returns (classes suppressed, whether the node passes: removed rows <= limit; ARX does not
    re-check the model after the search)."""
    if fulfilled(0):
        return 0, True
    if count == 0:
        return 0, rows_removed(0) <= limit_rows

    def state(c):
        ok = fulfilled(c)
        if not ok and rows_removed(c) > limit_rows:
            return "abort"
        return "ok" if ok else "no"

    def half(a, b):  # Java's int division truncates toward 0
        return int((a + b) / 2)

    # the suppressed entries are always the first mid + 1 (the code suppresses or un-suppresses
    # up to mid after each step)
    low, high = 0, count - 1
    mid = half(low, high)
    current = "abort"
    while low <= high:
        current = state(mid + 1)
        if current == "abort":
            break
        if current == "ok":
            high = mid - 1
        else:
            low = mid + 1
        mid = half(low, high)
    suppressed = mid + 1
    if current != "abort":  # "finally check mid + 1"
        if state(suppressed) == "no" and mid + 1 < count:
            suppressed += 1
    return suppressed, rows_removed(suppressed) <= limit_rows


def uniqueness(node: Node, classpath: str, case: dict, limit_rows: int, label: str) -> list[str]:
    estimator = next(a.split("=")[1] for a in case["arx"] if a.startswith("estimator="))
    population = int(next(a.split("=")[1] for a in case["arx"] if a.startswith("population=")))
    u = float(next(a.split("=")[1] for a in case["arx"] if a.startswith("risk=")))
    order = node.arx_order()
    sizes = node.size[order]
    removed_rows = np.concatenate([[0], np.cumsum(sizes)])
    histograms = [collections.Counter(sizes[c:].tolist()) for c in range(len(sizes) + 1)]
    arx = arx_verdicts(classpath, estimator, population, u, histograms)
    model = PopulationUniqueness(u, population, estimator)
    cache = {}

    def duck(c):
        if c not in cache:
            estimate = model.estimate(sizes[c:]) if c < len(sizes) else None
            cache[c] = (model.holds(sizes[c:]), estimate)
        return cache[c]

    within = [c for c in range(len(sizes) + 1) if removed_rows[c] <= limit_rows]
    arx_ok = [c for c in within if arx[c][1]]
    duck_ok = [c for c in within if duck(c)[0]]
    differ = [c for c in within if arx[c][1] != duck(c)[0]]
    a_count, a_pass = arx_binary_search(len(sizes), lambda c: arx[c][1], lambda c: int(removed_rows[c]), limit_rows)
    d_count = fewest_removed(len(sizes), lambda c: duck(c)[0])
    # ARXResult.getOutput(node) analyses the node without the early abort (no limit in enforce)
    o_count, _ = arx_binary_search(len(sizes), lambda c: arx[c][1], lambda c: int(removed_rows[c]), 1 << 62)
    out = [f"- {label}: {len(sizes)} classes, {int((sizes == 1).sum())} of size 1. Within the limit ({limit_rows} "
           f"rows: up to {within[-1]} classes), the model holds per ARX for {len(arx_ok)} counts "
           f"({_ranges(arx_ok)}), per duckanon for {len(duck_ok)} ({_ranges(duck_ok)}); they disagree at "
           f"{len(differ)} counts ({_ranges(differ)})."]
    for c in differ[:3]:
        est = duck(c)[1]
        out.append(f"  - {c} classes removed ({int(removed_rows[c])} rows): ARX estimate {arx[c][0]!r} "
                   f"({'holds' if arx[c][1] else 'fails'}), duckanon {est.fraction!r} by {est.estimator} "
                   f"(converged {est.converged}) ({'holds' if duck(c)[0] else 'fails'}).")
    out.append(f"  - ARX's binary search lands on {a_count} classes ({int(removed_rows[min(a_count, len(sizes))])} rows): "
               f"node {'passes' if a_pass else 'fails'} (model there per ARX: {arx[min(a_count, len(sizes))][1]}); "
               f"duckanon's on {d_count} classes ({int(removed_rows[d_count])} rows): node "
               f"{'passes' if removed_rows[d_count] <= limit_rows else 'fails'}. Without the abort (as "
               f"ARXResult.getOutput(node) analyses a node) ARX's search lands on {o_count} classes "
               f"({int(removed_rows[min(o_count, len(sizes))])} rows).")
    first_duck = duck_ok[0] if duck_ok else None
    first_arx = arx_ok[0] if arx_ok else None
    out.append(f"  - the fewest classes removed for the model to hold: per ARX {first_arx}, per duckanon {first_duck}.")
    return out


def _ranges(values) -> str:
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts[:12]) + (", ..." if len(parts) > 12 else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(run.HERE / "explain.txt"))
    args = parser.parse_args()
    header, rows = run.read_adult()
    con = run.connect(header, rows)
    cases = {c[0]: dict(id=c[0], what=c[1], table=c[2], qis=c[3], sensitive=c[4], arx=c[5], duck=c[6], check=c[7])
             for c in run.MODELS}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        classpath = run.compile_arx(Path(tmp))
        for cid in ("avgrisk", "uniq_zayatz", "uniq_dankar"):
            case, limit = cases[cid], 0.05
            duck = run.run_duck(con, case, limit, 0)
            arx = run.run_arx(classpath, case, limit, 0, 1, [duck["levels"]], Path(tmp) / f"{cid}.csv")
            limit_rows = int(math.floor(limit * len(rows) + 1e-9))
            lines.append(f"## {case['what']}, suppression 5%\n")
            lines.append(f"ARX: {arx['transformation']} Loss {arx['score']}; duckanon: {duck['levels']} Loss "
                         f"{duck['metric_value']!r}.\n")
            node = Node(rows, header, case["qis"], arx["transformation"])
            tools = {"ARX": (arx["header"], arx["published"])}
            if duck["levels"] == arx["transformation"]:
                tools["duckanon"] = (duck["header"], duck["published"])
            lines.append(f"Tie-breaking at ARX's node {arx['transformation']} ({len(node.keys)} classes):")
            lines += tie_breaking(node, tools, limit_rows)
            if cid.startswith("uniq"):
                lines.append("\nPopulation uniqueness per number of smallest classes removed:")
                lines += uniqueness(node, classpath, case, limit_rows, f"ARX's node {arx['transformation']}")
                if duck["levels"] != arx["transformation"]:
                    other = Node(rows, header, case["qis"], duck["levels"])
                    lines += uniqueness(other, classpath, case, limit_rows, f"duckanon's node {duck['levels']}")
            lines.append("")
            print(case["what"], "done", flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
