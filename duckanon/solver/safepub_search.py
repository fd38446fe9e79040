"""SafePub's data-dependent search (Bild, Kuhn & Prasser, "SafePub: A Truthful Data Anonymization
Algorithm With Strong Privacy Guarantees", PoPETs 2018(1):67-87), as ARX implements it:
the score functions of its metrics (metric/v2/*.java `getScore()`), the exponential mechanism
(dp/ExponentialMechanism.java) and the walk over the lattice (algorithm/DataDependentEDDPAlgorithm.java).
Pure functions over a histogram of the SAMPLED rows; sampling, k and beta are the caller's:
`data_dependent_search(ScoreSpace.from_bound(bound_hierarchies), sampled_histogram, n_total, k,
metric, epsilon_search, steps).levels` is the node to publish the sample at (classes below k
removed); `steps` counts expansions (ARX's SearchStepSemantics.EXPANSIONS; ARX's plain
`setHeuristicSearchStepLimit(n)` counts checks and walks n / #QIs expansions).

Scores (ARX's, already divided by their sensitivity, higher is better). A node's classes are the
sampled rows generalized to its levels; a class of fewer than k sampled rows is suppressed; the
rows the sample left out count as suppressed too (ARX's `pcount - count`). With N the rows of the
whole input, d the QIs, kept = sampled rows in classes of at least k rows, out = N - kept:
  * loss: -(d * out + sum_j sum_kept share_j) / (d * max(k - 1, 1)), share_j = (hierarchy rows
    under the cell's label) / (hierarchy rows) (DomainShareReliable);
  * precision: -(d * out + kept * sum_j level_j / height_j) / (d * max(k - 1, 1));
  * discernibility: -(N * out + sum_kept-classes size^2) / (N * c(k)), c(k) = k^2 / (k - 1) + 1,
    c(1) = 5 (MetricSDNMDiscernability);
  * aecs: kept classes + 1 when any row is out (MetricSDAECS; sensitivity 1);
  * entropy: -sum_j (N * (out + kept cells whose label is the hierarchy's single root) +
    sum_{other labels v} kept(v)^2) / (N * d * c(k)) (MetricMDNUEntropyPrecomputed).
The sums are exact (integers and fractions), as ARX's BigFraction, then one float.

The exponential mechanism draws candidate i with probability exp(eps * s_i / 2) / sum (s_i the
score divided by its sensitivity), computed in log space (the largest exponent subtracted), with
a uniform draw from the operating system's cryptographic source (random.SystemRandom) unless the
caller passes another source (tests only). Like ARX's, it samples from doubles: the distribution
is the exact one up to floating-point rounding (ARX bounds the resulting excess of epsilon by
about log((1 + n 2^-51)^2) for n candidates).

Range-bounded weights (`range_bounded=True`, what ANONYMIZE uses): ARX's factor 2 in
exp(eps * s / 2) covers scores that may move anywhere in [-1, 1] sensitivities between neighbours.
Loss's and precision's move less: within one interval of width w = k / (k - 1) (score_range's
docstring has the proof, tests/solver/test_safepub_search.py checks it by enumeration), so every
draw weighs exp(eps * s / w) at the same epsilon: the same privacy, about twice as sharp for the k
that SafePub derives (w = 1.014 at k = 74). The scores are not monotone (adding a row raises some
nodes' scores and lowers others'), so the factor cannot drop to 1. Permute-and-flip
(permute_and_flip; McKenna & Sheldon 2020) is here for the benchmarks: with ARX's factor 2 it was
no better than the exponential mechanism in bench_safepub.py's runs, and its privacy with
range-bounded weights is not proven here, so ANONYMIZE does not use it.

The walk (ARX's): the top node is the first pivot; at each of `steps` steps the pivot's
predecessors (one level lower in one QI) not yet candidates join the candidates, the pivot
leaves them, and the exponential mechanism with epsilon_search / steps (rounded down) picks the
next pivot among them; the walk ends early when no candidate is left. A node that was a pivot can
become a candidate again as the predecessor of a later pivot, as in ARX (its map only holds the
current candidates).

What is published, and why it spends only epsilon_search. ARX publishes the pivot with the best
score seen (AbstractAlgorithm.trackOptimum, exact scores, ties to the lower level). The pivots
are the outputs of `steps` exponential mechanisms of epsilon_search / steps each, chosen
adaptively, so by sequential (adaptive) composition the SEQUENCE of pivots is
epsilon_search-differentially private, and anything computed from that sequence alone is too
(post-processing). Picking the best of them by their exact scores is not computed from the
sequence alone: it reads the data again, without noise. One step on a lattice of two nodes
shows it (tests/solver/test_safepub_search.py): the walk's only candidate is the bottom, so the
pivots are the same on every input, and the output is the better of the two exact scores. Two
samples one row apart can rank them differently (the scores move by less than one sensitivity),
so the output is the top with probability 1 on one and 0 on the other; in the whole pipeline the
added row is sampled with probability beta, and no finite epsilon with delta below about beta
covers that. So duckanon does not publish the best pivot. It publishes:
  * `publish = 'last'`: the last pivot. Post-processing of the pivot sequence: exactly
    epsilon_search, the accounting of the paper's composition argument (epsilon_search split
    over the steps' mechanisms, as ARX splits it);
  * `publish = 'select'` (the default, select_share 0.5): the walk takes (1 - select_share) x
    epsilon_search, split over its
    steps, and one more exponential mechanism of select_share x epsilon_search picks among every
    node the walk scored (the pivots and their predecessors: a set fixed by the pivot sequence
    alone, so choosing it spends nothing); the two parts compose to epsilon_search. With a small
    budget over many steps each step's draw is close to uniform (epsilon 0.1 over 100 steps
    weighs a score difference of 100 by e^0.05), so the walk is close to a random walk whatever
    it is given, and the budget does more in the one final choice. Measured (BENCHMARKS.md,
    "Differential privacy (SafePub) beside ARX"): on Adult and CUP at epsilon 0.5, 1, 2 with 10%
    for the search over 100 steps the median Loss of 'select' was below the last pivot's in 4 of
    6 cases (a share of 0.9 did better on CUP, no better on Adult); with ARX's test setting
    (epsilon 2, half of it for 10 steps) a share of 0.9 was the worst of the three and 0.5 within
    0.02 of 'last': 0.5 is the module's default that held up in both with ARX's weights. With
    range-bounded weights (ANONYMIZE's: differential_privacy.searched_levels) a share of 0.9 or
    1 was measured better than 0.5 on Adult at epsilon 1 and 2 with 100 steps (BENCHMARKS.md,
    "Utility at equal privacy"), and ANONYMIZE uses 0.9; ARX's 10-step setting was not measured
    with them.
`publish = 'best_pivot'` reproduces ARX's choice for comparisons (benchmarks/bench_safepub.py)
and is outside the accounting: the statement layer must not offer it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram

SCORES = ("loss", "precision", "discernibility", "aecs", "entropy")
PUBLISH = ("last", "select", "best_pivot")
MECHANISMS = ("exponential", "permute_and_flip")


@dataclass(frozen=True)
class ScoreSpace:
    """What the scores need of the QIs' hierarchies.

    `level_codes[j]` (n_values_j, H_j + 1): the code of value v at level h (dense per level).
    `leaves[j][h]` per code of level h the hierarchy rows under it; `domain[j]` the hierarchy rows.
    `root[j][h]` per code of level h whether its label is the hierarchy's single top label
    (all False when the top level has several labels: ARX's rootValues = -1).
    """

    level_codes: list[np.ndarray]
    leaves: list[list[np.ndarray]]
    domain: list[int]
    root: list[list[np.ndarray]]

    @property
    def m(self) -> int:
        return len(self.level_codes)

    @property
    def heights(self) -> tuple[int, ...]:
        return tuple(c.shape[1] - 1 for c in self.level_codes)

    @classmethod
    def from_bound(cls, hierarchies) -> "ScoreSpace":
        """From duckanon's bound hierarchies (hierarchy.BoundHierarchy)."""
        level_codes, leaves, domain, root = [], [], [], []
        for h in hierarchies:
            level_codes.append(np.asarray(h.codes, dtype=np.int64))
            leaves.append([np.asarray(h.domain_leaves(level), dtype=np.int64) for level in range(h.height + 1)])
            domain.append(int(h.domain_size))
            top = h.level_labels(h.height)
            single = top[0] if h.n_groups(h.height) == 1 else None
            root.append([np.array([single is not None and label == single for label in h.level_labels(level)])
                         for level in range(h.height + 1)])
        return cls(level_codes, leaves, domain, root)

    @classmethod
    def from_rows(cls, hierarchy_rows: list[list[list[str]]], values: list[list[str]]) -> "ScoreSpace":
        """From ARX hierarchy rows ([value, level 1 label, ...] per row, per QI) and per QI the
        column's distinct values (value code = position): the labels count by text per level,
        as ARX's DomainShareReliable counts them."""
        level_codes, leaves, domain, root = [], [], [], []
        for rows, vals in zip(hierarchy_rows, values):
            width = max(len(r) for r in rows)
            rows = [list(r) + [r[-1]] * (width - len(r)) for r in rows]
            by_value = {r[0]: r for r in rows}
            missing = [v for v in vals if v not in by_value]
            if missing:
                raise AnonymizeError(f"{len(missing)} values are missing from the hierarchy")
            tops = {r[-1] for r in rows}
            single = next(iter(tops)) if len(tops) == 1 else None
            codes = np.zeros((len(vals), width), dtype=np.int64)
            col_leaves, col_root = [], []
            for h in range(width):
                index: dict[str, int] = {}
                for i, v in enumerate(vals):
                    codes[i, h] = index.setdefault(by_value[v][h], len(index))
                under = {label: 0 for label in index}
                for r in rows:
                    if r[h] in under:
                        under[r[h]] += 1
                col_leaves.append(np.array([under[label] for label in index], dtype=np.int64))
                col_root.append(np.array([label == single for label in index], dtype=bool))
            level_codes.append(codes)
            leaves.append(col_leaves)
            domain.append(len(rows))
            root.append(col_root)
        return cls(level_codes, leaves, domain, root)


def _c(k: int) -> Fraction:
    return Fraction(5) if k == 1 else Fraction(k * k, k - 1) + 1


def sensitivity(metric: str, k: int, n_total: int, m: int) -> Fraction:
    """What ARX divides each raw score by (the score function's sensitivity)."""
    if metric in ("loss", "precision"):
        return Fraction(m * max(k - 1, 1))
    if metric == "discernibility":
        return n_total * _c(k)
    if metric == "entropy":
        return n_total * m * _c(k)
    if metric == "aecs":
        return Fraction(1)
    raise AnonymizeError(f"unknown score function '{metric}' (known: {', '.join(SCORES)})")


# The score functions whose change under one record added or removed is bounded in a RANGE of width
# w = k / max(k - 1, 1) sensitivities (score_range), not just in [-1, 1] (width 2)
RANGE_BOUNDED = ("loss", "precision")


def score_range(metric: str, k: int) -> Fraction:
    """w: every node's score (already divided by the sensitivity) moves within an interval of
    width at most w between two neighbouring inputs, the same interval for all nodes of one pair.
    The exponential mechanism with weights exp(epsilon * s / w) is then epsilon-DP: for an output
    r, with d_r = s'(r) - s(r) in [a, b] and b - a <= w,
        P(r | D) / P(r | D') = exp(-epsilon d_r / w) * Z(D') / Z(D)
                             <= exp(-epsilon a / w) * exp(epsilon b / w) <= e^epsilon,
    and the inverse likewise (McSherry & Talwar's factor 2 is the case [a, b] = [-1, 1]; their
    monotone case, [0, 1], gives 1; Durfee & Rogers 2019 call such scores range-bounded).

    Loss and precision (N the input's rows, d the QIs, Delta = d * max(k - 1, 1)): the neighbour
    D' has one row x more, so N' = N + 1, and the sample S' is S (x not sampled) or S + x. The raw
    score is -(d * out + sum over kept rows of c(row)), out = N - kept, with c(row) in (0, d]
    (loss: the shares sum_j leaves/domain; precision: sum_j level_j / height_j, in [0, d]).
      * x not sampled: out + 1 at every node: the raw score moves by -d everywhere;
      * x sampled, at a node where its class has fewer than k - 1 sampled rows: out + 1: -d;
      * its class had k - 1: kept + k, out - (k - 1): +d (k - 1) - (the k rows' c) in [-d, d (k - 1)];
      * its class had k or more: kept + 1, out unchanged: -c(x) in [-d, 0].
    Every move lies in [-d, d (k - 1)] (k >= 2; k = 1: [-d, 0]): a width of d * max(k, 1), in
    sensitivities w = k / max(k - 1, 1) (at most 2: the factor 2 drops to w, about 1 for large k).
    Removing x is the same pair read backwards (the same width). The other score functions are
    not analysed here: they keep the factor 2 (w = 2), which ARX uses for all of them."""
    if metric in RANGE_BOUNDED:
        return Fraction(max(k, 1), max(k - 1, 1))
    return Fraction(2)


def _squares(counts: np.ndarray) -> int:
    """The sum of squares of non-negative counts, exactly (Python integers past int64's range)."""
    counts = np.asarray(counts, dtype=np.int64)
    if not len(counts) or int(counts.max()) ** 2 * len(counts) < 1 << 62:
        return int((counts * counts).sum())
    return int((counts.astype(object) ** 2).sum())


class Scorer:
    """ARX's scores of one sampled histogram's nodes (module docstring), with the classes' codes
    per QI and level gathered once (a walk scores hundreds of nodes of the same classes)."""

    def __init__(self, space: ScoreSpace, hist: Histogram, n_total: int, k: int, metric: str):
        self.sensitivity = sensitivity(metric, k, n_total, space.m)  # an unknown metric fails here
        self.space, self.hist, self.n_total, self.k, self.metric = space, hist, n_total, k, metric
        self.sizes = np.asarray(hist.sizes, dtype=np.int64)
        self.weights = self.sizes.astype(np.float64)
        self.dense_limit = max(4 * hist.n_classes, 1 << 16)
        self._codes: dict[tuple[int, int], np.ndarray] = {}
        self._leaves: dict[tuple[int, int], np.ndarray] = {}

    def codes(self, j: int, h: int) -> np.ndarray:
        """Every class's code of QI j at level h."""
        got = self._codes.get((j, h))
        if got is None:
            got = self._codes[(j, h)] = np.ascontiguousarray(self.space.level_codes[j][self.hist.codes[:, j], h])
        return got

    def leaves(self, j: int, h: int) -> np.ndarray:
        """Every class's hierarchy rows under its label of QI j at level h (the loss's share x domain)."""
        got = self._leaves.get((j, h))
        if got is None:
            got = self._leaves[(j, h)] = self.space.leaves[j][h][self.codes(j, h)]
        return got

    def _densify(self, key: np.ndarray, space: int) -> tuple[np.ndarray, int]:
        if space <= self.dense_limit:
            present = np.bincount(key, minlength=space) > 0
            dense = np.cumsum(present) - 1
            return dense[key], int(dense[-1]) + 1 if space else 0
        uniques, inverse = np.unique(key, return_inverse=True)
        return inverse.ravel().astype(np.int64), len(uniques)

    def groups(self, levels) -> tuple[np.ndarray, np.ndarray]:
        """Per class its group id at `levels`, and the sampled rows per group."""
        key = np.zeros(self.hist.n_classes, dtype=np.int64)
        radix = 1
        for j, h in enumerate(levels):
            card = len(self.space.leaves[j][h])
            if card <= 1:
                continue
            if radix * card >= 1 << 62:
                key, radix = self._densify(key, radix)
            key = key * card + self.codes(j, h)
            radix *= card
        group, n_groups = self._densify(key, radix)
        return group, np.bincount(group, weights=self.weights, minlength=n_groups).astype(np.int64)

    def raw(self, levels) -> Fraction:
        """The score before the division by the sensitivity, exactly."""
        group, sizes = self.groups(levels)
        weight = np.where(sizes[group] >= self.k, self.sizes, 0)
        kept = int(weight.sum())
        out, m, n, space = self.n_total - kept, self.space.m, self.n_total, self.space
        if self.metric == "loss":
            total = Fraction(m * out)
            for j, h in enumerate(levels):
                total += Fraction(int(np.dot(weight, self.leaves(j, h))), space.domain[j])
            return -total
        if self.metric == "precision":
            shares = sum((Fraction(h, H) if H else Fraction(0)) for h, H in zip(levels, space.heights))
            return -(m * out + kept * shares)
        if self.metric == "discernibility":
            return -Fraction(n * out + _squares(sizes[sizes >= self.k]))
        if self.metric == "aecs":
            return Fraction(int((sizes >= self.k).sum()) + (1 if out > 0 else 0))
        total = 0  # entropy
        for j, h in enumerate(levels):
            is_root = space.root[j][h]
            per_code = np.bincount(self.codes(j, h), weights=weight, minlength=len(is_root)).astype(np.int64)
            total += n * (out + int(per_code[is_root].sum())) + _squares(per_code[~is_root])
        return -Fraction(total)

    def score(self, levels) -> float:
        """ARX's `getScore()`: the raw score divided by its sensitivity, as a float."""
        return float(self.raw(levels) / self.sensitivity)


def node_groups(space: ScoreSpace, hist: Histogram, levels) -> tuple[np.ndarray, np.ndarray]:
    """Per class its group id at `levels`, and the sampled rows per group."""
    return Scorer(space, hist, 0, 1, "aecs").groups(levels)


def raw_score(metric: str, space: ScoreSpace, hist: Histogram, n_total: int, k: int, levels) -> Fraction:
    """ARX's score of publishing the sampled `hist` at `levels` before the division by the
    sensitivity (module docstring), exactly."""
    return Scorer(space, hist, n_total, k, metric).raw(levels)


def score(metric: str, space: ScoreSpace, hist: Histogram, n_total: int, k: int, levels) -> float:
    """ARX's `getScore()`: the raw score divided by its sensitivity, as a float."""
    return Scorer(space, hist, n_total, k, metric).score(levels)


def exponential_probabilities(scores, epsilon: float) -> np.ndarray:
    """exp(epsilon * s / 2) normalised, s the scores already divided by their sensitivity; in
    log space (the largest exponent subtracted first, as ARX's setDistribution)."""
    exponents = 0.5 * epsilon * np.asarray(scores, dtype=np.float64)
    weights = np.exp(exponents - exponents.max())
    return weights / weights.sum()


def exponential_mechanism(scores, epsilon: float, rng=None) -> int:
    """The index drawn by the exponential mechanism; `rng` has `.random()` (default: the
    operating system's cryptographic source)."""
    if not len(scores):
        raise AnonymizeError("the exponential mechanism needs at least one candidate")
    rng = rng if rng is not None else random.SystemRandom()
    exponents = 0.5 * epsilon * np.asarray(scores, dtype=np.float64)
    cumulative = np.cumsum(np.exp(exponents - exponents.max()))
    u = rng.random() * cumulative[-1]
    return min(int(np.searchsorted(cumulative, u, side="right")), len(cumulative) - 1)


def permute_and_flip(scores, epsilon: float, rng=None) -> int:
    """The index drawn by permute-and-flip (McKenna & Sheldon, "Permute-and-Flip: A new mechanism
    for differentially private selection", NeurIPS 2020): the candidates in a uniformly random
    order, each accepted with probability exp(epsilon * (s_i - s_max) / 2) (s the scores already
    divided by their sensitivity), the first accepted returned. It is epsilon-differentially
    private under exactly the exponential mechanism's condition (scores of sensitivity 1 after the
    division) and its expected score is never below the exponential mechanism's at the same
    epsilon (their Theorems 1 and 2). It ends: a best candidate is accepted with probability 1, so
    at most one pass over the candidates is made. `rng` has `.random()` and `.shuffle()`
    (default: the operating system's cryptographic source)."""
    if not len(scores):
        raise AnonymizeError("permute-and-flip needs at least one candidate")
    rng = rng if rng is not None else random.SystemRandom()
    values = np.asarray(scores, dtype=np.float64)
    accept = np.exp(0.5 * epsilon * (values - values.max()))
    order = list(range(len(values)))
    rng.shuffle(order)
    for i in order:
        if accept[i] >= 1.0 or rng.random() < accept[i]:
            return i
    return int(np.argmax(values))  # not reached: a best candidate's probability is 1


def select(scores, epsilon: float, mechanism: str, rng=None) -> int:
    """One private choice among the candidates by `mechanism` (MECHANISMS)."""
    if mechanism == "permute_and_flip":
        return permute_and_flip(scores, epsilon, rng)
    return exponential_mechanism(scores, epsilon, rng)


def per_step_epsilon(epsilon: float, parts: int) -> float:
    """epsilon / parts rounded down (ARX's IntervalArithmeticDouble lower bound), so that `parts`
    draws never spend more than epsilon."""
    if parts <= 0:
        return 0.0
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


def predecessors(levels: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The nodes one level lower in one QI."""
    return [levels[:j] + (h - 1,) + levels[j + 1:] for j, h in enumerate(levels) if h > 0]


@dataclass
class SearchResult:
    levels: tuple[int, ...]  # the node published
    pivots: list[tuple[int, ...]]  # the top, then the pivot of each step
    scores: dict[tuple[int, ...], float] = field(default_factory=dict)  # every node scored
    steps: int = 0  # steps taken (at most the steps asked for)
    epsilon_step: float = 0.0  # each draw of the walk
    publish: str = "select"
    epsilon_final: float = 0.0  # the final choice of 'select'; 0 otherwise
    mechanism: str = "exponential"
    sharpen: float = 1.0  # the draws weigh exp(epsilon * sharpen * s / 2): 2 / score_range when range-bounded


def data_dependent_search(space: ScoreSpace, hist: Histogram, n_total: int, k: int, metric: str,
                          epsilon_search: float, steps: int, publish: str = "select", rng=None,
                          select_share: float = 0.5, mechanism: str = "exponential",
                          range_bounded: bool = False) -> SearchResult:
    """ARX's walk from the top (module docstring); `hist` holds the sampled rows, `n_total` the
    rows of the whole input. Never more than `steps` draws of the walk (and, with 'select', one
    more). `select_share`: the share of epsilon_search of the final choice of 'select' (1: the
    walk spends nothing, a data-independent random walk). `mechanism`: how every draw (the walk's
    and the final choice) is made, MECHANISMS."""
    if publish not in PUBLISH:
        raise AnonymizeError(f"unknown publish choice '{publish}' (known: {', '.join(PUBLISH)})")
    if mechanism not in MECHANISMS:
        raise AnonymizeError(f"unknown mechanism '{mechanism}' (known: {', '.join(MECHANISMS)})")
    if steps < 0 or epsilon_search < 0:
        raise AnonymizeError("search_steps and epsilon_search must not be negative")
    if not 0 < select_share <= 1:
        raise AnonymizeError("select_share must lie in (0, 1]")
    rng = rng if rng is not None else random.SystemRandom()
    scorer = Scorer(space, hist, n_total, k, metric)  # an unknown metric fails before any work
    scores: dict[tuple[int, ...], float] = {}

    def scored(levels):
        if levels not in scores:
            scores[levels] = scorer.score(levels)
        return scores[levels]

    final = 0.0
    walk = epsilon_search
    if publish == "select":
        final = epsilon_search * select_share
        walk = epsilon_search - final
        while final + walk > epsilon_search:  # rounding never spends more than the budget
            walk = math.nextafter(walk, 0.0)
    epsilon_step = per_step_epsilon(walk, steps)
    # the draws take epsilon * 2 / w (exponential_mechanism weighs exp(epsilon * s / 2)); the
    # privacy spent is epsilon_step and final, as recorded
    sharpen = 1.0
    if range_bounded:
        if mechanism != "exponential":
            raise AnonymizeError("range_bounded applies to the exponential mechanism only")
        exact = Fraction(2) / score_range(metric, k)
        sharpen = float(exact)
        while Fraction(sharpen) > exact:  # rounded down, never up
            sharpen = math.nextafter(sharpen, 0.0)
    pivot = space.heights
    scored(pivot)
    pivots = [pivot]
    candidates: dict[tuple[int, ...], float] = {pivot: scores[pivot]}
    taken = 0
    for _ in range(steps):
        for p in predecessors(pivot):
            if p not in candidates:
                candidates[p] = scored(p)
        del candidates[pivot]
        if not candidates:
            break
        keys = list(candidates)
        pivot = keys[select([candidates[c] for c in keys], epsilon_step * sharpen, mechanism, rng)]
        pivots.append(pivot)
        taken += 1
    return SearchResult(_published(pivots, scores, publish, final * sharpen, rng, mechanism), pivots, scores, taken,
                        epsilon_step, publish, final, mechanism, sharpen)


def _published(pivots, scores, publish: str, epsilon_final: float, rng, mechanism: str) -> tuple[int, ...]:
    if publish == "last":
        return pivots[-1]
    if publish == "select":
        scored = list(scores)  # the pivots and their predecessors, in the order first scored
        return scored[select([scores[p] for p in scored], epsilon_final, mechanism, rng)]
    best = pivots[0]  # ARX's trackOptimum: better score, ties to the lower level
    for p in pivots[1:]:
        if scores[p] > scores[best] or (scores[p] == scores[best] and sum(p) < sum(best)):
            best = p
    return best
