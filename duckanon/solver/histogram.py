"""The solver's only view of the data: equivalence classes with their sensitive-value counts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


def packed_keys(codes: np.ndarray, columns=None) -> list[np.ndarray]:
    """The rows of `codes` (of its `columns`, in that order; default all) as a few int64 keys, the
    columns packed in mixed radix (each key below 2^62, first column most significant; each column
    shifted to start at 0): comparing the keys in turn compares the rows lexicographically."""
    keys = []
    key = np.zeros(len(codes), dtype=np.int64)
    span = 1
    for j in range(codes.shape[1]) if columns is None else columns:
        column = codes[:, j]
        low = int(column.min(initial=0))
        radix = int(column.max(initial=0)) - low + 1
        if span * radix >= 2**62 and span > 1:
            keys.append(key)
            key, span = np.zeros(len(codes), dtype=np.int64), 1
        key = key * radix + (column - low)
        span *= radix
    keys.append(key)
    return keys


def lexicographic_order(codes: np.ndarray, columns=None) -> np.ndarray:
    """The stable permutation that sorts the rows of `codes` lexicographically by its `columns`
    (default all), first column first (a sort over a few packed keys, not a pass per column)."""
    keys = packed_keys(codes, columns)
    return np.argsort(keys[0], kind="stable") if len(keys) == 1 else np.lexsort(keys[::-1])


def first_positions(ids: np.ndarray, count: int) -> np.ndarray:
    """For each id in range(count), the position of its first occurrence in `ids` (every id
    occurs at least once): one scatter, the last write winning on the reversed array."""
    first = np.empty(count, dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)
    return first


def group_keys(codes: np.ndarray) -> np.ndarray:
    """Dense group ids for the rows of `codes`: equal rows, equal ids, numbered in the rows'
    lexicographic order (as np.unique(axis=0) numbers them, without its copies of the rows)."""
    if codes.shape[1] == 0:
        return np.zeros(len(codes), dtype=np.int64)
    keys = packed_keys(codes)
    if len(keys) == 1:
        return np.unique(keys[0], return_inverse=True)[1].ravel()
    order = np.lexsort(keys[::-1])
    new = np.zeros(len(codes), dtype=bool)
    new[0] = True
    for key in keys:
        ordered = key[order]
        new[1:] |= ordered[1:] != ordered[:-1]
    ids = np.empty(len(codes), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


# Dtypes a histogram keeps its codes in as given (a wide table's codes fit in a byte or two:
# 10,000,000 classes x 50 columns are 500 MB as int8 against 4 GB as int64).
COMPACT_CODE_TYPES = (np.int8, np.int16, np.int32, np.uint8, np.uint16)


@dataclass(init=False)
class Histogram:
    """Distinct QI vectors ("classes") as dictionary codes, with per-class SA counts.

    codes[c, j]     code of class c's value in QI column j (NULL has a code of its own, >= 0),
                    as int64: every solver's arithmetic on codes may assume that width
    compact_codes   the same codes as given, in a narrower integer type when they came so; read
                    by the methods that scale with the table (segments, the representatives), so a
                    wide table's codes are never widened (`codes` widens them once, when asked)
    sa_counts[c, s] rows of class c whose sensitive value has code s; one column when there is
                    no sensitive attribute
    """

    sa_counts: np.ndarray
    columns: tuple[str, ...]

    def __init__(self, codes: np.ndarray, sa_counts: np.ndarray, columns=()) -> None:
        self.sa_counts = np.ascontiguousarray(sa_counts, dtype=np.int64)
        codes = np.asarray(codes)
        if codes.dtype not in COMPACT_CODE_TYPES:
            codes = codes.astype(np.int64, copy=False)
        codes = np.ascontiguousarray(codes)
        self.compact_codes = codes if codes.ndim == 2 else codes.reshape(len(self.sa_counts), -1)
        self.columns = tuple(columns)

    @cached_property
    def codes(self) -> np.ndarray:
        return self.compact_codes.astype(np.int64, copy=False)

    @cached_property
    def sizes(self) -> np.ndarray:
        """Rows per class: computed once (gensup's cell suppression asked for it 16,636 times in one
        solve) and read-only, so a caller that meant to change it fails instead of the cache."""
        sizes = self.sa_counts.sum(axis=1)
        sizes.setflags(write=False)
        return sizes

    @property
    def n_classes(self) -> int:
        return len(self.compact_codes)

    @property
    def m(self) -> int:
        return self.compact_codes.shape[1]

    @property
    def n_rows(self) -> int:
        return int(self.sa_counts.sum())

    @classmethod
    def from_rows(cls, rows, sensitive=None) -> "Histogram":
        """Build from raw QI rows (tests and small fixtures only; the pipeline builds it in DuckDB)."""
        rows = [tuple(r) for r in rows]
        m = len(rows[0]) if rows else 0
        dictionaries = [{v: i for i, v in enumerate(sorted({r[j] for r in rows}, key=repr))} for j in range(m)]
        coded = [tuple(dictionaries[j][r[j]] for j in range(m)) for r in rows]
        sa_values = sorted(set(sensitive), key=repr) if sensitive is not None else [None]
        sa_index = {v: i for i, v in enumerate(sa_values)}
        classes: dict[tuple, int] = {}
        for vector in coded:
            classes.setdefault(vector, len(classes))
        counts = np.zeros((len(classes), len(sa_values)), dtype=np.int64)
        for i, vector in enumerate(coded):
            counts[classes[vector], sa_index[sensitive[i]] if sensitive is not None else 0] += 1
        codes = np.array(list(classes), dtype=np.int64).reshape(len(classes), m)
        return cls(codes=codes, sa_counts=counts)
