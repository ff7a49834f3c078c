"""Launch accounting: how many custom kernels a candidate launched (C++ calls, Triton launches).

The harness resets the counters before each forward and reads them after; a candidate that
launches nothing is not a kernel (see harness/integrity.py).
"""
from __future__ import annotations

_counts = {"cpp": 0, "triton": 0}


def record(kind: str, n: int = 1) -> None:
    _counts[kind] = _counts.get(kind, 0) + n


def launch_counts() -> dict[str, int]:
    return dict(_counts)


def reset_launch_counts() -> None:
    for key in _counts:
        _counts[key] = 0
