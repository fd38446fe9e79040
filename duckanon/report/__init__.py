"""One self-contained HTML page that shows what an anonymization did to a table.

    from duckanon.report import write_report
    write_report(con, "hospital_anon", "hospital", ["zipcode", "age", "education"], "disease",
                 "report.html", summary=summary, params={"k": 3})

Every number is computed inside DuckDB by the SQL macros; Python only receives small aggregates.
The modules, from the database up to the page:

- facts: the queries, and the aggregates they return;
- risk: the "at risk" threshold and the prosecutor risk measured against it;
- population: the population-based risks before and after (k-map, delta-presence, population
  uniqueness, average risk, the estimated k-map's derived k), each figure with where it comes
  from, or why it is not available;
- claims: the sentences about the release (rows removed, options, optimality, an infinite KL);
- verdict: the page's first line (which requested models hold, rows removed, stars, loss) and
  why the stars are what they are when whole columns are masked;
- markup: escaping, tables and how numbers are written (counts with thousands separators);
- figures: the plots (matplotlib, an optional extra, imported only when one is drawn);
- sections: each section's heading, figure, table and note;
- page: write_report, which puts the sections on one page.

The engine and the tests import the names below from duckanon.report itself.
"""

from duckanon.report.claims import LATTICE_LIKE, METRIC_WORDS, kl_infinite_text, removed_sentence
from duckanon.report.facts import TOP_CLASSES, TOP_SA_VALUES
from duckanon.report.page import write_report
from duckanon.report.risk import RISK_THRESHOLD, at_risk_sql_threshold, resolve_risk_threshold, smallest_safe_size

__all__ = [
    "LATTICE_LIKE", "METRIC_WORDS", "RISK_THRESHOLD", "TOP_CLASSES", "TOP_SA_VALUES", "at_risk_sql_threshold",
    "kl_infinite_text", "removed_sentence", "resolve_risk_threshold", "smallest_safe_size", "write_report",
]
