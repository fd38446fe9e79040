"""The Hilbert-curve heuristic (Ghinita, Karras, Kalnis & Mamoulis, VLDB 2007), for suppression.

Rows close on a Hilbert curve over the QI codes tend to agree on many QI columns, so cutting the
curve order into consecutive groups gives groups with few disagreeing columns, i.e. few stars.
Ghinita et al. order the rows along the curve and cut that 1-D order into l-eligible groups so
that the rows not yet grouped stay eligible (the condition of Xiao & Tao's Anatomy); Xiao, Yi &
Tao used it, adapted to suppression, as their best baseline, and TP+ runs it on TP's residue. We
do the same on the class histogram (rows of one class are adjacent on the curve; classes are
ordered by Skilling's transpose algorithm, vectorised over classes in numpy), with two cuts:

  * frequency l-diversity (k <= l at most): Anatomy-style groups of exactly l rows with l
    distinct SA values: the values that must go now to keep the remainder eligible, then the
    values whose next row is earliest on the curve (same class first, so no stars where a class
    can give l distinct values itself);
  * any other combination of models: a sequential cut that closes a group once it and the
    remainder both satisfy every model, rows of a class dealt round-robin over its SA values.
    All our models are closed under merging, so an eligible remainder can always be finished.

Cost: O(C * m * b) numpy for the curve (b bits per code) plus O(n * S) Python for the cut (O(n/l *
S log S) for the bucket cut), where
n is the number of rows given to it (TP+ gives it only TP's residue).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from duckanon.solver.histogram import Histogram
from duckanon.solver.partition import Solution, build_solution
from duckanon.solver.request import Request


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
    models = Request.of(models)
    part_class = np.asarray(part_class, dtype=np.int64)
    part_sa = np.asarray(part_sa, dtype=np.int64)
    part_count = np.asarray(part_count, dtype=np.int64)
    if part_count.sum() == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    classes = np.unique(part_class)
    rank = np.empty(hist.n_classes, dtype=np.int64)
    rank[classes[hilbert_order(hist.codes[classes])]] = np.arange(len(classes))
    order = np.lexsort((part_sa, rank[part_class]))
    part_class, part_sa, part_count = part_class[order], part_sa[order], part_count[order]
    l = _bucket_l(models)
    if l is not None:
        return _bucket_cut(part_class, part_sa, part_count, rank[part_class], l, hist.sa_counts.shape[1], first_group)
    return _sequential_cut(part_class, part_sa, part_count, models, hist.sa_counts.shape[1], first_group)


def _bucket_l(models):
    """l when the request is frequency l-diversity (with at most k <= l): groups of l distinct values."""
    if len(models.diversity) != 1 or models.frequency_l == 0:
        return None
    l = models.frequency_l
    if len(models.k_anonymity) + 1 == len(models) and models.k <= l:
        return l
    return None


def _bucket_cut(part_class, part_sa, part_count, part_rank, l, n_values, first_group):
    """Frequency l-diversity: Anatomy-style groups of l rows with l distinct SA values, picked along
    the curve. One queue per SA value, in curve order. A value is mandatory in the next group when
    leaving it out would make the remaining rows ineligible (l * |B_v| > T - l); the other slots go
    to the values whose next row comes first on the curve, so a group takes rows of the earliest
    classes, and of one class where it can (no stars). An eligible remainder stays eligible after
    each group (Xiao & Tao's Anatomy argument), so every group and the last one are l-eligible."""
    queues = [np.flatnonzero(part_sa == v) for v in range(n_values)]
    head = [0] * n_values
    left_in_head = [int(part_count[q[0]]) if len(q) else 0 for q in queues]
    bucket = [int(part_count[q].sum()) for q in queues]
    total = sum(bucket)
    ranks = part_rank.tolist()
    assign: dict[tuple[int, int, int], int] = defaultdict(int)
    classes = part_class.tolist()
    group_id = first_group

    def take(v: int, count: int = 1) -> None:
        p = int(queues[v][head[v]])
        assign[(classes[p], v, group_id)] += count
        bucket[v] -= count
        left_in_head[v] -= count
        if left_in_head[v] == 0 and bucket[v]:
            head[v] += 1
            left_in_head[v] = int(part_count[queues[v][head[v]]])

    while total:
        nonempty = [v for v in range(n_values) if bucket[v]]
        mandatory = [v for v in nonempty if l * bucket[v] > total - l]
        if total < 2 * l or len(mandatory) > l:  # the rest cannot be split further: one last group
            for v in nonempty:
                while bucket[v]:
                    take(v, min(bucket[v], left_in_head[v]))
            break
        free = sorted((v for v in nonempty if v not in mandatory), key=lambda v: ranks[queues[v][head[v]]])
        chosen = mandatory + free[: l - len(mandatory)]
        # The same group repeats while no chosen head part runs out, no other value turns
        # mandatory (l * |B_v| > T - l) and at least 2l rows remain: emit the repeats as one
        # group (identical groups publish as one class anyway).
        repeats = min(total // l - 1, min(left_in_head[v] for v in chosen))
        for v in nonempty:
            if v not in chosen:
                repeats = min(repeats, (total - l - l * bucket[v]) // l + 1)
        for v in chosen:
            take(v, repeats)
        total -= l * repeats
        group_id += 1
    keys = np.array(list(assign.keys()), dtype=np.int64).reshape(-1, 3)
    counts = np.fromiter(assign.values(), dtype=np.int64, count=len(assign))
    return keys[:, 0], keys[:, 1], keys[:, 2], counts


def _sequential_cut(part_class, part_sa, part_count, models, n_values, first_group):
    """Any models: close a group once it and the rows after it both satisfy every model."""

    min_size = models.min_group_size
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


def hilbert_solution(hist: Histogram, models) -> Solution:
    """`method = 'hilbert'`: the whole table cut along the curve."""
    cls, sa = np.nonzero(hist.sa_counts)
    parts = hilbert_groups(hist, cls, sa, hist.sa_counts[cls, sa], models)
    return build_solution(hist, *parts, method="hilbert")
