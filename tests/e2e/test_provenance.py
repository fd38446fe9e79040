"""What ANONYMIZE records about a release: the per-column information loss (details.column_loss)
checked against an independent computation from the source rows, and the provenance comment on
the published table (parameters and result, never the source's name or values)."""

import json
import re

import pytest

import duckanon
from duckanon.backends import DuckDBBackend
from duckanon.pipeline.provenance import published_provenance
from duckanon.sql.statement import TableName
from sqlglot import exp


def _extent(label: str, domain: set) -> int:
    """How many of the column's distinct values a published label stands for, read from the
    label alone: '*' (or a prefix label that masks every character) all of them; a prefix label
    '98***' the values of that length starting with '98'; an interval '[20, 40)' or a range
    '[32, 65]' the values inside it; a set '{a, b}' its members; a value itself."""
    if label == "*":
        return len(domain)
    if label.endswith("*"):
        stem = label.rstrip("*")
        return sum(1 for v in domain if len(str(v)) == len(label) and str(v).startswith(stem))
    interval = re.fullmatch(r"\[(.*), (.*)([)\]])", label)
    if interval:
        lo, hi, close = float(interval.group(1)), float(interval.group(2)), interval.group(3)
        return sum(1 for v in domain if v is not None and lo <= v and (v <= hi if close == "]" else v < hi))
    if label.startswith("{"):
        return len(label[1:-1].split(", "))
    return 1


def independent_loss(con, source: str, target: str, qi: list[str]) -> dict[str, float]:
    """Rows matched on the kept id: a row costs (d_L - 1) / (d - 1) per column, where d is the
    column's number of distinct values and d_L how many of them the published label L stands
    for (its whole extent in the column's values, not only the rows published under it); a '*'
    costs 1, and so does a row that was not published."""
    source_rows = {r[0]: r[1:] for r in con.execute(f"SELECT id, {', '.join(qi)} FROM {source}").fetchall()}
    published = {r[0]: r[1:] for r in con.execute(f"SELECT id, {', '.join(qi)} FROM {target}").fetchall()}
    loss = {}
    for j, column in enumerate(qi):
        domain = {row[j] for row in source_rows.values()}
        total = 0.0
        for rid, row in source_rows.items():
            if rid not in published:
                total += 1.0  # removed row
                continue
            label = published[rid][j]
            if label == "*":
                total += 1.0
            elif len(domain) > 1 and label != (None if row[j] is None else str(row[j])):
                total += (_extent(label, domain) - 1) / (len(domain) - 1)
        loss[column] = total / len(source_rows)
    return loss


# The label's full extent (before, only the values published under it counted: 0.0101 for
# Adult's age under Mondrian instead of 0.0192).
@pytest.mark.parametrize("options", [
    "method = 'lattice', hierarchies = (zipcode = 'prefix', age = 'intervals(10, 20)')",
    "method = 'lattice', hierarchies = (zipcode = 'prefix', age = 'intervals(5, 10, 20)'), suppression_limit = 0.1",
    "method = 'mondrian'",
    "method = 'greedy'",
])
def test_column_loss_matches_an_independent_computation(con, options):
    con.duckdb.execute("CREATE TABLE h AS SELECT row_number() OVER () AS id, * FROM hospital")
    row = con.execute(f"ANONYMIZE h WITH (k = 3, qi = (zipcode, age, education), sensitive = disease, keep = id, "
                      f"{options})").fetchone()
    reported = json.loads(row[-1])["column_loss"]
    expected = independent_loss(con.duckdb, "h", "h_anon", ["zipcode", "age", "education"])
    assert reported.keys() == expected.keys()
    for column in expected:
        assert reported[column] == pytest.approx(expected[column], abs=1e-6), (column, reported, expected)
    assert any(0 < v < 1 for v in reported.values()) or "greedy" in options  # generalization costs a fraction


def test_column_loss_of_suppression_is_the_star_share(con):
    row = con.execute("ANONYMIZE hospital WITH (k = 3, qi = (zipcode, age, education), method = exact)").fetchone()
    loss = json.loads(row[-1])["column_loss"]
    rows = con.duckdb.execute("SELECT count(*) FROM hospital").fetchone()[0]
    for column in ("zipcode", "age", "education"):
        stars = con.duckdb.execute(f"SELECT count(*) FROM hospital_anon WHERE {column} = '*'").fetchone()[0]
        assert loss[column] == pytest.approx(stars / rows, abs=1e-6)


def test_published_table_carries_its_provenance(con):
    summary = con.anonymize("ANONYMIZE hospital INTO released WITH (k = 3, l = 2, qi = (zipcode, age), "
                            "sensitive = disease, seed = 4)")
    provenance = published_provenance(DuckDBBackend(con), TableName(exp.to_table("released")))
    assert provenance["k"] == 3 and provenance["l"] == 2 and provenance["l_variant"] == "frequency"
    assert provenance["qi"] == ["zipcode", "age"] and provenance["sensitive"] == "disease"
    assert provenance["summary"]["stars"] == summary.stars and provenance["summary"]["method"] == summary.method
    comment = con.duckdb.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'released'").fetchone()[0]
    assert "hospital" not in comment  # the source's name is not part of the release
    # a table not made by ANONYMIZE has none
    assert published_provenance(DuckDBBackend(con), TableName(exp.to_table("hospital"))) is None
