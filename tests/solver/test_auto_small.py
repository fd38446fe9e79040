"""`auto` on small tables sends them to `exact` first: its MILP (under the work budget) proves the
optimum, and that answer is published at once, without the portfolio's local and row-level
searches. The t = 0.4 tables here are 60 rows over 3 QIs (46 and 36 classes) whose optimum the
MILP proves (34 and 35 stars); the release is checked independently (support.checks)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import duckanon
import duckanon.solver as solver_module
import duckanon.solver.local as local_module
import duckanon.solver.topdown as topdown_module
from duckanon.solver import Histogram, KAnonymity, solve
from duckanon.solver.exact import _distinct_rows, prepare, solve_model
from duckanon.solver.greedy import greedy
from duckanon.solver.partition import STAR
from duckanon.solver.request import Request

from support.checks import check_published
from support.solver_checks import assert_valid

TABLES = {
    "arithmetic": ("SELECT i % 5 AS a, (i * 7) % 4 AS b, (i // 3) % 3 AS c, 's' || (i % 3) AS s FROM range(60) r(i)",
                   34),
    "hashed": ("SELECT hash(i, 1) % 5 AS a, hash(i, 2) % 4 AS b, hash(i, 3) % 3 AS c, 's' || (hash(i, 5) % 3) AS s "
               "FROM range(60) r(i)", 35),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_auto_publishes_the_proven_optimum_of_a_small_t_closeness_table(table):
    create, optimum = TABLES[table]
    with duckanon.connect() as con:
        con.execute(f"CREATE TABLE t AS {create}")
        con.execute("ANONYMIZE t WITH (t = 0.4, sensitive = s, qi = (a, b, c))")
        names = [column[0] for column in con.description]
        summary = dict(zip(names, con.fetchone()))
        details = json.loads(summary["details"])
        rows = con.execute("SELECT a, b, c, s FROM t_anon").fetchall()
        source = con.execute("SELECT s, count(*) FROM t GROUP BY s").fetchall()
    assert (summary["stars"], summary["optimal"], summary["lower_bound"]) == (optimum, True, optimum)
    assert summary["method"] == "exact" and details["milp_status"] == 0  # the MILP proved it
    assert "time_limit_cut" not in details
    stars, suppressed, problems = check_published(rows, [0, 1, 2], 3, t=0.4, total_sa=dict(source))
    assert problems == []
    assert (stars, suppressed) == (summary["stars"], summary["suppressed_rows"])


# Small wide tables (issue 40's "small tables got slow"): 100 random rows x 30 QIs took 23.8 s,
# 11.5 s of it building exact's model twice (exact-first built it, found it above its MILP's budget,
# and _prove built it again), most of that in np.unique's sort of 30-field rows.
def _random_wide(rows: int, m: int) -> Histogram:
    rng = np.random.default_rng(7)
    codes = np.stack([rng.integers(0, 2 + j % 25, rows) for j in range(m)], axis=1)
    return Histogram.from_rows([tuple(int(v) for v in row) for row in codes])


def test_distinct_rows_are_numpys_unique_rows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        rows = rng.integers(STAR, int(rng.integers(1, 7)), (int(rng.integers(0, 400)), int(rng.integers(1, 45))))
        assert np.array_equal(_distinct_rows(rows), np.unique(rows, axis=0))


def test_auto_builds_exacts_model_once_on_a_small_wide_table(monkeypatch):
    hist = _random_wide(100, 30)
    built = []
    real_prepare = solver_module.prepare
    monkeypatch.setattr(solver_module, "prepare", lambda *a, **k: built.append(1) or real_prepare(*a, **k))
    solution = solve(hist, [KAnonymity(5)])
    monkeypatch.undo()
    assert len(built) == 1
    assert_valid(hist, solution, [KAnonymity(5)])
    # the bound auto reports is the one exact proves on its own model under auto's budget
    model = prepare(hist, [KAnonymity(5)], max_pairs=solver_module.AUTO_EXACT_MAX_INT_VARS)
    assert model.n_int_vars > solver_module.AUTO_MILP_BUDGET.max_int_vars  # (so exact-first did not solve it)
    alone = solve_model(model, incumbent=solution, budget=solver_module.AUTO_MILP_BUDGET)
    assert solution.lower_bound == alone.lower_bound and solution.lower_bound < solution.stars


def test_pair_rebuild_stops_after_its_column_splits(monkeypatch):
    hist = _random_wide(300, 100)
    start = greedy(hist, 5)
    labels = local_module.class_groups(start, hist.n_classes)
    groups = [np.flatnonzero(labels == g) for g in np.unique(labels)]
    assert len(groups) <= local_module.PAIR_GROUP_LIMIT  # (so local_search would run it)
    counted = []
    real_split = topdown_module._split
    monkeypatch.setattr(topdown_module, "_split", lambda *a: counted.append(1) or real_split(*a))
    rebuilt = local_module.pair_rebuild(hist, groups, Request.of([KAnonymity(5)]))
    # it stops before the first pair after PAIR_REBUILD_SPLITS, so at most one top-down run of
    # two groups beyond it (a run splits each of its groups once per still-starred column)
    assert local_module.PAIR_REBUILD_SPLITS <= len(counted) < local_module.PAIR_REBUILD_SPLITS + 2_000
    # a partition of the classes into valid groups that costs no more than the start
    assert sorted(np.concatenate(rebuilt).tolist()) == list(range(hist.n_classes))
    # (greedy's start may leave a group below k, its rows suppressed: pair_rebuild may keep it)
    before = {tuple(sorted(g.tolist())) for g in groups}
    made = [g for g in rebuilt if tuple(sorted(g.tolist())) not in before]
    assert made and all(int(hist.sizes[g].sum()) >= 5 for g in made)
    assert sum(local_module._cost(hist, g) for g in rebuilt) < sum(local_module._cost(hist, g) for g in groups)
