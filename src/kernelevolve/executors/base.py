"""What `Run` needs from wherever evaluations happen (the local worker pool, a Ray cluster).

An executor evaluates one candidate (its source as text: `candidate_file.Candidate`) against
one problem with the harness's gates and returns the `EvalResult`. It raises `search.engine.InfraError` when the infrastructure failed
(the candidate then gets no verdict and no fitness, never 0), and `errors.ExecutorError` when
it cannot go on at all (the run stops, resumable).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:  # pragma: no cover - the factory stays importable without the harness
    from kernelevolve.candidate_file import Candidate
    from kernelevolve.harness.driver.evaluate import EvalOptions
    from kernelevolve.problem import Problem
    from kernelevolve.types import EvalResult

# (kind, data): executor events worth keeping with the run (re-queues, lost actors).
EventSink = Callable[[str, dict[str, Any]], None]


class Executor(Protocol):
    name: str

    @property
    def slots(self) -> int:
        """Evaluations that can run at once now (more requests wait in the executor)."""

    def fingerprint(self) -> dict[str, Any]:
        """The measuring machine, as the platform describes it from inside a worker."""

    def describe(self) -> dict[str, Any]:
        """Executor, slots and nodes, for the run's `executor_started` event."""

    async def evaluate(self, problem: "Problem", candidate: "Candidate",
                       options: "EvalOptions | None" = None) -> "EvalResult": ...

    def close(self) -> None: ...


def ignore_event(kind: str, data: dict[str, Any]) -> None:
    """The default event sink."""
