"""What the top of the page says: one line of verdict, and why the stars are what they are.

Both are read by someone who has never seen duckanon, so every clause is a fact the report measured
on the tables (the privacy checks, the row counts) or one the release recorded (its loss, its
levels), in the words of the README's definitions: a star is a published cell that hides its value
entirely ('*', or a hierarchy label that covers every value of its column), and suppressed_rows
counts the rows with at least one star.
"""

from __future__ import annotations

import html

from duckanon.report.claims import ran
from duckanon.report.markup import escape, format_value, percent, rows_text

# the privacy checks' measures (facts.privacy_measures) as the verdict names the model they check
_CHECKED = {"k": "k", "distinct_l": "l", "frequency_l": "l", "entropy_l": "l", "t": "t", "t_ordered": "t"}
_VARIANT = {"distinct_l": "distinct", "frequency_l": "frequency", "entropy_l": "entropy",
            "t": "equal distance", "t_ordered": "ordered distance"}


def verdict(checks: list[tuple], population_rows: list, release: dict, details: dict, summary: dict,
            params: dict, published_rows: int) -> str:
    """The page's first line: which requested models hold on the published table (as the privacy
    checks and the population section measured them), how many rows were removed, how many cells
    are stars, and the release's loss when it is known."""
    if not published_rows:
        return "<p class=\"verdict\"><b>Verdict:</b> nothing is published: the published table is empty.</p>"
    held, failed = [], []
    for measure, requested, _, published, status in checks:
        if status:
            (held if status == "met" else failed).append((_model_words(measure, requested), published))
    for row in population_rows:
        if row.status in ("met", "NOT met"):
            words = f"{row.measure.split(' (')[0]} {row.requested}"
            (held if row.status == "met" else failed).append((words, row.published.value))
    parts = []
    if failed:
        parts.append("<span class=\"bad\">" + escape("; ".join(
            f"{words} does NOT hold (published: {format_value(value)})" for words, value in failed)) + "</span>")
    if held:
        verb = "holds" if len(held) == 1 else "hold"
        parts.append(escape(f"{_joined([words for words, _ in held])} {verb} on all "
                            f"{rows_text(published_rows, 'published row')}"))
    unchecked = _unchecked(checks, params)
    if unchecked:
        parts.append(escape(f"{_joined(unchecked)} not measured by this report"))
    if params.get("epsilon") is not None:
        # a property of how the release was drawn, which no count on the table can confirm
        # as the statement writes them (a delta of 1e-6 reads best as such, not 0.000001)
        parts.append(escape(f"(epsilon = {params['epsilon']:g}, delta = {params['delta']:g})"
                            "-differential privacy: a property of how the release was drawn (its section below), "
                            "not measured on the table"))
    elif not (held or failed or unchecked):
        parts.append("no privacy model was given for this table, so none is checked")
    parts.append(escape(_removed(release)))
    stars = summary.get("stars")
    if stars is not None:
        parts.append(escape(f"{format_value(stars)} {'cell' if stars == 1 else 'cells'} fully masked (stars)"))
    if details.get("loss") is not None:
        parts.append(escape(f"loss {format_value(float(details['loss']))} (ARX's Loss)"))
    return "<p class=\"verdict\"><b>Verdict:</b> " + "; ".join(parts) + ".</p>"


def _model_words(measure: str, requested) -> str:
    """'k = 3', 'l = 2 (frequency)', 't = 0.2 (equal distance) on occupation'."""
    name, _, column = measure.partition(" (")
    words = f"{_CHECKED.get(name, name)} = {format_value(requested)}"
    if name in _VARIANT:
        words += f" ({_VARIANT[name]})"
    return words + (f" on {column.rstrip(')')}" if column else "")


def _unchecked(checks: list[tuple], params: dict) -> list[str]:
    """The requested k, l or t that no privacy check measured (recursive (c, l)-diversity, a
    hierarchical t), named so that the verdict does not read as if they held."""
    checked = {_CHECKED.get(measure.partition(" (")[0]) for measure, requested, *_ in checks if requested is not None}
    missing = []
    if params.get("l") is not None and "l" not in checked:
        missing.append(f"l = {format_value(params['l'])} ({params.get('l_variant') or 'frequency'})")
    if params.get("t") is not None and "t" not in checked:
        missing.append(f"t = {format_value(params['t'])} ({params.get('t_distance') or 'equal'} distance)")
    return missing


def _joined(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _removed(release: dict) -> str:
    removed, total, kept = release["removed_rows"], release["rows"], release["published_rows"]
    if release.get("private"):
        return "the original's row count is left out (differential privacy)"
    if kept > total:
        return f"the published table has more rows ({format_value(kept)}) than the original ({format_value(total)})"
    if not removed:
        return f"no rows removed (all {rows_text(total)} published)"
    return f"{format_value(removed)} of the original's {rows_text(total)} ({percent(removed / total)}) removed"


def whole_domain_columns(qi: list[str], columns: dict[str, dict], one_value: dict[str, str],
                         whole_domain_cells: int, published_rows: int) -> dict[str, int]:
    """The columns published as one generalized label in every row (not '*', no original value;
    `one_value`: facts.one_value_columns), when together they hold exactly the release's
    whole_domain_cells (cells of a label covering every value, which ANONYMIZE counts as stars):
    {column: cells}. Empty when that does not add up: the report then cannot say which columns
    hold them."""
    if not whole_domain_cells or not published_rows:
        return {}
    found = {c: columns[c]["generalized"] for c in qi
             if c in one_value and columns[c]["generalized"] == published_rows}
    return found if sum(found.values()) == whole_domain_cells else {}


def stars_explained(qi: list[str], columns: dict[str, dict], whole: dict[str, int], release: dict,
                    summary: dict, published_rows: int, hierarchies=None) -> str | None:
    """Why the summary's stars and suppressed_rows are what they are, when whole columns are
    masked (every cell '*', or one label covering every value): those cells count as stars, so
    every published row has one. None when no column is masked whole. `hierarchies`: the
    statement's (which columns had one), to name a level as a level of the column's hierarchy."""
    stars, suppressed = summary.get("stars"), summary.get("suppressed_rows")
    if stars is None or not published_rows:
        return None
    starred = [c for c in qi if columns[c]["stars"] == published_rows]
    if not starred and not whole:
        return None
    levels = release.get("levels") if release.get("lattice_like") else None
    levels = dict(zip(qi, levels)) if levels is not None and len(levels) == len(qi) else {}
    lattice = ran(release.get("method")) == "lattice"
    text = (f"Why {format_value(stars)} stars: a star is a published cell that hides its value entirely, a '*' or a "
            "hierarchy label that covers every value of its column.")
    def at_level(column: str) -> str:
        level = levels.get(column)
        if not level:
            return ""
        if isinstance(hierarchies, dict) and column.lower() not in {name.lower() for name in hierarchies}:
            return " (it has no hierarchy: the one level above its values is '*')"
        return f" (level {level} of its hierarchy)" if hierarchies else f" (level {level})"

    if whole:
        labelled = [f"every published {column} cell holds '{columns[column]['example']}'{at_level(column)}"
                    for column in whole]
        text += (f" The summary's {format_value(stars)} stars include {format_value(sum(whole.values()))} cells "
                 f"published as a hierarchy label that covers every value of its column: {_joined(labelled)}.")
    if starred:
        sentence = _joined([f"every published {column} cell is '*'{at_level(column)}" for column in starred])
        text += f" {sentence[0].upper()}{sentence[1:]}."
    masked = starred + list(whole)
    masked_cells = published_rows * len(starred) + sum(whole.values())
    text += (f" So {'this column' if len(masked) == 1 else 'these columns'} alone "
             f"{'gives' if len(masked) == 1 else 'give'} {format_value(masked_cells)} stars")
    if lattice:
        text += (", although no cell was suppressed on its own: the lattice suppresses no single cell, it generalized "
                 + ("the column" if len(masked) == 1 else "each of these columns") + " to that level for every row")
    text += "."
    if suppressed == published_rows:
        text += (f" Every published row holds such a cell, so suppressed_rows, the rows with at least one star, "
                 f"is every published row ({format_value(suppressed)}).")
    others = stars - masked_cells
    if others > 0:
        text += (f" The other {format_value(others)} stars are in the other quasi-identifiers (see Suppression per "
                 "column).")
    return f"<p class=\"stars-why\">{html.escape(text, quote=False)}</p>"  # (text: no attribute to quote)
