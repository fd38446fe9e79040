"""Front end: the ANONYMIZE grammar on top of sqlglot's DuckDB dialect."""

import pytest

from duckanon.errors import AnonymizeError
from duckanon.sql import bind_statement, parse_statement, split_statements
from duckanon.sql.parser import AnonDialect


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
