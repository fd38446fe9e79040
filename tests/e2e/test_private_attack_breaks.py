"""The breaks a black-box attack found in differential privacy (/work/attack_dp), each turned
into a test: a private release must not tell whether the source holds a value the hierarchy lacks
(docs/models.md, "uncovered values") through anything but its sampled rows."""

from __future__ import annotations

import json
import re

import pytest

import duckanon

pytestmark = pytest.mark.e2e

BASE = ("CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN 'Ann' ELSE 'Bob' END AS a,"
        " (DATE '2020-01-01' + (i % 300)::INT) AS d FROM range(3000) r(i)")
NEIGHBOURS = {"D": None,
              "lacking value": "INSERT INTO t VALUES ('Dan', DATE '2020-03-03')",
              "infinite date": "INSERT INTO t VALUES ('Ann', 'infinity'::DATE)"}


def _row(con, text: str) -> dict:
    cur = con.execute(text)
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def _hierarchy(tmp_path, text: str) -> str:
    path = tmp_path / "h.csv"
    path.write_text(text)
    return str(path)


# -- B01: a label covering every value of the SOURCE column counted as a star -------------------

@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_private_stars_are_decided_from_the_hierarchy_alone(tmp_path, neighbour):
    h = _hierarchy(tmp_path, "Ann;AB;*\nBob;AB;*\nCy;C;*\n")
    report = tmp_path / "r.html"
    con = duckanon.connect()
    con.execute(BASE)
    if NEIGHBOURS[neighbour]:
        con.execute(NEIGHBOURS[neighbour])
    row = _row(con, f"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a, d), hierarchies=(a='{h}', "
                    f"d='dates(month, year)'), levels=(a=1, d=2), report='{report}')")
    details = json.loads(row["details"])
    assert row["published_rows"] > 0
    # 'AB' and '2020' cover every value of the source here, not every value of their hierarchy
    assert (row["stars"], row["suppressed_rows"], details.get("whole_domain_cells", 0)) == (0, 0, 0)
    html = report.read_text()
    assert "Why " not in html or " stars: " not in html
    assert not re.search(r"The summary's [\d,]+ stars include", html)
    # REFRESH of the release: the same whatever the inserted row
    con.execute("INSERT INTO t VALUES ('Dan', DATE '2020-03-04')")
    after = _row(con, "REFRESH t_anon")
    assert after["stars_after"] == 0


def test_private_stars_at_the_hierarchys_one_group_level_count_every_published_cell(tmp_path):
    h = _hierarchy(tmp_path, "Ann;AB;Any\nBob;AB;Any\nCy;C;Any\n")
    for extra in (None, "INSERT INTO t VALUES ('Dan', DATE '2020-03-03')"):
        con = duckanon.connect()
        con.execute(BASE)
        if extra:
            con.execute(extra)
        row = _row(con, f"ANONYMIZE t WITH (epsilon=1, delta=1e-5, qi=(a, d), hierarchies=(a='{h}', "
                        "d='dates(month, year)'), levels=(a=2, d=2))")
        published = row["published_rows"]
        assert published > 0
        # 'Any' is the one group of the whole hierarchy: a star in every published row; '2020' is not
        assert (row["stars"], row["suppressed_rows"]) == (published, published)
        assert json.loads(row["details"])["whole_domain_cells"] == published
        assert con.execute("SELECT count(*) FROM t_anon WHERE a = 'Any'").fetchone()[0] == published


def test_without_epsilon_a_label_covering_every_source_value_stays_a_star(tmp_path):
    h = _hierarchy(tmp_path, "Ann;AB;*\nBob;AB;*\nCy;C;*\n")
    con = duckanon.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i = 0 THEN 'Ann' ELSE 'Bob' END AS a FROM range(3000) r(i)")
    row = _row(con, f"ANONYMIZE t WITH (k=2, qi=(a), hierarchies=(a='{h}'), method='lattice')")
    # 'AB' (level 1) covers every value of the source column: a star without differential privacy
    assert json.loads(row["details"])["levels"] == [1]
    assert (row["published_rows"], row["stars"], row["suppressed_rows"]) == (3000, 3000, 3000)
    assert json.loads(row["details"])["whole_domain_cells"] == 3000
