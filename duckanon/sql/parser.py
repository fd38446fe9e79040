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
REFRESH_KEYWORD = "REFRESH"
OUR_KEYWORDS = (KEYWORD, REPORT_KEYWORD, REFRESH_KEYWORD)


class Anonymize(exp.Expression):
    """Parsed ANONYMIZE statement: `this` is the source table, `into` the optional target."""

    arg_types = {"this": True, "into": False, "options": True}


class Report(exp.Expression):
    """Parsed REPORT statement: `this` is the published table, `original` the table it came from."""

    arg_types = {"this": True, "original": True, "options": False}


class Refresh(exp.Expression):
    """Parsed REFRESH statement: `this` is the published table, or None for REFRESH ALL."""

    arg_types = {"this": False, "options": False}


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
            if self._curr and self._curr.token_type == TokenType.VAR and self._curr.text.upper() == REFRESH_KEYWORD:
                self._advance()
                return self._parse_refresh()
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
            parts = table.parts
            if len(parts) > 3:  # DuckDB has catalogs, schemas and tables: a fourth part names nothing
                written = _shown(".".join(part.sql(dialect="duckdb") for part in parts))
                self._user_error(f"table name {written} has {len(parts)} parts: use catalog.schema.table at most",
                                 first)
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

        def _parse_refresh(self) -> Refresh:
            target = None if self._match(TokenType.ALL) else self._parse_table_name(REFRESH_KEYWORD)
            options = []
            if self._match(TokenType.WITH):
                options = self._parse_options()
            elif self._curr and self._curr.token_type != TokenType.SEMICOLON:
                self._user_error(f"expected WITH (option = value, ...), got {_token_text(self._curr)}")
            return self.expression(Refresh(this=target, options=options))

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


def parse_statement(sql: str) -> Anonymize | Report | Refresh:
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
        ours = _ours_after_with(tokens)
        if ours is not None:
            raise _with_error(tokens, ours)
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
    if len(statements) != 1 or not isinstance(statements[0], (Anonymize, Report, Refresh)):
        raise AnonymizeError(f"expected exactly one ANONYMIZE statement at {_position(sql, first[0].start)}")
    if rest:
        raise AnonymizeError("expected exactly one ANONYMIZE statement, but another statement follows: "
                             f"{_statement_start(sql, rest[0])}")
    return statements[0]


def _is_ours(token: Token | None) -> bool:
    return token is not None and token.token_type == TokenType.VAR and token.text.upper() in OUR_KEYWORDS


def _skip_parens(tokens: t.Sequence[Token], i: int) -> int:
    """The index after the balanced parentheses that open at tokens[i]."""
    depth = 0
    while i < len(tokens):
        kind = tokens[i].token_type
        depth += kind in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)
        depth -= kind in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE)
        i += 1
        if depth <= 0:
            break
    return i


def _ours_after_with(tokens: t.Sequence[Token]) -> Token | None:
    """In `WITH c AS (...) ANONYMIZE c`: the ANONYMIZE (or REPORT) token that follows the WITH
    clause, else None. The WITH clause is walked as DuckDB writes it (`[RECURSIVE] name [(columns)]
    [USING KEY (...)] AS [NOT] [MATERIALIZED] (query)`, comma-separated), and only the first token
    after it is looked at: `WITH anonymize AS (...) SELECT * FROM (...) report` is plain DuckDB."""
    if not tokens or tokens[0].token_type != TokenType.WITH:
        return None
    i = 1
    if i < len(tokens) and tokens[i].text.upper() == "RECURSIVE":
        i += 1
    while i < len(tokens):
        i += 1  # the name
        while i < len(tokens) and tokens[i].token_type != TokenType.ALIAS:  # (columns), USING KEY (...)
            if tokens[i].token_type == TokenType.SEMICOLON:
                return None
            i = _skip_parens(tokens, i) if tokens[i].token_type == TokenType.L_PAREN else i + 1
        i += 1  # AS
        while i < len(tokens) and tokens[i].text.upper() in ("NOT", "MATERIALIZED"):
            i += 1
        if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
            return None
        i = _skip_parens(tokens, i)
        if i < len(tokens) and tokens[i].token_type == TokenType.COMMA:
            i += 1
            continue
        return tokens[i] if i < len(tokens) and _is_ours(tokens[i]) else None
    return None


def _with_error(tokens: t.Sequence[Token], ours: Token) -> AnonymizeError:
    first = 2 if len(tokens) > 1 and tokens[1].text.upper() == "RECURSIVE" else 1
    token = tokens[first] if first < len(tokens) else None
    name = "v"
    if token is not None and token.token_type == TokenType.IDENTIFIER:  # written in double quotes
        name = '"' + token.text.replace('"', '""') + '"'
    elif token is not None and token.token_type == TokenType.VAR:
        name = token.text
    keyword = ours.text.upper()
    what = "a table or view" if keyword == KEYWORD else "tables or views"
    return AnonymizeError(f"{keyword} reads {what}: a WITH clause cannot precede it; create a view first "
                          f"(CREATE TEMP VIEW {_shown(name)} AS ...) and {keyword.lower()} the view")


# what may stand between EXPLAIN and the statement it explains, in DuckDB's grammar
_EXPLAIN_WORDS = ("ANALYZE", "ANALYSE", "VERBOSE")


def _explained(sql: str, explain: Token) -> tuple[Token | None, bool, bool]:
    """What follows the EXPLAIN token `explain` in `sql`: (our keyword token if ANONYMIZE or
    REPORT is the explained statement, ANALYZE was asked for, other EXPLAIN options were given).
    sqlglot reads EXPLAIN as a command whose argument is the raw rest of the statement, so the
    rest is tokenized here (comments and quoting as everywhere else)."""
    try:
        rest = AnonDialect().tokenize(sql[explain.end + 1:])
    except TokenError:
        return None, False, False
    analyze = options = False
    i = 0
    while i < len(rest):
        token = rest[i]
        word = token.text.upper()
        if word in _EXPLAIN_WORDS and token.token_type in (TokenType.VAR, TokenType.ANALYZE, TokenType.COMMAND):
            analyze = analyze or word != "VERBOSE"
            options = options or word == "VERBOSE"
            i += 1
        elif token.token_type == TokenType.L_PAREN:  # EXPLAIN (FORMAT JSON, ANALYZE) ...
            depth = 0
            while i < len(rest):
                kind = rest[i].token_type
                depth += kind == TokenType.L_PAREN
                depth -= kind == TokenType.R_PAREN
                analyze = analyze or (depth == 1 and rest[i].text.upper() in ("ANALYZE", "ANALYSE"))
                i += 1
                if depth == 0:
                    break
            options = True
        else:
            break
    return (rest[i] if i < len(rest) and _is_ours(rest[i]) else None), analyze, options


def _is_anonymize(sql: str, tokens: t.Sequence[Token]) -> bool:
    """Whether the statement of `tokens` is ours: ANONYMIZE, REPORT, or EXPLAIN of one of them
    (with options, to be refused in our words), or one of them after a WITH clause (refused)."""
    if tokens and tokens[0].token_type == TokenType.COMMAND and tokens[0].text.upper() == "EXPLAIN":
        return _explained(sql, tokens[0])[0] is not None  # `sql` ends where the statement does
    return _is_ours(tokens[0] if tokens else None) or _ours_after_with(tokens) is not None


def strip_explain(text: str) -> tuple[bool, str]:
    """(`EXPLAIN` was given, the ANONYMIZE statement without it); positions in the statement are
    kept by blanking the keyword instead of cutting it. EXPLAIN ANALYZE, EXPLAIN with options and
    EXPLAIN REPORT are refused here, in a line of their own."""
    try:
        tokens = AnonDialect().tokenize(text)
    except TokenError:
        return False, text  # parse_statement says which quote or comment is not closed
    if not (tokens and tokens[0].token_type == TokenType.COMMAND and tokens[0].text.upper() == "EXPLAIN"):
        return False, text
    explain = tokens[0]
    ours, analyze, options = _explained(text, explain)
    if ours is None:
        return False, text
    if ours.text.upper() != KEYWORD:
        raise AnonymizeError(f"EXPLAIN applies to ANONYMIZE only (a dry run): run {ours.text.upper()} without it")
    if analyze:
        raise AnonymizeError("EXPLAIN ANALYZE is not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)")
    if options:
        raise AnonymizeError("EXPLAIN options are not supported for ANONYMIZE: use EXPLAIN ANONYMIZE (a dry run)")
    return True, text[:explain.start] + " " * (explain.end + 1 - explain.start) + text[explain.end + 1:]


def split_statements(sql: str, always: bool = False) -> list[tuple[str, bool]]:
    """Split a script into (statement text, is_ours) pairs, keeping other statements' text verbatim.

    Splitting uses sqlglot's tokenizer, so a ';' inside a string or comment does not split, and
    comment-only pieces are dropped. Text that does not mention ANONYMIZE at all is returned whole
    and untouched (unless `always`: the shell prints each statement's result), as is text the
    tokenizer cannot read (DuckDB then reports its own error).
    """
    if not always and not any(word.lower() in sql.lower() for word in OUR_KEYWORDS):
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
                pieces.append((text, _is_anonymize(sql[:end], current)))
            current = []
            begin = end + 1
        else:
            current.append(token)
    return pieces
