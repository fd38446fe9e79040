"""Tests for duckanon/solver/population.py: population uniqueness (Pitman, Zayatz, SNB, Dankar's
rule) and the k-map derived k.

References, none of them sharing code with the module:
- exact rational arithmetic (fractions, math.comb) for Zayatz's hypergeometric formula;
- the likelihood of Pitman's sampling formula and its gradient written out as plain loops;
- ARX's SNB equations and its estimate of K written out from the formulas;
- scipy.stats.poisson for the k-map tails;
- ARX itself: ARX_UNIQUENESS and ARX_KMAP below are the output of ARX 3.9.2 (+ fixes, commit
  aacd487f, the build of ../shared/arx-side-by-side) through its public API
  (RiskModelPopulationUniqueness with the default ARXSolverConfiguration; KMap initialised by a
  real anonymization), printed by `python benchmarks/arx_population/run.py`
  (benchmarks/arx_population/ArxPopulation.java). No Java is needed to run these tests.
"""

from __future__ import annotations

import collections
import csv
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from duckanon.errors import AnonymizeError
from duckanon.solver import population as pop
from duckanon.solver import special

from support.tiers import examples

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "adult.csv"
QI8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
       "salary-class"]
QI4 = ["sex", "age", "race", "marital-status"]
QI3 = ["sex", "age", "race"]
US_POPULATION = 318_900_000


def expand(profile: dict[int, int]) -> list[int]:
    """{size: classes} -> the list of class sizes."""
    return [k for k, c in sorted(profile.items()) for _ in range(c)]


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a)


@pytest.fixture(scope="module")
def adult_rows():
    if not ADULT.exists():
        pytest.skip("../shared/data/adult is not available")
    with open(ADULT, newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    return rows[0], rows[1:]


def adult_sizes(adult_rows, qi, tenth=False) -> list[int]:
    """Class sizes of Adult on `qi` (every row, or rows 0, 10, 20, ... as in run.py)."""
    header, data = adult_rows
    if tenth:
        data = data[::10]
    idx = [header.index(c) for c in qi]
    return list(collections.Counter(tuple(r[i] for i in idx) for r in data).values())


# ----------------------------------------------------------------------------------------------
# ARX's own numbers (benchmarks/arx_population/run.py)

SMALL = {
    "tiny_a": {1: 5, 2: 3, 3: 2, 5: 1},
    "tiny_b": {1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1},
    "no_pairs": {1: 4, 3: 2},
    "no_uniques": {2: 2, 3: 1},
    "snb_a": {1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1},
    "snb_b": {1: 8, 2: 5, 3: 3, 4: 3, 5: 1, 8: 3},
}
ADULT_CASES = {"adult8": (QI8, False), "adult4": (QI4, False), "adult3": (QI3, False),
               "adult8_tenth": (QI8, True)}

# (case, N): {estimator: (ARX's getNumUniqueTuples, isAvailableEstimate)}, dankar's model
ARX_UNIQUENESS = {
    ('tiny_a', 40): ({'pitman': (0.0, False), 'zayatz': (4.943874928998404, True), 'snb': (0.0, False), 'dankar': (4.943874928998404, True)}, 'zayatz'),
    ('tiny_a', 200): ({'pitman': (0.0, False), 'zayatz': (12.383007061353739, True), 'snb': (0.0, False), 'dankar': (12.383007061353739, True)}, 'zayatz'),
    ('tiny_a', 5000): ({'pitman': (0.0, False), 'zayatz': (260.14493276025934, True), 'snb': (0.0, False), 'dankar': (260.14493276025934, True)}, 'zayatz'),
    ('tiny_b', 150): ({'pitman': (48.164495256767886, True), 'zayatz': (33.33504543305301, True), 'snb': (0.0, False), 'dankar': (33.33504543305301, True)}, 'zayatz'),
    ('tiny_b', 1000): ({'pitman': (31.81084316827335, True), 'zayatz': (108.91908473956896, True), 'snb': (0.0, False), 'dankar': (31.81084316827335, True)}, 'pitman'),
    ('tiny_b', 100000): ({'pitman': (11.621575756500162, True), 'zayatz': (9018.714186515796, True), 'snb': (0.0, False), 'dankar': (11.621575756500162, True)}, 'pitman'),
    ('no_pairs', 10): ({'pitman': (0.0, False), 'zayatz': (4.0, True), 'snb': (0.0, False), 'dankar': (4.0, True)}, 'zayatz'),
    ('no_pairs', 100): ({'pitman': (0.0, False), 'zayatz': (17.869871529216745, True), 'snb': (0.0, False), 'dankar': (17.869871529216745, True)}, 'zayatz'),
    ('no_uniques', 100): ({'pitman': (0.0, True), 'zayatz': (0.0, True), 'snb': (0.0, True), 'dankar': (0.0, True)}, 'dankar'),
    ('snb_a', 42): ({'pitman': (0.0, False), 'zayatz': (3.9103037184217997, True), 'snb': (3.843311295543415, True), 'dankar': (3.843311295543415, True)}, 'snb'),
    ('snb_a', 100): ({'pitman': (0.0, False), 'zayatz': (3.4030097324353137, True), 'snb': (0.0, False), 'dankar': (3.4030097324353137, True)}, 'zayatz'),
    ('snb_b', 75): ({'pitman': (0.0, False), 'zayatz': (7.823533899118186, True), 'snb': (7.418658736139503, True), 'dankar': (7.418658736139503, True)}, 'snb'),
    ('snb_b', 750): ({'pitman': (0.0, False), 'zayatz': (14.26705771049023, True), 'snb': (0.0, False), 'dankar': (14.26705771049023, True)}, 'zayatz'),
    ('adult8', 30162): ({'pitman': (8985.13654552037, True), 'zayatz': (8841.0, True), 'snb': (8841.000000006941, True), 'dankar': (8841.0, True)}, 'zayatz'),
    ('adult8', 37702): ({'pitman': (10443.20526590727, True), 'zayatz': (10217.851453148884, True), 'snb': (0.0, False), 'dankar': (10217.851453148884, True)}, 'zayatz'),
    ('adult8', 60324): ({'pitman': (14335.255417488524, True), 'zayatz': (13955.956236963684, True), 'snb': (0.0, False), 'dankar': (13955.956236963684, True)}, 'zayatz'),
    ('adult8', 301620): ({'pitman': (42411.14113232119, True), 'zayatz': (44668.9406129838, True), 'snb': (0.0, False), 'dankar': (42411.14113232119, True)}, 'pitman'),
    ('adult8', 3016200): ({'pitman': (200186.70646050764, True), 'zayatz': (294012.2067968835, True), 'snb': (0.0, False), 'dankar': (200186.70646050764, True)}, 'pitman'),
    ('adult8', 318900000): ({'pitman': (4630754.101511397, True), 'zayatz': (27438225.871040333, True), 'snb': (0.0, False), 'dankar': (4630754.101511397, True)}, 'pitman'),
    ('adult4', 30162): ({'pitman': (594.5547932126829, True), 'zayatz': (543.0, True), 'snb': (543.0, True), 'dankar': (543.0, True)}, 'snb'),
    ('adult4', 37702): ({'pitman': (631.4098905685067, True), 'zayatz': (555.4210993565816, True), 'snb': (412.0367301087714, True), 'dankar': (412.0367301087714, True)}, 'snb'),
    ('adult4', 301620): ({'pitman': (1105.9387971082633, True), 'zayatz': (908.0470031362603, True), 'snb': (0.0, False), 'dankar': (1105.9387971082633, True)}, 'pitman'),
    ('adult3', 60324): ({'pitman': (92.01074642477023, True), 'zayatz': (42.97254593733669, True), 'snb': (0.0, False), 'dankar': (42.97254593733669, True)}, 'zayatz'),
    ('adult3', 301620): ({'pitman': (92.65921249384856, True), 'zayatz': (38.41939802479843, True), 'snb': (0.0, False), 'dankar': (92.65921249384856, True)}, 'pitman'),
    ('adult8_tenth', 6034): ({'pitman': (2954.1903094100226, True), 'zayatz': (2951.314484095183, True), 'snb': (0.0, False), 'dankar': (2951.314484095183, True)}, 'zayatz'),
    ('adult8_tenth', 30162): ({'pitman': (9002.634558013311, True), 'zayatz': (11258.41331553237, True), 'snb': (0.0, False), 'dankar': (11258.41331553237, True)}, 'zayatz'),
    ('adult8_tenth', 301700): ({'pitman': (44351.92077085221, True), 'zayatz': (101061.65414695846, True), 'snb': (0.0, False), 'dankar': (44351.92077085221, True)}, 'pitman'),
}

KMAP_K = (1, 2, 3, 5, 10, 20, 100)
# (n, N, estimator, significance): KMap.getDerivedK() for k = KMAP_K
ARX_KMAP = {
    (30162, 60324, 'poisson', 0.01): (1, 2, 3, 5, 10, 20, 69),
    (30162, 60324, 'poisson', 0.05): (1, 2, 3, 5, 10, 17, 64),
    (30162, 60324, 'poisson', 0.2): (1, 2, 3, 5, 9, 15, 58),
    (30162, 60324, 'zero_truncated_poisson', 0.01): (1, 2, 3, 5, 10, 19, 68),
    (30162, 60324, 'zero_truncated_poisson', 0.05): (1, 2, 3, 5, 10, 16, 63),
    (30162, 60324, 'zero_truncated_poisson', 0.2): (1, 2, 3, 5, 8, 14, 57),
    (30162, 301620, 'poisson', 0.01): (1, 2, 3, 5, 6, 8, 20),
    (30162, 301620, 'poisson', 0.05): (1, 2, 3, 4, 5, 7, 17),
    (30162, 301620, 'poisson', 0.2): (1, 2, 3, 3, 4, 5, 15),
    (30162, 301620, 'zero_truncated_poisson', 0.01): (1, 2, 3, 4, 5, 7, 19),
    (30162, 301620, 'zero_truncated_poisson', 0.05): (1, 2, 3, 3, 4, 6, 16),
    (30162, 301620, 'zero_truncated_poisson', 0.2): (1, 2, 2, 3, 3, 4, 14),
    (3017, 30162, 'poisson', 0.01): (1, 2, 3, 5, 6, 8, 20),
    (3017, 30162, 'poisson', 0.05): (1, 2, 3, 4, 5, 7, 17),
    (3017, 30162, 'poisson', 0.2): (1, 2, 3, 3, 4, 5, 15),
    (3017, 30162, 'zero_truncated_poisson', 0.01): (1, 2, 3, 4, 5, 7, 19),
    (3017, 30162, 'zero_truncated_poisson', 0.05): (1, 2, 3, 3, 4, 6, 16),
    (3017, 30162, 'zero_truncated_poisson', 0.2): (1, 2, 2, 3, 3, 4, 14),
    (500, 600, 'poisson', 0.01): (1, 2, 3, 5, 10, 20, 100),
    (500, 600, 'poisson', 0.05): (1, 2, 3, 5, 10, 20, 100),
    (500, 600, 'poisson', 0.2): (1, 2, 3, 5, 10, 20, 93),
    (500, 600, 'zero_truncated_poisson', 0.01): (1, 2, 3, 5, 10, 20, 100),
    (500, 600, 'zero_truncated_poisson', 0.05): (1, 2, 3, 5, 10, 20, 100),
    (500, 600, 'zero_truncated_poisson', 0.2): (1, 2, 3, 5, 10, 20, 92),
    (100, 1000000, 'poisson', 0.01): (1, 2, 2, 2, 2, 2, 2),
    (100, 1000000, 'poisson', 0.05): (1, 2, 2, 2, 2, 2, 2),
    (100, 1000000, 'poisson', 0.2): (1, 2, 2, 2, 2, 2, 2),
    (100, 1000000, 'zero_truncated_poisson', 0.01): (1, 2, 2, 2, 2, 2, 2),
    (100, 1000000, 'zero_truncated_poisson', 0.05): (1, 2, 2, 2, 2, 2, 2),
    (100, 1000000, 'zero_truncated_poisson', 0.2): (1, 2, 2, 2, 2, 2, 2),
}

# How close to ARX: Zayatz and SNB compute the same formulas (SNB even the same Newton steps), so
# they agree to rounding (3e-14 at worst here). The Pitman fit follows ARX's Newton path too,
# but that path is sensitive to the last bits of ARX's digamma (Java's StrictMath vs the C
# library here) and stops anywhere within |dL| <= 1e-6: 2e-11 at worst on these inputs (adult3).
ARX_TOLERANCE = {"pitman": 1e-9, "zayatz": 1e-12, "snb": 1e-12}


def case_sizes(name, adult_rows):
    if name in SMALL:
        return expand(SMALL[name])
    qi, tenth = ADULT_CASES[name]
    return adult_sizes(adult_rows, qi, tenth)


@pytest.mark.parametrize("case", sorted(ARX_UNIQUENESS), ids=lambda c: f"{c[0]}-N{c[1]}")
def test_uniqueness_agrees_with_arx(case, adult_rows):
    name, big_n = case
    sizes = case_sizes(name, adult_rows)
    reference, dankar_model = ARX_UNIQUENESS[case]
    has_uniques = 1 in sizes
    for estimator, (value, available) in reference.items():
        got = pop.population_uniques(sizes, big_n, estimator)
        used = got.estimator if estimator == "dankar" else estimator
        assert rel(got.uniques, value) <= ARX_TOLERANCE.get(used, 0.0), (estimator, got, value)
        assert got.fraction == pytest.approx(value / big_n, rel=ARX_TOLERANCE.get(used, 1e-15), abs=0)
        if has_uniques and used in ("pitman", "snb"):
            assert got.converged is available
    assert pop.population_uniques(sizes, big_n, "dankar").estimator == dankar_model


@pytest.mark.parametrize("key", sorted(ARX_KMAP), ids=str)
def test_kmap_derived_k_agrees_with_arx(key):
    n, big_n, estimator, significance = key
    got = tuple(pop.kmap_derived_k(k, n, big_n, estimator, significance) for k in KMAP_K)
    assert got == ARX_KMAP[key]


def test_arx_default_significance():
    assert pop.KMAP_SIGNIFICANCE == 0.01
    assert pop.kmap_derived_k(100, 30162, 301620) == ARX_KMAP[(30162, 301620, "poisson", 0.01)][-1]


# ----------------------------------------------------------------------------------------------
# Zayatz: exact rational arithmetic


def zayatz_exact(sizes: list[int], big_n: int) -> Fraction:
    """Zayatz's estimate with every probability an exact fraction:
    P_k = k C(N-k, n-1) / C(N, n), P(pop. unique | sample unique) = c_1 P_1 / sum_k c_k P_k,
    estimate = c_1 P(pop. unique | sample unique) N / n."""
    n = sum(sizes)
    profile = collections.Counter(sizes)
    prob = {k: Fraction(k * math.comb(big_n - k, n - 1), math.comb(big_n, n)) for k in profile}
    conditional = profile[1] * prob[1] / sum(c * prob[k] for k, c in profile.items())
    return profile[1] * conditional * Fraction(big_n, n)


@pytest.mark.parametrize("sizes, big_n", [
    ([1, 1, 1, 2, 3], 8),          # f = 1: every sample unique is a population unique
    ([1, 1, 1, 2, 3], 20),
    ([1, 1, 1, 2, 3], 1000),
    (expand({1: 5, 2: 3, 3: 2, 5: 1}), 40),
    (expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}), 150),
    (expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}), 5000),
    ([1, 50], 60),                  # the class of 50 cannot give 1 record: P_50 = 0 (N - n + 1 = 10)
])
def test_zayatz_is_the_exact_formula(sizes, big_n):
    got = pop.population_uniques(sizes, big_n, "zayatz")
    assert rel(got.uniques, float(zayatz_exact(sizes, big_n))) <= 1e-12
    assert got.estimator == "zayatz" and got.converged is None


def test_zayatz_by_hand():
    # sizes 1, 1, 2 (n = 4) from N = 6: P_1 = 1 C(5, 3) / C(6, 4) = 10/15 = 2/3 (= n/N),
    # P_2 = 2 C(4, 3) / C(6, 4) = 8/15; P(unique | unique) = 2 (2/3) / (2 (2/3) + 8/15) = 5/7;
    # estimate = 2 (5/7) (6/4) = 15/7
    assert pop.population_uniques([1, 1, 2], 6, "zayatz").uniques == pytest.approx(15 / 7, rel=1e-14)


def test_zayatz_at_full_sampling_is_the_sample_uniques():
    sizes = [1] * 7 + [2] * 3 + [4]
    assert pop.population_uniques(sizes, sum(sizes), "zayatz").uniques == 7.0


@pytest.mark.parametrize("k, n, big_n", [
    (1, 30162, US_POPULATION), (2, 30162, US_POPULATION), (37, 30162, US_POPULATION),
    (500, 30162, 301620), (3, 3017, 30162), (5000, 30162, 40000), (1, 10, 10), (3, 10, 12),
])
def test_hypergeometric_one_against_a_product(k, n, big_n):
    """P(1 of a class of k | n of N) = k n / (N-n+1) * prod_{i=0}^{n-2} (N-k-i) / (N-i), the
    product summed as logs with math.fsum."""
    if k > big_n - n + 1:
        expected = 0.0
    else:
        log_p = math.fsum([math.log(k * n / (big_n - n + 1))]
                          + [math.log1p(-k / (big_n - i)) for i in range(n - 1)])
        expected = math.exp(log_p)
    assert rel(pop.hypergeometric_one(k, n, big_n), expected) <= 1e-11


@pytest.mark.parametrize("x, h", [(40.5, 3), (1e6, 7), (3.2e8, 30162), (3.2e8 - 30160, 12), (31.0, 1)])
def test_lgamma_diff_against_a_sum_of_logs(x, h):
    """ln Gamma(x) - ln Gamma(x - h) = sum_{i=1}^{h} ln(x - i) for whole h."""
    expected = math.fsum(math.log(x - i) for i in range(1, h + 1))
    assert rel(special.lgamma_diff(x, h), expected) <= 1e-13


def test_lgamma_diff_small_and_fractional():
    for x, h in [(1.5, 0.3), (12.0, 0.7), (29.9, -0.4), (45.0, 0.25), (1e5, 0.6)]:
        assert special.lgamma_diff(x, h) == pytest.approx(math.lgamma(x) - math.lgamma(x - h), rel=1e-9)


# ----------------------------------------------------------------------------------------------
# Pitman: the fit is a stationary point (a maximum) of the likelihood, computed here


def pitman_loglik(theta: float, alpha: float, sizes: list[int]) -> float:
    """ln of Pitman's sampling formula up to terms free of (theta, alpha):
    sum_{i<u} ln(theta + i alpha) - sum_{i<n} ln(theta + i) + sum_classes sum_{j<size} ln(j - alpha)."""
    u, n = len(sizes), sum(sizes)
    return math.fsum([math.log(theta + i * alpha) for i in range(1, u)]
                     + [-math.log(theta + i) for i in range(1, n)]
                     + [math.log(j - alpha) for k in sizes for j in range(1, k)])


def pitman_gradient(theta: float, alpha: float, sizes: list[int]) -> tuple[float, float]:
    u, n = len(sizes), sum(sizes)
    d_theta = math.fsum([1 / (theta + i * alpha) for i in range(1, u)]
                        + [-1 / (theta + i) for i in range(1, n)])
    d_alpha = math.fsum([i / (theta + i * alpha) for i in range(1, u)]
                        + [-1 / (j - alpha) for k in sizes for j in range(1, k)])
    return d_theta, d_alpha


PITMAN_PROFILES = [
    expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}),
    expand({1: 60, 2: 20, 3: 10, 5: 5, 12: 2, 40: 1}),
    expand({1: 200, 2: 90, 3: 40, 4: 25, 6: 10, 10: 4, 25: 2}),
]


@pytest.mark.parametrize("sizes", PITMAN_PROFILES, ids=lambda s: f"n{sum(s)}")
def test_pitman_fit_is_a_likelihood_maximum(sizes):
    theta, alpha, converged = pop.fit_pitman(sizes)
    assert converged and theta >= 0
    g_theta, g_alpha = pitman_gradient(theta, alpha, sizes)
    assert abs(g_theta) <= 1e-6 and abs(g_alpha) <= 1e-6  # ARX's accuracy
    best = pitman_loglik(theta, alpha, sizes)
    for dt, da in [(1e-3, 0), (-1e-3, 0), (0, 1e-4), (0, -1e-4), (1e-3, 1e-4), (-1e-3, -1e-4)]:
        assert pitman_loglik(theta * (1 + dt), alpha + da, sizes) < best


def test_pitman_estimate_is_hoshinos_formula():
    sizes = PITMAN_PROFILES[0]
    got = pop.population_uniques(sizes, 1000, "pitman")
    theta, alpha = got.parameters
    expected = math.exp(math.lgamma(theta + 1) - math.lgamma(theta + alpha)) * 1000 ** alpha
    assert got.converged and rel(got.uniques, expected) <= 1e-12
    assert got.fraction == got.uniques / 1000


def test_pitman_on_adult_is_a_stationary_point(adult_rows):
    sizes = adult_sizes(adult_rows, QI8)
    got = pop.population_uniques(sizes, 301620, "pitman")
    theta, alpha = got.parameters
    g_theta, g_alpha = pitman_gradient(theta, alpha, sizes)
    assert abs(g_theta) <= 1e-6 and abs(g_alpha) <= 1e-6
    expected = math.exp(math.lgamma(theta + 1) - math.lgamma(theta + alpha)) * 301620 ** alpha
    assert rel(got.uniques, expected) <= 1e-10


def test_pitman_fit_far_out_is_not_available():
    """ARX's closed-form Newton path (approximate trigamma in the Jacobian) can end where theta is
    in the billions and both derivatives are below 1e-6 without a maximum; the estimate there is
    outside [0, N]: 'not available', as ARX reports for this profile (ARX_UNIQUENESS snb_b)."""
    sizes = expand(SMALL["snb_b"])
    theta, alpha, converged = pop.fit_pitman(sizes)
    assert converged and theta > 1e9
    assert max(map(abs, pitman_gradient(theta, alpha, sizes))) <= 1e-6
    got = pop.population_uniques(sizes, 75, "pitman")
    assert got.uniques == 0.0 and got.converged is False


def test_pitman_fit_that_leaves_the_range_is_not_available():
    # two sample uniques and nothing else: the likelihood grows without bound as theta -> inf,
    # the "fit" ends far out with alpha < 0 and the estimate leaves [0, N]: ARX reports 0
    got = pop.population_uniques([1, 1], 100, "pitman")
    assert got.uniques == 0.0 and got.converged is False


# ----------------------------------------------------------------------------------------------
# SNB: ARX's estimate of K and ARX's moment equations, written out here


def snb_k_reference(sizes: list[int], big_n: int) -> float:
    """u + c_1 (A/B) (C/D)^2 with ARX's B = sum over distinct sizes of ((1-f)^k c_k (1+f)^k - 1)."""
    n, profile = sum(sizes), collections.Counter(sizes)
    f = n / big_n
    a = sum(k * f * f * (1 - f * f) ** (k - 1) * c for k, c in profile.items())
    b = sum((1 - f) ** k * c * (1 + f) ** k - 1 for k, c in profile.items())
    c_ = sum((1 - f) ** k * c for k, c in profile.items())
    d = sum(k * f * (1 - f) ** (k - 1) * c for k, c in profile.items())
    return len(sizes) + profile[1] * (a / b) * (c_ / d) ** 2


def snb_equations(alpha, beta, big_k, f, c1, c2):
    """ARX's two equations: E[c_1] - c_1 and ARX's E[c_2] (with q^(alpha+2)) - c_2."""
    d = (1 - f) * (1 - beta)
    q = 1 - d
    e1 = big_k * f * (beta / q) ** alpha * (1 + alpha * d / q)
    e2 = big_k * alpha * beta ** alpha * f * f * (1 - beta) / 2 * q ** (alpha + 2) * (2 - (1 - alpha) * d)
    return e1 - c1, e2 - c2


@pytest.mark.parametrize("sizes, big_n", [
    (expand({1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1}), 42),
    (expand({1: 8, 2: 5, 3: 3, 4: 3, 5: 1, 8: 3}), 75),
])
def test_snb_solves_arxs_equations(sizes, big_n):
    got = pop.population_uniques(sizes, big_n, "snb")
    assert got.converged
    alpha, beta = got.parameters
    big_k = snb_k_reference(sizes, big_n)
    profile = collections.Counter(sizes)
    r1, r2 = snb_equations(alpha, beta, big_k, sum(sizes) / big_n, profile[1], profile[2])
    assert abs(r1) <= 1e-6 and abs(r2) <= 1e-6
    assert rel(got.uniques, big_k * beta ** alpha) <= 1e-12


@pytest.mark.parametrize("sizes, big_n", [
    (expand({1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1}), 42),
    (expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}), 150),
    ([1, 1, 2, 3], 4 * 7),
])
def test_snb_classes_is_arxs_estimate(sizes, big_n):
    assert rel(pop.snb_classes(pop._profile(sizes), big_n), snb_k_reference(sizes, big_n)) <= 1e-13


def test_snb_expectations_by_brute_force():
    """The docstring's model: population class size 1 + G, G ~ NegBin(alpha, beta), records kept
    with probability f. E[c_1] / K and E[c_2] / K summed over G directly match the closed forms
    with q^-(alpha+2); ARX's second equation (q^+(alpha+2)) is a different function."""
    alpha, beta, f = 1.7, 0.35, 0.3
    d = (1 - f) * (1 - beta)
    q = 1 - d
    p1 = p2 = 0.0
    for g in range(2000):
        pg = math.exp(math.lgamma(alpha + g) - math.lgamma(alpha) - math.lgamma(g + 1)
                      + alpha * math.log(beta) + g * math.log(1 - beta))
        size = g + 1
        p1 += pg * scipy.stats.binom.pmf(1, size, f)
        p2 += pg * scipy.stats.binom.pmf(2, size, f)
    e1 = f * (beta / q) ** alpha * (1 + alpha * d / q)
    e2 = f * f / 2 * alpha * beta ** alpha * (1 - beta) * q ** -(alpha + 2) * (2 - (1 - alpha) * d)
    arx_e2 = f * f / 2 * alpha * beta ** alpha * (1 - beta) * q ** (alpha + 2) * (2 - (1 - alpha) * d)
    assert p1 == pytest.approx(e1, rel=1e-12)
    assert p2 == pytest.approx(e2, rel=1e-12)
    assert abs(arx_e2 - p2) > 0.1 * p2


# ----------------------------------------------------------------------------------------------
# Dankar's rule, no uniques, bad input


@pytest.mark.parametrize("sizes, big_n", [
    (expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}), 1000),    # f = 0.1: Pitman
    (expand({1: 30, 2: 12, 3: 6, 4: 3, 7: 1, 9: 1}), 999),     # f > 0.1, SNB fails: Zayatz
    (expand({1: 5, 2: 3, 3: 2, 5: 1}), 5000),                  # f <= 0.1, Pitman fails: Zayatz
    (expand({1: 4, 2: 3, 3: 1, 4: 1, 5: 3, 8: 1}), 42),        # f > 0.1: min(Zayatz, SNB) = SNB
])
def test_dankar_rule(sizes, big_n):
    each = {e: pop.population_uniques(sizes, big_n, e) for e in ("pitman", "zayatz", "snb")}
    got = pop.population_uniques(sizes, big_n, "dankar")
    if sum(sizes) / big_n <= 0.1:
        expected = "pitman" if each["pitman"].converged else "zayatz"
    elif not each["snb"].converged:
        expected = "zayatz"
    else:
        expected = "zayatz" if each["zayatz"].uniques < each["snb"].uniques else "snb"
    assert got.estimator == expected
    assert got.uniques == each[expected].uniques and got.converged == each[expected].converged


@pytest.mark.parametrize("estimator", pop.ESTIMATORS)
def test_no_sample_uniques_no_population_uniques(estimator):
    got = pop.population_uniques([2, 3, 2, 7], 1000, estimator)
    assert (got.uniques, got.fraction, got.estimator, got.converged) == (0.0, 0.0, estimator, None)


def test_bad_input_one_line_each():
    cases = [
        (lambda: pop.population_uniques([1, 2, 3], 5, "pitman"), "smaller than the sample"),
        (lambda: pop.population_uniques([1, 2], 10, "poisson"), "known estimators: pitman, zayatz, snb, dankar"),
        (lambda: pop.population_uniques([], 10, "zayatz"), "empty"),
        (lambda: pop.population_uniques([1, 0], 10, "zayatz"), "at least 1"),
        (lambda: pop.population_uniques([1, 2], 10.5, "zayatz"), "whole number"),
        (lambda: pop.kmap_derived_k(5, 100, 1000, "poisson", 0.0), "strictly between 0 and 1"),
        (lambda: pop.kmap_derived_k(5, 100, 1000, "poisson", 1.0), "strictly between 0 and 1"),
        (lambda: pop.kmap_derived_k(5, 100, 99), "smaller than the sample"),
        (lambda: pop.kmap_derived_k(5, 0, 99), "empty"),
        (lambda: pop.kmap_derived_k(5, 100, 1000, "pitman"), "poisson, zero_truncated_poisson"),
    ]
    for call, words in cases:
        with pytest.raises(AnonymizeError) as err:
            call()
        message = str(err.value)
        assert words in message and "\n" not in message


def test_messages_quote_no_values():
    with pytest.raises(AnonymizeError) as err:
        pop.population_uniques([1, 2, 3], 5, "pitman")
    assert "5" not in str(err.value) and "6" not in str(err.value)


# ----------------------------------------------------------------------------------------------
# k-map: against scipy.stats.poisson


def kmap_reference(k: int, n: int, big_n: int, estimator: str, significance: float) -> int:
    """ARX's rule restated: Poisson, j* = least j >= 0 with CDF(j) >= 1 - s, k' = j* + 2;
    zero-truncated, j* = least j >= 1 with (CDF(j) - P(0)) / (1 - P(0)) >= 1 - s, k' = j* + 1;
    then min(k', k, n)."""
    lam = n / big_n * k
    dist = scipy.stats.poisson(lam)
    if estimator == "poisson":
        j = 0
        while dist.cdf(j) < 1 - significance and j < k:
            j += 1
        derived = j + 2
    else:
        p0 = dist.pmf(0)
        j = 1
        while (dist.cdf(j) - p0) / (1 - p0) < 1 - significance and j < k:
            j += 1
        derived = j + 1
    return min(derived, k, n)


@settings(max_examples=examples(150), deadline=None)
@given(k=st.integers(1, 300), n=st.integers(1, 5000), extra=st.integers(0, 10**6),
       estimator=st.sampled_from(pop.KMAP_ESTIMATORS),
       significance=st.sampled_from([0.001, 0.01, 0.05, 0.1, 0.2, 0.5]))
def test_kmap_derived_k_against_scipy(k, n, extra, estimator, significance):
    big_n = n + extra
    assert pop.kmap_derived_k(k, n, big_n, estimator, significance) == \
        kmap_reference(k, n, big_n, estimator, significance)


def test_kmap_derived_k_by_hand():
    # n / N = 1/10, k = 10: lambda = 1. Poisson CDF: 0.3679, 0.7358, 0.9197, 0.9810, 0.9963;
    # significance 0.05 -> j* = 3 -> k' = 5; ZTP CDF (P(j) / 0.6321): 0.5820, 0.8730, 0.9700 ->
    # j* = 3 -> k' = 4
    assert pop.kmap_derived_k(10, 100, 1000, "poisson", 0.05) == 5
    assert pop.kmap_derived_k(10, 100, 1000, "zero_truncated_poisson", 0.05) == 4
    # capped by n and by k
    assert pop.kmap_derived_k(10, 3, 3, "poisson", 0.01) == 3
    assert pop.kmap_derived_k(4, 1000, 1000, "poisson", 0.01) == 4


@settings(max_examples=60, deadline=None)
@given(profile=st.dictionaries(st.integers(1, 12), st.integers(1, 15), min_size=1, max_size=6),
       factor=st.sampled_from([1.0, 1.05, 1.5, 3.0, 9.5, 10.0, 11.0, 100.0, 1e4]))
def test_estimates_are_finite_and_in_range(profile, factor):
    sizes = expand(profile)
    n = sum(sizes)
    big_n = max(n, int(n * factor))
    for estimator in pop.ESTIMATORS:
        got = pop.population_uniques(sizes, big_n, estimator)
        assert np.isfinite(got.uniques) and got.fraction == got.uniques / big_n
        if got.estimator in ("zayatz", "pitman"):  # Zayatz: at most c_1 / f; Pitman: in [0, N]
            assert 0 <= got.uniques <= big_n


# ----------------------------------------------------------------------------------------------
# ARX's digamma and trigamma


@pytest.mark.parametrize("x", [1e-7, 0.3, 1.0, 2.5, 7.9, 11.99, 12.0, 40.0, 1e5, -0.5, -3.7, -250.25])
def test_digamma_arx_is_digamma(x):
    import scipy.special
    assert special.digamma_arx(x) == pytest.approx(scipy.special.digamma(x), rel=1e-12, abs=1e-13)


def test_trigamma_arx_reproduces_arxs_truncation():
    import scipy.special
    for x in (12.0, 12.5, 30.0, 1e4):       # exact from 12 on
        assert special.trigamma_arx(x) == pytest.approx(scipy.special.polygamma(1, x), rel=1e-12)
    for x in (8.0, 9.5, 11.99):             # no shift, no series: 0
        assert special.trigamma_arx(x) == 0.0
    for x in (0.5, 3.0, 7.25):              # only the shift to [8, 9)
        steps = math.ceil(8 - x)
        assert special.trigamma_arx(x) == pytest.approx(sum(1 / (x + i) ** 2 for i in range(steps)), rel=1e-14)
        assert special.trigamma_arx(x) < scipy.special.polygamma(1, x)
