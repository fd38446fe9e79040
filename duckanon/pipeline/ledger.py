"""The privacy ledger: what every differentially private release spent, per source table.

A table `duckanon_privacy_ledger` in the source's database (beside the registry,
`<database>.main`) holds one row per private release: the source as identifier parts (its schema
and name; the database is the ledger's own, so sources of two attached databases, or of two
schemas of one, never share a total), the (epsilon, delta) the statement spent, the statement
(ANONYMIZE or REFRESH), its target, the release id (registry.Recording.release_id) and the time.
The row is written inside the release's transaction (ANONYMIZE, REFRESH, each call of `SELECT
anonymize(...)`): a statement that fails or is rolled back records nothing, and a release that
commits is recorded with it. EXPLAIN reads the ledger and writes nothing.

The accounting is sequential composition: the releases of one source together are
(sum of epsilons, sum of deltas)-differentially private. The sums are exact (Fractions of the
doubles spent, so the order of the rows never changes them), then one float. With
`budget = (epsilon_total, delta_total)` a statement is refused, before the source is read and with
the database unchanged, when the total after it would exceed either part.

The ledger is trusted as far as the database's writers are (as the registry is,
docs/refresh.md): whoever can write the database can delete its rows. Its rows are read as data
(placeholders in a sqlglot query with quoted identifiers); a row whose epsilon or delta is not a
finite number >= 0 makes the total unknown, and a statement with a budget on that source is
refused until the row is mended or deleted. A table of that name duckanon did not make (its
comment and exact columns) is never written or read.

Where the release's transaction cannot write the ledger (the source is temporary, a file or a
DataFrame, its database is read-only or not DuckDB, the target is in another database: DuckDB
commits one database per transaction), the release says why in
`details.differential_privacy.ledger`, and a statement with a budget is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction

from sqlglot import exp

from duckanon._version import __version__
from duckanon.backends.base import Backend, BackendError
from duckanon.errors import AnonymizeError
from duckanon.sql.options import DELTA_RANGE, EPSILON_LIMIT
from duckanon.names import LEDGER_TABLE, TableName, shown_name
from duckanon.pipeline.plan import Plan
from duckanon.pipeline.registry_state import registry_backend
from duckanon.pipeline.registry_statement import quoted_identifier, table_of

LEDGER = LEDGER_TABLE
LEDGER_COMMENT = 'duckanon privacy ledger {"format": 1}'
COLUMNS = {
    "source_schema": "VARCHAR", "source_name": "VARCHAR", "epsilon": "DOUBLE", "delta": "DOUBLE",
    "statement": "VARCHAR", "target_database": "VARCHAR", "target_schema": "VARCHAR", "target_name": "VARCHAR",
    "release": "VARCHAR", "spent_at": "TIMESTAMP", "duckanon_version": "VARCHAR", "last_check": "VARCHAR",
}


def ledger_table(database: str) -> exp.Table:
    return table_of(database, "main", LEDGER)


def ledger_kind(backend: Backend, database: str) -> str | None:
    """'ours' (duckanon's comment and exact columns), 'foreign' (anything else of that name), or None."""
    found = backend.find_object(database, "main", LEDGER)
    if found is None:
        return None
    kind, comment = found
    if kind == "table" and comment == LEDGER_COMMENT and \
            [(name, kind.upper()) for name, kind in backend.table_columns(database, "main", LEDGER)] == list(COLUMNS.items()):
        return "ours"
    return "foreign"


@dataclass(frozen=True)
class Spent:
    """What the ledger holds for one source: exact sums, and the releases counted."""

    epsilon: Fraction
    delta: Fraction
    releases: int

    def plus(self, epsilon: float, delta: float) -> "Spent":
        return Spent(self.epsilon + Fraction(epsilon), self.delta + Fraction(delta), self.releases + 1)

    def shown(self) -> dict:
        return {"epsilon": float(self.epsilon), "delta": float(self.delta), "releases": self.releases}


def _total(exact: Fraction, bound: float) -> str:
    """A total as the refusal shows it: the nearest double, and where that double is not above the
    budget but the exact sum of the stored spends is (0.3 + 0.2 + 0.1 against 0.6), says so, so the
    line does not read as refusing a total equal to its budget."""
    shown = repr(float(exact))
    if exact > Fraction(bound) and float(exact) <= bound:
        return f"{shown}, above {bound!r} in the exact sum of the spends as stored"
    return shown


NOTHING = Spent(Fraction(0), Fraction(0), 0)


@dataclass
class Account:
    """The ledger's part in one private statement: where its row goes (or why none can), what the
    source had spent before, and what it will have spent after."""

    source: str  # the source as the messages name it
    database: str | None  # the ledger's database; None: not recorded (why_not says why)
    parts: tuple[str, str] | None  # (schema, name) of the source in that database
    before: Spent | None  # None: unknown (no ledger of the source, or a row that is no spend)
    epsilon: float
    delta: float
    budget: tuple[float, float] | None
    why_not: str | None = None  # why the release's transaction cannot record the spend
    unknown: str | None = None  # why the total before is unknown

    @property
    def after(self) -> Spent | None:
        return None if self.before is None else self.before.plus(self.epsilon, self.delta)

    @property
    def records(self) -> bool:
        return self.database is not None and self.why_not is None

    def refusal(self) -> str | None:
        """What makes the statement exceed or escape its budget, in one line, or None."""
        if self.budget is None:
            return None
        epsilon_total, delta_total = self.budget
        if self.why_not is not None:
            return f"option budget needs the spend recorded in the privacy ledger of {self.source}: {self.why_not}"
        if self.before is None:
            return f"option budget cannot be checked: the total spent on {self.source} is unknown ({self.unknown})"
        after = self.after
        if after.epsilon > Fraction(epsilon_total) or after.delta > Fraction(delta_total):
            return (f"budget ({epsilon_total:g}, {delta_total:g}) of {self.source} would be exceeded: "
                    f"{self.before.releases} private releases spent (epsilon {float(self.before.epsilon)!r}, delta "
                    f"{float(self.before.delta)!r}), this statement would bring the total to (epsilon "
                    f"{_total(after.epsilon, epsilon_total)}, delta {_total(after.delta, delta_total)})")
        return None

    def details(self, recorded: bool) -> dict:
        """`details.differential_privacy.ledger`."""
        shown = {"source": self.source, "accounting": "sequential composition: the epsilons and the deltas of the "
                                                      "source's releases add up",
                 "spent_before": None if self.before is None else self.before.shown(),
                 "spent_after": None if self.after is None else self.after.shown(),
                 "budget": None if self.budget is None else {"epsilon": self.budget[0], "delta": self.budget[1]}}
        if self.unknown is not None:
            shown["unknown"] = self.unknown
        shown["recorded"] = True if recorded else f"not recorded: {self.why_not}"
        return shown


def _verb(plan: Plan) -> str:
    """The statement a spend comes from, as messages and the ledger's rows name it."""
    return "REFRESH" if plan.statement.previous_release is not None else "ANONYMIZE"


def account(backend: Backend, plan: Plan) -> Account:
    """The ledger's state for a private statement, read before the source is; raises the budget's
    refusal in one line."""
    found = state(backend, plan)
    refusal = found.refusal()
    if refusal is not None:
        raise AnonymizeError(f"{_verb(plan)} refused: {refusal}; nothing was read or written")
    return found


def state(backend: Backend, plan: Plan) -> Account:
    """The ledger's state for a private statement (what account() checks; EXPLAIN shows it)."""
    statement = plan.statement
    source = shown_name(plan.source)
    base = dict(source=source, epsilon=statement.epsilon, delta=statement.delta, budget=statement.budget)
    parts = [part.name for part in plan.source.table.parts]
    try:
        backend = registry_backend(backend)
        if len(parts) != 3 or backend.find_object(*parts) is None:
            why = "the source is not a table or view of a database (a file, a DataFrame)"
            return Account(database=None, parts=None, before=None, why_not=why, unknown=why, **base)
        if parts[0].lower() == "temp":
            why = "the source is temporary (it ends with the connection)"
            return Account(database=None, parts=None, before=None, why_not=why, unknown=why, **base)
        database, where = parts[0], (parts[1], parts[2])
        kind = ledger_kind(backend, database)
        if kind == "foreign":
            why = f"{shown_name(TableName(ledger_table(database)))} is a table duckanon did not make (left untouched)"
            return Account(database=database, parts=where, before=None, why_not=why, unknown=why, **base)
        before, unreadable = spent(backend, database, *where) if kind == "ours" else (NOTHING, 0)
        why_not = _why_not(backend, plan, database)
    except (BackendError, AnonymizeError) as error:
        why = f"the ledger cannot be read ({str(error).splitlines()[0][:200]})"
        return Account(database=None, parts=None, before=None, why_not=why, unknown=why, **base)
    unknown = None
    if kind == "ours" and _holds_no_row(backend, database):
        # duckanon never leaves its ledger empty: the first release creates it with its own row,
        # in one transaction. Empty, it was emptied or made by hand, and it would not serialize two
        # releases either (each updates every row: none, so two first spends would both commit).
        before, unknown = None, (f"{shown_name(TableName(ledger_table(database)))} holds no row, and duckanon "
                                 "never leaves it empty: its rows were deleted by hand, or the table was made by "
                                 "hand; drop it to start a new ledger")
    elif unreadable:
        before, unknown = None, (f"{unreadable} row(s) of {shown_name(TableName(ledger_table(database)))} for this "
                                 "source hold no spend: epsilon or delta missing, negative, not finite or above what "
                                 f"one statement can spend (epsilon {EPSILON_LIMIT:g}, delta below "
                                 f"{DELTA_RANGE[1]:g}); mend or delete them")
    return Account(database=database, parts=where, before=before, why_not=why_not, unknown=unknown, **base)


def _holds_no_row(backend: Backend, database: str) -> bool:
    query = exp.select(exp.Count(this=exp.Star())).from_(ledger_table(database))
    return backend.rows(query)[0][0] == 0


def _why_not(backend: Backend, plan: Plan, database_name: str) -> str | None:
    """Why the release's transaction cannot write the ledger of a source in `database_name`, or None."""
    database = backend.database(database_name)
    if database is None or database.readonly:
        return f"the source's database {database_name} is read-only"
    if (database.type or "").lower() != "duckdb":
        return f"the source's database {database_name} is not a DuckDB database"
    if plan.target is not None and plan.target.table.catalog.lower() != database_name.lower():
        return ("the target is in another database than the source, and DuckDB commits one database per "
                "transaction: publish into the source's database to record the spend with the release")
    return None


def _same_source() -> exp.Expr:
    return exp.and_(
        exp.EQ(this=exp.func("lower", exp.column("source_schema", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())),
        exp.EQ(this=exp.func("lower", exp.column("source_name", quoted=True)),
               expression=exp.func("lower", exp.Placeholder())))


def spent(backend: Backend, database: str, schema: str, name: str) -> tuple[Spent, int]:
    """The exact sums of the ledger's rows for source schema.name of `database`, and how many of
    those rows hold no spend (not counted: the caller says the total is unknown)."""
    if ledger_kind(backend, database) != "ours":
        return NOTHING, 0
    query = exp.select(exp.column("epsilon", quoted=True), exp.column("delta", quoted=True)) \
        .from_(ledger_table(database)).where(_same_source())
    total, unreadable = NOTHING, 0
    for epsilon, delta in backend.rows(query, [schema, name]):
        # a spend no statement can make (epsilon above EPSILON_LIMIT, delta at or above DELTA_RANGE's
        # end) is not one duckanon wrote: counted as unreadable, so hand-edited 1e308s cannot
        # overflow the exact sum's conversion back to a float
        if not all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in (epsilon, delta)) \
                or epsilon > EPSILON_LIMIT or delta >= DELTA_RANGE[1]:
            unreadable += 1
            continue
        total = total.plus(epsilon, delta)
    return total, unreadable


def record(backend: Backend, plan: Plan, release: str) -> Account:
    """The release's row, inside its transaction (the ledger created there when it is the first),
    after the budget is checked again on the transaction's own snapshot (a release of the same
    source may have committed since `account`). Every row of the ledger then gets this release in
    `last_check`: two private releases of one database writing at the same moment update the same
    rows, so DuckDB lets one commit and aborts the other with a write conflict (nothing written;
    run it again), and neither can spend past a budget the other's spend already reached (the
    first spends of a new ledger conflict on creating it). Returns the account as recorded."""
    backend = registry_backend(backend)
    found = state(backend, plan)
    refusal = found.refusal()
    if refusal is not None:
        raise AnonymizeError(f"{_verb(plan)} refused: {refusal}; nothing was written")
    if not found.records:
        return found
    table = ledger_table(found.database)
    if ledger_kind(backend, found.database) is None:
        backend.execute(exp.Create(this=exp.Schema(this=table.copy(), expressions=[
            exp.ColumnDef(this=quoted_identifier(name), kind=exp.DataType.build(kind, dialect="duckdb"))
            for name, kind in COLUMNS.items()]), kind="TABLE"))
        backend.set_comment(TableName(table.copy()), LEDGER_COMMENT)
    target_catalog, target_schema, target_name = (part.name for part in plan.target.table.parts)
    values = {
        "source_schema": found.parts[0], "source_name": found.parts[1], "epsilon": float(found.epsilon),
        "delta": float(found.delta), "statement": _verb(plan),
        "target_database": None if target_catalog.lower() == found.database.lower() else target_catalog,
        "target_schema": target_schema, "target_name": target_name, "release": release,
        "spent_at": datetime.now(timezone.utc).replace(tzinfo=None), "duckanon_version": __version__,
        "last_check": release,
    }
    insert = exp.insert(exp.select(*[exp.cast(exp.Placeholder(), exp.DataType.build(kind, dialect="duckdb"))
                                     for kind in COLUMNS.values()]),
                        exp.Schema(this=table.copy(), expressions=[quoted_identifier(c) for c in COLUMNS]))
    backend.execute(insert, [values[c] for c in COLUMNS])
    backend.execute(exp.update(table.copy(), {"last_check": exp.Placeholder()}), [release])
    return found
