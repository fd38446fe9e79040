"""Generalization hierarchies for quasi-identifier columns, compatible with ARX's CSV format.

A hierarchy maps every value of a column to coarser values, level by level: level 0 is the value
itself, level H (the top) is normally `*`. Sources:

- ARX CSV (`from_csv`): `;`-separated, no header; column 0 is the original value, column i its
  generalization at level i. CRLF endings, a UTF-8 BOM and `"`-quoted fields are accepted.
- rows (`from_rows`) and DuckDB tables (`from_table` / `to_table`): the same shape as the CSV, one
  column per level; `to_table` writes VARCHAR columns `value, level1, ..., levelH` in row order.
- builders: `prefix`, `intervals`, `dates`, `ordered_groups` (alias `ordered`), computed with
  numpy on the column's distinct values, so any value is covered.
- `parse_spec`: the text users write in SQL (see its docstring for the syntax).

Values match the hierarchy by their string form, `str(value)`; a number that misses also matches an
entry with the same numeric value (`39.0` or `Decimal('39.00')` matches `39`). NULL matches the row
whose original value is an empty field or the text `NULL`, and is reported missing otherwise. The
builders keep NULL a group of its own (label None, published as NULL) below the top `*`.

`Hierarchy.bind(values)` turns the hierarchy into integer codes for one column's distinct values
(in DuckDB dictionary-code order): a `BoundHierarchy`, which is all the solvers see.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from collections.abc import Callable, Sequence

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.emd import check_tree

__all__ = [
    "BoundHierarchy", "Hierarchy", "dates", "from_csv", "from_rows", "from_table", "intervals", "ordered",
    "ordered_groups", "parse_spec", "prefix", "read_sa_hierarchy", "sa_order_missing", "to_table",
]

STAR = "*"
SOURCE_PLACEHOLDER = "<table>"  # in a suggested query, when the caller did not say which table
_LIST_LIMIT = 200  # longest list of literals written into a suggested query
NULL_SPELLINGS = ("", "NULL")  # how a hierarchy file or table writes the NULL value
_NULL = object()  # index key of the NULL row; no str() can collide with it


class _MissingValues(AnonymizeError):
    """Values a hierarchy does not cover (raised inside `bind`, which words the message)."""

    def __init__(self, values: list):
        super().__init__(f"{len(values)} values are missing from the hierarchy")
        self.values = values


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_column(column: str) -> str:
    from sqlglot import exp

    return exp.to_identifier(column).sql(dialect="duckdb")


def _as_text(column: str) -> str:
    """The column as the text values are matched by, NULL spelled 'NULL' (as hierarchies write it)."""
    return f"coalesce(CAST({_sql_column(column)} AS VARCHAR), 'NULL')"


def _literals(values: Sequence) -> str | None:
    """`'a', 'b', 'NULL'`: values as SQL literals (None as 'NULL'), or None when that is too long."""
    text = ", ".join(_sql_string("NULL" if v is None else str(v)) for v in values)
    return text if len(text) <= _LIST_LIMIT else None


def missing_query(column: str, source: str | None, known: str, numeric: bool = False) -> str:
    """SELECT DISTINCT <column> FROM <source> WHERE its text is not among `known`: a subquery of
    one text column or a list of literals. `numeric`: a number also matches an entry of equal
    value (39.0 matches '39'), as `Hierarchy.bind` matches numbers."""
    column_sql, table = _sql_column(column), source or SOURCE_PLACEHOLDER
    if not numeric:
        return f"SELECT DISTINCT {column_sql} FROM {table} WHERE {_as_text(column)} NOT IN ({known})"
    return (f"SELECT DISTINCT {column_sql} FROM {table} WHERE NOT EXISTS (SELECT 1 FROM ({known}) h(v) "
            f"WHERE h.v = {_as_text(column)} OR TRY_CAST(h.v AS DOUBLE) = TRY_CAST({column_sql} AS DOUBLE))")


def sa_order_missing(count: int, order: Sequence, column: str | None = None, source: str | None = None) -> str:
    """The message for `count` values of the sensitive column that sa_order does not list: the
    count and a query listing them, never a value."""
    message = (f"sa_order does not list {count} value{'s' if count != 1 else ''} of the sensitive column"
               f"{' ' + column if column else ''}")
    listed = _literals(order)
    if column is None or listed is None:
        return message + ("; list them with SELECT DISTINCT on it and compare with sa_order" if column else "")
    return f"{message}; list {'them' if count != 1 else 'it'} with: {missing_query(column, source, listed)}"


def _kind_of(value) -> str:
    """A value's type in user terms, for messages that must not show the value."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "blob"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, date):
        return "date"
    if isinstance(value, (int, np.integer)):
        return "integer"
    if isinstance(value, (float, Decimal, np.floating)):
        return "number"
    return type(value).__name__


def _values_of(column: str | None) -> str:
    return f"column {column}" if column else "the column"


# --------------------------------------------------------------------------- bound hierarchy


class BoundHierarchy:
    """A hierarchy applied to one column's distinct values.

    `codes[v, h]` is the dense code of value v's generalization at level h; codes run 0..n_h-1 at
    each level, in the hierarchy's natural order (file order, numeric, chronological, declared
    order; lexicographic for `prefix`). Level 0 is the identity. `labels[h][c]` is the text of code
    c at level h (None for the NULL group, which is published as NULL). Labels are made on first
    use, so binding a million values stays numpy-only.
    """

    def __init__(self, values: list, codes: np.ndarray, label_makers: list[Callable[[], list]], column=None):
        self.values = values
        self.codes = codes
        self.column = column
        self._label_makers = [lambda: [None if v is None else str(v) for v in values], *label_makers]
        self._labels: dict[int, list] = {}

    @property
    def height(self) -> int:
        return self.codes.shape[1] - 1

    def level_labels(self, level: int) -> list:
        """The text of each code of `level`."""
        if level not in self._labels:
            self._labels[level] = list(self._label_makers[level]())
        return self._labels[level]

    @property
    def labels(self) -> list[list]:
        """Per level, the text of each code; level 0 is `str(value)` (None for NULL)."""
        return [self.level_labels(h) for h in range(self.height + 1)]

    def n_groups(self, level: int) -> int:
        return int(self.codes[:, level].max()) + 1 if len(self.values) else 0

    def group_sizes(self, level: int) -> np.ndarray:
        """How many of the bound values each code of `level` covers (its leaves), indexed by code."""
        return np.bincount(self.codes[:, level], minlength=self.n_groups(level))

    def loss(self, level: int) -> np.ndarray:
        """ARX's loss of one cell per code of `level`: (leaves - 1) / (values - 1), in [0, 1]."""
        n = len(self.values)
        return (self.group_sizes(level) - 1) / max(n - 1, 1)

    def rows(self) -> list[list]:
        """The ARX rows for the bound values: [value, level 1 label, ..., level H label]."""
        columns = [[labels[c] for c in self.codes[:, h].tolist()] for h, labels in enumerate(self.labels)]
        return [list(row) for row in zip(*columns)]


# --------------------------------------------------------------------------- hierarchies


class Hierarchy:
    """A generalization hierarchy. Subclasses say how values generalize; `bind` codes them."""

    name = "hierarchy"  # how error messages name it: the file, the table or the builder call
    height: int | None = None  # known before binding except for `prefix()` without a width

    def bind(self, values: Sequence, column: str | None = None, source: str | None = None) -> BoundHierarchy:
        """Code `values` (the distinct values of `column`, read from the table `source`). A value
        the hierarchy does not cover is an error that counts them and gives the SQL that lists
        them (from `source`, or `<table>` when it is not given), never a value itself."""
        values = list(values)
        try:
            codes, label_makers = self._code_levels(values, column)
        except _MissingValues as missing:
            raise AnonymizeError(self._missing_message(missing.values, column, source)) from None
        n = len(values)
        matrix = np.empty((n, len(codes) + 1), dtype=np.int64)
        matrix[:, 0] = np.arange(n)
        for h, level_codes in enumerate(codes, start=1):
            matrix[:, h] = level_codes
        return BoundHierarchy(values, matrix, label_makers, column)

    def _code_levels(self, values: list, column: str | None) -> tuple[list[np.ndarray], list[Callable]]:
        """Per level >= 1: the dense codes of the values, and a function making the codes' labels."""
        raise NotImplementedError

    def _missing(self, values: list, missing: np.ndarray | list, column: str | None) -> AnonymizeError:
        """The error for values the hierarchy does not cover; `bind` turns it into its message."""
        return _MissingValues([values[i] for i in missing])

    def _missing_message(self, missing: list, column: str | None, source: str | None) -> str:
        """How many values are missing and the query that lists them; no value is quoted (an error
        message travels to logs and screens the data must not reach)."""
        n = len(missing)
        where = f" of column {column}" if column else ""
        message = f"{n} value{'s' if n != 1 else ''}{where} {'are' if n != 1 else 'is'} missing from hierarchy {self.name}"
        query = self._listing(missing, column, source) if column else None
        return f"{message}; list {'them' if n != 1 else 'it'} with: {query}" if query else message

    def _listing(self, missing: list, column: str, source: str | None) -> str | None:
        """A query listing the values of `column` in `source` this hierarchy lacks, or None."""
        return None

    def __repr__(self) -> str:
        return f"<Hierarchy {self.name}>"


class TableHierarchy(Hierarchy):
    """Explicit rows (ARX CSV, Python rows, a DuckDB table): a dict lookup per distinct value."""

    def __init__(self, rows: Sequence[Sequence], name: str = "rows", lines: Sequence[int] | None = None,
                 origin: tuple[str, str] | None = None):
        """`lines`: the file line of each row, named by error messages (else the row number); no
        message quotes a row's text (a hierarchy's values are the column's values, and a file read
        for a SQL user may hold what that user must not see). `origin`: where the rows came from,
        ('file', path) or ('table', name, first column), for the query that lists missing values."""
        self.name = name
        self._lines = list(lines) if lines is not None else None
        self._origin = origin
        rows = [row if isinstance(row, list) else list(row) for row in rows]
        if not rows:
            raise AnonymizeError(f"hierarchy {name} is empty")
        width = len(rows[0])
        if len({len(row) for row in rows}) > 1:
            i = next(i for i, row in enumerate(rows) if len(row) != width)
            raise AnonymizeError(
                f"hierarchy {name} is inconsistent: {self._at(i)} has {len(rows[i]) - 1} levels, "
                f"{self._at(0)} has {width - 1}"
            )
        if width < 2:
            raise AnonymizeError(f"hierarchy {name} has one column and no levels (is it ';'-separated?)")
        self.height = width - 1
        self._rows = rows
        keys = [_NULL if row[0] is None or row[0] in NULL_SPELLINGS else str(row[0]) for row in rows]
        self._index: dict = dict(zip(keys, range(len(rows))))
        if len(self._index) < len(rows):
            seen: dict = {}
            for i, key in enumerate(keys):
                if seen.setdefault(key, i) != i:
                    raise AnonymizeError(f"hierarchy {name}: {self._at(seen[key], i)} have the same value")
        self._numbers: dict | None = None
        # Group ids per level, numbered by first appearance so codes keep the file's order.
        self._group_codes = np.empty((len(rows), width), dtype=np.int64)
        self._group_codes[:, 0] = np.arange(len(rows))
        self._group_labels: list[list[str]] = [[]]
        for h in range(1, width):
            labels = [row[h] for row in rows]
            if None in labels:
                raise AnonymizeError(f"hierarchy {name}: {self._at(labels.index(None))} has no label (NULL) at level {h}")
            labels = np.array([label if isinstance(label, str) else str(label) for label in labels], dtype=object)
            distinct, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
            in_file_order = np.empty(len(first), dtype=np.int64)
            in_file_order[np.argsort(first)] = np.arange(len(first))
            self._group_codes[:, h] = in_file_order[inverse.reshape(-1)]
            self._group_labels.append(labels[np.sort(first)].tolist())
        self._check_monotone()

    def rows(self) -> list[list]:
        """The rows as given: [value, level 1 label, ..., level H label]."""
        return self._rows

    def _check_monotone(self) -> None:
        """Two values in one group at level h must share their group at level h + 1."""
        codes = self._group_codes
        for h in range(1, self.height):
            lower, upper = codes[:, h], codes[:, h + 1]
            parent = np.empty(len(self._group_labels[h]), dtype=np.int64)
            parent[lower] = upper  # the last row of each group wins; every other row must agree
            bad = np.nonzero(parent[lower] != upper)[0]
            if bad.size:
                a = bad[0]
                b = np.nonzero((lower == lower[a]) & (upper != upper[a]))[0][-1]
                first, second = sorted((int(a), int(b)))
                raise AnonymizeError(
                    f"hierarchy {self.name} is not monotone: {self._at(first, second)} "
                    f"have the same label at level {h} but different labels at level {h + 1}"
                )

    def _at(self, i: int, j: int | None = None) -> str:
        """`line 3` / `row 3` (rows of Python or of a table), or `lines 1 and 3` for two rows."""
        def number(k: int) -> int:
            return self._lines[k] if self._lines is not None else k + 1
        what = "line" if self._lines is not None else "row"
        if j is None:
            return f"{what} {number(i)}"
        return f"{what}s {number(i)} and {number(j)}"

    def _listing(self, missing, column, source):
        if self._origin is None:
            return None
        if self._origin[0] == "file":
            known = (f"SELECT coalesce(column0, 'NULL') FROM read_csv({_sql_string(self._origin[1])}, delim = ';', "
                     "header = false, quote = '\"', all_varchar = true)")
        else:
            known = (f"SELECT coalesce(CAST({_sql_column(self._origin[2])} AS VARCHAR), 'NULL') "
                     f"FROM query_table({_sql_string(self._origin[1])})")
        numeric = any(isinstance(v, (int, float, Decimal, np.number)) and not isinstance(v, bool) for v in missing)
        return missing_query(column, source, known, numeric)

    def _row_of(self, value) -> int | None:
        row = self._index.get(_NULL if value is None else str(value))
        if row is None and isinstance(value, (int, float, Decimal, np.number)) and not isinstance(value, bool):
            row = self._numeric_index().get(float(value))
        return row

    def _rows_of(self, values: list) -> list:
        get = self._index.get
        rows = [get(s) for s in map(str, values)]  # str(None) is 'None': NULLs are redone below
        return [self._row_of(v) if row is None or v is None else row for v, row in zip(values, rows)]

    def _numeric_index(self) -> dict:
        """Entries whose value reads as a number, by that number (a table's 39.0 matches '39')."""
        if self._numbers is None:
            self._numbers = {}
            for key, row in self._index.items():
                try:
                    self._numbers.setdefault(float(key), row)
                except (TypeError, ValueError):
                    pass
        return self._numbers

    def _code_levels(self, values, column):
        rows = self._rows_of(values)
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            raise self._missing(values, missing, column)
        rows = np.asarray(rows, dtype=np.int64)
        codes, labels = [], []
        for h in range(1, self.height + 1):
            # Re-number over the groups present, keeping file order (np.unique sorts the file ids).
            present, dense = np.unique(self._group_codes[rows, h], return_inverse=True)
            codes.append(dense.reshape(-1).astype(np.int64))
            labels.append(lambda h=h, present=present: [self._group_labels[h][g] for g in present.tolist()])
        return codes, labels


class _BuiltHierarchy(Hierarchy):
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


class _Prefix(_BuiltHierarchy):
    def __init__(self, width: int | None):
        if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
            raise AnonymizeError(f"prefix: width must be a positive integer, got {width!r}")
        self.width = width
        self.height = None if width is None else width + 1
        self.name = "prefix" if width is None else f"prefix({width})"

    def _keys(self, values, column):
        strings = np.array([str(v) for v in values] or [""], dtype=str)[: len(values)]
        longest = strings.dtype.itemsize // 4  # 'U' stores 4 bytes per character
        levels = []
        current, lengths, to_current = strings, np.char.str_len(strings), np.arange(len(values))
        for stars in range(1, (self.width or longest) + 1):
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


class _Intervals(_BuiltHierarchy):
    def __init__(self, widths: Sequence):
        if not widths:
            raise AnonymizeError("intervals: give at least one width")
        for w in widths:
            if not isinstance(w, (int, float)) or isinstance(w, bool) or not w > 0 or w != w or w == float("inf"):
                raise AnonymizeError(f"intervals: widths must be positive numbers, got {w!r}")
        self.ratios = []
        for smaller, larger in zip(widths, widths[1:]):
            ratio = larger / smaller
            if ratio <= 1 or abs(ratio - round(ratio)) > 1e-9:
                # An interval of the finer level would straddle two of the coarser one.
                raise AnonymizeError(
                    f"intervals: each width must be a larger multiple of the previous one, got {smaller} then {larger}"
                )
            self.ratios.append(round(ratio))
        self.widths = list(widths)
        self.height = len(widths) + 1
        self.name = f"intervals({', '.join(map(str, widths))})"

    def _keys(self, values, column):
        numbers = np.asarray(values)
        if numbers.dtype.kind not in "iuf" or numbers.dtype.kind == "b":
            try:
                if any(isinstance(v, (str, bool, bytes)) for v in values):
                    raise TypeError
                numbers = numbers.astype(np.float64)  # Decimal, mixed int/float
            except (TypeError, ValueError):
                numeric = (int, float, Decimal)
                bad = next((v for v in values if not isinstance(v, numeric) or isinstance(v, bool)), values[0])
                raise AnonymizeError(f"intervals need numbers; {_values_of(column)} holds {_kind_of(bad)} values"
                                     ) from None
        if numbers.dtype.kind == "f" and not np.isfinite(numbers).all():
            n = int((~np.isfinite(numbers)).sum())
            where = f" of column {column}" if column else ""
            raise AnonymizeError(f"intervals need finite numbers; {n} value{'s' if n != 1 else ''}{where} "
                                 f"{'are' if n != 1 else 'is'} NaN or infinite")
        first = self.widths[0]
        if numbers.dtype.kind in "iu" and isinstance(first, int):
            keys = numbers.astype(np.int64) // first
        else:
            # Snap quotients within 1e-9 of a boundary onto it: 0.3 / 0.1 is 2.9999999999999996.
            keys = np.floor(np.round(numbers / first, 9)).astype(np.int64)
        levels = []
        for width, ratio in zip(self.widths, [1, *self.ratios]):
            keys = keys // ratio  # derived from the finer level, so the nesting is exact
            levels.append((keys, lambda ks, w=width: [f"[{_number(k * w)}, {_number(k * w + w)})" for k in ks.tolist()]))
        return levels


class _Dates(_BuiltHierarchy):
    # unit -> (key of a datetime64[D] array, label of a key); listed from fine to coarse
    UNITS: dict[str, tuple[Callable, Callable]] = {
        "day": (lambda d: d.astype(np.int64), lambda k: str(np.datetime64(k, "D"))),
        "month": (lambda d: _months(d), lambda k: f"{k // 12:04d}-{k % 12 + 1:02d}"),
        "quarter": (lambda d: _months(d) // 3, lambda k: f"{k // 4:04d}-Q{k % 4 + 1}"),
        "year": (lambda d: _months(d) // 12, lambda k: f"{k:04d}"),
        "decade": (lambda d: _months(d) // 120, lambda k: f"{k * 10:04d}s"),
    }

    def __init__(self, levels: Sequence[str]):
        levels = [str(u).strip().lower() for u in levels]
        order = list(self.UNITS)
        if not levels:
            raise AnonymizeError(f"dates: give at least one level of {', '.join(order)}")
        for unit in levels:
            if unit not in self.UNITS:
                raise AnonymizeError(f"dates: unknown level {unit!r}; use {', '.join(order)}")
        ranks = [order.index(u) for u in levels]
        if any(a >= b for a, b in zip(ranks, ranks[1:])):
            raise AnonymizeError(
                f"dates: levels must go from fine to coarse ({', '.join(order)}), got {', '.join(levels)}"
            )
        self.levels = levels
        self.height = len(levels) + 1
        self.name = f"dates({', '.join(levels)})"

    def _keys(self, values, column):
        # numpy would read an integer as days since 1970: accept dates and ISO strings only
        bad = next((v for v in values if not isinstance(v, (date, str, np.datetime64))), None)
        try:
            if bad is not None:
                raise ValueError
            # datetime.date() keeps the wall-clock date, also for time-zone-aware timestamps
            days = np.array([v.date() if isinstance(v, datetime) else v for v in values], dtype="datetime64[D]")
        except (TypeError, ValueError):
            if bad is not None:
                raise AnonymizeError(f"dates need DATE or TIMESTAMP values; {_values_of(column)} holds "
                                     f"{_kind_of(bad)} values") from None
            n = sum(1 for v in values if not _is_iso_date(v))
            where = f" of column {column}" if column else ""
            raise AnonymizeError(f"dates need DATE or TIMESTAMP values; {n} text value{'s' if n != 1 else ''}{where} "
                                 f"{'are' if n != 1 else 'is'} not a date (YYYY-MM-DD)") from None
        levels = []
        for unit in self.levels:
            key, label = self.UNITS[unit]
            levels.append((key(days), lambda ks, f=label: [f(k) for k in ks.tolist()]))
        return levels


class _Ordered(_BuiltHierarchy):
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

    def _listing(self, missing, column, source):
        listed = _literals(self.order)
        if listed is None:
            return None
        return missing_query(column, source, listed).replace(_as_text(column), f"CAST({_sql_column(column)} AS VARCHAR)")

    def _block_label(self, block: int, size: int) -> str:
        members = self.order[block * size : (block + 1) * size]
        return members[0] if len(members) == 1 else f"{members[0]}..{members[-1]}"


def _is_iso_date(value) -> bool:
    try:
        np.datetime64(value, "D")
        return True
    except (TypeError, ValueError):
        return False


def _months(days: np.ndarray) -> np.ndarray:
    """Months since year 0 (so year = months // 12 and decades divide evenly)."""
    return days.astype("datetime64[M]").astype(np.int64) + 1970 * 12


def _number(x) -> str:
    """39 for integral numbers, 2.5 otherwise; 12 significant digits hide float noise (0.1 * 3)."""
    return str(x) if isinstance(x, int) else f"{x:.12g}"


# --------------------------------------------------------------------------- builders and loaders


def from_rows(rows: Sequence[Sequence], name: str = "rows") -> Hierarchy:
    """ARX rows [value, level 1, ..., level H]; a value None, '' or 'NULL' stands for NULL."""
    return TableHierarchy(rows, name)


def from_csv(path: str | Path, con=None) -> Hierarchy:
    """An ARX hierarchy file: `;`-separated, no header, CRLF or LF, optionally `"`-quoted.

    With a DuckDB connection `con` the file is read by DuckDB (`read_blob`), so the session's file
    access rules apply (`SET enable_external_access = false` refuses it), and error messages name
    line numbers instead of quoting the file. This is how SQL statements read hierarchy files.
    """
    rows, lines = _file_rows(path, con)
    name = str(Path(path)) if con is None else str(path)
    return TableHierarchy(rows, name, lines=lines, origin=("file", name))


def read_sa_hierarchy(con, path: str) -> list[list[str]]:
    """The rows of the ARX hierarchy file of a sensitive attribute (option `sa_hierarchy`), read
    through DuckDB (its file access rules apply) and checked as duckanon.solver.emd.SAHierarchy
    checks them: blank rows are ignored, every row has the same number of columns, and each node
    (a label at a level) has one parent. Errors name line numbers, never the file's text. The
    rows are for `SAHierarchy.from_rows`."""
    rows, lines = _file_rows(path, con)
    kept = [(row, line) for row, line in zip(rows, lines) if any(cell.strip() for cell in row)]
    check_tree([row for row, _ in kept], path, [line for _, line in kept], unit="lines")
    return [row for row, _ in kept]


def _file_rows(path: str | Path, con=None) -> tuple[list[list[str]], list[int]]:
    """The non-empty rows of an ARX CSV file and the line each starts on; read by DuckDB when `con`
    is given, else by Python."""
    if con is None:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise AnonymizeError(f"cannot read hierarchy file {path}: {e.strerror or e}") from None
    else:
        raw = _read_with_duckdb(con, str(path))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # older ARX exports are ISO-8859-1
    rows, lines = [], []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=";", quotechar='"')
    start = 1
    try:
        for row in reader:
            if row:
                rows.append(row)
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as e:
        detail = f"line {start}: {e}" if con is not None else str(e)
        raise AnonymizeError(f"cannot read hierarchy file {path}: {detail}") from None
    return rows, lines


def _read_with_duckdb(con, path: str) -> bytes:
    """The bytes of one file, read by DuckDB: its access control (enable_external_access,
    allowed_directories, ...) decides, and its message says why when it refuses."""
    try:
        found = con.execute("SELECT content FROM read_blob(?)", [path]).fetchall()
    except Exception as e:  # duckdb raises many types (Permission, IO, ...); the message is what matters
        lines = str(e).strip().splitlines()
        raise AnonymizeError(f"cannot read hierarchy file {path}: {lines[0] if lines else type(e).__name__}") from None
    if not found:
        raise AnonymizeError(f"cannot read hierarchy file {path}: no such file")
    if len(found) > 1:
        raise AnonymizeError(f"cannot read hierarchy file {path}: the name matches {len(found)} files")
    return bytes(found[0][0])


def prefix(width: int | None = None) -> Hierarchy:
    """Redact codes from the right, one character per level: 98765, 9876*, 987**, ..., *****, then *.

    Level i stars the last i characters of `str(value)` and keeps its length; a value shorter than i
    is all stars of its own length. Values of different lengths therefore never share a group below
    the top `*` (no characters are invented, and the hierarchy stays monotone). `width` is the number
    of redaction levels, by default the longest value's length. Integer ZIP codes that lost their
    leading zeros should be padded in SQL first (`lpad(zip::VARCHAR, 5, '0')`).
    """
    return _Prefix(width)


def intervals(*widths: int | float) -> Hierarchy:
    """Numbers: level i groups values into [lo, lo + widths[i]) with lo a multiple of widths[i]
    (label `[35, 40)`); the widths increase and each is a multiple of the previous; the top is `*`."""
    if len(widths) == 1 and isinstance(widths[0], (list, tuple)):
        widths = tuple(widths[0])
    return _Intervals(widths)


def dates(levels: Sequence[str] = ("month", "year", "decade")) -> Hierarchy:
    """DATE/TIMESTAMP values (or ISO strings): levels among day (`2024-03-05`), month (`2024-03`),
    quarter (`2024-Q1`), year (`2024`), decade (`2020s`), from fine to coarse; the top is `*`."""
    if isinstance(levels, str):
        levels = (levels,)
    return _Dates(levels)


def ordered_groups(order: Sequence, sizes: Sequence[int]) -> Hierarchy:
    """Categories of a declared order, grouped in consecutive blocks: level i joins blocks of
    sizes[i] (each a multiple of the previous) labelled `first..last` (a lone member keeps its
    name); the top is `*`. Values match the order by `str(value)`."""
    return _Ordered(order, sizes)


ordered = ordered_groups


def from_table(con, table_name: str) -> Hierarchy:
    """A hierarchy stored in DuckDB: first column the value, then one column per level (any names,
    any types, read as text), rows in table order (the order of the codes). A NULL value is the
    NULL row; a NULL label is an error. `table_name` is a table or view name, possibly qualified
    and quoted as in SQL (`"my hier"`, `s.t`); it is looked up with query_table(), never run as SQL."""
    try:
        result = con.execute("SELECT * FROM query_table(?)", [table_name])
        first_column = result.description[0][0] if result.description else None
        rows = result.fetchall()
    except Exception as e:  # duckdb raises many types; the message is what matters
        raise AnonymizeError(f"cannot read hierarchy table {table_name}: {str(e).splitlines()[0]}") from None
    rows = [[None if v is None else str(v) for v in row] for row in rows]
    origin = ("table", table_name, first_column) if first_column is not None else None
    return TableHierarchy(rows, f"table {table_name}", origin=origin)


def to_table(con, hierarchy: Hierarchy | BoundHierarchy, table_name: str) -> None:
    """Write a hierarchy as a new DuckDB table `value, level1, ..., levelH` (all VARCHAR), in row order.

    Takes rows from a file/rows/table hierarchy, or from a BoundHierarchy (any builder once bound
    to a column's values). The NULL value is written as NULL.
    """
    if isinstance(hierarchy, BoundHierarchy):
        rows = hierarchy.rows()
    elif isinstance(hierarchy, TableHierarchy):
        rows = [[None if r[0] is None or r[0] in NULL_SPELLINGS else r[0], *r[1:]] for r in hierarchy.rows()]
    else:
        raise AnonymizeError(f"to_table: {hierarchy.name} has no rows of its own; bind it to a column's values first")
    height = len(rows[0]) - 1 if rows else hierarchy.height
    names = ["value"] + [f"level{h}" for h in range(1, height + 1)]
    columns = [[None if row[h] is None else str(row[h]) for row in rows] for h in range(height + 1)]
    con.execute(f"CREATE TABLE {table_name} ({', '.join(f'{n} VARCHAR' for n in names)})")
    selects = ", ".join(f"unnest(${h + 1}::VARCHAR[])" for h in range(height + 1))
    con.execute(f"INSERT INTO {table_name} SELECT {selects}", columns)


_SPEC = re.compile(r"^\s*(prefix|intervals|dates|ordered|table)\s*(?:\((.*)\))?\s*$", re.IGNORECASE | re.DOTALL)


def parse_spec(spec: str, column: str | None = None, con=None) -> Hierarchy:
    """The hierarchy a user names in SQL. Forms (keywords case-insensitive):

    - `prefix` or `prefix(3)`: see `prefix`;
    - `intervals(5, 10, 20)`: see `intervals`;
    - `dates` or `dates(month, year)`: see `dates`;
    - `ordered(a, b, c, d; 2, 4)`: categories in order, `;`, then group sizes; a category with a
      comma, semicolon or spaces at its ends is single-quoted (`'HS, grad'`, `''` for a quote);
    - `table(name)`: a DuckDB table on `con` (see `from_table`);
    - anything else: an ARX CSV path, relative to the current directory; read through DuckDB when
      `con` is given (see `from_csv`).
    `{column}` in a path or table name is replaced by the column name.
    """
    text = spec.replace("{column}", column) if column is not None else spec
    match = _SPEC.match(text)
    if not match:
        if not text.strip():
            raise AnonymizeError("empty hierarchy specification")
        return from_csv(text, con)
    kind, arguments = match.group(1).lower(), match.group(2)
    items = _split(arguments, ",") if arguments is not None else []
    if kind == "prefix":
        if len(items) > 1:
            raise AnonymizeError(f"prefix takes at most one width, got {arguments!r}")
        return prefix(_integer(items[0], "prefix") if items else None)
    if kind == "intervals":
        return intervals(*[_real(item, "intervals") for item in items])
    if kind == "dates":
        return dates(items) if arguments is not None else dates()
    if kind == "ordered":
        parts = _split(arguments or "", ";", unquote=False)
        if len(parts) != 2:
            raise AnonymizeError("ordered needs categories and group sizes: ordered(a, b, c, d; 2, 4)")
        return ordered_groups(_split(parts[0], ","), [_integer(s, "ordered") for s in _split(parts[1], ",")])
    if con is None or len(items) != 1:
        raise AnonymizeError("table(name) needs one table name and a connection")
    return from_table(con, items[0])


def _split(text: str, separator: str, unquote: bool = True) -> list[str]:
    """Split at `separator` outside single quotes; strip items, and unquote them if asked."""
    items, current, quoted = [], [], False
    for ch in text:
        if ch == "'":
            quoted = not quoted  # '' inside quotes toggles twice, which keeps the text intact
        if ch == separator and not quoted:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if quoted:
        raise AnonymizeError(f"unclosed quote in hierarchy specification: {text!r}")
    items.append("".join(current))
    items = [item.strip() for item in items]
    if items == [""]:
        return []
    if unquote:
        items = [_unquote(item) for item in items]
    return items


def _unquote(item: str) -> str:
    return item[1:-1].replace("''", "'") if len(item) >= 2 and item[0] == item[-1] == "'" else item


def _integer(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise AnonymizeError(f"{where}: {text!r} is not an integer") from None


def _real(text: str, where: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise AnonymizeError(f"{where}: {text!r} is not a number") from None
