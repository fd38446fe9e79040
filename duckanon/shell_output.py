"""How the `duckanon` shell prints query results: the modes of `.mode`, modelled on the DuckDB CLI.

    table     a rich table with column names and types, at most `max_rows` rows (the default)
    csv       CSV with a header row, NULL as an empty field
    line      one `column = value` line per column, a blank line between rows (DuckDB's line mode)
    json      a JSON array of objects, one row per line (DuckDB's json mode)
    markdown  a pipe table; numeric columns are marked right-aligned (DuckDB's markdown mode)

All modes but `table` print every row, streaming where the format allows it.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from typing import Iterable, Iterator, Sequence, TextIO

MODES = ("table", "csv", "line", "json", "markdown")
DEFAULT_MAX_ROWS = 40
_FETCH_BATCH = 1024

_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL")
# Written as JSON numbers by DuckDB's json mode; wider integers and DECIMAL are quoted strings.
_JSON_NUMBERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "FLOAT", "DOUBLE", "REAL")
# One-column status results DuckDB returns for DDL, SET, BEGIN, ...: not worth printing when empty.
_STATUS_COLUMNS = ("Count", "Success")

Columns = Sequence[tuple[str, str]]  # (name, DuckDB type name)


def format_value(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _width(text: str) -> int:
    """Terminal cells taken by the widest line of `text` (wide characters count twice)."""
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def _json_default(value):
    from decimal import Decimal

    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _json_value(value, type_name: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    upper = type_name.upper()
    if upper.startswith(_JSON_NUMBERS) and isinstance(value, (int, float)):
        return json.dumps(value)
    if upper == "JSON" and isinstance(value, str):
        try:
            return json.dumps(json.loads(value), ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            pass
    if isinstance(value, (list, tuple, dict)):  # LIST, ARRAY, STRUCT, MAP: nested JSON
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    return json.dumps(format_value(value), ensure_ascii=False)


def clock() -> tuple[float, float, float]:
    """Wall-clock, user and system CPU seconds of this process (DuckDB's threads included)."""
    try:
        import resource  # POSIX: microseconds, where os.times() counts clock ticks
    except ImportError:
        times = os.times()
        return time.perf_counter(), times.user, times.system
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), usage.ru_utime, usage.ru_stime


def run_time(started: tuple[float, float, float]) -> str:
    """The DuckDB CLI's `.timer on` line for what ran since `started = clock()`."""
    real, user, system = (now - then for now, then in zip(clock(), started))
    return f"Run Time (s): real {real:.3f} user {user:f} sys {system:f}"


class Printer:
    """Prints query results in one of MODES on `out` (standard output when None)."""

    def __init__(self, mode: str = "table", max_rows: int = DEFAULT_MAX_ROWS, out: TextIO | None = None):
        self.mode = mode
        self.max_rows = max_rows
        self.out = out

    @property
    def stream(self) -> TextIO:
        return self.out if self.out is not None else sys.stdout

    def redirect(self, path: str | None) -> None:
        """Print to the file `path`, emptied first as the DuckDB CLI does (OSError if it cannot be
        opened), or with None back to standard output; closes the file printed to before."""
        out, self.out = self.out, None
        if out is not None:
            out.close()
        if path is not None:
            self.out = open(path, "w", encoding="utf-8")

    def text(self, text: str) -> None:
        """Print plain text (e.g. `.schema`) where results go."""
        self.stream.write(text + "\n")
        self.stream.flush()

    def result(self, cursor) -> None:
        """Print the current result of a DuckDB cursor (nothing for statements without one)."""
        description = cursor.description
        if not description:
            return
        columns = [(str(d[0]), str(d[1])) for d in description]
        first = cursor.fetchmany(_FETCH_BATCH)
        if not first and len(columns) == 1 and columns[0][0] in _STATUS_COLUMNS:
            return
        if self.mode != "table":
            self.rows(columns, _chain(first, cursor))
            return
        shown, total, batch = [], 0, first
        while batch:
            total += len(batch)
            if len(shown) < self.max_rows:
                shown.extend(batch[: self.max_rows - len(shown)])
            batch = cursor.fetchmany(_FETCH_BATCH)
        self.rows(columns, shown, total)

    def rows(self, columns: Columns, rows: Iterable[tuple], total: int | None = None) -> None:
        out = self.stream
        if self.mode == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow([name for name, _ in columns])
            for row in rows:
                writer.writerow(["" if v is None else format_value(v) for v in row])
        elif self.mode == "line":
            _line(out, columns, rows)
        elif self.mode == "json":
            _json(out, columns, rows)
        elif self.mode == "markdown":
            _markdown(out, columns, list(rows))
        else:
            rows = list(rows)
            _rich_table(out, columns, rows, len(rows) if total is None else total)
        out.flush()


def _chain(first: list[tuple], cursor) -> Iterator[tuple]:
    batch = first
    while batch:
        yield from batch
        batch = cursor.fetchmany(_FETCH_BATCH)


def _line(out: TextIO, columns: Columns, rows: Iterable[tuple]) -> None:
    width = max([5] + [_width(name) for name, _ in columns])  # DuckDB (like sqlite3) pads to >= 5
    pads = [" " * (width - _width(name)) + name for name, _ in columns]
    for number, row in enumerate(rows):
        if number:
            out.write("\n")
        out.write("".join(f"{pad} = {format_value(value)}\n" for pad, value in zip(pads, row)))


def _json(out: TextIO, columns: Columns, rows: Iterable[tuple]) -> None:
    keys = [json.dumps(name, ensure_ascii=False) for name, _ in columns]
    out.write("[")
    for number, row in enumerate(rows):
        fields = ",".join(f"{key}:{_json_value(value, type_name)}"
                          for key, (_, type_name), value in zip(keys, columns, row))
        out.write((",\n{" if number else "{") + fields + "}")
    out.write("]\n")


def _markdown(out: TextIO, columns: Columns, rows: list[tuple]) -> None:
    header = [name.replace("|", "\\|") for name, _ in columns]
    cells = [[format_value(v).replace("|", "\\|") for v in row] for row in rows]
    widths = [max([_width(name)] + [_width(row[i]) for row in cells]) for i, name in enumerate(header)]
    centred = []
    for name, width in zip(header, widths):
        left = (width - _width(name)) // 2
        centred.append(" " * left + name + " " * (width - _width(name) - left))
    out.write("| " + " | ".join(centred) + " |\n")
    rules = ["-" * (width + 1) + ":" if type_name.upper().startswith(_NUMERIC_TYPES) else "-" * (width + 2)
             for (_, type_name), width in zip(columns, widths)]
    out.write("|" + "|".join(rules) + "|\n")
    for row in cells:
        out.write("| " + " | ".join(v + " " * (w - _width(v)) for v, w in zip(row, widths)) + " |\n")


def _rich_table(out: TextIO, columns: Columns, rows: list[tuple], total: int) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.ROUNDED, header_style="bold")
    for name, type_name in columns:
        header = Text(name, style="bold")
        header.append("\n" + type_name.lower(), style="dim")
        numeric = type_name.upper().startswith(_NUMERIC_TYPES)
        table.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        table.add_row(*(Text("NULL", style="dim italic") if v is None else Text(format_value(v))
                        for v in row))
    console = Console(file=out, highlight=False, emoji=False, markup=False)
    if not console.is_terminal:
        # Piped output: never squeeze columns to 80 characters, print the table at full width.
        natural = console.measure(table, options=console.options.update_width(1_000_000)).maximum
        width = max(console.width, natural)
        console = Console(file=out, highlight=False, emoji=False, markup=False, width=width)
    console.print(table)
    noun = "row" if total == 1 else "rows"
    footer = f"{total} {noun}" + (f" ({len(rows)} shown)" if len(rows) < total else "")
    console.print(Text(footer, style="dim"))
