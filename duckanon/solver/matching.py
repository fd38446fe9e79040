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
surplus rows (O(n^3), n = surplus rows per side) when n <= ASSIGNMENT_ROW_LIMIT, else with
networkx's capacity-scaling min-cost flow on the class graph
(O(E log U (E + V log V)), E = a-classes x b-classes, U = largest class): polynomial either way.
Building costs: O(C_a * C_b * m).

Not implemented: 2-anonymity and 2-diversity with more than two SA values as a minimum-cost
perfect *simplex* matching (Blocki & Williams Thm 1; Liang & Yuan Thm 11; Anshelevich &
Karagiozova). We do not have a polynomial algorithm for simplex matching we can trust (the known
routes go through weighted general factors with gaps of length 1, e.g. Dudycz & Paluch, whose
algorithm is not available here), so those requests are not run under this name; `exact` (MILP)
solves them.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import KAnonymity, LDiversity, TCloseness
from duckanon.solver.partition import Solution, build_solution

ASSIGNMENT_ROW_LIMIT = 2000


def matching_not_applicable(hist: Histogram, models, patterns=None) -> str | None:
    """None when `matching` solves this request optimally, else the reason it does not apply."""
    if patterns is not None:
        return "user patterns are not supported by 'matching'"
    two_diverse = any(isinstance(m, LDiversity) and m.variant == "frequency" and m.l == 2 for m in models)
    if not two_diverse:
        if any(isinstance(m, KAnonymity) and m.k == 2 for m in models):
            return ("2-anonymity is a minimum-cost simplex matching, for which no polynomial algorithm is "
                    "implemented; use method = 'exact'")
        return "'matching' solves frequency 2-diversity with two distinct sensitive values only"
    for m in models:
        if isinstance(m, KAnonymity) and m.k > 2:
            return "'matching' needs k <= 2"
        if isinstance(m, LDiversity) and m.l > 2:
            return "'matching' needs l <= 2"
        if not isinstance(m, (KAnonymity, LDiversity, TCloseness)):
            return f"'matching' does not support {m}"
    distinct = int((hist.sa_counts.sum(axis=0) > 0).sum())
    if distinct != 2:
        return (f"2-diversity with {distinct} distinct sensitive values is a minimum-cost simplex matching, for "
                "which no polynomial algorithm is implemented; use method = 'exact'")
    return None


def _pairs_by_assignment(codes_a, count_a, codes_b, count_b):
    ia = np.repeat(np.arange(len(count_a)), count_a)
    ib = np.repeat(np.arange(len(count_b)), count_b)
    class_cost = 2 * (codes_a[:, None, :] != codes_b[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(class_cost[ia][:, ib])
    flow: dict[tuple[int, int], int] = {}
    for r, c in zip(ia[rows], ib[cols]):
        flow[(int(r), int(c))] = flow.get((int(r), int(c)), 0) + 1
    return flow


def _pairs_by_min_cost_flow(codes_a, count_a, codes_b, count_b):
    import networkx as nx

    graph = nx.DiGraph()
    for i, c in enumerate(count_a):
        graph.add_node(("a", i), demand=-int(c))
    for j, c in enumerate(count_b):
        graph.add_node(("b", j), demand=int(c))
    for i in range(len(count_a)):
        cost = 2 * (codes_b != codes_a[i][None, :]).sum(axis=1)
        for j in range(len(count_b)):
            graph.add_edge(("a", i), ("b", j), weight=int(cost[j]))
    _, flow_dict = nx.capacity_scaling(graph)
    flow = {}
    for i in range(len(count_a)):
        for (_, j), f in flow_dict[("a", i)].items():
            if f:
                flow[(i, j)] = int(f)
    return flow


def matching(hist: Histogram, models, patterns=None) -> Solution:
    """Optimal 2-diversity with two SA values by min-cost bipartite matching (module docstring)."""
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
        args = (hist.codes[ca], left_a[ca], hist.codes[cb], left_b[cb])
        if int(left_a.sum()) <= ASSIGNMENT_ROW_LIMIT:
            flow = _pairs_by_assignment(*args)
            how = "assignment"
        else:
            flow = _pairs_by_min_cost_flow(*args)
            how = "capacity-scaling min-cost flow"
        for (i, j), f in sorted(flow.items()):
            pc += [ca[i], cb[j]]; ps += [a, b]; pg += [group, group]; pn += [f, f]
            group += 1
    else:
        how = "same-class pairs only"
    arrays = [np.asarray(x, dtype=np.int64) for x in (pc, ps, pg, pn)]
    solution = build_solution(hist, *arrays, method="matching")
    solution.optimal = True
    solution.lower_bound = solution.stars
    solution.notes["algorithm"] = how
    return solution
