"""The main job on the embedded default: anonymize the shared hospital table in an in-memory DuckDB.

    python examples/hospital.py [OUTPUT_DIR]

The HTML report goes to OUTPUT_DIR (default: examples/output/ beside this file). It needs the
report extra (pip install 'duckanon[report]'); without it the example says so and runs the rest.
"""

import sys
from pathlib import Path

import duckanon

HOSPITAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "hospital.csv"
OUTPUT = Path(__file__).resolve().parent / "output"


def main(output: str | Path = OUTPUT) -> None:
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
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
    try:
        report = con.execute(f"REPORT hospital_anon FROM hospital WITH (file = '{output / 'hospital_report.html'}')")
        print("Report written to", report.fetchone()[0])
    except duckanon.AnonymizeError as refused:  # the plots need the report extra
        print(f"No report: {refused}")


if __name__ == "__main__":
    main(*sys.argv[1:])
