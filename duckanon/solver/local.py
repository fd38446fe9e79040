"""Local search over a partition of whole classes: move one class to the group where it costs
least, while every group keeps satisfying the models; then refine every group top-down.

Why it helps. Greedy-style heuristics decide a class's group once; with t-closeness the groups
must be large and mixed, and an early decision often puts a class where it adds stars that a
later group would not. A move changes two groups only, so its cost is exact and cheap: with each
group's per-column "single code" (or -1 when the group already disagrees there), the stars of
B + c are the columns where B's code is not c's. Every accepted move strictly lowers the stars
and keeps all groups valid, so the search stops at a local optimum no worse than its start.

Deadline. The passes are quadratic (pair re-splitting runs one top-down split per pair of
groups), which takes seconds on a few hundred classes. The context's deadline (context.py: a
statement's `time_limit`, or exact's share of it for its incumbent) stops the search: every state
it passes through is a valid partition no worse than the start, so it returns the best one
reached so far (the final top-down refinement is skipped, or dropped, once the deadline is past).

Attribute weights (`weights`, partition.star_weights: a star's cost per column, None: 1 each):
every cost here, a move's, a pair's, a group's, is then in weighted stars.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from duckanon.solver.context import UNBOUNDED, DeadlineExpired, SolveContext
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, solution_from_class_groups, star_cost
from duckanon.solver.request import Request
from duckanon.solver.topdown import SplitTally, topdown, topdown_groups

# Above this many classes the quadratic passes are skipped.
LOCAL_SEARCH_CLASS_LIMIT = 3000
PAIR_GROUP_LIMIT = 60  # pair re-splitting is quadratic in groups, each pair a top-down run
# ... and each top-down run splits a group once per column: pair re-splitting stops after this many
# column splits. On Adult samples (8 QIs, 300-3,000 rows, k, l and t) it made at most 13,253; on 300
# random rows x 100 QIs 404,150 (16 s) for 0.05% fewer stars than without it.
PAIR_REBUILD_SPLITS = 50_000


def class_groups(solution: Solution, n_classes: int) -> np.ndarray | None:
    """The group of each class when no class is split across groups, else None."""
    group_of = np.full(n_classes, -1, dtype=np.int64)
    for c, g in zip(solution.part_class.tolist(), solution.part_group.tolist()):
        if group_of[c] not in (-1, g):
            return None
        group_of[c] = g
    return group_of


def improve(hist: Histogram, group_of: np.ndarray, models, max_passes: int = 30,
            context: SolveContext = UNBOUNDED, weights=None) -> np.ndarray:
    """Move classes (each pass by the stars their rows cost, most first) to the group where they
    cost least, or to a new group of their own, while every group keeps satisfying the models; until a pass moves none,
    after `max_passes`, or at the context's deadline. The group of each class."""
    group_of = np.unique(group_of, return_inverse=True)[1].ravel().astype(np.int64)
    n_groups = int(group_of.max()) + 1 if len(group_of) else 0
    sizes, sa, counters, single = _group_state(hist, group_of, n_groups)
    column_weight = [1] * hist.m if weights is None else [float(w) for w in weights]
    stars = lambda g: star_cost(single[g] == -1, weights).item()  # noqa: E731
    # a move must lower the cost by more than this (weighted costs are floats)
    threshold = 0 if weights is None else -1e-9
    next_free = n_groups
    alone_ok = all_satisfied(models, hist.sizes, hist.sa_counts)
    for _ in range(max_passes):
        moved = False
        order = np.argsort(-(hist.sizes * star_cost(single[group_of] == -1, weights)), kind="stable")
        for step, c in enumerate(order.tolist()):
            if step % 16 == 0 and context.expired():
                return group_of  # every accepted move kept all groups valid
            a = int(group_of[c])
            s_c, sa_c, code_c = int(hist.sizes[c]), hist.sa_counts[c], hist.codes[c]
            rest_size = sizes[a] - s_c
            if rest_size and not all_satisfied(models, np.array([rest_size]), (sa[a] - sa_c)[None, :])[0]:
                continue
            # stars of A without c
            rest_stars = 0
            for j, code in enumerate(code_c.tolist()):
                counter = counters[a][j]
                if len(counter) - (counter[code] == 1) > 1:
                    rest_stars += column_weight[j]
            gain_a = sizes[a] * stars(a) - rest_size * rest_stars
            alive = np.flatnonzero(sizes[:next_free] > 0)
            alive = alive[alive != a]
            best_delta, best_b = threshold, None
            if len(alive):
                merged_size = sizes[alive] + s_c
                ok = all_satisfied(models, merged_size, sa[alive] + sa_c)
                merged_stars = star_cost(single[alive] != code_c, weights)
                delta = merged_size * merged_stars - sizes[alive] * star_cost(single[alive] == -1, weights) - gain_a
                delta = np.where(ok, delta, np.iinfo(np.int64).max)
                pick = int(np.argmin(delta))
                if delta[pick] < best_delta:
                    best_delta, best_b = delta[pick].item(), int(alive[pick])
            if alone_ok[c] and -gain_a < best_delta and rest_size:
                best_delta, best_b = -gain_a, next_free
                next_free += 1
            if best_b is None:
                continue
            group_of[c] = best_b
            _move_class(hist, c, a, best_b, sizes, sa, counters, single)
            moved = True
        if not moved:
            break
    return group_of


def _group_state(hist: Histogram, group_of: np.ndarray, n_groups: int):
    """Per group (with room for classes that leave to form their own group): its rows, its SA
    counts, per column its classes per code, and per column its single code (-1 where it has
    several)."""
    capacity = n_groups + hist.n_classes  # room for classes that leave to form their own group
    sizes = np.zeros(capacity, dtype=np.int64)
    sa = np.zeros((capacity, hist.sa_counts.shape[1]), dtype=np.int64)
    np.add.at(sizes, group_of, hist.sizes)
    np.add.at(sa, group_of, hist.sa_counts)
    # per group and column: classes per code (codes with none are deleted, so len() is the
    # number of distinct codes and a move is O(m), not O(distinct codes of the group))
    counters = [[Counter() for _ in range(hist.m)] for _ in range(capacity)]
    for c, g in enumerate(group_of.tolist()):
        for j, code in enumerate(hist.codes[c].tolist()):
            counters[g][j][code] += 1
    single = np.full((capacity, hist.m), -1, dtype=np.int64)
    for g in range(n_groups):
        _refresh_single(single, counters, g)
    return sizes, sa, counters, single


def _refresh_single(single: np.ndarray, counters: list, g: int) -> None:
    for j, counter in enumerate(counters[g]):
        single[g, j] = next(iter(counter)) if len(counter) == 1 else -1


def _move_class(hist: Histogram, c: int, a: int, b: int, sizes, sa, counters, single) -> None:
    """Class `c` leaves group `a` for group `b`: their rows, SA counts, codes and single codes."""
    s_c, sa_c = int(hist.sizes[c]), hist.sa_counts[c]
    sizes[a] -= s_c
    sa[a] -= sa_c
    sizes[b] += s_c
    sa[b] += sa_c
    for j, code in enumerate(hist.codes[c].tolist()):
        counter = counters[a][j]
        counter[code] -= 1
        if not counter[code]:
            del counter[code]
        counters[b][j][code] += 1
    _refresh_single(single, counters, a)
    _refresh_single(single, counters, b)


def _cost(hist: Histogram, members: np.ndarray, weights=None) -> int | float:
    codes = hist.codes[members]
    varying = star_cost(codes.min(axis=0) != codes.max(axis=0), weights).item() if len(members) else 0
    return int(hist.sizes[members].sum()) * varying


def pair_rebuild(hist: Histogram, groups: list[np.ndarray], models, max_rounds: int = 5,
                 context: SolveContext = UNBOUNDED, weights=None) -> list[np.ndarray]:
    """Re-split the union of two groups top-down; keep the result when it costs less. The union
    of two valid groups is valid (closure under merging), so the split is always available.
    Stops at the context's deadline with the groups reached so far (each round keeps a valid
    partition). Stops, with the groups reached, once its top-down runs made PAIR_REBUILD_SPLITS
    column splits (checked before each pair)."""
    tally = SplitTally()
    for _ in range(max_rounds):
        changed = False
        costs = [_cost(hist, g, weights) for g in groups]
        order = sorted(range(len(groups)), key=lambda i: -costs[i])
        done = set()
        for a in order:
            if a in done or costs[a] == 0:
                continue
            best = None
            for b in range(len(groups)):
                if b == a or b in done:
                    continue
                if context.expired():
                    return groups
                if tally.splits >= PAIR_REBUILD_SPLITS:
                    break  # (the best pair of `a` found so far is still taken, below)
                union = np.concatenate([groups[a], groups[b]])
                try:  # the split's groups only: building a Solution over the whole histogram is O(classes)
                    parts = [np.sort(members) for members in topdown_groups(hist, models, [union], context, weights, tally)]
                except DeadlineExpired:
                    return groups
                cost = sum(_cost(hist, members, weights) for members in parts)
                if cost < costs[a] + costs[b] - (0 if weights is None else 1e-9) and (best is None or cost - costs[a] - costs[b] < best[0]):
                    best = (cost - costs[a] - costs[b], b, parts)
            if best is not None:
                _, b, new = best
                done.update({a, b})
                groups = [g for i, g in enumerate(groups) if i not in (a, b)] + new
                done = {i for i in range(len(groups) - len(new), len(groups))}
                changed = True
                break
            if tally.splits >= PAIR_REBUILD_SPLITS:
                return groups
        if not changed or tally.splits >= PAIR_REBUILD_SPLITS:
            break
    return groups


def local_search(hist: Histogram, start: Solution, models, context: SolveContext = UNBOUNDED,
                 weights=None) -> Solution | None:
    """Moves, then top-down refinement of every group; None when `start` splits a class, or when
    the context's deadline is already past."""
    group_of = class_groups(start, hist.n_classes)
    if group_of is None or hist.n_classes > LOCAL_SEARCH_CLASS_LIMIT or context.expired():
        return None
    group_of = improve(hist, group_of, models, context=context, weights=weights)
    moved = solution_from_class_groups(hist, np.arange(hist.n_classes), group_of, hist.sizes, "local")
    roots = [np.flatnonzero(group_of == g) for g in np.unique(group_of)]
    if len(roots) <= PAIR_GROUP_LIMIT and not context.expired():
        roots = pair_rebuild(hist, roots, models, context=context, weights=weights)
    refined = None
    if not context.expired():
        try:
            refined = topdown(hist, models, roots, context, weights)
        except DeadlineExpired:
            refined = None
    if refined is None:
        # no time for the top-down refinement: the best partition reached so far
        labels = np.empty(hist.n_classes, dtype=np.int64)
        for g, members in enumerate(roots):
            labels[members] = g
        refined = solution_from_class_groups(hist, np.arange(hist.n_classes), labels, hist.sizes, "local")
    best = refined if refined.cost(weights) <= moved.cost(weights) else moved
    best.method = f"{start.method}+local"
    return best


# The row-level search (cell_search) keeps a dense (groups, classes, SA values) array: only on
# inputs this small (classes x SA values), and for at most this many rounds of moves.
CELL_SEARCH_CELL_LIMIT = 20_000
CELL_SEARCH_CLASS_LIMIT = 300
CELL_SEARCH_ROUNDS = 200


def _group_stars(codes: np.ndarray, rows: np.ndarray, weights=None) -> np.ndarray:
    """Per group (rows: (G, C) rows of each class in each group): the columns it stars (under
    `weights`, their weights' sum)."""
    present = rows > 0
    out = np.zeros(len(rows), dtype=np.int64 if weights is None else np.float64)
    for g in np.flatnonzero(present.any(axis=1)).tolist():
        member = codes[present[g]]
        out[g] = star_cost(member.min(axis=0) != member.max(axis=0), weights)
    return out


def _take(x: np.ndarray, cells: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(C, S) rows taken: for each SA value s, x[s] rows from the classes in `order` (cells:
    the (C, S) rows available)."""
    taken = np.zeros_like(cells)
    for s in np.flatnonzero(x).tolist():
        column = cells[order, s]
        before = np.concatenate([[0], np.cumsum(column)[:-1]])
        taken[order, s] = np.clip(int(x[s]) - before, 0, column)
    return taken


def cell_search(hist: Histogram, start: Solution, models, context: SolveContext = UNBOUNDED,
                max_rounds: int = CELL_SEARCH_ROUNDS, weights=None) -> Solution | None:
    """Local search over rows (cells of a class and an SA value), not whole classes: rows of a
    group move to another group, or leave to form a new one, as many as both groups allow.

    A move takes, from group A, rows of a set K of A's classes: all the classes that fit B's
    published vector (B gains no star), or one class of A (B may gain stars), or, for a new
    group, the classes of A with one value in a column A stars (the new group keeps it). How
    many rows of each SA value move is `carve_between`: the most rows such that A without them
    (or nothing) and B with them both satisfy the models. So every state is a valid partition:
    t-closeness can make a group keep part of a class and give the rest of it, by SA value, to
    groups that need those values, which no move of whole classes can do. Each round applies the
    best move (fewest stars), then the other improving moves on groups it did not touch; the
    search stops at a local optimum, after `max_rounds` rounds, or at the context's deadline,
    with the best (valid) state reached, never worse than `start`. None when the input is too
    large for the dense state (CELL_SEARCH_CELL_LIMIT) or the deadline has passed."""
    from duckanon.solver.greedy import carve_between  # greedy imports nothing from here
    from duckanon.solver.partition import build_solution

    request = Request.of(models)
    n_classes, n_sa = hist.sa_counts.shape
    groups = start.group_sizes()
    n_groups = int((groups > 0).sum())
    if context.expired() or n_classes * n_sa > CELL_SEARCH_CELL_LIMIT:
        return None
    if n_groups * n_classes * n_sa > 40 * CELL_SEARCH_CELL_LIMIT:
        return None
    state = _CellState(start, hist.codes, n_classes, n_sa, weights)
    min_size = request.min_group_size
    for _ in range(max_rounds):
        if context.expired():
            break
        moves = state.candidate_moves()
        if not moves:
            break
        avail = np.array([state.cells[a][k].sum(axis=0) for a, _, k in moves])
        source = state.sa[[a for a, _, _ in moves]]
        dest = np.array([state.sa[b] if b >= 0 else np.zeros(n_sa, dtype=np.int64) for _, b, _ in moves])
        try:
            xs = carve_between(avail, source, dest, request, min_size, context)
        except DeadlineExpired:
            break
        scored = state.improving_moves(moves, xs)
        if not scored:
            break
        state.apply(scored)
    cells = state.cells
    g_idx, c_idx, s_idx = np.nonzero(cells)
    result = build_solution(hist, c_idx, s_idx, g_idx, cells[g_idx, c_idx, s_idx], f"{start.method}+cells")
    if not all_satisfied(request, result.group_sizes(), result.group_sa(n_sa)).all() or \
            result.cost(weights) > start.cost(weights):
        return None  # cannot happen (every move keeps both groups valid); the start stands
    return result


class _CellState:
    """cell_search's partition as a dense (groups, classes, SA values) array of rows, with per
    group its rows per class (`rows`), per SA value (`sa`), its size and its stars."""

    def __init__(self, start: Solution, codes: np.ndarray, n_classes: int, n_sa: int, weights):
        used = np.unique(start.part_group[start.part_count > 0])
        relabel = np.full(len(start.group_rep), -1, dtype=np.int64)
        relabel[used] = np.arange(len(used))
        capacity = len(used) + 8
        self.cells = np.zeros((capacity, n_classes, n_sa), dtype=np.int64)
        np.add.at(self.cells, (relabel[start.part_group], start.part_class, start.part_sa), start.part_count)
        self.codes, self.weights = codes, weights
        self._recount()

    def _recount(self) -> None:
        self.rows = self.cells.sum(axis=2)
        self.sa = self.cells.sum(axis=1)
        self.stars = _group_stars(self.codes, self.rows, self.weights)
        self.size = self.sa.sum(axis=1)

    def candidate_moves(self) -> list[tuple[int, int, np.ndarray]]:
        """(source, destination or -1 for a new group, classes K) for every group with stars
        (cell_search's docstring: the moves)."""
        rows, stars, codes = self.rows, self.stars, self.codes
        alive = np.flatnonzero(self.size > 0)
        moves = []
        for a in alive.tolist():
            if stars[a] == 0:
                continue
            present = np.flatnonzero(rows[a] > 0)
            member = codes[present]
            kept = member.min(axis=0) == member.max(axis=0)
            for b in alive.tolist():
                if b == a:
                    continue
                b_present = np.flatnonzero(rows[b] > 0)
                b_codes = codes[b_present[0]]
                b_kept = codes[b_present].min(axis=0) == codes[b_present].max(axis=0)
                fits = present[(member[:, b_kept] == b_codes[b_kept]).all(axis=1)]
                if len(fits) and stars[b] < stars[a]:
                    moves.append((a, b, fits))
                if len(present) > 1:
                    for c in present.tolist():
                        moves.append((a, b, np.array([c])))
            for j in np.flatnonzero(~kept).tolist():
                for value in np.unique(member[:, j]).tolist():
                    moves.append((a, -1, present[member[:, j] == value]))
        return moves

    def improving_moves(self, moves, xs) -> list:
        """(change in stars, source, destination, (C, S) rows taken) of the moves that lower the
        stars, `xs` the rows of each SA value each move takes: per move the classes of K give
        those rows smallest first or largest first, whichever costs less."""
        rows, size, cells, codes, weights = self.rows, self.size, self.cells, self.codes, self.weights
        cost = size * self.stars
        scored = []
        for (a, b, k), x in zip(moves, xs):
            total = int(x.sum())
            if not total or (total == size[a] and b < 0):
                continue
            best = None
            for ascending in (True, False):
                order = k[np.argsort(rows[a][k] if ascending else -rows[a][k], kind="stable")]
                taken = _take(x, cells[a], order)
                moved = taken.sum(axis=1)
                new_a = rows[a] - moved
                pair = np.stack([new_a, (rows[b] if b >= 0 else 0) + moved])
                new_stars = _group_stars(codes, pair, weights)
                delta = ((size[a] - total) * new_stars[0] + ((size[b] if b >= 0 else 0) + total) * new_stars[1]).item() \
                    - cost[a].item() - (cost[b].item() if b >= 0 else 0)
                if best is None or delta < best[0]:
                    best = (delta, taken)
            if best[0] < (0 if weights is None else -1e-9):
                scored.append((best[0], a, b, best[1]))
        return scored

    def apply(self, scored: list) -> None:
        """The best move, then the others in order of their change, each on groups no move
        applied before it touched (a new group in the first free slot; the array doubles when
        there is none)."""
        scored.sort(key=lambda item: item[0])
        touched = set()
        for delta, a, b, taken in scored:
            if a in touched or b in touched:
                continue
            if b < 0:
                free = np.flatnonzero(self.size == 0)
                free = free[~np.isin(free, list(touched))]
                if not len(free):
                    self.cells = np.concatenate([self.cells, np.zeros_like(self.cells)])
                    self._recount()
                    free = np.flatnonzero(self.size == 0)
                b = int(free[0])
            cells, rows, sa, size = self.cells, self.rows, self.sa, self.size
            cells[a] -= taken
            cells[b] += taken
            touched.update({a, b})
            for g in (a, b):
                rows[g] = cells[g].sum(axis=1)
                sa[g] = cells[g].sum(axis=0)
                size[g] = sa[g].sum()
            self.stars[[a, b]] = _group_stars(self.codes, rows[[a, b]], self.weights)


def _resplit(hist: Histogram, union: np.ndarray, models, rng: np.random.Generator, tries: int,
             context: SolveContext = UNBOUNDED, weights=None) -> tuple[int, list[np.ndarray]] | None:
    """The cheapest re-partition found of the rows `union` ((C, S) counts, a valid group): carve
    (`carving_greedy`) on those rows alone, in its pattern order and in `tries` shuffled ones,
    each improved by `cell_search`. (stars, list of (C, S) groups), or None."""
    from duckanon.solver.greedy import carving_greedy
    from duckanon.solver.histogram import Histogram as Hist
    from duckanon.solver.repair import repair

    classes = np.flatnonzero(union.sum(axis=1) > 0)
    sub = Hist(codes=hist.codes[classes], sa_counts=union[classes])
    best = None
    for attempt in range(tries + 1):
        solution = repair(sub, carving_greedy(sub, models, context, rng if attempt else None, weights), models, context,
                          weights)
        improved = cell_search(sub, solution, models, context, weights=weights)
        if improved is not None and improved.cost(weights) < solution.cost(weights):
            solution = improved
        if best is None or solution.cost(weights) < best.cost(weights):
            best = solution
    groups = []
    for g in range(len(best.group_rep)):
        part = np.zeros_like(union)
        sel = best.part_group == g
        np.add.at(part, (classes[best.part_class[sel]], best.part_sa[sel]), best.part_count[sel])
        if part.sum():
            groups.append(part)
    return best.cost(weights), groups


def cell_lns(hist: Histogram, start: Solution, models, context: SolveContext = UNBOUNDED, tries: int = 4,
             max_rounds: int = 20, weights=None) -> Solution | None:
    """`cell_search`, then large neighbourhoods: the rows of two groups are re-partitioned from
    scratch (`_resplit`; their union is valid, closure under merging) and the result replaces
    them when it has fewer stars, then `cell_search` again; until no pair improves, after
    `max_rounds` replacements, or at the context's deadline. A new group can so take rows of two
    groups at once (one class from each), which no move of `cell_search` does. Deterministic
    (a fixed seed shuffles carve's pattern orders). None when `cell_search` does not apply."""
    from duckanon.solver.partition import build_solution

    current = cell_search(hist, start, models, context, weights=weights)
    if current is None:
        return None
    if current.cost(weights) > start.cost(weights):
        current = start
    rng = np.random.default_rng(0)
    n_sa = hist.sa_counts.shape[1]
    tried: set = set()
    for _ in range(max_rounds):
        groups = []
        for g in range(len(current.group_rep)):
            part = np.zeros_like(hist.sa_counts)
            sel = current.part_group == g
            np.add.at(part, (current.part_class[sel], current.part_sa[sel]), current.part_count[sel])
            if part.sum():
                groups.append(part)
        size = np.array([g.sum() for g in groups])
        cost = np.array([s * st for s, st in zip(size, _group_stars(hist.codes, np.array([g.sum(axis=1) for g in groups]),
                                                                     weights))])
        pairs = sorted(((a, b) for a in range(len(groups)) for b in range(a + 1, len(groups))),
                       key=lambda ab: -(cost[ab[0]] + cost[ab[1]]))
        replaced = False
        for a, b in pairs:
            if context.expired():
                break
            if cost[a] + cost[b] == 0:
                continue
            key = (groups[a].tobytes(), groups[b].tobytes())
            if key in tried:
                continue
            tried.add(key)
            try:
                found = _resplit(hist, groups[a] + groups[b], models, rng, tries, context, weights)
            except DeadlineExpired:
                break
            if found is None or found[0] >= cost[a] + cost[b] - (0 if weights is None else 1e-9):
                continue
            groups = [g for i, g in enumerate(groups) if i not in (a, b)] + found[1]
            replaced = True
            break
        if not replaced:
            break
        cls, sa_idx, grp, cnt = [], [], [], []
        for g, part in enumerate(groups):
            c, s_ = np.nonzero(part)
            cls.append(c); sa_idx.append(s_); grp.append(np.full(len(c), g)); cnt.append(part[c, s_])
        merged = build_solution(hist, *(np.concatenate(v).astype(np.int64) for v in (cls, sa_idx, grp, cnt)),
                                current.method)
        polished = cell_search(hist, merged, models, context, weights=weights)
        current = polished if polished is not None and polished.cost(weights) <= merged.cost(weights) else merged
    request = Request.of(models)
    if not all_satisfied(request, current.group_sizes(), current.group_sa(n_sa)).all() or \
            current.cost(weights) > start.cost(weights):
        return None
    current.method = f"{start.method}+cells"
    return current
