"""Numpy arrays to and from Arrow without pandas.

pyarrow's conversions (ChunkedArray.to_numpy, pa.array on a numpy array or a list) import pandas
when it is installed, which cost a statement's first ANONYMIZE 0.2-0.3 s (more than the rest of
a small table's statement). The integer columns of the cells and the keyed table's columns are
plain fixed-width data, read from and written to Arrow's buffers here instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_INTEGER_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def int_column(column: pa.ChunkedArray, dtype=np.int64) -> np.ndarray:
    """An Arrow column of integers as `dtype` (int64 unless told), from its chunks' data buffers
    when it has no nulls (any other column through to_numpy())."""
    name = str(column.type)
    if name not in _INTEGER_TYPES or column.null_count:
        return column.to_numpy().astype(dtype)
    stored = np.dtype(name)
    parts = [np.frombuffer(chunk.buffers()[1], dtype=stored, count=len(chunk), offset=chunk.offset * stored.itemsize)
             for chunk in column.chunks if len(chunk)]
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def arrow_array(values: np.ndarray) -> pa.Array:
    """A numpy array of integers (as int64) or booleans as an Arrow array without nulls."""
    values = np.asarray(values)
    if values.dtype == np.bool_:
        bits = np.packbits(np.ascontiguousarray(values), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
