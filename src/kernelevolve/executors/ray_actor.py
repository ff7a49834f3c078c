"""The Ray actor that evaluates on a cluster node: one sandboxed worker pool, the same gates.

The driver's files are not on this node, so a request carries the problem and candidate sources
by value; the actor writes the problem into its own scratch folder (once per actor, by hash)
and hands the candidate's text to its evaluator. Candidate code never runs in this process: as
locally, it runs in a bubblewrap worker, which here also cannot see Ray's session folder (its
unix sockets reach the cluster) or Ray's token. Results go back as plain dicts (`EvalResult.to_dict()`).

Errors a local evaluation raises come back as data under "error" (the driver raises them again);
anything else is a bug and propagates as Ray's task error.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve.candidate_file import Candidate
from kernelevolve.errors import CandidateError, PlatformError, ProblemError, SandboxError
from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
from kernelevolve.harness.driver.pool import Limits, WorkerPool
from kernelevolve.problem import Problem, load_problem


@dataclass
class ActorSpec:
    """How every actor builds its evaluator: what a local Evaluator is given, plus threads."""

    platform: str = "cpu"
    options: EvalOptions = field(default_factory=EvalOptions)
    sandbox: str | None = None
    threads: int | None = None
    secret_vars: tuple[str, ...] = ()
    limits: Limits | None = None


def _ray_private_dirs() -> tuple[str, ...]:
    """Ray's session folder (sockets to the raylet and object store) and ~/.ray (its token)."""
    dirs = [str(Path.home() / ".ray")]
    try:
        from ray._private import worker as ray_worker

        dirs.append(ray_worker._global_node.get_temp_dir_path())
    except Exception:  # noqa: BLE001 - Ray's internals moved: hide its default place
        dirs.append(os.path.join(tempfile.gettempdir(), "ray"))
    return tuple(dirs)


class EvalActor:
    """Created by the driver as `ray.remote(EvalActor).options(num_gpus=1 | num_cpus=T)`."""

    def __init__(self, spec: ActorSpec):
        import ray
        # torch.unravel_index (mismatch reports, every integrity check) imports sympy through
        # this module on first use: 0.5 s of the first evaluation, paid here while starting.
        import torch.fx.experimental.symbolic_shapes  # noqa: F401

        self.scratch = Path(tempfile.mkdtemp(prefix="kernelevolve-actor-"))
        self.pool = WorkerPool(spec.platform, 1, limits=spec.limits, sandbox_mode=spec.sandbox,
                               threads=spec.threads, secret_vars=tuple(spec.secret_vars),
                               hidden=_ray_private_dirs())
        try:
            self.evaluator = Evaluator(spec.platform, pool=self.pool, options=spec.options)
        except BaseException:
            self.pool.close()
            raise
        ctx = ray.get_runtime_context()
        self.node = {"hostname": socket.gethostname(), "node_id": ctx.get_node_id(),
                     "node_ip": ray.util.get_node_ip_address(), "actor_id": ctx.get_actor_id(),
                     "pid": os.getpid()}
        self._problems: dict[str, Problem] = {}

    def ready(self) -> dict[str, Any]:
        """The node, its fingerprint (measured inside the sandboxed worker) and our version."""
        from kernelevolve.version import __version__

        return {"node": self.node, "fingerprint": self.pool.fingerprint(),
                "version": __version__}

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            problem = self._problem(request["problem_relpath"], request["problem_source"])
            candidate = Candidate(request["candidate_source"], request["candidate_name"])
            result = self.evaluator.evaluate(problem, candidate, options=request.get("options"))
        except (ProblemError, CandidateError, PlatformError, SandboxError) as exc:
            return {"error": _error_data(exc), "node": self.node}
        reply: dict[str, Any] = {"result": result.to_dict(), "node": self.node}
        if request.get("ship_libraries"):  # the driver is on another node: send the .so bytes
            reply["libraries"] = {path: Path(path).read_bytes() for path in result.libraries
                                  if Path(path).is_file()}
        return reply

    def _problem(self, relpath: str, source: str) -> Problem:
        """`relpath`: "<folder>/<file>.py", as on the driver (a problem's name is its folder's
        when the file is problem.py)."""
        key = hashlib.sha256(source.encode()).hexdigest()
        if key not in self._problems:
            folder, name = Path(relpath).parent.name or "problem", Path(relpath).name
            path = self.scratch / "problems" / key[:16] / folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
            self._problems[key] = load_problem(path)
        return self._problems[key]

    def close(self) -> None:
        self.pool.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __del__(self) -> None:  # pragma: no cover - best effort when Ray ends the actor
        try:
            self.close()
        except Exception:
            pass


def _error_data(exc: Exception) -> dict[str, Any]:
    data = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, ProblemError):
        data.update(path=exc.path, fault=exc.fault)
    return data


def raise_error(data: dict[str, Any], problem_path: str) -> None:
    """Driver side: raise again what the actor's evaluation raised, naming the driver's problem
    file (a SandboxError is the node's fault, so the caller treats it as infrastructure)."""
    kind = data.get("type")
    if kind == "ProblemError":
        raise ProblemError(problem_path, data["fault"])
    cls = {"CandidateError": CandidateError, "PlatformError": PlatformError,
           "SandboxError": SandboxError}.get(kind, SandboxError)
    raise cls(data.get("message", ""))
