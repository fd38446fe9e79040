"""Pattern-guided greedy for k-anonymity (Bredereck et al., Algorithm 1).

A pattern is a set of columns that may be suppressed together. Patterns are tried in increasing
number of stars; for each, the remaining rows are grouped by the columns the pattern keeps, and
every group of at least k rows is released and removed. An m-approximation, tight.

Without user patterns all 2^m patterns are used, generated lazily. A kept column none of whose
values still has k remaining rows can never be part of a released group, so patterns keeping it
are skipped without being generated: only subsets of the "alive" columns are enumerated.

That is 2^(alive columns) GROUP BYs, so only while there are at most EXACT_PATTERN_LIMIT of them
(12 alive columns). On wider tables the patterns are drawn from the data instead, in rounds: for
every class still waiting, the columns it shares with the few nearest remaining classes that,
with it, make a releasable group; a pattern that releases nothing is never generated, and there
are at most as many per round as classes. The same star order holds within a round (largest kept
sets first), and the all-star pattern comes last as before.

Rows left at the end (fewer than k) form one last group; the repair step merges it into the
cheapest group when it is too small. The zero-star pattern is always tried first (classes of
size >= k are released unchanged).

With attribute weights (partition.star_weights: a star's cost per column) "fewest stars" is the
least weight of the starred columns: patterns are tried in increasing weighted stars, and the
neighbours of a class are those agreeing on the heaviest columns.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from duckanon.solver.context import UNBOUNDED, SolveContext
from duckanon.solver.histogram import Histogram, group_keys
from duckanon.solver.models import all_satisfied
from duckanon.solver.partition import Solution, build_solution, solution_from_class_groups, take_rows
from duckanon.solver.request import Request

# Without user patterns: the exact enumeration while it has at most this many patterns.
EXACT_PATTERN_LIMIT = 4096
# Data-drawn patterns: a class's neighbours are looked for among all remaining classes up to this
# many, else among the NEIGHBOUR_WINDOW classes on either side of it in NEIGHBOUR_ORDERS
# lexicographic orders of the classes (sorted neighbourhoods).
NEIGHBOUR_ALL_LIMIT = 2000
NEIGHBOUR_WINDOW = 16
NEIGHBOUR_ORDERS = 4
# Neighbours are added one by one (each time the one agreeing on most still-kept columns) this
# many times; then the rest in that order, as many as the group needs.
NEIGHBOUR_STEPS = 8


def _default_kept_sets(m: int, alive_columns, rng: np.random.Generator | None = None):
    """Kept-column sets in increasing star order, drawn from the currently alive columns.

    When a release kills a column, the current size restarts over the smaller alive set; sets
    tried again release nothing new (their groups only shrank), and the alive set can only
    shrink, so this ends.
    """
    for kept_size in range(m, -1, -1):
        restart = True
        while restart:
            restart = False
            alive = alive_columns()
            sets = list(combinations(alive, kept_size))
            if rng is not None and len(sets) > 1:
                sets = [sets[i] for i in rng.permutation(len(sets))]
            for kept in sets:
                yield kept
                if len(alive_columns()) < len(alive):
                    restart = True
                    break


def _weighted_kept_sets(alive_columns, weights: np.ndarray, rng: np.random.Generator | None = None):
    """`_default_kept_sets` under attribute weights: kept-column sets of the alive columns in
    increasing weight of the columns they star (ties: in `_default_kept_sets`'s order, or shuffled
    with `rng`). When a release kills a column, the sets of the smaller alive set are tried from
    the current weight on; the alive set only shrinks, so this ends."""
    total = float(weights.sum())
    floor = -np.inf
    while True:
        alive = alive_columns()
        sets = [kept for size in range(len(alive), -1, -1) for kept in combinations(alive, size)]
        if rng is not None and len(sets) > 1:
            sets = [sets[i] for i in rng.permutation(len(sets))]
        cost = {kept: total - float(weights[list(kept)].sum()) for kept in sets}
        sets = sorted((kept for kept in sets if cost[kept] >= floor - 1e-12), key=cost.__getitem__)
        restart = False
        for kept in sets:
            floor = cost[kept]
            yield kept
            if len(alive_columns()) < len(alive):
                restart = True
                break
        if not restart:
            return


def _kept_sets(m: int, alive_columns, codes: np.ndarray, state, min_size: int, models=(),
               context: SolveContext = UNBOUNDED, rng: np.random.Generator | None = None, weights=None):
    """Kept-column sets for the default (all-patterns) search: the exact enumeration when the
    alive columns allow at most EXACT_PATTERN_LIMIT patterns, else data-drawn ones.
    `state()` gives the live class ids, their remaining rows and remaining SA counts."""
    if 2 ** len(alive_columns()) <= EXACT_PATTERN_LIMIT:
        if weights is not None:
            return _weighted_kept_sets(alive_columns, weights, rng)
        return _default_kept_sets(m, alive_columns, rng)
    return _neighbour_kept_sets(codes, state, min_size, models, context, weights)


def _agreement(agree: np.ndarray, weights) -> np.ndarray:
    """Per row of `agree` ((P, m) booleans): how many columns agree, or under weights the dense
    rank of their weight (an integer in the same order, so a tie-breaker can be added below 1)."""
    if weights is None:
        return agree.sum(axis=1)
    return np.unique(np.round(agree @ weights, 9), return_inverse=True)[1].ravel()


def _neighbour_kept_sets(codes: np.ndarray, state, min_size: int, models=(), context: SolveContext = UNBOUNDED,
                         weights=None):
    """Data-drawn kept sets, in rounds: the zero-star pattern, then per round the candidates of
    the current remaining rows (largest first), until a round releases nothing; the all-star
    pattern last. With k alone a set tried before can release nothing new (its groups only
    shrank), so it is not tried again."""
    m = codes.shape[1]
    full = tuple(range(m))
    tried = {full}
    yield full
    while True:
        live, rows, sa = state()
        total = int(rows.sum())
        if total < min_size:
            return
        found = _neighbour_candidates(codes[live], rows, sa, min_size, models, context, weights)
        if weights is None:
            fresh = sorted(found if models else found - tried, key=lambda kept: (-len(kept), kept))
        else:
            fresh = sorted(found if models else found - tried,
                           key=lambda kept: (-float(weights[list(kept)].sum()), kept))
        if not fresh:
            break
        for kept in fresh:
            tried.add(kept)
            yield kept
        if int(state()[1].sum()) == total:
            break
    yield ()


def _sorted_neighbourhoods(codes: np.ndarray) -> np.ndarray:
    """(L, P) candidate neighbours per class (itself included, repeats possible): the classes
    next to it in lexicographic orders of the columns (fewest distinct values first, then
    fixed pseudo-random orders)."""
    n, m = codes.shape
    cardinality = np.array([len(np.unique(codes[:, j])) for j in range(m)])
    rng = np.random.default_rng(0)
    orders = [np.argsort(cardinality, kind="stable")] + [rng.permutation(m) for _ in range(NEIGHBOUR_ORDERS - 1)]
    offsets = np.arange(-NEIGHBOUR_WINDOW, NEIGHBOUR_WINDOW + 1)
    pools = []
    for columns in orders:
        perm = np.lexsort(codes[:, columns[::-1]].T)  # lexsort's last key is the primary one
        position = np.empty(n, dtype=np.int64)
        position[perm] = np.arange(n)
        pools.append(perm[np.clip(position[:, None] + offsets[None, :], 0, n - 1)])
    return np.concatenate(pools, axis=1)


def _neighbour_candidates(codes: np.ndarray, rows: np.ndarray, sa: np.ndarray, min_size: int, models=(),
                          context: SolveContext = UNBOUNDED, weights=None) -> set:
    """Per class: the columns it shares with its nearest classes that, with it, hold `min_size`
    rows and satisfy `models`; the set of these kept-column tuples."""
    n, m = codes.shape

    def releasable(sizes, sa_counts):
        ok = sizes >= min_size
        if models and ok.any():
            ok &= all_satisfied(models, sizes, sa_counts)
        return ok

    alone = releasable(rows, sa)
    found = {tuple(range(m))} if alone.any() else set()
    pools = None if n <= NEIGHBOUR_ALL_LIMIT else _sorted_neighbourhoods(codes)
    everyone = np.arange(n)
    for step, i in enumerate(np.flatnonzero(~alone).tolist()):
        if step % 64 == 0:
            context.check()
        pool = everyone if pools is None else np.unique(pools[i])
        pool = pool[pool != i]
        if not len(pool):
            continue
        agree = codes[pool] == codes[i]
        pool_rows = rows[pool]
        tie = np.minimum(pool_rows, min_size)  # equal agreement: the neighbour with more rows
        kept = np.ones(m, dtype=bool)
        size, counts = int(rows[i]), sa[i].copy()
        used = np.zeros(len(pool), dtype=bool)
        done = False
        for _ in range(NEIGHBOUR_STEPS):
            score = _agreement(agree & kept, weights) * (min_size + 1) + tie
            score[used] = -1
            j = int(np.argmax(score))
            if score[j] < 0:
                break
            used[j] = True
            kept &= agree[j]
            size += int(pool_rows[j])
            counts += sa[pool[j]]
            if releasable(np.array([size]), counts[None, :])[0]:
                done = True
                break
        if not done:  # the rest in order of agreement on the kept columns, as many as needed
            rest = np.flatnonzero(~used)
            if not len(rest):
                continue
            score = _agreement(agree[rest] & kept, weights) * (min_size + 1) + tie[rest]
            rest = rest[np.argsort(-score, kind="stable")]
            sizes = size + np.cumsum(pool_rows[rest])
            sa_counts = counts[None, :] + np.cumsum(sa[pool[rest]], axis=0)
            ok = np.flatnonzero(releasable(sizes, sa_counts))
            if not len(ok):
                continue
            kept &= np.logical_and.reduce(agree[rest[: ok[0] + 1]], axis=0)
        found.add(tuple(np.flatnonzero(kept).tolist()))
    return found


def greedy(hist: Histogram, k: int, patterns: list[list[int]] | None = None, models=(),
           context: SolveContext = UNBOUNDED, weights=None) -> Solution:
    """`patterns`: lists of column indices that may be starred together (None: all 2^m).

    With `models` (l-diversity, t-closeness, ...), a group is released only when it also
    satisfies them; otherwise only its size (>= k) counts, as in the paper. `weights`: a star's
    cost per column (module docstring).
    """
    m = hist.m
    remaining = hist.sizes.copy()
    remaining_sa = hist.sa_counts.copy()
    cls, group, count = [], [], []
    next_group = 0

    # per column, the unreleased rows of each of its values: kept up to date by each release (a
    # recount over every class after each release took a third of greedy at 10M rows); only the
    # search over all patterns asks which columns are alive
    value_rows = ([np.bincount(hist.codes[:, j], weights=remaining).astype(np.int64) for j in range(m)]
                  if patterns is None else None)
    alive_now = [None]  # the alive columns since the last release (None: to compute)

    def alive_columns():
        """Columns with a value of k rows or more still unreleased; asked before every kept set tried."""
        if alive_now[0] is None:
            alive_now[0] = [j for j in range(m) if len(value_rows[j]) and value_rows[j].max() >= k]
        return list(alive_now[0])

    def state():
        live = np.flatnonzero(remaining > 0)
        return live, remaining[live], remaining_sa[live]

    if patterns is None:
        kept_sets = _kept_sets(m, alive_columns, hist.codes, state, k, models, context, weights=weights)
    else:
        starred = sorted({tuple(sorted(set(p))) for p in patterns} | {()},
                         key=len if weights is None else lambda p: float(weights[list(p)].sum()))
        kept_sets = (tuple(j for j in range(m) if j not in s) for s in starred)

    for kept in kept_sets:
        context.check()
        live = np.flatnonzero(remaining > 0)
        if remaining.sum() < k or len(live) == 0:
            break
        keys = group_keys(hist.codes[live][:, list(kept)])
        totals = np.bincount(keys, weights=remaining[live])
        ok = totals >= k
        if models:
            group_sa = np.zeros((len(totals), remaining_sa.shape[1]), dtype=np.int64)
            np.add.at(group_sa, keys, remaining_sa[live])
            ok &= all_satisfied(models, totals.astype(np.int64), group_sa)
        released = ok[keys]
        if not released.any():
            continue
        gone = live[released]
        cls.append(gone); group.append(next_group + keys[released]); count.append(remaining[gone])
        next_group += len(totals)
        for j, rows in enumerate(value_rows or []):
            rows -= np.bincount(hist.codes[gone, j], weights=remaining[gone], minlength=len(rows)).astype(np.int64)
        remaining[gone] = 0
        remaining_sa[gone] = 0
        alive_now[0] = None

    leftover = np.flatnonzero(remaining > 0)
    cls.append(leftover); group.append(np.full(len(leftover), next_group)); count.append(remaining[leftover])
    return solution_from_class_groups(hist, np.concatenate(cls), np.concatenate(group), np.concatenate(count), "greedy")


def carve(counts: np.ndarray, models, min_size: int, context: SolveContext = UNBOUNDED) -> np.ndarray:
    """For each row of SA counts (G, S): the largest sub-multiset satisfying `models`, found by
    peeling (zeros where none is found): rows of the most over-represented SA value leave until
    the rest satisfies them. Over-represented means furthest above the table's distribution
    for t-closeness, and above the row's mean otherwise (l-diversity); each step removes about
    half the excess at once, and all groups are peeled together (vectorised)."""
    models = Request.of(models)
    x = np.atleast_2d(counts).astype(np.int64).copy()
    target = models.closeness[0].table_distribution() if models.closeness else None
    l_freq = models.frequency_l
    active = np.ones(len(x), dtype=bool)
    while active.any():
        context.check()
        rows = np.flatnonzero(active)
        sizes = x[rows].sum(axis=1)
        small = sizes < min_size
        x[rows[small]] = 0
        rows, sizes = rows[~small], sizes[~small]
        ok = all_satisfied(models, sizes, x[rows]) if len(rows) else np.zeros(0, dtype=bool)
        active[:] = False
        rows, sizes = rows[~ok], sizes[~ok]
        if not len(rows):
            break
        active[rows] = True
        pick = np.arange(len(rows))
        if target is not None:
            # remove a rows of the value furthest above its share q: (x - a) = q (s - a)
            excess = x[rows] - target[None, :] * sizes[:, None]
            peel = np.argmax(excess, axis=1)
            amount = np.ceil(excess[pick, peel] / np.maximum(1.0 - target[peel], 1e-9) / 2)  # half: less overshoot
        elif l_freq:
            # frequency l: bring the top value to 1/l of the rest: l (x - a) = s - a
            peel = np.argmax(x[rows], axis=1)
            amount = np.ceil((l_freq * x[rows][pick, peel] - sizes) / (l_freq - 1))
        else:
            excess = x[rows] - x[rows].mean(axis=1, keepdims=True)
            peel = np.argmax(excess, axis=1)
            amount = excess[pick, peel] // 2
        amount = np.maximum(1, amount).astype(np.int64)
        x[rows, peel] = np.maximum(0, x[rows, peel] - amount)
    return x


def carve_between(avail: np.ndarray, source: np.ndarray, dest: np.ndarray, models, min_size: int,
                  context: SolveContext = UNBOUNDED) -> np.ndarray:
    """For each row i of the (N, S) SA counts: the largest `x <= avail[i]` found by peeling such
    that `source[i] - x` (the group the rows leave; it contains `avail[i]`) is empty or satisfies
    `models` and `dest[i] + x` (the group they join; zeros: a new group) satisfies them; zeros
    where none is found. Vectorised over the rows like `carve`.

    Two failures, two repairs, alternating: when what stays behind fails, the rows it is shortest
    of (furthest below the table's share, t-closeness; the source's share otherwise) go back to
    it; when the receiving group fails, rows of the value furthest above its share there leave
    `x` (carve's peeling). Each step moves about half the gap. When that does not settle, `x`
    shrinks in proportion (what stays behind tends to the source's distribution)."""
    models = Request.of(models)
    avail = np.atleast_2d(np.asarray(avail, dtype=np.int64))
    source = np.atleast_2d(np.asarray(source, dtype=np.int64))
    dest = np.atleast_2d(np.asarray(dest, dtype=np.int64))
    n, n_sa = avail.shape
    if models.closeness:
        target = np.broadcast_to(models.closeness[0].table_distribution(), (n, n_sa))
    else:
        target = source / np.maximum(source.sum(axis=1, keepdims=True), 1)
    floor = max(int(min_size), 1)

    def valid(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        rest = source[rows] - x
        into = dest[rows] + x
        rest_size, into_size = rest.sum(axis=1), into.sum(axis=1)
        ok = (x.sum(axis=1) > 0) & (into_size >= floor)
        ok &= all_satisfied(models, into_size, into)
        ok &= (rest_size == 0) | all_satisfied(models, rest_size, rest)
        return ok

    x = avail.copy()
    done = np.zeros(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    for _ in range(8 * n_sa + 8):
        context.check()
        rows = np.flatnonzero(active)
        if not len(rows):
            break
        xs = x[rows]
        ok = valid(xs, rows)
        done[rows[ok]] = True
        empty = xs.sum(axis=1) == 0
        active[rows[ok | empty]] = False
        rows, xs = rows[~ok & ~empty], xs[~ok & ~empty]
        if not len(rows):
            break
        rest = source[rows] - xs
        rest_size = rest.sum(axis=1)
        rest_ok = (rest_size == 0) | all_satisfied(models, rest_size, rest)
        q = target[rows]
        # what stays behind fails: give back the value it needs most, among those x holds
        need = q * rest_size[:, None] - rest
        need = np.where(xs > 0, need, -np.inf)
        # the receiving group fails: peel the value furthest above its share there
        into = dest[rows] + xs
        excess = into - q * into.sum(axis=1)[:, None]
        excess = np.where(xs > 0, excess, -np.inf)
        score = np.where(rest_ok[:, None], excess, need)
        pick = np.argmax(score, axis=1)
        at = np.arange(len(rows))
        gap = score[at, pick]
        amount = np.where(gap > 0, np.ceil(gap / np.maximum(1.0 - q[at, pick], 1e-9) / 2), 1)
        amount = np.minimum(np.maximum(amount, 1).astype(np.int64), xs[at, pick])
        x[rows, pick] -= amount
    out = np.where(done[:, None], x, 0)
    # not settled: shrink the whole available part in proportion
    for i in np.flatnonzero(~done).tolist():
        alphas = np.linspace(1.0, 0.0, 33)[1:-1]
        scaled = np.floor(alphas[:, None] * avail[i][None, :] + 1e-9).astype(np.int64)
        ok = valid(scaled, np.full(len(scaled), i))
        if ok.any():
            out[i] = scaled[int(np.flatnonzero(ok)[0])]
    return out


def carve_joint(avail: np.ndarray, pool: np.ndarray, models, min_size: int,
                context: SolveContext = UNBOUNDED) -> np.ndarray:
    """The largest sub-multiset `x` of `avail` (SA counts, (S,)) found by peeling such that `x`
    satisfies `models` and so does what stays behind, `pool - x` (`pool` (S,) contains `avail`
    and satisfies them); zeros when none is found. `carve` alone ignores the rows left behind: a
    part that takes most rows of the value the rest is short of leaves a rest that is not
    t-close (`carve_between` with a new group as destination)."""
    avail = np.asarray(avail, dtype=np.int64)
    return carve_between(avail[None, :], np.asarray(pool)[None, :], np.zeros((1, len(avail)), dtype=np.int64),
                         models, min_size, context)[0]


# carve_joint (a part the rest of the pool cannot follow shrinks instead of being skipped) runs on
# inputs of at most this many classes: there it often halves the stars; on the full Adult table
# it changed them by under 1% and cost 10x the time (a scalar peeling per refused part).
JOINT_CARVE_CLASS_LIMIT = 300


def _alive(codes: np.ndarray, sizes: np.ndarray, min_size: int) -> list[int]:
    """The columns with a value that `sizes` (rows per class) still gives `min_size` rows."""
    return [j for j in range(codes.shape[1]) if np.bincount(codes[:, j], weights=sizes).max(initial=0) >= min_size]


def _summed_by_key(keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The rows of `counts` (N, S) summed per key (keys 0..K-1 of the N rows): (K, S)."""
    n_keys, n_sa = int(keys.max()) + 1, counts.shape[1]
    cells = (keys[:, None] * n_sa + np.arange(n_sa)).ravel()
    return np.bincount(cells, weights=counts.ravel(), minlength=n_keys * n_sa).astype(np.int64).reshape(n_keys, n_sa)


def carving_greedy(hist: Histogram, models, context: SolveContext = UNBOUNDED,
                   rng: np.random.Generator | None = None, weights=None) -> Solution:
    """Pattern-guided greedy at the level of (class, SA value) cells: a GROUP BY group that fails
    l or t still releases its largest satisfying sub-multiset of rows (rows of one class with the
    same SA value are interchangeable), instead of waiting for a coarser pattern. With
    t-closeness a big class is rarely t-close on its own, but most of its rows are, next to
    rows of similar classes. A part is released only if the rows left in the pool stay
    publishable as one group; on small inputs (JOINT_CARVE_CLASS_LIMIT) a part that would break
    that shrinks until it does not (`carve_joint`) instead of being skipped.

    `rng`: a shuffled variant (the portfolio's restarts): the kept sets of each size in a random
    order, the rows of a part taken from its classes in a random order, and half the parts
    released at a random 40-100% of their rows. `weights`: a star's cost per column (the kept
    sets in increasing weighted stars)."""
    models = Request.of(models)
    min_size = models.min_group_size
    m = hist.m
    remaining = hist.sa_counts.copy()
    out_c, out_s, out_g, out_n = [], [], [], []
    next_group = 0

    alive_now = [None]  # the alive columns since the last release (None: to compute)

    def alive_columns():
        if alive_now[0] is None:
            alive_now[0] = _alive(hist.codes, remaining.sum(axis=1), min_size)
        return list(alive_now[0])

    def state():
        sizes = remaining.sum(axis=1)
        live = np.flatnonzero(sizes > 0)
        return live, sizes[live], remaining[live]

    for kept in _kept_sets(m, alive_columns, hist.codes, state, min_size, models, context, rng, weights):
        context.check()
        sizes = remaining.sum(axis=1)
        live = np.flatnonzero(sizes > 0)
        if sizes.sum() < min_size or len(live) == 0:
            break
        keys = group_keys(hist.codes[live][:, list(kept)])
        group_sa = _summed_by_key(keys, remaining[live])
        totals = group_sa.sum(axis=1)
        candidates = np.flatnonzero(totals >= min_size)
        if not len(candidates):
            continue
        takes = carve(group_sa[candidates], models, min_size, context)  # whole groups that satisfy stay whole
        pool, parts = remaining.sum(axis=0), np.flatnonzero(takes.sum(axis=1) > 0)  # unreleased rows; parts to release
        for key, take in zip(candidates[parts].tolist(), takes[parts]):
            # the rows left in the pool must stay publishable as one group (the whole table is,
            # and every release keeps it so), else the leftover would need merging at the end
            rest = pool - take
            if rest.sum() and not all_satisfied(models, np.array([rest.sum()]), rest[None, :])[0]:
                if hist.n_classes > JOINT_CARVE_CLASS_LIMIT:
                    continue
                take = carve_joint(group_sa[key], pool, models, min_size, context)
                if take.sum() == 0:
                    continue
            members = live[keys == key]
            if rng is not None:
                # shuffled variants (local search's restarts): sometimes a smaller share of the
                # rows, leaving more for later patterns, and the rows from other classes
                members = members[rng.permutation(len(members))]
                if rng.random() < 0.5:
                    smaller = np.floor(take * rng.uniform(0.4, 1.0)).astype(np.int64)
                    rest = pool - smaller
                    if smaller.sum() >= min_size and all_satisfied(
                            models, np.array([smaller.sum(), rest.sum()]), np.stack([smaller, rest])).all():
                        take = smaller
            for s in np.flatnonzero(take).tolist():
                for c, got in take_rows(remaining, members.tolist(), s, int(take[s])):
                    out_c.append(c); out_s.append(s); out_g.append(next_group); out_n.append(got)
            pool -= take  # (take_rows took all of it: `take` is within the part's rows)
            alive_now[0] = None
            next_group += 1
    cls, sa = np.nonzero(remaining)
    for c, s in zip(cls.tolist(), sa.tolist()):
        out_c.append(c); out_s.append(s); out_g.append(next_group); out_n.append(int(remaining[c, s]))
    arrays = [np.asarray(a, dtype=np.int64) for a in (out_c, out_s, out_g, out_n)]
    return build_solution(hist, *arrays, method="carve")
