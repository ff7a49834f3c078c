"""Errors raised by the persistent store.

`StoreError` derives from `KernelevolveError`, so the CLI prints it as one line and exits 2: a
store that cannot be opened (newer schema, not a database, unwritable directory) is something the
user fixes. `EvaluationExistsError` is an `InternalError`: a broken invariant of ours.
"""
from __future__ import annotations

from kernelevolve.errors import InternalError, KernelevolveError


class StoreError(KernelevolveError):
    """The workspace store cannot be opened, or a request names something it does not hold."""


class EvaluationExistsError(InternalError):
    """A second evaluation was recorded for a node that already has one: a kernelevolve bug,
    shown with its traceback (it was a one-line user error, which a user cannot fix).

    Resume relies on this: the evaluations table allows one row per node, so a resumed run that
    tried to evaluate a finished node again fails loudly instead of silently double-counting.
    """
