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
  needs_population            it reads a population table beyond the histogram (risk models)
  milp_encodable              the exact MILP has a linear form of it

One class per variant: an l-diversity or t-closeness built from the statement's words goes
through `LDiversity(l, variant, c)` / `TCloseness(t, sa_total, distance, ...)` (or the
`l_diversity` / `t_closeness` factories), which return the variant's class.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver import emd

# Relative slack for floating-point comparisons of EMD against t, so that a group exactly at the
# limit (EMD == t in exact arithmetic) is accepted.
EMD_TOLERANCE = 1e-9


class PrivacyModel:
    """A model's parameters are fixed at construction: models are values (equal when their class
    and parameters are, hashable, immutable)."""

    name = "model"
    needs_sa = True
    closed_under_merging = True
    monotone_with_suppression = False
    needs_population = False
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

    def __new__(cls, l: int | None = None, variant: str | None = None, c: float | None = None):
        if cls is LDiversity:
            cls = _variant_class(L_DIVERSITY_VARIANTS, variant or "frequency", "l_variant")
        return object.__new__(cls)

    def __init__(self, l: int, variant: str | None = None, c: float | None = None):
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

    def satisfied(self, sizes, sa_counts):
        return entropy(np.asarray(sa_counts)) >= np.log(self.l) * (1 - 1e-12)


class RecursiveCLDiversity(LDiversity):
    """Recursive (c, l)-diversity: r_1 < c * (r_l + r_{l+1} + ...)."""

    variant = "recursive"

    def __init__(self, l: int, variant: str | None = None, c: float | None = None):
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


def _variant_class(table: dict, word: str, option: str) -> type:
    try:
        return table[word]
    except KeyError:
        raise AnonymizeError(f"unknown {option} '{word}' (known: {', '.join(table)})") from None


def l_diversity(l: int, variant: str = "frequency", c: float | None = None) -> LDiversity:
    """The l-diversity of the statement's `l_variant` word."""
    return LDiversity(l, variant, c)


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
        total = np.asarray(self.sa_total, dtype=np.float64)
        return total / max(total.sum(), 1.0)

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


def t_closeness(t: float, sa_total, distance: str = "equal", **kwargs) -> TCloseness:
    """The t-closeness of the statement's `t_distance` word (`order`, `hierarchy` or `ground` as
    that distance needs)."""
    return TCloseness(t, sa_total, distance, **kwargs)


def all_satisfied(models, sizes, sa_counts) -> np.ndarray:
    ok = np.ones(len(sizes), dtype=bool)
    for model in models:
        ok &= model.satisfied(sizes, sa_counts)
    return ok
