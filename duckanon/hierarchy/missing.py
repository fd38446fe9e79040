"""The SQL that lists the values a hierarchy (or sa_order) does not cover.

A refusal counts the missing values and gives this query instead of quoting them: an error message
travels to logs and screens that the column's values must not reach.
"""

from __future__ import annotations

from collections.abc import Sequence

SOURCE_PLACEHOLDER = "<table>"  # in a suggested query, when the caller did not say which table
_LIST_LIMIT = 200  # longest list of literals written into a suggested query


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_column(column: str) -> str:
    from sqlglot import exp

    return exp.to_identifier(column).sql(dialect="duckdb")


def as_text(column: str) -> str:
    """The column as the text values are matched by, NULL spelled 'NULL' (as hierarchies write it)."""
    return f"coalesce(CAST({sql_column(column)} AS VARCHAR), 'NULL')"


def literals(values: Sequence) -> str | None:
    """`'a', 'b', 'NULL'`: values as SQL literals (None as 'NULL'), or None when that is too long."""
    text = ", ".join(sql_string("NULL" if v is None else str(v)) for v in values)
    return text if len(text) <= _LIST_LIMIT else None


def missing_query(column: str, source: str | None, known: str, numeric: bool = False) -> str:
    """SELECT DISTINCT <column> FROM <source> WHERE its text is not among `known`: a subquery of
    one text column or a list of literals. `numeric`: a number also matches an entry of equal
    value (39.0 matches '39'), as `Hierarchy.bind` matches numbers."""
    column_sql, table = sql_column(column), source or SOURCE_PLACEHOLDER
    # texts compared as bytes (encode: BLOBs), as bind matches them: under a column's collation
    # (NOCASE) 'ann' would equal the row 'Ann' and the query would list nothing
    entries = f"({known})" if known.lstrip().upper().startswith("SELECT") else f"(SELECT unnest([{known}]))"
    if not numeric:
        return (f"SELECT DISTINCT {column_sql} FROM {table} WHERE encode({as_text(column)}) NOT IN "
                f"(SELECT encode(v) FROM {entries} h(v))")
    return (f"SELECT DISTINCT {column_sql} FROM {table} WHERE NOT EXISTS (SELECT 1 FROM {entries} h(v) "
            f"WHERE encode(h.v) = encode({as_text(column)}) OR TRY_CAST(h.v AS DOUBLE) = TRY_CAST({column_sql} AS DOUBLE))")


def sa_order_missing(count: int, order: Sequence, column: str | None = None, source: str | None = None) -> str:
    """The message for `count` values of the sensitive column that sa_order does not list: the
    count and a query listing them, never a value."""
    message = (f"sa_order does not list {count} value{'s' if count != 1 else ''} of the sensitive column"
               f"{' ' + column if column else ''}")
    listed = literals(order)
    if column is None or listed is None:
        return message + ("; list them with SELECT DISTINCT on it and compare with sa_order" if column else "")
    return f"{message}; list {'them' if count != 1 else 'it'} with: {missing_query(column, source, listed)}"
