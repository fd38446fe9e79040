"""Property test: on random tables every published table satisfies the request (independent check),
keeps the row count and the multiset of sensitive values, or the request fails with a clear error."""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon

from support.checks import check_published
from support.database import qident
from support.tiers import examples

NAMES = ["a", "select", "Zip Code", "ünïcødé", 'we"ird', "x.y", "Group", "1col", "n"]
TEXT = st.sampled_from(["", "x", "y", "ß", "東京", "😀", " a ", "NULL", "'q'", "a\nb"])


@st.composite
def tables(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=5, unique_by=str.lower))
    qi, sa = names[:-1], names[-1]
    kinds = [draw(st.sampled_from(["text", "int"])) for _ in names]
    values = {
        "text": st.one_of(st.none(), TEXT),
        "int": st.one_of(st.none(), st.integers(-3, 3)),
    }
    distinct_rows = draw(st.lists(st.tuples(*[values[k] for k in kinds]), min_size=1, max_size=8))
    n = draw(st.integers(0, 30))
    rows = [distinct_rows[draw(st.integers(0, len(distinct_rows) - 1))] for _ in range(n)]
    request = {"k": draw(st.one_of(st.none(), st.integers(1, 4)))}
    if draw(st.booleans()):
        request["l"] = draw(st.integers(2, 3))
        request["l_variant"] = draw(st.sampled_from(["frequency", "distinct"]))
    if draw(st.booleans()):
        request["t"] = draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]))
    if all(request.get(x) is None for x in ("k", "l", "t")):
        request["k"] = 2
    request["method"] = draw(st.sampled_from(["auto", "mapprox", "greedy", "merge"]))
    return qi, sa, kinds, rows, request


def expected_error(rows, request, sa_index):
    n = len(rows)
    if n == 0:
        return None
    if request.get("k") and request["k"] > n:
        return "greater than the number of rows"
    if request.get("l"):
        counts = Counter(r[sa_index] for r in rows)
        if request["l"] > len(counts):
            return "greater than the number of distinct"
        if request["l_variant"] == "frequency" and request["l"] * max(counts.values()) > n:
            return "infeasible"
    return None


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_published_tables_satisfy_the_request(case):
    qi, sa, kinds, rows, request = case
    con = duckanon.connect()
    try:
        columns = ", ".join(f"{qident(c)} {'VARCHAR' if k == 'text' else 'INTEGER'}" for c, k in zip(qi + [sa], kinds))
        con.execute(f"CREATE TABLE src ({columns})")
        if rows:
            con.executemany(f"INSERT INTO src VALUES ({', '.join('?' for _ in kinds)})", rows)
        options = [f"qi = ({', '.join(qident(c) for c in qi)})", f"sensitive = {qident(sa)}", f"method = {request['method']}"]
        for key in ("k", "l", "t"):
            if request.get(key) is not None:
                options.append(f"{key} = {request[key]}")
        if request.get("l"):
            options.append(f"l_variant = {request['l_variant']}")
        statement = f"ANONYMIZE src WITH ({', '.join(options)})"
        sa_index = len(qi)
        error = expected_error(rows, request, sa_index)
        try:
            con.execute(statement)
        except duckanon.AnonymizeError as caught:
            assert error is not None and error in str(caught), (statement, str(caught))
            assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'src_anon'").fetchone()[0] == 0
            return
        assert error is None, (statement, error)
        summary = con.fetchone()
        published = con.execute("SELECT * FROM src_anon").fetchall()
        assert len(published) == len(rows) == summary[0]
        assert Counter(r[sa_index] for r in published) == Counter(r[sa_index] for r in rows)
        stars, suppressed, problems = check_published(
            published, list(range(len(qi))), sa_index, k=request.get("k"), l=request.get("l"), t=request.get("t"),
            l_variant=request.get("l_variant", "frequency"), total_sa=Counter(r[sa_index] for r in rows),
        )
        assert problems == [], (statement, problems)
        assert (stars, suppressed) == (summary[3], summary[4])
        # unsuppressed cells show the source's own values (as text; NULL stays NULL)
        source_cells = {j: Counter(None if r[j] is None else str(r[j]) for r in rows) for j in range(len(qi))}
        for j in range(len(qi)):
            shown = Counter(r[j] for r in published if r[j] != "*")
            assert all(shown[v] <= source_cells[j][v] for v in shown)
    finally:
        con.close()
