"""The main job on the embedded default: anonymize the shared hospital table in an in-memory DuckDB.

    python examples/hospital.py
"""

from pathlib import Path

import duckanon

HOSPITAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "hospital.csv"


def main() -> None:
    con = duckanon.connect()  # in-memory; duckanon.connect("file.duckdb") for a file
    con.execute(f"CREATE TABLE hospital AS SELECT * FROM read_csv('{HOSPITAL}')")
    print("Source table:")
    con.sql("SELECT * FROM hospital").show()

    statement = "ANONYMIZE hospital WITH (k = 3, l = 2, qi = (zipcode, age, education), sensitive = disease)"
    print(statement)
    con.sql(statement).show()
    con.sql("SELECT * FROM hospital_anon").show()

    print("Independent check with the installed SQL macros:")
    con.sql("SELECT * FROM anon_report('hospital_anon', ['zipcode', 'age', 'education'], 'disease')").show()

    # The release's own record: its provenance comment, and an HTML report (plots, risk, loss)
    print("Provenance:", con.duckdb.execute("SELECT comment FROM duckdb_tables() "
                                            "WHERE table_name = 'hospital_anon'").fetchone()[0])
    con.sql("REPORT hospital_anon FROM hospital WITH (file = 'hospital_report.html')").show()


if __name__ == "__main__":
    main()
