"""Publish to BI: anonymize in one database, write the release to a separate DuckDB file and to
Parquet, then read it the way BI tools do: SQLAlchemy with duckdb-engine (Superset and similar
connect like this) and the plain DuckDB command-line client. No duckanon at read time.

    pip install -e ".[bi]" && python examples/publish_to_bi.py [output directory]
"""

import subprocess
import sys
from pathlib import Path

import duckanon

HOSPITAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "hospital.csv"


def main(out: str = "release") -> None:
    out_dir = Path(out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    release_db, parquet = out_dir / "release.duckdb", out_dir / "patients.parquet"
    release_db.unlink(missing_ok=True)

    # 1. Anonymize next to the raw data (in memory here), publish into a separate database file.
    con = duckanon.connect()
    con.execute(f"CREATE TABLE patients AS SELECT * FROM read_csv('{HOSPITAL}')")
    con.execute(f"ATTACH '{release_db}' AS release")
    summary = con.execute("ANONYMIZE patients INTO release.patients "
                          "WITH (k = 3, qi = (zipcode, age, education), sensitive = disease)").fetchone()
    print("published", summary[0], "rows,", summary[3], "stars")
    con.execute(f"COPY release.patients TO '{parquet}' (FORMAT parquet)")
    con.execute("DETACH release")
    con.close()

    # 2. A BI tool's view: SQLAlchemy + duckdb-engine on the release file, read-only.
    from sqlalchemy import create_engine, text

    engine = create_engine(f"duckdb:///{release_db}", connect_args={"read_only": True})
    with engine.connect() as bi:
        rows = bi.execute(text("SELECT disease, count(*) AS n FROM patients GROUP BY disease ORDER BY disease")).fetchall()
        print("SQLAlchemy/duckdb-engine:", rows)
    engine.dispose()

    # 3. The plain DuckDB CLI on the Parquet file (no Python involved).
    cli = subprocess.run(["duckdb", "-csv", "-c", f"SELECT count(*) AS n, count(DISTINCT zipcode) AS zips FROM '{parquet}'"],
                         capture_output=True, text=True, check=True)
    print("duckdb CLI:", cli.stdout.strip().replace("\n", " | "))


if __name__ == "__main__":
    main(*sys.argv[1:])
