"""Reading a report's HTML page: the rows of its tables, one of its sections, and the script that
measures its layout when a headless browser opens it."""

from __future__ import annotations

import html
import re


def table_rows(page: str) -> dict[str, list[str]]:
    """Every HTML table row with data cells of a report, keyed by its first cell (later tables win)."""
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S):
        cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def section(page: str, heading: str) -> str:
    """A report's section, from its <h2> heading to the next."""
    start = page.index(f"<h2>{heading}")
    end = page.find("<h2>", start + 1)
    return page[start:end if end >= 0 else None]


# Put before </body>: once the page has loaded, it appends <div id="layout">LAYOUT=fits</div>, or
# LAYOUT= followed by what does not fit (the page wider than the window, a .wide table scrolling,
# an image, pre, paragraph or heading past the page's right edge), which `chromium --headless
# --dump-dom` prints.
LAYOUT_SCRIPT = """<script>window.addEventListener('load', () => {
  const page = document.documentElement, bad = [];
  if (page.scrollWidth > window.innerWidth) bad.push('page ' + page.scrollWidth + ' > ' + window.innerWidth);
  document.querySelectorAll('.wide').forEach((w, i) => {
    if (w.scrollWidth > w.clientWidth) bad.push('table ' + i + ' ' + w.scrollWidth + ' > ' + w.clientWidth); });
  document.querySelectorAll('img, pre, p, h1, h2').forEach((e, i) => {
    if (e.getBoundingClientRect().right > page.clientWidth + 0.5) bad.push(e.tagName + ' ' + i); });
  const out = document.createElement('div'); out.id = 'layout';
  out.textContent = 'LAYOUT=' + (bad.join('; ') || 'fits');
  document.body.appendChild(out); });</script>"""
