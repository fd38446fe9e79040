"""Kernelization for k-anonymity under cell suppression (Blocki & Williams 2010, Lemma 2 / Algorithm 1).

A class (a QI vector r) with very many rows can always release groups of k identical rows at
zero cost; the kernel emits such groups until the class is below a threshold. The reduced
histogram has exactly the same optimum as the input (the emitted groups cost nothing), so any
exact solver can run on it and add the emitted groups back.

Threshold used here (sharper than the paper's T = k * 2k * 2^m, same proof idea). Take an optimal
solution and merge groups that publish the same vector (cost unchanged, still k-anonymous), so
every published vector is one group. Let P bound the number of *starred* groups that can hold a
copy of r: each has a distinct star set and holds at least one row other than r, so
P <= min(2^m - 1, n - count(r)) (with user patterns, also <= the number of non-empty patterns).

  (A) If the pure group <r, t> (vector r, zero stars) exists, every starred group G holding r
      has exactly k rows: otherwise moving one copy of r from G into the pure group keeps G
      k-anonymous and saves stars(G) >= 1. Such a G holds at most k - 1 copies of r (k copies
      would make it pure). So at most (k - 1) * P copies of r lie outside the pure group.
  (B) Without a pure group, a starred group G holding c >= k copies of r has |G| <= 2k - 1:
      otherwise split off <r, k> (G keeps >= k rows) and save k * stars(G). G also holds a row
      other than r, so c <= 2k - 2 in every case, and count(r) <= (2k - 2) * P.
Hence if count(r) >= (2k - 2) * P + 1 the pure group exists and holds at least
count(r) - (k - 1) * P rows. If moreover that is >= 2k, removing k copies of r from the pure group
gives a solution of D' = D - k copies of r with the same cost, so OPT(D') <= OPT(D); and
OPT(D) <= OPT(D') by adding the group <r, k>. So, with

    T(r) = max((2k - 2) * P + 1, 2k + (k - 1) * P),

while count(r) >= T(r) we may emit k copies of r at zero cost. Each step is applied to the
current instance (P only shrinks as other classes are reduced), so the whole reduction is exact.

Only for k-anonymity (and pattern-guided k-anonymity): with l-diversity or t-closeness a group of
identical QI rows must itself be diverse/close, and the argument above does not hold.

Time: O(C) on the class histogram (C classes), independent of the number of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from duckanon.solver.histogram import Histogram


@dataclass
class Kernel:
    """`hist`: the reduced histogram (same classes, same order, fewer rows).

    `emitted[i] = (class, sa_counts)`: one zero-star group per reduced class, of identical rows
    (a multiple of k of them); `removed` is the number of rows taken out in all.
    """

    hist: Histogram
    emitted: list[tuple[int, np.ndarray]] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return int(sum(int(sa.sum()) for _, sa in self.emitted))


def kernel_threshold(k: int, p: int) -> int:
    """Smallest count at which k copies of a class can be emitted (see the module docstring)."""
    return max((2 * k - 2) * p + 1, 2 * k + (k - 1) * p)


def kernelize(hist: Histogram, k: int, n_starred_patterns: int | None = None) -> Kernel:
    """Reduce `hist` for k-anonymity (exact: OPT(reduced) == OPT(hist)).

    `n_starred_patterns`: number of allowed non-empty star sets (pattern-guided instances);
    default 2^m - 1.
    """
    if k <= 1 or hist.n_classes == 0:
        return Kernel(hist)
    m = hist.m
    p_cap = (1 << m) - 1 if m < 62 else np.iinfo(np.int64).max
    if n_starred_patterns is not None:
        p_cap = min(p_cap, int(n_starred_patterns))
    sa = hist.sa_counts.copy()
    sizes = sa.sum(axis=1)
    n = int(sizes.sum())
    emitted = []
    for c in np.argsort(-sizes, kind="stable"):
        count = int(sizes[c])
        p = min(p_cap, n - count)
        threshold = kernel_threshold(k, p)
        if count < threshold:
            # n changes only when a class is reduced, so from here on n is fixed; the classes
            # after this one are no larger, their P (n - count, capped) no smaller, and so their
            # thresholds no lower: none of them is reduced either
            break
        steps = (count - threshold) // k + 1
        take = steps * k
        # take the rows from the SA values in code order (k-anonymity ignores the SA)
        out = np.zeros(sa.shape[1], dtype=np.int64)
        need = take
        for s in range(sa.shape[1]):
            got = min(need, int(sa[c, s]))
            out[s] = got
            need -= got
            if need == 0:
                break
        sa[c] -= out
        sizes[c] -= take
        n -= take
        emitted.append((int(c), out))
    if not emitted:
        return Kernel(hist)
    reduced = Histogram(codes=hist.codes, sa_counts=sa, columns=hist.columns)
    return Kernel(reduced, emitted)
