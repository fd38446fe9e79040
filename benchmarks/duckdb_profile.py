"""DuckDB's JSON query profile, written and read the same way on DuckDB 1.5 and 2 (the one reader
of bench_anonymize.py --profile and bench_scale.py --operators).

The two layouts (SET enable_profiling = 'json'):

  DuckDB 1.5  the query is the root; its "children" are the plan, each node with
              operator_name / operator_type, operator_timing, operator_cardinality (rows out),
              result_set_size (bytes out), extra_info
  DuckDB 2    "operator": [the plan under a RESULT_COLLECTOR], each node with name / type, timing,
              intermediate_rows, intermediate_size_bytes, extra_info; the file's "io" has the
              query's reads and writes (bytes, seconds)

Both come out as one flat list in plan order (a parent before its children), each operator a dict
{depth, operator, seconds (summed over threads), rows, bytes, info}; the RESULT_COLLECTOR that
DuckDB 2 puts above every plan is left out, so depths agree across versions.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

# the extra_info entries worth keeping (join type and conditions, grouping and order keys, ...)
INFO_KEYS = ("Join Type", "Conditions", "Estimated Cardinality", "Groups", "Aggregates", "Order By",
             "Projections", "Type", "Table")
IO = "(io)"  # the pseudo-operator holding DuckDB 2's I/O of the query: seconds read + written, bytes written


@contextmanager
def profiled(con, path: Path):
    """Profile the statements `con` runs inside the block into the JSON file `path`."""
    con.execute("SET enable_profiling = 'json'")
    con.execute(f"SET profiling_output = '{Path(path).as_posix()}'")
    try:
        yield
    finally:
        con.execute("PRAGMA disable_profiling")


def operators(path: Path | str, min_seconds: float = 0.0) -> list[dict] | None:
    """The operators of the profile at `path` that took at least `min_seconds`, plus DuckDB 2's
    "(io)" entry; None when there is no file (a statement that runs no query, such as CREATE
    VIEW, writes none)."""
    path = Path(path)
    if not path.exists():
        return None
    tree = json.loads(path.read_text())
    flat: list[dict] = []

    def walk(node: dict, depth: int) -> None:
        name = node.get("operator_name") or node.get("name") or node.get("operator_type") or node.get("type")
        if name == "RESULT_COLLECTOR":
            for child in node.get("children", []):
                walk(child, depth)
            return
        if name:
            extra = node.get("extra_info") or {}
            seconds = node.get("operator_timing", node.get("timing", 0.0)) or 0.0
            if seconds >= min_seconds:
                flat.append({
                    "depth": depth,
                    "operator": name.strip(),
                    "seconds": seconds,
                    "rows": node.get("operator_cardinality", node.get("intermediate_rows", 0)) or 0,
                    "bytes": node.get("result_set_size", node.get("intermediate_size_bytes", 0)) or 0,
                    "info": {k: v for k, v in extra.items() if k in INFO_KEYS} if isinstance(extra, dict) else {},
                })
        for child in node.get("children", []):
            walk(child, depth + 1)

    roots = tree["operator"] if isinstance(tree.get("operator"), list) else tree.get("children", [])
    for node in roots:
        walk(node, 0)
    io = tree.get("io")
    if isinstance(io, dict) and io:
        flat.append({"depth": 0, "operator": IO,
                     "seconds": (io.get("total_write_time") or 0.0) + (io.get("total_read_time") or 0.0),
                     "rows": 0, "bytes": io.get("total_bytes_written", 0), "info": io})
    return flat
