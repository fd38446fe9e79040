"""Progress of a running statement: the pipeline reports phases (and counters such as lattice
nodes); a listener, if any, shows them. The shell installs one that draws a rich status line on
stderr once a statement has run for a second; library users get nothing unless they listen."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

_listener = None


def report(phase: str, **info) -> None:
    if _listener is not None:
        _listener(phase, info)


@contextmanager
def listening(callback):
    global _listener
    previous, _listener = _listener, callback
    try:
        yield
    finally:
        _listener = previous


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

    def __enter__(self):
        self._schedule(self.delay, self._show)
        self._ctx = listening(self.update)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        with self.lock:
            self.timer.cancel()
            self.timer = None
            if self.status is not None:
                self.status.stop()
        return False
