-- duckanon: re-identification risk and utility measures for ANY table, in SQL only.
--
-- Loaded after checks.sql (files run in sorted order), whose conventions and macros it uses:
-- the table name is a string (anything query_table() accepts), the quasi-identifier (QI) column
-- names a VARCHAR list, the sensitive attribute (SA) a string; names are matched exactly and
-- case-sensitively, a missing name raises anon_require_columns' Invalid Input Error, an empty QI
-- list a Binder Error. An equivalence class is the set of rows equal on all QI columns (NULL is a
-- value of its own), a suppressed cell is a QI cell whose VARCHAR form is exactly '*'.
--
-- Macros that compare TWO tables (anon_risk_journalist, anon_utility) match columns by name, not
-- by position, and compare values in their VARCHAR form, so a published table (VARCHAR QI columns)
-- can be compared with its typed original, and the tables may order their columns differently.
-- NULL matches NULL (IS NOT DISTINCT FROM). Names starting with __anon_ are used internally and
-- must not be QI or SA names.
--
-- Risk follows the prosecutor and journalist models of El Emam & Dankar (2008), as implemented in
-- ARX (RiskModelSampleSummary) and sdcMicro: a record's re-identification risk is 1 / (size of the
-- class the attacker can match it to).

-- anon_risk_key_counts(tbl, cols) -> (key VARCHAR[], n BIGINT): helper, one row per distinct
-- combination of the `cols` values present in tbl: key = the values cast to VARCHAR in the ORDER OF
-- `cols` (not of the table), n = number of rows. Empty table: no row.
CREATE OR REPLACE TEMP MACRO anon_risk_key_counts(tbl, cols) AS TABLE
    SELECT list_transform(cols, lambda q: __v[list_position(__k, q)]) AS key, count(*) AS n
    FROM (
        SELECT list_value(*COLUMNS(*)) AS __v, struct_keys(__anon_s) AS __k
        FROM (
            SELECT COLUMNS(lambda c: list_contains(cols, c))::VARCHAR
            FROM query_table(tbl)
            WHERE (SELECT ok FROM anon_require_columns(tbl, cols))
        ) AS __anon_s
    )
    GROUP BY ALL;

-- anon_risk_classes(tbl, qi) -> (<QI columns>..., size BIGINT, risk DOUBLE): one row per
-- equivalence class, sorted: size = rows in the class, risk = 1 / size, the prosecutor
-- re-identification risk of each of its records (for plots and drill-down). Empty table: no row.
CREATE OR REPLACE TEMP MACRO anon_risk_classes(tbl, qi) AS TABLE
    SELECT COLUMNS(lambda c: list_contains(qi, c)), count(*) AS size, 1.0 / count(*) AS risk
    FROM query_table(tbl)
    WHERE (SELECT ok FROM anon_require_columns(tbl, qi))
    GROUP BY ALL
    ORDER BY ALL;

-- anon_risk(tbl, qi, threshold := 0.2) -> (highest_risk DOUBLE, average_risk DOUBLE,
-- records_at_risk BIGINT, records_at_risk_fraction DOUBLE, marketer_risk DOUBLE, uniques BIGINT,
-- uniques_fraction DOUBLE, classes BIGINT, rows BIGINT): one row, the prosecutor risk of the table
-- (the attacker knows the person is in the table). With n rows and classes of sizes f_1..f_C:
--   highest_risk             = 1 / min f_j (the risk of the most exposed record),
--   average_risk             = C / n = mean over records of 1 / (size of its class),
--   records_at_risk          = number of records whose risk 1 / f_j is strictly above `threshold`
--                              (compared in DOUBLE: a class of 5 rows is not above 0.2),
--   records_at_risk_fraction = records_at_risk / n,
--   marketer_risk            = C / n, the expected fraction of records an attacker re-identifies
--                              when linking every record (ARX's marketer risk under the prosecutor
--                              model, where the table is its own population: equals average_risk),
--   uniques                  = records alone in their class (f_j = 1), uniques_fraction = uniques / n,
--   classes                  = C, rows = n.
-- `threshold` is optional (default 0.2, i.e. classes of fewer than 5 rows are at risk) and may be
-- given positionally or as `threshold := x`.
-- Empty table: the risks and fractions are NULL, records_at_risk = uniques = classes = rows = 0.
-- Classes are grouped as one struct of the QI values (as anon_k does), not through
-- anon_class_sizes: that one returns the QI columns themselves, and a QI named `size` would
-- collide with its count column.
CREATE OR REPLACE TEMP MACRO anon_risk(tbl, qi, threshold := 0.2) AS TABLE
    SELECT 1.0 / min(size) AS highest_risk,
           count(*) / sum(size) AS average_risk,
           coalesce(sum(size) FILTER (WHERE 1.0 / size > threshold::DOUBLE), 0)::BIGINT
               AS records_at_risk,
           coalesce(sum(size) FILTER (WHERE 1.0 / size > threshold::DOUBLE), 0) / sum(size)
               AS records_at_risk_fraction,
           count(*) / sum(size) AS marketer_risk,
           count(*) FILTER (WHERE size = 1) AS uniques,
           count(*) FILTER (WHERE size = 1) / sum(size) AS uniques_fraction,
           count(*) AS classes,
           coalesce(sum(size), 0)::BIGINT AS rows
    FROM anon_sizes(tbl, qi);

-- anon_risk_journalist(tbl, qi, population, threshold := 0.2) -> (highest_risk DOUBLE,
-- average_risk DOUBLE, records_at_risk BIGINT, records_at_risk_fraction DOUBLE,
-- marketer_risk DOUBLE, records_not_in_population BIGINT, classes BIGINT, rows BIGINT,
-- population_rows BIGINT): one row, the journalist risk of the sample `tbl` (the attacker does not
-- know who is in the sample and links against the population). `population` is the name of a
-- table holding the population (a superset of the sample) with the same QI column names; columns
-- are matched by name and values compared in VARCHAR form, exactly (NULL matches NULL, a '*' only
-- matches a '*': no generalization or suppression is undone). For each sample class j with f_j
-- rows, F_j = number of population rows with the same QI values, and F'_j = greatest(F_j, f_j).
-- With C sample classes and n sample rows (El Emam's definitions, as ARX's RiskModelSampleSummary
-- computes them):
--   highest_risk             = max 1 / F'_j,
--   average_risk             = greatest(C / sum_j F'_j, marketer_risk), El Emam's journalist
--                              average risk (ARX's journalist "success rate"),
--   records_at_risk          = sample records whose risk 1 / F'_j is strictly above `threshold`
--                              (default 0.2), records_at_risk_fraction = records_at_risk / n,
--   marketer_risk            = (sum_j f_j / F'_j) / n = mean over sample records of 1 / F', the
--                              expected fraction of sample records re-identified by linking all of
--                              them to the population,
--   records_not_in_population = sample records of classes with F_j < f_j (0 when `population`
--                              really contains the sample); for them F is raised to f_j, as the
--                              sample's own rows are part of the true population,
--   classes = C, rows = n, population_rows = rows of `population`.
-- With the sample as its own population every number equals anon_risk's.
-- Empty sample: risks and fractions NULL, counts 0 (population_rows still counted).
CREATE OR REPLACE TEMP MACRO anon_risk_journalist(tbl, qi, population, threshold := 0.2) AS TABLE
    WITH __anon_rj_s AS (   -- sample classes: f
        SELECT key, n AS f FROM anon_risk_key_counts(tbl, qi)
    ), __anon_rj_p AS (     -- population classes: F
        SELECT key, n AS pf FROM anon_risk_key_counts(population, qi)
    ), __anon_rj_j AS (     -- per sample class: f, F' = greatest(F, f), F < f
        SELECT s.f, greatest(coalesce(p.pf, 0), s.f) AS ff, coalesce(p.pf, 0) < s.f AS short
        FROM __anon_rj_s AS s LEFT JOIN __anon_rj_p AS p ON p.key IS NOT DISTINCT FROM s.key
    )
    SELECT 1.0 / min(ff) AS highest_risk,
           greatest(count(*) / sum(ff), sum(f / ff) / sum(f)) AS average_risk,
           coalesce(sum(f) FILTER (WHERE 1.0 / ff > threshold::DOUBLE), 0)::BIGINT
               AS records_at_risk,
           coalesce(sum(f) FILTER (WHERE 1.0 / ff > threshold::DOUBLE), 0) / sum(f)
               AS records_at_risk_fraction,
           sum(f / ff) / sum(f) AS marketer_risk,
           coalesce(sum(f) FILTER (WHERE short), 0)::BIGINT AS records_not_in_population,
           count(*) AS classes,
           coalesce(sum(f), 0)::BIGINT AS rows,
           (SELECT coalesce(sum(pf), 0) FROM __anon_rj_p)::BIGINT AS population_rows
    FROM __anon_rj_j;

-- anon_utility(published, original, qi, sa, k := NULL) -> (stars BIGINT, suppressed_rows BIGINT,
-- classes BIGINT, rows BIGINT, discernibility HUGEINT, aecs DOUBLE, normalized_aecs DOUBLE,
-- kl_divergence DOUBLE): one row, the information kept by `published`, a suppressed version of
-- `original` (both with the QI columns and the SA column `sa`, matched by name):
--   stars, suppressed_rows = as anon_stars(published, qi): '*' cells among the QI, rows with one,
--   classes, rows          = equivalence classes and rows of `published` ('*' is a value there),
--   discernibility         = sum over published classes of size^2 (Bayardo & Agrawal's DM as ARX
--                            computes it for a table with no deleted records: cell suppression
--                            deletes none, so the |T|-per-suppressed-record penalty never applies),
--   aecs                   = rows / classes, the average equivalence class size,
--   normalized_aecs        = rows / (classes * k) (LeFevre et al.), NULL unless `k` is given,
--   kl_divergence          = Xiao, Yi & Tao (2010), Section 6.2, formula (2):
--                              KL(f, f*) = sum_{p in Omega} f(p) * ln(f(p) / f*(p))
--     over Omega = D_1 x ... x D_m x D_sa, D_i = the distinct values of QI column i in `original`
--     (VARCHAR form, NULL counted as one value). f(p) = (rows of `original` equal to p) / N.
--     f* is the pdf implied by `published`: each published row r is a point, except that a star on
--     attribute A is a value uniformly distributed over D_A, so with N* published rows
--       f*(p) = (1/N*) * sum over published rows r agreeing with p on every non-starred QI column
--               and on sa, of 1 / prod_{A starred in r} |D_A|.
--     Terms with f(p) = 0 are 0, so the sum runs over the distinct rows p of `original` only, and
--     f*(p) is found by hash joins, not by scanning Omega: the star patterns (sets of starred QI
--     columns) occurring in `published` are listed, each distinct original row is copied once per
--     pattern with that pattern's columns set to '*', and the copy is joined on all its values
--     (NULL = NULL) to the published classes of the same pattern. Cost ~ (distinct original rows)
--     x (star patterns); e.g. 63,441 distinct rows x 128 patterns takes a few seconds.
--     A published value outside D_A matches no original row. KL = 0 when both tables hold the
--     same rows and nothing is suppressed, +Infinity when some original row has f*(p) = 0
--     (`published` is not a suppression of `original`). `sa` must not be one of the QI.
-- Empty published table: stars = suppressed_rows = classes = rows = discernibility = 0, aecs,
-- normalized_aecs and kl_divergence NULL; kl_divergence is also NULL when `original` is empty.
CREATE OR REPLACE TEMP MACRO anon_utility(published, original, qi, sa, k := NULL) AS TABLE
    WITH __anon_ru_pub AS (    -- published (QI..., SA) combinations: key, n, class id, starred QI
        SELECT key AS __anon_key, n AS __anon_n, row_number() OVER () AS __anon_pcid,
               list_filter(qi, lambda q: key[list_position(qi, q)] IS NOT DISTINCT FROM '*')
                   AS __anon_starred
        FROM anon_risk_key_counts(published, list_append(qi, sa))
    ), __anon_ru_orig AS (   -- original (QI..., SA) points: key, count, id
        SELECT key AS __anon_key, n AS __anon_n, row_number() OVER () AS __anon_id
        FROM anon_risk_key_counts(original, list_append(qi, sa))
    ), __anon_ru_tot AS (    -- N, N*
        SELECT (SELECT sum(__anon_n) FROM __anon_ru_orig) AS n_orig,
               (SELECT sum(__anon_n) FROM __anon_ru_pub) AS n_pub
    ), __anon_ru_dom AS (    -- |D_i| for each QI position i, as a list in qi order
        SELECT list(d ORDER BY i) AS d
        FROM (
            SELECT i, count(DISTINCT __anon_key[i]) + max((__anon_key[i] IS NULL)::INTEGER) AS d
            FROM __anon_ru_orig CROSS JOIN generate_series(1, len(qi)) AS g(i)
            GROUP BY i
        )
    ), __anon_ru_pat AS (    -- star patterns of published: id, w = 1 / prod of the starred |D_A|
        SELECT __anon_starred, row_number() OVER () AS __anon_pid,
               1.0 / coalesce(list_product(list_transform(
                   __anon_starred, lambda q: dm.d[list_position(qi, q)])), 1) AS __anon_w
        FROM (SELECT DISTINCT __anon_starred FROM __anon_ru_pub) CROSS JOIN __anon_ru_dom AS dm
    ), __anon_ru_ou AS (     -- original points as columns, in the column order of `original`
        SELECT o.__anon_id,
               o.__anon_key[list_position(list_append(qi, sa),
                   alias(COLUMNS(lambda c: list_contains(list_append(qi, sa), c))))]
        FROM __anon_ru_orig AS o
        LEFT JOIN (SELECT COLUMNS(lambda c: list_contains(list_append(qi, sa), c))
                   FROM query_table(original) LIMIT 0) ON true
    ), __anon_ru_pu AS (     -- published classes as columns, in the same order, with pattern
        SELECT pb.__anon_pcid, pt.__anon_pid,
               pb.__anon_key[list_position(list_append(qi, sa),
                   alias(COLUMNS(lambda c: list_contains(list_append(qi, sa), c))))]
        FROM __anon_ru_pub AS pb
        JOIN __anon_ru_pat AS pt ON pt.__anon_starred = pb.__anon_starred
        LEFT JOIN (SELECT COLUMNS(lambda c: list_contains(list_append(qi, sa), c))
                   FROM query_table(original) LIMIT 0) ON true
    ), __anon_ru_ph AS (     -- published classes: struct of their values ('*' included)
        SELECT __anon_pcid, __anon_pid,
               row(*COLUMNS(* EXCLUDE (__anon_pcid, __anon_pid))) AS __anon_k
        FROM __anon_ru_pu
    ), __anon_ru_mask AS (   -- each original point under each pattern: its starred columns -> '*'
        SELECT ou.__anon_id, pt.__anon_pid, pt.__anon_w,
               CASE WHEN list_contains(pt.__anon_starred, alias(COLUMNS(* EXCLUDE (
                             __anon_id, __anon_pid, __anon_starred, __anon_w))))
                    THEN '*'
                    ELSE COLUMNS(* EXCLUDE (__anon_id, __anon_pid, __anon_starred, __anon_w))
               END
        FROM __anon_ru_ou AS ou CROSS JOIN __anon_ru_pat AS pt
    ), __anon_ru_ok AS (     -- ... as a struct in the same column order
        SELECT __anon_id, __anon_pid, __anon_w,
               row(*COLUMNS(* EXCLUDE (__anon_id, __anon_pid, __anon_w))) AS __anon_k
        FROM __anon_ru_mask
    ), __anon_ru_match AS (  -- per original point: s = N* * f*(p)
        SELECT ok.__anon_id, sum(pb.__anon_n * ok.__anon_w) AS s
        FROM __anon_ru_ok AS ok
        JOIN __anon_ru_ph AS ph
          ON ph.__anon_pid = ok.__anon_pid AND ph.__anon_k IS NOT DISTINCT FROM ok.__anon_k
        JOIN __anon_ru_pub AS pb ON pb.__anon_pcid = ph.__anon_pcid
        GROUP BY ok.__anon_id
    ), __anon_ru_fstar AS (  -- per original point: c = its count, s (0 when nothing matches)
        SELECT o.__anon_n AS c, coalesce(m.s, 0) AS s
        FROM __anon_ru_orig AS o LEFT JOIN __anon_ru_match AS m ON m.__anon_id = o.__anon_id
    ), __anon_ru_kl AS (
        SELECT CASE WHEN any_value(t.n_orig) IS NULL OR any_value(t.n_pub) IS NULL THEN NULL
                    WHEN bool_or(fs.s = 0) THEN 'Infinity'::DOUBLE
                    ELSE sum(CASE WHEN fs.s > 0 THEN
                                 fs.c / t.n_orig * ln((fs.c * t.n_pub) / (t.n_orig * fs.s)) END)
               END AS kl_divergence
        FROM __anon_ru_tot AS t LEFT JOIN __anon_ru_fstar AS fs ON true
    ), __anon_ru_cl AS (     -- published equivalence classes
        SELECT count(*) AS classes,
               coalesce(sum(size), 0)::BIGINT AS rows,
               coalesce(sum(size::HUGEINT * size), 0)::HUGEINT AS discernibility
        FROM (
            SELECT count(*) AS size
            FROM (
                SELECT row(*COLUMNS(lambda c: list_contains(qi, c))) AS __cls
                FROM query_table(published)
                WHERE (SELECT ok FROM anon_require_columns(published, list_append(qi, sa)))
            )
            GROUP BY __cls
        )
    )
    SELECT st.stars, st.suppressed_rows, cl.classes, cl.rows, cl.discernibility,
           CASE WHEN cl.classes > 0 THEN cl.rows / cl.classes END AS aecs,
           CASE WHEN cl.classes > 0 THEN cl.rows / (cl.classes * k) END AS normalized_aecs,
           kl.kl_divergence
    FROM __anon_ru_cl AS cl
    CROSS JOIN __anon_ru_kl AS kl
    CROSS JOIN anon_stars(published, qi) AS st;
