"""Driver side of the sandboxed workers: a pool of them, their limits, thread counts.

Each `Worker` (harness/driver/worker_handle.py) owns one sandboxed server process (harness/worker/server.py); a job
runs in a fresh child forked by that server. A child that crashes, hangs, blows its limits or
trips the syscall filter is killed by the server and reported as data. If the server itself dies
or stops answering, the worker kills it and starts a new one on the next job, so the pool stays
usable whatever a candidate does. The pool's workers share one temporary folder (hidden from
every sandbox) and one build service (harness/driver/build_service.py), which compiles what jobs ask for.
"""
from __future__ import annotations

import dataclasses
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve import knobs
from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.driver.outcome import JobOutcome
from kernelevolve.harness.driver.worker_handle import Worker
from kernelevolve.harness.protocol.messages import (FingerprintJob, JobParams, MachineJob,
                                                    params_from_wire)
from kernelevolve.platforms import Platform
from kernelevolve.target import Target, platform_of
from kernelevolve.types import SandboxFacts

GiB = 1 << 30

__all__ = ["JobOutcome", "Limits", "Worker", "WorkerPool", "default_threads"]


@dataclass
class Limits:
    memory_bytes: int | None = 4 * GiB   # address space a child may add (CPU platforms)
    cpu_seconds: int | None = 900        # CPU time of one job child (all its threads)
    total_timeout: float = 1800.0        # wall time of one job, whatever the stages say
    result_bytes: int = 4 * GiB          # the largest result file a job may write
    reply_slack_s: float = 60.0          # how long past total_timeout the driver waits for a
                                         # worker server's answer before restarting it
    stage_timeouts: dict[str, float] = field(default_factory=lambda: {
        "start": 60, "problem": 300, "load": 300, "run": 120, "compile": 900, "timing": 600})
    stage_timeout_s: float | None = None  # the user's limit for load, run and timing
    machine_factor: float | None = None   # None: measured when the pool starts

    def for_job(self, interpreted: bool = False) -> dict[str, float]:
        """The stage limits of one job (harness/driver/stage_limits.py)."""
        from kernelevolve.harness.driver.stage_limits import stage_timeouts

        return stage_timeouts(self.stage_timeouts, factor=self.machine_factor or 1.0,
                              interpreted=interpreted, override_s=self.stage_timeout_s)


def default_threads(workers: int) -> int:
    configured = knobs.worker_threads()
    if configured:
        return configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, workers))


class WorkerPool:
    """A fixed set of sandboxed workers; `run()` is thread-safe and blocks for a free worker."""

    def __init__(self, platform: str | Platform | Target = "cpu", workers: int = 1, *,
                 limits: Limits | None = None, sandbox_mode: str | None = None,
                 threads: int | None = None, secret_vars: tuple[str, ...] = (),
                 hidden: tuple[str, ...] = ()):
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self.platform = platform_of(platform)  # a Platform, a resolved Target, or a name
        self.limits = limits or Limits()
        if self.limits.machine_factor is None:  # a loaded machine gets longer stage limits
            from kernelevolve.harness.driver.stage_limits import machine_factor

            self.limits = dataclasses.replace(self.limits, machine_factor=machine_factor())
        self.threads = threads or default_threads(workers)
        mode = sandbox_mode or knobs.sandbox_mode()
        self.base = Path(tempfile.mkdtemp(prefix="kernelevolve-pool-"))
        self.builds = BuildService(knobs.cache_dir(), mode)
        self.workers = [Worker(self.platform, self.threads, self.limits, mode, self.base,
                               self.builds, i, tuple(secret_vars), tuple(hidden))
                        for i in range(workers)]
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._fingerprint: dict[str, Any] | None = None
        self.machine_measurements = 0  # machine jobs this pool ran (0: figures from the cache)
        self._lock = threading.Lock()
        self._closed = False
        started: list[Worker] = []
        try:
            for w in self.workers:
                w.start()
                started.append(w)
                self._idle.put(w)
        except BaseException:
            for w in started:
                w.close()
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    def run(self, job: str, params: JobParams | dict[str, Any] | None = None) -> JobOutcome:
        """Run one job; `params` typed (harness/protocol/messages.py) or, from tools and tests,
        its wire form, decoded and checked here."""
        if not isinstance(params, JobParams):
            params = params_from_wire(job, params or {})
        elif params.job != job:
            raise ValueError(f"a {params.job} job's parameters for a {job} job")
        worker = self._idle.get()
        try:
            return worker.run(params)
        finally:
            self._idle.put(worker)

    @property
    def sandbox_facts(self) -> SandboxFacts:
        return self.workers[0].facts

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)

    def fingerprint(self) -> dict[str, Any]:
        """The measuring machine, described from inside a worker (once per pool)."""
        with self._lock:
            if self._fingerprint is None:
                out = self.run("fingerprint", FingerprintJob())
                fp = dict(out.reply.fingerprint) if out.status == "ok" else {
                    "platform": self.platform.name, "error": out.describe()}
                facts = self.sandbox_facts
                fp.update(network_isolated=facts.network_isolated, sandbox=facts.method)
                if isinstance(fp.get("machine"), dict):
                    fp["machine"] = {**fp["machine"], **self._machine_figures(fp)}
                self._fingerprint = fp
            return dict(self._fingerprint)

    def _machine_figures(self, fp: dict[str, Any]) -> dict[str, Any]:
        """Bandwidth and peaks from this machine's cache file, or measured by a worker (once per
        machine and toolchain) and written there. The driver alone reads and writes the cache."""
        from kernelevolve.platforms import machine_facts

        path = machine_facts.cache_path(fp)
        cached = machine_facts.read_cached(path)
        if cached is not None:
            return {**cached, "cached": True}
        out = self.run("machine", MachineJob())
        if out.status != "ok":
            return {"error": "measuring the machine failed: " + out.describe()}
        figures = dict(out.reply.machine)
        self.machine_measurements += 1
        why = machine_facts.write_cached(path, figures)
        return {**figures, "cached": False, **({"cache_error": why} if why else {})}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for w in self.workers:
                w.close()
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
