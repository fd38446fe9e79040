"""Small instances with known answers: the papers' tight examples for the solvers, and the
reproduction of a bug the independent checks found."""

from __future__ import annotations

# Blocki & Williams' instances: (rows of bits, k, the optimal number of stars)
BLOCKI_WILLIAMS = [
    ("000,001,011,111,110", 2, 8),
    ("000,000,001,111,111,101", 2, 2),
    ("000,000,001,111,111,101", 3, 6),
    ("000,001,011,111,110,100,010", 2, 10),
    ("1100,1010,1001", 3, 9),
    ("110,101,011", 3, 9),
]


def bredereck_tightness(k=3, m=3):
    """Bredereck et al.'s instance where greedy is far from the optimum (ALGORITHMS.md section 3):
    k equal rows, then for each column k - 1 rows that differ from them there alone."""
    rows = [("1",) * m] * k
    for i in range(m):
        for copy in range(k - 1):
            row = ["1"] * m
            row[i] = f"u{i}_{copy}"
            rows.append(tuple(row))
    return rows


# A bug the independent checks found (fixed): the cell-suppression methods held delta-disclosure
# on their groups, but groups that publish the same QI vector are one published class, and
# delta-disclosure is not closed under merging. test_fuzz.py's regression test
# test_delta_disclosure_holds_on_the_published_classes publishes these rows.
DELTA_MERGE_ROWS = [(0, 3, "b"), (0, 0, "a"), (3, 2, "a"), (3, 0, "a"), (2, 3, "c"), (1, 3, "c"), (2, 2, "c"),
                    (0, 3, "c"), (3, 1, "b"), (1, 3, "b"), (1, 0, "c"), (3, 2, "b"), (3, 0, "c")]
DELTA_MERGE_STATEMENT = "ANONYMIZE t WITH (qi = (q0, q1), sensitive = s, delta_disclosure = 1.0, method = hilbert, seed = 1)"


def delta_merge_published(con) -> list[tuple]:
    """The bug's reproduction on `con`: the published rows (q0, q1, s)."""
    con.execute("CREATE OR REPLACE TABLE t (q0 INTEGER, q1 INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", DELTA_MERGE_ROWS)
    con.execute(DELTA_MERGE_STATEMENT)
    return con.execute("SELECT q0, q1, s FROM t_anon").fetchall()
