"""Where a statement runs. DuckDB is the connection the statement came on; other engines are
modules loaded by name, so the engine never imports them (and they may import what sits below
the engine without an import cycle)."""

from __future__ import annotations

import importlib

from duckanon import extras

# engine option -> (module, the factory that turns the statement's options into a connection,
# the third-party module it needs: refused up front, with its install command, when missing)
BACKENDS = {
    "spark": ("duckanon.backends.spark", "connect", "pyspark"),
}


def connect(engine: str, statement):
    """A connection of the named backend for `statement` (e.g. a SparkConnection on its master)."""
    module_name, factory, needs = BACKENDS[engine]
    extras.require(needs)
    return getattr(importlib.import_module(module_name), factory)(statement)
