"""Polynomial-time optima by matching.

Implemented: 2-diversity (frequency form) on a table with exactly two distinct SA values
(Xiao, Yi & Tao 2010, Section 4).

Structure of the optimum. With two SA values a and b, frequency 2-diversity (2 * max <= |G|)
forces every group to hold as many a-rows as b-rows, so the table has |S_a| = |S_b| and every
group splits into (a, b) pairs, each 2-diverse; splitting never adds stars. So an optimal solution
is a perfect matching between S_a and S_b where a pair costs 2 * hamming(QI vectors): a minimum
cost perfect bipartite matching. Those pairs also satisfy k-anonymity for k <= 2, any l <= 2
(either form) and any t-closeness (each pair has exactly the table's 50/50 distribution), and any
solution feasible for the full request is feasible for 2-diversity alone, so the matching is
optimal for such combined requests too.

On the histogram: first pair the a-rows and b-rows of the same class (cost 0). This is safe:
if an optimal matching pairs a-row u of class c with b-row y and b-row w of class c with a-row x,
swapping to (u, w), (x, y) costs 0 + 2 h(x, y) <= 2 h(x, c) + 2 h(c, y) (Hamming is a metric).
Then each class has surplus rows of one value only, and a transportation problem between the
a-surplus and b-surplus classes remains (cost 2 * Hamming), integral because the constraint
matrix is totally unimodular. Solved with scipy's `linear_sum_assignment` on the expanded
surplus rows (O(n^3), n = surplus rows per side) when n <= ASSIGNMENT_ROW_LIMIT, else as the
transportation linear program on the class graph (a-classes x b-classes variables), solved by
HiGHS, whose vertex optimum is integral: polynomial either way.
Building costs: O(C_a * C_b * m).

Attribute weights (a star's cost per column): a pair then costs 2 * the weighted Hamming distance
(the weights of the columns where the two rows differ), still a metric, so the same-class pairs
stay safe and the matching is optimal in weighted stars.

Not here: 2-anonymity as a minimum-cost perfect *simplex* matching (Blocki & Williams Thm 1) is
method 'simplex' (simplex.py: LP-dual pruning and a set partitioning over pairs and triples);
2-diversity with more than two SA values (Liang & Yuan Thm 11) is not implemented as a matching;
`exact` (MILP) solves it.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import FrequencyLDiversity, KAnonymity, LDiversity, TCloseness
from duckanon.solver.partition import Solution, build_solution
from duckanon.solver.request import Request

# linear_sum_assignment on the expanded rows takes about 3 s and 300 MB at this size; beyond it
# the transportation LP on the (fewer) classes runs instead
ASSIGNMENT_ROW_LIMIT = 6000
# ... and the transportation LP takes about 7 s at a million class pairs; larger surpluses are
# refused (auto then runs its heuristics) rather than left to run for minutes
TRANSPORT_VARIABLE_LIMIT = 1_000_000


def matching_not_applicable(hist: Histogram, models, patterns=None) -> str | None:
    """None when `matching` solves this request optimally, else the reason it does not apply."""
    if patterns is not None:
        return "user patterns are not supported by 'matching'"
    request = Request.of(models)
    if not any(m.l == 2 for m in request.of_type(FrequencyLDiversity)):
        if any(m.k == 2 for m in request.k_anonymity):
            return "2-anonymity alone is a minimum-cost simplex matching: use method = 'simplex'"
        return "'matching' solves frequency 2-diversity with two distinct sensitive values only"
    if request.k > 2:
        return "'matching' needs k <= 2"
    if any(m.l > 2 for m in request.diversity):
        return "'matching' needs l <= 2"
    if not request.only(KAnonymity, LDiversity, TCloseness):
        unknown = next(m for m in request if m not in request.k_anonymity + request.diversity + request.closeness)
        return f"'matching' does not support {unknown}"
    distinct = int((hist.sa_counts.sum(axis=0) > 0).sum())
    if distinct != 2:
        return (f"2-diversity with {distinct} distinct sensitive values is a minimum-cost simplex matching, for "
                "which no polynomial algorithm is implemented; use method = 'exact'")
    a, b = np.flatnonzero(hist.sa_counts.sum(axis=0) > 0)
    surplus = hist.sa_counts[:, a] - hist.sa_counts[:, b]
    surplus_rows = int(surplus[surplus > 0].sum())
    pairs = int((surplus > 0).sum()) * int((surplus < 0).sum())
    if surplus_rows > ASSIGNMENT_ROW_LIMIT and pairs > TRANSPORT_VARIABLE_LIMIT:
        return (f"the matching has {surplus_rows} unpaired rows over {pairs} class pairs, more than the "
                f"{TRANSPORT_VARIABLE_LIMIT:,} this implementation solves in seconds; use method = 'tp+' or 'exact'")
    return None


def _hamming_costs(codes_a, codes_b, weights=None) -> np.ndarray:
    """2 * Hamming distance between every a-class and b-class (weighted: the weights of the columns
    that differ), one column at a time (no n_a x n_b x m temporary)."""
    cost = np.zeros((len(codes_a), len(codes_b)), dtype=np.int32 if weights is None else np.float64)
    for j in range(codes_a.shape[1]):
        differ = codes_a[:, j, None] != codes_b[None, :, j]
        if weights is None:
            cost += differ
        else:
            cost += float(weights[j]) * differ
    return 2 * cost


def _pairs_by_assignment(codes_a, count_a, codes_b, count_b, weights=None):
    ia = np.repeat(np.arange(len(count_a)), count_a)
    ib = np.repeat(np.arange(len(count_b)), count_b)
    from scipy.optimize import linear_sum_assignment  # (imported where it runs: solver/__init__.py)

    class_cost = _hamming_costs(codes_a, codes_b, weights)
    rows, cols = linear_sum_assignment(class_cost[ia][:, ib])
    flow: dict[tuple[int, int], int] = {}
    for r, c in zip(ia[rows], ib[cols]):
        flow[(int(r), int(c))] = flow.get((int(r), int(c)), 0) + 1
    return flow


def _pairs_by_transport_lp(codes_a, count_a, codes_b, count_b, weights=None):
    """The transportation problem on the class graph, as a linear program solved by HiGHS.

    Its constraint matrix (one row per a-class, one per b-class) is totally unimodular, so every
    basic optimum is integral; HiGHS's dual simplex ends on a basis, and the check below makes sure.
    (Measured: 1,000 x 1,000 classes in 7 s; `milp` on the same LP took 14 times longer.)
    """
    from scipy import sparse  # (imported where it runs: solver/__init__.py)
    from scipy.optimize import linprog

    n_a, n_b = len(count_a), len(count_b)
    cost = _hamming_costs(codes_a, codes_b, weights)  # (n_a, n_b), flattened row-major
    variables = n_a * n_b
    columns = np.arange(variables)
    rows = np.concatenate([columns // n_b, n_a + columns % n_b])
    equalities = sparse.csr_array((np.ones(2 * variables), (rows, np.concatenate([columns, columns]))),
                                  shape=(n_a + n_b, variables))
    result = linprog(cost.ravel().astype(float), A_eq=equalities, b_eq=np.concatenate([count_a, count_b]).astype(float),
                     bounds=(0, None), method="highs-ds")
    if result.x is None or np.abs(result.x - np.rint(result.x)).max() > 1e-6:
        raise AnonymizeError(f"matching: the transportation problem was not solved to an integral optimum ({result.message})")
    amounts = np.rint(result.x).astype(np.int64).reshape(n_a, n_b)
    return {(int(i), int(j)): int(amounts[i, j]) for i, j in zip(*np.nonzero(amounts))}


def matching(hist: Histogram, models, patterns=None, weights=None) -> Solution:
    """Optimal 2-diversity with two SA values by min-cost bipartite matching (module docstring).
    `weights`: a star's cost per column (partition.star_weights); the optimum is then in weighted
    stars, its value in notes["weighted_lower_bound"]."""
    reason = matching_not_applicable(hist, models, patterns)
    if reason:
        raise AnonymizeError(f"method 'matching' does not apply: {reason}")
    total = hist.sa_counts.sum(axis=0)
    a, b = np.flatnonzero(total > 0)
    if total[a] != total[b]:
        raise AnonymizeError("2-diversity is infeasible: the two sensitive values have different counts")
    count_a, count_b = hist.sa_counts[:, a], hist.sa_counts[:, b]
    same = np.minimum(count_a, count_b)
    pc, ps, pg, pn = [], [], [], []
    group = 0
    for c in np.flatnonzero(same):
        pc += [c, c]; ps += [a, b]; pg += [group, group]; pn += [same[c], same[c]]
        group += 1
    left_a, left_b = count_a - same, count_b - same
    ca, cb = np.flatnonzero(left_a), np.flatnonzero(left_b)
    if len(ca):
        args = (hist.codes[ca], left_a[ca], hist.codes[cb], left_b[cb], weights)
        if int(left_a.sum()) <= ASSIGNMENT_ROW_LIMIT:
            flow = _pairs_by_assignment(*args)
            how = "assignment"
        else:
            flow = _pairs_by_transport_lp(*args)
            how = "transportation LP (HiGHS)"
        for (i, j), f in sorted(flow.items()):
            pc += [ca[i], cb[j]]; ps += [a, b]; pg += [group, group]; pn += [f, f]
            group += 1
    else:
        how = "same-class pairs only"
    arrays = [np.asarray(x, dtype=np.int64) for x in (pc, ps, pg, pn)]
    solution = build_solution(hist, *arrays, method="matching")
    solution.optimal = True
    if weights is None:
        solution.lower_bound = solution.stars
    else:
        solution.notes["weighted_lower_bound"] = solution.weighted_stars(weights)
    solution.notes["algorithm"] = how
    return solution
