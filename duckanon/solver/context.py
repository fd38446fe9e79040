"""What a running solve knows besides its input: when it must stop, and whom to tell how far it got.

A `SolveContext` is passed explicitly down the solver (no context variable, no module-level
listener), so every function's bounds are visible in its signature and two solves in two threads
cannot see each other's deadline or listener.

Deadline: a time.perf_counter() value (None: none). Loops that can take seconds call
`context.check()`, which raises DeadlineExpired once it has passed. A heuristic whose partial
state is not a valid solution (greedy, carve, repair/merge, topdown, TP) lets it propagate: the
portfolio (heuristics.best_heuristic) drops that heuristic and keeps the valid solutions already
found. Searches whose every state is valid (local search, the lattice) test `context.expired()`
instead and return the best state reached. A part of a solve that gets less time than the whole
(exact's incumbent heuristics) runs under `context.narrowed(earlier)`.

A deadline exists only when the statement set `time_limit`: without one every search is bounded
by counts (passes, rounds, moves, HiGHS's nodes and simplex iterations), so the same input gives
the same solution whatever the machine's load. Whatever stops at the deadline says so with
`context.cut(phase)`; solve() publishes the phases in notes["time_limit_cut"], so a release that
depends on the clock says which of its parts did.

Progress: `context.report(phase, **counters)` calls the caller's `progress(phase, info)`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable


class DeadlineExpired(Exception):
    """The context's deadline has passed (internal: never reaches users; whoever set the deadline
    catches it and keeps the best valid solution found before)."""


@dataclass(frozen=True)
class SolveContext:
    deadline: float | None = None
    progress: Callable[[str, dict], None] | None = None
    # the phases the deadline stopped, in order (shared by every narrowed copy of this context)
    cuts: list[str] = field(default_factory=list, compare=False, repr=False)

    def expired(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def check(self) -> None:
        """Raise DeadlineExpired once the deadline has passed (a clock read: call it in every loop
        whose iterations can add up to seconds)."""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            raise DeadlineExpired()

    def seconds_left(self) -> float | None:
        """Seconds until the deadline (None without one; 0 once it has passed)."""
        return None if self.deadline is None else max(self.deadline - time.perf_counter(), 0.0)

    def narrowed(self, deadline: float | None) -> SolveContext:
        """This context stopping at the earlier of its deadline and `deadline` (None: unchanged)."""
        if deadline is None or (self.deadline is not None and self.deadline <= deadline):
            return self
        return replace(self, deadline=deadline)

    def cut(self, phase: str) -> None:
        """Record that the deadline stopped `phase` (or skipped it): its result, and so the
        release, depends on how much work fitted in the time_limit."""
        if phase not in self.cuts:
            self.cuts.append(phase)

    def report(self, phase: str, **info) -> None:
        if self.progress is not None:
            self.progress(phase, info)


# No deadline, nobody listening: what a pure call of an algorithm runs under (it never cuts).
UNBOUNDED = SolveContext()
