"""One sandboxed worker server, driver side: start it, send jobs, relay builds, trust no byte.

Each job gets a folder with an unpredictable name in the worker's `jobs/` (read-only inside the
sandbox), holding `request.json` (with the problem's source as text) and a copy of the
candidate: workers never read the user's files by path, and the user's folders do not exist in
their sandbox (harness/containment/allowlist.py). The result comes back in a file the driver opened itself
in a private folder and passed as a descriptor: the driver reads it through its own descriptor
with a size cap, so nothing a job does to paths (symlinks, FIFOs, squatted names) can reach it.
Output tails come in the server's reply. While a job runs, its `load_cpp` builds arrive here as
`service` lines and are answered by the build service. A reply that is malformed, oversized or
late kills the server (it is restarted on the next job) and becomes the job's failure.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelevolve import knobs, plugins
from kernelevolve.errors import SandboxError
from kernelevolve.harness.protocol import frames, text
from kernelevolve.harness.protocol.messages import Containment, JobParams, JobRequest, RunJob
from kernelevolve.harness.driver import outcome
from kernelevolve.harness.containment import sandbox
from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.driver.outcome import JobOutcome
from kernelevolve.platforms import Platform
from kernelevolve.types import SandboxFacts

MAX_REPLY = 1 << 20


class Worker:
    def __init__(self, platform: Platform, threads: int, limits: Any, sandbox_mode: str,
                 base: Path, builds: BuildService, index: int = 0,
                 secret_vars: tuple[str, ...] = (), hidden: tuple[str, ...] = ()):
        self.platform, self.threads, self.limits = platform, threads, limits
        self.sandbox_mode, self.index, self.builds = sandbox_mode, index, builds
        self.secret_vars, self.hidden = secret_vars, hidden
        self.root = base / f"w{index}"
        self.private = base / f"private-w{index}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.facts = SandboxFacts()
        self.readable: list[str] = []  # what its jobs may read (Landlock), set at start
        self.preloaded: dict[str, Any] = {}
        self.helpers: dict[str, dict[str, str]] = {}
        self.restarts = 0
        self._reader = frames.LineReader(frames.MAX_LINE)
        self._lines: list[bytes] = []
        self._ids = itertools.count(1)
        self._log: Any = None
        self._started = False

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for folder in (self.root / "jobs", self.root / "scratch", self.private):
            folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.private, 0o700)
        cache = knobs.cache_dir()
        layout = sandbox.Layout(self.root / "jobs", self.root / "scratch", cache, self.hidden,
                                tuple(self.platform.sandbox_paths))
        plan = sandbox.plan(self.sandbox_mode, layout, list(self.platform.sandbox_devices))
        self.readable = sandbox.readable(layout, list(self.platform.sandbox_devices))
        scratch = str(self.root / "scratch")
        extra = {**self.platform.worker_env(self.threads),
                 "KERNELEVOLVE_PRELOAD": ",".join(plugins.preloads(self.platform)),
                 **{var: f"{scratch}/{sub}"
                    for var, sub in plugins.cache_env(self.platform).items()},
                 "TORCHINDUCTOR_CACHE_DIR": f"{scratch}/inductor",
                 "TORCH_EXTENSIONS_DIR": f"{scratch}/torch_extensions",
                 # inductor compiles in this process, never in a pool of helper processes that
                 # candidate code could hand work to
                 "TORCHINDUCTOR_COMPILE_THREADS": "1",
                 "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": scratch, "HOME": scratch}
        env, removed = sandbox.worker_env(extra=extra, also_drop=self.secret_vars)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [*plan.prefix, *self.server_command(theirs.fileno())]
        if self._log is None:  # read later through this descriptor, never by path
            self._log = tempfile.TemporaryFile(dir=self.private)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, env=env, cwd=self.root / "jobs",
                                         pass_fds=[theirs.fileno()], start_new_session=True)
        finally:
            theirs.close()
        self.sock, self._started = mine, True
        self._reader, self._lines = frames.LineReader(frames.MAX_LINE), []
        ready = self._message(timeout=180)
        if ready is None or ready.get("ready") is not True:
            tail = self._server_log_tail()
            self.kill()
            raise SandboxError(f"the worker server did not start ({plan.method}): {tail}")
        self.preloaded = ready.get("preloaded") if isinstance(ready.get("preloaded"), dict) else {}
        self.facts = _facts(plan, ready, self.limits, self.platform, removed)
        warm = self.builds.helper("ke_warm_omp", WARM_OMP)
        self.helpers = {"ke_warm_omp": warm} if warm else {}
        self.helpers["ke_launch"] = self.builds.launcher()

    def server_command(self, fd_socket: int) -> list[str]:
        return [sys.executable, "-m", "kernelevolve.harness.worker.server", "--fd-socket", str(fd_socket)]

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
        if self.sock is not None:
            self.sock.close()
        self.proc, self.sock = None, None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._send({"job": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.private, ignore_errors=True)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ---- jobs --------------------------------------------------------------------------------
    def run(self, params: JobParams) -> JobOutcome:
        if not self.alive:
            if self._started:
                self.restarts += 1
            self.kill()
            self.start()
        job_id = next(self._ids)
        jobdir = Path(tempfile.mkdtemp(prefix="job-", dir=self.root / "jobs"))
        log: list[dict[str, Any]] = []
        try:
            request = self._request(params, jobdir)
            with tempfile.TemporaryFile(dir=self.private) as result:
                reply = self._exchange(job_id, jobdir, result.fileno(), log,
                                       inspect=params.inspect_libraries,
                                       timeouts=dict(request.stage_timeouts))
                out = self._outcome(reply, result.fileno(), params.job)
        finally:
            shutil.rmtree(jobdir, ignore_errors=True)
        out.services = log
        return out

    def _request(self, params: JobParams, jobdir: Path) -> JobRequest:
        if isinstance(params, RunJob):
            params = self._by_value(params, jobdir)
        request = JobRequest(
            params=params, platform=self.platform.name, threads=self.threads,
            stage_timeouts=self.limits.for_job(params.interpreted), helpers=self.helpers,
            containment=Containment(seccomp=params.syscall_filter, landlock=True,
                                    profile=params.filter_profile or self.platform.filter_profile,
                                    devices=tuple(self.platform.sandbox_devices),
                                    readable=tuple(self.readable)))
        (jobdir / "request.json").write_text(json.dumps(request.to_wire()))
        return request

    @staticmethod
    def _by_value(params: RunJob, jobdir: Path) -> RunJob:
        """The problem as text (imported from text: problem.import_source), the candidate's text
        written into the job's folder: the sandbox cannot see the user's files."""
        src = Path(params.problem)
        changes = {"problem": src.name,
                   "problem_source": importlib.util.decode_source(src.read_bytes())}
        if params.candidate:
            path = jobdir / "candidate" / Path(params.candidate).name
            path.parent.mkdir()
            path.write_text(params.candidate_source)
            changes.update(candidate=str(path), candidate_source="")
        return dataclasses.replace(params, **changes)

    def _exchange(self, job_id: int, jobdir: Path, result_fd: int, log: list[dict[str, Any]],
                  inspect: bool, timeouts: dict[str, float]) -> dict[str, Any] | None:
        limits = {"memory_bytes": self.limits.memory_bytes if self.platform.limits_memory else None,
                  "cpu_seconds": self.limits.cpu_seconds, "result_bytes": self.limits.result_bytes,
                  "total_timeout": self.limits.total_timeout, "stage_timeouts": timeouts}
        try:
            self._send({"id": job_id, "dir": str(jobdir),
                        "scratch": str(self.root / "scratch"), "limits": limits})
            socket.send_fds(self.sock, [f"job {job_id}".encode()], [result_fd])
        except OSError:
            return None
        deadline = time.monotonic() + self.limits.total_timeout + self.limits.reply_slack_s
        while True:
            msg = self._message(timeout=deadline - time.monotonic())
            if msg is None or msg.get("id") != job_id:
                return None
            if "service" not in msg:
                return msg
            answer = self.builds.handle(msg["service"], log, inspect)
            try:
                self._send({"id": job_id, "service_reply": answer})
            except OSError:
                return None

    def _outcome(self, reply: dict[str, Any] | None, result_fd: int, job: str) -> JobOutcome:
        if reply is None:
            tail = self._server_log_tail()
            self.kill()
            return JobOutcome("lost", reason="the worker server stopped answering or sent "
                              "a malformed reply, and was restarted" +
                              (f": {text.clean(tail[-300:])}" if tail.strip() else ""))
        out = outcome.from_reply(reply)
        if out.status != "crashed" or out.reason or reply.get("status") != "exited" \
                or out.code != 0:
            return out
        size = os.fstat(result_fd).st_size
        if size == 0:
            return out  # exited cleanly without a result: os._exit(0) or the like
        if size > self.limits.result_bytes:
            out.reason = (f"the job's result is {size} bytes, over the {self.limits.result_bytes} "
                          "byte limit")
            return out
        return outcome.read_result(out, os.pread(result_fd, size, 0), job)

    # ---- protocol ----------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(frames.dump_line(msg))
        self.proc.stdin.flush()

    def _message(self, timeout: float) -> dict[str, Any] | None:
        """The server's next message, or None (timeout, exit, or malformed: kill it then)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        try:
            while not self._lines:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
                if not ready:
                    if self.proc.poll() is not None:
                        return None
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self._lines += [line for line in self._reader.feed(chunk) if line.strip()]
            return frames.parse(self._lines.pop(0))
        except (frames.FrameError, OSError):
            self._lines = []
            return None

    def _server_log_tail(self, limit: int = 2000) -> str:
        if self._log is None:
            return ""
        try:
            fd = self._log.fileno()
            size = os.fstat(fd).st_size
            return os.pread(fd, limit, max(0, size - limit)).decode(errors="replace")
        except OSError:
            return ""


def _facts(plan: sandbox.SandboxPlan, ready: dict[str, Any], limits: Any, platform: Platform,
           removed: int) -> SandboxFacts:
    mem = limits.memory_bytes if platform.limits_memory else None
    warnings = list(plan.warnings)
    if limits.memory_bytes and not platform.limits_memory:
        warnings.append(f"host memory not limited on {platform.name}: the GPU driver "
                        "needs more address space than RLIMIT_AS allows")
    syscall_filter = ready.get("syscall_filter")
    syscall_filter = syscall_filter if syscall_filter in ("notify", "kill", "none") else "none"
    if syscall_filter == "none":
        warnings.append("NO SYSCALL FILTER: this kernel or architecture cannot take the seccomp "
                        "filter; candidate code can start processes, open sockets and write files")
    landlock = ready.get("landlock_abi") if isinstance(ready.get("landlock_abi"), int) else 0
    return SandboxFacts(method=plan.method, network_isolated=plan.network_isolated,
                        filesystem_readonly=plan.filesystem_readonly,
                        memory_limit_bytes=mem, cpu_limit_s=limits.cpu_seconds,
                        env_scrubbed=True, scrubbed_vars=removed, warnings=warnings,
                        syscall_filter=syscall_filter, landlock_abi=landlock,
                        pid_namespace=ready.get("pid_namespace") is True,
                        capabilities=ready.get("capabilities") == 0 and "none" or "some")


# Built once per pool and loaded by each check job to start OpenMP's thread team before the
# candidate runs (harness/worker/probe.py warm_thread_pools), so its threads count as the pool's.
WARM_OMP = r"""
extern "C" int ke_warm_omp() {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n;
}
"""
