"""A hierarchy and its binding to one column's distinct values as integer codes per level."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.solver.histogram import first_positions

# the text of a suppressed cell, and the top of every builder's hierarchy
STAR = "*"


class MissingValues(AnonymizeError):
    """Values a hierarchy does not cover (raised inside `bind`, which words the message)."""

    def __init__(self, values: list):
        super().__init__(f"{len(values)} values are missing from the hierarchy")
        self.values = values


class BoundHierarchy:
    """A hierarchy applied to one column's distinct values.

    `codes[v, h]` is the dense code of value v's generalization at level h; codes run 0..n_h-1 at
    each level, in the hierarchy's natural order (file order, numeric, chronological, declared
    order; lexicographic for `prefix`). Level 0 is the identity. `labels[h][c]` is the text of code
    c at level h (None for the NULL group, which is published as NULL). Labels are made on first
    use, so binding a million values stays numpy-only.
    """

    def __init__(self, values: list, codes: np.ndarray, label_makers: list[Callable[[], list]], column=None,
                 domain: tuple[int, list[np.ndarray]] | None = None):
        self.values = values
        self.codes = codes
        self.column = column
        # (leaves of the whole hierarchy, per level the leaves under each code): a hierarchy given
        # as rows may hold values the column lacks, and ARX's loss counts them (its domain share
        # is over the hierarchy's rows); a builder's hierarchy is made of the column's values
        self._domain = domain
        # differential privacy (`Hierarchy._bind_to_root`): the lowest level whose one group is the
        # whole HIERARCHY, decided from the hierarchy alone; a cell counts as a star there and only
        # there (None: a level is whole when one label covers every bound value, generalize.whole_domain)
        self.whole_from: int | None = None
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

    @property
    def domain_size(self) -> int:
        """The leaves of the whole hierarchy: its rows, or the column's values for a builder."""
        return len(self.values) if self._domain is None else self._domain[0]

    def domain_leaves(self, level: int) -> np.ndarray:
        """Per code of `level`, the hierarchy's leaves under it (values absent from the column
        included, for a hierarchy given as rows)."""
        return self.group_sizes(level) if self._domain is None else self._domain[1][level]

    def loss(self, level: int) -> np.ndarray:
        """ARX's loss of one cell per code of `level`: (leaves - 1) / (domain - 1), in [0, 1],
        over the hierarchy's leaves (ARX's DomainShareMaterialized)."""
        return (self.domain_leaves(level) - 1) / max(self.domain_size - 1, 1)

    def rows(self) -> list[list]:
        """The ARX rows for the bound values: [value, level 1 label, ..., level H label]."""
        columns = [[labels[c] for c in self.codes[:, h].tolist()] for h, labels in enumerate(self.labels)]
        return [list(row) for row in zip(*columns)]


class Hierarchy:
    """A generalization hierarchy. Subclasses say how values generalize; `bind` codes them."""

    name = "hierarchy"  # how error messages name it: the file, the table or the builder call
    masks_whole_values_as_star = False  # prefix: values masked whole read '*', '**', ...
    height: int | None = None  # known before binding except for `prefix()` without a width

    def bind(self, values: Sequence, column: str | None = None, source: str | None = None,
             uncovered: str = "refuse") -> BoundHierarchy:
        """Code `values` (the distinct values of `column`, read from the table `source`). A value
        the hierarchy does not cover is an error that counts them and gives the SQL that lists
        them (from `source`, or `<table>` when it is not given), never a value itself.

        `uncovered = "root"` (differential privacy): nothing that depends on which values occur
        refuses; a value the hierarchy lacks or cannot place is put in its root group instead
        (`_bind_to_root`), and the only refusals are the hierarchy's own, whatever the values."""
        values = list(values)
        if uncovered == "root":
            return self._bind_to_root(values, column)
        try:
            codes, label_makers = self._code_levels(values, column)
        except MissingValues as missing:
            raise AnonymizeError(self._missing_message(missing.values, column, source)) from None
        n = len(values)
        matrix = np.empty((n, len(codes) + 1), dtype=np.int64)
        matrix[:, 0] = np.arange(n)
        for h, level_codes in enumerate(codes, start=1):
            matrix[:, h] = level_codes
        bound = BoundHierarchy(values, matrix, label_makers, column, self._domain_of(values))
        if self._texts_may_repeat(values):
            self._check_labels_name_one_group(bound, column)
        return bound

    # -- differential privacy: a binding whose refusals do not depend on the values -------------

    def _placeable(self, values: list) -> np.ndarray:
        """Per value, whether the hierarchy places it (has a row for it, can compute its levels);
        the rest go to the root under differential privacy. Decided value by value, so whether one
        value is placed never depends on the others."""
        return np.ones(len(values), dtype=bool)

    def _root_label(self) -> str:
        """The text of the hierarchy's top level (its root)."""
        return STAR

    def _whole_from(self) -> int | None:
        """The lowest level at which the whole hierarchy is one group (whatever the values), or None
        where only the top is (a builder's groups are made of the column's values)."""
        return None

    def _refuse_root_below_top(self) -> None:
        """Refuse, from the hierarchy alone, a root text that names a group of only some values
        below the top: a value put in the root there would share its text (no such hierarchy
        binds under differential privacy, whatever the values)."""

    def _bind_to_root(self, values: list, column: str | None) -> BoundHierarchy:
        """Differential privacy's binding: a value the hierarchy lacks (no row, NULL without a NULL
        row, a text spelled as the hierarchy spells NULL, a category not listed) or cannot place (a
        non-finite number or one too large for intervals, an infinite date or a text that is no
        date for dates) is generalized to the root at every level above 0: at a level where the
        whole hierarchy is one group it joins that group, below it it is a group of its own labelled
        as the top. Level 0 is every value itself, as always. The refusals left are the
        hierarchy's own (its rows, its builder's arguments, the column's type), so whether the
        statement is refused never depends on which values the source holds, and the cross-level
        check of `bind` (one text per group over every level, which a local recoding needs) is not
        run: a private release publishes one level per column, and at one level every group has a
        text of its own (the root's included: `_refuse_root_below_top`)."""
        self._refuse_root_below_top()
        n = len(values)
        placeable = np.asarray(self._placeable(values), dtype=bool).reshape(-1)
        matrix_codes, makers = None, None
        if placeable.all():
            matrix_codes, makers = self._code_levels(values, column)
        else:
            placed = [v for v, ok in zip(values, placeable.tolist()) if ok]
            height = self.height
            placed_codes, placed_makers = self._code_levels(placed, column) if placed else (None, None)
            if placed_codes is not None:
                height = len(placed_codes)
            whole_from = self._whole_from() or height
            root = self._root_label()
            matrix_codes, makers = [], []
            for h in range(1, height + 1):
                labels = list(placed_makers[h - 1]()) if placed_makers is not None else []
                if h >= whole_from:
                    if not labels:
                        labels = [self._whole_label(h)]
                    code = 0  # the one group of the level: every placed value is in it
                else:
                    code = len(labels)
                    labels.append(root)
                level = np.full(n, code, dtype=np.int64)
                if placed_codes is not None:
                    level[placeable] = placed_codes[h - 1]
                matrix_codes.append(level)
                makers.append(lambda labels=labels: labels)
        matrix = np.empty((n, len(matrix_codes) + 1), dtype=np.int64)
        matrix[:, 0] = np.arange(n)
        for h, level_codes in enumerate(matrix_codes, start=1):
            matrix[:, h] = level_codes
        bound = BoundHierarchy(values, matrix, makers, column, self._domain_to_root(values, placeable, matrix))
        # whether a label covers every value of the SOURCE column tells whether the source holds a
        # value the hierarchy lacks (it goes to the root): a star is decided from the hierarchy alone
        bound.whole_from = min(self._whole_from() or bound.height, bound.height) if bound.height > 0 else None
        return bound

    def _whole_label(self, level: int) -> str:
        """The text of the one group at `level` (at or above `_whole_from`)."""
        return self._root_label()

    def _domain_to_root(self, values: list, placeable: np.ndarray, matrix: np.ndarray):
        """`_domain_of` for `_bind_to_root`: a root group stands for the whole hierarchy (its loss
        is a suppressed cell's, 1), whatever values fell into it."""
        if placeable.all():
            return self._domain_of(values)
        n = len(values)
        leaves = [np.ones(n, dtype=np.int64)]
        for h in range(1, matrix.shape[1]):
            sizes = np.bincount(matrix[:, h]).astype(np.int64)
            sizes[matrix[~placeable, h][0]] = n
            leaves.append(sizes)
        return n, leaves

    def _texts_may_repeat(self, values: list) -> bool:
        """Whether two groups of these values could get one text (a builder whose labels cannot
        spell a value or each other says False, and skips the check's walk over every value)."""
        return True

    def _check_labels_name_one_group(self, bound: BoundHierarchy, column: str | None) -> None:
        """A reader groups the published rows by their texts, so one text must name one group of
        values: a label equal to a value it does not stand for (or to another group's label at
        another level, or to '*' below the top) would publish two groups as one class, which the
        models were not checked on (a model not closed under merging, such as entropy l-diversity,
        can fail on the merged class). Groups are nested, so two with the same first value and as
        many values are the same group. The levels above 0 have few groups and are walked; each
        value's own text (level 0, one group per value) is only looked up among theirs."""
        n = len(bound.values)
        named = {STAR: (0, n, None)}  # every cell suppressed is '*', whatever its value
        for level in range(1, bound.height + 1):
            codes = bound.codes[:, level]
            first = first_positions(codes, bound.n_groups(level))  # each code's first value
            sizes = np.bincount(codes, minlength=len(first))
            for text, start, size in zip(bound.level_labels(level), first.tolist(), sizes.tolist()):
                if self._names_a_group(text):
                    seen = named.setdefault(text, (start, size, level))
                    if seen[:2] != (start, size):
                        self._refuse_shared_text(column, seen[2], level)
        # one pass: a value that keeps its text up the levels (A;A;*) is in `named` too, and each
        # such value looked up by list.index would make the walk quadratic
        for value, text in enumerate(bound.level_labels(0)):
            seen = named.get(text)
            if seen is not None and seen[:2] != (value, 1) and self._names_a_group(text):
                self._refuse_shared_text(column, 0, seen[2])

    def _names_a_group(self, text) -> bool:
        # None is the NULL group, published as NULL; prefix's whole masks ('*', '**') tell a
        # length at most, like '*' itself
        return text is not None and not (self.masks_whole_values_as_star and not text.strip(STAR))

    def _refuse_shared_text(self, column: str | None, level: int | None, other: int | None) -> None:
        where = f" of column {column}" if column else ""
        levels = sorted((level, other), key=lambda x: -1 if x is None else x)
        shown = ["'*'" if x is None else f"level {x}" for x in levels]
        raise AnonymizeError(f"hierarchy {self.name} gives one text to two different groups of the values{where} "
                             f"({shown[0]} and {shown[1]}): their rows would be published as one class; give each "
                             "group a label of its own")

    def _domain_of(self, values: list) -> tuple[int, list[np.ndarray]] | None:
        """For a hierarchy with leaves of its own (rows): their number, and per level the leaves
        under each code of the bound `values`; None when its leaves are the column's values."""
        return None

    def _code_levels(self, values: list, column: str | None) -> tuple[list[np.ndarray], list[Callable]]:
        """Per level >= 1: the dense codes of the values, and a function making the codes' labels."""
        raise NotImplementedError

    def _missing(self, values: list, missing: np.ndarray | list, column: str | None) -> AnonymizeError:
        """The error for values the hierarchy does not cover; `bind` turns it into its message."""
        return MissingValues([values[i] for i in missing])

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
