"""Names outside a closed set (issue 35, item 15): one line that names the unknown word and the
nearest known one (`unknown option 'sensitve'; did you mean 'sensitive'?`), the short sets
listed when nothing is close, the option list pointed to; the database exactly as it was, and
no registry table made. Every message is matched whole."""

import re

import duckdb
import pytest

import duckanon
from duckanon.errors import nearest_name, unknown_name

from support.refusals import refused_unchanged as refused






@pytest.fixture
def db(hospital_and_people):
    return hospital_and_people


def test_nearest_name_is_close_or_nothing():
    options = ("k", "l", "t", "qi", "sensitive", "keep", "method", "seed", "time_limit", "population",
               "population_size", "l_variant", "t_distance", "identifiers")
    assert nearest_name("sensitve", options) == "sensitive"
    assert nearest_name("SENSITIVE", options) == "sensitive"  # case is ignored
    assert nearest_name("tim_limit", options) == "time_limit"
    assert nearest_name("pop", options) == "population"  # a beginning: the shortest name it begins
    assert nearest_name("ident", options) == "identifiers"
    assert nearest_name("colour", options) is None
    assert nearest_name("x", options) is None
    assert nearest_name("kk", options) is None  # too short to be a beginning, not close to k
    assert nearest_name("{col}", ("{column}",)) == "{column}"


def test_unknown_name_lists_few_points_to_many():
    assert unknown_name("engine", "oracle", ("duckdb", "spark")) == "unknown engine 'oracle' (known: duckdb, spark)"
    many = [f"name{i}" for i in range(40)]
    assert unknown_name("option", "zzz", many, where="see the list") == "unknown option 'zzz'; see the list"
    assert unknown_name("rule", "partal", {"partial": "partial(left, right)"}, context=" for column c") == \
        "unknown rule 'partal' for column c; did you mean 'partial(left, right)'?"


UNKNOWN = [
    ("ANONYMIZE hospital WITH (k = 2, sensitve = disease)",
     "unknown option 'sensitve'; did you mean 'sensitive'? (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (k = 2, colour = 'red')",
     "unknown option 'colour'; the options are listed in docs/statement.md (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (k = 2, method = 'greedyy')",
     "unknown method 'greedyy'; did you mean 'greedy'? (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (k = 2, method = 'magic')",
     "unknown method 'magic' (known: auto, mapprox, greedy, merge, topdown, carve, segments, exact, dp, matching, simplex, "
     "tp, tp+, hilbert, lattice, mondrian, gensup) (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (k = 2, engine = 'duck')",
     "unknown engine 'duck'; did you mean 'duckdb'? (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (l = 2, sensitive = disease, l_variant = 'entropie')",
     "unknown l_variant 'entropie'; did you mean 'entropy'? (at line 1, column 54)"),
    ("ANONYMIZE hospital WITH (t = 0.5, sensitive = disease, t_distance = 'orderd')",
     "unknown t_distance 'orderd'; did you mean 'ordered'? (at line 1, column 56)"),
    ("ANONYMIZE hospital WITH (k = 2, method = 'lattice', metric = 'discernability')",
     "unknown metric 'discernability'; did you mean 'discernibility'? (at line 1, column 53)"),
    ("ANONYMIZE hospital WITH (k = 2, materialize = 'veiw')",
     "unknown materialize form 'veiw'; did you mean 'view'? (at line 1, column 33)"),
    ("ANONYMIZE hospital WITH (population_uniqueness = 0.1, population_size = 1000, estimator = 'pitmann')",
     "unknown estimator 'pitmann'; did you mean 'pitman'? (at line 1, column 79)"),
    ("ANONYMIZE hospital WITH (beta_likeness = 1, sensitive = disease, beta_variant = 'enhance')",
     "unknown beta_variant 'enhance'; did you mean 'enhanced'? (at line 1, column 66)"),
    ("ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = 'pseudonim'))",
     "unknown mask rule 'pseudonim' for column name; did you mean 'pseudonym'? (at line 1, column 48)"),
    ("ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = 'partal(0, 2)'))",
     "unknown mask rule 'partal' for column name; did you mean 'partial(left, right)'? (at line 1, column 48)"),
    ("ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = 'blur'))",
     "unknown mask rule 'blur' for column name (known: pseudonym, partial(left, right), domain, year, month, null, "
     "constant('text')) (at line 1, column 48)"),
    ("ANONYMIZE people WITH (k = 2, qi = (age, sex), mask = (name = 'year(2)'))",
     "mask rule year on column name takes no arguments: write 'year' (at line 1, column 48)"),
    ("REPORT hospital_anon FROM hospital WITH (fil = 'r.html')",
     "unknown REPORT option 'fil'; did you mean 'file'? (at line 1, column 42)"),
    ("REPORT hospital_anon FROM hospital WITH (method = 'exact')",
     "unknown REPORT option 'method' (known: file, sensitive, qi, k, l, t, l_variant, t_distance, risk_threshold, "
     "population, population_weight, population_size) (at line 1, column 42)"),
    ("REFRESH hospital_anon WITH (mod = 'stable')",
     "unknown REFRESH option 'mod'; did you mean 'mode'? (at line 1, column 29)"),
    ("REFRESH hospital_anon WITH (mode = 'stabel')",
     "unknown REFRESH mode 'stabel'; did you mean 'stable'? (at line 1, column 29)"),
]


@pytest.mark.parametrize("statement,message", UNKNOWN)
def test_unknown_names_get_the_nearest_one(db, statement, message):
    refused(db, statement, message)


HIERARCHIES = [
    ("interval(5, 10)", "unknown hierarchy builder 'interval'; did you mean 'intervals'?"),
    ("prefx(2)", "unknown hierarchy builder 'prefx'; did you mean 'prefix'?"),
    ("blur(2)", "unknown hierarchy builder 'blur' (known: prefix, intervals, dates, ordered, table)"),
    ("prefx", "cannot read hierarchy file prefx: no such file; did you mean the builder 'prefix'?"),
    ("h_{col}.csv", "unknown placeholder '{col}' in the hierarchy of column age; did you mean '{column}'?"),
    ("table(h_{colum})", "unknown placeholder '{colum}' in the hierarchy of column age; did you mean '{column}'?"),
    ("h_{name}.csv", "unknown placeholder '{name}' in the hierarchy of column age (known: {column})"),
]


@pytest.mark.parametrize("spec,message", HIERARCHIES)
def test_unknown_hierarchy_builders_and_placeholders(db, spec, message):
    refused(db, f"ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'lattice', hierarchies = (age = '{spec}'))",
            message)


def test_one_hierarchy_for_every_column_names_the_first_column(db):
    refused(db, "ANONYMIZE hospital WITH (k = 2, qi = (age, zipcode), method = 'lattice', hierarchies = 'h_{col}.csv')",
            "unknown placeholder '{col}' in the hierarchy of column age; did you mean '{column}'?")


def test_unknown_dates_level(db):
    db.execute("CREATE TABLE visits AS SELECT DATE '2024-01-01' + (i % 40)::INTEGER AS day, i % 2 AS s "
               "FROM range(40) r(i)")
    refused(db, "ANONYMIZE visits WITH (k = 2, qi = (day), method = 'lattice', hierarchies = (day = 'dates(month, yeer)'))",
            "dates: unknown level 'yeer'; did you mean 'year'?")


def test_a_file_named_like_a_word_is_still_read(db, tmp_path, monkeypatch):
    """A bare word is a file name first: a file `prefx` (no extension) is read as the hierarchy."""
    monkeypatch.chdir(tmp_path)
    ages = db.execute("SELECT DISTINCT age FROM hospital").fetchall()
    (tmp_path / "prefx").write_text("".join(f"{age};*\n" for (age,) in ages))
    row = db.execute("ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'lattice', hierarchies = (age = 'prefx'))"
                     ).fetchone()
    assert row[0] == 10


def test_a_known_word_in_another_case_is_accepted(db):
    db.execute("ANONYMIZE hospital WITH (k = 2, qi = (age), method = 'GREEDY', seed = 1)")
    assert db.execute("SELECT count(*) FROM hospital_anon").fetchone()[0] == 10


def test_plain_duckdb_still_suggests_its_own_names(db):
    """Statements of DuckDB keep DuckDB's own messages (ours are for our statements only)."""
    with pytest.raises(duckdb.Error, match="hospitl"):
        db.execute("SELECT * FROM hospitl")
    assert not re.search("did you mean '", str(duckanon.AnonymizeError("x")))
