"""Local executor: the harness's sandboxed worker pool, driven from asyncio.

Each evaluation blocks one worker for seconds, so it runs in a thread (the pool is thread-safe,
one thread per worker); the search loop stays responsive while evaluations are in flight.
"""
from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kernelevolve.candidate_file import Candidate
from kernelevolve.errors import ProblemError, SandboxError
from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
from kernelevolve.problem import Problem
from kernelevolve.errors import InfraError
from kernelevolve.types import EvalResult


class LocalExecutor:
    name = "local"

    def __init__(self, evaluator: Evaluator, workers: int):
        self.evaluator = evaluator
        self.workers = workers
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ke-eval")

    @property
    def slots(self) -> int:
        return self.workers

    def fingerprint(self) -> dict[str, Any]:
        return self.evaluator.pool.fingerprint()

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "slots": self.slots,
                "nodes": [{"hostname": socket.gethostname(), "slots": self.slots}]}

    async def evaluate(self, problem: Problem, candidate: Candidate,
                       options: EvalOptions | None = None) -> EvalResult:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._threads, self._evaluate, problem, candidate,
                                                options)
        except (ProblemError, InfraError):
            raise
        except SandboxError as exc:
            raise InfraError(f"worker sandbox failed: {exc}") from exc
        result.measured_on = {"executor": self.name, "hostname": socket.gethostname(),
                              "attempts": 1}
        return result

    def _evaluate(self, problem: Problem, candidate: Candidate,
                  options: EvalOptions | None) -> EvalResult:
        return self.evaluator.evaluate(problem, candidate, options=options)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self.evaluator.close()
