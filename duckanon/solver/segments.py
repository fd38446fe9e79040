"""`method = 'segments'`: cell suppression for wide tables, in O(C log C + C x m) on C classes.

On a table with many quasi-identifiers nearly every row is a class of its own, so the methods
that compare classes with one another (greedy's pattern search, merging, local moves) grow with
the classes squared or with the patterns, and the histogram is as large as the table. This one
sorts and cuts:

  1. Classes that satisfy the models on their own are published unchanged (no star).
  2. The others are sorted lexicographically by their codes, the column of least entropy first
     (with attribute weights: least entropy per unit of a star's cost), so that neighbours in
     the order share the columns that are cheapest to share: a group of g random rows agrees on
     a column of v equally likely values with probability v^-(g-1), and what a sorted prefix
     fixes is bits, of which a low-entropy column spends the fewest.
  3. The sorted list is cut into consecutive segments, each a group, by a dynamic program that
     minimizes the stars (rows x columns not constant in the segment, weighted): a segment of
     at most 2 x min_group_size - 1 classes (a longer one splits into two that each still
     reach the size and star no more, for k-anonymity), that satisfies the models (the rows and
     the sensitive counts of the segment). Column j is constant on the segment [a, b] when its
     last change at or before b is at or before a (`_run_starts`).

The program is exact for the order; the order is the heuristic. Work is bounded by counts: one
sort, and per position at most 2 x min_group_size - 1 candidate segments, in blocks of
SEGMENT_BLOCK positions so memory stays O(block x m) beside the histogram. When no cut
satisfies the models (l-diversity or t-closeness a segment of that length cannot reach), the
cut is by rows alone and the caller repairs the violating groups (heuristics.py).
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.histogram import Histogram, lexicographic_order
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, identity_solution, solution_from_class_groups
from duckanon.solver.request import Request

# Positions of the sorted list whose candidate segments are evaluated together (memory ~ block x m).
SEGMENT_BLOCK = 1 << 18
_NO_CUT = float("inf")


def segments(hist: Histogram, request: Request, weights=None) -> Solution:
    """The sorted-and-cut groups (module docstring); `weights` a star's cost per column or None."""
    request = Request.of(request)
    sizes = hist.sizes
    alone = all_satisfied(request, sizes, hist.sa_counts)
    pool = np.flatnonzero(~alone)
    if len(pool) == 0:
        return identity_solution(hist, "segments")
    column_cost = np.ones(hist.m) if weights is None else np.asarray(weights, dtype=float)
    codes = hist.compact_codes if len(pool) == hist.n_classes else hist.compact_codes[pool]  # (never widened)
    order = column_order(codes, sizes[pool], column_cost)
    pool = pool[lexicographic_order(codes, order)]
    del codes
    lengths = _cut(hist, pool, request, column_cost, check_models=not request.k_only)
    if lengths is None:  # no cut satisfies the models: by rows alone, repaired by the caller
        lengths = _cut(hist, pool, request, column_cost, check_models=False)
    if lengths is None:  # fewer rows than a group needs: all in one group (repair decides)
        lengths = np.array([len(pool)])
    group_of_pool = np.repeat(np.arange(len(lengths)), lengths)
    singles = np.flatnonzero(alone)
    cls = np.concatenate([singles, pool])
    group = np.concatenate([np.arange(len(singles)), len(singles) + group_of_pool])
    return solution_from_class_groups(hist, cls, group, sizes[cls], "segments")


def column_order(codes: np.ndarray, sizes: np.ndarray, column_cost: np.ndarray) -> np.ndarray:
    """Columns by ascending entropy of their values over these rows, per unit of a star's cost
    (a column that costs nothing to star goes last); ties by position."""
    entropy = np.zeros(codes.shape[1])
    total = float(sizes.sum())
    for j in range(codes.shape[1]):
        counts = np.bincount(codes[:, j], weights=sizes)
        p = counts[counts > 0] / total
        entropy[j] = -(p * np.log2(p)).sum()
    with np.errstate(divide="ignore"):
        per_cost = np.where(column_cost > 0, entropy / np.where(column_cost > 0, column_cost, 1), np.inf)
    return np.lexsort((np.arange(codes.shape[1]), per_cost))


def _run_starts(sorted_codes: np.ndarray, first: int) -> np.ndarray:
    """Per position p of the block and column j: the first position (in the whole list, offset by
    `first`) of the run of equal values of column j that ends at p."""
    n = len(sorted_codes)
    positions = np.arange(first, first + n, dtype=np.int64)
    change = np.ones(sorted_codes.shape, dtype=bool)
    change[1:] = sorted_codes[1:] != sorted_codes[:-1]
    starts = np.where(change, positions[:, None], first)
    return np.maximum.accumulate(starts, axis=0)


def _cut(hist: Histogram, pool: np.ndarray, request: Request, column_cost: np.ndarray, check_models: bool):
    """The segment lengths (in classes) of the cut of least (weighted) stars, or None when none
    is feasible (module docstring, step 3)."""
    n = len(pool)
    max_length = max(1, min(n, 2 * request.min_group_size - 1))
    rows_before = np.concatenate([[0], np.cumsum(hist.sizes[pool])])
    best = [0.0] + [_NO_CUT] * n  # least cost of the first i classes
    length_of = np.zeros(n + 1, dtype=np.int64)
    for first in range(0, n, SEGMENT_BLOCK):
        last = min(n, first + SEGMENT_BLOCK)  # segments ending in [first, last)
        lead = max(0, first - max_length + 1)  # their starts may lie before the block
        candidates = _segment_costs(hist, pool, lead, first, last, max_length, rows_before, request,
                                    column_cost, check_models)
        for end in range(first, last):
            i = end + 1
            least, chosen = _NO_CUT, 0
            for length, cost in candidates:
                value = cost[end - first]
                if value != _NO_CUT and best[i - length] + value < least:
                    least, chosen = best[i - length] + value, length
            best[i] = least
            length_of[i] = chosen
    if best[n] == _NO_CUT:
        return None
    lengths = []
    i = n
    while i > 0:
        lengths.append(int(length_of[i]))
        i -= int(length_of[i])
    return np.array(lengths[::-1], dtype=np.int64)


def _segment_costs(hist: Histogram, pool, lead: int, first: int, last: int, max_length: int, rows_before,
                   request: Request, column_cost, check_models: bool) -> list[tuple[int, list]]:
    """Per segment length, the cost of the segment of that length ending at each position of
    [first, last): rows x weighted columns not constant, or inf where it is not a group."""
    codes = hist.compact_codes[pool[lead:last]]
    run_start = _run_starts(codes, lead)[first - lead:]
    ends = np.arange(first, last, dtype=np.int64)
    if check_models:
        sa_before = np.concatenate([np.zeros((1, hist.sa_counts.shape[1]), dtype=np.int64),
                                    np.cumsum(hist.sa_counts[pool[lead:last]], axis=0)])
    candidates = []
    for length in range(1, max_length + 1):
        starts = ends - length + 1
        valid = starts >= 0
        starts_at = np.maximum(starts, 0)
        rows = rows_before[ends + 1] - rows_before[starts_at]
        if check_models:
            sa = sa_before[ends + 1 - lead] - sa_before[np.maximum(starts_at - lead, 0)]
            valid &= all_satisfied(request, rows, sa)
        else:
            valid &= rows >= request.min_group_size
        if not valid.any():
            continue
        starred = run_start > starts_at[:, None]
        cost = rows * (starred @ column_cost)
        candidates.append((length, np.where(valid, cost, _NO_CUT).tolist()))
    return candidates
