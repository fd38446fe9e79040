"""Tests for duckanon/solver/emd.py and sql/t_hierarchical.sql (Earth Mover's Distance).

References: the transportation LP (`emd_lp`, HiGHS), an independent literal implementation of Li
et al.'s node formula (`li_formula` below), and hand computations in the comments.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

import duckanon
import duckanon.solver.emd as emd_module
from duckanon.errors import AnonymizeError
from duckanon.hierarchy import read_sa_hierarchy
from duckanon.solver.emd import (
    SAHierarchy,
    emd_custom,
    emd_equal,
    emd_hierarchical,
    emd_lp,
    emd_ordered,
    ground_distance_matrix,
)
from duckanon.hierarchy import write_hierarchy_table

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
OCCUPATION = SHARED / "adult" / "adult_hierarchy_occupation.csv"
HOSPITAL = SHARED / "hospital.csv"
TOL = 1e-9


def sa_hierarchy(path) -> SAHierarchy:
    """An ARX file's tree, read as the engine reads the option sa_hierarchy."""
    return SAHierarchy.from_rows(read_sa_hierarchy(duckdb.connect(), str(path)), source=str(path))


def random_distributions(rng, n_rows, n_values, zero_share=0.3):
    """Rows of integer counts (some zero, as in real classes) divided by their sums."""
    counts = rng.integers(0, 6, size=(n_rows, n_values)) * (rng.random((n_rows, n_values)) > zero_share)
    counts[counts.sum(axis=1) == 0, 0] = 1
    return counts / counts.sum(axis=1, keepdims=True)


def li_formula(p_row, q, values, hierarchy: SAHierarchy) -> float:
    """Li et al. 2007 Sec. 4.2 literally: sum over internal nodes N of
    height(N)/H * min(pos_extra(N), neg_extra(N)), node height = its level."""
    height = hierarchy.height
    if height == 0:
        return 0.0
    extra_of_leaf = {leaf: 0.0 for leaf in hierarchy.paths}
    for value, pi, qi in zip(values, p_row, q):
        extra_of_leaf[value] += pi - qi

    def path(leaf):  # node keys at levels 0..height, the implicit root last when there is one
        labels = (leaf, *hierarchy.paths[leaf])
        if height == len(labels):
            labels = (*labels, "<implicit root>")
        return [(level, label) for level, label in enumerate(labels)]

    extra, children = {}, {}
    for leaf, value in extra_of_leaf.items():
        nodes = path(leaf)
        for node in nodes:
            extra[node] = extra.get(node, 0.0) + value
        for child, parent in zip(nodes, nodes[1:]):
            children.setdefault(parent, set()).add(child)
    total = 0.0
    for (level, _), kids in children.items():
        pos = sum(extra[c] for c in kids if extra[c] > 0)
        neg = sum(-extra[c] for c in kids if extra[c] < 0)
        total += level / height * min(pos, neg)
    return total


# ------------------------------------------------------------------------------------------------
# Closed forms against the LP


@pytest.mark.parametrize("n_values", range(1, 13))
def test_equal_and_ordered_match_lp(n_values):
    rng = np.random.default_rng(n_values)
    p = random_distributions(rng, 6, n_values)
    q = random_distributions(rng, 1, n_values)[0]
    for kind, closed in (("equal", emd_equal), ("ordered", emd_ordered)):
        lp = emd_custom(p, q, ground_distance_matrix(kind, n_values))
        np.testing.assert_allclose(closed(p, q), lp, atol=TOL, rtol=0)


def test_closed_forms_on_identical_and_disjoint_distributions():
    q = np.array([0.5, 0.5, 0.0])
    assert emd_equal(q, q)[0] == 0 and emd_ordered(q, q)[0] == 0
    far = np.array([[0.0, 0.0, 1.0]])
    assert emd_equal(far, q)[0] == pytest.approx(1.0)
    # ordered: half the mass moves 2 steps, half 1 step, each step 1/2: (0.5*2 + 0.5*1)/2 = 0.75
    assert emd_ordered(far, q)[0] == pytest.approx(0.75)
    assert emd_ordered(np.ones((3, 1)), np.ones(1)).tolist() == [0.0, 0.0, 0.0]


def random_hierarchy_rows(rng, n_leaves, n_levels, several_tops=False):
    """ARX-style rows: each level groups the level below into a few nodes; some nodes repeat
    their child's label one level up (single-child chains); labels carry the level so a label
    never names two nodes by accident."""
    rows = [[f"v{i}"] for i in range(n_leaves)]
    current = list(range(n_leaves))  # node index per leaf at the current level
    for level in range(1, n_levels):
        n_nodes = len(set(current))
        n_parents = max(1, n_nodes // 2) if level < n_levels - 1 or several_tops else 1
        parent = {node: int(rng.integers(0, n_parents)) for node in sorted(set(current))}
        chain = n_nodes > 1 and rng.random() < 0.3  # this level repeats the previous labels
        for row, node in zip(rows, current):
            row.append(row[-1] if chain else f"L{level}n{parent[node]}")
        if not chain:
            current = [parent[node] for node in current]
    if not several_tops and n_levels > 1:
        for row in rows:
            row[-1] = "*"
    return rows


@pytest.mark.parametrize("seed", range(30))
def test_hierarchical_matches_lp_and_li_formula_on_random_trees(seed):
    rng = np.random.default_rng(100 + seed)
    n_leaves = int(rng.integers(1, 12))
    rows = random_hierarchy_rows(rng, n_leaves, int(rng.integers(1, 5)), several_tops=seed % 4 == 0)
    hierarchy = SAHierarchy.from_rows(rows)
    # bind to a random subset of the leaves, in a random order (codes need not follow the tree)
    values = list(rng.permutation([row[0] for row in rows])[: int(rng.integers(1, n_leaves + 1))])
    index = hierarchy.for_values(values)
    p = random_distributions(rng, 5, len(values))
    q = random_distributions(rng, 1, len(values))[0]
    got = emd_hierarchical(p, q, index)
    lp = emd_custom(p, q, ground_distance_matrix("hierarchical", len(values), index))
    li = [li_formula(row, q, values, hierarchy) for row in p]
    np.testing.assert_allclose(got, lp, atol=TOL, rtol=0)
    np.testing.assert_allclose(got, li, atol=TOL, rtol=0)


def test_hierarchical_on_adult_occupation_matches_lp():
    hierarchy = sa_hierarchy(OCCUPATION)
    assert hierarchy.height == 2 and len(hierarchy.paths) == 14
    values = sorted(hierarchy.paths)  # SA codes in sorted order, as a GROUP BY would give
    index = hierarchy.for_values(values)
    distance = ground_distance_matrix("hierarchical", len(values), index)
    code = {v: i for i, v in enumerate(values)}
    # Tech-support and Craft-repair are both Technical (LCA at level 1 of 2); Sales is not.
    assert distance[code["Tech-support"], code["Craft-repair"]] == 0.5
    assert distance[code["Tech-support"], code["Sales"]] == 1.0
    rng = np.random.default_rng(7)
    p = random_distributions(rng, 40, len(values))
    q = random_distributions(rng, 1, len(values))[0]
    np.testing.assert_allclose(emd_hierarchical(p, q, index), emd_custom(p, q, distance), atol=TOL, rtol=0)
    # everything on Tech-support, table uniform: 13/14 mass leaves Tech-support; the 3/14 to
    # the other Technical jobs (Craft-repair, Prof-specialty, Machine-op-inspct) costs 1/2,
    # the other 10/14 costs 1: (3/2 + 10) / 14 = 23/28.
    only_tech = np.zeros(14)
    only_tech[code["Tech-support"]] = 1
    assert emd_hierarchical(only_tech, np.full(14, 1 / 14), index)[0] == pytest.approx(23 / 28, abs=TOL)


SMALL_SHARED_HIERARCHIES = sorted(
    path for path in SHARED.glob("*/*_hierarchy_*.csv") if sum(1 for _ in open(path, "rb")) <= 100
)


@pytest.mark.parametrize("path", SMALL_SHARED_HIERARCHIES, ids=lambda path: path.name)
def test_hierarchical_matches_lp_on_shared_hierarchy_files(path):
    hierarchy = sa_hierarchy(path)
    values = sorted(hierarchy.paths)
    index = hierarchy.for_values(values)
    rng = np.random.default_rng(len(values))
    p = random_distributions(rng, 3, len(values), zero_share=0.8)
    q = random_distributions(rng, 1, len(values))[0]
    distance = ground_distance_matrix("hierarchical", len(values), index)
    np.testing.assert_allclose(emd_hierarchical(p, q, index), emd_custom(p, q, distance), atol=TOL, rtol=0)


def test_single_child_levels_count_in_the_height():
    # FARS death month: "Unkown;99;99;*" repeats 99 on levels 1 and 2: a node with one child.
    hierarchy = sa_hierarchy(SHARED / "fars" / "fars_hierarchy_ideathmon.csv")
    assert hierarchy.height == 3  # 4 columns, one root
    values = ["January", "February", "April", "Unkown"]
    index = hierarchy.for_values(values)
    distance = ground_distance_matrix("hierarchical", 4, index)
    # January/February share 0-3 (level 1), January/April share 0-6 (level 2), Unkown only '*'
    assert distance[0].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert distance[3, 1] == 1
    q = np.full(4, 0.25)
    # all mass on Unkown: 3/4 moves at distance 1
    assert emd_hierarchical(np.array([0, 0, 0, 1.0]), q, index)[0] == pytest.approx(0.75)
    # all on January: 1/4 to February at 1/3, 1/4 to April at 2/3, 1/4 to Unkown at 1 -> 1/2
    assert emd_hierarchical(np.array([1.0, 0, 0, 0]), q, index)[0] == pytest.approx(0.5)


def test_several_top_labels_get_an_implicit_root():
    hierarchy = SAHierarchy.from_rows([["a", "x"], ["b", "x"], ["c", "y"]])
    assert hierarchy.height == 2  # 2 columns + the implicit root above x and y
    index = hierarchy.for_values(["a", "b", "c"])
    assert ground_distance_matrix("hierarchical", 3, index).tolist() == [[0, 0.5, 1], [0.5, 0, 1], [1, 1, 0]]


def test_leaves_only_hierarchy_is_the_equal_distance():
    hierarchy = SAHierarchy.from_rows([["a"], ["b"], ["c"]])
    index = hierarchy.for_values(["c", "a", "b"])
    rng = np.random.default_rng(3)
    p, q = random_distributions(rng, 10, 3), random_distributions(rng, 1, 3)[0]
    np.testing.assert_allclose(emd_hierarchical(p, q, index), emd_equal(p, q), atol=TOL, rtol=0)
    single = SAHierarchy.from_rows([["a", "*"]]).for_values(["a"])
    assert emd_hierarchical(np.ones((2, 1)), np.ones(1), single).tolist() == [0.0, 0.0]


def test_binding_to_a_subset_keeps_the_distances():
    hierarchy = sa_hierarchy(SHARED / "adult" / "adult_hierarchy_education.csv")
    everything = sorted(hierarchy.paths)
    full = ground_distance_matrix("hierarchical", len(everything), hierarchy.for_values(everything))
    subset = ["Masters", "Bachelors", "9th", "Doctorate"]
    at = [everything.index(v) for v in subset]
    sub = ground_distance_matrix("hierarchical", 4, hierarchy.for_values(subset))
    np.testing.assert_array_equal(sub, full[np.ix_(at, at)])


def test_vectorised_blocks_agree_with_one_block(monkeypatch):
    hierarchy = sa_hierarchy(SHARED / "adult" / "adult_hierarchy_native-country.csv")
    values = sorted(hierarchy.paths)
    index = hierarchy.for_values(values)
    rng = np.random.default_rng(11)
    p = random_distributions(rng, 1000, len(values))
    q = random_distributions(rng, 1, len(values))[0]
    whole = [f(p, q) for f in (emd_equal, emd_ordered)] + [emd_hierarchical(p, q, index)]
    monkeypatch.setattr(emd_module, "_BLOCK_ROWS", 7)
    blocked = [f(p, q) for f in (emd_equal, emd_ordered)] + [emd_hierarchical(p, q, index)]
    for a, b in zip(whole, blocked):
        np.testing.assert_allclose(a, b, atol=1e-15, rtol=0)
    assert emd_hierarchical(p, q, index).shape == (1000,)


# ------------------------------------------------------------------------------------------------
# Examples from the papers


def test_liang_yuan_four_point_metric():
    # Liang & Yuan 2012, proof of Theorem 7: d(1,2) = d(1,3) = d(2,3) = 1, d(4, .) = 1/2, and
    # formula (5): with a4 >= b4, EMD(A, B) = 1/2 (a4 - b4) + sum_{i<=3, a_i >= b_i} (a_i - b_i).
    distance = np.array(
        [[0, 1, 1, 0.5], [1, 0, 1, 0.5], [1, 1, 0, 0.5], [0.5, 0.5, 0.5, 0]], dtype=float
    )
    t = 0.4
    table = np.array([(1 - 2 * t) / 3] * 3 + [2 * t])  # P(T) = (1/15, 1/15, 1/15, 4/5)
    triple = np.array([1 / 3, 1 / 3, 1 / 3, 0])  # a group of three old rows
    # (5) with A = P(T), B = triple: 1/2 * 4/5 + 0 = 2/5 = t (each 1/3 - 1/15 = 4/15 comes
    # from point 4 at distance 1/2); the equal distance would charge 1/2 * (3 * 4/15 + 4/5) = 4/5.
    assert emd_lp(triple, table, distance) == pytest.approx(t, abs=TOL)
    assert emd_equal(triple, table)[0] == pytest.approx(0.8, abs=TOL)
    # a single new row (0, 0, 0, 1): (5) gives 1/2 * (1 - 4/5) = 1/10 (equal distance: 1/5)
    assert emd_lp(np.array([0, 0, 0, 1.0]), table, distance) == pytest.approx(0.1, abs=TOL)
    # two old rows B = (1/2, 1/2, 0, 0): (5) with A = P(T) (a4 = 4/5 >= b4 = 0) gives
    # 1/2 * 4/5 + (1/15 - 0) [only i = 3 has a_i >= b_i] = 7/15 > t, as the proof says
    assert emd_lp(np.array([0.5, 0.5, 0, 0]), table, distance) == pytest.approx(7 / 15, abs=TOL)
    # formula (5) on random pairs, both orientations
    rng = np.random.default_rng(5)
    for a, b in zip(random_distributions(rng, 20, 4), random_distributions(rng, 20, 4)):
        big, small = (a, b) if a[3] >= b[3] else (b, a)
        formula = 0.5 * (big[3] - small[3]) + sum(max(big[i] - small[i], 0) for i in range(3))
        assert emd_lp(a, b, distance) == pytest.approx(formula, abs=TOL)


def test_li_et_al_ordered_salary_example():
    # Li, Li & Venkatasubramanian 2007: salaries 3k..11k, one record each, Q uniform over 9.
    q = np.full(9, 1 / 9)
    p1 = np.zeros(9)
    p1[[0, 1, 2]] = 1 / 3  # {3k, 4k, 5k}: prefix imbalances 2,4,6,5,4,3,2,1 (/9), sum 27/9;
    p2 = np.zeros(9)  # EMD = (27/9) / 8 = 0.375
    p2[[3, 5, 8]] = 1 / 3  # {6k, 8k, 11k}: |prefix| 1,2,3,1,2,0,1,2 (/9), sum 12/9 -> 1/6
    assert emd_ordered(np.vstack([p1, p2]), q) == pytest.approx([0.375, 1 / 6], abs=TOL)
    assert emd_lp(p1, q, ground_distance_matrix("ordered", 9)) == pytest.approx(0.375, abs=TOL)
    assert emd_lp(p2, q, ground_distance_matrix("ordered", 9)) == pytest.approx(1 / 6, abs=TOL)


# The disease hierarchy of Li et al.'s Figure (as we reconstruct it: 10 leaves, height 3).
DISEASE_ROWS = [
    [leaf, group, system, "*"]
    for system, groups in {
        "respiratory system diseases": {
            "respiratory infection": ["flu", "pneumonia", "bronchitis"],
            "vascular lung diseases": ["pulmonary edema", "pulmonary embolism"],
        },
        "digestive system diseases": {
            "stomach diseases": ["gastric ulcer", "gastritis", "stomach cancer"],
            "colon diseases": ["colitis", "colon cancer"],
        },
    }.items()
    for group, leaves in groups.items()
    for leaf in leaves
]
# Their Table 3: the disease column of the 9 records.
DISEASE_TABLE = ["gastric ulcer", "gastritis", "stomach cancer", "gastritis", "flu", "bronchitis",
                 "bronchitis", "pneumonia", "stomach cancer"]


def test_li_et_al_hierarchical_disease_example():
    # The paper prints 0.5 for {gastric ulcer, gastritis, stomach cancer} and 0.278 for
    # {gastric ulcer, stomach cancer, pneumonia}; we could not reproduce them from the tree above
    # and Table 3, so these are our own hand derivations (confirmed by the LP below).
    # Q = (gastric ulcer 1, gastritis 2, stomach cancer 2, flu 1, bronchitis 2, pneumonia 1) / 9.
    # {GU, Gt, SC}: all mass is digestive, Q has 4/9 respiratory; only the root has both signs:
    #   EMD = 3/3 * 4/9 = 4/9 (and 0.5 is impossible: nothing else must move).
    # {GU, SC, Pn}: stomach node: children +2/9, -2/9, +1/9 -> 1/3 * 2/9; respiratory infection:
    #   flu -1/9, bronchitis -2/9, pneumonia +2/9 -> 1/3 * 2/9; root: +1/9 / -1/9 -> 1 * 1/9;
    #   EMD = 2/27 + 2/27 + 3/27 = 7/27 ~ 0.259.
    # {Gt, flu, Br}: stomach: -1/9, +1/9, -2/9 -> 1/3 * 1/9; respiratory infection: +2/9, +1/9,
    #   -1/9 -> 1/3 * 1/9; root: 2/9 -> 1 * 2/9; EMD = 1/27 + 1/27 + 6/27 = 8/27 ~ 0.296.
    hierarchy = SAHierarchy.from_rows(DISEASE_ROWS)
    assert hierarchy.height == 3
    values = sorted(set(DISEASE_TABLE))
    index = hierarchy.for_values(values)
    q = np.array([DISEASE_TABLE.count(v) for v in values]) / 9

    def group(*diseases):
        return np.array([diseases.count(v) for v in values]) / len(diseases)

    p = np.vstack([
        group("gastric ulcer", "gastritis", "stomach cancer"),
        group("gastric ulcer", "stomach cancer", "pneumonia"),
        group("gastritis", "flu", "bronchitis"),
    ])
    expected = [4 / 9, 7 / 27, 8 / 27]
    assert emd_hierarchical(p, q, index) == pytest.approx(expected, abs=TOL)
    distance = ground_distance_matrix("hierarchical", len(values), index)
    assert emd_custom(p, q, distance) == pytest.approx(expected, abs=TOL)
    # the paper's example distances: flu-bronchitis 1/3, flu-stomach cancer 1
    code = {v: i for i, v in enumerate(values)}
    assert distance[code["flu"], code["bronchitis"]] == pytest.approx(1 / 3)
    assert distance[code["flu"], code["stomach cancer"]] == 1
    # and the paper's pulmonary embolism example on the full tree: flu-pulmonary embolism 2/3
    full = sorted(hierarchy.paths)
    full_distance = ground_distance_matrix("hierarchical", len(full), hierarchy.for_values(full))
    assert full_distance[full.index("flu"), full.index("pulmonary embolism")] == pytest.approx(2 / 3)


# ------------------------------------------------------------------------------------------------
# SAHierarchy errors and parsing


def test_csv_with_crlf_quotes_and_bom(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes('\ufeff"a;1";A;*\r\nb;A;*\r\n"c ""q""";"B";*\r\n\r\n'.encode("utf-8"))
    hierarchy = sa_hierarchy(path)
    assert hierarchy.paths == {"a;1": ("A", "*"), "b": ("A", "*"), 'c "q"': ("B", "*")}
    assert hierarchy.height == 2


def test_repeated_identical_rows_are_accepted():
    hierarchy = SAHierarchy.from_rows([["a", "x", "*"], ["a", "x", "*"], ["b", "x", "*"]])
    assert sorted(hierarchy.paths) == ["a", "b"]


def test_value_missing_from_hierarchy():
    hierarchy = sa_hierarchy(OCCUPATION)
    with pytest.raises(AnonymizeError, match=r"^hierarchy .* has no leaf for 1 sensitive value\(s\) \(values are matched exactly as text\)$"):
        hierarchy.for_values(["Sales", "Astronaut"])


def test_rows_of_different_lengths():
    with pytest.raises(AnonymizeError, match="different numbers of levels"):
        SAHierarchy.from_rows([["a", "x", "*"], ["b", "*"]])


@pytest.mark.parametrize(
    "rows, problem",
    [
        ([["a", "x", "*"], ["b", "x", "*"], ["a", "y", "*"]], "rows 1 and 3 give the same value different parents at level 1"),
        ([["a", "x", "r"], ["b", "x", "s"], ["c", "y", "s"]], "rows 1 and 2 give the same node at level 1 different parents at level 2"),
    ],
)
def test_not_a_tree(rows, problem):
    with pytest.raises(AnonymizeError, match="not a tree") as error:
        SAHierarchy.from_rows(rows)
    assert problem in str(error.value)
    assert not any(f"'{label}'" in str(error.value) for row in rows for label in row)  # no label quoted


def test_empty_hierarchy():
    with pytest.raises(AnonymizeError, match="empty"):
        SAHierarchy.from_rows([])


def test_null_sensitive_value():
    hierarchy = SAHierarchy.from_rows([["a", "*"], ["b", "*"], ["(null)", "*"]])
    with pytest.raises(AnonymizeError, match="NULL values .* null_label"):
        hierarchy.for_values(["a", None])
    index = hierarchy.for_values(["a", None], null_label="(null)")
    assert ground_distance_matrix("hierarchical", 2, index).tolist() == [[0, 1], [1, 0]]
    with pytest.raises(AnonymizeError, match="appears twice"):
        hierarchy.for_values(["(null)", None], null_label="(null)")


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown ground distance"):
        ground_distance_matrix("manhattan", 3)
    with pytest.raises(ValueError, match="same total mass"):
        emd_lp(np.array([0.5, 0.4]), np.array([0.5, 0.5]), ground_distance_matrix("equal", 2))
    with pytest.raises(ValueError, match="p must be"):
        emd_equal(np.ones((2, 3)) / 3, np.ones(2) / 2)
    index = sa_hierarchy(OCCUPATION).for_values(["Sales", "Tech-support"])
    with pytest.raises(ValueError, match="bound to 2 values"):
        emd_hierarchical(np.ones((1, 3)) / 3, np.ones(3) / 3, index)


# ------------------------------------------------------------------------------------------------
# SQL: anon_t_hierarchical


@pytest.fixture
def con():
    connection = duckanon.connect()
    yield connection
    connection.close()


def python_t(con, table, qi, sa, hierarchy, null_label=None):
    """Reference for anon_t_hierarchical: class histogram from DuckDB, EMD from emd.py."""
    keys = ", ".join(f'"{c}"' for c in qi)
    rows = con.execute(f'SELECT row({keys}), "{sa}"::VARCHAR, count(*) FROM {table} GROUP BY ALL').fetchall()
    values = sorted({r[1] for r in rows}, key=lambda v: (v is None, v))
    classes = sorted({r[0] for r in rows}, key=repr)
    counts = np.zeros((len(classes), len(values)))
    for cls, value, n in rows:
        counts[classes.index(cls), values.index(value)] += n
    p = counts / counts.sum(axis=1, keepdims=True)
    q = counts.sum(axis=0) / counts.sum()
    return emd_hierarchical(p, q, hierarchy.for_values(values, null_label=null_label)).max()


def t_sql(con, table, qi, sa, hierarchy_table):
    return con.execute(
        "SELECT t_hierarchical FROM anon_t_hierarchical(?, ?, ?, ?)", [table, qi, sa, hierarchy_table]
    ).fetchone()[0]


def test_sql_small_table_by_hand(con):
    hierarchy = SAHierarchy.from_rows(DISEASE_ROWS)
    write_hierarchy_table(con, hierarchy, "disease_h")
    # Li et al.'s Table 3 in three classes of three (same table distribution Q as above):
    # {GU, Gt, SC} -> 4/9 and {Gt, flu, Br} -> 8/27 (derived above); {Br, Pn, SC}: stomach
    # -1/9, -2/9, +1/9 -> 1/27, respiratory infection -1/9, +1/9, +2/9 -> 1/27, root 2/9 -> 6/27:
    # 8/27. The max is 4/9.
    groups = [["gastric ulcer", "gastritis", "stomach cancer"], ["gastritis", "flu", "bronchitis"],
              ["bronchitis", "pneumonia", "stomach cancer"]]
    con.execute("CREATE TABLE li (g INTEGER, disease VARCHAR, one INTEGER)")
    con.executemany("INSERT INTO li VALUES (?, ?, 1)", [[g, d] for g, ds in enumerate(groups) for d in ds])
    assert t_sql(con, "li", ["g"], "disease", "disease_h") == pytest.approx(4 / 9, abs=1e-12)
    con.execute("DELETE FROM li WHERE g = 0 AND disease = 'gastric ulcer'")
    assert t_sql(con, "li", ["g"], "disease", "disease_h") == pytest.approx(
        python_t(con, "li", ["g"], "disease", hierarchy), abs=TOL)
    # one class = the whole table: exactly 0
    assert t_sql(con, "li", ["one"], "disease", "disease_h") == 0.0


@pytest.mark.parametrize("qi", [["zipcode"], ["age"], ["education"], ["zipcode", "age", "education"]])
def test_sql_hospital(con, qi):
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    hierarchy = SAHierarchy.from_rows(
        [["Viral Infection", "Infectious", "*"], ["Heart Disease", "Chronic", "*"], ["Cancer", "Chronic", "*"]]
    )
    write_hierarchy_table(con, hierarchy, "disease_h")
    got = t_sql(con, "hospital", qi, "disease", "disease_h")
    assert got == pytest.approx(python_t(con, "hospital", qi, "disease", hierarchy), abs=TOL)
    if qi == ["education"]:
        # Bachelor: 3 viral, 1 heart, 2 cancer (of 6); table 3/3/4 (of 10). Level 0:
        # TV = 1/2 (|1/2 - 3/10| + |1/6 - 3/10| + |1/3 - 4/10|) = 1/5; level 1: Infectious
        # 1/2 vs 3/10 -> 1/5. EMD = (1/5 + 1/5) / 2 = 1/5. Master (heart, cancer): level 0
        # 1/2 (3/10 + 1/5 + 1/10) = 3/10, level 1: 3/10, EMD 3/10. Doctorate (heart, cancer): 3/10.
        assert got == pytest.approx(0.3, abs=1e-12)


def test_sql_adult_and_implicit_root_and_single_child_levels(con):
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim = ';')")
    occupation = sa_hierarchy(OCCUPATION)
    write_hierarchy_table(con, occupation, "occupation_h")
    for qi in (["sex", "race"], ["education"], ["age", "sex"]):
        assert t_sql(con, "adult", qi, "occupation", "occupation_h") == pytest.approx(
            python_t(con, "adult", qi, "occupation", occupation), abs=TOL)
    # several top labels (implicit root) and labels repeated on the next level
    tops = SAHierarchy.from_rows(
        [[v, "Technical" if v in ("Tech-support", "Craft-repair") else "Sales" if v == "Sales" else "Other",
          "Money" if v == "Sales" else "Other"] for v in occupation.paths]
    )
    assert tops.height == 3
    write_hierarchy_table(con, tops, "tops_h")
    assert t_sql(con, "adult", ["race"], "occupation", "tops_h") == pytest.approx(
        python_t(con, "adult", ["race"], "occupation", tops), abs=TOL)


def test_sql_random_tables_against_python(con):
    rng = np.random.default_rng(21)
    for trial in range(8):
        rows = random_hierarchy_rows(rng, int(rng.integers(2, 10)), int(rng.integers(1, 5)), trial % 3 == 0)
        hierarchy = SAHierarchy.from_rows(rows)
        write_hierarchy_table(con, hierarchy, "h")
        leaves = [row[0] for row in rows]
        n = int(rng.integers(5, 60))
        data = [[int(rng.integers(0, 4)), int(rng.integers(0, 2)), str(rng.choice(leaves))] for _ in range(n)]
        con.execute("CREATE OR REPLACE TABLE r (a INTEGER, b INTEGER, s VARCHAR)")
        con.executemany("INSERT INTO r VALUES (?, ?, ?)", data)
        assert t_sql(con, "r", ["a", "b"], "s", "h") == pytest.approx(
            python_t(con, "r", ["a", "b"], "s", hierarchy), abs=TOL)


def test_sql_plain_loader_from_the_header_comment(con):
    path = SHARED / "fars" / "fars_hierarchy_ideathmon.csv"  # CRLF, single-child levels
    con.execute(f"""
        CREATE TABLE month_h AS
        SELECT value, CAST(replace(name, 'column', '') AS INTEGER) AS level, node
        FROM (UNPIVOT (SELECT column0 AS value, * FROM read_csv('{path}',
                       delim = ';', header = false, all_varchar = true, quote = '"'))
              ON COLUMNS(* EXCLUDE (value)) INTO NAME name VALUE node)""")
    write_hierarchy_table(con, sa_hierarchy(path), "month_h2")
    assert sorted(con.execute("SELECT * FROM month_h").fetchall()) == sorted(
        con.execute("SELECT * FROM month_h2").fetchall())
    assert con.execute("SELECT height FROM anon_hierarchy_check('month_h')").fetchone()[0] == 3


def test_sql_null_sensitive_value(con):
    hierarchy = SAHierarchy.from_rows([["a", "x", "*"], ["b", "x", "*"], ["(null)", "y", "*"]])
    con.execute("CREATE TABLE n (g INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO n VALUES (?, ?)", [[0, "a"], [0, None], [1, "b"], [1, "b"], [2, None]])
    write_hierarchy_table(con, hierarchy, "no_null_h")
    with pytest.raises(duckdb.Error, match="no leaf for sensitive value.*NULL"):
        t_sql(con, "n", ["g"], "s", "no_null_h")
    write_hierarchy_table(con, hierarchy, "null_h", null_label="(null)")
    assert t_sql(con, "n", ["g"], "s", "null_h") == pytest.approx(
        python_t(con, "n", ["g"], "s", hierarchy, null_label="(null)"), abs=TOL)


def test_sql_errors(con):
    con.execute("CREATE TABLE t (g INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [[0, "a"], [1, "b"], [1, "zz"]])
    write_hierarchy_table(con, SAHierarchy.from_rows([["a", "x", "*"], ["b", "x", "*"]]), "h")
    with pytest.raises(duckdb.Error, match="hierarchy h has no leaf for sensitive value.*zz"):
        t_sql(con, "t", ["g"], "s", "h")
    con.execute("DELETE FROM t WHERE s = 'zz'")
    assert t_sql(con, "t", ["g"], "s", "h") == pytest.approx(0.25)  # level 0: 1/2, level 1: 0
    con.execute("INSERT INTO h VALUES ('a', 1, 'other')")
    with pytest.raises(duckdb.Error, match="not a tree: value a has two nodes at level 1"):
        t_sql(con, "t", ["g"], "s", "h")
    con.execute("DELETE FROM h WHERE node = 'other'")
    con.execute("INSERT INTO h VALUES ('c', 0, 'c'), ('c', 1, 'x'), ('c', 2, 'elsewhere')")
    with pytest.raises(duckdb.Error, match="not a tree: node x at level 1 has two parents"):
        t_sql(con, "t", ["g"], "s", "h")
    con.execute("DELETE FROM h WHERE value = 'c' AND level = 2")
    with pytest.raises(duckdb.Error, match="value c has no node on some of the levels"):
        t_sql(con, "t", ["g"], "s", "h")
    con.execute("DELETE FROM h WHERE value = 'c'")
    con.execute("DELETE FROM t")
    assert t_sql(con, "t", ["g"], "s", "h") is None  # empty table
    with pytest.raises(duckdb.Error, match="no column named nope"):
        t_sql(con, "t", ["g", "nope"], "s", "h")
