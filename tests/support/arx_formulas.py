"""ARX's formulas written apart from duckanon's solver, from ARX's sources, for the tests that
reproduce ARX's suite cases (tests/e2e/test_arx_other_models.py): ARX's Loss with its
generalization/suppression factor (MetricMDNMLoss), its non-uniform entropy and the monotonic one
(MetricMDNUNMEntropyPrecomputed, MetricMDNUEntropy), Grassberger's estimator as ARX tabulates it
(EntropyLDiversity.EntropyEstimator.GRASSBERGER), over the shared data sets' rows and ARX
hierarchies."""

from __future__ import annotations

import functools
import json
import math
from collections import Counter

from support.data import SHARED

ADULT = SHARED / "adult"


def details(row):
    return json.loads(row[-1])


@functools.cache
def adult_hierarchy(column: str, table: str = "adult") -> list[list[str]]:
    folder = SHARED / table
    rows = [line.split(";") for line in open(folder / f"{table}_hierarchy_{column}.csv", encoding="utf-8").read().splitlines()
            if line]
    width = max(len(r) for r in rows)
    return [r + [r[-1]] * (width - len(r)) for r in rows]


def arx_factors(gs: float) -> tuple[float, float]:
    """MetricMDNMLoss(gsFactor): (gFactor, sFactor)."""
    return (1.0 if gs <= 0.5 else 1.0 - 2.0 * (gs - 0.5)), (2.0 * gs if gs < 0.5 else 1.0)


def arx_loss_at(rows: Counter, columns: list[str], levels, gs: float = 0.5, k: int = 1,
                published: Counter | None = None) -> tuple[float, int]:
    """ARX's Loss(gsFactor) of full-domain generalization at `levels`, from the source rows (a
    Counter of value tuples), written from ARX's MetricMDNMLoss.getInformationLossInternal and
    normalizeGeneralized; and the rows suppressed. The rows kept of each generalized class: all of
    a class of k rows or more, or (`published`: the published table's rows per class) as many as
    were published, the rest of the class suppressed."""
    g_factor, s_factor = arx_factors(gs)
    labels, shares = [], []
    for column, level in zip(columns, levels):
        hierarchy = adult_hierarchy(column)
        of_value = {r[0]: r[level] for r in hierarchy}
        leaves = Counter(r[level] for r in hierarchy)
        labels.append(of_value)
        shares.append({label: count / len(hierarchy) for label, count in leaves.items()})
    generalized = Counter()
    for values, count in rows.items():
        generalized[tuple(labels[j][v] for j, v in enumerate(values))] += count
    if published is not None:
        assert set(published) <= set(generalized) and all(published[key] <= generalized[key] for key in published)
    n = sum(rows.values())
    totals = [0.0] * len(columns)
    suppressed = 0
    for key, count in generalized.items():
        kept = published.get(key, 0) if published is not None else (count if count >= k else 0)
        removed = count - kept
        suppressed += removed
        for j, label in enumerate(key):
            share = shares[j][label]
            totals[j] += kept * share * g_factor
            totals[j] += removed if s_factor == 1.0 else removed * share + s_factor * (removed - removed * share)
    losses = []
    for j, column in enumerate(columns):
        low = g_factor * n / len(adult_hierarchy(column))
        loss = max((totals[j] - low) / (n - low), 0.0)
        losses.append(math.floor(loss * 1e10) / 1e10)  # ARX's Metric.round
    product = 1.0
    for loss in losses:
        product *= (1.0 + loss) ** (1.0 / len(losses))
    return product - 1.0, suppressed


def published_classes(con, table: str, columns) -> Counter:
    """The published table's rows per class (its QI values as text)."""
    return Counter({tuple(str(v) for v in row[:-1]): row[-1] for row in con.execute(
        f"SELECT {quoted(columns)}, count(*) FROM {table} GROUP BY ALL").fetchall()})


@functools.cache
def adult_rows(columns: tuple[str, ...], table: str = "adult") -> Counter:
    lines = open(SHARED / table / f"{table}.csv", encoding="utf-8").read().splitlines()
    header = lines[0].split(";")
    at = [header.index(c) for c in columns]
    return Counter(tuple(line.split(";")[i] for i in at) for line in lines[1:] if line)


def quoted(columns) -> str:
    return ", ".join(f'"{c}"' for c in columns)


# ARX's EntropyLDiversity.EntropyEstimator.GRASSBERGER, copied from ARX's source: G_1, G_2, G_4, ...,
# G_100; an odd n > 1 reads G_(n - 1); above 100, log(n) + m (1/24 - m (7/960 - m 31/8064)),
# m = 1 / (n/2)^2 with n made even
ARX_G = [-1.2703628454614782, 0.7296371545385218, 1.3963038212051886, 1.7963038212051885, 2.0820181069194743,
         2.3042403291416966, 2.4860585109598783, 2.639904664806032, 2.7732379981393653, 2.8908850569628948,
         2.9961482148576315, 3.091386310095727, 3.178342831834857, 3.2583428318348573, 3.3324169059089312,
         3.4013824231503107, 3.4658985521825687, 3.5265046127886293, 3.5836474699314866, 3.6377015239855406,
         3.6889835752675917, 3.7377640630724698, 3.7842756909794466, 3.8287201354238913, 3.871273326913253,
         3.912089653443865, 3.951305339718375, 3.9890411887749786, 4.025404825138615, 4.060492544436861,
         4.094390849521607, 4.127177734767508, 4.1589237665135395, 4.18969299728277, 4.219543743551427,
         4.248529250797804, 4.276698264882311, 4.304095525156284, 4.33076219182295, 4.356736217796977,
         4.382052673493179, 4.40674403151787, 4.430840417060039, 4.454369828824745, 4.477358334571871,
         4.49983024468423, 4.521808266662253, 4.543313643006339, 4.564366274585286, 4.5849848312863175,
         4.605186851488337]


def arx_g(n: int) -> float:
    if n <= 100:
        return ARX_G[(n - n % 2) // 2]
    n -= n % 2
    m = 1.0 / ((n // 2) * (n // 2))
    return math.log(n) + m * (1 / 24 - m * (7 / 960 - m * 31 / 8064))


def grassberger_diverse(counts, l: float) -> bool:
    """Entropy l-diversity by Grassberger's estimator over one class's sensitive counts, the whole
    sum compared (EntropyLDiversity.isAnonymous without its early exit)."""
    counts = [c for c in counts if c > 0]
    n = sum(counts)
    return len(counts) >= math.ceil(l) and sum(c * arx_g(c) for c in counts) <= n * (arx_g(n) - math.log(l))


def arx_entropy_at(rows: Counter, columns, levels, published: Counter, monotonic: bool = False,
                   table: str = "adult") -> float:
    """ARX's non-uniform entropy (MetricMDNUNMEntropyPrecomputed) at `levels`: per column, every
    source row's log2(rows of its generalized label / rows of its value), plus, over the rows
    suppressed (each class's rows beyond those `published`), count x log2(suppressed / count) per
    generalized label; `monotonic` (MetricMDNUEntropy): without the suppressed rows' term."""
    labels = [{r[0]: r[level] for r in adult_hierarchy(c, table)} for c, level in zip(columns, levels)]
    keyed = Counter()
    for values, count in rows.items():
        keyed[tuple(labels[j][v] for j, v in enumerate(values)), values] += count
    classes = Counter()
    for (key, _), count in keyed.items():
        classes[key] += count
    total = 0.0
    for j in range(len(columns)):
        value_rows, label_rows = Counter(), Counter()
        for (key, values), count in keyed.items():
            value_rows[values[j]] += count
            label_rows[key[j]] += count
        total += sum(c * math.log2(label_rows[labels[j][v]] / c) for v, c in value_rows.items())
        if monotonic:
            continue
        removed = Counter()
        for key, count in classes.items():
            removed[key[j]] += count - published.get(key, 0)
        gone = sum(removed.values())
        total += sum(c * math.log2(gone / c) for c in removed.values() if c)
    return total


def classes_at(rows: Counter, columns, levels, table: str = "adult") -> Counter:
    """The rows of each class of full-domain generalization at `levels` (the data set's hierarchies)."""
    labels = [{r[0]: r[level] for r in adult_hierarchy(c, table)} for c, level in zip(columns, levels)]
    classes = Counter()
    for values, count in rows.items():
        classes[tuple(labels[j][v] for j, v in enumerate(values))] += count
    return classes
