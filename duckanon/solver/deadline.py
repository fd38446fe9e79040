"""One deadline for a whole solve: a time.perf_counter() value held in a context variable.

`solve(..., time_limit=...)` opens `deadline_scope(now + time_limit)` around everything it runs
(`exact` bounds its incumbent heuristics the same way). Inside, loops that can take seconds call
`check_deadline()`, which raises DeadlineExpired once the deadline has passed. A heuristic whose
partial state is not a valid solution (greedy, carve, repair/merge, topdown, TP) just lets it
propagate: the portfolio (heuristics.best_heuristic) drops that heuristic and keeps the valid
solutions already found. Searches whose every state is valid (local search, the lattice) test
`deadline_passed()` instead and return the best state reached.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar

# The deadline of the code running inside `deadline_scope` (None: no deadline).
_DEADLINE: ContextVar[float | None] = ContextVar("duckanon_solve_deadline", default=None)


class DeadlineExpired(Exception):
    """The deadline of the enclosing `deadline_scope` has passed (internal: never reaches users;
    whoever set the deadline catches it and keeps the best valid solution found before)."""


@contextmanager
def deadline_scope(deadline: float | None):
    """Code inside this block stops at `deadline` (a time.perf_counter() value; None: no
    deadline; a deadline already in force stays when it is earlier)."""
    current = _DEADLINE.get()
    if deadline is None or (current is not None and current <= deadline):
        deadline = current
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    return _DEADLINE.get()


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def deadline_passed() -> bool:
    return expired(_DEADLINE.get())


def seconds_left() -> float | None:
    """Seconds until the enclosing deadline (None without one; 0 once it has passed)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(deadline - time.perf_counter(), 0.0)


def check_deadline() -> None:
    """Raise DeadlineExpired when the enclosing scope's deadline has passed (cheap: a context
    variable and a clock read; call it in every loop whose iterations can add up to seconds)."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.perf_counter() >= deadline:
        raise DeadlineExpired()


def effective_deadline(deadline: float | None) -> float | None:
    """The earlier of `deadline` and the enclosing scope's."""
    ambient = _DEADLINE.get()
    if deadline is None:
        return ambient
    return deadline if ambient is None else min(deadline, ambient)
