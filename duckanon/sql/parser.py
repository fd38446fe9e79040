"""The ANONYMIZE grammar as an extension of sqlglot's DuckDB dialect.

    ANONYMIZE <table> [INTO <target>] WITH [(] <option> = <value> [, ...] [)]

Only the statement head is ours; table names, identifiers, literals and tuples are parsed by
sqlglot's DuckDB parser, so quoting follows DuckDB's rules.
"""

from __future__ import annotations

import re

import typing as t

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from duckanon.errors import AnonymizeError

KEYWORD = "ANONYMIZE"


class Anonymize(exp.Expression):
    """Parsed ANONYMIZE statement: `this` is the source table, `into` the optional target."""

    arg_types = {"this": True, "into": False, "options": True}


class AnonOption(exp.Expression):
    """One `name = value` option; `position` is the character offset of the name, for errors."""

    arg_types = {"this": True, "expression": True, "position": True}


def _anonymize_sql(generator, expression: Anonymize) -> str:
    into = expression.args.get("into")
    target = f" INTO {generator.sql(into)}" if into is not None else ""
    options = ", ".join(f"{o.name} = {generator.sql(o, 'expression')}" for o in expression.args["options"])
    return f"ANONYMIZE {generator.sql(expression, 'this')}{target} WITH ({options})"


class AnonDialect(DuckDB):
    """DuckDB's dialect plus our statements."""

    class Generator(DuckDB.Generator):
        TRANSFORMS = {**DuckDB.Generator.TRANSFORMS, Anonymize: _anonymize_sql}

    class Parser(DuckDB.Parser):
        def _parse_statement(self) -> exp.Expr | None:
            if self._curr and self._curr.token_type == TokenType.VAR and self._curr.text.upper() == KEYWORD:
                self._advance()
                return self._parse_anonymize()
            return super()._parse_statement()

        def _parse_table_name(self, after: str) -> exp.Table:
            if not self._curr or self._curr.token_type in (TokenType.WITH, TokenType.INTO, TokenType.SEMICOLON):
                self.raise_error(f"expected a table name after {after}")
            table = self._parse_table_parts()
            if table is None or not table.name:
                self.raise_error(f"expected a table name after {after}")
            return table

        def _parse_anonymize(self) -> Anonymize:
            source = self._parse_table_name("ANONYMIZE")
            target = None
            if self._match(TokenType.INTO):
                target = self._parse_table_name("INTO")
            if not self._match(TokenType.WITH):
                self.raise_error("expected WITH (option = value, ...)")
            wrapped = self._match(TokenType.L_PAREN)
            options = [self._parse_anon_option()]
            while self._match(TokenType.COMMA):
                options.append(self._parse_anon_option())
            if wrapped and not self._match(TokenType.R_PAREN):
                self.raise_error("expected ',' or ')' after an option")
            if self._curr and self._curr.token_type != TokenType.SEMICOLON:
                self.raise_error(f"unexpected '{self._curr.text}' after the options")
            return self.expression(Anonymize(this=source, into=target, options=options))

        def _parse_anon_option(self) -> AnonOption:
            name_token = self._curr
            name = self._parse_id_var(any_token=False)
            if name is None:
                self.raise_error("expected an option name")
            if not self._match(TokenType.EQ):
                self.raise_error(f"expected '=' after option '{name.name}'")
            value = self._parse_bitwise()
            if value is None and self._curr and self._curr.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
                # a bare keyword used as a word, e.g. l_variant = distinct
                word = self._parse_id_var(any_token=True)
                value = exp.column(word) if word is not None else None
            if value is None:
                self.raise_error(f"expected a value for option '{name.name}'")
            return AnonOption(this=name.name.lower(), expression=value, position=name_token.start)


def _position(sql: str, offset: int) -> str:
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


def position_error(sql: str, offset: int, message: str) -> AnonymizeError:
    return AnonymizeError(f"{message} (at {_position(sql, offset)})")


def parse_statement(sql: str) -> Anonymize:
    """Parse one ANONYMIZE statement, or raise AnonymizeError naming the position of the mistake."""
    dialect = AnonDialect()
    try:
        tokens = dialect.tokenize(sql)
        parser = dialect.parser(error_level=ErrorLevel.IMMEDIATE)
        statements = parser.parse(tokens, sql)
    except TokenError as error:
        raise AnonymizeError(f"syntax error: {error}") from None
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        where = f"line {first.get('line')}, column {first.get('col')}" if first else "unknown position"
        description = first.get("description") or str(error).splitlines()[0]
        raise AnonymizeError(f"syntax error at {where}: {description}") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1 or not isinstance(statements[0], Anonymize):
        raise AnonymizeError("expected exactly one ANONYMIZE statement")
    return statements[0]


_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?=ANONYMIZE\b)", re.IGNORECASE)


def _is_anonymize(tokens: t.Sequence[Token]) -> bool:
    if tokens and tokens[0].token_type == TokenType.COMMAND and tokens[0].text.upper() == "EXPLAIN":
        # sqlglot reads EXPLAIN as a command whose argument is the rest of the statement
        return len(tokens) > 1 and tokens[1].text.lstrip().upper().startswith(KEYWORD)
    return bool(tokens) and tokens[0].token_type == TokenType.VAR and tokens[0].text.upper() == KEYWORD


def strip_explain(text: str) -> tuple[bool, str]:
    """(`EXPLAIN` was given, the ANONYMIZE statement without it); positions in the statement are
    kept by blanking the keyword instead of cutting it."""
    match = _EXPLAIN.match(text)
    if not match:
        return False, text
    return True, " " * match.end() + text[match.end():]


def split_statements(sql: str) -> list[tuple[str, bool]]:
    """Split a script into (statement text, is_ours) pairs, keeping other statements' text verbatim.

    Splitting uses sqlglot's tokenizer, so a ';' inside a string or comment does not split. Text
    that does not mention ANONYMIZE at all is returned whole and untouched, as is text the
    tokenizer cannot read (DuckDB then reports its own error).
    """
    if KEYWORD.lower() not in sql.lower():
        return [(sql, False)]
    try:
        tokens = AnonDialect().tokenize(sql)
    except TokenError:
        return [(sql, False)]
    pieces: list[tuple[str, bool]] = []
    current: list[Token] = []
    begin = 0
    for token in tokens + [None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            end = token.start if token is not None else len(sql)
            text = sql[begin:end].strip()
            if text and current:
                pieces.append((text, _is_anonymize(current)))
            current = []
            begin = end + 1
        else:
            current.append(token)
    return pieces
