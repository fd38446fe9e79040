"""Progress of a running statement: the pipeline reports phases (and counters such as lattice
nodes) to the listener the caller passed, if any (`run_statement(..., progress=listener)`,
`duckanon.execute(..., progress=listener)`): a callable (phase, info). The shell passes a
ShellProgress, which draws a rich status line on stderr once a statement has run for a second."""

from __future__ import annotations

import threading
import time


def tell(listener, phase: str, **info) -> None:
    """Report a phase to `listener` (None: nobody listens)."""
    if listener is not None:
        listener(phase, info)


class ShellProgress:
    """A transient status line (phase, counters, elapsed seconds) after `delay` seconds; Ctrl-C
    still reaches the statement, which rolls back."""

    def __init__(self, console, delay: float = 1.0):
        self.console = console
        self.delay = delay
        self.phase = "starting"
        self.info: dict = {}
        self.started = time.perf_counter()
        self.status = None
        self.lock = threading.Lock()
        self.timer = None

    def _text(self) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in self.info.items())
        return f"{self.phase}{' (' + extra + ')' if extra else ''}  {time.perf_counter() - self.started:.1f} s  (Ctrl-C stops)"

    TICK = 0.5  # seconds between redraws, so the elapsed time moves during a long step

    def _show(self) -> None:
        with self.lock:
            if self.timer is None:
                return
            self.status = self.console.status(self._text())
            self.status.start()
            self._schedule(self.TICK, self._tick)

    def _tick(self) -> None:
        """Redraw with the current elapsed time (a solver inside HiGHS reports nothing for a while)."""
        with self.lock:
            if self.timer is None or self.status is None:
                return
            self.status.update(self._text())
            self._schedule(self.TICK, self._tick)

    def _schedule(self, delay: float, action) -> None:
        """The next timer (the one __exit__ cancels); the caller holds the lock or runs alone."""
        self.timer = threading.Timer(delay, action)
        self.timer.daemon = True
        self.timer.start()

    def update(self, phase: str, info: dict) -> None:
        self.phase, self.info = phase, info
        with self.lock:
            if self.status is not None:
                self.status.update(self._text())

    def __call__(self, phase: str, info: dict) -> None:
        """The listener: pass the ShellProgress itself as `progress=`."""
        self.update(phase, info)

    def __enter__(self):
        self._schedule(self.delay, self._show)
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.timer.cancel()
            self.timer = None
            if self.status is not None:
                self.status.stop()
        return False
