"""Direct identifiers (issue 20): dropped by default, or published per row through a masking rule;
pseudonyms (keyed HMAC-SHA-256) join releases made with the same key and nothing else; the key is
in no artifact; bad input refused in one line with the database unchanged."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import Counter

import pytest

import duckanon

from support.checks import check_published
from support.refusals import assert_refused_and_unchanged

KEY = "duckanon-test-key: 7f3a9c0e51b24d68"
OTHER_KEY = "another-test-key: 0c1d2e3f40516273"

PATIENTS = """CREATE TABLE patients AS SELECT
    1000 + i AS mrn, 'Name ' || i AS name, 'person' || i || '@clinic' || (i % 3) || '.example' AS email,
    '+1 555 0' || lpad(CAST(i AS VARCHAR), 3, '0') AS phone, DATE '1940-01-01' + CAST(i * 211 AS INTEGER) AS dob,
    (i % 6) * 10 AS age, ['F', 'M'][i % 2 + 1] AS sex, ['A', 'B', 'AB', 'O'][i % 4 + 1] AS blood,
    ['flu', 'cold', 'asthma'][i % 3 + 1] AS disease
    FROM range(120) t(i)"""
VISITS = """CREATE TABLE visits AS SELECT
    1000 + (i * 7) % 120 AS mrn, ['ward', 'clinic', 'home'][i % 3 + 1] AS kind, (i % 4) + 1 AS nights,
    100 + (i * 37) % 900 AS cost
    FROM range(300) t(i)"""
PUBLISH_PATIENTS = ("ANONYMIZE patients INTO {target} WITH (k = 3, qi = (age, sex), keep = (blood), "
                    "identifiers = (name, email, phone, dob), mask = (mrn = 'pseudonym'){extra})")
PUBLISH_VISITS = "ANONYMIZE visits INTO {target} WITH (k = 3, qi = (kind, nights), keep = (cost), mask = (mrn = 'pseudonym'))"


@pytest.fixture
def db(monkeypatch):
    monkeypatch.setenv("DUCKANON_PSEUDONYM_KEY", KEY)
    con = duckanon.connect()
    con.execute(PATIENTS)
    con.execute(VISITS)
    yield con
    con.close()


def pseudonym(key: str, value) -> str:
    """RFC 2104 HMAC-SHA-256 of the value's text, as Python computes it, truncated as documented."""
    return hmac.new(key.encode(), str(value).encode(), hashlib.sha256).hexdigest()[:20]


def result(con, statement: str) -> dict:
    cursor = con.execute(statement)
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


def test_pseudonyms_join_releases_as_the_sources_join(db):
    db.execute(PUBLISH_PATIENTS.format(target="p_anon", extra=""))
    db.execute(PUBLISH_VISITS.format(target="v_anon"))
    source = Counter(db.execute("SELECT p.blood, v.cost FROM patients p JOIN visits v USING (mrn)").fetchall())
    published = Counter(db.execute("SELECT p.blood, v.cost FROM p_anon p JOIN v_anon v USING (mrn)").fetchall())
    assert sum(source.values()) == 300 and published == source
    # the pseudonym is the documented HMAC of the value's text, the same in both tables
    assert sorted(r[0] for r in db.execute("SELECT mrn FROM p_anon").fetchall()) == sorted(
        pseudonym(KEY, 1000 + i) for i in range(120))


def test_another_key_does_not_join_and_the_same_key_repeats(db, monkeypatch):
    db.execute(PUBLISH_PATIENTS.format(target="p_anon", extra=", seed = 1"))
    db.execute(PUBLISH_PATIENTS.format(target="p_again", extra=", seed = 2"))
    first = sorted(db.execute("SELECT mrn, blood FROM p_anon").fetchall())
    assert first == sorted(db.execute("SELECT mrn, blood FROM p_again").fetchall())  # same key: same pseudonyms
    monkeypatch.setenv("DUCKANON_PSEUDONYM_KEY", OTHER_KEY)
    db.execute(PUBLISH_VISITS.format(target="v_other"))
    assert db.execute("SELECT count(*) FROM p_anon JOIN v_other USING (mrn)").fetchone()[0] == 0
    assert db.execute("SELECT count(DISTINCT mrn) FROM v_other").fetchone()[0] == 120


def test_the_key_from_a_duckdb_variable_or_a_named_source(db, monkeypatch):
    monkeypatch.delenv("DUCKANON_PSEUDONYM_KEY")
    db.execute(f"SET VARIABLE duckanon_pseudonym_key = '{OTHER_KEY}'")
    db.execute(PUBLISH_PATIENTS.format(target="p_var", extra=""))
    assert pseudonym(OTHER_KEY, 1000) in {r[0] for r in db.execute("SELECT mrn FROM p_var").fetchall()}
    monkeypatch.setenv("CLINIC_KEY", KEY)
    db.execute(PUBLISH_PATIENTS.format(target="p_env", extra=", mask_key = 'env:CLINIC_KEY'"))
    assert pseudonym(KEY, 1000) in {r[0] for r in db.execute("SELECT mrn FROM p_env").fetchall()}


def test_masking_rules_publish_what_they_document(db):
    row = result(db, "ANONYMIZE patients INTO p_masked WITH (k = 2, qi = (age, sex), identifiers = (name), "
                     "mask = (email = 'domain', phone = 'partial(0, 3)', dob = 'year', mrn = 'null', "
                     "blood = 'constant(''x'')'))")
    assert row["rows"] == 120
    published = db.execute("SELECT email, phone, dob, mrn, blood FROM p_masked").fetchall()
    source = db.execute("SELECT email, phone, dob FROM patients").fetchall()
    assert Counter(r[0] for r in published) == Counter("*@" + e.split("@")[1] for e, _, _ in source)
    assert Counter(r[1] for r in published) == Counter("*" * (len(p) - 3) + p[-3:] for _, p, _ in source)
    assert Counter(r[2] for r in published) == Counter(d.year for _, _, d in source)
    assert {r[3] for r in published} == {None} and {r[4] for r in published} == {"x"}
    columns = [d[0] for d in db.execute("SELECT * FROM p_masked").description]
    assert columns == ["mrn", "email", "phone", "dob", "age", "sex", "blood"]  # source order; name dropped


def test_roles_and_dropped_columns_are_listed(db):
    explain = dict(db.execute("EXPLAIN " + PUBLISH_PATIENTS.format(target="p_anon", extra="")).fetchall())
    assert explain["column roles"] == (
        "mrn: identifier, masked: pseudonym; name: identifier, dropped; email: identifier, dropped; "
        "phone: identifier, dropped; dob: identifier, dropped; age: quasi-identifier; sex: quasi-identifier; "
        "blood: keep; disease: dropped")
    assert explain["dropped columns (not published)"] == "name, email, phone, dob, disease"
    row = result(db, PUBLISH_PATIENTS.format(target="p_anon", extra=""))
    assert row["dropped"] == ["name", "email", "phone", "dob", "disease"]
    assert [d[0] for d in db.execute("SELECT * FROM p_anon").description] == ["mrn", "age", "sex", "blood"]


def test_a_pseudonym_column_keeps_the_qi_guarantee(db):
    """The pseudonym is unique per person but not a QI: the classes of the QIs are still k-anonymous
    (what it allows is linking releases made with the same key, which the README says)."""
    db.execute(PUBLISH_PATIENTS.format(target="p_anon", extra=""))
    rows = db.execute("SELECT age, sex, mrn FROM p_anon").fetchall()
    assert check_published(rows, [0, 1], k=3)[2] == []
    assert len({r[2] for r in rows}) == 120


def test_the_key_is_in_no_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("DUCKANON_PSEUDONYM_KEY", KEY)
    path = tmp_path / "clinic.duckdb"
    report = tmp_path / "release.html"
    con = duckanon.connect(str(path))
    con.execute(PATIENTS)
    messages = []
    summary = result(con, PUBLISH_PATIENTS.format(target="p_anon", extra=f", report = '{report}'"))
    messages.append(json.dumps(summary, default=str))
    messages += [str(r) for r in con.execute("EXPLAIN " + PUBLISH_PATIENTS.format(target="p_x", extra="")).fetchall()]
    for bad in ("mask = (mrn = 'pseudonym', age = 'null')", "mask = (mrn = 'pseudonym'), mask_key = 'env:NOPE'"):
        with pytest.raises(duckanon.AnonymizeError) as caught:
            con.execute(f"ANONYMIZE patients WITH (k = 3, qi = (age, sex), {bad})")
        messages.append(str(caught.value))
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'p_anon'").fetchone()[0]
    con.execute("CHECKPOINT")
    con.close()
    secret = KEY.encode()
    artifacts = [path.read_bytes(), report.read_bytes(), comment.encode(), "\n".join(messages).encode()]
    wal = path.with_suffix(".duckdb.wal")
    if wal.exists():
        artifacts.append(wal.read_bytes())
    for blob in artifacts:
        assert secret not in blob and secret.hex().encode() not in blob
    assert pseudonym(KEY, 1000).encode() in artifacts[0]  # (the file does hold the release)


@pytest.mark.parametrize("options, message", [
    ("mask = (mrn = 'sha1')", r"^unknown mask rule 'sha1' for column mrn \(known: pseudonym, partial\(left, right\), "
                              r"domain, year, month, null, constant\('text'\)\) \(at line 1, column \d+\)$"),
    ("mask = (mrn = 'hash')", r"^mask rule 'hash' on column mrn is refused: an unkeyed hash of an identifier is "
                              r"reversed by hashing candidate values \(a dictionary\); use 'pseudonym', a keyed "
                              r"HMAC-SHA-256 \(at line 1, column \d+\)$"),
    ("mask = (age = 'null')", r"^column 'age' is a quasi-identifier, but a mask rule applies: mask rules and "
                              r"identifiers are for direct identifiers only$"),
    ("mask = (name = 'year')", r"^mask rule 'year' on column name needs a DATE or TIMESTAMP column, not VARCHAR$"),
    ("mask = (phone = 'partial(2)')", r"^mask rule partial on column phone needs two whole numbers from 0 to 1,000,000: "
                                      r"partial\(left, right\), the characters kept at each end \(at line 1, column \d+\)$"),
])
def test_bad_mask_rules_are_refused_in_one_line(db, options, message):
    assert_refused_and_unchanged(db, f"ANONYMIZE patients WITH (k = 3, qi = (age, sex), {options})", message)


def test_a_pseudonym_without_a_key_or_with_a_short_one_is_refused(db, monkeypatch):
    statement = "ANONYMIZE patients WITH (k = 3, qi = (age, sex), mask = (mrn = 'pseudonym'))"
    monkeypatch.delenv("DUCKANON_PSEUDONYM_KEY")
    assert_refused_and_unchanged(db, statement, re.escape(
        "mask rule 'pseudonym' needs a key: set the environment variable DUCKANON_PSEUDONYM_KEY or the DuckDB "
        "variable duckanon_pseudonym_key (SET VARIABLE), or name another with mask_key = 'env:NAME' or "
        "'variable:NAME'"))
    monkeypatch.setenv("DUCKANON_PSEUDONYM_KEY", "too short")
    assert_refused_and_unchanged(db, statement, re.escape(
        "the pseudonym key in the environment variable DUCKANON_PSEUDONYM_KEY is too short: 9 bytes, at least 16 "
        "(128 bits) are needed"))
