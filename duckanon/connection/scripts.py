"""Scripts of our statements and DuckDB's: each piece run by the engine (ours, through
duckanon.statements) or handed to DuckDB untouched (plain SQL, from the caller's frame), with the
SQL macros installed when a statement names one and the anonymize() function refused inside an
open transaction. `execute` and `sql` are the module-level entry points."""

from __future__ import annotations

import re

import duckdb
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from duckanon import macros
from duckanon.backends import DuckDBBackend
from duckanon.connection.caller import Caller
from duckanon.connection.parameters import bind_parameters, placeholders
from duckanon.errors import AnonymizeError
from duckanon.pipeline import registry
from duckanon.sql import AnonDialect, split_statements
from duckanon.statements import run_statement

IN_TRANSACTION = ("anonymize() cannot run inside an open transaction: run ANONYMIZE through duckanon's "
                  "connection.execute, or COMMIT first")


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


def in_open_transaction(con) -> bool:
    try:
        return DuckDBBackend(con).in_explicit_transaction()
    except duckdb.Error:  # e.g. an aborted transaction: the statement itself then gets DuckDB's error
        return False


def refuse_in_transaction(con, piece: str) -> None:
    # The anonymize() function runs on a cursor of its own (a UDF cannot run SQL on the connection
    # whose query calls it): inside the caller's transaction it would neither see the caller's
    # uncommitted tables nor be undone by its ROLLBACK.
    if _calls_anonymize(piece) and in_open_transaction(con):
        raise AnonymizeError(IN_TRANSACTION)


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
            if index != last and parameters is not None and placeholders(piece):
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
            refuse_in_transaction(con, piece)
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


def install_macros_for(con: duckdb.DuckDBPyConnection, text: str) -> None:
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
    install_macros_for(con, text)
    try:
        return run()
    except duckdb.CatalogException as error:
        if not _NAMES_A_MACRO.search(str(error)) or _statement_count(text) != 1:
            raise
        try:
            retry = not macros.installed(con) and not in_open_transaction(con)
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
    result = _run_text(con, "execute", text, parameters, lambda query, row: con.execute(query, row), progress)
    return con if result is None else result


def sql(con: duckdb.DuckDBPyConnection, text: str, params=None):
    """Like `duckdb.sql`: a relation for the last statement (ANONYMIZE: its summary). `params` as in
    `execute`; the caller's DataFrames are seen as there."""
    return _run_text(con, "sql", text, params, lambda query, row: con.sql(query, params=row))


def _run_text(con: duckdb.DuckDBPyConnection, method: str, text: str, values, run_ours, progress=None):
    """`text` through DuckDB's `method` ('execute' or 'sql', from the caller's frame): plain SQL
    alone in one call, else piece by piece (_run_script), our statements' rows through `run_ours`."""
    caller = Caller()
    _list_publications_for(con, text)
    if not _needs_us(text):
        return _run_plain(con, text, lambda: caller.run(con, method, text, values))

    def run_plain(piece, piece_values):
        return _run_plain(con, piece, lambda: caller.run(con, method, piece, piece_values))

    return _run_script(con, text, values, run_plain, run_ours, progress, caller)
