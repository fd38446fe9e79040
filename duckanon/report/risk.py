"""Which records count as at risk: the threshold, and the prosecutor risk measured against it.

A record's risk is 1 / the size of its class; it is at risk when that is strictly above the
threshold. The threshold defaults to 1/k, so a k-anonymous release has no record at risk.
"""

from __future__ import annotations

import math

from duckanon.report.facts import query_row

RISK_THRESHOLD = 0.2  # the default "at risk" threshold when k is unknown: classes of fewer than 5 rows


def resolve_risk_threshold(risk_threshold: float | None, k: int | None = None) -> tuple[float, str]:
    """The "at risk" threshold the report uses, and how it was chosen: the given one, else 1/k (a
    k-anonymous release then has no record at risk), else RISK_THRESHOLD (classes below 5 rows)."""
    if risk_threshold is not None:
        return float(risk_threshold), "as given"
    if k:
        return 1 / k, f"the default: 1/k for k = {k}"
    return RISK_THRESHOLD, "the default without k"


def smallest_safe_size(threshold: float) -> int:
    """The smallest class size whose risk 1 / size does not exceed `threshold` (1/k gives k: the
    comparison allows for 1/k not being exact in floating point)."""
    return max(1, math.ceil(1 / threshold - 1e-9))


def at_risk_sql_threshold(threshold: float) -> float:
    """The threshold to hand to anon_risk so that exactly the classes smaller than
    smallest_safe_size(threshold) count as at risk, with no floating-point tie at 1/size."""
    return 1 / (smallest_safe_size(threshold) - 0.5)


def risk_measures(db, table: str, qi: list[str], threshold: float) -> dict:
    """anon_risk of `table`: highest and average risk, records at risk (above `threshold`),
    uniques, classes and rows."""
    return query_row(db, "SELECT * FROM anon_risk($t, $qi, threshold := $threshold)",
                     t=table, qi=qi, threshold=at_risk_sql_threshold(threshold))
