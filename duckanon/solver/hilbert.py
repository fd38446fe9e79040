"""The Hilbert-curve heuristic (Ghinita, Karras, Kalnis & Mamoulis, VLDB 2007), for suppression.

Rows close on a Hilbert curve over the QI codes tend to agree on many QI columns, so cutting the
curve order into consecutive groups gives groups with few disagreeing columns, i.e. few stars.
Ghinita et al. cut the 1-D order greedily into l-eligible groups, closing a group as soon as it
is eligible *and* the rows not yet grouped can still form eligible groups (the remaining set is
itself eligible); Xiao, Yi & Tao used it, adapted to suppression, as their best baseline, and TP+
runs it on TP's residue. We do the same on the class histogram:

  * classes are ordered by the Hilbert index of their code vectors (Skilling's transpose
    algorithm, vectorised over classes in numpy), rows of one class being adjacent;
  * inside a class, rows are dealt round-robin over its SA values, most frequent first, so a
    group becomes eligible after few rows and a large class yields star-free groups of its own;
  * the close test is every requested model on the group and on the remainder (all our models
    are closed under merging, so an eligible remainder can always be finished).

Cost: O(C * m * b) numpy for the curve (b bits per code) plus O(n * S) Python for the cut, where
n is the number of rows given to it (TP+ gives it only TP's residue).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from duckanon.solver.histogram import Histogram
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, build_solution


def hilbert_order(codes: np.ndarray) -> np.ndarray:
    """Permutation sorting the rows of `codes` (C, m) non-negative ints along a Hilbert curve."""
    n_points, dims = codes.shape
    if n_points <= 1 or dims == 0:
        return np.arange(n_points)
    if dims == 1:
        return np.argsort(codes[:, 0], kind="stable")
    bits = max(1, int(codes.max()).bit_length())
    x = codes.astype(np.uint64).T.copy()  # x[i] = coordinate i of every point
    top = np.uint64(1 << (bits - 1))
    # Skilling (2004), AxestoTranspose: undo excess work, then Gray-encode.
    q = top
    while q > 1:
        p = np.uint64(int(q) - 1)
        for i in range(dims):
            high = (x[i] & q) != 0
            x[0] = np.where(high, x[0] ^ p, x[0])  # invert the low bits of x[0]
            t = np.where(high, np.uint64(0), (x[0] ^ x[i]) & p)  # else exchange them with x[i]
            x[0] ^= t
            x[i] ^= t
        q = np.uint64(int(q) >> 1)
    for i in range(1, dims):
        x[i] ^= x[i - 1]
    t = np.zeros(n_points, dtype=np.uint64)
    q = top
    while q > 1:
        t = np.where((x[dims - 1] & q) != 0, t ^ np.uint64(int(q) - 1), t)
        q = np.uint64(int(q) >> 1)
    x ^= t
    # The index interleaves the transposed bits, most significant first; pack it into 63-bit words.
    words, word, used = [], np.zeros(n_points, dtype=np.uint64), 0
    for bit in range(bits - 1, -1, -1):
        for i in range(dims):
            word = (word << np.uint64(1)) | ((x[i] >> np.uint64(bit)) & np.uint64(1))
            used += 1
            if used == 63:
                words.append(word)
                word, used = np.zeros(n_points, dtype=np.uint64), 0
    if used:
        words.append(word)
    return np.lexsort(tuple(reversed(words)))  # lexsort's last key is the primary one


def hilbert_groups(hist: Histogram, part_class, part_sa, part_count, models, first_group: int = 0):
    """Cut the given rows (class, SA, count parts) along the curve into groups satisfying `models`.

    Returns parts (class, sa, group, count) with groups numbered from `first_group`. If the rows
    as a whole do not satisfy the models, the last group does not either (the caller repairs).
    """
    part_class = np.asarray(part_class, dtype=np.int64)
    part_sa = np.asarray(part_sa, dtype=np.int64)
    part_count = np.asarray(part_count, dtype=np.int64)
    n_values = hist.sa_counts.shape[1]
    if part_count.sum() == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    classes = np.unique(part_class)
    rank = np.empty(hist.n_classes, dtype=np.int64)
    rank[classes[hilbert_order(hist.codes[classes])]] = np.arange(len(classes))
    order = np.lexsort((part_sa, rank[part_class]))
    part_class, part_sa, part_count = part_class[order], part_sa[order], part_count[order]

    min_size = max([model.min_group_size() for model in models], default=1)
    remaining = np.bincount(part_sa, weights=part_count, minlength=n_values).astype(np.int64).tolist()
    remaining_size = int(part_count.sum())
    checks = [model.ok for model in models]
    group = [0] * n_values
    group_size = 0
    group_id = first_group
    assign: dict[tuple[int, int, int], int] = defaultdict(int)

    starts = np.flatnonzero(np.r_[True, part_class[1:] != part_class[:-1]])
    ends = np.r_[starts[1:], len(part_class)]
    for start, end in zip(starts.tolist(), ends.tolist()):
        c = int(part_class[start])
        values = part_sa[start:end].tolist()
        counts = part_count[start:end].tolist()
        # Round-robin over the class's SA values, most frequent first.
        slots = sorted(range(len(values)), key=lambda j: -counts[j])
        left = [counts[j] for j in slots]
        vals = [values[j] for j in slots]
        while slots:
            alive = 0
            for j in range(len(vals)):
                if left[j] == 0:
                    continue
                v = vals[j]
                left[j] -= 1
                alive += left[j] > 0
                assign[(c, v, group_id)] += 1
                group[v] += 1
                group_size += 1
                remaining[v] -= 1
                remaining_size -= 1
                if (
                    group_size >= min_size
                    and all(ok(group, group_size) for ok in checks)
                    and (remaining_size == 0 or all(ok(remaining, remaining_size) for ok in checks))
                ):
                    group_id += 1
                    group = [0] * n_values
                    group_size = 0
            if not alive:
                break
    keys = np.array(list(assign.keys()), dtype=np.int64).reshape(-1, 3)
    counts = np.fromiter(assign.values(), dtype=np.int64, count=len(assign))
    return keys[:, 0], keys[:, 1], keys[:, 2], counts


def hilbert(hist: Histogram, models) -> Solution:
    """`method = 'hilbert'`: the whole table cut along the curve."""
    cls, sa = np.nonzero(hist.sa_counts)
    parts = hilbert_groups(hist, cls, sa, hist.sa_counts[cls, sa], models)
    return build_solution(hist, *parts, method="hilbert")


def satisfies(hist: Histogram, solution: Solution, models) -> bool:
    sizes = solution.group_sizes()
    used = sizes > 0
    return bool(all_satisfied(models, sizes[used], solution.group_sa(hist.sa_counts.shape[1])[used]).all())
