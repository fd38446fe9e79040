"""Front end: the ANONYMIZE grammar on top of sqlglot's DuckDB dialect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import duckanon
from duckanon import hierarchy as H
from duckanon.errors import AnonymizeError
from duckanon.sql import bind_statement, parse_statement, split_statements
from duckanon.sql.parser import AnonDialect, strip_explain

from support.database import qident
from support.refusals import assert_refused_and_unchanged


def bind(text):
    return bind_statement(parse_statement(text), text)


def test_full_statement():
    s = bind('anonymize "My Schema".patients INTO pub WITH (sensitive = disease, k = 3, l = 2, t = 0.25, '
             'qi = (zipcode, "Age Group"), keep = (income), method = \'greedy\', seed = 7, time_limit = 2.5, '
             'patterns = ((zipcode), (zipcode, "Age Group")), l_variant = distinct, t_distance = ordered)')
    assert (s.k, s.l, s.t, s.seed, s.time_limit) == (3, 2, 0.25, 7, 2.5)
    assert s.qi == ["zipcode", "Age Group"] and s.keep == ["income"] and s.sensitive == "disease"
    assert s.patterns == [["zipcode"], ["zipcode", "Age Group"]]
    assert (s.method, s.l_variant, s.t_distance) == ("greedy", "distinct", "ordered")
    assert s.source.sql() == '"My Schema"."patients"' and s.target.sql() == '"pub"'


def test_no_parentheses_any_case_any_order():
    s = bind("AnOnYmIzE t WiTh qi = a, K=3")
    assert s.k == 3 and s.qi == ["a"] and s.target is None


def test_round_trip_through_the_generator():
    text = 'ANONYMIZE s."T x" INTO y WITH (k = 3, qi = (a, b))'
    assert parse_statement(text).sql(dialect=AnonDialect) == text


def test_split_keeps_plain_sql_verbatim():
    script = "SELECT ';' AS x;  ANONYMIZE t WITH k = 2 ; /* ; */ select  1"
    assert split_statements(script) == [("SELECT ';' AS x", False), ("ANONYMIZE t WITH k = 2", True),
                                        ("/* ; */ select  1", False)]
    assert split_statements("SELECT 1; SELECT 2") == [("SELECT 1; SELECT 2", False)]


@pytest.mark.parametrize("text,where", [
    ("ANONYMIZE t WITH (k = 3", "column 23"),
    ("ANONYMIZE t\n  WITH (k 3)", "line 2"),
    ("ANONYMIZE WITH k = 3", "expected a table name"),
    ("ANONYMIZE t WITH k = 3 extra", "unexpected 'extra'"),
    ("ANONYMIZE t WITH k = 3, k = 4", "column 25"),
])
def test_errors_name_the_position(text, where):
    with pytest.raises(AnonymizeError, match=where):
        bind(text)


# --------------------------------------------------------------------------------------------------
# Syntax errors in user terms, CTE names in the SQL macros, hierarchy files read through DuckDB
#
# through DuckDB.
#
# * every malformed statement is refused with one line that names the problem and where it is,
#   never sqlglot's internals (class names, Token reprs, "Required keyword");
# * every CTE of every macro in sql/*.sql is named __anon_..., so user tables of the same name stay
#   visible to query_table() (checked for each of sql/t_hierarchical.sql's names, as the table and as
#   the hierarchy table);
# * hierarchy files named in SQL (sa_hierarchy, hierarchies) are read by DuckDB, so
#   `SET enable_external_access = false` refuses them, and errors about their content name lines,
#   never the file's text; `table(name)` in hierarchies is a name, never SQL.
# --------------------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]

INTERNALS = ("sqlglot", "<class", "Token", "TokenType", "Required keyword", "Expecting", "SENTINEL", "Traceback",
             "Error tokenizing")
POSITION = re.compile(r"line \d+, column \d+")


def front_end_error(text: str) -> str:
    """The message the front end (parser + option binder) gives for `text`."""
    explain, body = strip_explain(text)
    with pytest.raises(AnonymizeError) as caught:
        bind_statement(parse_statement(body), body, explain=explain)
    return str(caught.value)


# --------------------------------------------------------------------------- syntax errors


MALFORMED = [
    "ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, method = tp+)",
    "ANONYMIZE hospital\nWITH (k = 2,\n  method = tp+)",
    "ANONYMIZE hospital WITH k = 2, method = tp++",
    "ANONYMIZE hospital WITH k = 2, method = tp-",
    "ANONYMIZE hospital WITH k = 2, method = 'tp'+",
    "ANONYMIZE hospital WITH k = 2, sa_hierarchy = /etc/passwd",
    "ANONYMIZE (SELECT * FROM hospital) WITH (k = 2)",
    "ANONYMIZE hospital INTO (x) WITH k = 2",
    "ANONYMIZE hospital. WITH k = 2",
    "ANONYMIZE 123 WITH k = 2",
    "ANONYMIZE * WITH k = 2",
    "ANONYMIZE hospital INTO x.* WITH k = 2",
    "ANONYMIZE read_csv('/etc/passwd') WITH (k = 2)",
    "ANONYMIZE hospital WITH (k = 2, patterns = ((zipcode); DROP TABLE hospital))",
    "ANONYMIZE hospital WITH (k = 'abc",
    'ANONYMIZE hospital WITH (k = "abc',
    "ANONYMIZE hospital WITH (k = 2 /* unclosed",
    'ANONYMIZE "unclosed WITH k = 2',
    "ANONYMIZE hospital WITH k = $$abc",
    "ANONYMIZE hospital WITH k = e'\\",
    "ANONYMIZE hospital WITH (k = 2 +)",
    "ANONYMIZE hospital WITH (k = 2 * )",
    "ANONYMIZE hospital WITH (k = )",
    "ANONYMIZE hospital WITH (k = ",
    "ANONYMIZE hospital WITH (k",
    "ANONYMIZE hospital WITH (",
    "ANONYMIZE hospital WITH",
    "ANONYMIZE hospital",
    "ANONYMIZE",
    "ANONYMIZE hospital AS h WITH k = 2",
    "ANONYMIZE hospital, other WITH k = 2",
    "ANONYMIZE hospital WITH k = CAST(",
    "ANONYMIZE hospital WITH k = CAST(2 AS)",
    "ANONYMIZE hospital WITH k = (1,",
    "ANONYMIZE hospital WITH k = [1,",
    "ANONYMIZE hospital WITH k = {'a': }",
    "ANONYMIZE hospital WITH k = f(",
    "ANONYMIZE hospital WITH k = CASE WHEN",
    "ANONYMIZE hospital WITH k = CASE WHEN 1 THEN 2",
    "ANONYMIZE hospital WITH k = (SELECT",
    "ANONYMIZE hospital WITH k = (SELECT FROM)",
    "ANONYMIZE hospital WITH k = 2::",
    "ANONYMIZE hospital WITH k = x.",
    "ANONYMIZE hospital WITH k = x[",
    "ANONYMIZE hospital WITH k = -",
    "ANONYMIZE hospital WITH k = NOT",
    "ANONYMIZE hospital WITH k = (",
    "ANONYMIZE hospital WITH k = MAP {",
    "ANONYMIZE hospital WITH k = COLUMNS(",
    "ANONYMIZE hospital WITH k = 2 COLLATE",
    "ANONYMIZE hospital WITH k = count(*) FILTER (",
    "ANONYMIZE hospital WITH k = TRY_CAST(",
    "ANONYMIZE hospital WITH k = EXTRACT(",
    "ANONYMIZE hospital WITH k = 2, hierarchies = (a = )",
    "ANONYMIZE hospital WITH k = 2, qi = (select, from)",
    "ANONYMIZE hospital WITH k = 2, qi = [a, b",
    "ANONYMIZE hospital WITH k = 2, qi = (a\n,\n",
    "ANONYMIZE hospital WITH k = 2, patterns = ((a, b), (c",
    "ANONYMIZE hospital WITH k = 2 2",
    "ANONYMIZE hospital WITH k = 2 ORDER BY x",
    "ANONYMIZE hospital WITH k = 2, report = C:\\x.html",
    "EXPLAIN ANONYMIZE hospital WITH k = 2 +",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_syntax_errors_are_one_line_in_user_terms_with_a_position(text):
    message = front_end_error(text)
    assert "\n" not in message
    assert not any(word in message for word in INTERNALS), message
    assert POSITION.search(message), message


@pytest.mark.parametrize("text,expected", [
    ("ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, method = tp+)",
     r"^syntax error at line 1, column \d+: cannot read the value of option 'method' \(tp\+\): .*"
     r"quote it: method = 'tp\+'$"),
    ("ANONYMIZE hospital WITH k = 2, sa_hierarchy = /etc/x.csv", r"quote it: sa_hierarchy = '/etc/x.csv'$"),
    ("ANONYMIZE (SELECT * FROM hospital) WITH (k = 2)",
     r"^syntax error at line 1, column 11: expected a table name after ANONYMIZE, not a query in parentheses"),
    ("ANONYMIZE hospital INTO x.* WITH k = 2", r"^syntax error at line 1, column \d+: expected a table name after "
                                               r"INTO, got '\*'$"),
    ("ANONYMIZE read_csv('/etc/passwd') WITH (k = 2)",
     r"^syntax error at line 1, column \d+: expected a table name after ANONYMIZE, not a function call"),
    ("ANONYMIZE hospital WITH (k = 2, patterns = ((zipcode); DROP TABLE hospital))",
     r"^syntax error at line 1, column 53: cannot read the value of option 'patterns' \(\(\(zipcode\)\): "
     r"expected '\)'$"),
    ("ANONYMIZE hospital WITH (k = 'abc", r"^syntax error at line 1, column 30: a string begins here but is not "
                                          r"closed \(missing '\)$"),
    ("ANONYMIZE hospital\n WITH (k = 2 /* unclosed", r"^syntax error at line 2, column 14: a comment begins here"),
    ('ANONYMIZE "unclosed WITH k = 2', r"^syntax error at line 1, column 11: a quoted name begins here"),
    ("ANONYMIZE hospital AS h WITH k = 2", r"expected WITH \(option = value, \.\.\.\), got 'AS'$"),
    ("ANONYMIZE hospital WITH (k = 2 +)", r"^syntax error at line 1, column 33: cannot read the value of option "
                                          r"'k' \(2 \+\): it is incomplete$"),
    ("ANONYMIZE hospital WITH k = 1e", r"^option k must be a number, got 1e \(at line 1, column 25\)$"),
    ("ANONYMIZE hospital WITH k = 2, method = tp + 1", r"must be one of .*, got tp \+ 1 \(at line 1, column 32\)$"),
])
def test_syntax_error_messages(text, expected):
    assert re.search(expected, front_end_error(text)), front_end_error(text)


@pytest.mark.parametrize("text,expected", [
    ("ANONYMIZE hospital WITH (k = 2); DROP TABLE hospital",
     r"^expected exactly one ANONYMIZE statement, but another statement follows: 'DROP' \(at line 1, column 34\)$"),
    ("DROP TABLE hospital", r"^expected exactly one ANONYMIZE statement, got 'DROP' \(at line 1, column 1\)$"),
    ("ANONYMIZE hospital WITH (k = 2); SELEC garbage (", r"another statement follows: 'SELEC'"),
    ("", r"^expected exactly one ANONYMIZE statement, got nothing$"),
])
def test_one_statement_only(text, expected):
    with pytest.raises(AnonymizeError, match=expected):
        parse_statement(text)


def test_trailing_semicolons_and_comments_are_fine():
    parse_statement("ANONYMIZE hospital WITH (k = 2);;  -- done")
    parse_statement("; ANONYMIZE hospital WITH (k = 2) /* done */ ;")


@pytest.mark.parametrize("statement", ["ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, method = tp+)",
                                       "ANONYMIZE (SELECT * FROM hospital) WITH (k = 2)",
                                       "ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age) extra"])
def test_syntax_errors_through_the_connection(con, statement):
    con.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    assert_refused_and_unchanged(con, statement, r"^syntax error at line \d+, column \d+: ")


def test_quoted_tp_plus_still_works(con):
    con.execute("ANONYMIZE hospital WITH (k = 2, l = 2, sensitive = disease, method = 'tp+')")
    assert con.duckdb.execute("SELECT count(*) FROM hospital_anon").fetchone()[0] == 10


# --------------------------------------------------------------------------- CTE names in sql/*.sql


def _cte_names(path: Path) -> list[str]:
    code = "\n".join(line.split("--")[0] for line in path.read_text().splitlines())
    return re.findall(r"(?:\bWITH(?:\s+RECURSIVE)?|\),)\s+(\w+)\s*(?:\([^()]*\))?\s+AS\s+(?:NOT\s+)?"
                      r"(?:MATERIALIZED\s+)?\(", code, flags=re.IGNORECASE)


@pytest.mark.parametrize("path", sorted((REPO / "sql").glob("*.sql")), ids=lambda p: p.name)
def test_every_cte_in_every_sql_file_is_prefixed(path):
    names = _cte_names(path)
    assert names, f"no CTE found in {path.name}: is the pattern out of date?"
    assert all(name.startswith("__anon_") for name in names), [n for n in names if not n.startswith("__anon_")]


def test_the_cte_pattern_sees_every_with():
    """Each WITH that opens a CTE list is seen (so a new file style cannot slip past the test above)."""
    for path in sorted((REPO / "sql").glob("*.sql")):
        code = "\n".join(line.split("--")[0] for line in path.read_text().splitlines())
        withs = len(re.findall(r"\bWITH\b(?!\s+ORDINALITY)", code, flags=re.IGNORECASE))
        firsts = len(re.findall(r"\bWITH(?:\s+RECURSIVE)?\s+\w+\s*(?:\([^()]*\))?\s+AS\s+(?:NOT\s+)?"
                                r"(?:MATERIALIZED\s+)?\(", code, flags=re.IGNORECASE))
        assert withs == firsts, path.name


# the CTE names sql/t_hierarchical.sql used before they were prefixed, and a few more
OLD_T_HIERARCHICAL_CTES = ["raw", "h", "top", "two_nodes", "incomplete", "two_parents", "problem", "shape", "cs",
                           "missing", "g", "cells", "tot", "per_level", "per_class"]


@pytest.fixture(scope="module")
def hier_con():
    con = duckanon.connect()
    raw = con.duckdb
    hier = ("SELECT * FROM (VALUES ('flu', 1, 'resp'), ('cold', 1, 'resp'), ('hiv', 1, 'other'), "
            "('flu', 2, '*'), ('cold', 2, '*'), ('hiv', 2, '*')) v(value, level, node)")
    data = "SELECT i % 3 AS q, ['flu', 'cold', 'hiv'][i % 3 + 1] AS s FROM range(12) r(i)"
    raw.execute(f"CREATE TABLE neutral_hier AS {hier}")
    raw.execute(f"CREATE TABLE neutral_data AS {data}")
    yield con
    con.close()


@pytest.mark.parametrize("name", OLD_T_HIERARCHICAL_CTES)
def test_t_hierarchical_sees_user_tables_named_like_any_old_cte(hier_con, name):
    raw = hier_con.duckdb
    expected = raw.execute("SELECT * FROM anon_t_hierarchical('neutral_data', ['q'], 's', 'neutral_hier')").fetchall()
    assert expected[0][0] > 0
    raw.execute(f"CREATE OR REPLACE TABLE {qident(name)} AS SELECT * FROM neutral_data")
    assert raw.execute(f"SELECT * FROM anon_t_hierarchical('{name}', ['q'], 's', 'neutral_hier')").fetchall() == expected
    raw.execute(f"CREATE OR REPLACE TABLE {qident(name)} AS SELECT * FROM neutral_hier")  # as the hierarchy
    assert raw.execute(f"SELECT * FROM anon_t_hierarchical('neutral_data', ['q'], 's', '{name}')").fetchall() == expected
    assert raw.execute(f"SELECT * FROM anon_hierarchy_check('{name}')").fetchall() == [(True, 2)]
    raw.execute(f"DROP TABLE {qident(name)}")


# --------------------------------------------------------------------------- hierarchy files


SA_OPTIONS = "k = 2, sensitive = disease, t = 0.5, t_distance = hierarchical"
GOOD_SA_FILE = "Viral Infection;infectious;*\nHeart Disease;chronic;*\nCancer;chronic;*\n"


def test_sa_hierarchy_file_works(con, tmp_path):
    path = tmp_path / "disease.csv"
    path.write_text(GOOD_SA_FILE)
    summary = con.anonymize(f"ANONYMIZE hospital WITH ({SA_OPTIONS}, sa_hierarchy = '{path}')")
    assert summary.rows == 10 and summary.min_class_size >= 2


@pytest.mark.parametrize("content,message", [
    ("", "hierarchy {path} is empty"),
    ("secret-a;x;*\nsecret-b;*\n", "hierarchy {path} has rows with different numbers of levels: line 1 has 3 columns, "
                                   "line 2 has 2"),
    ("secret-a;x;*\n\nsecret-a;y;*\n", "hierarchy {path} is not a tree: lines 1 and 3 give the same value different "
                                       "parents at level 1"),
    ("secret-a;x;X\nsecret-b;x;Y\n", "hierarchy {path} is not a tree: lines 1 and 2 give the same node at level 1 "
                                     "different parents at level 2"),
    ('secret-a;"x\ny";*\nsecret-b;z\n', "hierarchy {path} has rows with different numbers of levels: line 1 has 3 "
                                        "columns, line 3 has 2"),
])
def test_sa_hierarchy_errors_name_lines_not_content(con, tmp_path, content, message):
    path = tmp_path / "secret.csv"
    path.write_text(content)
    con.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    assert_refused_and_unchanged(con, f"ANONYMIZE hospital WITH ({SA_OPTIONS}, sa_hierarchy = '{path}')",
                                 "^" + re.escape(message.format(path=path)) + "$")


def test_sa_hierarchy_missing_file(con, tmp_path):
    with pytest.raises(AnonymizeError, match=f"^cannot read hierarchy file {re.escape(str(tmp_path))}/nosuch.csv: "
                                             "no such file$"):
        con.execute(f"ANONYMIZE hospital WITH ({SA_OPTIONS}, sa_hierarchy = '{tmp_path}/nosuch.csv')")


def test_sa_hierarchy_with_file_access_disabled(con, tmp_path):
    path = tmp_path / "disease.csv"
    path.write_text(GOOD_SA_FILE)
    con.duckdb.execute("SET enable_external_access = false")
    with pytest.raises(AnonymizeError, match=r"^cannot read hierarchy file .*Permission Error: .*disabled") as caught:
        con.execute(f"ANONYMIZE hospital WITH ({SA_OPTIONS}, sa_hierarchy = '{path}')")
    assert "Viral" not in str(caught.value)
    with pytest.raises(Exception, match="Permission|disabled"):  # also through the SQL function
        con.duckdb.execute("SELECT anonymize(?)", [f"ANONYMIZE hospital WITH ({SA_OPTIONS}, sa_hierarchy = '{path}')"])


def _qi_hierarchy_statement(path) -> str:
    return f"ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'lattice', hierarchies = (age = '{path}'))"


def test_qi_hierarchy_file_is_read_through_duckdb(con, tmp_path):
    path = tmp_path / "age.csv"
    path.write_text("".join(f"{a};{a // 10 * 10}s;*\n" for a in range(100)))
    con.anonymize(_qi_hierarchy_statement(path))
    assert con.duckdb.execute("SELECT count(*) FROM hospital_anon WHERE age LIKE '%0s' OR age = '*'").fetchone()[0] == 10
    con.duckdb.execute("DROP TABLE hospital_anon")
    con.duckdb.execute("SET enable_external_access = false")
    with pytest.raises(AnonymizeError, match=r"^cannot read hierarchy file .*Permission Error: .*disabled"):
        con.execute(_qi_hierarchy_statement(path))


@pytest.mark.parametrize("content,message", [
    ("secret-a;x;*\nsecret-b;*\n", "hierarchy {path} is inconsistent: line 2 has 1 levels, line 1 has 2"),
    ("secret-a;x;X\n\nsecret-b;x;Y\n", "hierarchy {path} is not monotone: lines 1 and 3 have the same label at "
                                       "level 1 but different labels at level 2"),
    ("secret-a;x;*\nsecret-a;y;*\n", "hierarchy {path}: lines 1 and 2 have the same value"),
])
def test_qi_hierarchy_file_errors_name_lines_not_content(tmp_path, content, message):
    import duckdb

    path = tmp_path / "h.csv"
    path.write_text(content)
    with pytest.raises(AnonymizeError) as caught:
        H.parse_spec(str(path), "col", con=duckdb.connect())
    assert str(caught.value) == message.format(path=path)
    assert "secret" not in str(caught.value).replace(str(tmp_path), "")


def test_hierarchy_table_name_is_never_run_as_sql(con):
    raw = con.duckdb
    raw.execute("CREATE TABLE h_age AS SELECT DISTINCT age AS value, '*' AS l1 FROM hospital")
    raw.execute("CREATE TABLE victim AS SELECT 1 AS x")
    con.execute("ANONYMIZE hospital WITH (k = 2, sensitive = disease)")
    assert_refused_and_unchanged(
        con, "ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'lattice', "
             "hierarchies = (age = 'table(h_age; DROP TABLE victim)'))", r"^cannot read hierarchy table")
    assert raw.execute("SELECT count(*) FROM victim").fetchone()[0] == 1
    con.execute("ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'lattice', hierarchies = (age = 'table(h_age)'))")
