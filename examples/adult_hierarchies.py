"""Adult with ARX's generalization hierarchies: compare k values, then publish the optimal
full-domain generalization with a 2% record-suppression limit, and write an HTML report.

    python examples/adult_hierarchies.py [report.html]

The report goes to examples/output/adult_report.html unless a path is given (it needs
pip install 'duckanon[report]').
"""

import sys
from pathlib import Path

import duckanon

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
QI = '(sex, age, race, "marital-status", education, "native-country", workclass)'
OPTIONS = (f"qi = {QI}, sensitive = occupation, l = 2, method = 'lattice', suppression_limit = 0.02, "
           f"hierarchies = '{ADULT}/adult_hierarchy_{{column}}.csv'")


def main(report: str | Path = Path(__file__).resolve().parent / "output" / "adult_report.html") -> None:
    Path(report).parent.mkdir(parents=True, exist_ok=True)
    con = duckanon.connect()
    con.execute(f"CREATE TABLE adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim = ';')")
    print("Loss and risk against k (nothing written):")
    con.sql(f"EXPLAIN ANONYMIZE adult WITH (k = (5, 20), {OPTIONS})").show()
    print(f"Publishing k = 5 and writing {report}:")
    con.sql(f"ANONYMIZE adult WITH (k = (5, 20), {OPTIONS}, report = '{report}')").show()
    con.sql("SELECT * FROM adult_anon LIMIT 5").show()
    con.sql("SELECT * FROM anon_k('adult_anon', ['sex', 'age', 'race', 'marital-status', 'education', "
            "'native-country', 'workclass'])").show()


if __name__ == "__main__":
    main(*sys.argv[1:])
