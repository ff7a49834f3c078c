"""kernelevolve: agentic kernel optimisation with a gated, sandboxed, honest harness.

    import kernelevolve
    result = kernelevolve.evaluate("problem.py", "candidate.py", platform="cpu")
    run = kernelevolve.optimize("problem.py", seeds=["candidate.py"], max_evals=30)
    run = kernelevolve.Run.load(run.id)          # later, or from another process
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelevolve.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from kernelevolve.run import Run


def evaluate(problem: Any, candidate: Any, **kwargs: Any):
    """Evaluate a candidate module against a problem; see `kernelevolve.harness.driver.evaluate`."""
    from kernelevolve.harness.driver.evaluate import evaluate as _evaluate

    return _evaluate(problem, candidate, **kwargs)


def optimize(problem: Any, *, seeds: list[Any] = (), workspace: Any = ".kernelevolve",
             config: Any = None, platform: str | None = None,
             operators: list[str] | None = None, policy: str | None = None,
             max_evals: int | None = None, max_time: float | None = None,
             target: float | None = None, workers: int | None = None, seed: int | None = None,
             allow_no_kernel: bool | None = None, strict: bool | None = None,
             executor: str | None = None, ray_address: str | None = None) -> "Run":
    """Run a search (as `kernelevolve optimize` does) and return the finished `Run`.

    Settings left out come, as on the command line, from `config` (a run config TOML file, like
    `--config`), else from the file `KERNELEVOLVE_CONFIG` names, else the defaults of
    `kernelevolve optimize --help`. `executor="ray"` evaluates on Ray actors (`ray_address`, or
    a private instance on 127.0.0.1); `workers` is the number of evaluation slots (default: 1
    locally, the cluster's on Ray)."""
    from kernelevolve.config import build_config
    from kernelevolve.run import Run

    flags = {"platform": platform, "policy": policy, "max_evals": max_evals,
             "max_time": max_time, "target": target, "workers": workers, "seed": seed,
             "allow_no_kernel": allow_no_kernel, "strict": strict, "executor": executor,
             "ray_address": ray_address,
             "operators": None if operators is None else list(operators)}
    run = Run.create(problem, build_config(config, flags), seeds=list(seeds), workspace=workspace)
    run.execute()
    return run


def patch(model: Any, registry: Any = None, names: Any = None, **kwargs: Any):
    """Swap registered kernels into `model`'s matching modules, with fallback to the original
    module outside the validated region; see `kernelevolve.registry.patching.patch`."""
    from kernelevolve.registry.patching import patch as _patch

    return _patch(model, registry, names, **kwargs)


def patched(model: Any, registry: Any = None, names: Any = None, **kwargs: Any):
    """`patch` as a context manager: the original forwards come back at the block's end."""
    from kernelevolve.registry.patching import patched as _patched

    return _patched(model, registry, names, **kwargs)


def profiling(model: Any, case: str = "default"):
    """Record where `model`'s time goes while your own code runs it on real inputs:
    `with kernelevolve.profiling(model) as result: ...; result()["kinds"]` (model/profile.py)."""
    from kernelevolve.model.profile import profiling as _profiling

    return _profiling(model, case)


def tune_model(model_file: Any, *, workspace: Any = ".kernelevolve", **options: Any) -> dict:
    """`kernelevolve tune-model` from Python; options are model.tune.TuneOptions fields.
    Returns the summary (hot_spots, verdicts, left_out, coverage, model figures)."""
    from pathlib import Path

    from kernelevolve.model.tune import TuneOptions, tune_model as _tune

    return _tune(Path(model_file), Path(workspace), TuneOptions(**options))


def tuned_model(model_file: Any, workspace: Any = ".kernelevolve"):
    """(model, session): the model file's model with the kernels `tune-model` promoted served
    in, falling back outside their validated regions; `session.unpatch()` undoes it."""
    from kernelevolve.model.serve import tuned_model as _tuned

    return _tuned(model_file, workspace)


def coverage(name: str | None = None) -> dict:
    """Live serving counters per kernel name: served, fallbacks by reason, shadow, time saved."""
    from kernelevolve.registry.patching import coverage as _coverage

    return _coverage(name)


def __getattr__(name: str) -> Any:
    if name == "Run":  # imported lazily: `import kernelevolve` stays light
        from kernelevolve.run import Run

        return Run
    raise AttributeError(f"module 'kernelevolve' has no attribute {name!r}")


__all__ = ["evaluate", "optimize", "patch", "patched", "coverage", "profiling", "tune_model",
           "tuned_model", "Run", "__version__"]
