"""The DuckDB backend's answers to the registry (KeepsRegistry) and to the statements, against
DuckDB's own catalog: every value checked, names compared without case as DuckDB does."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp

from duckanon.backends import DuckDBBackend
from duckanon.backends.base import Backend, Database, KeepsRegistry, UnknownTable
from duckanon.backends.spark import SparkBackend
from duckanon.names import TableName


@pytest.fixture
def con(tmp_path):
    con = duckdb.connect()
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS Other")
    con.execute("CREATE TABLE t (a INTEGER, b VARCHAR[], c JSON)")
    con.execute("COMMENT ON TABLE t IS 'a table'")
    con.execute("CREATE VIEW v AS SELECT a FROM t")
    con.execute("COMMENT ON VIEW v IS 'a view'")
    con.execute("CREATE TABLE Other.main.t (x BIGINT)")
    yield con
    con.close()


def test_the_duckdb_backend_keeps_a_registry_and_spark_does_not():
    assert issubclass(DuckDBBackend, KeepsRegistry) and DuckDBBackend.keeps_registry
    assert not issubclass(SparkBackend, KeepsRegistry) and not SparkBackend.keeps_registry
    assert not Backend.keeps_registry


def test_databases_as_attached(con, tmp_path):
    backend = DuckDBBackend(con)
    found = {d.name: d for d in backend.databases()}
    assert found["memory"] == Database("memory", None, False, "duckdb", False)
    assert found["Other"] == Database("Other", str(tmp_path / "other.duckdb"), False, "duckdb", False)
    assert found["system"].internal and found["temp"].internal
    assert backend.database("other") == found["Other"] and backend.database("nowhere") is None


def test_objects_columns_and_holders(con):
    backend = DuckDBBackend(con)
    assert backend.find_object("MEMORY", "Main", "T") == ("table", "a table")
    assert backend.find_object("memory", "main", "v") == ("view", "a view")
    assert backend.find_object("memory", "main", "w") is None
    assert backend.find_object("other", "main", "t") == ("table", None)
    assert backend.table_columns("memory", "main", "t") == [("a", "INTEGER"), ("b", "VARCHAR[]"), ("c", "JSON")]
    assert backend.databases_holding("main", "T") == ["Other", "memory"]  # DuckDB's ORDER BY of the names
    con.execute("CREATE TEMP TABLE lone (a INTEGER)")
    assert backend.databases_holding("main", "lone") == []  # temporary tables hold no registry


def test_the_object_a_table_hierarchy_reads(con, tmp_path):
    backend = DuckDBBackend(con)
    assert backend.hierarchy_table("t") == ("memory", "main", "t")
    assert backend.hierarchy_table("v") == ("memory", "main", "v")
    assert backend.hierarchy_table("other.t") == ("Other", "main", "t")
    assert backend.hierarchy_table("missing") is None
    assert backend.hierarchy_table("not a name (") is None
    path = tmp_path / "h.csv"
    path.write_text("a,b\n1,2\n")
    assert backend.hierarchy_table(str(path)) is None  # a file: no catalog object


def test_a_separate_session_has_its_own_transaction(con):
    backend = DuckDBBackend(con)
    with backend.separate_session() as session:
        assert isinstance(session, KeepsRegistry) and session.session() is not backend.session()
        session.begin()
        session.execute(exp.insert(exp.select(exp.Literal.number(7), exp.Null(), exp.Null()), "t"))
        assert backend.one(exp.select(exp.func("count", exp.Star())).from_("t")) == (0,)  # not committed yet
        session.commit()
    assert backend.one(exp.select(exp.func("count", exp.Star())).from_("t")) == (1,)


def test_macros_and_the_catalog_relations(con, tmp_path):
    backend = DuckDBBackend(con)
    backend.create_scalar_macro("twice", ["x"], exp.Mul(this=exp.column("x"), expression=exp.Literal.number(2)))
    backend.create_table_macro("listed", exp.select(exp.alias_(exp.func("twice", exp.Literal.number(21)), "n")))
    assert con.execute("SELECT * FROM listed()").fetchall() == [(42,)]
    objects = backend.rows(exp.select(exp.Star()).from_(backend.objects_relation().subquery("o")).where(
        exp.column("schema_name").eq("main")).order_by("database_name", "name"))
    assert objects == [("Other", "main", "t", None), ("memory", "main", "t", "a table"),
                       ("memory", "main", "v", "a view")]
    databases = dict((name, (readonly, path)) for name, readonly, path in backend.rows(
        backend.databases_relation()))
    assert databases["Other"] == (False, str(tmp_path / "other.duckdb")) and databases["memory"] == (False, None)


def test_the_names_statements_ask_about(con):
    backend = DuckDBBackend(con)
    assert backend.named_object(TableName(exp.to_table("other.t"))).key() == ("other", "main", "t")
    assert backend.named_object(TableName(exp.to_table("gone"))).key() == ("memory", "main", "gone")
    assert backend.lone_name_in_catalog("T") and backend.lone_name_in_catalog("v")
    assert not backend.lone_name_in_catalog("frame")
    assert backend.read_by_lone_name(TableName(exp.to_table("t"))).key() == ("memory", "main", "t")
    assert backend.read_by_lone_name(TableName(exp.to_table("other.t"))) is None  # other.main is not searched


def test_a_python_table_registered_for_the_statement(con):
    backend = DuckDBBackend(con)
    backend.register_python("frame", pa.table({"a": [1, 2, 3]}))
    assert backend.one(exp.select(exp.func("sum", exp.column("a"))).from_("frame")) == (6,)
    assert "frame" not in backend.registered  # the work's commit does not let go of it
    backend.unregister_python("frame")
    backend.unregister_python("frame")  # twice: nothing to let go of, no error
    with pytest.raises(UnknownTable):
        backend.one(exp.select(exp.Star()).from_("frame"))


def test_the_report_macros_are_installed_once(con):
    backend = DuckDBBackend(con)
    backend.install_macros()
    count = con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'anon_%'").fetchone()[0]
    backend.install_macros()
    assert count > 0 and con.execute(
        "SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'anon_%'").fetchone()[0] == count


def test_the_replacement_scan_settings(con):
    """What Caller.find reads: replacement scans on (and file access), and whether outer frames count."""
    backend = DuckDBBackend(con)
    assert backend.replacement_scans() == (True, False)
    con.execute("SET python_scan_all_frames = true")
    assert backend.replacement_scans() == (True, True)
    con.execute("SET python_enable_replacements = false")
    assert backend.replacement_scans() == (False, True)
    con.execute("SET python_enable_replacements = true")
    con.execute("SET enable_external_access = false")
    assert backend.replacement_scans() == (False, True)
