"""(epsilon, delta)-differential privacy as SafePub does it (Bild, Kuhn & Prasser, PoPETs 2018(1)),
in ARX's arithmetic: the parameters (`parameters`: the sampling probability beta and the class
size k derived from epsilon_anonymization and delta, as `org.deidentifier.arx.dp.ParameterCalculation`
computes them, in ARX's interval arithmetic `reliability.IntervalArithmeticDouble`, every decision
taken on the same bounds) and the sample (`sample_counts`: each record kept independently with
probability beta, drawn from the operating system's cryptographic source).

Pure functions: no engine, no seed. The release built from the sample suppresses (removes) every
class below k; `tests/solver/test_differential_privacy.py` holds ARX's own (k, beta) for a grid,
produced by benchmarks/arx_dp/ArxParameters.java.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram
from duckanon.solver.generalize import TOP
from duckanon.solver.partition import STAR, Solution

# an interval of ARX's arithmetic is a (lower, upper) pair of floats
Interval = tuple


def _down(value: float) -> float:
    return math.nextafter(value, -math.inf)


def _up(value: float) -> float:
    return math.nextafter(value, math.inf)


def _checked(*values: float) -> None:
    for value in values:
        if not math.isfinite(value):
            raise AnonymizeError(f"the differential privacy parameters are numerically unstable ({value})")


def _binary(a: Interval, b: Interval, operation) -> Interval:
    """IntervalArithmeticDouble.apply of two operands: the four bounds' results, widened by one
    float each way."""
    values = (operation(a[0], b[0]), operation(a[0], b[1]), operation(a[1], b[0]), operation(a[1], b[1]))
    _checked(*values)
    return _down(min(values)), _up(max(values))


def _unary(a: Interval, operation, expand: bool = True) -> Interval:
    try:
        low, high = operation(a[0]), operation(a[1])
    except (ValueError, OverflowError):  # Java's Math gives NaN or infinity there: ARX's checkValue refuses it
        low = high = math.nan
    _checked(low, high)
    low, high = min(low, high), max(low, high)
    return (_down(low), _up(high)) if expand else (low, high)


def _add(a, b):
    return _binary(a, b, lambda x, y: x + y)


def _sub(a, b):
    return _binary(a, b, lambda x, y: x - y)


def _mul(a, b):
    return _binary(a, b, lambda x, y: x * y)


def _div(a, b):
    return _binary(a, b, lambda x, y: x / y)


def _exp(a):
    return _unary(a, math.exp)


def _log(a):
    return _unary(a, math.log)


def _pow(a, exponent: int):
    return _unary(a, lambda x: math.pow(x, exponent))


def _point(value: float) -> Interval:
    return float(value), float(value)


ONE, MINUS_ONE = _point(1.0), _point(-1.0)
PI = (3.1415926535897932384, 3.1415926535897932385)


def _less(a: Interval, b: Interval) -> bool:
    """lessThan: undecidable (an error) when the intervals overlap."""
    if not (a[1] < b[0] or b[1] < a[0]):
        raise AnonymizeError("the differential privacy parameters are undecidable in ARX's interval arithmetic")
    return a[1] < b[0]


def _vbinary(a, b, operation):
    """_binary on arrays of bounds (numpy's + - * / round as the scalar operations do)."""
    values = (operation(a[0], b[0]), operation(a[0], b[1]), operation(a[1], b[0]), operation(a[1], b[1]))
    low, high = np.minimum.reduce(values), np.maximum.reduce(values)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise AnonymizeError("the differential privacy parameters are numerically unstable")
    return np.nextafter(low, -np.inf), np.nextafter(high, np.inf)


def _vunary(a, function):
    """_unary on arrays, the function applied bound by bound through `math` (numpy's exp and log
    may round otherwise; sqrt rounds correctly in both)."""
    if function is math.sqrt:
        low, high = np.sqrt(a[0]), np.sqrt(a[1])
    else:
        try:
            low = np.fromiter(map(function, a[0].tolist()), dtype=np.float64, count=len(a[0]))
            high = np.fromiter(map(function, a[1].tolist()), dtype=np.float64, count=len(a[1]))
        except (ValueError, OverflowError):
            raise AnonymizeError("the differential privacy parameters are numerically unstable") from None
    low, high = np.minimum(low, high), np.maximum(low, high)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise AnonymizeError("the differential privacy parameters are numerically unstable")
    return np.nextafter(low, -np.inf), np.nextafter(high, np.inf)


def _vpoint(values) -> tuple:
    values = np.asarray(values, dtype=np.float64)
    return values, values


_ADD, _SUB, _MUL, _DIV = (lambda x, y: x + y), (lambda x, y: x - y), (lambda x, y: x * y), (lambda x, y: x / y)


# At most this many binomial terms: the work and memory of the calculation grow as epsilon falls
# (n runs to about k / gamma, and every n has n (1 - gamma) terms): the whole documented grid takes
# at most 1.3 million (epsilon 3, delta 1e-12), epsilon 0.02 with delta 1e-5 two million (about
# 0.4 GB), epsilon 0.01 eight million (1.4 GB, 156 s on a loaded machine), and epsilon 1e-4 took a
# process past the machine's memory. Counted before each batch is allocated, so a refusal costs nothing.
TERMS_LIMIT = 2_500_000


class ParametersTooCostly(Exception):
    """The calculation would exceed TERMS_LIMIT terms (the caller names epsilon and delta)."""


class _Sequences:
    """ParameterCalculation's a_n (the binomial tail above n * gamma) and c_n (its Chernoff bound)
    for n = 0, 1, ..., computed in batches of n: every term P(Binomial(n, beta) = j) of a batch in
    one array (the same operations, in the same order, as IntervalArithmeticDouble on one term)."""

    def __init__(self, beta: Interval, gamma: Interval):
        self.beta, self.gamma = beta, gamma
        self.a_low: list[float] = []
        self.a_high: list[float] = []
        self.c_high: list[float] = []
        self.stirling = (np.zeros(1), np.zeros(1))  # index 0 unused
        self.terms = 0  # binomial terms asked for so far (TERMS_LIMIT)
        self.term = _sub(_mul(gamma, _log(_div(gamma, beta))), _sub(gamma, beta))

    def grow(self, upto: int) -> None:
        first = len(self.a_low)
        upto = max(upto, 2 * first, 64)
        ns = np.arange(first, upto, dtype=np.float64)
        starts = (np.floor(_vbinary(_vpoint(ns), self.gamma, _MUL)[0]) + 1).astype(np.int64)
        self.terms += int(np.maximum(ns.astype(np.int64) - starts, 0).sum())
        if self.terms > TERMS_LIMIT:
            raise ParametersTooCostly(self.terms)
        self._stirling_upto(upto)
        lows, highs, counts = self._interior(ns.astype(np.int64), starts)
        position = 0
        for n, start, count in zip(range(first, upto), starts.tolist(), counts.tolist()):
            low = high = 0.0
            for term_low, term_high in zip(lows[position:position + count], highs[position:position + count]):
                low, high = _down(low + term_low), _up(high + term_high)
            position += count
            if start <= n:  # the last term, j = n: beta^n
                last = _pow(self.beta, n) if n > 0 else _pow(_sub(ONE, self.beta), 0)
                low, high = _down(low + last[0]), _up(high + last[1])
            _checked(low, high)
            self.a_low.append(low)
            self.a_high.append(high)
        c = _vunary(_vbinary(MINUS_ONE, _vbinary(_vpoint(ns), self.term, _MUL), _MUL), math.exp)
        self.c_high.extend(c[1].tolist())

    def _stirling_upto(self, upto: int) -> None:
        """_stirling_error of every integer up to `upto`, as arrays (index: the integer)."""
        have = len(self.stirling[0])
        if have > upto:
            return
        value = _vpoint(np.arange(have, upto + 1, dtype=np.float64))
        cube = _vunary(value, lambda x: math.pow(x, 3))
        fifth = _vunary(value, lambda x: math.pow(x, 5))
        invert = lambda x: 1.0 / x  # noqa: E731
        base = _vbinary(_vunary(_vbinary(_point(12.0), value, _MUL), invert),
                        _vunary(_vbinary(_point(360.0), cube, _MUL), invert), _SUB)
        bound = _vunary(_vbinary(_point(1260.0), fifth, _MUL), invert)
        offset = np.maximum(np.abs(bound[0]), np.abs(bound[1]))
        self.stirling = (np.concatenate([self.stirling[0], np.nextafter(base[0] - offset, -np.inf)]),
                         np.concatenate([self.stirling[1], np.nextafter(base[1] + offset, np.inf)]))

    def _interior(self, ns: np.ndarray, starts: np.ndarray):
        """P(j) for every n of the batch and every j in [start, n), flattened (n by n, j rising)."""
        counts = np.maximum(ns - starts, 0)
        owners = np.repeat(ns, counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        js = np.repeat(starts, counts) + offsets
        if len(js) == 0:
            return [], [], counts
        big_n, big_k, rest = _vpoint(owners), _vpoint(js), _vpoint(owners - js)
        p = self.beta
        n_p = _vbinary(big_n, p, _MUL)
        n_q = _vbinary(big_n, _sub(ONE, p), _MUL)
        deviance = _vbinary(_vbinary(big_k, _vunary(_vbinary(big_k, n_p, _DIV), math.log), _MUL),
                            _vbinary(rest, _vunary(_vbinary(rest, n_q, _DIV), math.log), _MUL), _ADD)
        table_low, table_high = self.stirling
        of = lambda values: (table_low[values], table_high[values])  # noqa: E731
        stirling = _vbinary(_vbinary(of(owners), of(js), _SUB), of(owners - js), _SUB)
        two_pi = _mul(_point(2.0), PI)
        root = _vunary(_vbinary(big_n, _vbinary(_vbinary(two_pi, big_k, _MUL), rest, _MUL), _DIV), math.sqrt)
        terms = _vunary(_vbinary(_vbinary(_vunary(root, math.log), stirling, _ADD), deviance, _SUB), math.exp)
        return terms[0].tolist(), terms[1].tolist(), counts


def _delta_of(k: int, sequences: _Sequences) -> Interval:
    """The delta a class size k achieves: the largest a_n from n_m = ceil(k / gamma - 1) on, until
    the bound c_n falls below it (ARX's calculateDelta; the max of intervals is undecidable when
    they overlap)."""
    n = math.ceil(_sub(_div(_point(k), sequences.gamma), ONE)[0])
    low, high = -1.7976931348623157e308, -1.7976931348623157e308
    bound_high = 1.7976931348623157e308
    a_low, a_high, c_high = sequences.a_low, sequences.a_high, sequences.c_high
    while low <= bound_high:  # lessThanOrOverlap(delta, bound)
        if n >= len(a_low):
            sequences.grow(n + 1)
        next_low, next_high = a_low[n], a_high[n]
        if high == next_low or high < next_low:
            low, high = next_low, next_high
        elif not (next_high == low or next_high < low):
            raise AnonymizeError("the differential privacy parameters are undecidable in ARX's interval arithmetic")
        bound_high = c_high[n]
        n += 1
    return low, high


@dataclass(frozen=True)
class Parameters:
    """SafePub's parameters: beta, the sampling probability (the lower bound of 1 - e^-epsilon), and
    k, the smallest class published."""

    k: int
    beta: float


@lru_cache(maxsize=64)
def parameters(epsilon_anonymization: float, delta: float) -> Parameters:
    """ARX's ParameterCalculation(epsilon_anonymization, delta): beta = 1 - e^-epsilon and the k
    derived from them. The loop is ARX's to the letter, so k is one more than the first size whose
    delta falls below the given one (ARX increments k after that size's test)."""
    epsilon, wanted = _point(epsilon_anonymization), _point(delta)
    beta = _sub(ONE, _exp(_mul(MINUS_ONE, epsilon)))
    power = _exp(epsilon)
    gamma = _div(_add(_sub(power, ONE), beta), power)
    sequences = _Sequences(beta, gamma)
    k, achieved = 1, _point(1.7976931348623157e308)
    try:
        while not _less(achieved, wanted):
            achieved = _delta_of(k, sequences)
            k += 1
    except ParametersTooCostly:
        raise AnonymizeError(f"the differential privacy parameters at epsilon_anonymization {epsilon_anonymization:g} "
                             f"and delta {delta:g} need more than {TERMS_LIMIT:,} terms of ARX's parameter "
                             "calculation: use a larger epsilon or delta") from None
    return Parameters(k=k, beta=beta[0])


def anonymization_budget(epsilon: float, epsilon_search: float) -> float:
    """The budget left to the anonymization: epsilon itself without a search, else the lower bound of
    epsilon - epsilon_search in ARX's arithmetic (EDDifferentialPrivacy.initialize)."""
    if epsilon_search <= 0.0:
        return epsilon
    return _sub(_point(epsilon), _point(epsilon_search))[0]


def _uniforms(count: int) -> np.ndarray:
    """`count` uniforms in [0, 1) from the operating system's cryptographic source (53 random bits each)."""
    if count == 0:
        return np.zeros(0)
    words = np.frombuffer(secrets.token_bytes(8 * count), dtype=np.uint64)
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def sample_counts(counts: np.ndarray, beta: float) -> np.ndarray:
    """Each record kept independently with probability beta: a class of c records keeps
    Binomial(c, beta) of them, the sum of c Bernoulli(beta) draws from cryptographic uniforms
    (one uniform per record, as ARX's SecureRandom.nextDouble() < beta)."""
    counts = np.asarray(counts, dtype=np.int64)
    kept = _uniforms(int(counts.sum())) < beta
    owners = np.repeat(np.arange(len(counts)), counts)
    return np.bincount(owners, weights=kept, minlength=len(counts)).astype(np.int64)


def private_release(hist: Histogram, beta: float, k: int, generalize=None) -> Solution:
    """SafePub's release of `hist` without a search: every record sampled with probability beta,
    the sample generalized by the fixed scheme (`generalize(sample) -> Solution | None`, the
    hierarchies at the user's levels; None: the classes as they are) and every class below k
    removed. Unsampled and removed records are not published (dropped groups). The solution is
    over `hist`'s classes; its notes hold the sampled rows."""
    sampled_counts = sample_counts(hist.sa_counts.ravel(), beta).reshape(hist.sa_counts.shape)
    present = np.flatnonzero(sampled_counts.sum(axis=1) > 0)
    sample = Histogram(hist.codes[present], sampled_counts[present], hist.columns)
    published = generalize(sample) if generalize is not None and sample.n_rows >= k else None
    if published is None:  # no generalization, or a sample too small for any class of k
        published = classes_as_they_are(sample, k)
    solution = _with_unsampled(published, hist, present, sampled_counts)
    solution.notes["sampled_rows"] = int(sampled_counts.sum())
    return solution


def classes_as_they_are(hist: Histogram, k: int) -> Solution:
    """Each class its own group, published with its own values; the classes below k removed."""
    cells = np.argwhere(hist.sa_counts > 0)
    return Solution(cells[:, 0], cells[:, 1], cells[:, 0].copy(), hist.sa_counts[cells[:, 0], cells[:, 1]],
                    group_rep=hist.codes.copy(), method="none", dropped=hist.sizes < k,
                    group_labels=[None] * hist.m, masked=np.zeros(hist.codes.shape, dtype=bool))


def _with_unsampled(published: Solution, hist: Histogram, present: np.ndarray, sampled: np.ndarray) -> Solution:
    """`published` (over the sample's classes) over `hist`'s classes, with one group more, dropped,
    holding every unsampled record."""
    extra = len(published.group_rep)
    unsampled = np.argwhere(hist.sa_counts > sampled)
    classes = np.concatenate([present[published.part_class], unsampled[:, 0]])
    sa = np.concatenate([published.part_sa, unsampled[:, 1]])
    groups = np.concatenate([published.part_group, np.full(len(unsampled), extra)])
    counts = np.concatenate([published.part_count, (hist.sa_counts - sampled)[unsampled[:, 0], unsampled[:, 1]]])
    dropped = ~published.kept_groups
    labels = None if published.group_labels is None else \
        [None if column is None else list(column) + [TOP] for column in published.group_labels]
    grown = lambda rows, fill: None if rows is None else np.concatenate([rows, np.full((1, *rows.shape[1:]), fill, dtype=rows.dtype)])  # noqa: E731,E501
    return replace(published, part_class=classes, part_sa=sa, part_group=groups, part_count=counts,
                   group_rep=grown(published.group_rep, STAR), dropped=np.append(dropped, True),
                   group_labels=labels, masked=grown(published.masked, True),
                   group_levels=grown(published.group_levels, 0),
                   group_population=None if published.group_population is None else
                   np.append(published.group_population, 0), notes=dict(published.notes))


# the share of epsilon_search of the search's final choice, with range-bounded weights (measured:
# BENCHMARKS.md, "Differential privacy (SafePub) beside ARX", "Utility at equal privacy")
SELECT_SHARE = 0.9


def searched_levels(hierarchies, sample: Histogram, n_total: int, k: int, metric: str, epsilon_search: float,
                    steps: int) -> tuple[tuple[int, ...], dict]:
    """SafePub's data-dependent search on the sample (solver/safepub_search: ARX's walk from the
    top by the exponential mechanism over the metric's score), publishing safepub_search's
    `select` with SELECT_SHARE: the walk spends 1 - SELECT_SHARE of epsilon_search over its steps,
    one more exponential mechanism the rest choosing among every node the walk scored; they compose
    to exactly epsilon_search (ARX's best pivot re-reads the data without noise, see
    safepub_search). Every draw weighs exp(epsilon * s / w), w = safepub_search.score_range (k / (k - 1)
    for loss and precision, ARX's 2 for the others): the same privacy, sharper. The levels and
    what the notes say."""
    from duckanon.solver.safepub_search import ScoreSpace, data_dependent_search, score_range

    result = data_dependent_search(ScoreSpace.from_bound(hierarchies), sample, n_total, k, metric, epsilon_search,
                                   steps, publish="select", select_share=SELECT_SHARE, range_bounded=True)
    return tuple(result.levels), {"search_steps_taken": result.steps, "epsilon_step": result.epsilon_step,
                                  "epsilon_final_choice": result.epsilon_final,
                                  "score_range": float(score_range(metric, k)),
                                  "search_publishes": "select: the final choice among every node the walk scored"}
