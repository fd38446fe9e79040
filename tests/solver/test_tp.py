"""TP, TP+ and Hilbert (Xiao, Yi & Tao 2010): the paper's traces, phase-one optimality, and the
guarantee under every l-diversity form, checked independently of the solver."""

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon.solver import Histogram, LDiversity, solve
from duckanon.solver.hilbert import hilbert_order
from duckanon.solver.tp import phase_one_caps, three_phase

from support.checks import check_published, publish_and_check
from support.tiers import examples

PHASE_TWO = [[3, 1, 1, 2, 3], [0, 2, 2, 4, 4], [4, 4, 0, 0, 0]]  # l = 3
PHASE_THREE = [[3, 1, 2, 3, 3], [1, 3, 2, 3, 3], [4, 4, 4, 0, 0]]  # l = 4; Q3 empties into R


def test_phase_two_trace_on_the_solver():
    counts = np.array(PHASE_TWO)
    kept = np.minimum(counts, phase_one_caps(counts, 3)[:, None])
    assert (counts - kept).sum(axis=0).tolist() == [4, 4, 0, 0, 0]  # phase 1 empties Q3 only
    assert kept[:2].tolist() == PHASE_TWO[:2]
    result = three_phase(counts, 3)
    assert result.phase == 2
    assert result.residue_counts.tolist() == [4, 4, 2, 1, 1]
    # v=3 from Q1, then {4,5} from Q2 (thin), then v=3 from Q2
    assert result.kept.tolist() == [[3, 1, 0, 2, 3], [0, 2, 1, 3, 3], [0, 0, 0, 0, 0]]


def test_phase_three_trace_on_the_solver():
    start = three_phase(np.array(PHASE_THREE[:2]), 4, residue=np.array([4, 4, 4, 0, 0]))
    assert start.phase == 3
    assert (start.residue_counts + [4, 4, 4, 0, 0]).tolist() == [5, 5, 5, 3, 2]
    assert start.kept.tolist() == [[2, 1, 1, 2, 2], [1, 2, 2, 1, 2]]
    # the same state reached from the raw classes: phase 1 moves all of Q3 to R
    full = three_phase(np.array(PHASE_THREE), 4)
    assert full.phase == 3 and full.residue_counts.tolist() == [5, 5, 5, 3, 2]


def table_from_counts(con, name, class_counts):
    rows = [(f"q{i + 1}", f"v{v + 1}") for i, row in enumerate(class_counts) for v, n in enumerate(row) for _ in range(n)]
    con.execute(f"CREATE TABLE {name} (q VARCHAR, disease VARCHAR)")
    con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    return rows


@pytest.mark.parametrize("counts, l, phase, suppressed", [(PHASE_TWO, 3, 2, 12), (PHASE_THREE, 4, 3, 20)])
def test_traces_end_to_end(counts, l, phase, suppressed):
    con = duckanon.connect()
    source = table_from_counts(con, "paper", counts)
    summary = con.execute(
        f"ANONYMIZE paper WITH (l = {l}, qi = q, sensitive = disease, method = 'tp')"
    ).fetchone()
    columns = [d[0] for d in con.description]
    row = dict(zip(columns, summary))
    assert json.loads(row["details"])["tp_phase"] == phase
    assert row["suppressed_rows"] == suppressed and row["stars"] == suppressed
    published = con.execute("SELECT q, disease FROM paper_anon").fetchall()
    assert sum(1 for q, _ in published if q == "*") == suppressed
    assert Counter(published) - Counter((q, d) for q, d in published if q == "*") <= Counter(source)
    stars, rows_suppressed, problems = check_published(published, [0], 1, l=l)
    assert problems == [] and (stars, rows_suppressed) == (suppressed, suppressed)
    # the SQL check agrees
    assert con.execute("SELECT frequency_l FROM anon_l('paper_anon', ['q'], 'disease')").fetchone()[0] >= l
    con.close()


def random_counts(rng, n_classes, n_values):
    counts = rng.integers(0, 6, size=(n_classes, n_values)) * (rng.random((n_classes, n_values)) < 0.6)
    return counts[counts.sum(axis=1) > 0]


def test_phase_one_is_optimal_and_phase_two_within_l_minus_one():
    """With one QI column, stars = suppressed rows, so `exact` gives the tuple-minimization
    optimum: TP equals it when it stops in phase 1 and is within l - 1 rows in phase 2."""
    rng = np.random.default_rng(7)
    seen = Counter()
    for trial in range(60):
        l = int(rng.integers(2, 4))
        counts = random_counts(rng, int(rng.integers(2, 7)), int(rng.integers(l, 6)))
        total = counts.sum(axis=0)
        if len(counts) == 0 or l * total.max() > total.sum():
            continue
        hist = Histogram(codes=np.arange(len(counts))[:, None], sa_counts=counts)
        result = three_phase(counts, l)
        optimum = solve(hist, [LDiversity(l)], method="exact")
        assert optimum.optimal
        rows = int(result.residue.sum())
        seen[result.phase] += 1
        if result.phase == 1:
            assert rows == optimum.stars, (counts.tolist(), l)
        else:
            assert optimum.stars <= rows <= optimum.stars + l - 1, (counts.tolist(), l)
    assert seen[1] >= 10 and seen[2] >= 3, seen


def test_hilbert_order_is_a_curve():
    """Consecutive points of the order on a full 2-D grid are grid neighbours (a Hilbert curve)."""
    side = 16
    grid = np.array([(x, y) for x in range(side) for y in range(side)])
    order = grid[hilbert_order(grid)]
    steps = np.abs(np.diff(order, axis=0)).sum(axis=1)
    assert (steps == 1).all()
    cube = np.array([(x, y, z) for x in range(8) for y in range(8) for z in range(8)])
    steps = np.abs(np.diff(cube[hilbert_order(cube)], axis=0)).sum(axis=1)
    assert (steps == 1).all()


def feasible(sa_values, l, variant, c):
    counts = sorted(Counter(sa_values).values(), reverse=True)
    n = len(sa_values)
    if not n:
        return True
    if len(counts) < l:
        return False
    if variant == "frequency":
        return l * counts[0] <= n
    if variant == "entropy":
        return -sum(x / n * math.log(x / n) for x in counts) >= math.log(l) * (1 - 1e-12)
    if variant == "recursive":
        return counts[0] < c * sum(counts[l - 1:])
    return True


@st.composite
def l_cases(draw):
    m = draw(st.integers(1, 3))
    n_sa = draw(st.integers(2, 5))
    distinct = draw(st.lists(st.tuples(*[st.one_of(st.none(), st.integers(0, 3))] * m), min_size=1, max_size=10))
    n = draw(st.integers(1, 40))
    rows = [distinct[draw(st.integers(0, len(distinct) - 1))] + (draw(st.integers(0, n_sa - 1)),) for _ in range(n)]
    if draw(st.booleans()):  # skew towards one SA value
        rows = [r if draw(st.booleans()) else r[:-1] + (0,) for r in rows]
    variant = draw(st.sampled_from(["frequency", "distinct", "entropy", "recursive"]))
    l = draw(st.integers(2, 3))
    c = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])) if variant == "recursive" else None
    k = draw(st.one_of(st.none(), st.integers(2, 4)))
    method = draw(st.sampled_from(["tp", "tp+", "hilbert"]))
    return m, rows, variant, l, c, k, method


_SHARED = []


def shared_connection():
    """One connection for all examples (connecting and installing the macros costs ~50 ms)."""
    if not _SHARED:
        _SHARED.append(duckanon.connect())
    return _SHARED[0]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(l_cases())
def test_every_output_is_l_diverse(case):
    m, rows, variant, l, c, k, method = case
    con = shared_connection()
    con.execute("DROP TABLE IF EXISTS t; DROP TABLE IF EXISTS t_anon")
    columns = ", ".join(f"q{j} INTEGER" for j in range(m))
    con.execute(f"CREATE TABLE t ({columns}, s INTEGER)")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * (m + 1))})", rows)
    options = [f"l = {l}", f"qi = ({', '.join(f'q{j}' for j in range(m))})", "sensitive = s",
               f"method = '{method}'", f"l_variant = {variant}"]
    if c is not None:
        options.append(f"c = {c}")
    if k is not None:
        options.append(f"k = {k}")
    statement = f"ANONYMIZE t WITH ({', '.join(options)})"
    ok = feasible([r[-1] for r in rows], l, variant, c) and (k is None or k <= len(rows))
    if not ok:
        with pytest.raises(duckanon.AnonymizeError):
            con.execute(statement)
        return
    summary, _ = publish_and_check(con, statement, rows, m, k=k, l=l, l_variant=variant, c=c)
    if method == "tp+" and k is None:  # TP+ only splits TP's residue: never more stars
        tp_summary = con.execute(statement.replace("'tp+'", "'tp'")).fetchone()
        assert summary[3] <= tp_summary[3]


@pytest.mark.parametrize("variant, extra, check", [
    ("frequency", "", "SELECT frequency_l >= 3 FROM anon_l('adult_anon', {qi}, 'occupation')"),
    ("distinct", "", "SELECT distinct_l >= 3 FROM anon_l('adult_anon', {qi}, 'occupation')"),
    ("entropy", "", "SELECT entropy_l >= 3 - 1e-9 FROM anon_l('adult_anon', {qi}, 'occupation')"),
    ("recursive", ", c = 2", "SELECT recursive_c < 2 FROM anon_l_recursive('adult_anon', {qi}, 'occupation', 3)"),
])
def test_sql_checks_report_every_form_on_adult(variant, extra, check):
    """TP+ on a 5,000-row Adult sample, each form checked by the SQL macros (not by the solver)."""
    from support.data import SHARED
    con = duckanon.connect()
    con.execute(f"""CREATE TABLE adult AS SELECT sex, race, "marital-status", education, occupation
                    FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';') USING SAMPLE 5000 ROWS (reservoir, 1)""")
    qi = "['sex', 'race', 'marital-status', 'education']"
    con.execute(f"""ANONYMIZE adult WITH (l = 3, l_variant = {variant}{extra}, sensitive = occupation,
                    qi = (sex, race, "marital-status", education), method = 'tp+')""")
    assert con.execute(check.format(qi=qi)).fetchone()[0] is True
    before = con.execute(check.replace("adult_anon", "adult").format(qi=qi)).fetchone()[0]
    assert before is False  # the raw sample violates it, so the check has teeth
    con.close()
