"""Earth Mover's Distance (EMD) for t-closeness, vectorised over groups.

t-closeness (Li, Li & Venkatasubramanian 2007) asks that every group's sensitive-attribute (SA)
distribution p be within EMD t of the whole table's distribution q. The EMD is the optimum of
the transportation LP

    min sum_ij D_ij f_ij   s.t.   sum_j f_ij = p_i,   sum_i f_ij = q_j,   f >= 0

for a ground distance D between SA values. Three ground distances have closed forms, computed
here for G groups at once (p is (G, S), q is (S,), SA values indexed 0..S-1 in SA-code order):

- `emd_equal`: every two distinct values at distance 1;
- `emd_ordered`: values 0..S-1 on a line, distance |i - j| / (S - 1);
- `emd_hierarchical`: distance = level of the lowest common ancestor / tree height, over an
  `SAHierarchy` (ARX CSV format) bound to the table's values with `SAHierarchy.for_values`.

`emd_lp` / `emd_custom` solve the LP itself (HiGHS) for any other D; the tests use them as the
reference for the closed forms. `duckanon.hierarchy.write_hierarchy_table` stores a tree in the
database for the SQL check `anon_t_hierarchical` (sql/t_hierarchical.sql).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from duckanon.errors import AnonymizeError

# Rows of p handled at once: keeps the (block, S) temporaries small when G is 100k and S a few
# hundred (one full-size float copy would be ~240 MB).
_BLOCK_ROWS = 4096


def _as_inputs(p, q) -> tuple[np.ndarray, np.ndarray]:
    p = np.atleast_2d(np.asarray(p, dtype=float))
    q = np.asarray(q, dtype=float)
    if q.ndim != 1 or p.shape[1] != q.shape[0]:
        raise ValueError(f"p must be (G, S) and q (S,), got {p.shape} and {q.shape}")
    return p, q


def _by_blocks(per_block, p, q) -> np.ndarray:
    p, q = _as_inputs(p, q)
    out = np.empty(p.shape[0])
    for start in range(0, p.shape[0], _BLOCK_ROWS):
        out[start : start + _BLOCK_ROWS] = per_block(p[start : start + _BLOCK_ROWS] - q)
    return out


def emd_equal(p, q) -> np.ndarray:
    """EMD under the equal distance (all distinct values at distance 1): 1/2 * sum |p - q|.

    Equals the LP because each unit of surplus mass must move at least once, at cost 1, and
    moving surplus straight to deficits costs exactly the total surplus, 1/2 * sum |p - q|.
    """
    return _by_blocks(lambda d: 0.5 * np.abs(d).sum(axis=1), p, q)


def emd_ordered(p, q) -> np.ndarray:
    """EMD under the ordered distance |i - j| / (S - 1): 1/(S-1) * sum_i |sum_{j<=i} (p_j - q_j)|.

    Equals the LP because on a line every unit of mass crossing the gap between values i and
    i + 1 pays 1/(S-1) there, the net mass that must cross is the prefix imbalance, and moving
    mass in one direction per gap achieves it. 0 when S <= 1.
    """
    p, q = _as_inputs(p, q)
    n_values = q.shape[0]
    if n_values <= 1:
        return np.zeros(p.shape[0])
    # The last prefix sum is sum(p) - sum(q) = 0: leaving it out keeps rounding noise out.
    return _by_blocks(
        lambda d: np.abs(np.cumsum(d, axis=1)[:, :-1]).sum(axis=1) / (n_values - 1), p, q
    )


# ---------------------------------------------------------------------------------------------
# Hierarchies


@dataclass(frozen=True)
class HierarchyIndex:
    """An `SAHierarchy` bound to the S values of a table, in SA-code order.

    `node_ids[l, s]` identifies the level-l ancestor of value s (level 0: the value itself) for
    the levels 0..height-1 below the root; two values at distance h/height share their ancestors
    from level h on. `order` lists the values so that every node's leaves are contiguous, and
    `starts[l - 1]` gives where each level-l node begins in that order (for np.add.reduceat).
    """

    height: int
    node_ids: np.ndarray
    order: np.ndarray
    starts: tuple[np.ndarray, ...]

    @property
    def n_values(self) -> int:
        return self.node_ids.shape[1]

    def distance_matrix(self) -> np.ndarray:
        """(S, S) ground distances: level of the lowest common ancestor / height."""
        size = self.n_values
        if self.height == 0:
            return np.zeros((size, size))
        # Two values differ at levels 0..lca-1 and agree from the LCA up: count the levels.
        differing = (self.node_ids[:, :, None] != self.node_ids[:, None, :]).sum(axis=0)
        return differing / self.height


def check_tree(rows, source: str, numbers: list[int], unit: str = "lines") -> None:
    """Refuse rows of labels (leaf first) that are not one tree: no rows, rows of different
    lengths, or a node (a label at a level; for level 0 a value) with two parents. Messages name
    rows by `numbers` (file lines or row numbers), never their labels: they may be data values.
    One check for every hierarchy source (files read by DuckDB, rows, tables)."""
    if not rows:
        raise AnonymizeError(f"hierarchy {source} is empty")
    first = len(rows[0])
    for row, number in zip(rows, numbers):
        if len(row) != first:
            raise AnonymizeError(f"hierarchy {source} has rows with different numbers of levels: "
                                 f"{unit[:-1]} {numbers[0]} has {first} columns, {unit[:-1]} {number} has {len(row)}")
    for level in range(first - 1):
        parent_of: dict[str, tuple[str, int]] = {}
        for row, number in zip(rows, numbers):
            parent, seen = parent_of.setdefault(row[level], (row[level + 1], number))
            if parent != row[level + 1]:
                what = "value" if level == 0 else f"node at level {level}"
                raise AnonymizeError(f"hierarchy {source} is not a tree: {unit} {seen} and {number} give the same "
                                     f"{what} different parents at level {level + 1}")


class SAHierarchy:
    """A generalization tree over sensitive values, as in ARX hierarchy CSV files.

    Each row is a leaf's path: column 0 the value, column i its ancestor at level i. A node is
    identified by its label *and* level, so a label repeated at the next level ("Unknown;99;99;*")
    is a node with a single child, and the row lengths fix the levels: a node at level i has
    height i. The tree height H is the number of columns minus 1 when the last column holds one
    root (usually `*`); when it holds several labels an implicit root is added above them and
    H = number of columns. Leaves whose lowest common ancestor is at level h are at distance h/H.

    Built from rows (`from_rows`): the solver reads no files; duckanon.hierarchy.read_sa_hierarchy
    reads an ARX file into rows, as the engine does for the option sa_hierarchy.
    """

    def __init__(self, paths: dict[str, tuple[str, ...]], source: str = "<rows>"):
        # paths: leaf -> (ancestor at level 1, ..., ancestor at the last level); checked by
        # from_rows, the constructor to use.
        self.paths = paths
        self.source = source
        self.levels = 1 + len(next(iter(paths.values())))  # columns of the file
        tops = {path[-1] if path else leaf for leaf, path in paths.items()}
        self.height = self.levels - 1 if len(tops) == 1 else self.levels

    @classmethod
    def from_rows(cls, rows, source: str = "<rows>") -> SAHierarchy:
        """Build from rows of labels (leaf first); blank rows and repeated rows are ignored."""
        rows = [tuple(map(str, row)) for row in rows]
        kept = [(row, number) for number, row in enumerate(rows, 1) if any(cell.strip() for cell in row)]
        check_tree([row for row, _ in kept], source, [number for _, number in kept], unit="rows")
        return cls({row[0]: row[1:] for row, _ in kept}, source)

    def for_values(self, values, null_label: str | None = None) -> HierarchyIndex:
        """Bind the tree to a table's distinct SA values, given as strings in SA-code order.

        A NULL value (None) is looked up as the leaf labelled `null_label`; with no
        `null_label` a NULL value is an error. Every value must be a leaf of the hierarchy
        (matched exactly as text); leaves absent from the table are dropped, which changes no
        distance (their mass is 0 in every distribution) and keeps the height H of the full tree.
        """
        labels = []
        for value in values:
            if value is None:
                if null_label is None:
                    raise AnonymizeError(
                        f"the sensitive attribute has NULL values but hierarchy {self.source} "
                        "has no leaf for NULL (name one with null_label)"
                    )
                value = null_label
            labels.append(str(value))
        if len(set(labels)) != len(labels):
            raise AnonymizeError(f"a sensitive value appears twice when bound to hierarchy {self.source}")
        missing = [label for label in labels if label not in self.paths]
        if missing:
            raise AnonymizeError(  # counted, never quoted: a message must not carry a value of the source
                f"hierarchy {self.source} has no leaf for {len(missing)} sensitive value(s) "
                "(values are matched exactly as text)"
            )
        size = len(labels)
        if self.height == 0:  # a single leaf: every distance is 0
            return HierarchyIndex(0, np.zeros((0, size), dtype=np.int64), np.arange(size), ())
        node_ids = np.empty((self.height, size), dtype=np.int64)
        node_ids[0] = np.arange(size)
        for level in range(1, self.height):  # the root level (all equal) is not needed
            level_labels = [self.paths[label][level - 1] for label in labels]
            node_ids[level] = np.unique(level_labels, return_inverse=True)[1].reshape(-1)
        # Sorting by the path from the top makes every node's leaves contiguous.
        order = np.lexsort(node_ids)
        starts = []
        for level in range(1, self.height):
            in_order = node_ids[level][order]
            starts.append(np.flatnonzero(np.r_[True, in_order[1:] != in_order[:-1]]))
        return HierarchyIndex(self.height, node_ids, order, tuple(starts))


def emd_hierarchical(p, q, hierarchy: HierarchyIndex) -> np.ndarray:
    """Li et al.'s hierarchical EMD (2007, Sec. 4.2) under distance level(LCA) / H.

    Li et al.: extra(N) = sum of p - q over the leaves under N; each internal node N costs
    height(N)/H * min(pos_extra(N), neg_extra(N)) over its children, and EMD is the sum. Since
    min(a, b) = (a + b - |a - b|)/2 and pos - neg = extra(N), that sum telescopes, every edge
    spanning one level, to (1/(2H)) * sum over levels l = 0..H-1 of sum over nodes N at level l
    of |extra(N)|: the mean over the levels below the root of the total variation between the
    two distributions generalized to that level. This is the tree-metric EMD, which equals the
    LP: on a tree the net mass |extra(N)| must cross the edge above N, and a flow that moves
    only net mass across each edge is feasible. A node with a single child contributes the
    same term as its child, consistent with its height being its level.
    """
    p, q = _as_inputs(p, q)
    n_values = hierarchy.n_values
    if q.shape[0] != n_values:
        raise ValueError(f"hierarchy is bound to {n_values} values, q has {q.shape[0]}")
    if hierarchy.height == 0:
        return np.zeros(p.shape[0])
    # The levels' partitions of the values are nested, so two levels with as many nodes are the
    # same partition and add the same term: count each once, with its multiplicity. Levels with
    # one node (extra = sum(p - q) = 0) and with one node per value (= level 0) need no work.
    multiplicity: dict[int, int] = {}
    boundaries: dict[int, np.ndarray] = {}
    for level_starts in hierarchy.starts:
        n_nodes = len(level_starts)
        multiplicity[n_nodes] = multiplicity.get(n_nodes, 0) + 1
        boundaries[n_nodes] = np.r_[level_starts, n_values]
    leaf_weight = 1 + multiplicity.pop(n_values, 0)
    multiplicity.pop(1, None)

    def per_block(diff):
        diff = np.take(diff, hierarchy.order, axis=1)
        total = leaf_weight * np.abs(diff).sum(axis=1)
        if multiplicity:
            # prefix[:, k] = sum of the first k values in `order`: a node's extra is the
            # difference of prefix sums at its two boundaries.
            prefix = np.zeros((diff.shape[0], n_values + 1))
            np.cumsum(diff, axis=1, out=prefix[:, 1:])
            for n_nodes, weight in multiplicity.items():
                extra = np.diff(prefix[:, boundaries[n_nodes]], axis=1)
                total += weight * np.abs(extra).sum(axis=1)
        return total / (2 * hierarchy.height)

    return _by_blocks(per_block, p, q)


# ---------------------------------------------------------------------------------------------
# Ground distances and the general LP


def ground_distance_matrix(kind: str, n_values: int, hierarchy: HierarchyIndex | None = None) -> np.ndarray:
    """(S, S) ground distance: 'equal', 'ordered' or 'hierarchical' (needs a bound hierarchy)."""
    if kind == "equal":
        return 1.0 - np.eye(n_values)
    if kind == "ordered":
        index = np.arange(n_values)
        return np.abs(index[:, None] - index[None, :]) / max(n_values - 1, 1)
    if kind == "hierarchical":
        if hierarchy is None or hierarchy.n_values != n_values:
            raise ValueError("the hierarchical distance needs a hierarchy bound to the S values")
        return hierarchy.distance_matrix()
    raise ValueError(f"unknown ground distance {kind!r} (equal, ordered, hierarchical)")


def emd_lp(p_row, q, distance) -> float:
    """EMD of one distribution p_row from q under any ground distance matrix, by the LP.

    Variables f_ij (mass moved from value i of p to value j of q), row-major. The column-sum
    constraint of the last value is implied by the others (both sides sum to 1) and left out,
    so rounding in the inputs cannot make the LP infeasible.
    """
    p_row = np.asarray(p_row, dtype=float).reshape(-1)
    q = np.asarray(q, dtype=float).reshape(-1)
    distance = np.asarray(distance, dtype=float)
    size = q.shape[0]
    if p_row.shape[0] != size or distance.shape != (size, size):
        raise ValueError(f"p_row, q and distance disagree: {p_row.shape}, {q.shape}, {distance.shape}")
    if abs(p_row.sum() - q.sum()) > 1e-9:
        raise ValueError("p_row and q must have the same total mass")
    if size <= 1:
        return 0.0
    import scipy.sparse as sp  # (scipy is imported where an LP runs: solver/__init__.py)
    from scipy.optimize import linprog

    ones = sp.csr_matrix(np.ones((1, size)))
    eye = sp.identity(size, format="csr")
    row_sums = sp.kron(eye, ones, format="csr")                # sum_j f_ij = p_i
    col_sums = sp.kron(ones, eye, format="csr")[: size - 1]    # sum_i f_ij = q_j, last one implied
    result = linprog(
        distance.reshape(-1),
        A_eq=sp.vstack([row_sums, col_sums], format="csr"),
        b_eq=np.concatenate([p_row, q[: size - 1]]),
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"EMD transportation LP failed: {result.message}")
    return float(result.fun)


def emd_custom(p, q, distance) -> np.ndarray:
    """`emd_lp` for each row of p (G LPs): the fallback for ground distances with no closed form."""
    p, q = _as_inputs(p, q)
    return np.array([emd_lp(row, q, distance) for row in p])


# ---------------------------------------------------------------------------------------------
# DuckDB
