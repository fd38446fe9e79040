"""Hierarchies given as explicit rows `[value, level 1 label, ..., level H label]`, whatever their
source (an ARX CSV file, Python rows, a DuckDB table): checked once here, then looked up per value."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from collections.abc import Sequence

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.hierarchy.binding import STAR, Hierarchy
from duckanon.hierarchy.missing import missing_query, sql_column, sql_string

NULL_SPELLINGS = ("", "NULL")  # how a hierarchy file or table writes the NULL value
_NULL = object()  # index key of the NULL row; no str() can collide with it


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
        self._instants: dict | None = None
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
        if len(self._group_labels[-1]) > 1:
            # Several top labels: rows of two branches have no common label, and a group that mixes
            # them (the top-down recoding starts from one group of the whole table) can only be
            # published as '*'. That is the level above them, as in a hierarchy whose last column is '*'.
            self._group_codes = np.hstack([self._group_codes, np.zeros((len(rows), 1), dtype=np.int64)])
            self._group_labels.append([STAR])
            self.height += 1

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

    def _missing_message(self, missing: list, column: str | None, source: str | None) -> str:
        # a text spelled as a hierarchy spells NULL ('' or 'NULL') is read back as NULL from every
        # row, so it can have no row of its own, and the listing query (which spells NULL so too)
        # would list nothing: say so instead
        if any(isinstance(v, str) and v in NULL_SPELLINGS for v in missing):
            where = f" of column {column}" if column else ""
            return (f"a text value{where} is spelled as hierarchy {self.name} spells NULL (an empty text or NULL), "
                    "so no row can stand for it: replace it in the column (e.g. by SQL NULL) or use another "
                    "hierarchy")
        return super()._missing_message(missing, column, source)

    def _listing(self, missing, column, source):
        if self._origin is None:
            return None
        if self._origin[0] == "file":
            known = (f"SELECT coalesce(column0, 'NULL') FROM read_csv({sql_string(self._origin[1])}, delim = ';', "
                     "header = false, quote = '\"', all_varchar = true)")
        else:
            known = (f"SELECT coalesce(CAST({sql_column(self._origin[2])} AS VARCHAR), 'NULL') "
                     f"FROM query_table({sql_string(self._origin[1])})")
        numeric = any(isinstance(v, (int, float, Decimal, np.number)) and not isinstance(v, bool) for v in missing)
        return missing_query(column, source, known, numeric)

    def _row_of(self, value) -> int | None:
        row = self._index.get(_NULL if value is None else str(value))
        if row is None and isinstance(value, (int, float, Decimal, np.number)) and not isinstance(value, bool):
            row = self._numeric_index().get(float(value))
        if row is None and isinstance(value, datetime):
            row = self._instant_index().get(_instant(value))
        return row

    def _rows_of(self, values: list) -> list:
        if any(isinstance(v, (int, float, Decimal, np.number)) and not isinstance(v, bool) for v in values):
            self._numeric_index()  # a number spelled on two rows (39 and 039) is refused before any lookup
        get = self._index.get
        rows = [get(s) for s in map(str, values)]  # str(None) is 'None': NULLs are redone below
        return [self._row_of(v) if row is None or v is None else row for v, row in zip(values, rows)]

    def _numeric_index(self) -> dict:
        """Entries whose value reads as a number, by that number (a table's 39.0 matches '39'). Two
        rows that spell one number (39 and 039, 39.0, 3.9e1) would give it two parents, and which
        one a value got would hang on the column's type: refused as rows of the same value are."""
        if self._numbers is None:
            self._numbers = self._index_by(float, "numbers")
        return self._numbers

    def _instant_index(self) -> dict:
        """Entries whose value reads as a timestamp, by its instant (UTC where it has an offset): a
        TIMESTAMPTZ value comes in UTC, while a hierarchy table read in another session's TimeZone
        spells it with that offset, and a file may write +00 for +00:00. Two rows of one instant
        are refused as rows of one value are."""
        if self._instants is None:
            self._instants = self._index_by(lambda key: _instant(datetime.fromisoformat(key)), "timestamps")
        return self._instants

    def _index_by(self, read, what: str) -> dict:
        """The entries whose value `read` reads, by what it reads; two rows read alike are refused."""
        index: dict = {}
        for key, row in self._index.items():
            try:
                value = read(key)
            except (TypeError, ValueError):
                continue
            first = index.setdefault(value, row)
            if first != row:
                raise AnonymizeError(f"hierarchy {self.name}: {self._at(*sorted((first, row)))} have the same "
                                     f"value (as {what})")
        return index

    # differential privacy (Hierarchy._bind_to_root): the hierarchy's own root and whole groups

    def _placeable(self, values):
        if any(isinstance(v, datetime) for v in values):
            self._instant_index()  # two rows of one instant are refused whatever the values' spellings
        return np.array([row is not None for row in self._rows_of(values)], dtype=bool)

    def _root_label(self):
        return self._group_labels[-1][0]

    def _whole_from(self):
        return next(h for h in range(1, self.height + 1) if len(self._group_labels[h]) == 1)

    def _whole_label(self, level):
        return self._group_labels[level][0]

    def _refuse_root_below_top(self):
        root = self._root_label()
        # level 0 too: a leaf spelled as the top (Ann;AB;Ann) would publish the rows of a value
        # the hierarchy lacks under that leaf's name (the text of another person's value)
        leaf = next((i for i, row in enumerate(self._rows) if row[0] is not None and str(row[0]) == str(root)), None)
        if leaf is not None:
            raise AnonymizeError(
                f"hierarchy {self.name} gives its top label to one of its values ({self._at(leaf)}): under "
                "differential privacy a value the hierarchy lacks is published as the top label, which would "
                "read as that value; give the top a label of its own")
        for h in range(1, self._whole_from()):
            if root in self._group_labels[h]:
                raise AnonymizeError(
                    f"hierarchy {self.name} gives its top label to a group of only some of its values at level {h}: "
                    "under differential privacy a value the hierarchy lacks is published as the top label, which "
                    "would name two groups there; give that group a label of its own")

    def _domain_to_root(self, values, placeable, matrix):
        if placeable.all():
            return self._domain_of(values)
        rows = np.asarray([row for row in self._rows_of(values) if row is not None], dtype=np.int64)
        whole_from = self._whole_from()
        leaves = [np.ones(len(values), dtype=np.int64)]
        for h in range(1, self.height + 1):
            present = np.unique(self._group_codes[rows, h]) if len(rows) else np.zeros(0, dtype=np.int64)
            sizes = np.bincount(self._group_codes[:, h])[present]
            if h < whole_from or not len(present):  # the root's own group: the whole hierarchy
                sizes = np.append(sizes, len(self._rows))
            leaves.append(sizes.astype(np.int64))
        return len(self._rows), leaves

    def _domain_of(self, values):
        rows = np.asarray(self._rows_of(values), dtype=np.int64)  # every value is covered once coded
        leaves = [np.ones(len(rows), dtype=np.int64)]
        for h in range(1, self.height + 1):  # codes are the ranks of the present groups (_code_levels)
            present = np.unique(self._group_codes[rows, h])
            leaves.append(np.bincount(self._group_codes[:, h])[present])
        return len(self._rows), leaves

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


def _instant(value: datetime) -> datetime:
    """A timestamp as compared with a hierarchy's rows: in UTC where it has an offset."""
    return value if value.tzinfo is None else value.astimezone(timezone.utc)


def from_rows(rows: Sequence[Sequence], name: str = "rows") -> Hierarchy:
    """ARX rows [value, level 1, ..., level H]; a value None, '' or 'NULL' stands for NULL."""
    return TableHierarchy(rows, name)
