"""ARX's TestAnonymizationSubset (arx-deidentifier/arx at aacd487f): privacy models over a research
subset marked by `Inclusion(DataSubset.create(30162, rows))`, whose rows ARX's test draws as
`new Random(0xDEADBEEF).nextInt(size)`, size times. Inclusion adds no constraint of its own: the
models hold on the subset's classes and the metric is over the subset, so duckanon publishes the
subset's rows (the table `sub`). QIs: every hierarchy file but the sensitive `occupation`, ARX's
monotonic entropy (createPrecomputedEntropyMetric(0.1, true), issue 37), no suppression.
The expected optima (value and levels) are the ones written in ARX's test file."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pytest

import duckanon

from support.data import SHARED
from support.java_random import ARX_SEED, JavaRandom

ADULT = SHARED / "adult"
SA_HIERARCHY = f"sa_hierarchy = '{ADULT}/adult_hierarchy_occupation.csv'"


def arx_subset(size: int) -> list[int]:
    """TestAnonymizationSubset.getSubset(size): the distinct draws of nextInt(size), size draws."""
    rng = JavaRandom(ARX_SEED)
    return sorted({rng.next_int(size) for _ in range(size)})


@pytest.fixture(scope="module")
def adult():
    with open(ADULT / "adult.csv", newline="") as f:
        header, *data = list(csv.reader(f, delimiter=";"))
    assert len(data) == 30162
    con = duckanon.connect()
    yield con, header, data
    con.close()


CASES = [  # options, subset size, ARX's optimum, ARX's levels (sex, age, race, marital-status,
    # education, native-country, workclass, salary-class)
    (f"k = 5, t = 0.2, t_distance = hierarchical, {SA_HIERARCHY}", 20000, 178437.4164900378, [1, 4, 1, 1, 3, 2, 2, 1]),
    ("k = 5", 10000, 70774.7774633781, [0, 4, 1, 1, 2, 2, 2, 0]),
    (f"t = 0.2, t_distance = hierarchical, {SA_HIERARCHY}", 30000, 250816.4033099704, [0, 4, 1, 1, 3, 2, 2, 1]),
    ("l = 5, l_variant = recursive, c = 4", 9000, 65996.221545847, [1, 2, 1, 1, 3, 2, 2, 1]),
]


def test_the_subsets_are_javas():
    """The draws are java.util.Random's: the sizes of the four subsets (distinct draws)."""
    assert [len(arx_subset(size)) for size in (20000, 10000, 30000, 9000)] == [12620, 6315, 19015, 5681]


@pytest.mark.parametrize("options, size, value, levels", CASES)
def test_arx_inclusion_optima_on_adult(adult, options, size, value, levels):
    con, header, data = adult
    chosen = arx_subset(size)
    con.register("subset_rows", pa.table({h: [data[i][j] for i in chosen] for j, h in enumerate(header)}))
    con.execute("CREATE OR REPLACE TABLE sub AS SELECT * FROM subset_rows")
    con.unregister("subset_rows")
    qi = [h for h in header if h != "occupation"]
    columns = ", ".join(f'"{c}"' for c in qi)
    cursor = con.execute(f"ANONYMIZE sub INTO release WITH ({options}, qi = ({columns}), sensitive = occupation, "
                         "method = lattice, suppression_limit = 0, metric = monotonic_entropy, "
                         f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv')")
    row = dict(zip([c[0] for c in cursor.description], cursor.fetchall()[0]))
    details = row["details"] if isinstance(row["details"], dict) else json.loads(row["details"])
    assert details["levels"] == levels and row["optimal"] is True
    assert details["metric_value"] == pytest.approx(value, rel=1e-12)
    # k holds on the published rows (every class of the subset at least 5 rows where k is given)
    if "k = 5" in options:
        smallest = con.execute(f"SELECT min(n) FROM (SELECT count(*) AS n FROM release GROUP BY {columns})").fetchall()[0]
        assert smallest[0] >= 5
