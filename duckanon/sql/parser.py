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
REPORT_KEYWORD = "REPORT"
OUR_KEYWORDS = (KEYWORD, REPORT_KEYWORD)


class Anonymize(exp.Expression):
    """Parsed ANONYMIZE statement: `this` is the source table, `into` the optional target."""

    arg_types = {"this": True, "into": False, "options": True}


class Report(exp.Expression):
    """Parsed REPORT statement: `this` is the published table, `original` the table it came from."""

    arg_types = {"this": True, "original": True, "options": False}


class AnonOption(exp.Expression):
    """One `name = value` option; `position` is the character offset of the name, for errors."""

    arg_types = {"this": True, "expression": True, "position": True}


def _anonymize_sql(generator, expression: Anonymize) -> str:
    into = expression.args.get("into")
    target = f" INTO {generator.sql(into)}" if into is not None else ""
    options = ", ".join(f"{o.name} = {generator.sql(o, 'expression')}" for o in expression.args["options"])
    return f"ANONYMIZE {generator.sql(expression, 'this')}{target} WITH ({options})"


class _UserError(ParseError):
    """A syntax error whose message is already in user terms (raised by our grammar)."""


# sqlglot's own descriptions that are plain enough once the punctuation is quoted
_EXPECTED = re.compile(r"^Expect(?:ing|ed) (\S{1,2})$")
# the most one puts into an error message of someone else's text
_QUOTE_LIMIT = 40


def _shown(text: str) -> str:
    """`text` on one line, cut to a readable length, for quoting in an error message."""
    text = " ".join(text.split())
    return text if len(text) <= _QUOTE_LIMIT else text[: _QUOTE_LIMIT - 3] + "..."


def _token_text(token: Token | None) -> str:
    # sqlglot's stand-in for "no token" (past the end) is falsy
    return f"'{_shown(token.text)}'" if token else "the end of the statement"


def _looks_like_a_word(text: str) -> bool:
    """A word or path with symbols in it (tp+, /etc/x.csv): something meant as a string."""
    return (0 < len(text) <= _QUOTE_LIMIT and (text[0].isalpha() or text[0] in "/._~")
            and not re.search(r"[\s'\"()\[\]{},;]", text))


class AnonDialect(DuckDB):
    """DuckDB's dialect plus our statements."""

    class Generator(DuckDB.Generator):
        TRANSFORMS = {**DuckDB.Generator.TRANSFORMS, Anonymize: _anonymize_sql}

    class Parser(DuckDB.Parser):
        def raise_error(self, message: str, token: Token | None = None) -> None:
            # Remember which token sqlglot blames (its own messages name internals we must not show)
            blamed = token or self._curr or self._prev
            try:
                if not token:
                    super().raise_error(message)
                else:
                    super().raise_error(message, token)
            except ParseError as error:
                error.anon_token = blamed  # type: ignore[attr-defined]
                raise

        def _user_error(self, message: str, token: Token | None = None) -> t.NoReturn:
            """Raise a syntax error whose message is ours; at `token`, or where the parser stands."""
            token = token or self._curr or self._prev
            raise _UserError(message, [{"description": message, "line": token.line if token else 1,
                                        "col": token.col if token else 1}])

        def _parse_statement(self) -> exp.Expr | None:
            if self._curr and self._curr.token_type == TokenType.VAR and self._curr.text.upper() == KEYWORD:
                self._advance()
                return self._parse_anonymize()
            if self._curr and self._curr.token_type == TokenType.VAR and self._curr.text.upper() == REPORT_KEYWORD:
                self._advance()
                return self._parse_report()
            return super()._parse_statement()

        def _parse_table_name(self, after: str) -> exp.Table:
            first = self._curr
            expected = f"expected a table name after {after}"
            if not first or first.token_type in (TokenType.WITH, TokenType.INTO, TokenType.SEMICOLON):
                self._user_error(expected)
            if first.token_type == TokenType.L_PAREN:
                if after == KEYWORD:
                    self._user_error(f"{expected}, not a query in parentheses: create a view first "
                                     "(CREATE VIEW v AS SELECT ...) and anonymize the view", first)
                self._user_error(f"{expected}, got '('", first)
            try:
                table = self._parse_table_parts()
            except _UserError:
                raise
            except ParseError as error:
                self._user_error(f"{expected}, got {_token_text(getattr(error, 'anon_token', None))}",
                                 getattr(error, "anon_token", None))
            if table is None or not table.name:
                if table is not None and isinstance(table.this, exp.Func):
                    self._user_error(f"{expected}, not a function call such as {first.text}(...)", first)
                self._user_error(f"{expected}, got {_token_text(first)}", first)
            return table

        def _parse_anonymize(self) -> Anonymize:
            source = self._parse_table_name(KEYWORD)
            target = None
            if self._match(TokenType.INTO):
                target = self._parse_table_name("INTO")
            if not self._match(TokenType.WITH):
                got = f", got {_token_text(self._curr)}" if self._curr else ""
                self._user_error(f"expected WITH (option = value, ...){got}")
            return self.expression(Anonymize(this=source, into=target, options=self._parse_options()))

        def _parse_report(self) -> Report:
            published = self._parse_table_name(REPORT_KEYWORD)
            if not self._match(TokenType.FROM):
                got = f", got {_token_text(self._curr)}" if self._curr else ""
                self._user_error(f"expected FROM <original table> after the published table{got}")
            original = self._parse_table_name("FROM")
            options = []
            if self._match(TokenType.WITH):
                options = self._parse_options()
            elif self._curr and self._curr.token_type != TokenType.SEMICOLON:
                self._user_error(f"expected WITH (option = value, ...), got {_token_text(self._curr)}")
            return self.expression(Report(this=published, original=original, options=options))

        def _parse_options(self) -> list:
            wrapped = self._match(TokenType.L_PAREN)
            options = [self._parse_anon_option()]
            while self._match(TokenType.COMMA):
                options.append(self._parse_anon_option())
            if wrapped and not self._match(TokenType.R_PAREN):
                self._user_error("expected ',' or ')' after an option")
            if self._curr and self._curr.token_type != TokenType.SEMICOLON:
                self._user_error(f"unexpected '{_shown(self._curr.text)}' after the options")
            return options

        def _value_text(self, begin: int) -> str:
            """The text of an option value from token `begin`: up to the ',' or ')' that ends it."""
            depth, last = 0, None
            for token in self._tokens[begin:]:
                kind = token.token_type
                if kind in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
                    depth += 1
                elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
                    if depth == 0:
                        break
                    depth -= 1
                elif kind == TokenType.SEMICOLON or (kind == TokenType.COMMA and depth == 0):
                    break
                last = token
            if last is None:
                return ""
            return self.sql[self._tokens[begin].start: last.end + 1]

        def _parse_anon_option(self) -> AnonOption:
            name_token = self._curr
            name = self._parse_id_var(any_token=False)
            if name is None:
                self._user_error("expected an option name")
            if not self._match(TokenType.EQ):
                self._user_error(f"expected '=' after option '{name.name}'")
            begin = self._index
            try:
                value = self._parse_bitwise()
                if value is None and self._curr and self._curr.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
                    # a bare keyword used as a word, e.g. l_variant = distinct
                    word = self._parse_id_var(any_token=True)
                    value = exp.column(word) if word is not None else None
            except _UserError:
                raise
            except ParseError as error:
                self._value_error(name.name, begin, error)
            if value is None:
                self._user_error(f"expected a value for option '{name.name}'")
            return AnonOption(this=name.name.lower(), expression=value, position=name_token.start)

        def _value_error(self, option: str, begin: int, error: ParseError) -> t.NoReturn:
            """Say in user terms that the value of `option` (from token `begin`) cannot be read."""
            token = getattr(error, "anon_token", None)
            raw = self._value_text(begin)
            description = (error.errors[0].get("description") if error.errors else "") or ""
            expected = _EXPECTED.match(description)
            if expected:
                reason = f"expected '{expected.group(1)}'"
                if self._curr:
                    reason += f", got {_token_text(self._curr)}"
            elif not self._curr or self._curr.token_type in (TokenType.COMMA, TokenType.R_PAREN):
                reason = "it is incomplete"
            else:
                reason = f"unexpected {_token_text(token)}"
            hint = ""
            if _looks_like_a_word(raw):
                hint = f"; to give a word or file name with symbols, quote it: {option} = '{raw}'"
            shown = f" ({_shown(raw)})" if raw else ""
            self._user_error(f"cannot read the value of option '{option}'{shown}: {reason}{hint}", token)


def _position(sql: str, offset: int) -> str:
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


def position_error(sql: str, offset: int, message: str) -> AnonymizeError:
    return AnonymizeError(f"{message} (at {_position(sql, offset)})")


# what a token the tokenizer could not finish starts with -> what it is and how it must end
_UNCLOSED = (("/*", "comment", "*/"), ("$", "dollar-quoted string", "$"), ('"', "quoted name", '"'),
             ("'", "string", "'"))


def _token_error(sql: str, tokenizer, error: TokenError) -> AnonymizeError:
    """A tokenizer failure in user terms: which quote or comment is not closed, and where."""
    core = getattr(tokenizer, "_core", tokenizer)
    offset = getattr(core, "_start", None)
    if not isinstance(offset, int) or not 0 <= offset < len(sql):
        return AnonymizeError("syntax error: cannot read the statement (is a quote or a comment not closed?)")
    text = sql[offset:]
    if text[:1].isalpha() and text[1:2] in ("'", '"'):  # E'...', X'...', B'...'
        text = text[1:]
    for opening, what, closing in _UNCLOSED:
        if text.startswith(opening):
            if opening == "$":
                closing = text[: text.find("$", 1) + 1] if "$" in text[1:] else "$$"
            return AnonymizeError(f"syntax error at {_position(sql, offset)}: a {what} begins here but is not "
                                  f"closed (missing {closing})")
    return AnonymizeError(f"syntax error at {_position(sql, offset)}: cannot read {_shown(sql[offset:])}")


def _statement_start(sql: str, token: Token) -> str:
    return f"'{_shown(token.text)}' (at {_position(sql, token.start)})"


def parse_statement(sql: str) -> Anonymize | Report:
    """Parse one ANONYMIZE (or REPORT) statement, or raise AnonymizeError naming the position of
    the mistake."""
    dialect = AnonDialect()
    tokenizer = dialect.tokenizer()
    try:
        tokens = tokenizer.tokenize(sql)
    except TokenError as error:
        raise _token_error(sql, tokenizer, error) from None
    while tokens and tokens[0].token_type == TokenType.SEMICOLON:
        tokens = tokens[1:]
    if not tokens:
        raise AnonymizeError("expected exactly one ANONYMIZE statement, got nothing")
    if not (tokens[0].token_type == TokenType.VAR and tokens[0].text.upper() in OUR_KEYWORDS):
        raise AnonymizeError(f"expected exactly one ANONYMIZE statement, got {_statement_start(sql, tokens[0])}")
    end = next((i for i, token in enumerate(tokens) if token.token_type == TokenType.SEMICOLON), len(tokens))
    first, rest = tokens[:end], [token for token in tokens[end:] if token.token_type != TokenType.SEMICOLON]
    try:
        parser = dialect.parser(error_level=ErrorLevel.IMMEDIATE)
        statements = parser.parse(first, sql)
    except ParseError as error:
        detail = error.errors[0] if error.errors else {}
        if isinstance(error, _UserError):
            description = detail.get("description")
        else:  # sqlglot's own words name its internals: say only what is where
            description = f"unexpected {_token_text(getattr(error, 'anon_token', None))}"
        where = f"line {detail.get('line')}, column {detail.get('col')}" if detail.get("line") else "line 1, column 1"
        raise AnonymizeError(f"syntax error at {where}: {description}") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1 or not isinstance(statements[0], (Anonymize, Report)):
        raise AnonymizeError(f"expected exactly one ANONYMIZE statement at {_position(sql, first[0].start)}")
    if rest:
        raise AnonymizeError("expected exactly one ANONYMIZE statement, but another statement follows: "
                             f"{_statement_start(sql, rest[0])}")
    return statements[0]


_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?=ANONYMIZE\b)", re.IGNORECASE)


def _is_anonymize(tokens: t.Sequence[Token]) -> bool:
    if tokens and tokens[0].token_type == TokenType.COMMAND and tokens[0].text.upper() == "EXPLAIN":
        # sqlglot reads EXPLAIN as a command whose argument is the rest of the statement
        return len(tokens) > 1 and tokens[1].text.lstrip().upper().startswith(KEYWORD)
    return bool(tokens) and tokens[0].token_type == TokenType.VAR and tokens[0].text.upper() in OUR_KEYWORDS


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
    if not any(word.lower() in sql.lower() for word in OUR_KEYWORDS):
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
