"""The heuristic search of a level lattice too large to decide node by node (more nodes than
lattice.py's EXHAUSTIVE_NODES): the best node it finds within a bound on node evaluations
(`steps`, SEARCH_STEPS by default; counts, never the clock), not proven optimal unless its
best-first phase runs out of nodes that could beat its best.

Nodes are level tuples, evaluated on demand (a dict of verdicts, a dict of the nodes queued, two
antichains for the cones below): nothing is allocated per node of the lattice, so a lattice of
4^200 nodes is searched as one of 4^9 is, in the nodes it touches. A node is judged as the
exhaustive search judges it (`assess`: the same models, suppression limit, removed rows,
monotonicity and metric with ARX's charges for removed rows); the node published is valued again
by the exhaustive search's own code (Lattice.result_at) and validated by solve() as any other.

The phases, each within what is left of the bound:
  1. the top node (one class: within any limit when the whole table satisfies the models, which
     the solver checks first): a solution whatever the bound;
  2. the frontier along one chain from the bottom to the top that raises the column least far up
     its hierarchy at each step, by binary search (as Flash seeds its search);
  3. a descent from the best solution: its finer neighbours in increasing order of their bound
     (the metric with nothing removed); the first better solution becomes the best, and so on
     until none of them is (a local optimum);
  4. a best-first search from the bottom after Lightning (Prasser et al., Trans. Data Privacy
     9(2), 2016; ARX's LIGHTNINGAlgorithm): the queued node of least bound is checked, its coarser
     neighbours queued, and from it a greedy climb runs (ARX's depth-first step: check every
     coarser neighbour that could still lead to a better node, move to the one of least value,
     repeat). ARX orders its queue by the nodes' values and climbs every (top level)-th step;
     the bound orders it here (a lower bound on every node above, so the search is a branch and
     bound that ends when no queued node can beat the best) and the climb runs at every step: on
     the harness's 20 cases that found every exhaustive optimum in fewer evaluations;
  5. the descent again when phase 4 found a better node.
Pruning, as ARX's Lightning by the lower bound and as the exhaustive search by monotonicity, with
no node materialized: a node whose bound is no better than the best cannot be the answer, nor can
a coarser one (every metric's bound grows with generalization), so it is neither checked nor
queued; with no suppression limit (a monotone metric) a node coarser than a solution is no
better; when removed rows stay removed at finer nodes a node finer than a failing one fails, and
phase 4 does not check it: it queues instead the least nodes above it outside that failing node's
cone (its levels with one column raised past the failing node's), which is how the exhaustive
search's tagging skips a failing node's cone, without enumerating it.

The value of a node that is no solution (which orders the climbs) is estimated without a pass
over its removed rows (`_value`); a solution's is exact. Ties go to the node of fewer levels, then
the smaller tuple, as ARX's trackOptimum prefers the lower level: the same input gives the same
node. The queue is bounded too (QUEUED_PER_STEP, QUEUED_LEVELS).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from duckanon.solver.context import SolveContext

# Node evaluations the heuristic makes at most (ARX's TestAnonymizationHeuristic and
# TestAnonymizationGenetic configure setHeuristicSearchStepLimit(1000) checks).
SEARCH_STEPS = 1_000
# Lightning's queue holds at most this many nodes per step of the bound, and this many levels in
# all (a node is a tuple of one level per QI): its work beyond the evaluations (nodes known to fail
# without one, with a monotone metric) is bounded by counts too.
QUEUED_PER_STEP = 100
QUEUED_LEVELS = 20_000_000


@dataclass(frozen=True)
class Verdict:
    """What one evaluation says of a node."""

    solution: bool  # within the suppression limit (and not failing a model that nothing suppresses)
    # the metric with the node's violating classes removed (for a node that is no solution with a
    # separable metric, an estimate: _value)
    value: float
    fails_finer: bool  # every finer node fails too
    removed: int = 0  # the rows its violating classes hold
    empty: bool = False  # within the limit, but publishing no row


def assess(lattice, key: tuple[int, ...]) -> Verdict:
    """The verdict on the node `key`, as the exhaustive search's visit decides it (lattice.py's
    module docstring: the removed rows, the monotonicity, ARX's charges)."""
    node = None
    if lattice.k_only:  # decided by the suppressed-row count alone
        suppressed = lattice.suppressed_rows(key)
    else:
        node = lattice.evaluate(key)
        suppressed = node.suppressed_rows
    if node is not None and node.unreached:  # a population class no row reaches: finer nodes split it
        return Verdict(False, _value(lattice, key, node, suppressed, False), True, suppressed)
    if suppressed > lattice.limit_rows:
        finer = lattice.monotone_with_suppression or lattice.removed_floor(node) > lattice.limit_rows
        return Verdict(False, _value(lattice, key, node, suppressed, False), finer, suppressed)
    empty = suppressed >= lattice.n > 0 and not lattice.cell_suppression_after
    return Verdict(True, _value(lattice, key, node, suppressed, True), False, suppressed, empty)


def _value(lattice, key, node, suppressed: int, solution: bool) -> float:
    """The metric at `key` with its violating classes removed; for a node that is no solution, with
    a separable metric, an estimate that costs no pass over the rows removed: each column's total
    plus the removed rows, each charged what the column's rows cost on average below 1."""
    if lattice.measure.separable:
        if not solution:
            totals = lattice.column_totals(key)
            charge = lattice.measure.suppression_factor * suppressed * (1.0 - totals / max(lattice.n, 1))
            return float(lattice.aggregate(totals + charge))
        removed = lattice.removed_classes(key) if node is None else ~node.ok[node.member_of]
        return lattice.node_value(key, removed, complement=True)
    return lattice.value(node if node is not None else lattice.evaluate(key))


class _Cone:
    """The nodes whose cone (every node at most / at least as high in each column: `below`) is
    known, kept as an antichain (a node inside a kept one's cone adds nothing; a new one drops the
    kept nodes inside its cone), so a membership test is one comparison per kept node."""

    def __init__(self, m: int, below: bool):
        self.rows, self.below = np.zeros((0, m), dtype=np.int64), below

    def inside(self, keys: np.ndarray) -> np.ndarray:
        """(len(keys),): whether each node (a row of `keys`) lies in a kept node's cone."""
        if not len(self.rows) or not len(keys):
            return np.zeros(len(keys), dtype=bool)
        keys = keys[:, None, :]
        return ((keys <= self.rows) if self.below else (keys >= self.rows)).all(axis=2).any(axis=1)

    def __contains__(self, key) -> bool:
        return bool(self.inside(np.asarray(key, dtype=np.int64)[None, :])[0])

    def holder(self, key) -> tuple[int, ...] | None:
        """A kept node whose cone holds `key`, or None."""
        if not len(self.rows):
            return None
        row = np.asarray(key, dtype=np.int64)
        inside = ((row <= self.rows) if self.below else (row >= self.rows)).all(axis=1)
        at = int(np.argmax(inside))
        return tuple(self.rows[at].tolist()) if inside[at] else None

    def add(self, key) -> None:
        row = np.asarray(key, dtype=np.int64)
        if key in self:
            return
        covered = ((self.rows <= row) if self.below else (self.rows >= row)).all(axis=1)
        self.rows = np.vstack([self.rows[~covered], row[None, :]])


class HeuristicSearch:
    """One run of the heuristic search (module docstring) over `lattice` (lattice.Lattice)."""

    def __init__(self, lattice, context: SolveContext, steps: int = SEARCH_STEPS):
        self.lattice, self.context, self.steps = lattice, context, max(int(steps), 1)
        self.heights = tuple(int(h) for h in lattice.heights)
        self.m = len(self.heights)
        # the nodes Lightning may queue: QUEUED_PER_STEP a step, and QUEUED_LEVELS levels in all
        self.queue_limit = max(min(QUEUED_PER_STEP * self.steps, QUEUED_LEVELS // max(self.m, 1)), 1)
        self.verdicts: dict[tuple[int, ...], Verdict] = {}
        self.bounds: dict[tuple[int, ...], float] = {}
        self.queued: dict[tuple[int, ...], float] = {}  # node -> its priority
        self.queue: list = []  # the best-first search's: (priority, level, node)
        self.failing = _Cone(self.m, below=True)  # finer nodes fail
        self.no_better = _Cone(self.m, below=False)  # coarser nodes are no better (monotone metric)
        self.monotone = lattice.limit_rows == 0 and lattice.monotone_with_suppression
        self.best, self.best_value, self.empty = None, math.inf, None
        self.evaluated = 0
        self.stopped = self.full = self.complete = False  # (stopped: by the time limit)
        if lattice.measure.separable:  # (m, highest level + 1): the column totals, for the bounds
            self.totals = np.zeros((self.m, max(self.heights, default=0) + 1))
            for j, totals in enumerate(lattice.column_total):
                self.totals[j, :len(totals)] = totals

    # -- nodes ---------------------------------------------------------------------------------
    def left(self) -> bool:
        return not self.stopped and not self.full and self.evaluated < self.steps

    def bound_of(self, keys: list[tuple[int, ...]]) -> list[float]:
        """The bound of each node (the metric with nothing removed; 0 for the metrics that are not
        separable), computed once a node and a batch at a time."""
        missing = [key for key in keys if key not in self.bounds]
        if missing:
            if self.lattice.measure.separable:
                columns = self.totals[np.arange(self.m), np.array(missing, dtype=np.int64).reshape(-1, self.m)]
                values = np.atleast_1d(self.lattice.aggregate(columns)).tolist()
            else:
                values = [0.0] * len(missing)
            self.bounds.update(zip(missing, values))
        return [self.bounds[key] for key in keys]

    def bounded_out(self, key, bound: float | None = None) -> bool:
        """Whether the bound says `key` and every coarser node cannot beat the best."""
        best = self.best_value
        if key == self.best or best == math.inf:
            return False
        bound = self.bound_of([key])[0] if bound is None else bound
        return bound >= best - 1e-9 * max(1.0, abs(best))

    def better(self, key, value: float) -> bool:
        if self.best is None:
            return True
        return (value, sum(key), key) < (self.best_value, sum(self.best), self.best)

    def judge(self, key, failing: bool | None = None) -> Verdict | None:
        """The verdict on `key` (an evaluation unless known: with a monotone metric a node finer
        than a failing one fails, and its value is not needed; `failing`: whether it is, when the
        caller knows); None when the bound is spent."""
        verdict = self.verdicts.get(key)
        if verdict is not None:
            return verdict
        if self.monotone and (failing if failing is not None else key in self.failing):
            verdict = self.verdicts[key] = Verdict(False, math.inf, True)
            return verdict
        if not self.left():
            return None
        verdict = self.verdicts[key] = assess(self.lattice, key)
        self.evaluated += 1
        if self.evaluated % 16 == 0:
            if self.best is not None and self.context.expired():
                self.context.cut("lattice search")  # the release depends on how far the search got
                self.stopped = True
            self.context.report("lattice search", nodes=self.evaluated, of=self.steps,
                                best=None if self.best is None else round(self.best_value, 2))
        if verdict.fails_finer:
            self.failing.add(key)
        if verdict.empty:
            self.empty = key
        elif verdict.solution:
            if self.monotone:
                self.no_better.add(key)
            if self.better(key, verdict.value):
                self.best, self.best_value = key, verdict.value
        return verdict

    def raised(self, key, j: int, by: int = 1) -> tuple[int, ...]:
        return key[:j] + (key[j] + by,) + key[j + 1:]

    # -- phases --------------------------------------------------------------------------------
    def run(self) -> None:
        self.judge(self.heights)
        self.bisect(self.balanced_chain())
        self.descend()
        best = self.best
        self.lightning()
        if self.best != best:
            self.descend()

    def balanced_chain(self) -> list[tuple[int, ...]]:
        """Bottom to top, one level a step: the column least far up its hierarchy (relative to its
        height; ties to the first) is raised."""
        current, chain = (0,) * self.m, [(0,) * self.m]
        heap = [(0.0, j) for j in range(self.m) if self.heights[j] > 0]
        heapq.heapify(heap)
        while heap:
            _, j = heapq.heappop(heap)
            current = self.raised(current, j)
            chain.append(current)
            if current[j] < self.heights[j]:
                heapq.heappush(heap, (current[j] / self.heights[j], j))
        return chain

    def bisect(self, chain: list[tuple[int, ...]]) -> None:
        """A binary search along `chain` for its finest solution (exact when coarser nodes are
        solutions whenever finer ones are; else it only seeds the best)."""
        low, high = 0, len(chain) - 1
        while low <= high:
            mid = (low + high) // 2
            verdict = self.judge(chain[mid])
            if verdict is None:
                return
            if verdict.solution:
                high = mid - 1
            else:
                low = mid + 1

    def descend(self) -> None:
        """From the best solution, its finer neighbours in increasing bound; the first that is a
        better solution becomes the best (judge keeps it), and so on from there."""
        while self.best is not None and self.left():
            current = self.best
            finer = [self.raised(current, j, -1) for j in range(self.m) if current[j] > 0]
            order = sorted(zip(self.bound_of(finer), finer))
            keys = np.array([key for _, key in order], dtype=np.int64).reshape(-1, self.m)
            known = self.failing.inside(keys) | self.no_better.inside(keys)
            for (bound, key), skip in zip(order, known.tolist()):
                if self.bounded_out(key, bound):
                    break  # (in increasing bound: the rest cannot beat the best either)
                if skip or key in self.verdicts:
                    continue
                if self.judge(key) is None or self.best != current:
                    break
            if self.best == current:
                return

    def lightning(self) -> None:
        """The best-first search from the bottom (module docstring), with what is left of the
        bound; `complete` when no candidate is left that could beat the best."""
        self._push((0,) * self.m, 0.0)
        while self.queue and self.left():
            _, _, key = heapq.heappop(self.queue)
            if self.bounded_out(key):
                if self.lattice.measure.separable:  # (queued by bound: none left can beat the best)
                    self.queue.clear()
                continue
            if key in self.no_better:
                continue
            above = self.failing.holder(key)
            if above is not None:  # it fails unchecked: the least nodes above it not below `above`
                self._push_all([key[:j] + (above[j] + 1,) + key[j + 1:] for j in range(self.m)
                                if above[j] < self.heights[j]], self.queued[key])
                continue
            verdict = self.judge(key)
            if verdict is None:
                heapq.heappush(self.queue, (self.queued[key], sum(key), key))
                break
            if self.monotone and verdict.solution:
                continue  # every coarser node is no better
            self.climb(key)
            self._push_all(self.coarser(key), verdict.value)
        self.complete = not self.queue and not self.stopped and not self.full

    def coarser(self, key) -> list[tuple[int, ...]]:
        return [self.raised(key, j) for j in range(self.m) if key[j] < self.heights[j]]

    def _push_all(self, keys: list[tuple[int, ...]], value: float) -> None:
        """Queues the nodes not queued yet: by their bound, or with a metric that has none by
        `value` (that of the node they were reached from, as Lightning orders by value)."""
        keys = [key for key in keys if key not in self.queued]
        if len(self.queued) + len(keys) > self.queue_limit:
            self.full = True  # the queue's bound: the search ends
            return
        for key, bound in zip(keys, self.bound_of(keys)):
            self._push(key, bound if self.lattice.measure.separable else value)

    def _push(self, key, priority: float) -> None:
        if key not in self.queued:
            self.queued[key] = priority
            heapq.heappush(self.queue, (priority, sum(key), key))

    def climb(self, key) -> None:
        """Lightning's greedy climb (ARX's depth-first step): check every coarser neighbour that
        could still lead to a better node, move to the one of least value (estimated for a node
        that is no solution: _value), and so on."""
        while key is not None and self.left():
            candidates = [successor for successor in self.coarser(key) if not self.bounded_out(successor)]
            keys = np.array(candidates, dtype=np.int64).reshape(-1, self.m)
            keep = ~(self.no_better.inside(keys) | self.failing.inside(keys))
            least = None
            for successor in (c for c, kept in zip(candidates, keep.tolist()) if kept):
                verdict = self.judge(successor)
                if verdict is None:
                    return
                rank = (verdict.value, sum(successor), successor)
                least = rank if least is None or rank < least else least
            key = None if least is None else least[-1]
