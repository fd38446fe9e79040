"""The SQL function `anonymize(text)`: a Python UDF run on a cursor of its own, returning the
statement's result as JSON text, and the TEMP macro that turns its failures into DuckDB's error()
(`register`)."""

from __future__ import annotations

import json

import duckdb

from duckanon import macros
from duckanon.connection.parameters import placeholders
from duckanon.errors import AnonymizeError, one_line
from duckanon.pipeline import registry
from duckanon.sql.parser import strip_explain
from duckanon.statements import Summary, run_statement

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
            found = placeholders(text)
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
