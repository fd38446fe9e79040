"""The checks of a differentially private ANONYMIZE (epsilon, SafePub) against the other options,
and its derived parameters (k and beta, ARX's parameter calculation), computed when the statement
is bound so EXPLAIN shows them before anything runs. docs/models.md, "Differential privacy"."""

from __future__ import annotations

from dataclasses import replace

from duckanon.errors import AnonymizeError
from duckanon.sql.options import MODEL_OPTIONS, SWEEPABLE

# one message for every entry point that reaches Spark with epsilon (the statement's engine option,
# duckanon.spark.execute): the statement may say engine = 'duckdb' and still be run on Spark
NOT_ON_SPARK = ("option epsilon is not available on Spark: the sample is drawn on the class histogram that "
                "DuckDB's release publishes from")

# ARX's GUI default when a search is asked for without its steps
DEFAULT_SEARCH_STEPS = 100


def check_privacy(statement, seen: set):
    """The statement with its derived k and beta, or one line naming what breaks the guarantee.
    `seen`: the options written (the binder draws a seed for every statement; only a written one
    is refused)."""
    if statement.epsilon is None:
        stray = next((name for name in ("delta", "epsilon_search", "search_steps", "levels", "budget")
                      if name in seen), None)
        if stray:
            raise AnonymizeError(f"option {stray} applies to differential privacy: add epsilon = <budget>")
        return statement
    _refuse_beside(statement, seen)
    if statement.delta is None:
        raise AnonymizeError("option epsilon needs delta (e.g. delta = 1e-6, below 1 / the table's rows)")
    search = statement.epsilon_search
    if search is not None and search >= statement.epsilon:
        raise AnonymizeError(f"option epsilon_search must be below epsilon ({statement.epsilon:g}), got {search:g}")
    if "search_steps" in seen and search is None:
        raise AnonymizeError("option search_steps applies to the search: it needs epsilon_search")
    if search is not None:
        _check_search(statement)
    else:
        _check_scheme(statement, seen)
    # imported here: a statement without epsilon is checked without loading the solvers
    from duckanon.solver.differential_privacy import anonymization_budget, parameters
    budget = anonymization_budget(statement.epsilon, search or 0.0)
    derived = parameters(budget, statement.delta)
    steps = statement.search_steps if search is None or statement.search_steps else DEFAULT_SEARCH_STEPS
    return replace(statement, method="lattice" if statement.hierarchies is not None else statement.method,
                   suppression_limit=1.0, dp_k=derived.k, dp_beta=derived.beta, dp_epsilon_anonymization=budget,
                   search_steps=steps)


# the score functions of SafePub's search (ARX's getScore(); solver/safepub_search.SCORES)
SEARCH_METRICS = ("loss", "precision", "discernibility", "aecs", "entropy")


def _check_search(statement) -> None:
    """The data-dependent search: over the hierarchies' lattice, by a metric with a score function."""
    if statement.hierarchies is None:
        raise AnonymizeError("option epsilon_search needs hierarchies (the search walks their lattice)")
    if statement.levels:
        raise AnonymizeError("option levels fixes the generalization: give levels or epsilon_search, not both")
    if statement.metric not in SEARCH_METRICS:
        raise AnonymizeError(f"metric {statement.metric} has no score function for the search: use one of "
                             f"{', '.join(SEARCH_METRICS)}")


def _refuse_beside(statement, seen: set) -> None:
    """What would break the guarantee or spend the budget without saying so, in one line each."""
    other = next((name for name in MODEL_OPTIONS if name != "epsilon" and name in seen), None)
    if other == "k":
        raise AnonymizeError("option k is derived from epsilon and delta under differential privacy: drop k "
                             "(EXPLAIN shows the k derived)")
    if other:
        raise AnonymizeError(f"option {other} does not combine with epsilon: differential privacy is the only model "
                             "of its release")
    if "seed" in seen:
        raise AnonymizeError("option seed is refused with epsilon: the sample must not be reproducible by anyone "
                             "who knows the statement (it is drawn from the operating system's cryptographic source)")
    if statement.keep:
        raise AnonymizeError("option keep is refused with epsilon: a kept column is published per row, outside "
                             "the guarantee")
    if statement.mask:
        raise AnonymizeError("option mask is refused with epsilon: a masked identifier is published per row, "
                             "outside the guarantee (list the column in identifiers to drop it)")
    if statement.sensitive is not None:
        # the classes that must reach k are the QIs' alone: a rare sensitive value in a large class
        # would be published whenever its row is sampled (probability beta), which no delta covers
        raise AnonymizeError("option sensitive is refused with epsilon: a sensitive column is published per row, "
                             "outside the guarantee (list it in qi to publish it inside the classes)")
    if statement.sweep is not None or any(isinstance(getattr(statement, name, None), list) for name in SWEEPABLE):
        raise AnonymizeError("a sweep is refused with epsilon: every value compared would spend the budget again")
    if "method" in seen and statement.method not in ("auto", "lattice"):
        raise AnonymizeError(f"method {statement.method} does not take epsilon: the release is the sample at the "
                             "generalization given (hierarchies and levels), or at none")
    if "suppression_limit" in seen:
        raise AnonymizeError("option suppression_limit does not apply with epsilon: every class below the derived k "
                             "is removed, whatever its rows")
    if "gs_factor" in seen:
        raise AnonymizeError("option gs_factor does not apply with epsilon: every class below the derived k is "
                             "removed whatever it costs, and SafePub's score functions charge removed records in full")
    if statement.engine == "spark":
        raise AnonymizeError(NOT_ON_SPARK)
    if statement.time_limit is not None:
        # a clock would make what is published depend on the load; the work is fixed by the statement
        raise AnonymizeError("option time_limit does not apply with epsilon: the search, if any, is bounded by "
                             "search_steps, not by a clock")
    if "patterns" in seen:
        raise AnonymizeError("option patterns does not apply with epsilon: the release generalizes whole columns "
                             "(hierarchies at their levels), it suppresses no pattern of cells")
    if "weights" in seen:
        raise AnonymizeError("option weights does not apply with epsilon: SafePub's score functions weigh every "
                             "QI alike")


def _check_scheme(statement, seen: set) -> None:
    """Without a search the generalization is fixed by the user: hierarchies at given levels, or
    none (the classes as they are)."""
    if "metric" in seen:
        raise AnonymizeError("option metric applies with epsilon only to the search (epsilon_search): without it "
                             "the generalization is fixed and nothing is scored")
    if statement.levels and statement.hierarchies is None:
        raise AnonymizeError("option levels needs hierarchies (the levels are those of the hierarchies)")
    if statement.hierarchies is not None and not statement.levels:
        raise AnonymizeError("hierarchies with epsilon need levels = (column = level, ...): the generalization "
                             "is fixed before the data is seen")
    if statement.levels:
        qi = [name.lower() for name in statement.qi or []]
        missing = [name for name in statement.qi or [] if name.lower() not in {c.lower() for c in statement.levels}]
        extra = [name for name in statement.levels if name.lower() not in qi]
        if extra:
            raise AnonymizeError(f"option levels names {extra[0]}, which is not a QI")
        if missing:
            raise AnonymizeError(f"option levels gives no level for QI {missing[0]}")
