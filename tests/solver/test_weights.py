"""Attribute weights (issue 19: `weights = (age = 2, zipcode = 1, ...)`, ARX's setAttributeWeight).

What is checked, each against something written here apart from the solver:
  * weights that are all equal (1, or all 2: ARX divides them by the largest) change nothing:
    the same release, stars, node, metric value and loss as without weights, for every method;
  * cell suppression: `exact` and `dp` reach the fewest weighted stars (sum of the stars x their
    column's weight) of a brute force over every partition of the rows, on random tables
    (hypothesis); no method claims `optimal` unless it is;
  * the lattice under weights reaches the optimum of an exhaustive search over every node on
    Adult (5 QIs, ARX's hierarchy files), and the weights move the optimum;
  * the weighted Loss is ARX's: the optimal node and its score on Adult as ARX 3.9.2 computes
    them (ARX run with the weights, see ARX_WEIGHTED below), and the score from ARX's formula;
  * through SQL: `weights = (age = 5)` moves stars out of age; an unknown column is refused in
    one line with the database unchanged.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon.pipeline.loss import loss_notes
from duckanon.pipeline.problem import prepare
from duckanon.solver import solve
from duckanon.solver.bounds import k_anonymity_lower_bound
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import FrequencyLDiversity, KAnonymity

from support.data import SHARED
from support.refusals import assert_refused_and_unchanged

ADULT = SHARED / "adult"
QI5 = ["sex", "age", "race", "marital-status", "education"]
QI5_SQL = ", ".join(f'"{c}"' for c in QI5)
HIERARCHIES = f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv'"
SAMPLE = "CREATE OR REPLACE TABLE sample AS SELECT * FROM adult USING SAMPLE 10% (bernoulli, 7)"


# -- the definitions, written here ----------------------------------------------------------------
def partitions(items: list):
    """Every partition of `items` into blocks (lists)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in partitions(rest):
        for i in range(len(partition)):
            yield partition[:i] + [[first] + partition[i]] + partition[i + 1:]
        yield [[first]] + partition


def block_cost(rows: list[tuple], block: list[int], weights) -> float:
    """A group's weighted stars: each of its rows is starred where the group's rows disagree."""
    differ = [j for j in range(len(weights)) if len({rows[i][j] for i in block}) > 1]
    return len(block) * sum(weights[j] for j in differ)


def brute_force(rows: list[tuple], weights, k: int, sensitive=None, l: int = 1) -> float:
    """The fewest weighted stars over every partition of the rows into groups of at least k rows
    (and, with `sensitive`, no value in more than 1/l of a group's rows)."""
    best = math.inf
    for partition in partitions(list(range(len(rows)))):
        if any(len(block) < k for block in partition):
            continue
        if sensitive is not None and any(l * max(Counter(sensitive[i] for i in block).values()) > len(block)
                                         for block in partition):
            continue
        best = min(best, sum(block_cost(rows, block, weights) for block in partition))
    return best


def released_weighted_stars(hist: Histogram, solution, weights) -> float:
    """The weighted stars of a solution, from its groups' members (not from the solver's star
    counts): per group, the columns where its classes' codes differ."""
    total = 0.0
    for g in np.unique(solution.part_group):
        members = solution.part_group == g
        codes = hist.codes[solution.part_class[members]]
        differ = codes.min(axis=0) != codes.max(axis=0)
        total += float(solution.part_count[members].sum()) * float(np.dot(differ, weights))
    return total


def arx_weighted_loss(column_losses, weights) -> float:
    """ARX's Loss with attribute weights, written from its source: each column's loss rounded
    down to 1e-10 (Metric.round in MetricMDNMLoss.normalizeGeneralized), the weights divided by
    the largest (AbstractMetricMultiDimensional.initializeInternal), and
    ILMultiDimensionalGeometricMean.getAggregate: prod (v_j w_j + 1) ^ (1 / m) - 1."""
    largest = max(weights)
    result = 1.0
    for value, weight in zip(column_losses, weights):
        value = math.floor(value * 1e10) / 1e10
        result *= (value * weight / largest + 1.0) ** (1.0 / len(column_losses))
    return result - 1.0


# -- 1. equal weights change nothing --------------------------------------------------------------
def assert_same(a, b):
    assert a.method == b.method and a.stars == b.stars and a.optimal == b.optimal and a.lower_bound == b.lower_bound
    for name in ("part_class", "part_sa", "part_group", "part_count", "group_rep"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.group_labels == b.group_labels
    for key in ("levels", "metric_value", "loss", "removed_rows", "candidates", "groups"):
        assert a.notes.get(key) == b.notes.get(key), key


CELL_CASES = [
    ("k = 3", ["auto", "exact", "greedy", "merge", "mapprox", "topdown", "carve"]),
    ("k = 2, l = 2, sensitive = disease", ["auto", "exact", "tp", "tp+", "hilbert", "greedy", "carve"]),
    pytest.param("t = 0.4, sensitive = disease", ["auto", "exact", "carve", "topdown"], marks=pytest.mark.slow),
]


@pytest.fixture(scope="module")
def small():
    """A 24-row table of 3 QIs with classes of several sizes and four sensitive values."""
    con = duckanon.connect()
    rng = np.random.default_rng(19)
    values = [(f"Z{rng.integers(3)}", int(20 + 10 * rng.integers(4)), ["BSc", "MSc", "PhD"][rng.integers(3)],
               ["flu", "cold", "cancer", "asthma"][rng.integers(4)]) for _ in range(24)]
    con.execute("CREATE TABLE small (zipcode VARCHAR, age INTEGER, education VARCHAR, disease VARCHAR)")
    con.executemany("INSERT INTO small VALUES (?, ?, ?, ?)", values)
    yield con
    con.close()


@pytest.mark.parametrize("options, methods", CELL_CASES)
def test_equal_weights_change_no_cell_suppression(small, options, methods):
    problem = prepare(small, f"ANONYMIZE small WITH ({options}, qi = (zipcode, age, education))")
    hist = problem.histogram
    for method in methods:
        plain = solve(hist, problem.models, method)  # no time_limit: bounded by counts, comparable
        for weights in ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]):
            weighted = solve(hist, problem.models, method, weights=weights)
            assert_same(plain, weighted)
            assert weighted.notes["weighted_stars"] == pytest.approx(weights[0] * plain.stars)


def test_equal_weights_change_no_dp_or_matching():
    """The two other proven optima, on inputs small enough for them: dp on 8 rows, matching on
    frequency 2-diversity with two sensitive values."""
    rows = [(0, 2, 1), (1, 0, 0), (0, 2, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 2, 1), (0, 1, 1)]
    sensitive = ["a", "b", "a", "b", "a", "b", "b", "a"]
    hist = Histogram.from_rows(rows, sensitive)
    for method, models in (("dp", [KAnonymity(3)]), ("matching", [FrequencyLDiversity(2)]),
                           ("dp", [KAnonymity(2), FrequencyLDiversity(2)])):
        plain = solve(hist, models, method)
        for weights in ([1, 1, 1], [2.5, 2.5, 2.5]):
            assert_same(plain, solve(hist, models, method, weights=weights))


@pytest.fixture(scope="module")
def adult_sample(adult):
    adult.execute(SAMPLE)
    return adult


GENERALIZING = [
    ("lattice", "metric = 'loss', suppression_limit = 0.05"),
    ("lattice", "metric = 'entropy', suppression_limit = 0.02"),
    ("lattice", "metric = 'precision'"),
    ("lattice", "metric = 'stars', suppression_limit = 0.05"),
    ("lattice", "metric = 'discernibility', suppression_limit = 0.05"),
    ("mondrian", ""),
]


@pytest.mark.parametrize("method, options", GENERALIZING)
def test_equal_weights_change_no_generalization(adult_sample, method, options):
    recoding = HIERARCHIES if method == "lattice" else ""
    extra = "".join(f", {o}" for o in (options, recoding) if o)
    problem = prepare(adult_sample, f"ANONYMIZE sample WITH (k = 5, qi = ({QI5_SQL}), method = '{method}'{extra})")
    plain = solve(problem.histogram, problem.models, method, domains=problem.domains)
    for weights in ([1.0] * 5, [2.0] * 5):
        weighted = solve(problem.histogram, problem.models, method, domains=problem.domains, weights=weights)
        assert_same(plain, weighted)
        assert loss_notes(QI5, problem.histogram, weighted, problem.domains) == \
            loss_notes(QI5, problem.histogram, plain, problem.domains)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gensup", "mondrian", "auto"])
def test_equal_weights_change_no_recoding(adult_sample, method):
    """The methods over hierarchies (gensup's cell suppression, the top-down recoding, auto's
    choice among lattice, it and gensup). Without a time_limit they are bounded by counts (the
    MILP inside gensup's cell suppression by auto's work budget), so both solves are comparable
    whatever the load."""
    metric = ", metric = 'loss'" if method == "gensup" else ""
    problem = prepare(adult_sample, f"ANONYMIZE sample WITH (k = 5, qi = ({QI5_SQL}), method = '{method}', "
                                    f"suppression_limit = 0.02, {HIERARCHIES}{metric})")
    plain = solve(problem.histogram, problem.models, method, domains=problem.domains)
    weighted = solve(problem.histogram, problem.models, method, domains=problem.domains, weights=[1.0] * 5)
    assert_same(plain, weighted)
    assert loss_notes(QI5, problem.histogram, weighted, problem.domains) == \
        loss_notes(QI5, problem.histogram, plain, problem.domains)


def test_unit_weights_publish_the_same_table_through_sql(small):
    statement = "ANONYMIZE small WITH (k = 3, qi = (zipcode, age, education), seed = 4{})"
    plain = small.execute(statement.format("")).fetchone()
    plain_rows = small.execute("SELECT * FROM small_anon").fetchall()
    weighted = small.execute(statement.format(", weights = (age = 1)")).fetchone()
    assert small.execute("SELECT * FROM small_anon").fetchall() == plain_rows
    assert plain[:8] == weighted[:8]  # rows ... lower_bound
    plain_details, weighted_details = json.loads(plain[-1]), json.loads(weighted[-1])
    assert weighted_details["loss"] == plain_details["loss"]
    assert weighted_details["weights"] == {"zipcode": 1.0, "age": 1.0, "education": 1.0}
    assert weighted_details["weighted_stars"] == plain[3]


# -- 2. weighted stars: exact and dp against a brute force -----------------------------------------
WEIGHT_VALUES = [0.5, 1.0, 2.0, 3.0, 7.25]
rows_strategy = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 1)), min_size=3, max_size=8)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, weights=st.lists(st.sampled_from(WEIGHT_VALUES), min_size=3, max_size=3),
       k=st.sampled_from([2, 3]))
def test_exact_reaches_the_fewest_weighted_stars(rows, weights, k):
    if len(rows) < k:
        return
    hist = Histogram.from_rows(rows)
    best = brute_force(rows, weights, k)
    differ = len(set(weights)) > 1
    for method in ("exact", "dp", "auto", "greedy", "merge", "topdown", "carve", "mapprox"):
        solution = solve(hist, [KAnonymity(k)], method, weights=weights)
        published = released_weighted_stars(hist, solution, weights)
        assert solution.notes["weighted_stars"] == pytest.approx(published)
        assert published >= best - 1e-9, method
        if method in ("exact", "dp"):
            assert published == pytest.approx(best), method
            assert solution.optimal
        if solution.optimal:  # never claimed unless proven
            assert published == pytest.approx(best), method
        if differ:
            assert solution.lower_bound is None  # (a bound on stars, not on weighted stars)
            bound = solution.notes.get("weighted_lower_bound")
            assert bound is None or bound <= best + 1e-9


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 1), st.integers(0, 2)),
                     min_size=4, max_size=8),
       weights=st.lists(st.sampled_from(WEIGHT_VALUES), min_size=3, max_size=3))
def test_exact_weighted_stars_with_l_diversity(rows, weights):
    qi, sensitive = [r[:3] for r in rows], [r[3] for r in rows]
    if 2 * max(Counter(sensitive).values()) > len(rows):
        return  # infeasible
    hist = Histogram.from_rows(qi, sensitive)
    best = brute_force(qi, weights, 2, sensitive, 2)
    for method in ("exact", "dp", "auto"):
        solution = solve(hist, [KAnonymity(2), FrequencyLDiversity(2)], method, weights=weights)
        published = released_weighted_stars(hist, solution, weights)
        if method != "auto":
            assert published == pytest.approx(best) and solution.optimal, method
        assert published >= best - 1e-9
        assert not solution.optimal or published == pytest.approx(best)


def test_exact_and_dp_agree_under_patterns_and_weights():
    """With user patterns the optimum is the fewest published weighted stars of an output that
    honours them (exact's published-star model, dp's leftover group): both methods, written
    apart, reach the same value and prove it; and both are the brute force's on l-diverse input."""
    rng = np.random.default_rng(5)
    for trial in range(8):
        rows = [tuple(int(x) for x in rng.integers(0, 3, size=3)) for _ in range(int(rng.integers(4, 9)))]
        hist = Histogram.from_rows(rows)
        weights = [float(x) for x in rng.choice(WEIGHT_VALUES, size=3)]
        patterns = [[0], [1, 2]] if trial % 2 else [[0, 1]]
        exact = solve(hist, [KAnonymity(2)], "exact", patterns=patterns, weights=weights)
        dp = solve(hist, [KAnonymity(2)], "dp", patterns=patterns, weights=weights)
        assert released_weighted_stars(hist, exact, weights) == pytest.approx(released_weighted_stars(hist, dp, weights))
        assert exact.optimal and dp.optimal
    rows = [(0, 2, 1), (1, 0, 0), (0, 2, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 2, 1), (0, 1, 1)]
    sensitive = ["a", "b", "a", "b", "c", "b", "c", "a"]
    weights = [0.5, 7.25, 2.0]
    hist = Histogram.from_rows(rows, sensitive)
    best = brute_force(rows, weights, 2, sensitive, 2)
    for method in ("exact", "dp"):
        solution = solve(hist, [KAnonymity(2), FrequencyLDiversity(2)], method, weights=weights)
        assert released_weighted_stars(hist, solution, weights) == pytest.approx(best) and solution.optimal


def test_a_bound_on_stars_proves_nothing_about_weighted_stars():
    """greedy's release here has as few stars as the (unweighted) k-anonymity bound, which proves
    it optimal in stars; in weighted stars it is not (18 against 14), and it is not claimed."""
    rows = [(0, 2, 0), (1, 1, 1), (2, 1, 0), (1, 1, 2), (1, 0, 0), (0, 2, 2), (1, 0, 1), (2, 2, 1)]
    hist = Histogram.from_rows(rows)
    weights = [1.0, 5.0, 1.0]
    assert k_anonymity_lower_bound(hist, 2) == 10
    solution = solve(hist, [KAnonymity(2)], "greedy", weights=weights)
    assert solution.stars == 10
    assert released_weighted_stars(hist, solution, weights) == 18 > brute_force(rows, weights, 2) == 14
    assert not solution.optimal and solution.lower_bound is None
    assert solution.notes["weighted_lower_bound"] <= 14  # the weighted bound (bounds.py) is below the optimum
    assert solve(hist, [KAnonymity(2)], "greedy").optimal  # without weights the same count is proven


def test_weights_that_are_no_decimal_steps_are_still_exact():
    """Weights with no common step (the MILP's objective is not integral): exact's answer is the
    brute force's, up to the relative 1e-9 the cutoff allows."""
    rows = [(0, 0, 0), (0, 1, 0), (1, 0, 1), (1, 1, 1), (2, 2, 0), (2, 0, 1), (0, 2, 1)]
    weights = [math.pi, math.e, math.sqrt(2)]
    hist = Histogram.from_rows(rows)
    best = brute_force(rows, weights, 2)
    solution = solve(hist, [KAnonymity(2)], "exact", weights=weights)
    assert released_weighted_stars(hist, solution, weights) == pytest.approx(best, rel=1e-9)
    assert solution.optimal


def test_weights_move_exact_s_stars():
    """A column weighing 5 loses its stars to the others: fewer stars there, more stars in all,
    fewer weighted stars."""
    rows = [(0, 2, 1), (1, 0, 0), (0, 2, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 2, 1), (0, 1, 1)]
    hist = Histogram.from_rows(rows)
    weights = [1.0, 5.0, 1.0]
    plain = solve(hist, [KAnonymity(2)], "exact")
    weighted = solve(hist, [KAnonymity(2)], "exact", weights=weights)
    assert plain.stars == 8 and weighted.stars == 16
    assert released_weighted_stars(hist, weighted, weights) == brute_force(rows, weights, 2) == 16
    assert released_weighted_stars(hist, plain, weights) == 24  # 2 + 5 x 4 + 2
    assert weighted.optimal and plain.optimal


# -- 3. the lattice under weights against an exhaustive search on Adult ---------------------------
def hierarchy_rows(column: str) -> list[list[str]]:
    with open(ADULT / f"adult_hierarchy_{column}.csv", newline="") as handle:
        return [row for row in csv.reader(handle, delimiter=";") if row]


class Labels:
    """Per column and level the label of each value (an integer per label text) from ARX's
    hierarchy files, and ARX's cell loss of each label: (leaves under it - 1) / (rows - 1)."""

    def __init__(self, columns):
        self.columns = columns
        self.rows = {c: hierarchy_rows(c) for c in columns}
        self.heights = [len(self.rows[c][0]) - 1 for c in columns]

    def texts(self, j: int, level: int) -> list[str]:
        return sorted({row[level] for row in self.rows[self.columns[j]]})

    def codes(self, j: int, values: list[str], level: int) -> np.ndarray:
        by_value = {row[0]: row[level] for row in self.rows[self.columns[j]]}
        index = {t: i for i, t in enumerate(self.texts(j, level))}
        distinct, inverse = np.unique(np.array(values, dtype=object), return_inverse=True)
        return np.array([index[by_value[v]] for v in distinct], dtype=np.int64)[inverse.ravel()]

    def cell_loss(self, j: int, level: int) -> np.ndarray:
        rows = self.rows[self.columns[j]]
        leaves = Counter(row[level] for row in rows)
        return np.array([(leaves[t] - 1) / max(len(rows) - 1, 1) for t in self.texts(j, level)])


def exhaustive(labels: Labels, sample, k: int, limit_rows: int, metric: str, weights):
    """Every node's metric (k-anonymity, classes under k removed within the limit): ARX's loss
    (arx_weighted_loss) or the weighted precision (level / height per cell, 1 per removed cell,
    each column times its weight / the largest); the best value and its nodes."""
    m, n = len(labels.columns), len(sample[0])
    coded = [[labels.codes(j, sample[j], h) for h in range(labels.heights[j] + 1)] for j in range(m)]
    values = {}
    for levels in itertools.product(*[range(h + 1) for h in labels.heights]):
        codes = np.stack([coded[j][h] for j, h in enumerate(levels)], axis=1)
        radix = codes.max(axis=0) + 1
        key = np.zeros(n, dtype=np.int64)
        for j in range(m):  # one integer per label vector
            key = key * int(radix[j]) + codes[:, j]
        _, first, sizes = np.unique(key, return_index=True, return_counts=True)
        keys = codes[first]
        kept = sizes >= k
        removed = int(sizes[~kept].sum())
        if removed > limit_rows or removed == n:
            continue
        columns = []
        for j, h in enumerate(levels):
            cell = labels.cell_loss(j, h)[keys[:, j]] if metric == "loss" else np.full(len(keys), h / labels.heights[j])
            columns.append(float((sizes * np.where(kept, cell, 1.0)).sum()))
        if metric == "loss":
            values[levels] = arx_weighted_loss([c / n for c in columns], weights)
        else:
            values[levels] = sum(c * w / max(weights) for c, w in zip(columns, weights))
    best = min(values.values())
    return best, [levels for levels, value in values.items() if value <= best + 1e-12 * max(1.0, best)], values


@pytest.mark.parametrize("metric, limit", [("loss", 0.05), ("precision", 0.02)])
def test_weighted_lattice_equals_the_exhaustive_search(adult_sample, metric, limit):
    texts = [[str(v) for v in column] for column in zip(*adult_sample.execute(
        f"SELECT {', '.join(f'CAST({c} AS VARCHAR)' for c in QI5_SQL.split(', '))} FROM sample").fetchall())]
    n = len(texts[0])
    labels = Labels(QI5)
    limit_rows = int(math.floor(limit * n + 1e-9))
    plain_best, plain_nodes, _ = exhaustive(labels, texts, 5, limit_rows, metric, [1.0] * 5)
    for given_weights, weights in (("age = 5", [1.0, 5.0, 1.0, 1.0, 1.0]),
                                   ("sex = 3, age = 2, education = 0.5", [3.0, 2.0, 1.0, 1.0, 0.5])):
        problem = prepare(adult_sample, f"ANONYMIZE sample WITH (k = 5, qi = ({QI5_SQL}), method = 'lattice', "
                                        f"metric = '{metric}', suppression_limit = {limit}, {HIERARCHIES}, "
                                        f"weights = ({given_weights}))")
        assert problem.weights == weights
        solution = solve(problem.histogram, problem.models, "lattice", domains=problem.domains, weights=weights)
        best, nodes, values = exhaustive(labels, texts, 5, limit_rows, metric, weights)
        assert solution.optimal
        assert solution.notes["metric_value"] == pytest.approx(best, rel=1e-9)
        assert tuple(solution.notes["levels"]) in nodes
        # the weights move the optimum: the unweighted optimum costs more under them
        assert tuple(solution.notes["levels"]) not in plain_nodes
        assert min(values[node] for node in plain_nodes) > best * (1 + 1e-6)
    unweighted = solve(problem.histogram, problem.models, "lattice", domains=problem.domains)
    assert unweighted.notes["metric_value"] == pytest.approx(plain_best, rel=1e-9)


def test_discernibility_ignores_weights_as_arx_does(adult_sample):
    """ARX's DM and AECS are single-dimensional metrics (MetricSDDiscernability, MetricSDAECS):
    attribute weights do not apply; the release says so."""
    problem = prepare(adult_sample, f"ANONYMIZE sample WITH (k = 5, qi = ({QI5_SQL}), method = 'lattice', "
                                    f"metric = 'discernibility', suppression_limit = 0.05, {HIERARCHIES})")
    plain = solve(problem.histogram, problem.models, "lattice", domains=problem.domains)
    weighted = solve(problem.histogram, problem.models, "lattice", domains=problem.domains, weights=[1, 5, 1, 1, 1])
    assert weighted.notes["levels"] == plain.notes["levels"]
    assert weighted.notes["metric_value"] == plain.notes["metric_value"]
    assert "single-dimensional" in weighted.notes["weights_ignored"]


# -- 4. ARX's own weighted Loss --------------------------------------------------------------------
# ARX 3.9.2 (commit aacd487f, the build of ../shared/arx-side-by-side) run on the whole Adult
# table with QIs sex, age, race, marital-status, education and ARX's hierarchy files, KAnonymity(5),
# setSuppressionLimit(0.05), Metric.createLossMetric(0.5) and config.setAttributeWeight(column, w)
# for every QI (ARX's default weight of a column not named is 0.5, duckanon's is 1: every column is
# named here). Printed: getGlobalOptimum()'s levels, getHighestScore() (the weighted geometric
# mean) and its per-column values (getValue(), unweighted, in the QI order above).
ARX_WEIGHTED = [
    ("", [1, 1, 1, 1, 1], [0, 3, 0, 0, 0], 0.08021574418426991,
     [0.0459187056, 0.2290252166, 0.0459187056, 0.0459187056, 0.0459187056]),
    ("age = 5", [1, 5, 1, 1, 1], [0, 1, 0, 0, 1], 0.03189670159250002,
     [0.0482395066, 0.086694476, 0.0482395066, 0.0482395066, 0.2303870211]),
    ("sex = 3, age = 2, education = 0.5", [3, 2, 1, 1, 0.5], [0, 2, 0, 0, 1], 0.03340340573287248,
     [0.0316292023, 0.1196629111, 0.0316292023, 0.0316292023, 0.2163295979]),
    ("sex = 2, age = 2, race = 2, \"marital-status\" = 2, education = 2", [2, 2, 2, 2, 2], [0, 3, 0, 0, 0],
     0.08021574418426991, [0.0459187056, 0.2290252166, 0.0459187056, 0.0459187056, 0.0459187056]),
]


@pytest.mark.parametrize("given_weights, weights, levels, score, per_column", ARX_WEIGHTED)
def test_weighted_loss_is_arx_s(adult, given_weights, weights, levels, score, per_column):
    # ARX's score from its per-column values by ARX's formula
    assert arx_weighted_loss(per_column, weights) == pytest.approx(score, rel=1e-9)
    option = f", weights = ({given_weights})" if given_weights else ""
    row = adult.execute(f"ANONYMIZE adult WITH (k = 5, qi = ({QI5_SQL}), method = 'lattice', metric = 'loss', "
                        f"suppression_limit = 0.05, {HIERARCHIES}{option})").fetchone()
    details = json.loads(row[-1])
    assert details["levels"] == levels
    assert details["metric_value"] == pytest.approx(score, rel=1e-12)
    assert details["loss"] == round(score, 12)  # the release's loss (pipeline/loss.py), measured on the table
    assert [details["column_loss"][c] for c in QI5] == pytest.approx(per_column, abs=1e-6)


# -- 5. through SQL --------------------------------------------------------------------------------
EIGHT = [("10115", "30", "MSc", "flu"), ("20095", "20", "BSc", "cold"), ("10115", "30", "BSc", "flu"),
         ("10115", "20", "MSc", "cold"), ("20095", "25", "BSc", "flu"), ("10115", "25", "MSc", "asthma"),
         ("20095", "30", "MSc", "cold"), ("10115", "25", "MSc", "flu")]


@pytest.fixture
def eight():
    con = duckanon.connect()
    con.execute("CREATE TABLE people (zipcode VARCHAR, age VARCHAR, education VARCHAR, disease VARCHAR)")
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", EIGHT)
    yield con
    con.close()


def column_stars(rows) -> list[int]:
    return [sum(1 for row in rows if row[j] == "*") for j in range(3)]


def test_age_weight_moves_stars_out_of_age(eight):
    statement = "ANONYMIZE people WITH (k = 2, qi = (zipcode, age, education), method = 'exact', seed = 1{})"
    plain = eight.execute(statement.format("")).fetchone()
    plain_rows = eight.execute("SELECT zipcode, age, education FROM people_anon").fetchall()
    weighted = eight.execute(statement.format(", weights = (age = 5)"))
    result = dict(zip([d[0] for d in weighted.description], weighted.fetchone()))
    weighted_rows = eight.execute("SELECT zipcode, age, education FROM people_anon").fetchall()
    before, after = column_stars(plain_rows), column_stars(weighted_rows)
    assert before == [2, 4, 2] and after == [8, 0, 8]
    weights = [1, 5, 1]
    weighted_count = sum(s * w for s, w in zip(after, weights))
    assert weighted_count == brute_force([r[:3] for r in EIGHT], weights, 2) == 16
    assert sum(s * w for s, w in zip(before, weights)) == 24
    assert result["stars"] == sum(after) == 16  # `stars` stays the count
    assert result["optimal"] and result["optimal_for"] == "weighted stars"
    assert result["lower_bound"] is None  # (about unweighted stars)
    details = json.loads(result["details"])
    assert details["weighted_stars"] == weighted_count == details["weighted_lower_bound"]
    assert details["weights"] == {"zipcode": 1.0, "age": 5.0, "education": 1.0}
    # every row is published, in classes of 2 rows or more
    assert len(weighted_rows) == len(EIGHT) and min(Counter(weighted_rows).values()) >= 2


def test_weights_on_an_unknown_column_are_refused(eight):
    eight.execute("ANONYMIZE people WITH (k = 2, qi = (zipcode, age, education))")
    assert_refused_and_unchanged(
        eight, "ANONYMIZE people WITH (k = 2, qi = (zipcode, age, education), weights = (age = 2, height = 3))",
        r"^weights names column height, which is not a quasi-identifier \(quasi-identifiers: zipcode, age, education\)$")


def test_weights_steer_mondrian_and_its_loss(adult_sample):
    """Mondrian's cuts and class moves follow the weighted loss: age loses less with age = 5, and
    the reported loss is the weighted one, recomputed here from the per-column losses."""
    statement = f"ANONYMIZE sample WITH (k = 5, qi = ({QI5_SQL}), method = 'mondrian', seed = 1{{}})"
    plain = json.loads(adult_sample.execute(statement.format("")).fetchone()[-1])
    weighted = json.loads(adult_sample.execute(statement.format(", weights = (age = 5)")).fetchone()[-1])
    assert weighted["column_loss"]["age"] < 0.5 * plain["column_loss"]["age"]
    columns = [weighted["column_loss"][c] for c in QI5]
    assert weighted["loss"] == pytest.approx(arx_weighted_loss(columns, [1, 5, 1, 1, 1]), abs=1e-5)
