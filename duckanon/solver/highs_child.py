"""HiGHS's MILP (scipy's milp) run in a forked child process, stopped at its time limit plus a
grace.

Why a child: HiGHS can overrun its own time_limit by minutes on large models (seen: 117 s over a
60 s limit while stuck in the root node), and nothing interrupts it inside the process. A
limited solve therefore runs in a forked child that is killed at the deadline plus a grace: 10%
of the limit, and at least the limit itself (no less than MIN_GRACE) up to DEADLINE_GRACE, so
that short limits stay short. A solve without a limit, or where fork is not available, runs in
this process.
"""

from __future__ import annotations

import warnings

from duckanon.errors import AnonymizeError

DEADLINE_GRACE = 1.0
MIN_GRACE = 0.25


def milp_inline(c, integrality, bounds, constraint, options):
    """scipy's milp (HiGHS) in this process."""
    from scipy.optimize import milp  # (scipy where an LP runs: solver/__init__.py)

    with warnings.catch_warnings():
        # scipy warns that options beyond its own few are passed to HiGHS verbatim; that is intended
        warnings.simplefilter("ignore", RuntimeWarning)
        return milp(c, integrality=integrality, bounds=bounds, constraints=[constraint] if constraint else None,
                    options=options)


def _child(connection, args):
    try:
        result = milp_inline(*args)
        connection.send({"x": result.x, "status": result.status, "message": result.message,
                         "mip_dual_bound": getattr(result, "mip_dual_bound", None)})
    except BaseException as error:  # report, never hang the parent
        connection.send({"error": f"{type(error).__name__}: {error}"})
    finally:
        connection.close()


def grace(limit: float) -> float:
    """How long past its time limit `limit` a HiGHS child is waited for (module docstring)."""
    return max(0.1 * limit, min(DEADLINE_GRACE, max(MIN_GRACE, limit)))


def run_milp(c, integrality, bounds, constraint, options, max_grace: float | None = None):
    """milp's result (x, status, message, mip_dual_bound) for the built model; under
    options["time_limit"] in a forked child, stopped at the limit plus its grace (capped at
    `max_grace`): then x None, status 1. A child that fails raises its error as one line."""
    limit = options.get("time_limit")
    if limit is None:
        return milp_inline(c, integrality, bounds, constraint, options)
    import multiprocessing
    from types import SimpleNamespace

    try:
        context = multiprocessing.get_context("fork")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(sender, (c, integrality, bounds, constraint, options)),
                                daemon=True)
        child.start()
    except (OSError, ValueError):  # no fork here: run inline, trusting HiGHS's own limit
        return milp_inline(c, integrality, bounds, constraint, options)
    sender.close()
    wait = grace(float(limit)) if max_grace is None else min(grace(float(limit)), max_grace)
    deadline = float(limit) + wait
    try:
        if receiver.poll(deadline):
            message = receiver.recv()
        else:
            message = {"x": None, "status": 1, "message": "stopped at the time limit (HiGHS overran it)",
                       "mip_dual_bound": None}
    except EOFError:
        message = {"error": "the HiGHS process ended without a result"}
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    if "error" in message:
        raise AnonymizeError(f"method 'exact': {message['error']}")
    return SimpleNamespace(**message)
