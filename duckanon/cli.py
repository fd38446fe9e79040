"""The `duckanon` command line: an interactive shell, or one-shot runs of SQL text or a script.

    duckanon [FILE.duckdb]                  interactive shell (in-memory database without FILE)
    duckanon FILE.duckdb -c "SQL; SQL"      run the statements, print each result, exit
    duckanon FILE.duckdb -f script.sql      run a script file ('-' reads standard input)
    duckanon ... --csv                      print results as CSV instead of tables

Every statement runs on its own so each result is printed. Errors print as one `Error: ...` line
on stderr; in -c/-f mode the first error stops the run with exit code 1, in the shell it continues.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence, TextIO

import duckdb

import duckanon
from duckanon.progress import ShellProgress
from rich.console import Console
from duckanon.errors import AnonymizeError
from duckanon.sql import split_statements

PROMPT = "duckanon> "
CONTINUATION = "   ...> "
HISTORY_FILE = "~/.duckanon_history"
HISTORY_LENGTH = 1000
DEFAULT_MAX_ROWS = 40
_FETCH_BATCH = 1024

HELP_TEXT = """\
Statements end with ';' and may span several lines. Besides DuckDB SQL:
  ANONYMIZE <table> [INTO <target>] WITH (k = 3, qi = (col, ...), sensitive = col, ...);
  EXPLAIN ANONYMIZE ...;   (a dry run: plan, estimates; k/l/t as a list compares values)
  REPORT <published> FROM <original> [WITH (file = 'r.html', risk_threshold = 0.2)];
  ... WITH (engine = 'spark', ...) runs the statement on Spark (pip install 'duckanon[spark]')
Commands:
  .help               show this message
  .tables [PATTERN]   list tables and views (PATTERN uses LIKE wildcards)
  .mode table|csv     choose how results are printed
  .quit, .exit        leave the shell (Ctrl-D also works; Ctrl-C clears the current statement)"""

_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL")
# One-column status results DuckDB returns for DDL, SET, BEGIN, ...: not worth printing when empty.
_STATUS_COLUMNS = ("Count", "Success")


# --------------------------------------------------------------------------- statement splitting


def _tokenize(text: str):
    from duckanon.sql.parser import AnonDialect

    return AnonDialect().tokenize(text)


def _split_plain(text: str) -> list[str]:
    """Split SQL at ';' tokens (not inside strings or comments); comment-only pieces are dropped."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    try:
        tokens = _tokenize(text)
    except TokenError:
        stripped = text.strip()
        return [stripped] if stripped else []  # let DuckDB report what it cannot read
    pieces: list[str] = []
    begin = 0
    seen_token = False
    for token in list(tokens) + [None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            end = token.start if token is not None else len(text)
            piece = text[begin:end].strip()
            if piece and seen_token:
                pieces.append(piece)
            begin = end + 1
            seen_token = False
        else:
            seen_token = True
    return pieces


def split_script(text: str) -> list[str]:
    """The statements of `text`, in order, each without its terminating ';'."""
    pieces = split_statements(text)
    if any(ours for _, ours in pieces):
        return [piece for piece, _ in pieces]
    return _split_plain(text)


def is_complete(text: str) -> bool:
    """True when buffered shell input ends with a ';' token (outside strings and comments)."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    if ";" not in text:
        return False
    try:
        tokens = _tokenize(text)
    except TokenError:
        return False  # e.g. an unterminated string or comment: keep reading
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


# --------------------------------------------------------------------------- output


def error_line(error: BaseException) -> str:
    """One line for any error: DuckDB's message up to its 'LINE n:' context, whitespace collapsed."""
    if isinstance(error, (AnonymizeError, duckdb.Error)):
        message = str(error)
    else:
        message = f"{type(error).__name__}: {error}"
    head = message.strip().split("\n\n", 1)[0]
    head = " ".join(head.split())
    return head or type(error).__name__


def print_error(error: BaseException) -> None:
    print(f"Error: {error_line(error)}", file=sys.stderr, flush=True)


def _format_value(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Printer:
    """Prints query results as rich tables (`table` mode) or CSV (`csv` mode) on stdout."""

    def __init__(self, mode: str = "table", max_rows: int = DEFAULT_MAX_ROWS):
        self.mode = mode
        self.max_rows = max_rows

    def result(self, cursor) -> None:
        """Print the current result of a DuckDB cursor (nothing for statements without one)."""
        description = cursor.description
        if not description:
            return
        columns = [(str(d[0]), str(d[1])) for d in description]
        shown: list[tuple] = []
        total = 0
        limit = self.max_rows if self.mode == "table" else None
        while True:
            batch = cursor.fetchmany(_FETCH_BATCH)
            if not batch:
                break
            total += len(batch)
            if limit is None:
                shown.extend(batch)
            elif len(shown) < limit:
                shown.extend(batch[: limit - len(shown)])
        if total == 0 and len(columns) == 1 and columns[0][0] in _STATUS_COLUMNS:
            return
        self.rows(columns, shown, total)

    def rows(self, columns: Sequence[tuple[str, str]], rows: Iterable[tuple], total: int | None = None) -> None:
        rows = list(rows)
        total = len(rows) if total is None else total
        out = sys.stdout
        if self.mode == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow([name for name, _ in columns])
            for row in rows:
                writer.writerow(["" if v is None else _format_value(v) for v in row])
            out.flush()
            return
        self._rich_table(out, columns, rows, total)

    def _rich_table(self, out: TextIO, columns, rows, total: int) -> None:
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
            table.add_row(*(Text("NULL", style="dim italic") if v is None else Text(_format_value(v))
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
        out.flush()


# --------------------------------------------------------------------------- running statements


class Session:
    def __init__(self, con: duckanon.Connection, printer: Printer):
        self.con = con
        self.printer = printer

    def run_statement(self, statement: str) -> None:
        """Run one statement and print its result; errors propagate. A statement running for
        more than a second shows its phase and elapsed time on a terminal's stderr."""
        console = Console(stderr=True)
        if console.is_terminal:
            with ShellProgress(console):
                cursor = duckanon.execute(self.con.duckdb, statement)
        else:
            cursor = duckanon.execute(self.con.duckdb, statement)
        self.printer.result(cursor)

    def run_text(self, text: str, stop_on_error: bool) -> bool:
        """Run every statement of `text`; returns False if one failed."""
        ok = True
        for statement in split_script(text):
            try:
                self.run_statement(statement)
            except BrokenPipeError:
                raise
            except KeyboardInterrupt:
                print("Error: interrupted (the statement was rolled back)", file=sys.stderr, flush=True)
                ok = False
                if stop_on_error:
                    return False
                break
            except Exception as error:  # AnonymizeError, duckdb.Error, anything else: one line
                print_error(error)
                ok = False
                if stop_on_error:
                    return False
        return ok

    # dot-commands ----------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Handle a dot-command; returns False when the shell should exit."""
        parts = line.split()
        name, args = parts[0].lower(), parts[1:]
        if name in (".quit", ".exit", ".q"):
            return False
        if name == ".help":
            print(HELP_TEXT, flush=True)
        elif name == ".tables":
            self.tables(args[0] if args else None)
        elif name == ".mode":
            if len(args) != 1 or args[0].lower() not in ("table", "csv"):
                print(f"Error: usage: .mode table|csv (now {self.printer.mode})", file=sys.stderr, flush=True)
            else:
                self.printer.mode = args[0].lower()
        else:
            print(f"Error: unknown command {parts[0]} (try .help)", file=sys.stderr, flush=True)
        return True

    def tables(self, pattern: str | None) -> None:
        query = """
            SELECT CASE WHEN schema_name = current_schema() AND database_name = current_database()
                        THEN name ELSE database_name || '.' || schema_name || '.' || name END AS name,
                   kind
            FROM (SELECT database_name, schema_name, table_name AS name, 'table' AS kind FROM duckdb_tables()
                  UNION ALL
                  SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() WHERE NOT internal)
            WHERE ? IS NULL OR name LIKE ?
            ORDER BY database_name <> current_database(), schema_name <> current_schema(), 1
        """
        try:
            cursor = self.con.duckdb.execute(query, [pattern, pattern])
            self.printer.result(cursor)
        except Exception as error:
            print_error(error)


# --------------------------------------------------------------------------- the shell


def _setup_readline():
    try:
        import readline
    except ImportError:  # e.g. Windows without pyreadline
        return None
    path = os.path.expanduser(HISTORY_FILE)
    try:
        readline.read_history_file(path)
    except Exception:  # unreadable/unwritable history is not an error
        pass
    readline.set_history_length(HISTORY_LENGTH)
    return readline, path


def _save_history(state) -> None:
    if state is None:
        return
    readline, path = state
    try:
        readline.write_history_file(path)
    except Exception:  # unreadable/unwritable history is not an error
        pass


def shell(session: Session, interactive: bool) -> int:
    """Read statements from the terminal (with prompts and history) or from piped stdin (without)."""
    history = None
    if interactive:
        history = _setup_readline()
        print(f"duckanon {duckanon.__version__} (DuckDB {duckdb.__version__}). "
              "Enter .help for usage hints.", flush=True)
    buffer: list[str] = []
    failed = False
    try:
        while True:
            try:
                if interactive:
                    line = input(CONTINUATION if buffer else PROMPT)
                else:
                    line = sys.stdin.readline()
                    if not line:
                        raise EOFError
                    line = line.rstrip("\n").rstrip("\r")
            except EOFError:
                if interactive:
                    print(flush=True)
                if buffer and "".join(buffer).strip():
                    # input ended inside a statement: run what there is (DuckDB reports if incomplete)
                    failed |= not session.run_text("\n".join(buffer), stop_on_error=False)
                break
            except KeyboardInterrupt:
                print("^C" if interactive else "", flush=True)
                buffer = []
                continue
            if not buffer and line.strip().startswith("."):
                if not session.command(line.strip()):
                    break
                continue
            if not buffer and not line.strip():
                continue
            buffer.append(line)
            text = "\n".join(buffer)
            if is_complete(text):
                buffer = []
                failed |= not session.run_text(text, stop_on_error=False)
    finally:
        _save_history(history)
    # Piped input reports failure through the exit code, like sqlite3; a terminal session does not.
    return 1 if failed and not interactive else 0


# --------------------------------------------------------------------------- entry point


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="duckanon",
        description="DuckDB shell that also understands ANONYMIZE (k-anonymity, l-diversity, t-closeness).",
    )
    parser.add_argument("database", nargs="?", default=None,
                        help="DuckDB database file (created if missing); in-memory when omitted")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-c", "--command", metavar="SQL", help="run these statements, print each result, and exit")
    source.add_argument("-f", "--file", metavar="SCRIPT", help="run a SQL script file ('-' for stdin) and exit")
    parser.add_argument("--csv", action="store_true", help="print results as CSV instead of tables")
    parser.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS, metavar="N",
                        help=f"rows shown per table result (default {DEFAULT_MAX_ROWS}; CSV prints all)")
    parser.add_argument("--read-only", action="store_true", help="open the database read-only")
    parser.add_argument("--version", action="version",
                        version=f"duckanon {duckanon.__version__} (DuckDB {duckdb.__version__})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    printer = Printer("csv" if args.csv else "table", max(1, args.max_rows))

    script = None
    if args.command is not None:
        script = args.command
    elif args.file is not None:
        try:
            script = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            print(f"Error: cannot read {args.file}: {getattr(error, 'strerror', None) or error}",
                  file=sys.stderr, flush=True)
            return 1

    try:
        con = duckanon.connect(args.database or ":memory:", read_only=args.read_only)
    except Exception as error:
        print_error(error)
        return 1

    try:
        session = Session(con, printer)
        if script is not None:
            return 0 if session.run_text(script, stop_on_error=True) else 1
        interactive = sys.stdin.isatty() if hasattr(sys.stdin, "isatty") else False
        return shell(session, interactive)
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        try:  # as the Python docs advise: keep the interpreter's final flush from failing again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    finally:
        try:
            con.close()
        except Exception:
            pass


if __name__ == "__main__":
    raise SystemExit(main())
