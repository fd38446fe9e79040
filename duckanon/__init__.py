"""duckanon: k-anonymity, l-diversity and t-closeness for DuckDB tables, in one SQL statement.

    import duckanon
    con = duckanon.connect()
    con.execute("ANONYMIZE patients WITH (k = 3, qi = (zipcode, age), sensitive = disease)")

The names below are loaded on first use, so importing a part of the package (the front end,
`duckanon.sql`) does not load the solvers (numpy, scipy).
"""

from __future__ import annotations

import importlib

from duckanon._version import __version__
from duckanon.errors import AnonymizeError

# public name -> the module that defines it
_LAZY = {
    "Connection": "duckanon.connection", "connect": "duckanon.connection", "execute": "duckanon.connection",
    "register": "duckanon.connection", "Summary": "duckanon.pipeline.result",
}
# (`duckanon.sql` is the front-end package; the relation helper is `duckanon.connection.sql`.)

__all__ = ["AnonymizeError", "Connection", "Summary", "__version__", "connect", "execute", "register"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'duckanon' has no attribute {name!r}")
