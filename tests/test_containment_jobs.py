"""Containment of a job's folders and processes, checked from outside: a candidate that squats
the next job folders does not stop the pool, no process of a job outlives it in any sandbox mode,
and job children hold only their own descriptors. (Split from tests/test_containment.py so that
`--dist loadfile` can run the two halves on different workers.)
"""
from __future__ import annotations

import os

import pytest

from conftest import CORPUS, example
from kernelevolve.harness.driver.pool import WorkerPool
from test_containment import LAYERS, _evaluator

pytestmark = pytest.mark.slow


# ---- job folders, processes, descriptors --------------------------------------------------------

def test_squatted_job_folders_do_not_stop_the_pool(private_cache):
    with _evaluator() as ev:
        for opts in LAYERS.values():
            ev.evaluate(example("softmax"), CORPUS / "bad_jobdir_squat.py", options=opts)
            for _ in range(2):
                result = ev.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py")
                assert result.accepted, result.reason


def _processes_named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as fh:
                if fh.read().strip() == name:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def test_no_process_of_a_job_outlives_it(private_cache):
    """The daemon double-forks and calls setsid before the syscall filter is on (the filter
    off): once its job ended, no process of it is left."""
    with _evaluator() as ev:
        stopped = ev.evaluate(example("softmax"), CORPUS / "bad_daemon.py",
                              options=LAYERS["no inspection"])
        assert stopped.stage == "load" and "clone" in stopped.reason, stopped.reason
        ran = ev.evaluate(example("softmax"), CORPUS / "bad_daemon.py",
                          options=LAYERS["sandbox only"])
        assert ran.accepted, ran.reason
        assert not _processes_named("ke_daemon"), "the daemon outlived its job"
        assert ev.pool.workers[0].alive


DAEMON_PROBLEM = '''
import os, time, ctypes
import torch
import torch.nn as nn


def _daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"ke_daemon_ref", 0, 0, 0)  # PR_SET_NAME
            time.sleep(600)
        os._exit(0)
    os.waitpid(pid, 0)


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    _daemon()
    return [torch.ones(4)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["bwrap", "unshare", "none"])
def test_leftover_processes_are_killed_in_every_sandbox_mode(tmp_path, mode):
    """Problem code runs unfiltered (the reference job loads no candidate), so a daemon it
    starts is the reaper's alone: a kill(-1) in bwrap's PID namespace, the subreaper
    elsewhere."""
    problem = tmp_path / "daemon_problem.py"
    problem.write_text(DAEMON_PROBLEM)
    params = {"problem": str(problem), "candidate": "", "init_seed": 1,
              "cases": [{"name": "default", "weight": 1.0, "bindings": {}, "held_out": False}],
              "seeds": {"default": [1]}}
    with WorkerPool("cpu", sandbox_mode=mode) as pool:
        out = pool.run("reference", params)
        assert out.status == "ok", out.describe()
        assert out.leftovers >= 1
        assert not _processes_named("ke_daemon_ref")
        assert pool.run("reference", params).status == "ok"  # the pool goes on
    assert not _processes_named("ke_daemon_ref")


FD_PROBLEM = '''
import os
import torch
import torch.nn as nn


def _descriptors():
    kinds = {}
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        kinds[fd] = target.split(":")[0] if target.startswith(("pipe:", "socket:")) else "file"
    return kinds


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    kinds = _descriptors()
    return [torch.tensor([len(kinds), sum(k == "pipe" for k in kinds.values()),
                          sum(k == "socket" for k in kinds.values()),
                          sum(fd > 2 and k == "pipe" for fd, k in kinds.items())])]


def get_init_inputs():
    return []
'''


def test_job_children_hold_only_their_own_descriptors(tmp_path):
    """stdin (/dev/null), stdout and stderr (pipes to the server), the control socket and the
    result file: no protocol channel of the server, no descriptor of another job."""
    problem = tmp_path / "fd_problem.py"
    problem.write_text(FD_PROBLEM)
    params = {"problem": str(problem), "candidate": "", "init_seed": 1,
              "cases": [{"name": "default", "weight": 1.0, "bindings": {}, "held_out": False}],
              "seeds": {"default": [1]}}
    with WorkerPool("cpu") as pool:
        out = pool.run("reference", params)
    assert out.status == "ok", out.describe()
    total, pipes, sockets, extra_pipes = out.result["cases"]["default"]["outputs"][0][0].tolist()
    assert (total, pipes, sockets, extra_pipes) == (5, 2, 1, 0)
