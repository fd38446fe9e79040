"""Helpers the test modules share, one module per job; fixtures and pytest hooks stay in
tests/conftest.py.

Imported as `support.<module>`: pytest puts tests/ (the directory of tests/conftest.py, which has
no __init__.py) on sys.path before it imports any test module, with `-n` in every xdist worker too,
and when it runs a single file. No test module imports another: what two of them share lives here.

- tiers: which tests run in which tier (default, thorough, smoke) and how many examples.
- data: the shared data sets and the tables built from them.
- instances: small instances with known answers (papers' tight examples, bugs' reproductions).
- database: connections, quoting, result rows, database files.
- refusals: a refused statement leaves every database as it was.
- checks: the independent checker of k, l and t on published rows (imports nothing of duckanon).
- risk_checks: the risk-based and population models, from the papers' definitions.
- solver_checks: checks that use duckanon's own predicates or estimator on purpose.
- report_pages: reading a report's HTML, and the browser script that checks its layout.
- shell: the duckdb command-line clients.
- spark: whether Spark can run here, a Spark table's rows per stored file.
"""
