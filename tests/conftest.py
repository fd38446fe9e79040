"""Shared fixtures and an independent checker that knows nothing of the solver."""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import duckanon

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
HOSPITAL = SHARED / "hospital.csv"

# Tests live by area: solver/, frontend/, pipeline/, macros/, e2e/, robustness/. The end-to-end
# areas (through SQL text, the shells, files and the SQL macros) run on DuckDB 1.5 as well in CI.
E2E_AREAS = {"e2e", "macros"}
# What the README test's inner run (in the fresh venv it made) runs: `-m smoke` would change the
# README's command, so the environment variable below selects these instead.
SMOKE_TESTS = {"e2e/test_duckdb_versions.py", "e2e/test_examples.py::test_hospital_example"}
SMOKE_ONLY = "DUCKANON_SMOKE_ONLY"

# Two tiers. The default one is the README's command (what CI runs): it must finish within 15
# minutes on 2 cores at a load average of 4 (BENCHMARKS.md, "The test suite"). The thorough one,
# `DUCKANON_THOROUGH=1 python -m pytest -q -n auto`, adds the tests marked `slow` and runs every
# property-based test with THOROUGH_FACTOR times its examples: run it after changing a solver or a
# checker, and before a release. `-m slow` runs the slow tests alone (at the default examples).
THOROUGH = os.environ.get("DUCKANON_THOROUGH") == "1"
THOROUGH_FACTOR = 20


def examples(default: int) -> int:
    """The number of examples a property-based test draws in this tier (hypothesis' max_examples)."""
    return default * THOROUGH_FACTOR if THOROUGH else default


def pytest_configure(config):
    """With -n, xdist's work stealing instead of its default `load`: an idle worker takes queued
    tests from a busy one, so the long tests at the end of the suite do not leave a core idle (the
    suite on two cores: 592 -> 570 s). Set here rather than in addopts, which would make pytest
    refuse to start without xdist (`-p no:xdist`)."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "load":
        config.option.dist = "worksteal"


def _runs_spark(item) -> bool:
    """Whether the test starts Spark: it asks for the Spark session, or for the `backend` fixture
    (test_backends) with its Spark parameter."""
    callspec = getattr(item, "callspec", None)
    return "spark_session" in item.fixturenames or (callspec is not None and callspec.params.get("backend") == "spark")


def pytest_collection_modifyitems(config, items):
    run_slow = THOROUGH or "slow" in (config.getoption("markexpr") or "")
    for item in items:
        if item.get_closest_marker("slow") and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow tier: DUCKANON_THOROUGH=1 (or -m slow) runs it"))
        if item.path.parent.name in E2E_AREAS:
            item.add_marker(pytest.mark.e2e)
        if _runs_spark(item):
            item.add_marker(pytest.mark.spark)
        test = item.nodeid.split("tests/")[-1]
        if test.split("[")[0] in SMOKE_TESTS or test.split("::")[0] in SMOKE_TESTS:
            item.add_marker(pytest.mark.smoke)
    if os.environ.get(SMOKE_ONLY):
        selected = [item for item in items if item.get_closest_marker("smoke")]
        config.hook.pytest_deselected(items=[item for item in items if item not in selected])
        items[:] = selected


def qident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def result_row(con, statement: str) -> dict:
    """Run one statement on a duckanon connection; its result row by column name."""
    row = con.execute(statement).fetchone()
    return dict(zip([d[0] for d in con.description], row))


def connection_with(create: str):
    """A duckanon connection on an in-memory database after running `create`; closed after use."""
    connection = duckanon.connect()
    connection.execute(create)
    yield connection
    connection.close()


HOSPITAL_TABLE = f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')"


@pytest.fixture
def con():
    yield from connection_with(HOSPITAL_TABLE)


@pytest.fixture
def hospital(con):
    """The hospital table on `con`, whatever connection a module's own `con` fixture makes (the
    SQL checks install their macros on plain DuckDB or through duckanon)."""
    con.execute("CREATE TABLE IF NOT EXISTS hospital AS SELECT * FROM read_csv(?)", [str(HOSPITAL)])
    return con


@pytest.fixture(scope="module")
def hospital_module():
    """The hospital table on one connection shared by the tests of a module (reports)."""
    yield from connection_with(HOSPITAL_TABLE)


def spark_missing() -> str | None:
    """Why Spark cannot run here (no pyspark, no Java), or None."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'duckanon[spark]')"
    if shutil.which("java") is None:
        return "Spark needs Java 17 (java -version)"
    return None


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory):
    """One local Spark session for the whole run (a JVM start costs seconds), the hospital table
    as a temp view; skipped where Spark cannot run."""
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (SparkSession.builder.master("local[2]").appName("duckanon-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.read.csv(str(HOSPITAL), header=True, inferSchema=True).createOrReplaceTempView("hospital")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def adult():
    """Adult (30,162 rows) as table `adult`, one connection shared by the tests of a module."""
    yield from connection_with(f"CREATE TABLE adult AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim=';')")


def hospital_digits_sql(name: str = "hospital_digits") -> str:
    """The papers' star model: every digit of zipcode and age its own QI (m = 8)."""
    zips = ", ".join(f"substr(CAST(zipcode AS VARCHAR), {i + 1}, 1) AS z{i + 1}" for i in range(5))
    ages = ", ".join(f"substr(CAST(age AS VARCHAR), {i + 1}, 1) AS a{i + 1}" for i in range(2))
    return f"CREATE TABLE {name} AS SELECT {zips}, {ages}, education, disease FROM hospital"


DIGIT_QI = ["z1", "z2", "z3", "z4", "z5", "a1", "a2", "education"]


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


def fetch(con, table: str):
    return con.execute(f"SELECT * FROM {table}").fetchall()


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


def table_rows(page: str) -> dict[str, list[str]]:
    """Every HTML table row with data cells of a report, keyed by its first cell (later tables win)."""
    import html
    import re

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


def snapshot(con):
    """Everything a failed statement must leave as it was: tables, views, their rows, temp tables."""
    tables = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY ALL").fetchall()
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL").fetchall()
    contents = {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t[0]}"."{t[1]}"').fetchall())) for t in tables}
    temps = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()[0]
    return tables, views, contents, temps


def assert_refused_and_unchanged(db, statement, message):
    before = snapshot(db)
    with pytest.raises(duckanon.AnonymizeError, match=message) as caught:
        db.execute(statement)
    assert "\n" not in str(caught.value)
    assert "Traceback" not in str(caught.value)
    assert snapshot(db) == before


# -- risk-based models (issue 19): written from the papers' definitions, sharing nothing with
# duckanon's models. Classes are published rows with equal QI values, as in check_published; the
# table's sensitive distribution `total_sa` is the source's (what the release is compared with).


def class_sizes(rows, qi_idx) -> list[int]:
    """The sizes of the published classes (rows with equal QI values)."""
    return list(Counter(tuple(row[j] for j in qi_idx) for row in rows).values())


def _classes_with_sa(rows, qi_idx, sa_idx):
    classes = defaultdict(Counter)
    for row in rows:
        classes[tuple(row[j] for j in qi_idx)][row[sa_idx]] += 1
    return classes


def check_beta_likeness(rows, qi_idx, sa_idx, beta, total_sa, enhanced=False) -> list[str]:
    """Cao & Karras 2012 ("Publishing microdata with a robust privacy guarantee", PVLDB 5(11)):
    for every class and every sensitive value s it holds, with p = its share in the class and q
    its share in the table, the relative gain (p - q) / q is at most beta (Definition 2, basic);
    enhanced (Definition 3): at most min(beta, -ln q). The problems found."""
    n = sum(total_sa.values())
    problems = []
    for key, counts in _classes_with_sa(rows, qi_idx, sa_idx).items():
        size = sum(counts.values())
        for s, count in counts.items():
            p, q = count / size, total_sa[s] / n
            limit = min(beta, -math.log(q)) if enhanced else beta
            if (p - q) / q > limit + 1e-9:
                problems.append(f"class {key}: value {s!r} gains {(p - q) / q:.6g} > {limit:.6g}")
    return problems


def check_delta_disclosure(rows, qi_idx, sa_idx, delta, total_sa) -> list[str]:
    """Brickell & Shmatikov 2008 ("The cost of privacy", KDD), with ARX's base-2 logarithm: for
    every class and every sensitive value s it holds, |log2(p / q)| < delta (strict)."""
    n = sum(total_sa.values())
    problems = []
    for key, counts in _classes_with_sa(rows, qi_idx, sa_idx).items():
        size = sum(counts.values())
        for s, count in counts.items():
            distance = abs(math.log2((count / size) / (total_sa[s] / n)))
            if not distance < delta:
                problems.append(f"class {key}: value {s!r} at |log2(p/q)| = {distance:.6g} >= {delta}")
    return problems


def average_risk(rows, qi_idx) -> float:
    """El Emam's average prosecutor risk: the mean over the published records of 1 / (size of the
    record's class), which is classes / records; 0 for an empty release."""
    sizes = class_sizes(rows, qi_idx)
    return sum(size * (1 / size) for size in sizes) / sum(sizes) if sizes else 0.0


def highest_risk(rows, qi_idx) -> float:
    """The highest prosecutor risk of a published record: 1 / (size of the smallest class)."""
    sizes = class_sizes(rows, qi_idx)
    return 1 / min(sizes) if sizes else 0.0


def check_risk(rows, qi_idx, average=None, highest=None) -> list[str]:
    """average_risk and highest_risk thresholds on a published table: the problems found."""
    problems = []
    if average is not None and average_risk(rows, qi_idx) > average * (1 + 1e-12):
        problems.append(f"average risk {average_risk(rows, qi_idx):.6g} > {average}")
    if highest is not None and highest_risk(rows, qi_idx) > highest * (1 + 1e-12):
        problems.append(f"highest risk {highest_risk(rows, qi_idx):.6g} > {highest}")
    return problems


def hierarchy_ancestors(path) -> dict:
    """An ARX hierarchy CSV (`value;level1;...;top`) as value -> every label it can be published as
    (its row: all levels, the value itself included)."""
    import csv

    with open(path, newline="") as handle:
        return {row[0]: set(row) for row in csv.reader(handle, delimiter=";") if row}


def flat_ancestors(values) -> dict:
    """A column without a hierarchy: each value is published as itself or '*'."""
    return {text: {text, "*"} for text in (None if v is None else str(v) for v in values)}


def check_population(published_rows, qi_idx, population_rows, ancestors, k_map=None, delta_presence=None,
                     weights=None):
    """Population models on a published table, from their definitions.

    `population_rows`: the population's QI values per row, in the order of `qi_idx` (weights: how
    many people each row stands for, default 1). `ancestors[j]` maps a population value's text to
    the labels it can be published as. A published class matches a population row when each of
    its QI labels is one of that row's value's labels; the class's population count is the sum
    of the matching rows' weights.

    k-map (Sweeney 2002; El Emam & Dankar 2008): every class matches at least k_map people.
    delta-presence (Nergiz, Atzori & Clifton 2007): (class rows) / (population matching it) lies
    in [dmin, dmax] for every class (a class nothing matches has share infinity).

    Returns (k_map_level, (share_min, share_max), problems): the fewest people a class matches and
    the range of the shares (None for an empty release)."""
    people = Counter()
    for i, row in enumerate(population_rows):
        people[tuple(None if v is None else str(v) for v in row)] += 1 if weights is None else weights[i]
    sizes = Counter(tuple(row[j] for j in qi_idx) for row in published_rows)
    published_labels = [{key[j] for key in sizes} for j in range(len(qi_idx))]
    # each population vector adds its people to every published class it can be generalized to
    matches = Counter()
    for values, count in people.items():
        options = [sorted(ancestors[j][v] & published_labels[j], key=str) for j, v in enumerate(values)]
        for labels in itertools.product(*options):
            if labels in sizes:
                matches[labels] += count
    problems = []
    shares = []
    for key, size in sizes.items():
        matched = matches[key]
        share = size / matched if matched else math.inf
        shares.append(share)
        if k_map is not None and matched < k_map:
            problems.append(f"class {key} matches {matched} < {k_map} people of the population")
        if delta_presence is not None and not (delta_presence[0] - 1e-12 <= share <= delta_presence[1] + 1e-12):
            problems.append(f"class {key} holds {size} of its {matched} population rows, outside {delta_presence}")
    level = min(matches[key] for key in sizes) if sizes else None
    return level, ((min(shares), max(shares)) if shares else None), problems


def check_population_uniqueness(published_rows, qi_idx, u, population_size, estimator) -> list[str]:
    """Population uniqueness is an estimate (Pitman, Zayatz, SNB, Dankar's rule): the class sizes
    are counted here from the published rows and handed to duckanon's estimator (tested against
    ARX elsewhere); the release holds when, as ARX accepts it, the estimated share of population
    uniques is in (0, u], or 0 with no sample unique."""
    from duckanon.solver.population import population_uniques

    sizes = class_sizes(published_rows, qi_idx)
    if not sizes:
        return []
    fraction = population_uniques(sizes, population_size, estimator).fraction
    if fraction > 0 and fraction > u * (1 + 1e-12):
        return [f"estimated population uniques {fraction:.6g} > {u}"]
    if fraction == 0 and 1 in sizes:
        return ["no estimate (0) while the release has sample uniques"]
    return []


def kmap_derived_k_reference(k_map, sample_size, population_size, estimator="poisson", significance=0.01) -> int:
    """ARX's derived k for k-map with only a population size (KMap.calculateKPoisson /
    calculateKZeroPoisson, El Emam & Dankar 2008), from the Poisson model with mean
    lambda = k_map * n / N: the smallest j (j >= 0; zero-truncated: j >= 1) whose CDF reaches
    1 - significance, plus 2 (ARX's count; zero-truncated: plus 1), at most k_map and n."""
    lam = k_map * sample_size / population_size
    pmf = lambda j: math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1))  # noqa: E731
    if estimator == "poisson":
        j, cdf = 0, pmf(0)
        while cdf < 1 - significance and j + 2 < k_map:
            j += 1
            cdf += pmf(j)
        return min(j + 2, k_map, sample_size)
    truncation = 1 - math.exp(-lam)
    j, cdf = 1, pmf(1) / truncation
    while cdf < 1 - significance and j + 1 < k_map:
        j += 1
        cdf += pmf(j) / truncation
    return min(j + 1, k_map, sample_size)


# A bug the checks above found (fixed): the cell-suppression methods held delta-disclosure on
# their groups, but groups that publish the same QI vector are one published class, and
# delta-disclosure is not closed under merging. test_fuzz.py's regression test
# test_delta_disclosure_holds_on_the_published_classes publishes these rows.
DELTA_MERGE_ROWS = [(0, 3, "b"), (0, 0, "a"), (3, 2, "a"), (3, 0, "a"), (2, 3, "c"), (1, 3, "c"), (2, 2, "c"),
                    (0, 3, "c"), (3, 1, "b"), (1, 3, "b"), (1, 0, "c"), (3, 2, "b"), (3, 0, "c")]
DELTA_MERGE_STATEMENT = "ANONYMIZE t WITH (qi = (q0, q1), sensitive = s, delta_disclosure = 1.0, method = hilbert, seed = 1)"


def delta_merge_published(con) -> list[tuple]:
    """The bug's reproduction on `con`: the published rows (q0, q1, s)."""
    con.execute("CREATE OR REPLACE TABLE t (q0 INTEGER, q1 INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", DELTA_MERGE_ROWS)
    con.execute(DELTA_MERGE_STATEMENT)
    return con.execute("SELECT q0, q1, s FROM t_anon").fetchall()


def stored_files(spark, table: str) -> dict[str, list[tuple]]:
    """The rows of a Spark table per file (by its part number), each file's rows in stored order."""
    from pyspark.sql import functions as F

    files: dict[str, list[tuple]] = {}
    for row in spark.table(table).withColumn("file", F.input_file_name()).collect():
        files.setdefault(row["file"].rsplit("/", 1)[-1].split("-")[1], []).append(tuple(row)[:-1])
    return files


def database_state(con) -> tuple:
    """Every table and view of every attached database (temp ones too) with its rows: what a
    refused statement must leave as it was (a registry table made on the way would show here)."""
    tables = con.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
    views = con.execute("SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal "
                        "ORDER BY ALL").fetchall()
    rows = {t: sorted(map(repr, con.execute("SELECT * FROM " + ".".join('"' + p.replace('"', '""') + '"' for p in t))
                          .fetchall())) for t in tables}
    return tables, views, rows


def refused_unchanged(con, statement: str, message: str, kind=None) -> None:
    """`statement` is refused with exactly `message` (an AnonymizeError unless `kind`), and every
    database is as it was."""
    import duckanon
    before = database_state(con)
    with pytest.raises(kind or duckanon.AnonymizeError) as caught:
        con.execute(statement)
    assert str(caught.value) == message
    assert database_state(con) == before  # also: no registry table where there was none


@pytest.fixture
def hospital_and_people():
    """An in-memory duckanon connection with the hospital table and a small table `people`
    (id, name, age, sex) whose names are direct identifiers."""
    import duckanon
    con = duckanon.connect()
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.execute("CREATE TABLE people AS SELECT i AS id, 'person ' || i AS name, i % 3 AS age, i % 2 AS sex "
                "FROM range(12) r(i)")
    yield con
    con.close()


def database_file(path, statements) -> "Path":
    """A database file at `path` made by running `statements` through duckanon, then closed."""
    import duckanon
    con = duckanon.connect(str(path))
    for statement in statements:
        con.execute(statement)
    con.close()
    return path
