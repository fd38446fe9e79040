"""The fast paths of duckanon/solver/population.py and special.py give the very values of the plain
definitions.

The estimators are computed from arrays (psi and psi' at every class size at once, the Zayatz
probabilities of every size at once, a class-size profile instead of the list of sizes, a Newton
loop that stops a try once its path repeats a point). They are meant to give the same numbers bit
for bit, so that every accept/reject decision of the lattice search stays the same. The
references below are written here, one number at a time, from the formulas the module documents
(the operations in the order its docstrings and comments give them): ARX's digamma and trigamma
(risk/Gamma.java as `digamma_arx` / `trigamma_arx` describe it), the closed-form Pitman equations
(`_pitman_closed_system`), ARX's Newton-Raphson (`_newton`, without the shortcut), the exact
Pitman equations (`_pitman_system`), the hypergeometric probability (`hypergeometric_one`) and
Dankar's rule (`population_uniques`) and the SNB equations (`_snb_system`). Unchanged parts
(Pitman's start value, Hoshino's estimate, the SNB estimate of K) are the module's own.
"""

from __future__ import annotations

import collections
import csv
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from duckanon.solver import population as pop
from duckanon.solver import special
from duckanon.solver.lattice import Lattice
from duckanon.solver.models import PopulationUniqueness

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "adult.csv"
EULER = 0.57721566490153286061
ZETA2 = math.pi * math.pi / 6
ZETA3 = 1.2020569031595942854


def same(a, b) -> bool:
    """Bit for bit (NaN equal to NaN, 0.0 apart from -0.0)."""
    a, b = np.float64(a), np.float64(b)
    return (math.isnan(a) and math.isnan(b)) or a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------------------------
# references, one number at a time


def ref_digamma(x: float) -> float:
    """ARX's digamma: reflection below 0, Taylor near 0, below 12 the sum of 1 / (x + i) over the
    ceil(12 - x) steps to 12, then ln y - 1/(2y) - r2 (1/12 - r2 (1/120 - r2 (1/252 - r2 (1/240
    - r2 (1/132))))) at the shifted y, r2 = 1 / y^2."""
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return -math.inf
    if x < 0:
        return ref_digamma(1 - x) + math.pi / math.tan(-math.pi * x)
    if x <= 1e-6:
        return -EULER - 1 / x + ZETA2 * x
    shift, steps = 0.0, 0
    if x < 12:
        steps = math.ceil(12 - x)
        for i in range(steps):
            shift += 1.0 / (x + i)
    y = x + steps
    r = 1.0 / y
    r2 = r * r
    tail = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return (-shift + (math.log(y) - 0.5 * r)) - tail


def ref_trigamma(x: float) -> float:
    """ARX's trigamma: below 8 the sum of 1 / (x + i)^2 over the ceil(8 - x) steps to 8 alone; the
    series 0.5 r + (1 + r (1/6 + r (-1/30 + r (1/42 + r (-1/30 + r 5/66))))) / y, r = 1 / y^2,
    only from y = 12 on."""
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return -math.inf
    if x < 0:
        r = math.pi / math.sin(-math.pi * x)
        return -ref_trigamma(1 - x) + r * r
    if x <= 1e-4:
        return 1 / (x * x) + ZETA2 - 2 * ZETA3 * x
    value, steps = 0.0, 0
    if x < 8:
        steps = math.ceil(8 - x)
        for i in range(steps):
            value += 1.0 / ((x + i) * (x + i))
    y = x + steps
    if y >= 12:
        r = 1.0 / (y * y)
        value += 0.5 * r + (1 + r * (1 / 6 + r * (-1 / 30 + r * (1 / 42 + r * (-1 / 30 + r * (5 / 66)))))) / y
    return value


def ref_closed(profile: dict[int, int]):
    """The closed-form Pitman equations and Hessian at (theta, alpha), s = theta / alpha, in
    numpy float64 scalars, the sums over the sizes > 1 ascending, from 0.0:
    o1 = (psi(s + u) - psi(s + 1)) / a, d1 = (psi'(s + 1) - psi'(s + u)) / a^2,
    o3 = ((u - 1) a - t (psi(s + u) - psi(s + 1))) / a^2, d5 = (o1 - t d1) / a,
    d3 = ((u - 1) - 2 t o1 + t^2 d1) / a^2, o2 = psi(n + t) - psi(t + 1),
    d2 = psi'(t + 1) - psi'(n + t), o4 = sum c (psi(k - a) - psi(1 - a)),
    d4 = sum c (psi'(1 - a) - psi'(k - a)); returns (o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4)."""
    u = np.float64(sum(profile.values()))
    n = np.float64(sum(k * c for k, c in profile.items()))
    others = [(float(k), np.float64(c)) for k, c in sorted(profile.items()) if k != 1]

    def evaluate(t, a):
        with np.errstate(all="ignore"):
            t, a = np.float64(t), np.float64(a)
            s = t / a
            psi_u = ref_digamma(float(((u - 1) + s) + 1))
            psi_1 = ref_digamma(float(s + 1))
            tri_u = ref_trigamma(float(((a + t) + a * (u - 1)) / a))
            tri_1 = ref_trigamma(float(s + 1))
            a2 = a * a
            o1 = (psi_u - psi_1) / a
            d1 = (tri_1 - tri_u) / a2
            o3 = ((u - 1) * a - t * (psi_u - psi_1)) / a2
            d5 = (o1 - t * d1) / a
            d3 = ((u - 1) - 2 * t * o1 + t * t * d1) / a2
            o2 = np.float64(ref_digamma(float(n + t))) - ref_digamma(float(t + 1))
            d2 = np.float64(ref_trigamma(float(t + 1))) - ref_trigamma(float(n + t))
            psi_a, tri_a = ref_digamma(float(1 - a)), ref_trigamma(float(1 - a))
            o4 = d4 = np.float64(0.0)
            for k, c in others:
                o4 += c * (ref_digamma(float(k - a)) - psi_a)
                d4 += c * (tri_a - ref_trigamma(float(k - a)))
            return o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4

    return evaluate


def ref_exact(profile: dict[int, int]):
    """The exact Pitman equations by their finite sums (numpy's sums, as documented):
    dL/dt = sum_{i<u} 1 / (t + i a) - sum_{i<n} 1 / (t + i),
    dL/da = sum_{i<u} i / (t + i a) - sum_{j<max size} m_j / (j - a), m_j the classes larger than j;
    and the Hessian."""
    u = sum(profile.values())
    n = sum(k * c for k, c in profile.items())
    top = max(profile)
    i_u = np.arange(1, u, dtype=np.float64)
    i_n = np.arange(1, n, dtype=np.float64)
    j = np.arange(1, top, dtype=np.float64)
    m = np.array([sum(c for k, c in profile.items() if k > jj) for jj in range(1, top)], dtype=np.float64)

    def evaluate(t, a):
        with np.errstate(all="ignore"):
            inv_v = 1.0 / (t + i_u * a)
            w = 1.0 / (t + i_n)
            z = 1.0 / (j - a)
            g1 = np.sum(inv_v) - np.sum(w)
            g2 = np.sum(i_u * inv_v) - np.sum(m * z)
            inv_v2 = inv_v * inv_v
            h11 = np.sum(w * w) - np.sum(inv_v2)
            h12 = -np.sum(i_u * inv_v2)
            h22 = -np.sum(i_u * i_u * inv_v2) - np.sum(m * z * z)
            return g1, g2, h11, h12, h12, h22

    return evaluate


def ref_newton(evaluate, start, constraint=None):
    """ARX's NewtonRaphson2D as `_newton` describes it, step by step, every try to its end."""
    starts = (start, *pop.START_VALUES)
    with np.errstate(all="ignore"):
        for attempt, (x0, y0) in enumerate(starts):
            x, y = np.float64(x0), np.float64(y0)
            steps = 0
            while True:
                f1, f2, j11, j12, j21, j22 = evaluate(x, y)
                if abs(f1) <= pop.ACCURACY and abs(f2) <= pop.ACCURACY:
                    return float(x), float(y), True
                inv = np.float64(1.0) / (np.float64(j11) * j22 - np.float64(j12) * j21)
                x = x - ((j22 * inv) * f1 + (-j12 * inv) * f2)
                y = y - ((-j21 * inv) * f1 + (j11 * inv) * f2)
                if attempt == len(starts) - 1:
                    return math.nan, math.nan, False
                if constraint is not None and not constraint(x, y):
                    break
                if math.isnan(x) or math.isnan(y) or steps >= pop.ITERATIONS_PER_TRY:
                    break
                steps += 1
    return math.nan, math.nan, False


def ref_snb_system(big_k, f, c1, c2):
    """ARX's SNB equations and Jacobian (Chen & Keller-McNulty, as `_snb_system` documents them:
    d = (1 - f)(1 - b), q = 1 - d, E[c_1] = K f (b / q)^a (a d / q + 1), ARX's
    E[c_2] = K a b^a f^2 (1 - b) / 2 q^(a + 2) (2 - (1 - a) d), and the Jacobian of the
    equations with q^-(a + 2)), in numpy float64 scalars."""
    def evaluate(a, b):
        a, b = np.float64(a), np.float64(b)
        with np.errstate(all="ignore"):
            d = (1 - f) * (1 - b)
            q = 1 - d
            r = b / q
            ra = r ** a
            e1 = big_k * f * ra * (a * d / q + 1)
            ba = b ** a
            w = 2 - (1 - a) * d
            g2 = big_k * a * ba * (f * f) * (1 - b) / 2 * q ** (a + 2) * w
            j11 = big_k * f * ra * ((1 + a * d / q) * np.log(r) + d / q)
            j12 = big_k * f * ra * (a * (1 / b - (1 - f) / q) * (1 + a * d / q) - a * (1 - f) / (q * q))
            s = big_k * f * f / 2
            qa2 = q ** (-(a + 2))
            j21 = s * (ba * (1 - b) * qa2 * w * (1 + a * np.log(b) - a * np.log(q)) + a * ba * (1 - b) * qa2 * d)
            j22 = s * (a * a * b ** (a - 1) * (1 - b) * qa2 * w - a * ba * qa2 * w
                       - a * (a + 2) * (1 - f) * ba * (1 - b) * q ** (-(a + 3)) * w
                       + a * (1 - a) * (1 - f) * ba * (1 - b) * qa2)
            return e1 - c1, g2 - c2, j11, j12, j21, j22

    return evaluate


def ref_fit_pitman(profile):
    p = pop.profile_of_counts(np.array(sorted(profile)), np.array([profile[k] for k in sorted(profile)]))
    start = pop.pitman_start(p)
    exact = ref_exact(profile)
    theta_ok = lambda t, a: t >= 0  # noqa: E731
    t, a, ok = ref_newton(ref_closed(profile), start, theta_ok)
    if ok:
        g1, g2 = exact(np.float64(t), np.float64(a))[:2]
        if abs(g1) <= pop.ACCURACY and abs(g2) <= pop.ACCURACY:
            return t, a, True
    return ref_newton(exact, start, theta_ok)


def ref_lgamma_diff(x: int, h: int) -> float:
    y = x - h
    if min(x, y) >= 30:
        def tail(z):
            z2 = z * z
            return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1 / (1188 * z2)) / z2) / z2) / z2) / z
        return -(y - 0.5) * math.log1p(-h / x) + h * math.log(x) - h + (tail(x) - tail(y))
    return math.lgamma(x) - math.lgamma(y)


def ref_hypergeometric_one(k: int, n: int, big_n: int) -> float:
    """k C(N-k, n-1) / C(N, n) = exp(ln k + ln n - ln(N - n + 1) + lnG(N-n+2, k) - lnG(N+1, k))."""
    if k > big_n - n + 1:
        return 0.0
    if k == 1:
        return n / big_n
    return math.exp(math.log(k) + math.log(n) - math.log(big_n - n + 1)
                    + ref_lgamma_diff(big_n - n + 2, k) - ref_lgamma_diff(big_n + 1, k))


def ref_estimate(profile: dict[int, int], big_n: int, estimator: str) -> tuple:
    """(uniques, fraction, estimator, converged, parameters) by Dankar's rule and the estimators,
    as `population_uniques` documents them."""
    sizes = sorted(profile)
    counts = [profile[k] for k in sizes]
    n = sum(k * c for k, c in profile.items())
    c1 = profile.get(1, 0)

    def result(value, name, converged=None, parameters=None):
        return (value, value / big_n, name, converged, parameters)

    if c1 == 0:
        return result(0.0, estimator)
    valid = lambda v: not math.isnan(v) and v != 0  # noqa: E731

    def pitman():
        t, a, ok = ref_fit_pitman(profile)
        value = pop.pitman_uniques(t, a, big_n) if ok else math.nan
        return result(value if valid(value) else 0.0, "pitman", ok and valid(value), (t, a))

    def zayatz():
        probs = np.array([ref_hypergeometric_one(k, n, big_n) for k in sizes])
        denominator = float(np.sum(np.array(counts, dtype=np.int64) * probs))
        value = c1 * (c1 * (n / big_n) / denominator) / (n / big_n)
        return result(value if valid(value) else 0.0, "zayatz")

    def snb():
        p = pop.profile_of_counts(np.array(sizes), np.array(counts))
        big_k = pop.snb_classes(p, big_n)
        f = np.float64(n) / np.float64(big_n)
        a, b, ok = ref_newton(ref_snb_system(np.float64(big_k), f, np.float64(c1), np.float64(profile.get(2, 0))),
                              (1.0, 1.0))
        with np.errstate(all="ignore"):
            value = float(np.float64(big_k) * np.power(np.float64(b), np.float64(a)))
        return result(value if valid(value) else 0.0, "snb", ok and valid(value), (a, b))

    if estimator == "pitman":
        return pitman()
    if estimator == "zayatz":
        return zayatz()
    if estimator == "snb":
        return snb()
    if n / big_n <= pop.DANKAR_SAMPLING_FRACTION:
        chosen = pitman()
        return chosen if chosen[3] else zayatz()
    by_snb, by_zayatz = snb(), zayatz()
    if not by_snb[3]:
        return by_zayatz
    return by_zayatz if by_zayatz[0] < by_snb[0] else by_snb


def same_estimate(got: pop.UniquenessEstimate, want: tuple) -> bool:
    value, fraction, name, converged, parameters = want
    if not (same(got.uniques, value) and same(got.fraction, fraction) and got.estimator == name
            and got.converged == converged):
        return False
    if parameters is None or got.parameters is None:
        return parameters is got.parameters
    return all(same(x, y) for x, y in zip(got.parameters, parameters))


def random_profile(rng, kind: int) -> dict[int, int]:
    """A class-size histogram {size: classes}: mostly small classes, a long tail, or a few sizes."""
    if kind == 0:
        sizes = rng.geometric(rng.uniform(0.1, 0.9), rng.integers(1, 300))
    elif kind == 1:
        sizes = np.concatenate([np.ones(rng.integers(1, 200), dtype=np.int64),
                                rng.integers(1, 2000, rng.integers(1, 60))])
    else:
        sizes = rng.integers(1, 25, rng.integers(1, 80))
    return dict(collections.Counter(sizes.tolist()))


# ----------------------------------------------------------------------------------------------
# the array functions


def test_the_references_are_the_modules_scalar_functions():
    rng = np.random.default_rng(1)
    for x in np.concatenate([rng.uniform(-20, 40, 500), [0.0, 1e-7, 5e-5, 8.0, 12.0, np.nan, np.inf]]).tolist():
        assert same(ref_digamma(x), special.digamma_arx(x)) and same(ref_trigamma(x), special.trigamma_arx(x))


@pytest.mark.parametrize("seed", range(6))
def test_polygamma_arrays_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    pieces = [rng.uniform(1.0001e-4, 8, 40), rng.uniform(8, 12, 20), rng.uniform(12, 5000, 60),
              np.arange(2, 30) - rng.uniform(-0.5, 1.0), [8.0, 12.0, np.nextafter(8.0, 0), np.nextafter(12.0, 0)]]
    everything = np.sort(np.concatenate(pieces))
    for x in (everything, everything[everything >= 12], everything[everything < 12], everything[:1],
              np.array([1e-5, 3.0, 40.0]), np.array([-2.5, 4.0]), np.array([2.0, np.inf]), np.array([np.nan])):
        m = len(x)
        got = special.polygamma_arrays(m)(x)
        assert all(same(g, ref_digamma(v)) for g, v in zip(got[:m].tolist(), x.tolist()))
        assert all(same(g, ref_trigamma(v)) for g, v in zip(got[m:].tolist(), x.tolist()))


def test_polygamma_arrays_on_many_arguments():
    """Enough arguments that a logarithm off by the last bit would show (numpy's log differs from
    the C library's on about 1 in 1,500 arguments in [1, 13) on some machines)."""
    rng = np.random.default_rng(99)
    x = np.sort(np.concatenate([rng.uniform(1.0001e-4, 13, 60_000), rng.uniform(13, 1e5, 20_000)]))
    got = special.polygamma_arrays(len(x))(x)
    psi = np.array([ref_digamma(v) for v in x.tolist()])
    tri = np.array([ref_trigamma(v) for v in x.tolist()])
    assert np.array_equal(got[:len(x)].view(np.int64), psi.view(np.int64))
    assert np.array_equal(got[len(x):].view(np.int64), tri.view(np.int64))


@pytest.mark.parametrize("seed", range(8))
def test_closed_pitman_system_bit_for_bit(seed):
    rng = np.random.default_rng(100 + seed)
    profile = random_profile(rng, seed % 3)
    p = pop.profile_of_counts(np.array(sorted(profile)), np.array([profile[k] for k in sorted(profile)]))
    fast, reference = pop._pitman_closed_system(p), ref_closed(profile)
    points = [(rng.uniform(0, 800), rng.uniform(-2.5, 1.2)) for _ in range(25)]
    points += [(rng.uniform(0, 30), 1 - 10.0 ** rng.uniform(-8, -1)) for _ in range(10)]
    points += [(0.0, 0.0), (5.0, 0.0), (5.0, -0.0), (0.0, 0.33), (1e9, 0.3), (10.0, 1e-200), (3.0, 0.99999),
               (10.0, 1.0), (10.0, 2.0), (10.0, 14.5), (np.nan, 0.2), (2.0, np.nan), (np.inf, 0.5), (5.0, -np.inf)]
    with np.errstate(all="ignore"):
        for t, a in points:
            got, want = fast(t, a), reference(t, a)
            assert all(same(g, w) for g, w in zip(got, want)), (profile, t, a, got, want)


def test_snb_system_bit_for_bit():
    """Python floats where they round as numpy does, numpy where a base is negative, a division
    by zero or an overflow would raise."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        big_k, f = np.float64(rng.uniform(1, 1e5)), np.float64(rng.uniform(0.001, 1))
        c1, c2 = np.float64(rng.integers(0, 1000)), np.float64(rng.integers(0, 500))
        fast, reference = pop._snb_system(big_k, f, c1, c2), ref_snb_system(big_k, f, c1, c2)
        points = [(rng.uniform(-5, 5), rng.uniform(-0.5, 1.5)) for _ in range(30)]
        points += [(0.0, 0.0), (1.0, 0.0), (-1.0, 0.0), (0.5, 1.0), (np.inf, 0.5), (0.5, np.nan), (1e300, 0.5),
                   (-1e300, 0.5), (700.0, 1e-300), (2.0, 1e-320)]
        with np.errstate(all="ignore"):
            for a, b in points:
                got, want = fast(a, b), reference(a, b)
                assert all(same(g, w) for g, w in zip(got, want)), (a, b, got, want)


def test_hypergeometric_ones_bit_for_bit():
    rng = np.random.default_rng(7)
    for _ in range(300):
        big_n = int(rng.choice([35, 100, 2_000, 30_162, 301_620, 2_699_999, 2_700_000, 318_900_000]))
        n = int(rng.integers(1, big_n + 1))
        sizes = np.unique(np.concatenate([[1, 2], rng.integers(1, max(3, min(big_n, 4 * (big_n - n) + 40)), 30)]))
        got = pop._hypergeometric_ones(sizes, n, big_n)
        assert all(same(g, ref_hypergeometric_one(int(k), n, big_n)) for g, k in zip(got.tolist(), sizes))


def test_profile_of_counts_is_the_profile_of_the_sizes():
    rng = np.random.default_rng(3)
    for kind in (0, 1, 2, 0, 1, 2):
        profile = random_profile(rng, kind)
        sizes = [k for k, c in profile.items() for _ in range(c)]
        a = pop._profile(sizes)
        b = pop.profile_of_counts(np.array(sorted(profile)), np.array([profile[k] for k in sorted(profile)]))
        assert (a.sizes.tolist(), a.counts.tolist(), a.n, a.u, a.c1, a.c2) == \
               (b.sizes.tolist(), b.counts.tolist(), b.n, b.u, b.c1, b.c2)


# ----------------------------------------------------------------------------------------------
# Newton: a path that repeats a point ends its try as the full try would


def test_newton_cycle_shortcut_keeps_the_outcome():
    def fixed_point(x, y):  # F never small, the step rounds to nothing from (3, 3) on
        return 1.0, 1.0, 1e300, 0.0, 0.0, 1e300

    def two_cycle(x, y):  # steps of -1 and +1 in x: 0.25 -> 1.25 -> 0.25 ...
        f = 1.0 if x < 1 else -1.0
        return f, 1.0 if y < 1 else -1.0, -1.0, 0.0, 0.0, -1.0

    def converges_late(x, y):  # plain Newton on x^2 = 2, y^2 = 3
        return x * x - 2, y * y - 3, 2 * x, 0.0, 0.0, 2 * y

    for function, start in ((fixed_point, (3.0, 3.0)), (two_cycle, (0.25, 0.25)), (converges_late, (5.0, 5.0)),
                            (fixed_point, (np.nan, 1.0))):
        for floats in (False, True):
            got, want = pop._newton(function, start, floats=floats), ref_newton(function, start)
            assert all(same(g, w) for g, w in zip(got, want)), (function.__name__, got, want)


# ----------------------------------------------------------------------------------------------
# the estimates


@pytest.mark.parametrize("seed", range(12))
def test_estimates_bit_for_bit_on_random_histograms(seed):
    rng = np.random.default_rng(1000 + seed)
    profile = random_profile(rng, seed % 3)
    sizes = np.array(sorted(profile))
    counts = np.array([profile[k] for k in sizes])
    n = int(np.dot(sizes, counts))
    for big_n in (n, int(n * 1.5) + 1, 10 * n, 12 * n, 318_900_000):
        for estimator in pop.ESTIMATORS:
            want = ref_estimate(profile, big_n, estimator)
            listed = [int(k) for k, c in zip(sizes, counts) for _ in range(c)]
            assert same_estimate(pop.population_uniques(listed, big_n, estimator), want), (profile, big_n, estimator)
            assert same_estimate(pop.population_uniques_of_profile(sizes, counts, big_n, estimator), want)


def adult_profile(qi: list[str]) -> dict[int, int]:
    with open(ADULT, newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    idx = [rows[0].index(c) for c in qi]
    sizes = collections.Counter(tuple(r[i] for i in idx) for r in rows[1:]).values()
    return dict(collections.Counter(sizes))


@pytest.mark.skipif(not ADULT.exists(), reason="../shared/data/adult is not available")
def test_estimates_bit_for_bit_on_adult():
    """Adult's class profiles on a few QI sets, with the smallest classes removed as the lattice's
    removal search does, at N = 10 n (Dankar's rule picks Pitman) and 1.5 n (min(Zayatz, SNB))."""
    for qi in (["sex", "age", "race", "marital-status"],
               ["sex", "race", "marital-status", "education", "native-country"]):
        profile = adult_profile(qi)
        ordered = sorted(k for k, c in profile.items() for _ in range(c))
        for removed in (0, len(ordered) // 20, profile.get(1, 0) // 2):
            left = dict(collections.Counter(ordered[removed:]))
            n = sum(k * c for k, c in left.items())
            for big_n, estimator in ((10 * n, "dankar"), (int(1.5 * n), "dankar"), (10 * n, "snb")):
                want = ref_estimate(left, big_n, estimator)
                sizes = np.array(sorted(left))
                got = pop.population_uniques_of_profile(sizes, np.array([left[k] for k in sizes]), big_n, estimator)
                assert same_estimate(got, want), (qi, removed, big_n, estimator)


# ----------------------------------------------------------------------------------------------
# the lattice's removal search reads the profile


@pytest.mark.parametrize("estimator", pop.ESTIMATORS)
def test_profile_holds_is_holds(estimator):
    rng = np.random.default_rng(50 + pop.ESTIMATORS.index(estimator))
    for trial in range(6):
        profile = random_profile(rng, trial % 3)
        ordered = np.array(sorted(k for k, c in profile.items() for _ in range(c)), dtype=np.int64)
        n = int(ordered.sum())
        model = PopulationUniqueness(rng.uniform(0.001, 0.2), int(n * rng.choice([1.2, 10.0])), estimator)
        holds = Lattice._profile_holds(SimpleNamespace(global_models=(model,)), ordered)
        for removed in sorted({0, 1, len(ordered) // 3, len(ordered) // 2, len(ordered) - 1, len(ordered),
                               *rng.integers(0, len(ordered) + 1, 4).tolist()}):
            assert holds(removed) == model.holds(ordered[removed:]), (profile, removed)
