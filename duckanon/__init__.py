"""duckanon: k-anonymity, l-diversity and t-closeness for DuckDB tables, in one SQL statement.

    import duckanon
    con = duckanon.connect()
    con.execute("ANONYMIZE patients WITH (k = 3, qi = (zipcode, age), sensitive = disease)")
"""

from duckanon._version import __version__
from duckanon.connection import Connection, connect, execute, register, sql
from duckanon.engine import Summary
from duckanon.errors import AnonymizeError

__all__ = ["AnonymizeError", "Connection", "Summary", "__version__", "connect", "execute", "register", "sql"]
