"""What the report reads from the database: small aggregates only.

Every number is computed inside DuckDB by the SQL macros of sql/checks.sql and sql/risk.sql (or a
GROUP BY next to them); Python receives class-size histograms, counts per column and the SA mix of
at most TOP_CLASSES classes, never the rows themselves.
"""

from __future__ import annotations

import duckdb

from duckanon import macros

TOP_CLASSES = 30     # classes shown in the SA plot: more bars would be unreadable
TOP_SA_VALUES = 10   # SA values with their own colour; the rest are pooled as "other"


def duckdb_connection(con) -> duckdb.DuckDBPyConnection:
    """The DuckDB connection under `con`, with the macros installed: our queries are plain DuckDB
    SQL, so they skip duckanon's statement splitter."""
    db = getattr(con, "duckdb", con)
    macros.ensure_installed(db)  # the report reads through the SQL macros only
    return db


def query_rows(db, query: str, **params) -> list[dict]:
    cursor = db.execute(query, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def query_row(db, query: str, **params) -> dict:
    return query_rows(db, query, **params)[0]


def size_histogram(db, table: str, qi: list[str]) -> dict[int, int]:
    """{class size: number of classes of that size}."""
    rows = query_rows(db, "SELECT size, count(*) AS classes FROM anon_class_sizes($t, $qi) GROUP BY size",
                      t=table, qi=qi)
    return {r["size"]: r["classes"] for r in rows}


def row_counts(db, published: str, original: str) -> dict:
    return query_row(db, "SELECT (SELECT count(*) FROM query_table($o)) AS original, "
                         "(SELECT count(*) FROM query_table($p)) AS published", o=original, p=published)


def column_counts(db, published, original, qi) -> dict[str, dict]:
    """Per QI column: '*' cells, and cells whose value is neither '*' nor a value of that column in
    the original (a generalization such as '30-39', which cell suppression never produces), with
    the smallest such value as an example."""
    rows = query_rows(db, """
        WITH pub AS (
            UNPIVOT (SELECT COLUMNS(lambda c: list_contains($qi, c))::VARCHAR FROM query_table($p))
            ON COLUMNS(*) INTO NAME col VALUE v
        ), orig AS (
            SELECT DISTINCT col, v FROM (
                UNPIVOT (SELECT COLUMNS(lambda c: list_contains($qi, c))::VARCHAR FROM query_table($o))
                ON COLUMNS(*) INTO NAME col VALUE v)
        )
        SELECT pub.col, count(*) FILTER (WHERE pub.v = '*') AS stars,
               count(*) FILTER (WHERE pub.v <> '*' AND orig.v IS NULL) AS generalized,
               min(pub.v) FILTER (WHERE pub.v <> '*' AND orig.v IS NULL) AS example
        FROM pub LEFT JOIN orig ON orig.col = pub.col AND orig.v = pub.v
        GROUP BY pub.col""", qi=qi, p=published, o=original)
    by_column = {r["col"]: r for r in rows}
    return {c: {"stars": by_column.get(c, {}).get("stars", 0),
                "generalized": by_column.get(c, {}).get("generalized", 0),
                "example": by_column.get(c, {}).get("example")} for c in qi}


def one_value_columns(db, published, qi) -> dict[str, str]:
    """{column: its value} for each QI column that publishes one value in every row (no NULL)."""
    rows = query_rows(db, """
        SELECT col, min(v) AS v FROM (
            UNPIVOT (SELECT COLUMNS(lambda c: list_contains($qi, c))::VARCHAR FROM query_table($p))
            ON COLUMNS(*) INTO NAME col VALUE v)  -- (UNPIVOT leaves NULL cells out: no row may lack one)
        GROUP BY col HAVING count(DISTINCT v) = 1 AND count(*) = (SELECT count(*) FROM query_table($p))""",
                      qi=qi, p=published)
    return {r["col"]: r["v"] for r in rows}


def utility(db, published, original, qi, sa, k) -> dict:
    if sa is not None:
        return query_row(db, "SELECT * FROM anon_utility($p, $o, $qi, $sa, k := $k)",
                         p=published, o=original, qi=qi, sa=sa, k=k)
    # anon_utility needs an SA column (its KL divergence is over QI x SA): without one, the same
    # class-based measures from the other macros, and no KL divergence.
    return query_row(db, """
        SELECT s.stars, s.suppressed_rows, k.classes, r.rows,
               (SELECT sum(size::HUGEINT * size) FROM anon_class_sizes($p, $qi)) AS discernibility,
               r.rows / k.classes AS aecs, r.rows / (k.classes * $k) AS normalized_aecs,
               NULL AS kl_divergence
        FROM anon_stars($p, $qi) AS s, anon_k($p, $qi) AS k, anon_risk($p, $qi) AS r""",
                     p=published, qi=qi, k=k)


# The least diverse published classes, the ones l-diversity and t-closeness are decided by: fewest
# distinct SA values, then the largest share of one value, then the farthest from the table's mix.
_RANKED_CLASSES = """
    WITH cells AS (
        -- one QI: its value in parentheses; DuckDB 2 prints a one-field row as '(v,)', 1.5 as '(v)'
        SELECT cls, CASE WHEN len($qi) = 1 THEN '(' || coalesce(struct_extract(cls, 1)::VARCHAR, 'NULL') || ')'
                         ELSE cls::VARCHAR END AS class,
               coalesce(sa_value::VARCHAR, 'NULL') AS value, n,
               sum(n) OVER (PARTITION BY cls) AS size,
               sum(n) OVER (PARTITION BY sa_value) AS nt, sum(n) OVER () AS total
        FROM anon_sa_counts($p, $qi, $sa)
    ), per_class AS (
        SELECT cls, any_value(class) AS class, any_value(size) AS size, count(*) AS distinct_values,
               max(n) / any_value(size) AS top_share, any_value(size) // max(n) AS frequency_l,
               (sum(abs(n * total - nt * size)) + (any_value(total) - sum(nt)) * any_value(size))
                   / (2 * any_value(size) * any_value(total)) AS emd
        FROM cells GROUP BY cls  -- the struct: two classes may print alike
    ), shown AS (
        SELECT *, row_number() OVER (ORDER BY distinct_values, top_share DESC, emd DESC, size DESC,
                                              class) AS position,
                  count(*) OVER () AS all_classes
        FROM per_class QUALIFY position <= $top_classes
    )"""


def sa_mix(db, published, qi, sa) -> list[dict]:
    """The SA mix of the whole table (position 0) and of its TOP_CLASSES least diverse classes
    (positions 1, 2, ...), with the SA values pooled into the TOP_SA_VALUES most frequent ones
    (buckets 1, 2, ...) and "other" (bucket 0)."""
    return query_rows(db, _RANKED_CLASSES + """, counts AS (
            SELECT cls, value, n FROM cells
        ), top_values AS (
            SELECT value, row_number() OVER (ORDER BY sum(n) DESC, value) AS bucket
            FROM counts GROUP BY value QUALIFY bucket <= $top_values
        ), bucketed AS (
            SELECT c.cls, coalesce(t.bucket, 0) AS bucket, coalesce(t.value, 'other') AS value, c.n
            FROM counts AS c LEFT JOIN top_values AS t USING (value)
        )
        SELECT 0 AS position, 'whole table' AS class, bucket, value, sum(n) AS n
        FROM bucketed GROUP BY position, class, bucket, value
        UNION ALL
        SELECT s.position, s.class, b.bucket, b.value, sum(b.n) AS n
        FROM bucketed AS b JOIN shown AS s USING (cls) GROUP BY s.position, s.class, b.bucket, b.value
        ORDER BY position, bucket""",
                      p=published, qi=qi, sa=sa, top_values=TOP_SA_VALUES, top_classes=TOP_CLASSES)


def least_diverse_classes(db, published, qi, sa) -> list[dict]:
    """Per class of sa_mix: its size, distinct values, largest share, frequency l and EMD to the
    table (equal ground distance, as anon_t); `all_classes` counts every class, shown or not."""
    return query_rows(db, _RANKED_CLASSES + " SELECT * EXCLUDE (cls) FROM shown ORDER BY position",
                      p=published, qi=qi, sa=sa, top_classes=TOP_CLASSES)


def privacy_measures(db, published, original, qi, sa, with_k: bool = True) -> list[tuple[str, str, object, object]]:
    """(measure, "min" or "max", original's value, published's value) for k (unless not `with_k`),
    the three l's (with an SA) and both t's, as anon_k, anon_l and anon_t measure them on the
    tables themselves."""
    queries = [("k", "SELECT k FROM anon_k($t, $qi)", "min")] if with_k else []
    if sa is not None:
        queries += [(f"{form}_l", f"SELECT {form}_l FROM anon_l($t, $qi, $sa)", "min")
                    for form in ("distinct", "frequency", "entropy")]
        queries += [(column, f"SELECT {column} FROM anon_t($t, $qi, $sa)", "max") for column in ("t", "t_ordered")]
    measures = []
    for name, query, kind in queries:
        args = {"qi": qi, **({"sa": sa} if "$sa" in query else {})}
        before, after = (None if table is None else db.execute(query, {"t": table, **args}).fetchone()[0]
                         for table in (original, published))  # original None: not measured (a private release)
        measures.append((name, kind, before, after))
    return measures


def column_types(db, table: str) -> dict[str, str]:
    """{column name: DuckDB type} of `table`, in its order."""
    described = db.execute("DESCRIBE SELECT * FROM query_table($t)", {"t": table}).fetchall()
    return {name: kind for name, kind, *_ in described}


def kmap(db, table: str, population: str, qi: list[str]) -> dict:
    """anon_kmap and anon_delta_presence of `table` against the population table: k_map (fewest
    population rows matching a class), delta_min, delta_max, contained, population_rows."""
    return query_row(db, """
        SELECT k.k_map, d.delta_min, d.delta_max, d.contained, d.rows_not_in_population, k.classes, k.rows,
               k.population_rows
        FROM anon_kmap($t, $p, $qi) AS k, anon_delta_presence($t, $p, $qi) AS d""", t=table, p=population, qi=qi)


def population_uniqueness(db, table: str, qi: list[str], population_size: int, estimator: str) -> dict:
    """anon_population_uniqueness of `table`: the estimated population uniques (records and
    fraction of the population), the estimator used, whether its fit converged."""
    return query_row(db, "SELECT * FROM anon_population_uniqueness($t, $qi, $n, $e)",
                     t=table, qi=qi, n=population_size, e=estimator)
