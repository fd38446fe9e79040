"""`method = 'simplex'` with hierarchies (issue 39, Blocki & Williams Thm 8) through ANONYMIZE: the
published cells are labels of their source values' hierarchy rows, the classes hold 2 rows or
more, and the summed cell loss and ARX's Loss are recomputed here from the published table and the
hierarchy files (a label's leaves among the file's rows)."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter

import pytest

import duckanon

from support.checks import check_table
from support.data import SHARED

ADULT = SHARED / "adult"
HIERARCHIES = f"{ADULT}/adult_hierarchy_{{column}}.csv"
QIS = ["sex", "age", "race"]


def q(name: str) -> str:
    return '"' + name + '"'


def hierarchy_rows(column: str) -> list[list[str]]:
    with open(str(ADULT / f"adult_hierarchy_{column}.csv"), encoding="utf-8") as f:
        return [row for row in csv.reader(f, delimiter=";") if row]


@pytest.fixture(scope="module")
def adult():
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT row_number() OVER () AS id, * FROM read_csv('{ADULT / 'adult.csv'}', "
                f"delim=';', all_varchar=true) LIMIT 100")
    yield con
    con.close()


def column_losses(con) -> list[float]:
    """Per QI the summed cell loss of table `out` (no rows are removed)."""
    published = con.execute(f"SELECT {', '.join(q(c) for c in QIS)} FROM out").fetchall()
    totals = []
    for j, column in enumerate(QIS):
        rows = hierarchy_rows(column)
        leaves = Counter(label for row in rows for label in set(row[1:]))
        values = {row[0] for row in rows}
        totals.append(sum(0.0 if r[j] in values else 1.0 if r[j] == "*" else (leaves[r[j]] - 1) / (len(rows) - 1)
                          for r in published))
    return totals


def test_simplex_publishes_the_hierarchies_labels_proven_for_the_summed_loss(adult):
    cursor = adult.execute(f"ANONYMIZE adult INTO out WITH (k = 2, qi = ({', '.join(q(c) for c in QIS)}), keep = (id), "
                           f"method = 'simplex', hierarchies = '{HIERARCHIES}')")
    result = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
    details = json.loads(result["details"])
    n = adult.execute("SELECT count(*) FROM adult").fetchone()[0]
    assert (result["method"], result["optimal"], result["published_rows"]) == ("simplex", True, n)
    assert result["optimal_for"] == ("the sum of the cells' loss among 2-anonymous recodings to the given "
                                     "hierarchies' labels with no rows removed")
    published = adult.execute(f"SELECT o.id, {', '.join('o.' + q(c) for c in QIS)}, {', '.join('a.' + q(c) for c in QIS)} "
                              f"FROM out o JOIN adult a USING (id)").fetchall()
    for j, column in enumerate(QIS):
        row_of = {row[0]: row for row in hierarchy_rows(column)}
        assert all(record[1 + j] in row_of[record[1 + len(QIS) + j]] for record in published), column
    assert check_table(adult, "out", "adult", QIS, None, k=2) == []
    totals = column_losses(adult)
    assert details["cell_loss_sum"] == pytest.approx(sum(totals), abs=1e-6)
    assert details["cell_loss_bound"] == pytest.approx(sum(totals), abs=1e-6)
    assert details["loss"] == pytest.approx(math.prod((1 + t / n) ** (1 / len(QIS)) for t in totals) - 1, abs=1e-9)


def test_simplex_with_hierarchies_removes_no_rows(adult):
    with pytest.raises(duckanon.AnonymizeError) as refused:
        adult.execute(f"ANONYMIZE adult INTO out2 WITH (k = 2, qi = (sex, age), method = 'simplex', "
                      f"hierarchies = '{HIERARCHIES}', suppression_limit = 0.05)")
    assert str(refused.value) == ("method simplex with hierarchies removes no rows: suppression_limit must be 0, "
                                  "not 0.05")
    assert adult.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'out2'").fetchone()[0] == 0
