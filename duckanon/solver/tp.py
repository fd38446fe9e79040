"""TP, the three-phase (l*d)-approximation for l-diversity (Xiao, Yi & Tao 2010, Section 5).

Tuple minimization: remove as few rows as possible from the classes ("QI-groups") so that
(a) every class is l-eligible and (b) the removed rows, the residue R, are l-eligible; then the
classes are published unsuppressed and R as one group, starred wherever its rows disagree. A
set is l-eligible when no SA value holds more than 1/l of it (frequency l-diversity).

  phase 1  cap every class at the largest pillar height h with l*h <= sum_v min(c_v, h): exactly
           "move one tuple from each pillar until eligible", computed for all classes at once.
           If R is eligible now the solution is optimal in removed rows (Corollary 5.9).
  phase 2  while R is not eligible: take the alive SA value v least frequent in R, and the
           lowest-numbered alive class Q holding v; a fat Q (|Q| > l*h(Q)) gives one v, a thin
           one gives one tuple from each of its pillars. Dead = thin and sharing a pillar with
           R. Ending here costs at most OPT + l - 1 rows (Corollary 5.13).
  phase 3  rounds of: greedy set cover of R's pillars by classes that do not conflict on them,
           one tuple from each pillar of the chosen classes, then every class that came alive
           gives tuples until it is dead again. l-approximate in rows (Theorem 5.19).

Ties follow the paper's worked examples: smallest SA code, then smallest class index.

Cost: phase 1 is vectorised numpy, O(C*S log S); phase 2 is O((n_moved + C*S) log S) with a heap
over SA values and one pointer per SA value into the classes holding it (classes only die and
counts only fall in phase 2, so the pointers only move forward: the paper's candidate list).

The approximation proofs are for frequency l-diversity. For the distinct, entropy and recursive
forms, `tp` runs the same phases with that form's own test (phase 1 caps a class at the largest
height that satisfies it; phase 2 moves the value R most lacks, or caps the class a level down
when giving that value would break it): a heuristic there, reported as such.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.hilbert import hilbert_groups
from duckanon.solver.models import FrequencyLDiversity, LDiversity
from duckanon.solver.partition import build_solution
from duckanon.solver.repair import repair
from duckanon.solver.request import Request


@dataclass
class TPResult:
    kept: np.ndarray  # (C, S) rows that stay in their class, published unsuppressed
    residue: np.ndarray  # (C, S) rows moved to R
    phase: int  # the phase TP ended in: 1, 2 or 3

    @property
    def residue_counts(self) -> np.ndarray:
        return self.residue.sum(axis=0)


def phase_one_caps(counts: np.ndarray, l: int) -> np.ndarray:
    """Per class the pillar height phase 1 leaves: max h with l*h <= sum_v min(c_v, h).

    With counts sorted descending c_(1) >= c_(2) >= ..., sum_v min(c_v, h) = min_j (j*h + tail_j),
    tail_j = c_(j+1) + c_(j+2) + ...; the condition holds for all j >= l when h >= 0, so
    h* = min over j < l of floor(tail_j / (l - j)).
    """
    ordered = -np.sort(-counts, axis=1)
    n_classes, n_values = ordered.shape
    if n_values < l:  # pad: the missing values have count 0
        ordered = np.hstack([ordered, np.zeros((n_classes, l - n_values), dtype=ordered.dtype)])
    sizes = ordered.sum(axis=1)
    prefix = np.cumsum(ordered[:, :l], axis=1)  # prefix[:, j-1] = c_(1) + ... + c_(j)
    cap = sizes // l  # j = 0
    for j in range(1, l):
        cap = np.minimum(cap, (sizes - prefix[:, j - 1]) // (l - j))
    return cap


class _Phases:
    """Mutable state of phases 2 and 3: class counts Q (lists), their pillar heights, and R.

    Plain Python lists and cached heights: phase 2 is a loop of tiny steps, so each step must
    cost a few list operations, not numpy calls.
    """

    def __init__(self, kept: np.ndarray, residue_counts: np.ndarray, l: int):
        self.l = l
        self.q = kept.tolist()
        self.size = kept.sum(axis=1).tolist()
        self.h = kept.max(axis=1, initial=0).tolist()
        self.r = [int(x) for x in residue_counts]
        self.r_size = sum(self.r)
        self.r_height = max(self.r, default=0)
        self.n_values = kept.shape[1]

    # -- R ----------------------------------------------------------------------------------
    def r_eligible(self) -> bool:
        return self.r_size >= self.l * self.r_height

    def move(self, i: int, v: int, count: int = 1) -> None:
        row = self.q[i]
        row[v] -= count
        if row[v] + count == self.h[i]:
            self.h[i] = max(row)
        self.size[i] -= count
        self.r[v] += count
        self.r_size += count
        if self.r[v] > self.r_height:
            self.r_height = self.r[v]

    def r_pillar(self, v: int) -> bool:
        return self.r[v] == self.r_height

    # -- classes ------------------------------------------------------------------------------
    def height(self, i: int) -> int:
        return self.h[i]

    def pillars(self, i: int) -> list[int]:
        h = self.h[i]
        return [v for v, x in enumerate(self.q[i]) if x == h]

    def thin(self, i: int) -> bool:
        return self.size[i] == self.l * self.h[i]

    def conflicts(self, i: int) -> list[int]:
        h, r, top = self.h[i], self.r, self.r_height
        return [v for v, x in enumerate(self.q[i]) if x == h and r[v] == top]

    def dead(self, i: int) -> bool:
        if self.size[i] == 0:
            return True
        if self.size[i] != self.l * self.h[i]:
            return False  # fat
        h, r, top = self.h[i], self.r, self.r_height
        return any(x == h and r[v] == top for v, x in enumerate(self.q[i]))

    def remove_pillars(self, i: int) -> list[int]:
        moved = self.pillars(i)
        for v in moved:
            self.move(i, v)
        return moved


def _phase_two(state: _Phases, holders: list[list[int]], context: SolveContext) -> bool:
    """Returns True when R became eligible, False when no alive SA value is left."""
    pointer = [0] * state.n_values
    heap = [(state.r[v], v) for v in range(state.n_values) if len(holders[v])]
    heapq.heapify(heap)
    q, r = state.q, state.r
    steps = 0
    while state.r_size < state.l * state.r_height:
        steps += 1
        if steps % 256 == 0:
            context.check()
        while heap:
            count, v = heap[0]
            if count != r[v]:  # stale: a fresher entry for v is in the heap
                heapq.heappop(heap)
                continue
            column, p = holders[v], pointer[v]
            while p < len(column) and (q[column[p]][v] == 0 or state.dead(column[p])):
                p += 1  # zero counts and dead classes stay so for the rest of phase 2
            pointer[v] = p
            if p == len(column):
                heapq.heappop(heap)  # v is dead for good
                continue
            break
        else:
            return False
        i = holders[v][pointer[v]]
        if state.size[i] == state.l * state.h[i]:  # thin: one tuple from each pillar
            for u in state.remove_pillars(i):
                heapq.heappush(heap, (r[u], u))
        else:
            state.move(i, v)
            heapq.heapreplace(heap, (r[v], v))
    return True


def _phase_three(state: _Phases, max_rounds: int, context: SolveContext) -> None:
    n_classes = len(state.q)
    for _ in range(max_rounds):
        context.check()
        if state.r_eligible():
            return
        moved_before = state.r_size
        # Step 1: greedy set cover of R's pillars by the classes' non-conflicting values.
        uncovered = {v for v in range(state.n_values) if state.r[v] == state.r_height and state.r_height > 0}
        conflicts = {i: set(state.conflicts(i)) for i in range(n_classes) if state.size[i]}
        chosen = []
        while uncovered:
            best = min(conflicts, key=lambda i: (len(conflicts[i] & uncovered), i), default=None)
            if best is None or len(conflicts[best] & uncovered) == len(uncovered):
                break  # cannot happen on a feasible table (some class avoids each pillar of R)
            chosen.append(best)
            uncovered &= conflicts[best]
        for i in chosen:
            state.remove_pillars(i)
            if state.r_eligible():
                return
        # Step 2: classes that came alive give tuples until dead again.
        for i in range(n_classes):
            while state.size[i] and not state.r_eligible():
                if state.thin(i):
                    if state.conflicts(i):
                        break
                    state.remove_pillars(i)
                else:  # fat: one tuple of a value that is not a pillar of R
                    v = next((v for v, x in enumerate(state.q[i]) if x and not state.r_pillar(v)), None)
                    if v is None:
                        break
                    state.move(i, v)
            if state.r_eligible():
                return
        if state.r_size == moved_before:
            break
    if not state.r_eligible():  # safety net: the whole table is eligible (checked by the caller)
        for i in range(n_classes):
            for v, x in enumerate(state.q[i]):
                if x:
                    state.move(i, v, x)


def three_phase(sa_counts: np.ndarray, l: int, residue: np.ndarray | None = None,
                context: SolveContext = UNBOUNDED) -> TPResult:
    """TP on class SA counts (C, S) for frequency l-diversity.

    `residue` (S,) optionally starts R non-empty (to replay the paper's phase-3 example); its
    rows are not attributed to any class in the result.
    """
    counts = np.asarray(sa_counts, dtype=np.int64)
    n_classes, n_values = counts.shape
    start = np.zeros(n_values, dtype=np.int64) if residue is None else np.asarray(residue, dtype=np.int64)
    kept = np.minimum(counts, phase_one_caps(counts, l)[:, None]) if n_classes else counts.copy()
    r = start + (counts - kept).sum(axis=0)
    if l * r.max(initial=0) <= r.sum():
        return TPResult(kept, counts - kept, 1)
    state = _Phases(kept, r, l)
    holders = [np.flatnonzero(kept[:, v]).tolist() for v in range(n_values)]
    phase = 2
    if not _phase_two(state, holders, context):
        phase = 3
        _phase_three(state, max(1, int(r.sum()) + int(counts.sum())), context)
    final = np.array(state.q, dtype=np.int64).reshape(n_classes, n_values)
    return TPResult(final, counts - final, phase)


def generic_tp(sa_counts: np.ndarray, model: LDiversity, context: SolveContext = UNBOUNDED) -> TPResult:
    """TP's phases 1 and 2 with another l-diversity form's own test (a heuristic, no bound)."""
    counts = np.asarray(sa_counts, dtype=np.int64)
    n_classes, n_values = counts.shape
    kept = counts.copy()
    sizes = kept.sum(axis=1)
    bad = np.flatnonzero(~model.satisfied(sizes, kept) & (sizes > 0))
    for i in bad:  # phase 1: the largest cap at which the class satisfies the form (0: all of it)
        kept[i] = _best_cap(counts[i], model)
    r = (counts - kept).sum(axis=0)
    if not r.sum() or model.ok(r.tolist(), int(r.sum())):
        return TPResult(kept, counts - kept, 1)
    # phase 2: give R the value it holds least of, from the lowest class that can spare it
    q = kept.tolist()
    r_list = r.tolist()
    while not model.ok(r_list, sum(r_list)):
        context.check()
        order = sorted(range(n_values), key=lambda v: (r_list[v], v))
        moved = False
        for v in order:
            i = next((i for i in range(n_classes) if q[i][v]), None)
            if i is None:
                continue
            row = q[i]
            row[v] -= 1
            if sum(row) and not model.ok(row, sum(row)):
                row[v] += 1
                capped = _best_cap(np.array(row), model, below=max(row)).tolist()
                for u in range(n_values):
                    r_list[u] += row[u] - capped[u]
                q[i] = capped
            else:
                r_list[v] += 1
            moved = True
            break
        if not moved:
            break
    final = np.array(q, dtype=np.int64).reshape(n_classes, n_values)
    return TPResult(final, counts - final, 2)


def _best_cap(row: np.ndarray, model: LDiversity, below: int | None = None) -> np.ndarray:
    """min(row, h) for the largest h (< `below` if given) at which the form holds; zeros if none."""
    top = int(row.max(initial=0)) if below is None else below - 1
    if top <= 0:
        return np.zeros_like(row)
    heights = np.arange(top, 0, -1)
    capped = np.minimum(row[None, :], heights[:, None])
    ok = model.satisfied(capped.sum(axis=1), capped) & (capped.sum(axis=1) > 0)
    hit = np.flatnonzero(ok)
    return capped[hit[0]] if len(hit) else np.zeros_like(row)


def tp_solution(hist, models, plus: bool = False, context: SolveContext = UNBOUNDED):
    """`method = 'tp'` / `'tp+'`: classes as TP leaves them, unsuppressed; R as one group (tp) or
    cut along the Hilbert curve (tp+). Other models (k, t) are then enforced by merging."""
    name = "tp+" if plus else "tp"
    models = Request.of(models)
    if not models.diversity:
        raise AnonymizeError(f"method {name} is an l-diversity algorithm: add l = <number> and sensitive = <column>")
    model = models.diversity[0]
    # TP's three phases and their (l*d) bound are Xiao et al.'s, for the frequency form only;
    # the other forms get phases 1 and 2 with their own test
    proven = isinstance(model, FrequencyLDiversity)
    result = three_phase(hist.sa_counts, model.l, context=context) if proven else \
        generic_tp(hist.sa_counts, model, context)
    kept_class, kept_sa = np.nonzero(result.kept)
    res_class, res_sa = np.nonzero(result.residue)
    res_count = result.residue[res_class, res_sa]
    if plus:
        r_class, r_sa, r_group, r_count = hilbert_groups(hist, res_class, res_sa, res_count, models, hist.n_classes)
    else:
        r_class, r_sa, r_count = res_class, res_sa, res_count
        r_group = np.full(len(r_class), hist.n_classes, dtype=np.int64)
    solution = build_solution(
        hist,
        np.concatenate([kept_class, r_class]), np.concatenate([kept_sa, r_sa]),
        np.concatenate([kept_class, r_group]), np.concatenate([result.kept[kept_class, kept_sa], r_count]),
        method=name,
    )
    notes = {"tp_phase": result.phase, "residue_rows": int(res_count.sum()),
             "bound": "proven (l*d)-approximation" if proven else "heuristic"}
    solution = repair(hist, solution, models, context)
    solution.method = name
    solution.notes.update(notes)
    return solution
