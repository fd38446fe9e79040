"""duckanon: k-anonymity, l-diversity and t-closeness for DuckDB tables, in one SQL statement.

    import duckanon
    con = duckanon.connect()
    con.execute("ANONYMIZE patients WITH (k = 3, qi = (zipcode, age), sensitive = disease)")
"""

from duckanon.connection import Connection, connect, execute, register, sql
from duckanon.engine import Summary
from duckanon.errors import AnonymizeError

__all__ = ["AnonymizeError", "Connection", "Summary", "connect", "execute", "register", "sql"]
__version__ = "0.1.0"
