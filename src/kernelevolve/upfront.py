"""What can be checked in the driver's own process, in about the time of an import, before any
sandboxed worker starts or any run is created.

A seed candidate that does not parse, defines no `ModelNew` or breaks a static rule, and a
problem whose inputs cannot fit in this machine's memory, used to surface only after the worker
pool had started (17-30 s), the memory one as a raw allocation error that left an `interrupted`
run with no evaluation behind. Both are now one-line errors with exit code 2 (errors.py).
`eval`'s own static rejection stays a verdict (REJECTED at static, exit 1); the evaluator simply
starts its pool only once a candidate has passed that gate (harness/driver/evaluate.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kernelevolve.errors import ProblemError, UsageError


def check_memory(problem_path: str | Path) -> None:
    """The problem's inputs, weights and reference peak fit in the memory available now (the
    meta-device estimate `bench` skips problems by; memory_estimate.py). A problem that cannot be
    estimated on meta is let through, as `bench` does."""
    from kernelevolve.memory_estimate import too_big

    reason = too_big(problem_path)
    if reason:
        raise ProblemError(str(problem_path), f"too big for this machine: it {reason}; use "
                           "smaller shapes in get_inputs() or a machine with more memory")


def check_seeds(seeds: Iterable[tuple[str, str]], platform: str | None,
                flag: str = "--seed-candidate") -> None:
    """Each (name, source) passes the static gate on `platform`; raises UsageError with the
    gate's first line otherwise (the full reason is what `kernelevolve eval` prints)."""
    from kernelevolve.harness.protocol.text import clean

    for name, source in seeds:
        report = static_report(source, name, platform)
        if not report.ok:
            first = clean(report.reason).splitlines()[0] if report.reason else "rejected"
            raise UsageError(f"{flag} {name}: rejected at the static gate: {first} "
                             f"(`kernelevolve eval PROBLEM {name}` shows the whole reason)")


def static_report(source: str, name: str, platform: str | None):
    """The static gate's report on `source` (harness/gates/static.py), as the evaluator makes
    it; `eval` estimates memory only for a candidate that passes (a rejection starts no worker,
    and the estimate costs about 2 s of torch imports)."""
    from kernelevolve.harness.gates.static import check_static
    from kernelevolve.target import resolve

    target = resolve(platform)
    return check_static(source, Path(name).name, target.platform.name,
                        target.platform.languages)
