"""Population re-identification risk: population uniqueness estimators and the k-map derived k.

A sample of n records was drawn from a population of N records. The sample's equivalence classes
(records equal on the quasi-identifiers) have sizes f_1..f_u; write c_k for the number of classes
of size k (c_1 = sample uniques) and f = n / N for the sampling fraction. A record is a *population
unique* when its class has one member in the whole population; these are the records an attacker
holding a population register can re-identify with certainty. Their number is unknown (the
population is not at hand) and is estimated from the sample's class-size profile (c_k) and N.

`population_uniques(sizes, N, estimator)` returns that estimate as ARX
(arx-deidentifier/arx, `risk/RiskModelPopulationUniqueness`) computes it, for four estimators:

- ``'pitman'``: Pitman's two-parameter Poisson-Dirichlet model (Pitman 1996), fitted by maximum
  likelihood, with Hoshino's (2001) estimate of the number of population uniques;
- ``'zayatz'``: Zayatz (1991), the conditional probability that a sample unique is a population
  unique under hypergeometric sampling;
- ``'snb'``: the slide negative binomial model of Chen & Keller-McNulty (1998);
- ``'dankar'``: the decision rule of Dankar, El Emam, Neisa & Roffey (2012) choosing among them
  by the sampling fraction.

`kmap_derived_k(k, n, N, estimator, significance)` is ARX's `criteria/KMap` without a population
table: the smallest sample class size that guarantees k-map (every class matches at least k
population records) at a significance level, under El Emam & Dankar's (2008) Poisson (D3,
Pannekoek 1999) or zero-truncated Poisson (D4) model of population class sizes.

What ARX does is followed wherever it departs from the papers (users compare against ARX); each
departure is named in the function that makes it. The reference values in
tests/solver/test_population_estimators.py were produced by ARX itself
(benchmarks/arx_population/). Agreement with ARX 3.9.2: Zayatz, SNB and the k-map derived k to
rounding (SNB takes ARX's very Newton steps); Pitman within 1e-9 relative on Adult's class
profiles. ARX's Pitman path (Newton on a closed form with approximate digamma/trigamma, see
`fit_pitman`) is followed too, but on small or odd profiles it is chaotic: the last bits of the
libm functions (Java's StrictMath there, the C library here) decide where it ends, and on 21 of
400 random profiles of at most 60 classes ARX and this module end at different points (or one
of them at none).

Every function here is pure (numbers in, numbers out) and never reads a database.
"""

from __future__ import annotations

import math
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError
from duckanon.solver.special import (LGAMMA_SERIES_FROM, digamma_fast, lgamma_diff, polygamma_arrays, stirling_tail,
                                     trigamma_fast)

# the estimators' words, defined once for the front end and here (duckanon.methods)
ESTIMATORS = methods.UNIQUENESS_ESTIMATORS
KMAP_ESTIMATORS = methods.KMAP_ESTIMATORS

# ARX's ARXSolverConfiguration defaults, used by both Newton-Raphson fits (Pitman and SNB).
ACCURACY = 1e-6            # a try converges when |F_1| <= ACCURACY and |F_2| <= ACCURACY
ITERATIONS_PER_TRY = 1000  # a try gives up after 1001 Newton steps
# The deterministic start values tried after the given one: x, y in 0, 0.33, 0.66, 0.99 (ARX
# builds them by adding 0.33 in floating point; the sums are exactly these doubles).
START_VALUES = tuple((x, y) for x in (0.0, 0.33, 0.66, 0.99) for y in (0.0, 0.33, 0.66, 0.99))
# Dankar et al.'s rule: Pitman up to this sampling fraction, min(Zayatz, SNB) above it.
DANKAR_SAMPLING_FRACTION = 0.1
# ARX's default significance level for k-map with a population model (ModelKMapCriterion).
KMAP_SIGNIFICANCE = 0.01


@dataclass(frozen=True)
class UniquenessEstimate:
    """An estimate of the population uniques.

    uniques    : estimated number of population-unique records (ARX's getNumUniqueTuples; a
                 population unique is a class of one record, so records and classes coincide).
    fraction   : uniques / N, ARX's getFractionOfUniqueTuples (the population-based measure;
                 ARX's getFractionOfUniqueRecords is the sample-uniqueness one, uniques / n).
    estimator  : the estimator whose value this is; for 'dankar' the one Dankar's rule picked
                 ('pitman', 'zayatz' or 'snb'), or 'dankar' when the sample has no uniques.
    converged  : for 'pitman' and 'snb', whether the Newton-Raphson fit converged (when it did
                 not, ARX reports the estimate as unavailable and its value as 0, as here);
                 None for 'zayatz' and when no fit ran (no sample uniques).
    parameters : the fitted (theta, alpha) for Pitman, (alpha, beta) for SNB; else None.
    """

    uniques: float
    fraction: float
    estimator: str
    converged: bool | None
    parameters: tuple[float, float] | None = None


@dataclass(frozen=True)
class _Profile:
    """The class-size profile: distinct sizes ascending, how many classes have each."""

    sizes: np.ndarray   # int64, ascending, distinct
    counts: np.ndarray  # int64, > 0
    n: int              # records
    u: int              # classes
    c1: int             # classes of size 1
    c2: int             # classes of size 2


def _profile(sizes: Iterable[int]) -> _Profile:
    arr = np.asarray(list(sizes) if not isinstance(sizes, np.ndarray) else sizes)
    if arr.size == 0:
        raise AnonymizeError("population uniqueness: the sample is empty (no equivalence class)")
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer)
                             or (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.floor(arr)))):
        raise AnonymizeError("population uniqueness: class sizes must be a flat list of integers")
    arr = arr.astype(np.int64)
    if np.any(arr <= 0):
        raise AnonymizeError("population uniqueness: every class size must be at least 1")
    distinct, counts = np.unique(arr, return_counts=True)
    lookup = dict(zip(distinct.tolist(), counts.tolist()))
    return _Profile(distinct, counts.astype(np.int64), int(arr.sum()), int(arr.size),
                    int(lookup.get(1, 0)), int(lookup.get(2, 0)))


def profile_of_counts(sizes: np.ndarray, counts: np.ndarray) -> _Profile:
    """The profile of classes given as distinct sizes (ascending, >= 1) and how many classes have
    each (>= 1), as `_profile` builds it from the list of class sizes, without the list: the
    lattice's removal search (`Lattice._enforce_global`) derives each removal count's profile from
    the node's in O(distinct sizes)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if sizes.size == 0:
        raise AnonymizeError("population uniqueness: the sample is empty (no equivalence class)")
    c1 = int(counts[0]) if sizes[0] == 1 else 0
    at2 = 1 if c1 else 0
    c2 = int(counts[at2]) if at2 < len(sizes) and sizes[at2] == 2 else 0
    return _Profile(sizes, counts, int(np.dot(sizes, counts)), int(counts.sum()), c1, c2)


def _population(population_size, n: int) -> int:
    if isinstance(population_size, bool) or not isinstance(population_size, (int, np.integer)):
        if isinstance(population_size, float) and population_size == math.floor(population_size):
            population_size = int(population_size)
        else:
            raise AnonymizeError("population_size must be a whole number of records")
    if population_size < n:
        raise AnonymizeError("population_size is smaller than the sample: the population must "
                             "contain every sample record")
    return int(population_size)


# ----------------------------------------------------------------------------------------------
# ARX's Newton-Raphson, shared by the Pitman and SNB fits (the special functions: special.py)


def _newton(evaluate: Callable[[float, float], tuple[float, float, float, float, float, float]],
            start: tuple[float, float],
            constraint: Callable[[float, float], bool] | None = None,
            floats: bool = False) -> tuple[float, float, bool]:
    """ARX's Newton-Raphson (de.linearbits.newtonraphson.NewtonRaphson2D as ARX configures it).

    `evaluate(x, y)` returns (F_1, F_2, J_11, J_12, J_21, J_22). Tries `start`, then each of
    START_VALUES in order. In a try: if |F_1|, |F_2| <= ACCURACY at the current point, it is the
    solution; else step to p - J^-1 F; the try ends (next start value) when the new point breaks
    `constraint`, is NaN, or ITERATIONS_PER_TRY steps have been taken. As in ARX, once the last
    start value is loaded the solver stops after its first step, so that value only gets its
    convergence check. ARX also stops on time (100 ms a try, 1 s in all); here only the counts
    apply, which is the same whenever ARX does not run out of time.

    Returns (x, y, True) on convergence, (nan, nan, False) otherwise.

    A try whose path comes back to a point it has visited (bit for bit; often a fixed point where
    the step rounds to nothing) is a cycle of points already checked: it would go round until
    the step count ends it, so it ends at once, with the same outcome (`evaluate` is a pure
    function of the point).

    The steps are computed with Python floats, which round as numpy's float64 does (a zero
    determinant gives the signed infinity numpy's division gives); `evaluate` receives the point
    as numpy float64 scalars, or as Python floats with `floats`.
    """
    starts = (start, *START_VALUES)
    pack = _POINT.pack
    point = float if floats else np.float64
    with np.errstate(all="ignore"):
        for attempt, (x0, y0) in enumerate(starts):
            x, y = float(x0), float(y0)
            steps = 0
            visited = {pack(x, y)}
            while True:
                f1, f2, j11, j12, j21, j22 = evaluate(point(x), point(y))
                if abs(f1) <= ACCURACY and abs(f2) <= ACCURACY:
                    return float(x), float(y), True
                det = j11 * j22 - j12 * j21
                inv = 1.0 / det if det != 0 else math.copysign(math.inf, det)
                x = x - ((j22 * inv) * f1 + (-j12 * inv) * f2)
                y = y - ((-j21 * inv) * f1 + (j11 * inv) * f2)
                if attempt == len(starts) - 1:
                    return math.nan, math.nan, False
                if constraint is not None and not constraint(x, y):
                    break
                if math.isnan(x) or math.isnan(y) or steps >= ITERATIONS_PER_TRY:
                    break
                here = pack(x, y)
                if here in visited:
                    break
                visited.add(here)
                steps += 1
    return math.nan, math.nan, False


_POINT = struct.Struct("<dd")  # a Newton point's bits (0.0 and -0.0 apart)


# ----------------------------------------------------------------------------------------------
# Pitman


def pitman_start(p: _Profile) -> tuple[float, float]:
    """ARX's start value for the Pitman fit (a moment-type guess from c_1, c_2, u and n; c_2 = 0
    is replaced by 1)."""
    with np.errstate(all="ignore"):
        c1, u, n = np.float64(p.c1), np.float64(p.u), np.float64(p.n)
        c2 = np.float64(p.c2 if p.c2 != 0 else 1)
        c = (c1 * (c1 - 1)) / c2
        t = ((n * u * c) - (c1 * (n - 1) * ((2 * u) + c))) / (((2 * c1 * u) + (c1 * c)) - (n * c))
        a = ((t * (c1 - n)) + ((n - 1) * c1)) / (n * u)
    return float(t), float(a)


def _counting(length: int) -> np.ndarray:
    """1.0, 2.0, ..., length - 1.0 (a view of one shared array, grown as needed)."""
    global _COUNTING
    if len(_COUNTING) < length:
        _COUNTING = np.arange(1, max(length, 2 * len(_COUNTING)), dtype=np.float64)
        _COUNTING.setflags(write=False)
    return _COUNTING[:max(length - 1, 0)]


_COUNTING = np.arange(1, 1 << 16, dtype=np.float64)
_COUNTING.setflags(write=False)
_SCRATCH = threading.local()


def _scratch(length: int) -> np.ndarray:
    """A float64 array of `length` to write into, the same memory from call to call (per thread)."""
    buffer = getattr(_SCRATCH, "buffer", None)
    if buffer is None or len(buffer) < length:
        buffer = _SCRATCH.buffer = np.empty(max(length, 1 << 16), dtype=np.float64)
    return buffer[:length]


def _pitman_system(p: _Profile, gradient_only: bool = False):
    """The likelihood equations dL/dtheta = 0, dL/dalpha = 0 and their Jacobian (the Hessian of
    L) by the finite sums (ARX's "iterative" functions):

        dL/dtheta = sum_{i<u} 1 / (theta + i alpha) - sum_{i<n} 1 / (theta + i)
        dL/dalpha = sum_{i<u} i / (theta + i alpha) - sum_classes sum_{j<size} 1 / (j - alpha)

    `gradient_only`: the function returns the two equations alone (the same values), for the
    check of the closed form's root."""
    i_u = _counting(p.u)
    i_n = _counting(p.n)
    # m_j = classes larger than j, j = 1..max size - 1: sum_classes sum_{j<size} g(j) = sum_j m_j g(j)
    top = int(p.sizes[-1])
    j = _counting(top)
    m = _classes_larger(p, top)

    def gradient(t, a):
        v = t + i_u * a
        inv_v = 1.0 / v
        w = _scratch(len(i_n))  # (n can be large: fresh memory each time costs page faults)
        np.add(t, i_n, out=w)
        np.divide(1.0, w, out=w)
        z = 1.0 / (j - a)
        return np.sum(inv_v) - np.sum(w), np.sum(i_u * inv_v) - np.sum(m * z)

    if gradient_only:
        return gradient

    def evaluate(t, a):
        v = t + i_u * a
        inv_v = 1.0 / v
        inv_v2 = inv_v * inv_v
        w = 1.0 / (t + i_n)
        z = 1.0 / (j - a)
        g1 = np.sum(inv_v) - np.sum(w)
        g2 = np.sum(i_u * inv_v) - np.sum(m * z)
        h11 = np.sum(w * w) - np.sum(inv_v2)
        h12 = -np.sum(i_u * inv_v2)
        h22 = -np.sum(i_u * i_u * inv_v2) - np.sum(m * z * z)
        return g1, g2, h11, h12, h12, h22

    return evaluate


def _classes_larger(p: _Profile, top: int) -> np.ndarray:
    """m_j = number of classes of size > j for j = 1..top-1."""
    larger = np.cumsum(p.counts[::-1])[::-1]  # classes of size >= sizes[i]
    idx = np.searchsorted(p.sizes, np.arange(1, top), side="right")  # first size > j
    return larger[idx].astype(np.float64)


def _pitman_closed_system(p: _Profile):
    """The same likelihood equations in closed form, with s = theta / alpha:

        sum_{i<u} 1 / (theta + i alpha)   = (psi(s + u) - psi(s + 1)) / alpha
        sum_{i<n} 1 / (theta + i)         = psi(theta + n) - psi(theta + 1)
        sum_{j<k} 1 / (j - alpha)         = psi(k - alpha) - psi(1 - alpha)

    and likewise the Hessian with psi' (ARX's ModelPitman "closed" master function), evaluated
    with ARX's digamma_arx and trigamma_arx; sums over the class sizes run in ascending order.

    Computed as that description reads, one number at a time, bit for bit, but faster: psi and
    psi' at 1 - alpha and at k - alpha for every size k > 1 as arrays (`polygamma_arrays`), the
    sums over the sizes in the same order (a running sum, numpy's cumsum); the other terms with
    Python floats, which round as numpy's float64 does. Where a Python division by zero raises
    (alpha = 0, or alpha^2 underflowing; numpy gives inf or NaN) the point is evaluated again
    with numpy's scalars."""
    u, n = float(p.u), float(p.n)
    others = p.sizes != 1
    m = int(others.sum())
    # the arguments' integer parts: 1 (psi_a, psi'_a), then the sizes > 1, ascending
    whole = np.concatenate(([1.0], p.sizes[others].astype(np.float64)))
    counts = p.counts[others].astype(np.float64)
    polygamma = polygamma_arrays(m + 1)
    terms = np.empty((2, m), dtype=np.float64)
    psi, tri = digamma_fast, trigamma_fast
    subtract, multiply = np.subtract, np.multiply

    def evaluate(t, a):
        s = t / a
        a2 = a * a
        psi_u, psi_1 = psi(((u - 1) + s) + 1), psi(s + 1)
        tri_u, tri_1 = tri(((a + t) + a * (u - 1)) / a), tri(s + 1)
        o1 = (psi_u - psi_1) / a                       # sum_{i<u} 1 / (t + i a)
        d1 = (tri_1 - tri_u) / a2                      # sum_{i<u} 1 / (t + i a)^2
        o3 = ((u - 1) * a - t * (psi_u - psi_1)) / a2  # sum_{i<u} i / (t + i a)
        d5 = (o1 - t * d1) / a                         # sum_{i<u} i / (t + i a)^2
        d3 = ((u - 1) - 2 * t * o1 + t * t * d1) / a2  # sum_{i<u} i^2 / (t + i a)^2
        o2 = psi(n + t) - psi(t + 1)
        d2 = tri(t + 1) - tri(n + t)
        o4 = d4 = 0.0
        if m:
            values = polygamma(subtract(whole, a)).reshape(2, m + 1)
            # per size c (psi(k - a) - psi_a) and c (psi'(k - a) - psi'_a), the second the
            # negated term of the sum d4 (exactly: negation rounds symmetrically), each summed
            # from the first; + 0.0 turns a -0.0 into the 0.0 the loop's start at 0.0 gives
            subtract(values[:, 1:], values[:, :1], out=terms)
            multiply(terms, counts, out=terms)
            o4, d4 = terms.cumsum(axis=1)[:, -1].tolist()
            o4, d4 = o4 + 0.0, -d4 + 0.0
        return o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4

    def guarded(t, a):  # (_newton calls it under np.errstate(all="ignore"))
        t, a = float(t), float(a)
        if a == 0:
            # s = t / 0 is +-inf or NaN, psi and psi' there NaN: every value is NaN (the starts
            # with alpha = 0 end at their first step)
            return _NAN6
        try:
            return evaluate(t, a)
        except ZeroDivisionError:  # alpha^2 underflows to 0
            with np.errstate(all="ignore"):
                return evaluate(np.float64(t), np.float64(a))

    return guarded


_INF = math.inf
_NAN6 = (math.nan,) * 6


def fit_pitman(sizes: Iterable[int]) -> tuple[float, float, bool]:
    """Maximum-likelihood (theta, alpha) of Pitman's model for the sample's partition, as ARX's
    ModelPitman fits it. From ARX's start value (`pitman_start`), constraint theta >= 0 (see
    `_newton`):
    1. Newton-Raphson on the closed form (`_pitman_closed_system`, ARX's digamma/trigamma);
    2. if that fails, or its point does not satisfy the exact equations (`_pitman_system`) to
       ACCURACY, Newton-Raphson on the exact equations instead.
    Returns (theta, alpha, converged); (nan, nan, False) when neither converges. The point is a
    root of the likelihood equations to ACCURACY, which ARX's approximate Jacobian can also find
    far out (theta in the billions, where both derivatives vanish); the estimate there is
    usually outside [0, N] and so 'not available', as in ARX."""
    p = _profile(sizes)
    return _fit_pitman(p)


def _fit_pitman(p: _Profile) -> tuple[float, float, bool]:
    start = pitman_start(p)
    theta_ok = lambda t, a: t >= 0  # noqa: E731
    t, a, ok = _newton(_pitman_closed_system(p), start, constraint=theta_ok, floats=True)
    if ok:
        with np.errstate(all="ignore"):
            g1, g2 = _pitman_system(p, gradient_only=True)(np.float64(t), np.float64(a))
        if abs(g1) <= ACCURACY and abs(g2) <= ACCURACY:
            return t, a, True
    return _newton(_pitman_system(p), start, constraint=theta_ok)


def pitman_uniques(theta: float, alpha: float, population_size: float) -> float:
    """Hoshino (2001): under Pitman's model the expected number of population uniques is

        E[U_1] ~ Gamma(theta + 1) / Gamma(theta + alpha) * N^alpha.

    As ARX (ModelPitman.getResult): NaN when alpha = 0 or the value is not in [0, N]. ARX takes
    the larger of exp(lnGamma - lnGamma) * N^alpha and the plain Gamma ratio; the two are equal
    where both are finite; the Gamma ratio also covers theta + alpha < 0, where its sign decides."""
    t, a, big_n = theta, alpha, population_size
    if math.isnan(t) or math.isnan(a) or a == 0:
        return math.nan
    x = t + a
    if x > 0:
        log_value = lgamma_diff(t + 1, 1 - a)
        sign = 1.0
    elif x == math.floor(x) or t + 1 <= 0:
        return math.nan
    else:  # Gamma(x) < 0 on (-1, 0), (-3, -2), ...: the sign alternates per unit interval
        log_value = math.lgamma(t + 1) - math.lgamma(x)
        sign = 1.0 if math.floor(-x) % 2 == 1 else -1.0
    with np.errstate(all="ignore"):
        value = sign * float(np.exp(np.float64(log_value + a * math.log(big_n))))
    return value if 0 <= value <= big_n else math.nan


# ----------------------------------------------------------------------------------------------
# Zayatz


def hypergeometric_one(k: int, n: int, big_n: int) -> float:
    """P(a population class of k records contributes exactly 1 record to a simple random sample
    of n out of N) = k C(N-k, n-1) / C(N, n)
                   = k n / (N - n + 1) * prod_{i=0}^{n-2} (N - k - i) / (N - i),
    computed as exp(ln(k n / (N - n + 1)) + lnG(N-n+2, k) - lnG(N+1, k)) with
    lnG(x, h) = ln Gamma(x) - ln Gamma(x - h) (`lgamma_diff`); 0 outside the support; n / N
    exactly for k = 1."""
    if k > big_n - n + 1:
        return 0.0
    if k == 1:
        return n / big_n
    log_p = (math.log(k) + math.log(n) - math.log(big_n - n + 1)
             + lgamma_diff(big_n - n + 2, k) - lgamma_diff(big_n + 1, k))
    return math.exp(log_p)


# Below this population the integer arithmetic of `hypergeometric_one` (ints up to 1188 (N + 1)^2
# in `stirling_tail`) is exact in float64, so the array version computes the same values.
_HYPERGEOMETRIC_ARRAYS_BELOW = 2_700_000


def _hypergeometric_ones(sizes: np.ndarray, n: int, big_n: int) -> np.ndarray:
    """[hypergeometric_one(k, n, N) for k in sizes], bit for bit: the sizes on the series branch
    of both `lgamma_diff`s (2 <= k <= N - n + 2 - 30) as arrays, the same operations in the same
    order, with math.log1p, math.log and math.exp per element; the others one at a time. The
    integers of the scalar function are exact in float64 below _HYPERGEOMETRIC_ARRAYS_BELOW, so
    its int/int divisions (correctly rounded) and these float ones agree; above, every size is
    computed one at a time."""
    ks = [int(k) for k in sizes.tolist()]
    if big_n >= _HYPERGEOMETRIC_ARRAYS_BELOW:
        return np.array([hypergeometric_one(k, n, big_n) for k in ks], dtype=np.float64)
    x1, x2 = big_n - n + 2, big_n + 1
    k = np.asarray(ks, dtype=np.float64)
    series = (k >= 2) & (k <= x1 - LGAMMA_SERIES_FROM)
    out = np.empty(len(ks), dtype=np.float64)
    for i in np.flatnonzero(~series).tolist():
        out[i] = hypergeometric_one(ks[i], n, big_n)
    if not series.any():
        return out
    k = k[series]
    log_p = np.array(list(map(math.log, k.tolist())), dtype=np.float64)
    log_p += math.log(n)
    log_p -= math.log(big_n - n + 1)
    for x, sign in ((x1, 1.0), (x2, -1.0)):
        # lgamma_diff(x, k) = -(y - 0.5) log1p(-k / x) + k ln x - k + (s(x) - s(y)), y = x - k
        y = x - k
        z2 = y * y
        tail_y = (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1.0 / (1188 * z2)) / z2) / z2) / z2) / y
        term = -(y - 0.5) * np.array(list(map(math.log1p, (-k / x).tolist())), dtype=np.float64)
        term += k * math.log(x)
        term -= k
        term += stirling_tail(x) - tail_y
        if sign > 0:
            log_p += term
        else:
            log_p -= term
    out[series] = list(map(math.exp, log_p.tolist()))
    return out


def _zayatz(p: _Profile, big_n: int) -> float:
    """Zayatz (1991), as ARX's ModelZayatz computes it: with the sample's class-size distribution
    c_k / u standing in for the population's,

        P(population unique | sample unique) = (c_1/u) P_1 / sum_k (c_k/u) P_k,
        P_k = hypergeometric probability that a population class of size k yields 1 sample record,

    and the estimate is c_1 * P(population unique | sample unique) / f. ARX clips N at 2^31 - 1
    inside the hypergeometric distribution (an int); here N is used as given."""
    probs = _hypergeometric_ones(p.sizes, p.n, big_n)
    denominator = float(np.sum(p.counts * probs))
    conditional = p.c1 * (p.n / big_n) / denominator
    return p.c1 * conditional / (p.n / big_n)


# ----------------------------------------------------------------------------------------------
# SNB


def snb_classes(p: _Profile, big_n: int) -> float:
    """ARX's estimate of K, the number of non-empty classes in the population (ModelSNB, after
    Haas & Stokes' Shlosser-type estimator):

        K = u + c_1 * (A / B) * (C / D)^2,  A = sum_k k f^2 (1 - f^2)^(k-1) c_k,
        B = sum_k [ (1-f)^k c_k (1+f)^k - 1 ],  C = sum_k (1-f)^k c_k,  D = sum_k k f (1-f)^(k-1) c_k,

    sums over the distinct class sizes k. ARX subtracts the 1 in B once per distinct size, not
    per class (the published estimator has ((1+f)^k - 1) times (1-f)^k c_k); followed here."""
    f = np.float64(p.n) / np.float64(big_n)
    k = p.sizes.astype(np.float64)
    c = p.counts.astype(np.float64)
    with np.errstate(all="ignore"):
        a_ = np.sum(k * f * f * np.power(1 - f * f, k - 1) * c)
        b_ = np.sum(np.power(1 - f, k) * c * np.power(1 + f, k) - 1)
        c_ = np.sum(np.power(1 - f, k) * c)
        d_ = np.sum(k * f * np.power(1 - f, k - 1) * c)
        return float(np.float64(p.u) + np.float64(p.c1) * (a_ / b_) * (c_ / d_) * (c_ / d_))


def _snb_system(big_k: float, f: float, c1: float, c2: float):
    """Chen & Keller-McNulty (1998): population class sizes are 1 + G with G ~ NegBin(alpha,
    beta), P(G = g) = Gamma(alpha+g) / (Gamma(alpha) g!) beta^alpha (1-beta)^g; each record is
    sampled with probability f. With d = (1-f)(1-beta) and q = 1 - d the expected numbers of
    sample classes of size 1 and 2 are

        E[c_1] = K f (beta/q)^alpha (1 + alpha d / q),
        E[c_2] = K f^2 / 2 * alpha beta^alpha (1-beta) q^-(alpha+2) (2 - (1-alpha) d),

    and (alpha, beta) solve E[c_1] = c_1, E[c_2] = c_2. ARX's ModelSNB writes the second
    equation with q^+(alpha+2) while its Jacobian is that of q^-(alpha+2) above; ARX's equation
    and ARX's Jacobian are both followed here, so the fit is the root ARX finds.

    The equations are evaluated with Python floats, which round as numpy's float64 does (powers
    by the C library's pow, as numpy's scalars; logarithms by numpy, whose log differs from the C
    library's now and then); where a base is negative or not finite, or a division by zero or an
    overflowing power raises, the same equations with numpy's scalars, which give NaN or inf."""
    def equations(a, b, big_k, f, c1, c2):
        d = (1 - f) * (1 - b)
        q = 1 - d
        r = b / q
        ra = r ** a
        e1 = big_k * f * ra * (a * d / q + 1)
        ba = b ** a
        w = 2 - (1 - a) * d
        g2 = big_k * a * ba * (f * f) * (1 - b) / 2 * q ** (a + 2) * w
        # Jacobian of E[c_1] and of E[c_2] as derived above (q^-(alpha+2))
        j11 = big_k * f * ra * ((1 + a * d / q) * float(np.log(r)) + d / q)
        j12 = big_k * f * ra * (a * (1 / b - (1 - f) / q) * (1 + a * d / q) - a * (1 - f) / (q * q))
        s = big_k * f * f / 2
        qa2 = q ** (-(a + 2))
        j21 = s * (ba * (1 - b) * qa2 * w * (1 + a * float(np.log(b)) - a * float(np.log(q)))
                   + a * ba * (1 - b) * qa2 * d)
        j22 = s * (a * a * b ** (a - 1) * (1 - b) * qa2 * w
                   - a * ba * qa2 * w
                   - a * (a + 2) * (1 - f) * ba * (1 - b) * q ** (-(a + 3)) * w
                   + a * (1 - a) * (1 - f) * ba * (1 - b) * qa2)
        return e1 - c1, g2 - c2, j11, j12, j21, j22

    as_numpy = tuple(np.float64(v) for v in (big_k, f, c1, c2))
    as_floats = tuple(float(v) for v in (big_k, f, c1, c2))
    f_ = as_floats[1]

    def evaluate(a, b):  # (_newton calls it under np.errstate(all="ignore"))
        a, b = float(a), float(b)
        if b >= 0 and 1 - (1 - f_) * (1 - b) > 0 and -_INF < a < _INF and b < _INF:
            try:
                return equations(a, b, *as_floats)
            except (ZeroDivisionError, OverflowError):
                pass
        return equations(np.float64(a), np.float64(b), *as_numpy)

    return evaluate


def _snb(p: _Profile, big_n: int) -> tuple[float, float, float, bool]:
    """(uniques, alpha, beta, converged): uniques = K P(population class size 1) = K beta^alpha."""
    big_k = snb_classes(p, big_n)
    f = np.float64(p.n) / np.float64(big_n)
    a, b, ok = _newton(_snb_system(np.float64(big_k), f, np.float64(p.c1), np.float64(p.c2)), (1.0, 1.0),
                       floats=True)
    with np.errstate(all="ignore"):
        uniques = float(np.float64(big_k) * np.power(np.float64(b), np.float64(a)))
    return uniques, a, b, ok


# ----------------------------------------------------------------------------------------------
# the estimate


def _valid(value: float) -> bool:
    """ARX's isValid: an estimate of 0 or NaN is 'not available'."""
    return not math.isnan(value) and value != 0


def population_uniques(sizes: Iterable[int], population_size: int, estimator: str) -> UniquenessEstimate:
    """Estimated population uniques of a sample with the given equivalence-class sizes.

    sizes           : the sample's class sizes (integers >= 1; their sum is the sample size n).
    population_size : N >= n.
    estimator       : 'pitman', 'zayatz', 'snb' or 'dankar'.

    As ARX's RiskModelPopulationUniqueness: a sample without uniques (c_1 = 0) has 0 population
    uniques under every estimator; a Pitman or SNB fit that does not converge, or gives NaN or 0,
    yields 0 (ARX's 'estimate not available'; `converged` tells). Dankar et al. (2012), as ARX's
    getNumUniqueTuplesDankar(): with f = n / N <= 0.1 Pitman, falling back to Zayatz when Pitman
    is not available; with f > 0.1 the smaller of Zayatz and SNB (Zayatz when SNB is not
    available).
    """
    estimator = _estimator(estimator)
    return _estimate(_profile(sizes), population_size, estimator)


def population_uniques_of_profile(sizes: np.ndarray, counts: np.ndarray, population_size: int,
                                  estimator: str) -> UniquenessEstimate:
    """`population_uniques` of the classes given by their distinct sizes (ascending) and how many
    classes have each (`profile_of_counts`): the same estimate, without the list of sizes."""
    estimator = _estimator(estimator)
    return _estimate(profile_of_counts(sizes, counts), population_size, estimator)


def _estimator(estimator: str) -> str:
    if not isinstance(estimator, str) or estimator.lower() not in ESTIMATORS:
        raise AnonymizeError("unknown population uniqueness estimator; known estimators: "
                             + ", ".join(ESTIMATORS))
    return estimator.lower()


def _estimate(p: _Profile, population_size: int, estimator: str) -> UniquenessEstimate:
    big_n = _population(population_size, p.n)

    def result(uniques: float, name: str, converged=None, parameters=None) -> UniquenessEstimate:
        return UniquenessEstimate(uniques, uniques / big_n, name, converged, parameters)

    if p.c1 == 0:
        return result(0.0, estimator)

    def pitman() -> UniquenessEstimate:
        t, a, ok = _fit_pitman(p)
        value = pitman_uniques(t, a, big_n) if ok else math.nan
        return result(value if _valid(value) else 0.0, "pitman", ok and _valid(value), (t, a))

    def snb() -> UniquenessEstimate:
        value, a, b, ok = _snb(p, big_n)
        return result(value if _valid(value) else 0.0, "snb", ok and _valid(value), (a, b))

    def zayatz() -> UniquenessEstimate:
        value = _zayatz(p, big_n)
        return result(value if _valid(value) else 0.0, "zayatz")

    if estimator == "pitman":
        return pitman()
    if estimator == "snb":
        return snb()
    if estimator == "zayatz":
        return zayatz()
    # Dankar et al.
    if p.n / big_n <= DANKAR_SAMPLING_FRACTION:
        chosen = pitman()
        return chosen if chosen.converged else zayatz()
    by_snb, by_zayatz = snb(), zayatz()
    if not by_snb.converged:
        return by_zayatz
    return by_zayatz if by_zayatz.uniques < by_snb.uniques else by_snb


# ----------------------------------------------------------------------------------------------
# k-map with a population model


def _poisson_pmf(j: int, lam: float) -> float:
    return math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1))


def kmap_derived_k(k: int, sample_size: int, population_size: int,
                   estimator: str = "poisson", significance: float = KMAP_SIGNIFICANCE) -> int:
    """The sample class size k' that ensures k-map when the population is only known by its size,
    as ARX's KMap(k, significance, population model, estimator) derives it (El Emam & Dankar 2008,
    "Protecting privacy using k-anonymity", JAMIA 15(5); D3 is Pannekoek 1999).

    The population size of a class of sample size s is modelled as Poisson with mean
    lambda = f k, f = n / N, or as zero-truncated Poisson (D4; P(j) / (1 - P(0)) for j >= 1):

    - 'poisson' (ARX's calculateKPoisson): j* = the smallest j >= 0 with CDF(j) >= 1 - significance;
      k' = j* + 2 (ARX's count, one above the paper's j* + 1);
    - 'zero_truncated_poisson' (calculateKZeroPoisson): j* = the smallest j >= 1 with the
      truncated CDF(j) >= 1 - significance; k' = j* + 1.

    In both, the search stops once its counter reaches k (then k' >= k, meaning plain
    k-anonymity), and finally k' = min(k', n, k). ARX's default significance is 0.01 (the GUI's
    ModelKMapCriterion; the API takes it as an argument). ARX also reports the type-1 error
    1 - CDF; only k' is returned here.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise AnonymizeError("k-map: k must be an integer of at least 1")
    if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size < 1:
        raise AnonymizeError("k-map: the sample is empty (sample_size must be at least 1)")
    big_n = _population(population_size, int(sample_size))
    if not isinstance(significance, (int, float)) or not 0 < significance < 1:
        raise AnonymizeError("k-map: significance must lie strictly between 0 and 1")
    if not isinstance(estimator, str) or estimator.lower() not in KMAP_ESTIMATORS:
        raise AnonymizeError("unknown k-map estimator; known estimators: " + ", ".join(KMAP_ESTIMATORS))
    lam = (sample_size / big_n) * k
    threshold = 1.0 - significance
    if estimator.lower() == "poisson":
        counter, value, cdf = 0, 0.0, 0.0
        while value < threshold:
            cdf += _poisson_pmf(counter, lam)
            value = cdf
            counter += 1
            if counter >= k:
                break
        derived = counter + 1
    else:
        truncation = -math.expm1(-lam)  # 1 - P(0)
        counter, value = 1, 0.0
        while value < threshold:
            value += _poisson_pmf(counter, lam) / truncation
            counter += 1
            if counter >= k:
                break
        derived = counter
    return int(min(derived, sample_size, k))
