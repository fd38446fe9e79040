-- duckanon: SQL-only privacy checks for ANY table (also tables made by other tools).
--
-- Load with `con.execute(open('sql/checks.sql').read())` in Python or `.read sql/checks.sql` in
-- the duckdb CLI. Every macro is a TEMP macro: it lives in the session's temp catalog, so the files
-- also load on a database opened read-only (`duckdb -readonly file.duckdb`, read_only=True) and
-- write nothing into the user's file, so load them again in each new session. The files create
-- nothing else (no table, view, sequence or setting).
-- Every macro takes the table name as a string (anything query_table() accepts: table or view,
-- optionally schema-qualified), the quasi-identifier (QI) column names as a VARCHAR list and, where
-- relevant, the sensitive attribute (SA) column name as a string. Names are matched exactly and
-- case-sensitively against the table's column names, so spaces, unicode, mixed case and reserved
-- words need no quoting. A QI or SA name that is not a column raises an Invalid Input Error
-- (see anon_require_columns), an empty QI list a Binder Error (COLUMNS(...) may not be empty).
--
-- Model: an equivalence class is the set of rows sharing the same values on all QI columns
-- (GROUP BY semantics: NULL is a value of its own and groups with NULL). The SA value NULL is
-- likewise a value of its own, different from every real value. A suppressed cell is a QI cell
-- whose VARCHAR form is exactly '*'.
--
-- Every CTE name inside a macro starts with `__anon_`: a CTE shadows a catalog table of the same
-- name for query_table(), so a short name (cl, cells, ...) would make the macros read their own
-- CTE instead of a user table called like it.
--
-- Lambdas use the `lambda c: ...` syntax, not `c -> ...`: the arrow form is deprecated in DuckDB
-- 1.5 and fails under SET lambda_syntax = 'DISABLE_SINGLE_ARROW'.

-- anon_missing_columns(tbl, names) -> (missing VARCHAR[]): one row, the names in `names` that are
-- not columns of tbl (empty list when all exist). A misspelt QI would otherwise just be left out of
-- COLUMNS(...) and silently make the table look more anonymous than it is. Reads at most one row.
CREATE OR REPLACE TEMP MACRO anon_missing_columns(tbl, names) AS TABLE
    SELECT list_filter(list_distinct(names),
                       lambda q: NOT list_contains(struct_keys(__anon_row), q)) AS missing
    FROM (  -- __anon_row: a struct keyed by the matching columns, one row even for an empty table
        SELECT COLUMNS(lambda c: list_contains(names, c))
        FROM (SELECT 1 AS __anon_one)
        LEFT JOIN (
            SELECT COLUMNS(lambda c: list_contains(names, c)) FROM query_table(tbl) LIMIT 1
        ) ON true
    ) AS __anon_row;

-- anon_require_columns(tbl, names) -> (ok BOOLEAN): one row, true, or an Invalid Input Error naming
-- the missing columns. Every check below filters its scan with it.
CREATE OR REPLACE TEMP MACRO anon_require_columns(tbl, names) AS TABLE
    SELECT CASE WHEN len(missing) = 0 THEN true
                ELSE error('duckanon: table ' || tbl || ' has no column named '
                           || array_to_string(missing, ', ')
                           || ' (column names are matched exactly, case-sensitively)')
           END AS ok
    FROM anon_missing_columns(tbl, names);

-- anon_class_sizes(tbl, qi) -> (<QI columns>..., size BIGINT): one row per equivalence class,
-- sorted. The class histogram every check is built on: size is the number of rows in the class.
CREATE OR REPLACE TEMP MACRO anon_class_sizes(tbl, qi) AS TABLE
    SELECT COLUMNS(lambda c: list_contains(qi, c)), count(*) AS size
    FROM query_table(tbl)
    WHERE (SELECT ok FROM anon_require_columns(tbl, qi))
    GROUP BY ALL
    ORDER BY ALL;

-- anon_sizes(tbl, qi) -> (size BIGINT): one row per equivalence class, its size, unsorted and
-- without the QI values (classes compared as one row value: NULL is a value of its own). The
-- size profile the k, risk and population-uniqueness macros are computed from.
CREATE OR REPLACE TEMP MACRO anon_sizes(tbl, qi) AS TABLE
    SELECT count(*) AS size
    FROM (
        SELECT row(*COLUMNS(lambda c: list_contains(qi, c))) AS __cls
        FROM query_table(tbl)
        WHERE (SELECT ok FROM anon_require_columns(tbl, qi))
    )
    GROUP BY __cls;

-- anon_k(tbl, qi) -> (k BIGINT, classes BIGINT): one row. The table is k-anonymous for every
-- k <= `k` (the smallest class size), `classes` is the number of equivalence classes.
-- Empty table: k = NULL (no class, so no bound), classes = 0.
CREATE OR REPLACE TEMP MACRO anon_k(tbl, qi) AS TABLE
    SELECT min(size) AS k, count(*) AS classes
    FROM anon_sizes(tbl, qi);

-- anon_sa_counts(tbl, qi, sa) -> (cls STRUCT, sa_value <SA type>, n BIGINT): one row per
-- (equivalence class, SA value) present in the table, cls = the class's QI values as an unnamed
-- struct (so it can be grouped and compared as one value), n = number of rows. This histogram is
-- all that l-diversity and t-closeness need, NULL SA is a value of its own.
CREATE OR REPLACE TEMP MACRO anon_sa_counts(tbl, qi, sa) AS TABLE
    SELECT __cls AS cls, __sa AS sa_value, count(*) AS n
    FROM (
        SELECT row(*COLUMNS(lambda c: list_contains(qi, c))) AS __cls,
               coalesce(*COLUMNS(lambda c: c = sa)) AS __sa
        FROM query_table(tbl)
        WHERE (SELECT ok FROM anon_require_columns(tbl, list_append(qi, sa)))
    )
    GROUP BY __cls, __sa;

-- anon_l(tbl, qi, sa) -> (distinct_l BIGINT, frequency_l BIGINT, entropy_l DOUBLE, classes BIGINT):
-- one row, each l-diversity form as the largest l the table satisfies (minimum over classes):
--   distinct_l  = min number of distinct SA values in a class (NULL counts as one value),
--   frequency_l = min floor(size / max count of one SA value): a class is l-diverse in the
--                 frequency form iff l * max_count <= size,
--   entropy_l   = min exp(entropy of the class's SA distribution), natural log
--                 (entropy l-diversity holds for every l <= entropy_l, floating point),
--   classes     = number of equivalence classes.
-- Empty table: the three l values are NULL, classes = 0.
CREATE OR REPLACE TEMP MACRO anon_l(tbl, qi, sa) AS TABLE
    WITH __anon_cs AS (   -- rows per (class, SA value)
        SELECT cls AS __cls, sa_value AS __sa, n FROM anon_sa_counts(tbl, qi, sa)
    ), __anon_cl AS (     -- per class: distinct SA values, size, largest SA count, exp(entropy)
        SELECT count(*) AS d,
               any_value(size) AS size,
               max(n) AS m,
               exp(-sum((n / size) * ln(n / size))) AS e
        FROM (SELECT __cls, n, sum(n) OVER (PARTITION BY __cls) AS size FROM __anon_cs)
        GROUP BY __cls
    )
    SELECT min(d) AS distinct_l,
           min(size // m)::BIGINT AS frequency_l,
           min(e) AS entropy_l,
           count(*) AS classes
    FROM __anon_cl;

-- anon_l_recursive(tbl, qi, sa, l) -> (recursive_c DOUBLE, classes BIGINT): one row. With each
-- class's SA counts sorted r_1 >= r_2 >= ..., recursive (c, l)-diversity asks r_1 < c * (r_l +
-- r_(l+1) + ...) in every class, so the table is recursive (c, l)-diverse exactly for the
-- c > recursive_c = max over classes of r_1 / (r_l + r_(l+1) + ...): a class with fewer than l
-- distinct SA values makes it +infinity. Empty table: NULL, 0.
CREATE OR REPLACE TEMP MACRO anon_l_recursive(tbl, qi, sa, l) AS TABLE
    WITH __anon_ranked AS (
        SELECT cls, n, row_number() OVER (PARTITION BY cls ORDER BY n DESC) AS r
        FROM anon_sa_counts(tbl, qi, sa)
    ), __anon_cl AS (
        SELECT max(n) AS top, coalesce(sum(n) FILTER (WHERE r >= l), 0) AS tail
        FROM __anon_ranked
        GROUP BY cls
    )
    SELECT max(CASE WHEN tail = 0 THEN 'inf'::DOUBLE ELSE top / tail END) AS recursive_c,
           count(*) AS classes
    FROM __anon_cl;

-- anon_t(tbl, qi, sa) -> (t DOUBLE, t_ordered DOUBLE): one row, the smallest t for which the table
-- is t-close, i.e. the max over classes of the Earth Mover's Distance between the class's SA
-- distribution P and the whole table's Q, over ALL SA values of the table (absent ones have P = 0):
--   t         : equal ground distance, EMD = 1/2 * sum_s |P(s) - Q(s)|,
--   t_ordered : ordered distance over the v distinct SA values sorted ascending (NULL last),
--               EMD = 1/(v-1) * sum_i |sum_{j<=i} (P(j) - Q(j))|, and 0 when v = 1.
-- Both sums are taken exactly on integers (scaled by size * rows) and divided once, so t = 0 and
-- t = 1 come out exact. Empty table: both NULL.
-- Cost is O(rows log rows), not classes x values: with N rows, a class of `size` rows and
-- cumulative counts C(i) (class) and T(i) (table) up to the i-th SA value,
-- N * size * EMD_ordered * (v - 1) = sum_i |N * C(i) - size * T(i)|. C is constant on the run of
-- values between two values present in the class, and T increases, so each run splits at the
-- last i with T(i) <= floor(N * C / size) (an ASOF join) into two closed-form sums over prefix
-- sums of T.
CREATE OR REPLACE TEMP MACRO anon_t(tbl, qi, sa) AS TABLE
    WITH __anon_cs AS (   -- rows per (class, SA value)
        SELECT cls AS __cls, sa_value AS __sa, n FROM anon_sa_counts(tbl, qi, sa)
    ), __anon_ids AS (    -- integer ids: cid per class, sid = rank of the SA value (ascending, NULL last)
        SELECT dense_rank() OVER (ORDER BY __cls) AS cid,
               dense_rank() OVER (ORDER BY __sa ASC NULLS LAST) AS sid,
               n::HUGEINT AS n
        FROM __anon_cs
    ), __anon_tot AS (    -- table histogram: nt = count, ct = T(sid), pc = T(1) + ... + T(sid)
        SELECT sid, nt, ct, sum(ct) OVER (ORDER BY sid ROWS UNBOUNDED PRECEDING) AS pc
        FROM (
            SELECT sid, nt, sum(nt) OVER (ORDER BY sid ROWS UNBOUNDED PRECEDING) AS ct
            FROM (SELECT sid, sum(n) AS nt FROM __anon_ids GROUP BY sid)
        )
    ), __anon_g AS (      -- N = rows, v = number of distinct SA values, pv = T(1) + ... + T(v)
        SELECT max(ct) AS rows, count(*) AS v, max(pc) AS pv FROM __anon_tot
    ), __anon_cells AS (  -- each (class, present SA value): class size, a = C(sid), the next present sid,
                   -- and the prefix sums of T before this run (pc0) and up to its end (pc2)
        SELECT __anon_ids.cid, __anon_ids.sid, __anon_ids.n, __anon_tot.nt, __anon_g.rows,
               sum(__anon_ids.n) OVER (PARTITION BY __anon_ids.cid) AS size,
               sum(__anon_ids.n) OVER (w ROWS UNBOUNDED PRECEDING) AS a,
               coalesce(lead(__anon_ids.sid) OVER w, __anon_g.v + 1) AS nxt,
               __anon_tot.pc - __anon_tot.ct AS pc0,
               coalesce(lead(__anon_tot.pc - __anon_tot.ct) OVER w, __anon_g.pv) AS pc2
        FROM __anon_ids JOIN __anon_tot ON __anon_tot.sid = __anon_ids.sid CROSS JOIN __anon_g
        WINDOW w AS (PARTITION BY __anon_ids.cid ORDER BY __anon_ids.sid)
    ), __anon_runs AS (   -- runs [i1, i2] of SA ranks on which C(i) = a, run 0 (a = 0) precedes the first
        SELECT cid, size, rows, sid AS i1, nxt - 1 AS i2, a, pc0, pc2 FROM __anon_cells
        UNION ALL
        SELECT cid, any_value(size), any_value(rows), 1, min(sid) - 1, 0, 0, min(pc0)
        FROM __anon_cells GROUP BY cid
    ), __anon_split AS (  -- m = last rank with T(m) <= floor(N * a / size), clamped into [i1 - 1, i2]
        SELECT __anon_runs.*, rows * a AS big_a,
               least(greatest(coalesce(tm.sid, 0), i1 - 1), i2) AS m,
               CASE WHEN coalesce(tm.sid, 0) <= i1 - 1 THEN pc0
                    WHEN tm.sid >= i2 THEN pc2
                    ELSE tm.pc END AS pcm
        FROM __anon_runs
        ASOF LEFT JOIN __anon_tot AS tm ON (__anon_runs.rows * __anon_runs.a) // __anon_runs.size >= tm.ct
    ), __anon_ordered AS (  -- per class: sum_i |N * C(i) - size * T(i)|
        SELECT cid,
               sum((m - i1 + 1) * big_a - size * (pcm - pc0)
                   + size * (pc2 - pcm) - (i2 - m) * big_a) AS scd
        FROM __anon_split
        GROUP BY cid
    ), __anon_equal AS (    -- per class: sum_s |N * n(c, s) - size * n(s)|, absent values in closed form
        SELECT cid, any_value(size) AS size,
               sum(abs(n * rows - nt * size)) + (any_value(rows) - sum(nt)) * any_value(size) AS sd
        FROM __anon_cells
        GROUP BY cid
    )
    SELECT max(sd / (2 * size * __anon_g.rows)) AS t,
           max(CASE WHEN __anon_g.v <= 1 THEN 0 ELSE scd / ((__anon_g.v - 1) * size * __anon_g.rows) END) AS t_ordered
    FROM __anon_equal JOIN __anon_ordered ON __anon_ordered.cid = __anon_equal.cid CROSS JOIN __anon_g;

-- anon_stars(tbl, qi) -> (stars BIGINT, suppressed_rows BIGINT): one row, `stars` = number of QI
-- cells equal to '*' (the suppression cost), `suppressed_rows` = rows with at least one '*' among
-- the QI columns. QI columns are cast to VARCHAR first, so non-VARCHAR columns simply have no
-- stars, and NULL is not a star. Empty table: 0, 0.
CREATE OR REPLACE TEMP MACRO anon_stars(tbl, qi) AS TABLE
    SELECT coalesce(sum(n), 0)::BIGINT AS stars,
           count(*) FILTER (WHERE n > 0) AS suppressed_rows
    FROM (
        SELECT list_count(list_filter(list_value(*COLUMNS(*)), lambda x: x = '*')) AS n
        FROM (
            SELECT COLUMNS(lambda c: list_contains(qi, c))::VARCHAR
            FROM query_table(tbl)
            WHERE (SELECT ok FROM anon_require_columns(tbl, qi))
        )
    );

-- anon_report(tbl, qi, sa) -> (k BIGINT, classes BIGINT, distinct_l BIGINT, frequency_l BIGINT,
-- t DOUBLE, stars BIGINT, suppressed_rows BIGINT, rows BIGINT): one row with the main numbers of
-- anon_k, anon_l, anon_t (equal distance) and anon_stars, plus the row count, same definitions
-- and same empty-table values (rows = 0). Computed from one pass over anon_sa_counts, so it is
-- cheaper than running the four checks (t_ordered and entropy_l are left to anon_t and anon_l).
CREATE OR REPLACE TEMP MACRO anon_report(tbl, qi, sa) AS TABLE
    WITH __anon_cells AS (  -- (class, SA value) counts with class size, table count of the value, rows
        SELECT cls, n,
               sum(n) OVER (PARTITION BY cls) AS size,
               sum(n) OVER (PARTITION BY sa_value) AS nt,
               sum(n) OVER () AS rows
        FROM anon_sa_counts(tbl, qi, sa)
    ), __anon_cl AS (       -- per class: size, distinct SA values, largest SA count, equal-distance EMD
        SELECT any_value(size) AS size, count(*) AS d, max(n) AS m,
               (sum(abs(n * rows - nt * size))
                + (any_value(rows) - sum(nt)) * any_value(size))
               / (2 * any_value(size) * any_value(rows)) AS emd
        FROM __anon_cells
        GROUP BY cls
    )
    SELECT a.k, a.classes, a.distinct_l, a.frequency_l, a.t, s.stars, s.suppressed_rows, a.rows
    FROM (
        SELECT min(size)::BIGINT AS k,
               count(*) AS classes,
               min(d) AS distinct_l,
               min(size // m)::BIGINT AS frequency_l,
               max(emd) AS t,
               coalesce(sum(size), 0)::BIGINT AS rows
        FROM __anon_cl
    ) AS a
    CROSS JOIN anon_stars(tbl, qi) AS s;

-- anon_report_k(tbl, qi) -> (k BIGINT, classes BIGINT, stars BIGINT, suppressed_rows BIGINT,
-- rows BIGINT): anon_report for tables without a sensitive attribute.
CREATE OR REPLACE TEMP MACRO anon_report_k(tbl, qi) AS TABLE
    SELECT k.k, k.classes, s.stars, s.suppressed_rows,
           (SELECT count(*) FROM query_table(tbl)) AS rows
    FROM anon_k(tbl, qi) AS k
    CROSS JOIN anon_stars(tbl, qi) AS s;
