"""A linear program kept in one HiGHS instance between solves, for column generation: columns
are added and the next solve starts from the last optimal basis (a few thousand simplex
iterations), where scipy's linprog builds and solves the whole LP again each time (issue 39:
at 50,000 classes 14-30 s per solve, 42 solves).

HiGHS through the Python bindings scipy ships with it (scipy.optimize._highspy, scipy >= 1.15),
the same HiGHS that linprog and milp run: no second copy of HiGHS to install. Its class is not
scipy's public API, so everything the solver needs from it is here, in one small module, and
where a scipy release moves it, RebuiltLP answers the same through the public linprog, slower.
The standalone highspy package's public Highs class prints HiGHS's banner to standard output
when it is created, which the SQL shell would show.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError


def _bindings():
    """scipy's HiGHS bindings, or None where this scipy does not have them where 1.15-1.17 keep
    them (a private module may move in any release): WarmLP then solves through linprog."""
    try:
        from scipy.optimize._highspy import _core
    except ImportError:
        return None
    return _core if hasattr(_core, "_Highs") else None


def warm_lp(rhs: np.ndarray) -> "WarmLP | RebuiltLP":
    """The LP kept between solves where scipy's bindings are there, else one rebuilt each solve:
    the same optimum, slower (a degenerate LP may end on another of its optimal duals, so the
    rounds may list other groups; the release is proven or bounded the same way)."""
    core = _bindings()
    return WarmLP(rhs, core) if core is not None else RebuiltLP(rhs)


class RebuiltLP:
    """WarmLP's interface over scipy's public linprog: the whole LP built and solved each time."""

    def __init__(self, rhs: np.ndarray):
        self.rhs = np.asarray(rhs, dtype=np.float64)
        self.costs, self.rows, self.values, self.starts = [], [], [], [0]
        self.columns = 0

    def add_columns(self, cost: np.ndarray, rows: np.ndarray, values: np.ndarray, per_column: int):
        k = len(cost)
        if k == 0:
            return
        self.costs.append(np.asarray(cost, dtype=np.float64))
        self.rows.append(np.asarray(rows, dtype=np.int64))
        self.values.append(np.asarray(values, dtype=np.float64))
        self.starts.append(self.starts[-1] + k * per_column)
        self.columns += k

    def solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        from scipy.optimize import linprog
        from scipy.sparse import csc_matrix

        rows, values = np.concatenate(self.rows), np.concatenate(self.values)
        per_column = [len(r) // len(c) for r, c in zip(self.rows, self.costs)]
        pointers = np.concatenate([[0], np.cumsum(np.repeat(per_column, [len(c) for c in self.costs]))])
        matrix = csc_matrix((values, rows, pointers), shape=(len(self.rhs), self.columns))
        result = linprog(np.concatenate(self.costs), A_eq=matrix, b_eq=self.rhs, bounds=(0, None), method="highs")
        if result.status != 0:
            raise AnonymizeError(f"the linear program was not solved ({result.message})")
        return np.asarray(result.x), np.asarray(result.eqlin.marginals), float(result.fun)


class WarmLP:
    """min c x, A x = b, x >= 0, with A's columns added over time (each column's nonzeros given
    as row indices and values)."""

    def __init__(self, rhs: np.ndarray, core):
        self._core = _core = core
        self.highs = _core._Highs()
        self.highs.setOptionValue("output_flag", False)
        rhs = np.asarray(rhs, dtype=np.float64)
        self.highs.addRows(len(rhs), rhs, rhs, 0, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32),
                           np.zeros(0))
        self.columns = 0

    def add_columns(self, cost: np.ndarray, rows: np.ndarray, values: np.ndarray, per_column: int):
        """Columns of `per_column` nonzeros each: column k's rows[k * per_column:(k + 1) * per_column]."""
        k = len(cost)
        if k == 0:
            return
        starts = np.arange(0, k * per_column, per_column, dtype=np.int32)
        self.highs.addCols(k, np.asarray(cost, dtype=np.float64), np.zeros(k), np.full(k, self._core.kHighsInf),
                           k * per_column, starts, np.asarray(rows, dtype=np.int32),
                           np.asarray(values, dtype=np.float64))
        self.columns += k

    def solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(primal x per column, dual per row, optimum), from the last basis when there is one."""
        self.highs.run()
        status = self.highs.getModelStatus()
        if status != self._core.HighsModelStatus.kOptimal:
            raise AnonymizeError(f"the linear program was not solved ({self.highs.modelStatusToString(status)})")
        solution = self.highs.getSolution()
        return (np.asarray(solution.col_value, dtype=np.float64), np.asarray(solution.row_dual, dtype=np.float64),
                float(self.highs.getInfo().objective_function_value))
