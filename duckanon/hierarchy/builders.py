"""Hierarchies computed from the column's distinct values with numpy, so any value is covered:
the shared machinery (`BuiltHierarchy`), code redaction (`prefix`) and categories of a declared
order (`ordered_groups`). Numbers and dates are in `ranges`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.hierarchy.binding import STAR, Hierarchy
from duckanon.hierarchy.missing import as_text, literals, missing_query, sql_column


class BuiltHierarchy(Hierarchy):
    """A builder: levels computed with numpy from the non-NULL values, then the `*` top.

    `_keys(values)` returns, for each level below the top, an integer or string key per value (the
    key order is the codes' order) and a function that labels an array of distinct keys. NULL is a
    group of its own at every level below the top, with label None.
    """

    def _keys(self, values: list, column: str | None) -> list[tuple[np.ndarray, Callable]]:
        raise NotImplementedError

    def _code_levels(self, values, column):
        has_null = None in values  # a C-speed scan; the mask is only built when needed
        is_null = np.array([v is None for v in values], dtype=bool) if has_null else np.zeros(len(values), bool)
        present = [v for v in values if v is not None] if has_null else values
        codes, labels = [], []
        for keys, label in self._keys(present, column):
            distinct, dense = np.unique(keys, return_inverse=True)
            level = np.full(len(values), len(distinct), dtype=np.int64)  # NULL: the code after the rest
            level[~is_null] = dense.reshape(-1)
            codes.append(level)
            labels.append(lambda label=label, distinct=distinct: list(label(distinct)) + ([None] if has_null else []))
        codes.append(np.zeros(len(values), dtype=np.int64))
        labels.append(lambda: [STAR] if values else [])
        return codes, labels


# prefix(width): at most this many characters masked, a lattice level each
PREFIX_WIDTH_LIMIT = 1_000


class _Prefix(BuiltHierarchy):
    masks_whole_values_as_star = True
    def __init__(self, width: int | None):
        if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
            raise AnonymizeError(f"prefix: width must be a positive integer, got {width!r}")
        if width is not None and width > PREFIX_WIDTH_LIMIT:  # a level each: prefix(1000000) exhausted memory
            raise AnonymizeError(f"prefix: width must be at most {PREFIX_WIDTH_LIMIT:,}, got {width:,}")
        self.width = width
        self.height = None if width is None else width + 1
        self.name = "prefix" if width is None else f"prefix({width})"

    def _keys(self, values, column):
        strings = np.array([str(v) for v in values] or [""], dtype=str)[: len(values)]
        longest = strings.dtype.itemsize // 4  # 'U' stores 4 bytes per character
        levels = []
        current, lengths, to_current = strings, np.char.str_len(strings), np.arange(len(values))
        for stars in range(1, (self.width or longest) + 1):
            if stars > longest and levels:  # every character is masked already: the same level again
                levels.append(levels[-1])
                continue
            # Each level masks one more character of the previous level's distinct labels: the
            # lengths stay, so masking the labels equals masking the values, on far fewer strings.
            chars = current.view(np.uint32).reshape(len(current), longest).copy()
            col = np.arange(chars.shape[1])
            chars[(col >= (lengths - stars)[:, None]) & (col < lengths[:, None])] = ord(STAR)
            masked = chars.view(current.dtype).reshape(-1)
            distinct, inverse = np.unique(masked, return_inverse=True)
            to_current = inverse.reshape(-1)[to_current]
            levels.append((to_current, lambda keys, d=distinct: [str(s) for s in d[keys]]))
            current, lengths = distinct, np.char.str_len(distinct)
        return levels


class _Ordered(BuiltHierarchy):
    def __init__(self, order: Sequence, sizes: Sequence[int]):
        self.order = list(map(str, order))
        if not self.order:
            raise AnonymizeError("ordered: the order lists no categories")
        self.position = dict(zip(self.order, range(len(self.order))))
        if len(self.position) < len(self.order):
            second = next(i for i, v in enumerate(self.order) if self.order.index(v) != i)
            first = self.order.index(self.order[second])
            raise AnonymizeError(f"ordered: categories {first + 1} and {second + 1} are the same")
        if not sizes:
            raise AnonymizeError("ordered: give at least one group size")
        for s in sizes:
            if not isinstance(s, int) or isinstance(s, bool) or s < 1:
                raise AnonymizeError(f"ordered: group sizes must be positive integers, got {s!r}")
        for smaller, larger in zip(sizes, sizes[1:]):
            if larger <= smaller or larger % smaller:
                raise AnonymizeError(
                    "ordered: each group size must be a larger multiple of the previous one, "
                    f"got {smaller} then {larger}"
                )
        self.sizes = list(sizes)
        self.height = len(sizes) + 1
        self.name = f"ordered({len(self.order)} categories; {', '.join(map(str, sizes))})"

    def _keys(self, values, column):
        get = self.position.get
        positions = [get(s, -1) for s in map(str, values)]
        missing = [i for i, p in enumerate(positions) if p < 0]
        if missing:
            raise self._missing(values, missing, column)
        positions = np.asarray(positions, dtype=np.int64)
        return [
            (positions // size, lambda ks, s=size: [self._block_label(k, s) for k in ks.tolist()]) for size in self.sizes
        ]

    def _placeable(self, values):
        position = self.position
        return np.array([v is None or str(v) in position for v in values], dtype=bool)

    def _refuse_root_below_top(self):
        for size in [1, *self.sizes]:  # 1: the categories themselves (level 0)
            if any(self._block_label(k, size) == STAR for k in range(-(-len(self.order) // size))):
                raise AnonymizeError(
                    f"hierarchy {self.name} labels a group below the top '*': under differential privacy a value "
                    "it lacks is published as '*', which would name two groups there; give that category another name")

    def _listing(self, missing, column, source):
        listed = literals(self.order)
        if listed is None:
            return None
        return missing_query(column, source, listed).replace(as_text(column), f"CAST({sql_column(column)} AS VARCHAR)")

    def _block_label(self, block: int, size: int) -> str:
        members = self.order[block * size : (block + 1) * size]
        return members[0] if len(members) == 1 else f"{members[0]}..{members[-1]}"


def prefix(width: int | None = None) -> Hierarchy:
    """Redact codes from the right, one character per level: 98765, 9876*, 987**, ..., *****, then *.

    Level i stars the last i characters of `str(value)` and keeps its length; a value shorter than i
    is all stars of its own length. Values of different lengths therefore never share a group below
    the top `*` (no characters are invented, and the hierarchy stays monotone). `width` is the number
    of redaction levels, by default the longest value's length. Integer ZIP codes that lost their
    leading zeros should be padded in SQL first (`lpad(zip::VARCHAR, 5, '0')`).
    """
    return _Prefix(width)


def ordered_groups(order: Sequence, sizes: Sequence[int]) -> Hierarchy:
    """Categories of a declared order, grouped in consecutive blocks: level i joins blocks of
    sizes[i] (each a multiple of the previous) labelled `first..last` (a lone member keeps its
    name); the top is `*`. Values match the order by `str(value)`."""
    return _Ordered(order, sizes)


ordered = ordered_groups
