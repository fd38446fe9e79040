"""Python entry points: a connection that understands our statements, and helpers for plain ones.

`Connection` wraps a `duckdb.DuckDBPyConnection`: `execute` and `sql` run our statements
themselves and hand everything else to DuckDB verbatim; any other attribute is DuckDB's own.
Both see the caller's DataFrames and Arrow tables by variable name, as DuckDB's own `execute`
and `sql` do (its replacement scans): see `Caller`.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import re
import sys
import threading
from dataclasses import dataclass

import duckdb
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from duckanon import macros
from duckanon.pipeline import registry
from duckanon.backends import BackendError, DuckDBBackend
from duckanon.statements import Summary, run_anonymize, run_statement
from duckanon.errors import AnonymizeError, one_line
from duckanon.sql import AnonDialect, split_statements
from duckanon.sql.parser import strip_explain

_REGISTERED_UDF = "__duckanon_anonymize"
# A failed run comes back from the Python UDF as this prefix + the message, and the `anonymize`
# macro turns it into DuckDB's error(): a Python exception raised inside a UDF would reach the
# user as several lines with a traceback ("At: .../models.py(49)").
_UDF_ERROR = "!error "  # a summary is JSON and starts with "{"
_ANONYMIZE_MACRO = (
    "CREATE OR REPLACE TEMP MACRO anonymize(statement_text) AS "
    # the lambda binds the UDF's result once (a macro argument used twice would run it twice)
    f"list_transform([{_REGISTERED_UDF}(statement_text)], lambda r: CASE WHEN starts_with(r, '{_UDF_ERROR}') "
    f"THEN error(r[{len(_UDF_ERROR) + 1}:]) ELSE r END)[1]"
)
IN_TRANSACTION = ("anonymize() cannot run inside an open transaction: run ANONYMIZE through duckanon's "
                  "connection.execute, or COMMIT first")


# --- parameters of our statements -------------------------------------------------------------

@dataclass
class _Placeholder:
    start: int  # character span in the statement text (inclusive end, as sqlglot's tokens)
    end: int
    key: int | str  # 1-based position (?, ?2, $2) or name ($name)
    text: str  # as written: ?, $1, $name
    option: str | None  # the option it gives a value to (None: before WITH, e.g. a table name)


def _placeholders(text: str) -> list[_Placeholder]:
    """The parameter placeholders of one ANONYMIZE / EXPLAIN ANONYMIZE / REPORT text: `?` (numbered
    in order), `?n`, `$n` and `$name`, as DuckDB reads them. Text the tokenizer cannot read has
    none here (the parser then reports the real problem)."""
    if "?" not in text and "$" not in text:
        return []
    _, body = strip_explain(text)  # EXPLAIN is blanked, positions are kept
    try:
        tokens = AnonDialect().tokenize(body)
    except TokenError:
        return []
    found: list[_Placeholder] = []
    depth, options_started, option, auto = 0, False, None, 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.token_type
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        glued = after is not None and after.start == token.end + 1  # `$1`, not `$ 1`
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif kind == TokenType.WITH and depth == 0:
            options_started = True
        elif kind == TokenType.EQ and options_started and depth <= 1 and i > 0:
            option = tokens[i - 1].text.lower()
        elif kind == TokenType.PLACEHOLDER or (kind == TokenType.PARAMETER and token.text == "$" and glued):
            if glued and after.token_type == TokenType.NUMBER and after.text.isdigit():
                key: int | str = int(after.text)
                end, i = after.end, i + 1
            elif kind == TokenType.PARAMETER:
                if not after.text.replace("_", "").isalnum():
                    i += 1
                    continue
                key, end, i = after.text, after.end, i + 1
            else:
                auto += 1
                key, end = auto, token.end
            found.append(_Placeholder(token.start, end, key, body[token.start:end + 1],
                                      option if options_started else None))
        i += 1
    return found


def _literal(value, shown: str) -> str:
    """`value` as an SQL literal (never SQL text of the caller's): strings quoted, numbers as numbers,
    lists and tuples as [...] lists of literals."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        if not (value.is_finite() if isinstance(value, decimal.Decimal) else math.isfinite(value)):
            raise AnonymizeError(f"parameter {shown} is {value}: an option value must be a finite number")
        return format(value, "f") if isinstance(value, decimal.Decimal) else repr(float(value))
    if isinstance(value, str):
        return exp.Literal.string(value).sql(dialect=AnonDialect)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(item, shown) for item in value) + "]"
    raise AnonymizeError(f"parameter {shown} has type {type(value).__name__}: an option value must be a number, "
                         "a string, a boolean, None, or a list of them")


_NO_PADDING = set(" \t\r\n(),[]")


def bind_parameters(text: str, parameters) -> str:
    """The ANONYMIZE (or EXPLAIN ANONYMIZE, REPORT) text with its placeholders replaced by SQL
    literals of `parameters` (a list or tuple for `?`/`$1`, a dict for `$name`), as DuckDB binds a
    prepared statement's. Only option values can be parameters."""
    found = _placeholders(text)
    if parameters is None:
        if found:
            first = found[0]
            where = f"{first.option} = {first.text}" if first.option else first.text
            raise AnonymizeError(f"ANONYMIZE has a parameter ({where}) but no values were given: "
                                 "pass them as execute(text, [values])")
        return text
    before_with = next((p for p in found if p.option is None), None)
    if before_with is not None:
        raise AnonymizeError(f"ANONYMIZE takes parameters only as option values: write the table name itself, "
                             f"not {before_with.text}")
    named = [p for p in found if isinstance(p.key, str)]
    if named and len(named) != len(found):
        raise AnonymizeError("ANONYMIZE mixes named ($name) and positional (?, $1) parameters")
    if named:
        if not isinstance(parameters, dict):
            raise AnonymizeError(f"ANONYMIZE has named parameters ({named[0].text}): pass the values as a dict")
        names = {p.key for p in named}
        missing = sorted(name for name in names if name not in parameters)
        extra = sorted(str(name) for name in parameters if name not in names)
        if missing or extra:
            what = f"no value for ${missing[0]}" if missing else f"no parameter ${extra[0]}"
            raise AnonymizeError(f"ANONYMIZE parameters and values do not match: {what}")
        values = parameters
    elif isinstance(parameters, dict):
        if found:
            raise AnonymizeError(f"ANONYMIZE has positional parameters ({found[0].text}): pass the values as a list")
        if parameters:
            raise AnonymizeError("ANONYMIZE has no named parameters, but a dict of values was given")
        values = {}
    else:
        if isinstance(parameters, (str, bytes)) or not hasattr(parameters, "__len__"):
            raise AnonymizeError(f"parameters must be a list or tuple of values, got {type(parameters).__name__}")
        used = {p.key for p in found}
        if used != set(range(1, len(parameters) + 1)):
            raise AnonymizeError(f"ANONYMIZE has {len(used)} parameter(s) but {len(parameters)} value(s) were given")
        values = {i + 1: value for i, value in enumerate(parameters)}
    out, last = [], 0
    for p in found:
        literal = _literal(values[p.key], p.text)
        # a space where the literal would otherwise run into the text around it (e.g. `-?` and -5: `--5`)
        if p.start > 0 and text[p.start - 1] not in _NO_PADDING:
            literal = " " + literal
        if p.end + 1 < len(text) and text[p.end + 1] not in _NO_PADDING:
            literal += " "
        out += [text[last:p.start], literal]
        last = p.end + 1
    return "".join(out) + text[last:]


# --- anonymize() inside transactions ---------------------------------------------------------------

def _calls_anonymize(text: str) -> bool:
    """Whether a plain statement calls the SQL function anonymize(...) (read from tokens, so a
    string or a comment that mentions it does not count)."""
    if "anonymize" not in text.lower():
        return False
    try:
        tokens = AnonDialect().tokenize(text)
    except TokenError:
        return False  # DuckDB reports what it cannot read
    return any(token.text.lower() == "anonymize" and after.token_type == TokenType.L_PAREN
               and token.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
               for token, after in zip(tokens, tokens[1:]))


def _in_open_transaction(con) -> bool:
    try:
        return DuckDBBackend(con).in_explicit_transaction()
    except duckdb.Error:  # e.g. an aborted transaction: the statement itself then gets DuckDB's error
        return False


def _refuse_in_transaction(con, piece: str) -> None:
    # The anonymize() function runs on a cursor of its own (a UDF cannot run SQL on the connection
    # whose query calls it): inside the caller's transaction it would neither see the caller's
    # uncommitted tables nor be undone by its ROLLBACK.
    if _calls_anonymize(piece) and _in_open_transaction(con):
        raise AnonymizeError(IN_TRANSACTION)


# --- scripts -------------------------------------------------------------------------------------

# --- the caller's Python objects (DuckDB's replacement scans) ------------------------------------------

# What DuckDB's replacement scans read from a Python variable that a statement names where no table
# or view carries the name: these modules' types, each looked up only if the program imported its
# module (so without pandas or polars installed, such frames simply are not seen).
PYTHON_TABLE_TYPES = {
    "pandas": ("DataFrame",),
    "polars": ("DataFrame", "LazyFrame"),
    "pyarrow": ("Table", "RecordBatch", "RecordBatchReader"),
    "pyarrow.dataset": ("Dataset", "Scanner"),
}
# DuckDB calls (from the frame Caller.run makes) with the caller's locals beside these names
_CALLS = {
    ("execute", False): compile("__duckanon_con.execute(__duckanon_text)", "<duckanon>", "eval"),
    ("execute", True): compile("__duckanon_con.execute(__duckanon_text, __duckanon_values)", "<duckanon>", "eval"),
    ("sql", False): compile("__duckanon_con.sql(__duckanon_text)", "<duckanon>", "eval"),
    ("sql", True): compile("__duckanon_con.sql(__duckanon_text, params=__duckanon_values)", "<duckanon>", "eval"),
}


def _is_duckanon(frame) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name == "duckanon" or name.startswith("duckanon.")


def is_python_table(value) -> bool:
    """Whether DuckDB reads `value` as a table by its variable's name (PYTHON_TABLE_TYPES)."""
    for module_name, names in PYTHON_TABLE_TYPES.items():
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, tuple(getattr(module, n) for n in names if hasattr(module, n))):
            return True
    return False


class Caller:
    """The Python frame that called duckanon (the first frame outside the package), whose variables
    a statement may read by name as DuckDB's replacement scans read them: the frame's locals, then
    its globals, and with `SET python_scan_all_frames = true` the frames that called it, in turn;
    none with `python_enable_replacements` or `enable_external_access` off. A table or view of the
    name always wins. Made where the caller enters duckanon (in the caller's thread)."""

    def __init__(self):
        frame = sys._getframe(1)
        while frame is not None and _is_duckanon(frame):
            frame = frame.f_back
        self.frame = frame

    def run(self, con, method: str, text: str, values=None):
        """`con.execute(text[, values])` or `con.sql(...)` (`method`) for plain SQL, run by DuckDB
        from a frame holding the caller's locals and globals: DuckDB's replacement scans look at
        the innermost Python frame, which would otherwise be duckanon's. DuckDB resolves every
        name itself (tables first, its settings, its types, a relation's lazy reads in DuckDB 2)."""
        names = {"__duckanon_con": con, "__duckanon_text": text, "__duckanon_values": values}
        if self.frame is None:
            return eval(_CALLS[method, values is not None], {}, names)  # noqa: S307 (our own code, never text)
        return eval(_CALLS[method, values is not None], self.frame.f_globals,  # noqa: S307
                    {**self.frame.f_locals, **names})

    def _frames(self, backend):
        try:
            enabled, all_frames = backend.replacement_scans()
        except BackendError:  # e.g. an aborted transaction: the statement then gets DuckDB's error
            return
        frame = self.frame
        while enabled and frame is not None:
            yield frame
            if not all_frames:
                return
            frame = frame.f_back

    def find(self, backend, name: str):
        """The Python object DuckDB's replacement scan would read for `name` on the statement's
        DuckDB backend (None if none); whether a table or view carries the name is for the caller
        to check first."""
        for frame in self._frames(backend):
            for scope in (frame.f_locals, frame.f_globals):
                if name in scope:
                    value = scope[name]
                    return value if is_python_table(value) else None
        return None

    @staticmethod
    def readable(value):
        """`value` in a form that can be read more than once, as our statements read their source
        (the histogram, the join back, the checks): a stream (an Arrow RecordBatchReader or
        Scanner) is read once into an Arrow table, a polars LazyFrame collected once, so that every
        read of one statement sees the same rows; a table or a DataFrame as it is."""
        pyarrow, dataset, polars = (sys.modules.get(m) for m in ("pyarrow", "pyarrow.dataset", "polars"))
        if pyarrow is not None and isinstance(value, pyarrow.RecordBatchReader):
            return value.read_all()
        if dataset is not None and isinstance(value, dataset.Scanner):
            return value.to_table()
        if polars is not None and isinstance(value, polars.LazyFrame):
            return value.collect()
        return value


def _run_script(con, text: str, parameters, run_plain, run_ours, progress=None, caller: Caller | None = None):
    """Run a script piece by piece: our statements through the engine, plain ones through DuckDB.

    As in DuckDB, parameters bind to the last statement of a script; a placeholder in an earlier
    ANONYMIZE is an error. Returns what the last piece's runner returned, or None."""
    pieces = split_statements(text)
    last = len(pieces) - 1
    bound = []  # every ANONYMIZE bound before anything runs: a parameter mistake runs nothing
    for index, (piece, ours) in enumerate(pieces):
        values = parameters if index == last else None
        if ours:
            if index != last and parameters is not None and _placeholders(piece):
                raise AnonymizeError("parameters bind to the last statement of a script only (as in DuckDB): "
                                     "run the ANONYMIZE that has parameters in an execute() of its own")
            piece = bind_parameters(piece, values)
        bound.append((piece, ours, values))
    result = None
    for piece, ours, values in bound:
        if ours:
            query, row = run_statement(con, piece, progress, caller).as_sql()
            result = run_ours(query, row)
        else:
            _refuse_in_transaction(con, piece)
            result = run_plain(piece, values)
    return result


def _needs_us(text: str) -> bool:
    return any(ours or _calls_anonymize(piece) for piece, ours in split_statements(text))


def _list_publications_for(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """A script that calls duckanon_publications() gets the listing remade first, so it sees the
    registries and the sources as they are now (a source dropped or altered since is listed so)."""
    if "duckanon_publications" in text.lower():
        registry.install_listing(con, always=True)


# A name of our macros: `anon_` at the start of a word (not duckanon_publications, not t_anon_2)
_NAMES_A_MACRO = re.compile(r"(?<![A-Za-z0-9_$])anon_", re.I)


def _install_macros_for(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """A connection opened by `connect` gets the SQL macros (sql/*.sql) when a statement first names
    one (an `anon_` name): installing all of them costs about 90 ms, which every connection used
    to pay up front. A macro reached without its name in the text (a view that calls one) is
    handled by `_run_plain`."""
    if _NAMES_A_MACRO.search(text):
        macros.ensure_installed(con)


def _statement_count(text: str) -> int:
    try:
        return len(duckdb.extract_statements(text))
    except duckdb.Error:
        return 0


def _run_plain(con: duckdb.DuckDBPyConnection, text: str, run):
    """`run()` (plain SQL `text` on `con`), the macros installed first when the text names one. When
    DuckDB does not find an `anon_` function that the text does not name (a view calling one),
    the macros are installed and a lone statement outside an explicit transaction is run again
    (it failed while binding, so nothing of it ran); a script or a transaction gets the error,
    which taking `con.duckdb` once (or naming a macro) before prevents."""
    _install_macros_for(con, text)
    try:
        return run()
    except duckdb.CatalogException as error:
        if not _NAMES_A_MACRO.search(str(error)) or _statement_count(text) != 1:
            raise
        try:
            retry = not macros.installed(con) and not _in_open_transaction(con)
        except duckdb.Error:  # inside an explicit transaction DuckDB has aborted it: this fails too
            retry = False
        if not retry:
            raise
        macros.install(con)
        return run()


def execute(con: duckdb.DuckDBPyConnection, text: str, parameters=None, progress=None):
    """Run a script of our statements and plain DuckDB SQL on `con`.

    Plain statements go to DuckDB untouched. Returns the DuckDB connection, whose fetch methods
    read the last statement's result (for ANONYMIZE: its one-row summary).

    `parameters` work as in DuckDB's execute: `?` / `$1` take a list or tuple, `$name` a dict, and
    they bind to the last statement of a script. In ANONYMIZE they give option values
    (`ANONYMIZE t WITH (k = ?, qi = ?)` with `[3, ["zip", "age"]]`): each value is written into the
    statement as an SQL literal (a string quoted, a number as a number, a list as [...]), never as
    SQL text; table names cannot be parameters.

    A statement calling the SQL function anonymize() is refused inside an open transaction (it
    would commit on its own; the ANONYMIZE statement instead joins the caller's transaction).

    `progress`, a callable (phase, info), hears the phases of our statements as they run.

    A statement may name a pandas or polars DataFrame or an Arrow table of the caller's by its
    variable, as in DuckDB (`SELECT count(*) FROM df`, `ANONYMIZE df INTO df_anon WITH (...)`):
    see `Caller`.
    """
    caller = Caller()
    _list_publications_for(con, text)
    if not _needs_us(text):
        return _run_plain(con, text, lambda: caller.run(con, "execute", text, parameters))

    def run_plain(piece, values):
        return _run_plain(con, piece, lambda: caller.run(con, "execute", piece, values))

    result = _run_script(con, text, parameters, run_plain, lambda query, row: con.execute(query, row), progress, caller)
    return con if result is None else result


def sql(con: duckdb.DuckDBPyConnection, text: str, params=None):
    """Like `duckdb.sql`: a relation for the last statement (ANONYMIZE: its summary). `params` as in
    `execute`; the caller's DataFrames are seen as there."""
    caller = Caller()
    _list_publications_for(con, text)
    if not _needs_us(text):
        return _run_plain(con, text, lambda: caller.run(con, "sql", text, params))

    def run_plain(piece, values):
        return _run_plain(con, piece, lambda: caller.run(con, "sql", piece, values))

    return _run_script(con, text, params, run_plain, lambda query, row: con.sql(query, params=row), caller=caller)


# --- the SQL function ----------------------------------------------------------------------------

def _result_json(result, text: str) -> str:
    """What anonymize('...') returns, as JSON text.

    ANONYMIZE: its summary, one object (details nested). EXPLAIN ANONYMIZE: one object
    {item: value} (so `anonymize('EXPLAIN ...')->>'method that would run'` works), `solver details`
    nested; with a list of k, l or t values, an array of one object per value. REPORT: one object
    with the report's path and risk."""
    if isinstance(result, Summary):
        return result.to_json()
    names = [name for name, _ in result.columns]
    if names == ["item", "value"]:
        shown = dict(result.rows)
        try:
            shown["solver details"] = json.loads(shown["solver details"])
        except (KeyError, TypeError, ValueError):
            pass
        return json.dumps(shown, default=str)
    rows = [dict(zip(names, row)) for row in result.rows]
    if strip_explain(text)[0]:
        return json.dumps(rows, default=str)
    return json.dumps(rows[0] if len(rows) == 1 else rows, default=str)


def register(con: duckdb.DuckDBPyConnection, macros_now: bool = True) -> duckdb.DuckDBPyConnection:
    """Install our SQL macros (checks, reports) and the `anonymize(text)` scalar UDF into `con`.
    (`macros_now=False`: the macros wait until a statement through duckanon names one, or until
    `Connection.duckdb` hands the raw connection out: what `connect` does.)

    `SELECT anonymize('ANONYMIZE ...')` returns the summary as JSON (EXPLAIN ANONYMIZE: the plan,
    REPORT: the report's row). It runs on a cursor of its own, committing on its own: through
    duckanon's `execute`/`sql` (and the shell) it is refused inside an open transaction. A plain
    DuckDB connection's own `execute` cannot be checked: there, call it outside BEGIN ... COMMIT.
    """
    if macros_now:
        macros.install(con)
    registry.install_listing(con, always=True)
    try:
        con.remove_function(_REGISTERED_UDF)
    except Exception:
        pass

    def anonymize_udf(text: str) -> str:
        # A UDF runs inside the caller's query, so it works on its own cursor (same database,
        # separate connection); the result comes back as JSON text.
        cursor = con.cursor()
        try:
            found = _placeholders(text)
            if found:
                first = found[0]
                shown = f"{first.option} = " if first.option else ""
                raise AnonymizeError(f"anonymize() takes literal option values: write {shown}<value>, "
                                     f"not {shown}{first.text}")
            return _result_json(run_statement(cursor, text), text)
        except (AnonymizeError, duckdb.Error) as error:
            return _UDF_ERROR + one_line(error)
        finally:
            cursor.close()

    try:
        con.create_function(_REGISTERED_UDF, anonymize_udf, [duckdb.sqltype("VARCHAR")], duckdb.sqltype("VARCHAR"),
                            side_effects=True)
    except duckdb.CatalogException:
        pass  # already there: UDFs live in the database instance, shared by its connections and cursors
    con.execute(_ANONYMIZE_MACRO)
    return con


class Connection:
    """A DuckDB connection that also accepts ANONYMIZE.

    Threads may share one Connection: each thread works on a DuckDB cursor of its own (same
    database, separate connection, registered like this one), made when the thread first uses the
    Connection; the thread that opened it uses the connection itself. So `execute(...)` and the
    fetch methods after it read the calling thread's own result whatever other threads run, and
    transactions, temp tables and `register`ed Python objects belong to the thread that made them.
    Statements of different threads run concurrently, as on DuckDB cursors; two threads writing the
    same table may get DuckDB's write-write conflict, as a one-line error. `close()` closes them all.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        self._lock = threading.Lock()
        self._local = threading.local()
        register(con, macros_now=False)
        self._local.con = con

    def _current(self) -> duckdb.DuckDBPyConnection:
        """The calling thread's DuckDB connection (its own cursor, except in the opening thread)."""
        try:
            return self._local.con
        except AttributeError:
            pass
        with self._lock:
            cursor = self._con.cursor()
        try:
            register(cursor, macros_now=False)
        except BaseException:
            cursor.close()
            raise
        self._local.con = cursor
        return cursor

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        """The calling thread's DuckDB connection, with the SQL macros installed (whatever runs on it
        directly may call them)."""
        con = self._current()
        if not getattr(self._local, "macros", False):
            macros.ensure_installed(con)
            # (installed inside an explicit transaction, a ROLLBACK would take them away again)
            self._local.macros = not _in_open_transaction(con)
        return con

    def execute(self, text: str, parameters=None, progress=None) -> "Connection":
        """Run a script (see `duckanon.execute`); fetch its last result with fetchone() etc."""
        execute(self._current(), text, parameters, progress)
        return self

    def executemany(self, text: str, parameters=None) -> "Connection":
        """DuckDB's executemany for plain SQL. ANONYMIZE is refused: one execute per set of values."""
        if any(ours for _, ours in split_statements(text)):
            raise AnonymizeError("executemany cannot run ANONYMIZE: call execute(text, values) once per set of values")
        con = self._current()
        _refuse_in_transaction(con, text)
        _install_macros_for(con, text)
        if parameters is not None:
            con.executemany(text, parameters)
        else:
            con.executemany(text)
        return self

    def sql(self, text: str, params=None):
        return sql(self._current(), text, params)

    query = sql

    def anonymize(self, text: str, progress=None) -> Summary:
        """Run one ANONYMIZE and return its Summary as a Python object."""
        pieces = split_statements(text)
        if len(pieces) != 1 or not pieces[0][1]:
            raise AnonymizeError("anonymize() takes exactly one ANONYMIZE statement")
        return run_anonymize(self._current(), pieces[0][0], progress, Caller())

    def cursor(self) -> "Connection":
        """A new Connection on a new cursor (same database), for the calling thread."""
        with self._lock:
            cursor = self._con.cursor()
        return Connection(cursor)

    def close(self) -> None:
        self._con.close()  # DuckDB closes the threads' cursors with it

    def __getattr__(self, name):
        if name in ("_con", "_lock", "_local"):  # not set yet (copy, pickle): never recurse
            raise AttributeError(name)
        return getattr(self._current(), name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(database: str = ":memory:", read_only: bool = False, config: dict | None = None) -> Connection:
    """Open DuckDB (in memory by default) with duckanon's statements and macros available."""
    return Connection(duckdb.connect(database, read_only=read_only, config=config or {}))
