"""The `duckanon` command line: an interactive shell, or one-shot runs of SQL text or a script.

    duckanon [FILE.duckdb]                  interactive shell (in-memory database without FILE)
    duckanon FILE.duckdb -c "SQL; SQL"      run the statements, print each result, exit (-c repeats)
    duckanon FILE.duckdb -f script.sql      run a script file ('-' reads standard input)
    duckanon ... --csv                      print results as CSV instead of tables

Input is read as the DuckDB CLI reads it, in the shell and in -c/-f text alike: a line starting
with '.' where a statement would start is a dot command (.mode, .output, .read, .timer, ...),
anything else is SQL up to a ';'. Every statement runs on its own so each result is printed.
Errors print as one `Error: ...` line on stderr; in -c/-f mode the first error stops the run with
exit code 1, in the shell it continues.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Sequence

import duckdb

import duckanon
from duckanon.progress import ShellProgress
from rich.console import Console
from duckanon.errors import AnonymizeError
from duckanon.shell_output import DEFAULT_MAX_ROWS, MODES, Printer, clock, run_time
from duckanon.sql import split_statements

PROMPT = "duckanon> "
CONTINUATION = "   ...> "
HISTORY_FILE = "~/.duckanon_history"
HISTORY_LENGTH = 1000
MAX_READ_DEPTH = 25  # .read inside .read: deep enough for real scripts, stops a file reading itself

HELP_TEXT = """\
Statements end with ';' and may span several lines. Besides DuckDB SQL:
  ANONYMIZE <table> [INTO <target>] WITH (k = 3, qi = (col, ...), sensitive = col, ...);
      publishes <target> (default <table>_anon) meeting k, l, t or a risk model (k_map,
      average_risk, ...) by cell suppression or generalization (hierarchies = (...), or
      method = mondrian: ranges and sets), removing rows up to suppression_limit; identifiers =
      (...) and mask = (...) drop or mask direct identifiers; every option: docs/statement.md
  EXPLAIN ANONYMIZE ...;   (a dry run: plan, estimates; k/l/t as a list compares values)
  REPORT <published> FROM <original> [WITH (file = 'r.html', risk_threshold = 0.2)];
  REFRESH <published> | REFRESH ALL [WITH (mode = 'stable')];
      publish a recorded release again from its source's current rows
  SELECT * FROM duckanon_publications();   (every recorded release and whether it is stale)
  SELECT * FROM anon_report('t_anon', ['col', ...], 'sensitive');   (and the other anon_* checks)
  ... WITH (engine = 'spark', ...) runs the statement on Spark (pip install 'duckanon[spark]')
Commands (a line starting with '.'; they also work in -c text, -f scripts and .read files):
  .help               show this message
  .tables [PATTERN]   list tables and views (PATTERN uses LIKE wildcards)
  .schema [PATTERN]   show the CREATE statements of tables, views and indexes
  .mode [MODE]        print results as table, csv, line, json or markdown (no MODE: show it)
  .output [FILE]      send results to FILE (truncated first); without FILE, back to stdout
  .once FILE          send only the next command's results to FILE
  .read FILE          run the statements and commands in FILE
  .timer on|off       print the run time after each statement
  .quit, .exit        leave the shell (Ctrl-D also works; Ctrl-C clears the current statement)"""

# What running input (a statement, a command, a script) tells its caller.
OK, FAILED, QUIT = "ok", "failed", "quit"
_USAGE = {".help": "", ".tables": "[PATTERN]", ".schema": "[PATTERN]", ".mode": "[MODE]", ".output": "[FILE]",
          ".once": "FILE", ".read": "FILE", ".timer": "on|off"}


# Tables, views (not DuckDB's own) and indexes with the CREATE statement DuckDB keeps for each; an
# index goes by its table's name, so `.schema t` also shows t's indexes, as in the DuckDB CLI.
_CATALOG = """(
    SELECT database_name, schema_name, table_name AS name, 'table' AS kind, sql FROM duckdb_tables()
    UNION ALL SELECT database_name, schema_name, view_name, 'view', sql FROM duckdb_views() WHERE NOT internal
    UNION ALL SELECT database_name, schema_name, table_name, 'index', sql FROM duckdb_indexes())"""


def progress_delay() -> float:
    """Seconds a statement runs before the shell shows its progress line: 1, or
    DUCKANON_PROGRESS_DELAY (0 shows every phase from the start)."""
    try:
        return max(0.0, float(os.environ.get("DUCKANON_PROGRESS_DELAY", "1")))
    except ValueError:
        return 1.0


class CommandError(Exception):
    """A dot command that cannot run: printed as one `Error: ...` line."""


# --------------------------------------------------------------------------- statement splitting


def _tokenize(text: str):
    from duckanon.sql.parser import AnonDialect

    return AnonDialect().tokenize(text)


def split_script(text: str) -> list[str]:
    """The statements of `text`, in order, each without its terminating ';'."""
    return [piece.strip() for piece, _ in split_statements(text, always=True) if piece.strip()]


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


def _is_blank(line: str) -> bool:
    """True for a line of only whitespace and closed comments (skipped where a statement starts)."""
    from sqlglot.errors import TokenError

    if not line.strip():
        return True
    try:
        return not _tokenize(line)
    except TokenError:
        return False  # an unterminated comment or string starts a statement


# --------------------------------------------------------------------------- output


def error_line(error: BaseException) -> str:
    """One line for any error: DuckDB's message up to its 'LINE n:' context, whitespace collapsed."""
    if isinstance(error, (AnonymizeError, duckdb.Error, CommandError)):
        message = str(error)
    else:
        message = f"{type(error).__name__}: {error}"
    head = " ".join(message.strip().split("\n\n", 1)[0].split())
    return head or type(error).__name__


def print_error(error: BaseException) -> None:
    print(f"Error: {error_line(error)}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- running statements


class Session:
    """Runs input the way the DuckDB CLI does: SQL statements and dot commands, line by line.

    With `bail` (the -c/-f modes) the first error stops the rest of the input; without it (the
    shell) input goes on after an error."""

    def __init__(self, con: duckanon.Connection, printer: Printer, bail: bool = False):
        self.con = con
        self.printer = printer
        self.bail = bail
        self.timer = False
        self.interrupted = False
        self._once: int | None = None  # after .once: the .read depth whose next command ends it
        self._depth = 0  # .read nesting

    def run_statement(self, statement: str) -> None:
        """Run one statement and print its result; errors propagate. A statement running for
        more than a second shows its phase and elapsed time on a terminal's stderr."""
        console = Console(stderr=True)
        if console.is_terminal:
            with ShellProgress(console, delay=progress_delay()) as shown:
                cursor = duckanon.execute(self.con.duckdb, statement, progress=shown)
        else:
            cursor = duckanon.execute(self.con.duckdb, statement)
        self.printer.result(cursor)

    def run_text(self, text: str) -> bool:
        """Run every SQL statement of `text`; returns False if one failed."""
        ok = True
        for statement in split_script(text):
            started = clock()
            try:
                self.run_statement(statement)
            except BrokenPipeError:
                raise
            except KeyboardInterrupt:
                print("Error: interrupted (the statement was rolled back)", file=sys.stderr, flush=True)
                self.interrupted = True
                return False
            except Exception as error:  # AnonymizeError, duckdb.Error, anything else: one line
                print_error(error)
                ok = False
                if self.bail:
                    return False
            finally:
                if self.timer and not self.interrupted:  # on stdout even with .output, as in DuckDB
                    print(run_time(started), flush=True)
        return ok

    # input, line by line ---------------------------------------------------------------------

    def feed(self, buffer: list[str], line: str) -> str:
        """Take one input line: a dot command where a statement would start runs at once, SQL
        collects in `buffer` until it ends with ';' and then runs. Returns OK, FAILED or QUIT.
        `line` keeps its line ending, so SQL text reaches DuckDB as written."""
        if not buffer:
            stripped = line.strip()
            if stripped.startswith("."):
                return self.command(stripped)
            if _is_blank(stripped):
                return OK
        buffer.append(line)
        if ";" not in line or not is_complete("".join(buffer)):
            return OK
        return self.flush(buffer)

    def flush(self, buffer: list[str]) -> str:
        """Run what `buffer` holds (at the end of input, even without a final ';')."""
        text = "".join(buffer).strip()
        buffer.clear()
        if not text:
            return OK
        ok = self.run_text(text)
        self._end_once()
        return OK if ok else FAILED

    def run_script(self, text: str) -> str:
        """Run -c text, a -f script or a .read file; returns OK, FAILED or QUIT (a .quit line)."""
        buffer: list[str] = []
        status = OK
        lines = text.split("\n")
        for number, line in enumerate(lines, 1):
            result = self.feed(buffer, line if number == len(lines) else line + "\n")
            if result == QUIT:
                return QUIT
            if result == FAILED:
                status = FAILED
                if self.bail or self.interrupted:
                    return FAILED
        return FAILED if self.flush(buffer) == FAILED else status

    # dot commands ----------------------------------------------------------------------------

    def command(self, line: str) -> str:
        """Run a dot command; errors print as one line. Returns OK, FAILED or QUIT."""
        try:
            lexer = shlex.shlex(line, posix=True)
            lexer.whitespace_split, lexer.escape, lexer.commenters = True, "", ""  # keep C:\paths
            name, *args = list(lexer)
        except ValueError as error:  # e.g. an unclosed quote
            print_error(CommandError(f"cannot read the command: {error}"))
            return FAILED
        name = name.lower()
        if name in (".quit", ".exit", ".q"):
            return QUIT
        try:
            status = self._command(name, args)
        except BrokenPipeError:
            raise
        except Exception as error:  # CommandError, duckdb.Error, OSError: one line
            print_error(error)
            status = FAILED
        finally:
            if name != ".once":
                self._end_once()
        return status

    def _command(self, name: str, args: list[str]) -> str:
        usage = _USAGE.get(name)
        if usage is None:
            raise CommandError(f"unknown command {name} (try .help)")
        words = usage.split()
        if not sum(not word.startswith("[") for word in words) <= len(args) <= len(words):
            raise CommandError(f"usage: {name} {usage}".strip())
        arg = args[0] if args else None
        if name == ".help":
            print(HELP_TEXT, flush=True)
        elif name == ".tables":
            self.tables(arg)
        elif name == ".schema":
            self.schema(arg)
        elif name == ".mode" and arg is None:
            print(f"current output mode: {self.printer.mode}", flush=True)
        elif name == ".mode":
            if arg.lower() not in MODES:
                raise CommandError(f"unknown mode {arg}: use one of {', '.join(MODES)}")
            self.printer.mode = arg.lower()
        elif name in (".output", ".once"):
            self.output(arg, once=name == ".once")
        elif name == ".read":
            return self.read(arg)
        elif name == ".timer":
            if arg.lower() not in ("on", "off"):
                raise CommandError(f"usage: {name} {usage}")
            self.timer = arg.lower() == "on"
        return OK

    def tables(self, pattern: str | None) -> None:
        self.printer.result(self.con.duckdb.execute(f"""
            SELECT CASE WHEN schema_name = current_schema() AND database_name = current_database()
                        THEN name ELSE database_name || '.' || schema_name || '.' || name END AS name, kind
            FROM {_CATALOG} WHERE kind <> 'index' AND (? IS NULL OR name LIKE ?)
            ORDER BY database_name <> current_database(), schema_name <> current_schema(), 1""",
            [pattern, pattern]))

    def schema(self, pattern: str | None = None) -> None:
        for (sql,) in self.con.duckdb.execute(f"""
                SELECT sql FROM {_CATALOG} WHERE sql IS NOT NULL AND (? IS NULL OR name LIKE ?)
                ORDER BY database_name <> current_database(), schema_name <> current_schema(),
                         database_name, schema_name, sql""", [pattern, pattern]).fetchall():
            self.printer.text(sql.strip())

    def output(self, path: str | None, once: bool = False) -> None:
        """Send results to `path` (truncated, as the DuckDB CLI does) or, with None, to stdout."""
        self._once = None
        try:
            self.printer.redirect(path)
        except OSError as error:
            raise CommandError(f'cannot open "{path}": {error.strerror or error}') from None
        if once and path is not None:
            self._once = self._depth

    def _end_once(self) -> None:
        # by depth: `.once FILE` then `.read x.sql` sends all of x.sql's results to FILE
        if self._once == self._depth:
            self._once = None
            self.printer.redirect(None)

    def read(self, path: str) -> str:
        """Run a file's statements and commands as if typed; a .quit in it ends only the file."""
        if self._depth >= MAX_READ_DEPTH:
            raise CommandError(f".read nested more than {MAX_READ_DEPTH} deep (does {path} read itself?)")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise CommandError(f'cannot open "{path}": {error.strerror or error}') from None
        except UnicodeDecodeError as error:
            raise CommandError(f'cannot read "{path}": {error}') from None
        self._depth += 1
        try:
            status = self.run_script(text)
        finally:
            self._depth -= 1
        return FAILED if status == FAILED else OK


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
                session.interrupted = False
                status = session.feed(buffer, line + "\n")
            except EOFError:
                if interactive:
                    print(flush=True)
                # input ended inside a statement: run what there is (DuckDB reports if incomplete)
                failed |= session.flush(buffer) == FAILED
                break
            except KeyboardInterrupt:
                print("^C" if interactive else "", flush=True)
                buffer.clear()
                continue
            if status == QUIT:
                break
            failed |= status == FAILED
    finally:
        _save_history(history)
    # Piped input reports failure through the exit code, like sqlite3; a terminal session does not.
    return 1 if failed and not interactive else 0


# --------------------------------------------------------------------------- entry point


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="duckanon",
        description="DuckDB shell that also runs ANONYMIZE, EXPLAIN ANONYMIZE, REPORT and REFRESH: publish a table "
                    "meeting k-anonymity, l-diversity, t-closeness or ARX's risk models by generalization (over "
                    "hierarchies, or Mondrian's ranges), cell suppression and row suppression, with masked "
                    "identifiers; "
                    "duckanon_publications() lists the releases. Options: docs/statement.md",
    )
    parser.add_argument("database", nargs="?", default=None,
                        help="DuckDB database file (created if missing); in-memory when omitted")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-c", "--command", metavar="SQL", action="append",
                        help="run these statements and dot commands, print each result, and exit; "
                             "repeat -c to run several in order")
    source.add_argument("-f", "--file", metavar="SCRIPT", help="run a SQL script file ('-' for stdin) and exit")
    parser.add_argument("--csv", action="store_true", help="print results as CSV instead of tables")
    parser.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS, metavar="N",
                        help=f"rows shown per table result (default {DEFAULT_MAX_ROWS}; other modes print all)")
    parser.add_argument("--read-only", action="store_true", help="open the database read-only")
    parser.add_argument("--version", action="version",
                        version=f"duckanon {duckanon.__version__} (DuckDB {duckdb.__version__})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    printer = Printer("csv" if args.csv else "table", max(1, args.max_rows))

    scripts = None
    if args.command is not None:
        scripts = args.command
    elif args.file is not None:
        try:
            scripts = [sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")]
        except (OSError, UnicodeDecodeError) as error:
            print(f"Error: cannot read {args.file}: {getattr(error, 'strerror', None) or error}",
                  file=sys.stderr, flush=True)
            return 1

    try:
        con = duckanon.connect(args.database or ":memory:", read_only=args.read_only)
    except Exception as error:
        print_error(error)
        return 1

    session = Session(con, printer, bail=scripts is not None)
    try:
        if scripts is not None:
            for script in scripts:
                status = session.run_script(script)
                if status != OK:
                    return 1 if status == FAILED else 0
            return 0
        interactive = sys.stdin.isatty() if hasattr(sys.stdin, "isatty") else False
        return shell(session, interactive)
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        try:  # as the Python docs advise: keep the interpreter's final flush from failing again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    finally:
        for close in (lambda: printer.redirect(None), con.close):
            try:
                close()
            except Exception:
                pass


if __name__ == "__main__":
    raise SystemExit(main())
