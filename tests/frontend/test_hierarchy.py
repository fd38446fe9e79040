"""Generalization hierarchies: ARX files, builders, SQL specs, tables, and their errors."""

import re
import csv
import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duckanon import hierarchy as H
from duckanon.errors import AnonymizeError

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
DATASETS = {"adult": "adult.csv", "cup": "cup.csv", "fars": "fars_subset.csv"}


def hierarchy_files(dataset):
    files = sorted((SHARED / dataset).glob(f"{dataset}_hierarchy_*.csv"))
    assert files
    return [(f, f.stem.split("_hierarchy_")[1]) for f in files]


def file_rows(path):
    """An independent reading of an ARX file: value -> its labels at levels 1..H."""
    with open(path, newline="") as f:
        return {row[0]: row[1:] for row in csv.reader(f, delimiter=";") if row}


def distinct_values(dataset, column):
    con = duckdb.connect()
    table = f"read_csv('{SHARED / dataset / DATASETS[dataset]}', delim=';')"
    return [r[0] for r in con.execute(f'SELECT DISTINCT "{column}" FROM {table}').fetchall()]


def assert_monotone(bound):
    """Codes are dense per level, level 0 is the identity, and each group has one parent."""
    n = len(bound.values)
    assert bound.codes.dtype == np.int64 and bound.codes.shape == (n, bound.height + 1)
    assert bound.codes[:, 0].tolist() == list(range(n))
    for h in range(bound.height + 1):
        assert sorted(set(bound.codes[:, h].tolist())) == list(range(bound.n_groups(h)))
        assert len(bound.labels[h]) == bound.n_groups(h)
        assert bound.group_sizes(h).sum() == n
    for h in range(bound.height):
        parents = {}
        for low, high in bound.codes[:, h : h + 2].tolist():
            assert parents.setdefault(low, high) == high


def label_of(bound, value, level):
    return bound.labels[level][bound.codes[bound.values.index(value), level]]


# --------------------------------------------------------------------------- ARX files


@pytest.mark.parametrize("path,column", hierarchy_files("adult"), ids=lambda x: getattr(x, "name", x))
def test_adult_hierarchies_bind_to_the_data_as_the_file_says(path, column):
    expected = file_rows(path)
    hierarchy = H.from_csv(path)
    assert hierarchy.height == len(next(iter(expected.values())))
    values = distinct_values("adult", column)
    bound = hierarchy.bind(values, column)
    assert_monotone(bound)
    assert bound.height == hierarchy.height
    assert bound.n_groups(bound.height) == 1 and bound.labels[-1] == ["*"]
    for v in values:
        assert [label_of(bound, v, h) for h in range(1, bound.height + 1)] == expected[str(v)]


def test_adult_age_39_and_education():
    age = H.from_csv(SHARED / "adult" / "adult_hierarchy_age.csv").bind(distinct_values("adult", "age"), "age")
    assert 39 in age.values  # BIGINT in the table, '39' in the file
    assert [label_of(age, 39, h) for h in range(5)] == ["39", "35-39", "30-39", "20-39", "*"]
    education = H.from_csv(SHARED / "adult" / "adult_hierarchy_education.csv").bind(["Masters", "Bachelors", "9th"])
    assert education.labels[1:] == [
        ["Undergraduate", "High School", "Graduate"], ["Higher education", "Secondary education"], ["*"]]
    assert education.codes.tolist() == [[0, 2, 0, 0], [1, 0, 0, 0], [2, 1, 1, 0]]  # file order, not value order
    assert education.group_sizes(2).tolist() == [2, 1]
    # ARX's domain is the file's 16 rows: 'Higher education' stands for 7 of them, 'Secondary
    # education' for 6, whichever the column holds
    assert education.domain_size == 16 and education.domain_leaves(2).tolist() == [7, 6]
    assert education.loss(2).tolist() == pytest.approx([6 / 15, 5 / 15])
    assert education.loss(3).tolist() == [1.0]


@pytest.mark.parametrize("dataset", ["cup", "fars"])
def test_cup_and_fars_hierarchies_crlf_bind_to_their_data(dataset):
    for path, column in hierarchy_files(dataset):
        expected = file_rows(path)
        bound = H.from_csv(path).bind(distinct_values(dataset, column), column)
        assert_monotone(bound)
        for v in bound.values[:50]:
            assert [label_of(bound, v, h) for h in range(1, bound.height + 1)] == expected[str(v)]
        assert all(not label.endswith("\r") for labels in bound.labels for label in labels)


def test_cup_zip_file_keeps_leading_zeros():
    bound = H.from_csv(SHARED / "cup" / "cup_hierarchy_ZIP.csv").bind(["01247", "98765"], "ZIP")
    assert bound.rows() == [
        ["01247", "0124*", "012**", "01***", "0****", "*"], ["98765", "9876*", "987**", "98***", "9****", "*"]]


def test_numbers_match_entries_with_the_same_value():
    age = H.from_csv(SHARED / "adult" / "adult_hierarchy_age.csv")
    bound = age.bind([39.0, Decimal("41.00"), np.int64(17), "42"])
    assert bound.labels[1] == ["15-19", "35-39", "40-44"]
    assert bound.codes[:, 1].tolist() == [1, 2, 0, 2]


def test_quoted_fields_bom_and_crlf(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes('\ufeff"a;b";"x";*\r\n"c""d";x;*\r\n\r\n'.encode())
    bound = H.from_csv(path).bind(["a;b", 'c"d'])
    assert bound.rows() == [["a;b", "x", "*"], ['c"d', "x", "*"]]


def test_null_row_is_empty_field_or_NULL():
    for spelling in ["", "NULL", None]:
        bound = H.from_rows([["a", "g", "*"], [spelling, "unknown", "*"]]).bind([None, "a"])
        assert bound.labels == [[None, "a"], ["g", "unknown"], ["*"]]  # file order
        assert bound.codes.tolist() == [[0, 1, 0], [1, 0, 0]]


# --------------------------------------------------------------------------- builders


def test_prefix_on_zipcodes():
    bound = H.prefix().bind(["98765", "98766", "98711", "12345"])
    assert_monotone(bound)
    assert bound.height == 6
    assert bound.rows()[0] == ["98765", "9876*", "987**", "98***", "9****", "*****", "*"]
    assert bound.labels[1] == ["1234*", "9871*", "9876*"]  # lexicographic codes
    assert bound.codes[:, 1].tolist() == [2, 2, 1, 0]
    assert bound.codes[:, 2].tolist() == [1, 1, 1, 0]
    assert bound.group_sizes(3).tolist() == [1, 3]


def test_prefix_unequal_lengths_and_width():
    bound = H.prefix().bind([123, 98765, None, 12])
    assert_monotone(bound)
    assert bound.rows() == [
        ["123", "12*", "1**", "***", "***", "***", "*"],
        ["98765", "9876*", "987**", "98***", "9****", "*****", "*"],
        [None, None, None, None, None, None, "*"],
        ["12", "1*", "**", "**", "**", "**", "*"],
    ]
    short = H.prefix(2).bind(["98765", "98711"])
    assert short.height == 3 and short.rows()[1] == ["98711", "9871*", "987**", "*"]


def test_prefix_wider_than_its_values_repeats_the_whole_mask():
    bound = H.prefix(5).bind(["98", "9"])
    assert bound.height == 6
    assert bound.rows() == [["98", "9*", "**", "**", "**", "**", "*"], ["9", "*", "*", "*", "*", "*", "*"]]


@pytest.mark.parametrize("widths, values", [
    ((1e-9,), [6e11, 0.0]),  # 6e11 / 1e-9 wrapped around int64: labelled [-9223372036.85, ...)
    ((10,), [2**63 + 5, 0]),  # a UBIGINT past int64: labelled with a negative interval
])
def test_intervals_refuse_numbers_their_codes_cannot_hold(widths, values):
    with pytest.raises(AnonymizeError) as refused:
        H.intervals(*widths).bind(values)
    assert str(refused.value) == (f"intervals: the values of the column are too large for the width {widths[0]}: "
                                  "their intervals could not be numbered exactly")


def test_intervals_on_ages():
    ages = [39, 35, 40, 17, 0, -3, 99]
    bound = H.intervals(5, 10, 20).bind(ages)
    assert_monotone(bound)
    assert bound.rows()[0] == ["39", "[35, 40)", "[30, 40)", "[20, 40)", "*"]
    assert bound.rows()[5] == ["-3", "[-5, 0)", "[-10, 0)", "[-20, 0)", "*"]
    assert bound.labels[3] == ["[-20, 0)", "[0, 20)", "[20, 40)", "[40, 60)", "[80, 100)"]  # numeric order
    assert label_of(bound, 35, 1) == label_of(bound, 39, 1) != label_of(bound, 40, 1)


def test_intervals_on_floats_and_decimals():
    bound = H.intervals(0.1, 0.3).bind([0.0, 0.29999, 0.3, Decimal("7.25"), None])
    assert_monotone(bound)
    assert [row[1:3] for row in bound.rows()] == [
        ["[0, 0.1)", "[0, 0.3)"], ["[0.2, 0.3)", "[0, 0.3)"], ["[0.3, 0.4)", "[0.3, 0.6)"],
        ["[7.2, 7.3)", "[7.2, 7.5)"], [None, None],
    ]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=50, unique=True), st.integers(1, 50), st.integers(2, 4))
def test_intervals_contain_their_values(values, width, factor):
    bound = H.intervals(width, width * factor).bind(values)
    assert_monotone(bound)
    for row, v in zip(bound.rows(), values):
        for label, w in zip(row[1:3], (width, width * factor)):
            lo, hi = (int(x) for x in label.strip("[)").split(", "))
            assert lo <= v < hi and hi - lo == w and lo % w == 0


def test_dates():
    values = [datetime.date(2024, 3, 5), datetime.datetime(2019, 12, 31, 23, 59), datetime.date(2024, 3, 9), None,
              datetime.date(1999, 1, 1)]
    bound = H.dates().bind(values)
    assert_monotone(bound)
    assert bound.rows()[:2] == [
        ["2024-03-05", "2024-03", "2024", "2020s", "*"], ["2019-12-31 23:59:00", "2019-12", "2019", "2010s", "*"]]
    assert bound.labels[3] == ["1990s", "2010s", "2020s", None]  # chronological, NULL last
    fine = H.dates(("day", "quarter", "year")).bind([datetime.datetime(2024, 5, 6, 7, 8), datetime.date(2024, 1, 1)])
    assert fine.rows()[0][1:] == ["2024-05-06", "2024-Q2", "2024", "*"]


def test_dates_from_duckdb_timestamps():
    con = duckdb.connect()
    query = "SELECT DISTINCT d FROM (VALUES (DATE '2001-02-03'), (DATE '2001-02-28'), (NULL)) t(d) ORDER BY d"
    values = [r[0] for r in con.execute(query).fetchall()]
    bound = H.dates(("month", "year")).bind(values)
    assert bound.rows() == [
        ["2001-02-03", "2001-02", "2001", "*"], ["2001-02-28", "2001-02", "2001", "*"], [None, None, None, "*"]]


def test_ordered_groups():
    order = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th"]
    bound = H.ordered(order, [2, 4]).bind(["9th", "Preschool", "5th-6th", "1st-4th"])
    assert_monotone(bound)
    assert bound.labels[1:] == [["Preschool..1st-4th", "5th-6th..7th-8th", "9th"], ["Preschool..7th-8th", "9th"], ["*"]]
    assert bound.codes.tolist() == [[0, 2, 1, 0], [1, 0, 0, 0], [2, 1, 0, 0], [3, 0, 0, 0]]
    assert H.ordered_groups is H.ordered


# --------------------------------------------------------------------------- parse_spec


def test_parse_spec_builders():
    assert H.parse_spec("prefix").bind(["123"]).rows() == [["123", "12*", "1**", "***", "*"]]
    assert H.parse_spec(" PREFIX ( 1 ) ").bind(["123"]).rows() == [["123", "12*", "*"]]
    assert H.parse_spec("intervals(5, 10, 20)").bind([39]).rows() == [["39", "[35, 40)", "[30, 40)", "[20, 40)", "*"]]
    assert H.parse_spec("intervals(2.5)").bind([3]).rows() == [["3", "[2.5, 5)", "*"]]
    assert H.parse_spec("dates").bind([datetime.date(2024, 3, 5)]).rows()[0][1:] == ["2024-03", "2024", "2020s", "*"]
    assert H.parse_spec("dates(month, year)").bind([datetime.date(2024, 3, 5)]).rows()[0][1:] == ["2024-03", "2024", "*"]
    spec = "ordered(a, 'b, c', 'it''s', d; 2, 4)"
    assert H.parse_spec(spec).bind(["it's", "b, c"]).rows() == [
        ["it's", "it's..d", "a..d", "*"], ["b, c", "a..b, c", "a..d", "*"]]


def test_parse_spec_paths_with_column(monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the repository root, as in the README
    spec = "../shared/data/adult/adult_hierarchy_{column}.csv"
    assert H.parse_spec(spec, "age").bind([39]).rows() == [["39", "35-39", "30-39", "20-39", "*"]]
    assert H.parse_spec(spec, "marital-status").bind(["Divorced"]).rows() == [["Divorced", "spouse not present", "*"]]
    with pytest.raises(AnonymizeError, match="cannot read hierarchy file ../shared/data/adult/adult_hierarchy_nosuch.csv"):
        H.parse_spec(spec, "nosuch")


def test_parse_spec_table():
    con = duckdb.connect()
    con.execute("CREATE TABLE h_age AS SELECT * FROM (VALUES (39, '35-39', '*'), (40, '40-44', '*')) t(value, l1, l2)")
    assert H.parse_spec("table(h_{column})", "age", con=con).bind([40]).rows() == [["40", "40-44", "*"]]
    with pytest.raises(AnonymizeError, match=r"table\(name\) needs one table name and a connection"):
        H.parse_spec("table(h_age)")


@pytest.mark.parametrize("spec,message", [
    ("prefix(0)", "prefix: width must be a positive integer, got 0"),
    ("prefix(x)", "prefix: 'x' is not an integer"),
    ("intervals()", "intervals: give at least one width"),
    ("intervals(5, x)", "intervals: 'x' is not a number"),
    ("intervals(5, 7)", "intervals: each width must be a larger multiple of the previous one, got 5 then 7"),
    ("intervals(10, 5)", "intervals: each width must be a larger multiple of the previous one, got 10 then 5"),
    ("intervals(-1)", "intervals: widths must be positive numbers, got -1"),
    # the DP attack's: a level per masked character (prefix(1000000) exhausted memory), and a
    # ratio whose integer division of int64 codes overflowed (a raw OverflowError)
    ("prefix(1001)", "prefix: width must be at most 1,000, got 1,001"),
    ("intervals(1, 1e300)", "intervals: each width may be at most 2^53 times the previous one, got 1 then 1e+300"),
    ("dates(year, month)", "dates: levels must go from fine to coarse"),
    ("dates(week)", "dates: unknown level 'week' (known: day, month, quarter, year, decade)"),
    ("ordered(a, b)", "ordered needs categories and group sizes"),
    ("ordered(a, b; 2, 3)", "ordered: each group size must be a larger multiple of the previous one, got 2 then 3"),
    ("ordered(a, a; 2)", "ordered: categories 1 and 2 are the same"),
    ("ordered(a, 'b; 2)", "unclosed quote"),
    ("ordered(a, b; 0)", "ordered: group sizes must be positive integers, got 0"),
    ("", "empty hierarchy specification"),
    ("no/such/file.csv", "cannot read hierarchy file no/such/file.csv"),
])
def test_parse_spec_errors(spec, message):
    with pytest.raises(AnonymizeError, match="^" + re.escape(message)):
        H.parse_spec(spec, "col")


# --------------------------------------------------------------------------- tables


def test_to_table_from_table_round_trip():
    con = duckdb.connect()
    original = H.from_csv(SHARED / "adult" / "adult_hierarchy_age.csv")
    H.to_table(con, original, "hier_age")
    assert con.execute("SELECT column_name, column_type FROM (DESCRIBE hier_age)").fetchall() == [
        ("value", "VARCHAR"), ("level1", "VARCHAR"), ("level2", "VARCHAR"), ("level3", "VARCHAR"), ("level4", "VARCHAR")]
    assert con.execute("SELECT * FROM hier_age WHERE value = '39'").fetchall() == [("39", "35-39", "30-39", "20-39", "*")]
    loaded = H.from_table(con, "hier_age")
    values = distinct_values("adult", "age")
    a, b = original.bind(values), loaded.bind(values)
    assert np.array_equal(a.codes, b.codes) and a.labels == b.labels


def test_to_table_of_bound_builder_with_null():
    con = duckdb.connect()
    bound = H.intervals(10).bind([5, None, 12])
    H.to_table(con, bound, '"my hier"')
    assert con.execute('SELECT * FROM "my hier"').fetchall() == [
        ("5", "[0, 10)", "*"), (None, None, "*"), ("12", "[10, 20)", "*")]
    with pytest.raises(AnonymizeError, match="has no label \\(NULL\\) at level 1"):
        H.from_table(con, '"my hier"')
    rows = H.from_rows([["a", "x", "*"], [None, "unknown", "*"]])
    H.to_table(con, rows, "h2")
    assert H.from_table(con, "h2").bind([None, "a"]).labels[1] == ["x", "unknown"]
    with pytest.raises(AnonymizeError, match="to_table: intervals\\(10\\) has no rows of its own; bind it"):
        H.to_table(con, H.intervals(10), "h3")
    with pytest.raises(AnonymizeError, match="cannot read hierarchy table nosuch: Catalog Error"):
        H.from_table(con, "nosuch")


# --------------------------------------------------------------------------- errors


def test_missing_values_are_counted_never_shown():
    """The message counts the missing values and gives the query listing them; it never shows one
    (tests/pipeline/test_trust_names.py runs the queries)."""
    age = H.from_csv(SHARED / "adult" / "adult_hierarchy_age.csv")
    message = (r"^2 values of column age are missing from hierarchy .*adult_hierarchy_age.csv; list them with: "
               r"SELECT DISTINCT age FROM <table> WHERE NOT EXISTS \(SELECT 1 FROM \(SELECT coalesce\(column0, 'NULL'\) "
               r"FROM read_csv\('.*adult_hierarchy_age.csv', delim = ';', header = false, quote = '\"', "
               r"all_varchar = true\)\) h\(v\) WHERE encode\(h.v\) = encode\(coalesce\(CAST\(age AS VARCHAR\), 'NULL'\)\) "
               r"OR TRY_CAST\(h.v AS DOUBLE\) = TRY_CAST\(age AS DOUBLE\)\)$")
    with pytest.raises(AnonymizeError, match=message) as caught:
        age.bind([39, 150, 151], "age")
    assert "150" not in str(caught.value) and "151" not in str(caught.value)
    with pytest.raises(AnonymizeError, match="^1 value of column age is missing from hierarchy .*; list it with: "
                                              "SELECT DISTINCT age FROM people WHERE"):
        age.bind([39, None], "age", source="people")
    with pytest.raises(AnonymizeError, match="^1 value is missing from hierarchy ordered\\(2 categories; 2\\)$"):
        H.ordered(["a", "b"], [2]).bind(["a", "z"])


def test_builders_refuse_wrong_types():
    with pytest.raises(AnonymizeError, match="^intervals need numbers; column c holds text values$"):
        H.intervals(5).bind([1, "abc"], "c")
    with pytest.raises(AnonymizeError, match="^intervals need finite numbers; 1 value is NaN or infinite$"):
        H.intervals(5).bind([1.0, float("nan")])
    with pytest.raises(AnonymizeError, match="^dates need DATE or TIMESTAMP values; column d holds integer values$"):
        H.dates().bind([datetime.date(2020, 1, 1), 5], "d")
    with pytest.raises(AnonymizeError, match="^dates need DATE or TIMESTAMP values; 1 text value is not a date "
                                              "\\(YYYY-MM-DD\\)$"):
        H.dates().bind(["2020-01-05", "soon"])
    assert H.dates(("year",)).bind(["2020-01-05"]).rows() == [["2020-01-05", "2020", "*"]]


@pytest.mark.parametrize("content,message", [
    ("", "hierarchy {path} is empty"),
    ("\r\n\r\n", "hierarchy {path} is empty"),
    ("a;x;*\nb;*\n", "hierarchy {path} is inconsistent: line 2 has 1 levels, line 1 has 2"),
    ("a;x;X\nb;x;Y\n", "hierarchy {path} is not monotone: lines 1 and 2 have the same label at level 1 but different "
                      "labels at level 2"),
    ("a,x,*\nb,x,*\n", "hierarchy {path} has one column and no levels (is it ';'-separated?)"),
    ("a;x;*\nb;x;*\na;y;*\n", "hierarchy {path}: lines 1 and 3 have the same value"),
    (";x;*\nNULL;y;*\n", "hierarchy {path}: lines 1 and 2 have the same value"),
])
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "h.csv"
    path.write_text(content)
    with pytest.raises(AnonymizeError) as error:
        H.from_csv(path)
    assert str(error.value) == message.format(path=path)


def test_unreadable_file(tmp_path):
    with pytest.raises(AnonymizeError, match=f"^cannot read hierarchy file {tmp_path}: Is a directory$"):
        H.from_csv(tmp_path)


def test_sa_hierarchy_file_crlf_quotes_bom_and_blank_rows(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes('\ufeff"a;1";A;*\r\nb;A;*\r\n"c ""q""";"B";*\r\n\r\n  \n'.encode("utf-8"))
    assert H.read_sa_hierarchy(duckdb.connect(), str(path)) == [["a;1", "A", "*"], ["b", "A", "*"], ['c "q"', "B", "*"]]


def test_sa_hierarchy_file_not_utf8_is_latin1(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"\xff\xfe\xfa;x\n")  # older ARX exports are ISO-8859-1
    assert H.read_sa_hierarchy(duckdb.connect(), str(path)) == [["\xff\xfe\xfa", "x"]]


@pytest.mark.parametrize("content", [b"", b"\r\n\n  \n"])
def test_sa_hierarchy_file_empty(tmp_path, content):
    path = tmp_path / "h.csv"
    path.write_bytes(content)
    with pytest.raises(AnonymizeError, match=f"^hierarchy {path} is empty$"):
        H.read_sa_hierarchy(duckdb.connect(), str(path))


@pytest.mark.parametrize("name", ["nope.csv", "missing\nname.csv", "."])
def test_sa_hierarchy_file_unreadable_in_one_line(tmp_path, name):
    path = str(tmp_path / name)
    with pytest.raises(AnonymizeError, match="^cannot read hierarchy file .*: no such file$") as error:
        H.read_sa_hierarchy(duckdb.connect(), path)
    assert "\n" not in str(error.value)


def test_non_monotone_deeper_level():
    rows = [["1", "0-4", "0-9", "*"], ["2", "0-4", "0-9", "*"], ["7", "5-9", "0-9", "*"], ["8", "5-9", "0-19", "*"]]
    message = "^hierarchy rows is not monotone: rows 3 and 4 have the same label at level 1 but different labels at level 2$"
    with pytest.raises(AnonymizeError, match=message):
        H.from_rows(rows)


# --------------------------------------------------------------------------- scale


def test_bind_a_million_values():
    """(How long it takes: benchmarks/bench_time_limits.py; labels are made lazily.)"""
    values = list(range(10**6))
    bound = H.intervals(10, 100, 1000).bind(values)
    zips = H.prefix().bind(values)
    assert bound.n_groups(1) == 10**5 and bound.n_groups(3) == 10**3
    assert zips.n_groups(1) == 10**5  # '*' (0..9), '1*'..'9*', '10*'..'99*', ..., '10000*'..'99999*'


def test_empty_and_all_null_columns():
    for hierarchy in [H.prefix(), H.intervals(5), H.dates(), H.ordered(["a"], [1]), H.from_rows([["a", "*"]])]:
        empty = hierarchy.bind([])
        assert empty.codes.shape == (0, empty.height + 1) and empty.n_groups(1) == 0
    for hierarchy in [H.prefix(), H.intervals(5), H.dates(), H.ordered(["a"], [1])]:
        bound = hierarchy.bind([None])
        assert bound.rows() == [[None] * bound.height + ["*"]]


COLLISION = ("gives one text to two different groups of the values of column z ({}): their rows would be "
             "published as one class; give each group a label of its own")


@pytest.mark.parametrize("rows, values, levels", [
    # the black-box attack's case: level 1 of A1 and A2 is the text of the leaf A
    ([["A", "X", "*"], ["A1", "A", "*"], ["A2", "A", "*"]], ["A", "A1", "A2"], "level 0 and level 1"),
    # '*' below the top names one group, while a suppressed cell's '*' stands for any value
    ([["A", "*", "*"], ["B", "G", "*"]], ["A", "B"], "'*' and level 1"),
    # two groups of level 1 and 2 under one text
    ([["a", "g", "h", "*"], ["b", "g", "h", "*"], ["c", "h", "k", "*"]], ["a", "b", "c"], "level 1 and level 2"),
])
def test_a_text_names_one_group(rows, values, levels):
    with pytest.raises(AnonymizeError) as raised:
        H.from_rows(rows).bind(values, column="z")
    assert str(raised.value).endswith(COLLISION.format(levels))


def test_builders_labels_that_equal_a_value_are_refused():
    # a value spelled as another's mask, and an ISO string spelled as another's month
    with pytest.raises(AnonymizeError) as raised:
        H.prefix().bind(["1234", "1235", "123*"], column="z")
    assert str(raised.value) == "hierarchy prefix " + COLLISION.format("level 0 and level 1")
    with pytest.raises(AnonymizeError) as raised:
        H.dates(["month", "year"]).bind(["2024-03", "2024-03-05"], column="z")
    assert str(raised.value).endswith(COLLISION.format("level 0 and level 1"))


def test_a_label_kept_up_the_levels_and_the_arx_files_bind():
    # a value that keeps its text at level 1 names the same group there: allowed
    bound = H.from_rows([["A", "A", "*"], ["B1", "B", "*"], ["B2", "B", "*"]]).bind(["A", "B1", "B2"], column="z")
    assert bound.labels[1] == ["A", "B"]
    for dataset in DATASETS:
        for path, column in hierarchy_files(dataset):
            leaves = [row[0] for row in csv.reader(open(path, newline="", encoding="utf-8-sig"), delimiter=";") if row]
            H.from_csv(path).bind(leaves, column=column)


@pytest.mark.parametrize("spelling", ["039", "39.0", "3.9e1", "+39"])
def test_a_number_spelled_on_two_rows_is_refused_on_a_numeric_column(spelling):
    """The attack's B3: 39 and 039 gave 39 two parents, and the column's type chose which (INTEGER
    A, DOUBLE B). A text column matches byte by byte, so there the rows are two values."""
    rows = [["39", "A", "*"], [spelling, "B", "*"], ["40", "A", "*"]]
    for values in ([39, 40], [39.0, 40.0]):
        with pytest.raises(AnonymizeError) as raised:
            H.from_rows(rows).bind(values, column="x")
        assert str(raised.value) == "hierarchy rows: rows 1 and 2 have the same value (as numbers)"
    assert H.from_rows(rows).bind(["39", spelling], column="x").labels[1] == ["A", "B"]


def test_several_top_labels_get_a_star_above_them():
    """The attack's B6: with two top labels the top-down recoding started from one group labelled by
    one branch's root, and published b (under X, R1) as R2. A '*' level above them is the only label
    two branches share."""
    bound = H.from_rows([["a", "X", "R1"], ["b", "X", "R1"], ["c", "Y", "R2"]]).bind(["a", "b", "c"], column="z")
    assert bound.height == 3 and bound.rows() == [["a", "X", "R1", "*"], ["b", "X", "R1", "*"], ["c", "Y", "R2", "*"]]
    assert H.from_rows([["a", "X", "*"], ["b", "Y", "*"]]).bind(["a", "b"]).height == 2  # one top: as given


# -- differential privacy's binding: values a hierarchy lacks go to its root (issue 37) ---------


def test_a_value_the_rows_lack_goes_to_the_root_above_level_0():
    h = H.from_rows([["a", "A", "*"], ["b", "A", "*"], ["c", "C", "*"]])
    bound = h.bind(["a", "z", None, "c"], column="x", uncovered="root")
    assert bound.codes.tolist() == [[0, 0, 0], [1, 2, 0], [2, 2, 0], [3, 1, 0]]
    assert bound.labels == [["a", "z", None, "c"], ["A", "C", "*"], ["*"]]
    # the root stands for the whole hierarchy: a suppressed cell's loss
    assert bound.loss(1).tolist() == [0.5, 0.0, 1.0] and bound.domain_size == 3
    # the same values without the root rule: refused, counted, never quoted
    with pytest.raises(AnonymizeError, match=r"^2 values of column x are missing from hierarchy rows$"):
        h.bind(["a", "z", None, "c"], column="x")


def test_where_the_whole_hierarchy_is_one_group_the_root_joins_it():
    h = H.from_rows([["a", "X", "all", "*"], ["b", "Y", "all", "*"]])
    bound = h.bind(["a", "z"], uncovered="root")
    assert bound.codes.tolist() == [[0, 0, 0, 0], [1, 1, 0, 0]]
    assert bound.labels == [["a", "z"], ["X", "*"], ["all"], ["*"]]
    # every value lacking: each level's one group
    assert h.bind(["q"], uncovered="root").labels == [["q"], ["*"], ["all"], ["*"]]


def test_builders_put_what_they_cannot_place_in_the_root():
    bound = H.intervals(10).bind([1, float("nan"), 25, None, float("inf")], uncovered="root")
    assert bound.labels[1] == ["[0, 10)", "[20, 30)", None, "*"] and bound.codes[:, 1].tolist() == [0, 3, 1, 2, 3]
    days = H.dates(["year"]).bind([datetime.date(2020, 1, 1), datetime.date.max, None, datetime.date.min],
                                uncovered="root")
    assert days.labels[1] == ["2020", None, "*"] and days.codes[:, 1].tolist() == [0, 2, 1, 2]
    texts = H.dates(["year"]).bind(["2021-05-01", "soon", "NaT"], uncovered="root")
    assert texts.labels[1] == ["2021", "*"] and texts.codes[:, 1].tolist() == [0, 1, 1]
    listed = H.ordered_groups(["x", "y", "z"], [2]).bind(["x", "q", "z"], uncovered="root")
    assert listed.labels[1] == ["x..y", "z", "*"] and listed.codes[:, 1].tolist() == [0, 2, 1]


def test_the_root_check_reads_the_hierarchy_alone():
    partial = H.from_rows([["a", "*", "*"], ["b", "B", "*"]])
    for values in (["a", "b"], ["b"], []):  # refused whatever the values, never only when 'a' is bound
        with pytest.raises(AnonymizeError, match=r"^hierarchy rows gives its top label to a group of only some of its "
                                                 r"values at level 1: "):
            partial.bind(values, uncovered="root")
    with pytest.raises(AnonymizeError, match=r"^hierarchy ordered\(3 categories; 1\) labels a group below the top "):
        H.ordered_groups(["*", "y", "z"], [1]).bind(["y"], uncovered="root")
