"""Mondrian's groups improved by moving whole classes between them where the loss falls.

Mondrian cuts regions in two and never revisits a cut: a class that a cut put on the wrong side
widens its group's sets and ranges for good. Here every class may move to another group (or
alone into a new one, when it satisfies the request by itself) when that lowers ARX's Loss of
the release and both groups still satisfy every model afterwards.

A group's cell in column j costs (distinct values - 1) / (values - 1) for a set, (highest code -
lowest code) / (values - 1) for a range of a numeric column; the release's loss is ARX's
geometric mean over the columns, whose change is weighed by its derivative at the current loss.

One pass: the best move of every class is computed at once (groups x classes matrices, by
chunks of classes), then the moves that lower the loss are made one by one from the best, each
recomputed on the current groups and made only if it still lowers the loss and keeps both
groups valid. Every state is a valid partition no worse than the one before, so the context's
deadline (a statement's time_limit; it records the cut) can stop it anywhere; without one it runs
its REFINE_PASSES passes or until no move lowers the loss. Above REFINE_CELLS (groups x classes) a pass costs too much and
the groups are left as Mondrian made them.
"""

from __future__ import annotations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.lattice_metrics import arx_weights
from duckanon.solver.models import all_satisfied

REFINE_CELLS = 2e7  # groups x classes, at most
REFINE_PASSES = 10
CHUNK_CELLS = 4e6  # groups x classes x columns per vectorized chunk
# The per-column counts of classes per group and value (8 bytes each, (groups + classes) x values),
# at most: above, the groups are left as Mondrian made them (3,000 classes x 40 QIs of 100 values
# held 192 MB of them, which the memory estimate did not count)
REFINE_COUNT_BYTES = 1 << 28


def refine_memory_bound(n_classes: int, m: int, largest_code: int) -> int:
    """An upper bound on the bytes refine_groups holds (the memory estimate's term for
    `mondrian` without hierarchies, pipeline/histogram.py): its counts (at most
    REFINE_COUNT_BYTES; groups <= classes, values per column <= largest_code + 1) and about five
    float arrays of one chunk."""
    counts = min(REFINE_COUNT_BYTES, 8 * 2 * n_classes * m * (largest_code + 1))
    return counts + 5 * 8 * int(min(CHUNK_CELLS, n_classes * n_classes * max(m, 1)))


class _Groups:
    """The groups' sizes, SA counts, and per column the classes per value (and the costs)."""

    def __init__(self, hist: Histogram, group_of: np.ndarray, numeric: list[bool]):
        self.codes = hist.codes
        self.sizes = np.asarray(hist.sizes, dtype=np.float64)
        self.sa = np.asarray(hist.sa_counts, dtype=np.float64)
        n_classes, self.m = self.codes.shape
        self.numeric = numeric
        self.group_of = group_of.copy()
        n_groups = int(group_of.max()) + 1
        self.capacity = n_groups + n_classes  # a class may leave to form its own group
        self.used = n_groups
        self.gsize = np.zeros(self.capacity)
        np.add.at(self.gsize, group_of, self.sizes)
        self.gsa = np.zeros((self.capacity, self.sa.shape[1]))
        np.add.at(self.gsa, group_of, self.sa)
        self.values = [int(self.codes[:, j].max()) + 1 for j in range(self.m)]
        self.scale = np.array([1.0 / max(v - 1, 1) for v in self.values])
        self.count = [np.zeros((self.capacity, v), dtype=np.int64) for v in self.values]
        for j in range(self.m):
            np.add.at(self.count[j], (group_of, self.codes[:, j]), 1)
        self.cell = np.zeros((self.capacity, self.m))  # per group and column, one cell's cost
        for g in range(n_groups):
            self.refresh(g)

    def refresh(self, g: int) -> None:
        for j in range(self.m):
            self.cell[g, j] = self._cost(j, np.flatnonzero(self.count[j][g]))

    def _cost(self, j: int, present: np.ndarray) -> float:
        """One cell's cost in column j for a group holding the values `present` (sorted codes)."""
        if not len(present):
            return 0.0
        if self.numeric[j]:
            return float((present[-1] - present[0]) * self.scale[j])
        return float((len(present) - 1) * self.scale[j])

    def totals(self) -> np.ndarray:
        return (self.gsize[:, None] * self.cell).sum(axis=0)

    def cell_with(self, g: int, j: int, code: int, delta: int) -> float:
        """Group g's cost in column j with one class of value `code` added (+1) or removed (-1)."""
        row = self.count[j][g]
        present = np.flatnonzero(row)
        if delta > 0 and row[code] == 0:
            present = np.sort(np.append(present, code))
        elif delta < 0 and row[code] == 1:
            present = present[present != code]
        return self._cost(j, present)

    def move(self, c: int, b: int) -> None:
        a = int(self.group_of[c])
        self.group_of[c] = b
        self.gsize[a] -= self.sizes[c]
        self.gsize[b] += self.sizes[c]
        self.gsa[a] -= self.sa[c]
        self.gsa[b] += self.sa[c]
        for j in range(self.m):
            self.count[j][a, self.codes[c, j]] -= 1
            self.count[j][b, self.codes[c, j]] += 1
        self.refresh(a)
        self.refresh(b)


def refine_groups(hist: Histogram, group_of: np.ndarray, models, numeric: list[bool] | None = None,
                  context: SolveContext = UNBOUNDED, weights=None) -> np.ndarray:
    """Mondrian's `group_of` (class -> group) after the class moves of the module docstring.
    `weights`: ARX's attribute weights per QI; the loss is then ARX's weighted geometric mean,
    whose derivative in column j is w_j / (rows + w_j T_j)."""
    n_classes = hist.n_classes
    if not n_classes:
        return group_of
    group_of = np.unique(group_of, return_inverse=True)[1].ravel().astype(np.int64)
    n_groups = int(group_of.max()) + 1
    if n_groups < 2 or n_groups * n_classes > REFINE_CELLS:
        return group_of
    values = sum(int(hist.codes[:, j].max()) + 1 for j in range(hist.m))
    if 8 * (n_groups + n_classes) * values > REFINE_COUNT_BYTES:
        return group_of
    numeric = list(numeric) if numeric is not None else [False] * hist.m
    state = _Groups(hist, group_of, numeric)
    rows = float(state.sizes.sum())
    alone_ok = all_satisfied(models, state.sizes, state.sa)
    user = arx_weights(weights)
    user = np.ones(hist.m) if user is None else user
    for _ in range(REFINE_PASSES):
        if context.expired():
            context.cut("mondrian refinement")
            break
        weights = user / (rows + user * state.totals())  # d/dT_j of sum_j log(1 + w_j T_j / rows)
        candidates = _best_moves(state, models, weights, alone_ok, context)
        moved = 0
        for c, b, _ in candidates:
            if context.expired():
                context.cut("mondrian refinement")
                break
            if _still_better(state, models, c, b, weights):
                state.move(c, state.used if b < 0 else b)
                state.used += b < 0
                moved += 1
        if not moved:
            break
    return np.unique(state.group_of, return_inverse=True)[1].ravel().astype(np.int64)


def _best_moves(state: _Groups, models, weights: np.ndarray, alone_ok: np.ndarray,
                context: SolveContext) -> list[tuple[int, int, float]]:
    """Per class whose best move lowers the weighted loss: (class, group or -1 for a new group of
    its own, change), best first."""
    alive = np.flatnonzero(state.gsize[:state.used] > 0)
    n_alive = len(alive)
    gsize, gcell = state.gsize[alive], state.cell[alive]
    chunk = max(1, int(CHUNK_CELLS // max(n_alive * state.m, 1)))
    out = []
    for start in range(0, len(state.sizes), chunk):
        if context.expired():
            context.cut("mondrian refinement")
            break
        classes = np.arange(start, min(start + chunk, len(state.sizes)))
        codes = state.codes[classes]
        s = state.sizes[classes]
        a = state.group_of[classes]
        change_b = np.zeros((n_alive, len(classes)))
        change_a = np.zeros(len(classes))
        for j in range(state.m):
            count = state.count[j]
            v = codes[:, j]
            if state.numeric[j]:
                present = count[alive] > 0
                low = np.argmax(present, axis=1)
                high = state.values[j] - 1 - np.argmax(present[:, ::-1], axis=1)
                new_cell = (np.maximum(high[:, None], v[None, :]) - np.minimum(low[:, None], v[None, :])) * state.scale[j]
                change_a_j = np.zeros(len(classes))  # a range's end may not move: counted as no gain here
            else:
                distinct = (count[alive] > 0).sum(axis=1)
                new_cell = (distinct[:, None] + (count[alive][:, v] == 0) - 1) * state.scale[j]
                left = state.cell[a, j] - (count[a, v] == 1) * state.scale[j]
                change_a_j = (state.gsize[a] - s) * np.maximum(left, 0) - state.gsize[a] * state.cell[a, j]
            change_b += weights[j] * ((gsize[:, None] + s[None, :]) * new_cell - (gsize * gcell[:, j])[:, None])
            change_a += weights[j] * change_a_j
        sa = state.gsa[alive][:, None, :] + state.sa[classes][None, :, :]
        ok = all_satisfied(models, (gsize[:, None] + s[None, :]).ravel(), sa.reshape(-1, sa.shape[-1]))
        ok = ok.reshape(n_alive, len(classes)) & (alive[:, None] != a[None, :])
        rest = state.gsize[a] - s
        rest_ok = (rest <= 0) | all_satisfied(models, rest, state.gsa[a] - state.sa[classes])
        masked = np.where(ok, change_b, np.inf)
        pick = np.argmin(masked, axis=0) if n_alive else np.zeros(len(classes), dtype=np.int64)
        total = masked[pick, np.arange(len(classes))] if n_alive else np.full(len(classes), np.inf)
        target = alive[pick] if n_alive else np.full(len(classes), -1)
        alone = alone_ok[classes] & (rest > 0) & (0.0 < total)  # alone, the class's cells cost 0
        total = np.where(alone, 0.0, total) + change_a
        target = np.where(alone, -1, target)
        better = np.flatnonzero(rest_ok & (total < -1e-12))
        out.extend(zip(classes[better].tolist(), target[better].tolist(), total[better].tolist()))
    out.sort(key=lambda item: item[2])
    return out


def _still_better(state: _Groups, models, c: int, b: int, weights: np.ndarray) -> bool:
    """Whether moving class c to group b (-1: a new group of its own) still keeps both groups
    valid and lowers the loss, on the current groups."""
    a = int(state.group_of[c])
    if a == b:
        return False
    s, v = state.sizes[c], state.codes[c]
    rest = state.gsize[a] - s
    if rest > 0 and not all_satisfied(models, np.array([rest]), (state.gsa[a] - state.sa[c])[None, :])[0]:
        return False
    change = sum(weights[j] * (rest * state.cell_with(a, j, int(v[j]), -1) - state.gsize[a] * state.cell[a, j])
                 for j in range(state.m))
    if b >= 0:
        if not all_satisfied(models, np.array([state.gsize[b] + s]), (state.gsa[b] + state.sa[c])[None, :])[0]:
            return False
        change += sum(weights[j] * ((state.gsize[b] + s) * state.cell_with(b, j, int(v[j]), 1)
                                    - state.gsize[b] * state.cell[b, j]) for j in range(state.m))
    return change < -1e-12
