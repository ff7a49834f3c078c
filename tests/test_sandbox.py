"""The worker sandbox, checked from outside: no network, no secrets, no writes beyond scratch.

Code runs in the sandbox two ways here: a probe *problem* (its get_inputs runs in the worker
child, like candidate code) and a probe *candidate* with the static rules turned off, so only
the sandbox stands between it and the host.
"""
from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from conftest import example
from kernelevolve import knobs
from kernelevolve.harness.driver.pool import WorkerPool
from kernelevolve.harness.containment.sandbox import is_sensitive, worker_env

SECRET = "sk-test-0123456789abcdef"

PROBE = '''
import os, socket
import torch
import torch.nn as nn

PORT = {port}
TARGET = {target!r}
HOME_TARGET = {home_target!r}  # the driver's home (inside, HOME points at the scratch)


def probe():
    facts = []
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=1)
        s.sendall(b"escaped")
        s.close()
        facts.append(1.0)
    except OSError:
        facts.append(0.0)
    facts.append(float(len(os.environ.get("KE_TEST_API_KEY", ""))))
    facts.append(float(len(os.environ.get("OPENAI_BASE_URL", ""))))
    for path in (TARGET, HOME_TARGET):
        try:
            with open(path, "w") as fh:
                fh.write("escaped")
            facts.append(1.0)
        except OSError:
            facts.append(0.0)
    try:  # the sandbox's private scratch is writable (the job folder is not)
        with open(os.path.join(os.environ["TMPDIR"], "scratch_ok.txt"), "w") as fh:
            fh.write("ok")
        facts.append(1.0)
    except OSError:
        facts.append(0.0)
    return facts
'''

PROBE_PROBLEM = PROBE + '''

class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.tensor(probe())]


def get_init_inputs():
    return []
'''

PROBE_CANDIDATE = PROBE + '''
import ctypes
from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {{
    for (int64_t r = 0; r < rows; ++r) {{
        const float* xr = x + r * cols; float* yr = y + r * cols;
        float m = -INFINITY; for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0; for (int64_t c = 0; c < cols; ++c) {{ yr[c] = std::exp(xr[c] - m); s += yr[c]; }}
        for (int64_t c = 0; c < cols; ++c) yr[c] = (float)(yr[c] / s);
    }}
}}
""", name="probe_softmax")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
probe()  # at import, too


class ModelNew(nn.Module):
    def forward(self, x):
        probe()
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
'''


class Listener:
    """A TCP server on host loopback that records every connection it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener():
    srv = Listener()
    # Sanity: the listener is reachable from the test process itself.
    socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
    deadline = 0
    while srv.connections == 0 and deadline < 50:
        threading.Event().wait(0.02)
        deadline += 1
    assert srv.connections == 1
    srv.connections = 0
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def _no_home_probe():
    """The unshare test's probe *can* write to $HOME (that mode does not protect files)."""
    probe = Path.home() / ".kernelevolve_probe"
    probe.unlink(missing_ok=True)
    yield
    probe.unlink(missing_ok=True)


def _reference_params(problem: Path) -> dict:
    return {"problem": str(problem), "candidate": "", "init_seed": 1,
            "cases": [{"name": "default", "weight": 1.0, "bindings": {}, "held_out": False}],
            "seeds": {"default": [1]}}


def test_worker_env_is_an_allowlist():
    base = {"PATH": "/bin", "OPENAI_API_KEY": "x", "MY_TOKEN": "y", "ANTHROPIC_BASE_URL": "z",
            "DB_PASSWORD": "p", "HOME": "/root", "https_proxy": "http://proxy",
            "DATABASE_URL": "postgres://u:pw@db/x", "SENTRY_DSN": "https://k@s.io/1",
            "SLACK_WEBHOOK_URL": "https://hooks/x", "KE_DB_PASS": "pw", "LC_ALL": "C.UTF-8",
            "CUDA_VISIBLE_DEVICES": "0"}
    env, removed = worker_env({"OMP_NUM_THREADS": "2"}, base=base)
    assert env == {"PATH": "/bin", "LC_ALL": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0",
                   "OMP_NUM_THREADS": "2"}
    assert removed == len(base) - 3
    # An explicit opt-in passes a name through, but never one that looks like a secret.
    with knobs.override(KERNELEVOLVE_WORKER_ENV="SENTRY_DSN, MY_TOKEN"):
        env, _ = worker_env(base=base)
    assert env["SENTRY_DSN"] == base["SENTRY_DSN"] and "MY_TOKEN" not in env
    env, _ = worker_env(base=base, also_drop=("PATH",))  # an API-key variable with any name
    assert "PATH" not in env
    assert is_sensitive("aws_secret_access_key") and not is_sensitive("CUDA_VISIBLE_DEVICES")


@pytest.mark.slow
def test_code_in_a_worker_sees_no_secret_no_network_and_cannot_write_outside(
        tmp_path, listener, monkeypatch):
    target = tmp_path / "escape.txt"
    problem = tmp_path / "probe_problem.py"
    problem.write_text(PROBE_PROBLEM.format(port=listener.port, target=str(target),
                                       home_target=str(Path.home() / ".kernelevolve_probe")))
    monkeypatch.setenv("KE_TEST_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    home_probe = Path.home() / ".kernelevolve_probe"
    with WorkerPool("cpu") as pool:
        facts = pool.sandbox_facts
        out = pool.run("reference", _reference_params(problem))
    assert out.status == "ok", out.describe()
    net, secret, base_url, wrote_target, wrote_home, wrote_scratch = \
        out.result["cases"]["default"]["outputs"][0][0].tolist()
    assert facts.method == "bwrap" and facts.network_isolated and facts.filesystem_readonly
    assert facts.env_scrubbed and facts.scrubbed_vars >= 2
    assert (net, secret, base_url) == (0.0, 0.0, 0.0)
    assert (wrote_target, wrote_home) == (0.0, 0.0)
    assert wrote_scratch == 1.0
    # ...and from outside: nothing arrived, nothing was written.
    assert listener.connections == 0
    assert not target.exists()
    assert not home_probe.exists()


@pytest.mark.slow
def test_candidate_with_static_rules_off_is_stopped_then_contained(tmp_path, listener,
                                                                    monkeypatch):
    """A candidate that tries every escape: the syscall filter kills it at the first one; with
    the filter off too, the sandbox alone still contains every attempt."""
    from dataclasses import replace

    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.protocol.timing import TimingPolicy

    # containment is the subject: one case of softmax, at the suite's quick timing policy
    one_case = EvalOptions(static_rules=False, only_cases=("tail_131x999",),
                           timing=TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0))
    target = tmp_path / "escape_candidate.txt"
    cand = tmp_path / "escaping_candidate.py"
    cand.write_text(PROBE_CANDIDATE.format(port=listener.port, target=str(target),
                                           home_target=str(Path.home() / ".kernelevolve_probe")))
    monkeypatch.setenv("KE_TEST_API_KEY", SECRET)
    with Evaluator("cpu", options=one_case) as ev:
        stopped = ev.evaluate(example("softmax"), cand)
        contained = ev.evaluate(example("softmax"), cand,
                                options=replace(one_case, syscall_filter=False))
    assert stopped.stage == "load" and "syscall filter" in stopped.reason
    assert "`socket(" in stopped.reason
    assert contained.accepted, contained.reason  # a correct kernel; the escapes all failed
    assert listener.connections == 0
    assert not target.exists()
    assert contained.sandbox.network_isolated and contained.fingerprint["network_isolated"]


@pytest.mark.slow
def test_unprotected_mode_says_so_loudly():
    with WorkerPool("cpu", sandbox_mode="none") as pool:
        facts = pool.sandbox_facts
    assert facts.method == "none" and not facts.network_isolated
    assert any("NO SANDBOX" in w for w in facts.warnings)


@pytest.mark.slow
def test_unshare_mode_isolates_network_and_warns_about_the_filesystem(tmp_path, listener):
    problem = tmp_path / "probe_problem.py"
    problem.write_text(PROBE_PROBLEM.format(port=listener.port, target=str(tmp_path / "t.txt"),
                                             home_target=str(tmp_path / "h.txt")))
    with WorkerPool("cpu", sandbox_mode="unshare") as pool:
        facts = pool.sandbox_facts
        out = pool.run("reference", _reference_params(problem))
    assert facts.method == "unshare" and facts.network_isolated and not facts.filesystem_readonly
    assert out.status == "ok"
    assert out.result["cases"]["default"]["outputs"][0][0][0].item() == 0.0
    assert listener.connections == 0


def test_auto_mode_without_bwrap_falls_back_to_unshare_with_a_warning(monkeypatch):
    from kernelevolve.harness.containment import sandbox

    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    plan = sandbox.plan("auto", [], [])
    assert plan.method == "unshare" and plan.network_isolated
    assert any("bubblewrap unavailable" in w for w in plan.warnings)


def test_unknown_sandbox_mode_is_a_clear_error():
    from kernelevolve.errors import SandboxError
    from kernelevolve.harness.containment import sandbox

    with pytest.raises(SandboxError, match="unknown sandbox mode"):
        sandbox.plan("docker", [], [])
