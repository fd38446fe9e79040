"""SafePub's parameters against ARX's: (epsilon, epsilon_search, delta) -> (epsilon_anonymization, k,
beta), every value as ARX 3.9.2's own ParameterCalculation printed it (benchmarks/arx_dp/ArxParameters.java;
the run and its command in benchmarks/results/arx_dp_parameters.md). Floats compare bit for bit (hex)."""

import numpy as np
import pytest

from duckanon.errors import AnonymizeError
from duckanon.solver.differential_privacy import anonymization_budget, parameters, sample_counts

# epsilon, epsilon_search, delta, epsilon_anonymization (hex), k, beta (hex)
ARX_GRID = [
    (0.1, 0.0, 0.001, '0x1.999999999999ap-4', 27, '0x1.85c933156a61fp-4'),
    (0.1, 0.0, 0.0001, '0x1.999999999999ap-4', 39, '0x1.85c933156a61fp-4'),
    (0.1, 0.0, 1e-05, '0x1.999999999999ap-4', 50, '0x1.85c933156a61fp-4'),
    (0.1, 0.0, 1e-06, '0x1.999999999999ap-4', 61, '0x1.85c933156a61fp-4'),
    (0.1, 0.0, 1e-07, '0x1.999999999999ap-4', 73, '0x1.85c933156a61fp-4'),
    (0.1, 0.0, 1e-08, '0x1.999999999999ap-4', 84, '0x1.85c933156a61fp-4'),
    (0.25, 0.0, 0.001, '0x1.0p-2', 28, '0x1.c5041854df7cfp-3'),
    (0.25, 0.0, 0.0001, '0x1.0p-2', 39, '0x1.c5041854df7cfp-3'),
    (0.25, 0.0, 1e-05, '0x1.0p-2', 50, '0x1.c5041854df7cfp-3'),
    (0.25, 0.0, 1e-06, '0x1.0p-2', 63, '0x1.c5041854df7cfp-3'),
    (0.25, 0.0, 1e-07, '0x1.0p-2', 73, '0x1.c5041854df7cfp-3'),
    (0.25, 0.0, 1e-08, '0x1.0p-2', 85, '0x1.c5041854df7cfp-3'),
    (0.5, 0.0, 0.001, '0x1.0p-1', 28, '0x1.92e9a0720d3e9p-2'),
    (0.5, 0.0, 0.0001, '0x1.0p-1', 40, '0x1.92e9a0720d3e9p-2'),
    (0.5, 0.0, 1e-05, '0x1.0p-1', 52, '0x1.92e9a0720d3e9p-2'),
    (0.5, 0.0, 1e-06, '0x1.0p-1', 64, '0x1.92e9a0720d3e9p-2'),
    (0.5, 0.0, 1e-07, '0x1.0p-1', 76, '0x1.92e9a0720d3e9p-2'),
    (0.5, 0.0, 1e-08, '0x1.0p-1', 88, '0x1.92e9a0720d3e9p-2'),
    (0.693, 0.0, 0.001, '0x1.62d0e56041893p-1', 32, '0x1.ffecb51392fefp-2'),
    (0.693, 0.0, 0.0001, '0x1.62d0e56041893p-1', 44, '0x1.ffecb51392fefp-2'),
    (0.693, 0.0, 1e-05, '0x1.62d0e56041893p-1', 56, '0x1.ffecb51392fefp-2'),
    (0.693, 0.0, 1e-06, '0x1.62d0e56041893p-1', 68, '0x1.ffecb51392fefp-2'),
    (0.693, 0.0, 1e-07, '0x1.62d0e56041893p-1', 81, '0x1.ffecb51392fefp-2'),
    (0.693, 0.0, 1e-08, '0x1.62d0e56041893p-1', 95, '0x1.ffecb51392fefp-2'),
    (1.0, 0.0, 0.001, '0x1.0p0', 35, '0x1.43a54e4e98862p-1'),
    (1.0, 0.0, 0.0001, '0x1.0p0', 48, '0x1.43a54e4e98862p-1'),
    (1.0, 0.0, 1e-05, '0x1.0p0', 62, '0x1.43a54e4e98862p-1'),
    (1.0, 0.0, 1e-06, '0x1.0p0', 75, '0x1.43a54e4e98862p-1'),
    (1.0, 0.0, 1e-07, '0x1.0p0', 92, '0x1.43a54e4e98862p-1'),
    (1.0, 0.0, 1e-08, '0x1.0p0', 105, '0x1.43a54e4e98862p-1'),
    (1.5, 0.0, 0.001, '0x1.8p0', 45, '0x1.8dc1e236d28f7p-1'),
    (1.5, 0.0, 0.0001, '0x1.8p0', 63, '0x1.8dc1e236d28f7p-1'),
    (1.5, 0.0, 1e-05, '0x1.8p0', 81, '0x1.8dc1e236d28f7p-1'),
    (1.5, 0.0, 1e-06, '0x1.8p0', 100, '0x1.8dc1e236d28f7p-1'),
    (1.5, 0.0, 1e-07, '0x1.8p0', 118, '0x1.8dc1e236d28f7p-1'),
    (1.5, 0.0, 1e-08, '0x1.8p0', 137, '0x1.8dc1e236d28f7p-1'),
    (2.0, 0.0, 0.001, '0x1.0p1', 65, '0x1.bab5557101f8bp-1'),
    (2.0, 0.0, 0.0001, '0x1.0p1', 82, '0x1.bab5557101f8bp-1'),
    (2.0, 0.0, 1e-05, '0x1.0p1', 114, '0x1.bab5557101f8bp-1'),
    (2.0, 0.0, 1e-06, '0x1.0p1', 132, '0x1.bab5557101f8bp-1'),
    (2.0, 0.0, 1e-07, '0x1.0p1', 165, '0x1.bab5557101f8bp-1'),
    (2.0, 0.0, 1e-08, '0x1.0p1', 183, '0x1.bab5557101f8bp-1'),
    (3.0, 0.0, 0.001, '0x1.8p1', 137, '0x1.e6824f33314f4p-1'),
    (3.0, 0.0, 0.0001, '0x1.8p1', 182, '0x1.e6824f33314f4p-1'),
    (3.0, 0.0, 1e-05, '0x1.8p1', 227, '0x1.e6824f33314f4p-1'),
    (3.0, 0.0, 1e-06, '0x1.8p1', 272, '0x1.e6824f33314f4p-1'),
    (3.0, 0.0, 1e-07, '0x1.8p1', 317, '0x1.e6824f33314f4p-1'),
    (3.0, 0.0, 1e-08, '0x1.8p1', 423, '0x1.e6824f33314f4p-1'),
    (0.5, 0.05, 1e-05, '0x1.cccccccccccccp-2', 52, '0x1.73119b171a2abp-2'),
    (0.5, 0.05, 1e-06, '0x1.cccccccccccccp-2', 65, '0x1.73119b171a2abp-2'),
    (1.0, 0.1, 1e-05, '0x1.cccccccccccccp-1', 59, '0x1.2fd619ffbc8efp-1'),
    (1.0, 0.1, 1e-06, '0x1.cccccccccccccp-1', 74, '0x1.2fd619ffbc8efp-1'),
    (2.0, 0.2, 1e-05, '0x1.cccccccccccccp0', 92, '0x1.ab5df1b20bd71p-1'),
    (2.0, 0.2, 1e-06, '0x1.cccccccccccccp0', 118, '0x1.ab5df1b20bd71p-1'),
]


@pytest.mark.parametrize("epsilon, search, delta, anonymization, k, beta", ARX_GRID)
def test_parameters_equal_arx(epsilon, search, delta, anonymization, k, beta):
    budget = anonymization_budget(epsilon, search)
    assert budget == float.fromhex(anonymization)
    derived = parameters(budget, delta)
    assert (derived.k, derived.beta) == (k, float.fromhex(beta))


def test_search_budget_is_rounded_down():
    # epsilon 1 minus 0.1 in ARX's interval arithmetic: the float below 0.9
    assert anonymization_budget(1.0, 0.1) == np.nextafter(1.0 - 0.1, 0.0)
    assert anonymization_budget(1.0, 0.0) == 1.0


def test_sample_keeps_each_record_with_probability_beta():
    counts = np.array([0, 1, 5, 20000])
    kept = sample_counts(counts, 0.25)
    assert kept[0] == 0 and 0 <= kept[1] <= 1 and 0 <= kept[2] <= 5
    # Binomial(20000, 0.25): mean 5000, sd 61.2; 6 sd either way fails once in 10^9 runs
    assert abs(kept[3] - 5000) < 6 * 61.3
    assert sample_counts(counts, 1.0).tolist() == counts.tolist()
    assert sample_counts(counts, 0.0).tolist() == [0, 0, 0, 0]


def test_samples_differ_between_calls():
    # no seed: two samples of 10,000 records coincide with probability 2^-10000
    counts = np.ones(10000, dtype=np.int64)
    assert sample_counts(counts, 0.5).tolist() != sample_counts(counts, 0.5).tolist()


def test_undecidable_comparison_is_refused_in_one_line():
    # delta as large as a_n's first values cannot be compared in interval arithmetic: never silently
    with pytest.raises(AnonymizeError, match="^the differential privacy parameters"):
        parameters(1e-300, 0.5)
