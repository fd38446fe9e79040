"""The shared data sets (../shared/data beside the checkout, never copied into the repo) and the
tables and rows the tests build from them."""

from __future__ import annotations

import csv
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
HOSPITAL = SHARED / "hospital.csv"

HOSPITAL_TABLE = f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')"
ADULT_TABLE = f"CREATE TABLE adult AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';')"


def hospital_digits_sql(name: str = "hospital_digits") -> str:
    """The papers' star model: every digit of zipcode and age its own QI (m = 8)."""
    zips = ", ".join(f"substr(CAST(zipcode AS VARCHAR), {i + 1}, 1) AS z{i + 1}" for i in range(5))
    ages = ", ".join(f"substr(CAST(age AS VARCHAR), {i + 1}, 1) AS a{i + 1}" for i in range(2))
    return f"CREATE TABLE {name} AS SELECT {zips}, {ages}, education, disease FROM hospital"


DIGIT_QI = ["z1", "z2", "z3", "z4", "z5", "a1", "a2", "education"]


def hospital_digits():
    """The same star model as solver input, read from the CSV: (QI tuples of the five zipcode
    digits, the two age digits and education; the diseases)."""
    rows = list(csv.DictReader(open(HOSPITAL)))
    qi = [tuple(r["zipcode"]) + tuple(r["age"]) + (r["education"],) for r in rows]
    return qi, [r["disease"] for r in rows]
