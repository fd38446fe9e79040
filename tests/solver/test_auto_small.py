"""`auto` on small tables sends them to `exact` first: its MILP (under the work budget) proves the
optimum, and that answer is published at once, without the portfolio's local and row-level
searches. The t = 0.4 tables here are 60 rows over 3 QIs (46 and 36 classes) whose optimum the
MILP proves (34 and 35 stars); the release is checked independently (support.checks)."""

from __future__ import annotations

import json

import pytest

import duckanon

from support.checks import check_published

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
