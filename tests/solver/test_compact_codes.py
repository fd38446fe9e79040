"""A histogram keeps narrow integer codes as given (compact_codes) and widens them only when
`codes` is read; the methods that scale with the table read the compact ones and publish what
they would from int64 codes."""

import numpy as np
import pytest

from duckanon.pipeline.codes import narrowest_integer
from duckanon.solver.histogram import Histogram
from duckanon.solver.models import KAnonymity
from duckanon.solver.partition import STAR, build_solution
from duckanon.solver.segments import segments


def test_compact_codes_are_kept_and_codes_widen():
    codes = np.array([[0, 3], [1, 2]], dtype=np.int8)
    hist = Histogram(codes, np.array([[2], [3]]), ("a", "b"))
    assert hist.compact_codes.dtype == np.int8 and hist.codes.dtype == np.int64
    assert hist.codes.tolist() == [[0, 3], [1, 2]] and hist.m == 2 and hist.n_classes == 2
    wide = Histogram(np.array([[5]], dtype=np.uint32), np.array([[1]]))  # not a compact type: int64 at once
    assert wide.compact_codes.dtype == np.int64 and wide.codes is wide.compact_codes


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
def test_representatives_star_what_members_disagree_on_in_any_width(dtype):
    """uint8 would wrap the star (-1) to 255: the representatives are int64 whatever the codes' width."""
    top = 120 if dtype == np.int8 else 200
    codes = np.array([[top, 1], [top, 2], [7, 1]], dtype=dtype)
    hist = Histogram(codes, np.array([[1], [1], [1]]))
    solution = build_solution(hist, np.array([0, 1, 2]), np.zeros(3, np.int64), np.array([0, 0, 1]),
                              np.ones(3, np.int64), "test")
    assert solution.group_rep.dtype == np.int64
    assert solution.group_rep.tolist() == [[top, STAR], [7, 1]]


def test_segments_on_compact_codes_equals_segments_on_int64_codes():
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 5, size=(3000, 20))
    sizes = rng.integers(1, 4, size=(3000, 1))
    narrow = segments(Histogram(codes.astype(np.int8), sizes), [KAnonymity(4)])
    wide = segments(Histogram(codes, sizes), [KAnonymity(4)])
    for field in ("part_class", "part_sa", "part_group", "part_count", "group_rep"):
        assert np.array_equal(getattr(narrow, field), getattr(wide, field)), field


@pytest.mark.parametrize("largest,sql", [(0, "TINYINT"), (127, "TINYINT"), (128, "SMALLINT"), (32767, "SMALLINT"),
                                         (32768, "INT"), (2**31 - 1, "INT"), (2**31, "BIGINT")])
def test_narrowest_integer(largest, sql):
    dtype, name = narrowest_integer(largest)
    assert name == sql and np.iinfo(dtype).max >= largest
