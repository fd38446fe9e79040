"""What runs where: the default and thorough tiers, the number of examples a property-based test
draws in each, and the areas and tests that get the e2e and smoke markers (tests/conftest.py's
collection hook applies them)."""

from __future__ import annotations

import os

# Tests live by area: solver/, frontend/, pipeline/, macros/, e2e/, robustness/. The end-to-end
# areas (through SQL text, the shells, files and the SQL macros) run on DuckDB 1.5 as well in CI.
E2E_AREAS = {"e2e", "macros"}
# The e2e files whose subject is what the solvers answer (ARX's optima, the recoding's loss, the
# private sample, the risk and population models): they reach DuckDB through the same statements
# as every other e2e file, so CI runs them once, on the newest DuckDB, and its DuckDB 1.5 step
# leaves them out (marker `solver_results`; that step ran 434 s with them, over CI's budget).
SOLVER_RESULTS_E2E = {"e2e/test_arx_other_models.py", "e2e/test_hierarchical_recoding.py", "e2e/test_generalization.py",
                      "e2e/test_mondrian_loss.py", "e2e/test_private_release.py", "e2e/test_risk_models.py",
                      "e2e/test_population_target.py", "e2e/test_delta_presence_unreached.py",
                      "e2e/test_report_claims.py", "e2e/test_simplex_hierarchies.py"}
# What the README test's inner run (in the fresh venv it made) runs: `-m smoke` would change the
# README's command, so the environment variable below selects these instead.
SMOKE_TESTS = {"e2e/test_duckdb_versions.py", "e2e/test_examples.py::test_hospital_example"}
SMOKE_ONLY = "DUCKANON_SMOKE_ONLY"

# Two tiers. The default one is the README's command (what CI runs): it must finish within 15
# minutes on 2 cores at a load average of 4 (BENCHMARKS.md, "The test suite"). The thorough one,
# `DUCKANON_THOROUGH=1 python -m pytest -q -n auto`, adds the tests marked `slow` and runs every
# property-based test with THOROUGH_FACTOR times its examples: run it after changing a solver or a
# checker, and before a release. `-m slow` runs the slow tests alone (at the default examples).
THOROUGH = os.environ.get("DUCKANON_THOROUGH") == "1"
THOROUGH_FACTOR = 20


def examples(default: int) -> int:
    """The number of examples a property-based test draws in this tier (hypothesis' max_examples)."""
    return default * THOROUGH_FACTOR if THOROUGH else default
