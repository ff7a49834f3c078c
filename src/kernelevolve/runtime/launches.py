"""Launch accounting: how many custom kernels a candidate launched (C++ calls, Triton launches).

The harness resets the counters before each forward and reads them after; a candidate that
launches nothing is not a kernel. `suppressed()` lets the integrity gate run a forward with
every custom kernel skipped: if the output is still right, the kernels were not doing the work.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Callable, Iterator

# kind -> launches; each language records under its own kinds (Language.launch_kinds)
_counts: collections.Counter[str] = collections.Counter()
_suppress = [False]
# Counters kept in native code (the trusted launcher, runtime/launch.py): (kind, take, suppress),
# where take() returns the launches since it was last called and zeroes them, and suppress(on)
# makes the native side count without running kernels. Folded in whenever counts are read.
_native: list[tuple[str, Callable[[], int], Callable[[bool], None]]] = []


def attach_native(kind: str, take: Callable[[], int], suppress: Callable[[bool], None]) -> None:
    _native.append((kind, take, suppress))
    suppress(_suppress[0])


def _fold() -> None:
    for kind, take, _ in _native:
        n = take()
        if n:
            record(kind, n)


def record(kind: str, n: int = 1) -> None:
    _counts[kind] = _counts.get(kind, 0) + n


def launch_counts() -> dict[str, int]:
    """Per kind; a kind nothing recorded reads 0."""
    _fold()
    return collections.Counter(_counts)


def total() -> int:
    _fold()
    return sum(_counts.values())


def reset_launch_counts() -> None:
    _fold()
    for key in _counts:
        _counts[key] = 0


def suppressed() -> bool:
    return _suppress[0]


@contextlib.contextmanager
def suppress_launches() -> Iterator[None]:
    """Within this block, custom kernel launches are counted but not executed."""
    _suppress[0] = True
    for _, _, suppress in _native:
        suppress(True)
    try:
        yield
    finally:
        _suppress[0] = False
        for _, _, suppress in _native:
            suppress(False)
