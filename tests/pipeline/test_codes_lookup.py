"""The cells' codes looked up in one row of sorted arrays (codes.py, Backend.codes_by_lookup, the
Spark path) are the dense ranks the dictionary joins give: forced on DuckDB, the same release as
DuckDB's own path, on columns whose codes order by one column (integers with NULLs, strings with
quotes) and by two (a collated string, a DOUBLE with -0.0, 0.0 and NaN: value, then key), with
some columns over LOOKUP_UP_TO (joined) beside the looked-up ones."""

import re
from collections import Counter

import duckanon
from duckanon.backends.duckdb import DuckDBBackend
from duckanon.pipeline import codes

M = 12
ROWS = 90
CREATE_TEMP = DuckDBBackend.create_temp


def _table(con) -> None:
    columns = ", ".join(f"q{j} INTEGER" for j in range(M - 3))
    con.execute(f"CREATE TABLE wide ({columns}, s VARCHAR, n VARCHAR COLLATE nocase, d DOUBLE)")
    strings = ["O'Hara", "back\\slash", "Zürich", "", None, "plain"]
    doubles = [-0.0, 0.0, float("nan"), 1.5, None, -2.25]
    rows = [tuple(None if (i + j) % 11 == 0 else (i * (j + 3)) % (2 + j % 4) for j in range(M - 3))
            + (strings[i % 6], ["Ann", "ann", "Bob", None][i % 4], doubles[(i // 2) % 6]) for i in range(ROWS)]
    con.duckdb.executemany(f"INSERT INTO wide VALUES ({', '.join('?' * M)})", rows)


def _release(monkeypatch, lookup: bool, lookup_up_to: int):
    monkeypatch.setattr(DuckDBBackend, "codes_by_lookup", lookup)
    monkeypatch.setattr(codes, "LOOKUP_UP_TO", lookup_up_to)
    made = []
    monkeypatch.setattr(DuckDBBackend, "create_temp", lambda self, name, select: (made.append(name), CREATE_TEMP(self, name, select))[1])
    con = duckanon.connect()
    _table(con)
    qi = ", ".join([f"q{j}" for j in range(M - 3)] + ["s", "n", "d"])
    summary = con.anonymize(f"ANONYMIZE wide WITH (k = 3, qi = ({qi}), method = 'segments', seed = 2)")
    rows = Counter(tuple(map(str, r)) for r in con.execute("SELECT * FROM wide_anon").fetchall())
    return summary, rows, made


def test_looked_up_codes_publish_what_the_joined_dictionaries_do(monkeypatch):
    joined, joined_rows, joined_temps = _release(monkeypatch, False, 256)
    looked, looked_rows, looked_temps = _release(monkeypatch, True, 3)
    assert not any(t.endswith("_arrays") for t in joined_temps)
    assert any(t.endswith("_arrays") for t in looked_temps)
    # the columns of more than 3 codes (the strings, the doubles, q2...) are joined, the others looked up
    # a dictionary table is <prefix>_d<column>; the prefix ends in a random hex word, which may start with d
    joined_columns = {int(m.group(1)) for m in map(re.compile(r"_d(\d+)$").search, looked_temps) if m}
    assert {9, 10, 11} <= joined_columns and 0 not in joined_columns
    for field in ("classes", "stars", "suppressed_rows", "min_class_size"):
        assert getattr(looked, field) == getattr(joined, field), field
    assert looked_rows == joined_rows and joined.stars > 0
