"""The result rows of our statements: ANONYMIZE's summary, EXPLAIN's and REPORT's tables."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from sqlglot import exp


@dataclass(frozen=True)
class Summary:
    """The one-row result of ANONYMIZE (a variant, its report placed: dataclasses.replace)."""

    rows: int
    classes: int
    min_class_size: int | None
    stars: int
    suppressed_rows: int
    method: str
    optimal: bool
    lower_bound: int | None
    seconds: float
    published_rows: int | None = None  # rows in the published table
    removed_rows: int = 0  # source rows left out (record suppression: lattice's suppression_limit)
    optimal_for: str | None = None  # what `optimal` is proven for: "stars", or a metric and its search space
    target: str | None = None  # the published table, as SQL
    report: str | None = None  # the HTML report's path, when one was written
    dropped: list | None = None  # the source columns not published (identifiers not masked, columns not mentioned)
    details: str = "{}"  # JSON: the solver's diagnostics (e.g. tp_phase, residue_rows, exact's status)

    SQL_TYPES = {
        "rows": "BIGINT", "classes": "BIGINT", "min_class_size": "BIGINT", "stars": "BIGINT",
        "suppressed_rows": "BIGINT", "method": "VARCHAR", "optimal": "BOOLEAN",
        "lower_bound": "BIGINT", "seconds": "DOUBLE", "published_rows": "BIGINT", "removed_rows": "BIGINT",
        "optimal_for": "VARCHAR", "target": "VARCHAR", "report": "VARCHAR", "dropped": "VARCHAR[]", "details": "JSON",
    }

    def to_json(self) -> str:
        """The row as one JSON object; `details` nested as an object (so `s->'details'->'x'` works)."""
        row = asdict(self)
        row["details"] = json.loads(self.details)
        return json.dumps(row, default=str)

    def as_sql(self) -> tuple[str, list]:
        """A SELECT producing this row with proper column types (DuckDB's SQL), and its parameters."""
        items = [exp.alias_(_typed(exp.Placeholder(), sql_type), name, quoted=True)
                 for name, sql_type in self.SQL_TYPES.items()]
        values = asdict(self)
        return exp.select(*items).sql(dialect="duckdb"), [values[name] for name in self.SQL_TYPES]


@dataclass(frozen=True)
class Table:
    """A small result table (EXPLAIN's rows), returned like the summary row."""

    columns: list[tuple[str, str]]  # (name, SQL type)
    rows: list[tuple]

    def as_sql(self) -> tuple[str, list]:
        """A SELECT producing the rows with their column types (DuckDB's SQL), and its parameters."""
        if not self.rows:
            items = [exp.alias_(_typed(exp.Null(), sql_type), name, quoted=True) for name, sql_type in self.columns]
            return exp.select(*items).where(exp.false()).sql(dialect="duckdb"), []
        row = tuple(_typed(exp.Placeholder(), sql_type) for _, sql_type in self.columns)
        values = exp.values([tuple(cell.copy() for cell in row) for _ in self.rows], alias="explain",
                            columns=[exp.to_identifier(name, quoted=True) for name, _ in self.columns])
        return (exp.select(exp.Star()).from_(values).sql(dialect="duckdb"),
                [v for row in self.rows for v in row])


def _typed(value: exp.Expr, sql_type: str) -> exp.Expr:
    return exp.cast(value, exp.DataType.build(sql_type, dialect="duckdb"))


def release_risks(summary: dict) -> tuple[float | None, float | None]:
    """A summary row's highest risk (1 / its smallest class) and average risk (classes / published
    rows), None where it has no class."""
    classes, rows, smallest = summary.get("classes"), summary.get("published_rows"), summary.get("min_class_size")
    return (1.0 / smallest if smallest else None), (classes / rows if rows else None)


def optimal_for(solution, statement) -> str | None:
    """What a proven optimum is optimal for, in the words the report and the shell use. With
    attribute weights that differ: the weighted metric, or the weighted stars (the sum of the
    stars times their column's weight)."""
    if not solution.optimal:
        return None
    given = solution.notes.get("weights") or {}
    weighted = len(set(given.values())) > 1
    if solution.method.split(": ")[-1] == "lattice":  # (auto: lattice)
        limit = statement.suppression_limit or 0
        metric = solution.notes.get("metric", statement.metric)
        if solution.notes.get("gs_factor") is not None:
            metric += f" (gs_factor {solution.notes['gs_factor']:g})"
        if weighted and "weights_ignored" not in solution.notes:
            metric += " weighted by the attribute weights"
        return (f"{metric} among full-domain generalizations of the given hierarchies"
                + (f" within a {limit:.4g} record-suppression limit" if limit else " with no rows removed"))
    if solution.method.split(": ")[-1] == "simplex" and solution.group_labels is not None:
        return ("the sum of the cells' loss" + (" weighted by the attribute weights" if weighted else "")
                + " among 2-anonymous recodings to the given hierarchies' labels with no rows removed")
    return "weighted stars" if weighted else "stars"


def summarize(hist, solution, started: float, plan=None) -> Summary:
    """The summary row of a solution (plan: the bound plan, for optimal_for and the target)."""
    published = solution.published_classes()
    return Summary(
        rows=hist.n_rows,
        classes=len(published),
        min_class_size=int(published.min()) if len(published) else None,
        stars=solution.stars,
        suppressed_rows=solution.suppressed_rows,
        method=solution.method,
        optimal=bool(solution.optimal),
        lower_bound=solution.lower_bound,
        seconds=round(time.perf_counter() - started, 6),
        published_rows=int(published.sum()),
        removed_rows=int(solution.removed_rows),
        optimal_for=optimal_for(solution, plan.statement) if plan is not None else None,
        details=json.dumps(solution.notes, default=str, sort_keys=True),
        target=exp.table_name(plan.target.table, dialect="duckdb") if plan is not None else None,
        dropped=plan.dropped if plan is not None else None,
    )
