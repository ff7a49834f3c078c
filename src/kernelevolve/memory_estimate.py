"""Will a problem fit in this machine's memory? Estimated on the meta device, before any run.

For each case, the problem's `get_init_inputs()`, `Model(*init)` and `get_inputs()` run under
`torch.device("meta")`: shapes and dtypes without memory or data. Inputs plus parameters and
buffers, times `FACTOR` (outputs and eager's temporaries, and the harness keeps reference
outputs and a few input sets), is compared with MemAvailable. The reference's forward runs on
meta too (memory_peak.py): what it allocates at its peak, twice (the harness keeps the
reference's outputs while the candidate makes its own), plus the inputs and weights, is needed
as well, so a problem whose reference makes a huge intermediate from small inputs is skipped
with the figure instead of failing out of memory. A problem whose factory cannot run on meta (it
names a device, or calls `.numpy()`) is not estimated and simply runs.

An estimate is kept under the compile cache (`knobs.cache_dir()`), keyed by the problem file's
bytes, torch's version and this estimator's own code: running the factories on meta imports
sympy through torch (about 1.5 s), which every `eval` and `optimize` process paid again for the
same problem. MemAvailable is read fresh each time; only the problem's figures are kept.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from kernelevolve.memory_peak import forward_peak

FACTOR = 4


def available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tensor_bytes(values: Any) -> int:
    import torch

    total = 0
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += _tensor_bytes(v)
    return total


def estimate(problem_path: str | Path) -> dict[str, Any]:
    """{"bytes": the inputs and weights of the case needing most, "case": its name, "peak":
    its reference's forward peak (0: not measured)} or {"unknown": why}."""
    import torch

    from kernelevolve.problem import CaseBinder, import_module, load_problem

    try:
        problem = load_problem(problem_path)
        module = import_module(problem_path)
    except Exception as exc:  # noqa: BLE001 - the run reports the problem's own error
        return {"unknown": str(exc)}
    worst: dict[str, Any] = {"bytes": 0, "case": None}
    try:
        binder = CaseBinder(module, problem.cases)
        for case in problem.cases:
            binder.bind(case)
            with torch.device("meta"):
                init = list(module.get_init_inputs())
                model = module.Model(*init)
                inputs = list(module.get_inputs())
            state = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else []
            size = _tensor_bytes(inputs) + _tensor_bytes(state)
            peak = forward_peak(model, inputs) or 0
            if _need(size, peak) > _need(worst["bytes"], worst.get("peak", 0)):
                worst = {"bytes": size, "case": case.name, "peak": peak}
    except Exception as exc:  # noqa: BLE001 - not estimable on meta: let the run find out
        return {"unknown": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        sys.modules.pop(module.__name__, None)
    return worst


def _need(size: int, peak: int) -> int:
    """Bytes a run needs: FACTOR x the inputs and weights, or those plus twice the
    reference's forward peak when that is more."""
    return max(size * FACTOR, size + 2 * peak)


def _cache_path(problem_path: str | Path) -> Path | None:
    """Where the estimate of this problem file's bytes is kept (None: the file is unreadable,
    the estimate then reports why)."""
    from importlib.metadata import PackageNotFoundError, version

    from kernelevolve import knobs

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "none"
    digest = hashlib.sha256(torch_version.encode())
    try:
        digest.update(Path(problem_path).read_bytes())
        for code in (__file__, sys.modules[forward_peak.__module__].__file__):
            digest.update(Path(code).read_bytes())
    except OSError:
        return None
    return knobs.cache_dir() / "memory_estimates" / f"{digest.hexdigest()}.json"


def _kept(path: Path) -> dict[str, Any] | None:
    """A kept estimate, or None when there is none or it is not one (rebuilt then)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(found, dict) and set(found) == {"bytes", "case", "peak"}
          and all(type(found[k]) is int and found[k] >= 0 for k in ("bytes", "peak"))
          and isinstance(found["case"], (str, type(None))))
    return found if ok else None


def cached_estimate(problem_path: str | Path) -> dict[str, Any]:
    """estimate(), from the cache when this problem file was estimated before. An "unknown" is
    not kept: the problem's own error is reported fresh by the run."""
    path = _cache_path(problem_path)
    found = _kept(path) if path is not None else None
    if found is not None:
        return found
    found = estimate(problem_path)
    if path is not None and "unknown" not in found:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f"{path.name}.{os.getpid()}.part")
            part.write_text(json.dumps({"bytes": found["bytes"], "case": found["case"],
                                        "peak": found.get("peak", 0)}))
            os.replace(part, path)
        except OSError:
            pass  # a read-only cache costs the estimate's time, nothing else
    return found


def too_big(problem_path: str | Path, available: int | None = None) -> str | None:
    """A one-line reason to skip the problem, or None when it fits (or cannot be estimated)."""
    found = cached_estimate(problem_path)
    avail = available_bytes() if available is None else available
    if "unknown" in found or avail is None:
        return None
    size, peak = found["bytes"], found.get("peak", 0)
    need = _need(size, peak)
    if need <= avail:
        return None
    gib = 1024 ** 3
    why = f"x{FACTOR} for outputs and temporaries" if need == size * FACTOR else (
        f"and the reference's forward peaks at {peak / gib:.2f} GiB, twice that for it and "
        "the candidate")
    return (f"needs about {need / gib:.1f} GiB (case {found['case']}: {size / gib:.2f} "
            f"GiB of inputs and weights, {why}); {avail / gib:.1f} GiB available")
