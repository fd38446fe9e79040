"""Hierarchies of numbers (`intervals`) and of dates (`dates`): nested ranges computed with numpy."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal, localcontext
from collections.abc import Callable, Sequence

import numpy as np

from duckanon.errors import AnonymizeError
from duckanon.hierarchy.binding import Hierarchy
from duckanon.hierarchy.builders import BuiltHierarchy


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


# the integers a float64 holds exactly, and far inside int64: intervals are numbered below this
EXACT_INTEGERS = 2.0 ** 53


class _Intervals(BuiltHierarchy):
    def _texts_may_repeat(self, values: list) -> bool:
        return False  # '[lo, hi)' spells no number, and the widths grow strictly from level to level

    def __init__(self, widths: Sequence):
        if not widths:
            raise AnonymizeError("intervals: give at least one width")
        for w in widths:
            if not isinstance(w, (int, float)) or isinstance(w, bool) or not w > 0 or w != w or w == float("inf"):
                raise AnonymizeError(f"intervals: widths must be positive numbers, got {w!r}")
        self.ratios = []
        for smaller, larger in zip(widths, widths[1:]):
            ratio = larger / smaller
            if ratio > EXACT_INTEGERS:  # its codes are integer quotients of int64 codes
                raise AnonymizeError(f"intervals: each width may be at most 2^53 times the previous one, got {smaller} "
                                     f"then {larger}")
            exact_ratio = _decimal(larger) / _decimal(smaller)
            if ratio <= 1 or exact_ratio != exact_ratio.to_integral_value():
                # An interval of the finer level would straddle two of the coarser one (decided on
                # the widths as written, exactly: 0.3 is 3 times 0.1, 0.30000000001 is not).
                raise AnonymizeError(
                    f"intervals: each width must be a larger multiple of the previous one, got {smaller} then {larger}"
                )
            self.ratios.append(round(ratio))
        self.widths = list(widths)
        self.height = len(widths) + 1
        self.name = f"intervals({', '.join(map(str, widths))})"

    def _placeable(self, values):
        """A number intervals can number exactly (finite, within int64 for integer widths, below
        2^53 widths otherwise); anything else that is no number is placed, and refused by type."""
        first = self.widths[0]

        def placed(v) -> bool:
            if isinstance(v, bool) or not isinstance(v, (int, float, Decimal, np.number)):
                return True
            if isinstance(v, (int, np.integer)) and isinstance(first, int):
                return -2 ** 63 <= int(v) <= 2 ** 63 - 1
            number = float(v)
            return bool(np.isfinite(number)) and abs(number) / first < EXACT_INTEGERS
        return np.array([placed(v) for v in values], dtype=bool)

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
        exact = numbers.dtype.kind in "iu" and isinstance(first, int)  # integer division of int64 codes
        too_large = (numbers.dtype.kind == "u" and numbers.size and int(numbers.max()) > np.iinfo(np.int64).max) if exact \
            else bool(numbers.size) and float(np.abs(numbers.astype(np.float64)).max()) / first >= EXACT_INTEGERS
        if too_large:
            # an interval's number would not fit the int64 codes exactly (it wrapped around: 6e11 at
            # width 1e-9 was labelled [-9223372036.85, -9223372036.85), UBIGINTs near 2^64 negative)
            raise AnonymizeError(f"intervals: the values of {_values_of(column)} are too large for the width {first}: "
                                 "their intervals could not be numbered exactly")
        if exact:
            keys = numbers.astype(np.int64) // first
        else:
            keys = _interval_keys(values, numbers.astype(np.float64), first)
        levels = []
        for width, ratio in zip(self.widths, [1, *self.ratios]):
            keys = keys // ratio  # derived from the finer level, so the nesting is exact
            levels.append((keys, lambda ks, w=_decimal(width): [f"[{_text(k * w)}, {_text(k * w + w)})"
                                                                for k in ks.tolist()]))
        return levels


class Dates(BuiltHierarchy):
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

    def _texts_may_repeat(self, values: list) -> bool:
        # a date's text (2024-03-05) is none of a month's, quarter's, year's or decade's; an ISO
        # string may be shorter ('2024-03' reads as a date) and spell another value's month
        return any(isinstance(v, str) for v in values)

    def _placeable(self, values):
        """A date that has a day (not infinity or -infinity, which DuckDB hands over as the extreme
        dates: those, a real 9999-12-31 too, are not placed) or a text that reads as one."""
        def placed(v) -> bool:
            if isinstance(v, datetime):
                return v.replace(tzinfo=None) not in (datetime.max, datetime.min)
            if isinstance(v, date):
                return v not in (date.max, date.min)
            if isinstance(v, str):
                return _is_iso_date(v) and not np.isnat(_day(v))
            return True  # NULL is placed; another type is refused by type
        return np.array([placed(v) for v in values], dtype=bool)

    def _keys(self, values, column):
        # numpy would read an integer as days since 1970: accept dates and ISO strings only
        bad = next((v for v in values if not isinstance(v, (date, str, np.datetime64))), None)
        try:
            if bad is not None:
                raise ValueError
            # datetime.date() keeps the wall-clock date, also for time-zone-aware timestamps
            with _quiet_numpy():
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


@contextmanager
def _quiet_numpy():
    """numpy warns (UserWarning "no explicit representation of timezones", a DeprecationWarning
    on some versions) when it parses a text with a time zone, which is how DuckDB hands over a
    TIMESTAMPTZ past year 9999 (Python's datetime stops there): the warning would reach stderr
    exactly when the source holds such a value, so it is silenced around these conversions,
    which read the date part only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="no explicit representation of timezones")
        warnings.filterwarnings("ignore", message="parsing timezone aware datetimes is deprecated")
        yield


def _day(value) -> np.datetime64:
    with _quiet_numpy():
        return np.datetime64(value, "D")


def _is_iso_date(value) -> bool:
    try:
        _day(value)
        return True
    except (TypeError, ValueError):
        return False


def _months(days: np.ndarray) -> np.ndarray:
    """Months since year 0 (so year = months // 12 and decades divide evenly)."""
    return days.astype("datetime64[M]").astype(np.int64) + 1970 * 12


def _decimal(x) -> Decimal:
    """A number as the decimal it is written as: a DOUBLE by its shortest text (0.3, not
    0.2999999999999999889), the text DuckDB shows it by; an integer or DECIMAL as it is."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, (int, np.integer)):
        return Decimal(int(x))
    return Decimal(repr(float(x)))


def _text(x: Decimal) -> str:
    """A bound's exact decimal text, without exponent or trailing zeros: 39, 2.5, 0.3, 1000000000000005."""
    text = format(x, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _interval_keys(values: list, numbers: np.ndarray, width) -> np.ndarray:
    """floor(value / width) per value, exactly on the decimals the value and the width are written
    as (`_decimal`), so a value's label [k * width, (k + 1) * width) always contains it: 0.3 at
    width 0.1 is in [0.3, 0.4) (float division gives 2.9999999999999996), 1e15 at width 5 in
    [1000000000000000, 1000000000000005) (numpy's rounding gave 199999999999999.97). The float
    quotient decides every value far from a bound (its error is below 1e-15 of it, the margin
    1e-12 of it plus 1e-9); the few near one are computed in decimal arithmetic."""
    quotient = numbers / width
    keys = np.floor(quotient)
    fraction = quotient - keys
    margin = np.abs(quotient) * 1e-12 + 1e-9
    keys = keys.astype(np.int64)
    doubtful = np.flatnonzero((fraction < margin) | (fraction > 1 - margin))
    if len(doubtful):
        w = _decimal(width)
        with localcontext() as context:
            context.prec = 60  # |quotient| < 2^53: its integer part and far more are exact
            for i in doubtful.tolist():
                keys[i] = int((_decimal(values[i]) / w).to_integral_value(rounding="ROUND_FLOOR"))
    return keys


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
    return Dates(levels)
