"""Generalization hierarchies for quasi-identifier columns, compatible with ARX's CSV format.

A hierarchy maps every value of a column to coarser values, level by level: level 0 is the value
itself, level H (the top) is normally `*`. Sources, one module each:

- `arx_csv`: ARX CSV files (`from_csv`), `;`-separated, no header; column 0 is the original value,
  column i its generalization at level i. CRLF endings, a UTF-8 BOM and `"`-quoted fields are
  accepted. The same reader gives the rows of the sensitive attribute's tree for t-closeness
  (`read_sa_hierarchy`).
- `rows` (`from_rows`) and `tables` (`from_table` / `to_table`): the same shape as the CSV, one
  column per level; `to_table` writes VARCHAR columns `value, level1, ..., levelH` in row order.
- `builders` (`prefix`, `ordered_groups`, alias `ordered`) and `ranges` (`intervals`, `dates`):
  computed with numpy on the column's distinct values, so any value is covered.
- `spec`: the text users write in SQL, parsed once into a `HierarchySpec` (`read_spec`, see its
  docstring for the syntax) and loaded from it (`HierarchySpec.load`; `parse_spec` does both).

Values match the hierarchy by their string form, `str(value)`; a number that misses also matches an
entry with the same numeric value (`39.0` or `Decimal('39.00')` matches `39`). NULL matches the row
whose original value is an empty field or the text `NULL`, and is reported missing otherwise. The
builders keep NULL a group of its own (label None, published as NULL) below the top `*`.

`Hierarchy.bind(values)` (in `binding`) turns the hierarchy into integer codes for one column's
distinct values (in DuckDB dictionary-code order): a `BoundHierarchy`, which is all the solvers
see. A value no hierarchy covers is counted and listed by a query (`missing`), never quoted.
"""

from duckanon.hierarchy.arx_csv import from_csv, read_sa_hierarchy
from duckanon.hierarchy.binding import BoundHierarchy, Hierarchy
from duckanon.hierarchy.builders import STAR, ordered, ordered_groups, prefix
from duckanon.hierarchy.missing import SOURCE_PLACEHOLDER, missing_query, sa_order_missing
from duckanon.hierarchy.ranges import Dates, dates, intervals
from duckanon.hierarchy.rows import NULL_SPELLINGS, TableHierarchy, from_rows
from duckanon.hierarchy.spec import (PLACEHOLDER_PATTERN, HierarchySpec, parse_spec, read_spec, spec_kind, table_spec,
                                    table_spec_name)
from duckanon.hierarchy.tables import from_table, to_table, write_hierarchy_table

__all__ = [
    "BoundHierarchy", "Dates", "Hierarchy", "HierarchySpec", "dates", "from_csv", "from_rows", "from_table", "intervals",
    "ordered", "ordered_groups", "parse_spec", "prefix", "read_sa_hierarchy", "read_spec", "sa_order_missing",
    "spec_kind", "table_spec", "table_spec_name", "to_table", "write_hierarchy_table",
]
# Also importable from here: STAR, SOURCE_PLACEHOLDER, NULL_SPELLINGS, PLACEHOLDER_PATTERN, TableHierarchy,
# missing_query.
