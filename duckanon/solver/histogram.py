"""The solver's only view of the data: equivalence classes with their sensitive-value counts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


def group_keys(codes: np.ndarray) -> np.ndarray:
    """Dense group ids for the rows of `codes`: equal rows, equal ids (mixed radix when it fits in int64)."""
    if codes.shape[1] == 0:
        return np.zeros(len(codes), dtype=np.int64)
    radix = codes.max(axis=0) + 1
    if np.sum(np.log2(np.maximum(radix, 1).astype(np.float64))) < 62:
        key = np.zeros(len(codes), dtype=np.int64)
        for j in range(codes.shape[1]):
            key = key * int(radix[j]) + codes[:, j]
        return np.unique(key, return_inverse=True)[1].ravel()
    return np.unique(codes, axis=0, return_inverse=True)[1].ravel()


@dataclass
class Histogram:
    """Distinct QI vectors ("classes") as dictionary codes, with per-class SA counts.

    codes[c, j]     code of class c's value in QI column j (NULL has a code of its own, >= 0)
    sa_counts[c, s] rows of class c whose sensitive value has code s; one column when there is
                    no sensitive attribute
    """

    codes: np.ndarray
    sa_counts: np.ndarray
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        codes = np.ascontiguousarray(self.codes, dtype=np.int64)
        self.codes = codes if codes.ndim == 2 else codes.reshape(len(self.sa_counts), -1)
        self.sa_counts = np.ascontiguousarray(self.sa_counts, dtype=np.int64)

    @cached_property
    def sizes(self) -> np.ndarray:
        """Rows per class: computed once (gensup's cell suppression asked for it 16,636 times in one
        solve) and read-only, so a caller that meant to change it fails instead of the cache."""
        sizes = self.sa_counts.sum(axis=1)
        sizes.setflags(write=False)
        return sizes

    @property
    def n_classes(self) -> int:
        return len(self.codes)

    @property
    def m(self) -> int:
        return self.codes.shape[1]

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
