-- duckanon: t-closeness under Li et al.'s hierarchical ground distance, in SQL.
--
-- anon_t_hierarchical(tbl, qi, sa, hierarchy_tbl) -> (t_hierarchical DOUBLE): one row, the
-- smallest t for which tbl is t-close: the max over equivalence classes (rows grouped by the QI
-- columns, as in checks.sql, whose macros this file uses) of the EMD between the class's SA
-- distribution and the whole table's, with ground distance between two values = level of their
-- lowest common ancestor / height of the tree. Empty table: NULL.
--
-- The hierarchy is the table (or view) named by hierarchy_tbl, with columns
--     value VARCHAR, level INTEGER, node VARCHAR
-- one row per leaf value and level 1, 2, ..., top: `node` is the value's ancestor at that level
-- (an ARX hierarchy file's row "v;a1;a2;*" gives (v,1,a1), (v,2,a2), (v,3,*)). A node is its
-- (level, node) pair, so a label repeated at the next level is a node with one child. Rows
-- (v, 0, v) are optional: any row makes v a leaf, which allows a hierarchy of leaves only. The
-- height H is `top` when level `top` has one node (usually '*'), else top + 1 (an implicit root
-- above them). The levels must form a tree: a clear error names a leaf with levels missing or
-- two nodes on one level, or a node with two parents. Leaves absent from tbl change nothing.
-- Python writes this table from an ARX file with duckanon.solver.emd.write_hierarchy_table;
-- in plain SQL:
--     CREATE TABLE occupation_h AS
--     SELECT value, CAST(replace(name, 'column', '') AS INTEGER) AS level, node
--     FROM (UNPIVOT (SELECT column0 AS value, * FROM read_csv('adult_hierarchy_occupation.csv',
--                    delim = ';', header = false, all_varchar = true, quote = '"'))
--           ON COLUMNS(* EXCLUDE (value)) INTO NAME name VALUE node);
--
-- SA values are matched as text: sa::VARCHAR = value (exactly, case-sensitively); a NULL SA
-- value matches a row whose value is NULL. A value of tbl that is not a leaf is an error.
--
-- Computation (Li et al. 2007, Sec. 4.2, rewritten): with extra(N) = sum over the leaves under
-- node N of (P - Q), EMD = 1/(2H) * sum over levels 0..H-1 of sum over the nodes N at that level
-- of |extra(N)| (Li et al.'s sum over internal nodes of height/H * min(positive, negative extra of
-- the children), telescoped; see emd_hierarchical in duckanon/solver/emd.py). With N rows, a class
-- of `size` rows, and n_c(N), n_T(N) the rows under N in the class and in the table, each level's
-- sum is sum_N |rows * n_c(N) - size * n_T(N)| / (size * rows), taken over the nodes present in
-- the class plus (rows - sum of their n_T) * size for the absent ones, on integers, and
-- divided once (so t = 0 comes out exact).
--
-- As in checks.sql, every CTE name inside a macro starts with `__anon_`: a CTE shadows a catalog
-- table of the same name for query_table(), so a short name (h, shape, ...) would make the macros
-- read their own CTE instead of the user's table.

-- anon_hierarchy_levels(hierarchy_tbl) -> (value VARCHAR, level INTEGER, node VARCHAR): the
-- hierarchy's distinct rows of levels >= 1 plus (value, 0, value) for every leaf.
CREATE OR REPLACE TEMP MACRO anon_hierarchy_levels(hierarchy_tbl) AS TABLE
    WITH __anon_raw AS (
        SELECT DISTINCT value::VARCHAR AS value, level::INTEGER AS level, node::VARCHAR AS node
        FROM query_table(hierarchy_tbl)
    )
    SELECT value, level, node FROM __anon_raw WHERE level >= 1
    UNION
    SELECT DISTINCT value, 0, value FROM __anon_raw;

-- anon_hierarchy_check(hierarchy_tbl) -> (ok BOOLEAN, height INTEGER): one row, or an Invalid
-- Input Error naming the first problem found. height = H as defined above (0: one leaf only).
CREATE OR REPLACE TEMP MACRO anon_hierarchy_check(hierarchy_tbl) AS TABLE
    WITH __anon_h AS (
        SELECT * FROM anon_hierarchy_levels(hierarchy_tbl)
    ), __anon_top AS (
        SELECT max(level) AS top,
               (SELECT count(*) FROM (SELECT DISTINCT node FROM __anon_h
                                      WHERE level = (SELECT max(level) FROM __anon_h)))
                   AS roots
        FROM __anon_h
    ), __anon_two_nodes AS (   -- a leaf with two nodes on one level
        SELECT value, level FROM __anon_h GROUP BY value, level HAVING count(*) > 1 ORDER BY ALL LIMIT 1
    ), __anon_incomplete AS (  -- a leaf without a node on every level 1..top
        SELECT value FROM __anon_h, __anon_top
        GROUP BY value, __anon_top.top HAVING count(DISTINCT level) < __anon_top.top + 1
        ORDER BY ALL LIMIT 1
    ), __anon_two_parents AS ( -- a node with two parents on the next level
        SELECT c.level, c.node
        FROM __anon_h AS c JOIN __anon_h AS p ON p.value IS NOT DISTINCT FROM c.value AND p.level = c.level + 1
        WHERE c.level >= 1
        GROUP BY c.level, c.node
        HAVING count(DISTINCT p.node) > 1
        ORDER BY ALL LIMIT 1
    ), __anon_problem AS (
        SELECT coalesce(
            (SELECT 'value ' || coalesce(value, 'NULL') || ' has two nodes at level ' || level
             FROM __anon_two_nodes),
            (SELECT 'value ' || coalesce(value, 'NULL') || ' has no node on some of the levels 1..'
                    || (SELECT top FROM __anon_top) FROM __anon_incomplete),
            (SELECT 'node ' || node || ' at level ' || level || ' has two parents' FROM __anon_two_parents)
        ) AS message
    )
    SELECT CASE WHEN message IS NULL THEN true
                ELSE error('duckanon: hierarchy ' || hierarchy_tbl || ' is not a tree: ' || message)
           END AS ok,
           (__anon_top.top + (__anon_top.roots > 1)::INTEGER)::INTEGER AS height
    FROM __anon_problem, __anon_top;

CREATE OR REPLACE TEMP MACRO anon_t_hierarchical(tbl, qi, sa, hierarchy_tbl) AS TABLE
    WITH __anon_shape AS (
        SELECT height FROM anon_hierarchy_check(hierarchy_tbl) WHERE ok
    ), __anon_h AS (
        SELECT * FROM anon_hierarchy_levels(hierarchy_tbl)
    ), __anon_cs AS (     -- rows per (class, SA value), integer class id, class size
        SELECT dense_rank() OVER (ORDER BY cls) AS cid,
               sa_value::VARCHAR AS value,
               n::HUGEINT AS n,
               sum(n) OVER (PARTITION BY cls)::HUGEINT AS size
        FROM anon_sa_counts(tbl, qi, sa)
    ), __anon_missing AS (  -- SA values of tbl that are not leaves, for the error message
        SELECT list(coalesce(value, 'NULL') ORDER BY value) AS missing_values
        FROM (SELECT DISTINCT value FROM __anon_cs) AS v
        WHERE NOT EXISTS (SELECT 1 FROM __anon_h WHERE __anon_h.value IS NOT DISTINCT FROM v.value)
    ), __anon_g AS (
        SELECT sum(n) AS rows FROM __anon_cs
    ), __anon_cells AS (    -- rows per (class, level, node)
        SELECT cs.cid, any_value(cs.size) AS size, h.level, h.node, sum(cs.n) AS n
        FROM __anon_cs AS cs JOIN __anon_h AS h ON h.value IS NOT DISTINCT FROM cs.value
        WHERE (SELECT CASE WHEN missing_values IS NULL OR len(missing_values) = 0 THEN true
                           ELSE error('duckanon: hierarchy ' || hierarchy_tbl
                                      || ' has no leaf for sensitive value(s) '
                                      || array_to_string(missing_values[1:5], ', ')
                                      || ' (values are matched as text, exactly)')
                      END FROM __anon_missing)
        GROUP BY cs.cid, h.level, h.node
    ), __anon_tot AS (      -- rows per (level, node) in the table
        SELECT level, node, sum(n) AS nt FROM __anon_cells GROUP BY level, node
    ), __anon_per_level AS (  -- per (class, level): sum over the level's nodes of |rows n_c - size n_T|
        SELECT c.cid, any_value(c.size) AS size,
               sum(abs(c.n * g.rows - t.nt * c.size))
                   + (any_value(g.rows) - sum(t.nt)) * any_value(c.size) AS sd
        FROM __anon_cells AS c
        JOIN __anon_tot AS t ON t.level = c.level AND t.node IS NOT DISTINCT FROM c.node
        CROSS JOIN __anon_g AS g
        GROUP BY c.cid, c.level
    ), __anon_per_class AS (
        SELECT cid, any_value(size) AS size, sum(sd) AS sd FROM __anon_per_level GROUP BY cid
    )
    SELECT max(CASE WHEN shape.height = 0 THEN 0.0
                    ELSE sd / (2 * size * g.rows * shape.height) END)::DOUBLE AS t_hierarchical
    FROM __anon_per_class, __anon_g AS g, __anon_shape AS shape;
