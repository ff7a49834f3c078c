"""The driver trusts no byte from a worker: a hostile worker server, seeded, against the real
`Worker`. Every job must come back as a `JobOutcome` with a reason, within its time limit,
never as an exception in the driver, and the worker must start over cleanly afterwards.

The hostile server (tests/scripted_worker.py) speaks just enough of the protocol to be handed
jobs, then answers each with one misbehaviour, every kind once in an order drawn from its seed: garbage lines, JSON that is not an
object, nesting bombs, oversized lines, replies for another job, fields of the wrong type, NaN,
invalid UTF-8, build requests that are garbage, result files full of noise, lying wire headers,
a 64 GiB sparse result, an early exit, or silence.
"""
from __future__ import annotations

import time

import pytest

from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.driver.outcome import JobOutcome
from kernelevolve.harness.driver.pool import Limits
from kernelevolve.harness.protocol.messages import CaseSpec, CheckJob
from kernelevolve.plugins import get_platform
from scripted_worker import ScriptedWorker, server_source

KINDS = ["garbage", "array", "deep", "huge", "wrong_id", "types", "nan", "utf8", "service",
         "result_noise", "result_lies", "result_sparse", "result_deep", "exit", "silence",
         "ok_empty", "tails"]

# Job ids count up across the server's restarts, so the seeded order of KINDS is served whole,
# each kind once, however many of them killed the server.
HANDLER = "KINDS = " + repr(KINDS) + r'''
import random, struct, time
MAGIC = b"KEWIRE1\0"
SEED = int(ARGS[0])
READY["pid"] = os.getpid()
ORDER = random.Random(SEED).sample(KINDS, len(KINDS))

def write_result(fd, data):
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)

def handle(job_id, result):
    rng = random.Random(SEED * 100003 + job_id)
    kind = ORDER[(job_id - 1) % len(ORDER)]
    if kind == "garbage":
        out.write(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) + b"\n")
    elif kind == "array":
        line([job_id, "exited", 0])
    elif kind == "deep":
        out.write(b'{"id": %d, "x": ' % job_id + b"[" * 200000 + b"]" * 200000 + b"}\n")
    elif kind == "huge":
        out.write(b'{"id": %d, "pad": "' % job_id + b"x" * (40 << 20))
    elif kind == "wrong_id":
        reply(job_id + 1000)
    elif kind == "types":
        line({"id": job_id, "status": "exited", "code": "0", "signal": [9], "stage": {"a": 1},
              "wall_s": "fast", "cpu_s": -1e308, "maxrss_kb": 1e300, "stderr_tail": 12,
              "stdout_tail": None, "leftovers": "many", "loaded": "yes"})
    elif kind == "nan":
        out.write(b'{"id": %d, "status": "exited", "code": 0, "wall_s": NaN, '
                  b'"cpu_s": Infinity}\n' % job_id)
    elif kind == "utf8":
        out.write(b'{"id": %d, "status": "violation", "reason": "\xff\xfe\xc0", '
                  b'"syscall": "\xed\xa0\x80"}\n' % job_id)
    elif kind == "service":
        for request in ({"op": "rm -rf /"}, {"op": "compile", "source": 7, "flags": [],
                        "name": "x"}, {"op": "compile", "source": "x" * (9 << 20),
                        "flags": [], "name": "big"}, {"op": "compile", "source": "int x;",
                        "flags": ["-Wl,-rpath,/evil", "@/etc/shadow"], "name": "f"},
                        {"op": "compile", "source": "int x;", "flags": "-O3", "name": []},
                        "not even a dict"):
            line({"id": job_id, "service": request})
        reply(job_id, status="exited", code=0)
    elif kind == "result_noise":
        write_result(result, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 5000))))
        reply(job_id)
    elif kind == "result_lies":
        header = json.dumps({"body": {"ok": True, "cases": {"__tensor__": 0}},
                             "tensors": [{"dtype": "float32", "shape": [1 << 40],
                                          "nbytes": 1 << 42}]}).encode()
        write_result(result, MAGIC + struct.pack("<Q", len(header)) + header)
        reply(job_id)
    elif kind == "result_sparse":
        os.ftruncate(result, 64 << 30)
        reply(job_id)
    elif kind == "result_deep":
        header = b'{"body": ' + b"[" * 100000 + b"]" * 100000 + b', "tensors": []}'
        write_result(result, MAGIC + struct.pack("<Q", len(header)) + header)
        reply(job_id)
    elif kind == "exit":
        os._exit(rng.choice([0, 1, 137]))
    elif kind == "silence":
        time.sleep(3600)
    elif kind == "ok_empty":
        reply(job_id)
    elif kind == "tails":
        reply(job_id, status="signaled", signal=11, stderr_tail="\x00" * 100000,
              stdout_tail="y" * 100000)
'''
HOSTILE_SERVER = server_source({"ready": True, "pid": 0, "preloaded": {}, "syscall_filter": "notify",
                                "landlock_abi": 0, "pid_namespace": False, "capabilities": 0},
                               HANDLER)


class HostileWorker(ScriptedWorker):
    script = HOSTILE_SERVER
    seed = 0

    def server_args(self) -> list[str]:
        return [str(self.seed)]


@pytest.fixture
def hostile(tmp_path):
    limits = Limits(total_timeout=1.0, reply_slack_s=0.5, result_bytes=64 << 20)
    worker = HostileWorker(get_platform("cpu"), 1, limits, "auto", tmp_path / "pool",
                           BuildService(tmp_path / "cache"))
    yield worker
    worker.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 23])
def test_hostile_server_bytes_become_outcomes_never_exceptions(hostile, tmp_path, seed):
    problem = tmp_path / "p.py"
    problem.write_text("x = 1\n")
    hostile.seed = seed
    statuses = set()
    for _ in range(len(KINDS)):  # each kind once
        started = time.monotonic()
        out = hostile.run(CheckJob(problem=str(problem), candidate="c.py",
                                   candidate_source="x = 2\n", init_seed=1,
                                   cases=(CaseSpec("default"),), seeds={"default": (1,)},
                                   neuter_seeds={"default": 2}))
        elapsed = time.monotonic() - started
        assert isinstance(out, JobOutcome)
        assert out.status in ("crashed", "failed", "ok", "timeout", "violation", "lost")
        assert isinstance(out.describe(), str) and out.describe()
        assert len(out.stderr_tail) <= 8192 and len(out.stdout_tail) <= 8192
        if out.status == "ok":
            assert isinstance(out.result, dict)
        # the server's own limit (1 s) + the driver's slack (0.5 s) + a restart (~0.5 s), loaded
        assert elapsed < 60, f"a hostile reply held the driver for {elapsed:.1f} s"
        for entry in out.services:  # build requests that were garbage got refusals
            assert entry["ok"] is False
        statuses.add(out.status)
    assert "lost" in statuses  # malformed replies killed the server, which came back
    assert hostile.restarts > 0
