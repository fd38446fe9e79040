"""A linear program kept in one HiGHS instance between solves, for column generation: columns
are added and the next solve starts from the last optimal basis (a few thousand simplex
iterations), where scipy's linprog builds and solves the whole LP again each time (issue 39:
at 50,000 classes 14-30 s per solve, 42 solves).

HiGHS through the Python bindings scipy ships with it (scipy.optimize._highspy, scipy >= 1.15),
the same HiGHS that linprog and milp run: no second copy of HiGHS to install. Its class is not
scipy's public API, so everything the solver needs from it is here, in one small module.
The standalone highspy package's public Highs class prints HiGHS's banner to standard output
when it is created, which the SQL shell would show.
"""

from __future__ import annotations

import numpy as np

from duckanon.errors import AnonymizeError


class WarmLP:
    """min c x, A x = b, x >= 0, with A's columns added over time (each column's nonzeros given
    as row indices and values)."""

    def __init__(self, rhs: np.ndarray):
        from scipy.optimize._highspy import _core

        self._core = _core
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
