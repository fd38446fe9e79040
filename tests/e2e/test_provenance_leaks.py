"""A release file handed over alone reveals nothing about the source (issue 35, item 2): releases
from a CSV path, a temp table, a read-only attached database and a plain table, with dropped
columns, identifiers, a hierarchy file under a secret directory, a `table(name)` hierarchy,
rows removed under suppression_limit and k_map against a population table, all published into
another file; that file is then opened ALONE, read-only, with plain duckdb, and every comment,
view, macro and its raw bytes are searched for what only the source's side knows."""

import json

import duckdb
import pytest

import duckanon
from duckanon.pipeline import provenance
from duckanon.pipeline.provenance import HIERARCHY_FILE, HIERARCHY_TABLE

from support.data import SHARED
from support.report_pages import section, table_rows

SOURCE_ROWS = 2000
POPULATION_ROWS = 3000
# every name of the source's side; none is published
# (ssn_zq is published masked by two releases: its name is the release's too)
SECRET_COLUMNS = ("patient_name_zq", "unmentioned_zq")
OUTLIERS = 53  # rows with a zipcode of their own: the lattice removes them rather than generalize every zipcode
SECRET_NAMES = ("secret_dir_zq", "hospital_zip_hierarchy_zq", "secret_csv_src_zq", "secret_temp_src_zq",
                "secret_ro_db_zq", "secret_ro_src_zq", "secret_ro_file_zq", "secret_plain_src_zq",
                "secret_zip_hier_tbl_zq", "secret_population_tbl_zq")


def _source_sql(rows: int, seed: int) -> str:
    """A deterministic table of people: QIs, a sensitive column and the secret columns."""
    return (f"SELECT 'name ' || i AS patient_name_zq, lpad(CAST(hash(i + {seed}) % 1000000000 AS VARCHAR), 9, '0') "
            f"AS ssn_zq, i AS unmentioned_zq, CAST(CASE WHEN i < {OUTLIERS} THEN 99000 + i "
            f"ELSE 98100 + (hash(i * 7 + {seed}) % 40) END AS VARCHAR) AS zipcode, "
            f"CAST(18 + hash(i * 13 + {seed}) % 70 AS BIGINT) AS age, "
            f"['Bachelor', 'Masters', 'Doctorate', 'HS-grad'][CAST(1 + hash(i * 3 + {seed}) % 4 AS BIGINT)] AS education, "
            f"['Flu', 'Cancer', 'Gastritis', 'Heart Disease', 'Viral Infection'][CAST(1 + hash(i * 5 + {seed}) % 5 AS BIGINT)] "
            f"AS disease FROM range({rows}) AS r(i)")


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaks")
    secret_dir = folder / "secret_dir_zq"
    secret_dir.mkdir()
    con = duckanon.connect()
    db = con.duckdb
    db.execute(f"CREATE TABLE secret_plain_src_zq AS {_source_sql(SOURCE_ROWS, 1)}")
    csv_path = secret_dir / "secret_csv_src_zq.csv"
    db.execute(f"COPY secret_plain_src_zq TO '{csv_path}' (HEADER)")
    db.execute(f"CREATE TEMP TABLE secret_temp_src_zq AS {_source_sql(SOURCE_ROWS, 2)}")
    ro_file = folder / "secret_ro_file_zq.duckdb"
    db.execute(f"ATTACH '{ro_file}' AS w")
    db.execute(f"CREATE TABLE w.secret_ro_src_zq AS {_source_sql(SOURCE_ROWS, 3)}")
    db.execute("DETACH w")
    db.execute(f"ATTACH '{ro_file}' AS secret_ro_db_zq (READ_ONLY)")
    # the population: the plain source's people and more
    db.execute(f"CREATE TABLE secret_population_tbl_zq AS SELECT zipcode, age, education FROM secret_plain_src_zq "
               f"UNION ALL SELECT zipcode, age, education FROM ({_source_sql(POPULATION_ROWS - SOURCE_ROWS, 9)})")
    zips = [row[0] for row in db.execute("SELECT DISTINCT zipcode FROM secret_population_tbl_zq ORDER BY 1").fetchall()]
    hierarchy_file = secret_dir / "hospital_zip_hierarchy_zq.csv"
    hierarchy_file.write_text("".join(f"{z};{z[:4]}*;{z[:3]}**;*\n" for z in zips))
    db.execute("CREATE TABLE secret_zip_hier_tbl_zq (value VARCHAR, l1 VARCHAR, l2 VARCHAR, l3 VARCHAR)")
    db.executemany("INSERT INTO secret_zip_hier_tbl_zq VALUES (?, ?, ?, ?)",
                   [(z, z[:4] + "*", z[:3] + "**", "*") for z in zips])
    release = folder / "release.duckdb"
    db.execute(f"ATTACH '{release}' AS rel")
    masked = "identifiers = (patient_name_zq, ssn_zq), mask = (ssn_zq = 'partial(0, 2)')"
    results = {}
    statements = {
        "from_csv": f"ANONYMIZE \"{csv_path}\" INTO rel.from_csv WITH (k = 5, qi = (zipcode, age), sensitive = disease, "
                    f"identifiers = (patient_name_zq, ssn_zq))",
        # greedy: what this release is for is its masks and temp source, not the method; `auto` on
        # these 2,000 nearly unique rows took most of the module's time (its MILP and local search)
        "from_temp": f"ANONYMIZE secret_temp_src_zq INTO rel.from_temp WITH (k = 5, qi = (zipcode, age, education), "
                     f"sensitive = disease, method = 'greedy', {masked})",
        "from_ro": f"ANONYMIZE secret_ro_db_zq.secret_ro_src_zq INTO rel.from_ro WITH (k = 10, qi = (zipcode, age), "
                   f"sensitive = disease, keep = education, method = 'lattice', suppression_limit = 0.1, "
                   f"hierarchies = (zipcode = '{hierarchy_file}', age = 'intervals(5, 10, 20)'), {masked})",
        "from_plain": "ANONYMIZE secret_plain_src_zq INTO rel.from_plain WITH (k_map = 3, "
                      "population = secret_population_tbl_zq, qi = (zipcode, age), sensitive = disease, "
                      "method = 'lattice', hierarchies = (zipcode = 'table(secret_zip_hier_tbl_zq)', "
                      "age = 'intervals(5, 10, 20)'), suppression_limit = 0.05)",
        "from_view": "ANONYMIZE secret_plain_src_zq INTO rel.from_view WITH (k = 5, qi = (zipcode, age), "
                     "sensitive = disease, materialize = 'view')",
    }
    for name, statement in statements.items():
        cursor = con.execute(statement)
        columns = [d[0] for d in cursor.description]
        results[name] = dict(zip(columns, cursor.fetchone()))
    db.execute("CHECKPOINT rel")
    db.execute("DETACH rel")
    con.close()
    return release, results, str(secret_dir), str(hierarchy_file), str(csv_path), str(ro_file)


def _numbers(value):
    """Every number in a JSON value (keys excluded)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def _file_texts(release) -> dict[str, str]:
    """Everything the release file says of itself, opened alone and read-only by plain duckdb."""
    alone = duckdb.connect(str(release), read_only=True)
    try:
        texts = {}
        for name, comment, sql in alone.execute("SELECT table_name, comment, sql FROM duckdb_tables()").fetchall():
            texts[f"table {name}"] = f"{comment or ''}\n{sql or ''}"
        for table, column, comment in alone.execute(
                "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal").fetchall():
            texts[f"column {table}.{column}"] = f"{column}\n{comment or ''}"
        for name, comment, sql in alone.execute(
                "SELECT view_name, comment, sql FROM duckdb_views() WHERE NOT internal").fetchall():
            texts[f"view {name}"] = f"{comment or ''}\n{sql or ''}"
        for name, macro in alone.execute(
                "SELECT function_name, macro_definition FROM duckdb_functions() WHERE NOT internal "
                "AND database_name = 'release'").fetchall():
            texts[f"macro {name}"] = f"{name}\n{macro or ''}"
        for (name,) in alone.execute("SELECT sequence_name FROM duckdb_sequences()").fetchall():
            texts[f"sequence {name}"] = name
        return texts
    finally:
        alone.close()


def test_every_release_was_made_as_asked(release_file):
    _, results, *_ = release_file
    assert results["from_ro"]["removed_rows"] > 0  # the attack's case: rows removed, source count hidden
    assert results["from_ro"]["rows"] == SOURCE_ROWS
    assert results["from_ro"]["published_rows"] == SOURCE_ROWS - results["from_ro"]["removed_rows"]
    assert json.loads(results["from_plain"]["details"])["population"]["population_rows"] == POPULATION_ROWS
    for name in results:  # the caller's result row still says everything
        assert results[name]["rows"] == SOURCE_ROWS
        assert "patient_name_zq" in results[name]["dropped"] and "unmentioned_zq" in results[name]["dropped"]


def test_no_secret_name_in_any_comment_view_or_macro(release_file):
    release, _, secret_dir, hierarchy_file, csv_path, ro_file = release_file
    secrets = SECRET_COLUMNS + SECRET_NAMES + (secret_dir, hierarchy_file, csv_path, ro_file)
    texts = _file_texts(release)
    assert {f"table {name}" for name in ("from_csv", "from_temp", "from_ro", "from_plain")} | {"view from_view"} \
        <= set(texts)
    found = [(where, secret) for where, text in texts.items() for secret in secrets if secret.lower() in text.lower()]
    assert found == []


def test_the_comments_hold_no_source_or_population_count(release_file):
    release, results, *_ = release_file
    alone = duckdb.connect(str(release), read_only=True)
    comments = dict(alone.execute("SELECT table_name, comment FROM duckdb_tables() UNION ALL "
                                  "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall())
    alone.close()
    for name, result in results.items():
        provenance = json.loads(comments[name][len("duckanon "):])
        numbers = set(_numbers(provenance))
        assert POPULATION_ROWS not in numbers, name
        if result["removed_rows"]:  # (without, the published rows are the source's: the release's own figure)
            assert SOURCE_ROWS not in numbers and result["removed_rows"] not in numbers, name
            # nor a figure that gives them back: a column left at level 0 loses removed / source rows
            assert {"loss", "column_loss"}.isdisjoint(provenance["summary"]["details"]), name
            assert result["removed_rows"] / SOURCE_ROWS in json.loads(result["details"])["column_loss"].values() \
                or name != "from_ro"
        else:
            assert provenance["summary"]["details"]["column_loss"] == json.loads(result["details"])["column_loss"]
        summary = provenance["summary"]
        assert summary["published_rows"] == result["published_rows"]
        assert summary["classes"] == result["classes"] and summary["stars"] == result["stars"]
        assert {"rows", "removed_rows", "lower_bound", "dropped", "seconds"}.isdisjoint(summary)
        assert "population" not in summary["details"]
        assert set(provenance["roles"]) <= {"zipcode", "age", "education", "disease", "ssn_zq"}
    from_ro = json.loads(comments["from_ro"][len("duckanon "):])
    assert from_ro["hierarchies"] == {"zipcode": HIERARCHY_FILE, "age": "intervals(5, 10, 20)"}
    assert from_ro["roles"] == {"zipcode": "quasi-identifier", "age": "quasi-identifier", "education": "keep",
                                "disease": "sensitive", "ssn_zq": "identifier, masked: partial(0, 2)"}
    assert from_ro["suppression_limit"] == 0.1 and from_ro["k"] == 10 and from_ro["method"] == "lattice"
    assert from_ro["summary"]["details"]["levels"] == json.loads(results["from_ro"]["details"])["levels"]
    from_plain = json.loads(comments["from_plain"][len("duckanon "):])
    assert from_plain["hierarchies"]["zipcode"] == HIERARCHY_TABLE
    assert from_plain["population"] == "a table (k_map, delta_presence)" and from_plain["k_map"] == 3


def test_no_secret_in_the_raw_bytes_of_the_file(release_file):
    release, _, secret_dir, hierarchy_file, csv_path, ro_file = release_file
    secrets = SECRET_COLUMNS + SECRET_NAMES + (secret_dir, hierarchy_file, csv_path, ro_file)
    wal = release.with_name(release.name + ".wal")
    raw = release.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert [secret for secret in secrets if secret.encode() in raw] == []
    assert b"name 1" not in raw  # no value of a dropped identifier either


def test_report_later_reads_the_rest_from_the_original(release_file, tmp_path):
    """REPORT, given the release and its original, takes what the comment no longer holds from the
    original: its dropped columns (as dropped) and its rows (so the removed rows)."""
    release, results, *_, ro_file = release_file
    con = duckanon.connect()
    con.duckdb.execute(f"ATTACH '{ro_file}' AS src (READ_ONLY)")
    con.duckdb.execute(f"ATTACH '{release}' AS rel (READ_ONLY)")
    path = tmp_path / "later.html"
    con.execute(f"REPORT rel.from_ro FROM src.secret_ro_src_zq WITH (file = '{path}')")
    con.close()
    page = path.read_text(encoding="utf-8")
    roles = table_rows(section(page, "Column roles"))
    assert {column: shown[0] for column, shown in roles.items()} == {
        "patient_name_zq": "dropped", "ssn_zq": "identifier, masked: partial(0, 2)", "unmentioned_zq": "dropped",
        "zipcode": "quasi-identifier", "age": "quasi-identifier", "education": "keep", "disease": "sensitive"}
    removed = results["from_ro"]["removed_rows"]
    assert f"{removed} rows ({removed / SOURCE_ROWS:.1%}) removed" in page


def test_write_release_labels_takes_a_table_hierarchy_from_the_caller():
    """The comment records a `table(name)` hierarchy as its kind: write_release_labels refuses in
    one line without the caller's spec (nothing written), and with it writes the labels."""
    from duckanon.report.population import write_release_labels

    con = duckanon.connect()
    db = con.duckdb
    db.execute(f"CREATE TABLE s AS {_source_sql(400, 4)}")
    db.execute(f"CREATE TABLE pop AS SELECT zipcode, age FROM s UNION ALL SELECT zipcode, age FROM "
               f"({_source_sql(600, 5)})")
    db.execute("CREATE TABLE zh AS SELECT DISTINCT zipcode AS v, left(zipcode, 3) || '**' AS l1, '*' AS l2 FROM pop")
    con.execute("ANONYMIZE s INTO r WITH (k_map = 3, population = pop, qi = (zipcode, age), method = lattice, "
                "hierarchies = (zipcode = 'table(zh)', age = 'intervals(5, 10, 20)'), suppression_limit = 0.05)")
    levels = json.loads(con.fetchone()[-1])["levels"]
    assert levels[0] > 0  # zipcode generalized: its labels are needed
    with pytest.raises(duckanon.AnonymizeError) as error:
        write_release_labels(con, "r", "pop", "r_labels")
    assert str(error.value) == ("the provenance of r does not record which hierarchy table zipcode was generalized "
                                "by (a file or table hierarchy is recorded as its kind only): give it as "
                                "hierarchies = {'zipcode': '<spec>'}")
    assert db.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'r_labels'").fetchone() == (0,)
    written = write_release_labels(con, "r", "pop", "r_labels", hierarchies={"zipcode": "table(zh)"})
    labels = db.execute("SELECT value, label FROM r_labels WHERE \"column\" = 'zipcode' ORDER BY ALL").fetchall()
    expected = db.execute(f"SELECT v, l{levels[0]} FROM zh ORDER BY ALL").fetchall()
    assert labels == expected and written >= len(expected)
    con.close()


@pytest.mark.parametrize("options", [
    "k = 3, qi = (age, education, sex)",  # auto: exact's refusal counts integer variables (2,921)
    "k = 3, qi = (age, sex), sensitive = occupation, keep = (education)",
    "l = 2, qi = (age, sex), sensitive = occupation, method = 'tp'",  # tp_phase, bound
    "average_risk = 0.2, qi = (age, sex, education), method = 'greedy'",  # merged_for
])
def test_the_comment_holds_no_solver_diagnostic(options):
    """The solver's notes say how the search over the source's classes went (exact's integer
    variables, TP's phase, the merges for a global model): none of them is in the comment."""
    con = duckanon.connect()
    con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv('{SHARED / 'adult' / 'adult.csv'}', delim = ';') LIMIT 800")
    con.execute(f"ANONYMIZE src INTO o WITH ({options}, seed = 1)")
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'o'").fetchone()[0]
    details = json.loads(comment[len("duckanon "):])["summary"]["details"]
    assert set(details) <= set(provenance.RELEASE_DETAILS), sorted(set(details) - set(provenance.RELEASE_DETAILS))
    for diagnostic in ("exact", "tp_phase", "bound", "merged_for", "incumbent_from", "time_limit",
                       "sensitive_in_solver", "algorithm"):
        assert diagnostic not in details
    assert "integer variables" not in comment
    con.close()
