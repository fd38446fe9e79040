"""Proven lower bounds on the optimal number of stars, used to certify heuristic results."""

from __future__ import annotations

import numpy as np

from duckanon.solver.histogram import Histogram

# Above this many (small class, class) pairs, the Hamming refinement is skipped (memory/time).
HAMMING_PAIR_LIMIT = 20_000_000


def k_anonymity_lower_bound(hist: Histogram, k: int, weights=None) -> int | float:
    """max of three bounds that hold for every k-anonymous partition:

    - each row of a class smaller than k shares a group with a row of another class c', so it
      gets at least hamming(c, c') stars: sum over small classes of size * min Hamming distance;
    - that group has at least k rows, each with at least one star: k;
    - Liang & Yuan's case 3: when the small rows plus the spare rows of the large classes are
      fewer than k, some large class is suppressed whole: small rows + smallest large class.

    With attribute `weights` (a star's cost per column, partition.star_weights) the bound is on
    the weighted stars: the Hamming distance counts the weights of the columns that differ, and
    a row with at least one star costs at least the smallest weight (a float then).
    """
    sizes = hist.sizes
    small = np.flatnonzero(sizes < k)
    if len(small) == 0 or hist.n_classes == 0:
        return 0
    small_rows = int(sizes[small].sum())
    cheapest = 1 if weights is None else float(np.min(weights))
    if len(small) * hist.n_classes * max(hist.m, 1) <= HAMMING_PAIR_LIMIT:
        differ = hist.codes[small][:, None, :] != hist.codes[None, :, :]
        if weights is None:
            distance = differ.sum(axis=2)
            distance[np.arange(len(small)), small] = hist.m + 1  # not to itself
            hamming = int((sizes[small] * distance.min(axis=1)).sum())
        else:
            distance = differ.astype(np.float64) @ np.asarray(weights, dtype=np.float64)
            distance[np.arange(len(small)), small] = float(np.sum(weights))  # not to itself (all stars, at most)
            hamming = float((sizes[small] * distance.min(axis=1)).sum())
    else:
        hamming = small_rows * cheapest
    bound = max(hamming, k * cheapest)
    large = sizes[sizes >= k]
    if len(large) and small_rows + int((large - k).sum()) < k:
        bound = max(bound, (small_rows + int(large.min())) * cheapest)
    return bound
