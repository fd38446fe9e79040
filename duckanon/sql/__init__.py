"""SQL front end: our statements parsed with a sqlglot dialect; everything else goes to DuckDB untouched."""

from duckanon.sql.parser import AnonDialect, parse_statement, split_statements
from duckanon.sql.report_refresh import ReportStatement, bind_report
from duckanon.sql.statement import AnonymizeStatement, bind_statement, statement_for

__all__ = ["AnonDialect", "AnonymizeStatement", "ReportStatement", "bind_report", "bind_statement", "parse_statement", "split_statements",
           "statement_for"]
