"""The report's section on differential privacy (SafePub): the parameters of the release, in
plain words what the guarantee means and what it does not, and the source's privacy ledger
(`ledger`, from `details.differential_privacy.ledger`: the report never reads the ledger table)."""

from __future__ import annotations

import math
from fractions import Fraction

from duckanon.report.markup import escape, format_value, html_table


def differential_privacy(parameters: dict) -> str:
    """The section, from `details.differential_privacy`."""
    epsilon, delta = parameters.get("epsilon"), parameters.get("delta")
    k, beta = parameters.get("k"), parameters.get("beta")
    rows = [("epsilon (the whole budget)", format_value(epsilon)),
            ("epsilon spent on the anonymization", format_value(parameters.get("epsilon_anonymization"))),
            ("epsilon spent on the search", format_value(parameters.get("epsilon_search"))),
            ("delta", format_value(delta)),
            ("sampling probability beta", format_value(beta)),
            ("smallest class published, k", format_value(k)),
            ("search steps", format_value(parameters.get("search_steps"))),
            ("rows sampled", format_value(parameters.get("sampled_rows"))),
            ("rows published", format_value(parameters.get("published_rows")))]
    levels = parameters.get("levels")
    searched = isinstance(parameters.get("epsilon_search"), (int, float)) and parameters["epsilon_search"] > 0
    rows.append(("generalization (chosen by the private search)" if searched
                 else "generalization (fixed before the data was read)",
                 ", ".join(f"{name} = {level}" for name, level in levels.items()) if levels else "none"))
    factor = math.exp(epsilon) if isinstance(epsilon, (int, float)) else None
    return ("<h2>Differential privacy</h2>"
            + html_table(["parameter", "value"], [(escape(name), value) for name, value in rows])
            + "<p>What it means: this table was published by an (epsilon, delta)-differentially private "
              "algorithm (SafePub, as ARX implements it). Every row of the source was kept with probability "
              f"{escape(format_value(beta))}, independently, by a draw nobody can repeat; the rows kept were "
              f"generalized as shown above{_chosen_how(searched)}, and every group of fewer than {escape(format_value(k))} rows was "
              "removed. Whether or not any one person's row was in the source, the probability of any "
              f"outcome of this release changes by a factor of at most e^epsilon = "
              f"{escape(format_value(factor))}, except with probability {escape(format_value(delta))}. So "
              "nobody, whatever else they know, can tell with confidence from this table whether a given person "
              "is in the source.</p>"
              "<p>What it does not mean: the published rows are true rows of the source (generalized, not "
              "perturbed), so a published group tells what its members have in common, and statistics over "
              "the table describe the source's people. The guarantee is about one row: a person with several "
              "rows, or a family, is protected by a multiple of epsilon. Every further release from the same "
              "source (a REFRESH, another statement) spends its own epsilon: the budgets add up. The row counts "
              "in ANONYMIZE's result row (source rows, rows removed) are for the publisher, not part of the "
              "release.</p>"
            + (_from_comment() if parameters.get("recorded_in_comment") else "")
            + ledger(parameters.get("ledger")))


def _chosen_how(searched: bool) -> str:
    return (" (levels that a differentially private search over the sampled rows chose, spending "
            "epsilon_search of the budget)" if searched else "")


def _from_comment() -> str:
    return ("<p class=\"note\">This section was written by a later REPORT from the published table's comment, "
            "which records the release's epsilon, delta, k, beta, levels and published rows; it does not record "
            "how many rows were sampled (a function of the source's rows), shown as —, nor the ledger's totals "
            "(below).</p>")


def _figure(value) -> str:
    """A ledger figure as the ledger's totals are shown (the exact float: 3.0000000000000004e-05,
    not 3e-05), so the report's figures are the ones a budget is checked against."""
    return "—" if value is None else repr(value)


def _spent(spent: dict | None, unknown: str | None) -> str:
    if spent is None:
        return "unknown" + (f" ({unknown})" if unknown else "")
    releases = spent.get("releases")
    return (f"epsilon {_figure(spent.get('epsilon'))}, delta {_figure(spent.get('delta'))} over {releases} private "
            f"release{'' if releases == 1 else 's'}")


def _left(budget: dict, after: dict | None) -> str:
    """What the budget leaves after this release: the budget minus the total shown, exactly (Fractions
    of the doubles), then one float."""
    if after is None:
        return "unknown (the total spent is unknown)"
    parts = []
    for part in ("epsilon", "delta"):
        total, spent = budget.get(part), after.get(part)
        if not isinstance(total, (int, float)) or not isinstance(spent, (int, float)):
            return "unknown"
        parts.append(f"{part} {_figure(float(Fraction(total) - Fraction(spent)))}")
    return ", ".join(parts)


def ledger(shown: dict | None) -> str:
    """The ledger's part of the section, from `details.differential_privacy.ledger` (None: a REPORT
    of a published table whose comment, as every private release's, leaves the totals off)."""
    if not isinstance(shown, dict):
        return ("<h3>Privacy ledger</h3><p>The source's totals are not in this report: they are left off the "
                "published table's comment (they tell how often the source was released, not what this release "
                "holds). The release's result row holds them (<code>details.differential_privacy.ledger</code>), "
                "and the table <code>duckanon_privacy_ledger</code> of the source's database holds one row per "
                "private release.</p>")
    recorded = shown.get("recorded")
    before, after, budget = shown.get("spent_before"), shown.get("spent_after"), shown.get("budget")
    unknown = shown.get("unknown")
    # html_table escapes every cell
    rows = [("source", str(shown.get("source"))),
            ("spent before this release", _spent(before, unknown)),
            ("spent after this release", _spent(after, unknown)),
            ("budget", "none given" if budget is None else
             f"epsilon {_figure(budget.get('epsilon'))}, delta {_figure(budget.get('delta'))}"),
            *([("left of the budget after this release", _left(budget, after))] if budget is not None else []),
            ("this release's spend", "recorded in the privacy ledger, in the release's transaction"
             if recorded is True else str(recorded))]
    not_recorded = "" if recorded is True else (
        " This release's spend is not in the ledger (the reason is above), so the ledger's totals for the source "
        "do not count it: count it yourself when you add up what the source has spent.")
    return ("<h3>Privacy ledger</h3>"
            + html_table(["ledger", "value"], rows)
            + "<p>Sequential composition: every private release of a source draws its own sample and spends its own "
              "(epsilon, delta). Released together, the releases of one source are (the sum of their epsilons, the "
              "sum of their deltas)-differentially private: someone who holds all of them learns at most that much "
              "about any one person. The ledger adds them up per source; with a budget, a statement that would take "
              "the total past it is refused before it reads a row." + not_recorded + "</p>"
              "<p>What the ledger does not cover: it counts per source table, by name. A view over the source, a "
              "copy of it, another table holding the same people, a copy of the database file or the same file "
              "attached under another path each have a total of their own, and a table dropped and created again "
              "under the same name inherits the old total. Whoever can write the database can edit or delete the "
              "ledger's rows. Linking the people behind several objects or files is the publisher's part "
              "(docs/models.md, \"Not covered\").</p>")
