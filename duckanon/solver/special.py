"""Special functions for the population estimators (population.py), as ARX computes them:
ln Gamma differences without cancellation, and ARX's digamma and trigamma, one number at a time
and as arrays, bit for bit (the SQL macros in sql/risk_population.sql compute the same).

Every function here is pure (numbers in, numbers out).
"""

from __future__ import annotations

import math

import numpy as np


def _log1p(x: float) -> float:
    return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)


def stirling_tail(z: float) -> float:
    """ln Gamma(z) - ((z - 1/2) ln z - z + ln(2 pi) / 2), the Stirling series to z^-9 (z >= 30:
    truncation error below 1e-18)."""
    z2 = z * z
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1 / (1188 * z2)) / z2) / z2) / z2) / z


LGAMMA_SERIES_FROM = 30.0


def lgamma_diff(x: float, h: float) -> float:
    """ln Gamma(x) - ln Gamma(x - h) for x > 0 and x - h > 0, without the cancellation of the
    plain difference when both arguments are large: with y = x - h >= 30 (and x >= 30),

        ln Gamma(x) - ln Gamma(y) = -(y - 1/2) log1p(-h / x) + h ln x - h + s(x) - s(y)

    (s = the Stirling series tail); otherwise the plain difference of math.lgamma."""
    y = x - h
    if min(x, y) >= LGAMMA_SERIES_FROM:
        return (-(y - 0.5) * _log1p(-h / x) + h * math.log(x) - h
                + (stirling_tail(x) - stirling_tail(y)))
    return math.lgamma(x) - math.lgamma(y)


# ARX's digamma and trigamma (risk/Gamma.java, after Minka's Lightspeed toolbox): the asymptotic
# series after shifting the argument up by whole steps, reflection for negative arguments, a
# Taylor expansion near 0.
_EULER = 0.57721566490153286061
_ZETA2 = math.pi * math.pi / 6
_ZETA3 = 1.2020569031595942854


def digamma_arx(x: float) -> float:
    """psi(x) as ARX computes it: below 12, psi(x) = psi(x + m) - sum_{i<m} 1 / (x + i) with m the
    steps to reach 12, then ln y - 1/(2y) - 1/(12y^2) + 1/(120y^4) - 1/(252y^6) + 1/(240y^8)
    - 1/(132y^10) at y = x + m (accurate to ~1e-15). Sums run in order, so that the SQL macro
    anon_population_digamma gives the same bits."""
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return -math.inf
    if x < 0:
        return digamma_arx(1 - x) + math.pi / math.tan(-math.pi * x)
    if x <= 1e-6:
        return -_EULER - 1 / x + _ZETA2 * x
    steps = math.ceil(12 - x) if x < 12 else 0
    shift = 0.0
    for i in range(steps):
        shift += 1.0 / (x + i)
    y = x + steps
    r = 1.0 / y
    r2 = r * r
    tail = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return (-shift + (math.log(y) - 0.5 * r)) - tail


def trigamma_arx(x: float) -> float:
    """psi'(x) as ARX computes it. ARX shifts arguments below 8 up to [8, 9) but adds the
    asymptotic series 1/y + 1/(2y^2) + 1/(6y^3) - 1/(30y^5) + 1/(42y^7) - 1/(30y^9) + 5/(66y^11)
    only when the shifted argument is at least 12, so for x < 12 it returns the shift's sum
    sum_{i<m} 1 / (x + i)^2 alone (0 on [8, 12)): exact only from 12 on. ARX uses trigamma only
    in the Jacobian of the Pitman fit, where this changes the Newton path (and with it, on small
    or odd samples, which point the fit ends at), not the equations solved. Followed here."""
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return -math.inf
    if x < 0:
        r = math.pi / math.sin(-math.pi * x)
        return -trigamma_arx(1 - x) + r * r
    if x <= 1e-4:
        return 1 / (x * x) + _ZETA2 - 2 * _ZETA3 * x
    steps = math.ceil(8 - x) if x < 8 else 0
    value = 0.0
    for i in range(steps):
        value += 1.0 / ((x + i) * (x + i))
    y = x + steps
    if y >= 12:
        r = 1.0 / (y * y)
        value += 0.5 * r + (1 + r * (1 / 6 + r * (-1 / 30 + r * (1 / 42 + r * (-1 / 30 + r * (5 / 66)))))) / y
    return value


def digamma_fast(x: float) -> float:
    """digamma_arx(x), its series written out for 12 <= x < inf (no shift: the same value)."""
    if 12.0 <= x < _INF:
        r = 1.0 / x
        r2 = r * r
        return (_LOG(x) - 0.5 * r) - r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return digamma_arx(x)


def trigamma_fast(x: float) -> float:
    """trigamma_arx(x), its series written out for 12 <= x < inf (no shift: the same value)."""
    if 12.0 <= x < _INF:
        r = 1.0 / (x * x)
        return 0.5 * r + (1 + r * (1 / 6 + r * (-1 / 30 + r * (1 / 42 + r * (-1 / 30 + r * (5 / 66)))))) / x
    return trigamma_arx(x)


_INF, _LOG = math.inf, math.log
# the series' coefficients, innermost first, for p = c + y^-2 p (Horner): digamma's tail, its
# subtractions written as additions of the negated terms (each step's value is then the
# original's or its negation, exactly), and trigamma's series
_HORNER = ((1 / 132, 5 / 66), (-1 / 240, -1 / 30), (1 / 252, 1 / 42), (-1 / 120, -1 / 30), (1 / 12, 1 / 6))
_STEP = np.arange(12, dtype=np.float64)  # the shifts' steps i (i < ceil(v) exactly when i < v)
_SHIFT_UP_TO = np.array([[12.0], [8.0]])  # digamma shifts below 12, trigamma below 8


def polygamma_arrays(m: int):
    """A function of an ascending array x of m arguments returning digamma_arx(x) then
    trigamma_arx(x) as one array of 2m, bit for bit: the same operations in the same order,
    elementwise (numpy's +, -, *, / round as Python's float operations do), in buffers kept from
    call to call (the next call overwrites the array returned).

    * digamma: below 12 the argument is shifted up by ceil(12 - x) steps, the shift's sum
      sum_i 1 / (x + i) a running sum along the steps (numpy's cumsum); then
      (-shift + (ln y - r / 2)) - r2 p with y the shifted argument, r = 1 / y, r2 = r^2 and p the
      tail's polynomial in r2. The tail r2 (1/12 - r2 (1/120 - r2 (1/252 - r2 (1/240 - r2 (1/132)))))
      is evaluated as r2 (1/12 + r2 (-1/120 + r2 (1/252 + r2 (-1/240 + r2 (1/132))))): each
      step's value is the original's or its negation. The logarithms are math.log's (numpy's
      own log differs from the C library's in the last bit now and then).
    * trigamma: below 8 the shift's sum of 1 / (x + i)^2 alone (ARX's series starts at 12), 0
      on [8, 12) (a sum of no steps), from 12 on 0.5 r + (1 + r p) / x with r = 1 / x^2.

    The arguments below 12 come first (ascending). Arguments outside the series' range (<= 1e-4,
    NaN, inf) take the scalar functions."""
    add, subtract, multiply, divide, ceil, fromiter = np.add, np.subtract, np.multiply, np.divide, np.ceil, np.fromiter
    log, f64 = math.log, np.float64
    arguments = np.empty(2 * m)  # digamma's (shifted to 12 and up), then trigamma's squared
    powers, halves = np.empty(2 * m), np.empty(2 * m)
    poly, out = np.empty(2 * m), np.empty(2 * m)
    shifted, squares, psi, tri = arguments[:m], arguments[m:], out[:m], out[m:]
    c0, c1, c2, c3, c4 = (np.repeat(np.array(pair, dtype=np.float64), m) for pair in _HORNER)

    def values(x: np.ndarray) -> np.ndarray:
        if not (x[0] > 1e-4 and x[-1] < _INF):
            listed = x.tolist()
            psi[:] = [digamma_arx(v) for v in listed]
            tri[:] = [trigamma_arx(v) for v in listed]
            return out
        below = int(x.searchsorted(12.0))  # the arguments digamma shifts (x < 12)
        if below:
            low = x[:below]
            rest = subtract(_SHIFT_UP_TO, low)  # 12 - x and 8 - x: the steps i < these
            step = low[:, None] + _STEP         # x + i
            # True / (x + i) = 1.0 / (x + i) for the steps taken, False / (x + i) = 0.0 after
            sums = divide(_STEP < rest.reshape(-1, 1), np.concatenate((step, step * step))).cumsum(axis=1)[:, -1]
            add(low, ceil(rest[0]), out=shifted[:below])
            shifted[below:] = x[below:]
        else:
            shifted[:] = x
        multiply(x, x, out=squares)
        divide(1.0, arguments, out=powers)        # r = 1 / y for digamma, 1 / x^2 for trigamma
        multiply(powers, 0.5, out=halves)         # r / 2, 0.5 r
        multiply(powers[:m], powers[:m], out=powers[:m])  # digamma's r2 = r^2
        multiply(powers, c0, out=poly)
        add(poly, c1, out=poly)
        multiply(poly, powers, out=poly)
        add(poly, c2, out=poly)
        multiply(poly, powers, out=poly)
        add(poly, c3, out=poly)
        multiply(poly, powers, out=poly)
        add(poly, c4, out=poly)
        multiply(poly, powers, out=poly)          # digamma's tail r2 p, trigamma's r p
        # digamma: (-shift + (ln y - r / 2)) - r2 p, and -shift + v is v - shift
        subtract(fromiter(map(log, shifted.tolist()), f64, m), halves[:m], out=psi)
        if below:
            subtract(psi[:below], sums[:below], out=psi[:below])
        subtract(psi, poly[:m], out=psi)
        # trigamma: 0.5 r + (1 + r p) / x from 12 on (y = x); the shifts' sums below
        add(poly[m:], 1.0, out=tri)
        divide(tri, x, out=tri)
        add(tri, halves[m:], out=tri)
        if below:
            tri[:below] = sums[below:]
        return out

    return values
