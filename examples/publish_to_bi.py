"""Publish to BI: anonymize in one database, write the release to a separate DuckDB file and to
Parquet, then read it the way BI tools do: SQLAlchemy with duckdb-engine (Superset and similar
connect like this: list the table's columns, then query) and the plain DuckDB command-line client.
No duckanon at read time. docs/bi.md covers Superset, Metabase, Tableau/Power BI and Evidence.

    pip install -e ".[bi]" && python examples/publish_to_bi.py [output directory]

The release file is written with STORAGE_VERSION 'v1.5.0', so DuckDB 1.5 readers (the duckdb-cli
package, 1.5 ODBC/JDBC drivers) open it even when the publisher runs DuckDB 2.x. Readers open it
read-only: any number of them at once, but none while the publisher holds it (and the publisher
cannot rewrite it while one of them holds it).
"""

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import duckanon

HOSPITAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "hospital.csv"


def duckdb_cli() -> str:
    """The `duckdb` executable of the duckdb-cli package next to this interpreter, else on PATH."""
    cli = (shutil.which("duckdb", path=sysconfig.get_path("scripts"))
           or shutil.which("duckdb", path=str(Path(sys.executable).parent))
           or shutil.which("duckdb"))
    if cli is None:
        sys.exit("the duckdb command-line client is missing: pip install duckdb-cli (in the `bi` extra)")
    return cli


def main(out: str = "release") -> None:
    out_dir = Path(out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    release_db, parquet = out_dir / "release.duckdb", out_dir / "patients.parquet"
    release_db.unlink(missing_ok=True)

    # 1. Anonymize next to the raw data (in memory here), publish into a separate database file,
    #    in the storage format of DuckDB 1.5 so 1.5 clients and drivers can open it too.
    con = duckanon.connect()
    con.execute(f"CREATE TABLE patients AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.execute(f"ATTACH '{release_db}' AS release (STORAGE_VERSION 'v1.5.0')")
    summary = con.execute("ANONYMIZE patients INTO release.patients "
                          "WITH (k = 3, qi = (zipcode, age, education), sensitive = disease)").fetchone()
    print("published", summary[0], "rows,", summary[3], "stars")
    con.execute(f"COPY release.patients TO '{parquet}' (FORMAT parquet)")
    con.execute("DETACH release")
    con.close()  # release the file: readers cannot open it while a writer holds it

    # 2. A BI tool's view: SQLAlchemy + duckdb-engine on the release file, read-only, with the URI
    #    Superset takes. It lists the columns first (the call that fails with SQLAlchemy 2.1).
    import sqlalchemy
    from sqlalchemy import create_engine, text

    engine = create_engine(f"duckdb:///{release_db}?access_mode=read_only")
    try:
        columns = sqlalchemy.inspect(engine).get_columns("patients")
    except sqlalchemy.exc.ProgrammingError as error:
        sys.exit(f"SQLAlchemy {sqlalchemy.__version__} cannot list the columns of a DuckDB table "
                 f"(duckdb-engine reflection, see docs/bi.md): install 'sqlalchemy>=2.0,<2.1'.\n"
                 f"{str(error).splitlines()[0]}")
    print("SQLAlchemy/duckdb-engine columns:", [(c["name"], str(c["type"])) for c in columns])
    with engine.connect() as bi:
        rows = bi.execute(text("SELECT disease, count(*) AS n FROM patients GROUP BY disease ORDER BY disease")).fetchall()
        print("SQLAlchemy/duckdb-engine:", rows)
    engine.dispose()

    # 3. The plain DuckDB CLI (no Python involved) on the Parquet file and on the release file.
    cli = duckdb_cli()
    out = subprocess.run([cli, "-csv", "-c", f"SELECT count(*) AS n, count(DISTINCT zipcode) AS zips FROM '{parquet}'"],
                         capture_output=True, text=True, check=True)
    print("duckdb CLI:", out.stdout.strip().replace("\n", " | "))
    out = subprocess.run([cli, "-readonly", "-csv", str(release_db), "-c",
                          "SELECT count(*) AS classes, min(size) AS smallest_class FROM "
                          "(SELECT count(*) AS size FROM patients GROUP BY zipcode, age, education)"],
                         capture_output=True, text=True, check=True)
    print("duckdb CLI on release.duckdb (read-only):", out.stdout.strip().replace("\n", " | "))


if __name__ == "__main__":
    main(*sys.argv[1:])
