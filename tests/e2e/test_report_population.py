"""The report's population risks before and after (issue 19), REPORT's population options, and the
report of several sensitive columns.

On Adult: the population is all of Adult (30,162 rows), the sample a seeded 10% of it, the
hierarchies ARX's files in ../shared/data/adult; the release asks k_map = 5 against the population
and writes its report. Every figure of the "Population risk" section is recomputed here apart from
duckanon's report: the original's k-map level and delta-presence range by plain GROUP BY counts of
the sample and the population, the published table's from details.population (the macros cannot
map raw population values to hierarchy labels), the population-uniqueness estimates by
duckanon.solver.population.population_uniques on class sizes counted here, the average risk as
classes / rows.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")  # the report's extra

import duckanon  # noqa: E402
from duckanon.report.markup import format_value  # noqa: E402
from duckanon.solver.population import kmap_derived_k, population_uniques  # noqa: E402

from support.data import HOSPITAL, SHARED  # noqa: E402
from support.database import qident, result_row  # noqa: E402
from support.report_pages import section, table_rows  # noqa: E402

ADULT = SHARED / "adult"
QI = ["sex", "age", "race", "marital-status", "education"]
QI_SQL = ", ".join(map(qident, QI))
POPULATION_ROWS = 30162
KMAP = "k-map level (fewest population rows matching a class)"
DELTA_MIN = "delta-presence, smallest (class rows / matching population rows)"
DELTA_MAX = "delta-presence, largest"
AVERAGE = "average risk (classes / rows)"
UNIQUENESS = "population uniqueness (estimated share of the population unique)"
UNIQUES = "population uniques (estimated records)"
ESTIMATED_KMAP = "k-map estimate: smallest class"


@pytest.fixture(scope="module")
def adult(tmp_path_factory):
    """Adult as the population, `sample` a seeded 10% of it, `released` its k_map = 5 release
    with the report; also the population grouped with its people counted, under upper-case names
    and with education as text (what REPORT's population_weight and name matching must undo)."""
    folder = tmp_path_factory.mktemp("population_report")
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';')")
    con.execute("CREATE TABLE sample AS SELECT * FROM adult USING SAMPLE 10% (bernoulli, 42)")
    con.execute('CREATE TABLE adult_counted AS SELECT sex AS "SEX", age AS "Age", race, "marital-status", '
                "CAST(education AS VARCHAR) AS education, count(*) AS people FROM adult GROUP BY ALL")
    path = folder / "release.html"
    result = result_row(con, f"ANONYMIZE sample INTO released WITH (k_map = 5, population = adult, qi = ({QI_SQL}), "
                             f"sensitive = \"salary-class\", hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv', "
                             f"report = '{path}')")
    result["details"] = json.loads(result["details"])
    yield con, result, path.read_text(encoding="utf-8"), folder
    con.close()



def sizes(con, table: str, qi=QI) -> list[int]:
    return [n for (n,) in con.execute(f"SELECT count(*) FROM {table} GROUP BY {', '.join(map(qident, qi))}").fetchall()]


def original_kmap(con) -> tuple[int, float, float]:
    """The sample's classes against the population, counted in plain SQL: the fewest population
    rows with a class's values, and the least and largest class rows / those population rows."""
    on = " AND ".join(f"s.{qident(c)} IS NOT DISTINCT FROM p.{qident(c)}" for c in QI)
    return con.execute(f"""
        WITH s AS (SELECT {QI_SQL}, count(*) AS n FROM sample GROUP BY ALL),
             p AS (SELECT {QI_SQL}, count(*) AS m FROM adult GROUP BY ALL)
        SELECT min(coalesce(p.m, 0)), min(s.n / p.m), max(s.n / p.m) FROM s LEFT JOIN p ON {on}""").fetchone()


def expected_risk_rows(con) -> dict[str, tuple[str, str]]:
    """(original, published) as the page writes them, for the figures that need no population table."""
    before, after = sizes(con, "sample"), sizes(con, "released")
    unique = [population_uniques(s, POPULATION_ROWS, "dankar") for s in (before, after)]
    return {AVERAGE: (format_value(len(before) / sum(before)), format_value(len(after) / sum(after))),
            UNIQUENESS: tuple(format_value(u.fraction) for u in unique),
            UNIQUES: tuple(format_value(u.uniques) for u in unique)}


def test_section_before_and_after_on_adult(adult):
    con, result, page, _ = adult
    shown = table_rows(section(page, "Population risk"))
    k_before, low_before, high_before = original_kmap(con)
    found = result["details"]["population"]
    assert found["population_rows"] == POPULATION_ROWS
    low_after, high_after = found["delta_presence_range"]
    assert shown[KMAP][:4] == ["≥ 5", str(k_before), str(found["k_map_level"]), "met"]
    assert found["k_map_level"] >= 5 and k_before == 1  # a sample row's raw values: the population holds itself
    assert shown[DELTA_MIN][1:3] == [format_value(low_before), format_value(low_after)]
    assert shown[DELTA_MAX][1:3] == [format_value(high_before), format_value(high_after)]
    for measure, (before, after) in expected_risk_rows(con).items():
        assert shown[measure][1:3] == [before, after], measure
    text = section(page, "Population risk")
    assert "anon_kmap" in shown[KMAP][-1] and "details.population" in shown[KMAP][-1]  # where each figure is from
    assert "cannot map a raw population value to a hierarchy label" in text
    assert "not available" not in text
    params = table_rows(section(page, "Parameters"))
    assert params["k_map"] == ["5"] and params["population"] == ["a table (k_map, delta_presence)"]
    if result["optimal"]:  # auto ran the lattice: optimal among its generalizations, never "fewest stars"
        assert result["method"] == "auto: lattice"
        assert "no cell suppression with fewer stars" not in page
        assert "Proven optimal for loss among full-domain generalizations" in page


def test_report_later_without_the_population(adult):
    """The provenance never names the population table nor holds its counts (issue 35, item 2):
    the k-map and delta-presence figures, the original's and the published table's, and the
    uniqueness estimate (it needs the population's size, which was the table's rows) are said to
    be unavailable without it; the average risk stays, and REPORT's population_size brings the
    estimate back."""
    con, result, _, folder = adult
    path = folder / "later.html"
    con.execute(f"REPORT released FROM sample WITH (file = '{path}')")
    page = path.read_text(encoding="utf-8")
    text = section(page, "Population risk")
    shown = table_rows(text)
    for measure in (KMAP, DELTA_MIN, DELTA_MAX):
        assert shown[measure][1:3] == ["not available", "not available"]
    assert "Not available (k-map level of the original" in text
    assert "the population table is not known here" in text and "WITH (population = &lt;table&gt;)" in text
    expected = expected_risk_rows(con)
    assert shown[AVERAGE][1:3] == list(expected[AVERAGE])
    for measure in (UNIQUENESS, UNIQUES):
        assert shown[measure][1:3] == ["not available", "not available"], measure
    sized = folder / "later_sized.html"
    con.execute(f"REPORT released FROM sample WITH (file = '{sized}', population_size = {POPULATION_ROWS})")
    shown = table_rows(section(sized.read_text(encoding="utf-8"), "Population risk"))
    for measure, (before, after) in expected.items():
        assert shown[measure][1:3] == [before, after], measure


@pytest.mark.slow
def test_report_later_with_a_weighted_population(adult):
    """REPORT's population and population_weight: the grouped population, its columns spelled in
    another case and typed otherwise, gives the same original figures as the population itself."""
    con, result, page, folder = adult
    path = folder / "weighted.html"
    con.execute(f"REPORT released FROM sample WITH (file = '{path}', population = adult_counted, "
                "population_weight = people)")
    shown = table_rows(section(path.read_text(encoding="utf-8"), "Population risk"))
    first = table_rows(section(page, "Population risk"))
    for measure in (AVERAGE, UNIQUENESS, UNIQUES):
        assert shown[measure][:4] == first[measure][:4], measure
    for measure in (KMAP, DELTA_MIN, DELTA_MAX):  # the published figures were counted by ANONYMIZE only
        assert shown[measure][:2] == first[measure][:2], measure
    assert "adult_counted" in shown[KMAP][-1]
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '__duckanon%'").fetchone()[0] == 0


@pytest.mark.parametrize("options, message", [
    ("population = nope", "unknown population table nope"),
    ("population = hospital", "population table hospital lacks the quasi-identifier column 'sex'"),
    ("population_weight = people", "option population_weight needs population = <table>"),
    ("population = adult, population_weight = nope",
     "unknown column 'nope' in population_weight for population table adult"),
    ("population_size = 0", "option population_size must be at least 1"),
])
def test_report_population_options_refused(adult, options, message):
    con, *_ = adult
    con.execute(f"CREATE OR REPLACE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    with pytest.raises(duckanon.AnonymizeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        con.execute(f"REPORT released FROM sample WITH (file = 'never.html', {options})")


@pytest.fixture
def hospital_tables(con, tmp_path):
    """The hospital table with a second sensitive column, and a population of twice its rows given
    as its distinct rows with a count of people, its columns in another case and age as text (what
    REPORT's population_weight and its matching of names and types must undo)."""
    con.execute("CREATE TABLE hospital2 AS SELECT *, CASE WHEN age % 2 = 0 THEN 'even' ELSE 'odd' END AS parity "
                "FROM hospital")
    con.execute('CREATE TABLE hospital_population AS SELECT zipcode AS "ZIPCODE", CAST(age AS VARCHAR) AS "Age", '
                "education, 2 * count(*) AS people FROM hospital GROUP BY ALL")
    return con, tmp_path


def test_estimated_k_map_uniqueness_and_average_risk(hospital_tables):
    """k_map with only population_size (derived k), population_uniqueness and average_risk: each
    figure against what the test computes, the parameters listed with their defaults; then a
    REPORT given a population table measures the published cells ('*' or original values) too."""
    con, folder = hospital_tables
    path = folder / "estimated.html"
    qi = ["zipcode", "age", "education"]
    result = result_row(con, "ANONYMIZE hospital INTO estimated WITH (k_map = 3, population_size = 40, "
                             "significance = 0.05, population_uniqueness = 0.5, average_risk = 0.5, method = greedy, "
                             f"qi = (zipcode, age, education), sensitive = disease, report = '{path}')")
    details = json.loads(result["details"])
    page = path.read_text(encoding="utf-8")
    shown = table_rows(section(page, "Population risk"))
    before, after = sizes(con, "hospital", qi), sizes(con, "estimated", qi)
    derived = kmap_derived_k(3, 10, 40, "poisson", 0.05)
    assert details["k_map"]["derived_k"] == derived
    assert shown[ESTIMATED_KMAP][:4] == [f"≥ {derived} (derived k for k_map = 3)", str(min(before)), str(min(after)),
                                         "met"]
    for side, table_sizes in ((1, before), (2, after)):
        estimate = population_uniques(table_sizes, 40, "dankar")
        assert shown[UNIQUENESS][side] == format_value(estimate.fraction)
        assert shown[UNIQUES][side] == format_value(estimate.uniques)
        assert shown[AVERAGE][side] == format_value(len(table_sizes) / sum(table_sizes))
    assert shown[UNIQUENESS][0] == "≤ 0.5" and shown[UNIQUENESS][3] == "met"
    assert shown[AVERAGE][0] == "≤ 0.5" and shown[AVERAGE][3] == "met"
    assert KMAP not in shown  # no population table: not measured, and said so
    assert "measured only with a population table" in section(page, "Population risk")
    params = table_rows(section(page, "Parameters"))
    assert params["estimator"] == ["poisson (k_map, the default); dankar (population_uniqueness, the default)"]
    assert params["significance"] == ["0.05"] and params["population_size"] == ["40"]
    assert params["population_uniqueness"] == ["0.5"] and params["average_risk"] == ["0.5"]

    later = folder / "measured.html"
    con.execute(f"REPORT estimated FROM hospital WITH (file = '{later}', population = hospital_population, "
                "population_weight = people)")
    text = section(later.read_text(encoding="utf-8"), "Population risk")
    shown = table_rows(text)
    published = con.execute("SELECT zipcode, age::VARCHAR, education FROM estimated").fetchall()
    population = con.execute('SELECT "ZIPCODE", "Age", education, people FROM hospital_population').fetchall()
    matches = [sum(person[-1] for person in population if all(v == "*" or v == p for v, p in zip(row, person)))
               for row in set(published)]
    assert shown[KMAP][1:4] == ["2", str(min(matches)), "met" if min(matches) >= 3 else "NOT met"]
    assert "hospital_population" in shown[KMAP][-1] and "anon_kmap" in shown[KMAP][-1]
    assert "population_size is 40, but the population table hospital_population has 20 rows" in text


def test_several_sensitive_columns(hospital_tables):
    """The sensitive-attribute section and the l and t checks for each sensitive column."""
    con, folder = hospital_tables
    path = folder / "several.html"
    con.execute("ANONYMIZE hospital2 INTO several WITH (k = 2, l = 2, l_variant = distinct, method = greedy, "
                f"qi = (zipcode, age, education), sensitive = (disease, parity), report = '{path}')")
    later = folder / "several_later.html"
    con.execute(f"REPORT several FROM hospital2 WITH (file = '{later}')")
    for report in (path, later):
        page = report.read_text(encoding="utf-8")
        assert "<h2>Sensitive attribute <code>disease</code>" in page
        assert "<h2>Sensitive attribute <code>parity</code>" in page
        checks = table_rows(section(page, "Privacy checks"))
        for column in ("disease", "parity"):
            measured = con.duckdb.execute("SELECT distinct_l FROM anon_l('several', ['zipcode', 'age', 'education'], "
                                          "?)", [column]).fetchone()[0]
            assert checks[f"distinct_l ({column})"] == ["2", "1", str(measured), "met"]
        assert table_rows(section(page, "Parameters"))["sensitive"] == ["disease, parity"]
        assert "Population risk" not in page  # no population or risk model
