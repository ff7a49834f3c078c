"""Errors raised by the persistent store.

They derive from `KernelevolveError` so the CLI prints them as one line and exits 2: a store that
cannot be opened (newer schema, not a database, unwritable directory) is something the user fixes,
not a bug to show a traceback for.
"""
from __future__ import annotations

from kernelevolve.errors import KernelevolveError


class StoreError(KernelevolveError):
    """The workspace store cannot be opened, or a request names something it does not hold."""


class EvaluationExistsError(StoreError):
    """A second evaluation was recorded for a node that already has one.

    Resume relies on this: the evaluations table allows one row per node, so a resumed run that
    tried to evaluate a finished node again fails loudly instead of silently double-counting.
    """
