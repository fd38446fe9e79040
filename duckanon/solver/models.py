"""Privacy models (ARX's "criteria"): each says whether a group of rows is publishable.

All share one interface, vectorised over groups: `satisfied(sizes, sa_counts)` takes the group
sizes (G,) and SA counts (G, S) and returns a boolean (G,); `ok(counts, size)` is the same test
for one group given as Python numbers (the per-tuple loops of Hilbert/TP); `check_feasible(total)`
raises when no partition of the table can satisfy the model; `deficit` says how far groups are
from satisfying it (repair's merge order).

What a solver may assume about a model is said by class-level capability flags, read through a
`Request` (request.py) rather than by testing classes:
  needs_sa                    satisfied() reads the SA counts (False: the group size alone)
  closed_under_merging        the union of two satisfying groups satisfies it (the merge-based
                              repair, topdown and local search rely on it)
  monotone_with_suppression   a lattice node that removes rows for it removes no fewer at any
                              finer node (only size-based models: coarser classes only grow)
  monotone_with_generalization  a lattice node that satisfies it (removing nothing) makes every
                              coarser node satisfy it, and a failing node every finer one fail
                              (ARX's isMonotonicWithGeneralization; true of every model closed
                              under merging)
  needs_population            it reads the population rows matching each group
                              (`satisfied_in`), beyond the histogram: only the lattice counts them
  global_constraint           a condition on the whole release (`holds` on every published
                              group), not on each group: `satisfied` accepts every group, and the
                              methods enforce it by suppressing (lattice) or merging groups
  milp_encodable              the exact MILP has a linear form of it

One class per variant: an l-diversity or t-closeness built from the statement's words goes
through `LDiversity(l, variant, c)` / `TCloseness(t, sa_total, distance, ...)` (or the
`l_diversity` / `t_closeness` factories), which return the variant's class.
"""

from __future__ import annotations

import math

import numpy as np

from duckanon import methods
from duckanon.errors import AnonymizeError
from duckanon.solver import emd
from duckanon.solver.population import ESTIMATORS, kmap_derived_k, population_uniques, population_uniques_of_profile

# Relative slack for floating-point comparisons of EMD against t, so that a group exactly at the
# limit (EMD == t in exact arithmetic) is accepted.
EMD_TOLERANCE = 1e-9


def shares(sa_total) -> np.ndarray:
    """The table's distribution of the sensitive values from their counts (all 0 for no rows)."""
    total = np.asarray(sa_total, dtype=np.float64)
    return total / max(total.sum(), 1.0)


class PrivacyModel:
    """A model's parameters are fixed at construction: models are values (equal when their class
    and parameters are, hashable, immutable)."""

    name = "model"
    needs_sa = True
    closed_under_merging = True
    monotone_with_suppression = False
    monotone_with_generalization = True
    needs_population = False
    global_constraint = False
    milp_encodable = False

    def _parameters(self) -> tuple:
        """The values that identify the model (equality, hash, repr)."""
        return ()

    def __eq__(self, other):
        return type(other) is type(self) and other._parameters() == self._parameters()

    def __hash__(self):
        return hash((type(self).__name__, self._parameters()))

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **values) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __repr__(self):
        return f"{type(self).__name__}{self._parameters()!r}"

    def satisfied(self, sizes: np.ndarray, sa_counts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def ok(self, counts: list[int], size: int) -> bool:
        """`satisfied` for one group (subclasses answer faster without numpy where they can)."""
        return bool(self.satisfied(np.array([size]), np.array([counts]))[0])

    def check_feasible(self, sa_total: np.ndarray) -> None:
        """Raise AnonymizeError when even the whole table as one group fails the model."""
        if sa_total.sum() and not self.satisfied(np.array([sa_total.sum()]), sa_total[None, :])[0]:
            raise AnonymizeError(f"{self} is infeasible: the whole table as one group does not satisfy it")

    def min_group_size(self) -> int:
        return 1

    def minimal_class_size(self) -> int | None:
        """The class size the model sets as ARX's criteria do (isMinimalClassSizeAvailable,
        getMinimalClassSize: k-anonymity, l-diversity, k-map estimated from a population size);
        None for the others. Not `min_group_size`, which also bounds what t-closeness or
        beta-likeness can hold: this one decides, as in ARX's HashGroupify, that a population class
        without sample rows fails the minimal size (its 0 rows are "suppressed") before
        delta-presence is asked about it (DeltaPresence.rejects_unreached)."""
        return None

    def deficit(self, sizes: np.ndarray, sa_counts: np.ndarray) -> np.ndarray:
        """How far each group is from satisfying the model, about [0, 1], for repair to merge
        towards it: 0 when it does (all-or-nothing unless a model knows better)."""
        return (~self.satisfied(sizes, sa_counts)).astype(np.float64)

    def kept_rows_bound(self, sizes: np.ndarray, sa_counts: np.ndarray) -> np.ndarray:
        """Per group, at least as many rows as any sub-multiset of it that satisfies the model can
        hold. The lattice's pruning with a suppression limit rests on it: at a finer node a
        group splits into parts, and the parts that satisfy a model closed under merging form
        such a sub-multiset, so at least `sizes - kept_rows_bound` of its rows are removed there,
        at every finer node. The default knows nothing beyond the group itself."""
        return np.asarray(sizes, dtype=np.int64)


class KAnonymity(PrivacyModel):
    name = "k-anonymity"
    needs_sa = False
    monotone_with_suppression = True
    milp_encodable = True

    def __init__(self, k: int):
        self._set(k=k)

    def _parameters(self):
        return (self.k,)

    def satisfied(self, sizes, sa_counts):
        return sizes >= self.k

    def check_feasible(self, sa_total):
        rows = int(sa_total.sum())
        if rows and self.k > rows:
            raise AnonymizeError(f"k = {self.k} is greater than the number of rows ({rows})")

    def min_group_size(self):
        return self.k

    def minimal_class_size(self):
        return self.k

    def ok(self, counts: list[int], size: int) -> bool:
        return size >= self.k

    def deficit(self, sizes, sa_counts):
        return np.maximum(0, self.k - sizes) / self.k

    def kept_rows_bound(self, sizes, sa_counts):
        """A group of fewer than k rows has no part of k rows."""
        sizes = np.asarray(sizes, dtype=np.int64)
        return np.where(sizes >= self.k, sizes, 0)

    def __str__(self):
        return f"{self.k}-anonymity"


class LDiversity(PrivacyModel):
    """The four forms of Machanavajjhala et al., one subclass each, on a group's SA counts
    r_1 >= r_2 >= ... (see the subclasses).

    All four are closed under merging satisfying groups: frequency and distinct trivially,
    entropy by concavity; recursive because the merged top count is at most r_1(A) + r_1(B)
    while the merged tail (rows outside the top l-1 values) is at least tail(A) + tail(B).
    Frequency l-diversity implies the distinct and entropy forms (entropy >= min-entropy =
    -ln max p >= ln l).

    `LDiversity(l, variant, c)` builds the subclass named by `variant` (the statement's
    l_variant), so callers holding the statement's words need not know the classes.
    """

    name = "l-diversity"
    variant = "frequency"  # the statement's word for the form (messages and the factory)
    c = None

    def __new__(cls, l: int | None = None, variant: str | None = None, c: float | None = None,
                estimator: str | None = None):
        if cls is LDiversity:
            cls = _variant_class(L_DIVERSITY_VARIANTS, variant or "frequency", "l_variant")
            if estimator is not None and estimator != "shannon":
                if cls is not EntropyLDiversity:
                    raise AnonymizeError("an entropy estimator applies to l_variant = entropy")
                cls = _variant_class(ENTROPY_ESTIMATORS, estimator, "entropy_estimator")
        return object.__new__(cls)

    def __init__(self, l: int, variant: str | None = None, c: float | None = None, estimator: str | None = None):
        if variant is not None and variant != self.variant:
            raise AnonymizeError(f"{type(self).__name__} is the {self.variant} form, not {variant}")
        self._set(l=l)

    def _parameters(self):
        return (self.l,)

    def check_feasible(self, sa_total):
        distinct = int((sa_total > 0).sum())
        if sa_total.sum() and self.l > distinct:
            raise AnonymizeError(f"l = {self.l} is greater than the number of distinct sensitive values ({distinct})")
        if sa_total.sum() and not self.satisfied(np.array([sa_total.sum()]), sa_total[None, :])[0]:
            raise AnonymizeError(self._infeasible_message(sa_total))

    def _infeasible_message(self, sa_total) -> str:
        return f"{self} is infeasible: the whole table as one group does not satisfy it"

    def minimal_class_size(self):
        return int(np.ceil(self.l))  # ARX's LDiversity: minSize = l (ceil for entropy-l)

    def min_group_size(self):
        return self.l

    def deficit(self, sizes, sa_counts):
        """The frequency form's shortfall, l * r_1 above |G|: a proxy for the entropy and
        recursive forms, which get easier as the top value's share shrinks (it can stay above 0
        on a group they accept)."""
        top = sa_counts.max(axis=1, initial=0).astype(np.float64)
        return np.maximum(0.0, self.l * top - sizes) / np.maximum(self.l * top, 1.0)

    def kept_rows_bound(self, sizes, sa_counts):
        """Every form needs l distinct values (frequency: l * r_1 <= |G|; entropy: ln of the
        distinct count bounds it; recursive: r_l > 0), and a part has no more distinct values
        than its group."""
        sizes = np.asarray(sizes, dtype=np.int64)
        return np.where((np.asarray(sa_counts) > 0).sum(axis=1) >= self.l, sizes, 0)

    def __str__(self):
        return f"{self.variant} {self.l}-diversity"


class FrequencyLDiversity(LDiversity):
    """No SA value in more than |G|/l rows (l * r_1 <= |G|, in integers; Xiao et al.'s
    "l-eligible", the form TP approximates)."""

    variant = "frequency"
    milp_encodable = True

    def satisfied(self, sizes, sa_counts):
        return self.l * np.asarray(sa_counts).max(axis=1, initial=0) <= sizes

    def ok(self, counts, size):
        return self.l * max(counts) <= size

    def kept_rows_bound(self, sizes, sa_counts):
        """A part of m rows takes at most m / l of each value: it exists only if
        sum_s min(r_s, m / l) >= m. With the counts sorted down, r_1 >= r_2 >= ..., leaving the j
        largest values capped at m / l gives m (1 - j / l) <= r_(j+1) + r_(j+2) + ..., for
        j = 0..l-1; the smallest of these limits is the largest such m (a real number, floored)."""
        counts = -np.sort(-np.asarray(sa_counts, dtype=np.float64), axis=1)
        tails = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1]  # tails[:, j] = r_(j+1) + ...
        j = np.arange(min(self.l, counts.shape[1]))
        limits = tails[:, j] * self.l / (self.l - j)
        most = np.floor(limits.min(axis=1, initial=np.inf) + 1e-9) if len(j) else np.zeros(len(counts))
        return np.minimum(super().kept_rows_bound(sizes, sa_counts), most.astype(np.int64))

    def _infeasible_message(self, sa_total):
        return (f"{self} is infeasible: the most frequent sensitive value covers {int(sa_total.max())} of "
                f"{int(sa_total.sum())} rows, more than 1/{self.l} of the table")


class DistinctLDiversity(LDiversity):
    """At least l distinct SA values."""

    variant = "distinct"
    milp_encodable = True

    def satisfied(self, sizes, sa_counts):
        return (np.asarray(sa_counts) > 0).sum(axis=1) >= self.l

    def ok(self, counts, size):
        return sum(1 for x in counts if x) >= self.l

    def deficit(self, sizes, sa_counts):
        return np.maximum(0, self.l - (sa_counts > 0).sum(axis=1)) / self.l


class EntropyLDiversity(LDiversity):
    """Entropy of the SA distribution >= ln l (natural log; a relative slack of 1e-12 accepts
    groups exactly at the limit, e.g. l equally frequent values)."""

    variant = "entropy"
    estimator = "shannon"

    def satisfied(self, sizes, sa_counts):
        return entropy(np.asarray(sa_counts)) >= np.log(self.l) * (1 - 1e-12)


# ARX's EntropyLDiversity.EntropyEstimator.GRASSBERGER: G_n for n = 1 and the even n up to 100
# (G_1, G_2, G_4, ..., G_100), as ARX's table holds them; an odd n > 1 reads G_(n - 1)
_GRASSBERGER_TABLE = np.array([
    -1.2703628454614782, 0.7296371545385218, 1.3963038212051886, 1.7963038212051885, 2.0820181069194743,
    2.3042403291416966, 2.4860585109598783, 2.639904664806032, 2.7732379981393653, 2.8908850569628948,
    2.9961482148576315, 3.091386310095727, 3.178342831834857, 3.2583428318348573, 3.3324169059089312,
    3.4013824231503107, 3.4658985521825687, 3.5265046127886293, 3.5836474699314866, 3.6377015239855406,
    3.6889835752675917, 3.7377640630724698, 3.7842756909794466, 3.8287201354238913, 3.871273326913253,
    3.912089653443865, 3.951305339718375, 3.9890411887749786, 4.025404825138615, 4.060492544436861,
    4.094390849521607, 4.127177734767508, 4.1589237665135395, 4.18969299728277, 4.219543743551427,
    4.248529250797804, 4.276698264882311, 4.304095525156284, 4.33076219182295, 4.356736217796977,
    4.382052673493179, 4.40674403151787, 4.430840417060039, 4.454369828824745, 4.477358334571871,
    4.49983024468423, 4.521808266662253, 4.543313643006339, 4.564366274585286, 4.5849848312863175,
    4.605186851488337])


def grassberger(n: np.ndarray) -> np.ndarray:
    """ARX's Grassberger estimator G(n) (EntropyEstimator.G), elementwise on counts n >= 0: the
    table up to 100, above it n made even and log(n) + m (1/24 - m (7/960 - m 31/8064)) with
    m = 1 / (n/2)^2, the square in Java's 32-bit int as ARX computes it (it wraps above n =
    92,680: the same figures as ARX's there too)."""
    n = np.asarray(n, dtype=np.int64)
    small = _GRASSBERGER_TABLE[np.minimum((n - n % 2) // 2, len(_GRASSBERGER_TABLE) - 1)]
    even = n - n % 2
    half = even // 2
    square = (half * half + 2**31) % 2**32 - 2**31  # Java's int multiplication
    with np.errstate(divide="ignore", invalid="ignore"):
        m = 1.0 / np.where(square == 0, 1, square).astype(np.float64)
        large = np.log(np.maximum(even, 1).astype(np.float64)) + m * (1 / 24 - m * (7 / 960 - m * (31 / 8064)))
    return np.where(n <= 100, small, large)


class GrassbergerEntropyLDiversity(EntropyLDiversity):
    """Entropy l-diversity with Grassberger's estimator of the entropy (ARX's EntropyLDiversity
    with EntropyEstimator.GRASSBERGER): at least l distinct values and, over a group of n rows
    with f_v rows of value v, sum_v f_v G(f_v) <= n (G(n) - ln l), G as ARX computes it
    (`grassberger`). Unlike the Shannon form it is not closed under merging (two 3-diverse groups
    of counts (1, 5, 4) and (3, 5, 2) merge into (4, 10, 6), which is not), so the lattice decides
    every node on its own where ARX prunes as if it were monotone, and the merging methods do not
    rely on it. ARX stops summing as soon as its partial sum passes the bound, which with the
    negative G(1) can refuse a group whose whole sum is within it, depending on its hash table's
    order; duckanon compares the whole sum."""

    estimator = "grassberger"
    closed_under_merging = False
    monotone_with_generalization = False

    def satisfied(self, sizes, sa_counts):
        counts = np.asarray(sa_counts, dtype=np.int64)
        n = counts.sum(axis=1)
        distinct = (counts > 0).sum(axis=1)
        terms = np.where(counts > 0, counts * grassberger(counts), 0.0).sum(axis=1)
        bound = n * (grassberger(n) - math.log(self.l))
        return (distinct >= math.ceil(self.l)) & (terms <= bound)

    def __str__(self):
        return f"entropy {self.l}-diversity (Grassberger's estimator)"


ENTROPY_ESTIMATORS = {cls.estimator: cls for cls in (EntropyLDiversity, GrassbergerEntropyLDiversity)}


class RecursiveCLDiversity(LDiversity):
    """Recursive (c, l)-diversity: r_1 < c * (r_l + r_{l+1} + ...)."""

    variant = "recursive"

    def __init__(self, l: int, variant: str | None = None, c: float | None = None, estimator: str | None = None):
        super().__init__(l, variant)
        if c is None or not c > 0:
            raise AnonymizeError("l_variant = recursive needs a positive c (add c = <number>)")
        self._set(c=c)

    def _parameters(self):
        return (self.l, self.c)

    def satisfied(self, sizes, sa_counts):
        ordered = -np.sort(-np.asarray(sa_counts), axis=1)
        top = ordered[:, 0] if ordered.shape[1] else np.zeros(len(ordered))
        tail = ordered[:, self.l - 1 :].sum(axis=1)
        return top < self.c * tail

    def __str__(self):
        return f"recursive ({self.c:g}, {self.l})-diversity"


L_DIVERSITY_VARIANTS = {cls.variant: cls for cls in
                        (FrequencyLDiversity, DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity)}


def _by_word(words: tuple[str, ...], table: dict[str, type], option: str) -> dict[str, type]:
    """`table` (the statement's word -> its class) in the order of `words`, the front end's list
    of the option's words (duckanon.methods); a word without a class or a class without a word
    stops this module's import, whatever python's -O."""
    if set(table) != set(words):
        raise LookupError(f"{option}: the classes' words {sorted(table)} are not duckanon.methods' {sorted(words)}")
    return {word: table[word] for word in words}


L_DIVERSITY_VARIANTS = _by_word(methods.L_VARIANTS, L_DIVERSITY_VARIANTS, "l_variant")
ENTROPY_ESTIMATORS = _by_word(methods.ENTROPY_ESTIMATORS, ENTROPY_ESTIMATORS, "entropy_estimator")


def _variant_class(table: dict, word: str, option: str) -> type:
    try:
        return table[word]
    except KeyError:
        raise AnonymizeError(f"unknown {option} '{word}' (known: {', '.join(table)})") from None


def l_diversity(l: int, variant: str = "frequency", c: float | None = None, estimator: str | None = None) -> LDiversity:
    """The l-diversity of the statement's `l_variant` word (and `entropy_estimator`)."""
    return LDiversity(l, variant, c, estimator)


def entropy(sa_counts: np.ndarray) -> np.ndarray:
    """Shannon entropy (natural log) of each row's distribution; 0 for empty rows."""
    counts = np.asarray(sa_counts, dtype=np.float64)
    sizes = counts.sum(axis=1, keepdims=True)
    p = counts / np.maximum(sizes, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=1)


class TCloseness(PrivacyModel):
    """EMD between a group's SA distribution and the table's (`sa_total`, counts per SA code) is
    at most t; one subclass per ground distance between SA values (emd.py has the closed forms).

    `TCloseness(t, sa_total, distance, order=..., hierarchy=..., ground=...)` builds the subclass
    named by `distance` (the statement's t_distance). Closed under merging: EMD is convex.
    """

    name = "t-closeness"
    distance = "equal"  # the statement's word for the ground distance (messages and the factory)
    milp_encodable = True
    # Whether the MILP's linear closed form of the EMD applies (else its transport flows).
    linear_emd = False

    def __new__(cls, t: float | None = None, sa_total=None, distance: str | None = None, **kwargs):
        if cls is TCloseness:
            cls = _variant_class(T_CLOSENESS_DISTANCES, distance or "equal", "t_distance")
        return object.__new__(cls)

    def __init__(self, t: float, sa_total, distance: str | None = None):
        if distance is not None and distance != self.distance:
            raise AnonymizeError(f"{type(self).__name__} has the {self.distance} distance, not {distance}")
        self._set(t=t, sa_total=tuple(sa_total))

    def _parameters(self):
        return (self.t, self.sa_total)

    def table_distribution(self) -> np.ndarray:
        return shares(self.sa_total)

    def emd(self, sizes, sa_counts) -> np.ndarray:
        sizes = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
        p = np.asarray(sa_counts, dtype=np.float64) / sizes[:, None]
        return self._emd(p, self.table_distribution())

    def _emd(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def distance_matrix(self) -> np.ndarray:
        """The (S, S) ground distance (for the exact MILP's transport form)."""
        raise NotImplementedError

    def satisfied(self, sizes, sa_counts):
        return self.emd(sizes, sa_counts) <= self.t + EMD_TOLERANCE

    def check_feasible(self, sa_total):
        return None  # the whole table has EMD 0

    def deficit(self, sizes, sa_counts):
        return np.maximum(0.0, self.emd(np.maximum(sizes.astype(np.float64), 1.0), sa_counts) - self.t)

    def smallest_distance(self) -> float:
        """The ground distance between two distinct values is at least this (> 0)."""
        ground = self.distance_matrix()
        off = ground[~np.eye(len(ground), dtype=bool)]
        return float(off.min()) if len(off) else 1.0

    def kept_rows_bound(self, sizes, sa_counts):
        """Every unit of mass a part's distribution p moves to reach the table's q travels at
        least the smallest ground distance d, so EMD(p, q) >= d * TV(p, q), with TV the total
        variation, 1/2 sum |p - q| = sum_s max(0, q_s - p_s). A part of m rows with a_s <= r_s
        rows of value s is t-close only if TV <= t' = t / d; TV is smallest when every value s
        short of m q_s takes all its r_s rows, so such a part exists only if
        sum_s max(0, m q_s - r_s) <= t' m. The left side is the largest over sets
        A of values of m Q_A - R_A, so m <= R_A / (Q_A - t') for every A with Q_A > t'; the
        tightest A are the values with the smallest r_s / q_s, so the bound is the smallest of
        those ratios over the prefixes of that order (a real number, floored)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        distance = self.smallest_distance()
        if not distance > 0 or not len(sizes):
            return sizes
        slack = (self.t + EMD_TOLERANCE) / distance
        q = self.table_distribution()
        counts = np.asarray(sa_counts, dtype=np.float64)
        present = q > 0
        q, counts = q[present], counts[:, present]
        order = np.argsort(counts / q, axis=1, kind="stable")
        mass = np.cumsum(q[order], axis=1) - slack
        rows = np.cumsum(np.take_along_axis(counts, order, axis=1), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            limits = np.where(mass > 0, rows / np.where(mass > 0, mass, 1.0), np.inf)
        most = np.floor(np.minimum(limits.min(axis=1), np.iinfo(np.int64).max / 2) * (1 + 1e-12) + 1e-9)
        return np.minimum(sizes, most.astype(np.int64))

    def __str__(self):
        return f"{self.t:g}-closeness ({self.distance} distance)"


class EqualDistanceTCloseness(TCloseness):
    """Every two values at distance 1: EMD = total variation, 1/2 sum |p - q|."""

    distance = "equal"
    linear_emd = True
    # Sizes searched for the smallest possible t-close group; returning the cap is still a valid
    # lower bound (every smaller size was ruled out).
    MIN_SIZE_SEARCH = 10_000

    def _emd(self, p, q):
        return emd.emd_equal(p, q)

    def smallest_distance(self):
        return 1.0

    def distance_matrix(self):
        v = len(self.sa_total)
        return (np.arange(v)[:, None] != np.arange(v)[None, :]).astype(np.float64)

    def min_group_size(self):
        """Smallest group size that can be t-close at all.

        For size s the closest integer distribution to the table's, in L1, rounds s*q down and
        gives the leftover units to the largest remainders; if even that is farther than t,
        no group of s rows is t-close.
        """
        total = np.asarray(self.sa_total, dtype=np.float64)
        n = int(total.sum())
        if n == 0:
            return 1
        q = total / n
        for s in range(1, min(n, self.MIN_SIZE_SEARCH) + 1):
            exact = s * q
            counts = np.floor(exact)
            leftover = int(round(s - counts.sum()))
            if leftover:
                counts[np.argsort(counts - exact)[:leftover]] += 1
            if 0.5 * np.abs(counts / s - q).sum() <= self.t + EMD_TOLERANCE:
                return s
        return min(n, self.MIN_SIZE_SEARCH)


class OrderedDistanceTCloseness(TCloseness):
    """Values on a line in SA-code order (by value), or in `order` (the rank of each SA code)
    when the user declared one: distance |rank_i - rank_j| / (v - 1)."""

    distance = "ordered"

    def __init__(self, t: float, sa_total, distance: str | None = None, order=None):
        super().__init__(t, sa_total, distance)
        self._set(order=None if order is None else tuple(order))

    @property
    def linear_emd(self) -> bool:
        """The cumulative-difference form needs the values in code order."""
        return self.order is None

    def _parameters(self):
        return (self.t, self.sa_total, self.order)

    def smallest_distance(self):
        return 1.0 / max(len(self.sa_total) - 1, 1)  # neighbouring ranks

    def _emd(self, p, q):
        if self.order is not None:
            permutation = np.argsort(np.asarray(self.order))  # codes listed by rank
            return emd.emd_ordered(p[:, permutation], q[permutation])
        return emd.emd_ordered(p, q)

    def distance_matrix(self):
        v = len(self.sa_total)
        rank = np.arange(v) if self.order is None else np.asarray(self.order)
        return np.abs(rank[:, None] - rank[None, :]) / max(v - 1, 1)


class HierarchicalDistanceTCloseness(TCloseness):
    """Level of the lowest common ancestor / height, over `hierarchy` (an emd.HierarchyIndex
    bound to the SA codes)."""

    distance = "hierarchical"

    def __init__(self, t: float, sa_total, distance: str | None = None, hierarchy=None):
        super().__init__(t, sa_total, distance)
        self._set(hierarchy=hierarchy)

    def _emd(self, p, q):
        return emd.emd_hierarchical(p, q, self.hierarchy)

    def distance_matrix(self):
        return self.hierarchy.distance_matrix()


class CustomDistanceTCloseness(TCloseness):
    """Any (S, S) matrix `ground`, through the transportation LP (slow; small S)."""

    distance = "custom"

    def __init__(self, t: float, sa_total, distance: str | None = None, ground=None):
        super().__init__(t, sa_total, distance)
        self._set(ground=ground)

    def _emd(self, p, q):
        return emd.emd_custom(p, q, np.asarray(self.ground))

    def distance_matrix(self):
        return np.asarray(self.ground, dtype=np.float64)


T_CLOSENESS_DISTANCES = {cls.distance: cls for cls in (EqualDistanceTCloseness, OrderedDistanceTCloseness,
                                                         HierarchicalDistanceTCloseness, CustomDistanceTCloseness)}
# (custom: a ground-distance matrix given through the Python API, no word of the statement)
T_CLOSENESS_DISTANCES = _by_word(methods.T_DISTANCES + ("custom",), T_CLOSENESS_DISTANCES, "t_distance")


def t_closeness(t: float, sa_total, distance: str = "equal", **kwargs) -> TCloseness:
    """The t-closeness of the statement's `t_distance` word (`order`, `hierarchy` or `ground` as
    that distance needs)."""
    return TCloseness(t, sa_total, distance, **kwargs)


class _RelativeToTable(PrivacyModel):
    """A model comparing each group's SA distribution p with the table's q (`sa_total`, counts
    per SA code), value by value, over the values present in the group (ARX's explicit
    criteria on a distribution)."""

    def __init__(self, threshold: float, sa_total):
        if not (math.isfinite(threshold) and threshold > 0):
            raise AnonymizeError(f"{self.name} needs a positive threshold, got {threshold:g}")
        self._set(threshold=float(threshold), sa_total=tuple(int(x) for x in sa_total))

    def _parameters(self):
        return (self.threshold, self.sa_total)

    def table_distribution(self) -> np.ndarray:
        return shares(self.sa_total)

    def _shares(self, sizes, sa_counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group and SA code: the group's share p, the table's q, and whether p > 0."""
        counts = np.asarray(sa_counts, dtype=np.float64)
        p = counts / np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)[:, None]
        return p, self.table_distribution()[None, :], counts > 0

    def _largest_share(self) -> np.ndarray:
        """Per SA code the largest share a group may give it."""
        raise NotImplementedError

    def min_group_size(self) -> int:
        """A group of m rows gives some present value a share of at least 1/m, which must not
        exceed the largest share any value may have."""
        most = float(self._largest_share().max(initial=0.0))
        return max(1, math.ceil(1.0 / most - 1e-9)) if most > 0 else 1

    def check_feasible(self, sa_total):
        return None  # the whole table has p = q, which every threshold accepts


class BetaLikeness(_RelativeToTable):
    """Basic beta-likeness (Cao & Karras 2012, "Publishing microdata with a robust privacy
    guarantee", PVLDB 5(11)): for every SA value s present in a group, the relative gain of
    confidence (p_s - q_s) / q_s is at most beta. Only the rise above q is bounded, a convex
    condition, so the model is closed under merging and monotone under generalization (ARX's
    BasicBLikeness: monotone with generalization, not with suppression)."""

    name = "beta-likeness"
    variant = "basic"

    def __new__(cls, beta: float | None = None, sa_total=None, variant: str | None = None):
        if cls is BetaLikeness:
            cls = _variant_class(BETA_VARIANTS, variant or "basic", "beta_variant")
        return object.__new__(cls)

    def __init__(self, beta: float, sa_total, variant: str | None = None):
        super().__init__(beta, sa_total)

    def limits(self) -> np.ndarray:
        """Per SA code the largest relative gain allowed."""
        return np.full(len(self.sa_total), self.threshold)

    def _largest_share(self):
        q = self.table_distribution()
        return q * (1.0 + self.limits())

    def _excess(self, sizes, sa_counts) -> np.ndarray:
        p, q, present = self._shares(sizes, sa_counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(present, (p - q) / np.where(q > 0, q, 1.0), -np.inf)
        return (gain - self.limits()[None, :]).max(axis=1, initial=-np.inf)

    def satisfied(self, sizes, sa_counts):
        return self._excess(sizes, sa_counts) <= 1e-12 * max(1.0, self.threshold)

    def deficit(self, sizes, sa_counts):
        return np.maximum(0.0, self._excess(sizes, sa_counts))

    def __str__(self):
        return f"{self.variant} {self.threshold:g}-likeness"


class BasicBetaLikeness(BetaLikeness):
    variant = "basic"


class EnhancedBetaLikeness(BetaLikeness):
    """Enhanced beta-likeness (Cao & Karras 2012, Definition 3): the gain of a value of table
    share q is bounded by min(beta, -ln q), tighter for frequent values (ARX's EnhancedBLikeness)."""

    variant = "enhanced"

    def limits(self):
        q = self.table_distribution()
        with np.errstate(divide="ignore"):
            return np.minimum(self.threshold, np.where(q > 0, -np.log(np.where(q > 0, q, 1.0)), np.inf))


BETA_VARIANTS = _by_word(methods.BETA_VARIANTS, {cls.variant: cls for cls in (BasicBetaLikeness, EnhancedBetaLikeness)},
                         "beta_variant")


class DeltaDisclosure(_RelativeToTable):
    """delta-disclosure privacy (Brickell & Shmatikov 2008, "The cost of privacy", KDD): for every
    SA value s present in a group, |log(p_s / q_s)| < delta. The logarithm is ARX's, base 2
    (DDisclosurePrivacy), so thresholds carry over from ARX; the paper's definition is the same
    with its own base. Bounding the fall of a share as well as its rise makes the model neither
    closed under merging (a value rare in a merged group can fall below q 2^-delta) nor
    monotone under generalization: the lattice decides every node on its own, and the merging
    heuristics stop at the whole table at the latest (log 1 = 0 < delta)."""

    name = "delta-disclosure"
    closed_under_merging = False
    monotone_with_generalization = False

    def _distance(self, sizes, sa_counts) -> np.ndarray:
        p, q, present = self._shares(sizes, sa_counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.abs(np.log2(np.where(present, p, 1.0) / np.where(q > 0, q, 1.0)))
        return np.where(present, ratio, 0.0).max(axis=1, initial=0.0)

    def _largest_share(self):
        return self.table_distribution() * 2.0 ** self.threshold

    def satisfied(self, sizes, sa_counts):
        # strict, as the definition (and ARX); what rounding puts within 1e-12 of delta fails
        return self._distance(sizes, sa_counts) < self.threshold * (1 - 1e-12)

    def deficit(self, sizes, sa_counts):
        return np.maximum(0.0, self._distance(sizes, sa_counts) - self.threshold) / self.threshold

    def __str__(self):
        return f"{self.threshold:g}-disclosure privacy"


class EstimatedKMap(KAnonymity):
    """k-map without a population table (ARX's KMap with a population model and an estimator):
    every published class is estimated to match at least `k_map` people of a population of
    `population_size`, at the significance level; ARX turns that into the smallest sample class
    size that ensures it (`population.kmap_derived_k`), so the model is k-anonymity with that k
    (the "derived k") and every method takes it. An estimate, stated as one in the result."""

    name = "k-map"

    def __init__(self, k_map: int, population_size: int, sample_size: int, estimator: str = "poisson",
                 significance: float = 0.01):
        super().__init__(kmap_derived_k(k_map, sample_size, population_size, estimator, significance))
        self._set(k_map=k_map, population_size=population_size, sample_size=sample_size, estimator=estimator,
                  significance=significance)

    def _parameters(self):
        return (self.k_map, self.population_size, self.sample_size, self.estimator, self.significance)

    def check_feasible(self, sa_total):
        rows = int(sa_total.sum())
        if rows and self.k > rows:
            raise AnonymizeError(f"{self} is infeasible: it needs classes of {self.k} rows, the table has {rows}")

    def __str__(self):
        return (f"{self.k_map}-map estimated for a population of {self.population_size} ({self.estimator}, "
                f"significance {self.significance:g}: classes of at least {self.k} rows)")


class PopulationModel(PrivacyModel):
    """A model on the population rows that match each group (`satisfied_in(sizes, population)`),
    counted over the population table by the lattice for each node's generalized classes."""

    needs_sa = False
    needs_population = True

    def satisfied(self, sizes, sa_counts):
        raise AnonymizeError(f"{self} needs the population rows of each class, which only method 'lattice' counts")

    def check_feasible(self, sa_total):
        return None  # the whole table against the population is checked where the population is read

    def satisfied_in(self, sizes: np.ndarray, population: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # Whether a class of population rows that no sample row reaches (its share of the population
    # 0) fails the model, so that the node publishing it is no solution (it has no rows to
    # suppress). k-map is about published classes only: no.
    rejects_unreached = False


class KMap(PopulationModel):
    """k-map (Sweeney 2002; El Emam & Dankar 2008, "Protecting privacy using k-anonymity", JAMIA
    15(5)): every published class matches at least k rows of the population table. Population
    counts only grow when classes merge: closed under merging, monotone with generalization and
    suppression (ARX's KMap with a research subset)."""

    name = "k-map"
    monotone_with_suppression = True

    def __init__(self, k: int):
        self._set(k=int(k))

    def _parameters(self):
        return (self.k,)

    def satisfied_in(self, sizes, population):
        return (np.asarray(population) >= self.k) | (np.asarray(sizes) == 0)

    def __str__(self):
        return f"{self.k}-map"


class DeltaPresence(PopulationModel):
    """delta-presence (Nergiz, Atzori & Clifton 2007, "Hiding the presence of individuals from
    shared databases", SIGMOD): the sample is a subset of the population, and every published
    class holds a share of the population rows matching it within [dmin, dmax]. A merged class's
    share lies between its parts' (the mediant), so the model is closed under merging and
    monotone with generalization, not with suppression (ARX's DPresence)."""

    name = "delta-presence"

    def __init__(self, dmin: float, dmax: float):
        if not (0.0 <= dmin <= dmax <= 1.0):
            raise AnonymizeError(f"delta_presence needs 0 <= dmin <= dmax <= 1, got ({dmin:g}, {dmax:g})")
        self._set(dmin=float(dmin), dmax=float(dmax))

    def _parameters(self):
        return (self.dmin, self.dmax)

    @property
    def rejects_unreached(self) -> bool:
        """A population class with no sample row has presence 0 (ARX's DPresence.isAnonymous:
        delta = 0 when the class has no sample row): it fails when dmin > 0, and a node with one is
        no solution, as in ARX's HashGroupify (such a class cannot be suppressed) unless a model
        sets a minimal class size (Request.minimal_class_size), which the class fails first."""
        return self.dmin > self.TOLERANCE

    TOLERANCE = 1e-12

    def shares(self, sizes, population) -> np.ndarray:
        return np.asarray(sizes, dtype=np.float64) / np.maximum(np.asarray(population, dtype=np.float64), 1.0)

    def satisfied_in(self, sizes, population):
        share = self.shares(sizes, population)
        tolerance = self.TOLERANCE
        return ((share >= self.dmin - tolerance) & (share <= self.dmax + tolerance)) | (np.asarray(sizes) == 0)

    def __str__(self):
        return f"({self.dmin:g}, {self.dmax:g})-presence"


class GlobalModel(PrivacyModel):
    """A condition on the release as a whole (`holds` on the sizes and SA counts of every
    published group). ARX's risk-based criteria: the lattice suppresses the smallest classes
    until it holds (RiskBasedCriterion.enforce), the other methods merge groups until it does."""

    needs_sa = False
    global_constraint = True

    def satisfied(self, sizes, sa_counts):
        return np.ones(len(sizes), dtype=bool)

    def ok(self, counts, size):
        return True

    def holds(self, sizes: np.ndarray, sa_counts: np.ndarray | None = None) -> bool:
        raise NotImplementedError


class AverageRisk(GlobalModel):
    """Average prosecutor re-identification risk at most r: published classes / published rows
    (El Emam, "Guide to the De-Identification of Personal Health Information", 2013; the mean of
    1 / class size over the records; ARX's AverageReidentificationRisk). Fewer classes only
    lower it: monotone with generalization and with suppression of the smallest classes."""

    name = "average risk"
    monotone_with_suppression = True

    def __init__(self, r: float):
        if not (0.0 < r <= 1.0):
            raise AnonymizeError(f"average_risk must be in (0, 1], got {r:g}")
        self._set(r=float(r))

    def _parameters(self):
        return (self.r,)

    @staticmethod
    def risk(sizes) -> float:
        sizes = np.asarray(sizes)
        sizes = sizes[sizes > 0]
        return len(sizes) / float(sizes.sum()) if len(sizes) else 0.0

    def holds(self, sizes, sa_counts=None):
        return self.risk(sizes) <= self.r * (1 + 1e-12)

    def check_feasible(self, sa_total):
        rows = int(np.asarray(sa_total).sum())
        if rows and 1.0 / rows > self.r * (1 + 1e-12):
            raise AnonymizeError(f"average_risk = {self.r:g} is infeasible: the whole table as one class has "
                                 f"risk 1/{rows}")

    def __str__(self):
        return f"average risk <= {self.r:g}"


class SampleUniqueness(GlobalModel):
    """The share of the published rows that are alone in their class at most u (ARX's
    SampleUniqueness: HashGroupifyDistribution.getFractionOfRecordsInClassesOfSize(1) <= u, over
    the records not suppressed). Generalization only merges classes and removing the smallest
    classes removes the uniques first: monotone with both, as ARX declares it."""

    name = "sample uniqueness"
    monotone_with_suppression = True

    def __init__(self, u: float):
        if not (0.0 <= u <= 1.0):
            raise AnonymizeError(f"sample_uniqueness must be in [0, 1], got {u:g}")
        self._set(u=float(u))

    def _parameters(self):
        return (self.u,)

    @staticmethod
    def fraction(sizes) -> float:
        """The share of the rows of the classes `sizes` that are alone in their class."""
        sizes = np.asarray(sizes)
        rows = float(sizes[sizes > 0].sum())
        return float((sizes == 1).sum()) / rows if rows else 0.0

    def holds(self, sizes, sa_counts=None):
        return self.fraction(sizes) <= self.u * (1 + 1e-12)

    def holds_profile(self, sizes: np.ndarray, counts: np.ndarray) -> bool:
        """`holds` on classes given by their distinct sizes (ascending, >= 1) and how many have each."""
        rows = float((np.asarray(sizes, dtype=np.float64) * counts).sum())
        uniques = float(counts[0]) if len(sizes) and sizes[0] == 1 else 0.0
        return (uniques / rows if rows else 0.0) <= self.u * (1 + 1e-12)

    def check_feasible(self, sa_total):
        rows = int(np.asarray(sa_total).sum())
        if rows == 1 and self.u < 1.0:
            raise AnonymizeError(f"sample_uniqueness = {self.u:g} is infeasible: the table's one row is unique")

    def __str__(self):
        return f"sample uniqueness <= {self.u:g}"


class PopulationUniqueness(GlobalModel):
    """The estimated share of population uniques at most u, for a population of N (ARX's
    PopulationUniqueness: the estimators of `population.population_uniques`; Dankar's rule by
    default). Accepted as ARX accepts it: an estimate in (0, u], or 0 with no sample unique.
    Neither monotone with suppression nor (but for Zayatz's model) with generalization."""

    name = "population uniqueness"

    def __init__(self, u: float, population_size: int, estimator: str = "dankar"):
        if not (0.0 < u <= 1.0):
            raise AnonymizeError(f"population_uniqueness must be in (0, 1], got {u:g}")
        if estimator not in ESTIMATORS:
            raise AnonymizeError(f"unknown estimator '{estimator}' for population_uniqueness "
                                 f"(known: {', '.join(ESTIMATORS)})")
        self._set(u=float(u), population_size=int(population_size), estimator=estimator)

    @property
    def monotone_with_generalization(self) -> bool:
        return self.estimator == "zayatz"

    def _parameters(self):
        return (self.u, self.population_size, self.estimator)

    def estimate(self, sizes):
        sizes = np.asarray(sizes)
        return population_uniques(sizes[sizes > 0], self.population_size, self.estimator)

    def holds(self, sizes, sa_counts=None):
        sizes = np.asarray(sizes)
        if not (sizes > 0).any():
            return True
        fraction = self.estimate(sizes).fraction
        if fraction > 0:
            return fraction <= self.u * (1 + 1e-12)
        return not (sizes == 1).any()

    def holds_profile(self, sizes: np.ndarray, counts: np.ndarray) -> bool:
        """`holds` on published classes given by their distinct sizes (ascending, >= 1) and how
        many classes have each: the estimators read nothing else (the lattice's removal search
        derives these from a node's classes, one removal count after another)."""
        if not len(sizes):
            return True
        fraction = population_uniques_of_profile(sizes, counts, self.population_size, self.estimator).fraction
        if fraction > 0:
            return fraction <= self.u * (1 + 1e-12)
        return not sizes[0] == 1

    def check_feasible(self, sa_total):
        rows = int(np.asarray(sa_total).sum())
        if rows > self.population_size:
            raise AnonymizeError(f"population_size ({self.population_size}) is smaller than the table ({rows} rows)")

    def __str__(self):
        return f"population uniqueness <= {self.u:g} ({self.estimator}, population {self.population_size})"


class OnAttribute(PrivacyModel):
    """`model` on one of several sensitive columns: the histogram counts combinations of their
    values (joint codes), and `codes[s]` is the column's own code of joint code s, so the model
    reads each group's counts of the column's values (its marginal). Its capabilities are the
    model's; the exact MILP and TP do not encode it (they read one column's counts)."""

    def __init__(self, model: PrivacyModel, codes, column: str):
        codes = np.asarray(codes, dtype=np.int64)
        self._set(model=model, codes=tuple(codes.tolist()), column=column, _index=codes,
                  _width=int(codes.max()) + 1 if len(codes) else 1)

    def _parameters(self):
        return (self.model, self.codes, self.column)

    @property
    def name(self):
        return self.model.name

    needs_sa = True

    @property
    def closed_under_merging(self):
        return self.model.closed_under_merging

    @property
    def monotone_with_suppression(self):
        return self.model.monotone_with_suppression

    @property
    def monotone_with_generalization(self):
        return self.model.monotone_with_generalization

    def marginal(self, sa_counts) -> np.ndarray:
        counts = np.asarray(sa_counts, dtype=np.int64)
        out = np.zeros((len(counts), self._width), dtype=np.int64)
        np.add.at(out.T, self._index[:counts.shape[1]], counts.T)
        return out

    def satisfied(self, sizes, sa_counts):
        return self.model.satisfied(sizes, self.marginal(sa_counts))

    def ok(self, counts, size):
        return self.model.ok(self.marginal(np.array([counts]))[0].tolist(), size)

    def check_feasible(self, sa_total):
        try:
            self.model.check_feasible(self.marginal(np.asarray(sa_total)[None, :])[0])
        except AnonymizeError as error:
            raise AnonymizeError(f"{error} (sensitive column {self.column})") from None

    def min_group_size(self):
        return self.model.min_group_size()

    def minimal_class_size(self):
        return self.model.minimal_class_size()

    def deficit(self, sizes, sa_counts):
        return self.model.deficit(sizes, self.marginal(sa_counts))

    def kept_rows_bound(self, sizes, sa_counts):
        """A part's counts of the column's values are at most its group's: the model's bound on
        the marginal holds."""
        return self.model.kept_rows_bound(sizes, self.marginal(sa_counts))

    def __str__(self):
        return f"{self.model} on {self.column}"


def all_satisfied(models, sizes, sa_counts, population=None) -> np.ndarray:
    """Per group, whether it satisfies every per-group model; `population` (rows of the
    population table matching each group) for the population models (None: none is asked)."""
    ok = np.ones(len(sizes), dtype=bool)
    for model in models:
        if model.needs_population:
            if population is None:
                raise AnonymizeError(f"{model} needs the population rows of each class, which only method "
                                     "'lattice' counts")
            ok &= model.satisfied_in(sizes, population)
        else:
            ok &= model.satisfied(sizes, sa_counts)
    return ok


def rejects_unreached(models) -> bool:
    """Whether a population class that no sample row reaches makes a transformation fail, as in
    ARX's HashGroupify: a population model rejects it (delta-presence with dmin > 0) and no model
    sets a minimal class size (k-anonymity, l-diversity, estimated k-map), which the class's 0
    rows would fail first, so that it counts as suppressed."""
    if any(model.minimal_class_size() is not None for model in models):
        return False
    return any(model.needs_population and model.rejects_unreached for model in models)


def globally_satisfied(models, sizes, sa_counts) -> bool:
    """Whether the release made of these groups (published, with rows) meets every global model."""
    return all(model.holds(sizes, sa_counts) for model in models if model.global_constraint)
