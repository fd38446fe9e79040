"""Detection of identifying columns in SQL (sql/profile.sql): anon_profile, anon_safe_harbor and
anon_value_patterns, on a synthetic table generated here with a seeded generator.

Every column of the table has a label: the patterns it is made of (its "kind"). The checks are
* per column: the exact set of flagged patterns, the suggested role and the HIPAA Safe Harbor kinds;
* per pattern, over the columns: precision and recall of the flags against the labels;
* per pattern, over every cell of the table: precision and recall of anon_value_patterns (the value
  checks alone, without column names) against the labels;
each on the clean table and on a noisy copy where 5% of each labelled column's values are malformed
(a malformed value must not match: the label of that cell is "no pattern").
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import random
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from support.shell import duckdb_cli

REPO = Path(__file__).resolve().parents[2]
SQL_DIR = REPO / "sql"
N = 2000
SEED = 20

# ------------------------------------------------------------------ the synthetic table

FIRST = ["James", "Mary", "John", "Patricia", "Robert", "Jennifer", "Michael", "Linda", "David",
         "Elizabeth", "William", "Barbara", "José", "Zoë", "Anne-Marie", "Chloé", "Mohammed", "Wei",
         "Olga", "Siobhan", "Kwame", "Ingrid", "Raj", "Fatima", "Lars", "Amélie", "Dmitri", "Yuki"]
LAST = ["Smith", "Johnson", "Williams", "Brown", "Jones", "García", "Miller", "Davis", "Rodríguez",
        "Martinez", "O'Brien", "Smith-Jones", "van der Berg", "Nguyen", "Müller", "Kowalski", "Okafor",
        "Lefèvre", "St. John", "MacDonald", "Ivanova", "Tanaka", "Haddad", "Johansson"]
ASCII = ["james", "mary", "john", "pat", "rob", "jen", "mike", "linda", "david", "liz", "will", "barb",
         "jose", "zoe", "anne.marie", "chloe", "mo", "wei", "olga", "s_obrien", "kwame", "ingrid+news"]
DOMAINS = ["example.com", "mail.example.org", "uni-heidelberg.de", "corp.co.uk", "hospital.health",
           "x.io"]
DIAGNOSES = ["Hypertension", "Type 2 diabetes", "Asthma", "Migraine", "Influenza", "Bronchitis",
             "Chronic kidney disease", "Depression", "Osteoarthritis", "Gastritis", "Anemia", "COVID-19"]
WORDS = ["patient", "reported", "mild", "pain", "after", "the", "procedure", "and", "was", "discharged",
         "with", "instructions", "follow", "up", "in", "two", "weeks", "no", "fever", "noted", "today",
         "blood", "pressure", "stable", "medication", "adjusted", "per", "protocol"]
RESTRICTED_ZIP3 = {"036", "059", "063", "102", "203", "556", "692", "790", "821", "823", "830", "831",
                   "878", "879", "884", "890", "893"}


def luhn_digit(body: str) -> str:
    """The check digit that makes body + digit pass the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:  # doubled once the check digit is appended
            d = d * 2 - 9 if d >= 5 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def luhn_ok(number: str) -> bool:
    return luhn_digit(number[:-1]) == number[-1]


def iban_check(country: str, bban: str) -> str:
    num = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{98 - int(num) % 97:02d}"


def iban_ok(iban: str) -> bool:
    s = iban.replace(" ", "")
    return int("".join(str(int(c, 36)) for c in s[4:] + s[:4])) % 97 == 1


def digits(r: random.Random, n: int) -> str:
    return "".join(r.choice("0123456789") for _ in range(n))


def gen_ssn(r):
    area = r.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{r.randint(1, 99):02d}-{r.randint(1, 9999):04d}"


def gen_email(r):
    return f"{r.choice(ASCII)}{r.choice(['', '.', '_'])}{r.choice(ASCII)}{r.randint(1, 999)}@{r.choice(DOMAINS)}"


def gen_phone(r):
    a, e, line = f"{r.randint(2, 9)}{digits(r, 2)}", f"{r.randint(2, 9)}{digits(r, 2)}", digits(r, 4)
    return r.choice([f"({a}) {e}-{line}", f"{a}-{e}-{line}", f"{a}.{e}.{line}", f"+1 {a} {e} {line}",
                     f"+1-{a}-{e}-{line}", f"+44 20 7946 {digits(r, 4)}", f"+49 30 {digits(r, 7)}",
                     f"+33 1 {digits(r, 2)} {digits(r, 2)} {digits(r, 2)} {digits(r, 2)}"])


def gen_iban(r):
    country, bban = r.choice([("DE", lambda: digits(r, 18)), ("GB", lambda: "NWBK" + digits(r, 14)),
                              ("FR", lambda: digits(r, 23)), ("NL", lambda: "ABNA" + digits(r, 10)),
                              ("ES", lambda: digits(r, 20)), ("CH", lambda: digits(r, 17))])
    bban = bban()
    iban = country + iban_check(country, bban) + bban
    assert iban_ok(iban)
    return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4)) if r.random() < 0.5 else iban


def gen_card(r):
    prefix, length, groups = r.choice([("4", 16, (4, 4, 4, 4)), (f"5{r.randint(1, 5)}", 16, (4, 4, 4, 4)),
                                       (f"3{r.choice('47')}", 15, (4, 6, 5)), ("6011", 16, (4, 4, 4, 4)),
                                       (f"22{r.randint(30, 99)}", 16, (4, 4, 4, 4))])
    body = prefix + digits(r, length - len(prefix) - 1)
    number = body + luhn_digit(body)
    assert luhn_ok(number)
    sep = r.choice(["", " ", "-"])
    parts, i = [], 0
    for g in groups:
        parts.append(number[i:i + g])
        i += g
    return sep.join(parts)


def gen_ip(r):
    if r.random() < 0.8:
        return f"{r.randint(1, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}"
    a = ipaddress.IPv6Address(r.getrandbits(128) & ~((1 << 48) - 1) if r.random() < 0.5 else r.getrandbits(128))
    return a.exploded if r.random() < 0.3 else str(a)


def gen_url(r):
    return r.choice([f"https://www.{r.choice(DOMAINS)}/{r.choice(WORDS)}/{r.randint(1, 99)}",
                     f"http://{r.choice(WORDS)}.{r.choice(DOMAINS)}/?id={r.randint(1, 10**6)}",
                     f"www.{r.choice(DOMAINS)}", f"https://{r.choice(DOMAINS)}:8443/a#b"])


def gen_zip3(r):
    while (z := digits(r, 3)) in RESTRICTED_ZIP3:
        pass
    return z


def gen_notes(r):
    words = [r.choice(WORDS) for _ in range(r.randint(8, 14))]
    return " ".join(words).capitalize() + "."


# (column, SQL type, generator, label = the patterns of the column, malformed-value generator or None)
COLUMNS = [
    ("record_id", "BIGINT", None, set(), None),  # a permutation, filled in below
    ("first_name", "VARCHAR", lambda r: r.choice(FIRST), {"person_name"}, lambda r: r.choice(FIRST) + "3"),
    ("last_name", "VARCHAR", lambda r: r.choice(LAST), {"person_name"}, lambda r: "N/A #" + digits(r, 2)),
    ("ssn", "VARCHAR", gen_ssn, {"us_ssn"},
     lambda r: r.choice([f"000-{digits(r, 2)}-{digits(r, 4)}", f"9{digits(r, 2)}-12-3456",
                         f"{digits(r, 2)}-{digits(r, 3)}-{digits(r, 4)}", f"123-45-{digits(r, 3)}"])),
    ("email", "VARCHAR", gen_email, {"email"},
     lambda r: r.choice(["john.smith@example", "john..smith@example.com", "john.smith.example.com",
                         "@example.com", "john smith@example.com"])),
    ("phone", "VARCHAR", gen_phone, {"phone"},
     lambda r: r.choice(["555-01", "ext. 12", "n/a", f"+{digits(r, 3)}", "12345"])),
    ("iban", "VARCHAR", gen_iban, {"iban"},
     lambda r: (lambda s: s[:-1] + str((int(s[-1]) + 1) % 10))(gen_iban(r))),  # one digit changed
    ("card_number", "VARCHAR", gen_card, {"credit_card"},
     lambda r: (lambda s: s[:-1] + str((int(s[-1]) + 1) % 10))(gen_card(r))),  # Luhn fails
    ("ip_address", "VARCHAR", gen_ip, {"ip_address"},
     lambda r: r.choice(["256.1.1.1", "1.2.3", "10.0.0.300", "2001:db8::g1", "1:2:3:4:5:6:7:8:9"])),
    ("website", "VARCHAR", gen_url, {"url"},
     lambda r: r.choice(["htp://example.com", "http//example.com", "example com", "https://", "www.example"])),
    ("date_of_birth", "DATE", lambda r: dt.date(1925, 1, 1) + dt.timedelta(days=r.randint(0, 32000)),
     {"date_of_birth"}, None),
    ("visit_date", "VARCHAR",
     lambda r: (dt.date(2015, 1, 1) + dt.timedelta(days=r.randint(0, 3600))).strftime("%m/%d/%Y"), {"date"},
     lambda r: r.choice(["02/30/2021", "13/45/2021", "2021", "next week"])),
    ("zip", "VARCHAR", lambda r: digits(r, 5) + (f"-{digits(r, 4)}" if r.random() < 0.3 else ""), {"zip_code"},
     lambda r: r.choice([digits(r, 4), digits(r, 6), "unknown"])),
    ("zip3", "VARCHAR", gen_zip3, {"zip_code"}, lambda r: digits(r, 2)),
    ("age", "INTEGER", lambda r: r.randint(0, 99), {"age"}, lambda r: r.randint(131, 999)),
    ("amount", "DECIMAL(10,2)", lambda r: Decimal(r.randint(0, 500000)) / 100, set(), None),
    ("visits", "INTEGER", lambda r: r.randint(0, 20), set(), None),
    ("admission_year", "INTEGER", lambda r: r.randint(1990, 2024), set(), None),
    ("sex", "VARCHAR", lambda r: r.choice("FM"), {"sex"}, lambda r: "?"),
    ("diagnosis", "VARCHAR", lambda r: r.choice(DIAGNOSES), set(), None),
    ("notes", "VARCHAR", gen_notes, {"free_text"}, lambda r: r.choice(["n/a", "ok", "see chart"])),
]
NAMES = [c[0] for c in COLUMNS]
LABELS = {c[0]: c[3] for c in COLUMNS}
PATTERNS = ["email", "phone", "us_ssn", "iban", "credit_card", "ip_address", "url", "date",
            "date_of_birth", "person_name", "zip_code", "age", "sex", "free_text"]
VALUE_PATTERNS = ["email", "phone", "us_ssn", "iban", "credit_card", "ip_address", "url", "date"]

# the expected profile of the table: (suggested_role, HIPAA Safe Harbor kinds) per column
EXPECTED = {
    "record_id": ("identifier", ["other_unique_identifiers"]),
    "first_name": ("identifier", ["names"]),
    "last_name": ("identifier", ["names"]),
    "ssn": ("identifier", ["social_security_numbers"]),
    "email": ("identifier", ["email_addresses"]),
    "phone": ("identifier", ["telephone_numbers"]),
    "iban": ("identifier", ["account_numbers"]),
    "card_number": ("identifier", ["account_numbers"]),
    "ip_address": ("identifier", ["ip_addresses"]),
    "website": ("identifier", ["web_urls"]),
    "date_of_birth": ("quasi-identifier", ["dates"]),
    "visit_date": ("quasi-identifier", ["dates"]),
    "zip": ("quasi-identifier", ["geographic_subdivisions"]),
    "zip3": ("quasi-identifier", []),  # 3-digit ZIP areas of more than 20,000 people: allowed
    "age": ("quasi-identifier", ["dates"]),  # ages over 89
    "amount": ("keep", []),
    "visits": ("keep", []),
    "admission_year": ("keep", []),  # a year alone is allowed by Safe Harbor
    "sex": ("quasi-identifier", []),
    "diagnosis": ("sensitive", []),
    "notes": ("unknown", []),
}
EXPECTED_SAFE_HARBOR = [
    (1, "names", ["first_name", "last_name"]),
    (2, "geographic_subdivisions", ["zip"]),
    (3, "dates", ["date_of_birth", "visit_date", "age"]),
    (4, "telephone_numbers", ["phone"]),
    (6, "email_addresses", ["email"]),
    (7, "social_security_numbers", ["ssn"]),
    (10, "account_numbers", ["iban", "card_number"]),
    (14, "web_urls", ["website"]),
    (15, "ip_addresses", ["ip_address"]),
    (18, "other_unique_identifiers", ["record_id"]),
]


def generate(n: int = N, noise: float = 0.0, seed: int = SEED):
    """The table's columns as lists, and per column the rows whose value is malformed."""
    r = random.Random(seed)
    cols, malformed = {}, {}
    for name, _, gen, _, bad in COLUMNS:
        if name == "record_id":
            cols[name] = r.sample(range(10**6, 10**7), n)
            malformed[name] = set()
            continue
        values, bad_rows = [], set()
        for i in range(n):
            if bad is not None and r.random() < noise:
                values.append(bad(r))
                bad_rows.add(i)
            else:
                values.append(gen(r))
        cols[name], malformed[name] = values, bad_rows
    return cols, malformed


def load_macros(con):
    for path in sorted(SQL_DIR.glob("*.sql")):
        con.execute(path.read_text())


def create_table(con, name: str, cols: dict, rename: dict | None = None) -> None:
    """CREATE TABLE name from the column lists (one list parameter per column, typed by COLUMNS)."""
    rename = rename or {}
    create_from_lists(con, name, {rename.get(c, c): (typ, cols[c]) for c, typ, *_ in COLUMNS})


def create_from_lists(con, name: str, columns: dict) -> None:
    """CREATE TABLE name from {column: (SQL type, values)}; each column travels as one string
    (values joined by a unit separator: a list parameter of thousands of values binds slowly on 1.5)."""
    sep = "\x1f"
    select = ", ".join(f"unnest(string_split(${i + 1}, chr(31)))::{typ} AS \"{c}\""
                       for i, (c, (typ, _)) in enumerate(columns.items()))
    con.execute(f"CREATE TABLE {name} AS SELECT {select}",
                [sep.join(str(v) for v in values) for _, values in columns.values()])


class Db:
    """A connection with the two tables loaded, and the generated columns for the expectations."""

    def __init__(self):
        self.con = duckdb.connect()
        load_macros(self.con)
        self.clean, _ = generate()
        create_table(self.con, "patients", self.clean)
        self.noisy, self.malformed = generate(noise=0.05, seed=SEED + 1)
        create_table(self.con, "patients_noisy", self.noisy)
        self.profiles: dict = {}  # anon_profile per table, computed once

    def execute(self, *args):
        return self.con.execute(*args)


@pytest.fixture(scope="module")
def con():
    db = Db()
    yield db
    db.con.close()


def profile(con, table: str) -> dict:
    if isinstance(con, Db):
        if table not in con.profiles:
            con.profiles[table] = profile(con.con, table)
        return con.profiles[table]
    cur = con.execute(f"SELECT * FROM anon_profile('{table}')")
    names = [d[0] for d in cur.description]
    return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


def flags(row) -> set:
    return {p["pattern"] for p in row["patterns"]}


def precision_recall(predicted: set, actual: set) -> tuple[float, float]:
    tp = len(predicted & actual)
    precision = tp / len(predicted) if predicted else 1.0
    recall = tp / len(actual) if actual else 1.0
    return precision, recall


def column_level(prof: dict, labels: dict) -> dict:
    """Per pattern: (precision, recall) of the column flags against the column labels."""
    return {p: precision_recall({c for c, row in prof.items() if p in flags(row)},
                                {c for c, lab in labels.items() if p in lab})
            for p in PATTERNS}


# ------------------------------------------------------------------ the generator itself


def test_generator_is_seeded_and_valid():
    a, _ = generate(200)
    b, _ = generate(200)
    assert a == b
    assert all(iban_ok(v) for v in a["iban"]) and all(luhn_ok(re.sub(r"\D", "", v)) for v in a["card_number"])
    noisy, malformed = generate(noise=0.05, seed=SEED + 1)
    for c, _, _, label, bad in COLUMNS:
        if bad is not None:
            assert 0.03 * N < len(malformed[c]) < 0.07 * N, c
    assert not any(iban_ok(noisy["iban"][i]) for i in malformed["iban"])
    assert not any(luhn_ok(re.sub(r"\D", "", noisy["card_number"][i])) for i in malformed["card_number"])


# ------------------------------------------------------------------ anon_profile per column


@pytest.mark.parametrize("table", ["patients", "patients_noisy"])
def test_each_kind_flagged_for_its_column_and_nothing_else(con, table):
    prof = profile(con, table)
    assert list(prof) == NAMES  # one row per column, in table order
    for c in NAMES:
        row = prof[c]
        assert flags(row) == LABELS[c], c
        assert (row["suggested_role"], row["hipaa"]) == EXPECTED[c], c
        assert row["rows"] == N and row["sample_rows"] == N and row["null_share"] == 0


@pytest.mark.parametrize("table", ["patients", "patients_noisy"])
def test_column_level_precision_and_recall(con, table):
    got = column_level(profile(con, table), LABELS)
    assert got == {p: (1.0, 1.0) for p in PATTERNS}


def test_shares_are_the_share_of_well_formed_values(con):
    """On the noisy table each flagged share is exactly the share of values that are not malformed."""
    clean, noisy = profile(con, "patients"), profile(con, "patients_noisy")
    for c in NAMES:
        for p in noisy[c]["patterns"]:
            assert p["share"] == (N - len(con.malformed[c])) / N, (c, p)
        for p in clean[c]["patterns"]:
            assert p["share"] == 1.0, (c, p)


def test_ratios(con):
    prof = profile(con, "patients")
    for c in NAMES:
        values = con.clean[c]
        counts: dict = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        assert prof[c]["distinct_ratio"] == pytest.approx(len(counts) / N), c
        assert prof[c]["unique_share"] == pytest.approx(sum(1 for k in counts.values() if k == 1) / N), c
    assert prof["record_id"]["unique_share"] == 1.0 and prof["sex"]["distinct_ratio"] == 2 / N


# ------------------------------------------------------------------ anon_value_patterns per cell


def value_level(con, table: str, malformed: dict) -> dict:
    """Per value pattern: (precision, recall) of anon_value_patterns over every cell of the table."""
    predicted = {p: set() for p in VALUE_PATTERNS}
    actual = {p: set() for p in VALUE_PATTERNS}
    calls = ", ".join(f'anon_value_patterns("{c}")' for c in NAMES)
    rows = con.execute(f"SELECT rowid, list_value({calls}) FROM {table}").fetchall()
    kinds = {"date_of_birth": "date"}
    labels = {c: {kinds.get(p, p) for p in LABELS[c]} & set(VALUE_PATTERNS) for c in NAMES}
    for rowid, found_per_column in rows:
        for c, found in zip(NAMES, found_per_column):
            for p in found:
                predicted[p].add((c, rowid))
            if rowid not in malformed.get(c, ()):
                for p in labels[c]:
                    actual[p].add((c, rowid))
    return {p: precision_recall(predicted[p], actual[p]) for p in VALUE_PATTERNS}


def test_value_level_precision_and_recall_clean(con):
    assert value_level(con, "patients", {}) == {p: (1.0, 1.0) for p in VALUE_PATTERNS}


def test_value_level_precision_and_recall_noisy(con):
    assert value_level(con, "patients_noisy", con.malformed) == {p: (1.0, 1.0) for p in VALUE_PATTERNS}


# ------------------------------------------------------------------ anon_safe_harbor


def test_safe_harbor(con):
    rows = con.execute("SELECT kind_no, kind, columns, evidence, sample_rows FROM anon_safe_harbor('patients')").fetchall()
    assert [r[:3] for r in rows] == EXPECTED_SAFE_HARBOR
    evidence = {r[1]: r[3] for r in rows}
    assert evidence["email_addresses"] == "email: email on 100.0% of values"
    assert evidence["names"] == ("first_name: person_name on 100.0% of values and the column name; "
                                 "last_name: person_name on 100.0% of values and the column name")
    over_89 = sum(1 for a in con.clean["age"] if a > 89) / N
    assert evidence["dates"].endswith(f"age: ages over 89 on {100 * over_89:.1f}% of values")
    assert evidence["other_unique_identifiers"] == "record_id: unique per row"
    assert all(r[4] == N for r in rows)


def test_safe_harbor_noisy_same_kinds(con):
    rows = con.execute("SELECT kind_no, kind, columns FROM anon_safe_harbor('patients_noisy')").fetchall()
    assert rows == EXPECTED_SAFE_HARBOR


def test_all_eighteen_kinds_by_column_name():
    """Kinds no value pattern finds, by the column name (as ARX's RiskModelHIPAASafeHarbor does)."""
    c = duckdb.connect()
    load_macros(c)
    c.execute("""CREATE TABLE t AS SELECT
        'Ann' AS patient_name, '12 Main St' AS street_address, DATE '1990-01-02' AS admission_date,
        '617-555-0123' AS phone, '617-555-0199' AS fax, 'a@b.org' AS email, '123-45-6789' AS ssn,
        'M12' AS mrn, 'H7' AS member_id, 'DE89370400440532013000' AS iban, 'L-1' AS license_number,
        '1HGCM82633A004352' AS vin, 'SN-9' AS device_serial, 'https://a.org' AS homepage,
        '10.0.0.1' AS ip, 'x' AS fingerprint, 'x'::BLOB AS photo, range AS record_id, range % 3 AS kids
        FROM range(60)""")
    rows = c.execute("SELECT kind_no, kind, columns FROM anon_safe_harbor('t')").fetchall()
    assert rows == [
        (1, "names", ["patient_name"]), (2, "geographic_subdivisions", ["street_address"]),
        (3, "dates", ["admission_date"]), (4, "telephone_numbers", ["phone"]), (5, "fax_numbers", ["fax"]),
        (6, "email_addresses", ["email"]), (7, "social_security_numbers", ["ssn"]),
        (8, "medical_record_numbers", ["mrn"]), (9, "health_plan_beneficiary_numbers", ["member_id"]),
        (10, "account_numbers", ["iban"]), (11, "certificate_license_numbers", ["license_number"]),
        (12, "vehicle_identifiers", ["vin"]), (13, "device_identifiers", ["device_serial"]),
        (14, "web_urls", ["homepage"]), (15, "ip_addresses", ["ip"]), (16, "biometric_identifiers", ["fingerprint"]),
        (17, "full_face_photographs", ["photo"]), (18, "other_unique_identifiers", ["record_id"])]
    roles = dict(c.execute("SELECT column_name, suggested_role FROM anon_profile('t')").fetchall())
    assert {k for k, v in roles.items() if v != "identifier"} == {"admission_date", "kids"}
    assert roles["kids"] == "keep" and roles["admission_date"] == "quasi-identifier"
    c.close()


def test_zip_first_three_digits_rule():
    """A 3-digit ZIP column is allowed unless it holds one of the 17 areas of 20,000 or fewer people."""
    c = duckdb.connect()
    load_macros(c)
    c.execute("""CREATE TABLE z AS SELECT ['021', '100', '945'][range % 3 + 1] AS zip3,
                 ['021', '036', '945'][range % 3 + 1] AS patient_zip3, ['021**', '945**'][range % 2 + 1] AS masked_zip,
                 2100 + range % 50 AS zip, range % 5 AS zip_code FROM range(90)""")  # zip: 02100-02149 as integers
    assert c.execute("SELECT kind, columns, evidence FROM anon_safe_harbor('z')").fetchall() == [
        ("geographic_subdivisions", ["patient_zip3", "zip"],
         "patient_zip3: 3-digit ZIP areas of 20,000 or fewer people on 33.3% of values; "
         "zip: full ZIP/postal codes on 100.0% of values")]
    got = c.execute("SELECT column_name, list_transform(patterns, lambda p: p.pattern), suggested_role "
                    "FROM anon_profile('z')").fetchall()
    assert got == [(name, ["zip_code"], "quasi-identifier")
                   for name in ["zip3", "patient_zip3", "masked_zip", "zip", "zip_code"]]
    c.close()


# ------------------------------------------------------------------ without helpful column names


def test_neutral_column_names(con):
    """Columns named col_01, col_02, ...: the value patterns still flag, the name-gated ones do not."""
    rename = {c: f"col_{i + 1:02d}" for i, c in enumerate(NAMES)}
    create_table(con.con, "neutral", con.clean, rename)
    try:
        prof = profile(con.con, "neutral")
    finally:
        con.execute("DROP TABLE neutral")
    got = {c: (flags(prof[rename[c]]), prof[rename[c]]["suggested_role"], prof[rename[c]]["hipaa"]) for c in NAMES}
    expected = {c: (LABELS[c], *EXPECTED[c]) for c in NAMES}
    # what needs the column name: person names, age, 3-digit ZIPs; date of birth is a date
    expected.update({
        "first_name": (set(), "keep", []), "last_name": (set(), "keep", []),
        "date_of_birth": ({"date"}, "quasi-identifier", ["dates"]), "zip3": (set(), "keep", []),
        "age": (set(), "keep", []), "diagnosis": (set(), "keep", [])})
    assert got == expected


# ------------------------------------------------------------------ strictness


def test_column_name_hints():
    """Name hints need the whole name to say it: a flag or a type about an e-mail is no e-mail."""
    c = duckdb.connect()
    load_macros(c)
    c.execute("""CREATE TABLE t AS SELECT range % 2 = 0 AS email_sent, 'mobile' AS phone_type,
                 'Boston' AS birth_place, 'Widget' AS product_name, range % 2 = 0 AS has_hiv,
                 'x' AS "PatientFirstName", 'x' AS "homePhone", 'x' AS "Postal Code", 'x' AS contact_email,
                 '1970' AS birth_year, '1920' AS "yearOfBirth", range % 7 AS age_group, 'a' AS city,
                 'b' AS marital_status, 50000 + range AS salary, 'c' AS state FROM range(10)""")
    got = {n: (r, h) for n, r, h in c.execute("SELECT column_name, suggested_role, hipaa FROM anon_profile('t')").fetchall()}
    assert got == {
        "email_sent": ("keep", []), "phone_type": ("keep", []), "birth_place": ("quasi-identifier", []),
        "product_name": ("keep", []), "has_hiv": ("sensitive", []),
        "PatientFirstName": ("identifier", ["names"]), "homePhone": ("identifier", ["telephone_numbers"]),
        "Postal Code": ("quasi-identifier", ["geographic_subdivisions"]),
        "contact_email": ("identifier", ["email_addresses"]),
        "birth_year": ("quasi-identifier", []),  # a year alone is allowed, unless it makes an age over 89
        "yearOfBirth": ("quasi-identifier", ["dates"]),
        "age_group": ("quasi-identifier", []), "city": ("quasi-identifier", ["geographic_subdivisions"]),
        "marital_status": ("quasi-identifier", []), "salary": ("sensitive", []), "state": ("quasi-identifier", [])}
    c.close()



def test_ordinary_numbers_and_words_are_not_identifiers():
    r = random.Random(7)
    c = duckdb.connect()
    load_macros(c)
    cols = {
        "amount": [f"{r.randint(0, 99999)}.{r.randint(0, 99):02d}" for _ in range(2000)],
        "count_9": [str(r.randint(10**8, 10**8 + 3000)) for _ in range(2000)],  # 9 digits, not SSNs
        "big": [str(r.randint(10**9, 10**16)) for _ in range(2000)],  # 10-17 digits, not phones or cards
        "year": [str(r.randint(1900, 2030)) for _ in range(2000)],
        "score": [str(r.randint(10000, 99999)) for _ in range(2000)],  # 5 digits in a numeric column
        "version": [f"{r.randint(1, 3)}.{r.randint(0, 9)}" for _ in range(2000)],
        "word": [r.choice(WORDS + ["Alpha", "Beta", "Gamma", "Delta"]) for _ in range(2000)],
        "ratio": [str(r.random()) for _ in range(2000)],
        "time": [f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}" for _ in range(2000)],
    }
    types = {"amount": "DECIMAL(12,2)", "count_9": "BIGINT", "big": "BIGINT", "year": "INTEGER",
             "score": "INTEGER", "ratio": "DOUBLE"}
    create_from_lists(c, "t", {k: (types.get(k, "VARCHAR"), v) for k, v in cols.items()})
    rows = c.execute("SELECT column_name, patterns, hipaa, suggested_role FROM anon_profile('t')").fetchall()
    assert [(name, p) for name, p, _, _ in rows if p] == []
    # only the numbers that are unique per row look like record numbers
    assert {name for name, _, h, _ in rows if h} == {"big"}
    hits = {k: c.execute(f"SELECT list_sort(list_distinct(flatten(list(anon_value_patterns({k}))))), "
                         f"count(*) FILTER (WHERE len(anon_value_patterns({k})) > 0) FROM t").fetchone()
            for k in cols}
    # a value alone: a random 16-digit number with a card network's prefix passes the Luhn check one
    # time in ten, so a few of `big` look like card numbers (the column, at 2%, is not flagged)
    assert hits.pop("big")[0] == ["credit_card"]
    assert hits == {k: ([], 0) for k in hits}
    c.close()


# ------------------------------------------------------------------ edge cases


def test_empty_table_null_column_and_odd_names():
    c = duckdb.connect()
    load_macros(c)
    c.execute('CREATE TABLE e ("E-Mail Address" VARCHAR, "firstName" VARCHAR, n INTEGER)')
    rows = c.execute("SELECT column_name, rows, sample_rows, null_share, distinct_ratio, patterns, "
                     "suggested_role, hipaa FROM anon_profile('e')").fetchall()
    assert rows == [("E-Mail Address", 0, 0, None, None, [], "identifier", ["email_addresses"]),
                    ("firstName", 0, 0, None, None, [], "identifier", ["names"]),
                    ("n", 0, 0, None, None, [], "unknown", [])]
    c.execute("INSERT INTO e SELECT CASE WHEN range % 2 = 0 THEN 'p' || range || '@x.org' END, 'Ann', NULL FROM range(10)")
    rows = c.execute("SELECT column_name, null_share, distinct_ratio, unique_share, patterns "
                     "FROM anon_profile('e')").fetchall()
    assert rows == [("E-Mail Address", 0.5, 1.0, 1.0, [{"pattern": "email", "share": 1.0}]),
                    ("firstName", 0.0, 0.1, 0.0, [{"pattern": "person_name", "share": 1.0}]),
                    ("n", 1.0, None, None, [])]
    with pytest.raises(duckdb.CatalogException):
        c.execute("SELECT * FROM anon_profile('no_such_table')")
    c.close()


def test_sampling_large_table():
    """Above 10,000 rows a seeded sample of 10,000 rows is profiled, the same one on every call."""
    c = duckdb.connect()
    load_macros(c)
    c.execute("CREATE SCHEMA s")
    c.execute("""CREATE TABLE s.big AS SELECT range AS id, 'u' || range || '@example.com' AS email,
                 CASE WHEN range % 10 = 0 THEN NULL ELSE range % 90 END AS age FROM range(60000)""")
    q = "SELECT column_name, rows, sample_rows, null_share, patterns, suggested_role FROM anon_profile('s.big')"
    first = c.execute(q).fetchall()
    assert first == c.execute(q).fetchall()
    assert [r[:3] for r in first] == [("id", 60000, 10000), ("email", 60000, 10000), ("age", 60000, 10000)]
    assert 0.08 < first[2][3] < 0.12  # about a tenth of the sampled ages are NULL
    assert [r[5] for r in first] == ["identifier", "identifier", "quasi-identifier"]
    assert c.execute("SELECT DISTINCT sample_rows FROM anon_safe_harbor('s.big')").fetchall() == [(10000,)]
    c.close()


def test_no_data_value_in_any_output(con):
    """The outputs hold names, kinds and shares: no value of the table's identifying columns."""
    out = " ".join(str([row[k] for k in ["column_name", "column_type", "suggested_role", "reason", "hipaa"]]
                       + [p["pattern"] for p in row["patterns"]])  # shares are numbers: 0.0333 holds '03333'
                   for row in profile(con, "patients").values())
    out += " ".join(str(r) for r in con.execute(
        "SELECT kind, columns, evidence FROM anon_safe_harbor('patients')").fetchall())
    for c in ["first_name", "last_name", "ssn", "email", "phone", "iban", "card_number", "ip_address",
              "website", "visit_date", "zip", "notes"]:
        leaked = [v for v in set(con.clean[c]) if len(str(v)) >= 5 and str(v) in out]
        assert leaked == [], c
    assert str(max(con.clean["record_id"])) not in out


# ------------------------------------------------------------------ the plain DuckDB CLI


CLI = duckdb_cli()
SUMMARY = ("SELECT column_name || ':' || array_to_string(list_transform(patterns, lambda p: p.pattern), '|') || ':' "
           "|| suggested_role || ':' || array_to_string(hipaa, '|') FROM anon_profile('patients');\n"
           "SELECT kind || ':' || array_to_string(columns, '|') || ':' || evidence FROM anon_safe_harbor('patients');\n")


@pytest.mark.skipif(CLI is None, reason="duckdb CLI not installed (pip install duckdb-cli)")
def test_cli_same_profile(tmp_path):
    """The same profile in the plain DuckDB CLI (`.read` every file), on a read-only file."""
    path = tmp_path / "p.duckdb"
    cols, _ = generate(400, noise=0.05)
    c = duckdb.connect()
    c.execute(f"ATTACH '{path}' AS f (STORAGE_VERSION 'v1.5.0')")
    c.execute("USE f")
    create_table(c, "patients", cols)
    c.execute("USE memory")
    c.execute("DETACH f")
    c.close()
    script = "".join(f".read '{f}'\n" for f in sorted(SQL_DIR.glob("*.sql"))) + SUMMARY
    out = subprocess.run([CLI, "-bail", "-csv", "-noheader", "-readonly", str(path)], input=script,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    c = duckdb.connect(str(path), read_only=True)
    load_macros(c)
    expected = [r[0] for q in SUMMARY.strip().split("\n") for r in c.execute(q).fetchall()]
    c.close()
    assert [line.strip('"') for line in out.stdout.splitlines()] == expected
    assert len(expected) == len(NAMES) + len(EXPECTED_SAFE_HARBOR)
