"""How values read on the page: escaped HTML, tables, counts with thousands separators, other
numbers to 3 significant digits.

Every number the report prints goes through format_value, so the tables, the figures' labels and
the sentences agree on how a count (30,162), a risk, a share or an infinite divergence is written.
"""

from __future__ import annotations

import html
import math


def escape(value) -> str:
    return html.escape(str(value), quote=True)


def html_table(header, rows, css_class: str | None = None) -> str:
    """A table in a scrolling box, so a wide table never widens the page (`css_class` on the table)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    attribute = f" class=\"{escape(css_class)}\"" if css_class else ""
    return f"<div class=\"wide\"><table{attribute}><tr>{head}</tr>{body}</table></div>"


def _cell(value) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    text = escape(format_value(value))
    return f"<td class=\"num\">{text}</td>" if numeric else f"<td>{text}</td>"


def format_value(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if abs(value) >= 1000:  # 3 significant digits would need an exponent: whole numbers instead
            return f"{value:,.0f}"
        if value and abs(value) < 1e-3:  # .3g would write 6.6e-05: the same 3 digits, positionally
            return f"{value:.{2 - math.floor(math.log10(abs(value)))}f}".rstrip("0")
        return f"{value:.3g}"  # risks, shares, distances: 3 significant digits
    if isinstance(value, int):  # counts: 30162 -> '30,162'
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def rows_text(count: int, noun: str = "row", plural: str | None = None) -> str:
    """'1 row', '30,162 rows': a count with its noun, singular for one."""
    return f"{format_value(count)} {noun if count == 1 else plural or noun + 's'}"


def percent(fraction: float, exact: bool = False) -> str:
    """A share of rows as a percentage: 473/30162 -> '1.6%' (2 significant digits, or whole
    percents from 10% on); `exact` for a limit as the user gave it: 0.02 -> '2%', 0.125 -> '12.5%'."""
    value = 100 * fraction
    if exact:
        return f"{round(value, 9):g}%"
    return f"{value:.0f}%" if value >= 10 else f"{value:.2g}%"


def json_ready(value):
    """A copy of `value` with no Infinity/NaN (json.dumps would write them bare)."""
    if isinstance(value, float) and not math.isfinite(value):
        return format_value(value)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value
