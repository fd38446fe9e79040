"""Trust in what the engine says: messages carry no source value; the result row states what is
proven and how many rows were published and removed."""

from __future__ import annotations

import pytest

import duckanon

from support.database import result_row


def test_sa_order_message_counts_missing_values_without_quoting_them(con):
    with pytest.raises(duckanon.AnonymizeError) as refused:
        con.execute("ANONYMIZE hospital WITH (t = 0.5, qi = (zipcode, age), sensitive = disease, "
                    "t_distance = ordered, sa_order = ('Cancer', 'Heart Disease'))")
    message = str(refused.value)
    head, query = message.split("; list it with: ")
    assert head == "sa_order does not list 1 value of the sensitive column disease"
    values = {r[0] for r in con.duckdb.execute("SELECT DISTINCT disease FROM hospital").fetchall()}
    assert not any(value in message for value in values - {"Cancer", "Heart Disease"})
    # the suggested query lists exactly the value that is missing
    assert con.duckdb.execute(query).fetchall() == [("Viral Infection",)]


def test_optimal_for_names_what_is_proven(con):
    exact = result_row(con, "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), sensitive = disease, "
                         "method = exact)")
    assert exact["optimal"] and exact["optimal_for"] == "stars"
    heuristic = result_row(con, "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), sensitive = disease, "
                             "method = mapprox)")
    assert heuristic["optimal_for"] is None or heuristic["optimal"]
    lattice = result_row(con, "ANONYMIZE hospital WITH (k = 2, qi = (zipcode, age), sensitive = disease, "
                           "method = lattice, hierarchies = (zipcode = 'prefix'), suppression_limit = 0.2)")
    assert lattice["optimal"]
    assert lattice["optimal_for"] == ("entropy among full-domain generalizations of the given hierarchies "
                                      "within a 0.2 record-suppression limit")


def test_published_and_removed_rows_add_up_to_the_source(con):
    result = result_row(con, "ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age), sensitive = disease, "
                          "method = lattice, hierarchies = (zipcode = 'prefix'), suppression_limit = 0.3)")
    published = con.duckdb.execute("SELECT count(*) FROM hospital_anon").fetchone()[0]
    assert result["published_rows"] == published
    assert result["published_rows"] + result["removed_rows"] == result["rows"] == 10


def test_whole_domain_labels_are_stars_in_the_summary_and_explained_in_the_report(con, tmp_path):
    path = tmp_path / "r.html"
    result = result_row(con, f"ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age), sensitive = disease, "
                          f"method = lattice, hierarchies = (zipcode = 'prefix'), report = '{path}')")
    details = __import__("json").loads(result["details"])
    literal = con.duckdb.execute("SELECT count(*) FILTER (WHERE zipcode = '*') + count(*) FILTER (WHERE age = '*') "
                                 "FROM hospital_anon").fetchone()[0]
    assert result["stars"] == literal + details["whole_domain_cells"]
    assert details["whole_domain_cells"] > 0  # every hospital zipcode starts with 9: '9****' covers the column
    page = path.read_text()
    assert "class=\"bad\"" not in page
    assert (f"The summary's {result['stars']} stars include {details['whole_domain_cells']} cells published as a "
            "hierarchy label that covers every value of its column") in page
