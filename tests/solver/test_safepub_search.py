"""SafePub's data-dependent search (solver/safepub_search.py): its scores equal ARX's on ARX's own
deterministic sample (numbers recorded from ARX's classes by benchmarks/arx_dp/record_scores.sh),
hand-computed scores on a toy, the exponential mechanism's frequencies, and the walk's limits."""

from __future__ import annotations

import csv
import functools
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from duckanon.errors import AnonymizeError
from duckanon.solver import safepub_search as ss
from duckanon.solver.histogram import Histogram

from support.data import SHARED
from support.java_random import ARX_SEED, JavaRandom

RECORDED = Path(__file__).with_name("safepub_arx_scores.jsonl")


def read_rows(path: Path, delimiter: str = ";") -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return [row for row in csv.reader(f, delimiter=delimiter) if row]


@functools.lru_cache(maxsize=None)
def arx_case(data: str, qis: str, beta: float):
    """The score space of `data`'s ARX hierarchies, ARX's sample as a histogram, and N."""
    names = qis.split(",")
    header, *rows = read_rows(SHARED / data / f"{data}.csv")
    index = [header.index(q) for q in names]
    values = [sorted({r[i] for r in rows}) for i in index]
    hierarchies = [read_rows(SHARED / data / f"{data}_hierarchy_{q}.csv") for q in names]
    space = ss.ScoreSpace.from_rows(hierarchies, values)
    rng = JavaRandom(ARX_SEED)
    sample = [i for i in range(len(rows)) if rng.next_double() < beta]
    code_of = [{v: c for c, v in enumerate(vals)} for vals in values]
    codes = np.array([[code_of[j][rows[i][index[j]]] for j in range(len(names))] for i in sample])
    classes, counts = np.unique(codes, axis=0, return_counts=True)
    return space, Histogram(classes, counts.reshape(-1, 1)), len(rows), sample


def recorded() -> list[dict]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines()]


@pytest.mark.parametrize("record", recorded(), ids=lambda r: f"{r['data']}-{r['metric']}-{r['budget']:g}-{r['steps']}")
def test_score_equals_arx(record):
    space, hist, n, sample = arx_case(record["data"], record["qis"], record["beta"])
    assert len(sample) == record["sampled"] and sample[:20] == record["first_sampled"]  # ARX's sample
    got = ss.score(record["metric"], space, hist, n, record["k"], tuple(record["optimum"]))
    assert got == pytest.approx(record["score"], rel=1e-15, abs=0)


def test_recorded_grid_covers_every_metric_and_many_nodes():
    records = recorded()
    assert {r["metric"] for r in records} == set(ss.SCORES)
    assert len({(r["data"], r["metric"], tuple(r["optimum"])) for r in records}) >= 50


# A toy: two QIs; A has values a, b, c (hierarchy a, b -> ab -> *; c -> cd -> *, with a row d the
# data lacks, which still counts in the loss's shares), B has x, y (-> *). 6 rows sampled of N = 10.
TOY_HIERARCHIES = [
    [["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]],
    [["x", "*"], ["y", "*"]],
]
TOY_VALUES = [["a", "b", "c"], ["x", "y"]]
TOY_ROWS = [("a", "x"), ("a", "x"), ("b", "x"), ("b", "y"), ("c", "y"), ("c", "y")]
TOY_N = 10


def toy():
    space = ss.ScoreSpace.from_rows(TOY_HIERARCHIES, TOY_VALUES)
    code = [{v: i for i, v in enumerate(vals)} for vals in TOY_VALUES]
    rows = [(code[0][a], code[1][b]) for a, b in TOY_ROWS]
    classes = sorted(set(rows))
    counts = [rows.count(c) for c in classes]
    return space, Histogram(np.array(classes), np.array(counts).reshape(-1, 1))


def test_toy_scores_by_hand():
    """At levels (1, 0) with k = 2 the classes are (ab, x): 3, (ab, y): 1, (cd, y): 2; the class
    of 1 row is suppressed: kept 5, out = 10 - 5 = 5 (4 unsampled, 1 suppressed)."""
    space, hist = toy()
    levels, k, n, m = (1, 0), 2, TOY_N, 2
    # loss: shares of A at level 1 are 2/4 (ab, cd), of B at level 0 1/2
    loss = -(m * 5 + 5 * Fraction(2, 4) + 5 * Fraction(1, 2)) / (m * (k - 1))
    assert ss.score("loss", space, hist, n, k, levels) == float(loss)
    precision = -(m * 5 + 5 * (Fraction(1, 2) + 0)) / (m * (k - 1))
    assert ss.score("precision", space, hist, n, k, levels) == float(precision)
    c = Fraction(k * k, k - 1) + 1
    assert ss.score("discernibility", space, hist, n, k, levels) == float(-(n * 5 + 3 ** 2 + 2 ** 2) / (n * c))
    assert ss.score("aecs", space, hist, n, k, levels) == 2 + 1
    # entropy: A's kept labels ab: 3, cd: 2; B's x: 3, y: 2; no kept label is the root '*'
    entropy = -(n * 5 + 3 ** 2 + 2 ** 2 + n * 5 + 3 ** 2 + 2 ** 2) / (n * m * c)
    assert ss.score("entropy", space, hist, n, k, levels) == float(entropy)
    # at the top every kept cell is the root: entropy charges N per kept cell too
    top = -(n * 4 + n * 6) * m / (n * m * c)
    assert ss.score("entropy", space, hist, n, k, (2, 1)) == float(top)


def test_sensitivities_are_arxs():
    assert ss.sensitivity("loss", 62, 30162, 9) == 9 * 61
    assert ss.sensitivity("precision", 1, 100, 3) == 3
    assert ss.sensitivity("discernibility", 1, 100, 3) == 500
    assert ss.sensitivity("discernibility", 4, 100, 3) == 100 * (Fraction(16, 3) + 1)
    assert ss.sensitivity("entropy", 4, 100, 3) == 300 * (Fraction(16, 3) + 1)
    assert ss.sensitivity("aecs", 62, 100, 3) == 1
    with pytest.raises(AnonymizeError, match="unknown score function 'stars'"):
        ss.sensitivity("stars", 2, 10, 2)


def test_mechanism_frequencies_match_the_exponential_weights():
    scores, epsilon, draws = [0.0, -1.0, -2.0, -4.0, -0.5], 1.3, 60000
    expected = np.exp(0.5 * epsilon * np.array(scores))
    expected /= expected.sum()
    assert ss.exponential_probabilities(scores, epsilon) == pytest.approx(expected, rel=1e-12)
    rng = random.Random(37)
    counts = np.bincount([ss.exponential_mechanism(scores, epsilon, rng) for _ in range(draws)], minlength=5)
    chi2 = float((((counts - draws * expected) ** 2) / (draws * expected)).sum())
    assert chi2 < 18.47  # chi-square, 4 degrees of freedom, p = 0.001


def test_mechanism_is_stable_in_log_space():
    """Scores far below 0 (a large table's loss) would underflow exp(); shifted they do not."""
    p = ss.exponential_probabilities([-1e6, -1e6 - 2.0], 1.0)
    assert p == pytest.approx([1 / (1 + math.exp(-1.0)), 1 / (1 + math.exp(1.0))], rel=1e-12)
    assert ss.exponential_mechanism([-1e6, -1e6 - 2e4], 1.0, random.Random(1)) == 0


def test_default_source_is_the_system_cryptographic_one(monkeypatch):
    used = []

    class Counting(random.SystemRandom):
        def random(self):
            used.append(1)
            return super().random()

    monkeypatch.setattr(ss.random, "SystemRandom", Counting)
    space, hist = toy()
    result = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 0.5, 3)
    assert result.publish == "select" and result.epsilon_final == 0.25  # the default: half for the final choice
    assert len(used) == result.steps + 1 == 4  # 3 steps and the final choice


@pytest.mark.parametrize("steps", [0, 1, 2, 4, 5, 40])
def test_walk_never_takes_more_than_search_steps(steps):
    space, hist = toy()  # a lattice of 3 x 2 = 6 nodes
    result = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, steps, "last", random.Random(steps))
    assert result.steps <= steps and len(result.pivots) == result.steps + 1
    assert result.pivots[0] == (2, 1)  # from the top
    for i, pivot in enumerate(result.pivots[1:], start=1):
        assert any(pivot in ss.predecessors(p) for p in result.pivots[:i])
    assert result.levels == result.pivots[-1]
    if steps:
        assert result.epsilon_step * steps <= 1.0


def test_walk_ends_when_no_candidate_is_left():
    """On a chain (one QI) each pivot has one predecessor: the walk reaches the bottom and stops."""
    space = ss.ScoreSpace.from_rows([TOY_HIERARCHIES[0]], [TOY_VALUES[0]])
    hist = Histogram(np.array([[0], [1], [2]]), np.array([[2], [2], [2]]))
    result = ss.data_dependent_search(space, hist, 6, 2, "precision", 1.0, 10, "last", random.Random(0))
    assert result.pivots == [(2,), (1,), (0,)] and result.steps == 2


def test_budget_is_split_over_the_draws():
    assert ss.per_step_epsilon(1.0, 3) * 3 <= 1.0
    assert ss.per_step_epsilon(0.1, 7) * 7 <= 0.1
    assert ss.per_step_epsilon(1.0, 4) == 0.25
    space, hist = toy()
    select = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, 4, "select", random.Random(0), 0.5)
    assert select.epsilon_final == 0.5 and select.epsilon_step == 0.125  # 4 walk draws of 1/8 + 1/2
    assert select.epsilon_final + select.steps * select.epsilon_step <= 1.0
    assert select.levels in select.scores  # a pivot or a predecessor of one
    third = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 0.3, 7, "select", random.Random(0), 1 / 3)
    assert third.epsilon_final + 7 * third.epsilon_step <= 0.3
    # share 1: the walk spends nothing (a data-independent random walk), the final choice all
    whole = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, 4, "select", random.Random(0), 1.0)
    assert (whole.epsilon_final, whole.epsilon_step) == (1.0, 0.0)
    with pytest.raises(AnonymizeError, match=r"select_share must lie in \(0, 1\]"):
        ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, 4, "select", select_share=1.5)


def test_best_pivot_is_arxs_choice():
    space, hist = toy()
    result = ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, 5, "best_pivot", random.Random(3))
    best = max(result.scores[p] for p in result.pivots)
    assert result.scores[result.levels] == best
    with pytest.raises(AnonymizeError, match="unknown publish choice 'max'"):
        ss.data_dependent_search(space, hist, TOY_N, 2, "loss", 1.0, 5, "max")


def chain_case(sample: dict[str, int], n_total: int):
    """One QI of values a, b under one root '*': a lattice of two nodes, bottom (0,) and top (1,)."""
    space = ss.ScoreSpace.from_rows([[["a", "*"], ["b", "*"]]], [["a", "b"]])
    codes = [[c] for c, v in enumerate("ab") if sample.get(v)]
    counts = [[sample[v]] for v in "ab" if sample.get(v)]
    return space, Histogram(np.array(codes), np.array(counts)), n_total


# Neighbours: D samples a, b of N = 3 rows; D' has one more row, a, sampled (N = 4). With k = 2 and
# discernibility the top is better on D (-7 against -9, before the sensitivity) and the bottom on
# D' (-12 against -13).
D = chain_case({"a": 1, "b": 1}, 3)
D_PRIME = chain_case({"a": 2, "b": 1}, 4)


def test_best_pivot_is_outside_the_budget_and_select_is_within_it():
    """One step: the walk's only candidate is the bottom, so its pivots are the same on both
    neighbours. ARX's best pivot then follows the exact scores: the top on D, the bottom on D',
    each with probability 1, which no epsilon bounds. 'select' publishes by one exponential
    mechanism over the two nodes, within e^epsilon_search on every output."""
    epsilon = 1.0
    best = [ss.data_dependent_search(*case, 2, "discernibility", epsilon, 1, "best_pivot", random.Random(0)).levels
            for case in (D, D_PRIME)]
    assert best == [(1,), (0,)]
    probabilities = []
    for case in (D, D_PRIME):
        result = ss.data_dependent_search(*case, 2, "discernibility", epsilon, 1, "select", random.Random(0))
        assert result.pivots == [(1,), (0,)]
        nodes = list(result.scores)
        p = ss.exponential_probabilities([result.scores[n] for n in nodes], result.epsilon_final)
        probabilities.append(dict(zip(nodes, p)))
    for node in ((0,), (1,)):
        ratio = probabilities[0][node] / probabilities[1][node]
        assert math.exp(-epsilon) <= ratio <= math.exp(epsilon)
    # the scores moved by less than one sensitivity between the neighbours, as the accounting needs
    for node in ((0,), (1,)):
        assert abs(ss.score("discernibility", *D, 2, node) - ss.score("discernibility", *D_PRIME, 2, node)) <= 1


def test_select_frequencies_on_neighbours_stay_within_e_epsilon():
    """The release of 'select' drawn 20,000 times on D and on D' (seeded): each output's
    frequencies within e^epsilon_search of each other, with a margin for the draws."""
    epsilon, draws = 1.0, 20000
    freq = []
    for i, case in enumerate((D, D_PRIME)):
        rng = random.Random(100 + i)
        got = [ss.data_dependent_search(*case, 2, "discernibility", epsilon, 1, "select", rng).levels
               for _ in range(draws)]
        freq.append({node: got.count(node) / draws for node in ((0,), (1,))})
    for node in ((0,), (1,)):
        assert freq[0][node] <= math.exp(epsilon) * freq[1][node] + 0.02
        assert freq[1][node] <= math.exp(epsilon) * freq[0][node] + 0.02


def test_bound_hierarchies_give_the_same_scores(adult):
    """ScoreSpace.from_bound (what the pipeline has: duckanon's bound hierarchies) scores every
    node as from_rows on the ARX files does, here on all of Adult (every row sampled)."""
    from duckanon.pipeline.problem import prepare

    adult_records = [r for r in recorded() if r["data"] == "adult"]
    qis = adult_records[0]["qis"].split(",")
    quoted = ", ".join(f'"{q}"' for q in qis)
    problem = prepare(adult, f"ANONYMIZE adult WITH (k = 2, qi = ({quoted}), method = 'lattice', "
                             f"hierarchies = '{SHARED / 'adult'}/adult_hierarchy_{{column}}.csv')")
    bound = ss.ScoreSpace.from_bound(problem.domains.hierarchies)
    space, hist, n, _ = arx_case("adult", adult_records[0]["qis"], 1.0)
    assert hist.n_rows == n == problem.histogram.n_rows
    nodes = [bound.heights, (0,) * len(qis), *sorted({tuple(r["optimum"]) for r in adult_records})[:6]]
    for metric in ss.SCORES:  # the top: every cell is the root label (entropy's root test)
        for node in nodes:
            assert ss.score(metric, bound, problem.histogram, n, 62, node) == \
                pytest.approx(ss.score(metric, space, hist, n, 62, node), rel=1e-15), (metric, node)


def _all_nodes(heights):
    import itertools
    return list(itertools.product(*(range(h + 1) for h in heights)))


def _neighbour_moves(metric: str, k: int, seed: int) -> list[list[float]]:
    """Per neighbour pair of a random small input (two QIs of 4 and 3 values, hierarchies of 3
    and 2 levels), the raw score move of every node, in units of the sensitivity: the input with
    one row more, (a) that row not sampled, (b) sampled."""
    rng = np.random.default_rng(seed)
    space = ss.ScoreSpace.from_rows([[["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]],
                                     [["x", "*"], ["y", "*"], ["z", "*"]]], [list("abcd"), list("xyz")])
    nodes = _all_nodes(space.heights)
    codes = np.array([[i, j] for i in range(4) for j in range(3)])
    moves = []
    for _ in range(30):
        counts = rng.integers(0, 2 * k + 1, size=len(codes))
        n = int(counts.sum()) + int(rng.integers(0, 10))  # some rows unsampled
        x = int(rng.integers(len(codes)))
        plus = counts.copy()
        plus[x] += 1
        before = ss.Scorer(space, Histogram(codes, counts.reshape(-1, 1)), n, k, metric)
        for after in (ss.Scorer(space, Histogram(codes, counts.reshape(-1, 1)), n + 1, k, metric),
                      ss.Scorer(space, Histogram(codes, plus.reshape(-1, 1)), n + 1, k, metric)):
            moves.append([float((after.raw(v) - before.raw(v)) / before.sensitivity) for v in nodes])
    return moves


@pytest.mark.parametrize("metric", ss.RANGE_BOUNDED)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_score_moves_lie_in_a_range_of_width_w(metric, k):
    """score_range's claim checked by enumeration, independently of its proof: between an input and
    its neighbour (one row more, sampled or not) every node's score moves within one interval of
    width w = k / max(k - 1, 1) sensitivities; and the moves are not one-signed (the scores are
    not monotone: the factor 2 cannot drop to 1)."""
    w = float(ss.score_range(metric, k))
    widest, mixed = 0.0, False
    for move in _neighbour_moves(metric, k, seed=k):
        widest = max(widest, max(move) - min(move))
        mixed |= min(move) < 0 < max(move)
    assert widest <= w + 1e-12
    assert mixed or k == 1


def test_range_bounded_select_frequencies_on_neighbours_stay_within_e_epsilon():
    """The range-bounded final choice (weights exp(epsilon * s / w), k = 3 by loss: w = 3/2) on D
    and D' (one row more, sampled): its exact probabilities within e^epsilon_search of each other,
    and 8,000 draws of it each (seeded) within e^epsilon with a margin for the draws."""
    epsilon, draws, k = 1.0, 8000, 3
    freq, exact = [], []
    for i, case in enumerate((chain_case({"a": 2, "b": 1}, 3), chain_case({"a": 3, "b": 1}, 4))):
        rng = random.Random(200 + i)
        result = ss.data_dependent_search(*case, k, "loss", epsilon, 1, "select", rng, range_bounded=True)
        assert result.pivots == [(1,), (0,)] and result.sharpen == 2 / 1.5
        nodes = list(result.scores)
        scores = [result.scores[v] for v in nodes]
        got = [nodes[ss.exponential_mechanism(scores, result.epsilon_final * result.sharpen, rng)] for _ in range(draws)]
        freq.append({node: got.count(node) / draws for node in nodes})
        exact.append(dict(zip(nodes, ss.exponential_probabilities(scores, result.epsilon_final * result.sharpen))))
    for node in ((0,), (1,)):
        assert math.exp(-0.5 * epsilon) <= exact[0][node] / exact[1][node] <= math.exp(0.5 * epsilon)
        assert freq[0][node] <= math.exp(epsilon) * freq[1][node] + 0.03
        assert freq[1][node] <= math.exp(epsilon) * freq[0][node] + 0.03


def test_permute_and_flip_is_uniform_at_zero_and_the_best_at_a_large_epsilon():
    """Permute-and-flip (bench_safepub.py's 'pf' choices): at epsilon 0 every candidate is accepted
    when first seen, so the random order alone decides (uniform); at a large epsilon only the best
    is ever accepted; its acceptance probabilities are exp(epsilon (s - s_max) / 2)."""
    rng = random.Random(5)
    scores = [-3.0, -1.0, -2.0]
    got = [ss.permute_and_flip(scores, 0.0, rng) for _ in range(3000)]
    assert all(abs(got.count(i) / 3000 - 1 / 3) < 0.04 for i in range(3))
    assert {ss.permute_and_flip(scores, 200.0, rng) for _ in range(200)} == {1}
    # two candidates, the worse one 2 below: it wins only when first and accepted, 1/2 x e^-1
    got = [ss.permute_and_flip([0.0, -2.0], 1.0, rng) for _ in range(6000)]
    assert abs(got.count(1) / 6000 - 0.5 * math.exp(-1.0)) < 0.02
