"""The independent checker: k-anonymity, the l-diversity variants and t-closeness counted on
published rows from the definitions, sharing nothing with duckanon's solver (nothing here imports
it; support.solver_checks holds the checks that use it on purpose)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from support.database import qident


def check_published(rows, qi_idx, sa_idx=None, k=None, l=None, t=None, l_variant="frequency", total_sa=None, c=None):
    """Independent check of a published table given as a list of tuples.

    Returns (stars, suppressed_rows, problems). Classes are rows with equal QI values (NULL is a
    value of its own); '*' counts as a suppressed cell.
    """
    classes = defaultdict(list)
    stars = suppressed = 0
    for row in rows:
        key = tuple(row[j] for j in qi_idx)
        classes[key].append(row[sa_idx] if sa_idx is not None else None)
        row_stars = sum(1 for v in key if v == "*")
        stars += row_stars
        suppressed += row_stars > 0
    problems = []
    if total_sa is None and sa_idx is not None:
        total_sa = Counter(row[sa_idx] for row in rows)
    n = sum(total_sa.values()) if total_sa else 0
    for key, sas in classes.items():
        size = len(sas)
        if k is not None and size < k:
            problems.append(f"class {key} has {size} < k rows")
        if l is not None:
            counts = Counter(sas)
            if l_variant == "distinct" and len(counts) < l:
                problems.append(f"class {key} has {len(counts)} < l distinct values")
            if l_variant == "frequency" and l * max(counts.values()) > size:
                problems.append(f"class {key} is not frequency {l}-diverse: {dict(counts)}")
            if l_variant == "entropy":
                entropy = -sum(x / size * math.log(x / size) for x in counts.values())
                if entropy < math.log(l) - 1e-9:
                    problems.append(f"class {key} has entropy {entropy} < ln {l}")
            if l_variant == "recursive":
                ordered = sorted(counts.values(), reverse=True)
                if not ordered[0] < c * sum(ordered[l - 1:]):
                    problems.append(f"class {key} is not recursive ({c}, {l})-diverse: {ordered}")
        if t is not None:
            counts = Counter(sas)
            emd = 0.5 * sum(abs(counts.get(s, 0) / size - total_sa[s] / n) for s in total_sa)
            if emd > t + 1e-9:
                problems.append(f"class {key} has EMD {emd} > t")
    return stars, suppressed, problems


def publish_and_check(con, statement: str, rows, m: int, **checks):
    """Run `statement` on table t (QIs q0..q{m-1}, SA last) and check t_anon independently: same
    row count and SA multiset, the request holds (check_published), and the summary's stars and
    suppressed rows are the ones counted. Returns (summary row, published rows)."""
    summary = con.execute(statement).fetchone()
    published = con.execute("SELECT * FROM t_anon").fetchall()
    assert len(published) == len(rows)
    assert Counter(r[-1] for r in published) == Counter(r[-1] for r in rows)
    stars, suppressed, problems = check_published(published, list(range(m)), m, **checks)
    assert problems == [], (statement, problems)
    assert (stars, suppressed) == (summary[3], summary[4])
    return summary, published


def check_table(con, table: str, source: str, qis: list[str], sensitive: str | None = None, **checks) -> list[str]:
    """check_published on a published table read back from `con`, the t-closeness reference being
    the sensitive distribution of `source`: the problems found (none when the request holds)."""
    columns = [qident(c) for c in qis] + ([qident(sensitive)] if sensitive else [])
    rows = con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
    total = Counter(r[0] for r in con.execute(f"SELECT {qident(sensitive)} FROM {source}").fetchall()) if sensitive else None
    return check_published(rows, list(range(len(qis))), len(qis) if sensitive else None, total_sa=total, **checks)[2]
