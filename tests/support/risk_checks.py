"""The risk-based and population models (issue 19), written from the papers' definitions and
sharing nothing with duckanon's models: beta-likeness, delta-disclosure, prosecutor risk, k-map
and delta-presence, and ARX's derived k for k-map. Classes are published rows with equal QI
values, as in support.checks.check_published; the table's sensitive distribution `total_sa` is the
source's (what the release is compared with)."""

from __future__ import annotations

import csv
import itertools
import math
from collections import Counter, defaultdict


def class_sizes(rows, qi_idx) -> list[int]:
    """The sizes of the published classes (rows with equal QI values)."""
    return list(Counter(tuple(row[j] for j in qi_idx) for row in rows).values())


def _classes_with_sa(rows, qi_idx, sa_idx):
    classes = defaultdict(Counter)
    for row in rows:
        classes[tuple(row[j] for j in qi_idx)][row[sa_idx]] += 1
    return classes


def check_beta_likeness(rows, qi_idx, sa_idx, beta, total_sa, enhanced=False) -> list[str]:
    """Cao & Karras 2012 ("Publishing microdata with a robust privacy guarantee", PVLDB 5(11)):
    for every class and every sensitive value s it holds, with p = its share in the class and q
    its share in the table, the relative gain (p - q) / q is at most beta (Definition 2, basic);
    enhanced (Definition 3): at most min(beta, -ln q). The problems found."""
    n = sum(total_sa.values())
    problems = []
    for key, counts in _classes_with_sa(rows, qi_idx, sa_idx).items():
        size = sum(counts.values())
        for s, count in counts.items():
            p, q = count / size, total_sa[s] / n
            limit = min(beta, -math.log(q)) if enhanced else beta
            if (p - q) / q > limit + 1e-9:
                problems.append(f"class {key}: value {s!r} gains {(p - q) / q:.6g} > {limit:.6g}")
    return problems


def check_delta_disclosure(rows, qi_idx, sa_idx, delta, total_sa) -> list[str]:
    """Brickell & Shmatikov 2008 ("The cost of privacy", KDD), with ARX's base-2 logarithm: for
    every class and every sensitive value s it holds, |log2(p / q)| < delta (strict)."""
    n = sum(total_sa.values())
    problems = []
    for key, counts in _classes_with_sa(rows, qi_idx, sa_idx).items():
        size = sum(counts.values())
        for s, count in counts.items():
            distance = abs(math.log2((count / size) / (total_sa[s] / n)))
            if not distance < delta:
                problems.append(f"class {key}: value {s!r} at |log2(p/q)| = {distance:.6g} >= {delta}")
    return problems


def average_risk(rows, qi_idx) -> float:
    """El Emam's average prosecutor risk: the mean over the published records of 1 / (size of the
    record's class), which is classes / records; 0 for an empty release."""
    sizes = class_sizes(rows, qi_idx)
    return sum(size * (1 / size) for size in sizes) / sum(sizes) if sizes else 0.0


def highest_risk(rows, qi_idx) -> float:
    """The highest prosecutor risk of a published record: 1 / (size of the smallest class)."""
    sizes = class_sizes(rows, qi_idx)
    return 1 / min(sizes) if sizes else 0.0


def check_risk(rows, qi_idx, average=None, highest=None) -> list[str]:
    """average_risk and highest_risk thresholds on a published table: the problems found."""
    problems = []
    if average is not None and average_risk(rows, qi_idx) > average * (1 + 1e-12):
        problems.append(f"average risk {average_risk(rows, qi_idx):.6g} > {average}")
    if highest is not None and highest_risk(rows, qi_idx) > highest * (1 + 1e-12):
        problems.append(f"highest risk {highest_risk(rows, qi_idx):.6g} > {highest}")
    return problems


def hierarchy_ancestors(path) -> dict:
    """An ARX hierarchy CSV (`value;level1;...;top`) as value -> every label it can be published as
    (its row: all levels, the value itself included)."""
    with open(path, newline="") as handle:
        return {row[0]: set(row) for row in csv.reader(handle, delimiter=";") if row}


def flat_ancestors(values) -> dict:
    """A column without a hierarchy: each value is published as itself or '*'."""
    return {text: {text, "*"} for text in (None if v is None else str(v) for v in values)}


def check_population(published_rows, qi_idx, population_rows, ancestors, k_map=None, delta_presence=None,
                     weights=None):
    """Population models on a published table, from their definitions.

    `population_rows`: the population's QI values per row, in the order of `qi_idx` (weights: how
    many people each row stands for, default 1). `ancestors[j]` maps a population value's text to
    the labels it can be published as. A published class matches a population row when each of
    its QI labels is one of that row's value's labels; the class's population count is the sum
    of the matching rows' weights.

    k-map (Sweeney 2002; El Emam & Dankar 2008): every class matches at least k_map people.
    delta-presence (Nergiz, Atzori & Clifton 2007): (class rows) / (population matching it) lies
    in [dmin, dmax] for every class (a class nothing matches has share infinity).

    Returns (k_map_level, (share_min, share_max), problems): the fewest people a class matches and
    the range of the shares (None for an empty release)."""
    people = Counter()
    for i, row in enumerate(population_rows):
        people[tuple(None if v is None else str(v) for v in row)] += 1 if weights is None else weights[i]
    sizes = Counter(tuple(row[j] for j in qi_idx) for row in published_rows)
    published_labels = [{key[j] for key in sizes} for j in range(len(qi_idx))]
    # each population vector adds its people to every published class it can be generalized to
    matches = Counter()
    for values, count in people.items():
        options = [sorted(ancestors[j][v] & published_labels[j], key=str) for j, v in enumerate(values)]
        for labels in itertools.product(*options):
            if labels in sizes:
                matches[labels] += count
    problems = []
    shares = []
    for key, size in sizes.items():
        matched = matches[key]
        share = size / matched if matched else math.inf
        shares.append(share)
        if k_map is not None and matched < k_map:
            problems.append(f"class {key} matches {matched} < {k_map} people of the population")
        if delta_presence is not None and not (delta_presence[0] - 1e-12 <= share <= delta_presence[1] + 1e-12):
            problems.append(f"class {key} holds {size} of its {matched} population rows, outside {delta_presence}")
    level = min(matches[key] for key in sizes) if sizes else None
    return level, ((min(shares), max(shares)) if shares else None), problems


def kmap_derived_k_reference(k_map, sample_size, population_size, estimator="poisson", significance=0.01) -> int:
    """ARX's derived k for k-map with only a population size (KMap.calculateKPoisson /
    calculateKZeroPoisson, El Emam & Dankar 2008), from the Poisson model with mean
    lambda = k_map * n / N: the smallest j (j >= 0; zero-truncated: j >= 1) whose CDF reaches
    1 - significance, plus 2 (ARX's count; zero-truncated: plus 1), at most k_map and n."""
    lam = k_map * sample_size / population_size
    pmf = lambda j: math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1))  # noqa: E731
    if estimator == "poisson":
        j, cdf = 0, pmf(0)
        while cdf < 1 - significance and j + 2 < k_map:
            j += 1
            cdf += pmf(j)
        return min(j + 2, k_map, sample_size)
    truncation = 1 - math.exp(-lam)
    j, cdf = 1, pmf(1) / truncation
    while cdf < 1 - significance and j + 1 < k_map:
        j += 1
        cdf += pmf(j) / truncation
    return min(j + 1, k_map, sample_size)
