"""The m-approximation for k-anonymity (Liang & Yuan 2012, Theorem 10).

Classes smaller than k (S rows in all) must be suppressed somewhere, so OPT >= S. The algorithm
releases every class of size >= k unchanged and builds one extra group:
  case 1, S >= k:          the small classes together;
  case 2, S + spare >= k:  the small classes plus k - S spare rows taken from classes that keep
                           at least k rows (OPT >= k here);
  case 3, otherwise:       the small classes plus the smallest large class (OPT >= S + its size).
Each case costs at most m times the matching bound, so cost <= m * OPT. Time: O(C log C) on the
class histogram, independent of the row count.

Where the paper leaves a choice (which spare rows in case 2), we take rows from the classes that
add the fewest new stars to the group first (with attribute weights, the least weight of new
stars; the m-approximation is a statement about unweighted stars).
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.histogram import Histogram
from duckanon.solver.partition import STAR, Solution, identity_solution, solution_from_class_groups, star_cost


def mapprox(hist: Histogram, k: int, weights=None) -> Solution:
    sizes = hist.sizes
    small = sizes < k
    if not small.any() or hist.n_classes == 0:
        return identity_solution(hist, "mapprox")
    small_rows = int(sizes[small].sum())
    large = np.flatnonzero(~small)
    spare = sizes[large] - k
    cls, group, count = [], [], []
    extra_group = hist.n_classes  # id of the group that collects the suppressed rows
    for c in np.flatnonzero(small):
        cls.append(c); group.append(extra_group); count.append(sizes[c])
    if small_rows >= k:
        donors = {}
    elif small_rows + int(spare.sum()) >= k:
        need = k - small_rows
        small_codes = hist.codes[small]
        rep = np.where((small_codes == small_codes[0]).all(axis=0), small_codes[0], STAR)
        new_stars = star_cost((hist.codes[large] != rep) & (rep != STAR), weights)
        donors = {}
        for i in np.lexsort((-spare, new_stars)):
            if need == 0:
                break
            take = int(min(spare[i], need))
            if take:
                donors[large[i]] = take
                need -= take
    else:
        smallest_large = large[np.argmin(sizes[large])]
        donors = {smallest_large: int(sizes[smallest_large])}
    for c in large:
        take = donors.get(c, 0)
        if take:
            cls.append(c); group.append(extra_group); count.append(take)
        if sizes[c] - take:
            cls.append(c); group.append(c); count.append(sizes[c] - take)
    return solution_from_class_groups(hist, cls, group, count, "mapprox")
