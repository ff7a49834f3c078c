"""Driver side of the sandboxed workers: start servers, send jobs, survive crashes.

Each `Worker` owns one sandboxed server process (harness/server.py) and a private scratch root;
a job runs in a fresh child forked by that server, in its own job directory. A child that
crashes, hangs or blows its limits is killed by the server and reported as data. If the server
itself dies or stops answering, the worker kills it and starts a new one on the next job, so the
pool stays usable whatever a candidate does.
"""
from __future__ import annotations

import itertools
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve import knobs
from kernelevolve.errors import SandboxError
from kernelevolve.harness import sandbox, wire
from kernelevolve.platforms import Platform, get_platform
from kernelevolve.types import SandboxFacts

GiB = 1 << 30


@dataclass
class Limits:
    memory_bytes: int | None = 4 * GiB   # address space a child may add (CPU platforms)
    cpu_seconds: int | None = 900        # CPU time of one job child (all its threads)
    total_timeout: float = 1800.0        # wall time of one job, whatever the stages say
    stage_timeouts: dict[str, float] = field(default_factory=lambda: {
        "start": 60, "problem": 300, "load": 300, "run": 120, "compile": 900, "timing": 600})


@dataclass
class JobOutcome:
    status: str                 # ok | failed | crashed | timeout | lost
    result: dict[str, Any] | None
    stage: str = "start"
    code: int | None = None
    signal: int | None = None
    timeout: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    stderr_tail: str = ""
    stdout_tail: str = ""

    def describe(self) -> str:
        """How the child ended, in one sentence fit for a prompt."""
        if self.status == "timeout":
            which = "its total" if self.timeout == "total" else f"the {self.stage!r} stage's"
            return f"killed after exceeding {which} time limit ({self.wall_s:.1f} s) during {self.stage}"
        if self.status == "lost":
            return "the worker server stopped answering and was restarted"
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in signal.valid_signals() else self.signal
            hint = {"SIGSEGV": " (segmentation fault: invalid memory access)",
                    "SIGBUS": " (bus error)", "SIGKILL": " (killed: memory or CPU limit?)",
                    "SIGXCPU": " (CPU-time limit exceeded)", "SIGABRT": " (aborted)",
                    "SIGFPE": " (arithmetic fault)"}.get(str(name), "")
            return f"the worker died from {name}{hint} during {self.stage}"
        if self.status == "crashed" and self.code == 0:
            return (f"the worker exited with status 0 before reporting a result, during "
                    f"{self.stage} (os._exit or sys.exit from candidate code?)")
        if self.status == "crashed":
            tail = self.stderr_tail.strip().splitlines()[-1:] or [""]
            return f"the worker exited with status {self.code} during {self.stage}: {tail[0]}"
        return self.status


class Worker:
    def __init__(self, platform: Platform, threads: int, limits: Limits, sandbox_mode: str,
                 index: int = 0, secret_vars: tuple[str, ...] = (), hidden: tuple[str, ...] = ()):
        self.platform, self.threads, self.limits = platform, threads, limits
        self.secret_vars, self.hidden = secret_vars, hidden
        self.sandbox_mode, self.index = sandbox_mode, index
        self.proc: subprocess.Popen[bytes] | None = None
        self.root: Path | None = None
        self.facts = SandboxFacts()
        self.preloaded: dict[str, Any] = {}
        self.restarts = 0
        self._buf = b""
        self._ids = itertools.count(1)

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix=f"kernelevolve-w{self.index}-"))
        cache = knobs.cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        plan = sandbox.plan(self.sandbox_mode, [self.root, cache],
                            list(self.platform.sandbox_devices), self.hidden)
        extra = {**self.platform.worker_env(self.threads),
                 "KERNELEVOLVE_PRELOAD": ",".join(self.platform.preload()),
                 "KERNELEVOLVE_CACHE_DIR": str(cache),
                 "TRITON_CACHE_DIR": str(cache / "triton"),
                 "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                 "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
                 "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(self.root)}
        env, removed = sandbox.scrubbed_env(extra=extra, also_drop=self.secret_vars)
        cmd = [*plan.prefix, sys.executable, "-m", "kernelevolve.harness.server"]
        log = open(self.root / "server.log", "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=env, cwd=self.root)
        finally:
            log.close()
        self._buf = b""
        line = self._readline(timeout=180)
        if line is None or not json.loads(line).get("ready"):
            tail = self._server_log_tail()
            self.kill()
            raise SandboxError(f"the worker server did not start ({plan.method}): {tail}")
        self.preloaded = json.loads(line).get("preloaded", {})
        mem = self.limits.memory_bytes if self.platform.limits_memory else None
        warnings = list(plan.warnings)
        if self.limits.memory_bytes and not self.platform.limits_memory:
            warnings.append(f"host memory not limited on {self.platform.name}: the GPU driver "
                            "needs more address space than RLIMIT_AS allows")
        self.facts = SandboxFacts(method=plan.method, network_isolated=plan.network_isolated,
                                  filesystem_readonly=plan.filesystem_readonly,
                                  memory_limit_bytes=mem, cpu_limit_s=self.limits.cpu_seconds,
                                  env_scrubbed=True, scrubbed_vars=removed, warnings=warnings)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe:
                    pipe.close()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._send({"job": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ---- jobs --------------------------------------------------------------------------------
    def run(self, job: str, params: dict[str, Any]) -> JobOutcome:
        if not self.alive:
            if self.proc is not None:
                self.restarts += 1
            self.kill()
            self.start()
        assert self.root is not None
        job_id = next(self._ids)
        jobdir = self.root / f"job{job_id}"
        jobdir.mkdir()
        limits = {"memory_bytes": self.limits.memory_bytes if self.platform.limits_memory else None,
                  "cpu_seconds": self.limits.cpu_seconds,
                  "total_timeout": self.limits.total_timeout,
                  "stage_timeouts": self.limits.stage_timeouts}
        request = {**params, "job": job, "platform": self.platform.name, "threads": self.threads,
                   "stage_timeouts": self.limits.stage_timeouts}
        (jobdir / "request.json").write_text(json.dumps(request))
        try:
            self._send({"id": job_id, "job": job, "dir": str(jobdir), "limits": limits})
            line = self._readline(timeout=self.limits.total_timeout + 60)
        except OSError:
            line = None
        try:
            if line is None:
                self.kill()
                return JobOutcome("lost", None, stderr_tail=self._tail(jobdir / "stderr.log"))
            return self._outcome(json.loads(line), jobdir)
        finally:
            shutil.rmtree(jobdir, ignore_errors=True)

    def _outcome(self, reply: dict[str, Any], jobdir: Path) -> JobOutcome:
        out = JobOutcome(status="crashed", result=None, stage=reply.get("stage", "start"),
                         code=reply.get("code"), signal=reply.get("signal"),
                         timeout=reply.get("timeout"), wall_s=reply.get("wall_s", 0.0),
                         cpu_s=reply.get("cpu_s", 0.0), maxrss_kb=reply.get("maxrss_kb", 0),
                         stderr_tail=self._tail(jobdir / "stderr.log"),
                         stdout_tail=self._tail(jobdir / "stdout.log"))
        if reply.get("status") == "timeout":
            out.status = "timeout"
            return out
        result_file = jobdir / "result.bin"
        # A result counts only if the child also exited cleanly after writing it.
        if reply.get("status") == "exited" and reply.get("code") == 0 and result_file.exists():
            try:
                result = wire.decode(result_file.read_bytes())
            except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure is a reject
                out.stderr_tail += f"\nmalformed result: {exc}"
                return out
            if isinstance(result, dict):
                out.result = result
                out.status = "ok" if result.get("ok") else "failed"
        return out

    # ---- protocol ----------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def _readline(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    return None
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def _server_log_tail(self) -> str:
        return self._tail(self.root / "server.log") if self.root else ""

    @staticmethod
    def _tail(path: Path, limit: int = 2000) -> str:
        try:
            data = path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace")


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

    def __init__(self, platform: str | Platform = "cpu", workers: int = 1, *,
                 limits: Limits | None = None, sandbox_mode: str | None = None,
                 threads: int | None = None, secret_vars: tuple[str, ...] = (),
                 hidden: tuple[str, ...] = ()):
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self.platform = get_platform(platform) if isinstance(platform, str) else platform
        self.limits = limits or Limits()
        self.threads = threads or default_threads(workers)
        mode = sandbox_mode or knobs.sandbox_mode()
        self.workers = [Worker(self.platform, self.threads, self.limits, mode, i,
                               tuple(secret_vars), tuple(hidden)) for i in range(workers)]
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._fingerprint: dict[str, Any] | None = None
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
            raise

    def run(self, job: str, params: dict[str, Any]) -> JobOutcome:
        worker = self._idle.get()
        try:
            return worker.run(job, params)
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
                out = self.run("fingerprint", {})
                fp = dict(out.result["fingerprint"]) if out.status == "ok" and out.result else {
                    "platform": self.platform.name, "error": out.describe()}
                facts = self.sandbox_facts
                fp.update(network_isolated=facts.network_isolated, sandbox=facts.method)
                self._fingerprint = fp
            return dict(self._fingerprint)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for w in self.workers:
                w.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
