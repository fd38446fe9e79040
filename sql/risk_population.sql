-- duckanon: population-based re-identification risk for ANY table, in SQL only.
--
-- Loaded after checks.sql and risk.sql (files run in sorted order), whose conventions and macros
-- it uses: the table names are strings (anything query_table() accepts), the quasi-identifier (QI)
-- column names a VARCHAR list; names are matched exactly and case-sensitively, a missing name
-- raises anon_require_columns' Invalid Input Error. An equivalence class is the set of rows equal
-- on all QI columns (NULL is a value of its own). Names starting with __anon_ are used internally.
--
-- Two kinds of measure:
-- * against a population TABLE (anon_kmap, anon_kmap_classes, anon_delta_presence): the sample
--   `tbl` (a published table) and the population table `population` have the same QI column
--   names; values are compared in VARCHAR form, NULL matches NULL, and a QI cell that is exactly
--   '*' in `tbl` is a wildcard matching every population value of that column (so a published
--   class with stars matches all population rows that agree on its other QI values). Other
--   generalizations (labels, ranges) are compared as plain values.
-- * against a population SIZE (anon_population_uniqueness): the estimated number of population
--   uniques from the sample's class sizes, the same numbers as duckanon.solver.population (and,
--   up to the solver tolerance, ARX's RiskModelPopulationUniqueness).
--
-- Lambdas use the `lambda x: ...` syntax (checks.sql says why). Arithmetic follows IEEE doubles
-- (NaN and infinities propagate, as in ARX's Java); the ln/log1p helpers below return NaN or
-- -Infinity where DuckDB 1.5's ln would raise an error.

-- ------------------------------------------------------------------------------------------
-- population tables: k-map and delta-presence

-- anon_population_matches(tbl, population, qi) -> (key VARCHAR[], size BIGINT, matches BIGINT):
-- helper, one row per equivalence class of `tbl`: key = its QI values as VARCHAR in the order of
-- `qi`, size = its rows in `tbl`, matches = rows of `population` matching it ('*' in the class is
-- a wildcard, NULL matches NULL). Computed per star pattern (the set of starred QI positions): the
-- population's distinct QI combinations are counted once per pattern occurring in `tbl`, with the
-- pattern's positions replaced by '*', and joined to the classes of that pattern; cost ~
-- (distinct population combinations) x (star patterns). Empty `tbl`: no row.
CREATE OR REPLACE TEMP MACRO anon_population_matches(tbl, population, qi) AS TABLE
    WITH __anon_pm_s AS (      -- sample classes and their star pattern
        SELECT key AS __anon_key, n AS __anon_size,
               list_transform(key, lambda v: coalesce(v = '*', false)) AS __anon_star
        FROM anon_risk_key_counts(tbl, qi)
    ), __anon_pm_pat AS (      -- the star patterns present
        SELECT DISTINCT __anon_star FROM __anon_pm_s
    ), __anon_pm_p AS (        -- population combinations, masked by each pattern, counted
        SELECT pt.__anon_star,
               list_transform(p.key, lambda v, i: CASE WHEN pt.__anon_star[i] THEN '*' ELSE v END)
                   AS __anon_key,
               sum(p.n) AS __anon_matches
        FROM anon_risk_key_counts(population, qi) AS p CROSS JOIN __anon_pm_pat AS pt
        GROUP BY ALL
    )
    SELECT s.__anon_key AS key, s.__anon_size AS size,
           coalesce(m.__anon_matches, 0)::BIGINT AS matches
    FROM __anon_pm_s AS s
    LEFT JOIN __anon_pm_p AS m
      ON m.__anon_star = s.__anon_star AND m.__anon_key IS NOT DISTINCT FROM s.__anon_key;

-- anon_kmap_classes(tbl, population, qi) -> (<QI columns of tbl, VARCHAR>..., size BIGINT,
-- matches BIGINT, delta DOUBLE): one row per equivalence class of `tbl`, sorted (for drill-down,
-- as anon_risk_classes): the class's QI values as compared (VARCHAR), size = its rows in `tbl`,
-- matches = population rows matching it ('*' a wildcard), delta = size / matches (+Infinity when
-- nothing in the population matches). Empty `tbl`: no row.
CREATE OR REPLACE TEMP MACRO anon_kmap_classes(tbl, population, qi) AS TABLE
    SELECT m.__anon_key[list_position(qi, alias(COLUMNS(lambda c: list_contains(qi, c))))],
           m.__anon_size AS size, m.__anon_matches AS matches,
           CASE WHEN m.__anon_matches = 0 THEN 'Infinity'::DOUBLE
                ELSE m.__anon_size / m.__anon_matches END AS delta
    FROM (SELECT key AS __anon_key, size AS __anon_size, matches AS __anon_matches
          FROM anon_population_matches(tbl, population, qi)) AS m
    LEFT JOIN (SELECT COLUMNS(lambda c: list_contains(qi, c)) FROM query_table(tbl) LIMIT 0) ON true
    ORDER BY ALL;

-- anon_kmap(tbl, population, qi) -> (k_map BIGINT, classes BIGINT, rows BIGINT,
-- population_rows BIGINT): one row. Sweeney's k-map: every class of the published table `tbl`
-- matches at least k_map rows of the population table ('*' cells are wildcards), so `tbl`
-- satisfies k-map for every k <= k_map (ARX's KMap with a population table counts the same
-- population rows per class). classes, rows = of `tbl`; population_rows = rows of `population`.
-- Empty `tbl`: k_map NULL, classes = rows = 0.
CREATE OR REPLACE TEMP MACRO anon_kmap(tbl, population, qi) AS TABLE
    SELECT min(matches) AS k_map, count(*) AS classes, coalesce(sum(size), 0)::BIGINT AS rows,
           (SELECT coalesce(sum(n), 0) FROM anon_risk_key_counts(population, qi))::BIGINT
               AS population_rows
    FROM anon_population_matches(tbl, population, qi);

-- anon_delta_presence(tbl, population, qi) -> (delta_min DOUBLE, delta_max DOUBLE,
-- contained BOOLEAN, rows_not_in_population BIGINT, classes BIGINT, rows BIGINT,
-- population_rows BIGINT): one row. Nergiz, Atzori & Clifton's delta-presence (2007) as ARX's
-- DPresence checks it per class: for each class j of the published sample `tbl`,
-- delta_j = (sample rows in j) / (population rows matching j) is the probability that a
-- population record matching j is in the sample; the sample is (delta_min, delta_max)-present
-- with delta_min = min_j delta_j, delta_max = max_j delta_j. A class nothing matches has
-- delta_j = +Infinity.
--   rows_not_in_population = sample rows of classes with fewer matching population rows than
--                            sample rows (delta_j > 1), as anon_risk_journalist counts them;
--   contained              = rows_not_in_population = 0: every sample row matches a population
--                            row, and no class holds more rows than the population rows it
--                            matches (without '*' cells this is exactly "the sample is a
--                            sub-multiset of the population"; with them, classes may share
--                            population rows, so it is a necessary condition).
-- Only the sample's classes are measured here: the population's classes that no published class
-- reaches (delta 0 in ARX, which generalizes the population too) are counted by
-- anon_delta_presence_labeled / anon_population_unpublished below, against the release's labels.
-- Empty `tbl`: deltas NULL, contained true, counts 0.
CREATE OR REPLACE TEMP MACRO anon_delta_presence(tbl, population, qi) AS TABLE
    SELECT min(CASE WHEN matches = 0 THEN 'Infinity'::DOUBLE ELSE size / matches END) AS delta_min,
           max(CASE WHEN matches = 0 THEN 'Infinity'::DOUBLE ELSE size / matches END) AS delta_max,
           coalesce(sum(size) FILTER (WHERE matches < size), 0) = 0 AS contained,
           coalesce(sum(size) FILTER (WHERE matches < size), 0)::BIGINT AS rows_not_in_population,
           count(*) AS classes,
           coalesce(sum(size), 0)::BIGINT AS rows,
           (SELECT coalesce(sum(n), 0) FROM anon_risk_key_counts(population, qi))::BIGINT
               AS population_rows
    FROM anon_population_matches(tbl, population, qi);

-- ------------------------------------------------------------------------------------------
-- population tables against a release's LABELS: the same measures when the published cells are
-- hierarchy labels ('30-39', 'Married', ...) that no raw population value equals. `labels` is a
-- table name (anything query_table() accepts) with columns "column", "value", "label" (VARCHAR):
-- the published label of each raw value (as VARCHAR; NULL for the NULL value) of each QI column
-- the release generalized. A QI column without rows in `labels` is compared as above (its raw
-- value, '*' a wildcard). A population value of a listed column that `labels` lacks has no label:
-- its rows match no class (counted in unlabeled_rows). A value listed twice raises DuckDB's
-- duplicate-key error. anon_hierarchy_labels below reads one column's labels from an ARX
-- hierarchy file.

-- anon_hierarchy_labels(path, column_name, level) -> ("column", value, label VARCHAR): the labels
-- of level `level` (0: the values themselves) of the ARX hierarchy CSV file `path` (';', no
-- header: column 0 the value, column i its label at level i).
CREATE OR REPLACE TEMP MACRO anon_hierarchy_labels(path, column_name, level) AS TABLE
    SELECT column_name::VARCHAR AS "column", __anon_r[1] AS value, __anon_r[level + 1] AS label
    FROM (SELECT [*COLUMNS(*)] AS __anon_r FROM read_csv(path, delim = ';', header = false, all_varchar = true));

-- anon_population_labeled(population, qi, labels) -> (key VARCHAR[], n BIGINT, unlabeled
-- BOOLEAN): helper, the population's distinct QI combinations with each listed column's value
-- replaced by its label, and whether some listed value had none.
CREATE OR REPLACE TEMP MACRO anon_population_labeled(population, qi, labels) AS TABLE
    WITH __anon_pl_m AS (
        SELECT map_from_entries(list(struct_pack(k := "column" || chr(0) || CASE WHEN value IS NULL THEN 'N'
                                                                             ELSE 'V' || value END,
                                                 v := label))) AS __anon_map,
               coalesce(list(DISTINCT "column"), []) AS __anon_listed
        FROM query_table(labels)
    ), __anon_pl_k AS (
        SELECT list_transform(p.key, lambda v, i: CASE WHEN list_contains(m.__anon_listed, qi[i])
                   THEN m.__anon_map[qi[i] || chr(0) || CASE WHEN v IS NULL THEN 'N' ELSE 'V' || v END]
                   ELSE v END) AS __anon_key,
               list_bool_or(list_transform(p.key, lambda v, i: list_contains(m.__anon_listed, qi[i])
                   AND m.__anon_map[qi[i] || chr(0) || CASE WHEN v IS NULL THEN 'N' ELSE 'V' || v END]
                       IS NULL
                   AND NOT map_contains(m.__anon_map, qi[i] || chr(0) || CASE WHEN v IS NULL THEN 'N'
                                                                          ELSE 'V' || v END))) AS __anon_unlabeled,
               p.n
        FROM anon_risk_key_counts(population, qi) AS p CROSS JOIN __anon_pl_m AS m
    )
    SELECT __anon_key AS key, sum(n)::BIGINT AS n, __anon_unlabeled AS unlabeled
    FROM __anon_pl_k GROUP BY ALL;

-- anon_population_matches_labeled(tbl, population, qi, labels) -> (key VARCHAR[], size BIGINT,
-- matches BIGINT): anon_population_matches with the population's values as their labels.
CREATE OR REPLACE TEMP MACRO anon_population_matches_labeled(tbl, population, qi, labels) AS TABLE
    WITH __anon_pm_s AS (
        SELECT key AS __anon_key, n AS __anon_size,
               list_transform(key, lambda v: coalesce(v = '*', false)) AS __anon_star
        FROM anon_risk_key_counts(tbl, qi)
    ), __anon_pm_pat AS (
        SELECT DISTINCT __anon_star FROM __anon_pm_s
    ), __anon_pm_p AS (
        SELECT pt.__anon_star,
               list_transform(p.key, lambda v, i: CASE WHEN pt.__anon_star[i] THEN '*' ELSE v END)
                   AS __anon_key,
               sum(p.n) AS __anon_matches
        FROM anon_population_labeled(population, qi, labels) AS p CROSS JOIN __anon_pm_pat AS pt
        WHERE NOT p.unlabeled
        GROUP BY ALL
    )
    SELECT s.__anon_key AS key, s.__anon_size AS size,
           coalesce(m.__anon_matches, 0)::BIGINT AS matches
    FROM __anon_pm_s AS s
    LEFT JOIN __anon_pm_p AS m
      ON m.__anon_star = s.__anon_star AND m.__anon_key IS NOT DISTINCT FROM s.__anon_key;

-- anon_population_unpublished(tbl, population, qi, labels) -> (classes BIGINT, rows BIGINT,
-- unlabeled_rows BIGINT): one row. The population's label combinations that no class of `tbl`
-- matches ('*' a wildcard) and their rows (people the release does not reach: a class the
-- sample does not reach, or one whose rows were suppressed), and the rows without a label (also
-- among them). With `labels` covering every QI the release generalized, the classes are the
-- population's classes under the release's generalization.
CREATE OR REPLACE TEMP MACRO anon_population_unpublished(tbl, population, qi, labels) AS TABLE
    WITH __anon_pu_s AS (
        SELECT key AS __anon_key, list_transform(key, lambda v: coalesce(v = '*', false)) AS __anon_star
        FROM anon_risk_key_counts(tbl, qi)
    ), __anon_pu_p AS (
        SELECT key AS __anon_key, n, unlabeled FROM anon_population_labeled(population, qi, labels)
    ), __anon_pu_hit AS (
        SELECT DISTINCT p.__anon_key
        FROM __anon_pu_p AS p JOIN __anon_pu_s AS s
          ON NOT p.unlabeled
         AND list_transform(p.__anon_key, lambda v, i: CASE WHEN s.__anon_star[i] THEN '*' ELSE v END)
             IS NOT DISTINCT FROM s.__anon_key
    )
    SELECT count(*)::BIGINT AS classes, coalesce(sum(p.n), 0)::BIGINT AS rows,
           coalesce(sum(p.n) FILTER (WHERE p.unlabeled), 0)::BIGINT AS unlabeled_rows
    FROM __anon_pu_p AS p
    WHERE p.unlabeled OR NOT EXISTS (SELECT 1 FROM __anon_pu_hit AS h
                                     WHERE h.__anon_key IS NOT DISTINCT FROM p.__anon_key);

-- anon_kmap_classes_labeled(tbl, population, qi, labels): anon_kmap_classes against the labels.
CREATE OR REPLACE TEMP MACRO anon_kmap_classes_labeled(tbl, population, qi, labels) AS TABLE
    SELECT m.__anon_key[list_position(qi, alias(COLUMNS(lambda c: list_contains(qi, c))))],
           m.__anon_size AS size, m.__anon_matches AS matches,
           CASE WHEN m.__anon_matches = 0 THEN 'Infinity'::DOUBLE
                ELSE m.__anon_size / m.__anon_matches END AS delta
    FROM (SELECT key AS __anon_key, size AS __anon_size, matches AS __anon_matches
          FROM anon_population_matches_labeled(tbl, population, qi, labels)) AS m
    LEFT JOIN (SELECT COLUMNS(lambda c: list_contains(qi, c)) FROM query_table(tbl) LIMIT 0) ON true
    ORDER BY ALL;

-- anon_kmap_labeled(tbl, population, qi, labels): anon_kmap against the labels, with the
-- population's classes the release does not reach (anon_population_unpublished).
CREATE OR REPLACE TEMP MACRO anon_kmap_labeled(tbl, population, qi, labels) AS TABLE
    SELECT min(matches) AS k_map, count(*) AS classes, coalesce(sum(size), 0)::BIGINT AS rows,
           (SELECT coalesce(sum(n), 0) FROM anon_risk_key_counts(population, qi))::BIGINT
               AS population_rows,
           (SELECT classes FROM anon_population_unpublished(tbl, population, qi, labels)) AS unpublished_classes,
           (SELECT rows FROM anon_population_unpublished(tbl, population, qi, labels)) AS unpublished_rows
    FROM anon_population_matches_labeled(tbl, population, qi, labels);

-- anon_delta_presence_labeled(tbl, population, qi, labels): anon_delta_presence against the
-- labels, with the population's classes the release does not reach (their presence is 0, below
-- any dmin > 0: published by duckanon only when they hold no sample row and a k or l model
-- counts them as suppressed, or when the sample's rows in them were suppressed, as in ARX).
CREATE OR REPLACE TEMP MACRO anon_delta_presence_labeled(tbl, population, qi, labels) AS TABLE
    SELECT min(CASE WHEN matches = 0 THEN 'Infinity'::DOUBLE ELSE size / matches END) AS delta_min,
           max(CASE WHEN matches = 0 THEN 'Infinity'::DOUBLE ELSE size / matches END) AS delta_max,
           coalesce(sum(size) FILTER (WHERE matches < size), 0) = 0 AS contained,
           coalesce(sum(size) FILTER (WHERE matches < size), 0)::BIGINT AS rows_not_in_population,
           count(*) AS classes,
           coalesce(sum(size), 0)::BIGINT AS rows,
           (SELECT coalesce(sum(n), 0) FROM anon_risk_key_counts(population, qi))::BIGINT
               AS population_rows,
           (SELECT classes FROM anon_population_unpublished(tbl, population, qi, labels)) AS unpublished_classes,
           (SELECT rows FROM anon_population_unpublished(tbl, population, qi, labels)) AS unpublished_rows
    FROM anon_population_matches_labeled(tbl, population, qi, labels);

-- ------------------------------------------------------------------------------------------
-- numeric helpers (scalar macros; the same formulas as duckanon/solver/population.py)

-- anon_population_ln(x): ln(x), NaN for x < 0, -Infinity for x = 0 (DuckDB 1.5's ln raises there).
CREATE OR REPLACE TEMP MACRO anon_population_ln(x) AS
    CASE WHEN x > 0 THEN ln(x) WHEN x = 0 THEN '-Infinity'::DOUBLE ELSE 'NaN'::DOUBLE END;

-- anon_population_log1p(x): ln(1 + x) accurate for small x (DuckDB has no log1p): with
-- y = 1 + x rounded, ln(y) * x / (y - 1) cancels y's rounding error.
CREATE OR REPLACE TEMP MACRO anon_population_log1p(x) AS
    CASE WHEN isnan(x) THEN x
         WHEN x < -1 THEN 'NaN'::DOUBLE
         WHEN x = -1 THEN '-Infinity'::DOUBLE
         WHEN 1.0 + x = 1.0 THEN x::DOUBLE
         ELSE ln(1.0 + x) * x / ((1.0 + x) - 1.0) END;

-- anon_population_stirling(z): ln Gamma(z) - ((z - 1/2) ln z - z + ln(2 pi) / 2), the Stirling
-- series to z^-9 (used for z >= 30, truncation error below 1e-18).
CREATE OR REPLACE TEMP MACRO anon_population_stirling(z) AS
    (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - 1.0 / (1188 * z * z)) / (z * z))
                 / (z * z)) / (z * z)) / z;

-- anon_population_lgamma_diff(x, h) = ln Gamma(x) - ln Gamma(x - h) for x, x - h > 0, without
-- the cancellation of the plain difference when both are >= 30:
-- -(x - h - 1/2) log1p(-h / x) + h ln x - h + stirling(x) - stirling(x - h).
CREATE OR REPLACE TEMP MACRO anon_population_lgamma_diff(x, h) AS
    CASE WHEN x >= 30 AND x - h >= 30
         THEN -((x - h) - 0.5) * anon_population_log1p(-h / x) + h * ln(x) - h
              + (anon_population_stirling(x) - anon_population_stirling(x - h))
         WHEN x > 0 AND x - h > 0 THEN lgamma(x) - lgamma(x - h)
         ELSE 'NaN'::DOUBLE END;

-- anon_population_pitman_value(theta, alpha, big_n): Hoshino's (2001) estimate of the population
-- uniques under Pitman's model, Gamma(theta + 1) / Gamma(theta + alpha) * N^alpha, NaN when
-- alpha = 0 or the value is not in [0, N] (ARX's ModelPitman.getResult; for theta + alpha < 0
-- the sign of Gamma(theta + alpha) alternates per unit interval).
CREATE OR REPLACE TEMP MACRO anon_population_pitman_value(theta, alpha, big_n) AS
    (SELECT CASE WHEN v >= 0 AND v <= big_n THEN v ELSE 'NaN'::DOUBLE END
     FROM (SELECT CASE
             WHEN isnan(theta) OR isnan(alpha) OR alpha = 0 THEN 'NaN'::DOUBLE
             WHEN theta + alpha > 0
             THEN exp(anon_population_lgamma_diff(theta + 1, 1 - alpha) + alpha * ln(big_n))
             WHEN theta + alpha = floor(theta + alpha) OR theta + 1 <= 0 THEN 'NaN'::DOUBLE
             ELSE (CASE WHEN floor(-(theta + alpha)) % 2 = 1 THEN 1.0 ELSE -1.0 END)
                  * exp(lgamma(theta + 1) - lgamma(theta + alpha) + alpha * ln(big_n))
           END AS v));

-- anon_population_hypergeometric_one(k, n, big_n): probability that a population class of k
-- records gives exactly 1 record to a simple random sample of n out of N,
-- k C(N-k, n-1) / C(N, n) = exp(ln(k n / (N-n+1)) + lnG(N-n+2, k) - lnG(N+1, k)) with
-- lnG = anon_population_lgamma_diff; 0 outside the support (k > N - n + 1), n / N for k = 1.
CREATE OR REPLACE TEMP MACRO anon_population_hypergeometric_one(k, n, big_n) AS
    CASE WHEN k > big_n - n + 1 THEN 0.0::DOUBLE
         WHEN k = 1 THEN n::DOUBLE / big_n::DOUBLE
         ELSE exp(ln(k::DOUBLE) + ln(n::DOUBLE) - ln((big_n - n + 1)::DOUBLE)
                  + anon_population_lgamma_diff((big_n - n + 2)::DOUBLE, k::DOUBLE)
                  - anon_population_lgamma_diff((big_n + 1)::DOUBLE, k::DOUBLE)) END;

-- ARX's digamma and trigamma (risk/Gamma.java, after Minka's Lightspeed toolbox), the same bits
-- as duckanon.solver.special.digamma_arx / trigamma_arx (sums run in order, list_reduce).
-- They work on lists (one evaluation per Newton step for all the arguments it needs); the
-- list_transform([...])[1] forms bind a value once instead of repeating its expression.
-- anon_population_steps(x, top): whole steps that shift x up to at least `top` (0 from top on).
CREATE OR REPLACE TEMP MACRO anon_population_steps(x, top) AS
    CASE WHEN x < top THEN ceil(top - x) ELSE 0.0::DOUBLE END;

-- anon_population_digamma_pos(x), x > 1e-6 finite: psi(x + m) - sum_{i<m} 1 / (x + i), m =
-- steps to 12, psi(y) = ln y - 1/(2y) - 1/(12y^2) + 1/(120y^4) - 1/(252y^6) + 1/(240y^8) - 1/(132y^10).
CREATE OR REPLACE TEMP MACRO anon_population_digamma_pos(x) AS
    list_transform([{'x': x, 'm': anon_population_steps(x, 12)}], lambda __anon_d:
        (-list_reduce(list_transform(range(__anon_d.m::BIGINT),
                                     lambda __anon_i: 1.0 / (__anon_d.x + __anon_i)),
                      lambda __anon_acc, __anon_v: __anon_acc + __anon_v, 0.0::DOUBLE)
         + (ln(__anon_d.x + __anon_d.m) - 0.5 * (1.0 / (__anon_d.x + __anon_d.m))))
        - list_transform([(1.0 / (__anon_d.x + __anon_d.m)) * (1.0 / (__anon_d.x + __anon_d.m))],
                         lambda __anon_r2: __anon_r2 * (1.0 / 12 - __anon_r2 * (1.0 / 120 - __anon_r2
                             * (1.0 / 252 - __anon_r2 * (1.0 / 240 - __anon_r2 * (1.0 / 132))))))[1]
    )[1];

-- anon_population_digamma_list(xs DOUBLE[]) -> DOUBLE[]: psi at each element as ARX computes it
-- (reflection psi(x) = psi(1 - x) + pi / tan(-pi x) below 0, -gamma - 1/x + (pi^2/6) x near 0).
CREATE OR REPLACE TEMP MACRO anon_population_digamma_list(xs) AS
    list_transform(xs, lambda __anon_x:
        CASE WHEN isnan(__anon_x) OR isinf(__anon_x) THEN 'NaN'::DOUBLE
             WHEN __anon_x = 0 THEN '-Infinity'::DOUBLE
             WHEN __anon_x > 0 AND __anon_x <= 1e-6
             THEN (-'0.5772156649015329'::DOUBLE - 1.0 / __anon_x)
                  + '1.6449340668482264'::DOUBLE * __anon_x
             ELSE anon_population_digamma_pos(CASE WHEN __anon_x < 0 THEN 1 - __anon_x
                                                   ELSE __anon_x END)
                  + CASE WHEN __anon_x < 0 THEN pi() / tan((-pi()) * __anon_x) ELSE 0.0 END
        END);

-- anon_population_digamma(x): psi(x) as ARX computes it, for one value.
CREATE OR REPLACE TEMP MACRO anon_population_digamma(x) AS
    anon_population_digamma_list([x::DOUBLE])[1];

-- anon_population_trigamma_pos(x), x > 1e-4 finite: ARX's trigamma, which shifts x below 8 up to
-- [8, 9) but adds the asymptotic series 1/y + 1/(2y^2) + 1/(6y^3) - 1/(30y^5) + 1/(42y^7)
-- - 1/(30y^9) + 5/(66y^11) only when the shifted y is at least 12 (special.trigamma_arx).
CREATE OR REPLACE TEMP MACRO anon_population_trigamma_pos(x) AS
    list_transform([{'x': x, 'm': anon_population_steps(x, 8)}], lambda __anon_d:
        list_reduce(list_transform(range(__anon_d.m::BIGINT),
                                   lambda __anon_i: 1.0 / ((__anon_d.x + __anon_i) * (__anon_d.x + __anon_i))),
                    lambda __anon_acc, __anon_v: __anon_acc + __anon_v, 0.0::DOUBLE)
        + CASE WHEN __anon_d.x + __anon_d.m >= 12
               THEN list_transform([1.0 / ((__anon_d.x + __anon_d.m) * (__anon_d.x + __anon_d.m))],
                                   lambda __anon_r: 0.5 * __anon_r
                                       + (1 + __anon_r * (1.0 / 6 + __anon_r * (-1.0 / 30 + __anon_r
                                          * (1.0 / 42 + __anon_r * (-1.0 / 30 + __anon_r * (5.0 / 66))))))
                                         / (__anon_d.x + __anon_d.m))[1]
               ELSE 0.0::DOUBLE END
    )[1];

-- anon_population_trigamma_list(xs DOUBLE[]) -> DOUBLE[]: psi' at each element as ARX computes it
-- (reflection psi'(x) = -psi'(1 - x) + (pi / sin(-pi x))^2, 1/x^2 + pi^2/6 - 2 zeta(3) x near 0).
CREATE OR REPLACE TEMP MACRO anon_population_trigamma_list(xs) AS
    list_transform(xs, lambda __anon_x:
        CASE WHEN isnan(__anon_x) OR isinf(__anon_x) THEN 'NaN'::DOUBLE
             WHEN __anon_x = 0 THEN '-Infinity'::DOUBLE
             WHEN __anon_x > 0 AND __anon_x <= 1e-4
             THEN (1.0 / (__anon_x * __anon_x) + '1.6449340668482264'::DOUBLE)
                  - (2 * '1.2020569031595942'::DOUBLE) * __anon_x
             WHEN __anon_x < 0
             THEN -anon_population_trigamma_pos(1 - __anon_x)
                  + (pi() / sin((-pi()) * __anon_x)) * (pi() / sin((-pi()) * __anon_x))
             ELSE anon_population_trigamma_pos(__anon_x)
        END);

-- anon_population_trigamma(x): psi'(x) as ARX computes it, for one value.
CREATE OR REPLACE TEMP MACRO anon_population_trigamma(x) AS
    anon_population_trigamma_list([x::DOUBLE])[1];

-- ------------------------------------------------------------------------------------------
-- population uniqueness

-- anon_population_uniqueness(tbl, qi, population_size, estimator) -> (uniques DOUBLE,
-- fraction DOUBLE, estimator VARCHAR, converged BOOLEAN, sample_uniques BIGINT, classes BIGINT,
-- rows BIGINT, sampling_fraction DOUBLE): one row, the estimated number of population-unique
-- records of the population (N = population_size records) `tbl` is a sample of, from the sizes
-- of `tbl`'s equivalence classes, as ARX's RiskModelPopulationUniqueness computes it and with the
-- same numbers as duckanon.solver.population.population_uniques (its docstrings give the
-- formulas and where ARX departs from the papers):
--   'pitman' : Pitman (1996) fitted by maximum likelihood (Newton-Raphson from ARX's start value
--              and start values, as ARX), Hoshino's (2001) Gamma(theta+1)/Gamma(theta+alpha) N^alpha;
--   'zayatz' : Zayatz (1991), c_1 P(population unique | sample unique) / f, hypergeometric;
--   'snb'    : Chen & Keller-McNulty's (1998) slide negative binomial, K beta^alpha;
--   'dankar' : Dankar et al. (2012): f <= 0.1 Pitman (Zayatz when Pitman is not available),
--              else the smaller of Zayatz and SNB (Zayatz when SNB is not available).
-- uniques = the estimate (0 when the sample has no uniques, and, as in ARX, when a fit does not
-- converge or gives NaN or 0); fraction = uniques / N (ARX's getFractionOfUniqueTuples);
-- estimator = the estimator used (for 'dankar' the one the rule picked; 'dankar' when the sample
-- has no uniques); converged = whether the Pitman or SNB fit converged (NULL for Zayatz and when
-- nothing was fitted); sample_uniques = classes of one row; sampling_fraction = rows / N.
-- The fits are recursive CTEs, one Newton step per iteration, on ARX's path: Pitman first on the
-- closed form (ARX's digamma/trigamma, ~0.2 ms a step), then, if that fails or misses the exact
-- equations, on sums over 1..rows per step. On real tables a fit takes a few steps (0.1-0.3 s
-- with Adult's 30,162 rows); on small or odd samples ARX's path can wander for thousands of
-- steps before converging far out or failing (then 'not available'), a few seconds here.
-- Errors (one line): an estimator other than the four, population_size NULL, not whole or below
-- the row count, a missing QI column. Empty `tbl`: uniques, fraction NULL, counts 0.
CREATE OR REPLACE TEMP MACRO anon_population_uniqueness(tbl, qi, population_size, estimator) AS TABLE
    WITH RECURSIVE __anon_pu_h AS (   -- class-size profile: k = size, c = classes of that size
        SELECT size AS k, count(*) AS c
        FROM anon_sizes(tbl, qi)
        GROUP BY size
    ), __anon_pu_p AS (               -- scalars and checks
        SELECT CASE
                 WHEN lower(estimator::VARCHAR) IS NULL
                      OR lower(estimator::VARCHAR) NOT IN ('pitman', 'zayatz', 'snb', 'dankar')
                 THEN error('duckanon: unknown population uniqueness estimator; known estimators: '
                            || 'pitman, zayatz, snb, dankar')
                 WHEN population_size IS NULL
                      OR population_size::DOUBLE <> floor(population_size::DOUBLE)
                 THEN error('duckanon: population_size must be a whole number of records')
                 WHEN population_size::DOUBLE < coalesce(sum(k * c), 0)
                 THEN error('duckanon: population_size is smaller than the sample: the population '
                            || 'must contain every sample record')
                 ELSE true END AS ok,
               lower(estimator::VARCHAR) AS est,
               coalesce(sum(k * c), 0)::DOUBLE AS n,
               coalesce(sum(c), 0)::DOUBLE AS u,
               coalesce(sum(c) FILTER (WHERE k = 1), 0)::DOUBLE AS c1,
               coalesce(sum(c) FILTER (WHERE k = 2), 0)::DOUBLE AS c2,
               population_size::DOUBLE AS big_n,
               coalesce(sum(k * c), 0)::DOUBLE / population_size::DOUBLE AS f
        FROM __anon_pu_h
    ), __anon_pu_need AS (            -- which fits the estimator needs
        SELECT p.*,
               p.c1 > 0 AND (p.est = 'pitman' OR (p.est = 'dankar' AND p.f <= 0.1)) AS need_pitman,
               p.c1 > 0 AND (p.est = 'snb' OR (p.est = 'dankar' AND p.f > 0.1)) AS need_snb,
               -- ARX's start values after the first: (x, y) in {0, .33, .66, .99}^2, x major
               [
                {'x': 0.0::DOUBLE, 'y': 0.0::DOUBLE}, {'x': 0.0::DOUBLE, 'y': 0.33::DOUBLE},
                {'x': 0.0::DOUBLE, 'y': 0.66::DOUBLE}, {'x': 0.0::DOUBLE, 'y': 0.99::DOUBLE},
                {'x': 0.33::DOUBLE, 'y': 0.0::DOUBLE}, {'x': 0.33::DOUBLE, 'y': 0.33::DOUBLE},
                {'x': 0.33::DOUBLE, 'y': 0.66::DOUBLE}, {'x': 0.33::DOUBLE, 'y': 0.99::DOUBLE},
                {'x': 0.66::DOUBLE, 'y': 0.0::DOUBLE}, {'x': 0.66::DOUBLE, 'y': 0.33::DOUBLE},
                {'x': 0.66::DOUBLE, 'y': 0.66::DOUBLE}, {'x': 0.66::DOUBLE, 'y': 0.99::DOUBLE},
                {'x': 0.99::DOUBLE, 'y': 0.0::DOUBLE}, {'x': 0.99::DOUBLE, 'y': 0.33::DOUBLE},
                {'x': 0.99::DOUBLE, 'y': 0.66::DOUBLE}, {'x': 0.99::DOUBLE, 'y': 0.99::DOUBLE}]
                   AS starts
        FROM __anon_pu_p AS p
        WHERE p.ok
    ), __anon_pu_m AS (               -- m_j = classes larger than j, j = 1 .. top - 1
        SELECT coalesce(flatten(list(list_transform(range(prev, k), lambda j: s) ORDER BY k)),
                        []) AS m
        FROM (
            SELECT k, coalesce(lag(k) OVER (ORDER BY k), 1) AS prev,
                   sum(c) OVER (ORDER BY k DESC)::DOUBLE AS s
            FROM __anon_pu_h
        )
    ), __anon_pu_pit0 AS (            -- ARX's Pitman start value (c_2 = 0 counts as 1)
        SELECT t, ((t * (c1 - n)) + ((n - 1) * c1)) / (n * u) AS a
        FROM (
            SELECT c1, n, u,
                   ((n * u * cc) - (c1 * (n - 1) * ((2 * u) + cc)))
                   / (((2 * c1 * u) + (c1 * cc)) - (n * cc)) AS t
            FROM (SELECT c1, n, u, (c1 * (c1 - 1)) / (CASE WHEN c2 <> 0 THEN c2 ELSE 1 END) AS cc
                  FROM __anon_pu_need WHERE need_pitman)
        )
    ), __anon_pu_hl AS (              -- class sizes other than 1 (ks), ascending, and their counts
        SELECT coalesce(list(k::DOUBLE ORDER BY k) FILTER (WHERE k <> 1), []::DOUBLE[]) AS ks,
               coalesce(list(c::DOUBLE ORDER BY k) FILTER (WHERE k <> 1), []::DOUBLE[]) AS cs
        FROM __anon_pu_h
    ), __anon_pu_pitc(tr, it, t, a, st) AS (
        -- 1. Newton-Raphson on the closed form (ARX's digamma/trigamma), as ModelPitman first
        -- does; st: 0 running, 1 converged, 2 failed; tr = try (0: the start value, 1..16:
        -- ARX's start values), it = steps in the try
        SELECT 0, 0, t, a, 0 FROM __anon_pu_pit0
        UNION ALL
        SELECT CASE WHEN conv OR tr = 16 OR NOT restart THEN tr ELSE tr + 1 END,
               CASE WHEN conv OR tr = 16 OR NOT restart THEN it + 1 ELSE 0 END,
               CASE WHEN conv THEN t WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].x ELSE nt END,
               CASE WHEN conv THEN a WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].y ELSE na END,
               CASE WHEN conv THEN 1 WHEN tr = 16 THEN 2 ELSE 0 END
        FROM (
            SELECT *, abs(g1) <= 1e-6 AND abs(g2) <= 1e-6 AS conv,
                   isnan(nt) OR nt < 0 OR isnan(na) OR it >= 1000 AS restart
            FROM (
                SELECT *, t - ((h22 * inv) * g1 + (-h12 * inv) * g2) AS nt,
                          a - ((-h12 * inv) * g1 + (h11 * inv) * g2) AS na
                FROM (SELECT *, 1.0 / (h11 * h22 - h12 * h12) AS inv FROM (
                    SELECT *,
                           o1 - (dg[3] - dg[4]) AS g1,
                           o3 - list_reduce(list_transform(cs, lambda c, i: c * (dg[5 + i] - dg[5])),
                                            lambda acc, v: acc + v, 0.0::DOUBLE) AS g2,
                           (tg[3] - tg[4]) - d1 AS h11,
                           -d5 AS h12,
                           -d3 - list_reduce(list_transform(cs, lambda c, i: c * (tg[5] - tg[5 + i])),
                                             lambda acc, v: acc + v, 0.0::DOUBLE) AS h22
                    FROM (
                        SELECT *, (o1 - t * d1) / a AS d5,
                                  ((u - 1) - 2 * t * o1 + t * t * d1) / (a * a) AS d3
                        FROM (
                            SELECT *, (dg[1] - dg[2]) / a AS o1,
                                      (tg[2] - tg[1]) / (a * a) AS d1,
                                      ((u - 1) * a - t * (dg[1] - dg[2])) / (a * a) AS o3
                            FROM (
                                -- psi at s + u, s + 1 (s = theta / alpha), theta + n, theta + 1,
                                -- 1 - alpha, then k - alpha for each size k > 1; psi' at the same
                                -- but theta + 1 before theta + n
                                SELECT r.tr, r.it, r.t, r.a, q.starts, q.u, hl.cs,
                                       anon_population_digamma_list(list_concat(
                                           [((q.u - 1) + r.t / r.a) + 1, r.t / r.a + 1, q.n + r.t,
                                            r.t + 1, 1 - r.a],
                                           list_transform(hl.ks, lambda k: k - r.a))) AS dg,
                                       anon_population_trigamma_list(list_concat(
                                           [((r.a + r.t) + r.a * (q.u - 1)) / r.a, r.t / r.a + 1,
                                            r.t + 1, q.n + r.t, 1 - r.a],
                                           list_transform(hl.ks, lambda k: k - r.a))) AS tg
                                FROM __anon_pu_pitc AS r
                                CROSS JOIN __anon_pu_need AS q
                                CROSS JOIN __anon_pu_hl AS hl
                                WHERE r.st = 0
                            )
                        )
                    )
                ))
            )
        )
    ), __anon_pu_pitc_end AS (        -- the closed-form result, kept if it solves the exact equations
        SELECT t, a, st,
               st = 1
               AND abs(coalesce(list_sum(list_transform(range(1, q.u::BIGINT),
                                                        lambda i: 1.0 / (t + i * a))), 0)
                       - coalesce(list_sum(list_transform(range(1, q.n::BIGINT),
                                                          lambda i: 1.0 / (t + i))), 0)) <= 1e-6
               AND abs(coalesce(list_sum(list_transform(range(1, q.u::BIGINT),
                                                        lambda i: i * (1.0 / (t + i * a)))), 0)
                       - coalesce(list_sum(list_transform(mm.m,
                                                          lambda mj, j: mj * (1.0 / (j - a)))), 0))
                   <= 1e-6 AS kept
        FROM __anon_pu_pitc AS r CROSS JOIN __anon_pu_need AS q CROSS JOIN __anon_pu_m AS mm
        WHERE r.st <> 0
    ), __anon_pu_pit(tr, it, t, a, st) AS (
        -- 2. else Newton-Raphson on the exact equations (ARX's "iterative" functions)
        SELECT 0, 0, t, a, 0 FROM __anon_pu_pit0
        WHERE NOT coalesce((SELECT kept FROM __anon_pu_pitc_end), false)
        UNION ALL
        SELECT CASE WHEN conv OR tr = 16 OR NOT restart THEN tr ELSE tr + 1 END,
               CASE WHEN conv OR tr = 16 OR NOT restart THEN it + 1 ELSE 0 END,
               CASE WHEN conv THEN t WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].x ELSE nt END,
               CASE WHEN conv THEN a WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].y ELSE na END,
               CASE WHEN conv THEN 1 WHEN tr = 16 THEN 2 ELSE 0 END
        FROM (
            SELECT *, abs(g1) <= 1e-6 AND abs(g2) <= 1e-6 AS conv,
                   isnan(nt) OR nt < 0 OR isnan(na) OR it >= 1000 AS restart
            FROM (
                SELECT *, t - ((h22 * inv) * g1 + (-h12 * inv) * g2) AS nt,
                          a - ((-h12 * inv) * g1 + (h11 * inv) * g2) AS na
                FROM (
                    SELECT *, 1.0 / (h11 * h22 - h12 * h12) AS inv
                    FROM (
                        -- v_i = 1 / (theta + i alpha), i < u; w_i = 1 / (theta + i), i < n;
                        -- z_j = 1 / (j - alpha), j < largest class; m_j = classes larger than j
                        SELECT tr, it, t, a, starts,
                               coalesce(list_sum(v), 0) - coalesce(list_sum(w), 0) AS g1,
                               coalesce(list_sum(list_transform(v, lambda x, i: i * x)), 0)
                               - coalesce(list_sum(list_transform(z, lambda x, j: m[j] * x)), 0) AS g2,
                               coalesce(list_sum(list_transform(w, lambda x: x * x)), 0)
                               - coalesce(list_sum(list_transform(v, lambda x: x * x)), 0) AS h11,
                               -coalesce(list_sum(list_transform(v, lambda x, i: i * (x * x))), 0)
                                   AS h12,
                               -coalesce(list_sum(list_transform(v, lambda x, i: i * i * (x * x))), 0)
                               - coalesce(list_sum(list_transform(z, lambda x, j: m[j] * x * x)), 0)
                                   AS h22
                        FROM (
                            SELECT r.tr, r.it, r.t, r.a, q.starts, mm.m,
                                   list_transform(range(1, q.u::BIGINT),
                                                  lambda i: 1.0 / (r.t + i * r.a)) AS v,
                                   list_transform(range(1, q.n::BIGINT),
                                                  lambda i: 1.0 / (r.t + i)) AS w,
                                   list_transform(mm.m, lambda mj, j: 1.0 / (j - r.a)) AS z
                            FROM __anon_pu_pit AS r
                            CROSS JOIN __anon_pu_need AS q
                            CROSS JOIN __anon_pu_m AS mm
                            WHERE r.st = 0
                        )
                    )
                )
            )
        )
    ), __anon_pu_pitman AS (          -- Pitman: (theta, alpha, converged, uniques or NaN)
        SELECT r.t AS theta, r.a AS alpha, r.st = 1 AS converged,
               CASE WHEN r.st = 1 THEN anon_population_pitman_value(r.t, r.a, q.big_n)
                    ELSE 'NaN'::DOUBLE END AS value
        FROM (SELECT t, a, st FROM __anon_pu_pitc_end WHERE kept
              UNION ALL
              SELECT t, a, st FROM __anon_pu_pit WHERE st <> 0) AS r
        CROSS JOIN __anon_pu_need AS q
    ), __anon_pu_zayatz AS (          -- Zayatz
        SELECT CASE WHEN q.c1 > 0
                    THEN q.c1 * (q.c1 * (q.n / q.big_n) / sum(h.c * anon_population_hypergeometric_one(
                             h.k, q.n, q.big_n))) / (q.n / q.big_n)
               END AS value
        FROM __anon_pu_need AS q CROSS JOIN __anon_pu_h AS h
        GROUP BY q.c1, q.n, q.big_n
    ), __anon_pu_snbk AS (            -- SNB: K (ARX's Shlosser-type estimate), f, c1, c2
        SELECT q.f, q.c1, q.c2, q.starts,
               q.u + q.c1 * (sum(h.k * q.f * q.f * pow(1 - q.f * q.f, h.k - 1) * h.c)
                             / sum(pow(1 - q.f, h.k) * h.c * pow(1 + q.f, h.k) - 1))
                   * (sum(pow(1 - q.f, h.k) * h.c) / sum(h.k * q.f * pow(1 - q.f, h.k - 1) * h.c))
                   * (sum(pow(1 - q.f, h.k) * h.c) / sum(h.k * q.f * pow(1 - q.f, h.k - 1) * h.c))
                   AS big_k
        FROM __anon_pu_need AS q CROSS JOIN __anon_pu_h AS h
        WHERE q.need_snb
        GROUP BY q.f, q.c1, q.c2, q.u, q.starts
    ), __anon_pu_snb(tr, it, a, b, st) AS (
        -- Newton-Raphson on ARX's moment equations for (alpha, beta), ARX's Jacobian, start (1, 1)
        SELECT 0, 0, 1.0::DOUBLE, 1.0::DOUBLE, 0 FROM __anon_pu_snbk
        UNION ALL
        SELECT CASE WHEN conv OR tr = 16 OR NOT restart THEN tr ELSE tr + 1 END,
               CASE WHEN conv OR tr = 16 OR NOT restart THEN it + 1 ELSE 0 END,
               CASE WHEN conv THEN a WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].x ELSE na END,
               CASE WHEN conv THEN b WHEN tr = 16 THEN 'NaN'::DOUBLE
                    WHEN restart THEN starts[tr + 1].y ELSE nb END,
               CASE WHEN conv THEN 1 WHEN tr = 16 THEN 2 ELSE 0 END
        FROM (
            SELECT *, abs(f1) <= 1e-6 AND abs(f2) <= 1e-6 AS conv,
                   isnan(na) OR isnan(nb) OR it >= 1000 AS restart
            FROM (
                SELECT *, a - ((j22 * inv) * f1 + (-j12 * inv) * f2) AS na,
                          b - ((-j21 * inv) * f1 + (j11 * inv) * f2) AS nb
                FROM (SELECT *, 1.0 / (j11 * j22 - j12 * j21) AS inv FROM (
                    SELECT *,
                           big_k * f * ra * (a * d / q + 1) - c1 AS f1,
                           big_k * a * ba * (f * f) * (1 - b) / 2 * pow(q, a + 2) * w - c2 AS f2,
                           big_k * f * ra * ((1 + a * d / q) * anon_population_ln(b / q) + d / q)
                               AS j11,
                           big_k * f * ra * (a * (1 / b - (1 - f) / q) * (1 + a * d / q)
                                             - a * (1 - f) / (q * q)) AS j12,
                           big_k * f * f / 2
                               * (ba * (1 - b) * pow(q, -(a + 2)) * w
                                      * (1 + a * anon_population_ln(b) - a * anon_population_ln(q))
                                  + a * ba * (1 - b) * pow(q, -(a + 2)) * d) AS j21,
                           big_k * f * f / 2
                               * (a * a * pow(b, a - 1) * (1 - b) * pow(q, -(a + 2)) * w
                                  - a * ba * pow(q, -(a + 2)) * w
                                  - a * (a + 2) * (1 - f) * ba * (1 - b) * pow(q, -(a + 3)) * w
                                  + a * (1 - a) * (1 - f) * ba * (1 - b) * pow(q, -(a + 2)))
                               AS j22
                    FROM (
                        SELECT r.tr, r.it, r.a, r.b, k.big_k, k.f, k.c1, k.c2, k.starts,
                               (1 - k.f) * (1 - r.b) AS d, 1 - (1 - k.f) * (1 - r.b) AS q,
                               pow(r.b / (1 - (1 - k.f) * (1 - r.b)), r.a) AS ra,
                               pow(r.b, r.a) AS ba,
                               2 - (1 - r.a) * ((1 - k.f) * (1 - r.b)) AS w
                        FROM __anon_pu_snb AS r CROSS JOIN __anon_pu_snbk AS k
                        WHERE r.st = 0
                    )
                ))
            )
        )
    ), __anon_pu_snbv AS (            -- SNB: converged, uniques = K beta^alpha
        SELECT r.st = 1 AS converged, k.big_k * pow(r.b, r.a) AS value
        FROM __anon_pu_snb AS r CROSS JOIN __anon_pu_snbk AS k
        WHERE r.st <> 0
    ), __anon_pu_est AS (             -- each estimate as ARX reports it: NaN or 0 -> not available
        SELECT q.*,
               (SELECT CASE WHEN isnan(value) OR value = 0 THEN NULL ELSE value END
                FROM __anon_pu_pitman) AS pitman,
               (SELECT converged FROM __anon_pu_pitman) AS pitman_converged,
               (SELECT CASE WHEN isnan(value) OR value = 0 THEN NULL ELSE value END
                FROM __anon_pu_snbv) AS snb,
               (SELECT converged FROM __anon_pu_snbv) AS snb_converged,
               (SELECT CASE WHEN isnan(value) OR value = 0 THEN NULL ELSE value END
                FROM __anon_pu_zayatz) AS zayatz
        FROM __anon_pu_need AS q
    ), __anon_pu_pick AS (            -- the estimator used, its value, converged
        SELECT e.*,
               CASE WHEN e.n = 0 THEN e.est
                    WHEN e.c1 = 0 THEN e.est
                    WHEN e.est <> 'dankar' THEN e.est
                    WHEN e.f <= 0.1 THEN CASE WHEN e.pitman IS NOT NULL THEN 'pitman' ELSE 'zayatz' END
                    WHEN e.snb IS NULL THEN 'zayatz'
                    WHEN e.zayatz < e.snb THEN 'zayatz'
                    ELSE 'snb' END AS used
        FROM __anon_pu_est AS e
    )
    SELECT CASE WHEN n = 0 THEN NULL
                WHEN c1 = 0 THEN 0.0
                WHEN used = 'pitman' THEN coalesce(pitman, 0.0)
                WHEN used = 'snb' THEN coalesce(snb, 0.0)
                ELSE coalesce(zayatz, 0.0) END AS uniques,
           CASE WHEN n = 0 THEN NULL
                WHEN c1 = 0 THEN 0.0
                WHEN used = 'pitman' THEN coalesce(pitman, 0.0)
                WHEN used = 'snb' THEN coalesce(snb, 0.0)
                ELSE coalesce(zayatz, 0.0) END / big_n AS fraction,
           used AS estimator,
           CASE WHEN c1 = 0 THEN NULL
                WHEN used = 'pitman' THEN pitman_converged AND pitman IS NOT NULL
                WHEN used = 'snb' THEN snb_converged AND snb IS NOT NULL
                END AS converged,
           c1::BIGINT AS sample_uniques,
           u::BIGINT AS classes,
           n::BIGINT AS rows,
           f AS sampling_fraction
    FROM __anon_pu_pick;
