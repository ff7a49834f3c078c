"""Where evaluations run: `local` (the harness's worker pool, default) or `ray` (actors on a
Ray cluster, each with its own sandboxed pool). `make_executor` builds the one a run asks for."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kernelevolve.errors import UsageError
from kernelevolve.executors.base import EventSink, Executor, ignore_event

if TYPE_CHECKING:  # pragma: no cover
    from kernelevolve.config import RunConfig
    from kernelevolve.harness.driver.evaluate import EvalOptions

EXECUTORS = ("local", "ray")


def check_executor(name: str, ray_address: str | None = None) -> None:
    """One-line errors for an unknown executor, a Ray address without Ray, Ray not installed."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor {name!r}: choose one of {', '.join(EXECUTORS)}")
    if ray_address is not None and name != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if name == "ray":
        from kernelevolve.executors.ray_cluster import INSTALL_HINT, ray_available

        if not ray_available():
            raise UsageError(f"--executor ray: {INSTALL_HINT}")


def make_executor(config: "RunConfig", options: "EvalOptions", *,
                  secret_vars: tuple[str, ...] = (), ray_address: str | None = None,
                  on_event: EventSink = ignore_event) -> Executor:
    """The executor for a run; `ray_address` overrides the configured one (on resume)."""
    check_executor(config.executor, config.ray_address)
    from kernelevolve.harness.driver.pool import Limits

    limits = Limits(stage_timeout_s=config.stage_timeout) if config.stage_timeout else None
    if config.executor == "ray":
        from kernelevolve.executors.ray_actor import ActorSpec
        from kernelevolve.executors.ray_executor import RayExecutor

        spec = ActorSpec(platform=config.platform, options=options, sandbox=config.sandbox,
                         secret_vars=secret_vars, limits=limits)
        return RayExecutor(spec, address=ray_address or config.ray_address,
                           workers=config.workers, on_event=on_event)
    from kernelevolve.executors.local import LocalExecutor
    from kernelevolve.harness.driver.evaluate import Evaluator

    from kernelevolve.target import resolve

    workers = config.workers or 1
    return LocalExecutor(Evaluator(resolve(config.platform), workers=workers, options=options,
                                   sandbox_mode=config.sandbox, secret_vars=secret_vars,
                                   limits=limits), workers)


__all__ = ["EXECUTORS", "Executor", "EventSink", "check_executor", "make_executor"]
