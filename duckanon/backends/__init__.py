"""Where a statement runs: a `Backend` (backends/base.py) per engine, from a small registry.

`engine = 'duckdb'` (the default) is the DuckDB connection the statement came on; other engines
are modules loaded by name, with the third-party module they need refused up front (naming its
install command) when it is missing.
"""

from __future__ import annotations

import importlib

from duckanon import extras
from duckanon.backends.base import Backend, BackendError, UnknownTable, Work, work
from duckanon.backends.duckdb import DuckDBBackend

__all__ = ["Backend", "BackendError", "DuckDBBackend", "UnknownTable", "Work", "backend_for", "connect", "work"]

# engine option -> (module, the factory that turns the statement's options into a backend,
# the third-party module it needs)
BACKENDS = {
    "spark": ("duckanon.backends.spark", "connect", "pyspark"),
}


def connect(engine: str, statement) -> Backend:
    """A backend of the named engine for `statement` (e.g. Spark on its spark_master)."""
    module_name, factory, needs = BACKENDS[engine]
    extras.require(needs)
    return getattr(importlib.import_module(module_name), factory)(statement)


def backend_for(con, statement=None) -> Backend:
    """The backend a statement runs on: `con` itself when it is one (the Spark Python API passes
    its own), the engine the statement names, else DuckDB on `con`."""
    if isinstance(con, Backend):
        return con
    engine = getattr(statement, "engine", "duckdb")
    if engine != "duckdb":
        return connect(engine, statement)
    return DuckDBBackend(con)
