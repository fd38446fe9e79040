"""The one reader of ARX hierarchy CSV files, for generalization hierarchies (`from_csv`) and for
the sensitive attribute's tree of t-closeness (`read_sa_hierarchy`)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sqlglot import exp

from duckanon.backends import BackendError, backend_for
from duckanon.errors import AnonymizeError
from duckanon.hierarchy.binding import Hierarchy
from duckanon.hierarchy.rows import TableHierarchy
from duckanon.solver.emd import check_tree


def from_csv(path: str | Path, con=None) -> Hierarchy:
    """An ARX hierarchy file: `;`-separated, no header, CRLF or LF, optionally `"`-quoted.

    With a DuckDB connection `con` the file is read by DuckDB (`read_blob`), so the session's file
    access rules apply (`SET enable_external_access = false` refuses it), and error messages name
    line numbers instead of quoting the file. This is how SQL statements read hierarchy files.
    """
    rows, lines = read_rows(path, con)
    name = str(Path(path)) if con is None else str(path)
    return TableHierarchy(rows, name, lines=lines, origin=("file", name))


def read_sa_hierarchy(con, path: str) -> list[list[str]]:
    """The rows of the ARX hierarchy file of a sensitive attribute (option `sa_hierarchy`), read
    through DuckDB (its file access rules apply) and checked as duckanon.solver.emd.SAHierarchy
    checks them: blank rows are ignored, every row has the same number of columns, and each node
    (a label at a level) has one parent. Errors name line numbers, never the file's text. The
    rows are for `SAHierarchy.from_rows`."""
    rows, lines = read_rows(path, con)
    kept = [(row, line) for row, line in zip(rows, lines) if any(cell.strip() for cell in row)]
    check_tree([row for row, _ in kept], path, [line for _, line in kept], unit="lines")
    return [row for row, _ in kept]


def read_rows(path: str | Path, con=None) -> tuple[list[list[str]], list[int]]:
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
    read_blob = exp.Table(this=exp.Anonymous(this="read_blob", expressions=[exp.Placeholder()]))
    try:
        found = backend_for(con).rows(exp.select("content").from_(read_blob), [path])
    except BackendError as e:  # permission, IO, ...: DuckDB's first line says which
        raise AnonymizeError(f"cannot read hierarchy file {path}: {e}") from None
    if not found:
        raise AnonymizeError(f"cannot read hierarchy file {path}: no such file")
    if len(found) > 1:
        raise AnonymizeError(f"cannot read hierarchy file {path}: the name matches {len(found)} files")
    return bytes(found[0][0])
