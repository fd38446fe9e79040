"""The report's section on differential privacy (SafePub): the parameters of the release, and in
plain words what the guarantee means and what it does not."""

from __future__ import annotations

import math

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
    rows.append(("generalization (fixed before the data was read)",
                 ", ".join(f"{name} = {level}" for name, level in levels.items()) if levels else "none"))
    factor = math.exp(epsilon) if isinstance(epsilon, (int, float)) else None
    return ("<h2>Differential privacy</h2>"
            + html_table(["parameter", "value"], [(escape(name), value) for name, value in rows])
            + "<p>What it means: this table was published by an (epsilon, delta)-differentially private "
              "algorithm (SafePub, as ARX implements it). Every row of the source was kept with probability "
              f"{escape(format_value(beta))}, independently, by a draw nobody can repeat; the rows kept were "
              f"generalized as fixed above, and every group of fewer than {escape(format_value(k))} rows was "
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
              "release.</p>")
