"""Privacy models (ARX's "criteria"): each says whether a group of rows is publishable.

All share one interface, vectorised over groups: `satisfied(sizes, sa_counts)` takes the group
sizes (G,) and SA counts (G, S) and returns a boolean (G,). `check_feasible(total)` raises when no
partition of the table can satisfy the model. Every model here is closed under merging of
satisfying groups, which the merge-based repair relies on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver import emd

# Relative slack for floating-point comparisons of EMD against t, so that a group exactly at the
# limit (EMD == t in exact arithmetic) is accepted.
EMD_TOLERANCE = 1e-9


class PrivacyModel:
    name = "model"

    def satisfied(self, sizes: np.ndarray, sa_counts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def check_feasible(self, sa_total: np.ndarray) -> None:
        """Raise AnonymizeError when even the whole table as one group fails the model."""
        if sa_total.sum() and not self.satisfied(np.array([sa_total.sum()]), sa_total[None, :])[0]:
            raise AnonymizeError(f"{self} is infeasible: the whole table as one group does not satisfy it")

    def min_group_size(self) -> int:
        return 1


@dataclass(frozen=True)
class KAnonymity(PrivacyModel):
    k: int
    name = "k-anonymity"

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

    def __str__(self):
        return f"{self.k}-anonymity"


@dataclass(frozen=True)
class LDiversity(PrivacyModel):
    """The four forms of Machanavajjhala et al., on a group's SA counts r_1 >= r_2 >= ...:

    `frequency`: no SA value in more than |G|/l rows (l * r_1 <= |G|, in integers; Xiao et al.'s
                 "l-eligible", the form TP approximates).
    `distinct`:  at least l distinct SA values.
    `entropy`:   entropy of the SA distribution >= ln l (natural log; a relative slack of 1e-12
                 accepts groups exactly at the limit, e.g. l equally frequent values).
    `recursive`: recursive (c, l)-diversity, r_1 < c * (r_l + r_{l+1} + ...).

    All four are closed under merging satisfying groups: the first two trivially, entropy by
    concavity; recursive because the merged top count is at most r_1(A) + r_1(B) while the merged
    tail (rows outside the top l-1 values) is at least tail(A) + tail(B). Frequency l-diversity implies the distinct and entropy forms
    (entropy >= min-entropy = -ln max p >= ln l).
    """

    l: int
    variant: str = "frequency"
    c: float | None = None
    name = "l-diversity"

    def __post_init__(self):
        if self.variant == "recursive" and (self.c is None or not self.c > 0):
            raise AnonymizeError("l_variant = recursive needs a positive c (add c = <number>)")

    def satisfied(self, sizes, sa_counts):
        sa_counts = np.asarray(sa_counts)
        if self.variant == "distinct":
            return (sa_counts > 0).sum(axis=1) >= self.l
        if self.variant == "entropy":
            return entropy(sa_counts) >= np.log(self.l) * (1 - 1e-12)
        if self.variant == "recursive":
            ordered = -np.sort(-sa_counts, axis=1)
            top = ordered[:, 0] if ordered.shape[1] else np.zeros(len(ordered))
            tail = ordered[:, self.l - 1 :].sum(axis=1)
            return top < self.c * tail
        return self.l * sa_counts.max(axis=1, initial=0) <= sizes

    def ok(self, counts: list[int], size: int) -> bool:
        """`satisfied` for one group given as a Python list (the per-tuple loops of Hilbert/TP)."""
        if self.variant == "frequency":
            return self.l * max(counts) <= size
        if self.variant == "distinct":
            return sum(1 for x in counts if x) >= self.l
        return bool(self.satisfied(np.array([size]), np.array([counts]))[0])

    def check_feasible(self, sa_total):
        distinct = int((sa_total > 0).sum())
        if sa_total.sum() and self.l > distinct:
            raise AnonymizeError(f"l = {self.l} is greater than the number of distinct sensitive values ({distinct})")
        if sa_total.sum() and not self.satisfied(np.array([sa_total.sum()]), sa_total[None, :])[0]:
            if self.variant == "frequency":
                top = int(sa_total.max())
                raise AnonymizeError(
                    f"{self} is infeasible: the most frequent sensitive value covers {top} of {int(sa_total.sum())} "
                    f"rows, more than 1/{self.l} of the table"
                )
            raise AnonymizeError(f"{self} is infeasible: the whole table as one group does not satisfy it")

    def min_group_size(self):
        return self.l

    def __str__(self):
        if self.variant == "recursive":
            return f"recursive ({self.c:g}, {self.l})-diversity"
        return f"{self.variant} {self.l}-diversity"


def entropy(sa_counts: np.ndarray) -> np.ndarray:
    """Shannon entropy (natural log) of each row's distribution; 0 for empty rows."""
    counts = np.asarray(sa_counts, dtype=np.float64)
    sizes = counts.sum(axis=1, keepdims=True)
    p = counts / np.maximum(sizes, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=1)


@dataclass(frozen=True)
class TCloseness(PrivacyModel):
    """EMD between a group's SA distribution and the table's is at most t.

    `distance` names the ground distance between SA values (emd.py has the closed forms):
      equal         every two values at distance 1 (EMD = total variation, 1/2 sum |p - q|);
      ordered       values on a line in SA-code order (by value), or in `order` when the user
                    declared one: distance |rank_i - rank_j| / (v - 1);
      hierarchical  level of the lowest common ancestor / height, over `hierarchy` (an
                    emd.HierarchyIndex bound to the SA codes);
      custom        any (S, S) matrix `ground`, through the transportation LP (slow; small S).
    """

    t: float
    sa_total: tuple[int, ...]
    distance: str = "equal"
    order: tuple[int, ...] | None = None  # ordered: rank of each SA code (declared order)
    hierarchy: object = field(default=None, compare=False)
    ground: object = field(default=None, compare=False)
    name = "t-closeness"

    def emd(self, sizes, sa_counts) -> np.ndarray:
        total = np.asarray(self.sa_total, dtype=np.float64)
        q = total / max(total.sum(), 1.0)
        sizes = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
        p = np.asarray(sa_counts, dtype=np.float64) / sizes[:, None]
        if self.distance == "ordered":
            if self.order is not None:
                permutation = np.argsort(np.asarray(self.order))  # codes listed by rank
                return emd.emd_ordered(p[:, permutation], q[permutation])
            return emd.emd_ordered(p, q)
        if self.distance == "hierarchical":
            return emd.emd_hierarchical(p, q, self.hierarchy)
        if self.distance == "custom":
            return emd.emd_custom(p, q, np.asarray(self.ground))
        return emd.emd_equal(p, q)

    def distance_matrix(self) -> np.ndarray:
        """The (S, S) ground distance (for the exact MILP's transport form)."""
        v = len(self.sa_total)
        if self.distance == "ordered":
            rank = np.arange(v) if self.order is None else np.asarray(self.order)
            return np.abs(rank[:, None] - rank[None, :]) / max(v - 1, 1)
        if self.distance == "hierarchical":
            return self.hierarchy.distance_matrix()
        if self.distance == "custom":
            return np.asarray(self.ground, dtype=np.float64)
        return (np.arange(v)[:, None] != np.arange(v)[None, :]).astype(np.float64)

    def satisfied(self, sizes, sa_counts):
        return self.emd(sizes, sa_counts) <= self.t + EMD_TOLERANCE

    def ok(self, counts: list[int], size: int) -> bool:
        return bool(self.satisfied(np.array([size]), np.array([counts]))[0])

    def check_feasible(self, sa_total):
        return None  # the whole table has EMD 0

    # Sizes searched for the smallest possible t-close group; returning the cap is still a valid
    # lower bound (every smaller size was ruled out).
    MIN_SIZE_SEARCH = 10_000

    def min_group_size(self):
        """Smallest group size that can be t-close at all (equal distance; 1 otherwise).

        For size s the closest integer distribution to the table's, in L1, rounds s*q down and
        gives the leftover units to the largest remainders; if even that is farther than t,
        no group of s rows is t-close.
        """
        total = np.asarray(self.sa_total, dtype=np.float64)
        n = int(total.sum())
        if self.distance != "equal" or n == 0:
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

    def __str__(self):
        return f"{self.t:g}-closeness ({self.distance} distance)"


def all_satisfied(models, sizes, sa_counts) -> np.ndarray:
    ok = np.ones(len(sizes), dtype=bool)
    for model in models:
        ok &= model.satisfied(sizes, sa_counts)
    return ok
