"""An HTML report for the adult census table at k = 5, with a sweep over k to pick the knee.

    python examples/report_adult.py [out.html]
"""

import sys
import time
from pathlib import Path

import duckanon
from duckanon.report import write_report

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.csv"
QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
SA = "salary-class"


def anonymize(con, k: int) -> dict:
    qi = ", ".join(f'"{c}"' for c in QI)
    cursor = con.execute(f'ANONYMIZE adult WITH (k = {k}, qi = ({qi}), sensitive = "{SA}")')
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


def main(out: str = "adult_report.html") -> None:
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT}', delim = ';')")
    sweep = []
    for k in (2, 5, 10, 20):
        summary = anonymize(con, k)
        risk = con.duckdb.execute("SELECT highest_risk, average_risk FROM anon_risk('adult_anon', ?)", [QI]).fetchone()
        sweep.append({"k": k, "stars": summary["stars"], "suppressed_rows": summary["suppressed_rows"],
                      "highest_risk": risk[0], "average_risk": risk[1], "seconds": summary["seconds"]})
    summary = anonymize(con, 5)  # the table the report describes
    started = time.perf_counter()
    path = write_report(con, "adult_anon", "adult", QI, SA, out, summary=summary,
                        params={"k": 5, "qi": QI, "sensitive": SA}, sweep=sweep)
    print(f"wrote {path} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
