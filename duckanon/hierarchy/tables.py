"""Hierarchies stored in tables: read one (`from_table`), write one (`to_table`)."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from duckanon.backends import BackendError, backend_for
from duckanon.errors import AnonymizeError
from duckanon.hierarchy.binding import BoundHierarchy, Hierarchy
from duckanon.hierarchy.rows import NULL_SPELLINGS, TableHierarchy
from duckanon.solver.emd import SAHierarchy


def from_table(con, table_name: str) -> Hierarchy:
    """A hierarchy stored in DuckDB: first column the value, then one column per level (any names,
    any types, read as text), rows in table order (the order of the codes). A NULL value is the
    NULL row; a NULL label is an error. `table_name` is a table or view name, possibly qualified
    and quoted as in SQL (`"my hier"`, `s.t`); it is looked up with query_table(), never run as SQL."""
    query_table = exp.Table(this=exp.Anonymous(this="query_table", expressions=[exp.Placeholder()]))
    try:
        result = backend_for(con).execute(exp.select(exp.Star()).from_(query_table), [table_name])
        first_column = result.description[0][0] if result.description else None
        rows = result.fetchall()
    except BackendError as e:
        raise AnonymizeError(f"cannot read hierarchy table {table_name}: {e}") from None
    rows = [[None if v is None else str(v) for v in row] for row in rows]
    origin = ("table", table_name, first_column) if first_column is not None else None
    return TableHierarchy(rows, f"table {table_name}", origin=origin)


def to_table(con, hierarchy: Hierarchy | BoundHierarchy, table_name: str) -> None:
    """Write a hierarchy as a new DuckDB table `value, level1, ..., levelH` (all VARCHAR), in row order.

    Takes rows from a file/rows/table hierarchy, or from a BoundHierarchy (any builder once bound
    to a column's values). The NULL value is written as NULL.
    """
    if isinstance(hierarchy, BoundHierarchy):
        rows = hierarchy.rows()
    elif isinstance(hierarchy, TableHierarchy):
        rows = [[None if r[0] is None or r[0] in NULL_SPELLINGS else r[0], *r[1:]] for r in hierarchy.rows()]
    else:
        raise AnonymizeError(f"to_table: {hierarchy.name} has no rows of its own; bind it to a column's values first")
    height = len(rows[0]) - 1 if rows else hierarchy.height
    names = ["value"] + [f"level{h}" for h in range(1, height + 1)]
    columns = [[None if row[h] is None else str(row[h]) for row in rows] for h in range(height + 1)]
    backend = backend_for(con)
    # one unnest per column: DuckDB zips unnests of equal length, so row h of every column meets
    values = exp.select(*[exp.alias_(exp.Unnest(expressions=[exp.cast(exp.Placeholder(), "VARCHAR[]", dialect="duckdb")]),
                                     name) for name in names])
    backend.execute(exp.Create(this=exp.to_table(table_name, dialect=backend.dialect), kind="TABLE", expression=values),
                    columns)


def write_hierarchy_table(con, hierarchy: SAHierarchy, table_name: str, null_label: str | None = None) -> None:
    """Store a sensitive-attribute tree as table `table_name` (value VARCHAR, level INTEGER, node
    VARCHAR), the shape the SQL check `anon_t_hierarchical` reads: one row per leaf and level
    0..levels-1 (level 0: node = value). The leaf labelled `null_label`, if any, is written with
    value NULL so that it matches NULL sensitive values. `table_name` is one identifier; an
    existing table of that name is replaced."""
    values, levels, nodes = [], [], []
    for leaf, path in hierarchy.paths.items():
        value = None if leaf == null_label else leaf
        for level, node in enumerate((leaf, *path)):
            values.append(value)
            levels.append(level)
            nodes.append(node)
    rows = pa.table({"value": pa.array(values, pa.string()), "level": pa.array(levels, pa.int32()),
                     "node": pa.array(nodes, pa.string())})
    backend = backend_for(con)
    view = "__duckanon_hierarchy_rows"  # an Arrow scan: binding 10^5 rows as parameters is very slow
    backend.register_arrow(view, rows)
    try:
        backend.execute(exp.Create(this=exp.to_table(table_name, quoted=True), kind="TABLE", replace=True,
                                   expression=exp.select("value", "level", "node").from_(view)))
    finally:
        backend.unregister(view)
