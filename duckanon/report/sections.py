"""The report's sections, each an HTML fragment: a heading, its figure, its table and a note that
says how to read them. The numbers come from facts and risk, the words from claims."""

from __future__ import annotations

import json
import math

import duckdb

from duckanon._version import __version__
from duckanon.report import claims, facts, figures, population
from duckanon.report.markup import escape, format_value, html_table, json_ready, rows_text
from duckanon.pipeline.result import release_risks
from duckanon.report.risk import risk_measures, smallest_safe_size


# what a private release's report leaves out of ANONYMIZE's summary: counts of the original's rows
PRIVATE_SUMMARY_LEFT_OUT = ("rows", "removed_rows", "lower_bound")


def header(published, original, params, summary, details, utility, release, qi, threshold, threshold_why,
           top: str = "", stars_why: str | None = None, sweep_values: tuple | None = None) -> str:
    """The title, `top` (the verdict), what was compared, the parameters and ANONYMIZE's summary
    with `stars_why` (verdict.stars_explained) below it."""
    parts = [f"<h1>duckanon report: <code>{escape(published)}</code></h1>", top,
             (f"<p>Published table <code>{escape(published)}</code>, compared with the original table "
              f"<code>{escape(original)}</code>. " if not release.get("private") else
              f"<p>Published table <code>{escape(published)}</code>, a differentially private release of "
              f"<code>{escape(original)}</code>. ") + f"duckanon {escape(__version__)}, "
             f"DuckDB {escape(duckdb.__version__)}.</p>",
             f"<p class=\"removed\">{escape(claims.removed_sentence(release))}</p>"]
    rows = claims.parameter_rows(params, release, qi, threshold, threshold_why, sweep_values)
    if rows:
        parts += ["<h2>Parameters</h2>", html_table(["parameter", "value"], rows)]
    if summary:
        summary = dict(summary)
        summary.pop("details", None)
        if release.get("private"):  # the source's row counts: functions of its rows (claims.PRIVATE_NOTE)
            for name in PRIVATE_SUMMARY_LEFT_OUT:
                summary.pop(name, None)
        if summary.get("report") is None:  # not known while the report is being written
            summary.pop("report", None)
        parts += ["<h2>ANONYMIZE summary</h2>", html_table(["field", "value"], summary.items()),
                  f"<p class=\"optimality\">{claims.optimality(summary, release)}</p>"]
        whole_domain = int((details or {}).get("whole_domain_cells", 0) or 0)
        if summary.get("stars") is not None and summary["stars"] != utility["stars"] + whole_domain:
            parts.append(f"<p class=\"bad\">The summary reports {escape(format_value(summary['stars']))} stars but "
                         f"the published table holds {escape(format_value(utility['stars'] + whole_domain))}.</p>")
        elif stars_why:
            parts.append(stars_why)
        elif whole_domain:
            parts.append(f"<p class=\"note\">The summary's {escape(format_value(summary['stars']))} stars include "
                         f"{escape(format_value(whole_domain))} cells published as a hierarchy label that covers every "
                         "value of its column (fully masked, like '*'); the tables below list them as generalized "
                         "cells.</p>")
        if summary.get("stars") is not None and not stars_why:  # (stars_why gives the definition itself)
            parts.append("<p class=\"note\">stars: the published cells that hide their value entirely ('*', or a "
                         "hierarchy label that covers every value of its column); suppressed_rows: the published "
                         "rows with at least one star.</p>")
        if details:
            pretty = json.dumps(json_ready(details), indent=2, sort_keys=True, default=str)
            parts.append(f"<details><summary>solver details</summary><pre>{escape(pretty)}</pre></details>")
    return "\n".join(part for part in parts if part)


def class_sizes(db, published, original, qi, k, shown: tuple[str, str] | None = None, private: bool = False) -> str:
    """The class-size histograms of both tables; `shown`: their names on the page (published,
    original). `private`: the published table's only (differential privacy)."""
    before = {} if private else facts.size_histogram(db, original, qi)
    after = facts.size_histogram(db, published, qi)
    published_shown, original_shown = shown or (published, original)
    if private:
        original_shown = "original (left out: differential privacy)"
    return ("<h2>Equivalence classes</h2>" + figures.class_sizes(before, after, original_shown, published_shown, k)
            + f"<p class=\"note\">Classes are rows with equal values on {escape(', '.join(qi))}; "
              "a '*' is a value of its own in the published table.</p>")


def columns(qi, counts: dict[str, dict], column_loss: dict | None = None, loss: float | None = None,
            whole: dict[str, int] | None = None) -> str:
    """'*' cells and generalized cells per QI; `whole` (verdict.whole_domain_columns) moves the
    cells of a label covering every value from the generalized cells to the stars, as ANONYMIZE
    counts them."""
    whole = whole or {}
    stars = [counts[c]["stars"] for c in qi]
    labels = [whole.get(c, 0) for c in qi]
    generalized = [counts[c]["generalized"] - whole.get(c, 0) for c in qi]
    if any(labels):
        table = html_table(["column", "'*' cells", "cells of a label covering every value (stars)",
                            "generalized cells"], zip(qi, stars, labels, generalized))
    else:
        table = html_table(["column", "'*' cells", "generalized cells"], zip(qi, stars, generalized))
    section = ("<h2>Suppression per column</h2>"
               + figures.stars_per_column(qi, [s + w for s, w in zip(stars, labels)], generalized) + table
               + "<p class=\"note\">Stars: cells that hide their value entirely ('*', or a hierarchy label that "
                 "covers every value of its column). Generalized cells hold another value that is not one of the "
                 "column's original values (a range, a set, a hierarchy label).</p>")
    if column_loss:
        section += _loss(qi, column_loss, loss)
    elif any(generalized) or any(labels):
        section += ("<p class=\"note\">How much each generalized column lost is recorded by ANONYMIZE "
                    "(column_loss), which this report was not given (the table's comment leaves it out of a "
                    "release with removed rows: it is counted over the source's rows).</p>")
    else:
        section += ("<p class=\"note\">Every published QI value is an original value or '*' (cell "
                    "suppression), so the information lost per column is exactly its '*' count.</p>")
    return section


def _loss(qi, column_loss: dict, loss: float | None = None) -> str:
    losses = [float(column_loss.get(c, 0.0)) for c in qi]
    if loss is None:  # ARX's aggregate: the geometric mean of the columns' losses
        loss = math.prod((1.0 + x) ** (1.0 / len(losses)) for x in losses) - 1.0 if losses else 0.0
    return ("<h2>Information loss per column</h2>" + figures.loss_per_column(qi, losses)
            + html_table(["column", "loss"], [*zip(qi, losses), ("all quasi-identifiers (ARX's Loss)", loss)])
            + "<p class=\"note\">A row's loss in a column is (d<sub>L</sub> − 1) / (d − 1): the published "
              "string stands for d<sub>L</sub> of the column's d values (with a hierarchy, its rows, values "
              "the table lacks included, as ARX counts them). A kept value costs 0, a '*' or a removed row 1, "
              "a generalized label in between. The release's loss is ARX's Loss: the geometric mean "
              "∏(1 + column loss)<sup>1/QIs</sup> − 1.</p>")


def sensitive_attribute(db, published, qi, sa) -> str:
    mix = facts.sa_mix(db, published, qi, sa)
    per_class = facts.least_diverse_classes(db, published, qi, sa)
    heading = f"<h2>Sensitive attribute <code>{escape(sa)}</code> per class</h2>"
    if not mix:
        return heading + "<p>The published table is empty.</p>"
    figure = figures.sa_per_class(mix, sa)
    all_classes = per_class[0]["all_classes"] if per_class else 0
    which = (f"the {len(per_class)} least diverse of the {format_value(all_classes)} classes"
             if all_classes > len(per_class)
             else f"all {rows_text(all_classes, 'class', 'classes')}, least diverse first")
    table = html_table(["#", "class (QI values)", "rows", "distinct values", "largest share", "frequency l",
                        "EMD to table"],
                       [(r["position"], r["class"], r["size"], r["distinct_values"], r["top_share"],
                         r["frequency_l"], r["emd"]) for r in per_class])
    return (heading + figure
            + f"<p class=\"note\">Shown: {escape(which)} (fewest distinct values of {escape(sa)}, then the "
              "largest share of one value, then the farthest from the whole table): the classes "
              "l-diversity and t-closeness are decided by. l-diversity asks every class to mix several "
              "values (frequency l: no value in more than 1/l of the class); t-closeness asks every "
              "class's bar to stay within EMD t of the first bar.</p>"
            + f"<details><summary>{escape(which)}</summary>{table}</details>")


def risk(db, published, original, qi, threshold: float, threshold_why: str,
         shown: tuple[str, str] | None = None, private: bool = False) -> str:
    """Prosecutor risk before and after; `shown`: the tables' names on the page (published,
    original). `private`: the published table's only (differential privacy)."""
    # anon_risk counts a record when 1 / size > threshold; it gets a threshold halfway between two
    # sizes' risks, so 1/k (not exact in floating point) puts a class of exactly k rows on the safe side.
    safe = smallest_safe_size(threshold)
    after = risk_measures(db, published, qi, threshold)
    measures = [("highest_risk", "highest risk"), ("average_risk", "average risk"),
                ("records_at_risk_fraction", f"records at risk (> {format_value(threshold)})"),
                ("uniques_fraction", "unique records")]
    keys = ["highest_risk", "average_risk", "records_at_risk", "records_at_risk_fraction",
            "uniques", "uniques_fraction", "classes", "rows"]
    if private:  # the original's risk is an exact function of its rows, outside the guarantee
        figure = ""
        table = html_table(["measure", "published"], [(k, after[k]) for k in keys])
    else:
        before = risk_measures(db, original, qi, threshold)
        published_shown, original_shown = shown or (published, original)
        figure = figures.risk_before_and_after(measures, before, after, original_shown, published_shown)
        table = html_table(["measure", "original", "published"], [(k, before[k], after[k]) for k in keys])
    at_risk = after["records_at_risk"]
    smaller = f"classes of fewer than {safe} rows" if safe > 1 else "no class (every risk is at most 1)"
    return ("<h2>Re-identification risk</h2>"
            + f"<p class=\"at-risk\">{escape(format_value(at_risk))} published "
              f"{'record' if at_risk == 1 else 'records'} at "
              f"risk: risk above {escape(format_value(threshold))} ({escape(threshold_why)}), "
              f"i.e. in {escape(smaller)}.</p>"
            + figure + table
            + "<p class=\"note\">Prosecutor model (anon_risk): the attacker knows the person is in the "
              "table; a record's risk is 1 / the size of its class, and it is at risk when that is "
              "strictly above the threshold. Risks are shown to 3 significant digits. "
            + f"Records at risk: risk above {escape(format_value(threshold))} ({escape(smaller)}).</p>")


def population_risk(risk: population.PopulationRisk) -> str:
    """The population-based risks before and after: a figure that could not be computed reads
    "not available", and why is said below the table."""
    def cell(figure: population.Figure):
        return "not available" if figure.missing else figure.value

    table = html_table(["measure", "requested", "original", "published", "", "how measured"],
                       [(r.measure, r.requested, cell(r.original), cell(r.published), r.status, r.how)
                        for r in risk.rows])
    missing: dict[str, list[str]] = {}
    for r in risk.rows:
        for side, figure in (("original", r.original), ("published", r.published)):
            if figure.missing:
                missing.setdefault(figure.missing, []).append(f"{r.measure.split(' (')[0]} of the {side}")
    unavailable = "".join(f"<p class=\"unavailable\">Not available ({escape('; '.join(where))}): "
                          f"{escape(why)}.</p>" for why, where in missing.items())
    warnings = "".join(f"<p class=\"bad\">{escape(text)}</p>" for text in risk.warnings)
    notes = "".join(f"<p class=\"note\">{escape(text)}</p>" for text in risk.notes)
    return ("<h2>Population risk</h2>" + table + unavailable + warnings + notes
            + "<p class=\"note\">Original: the table before anonymization; published: the release. The average "
              "risk is the mean prosecutor risk (classes / rows, El Emam); k-map (Sweeney) asks every class to "
              "match at least k people of the population; delta-presence (Nergiz et al.) bounds the share of a "
              "class's matching population that is in the sample.</p>")


UTILITY_NAMES = {"stars": "stars ('*' cells)", "suppressed_rows": "rows with a '*'",
                 "classes": "classes", "rows": "rows", "discernibility": "discernibility (Σ size²)",
                 "aecs": "average class size (AECS)", "normalized_aecs": "normalized AECS (AECS / k)",
                 "kl_divergence": "KL divergence (original ‖ published)"}


def privacy_checks(db, published, original, qi, params, sensitives, private: bool = False) -> list[tuple]:
    """Each privacy measure on both tables beside what the statement asked for: (measure,
    requested, original, published, "met" / "NOT met" / ""); with several sensitive columns, l and
    t on each column ("frequency_l (occupation)")."""
    l_form = params.get("l_variant") or "frequency"
    t_form = {"equal": "t", "ordered": "t_ordered"}.get(params.get("t_distance") or "equal")
    requested = {"k": params.get("k"), f"{l_form}_l": params.get("l"), t_form: params.get("t")}
    several = len(sensitives) > 1
    rows = []
    for position, column in enumerate(sensitives or [None]):
        for name, kind, before, after in facts.privacy_measures(db, published, None if private else original, qi,
                                                                column, with_k=position == 0):
            wanted = requested.get(name)
            status = ""
            if wanted is not None and after is not None:
                met = after >= wanted if kind == "min" else after <= wanted + 1e-12
                status = "met" if met else "NOT met"
            rows.append((f"{name} ({column})" if several and name != "k" else name, wanted,
                         None if private else before, after, status))
    return rows


def metrics(utility, sa, counts, release, checks: list[tuple], sensitives=None, private: bool = False) -> str:
    """Utility, then the privacy checks (privacy_checks)."""
    sensitives = list(sensitives or ([sa] if sa is not None else []))
    several = len(sensitives) > 1
    utility_rows = [(label, utility.get(key)) for key, label in UTILITY_NAMES.items()]
    kl = utility.get("kl_divergence")
    if kl is not None and not math.isfinite(kl):
        utility_rows[-1] = (UTILITY_NAMES["kl_divergence"], claims.kl_infinite_text(counts, release))
    kl_note = "" if sa is not None else \
        "<p class=\"note\">KL divergence is not computed without a sensitive attribute.</p>"
    if several:
        kl_note = (f"<p class=\"note\">KL divergence over the quasi-identifiers and {escape(sa)}, the first of the "
                   f"sensitive columns {escape(', '.join(sensitives))}.</p>")
    if private:
        kl_note = ("<p class=\"note\">KL divergence is not shown: it compares the published table with the "
                   "original's rows, which a differentially private release's report leaves out.</p>")
        checks_table = html_table(["measure", "requested", "published", ""],
                                  [(m, wanted, after, status) for m, wanted, _, after, status in checks])
    else:
        checks_table = html_table(["measure", "requested", "original", "published", ""], checks)
    return ("<h2>Utility</h2>" + html_table(["measure (anon_utility)", "published"], utility_rows) + kl_note
            + "<h2>Privacy checks</h2>"
            + checks_table
            + "<p class=\"note\">k from anon_k, l from anon_l, t from anon_t (EMD, equal and ordered "
              "ground distance), measured on the tables themselves"
            + (f"; l and t on each sensitive column's own values ({escape(', '.join(sensitives))}), as ANONYMIZE "
               "holds them" if several else "") + ".</p>")


def changes(previous: dict, summary: dict, counts: dict) -> str:
    """REFRESH: the release before and this one, measure by measure."""
    before = previous.get("summary") or {}
    before_details = before.get("details") or {}
    after_details = summary.get("details")
    after_details = json.loads(after_details) if isinstance(after_details, str) else dict(after_details or {})
    (highest_before, average_before), (highest_after, average_after) = release_risks(before), release_risks(summary)
    rows = [("source rows", previous.get("source_rows"), summary.get("rows")),
            ("published rows", before.get("published_rows"), summary.get("published_rows")),
            ("removed rows", before.get("removed_rows"), summary.get("removed_rows")),
            ("classes", before.get("classes"), summary.get("classes")),
            ("smallest class", before.get("min_class_size"), summary.get("min_class_size")),
            ("stars", before.get("stars"), summary.get("stars")),
            ("highest risk", highest_before, highest_after), ("average risk", average_before, average_after),
            ("loss (ARX's Loss)", before_details.get("loss"), after_details.get("loss")),
            ("levels", before_details.get("levels"), after_details.get("levels"))]
    shown = [(name, format_value(a), format_value(b)) for name, a, b in rows]
    return ("<h2>Changes since the previous release</h2>"
            + html_table(["measure", f"before (published {escape(str(previous.get('published_at')))})", "now"], shown)
            + "<p class=\"note\">REFRESH re-ran the registered statement on the source's current rows; "
              "before: the release it replaced, from the publication registry.</p>")


def roles(db, roles: dict, source: str, private: bool = False) -> str:
    """Every source column's role, with the HIPAA Safe Harbor identifier kinds anon_profile finds
    in it, and the kinds the release still publishes (a column published as it is or as a
    quasi-identifier, not dropped nor masked)."""
    if private:  # the profile reads the original's values, outside the guarantee
        return ("<h2>Column roles</h2>" + html_table(["column", "role"], roles.items())
                + "<p class=\"note\">The HIPAA Safe Harbor profile of the original's columns is left out: it "
                  "reads the original's values, which a differentially private release's report does not "
                  "show.</p>")
    found = {row["column_name"]: row["hipaa"] or [] for row in facts.query_rows(
        db, "SELECT column_name, hipaa FROM anon_profile($source)", source=source)}
    rows = [(column, role, ", ".join(found.get(column, [])) or "-") for column, role in roles.items()]
    published = sorted({kind for column, role in roles.items() for kind in found.get(column, [])
                        if not (role.startswith("identifier") or role == "dropped")})
    note = (f"The release still publishes columns of these Safe Harbor kinds: {', '.join(published)} "
            "(as quasi-identifiers their values may be generalized; check the published form)."
            if published else "No column of a Safe Harbor identifier kind is published unmasked.")
    return ("<h2>Column roles</h2>" + html_table(["column", "role", "HIPAA Safe Harbor kinds found"], rows)
            + f"<p class=\"note\">{escape(note)} Roles: quasi-identifiers are generalized or suppressed, "
              "sensitive and kept columns published as they are, identifiers dropped or published through "
              "their masking rule, other columns dropped. Safe Harbor kinds from anon_profile "
              "(sql/profile.sql) on the original table.</p>")


def sweep(rows: list[dict], published=None) -> str:
    """The sweep's table and plot: its rows are dicts whose first key is the swept parameter, in
    the order the values were typed; both show them in increasing order, `published` (the first
    value typed, the one published) marked."""
    # (not the dry runs' seconds: how long one took says nothing about the release it would make)
    columns = [key for key in dict.fromkeys(key for row in rows for key in row) if key != "seconds"]
    swept = columns[0]
    ordered = sorted(rows, key=lambda row: row.get(swept))
    chosen = (f" {escape(swept)} = {escape(format_value(published))} is the one published (the table this "
              "report describes)." if published is not None else "")
    return (f"<h2>Sweep over {escape(swept)}</h2>" + figures.sweep(rows, columns, published)
            + html_table([c.replace("_", " ") for c in columns], [[row.get(c) for c in columns] for row in ordered],
                         css_class="compact")
            + f"<p class=\"note\">One dry run per value, in increasing {escape(swept)}.{chosen} Pick the knee: "
              "the value after which more privacy costs much more loss, or after which the risk stops "
              "falling.</p>")
