"""SIGTERM and Ctrl-C (SIGINT), without losing either.

The commands stop on SIGTERM as on Ctrl-C: the handler raises KeyboardInterrupt. Python runs a
signal handler between bytecodes of the main thread, and when that moment falls inside a
weakref callback or a finalizer (the garbage collector runs them at any allocation), the
exception is printed as "Exception ignored in ..." and dropped: the command went on to the end
(seen: tune-model finished a search, the in-place check and the measurement after a SIGTERM).
So the handler also records the request, and the long loops call `check()` at their safe
points (the search engine's loop, between a campaign's problems, between tune-model's phases),
which raises it again. SIGINT gets the same handler: left to Python's default, `asyncio.run`
turns it into a cancellation of the main task, and a cancellation consumed on its way (seen:
a run interrupted after its first evaluation searched on to the end and exited 0) is lost.
`stop_signals()` installs the handler for both while a command runs. When the interrupt lands
in an asyncio task other than the main one, that task keeps it, and asyncio would log it with
a traceback when the task is collected (seen: a tune-model killed by SIGTERM); a requested
stop is not logged there either.
"""
from __future__ import annotations

import logging
import signal
import sys
from contextlib import contextmanager
from typing import Iterator

_requested = False
_hooked = False


def terminate(signum: int, frame: object) -> None:
    """The SIGTERM and SIGINT handler: remember, then interrupt like Ctrl-C."""
    global _requested
    _requested = True
    _quiet_swallowed()
    raise KeyboardInterrupt


def _quiet_swallowed() -> None:
    """A KeyboardInterrupt that a finalizer swallows after a kept request is not reported
    (Python would print "Exception ignored in ... Traceback" on the user's terminal): it is
    raised again at the next safe point. Anything else goes to the previous hook. asyncio's
    report of a task that kept the interrupt is dropped the same way."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    previous = sys.unraisablehook

    def hook(unraisable: object) -> None:
        exc_type = getattr(unraisable, "exc_type", None)
        if _requested and isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt):
            return
        previous(unraisable)

    sys.unraisablehook = hook
    logging.getLogger("asyncio").addFilter(_quiet_unretrieved)


def _quiet_unretrieved(record: logging.LogRecord) -> bool:
    """asyncio's log filter: a task the interrupt landed in keeps the KeyboardInterrupt that
    stopped the loop, and asyncio logs it with its traceback when the task is collected ("Task
    exception was never retrieved"). The stop was asked for and is being handled: not logged."""
    exc = record.exc_info[0] if record.exc_info else None
    return not (_requested and isinstance(exc, type) and issubclass(exc, KeyboardInterrupt))


def requested() -> bool:
    return _requested


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested (and possibly swallowed) earlier."""
    if _requested:
        raise KeyboardInterrupt


def clear() -> None:
    """The stop was handled (the command is exiting, or a caller resumes in-process)."""
    global _requested
    _requested = False


@contextmanager
def stop_signals() -> Iterator[None]:
    """While a command runs: SIGTERM and SIGINT raise KeyboardInterrupt and are remembered
    (check() raises them again where one was swallowed); the previous handlers come back after."""
    wanted = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.signal(sig, terminate) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
