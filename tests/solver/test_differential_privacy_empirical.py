"""An empirical check of the guarantee: a toy table D and its neighbour D' (one row added to the
class nearest the threshold), 1,000 releases of each through the release function ANONYMIZE runs
(`private_release`, its own cryptographic sampling), and for every event tested
P_D(E) <= e^epsilon * P_D'(E) + delta and the same with D and D' swapped.

The events: each class published or not, each class's published count at or above a few
thresholds around beta * its size, the number of published classes, the published rows in a few
ranges. They are chosen before the runs and are the ones a distinguishing attacker would try (the
extra row changes the class it joins and nothing else).

Statistical margin: frequencies, not probabilities, are compared, so the inequality is checked on
their estimates with a margin of 4 standard errors of p_D - e^epsilon * p_D' (binomial, from the
frequencies; a true inequality fails one event's check with probability below 4e-5). A negative
control shows the test has power: without sampling (beta = 1) the same check fails, as it must.
"""

import math

import numpy as np

from duckanon.solver.differential_privacy import parameters, private_release
from duckanon.solver.histogram import Histogram

RUNS = 1000
EPSILON, DELTA = 1.0, 1e-3


def _table(extra: int) -> Histogram:
    # four classes: two near the expected sampled size k, one far above, one tiny
    sizes = [55 + extra, 60, 120, 4]
    return Histogram(codes=np.arange(4).reshape(4, 1), sa_counts=np.array(sizes).reshape(4, 1))


def _release(hist: Histogram, beta: float, k: int) -> tuple:
    """The published count of each class (0: not published)."""
    solution = private_release(hist, beta, k)
    counts = np.zeros(hist.n_classes, dtype=np.int64)
    kept = solution.kept_groups[solution.part_group]
    np.add.at(counts, solution.part_class[kept], solution.part_count[kept])
    return tuple(counts.tolist())


def _events(k: int, beta: float):
    events = {}
    for c, size in enumerate((55, 60, 120, 4)):
        events[f"class {c} published"] = lambda r, c=c: r[c] > 0
        for offset in (-2, 0, 2):
            threshold = max(k, round(beta * size) + offset)
            events[f"class {c} count >= {threshold}"] = lambda r, c=c, t=threshold: r[c] >= t
    for published in range(5):
        events[f"{published} classes published"] = lambda r, p=published: sum(x > 0 for x in r) == p
    for low in range(0, 200, 20):
        events[f"published rows in [{low}, {low + 20})"] = lambda r, low=low: low <= sum(r) < low + 20
    return events


def _violations(beta: float, k: int, epsilon: float, delta: float) -> list[str]:
    first = [_release(_table(0), beta, k) for _ in range(RUNS)]
    second = [_release(_table(1), beta, k) for _ in range(RUNS)]
    bound = math.exp(epsilon)
    failed = []
    for name, event in _events(k, beta).items():
        p = sum(map(event, first)) / RUNS
        q = sum(map(event, second)) / RUNS
        for a, b, order in ((p, q, "D vs D'"), (q, p, "D' vs D")):
            error = math.sqrt(a * (1 - a) / RUNS + bound ** 2 * b * (1 - b) / RUNS)
            if a - bound * b - delta > 4 * error:
                failed.append(f"{name} ({order}): {a:.3f} > e^eps * {b:.3f} + delta")
    return failed


def test_release_distribution_within_epsilon_delta():
    derived = parameters(EPSILON, DELTA)
    assert (derived.k, derived.beta) == (35, 0.6321205588285574)  # ARX's, benchmarks/results/arx_dp_parameters.md
    assert _violations(derived.beta, derived.k, EPSILON, DELTA) == []


def test_check_detects_a_release_without_sampling():
    # beta = 1 and k = 56: D's class of 55 is always removed, D''s class of 56 always published
    assert _violations(1.0, 56, EPSILON, DELTA) != []
