"""How many buckets a split cell's rows are dealt into (keyed_arrow), and the split publish SQL in
both engines' dialects. The published results of both split paths: tests/e2e/test_split_cells.py."""

from __future__ import annotations

import numpy as np

from duckanon.pipeline.histogram import Cells
from duckanon.pipeline.keyed import BUCKET_ROWS, MAX_BUCKETS, SMALL_CELL, keyed_arrow
from duckanon.solver.histogram import Histogram
from duckanon.solver.partition import Solution


def test_buckets_of_split_cells():
    """Four cells of one class each: 5,000 rows split in two (16 buckets: 5,000 // 256 = 19, down to
    a power of two), 100 rows split (below SMALL_CELL: one bucket, a window ranks it), 3,000,000
    rows split (MAX_BUCKETS), 7,000 rows not split (one bucket)."""
    counts = np.array([5000, 100, 3_000_000, 7000])
    hist = Histogram(codes=np.arange(4).reshape(4, 1), sa_counts=counts.reshape(4, 1))
    cells = Cells("c", hist, cell_class=np.arange(4), cell_sa=np.zeros(4, dtype=np.int64), cell_count=counts)
    solution = Solution(part_class=np.array([0, 0, 1, 1, 2, 2, 3]), part_sa=np.zeros(7, dtype=np.int64),
                        part_group=np.array([0, 1, 0, 1, 0, 1, 0]),
                        part_count=np.array([4000, 1000, 50, 50, 2_999_000, 1000, 7000]),
                        group_rep=np.array([[-1], [-1]]))
    parts = keyed_arrow(cells, solution)
    assert (SMALL_CELL, BUCKET_ROWS, MAX_BUCKETS) == (4096, 256, 1024)
    assert parts["cell_id"].to_pylist() == [0, 0, 1, 1, 2, 2, 3]
    assert parts["split"].to_pylist() == [True] * 6 + [False]
    assert parts["buckets"].to_pylist() == [16, 16, 1, 1, 1024, 1024, 1]
    assert parts["lo"].to_pylist() == [1, 4001, 1, 51, 1, 2_999_001, 1]
