"""`--executor ray` on a real local Ray instance: loopback only, dashboard off, real actors
each running the sandboxed worker pool, real SIGKILLs.

One private Ray instance (2 CPUs, the machine's real count) serves the whole module; each test
closes its actors before the next one needs the CPUs.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import CORPUS, PROBLEMS
from outcomes import assert_measured_exit

ray = pytest.importorskip("ray")

from kernelevolve.candidate_file import read_candidate  # noqa: E402
from kernelevolve.errors import ExecutorError  # noqa: E402
from kernelevolve.executors.local import LocalExecutor  # noqa: E402
from kernelevolve.executors.ray_actor import ActorSpec  # noqa: E402
from kernelevolve.executors.ray_executor import RayExecutor  # noqa: E402
from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator  # noqa: E402
from kernelevolve.harness.protocol.timing import TimingPolicy  # noqa: E402
from kernelevolve.operators.tunables import read_config  # noqa: E402
from kernelevolve.problem import load_problem  # noqa: E402
from kernelevolve.errors import InfraError  # noqa: E402

pytestmark = pytest.mark.slow

PROBLEM = PROBLEMS / "tunable_scale.py"
CANDIDATE = PROBLEMS / "tunable_scale_candidate.py"
CLI_TIMEOUT = 400


def fast_options(**kw) -> EvalOptions:
    return EvalOptions(timing=TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0), **kw)


@pytest.fixture(scope="module")
def cluster():
    from kernelevolve.executors.ray_cluster import LOOPBACK, connect, local_cpus

    conn = connect(None)  # the path `optimize --executor ray` takes without --ray-address
    assert conn.started and conn.address.startswith(f"{LOOPBACK}:")
    assert int(ray.cluster_resources()["CPU"]) == local_cpus()
    yield conn
    conn.close()
    assert not ray.is_initialized()


# ---- the private instance stays on loopback ------------------------------------------------

def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(hex address, port) of the TCP sockets these processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                out.append((address, int(port, 16)))
    return out


def _cmdlines(pids: set[int]) -> list[bytes]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except OSError:
            continue
    return out


def test_private_instance_listens_on_loopback_only_without_dashboard(cluster):
    ips = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    assert ips == {"127.0.0.1"}
    ray_processes = _descendants(os.getpid())
    listening = _listening(ray_processes | {os.getpid()})
    assert len(listening) >= 3, listening  # GCS, raylet, object manager at least
    loopback = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
    assert {address for address, _ in listening} <= loopback, \
        f"Ray listens beyond loopback: {listening}"
    # No web dashboard: Ray keeps a head process for usage stats only, without its frontend.
    assert 8265 not in {port for _, port in listening}
    for cmd in _cmdlines(ray_processes):
        if b"dashboard/dashboard.py" in cmd:
            assert b"--disable-frontend" in cmd and b"--minimal" in cmd, cmd


# ---- same verdicts as local ----------------------------------------------------------------

PAIRS = [  # (problem, candidate, expected stage)
    (PROBLEM, CANDIDATE, "accepted"),
    (PROBLEMS / "tiny_outputs.py", CORPUS / "bad_zeros.py", "integrity"),
    # a crash is the candidate's (on examples/softmax's model at 16x fewer elements, the
    # corpus entry's own problem: the reference's inputs and outputs are 256 KB, not 4 MB)
    (PROBLEMS / "softmax_small.py", CORPUS / "bad_segfault.py", "run"),
]


class TestOneActor:
    @pytest.fixture(scope="class")
    def executors(self, cluster):
        events: list[tuple[str, dict]] = []
        remote = RayExecutor(ActorSpec(options=fast_options()), workers=1,
                             on_event=lambda kind, data: events.append((kind, data)))
        local = LocalExecutor(Evaluator("cpu", options=fast_options()), 1)
        yield {"ray": remote, "local": local, "events": events}
        remote.close()
        local.close()

    def test_ray_gives_the_same_verdicts_as_local(self, executors):
        remote = executors["ray"]
        assert remote.slots == 1 and remote.describe()["nodes"][0]["node_ip"] == "127.0.0.1"

        async def verdicts(executor):
            return [await executor.evaluate(load_problem(p), read_candidate(c))
                    for p, c, _ in PAIRS]

        got = {name: asyncio.run(verdicts(executors[name])) for name in ("local", "ray")}
        for (problem, cand, stage), here, there in zip(PAIRS, got["local"], got["ray"]):
            assert (here.stage, there.stage) == (stage, stage), (cand.name, here.reason,
                                                                 there.reason)
            assert here.accepted == there.accepted
            assert here.reason.split(":")[0] == there.reason.split(":")[0]
            assert there.problem == str(Path(problem).resolve())  # the driver's paths, as local
            assert there.candidate == here.candidate == read_candidate(cand).name
            assert there.sandbox.method == here.sandbox.method == "bwrap"
            assert there.sandbox.syscall_filter == here.sandbox.syscall_filter == "notify"
            assert there.sandbox.capabilities == "none" and there.sandbox.pid_namespace
            # The node that measured: its fingerprint and identity are stored with the result.
            assert there.fingerprint["hostname"] == socket.gethostname()
            assert there.fingerprint["cpu_model"] == here.fingerprint["cpu_model"]
            on = there.measured_on
            assert on["executor"] == "ray" and on["node_ip"] == "127.0.0.1" and on["attempts"] == 1
            assert on["node_id"] == remote.describe()["nodes"][0]["node_id"]
            assert here.measured_on["executor"] == "local"
        here, there = got["local"][0], got["ray"][0]
        assert here.measured and there.measured
        # Both measured the same kernel. The band is wide on purpose: beside two busy processes
        # on this 2-core machine one short measurement read 0.28x and the other 0.087x (a 3.2x
        # gap, from load alone); a path that dropped or doubled the work per call is off by far
        # more than that (the other configurations of this kernel differ by 8x to 64x).
        assert there.speedup > 0 and here.speedup > 0
        assert 0.1 < there.speedup / here.speedup < 10.0, (here.speedup, there.speedup)
        assert there.libraries and all(Path(p).is_file() for p in there.libraries)
        assert executors["events"] == []  # nothing died, nothing re-queued

    def test_candidates_on_an_actor_cannot_see_the_cluster(self, executors):
        assert any(Path("/tmp/ray").iterdir())  # the session folder is there on the host
        cand = PROBLEMS / "ray_hidden_candidate.py"
        # static rules off: the runtime isolation alone must hold (os.environ, Path.iterdir)
        result = asyncio.run(executors["ray"].evaluate(
            load_problem(PROBLEM), read_candidate(cand), fast_options(static_rules=False)))
        assert result.stage == "accepted", result.reason

    def test_containment_holds_on_an_actor(self, executors):
        """Native code that starts a program: the actor's worker stops it at the syscall filter
        exactly as a local one does (static rules and library inspection off)."""
        cand = CORPUS / "bad_exec_cpp.py"
        result = asyncio.run(executors["ray"].evaluate(
            load_problem(PROBLEMS / "softmax_small.py"), read_candidate(cand),
            fast_options(static_rules=False, inspect_libraries=False)))
        assert result.stage == "load" and "syscall filter" in result.reason, result.reason

    def test_a_broken_reference_is_the_same_problem_error_as_locally(self, executors):
        from kernelevolve.errors import ProblemError

        problem = load_problem(PROBLEMS / "broken_reference.py")
        errors = []
        for name in ("local", "ray"):
            with pytest.raises(ProblemError) as err:
                asyncio.run(executors[name].evaluate(problem, read_candidate(CANDIDATE)))
            errors.append(str(err.value))
        assert errors[0] == errors[1]
        assert errors[0].startswith(problem.path) and "the reference is broken" in errors[0]

    def test_a_remote_nodes_compiled_kernels_come_back_with_the_result(self, executors,
                                                                        monkeypatch):
        """The driver cannot read another node's compile cache: the actor sends the .so bytes,
        which the run stores as artifacts (as for a local result)."""
        remote = executors["ray"]
        monkeypatch.setattr(remote, "_driver_node", "a-driver-on-another-node")
        result = asyncio.run(remote.evaluate(load_problem(PROBLEM), read_candidate(CANDIDATE)))
        assert result.accepted
        on_node = result.measured_on["libraries_on_node"]
        assert len(result.libraries) == len(on_node) == 1
        here = Path(result.libraries[0])
        assert here.parent.parent == remote._libraries and here.name == Path(on_node[0]).name
        assert here.read_bytes() == Path(on_node[0]).read_bytes()  # one machine: compare
        assert here.read_bytes()[:4] == b"\x7fELF"


# ---- actors that die -----------------------------------------------------------------------

def _dying_actor_class():
    """An actor that answers `ready` and dies (os._exit) in every evaluation: the worst
    node. Defined in a function so Ray ships the class by value to its worker processes."""
    class DyingActor:
        def __init__(self, spec):
            import ray as _ray

            ctx = _ray.get_runtime_context()
            self.node = {"hostname": socket.gethostname(), "node_id": ctx.get_node_id(),
                         "node_ip": "127.0.0.1", "actor_id": ctx.get_actor_id(),
                         "pid": os.getpid()}

        def ready(self):
            from kernelevolve import __version__

            return {"node": self.node, "version": __version__,
                    "fingerprint": {"platform": "cpu", "hostname": socket.gethostname()}}

        def evaluate(self, request):
            os._exit(1)

        def close(self):
            pass

    return DyingActor


def test_an_evaluation_whose_actor_always_dies_is_an_infra_failure(cluster):
    events: list[tuple[str, dict]] = []
    executor = RayExecutor(ActorSpec(), workers=1, max_retries=2, max_restarts=10,
                           actor_cls=_dying_actor_class(),
                           on_event=lambda kind, data: events.append((kind, data)))
    try:
        with pytest.raises(InfraError, match=r"evaluation lost 3 time\(s\) on the Ray cluster.*"
                                             r"not a verdict on the candidate"):
            asyncio.run(executor.evaluate(load_problem(PROBLEM), read_candidate(CANDIDATE)))
    finally:
        executor.close()
    requeued = [d for kind, d in events if kind == "eval_requeued"]
    assert [d["attempt"] for d in requeued] == [1, 2]
    assert all(d["candidate"] == CANDIDATE.name and d["reason"] for d in requeued)
    assert sum(kind == "actor_failed" for kind, _ in events) == 3


def test_with_no_actor_left_the_executor_stops_instead_of_judging(cluster):
    """No restarts allowed: after the only actor dies, the request cannot be re-queued, and the
    executor says the run must stop (resumable), rather than recording anything."""
    events: list[tuple[str, dict]] = []
    executor = RayExecutor(ActorSpec(), workers=1, max_retries=2, max_restarts=0,
                           actor_cls=_dying_actor_class(),
                           on_event=lambda kind, data: events.append((kind, data)))
    try:
        with pytest.raises(ExecutorError, match="no Ray evaluation actor is left") as err:
            asyncio.run(executor.evaluate(load_problem(PROBLEM), read_candidate(CANDIDATE)))
        assert len(str(err.value).splitlines()) == 1 and "kernelevolve resume" in str(err.value)
        assert executor.slots == 0
        with pytest.raises(ExecutorError):  # and so does every later request, at once
            asyncio.run(executor.evaluate(load_problem(PROBLEM), read_candidate(CANDIDATE)))
    finally:
        executor.close()
    assert [kind for kind, _ in events] == ["actor_failed", "eval_requeued", "actor_lost"]


def test_a_run_whose_actor_always_dies_records_no_verdict(cluster, tmp_path, monkeypatch):
    """Through Run and the engine: the seed is lost 3 times (Ray restarts the actor each time),
    becomes an infrastructure failure (no fitness, no evaluation row, never fitness 0), and the
    run still completes."""
    import kernelevolve.executors.ray_executor as ray_executor
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run
    from kernelevolve.search.termination import Budgets

    monkeypatch.setattr(ray_executor, "EvalActor", _dying_actor_class())
    config = RunConfig(executor="ray", workers=1, operators=["tune"],
                       budgets=Budgets(max_evals=4))
    run = Run.create(PROBLEM, config, seeds=[CANDIDATE], workspace=tmp_path / "ws")
    outcome = run.execute()
    assert run.status == "completed" and outcome["node_id"] is None
    assert run.store.eval_count(run.id) == 0  # nothing was given a verdict, let alone fitness 0
    seed = run.store.nodes(run.id)[1]
    assert seed.status == "infra_failed" and seed.fitness is None and seed.stage is None
    assert "not a verdict on the candidate" in seed.meta["infra_failure"]
    assert run.store.funnel(run.id)["infra_failed"] == 1
    requeued = run.store.events(run.id, "eval_requeued")
    assert [e.data["attempt"] for e in requeued] == [1, 2]
    assert run.store.events(run.id, "executor_started")[0].data["executor"] == "ray"


# ---- optimize --executor ray end to end, with an actor killed mid-evaluation ---------------

def _kill_first_evaluating_actor(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first Ray worker whose process title says it is inside
    EvalActor.evaluate (Ray names a worker `ray::Class.method` while the method runs)."""
    while not stop.is_set():
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                title = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::EvalActor.evaluate"):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
                return
        time.sleep(0.02)


def _verdicts(ws: Path, run_id: str) -> dict[str, str]:
    """Tunable configuration -> the stage its candidate reached (or its node status)."""
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        stages = {}
        for node in store.nodes(run_id)[1:]:
            config = json.dumps(read_config(store.source(run_id, node.id)), sort_keys=True)
            stages[config] = node.stage if node.status == "done" else node.status
        return stages


def test_optimize_on_ray_survives_a_killed_actor_with_the_local_verdict(cluster, tmp_path,
                                                                         tunable_run):
    ws, summary_path = tmp_path / "ray_ws", tmp_path / "ray.json"
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_first_evaluating_actor, args=(stop, killed))
    killer.start()
    # As a user's shell would run it: without the loopback switch this process set for Ray.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    try:
        r = subprocess.run(
            [sys.executable, "-m", "kernelevolve.cli", "optimize", str(PROBLEM),
             "--seed-candidate", str(CANDIDATE), "--operator", "tune", "--max-evals", "8",
             "--executor", "ray", "--ray-address", cluster.address, "--workers", "2",
             # the suite's finalists, not one: the best is checked against {1, 8}, and the
             # search-time figures alone once ranked REPEAT = 32 first beside a killed actor
             "--workspace", str(ws), "--json", str(summary_path)],
            capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT)
    finally:
        stop.set()
        killer.join()
    assert killed, "no actor was seen evaluating"
    s = json.loads(summary_path.read_text())
    assert_measured_exit(r.returncode, s, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    assert s["status"] == "completed" and s["evaluations"] == 8

    from kernelevolve.store import Store

    with Store.open(ws) as store:
        requeued = store.events(s["run_id"], "eval_requeued")
        started = store.events(s["run_id"], "executor_started")[0].data
        results = dict(store.evaluations(s["run_id"]))
    # The killed actor's request went back to the queue and was measured on the second try.
    assert [e.data["attempt"] for e in requeued] == [1]
    assert started["executor"] == "ray" and started["slots"] == 2
    again = [r for r in results.values() if r.measured_on["attempts"] == 2]
    assert len(again) == 1
    assert again[0].source_hash == requeued[0].data["source_hash"]
    for result in results.values():  # every result names the node that measured it
        assert result.measured_on["executor"] == "ray"
        assert result.measured_on["node_id"] == started["nodes"][0]["node_id"]
        assert result.fingerprint["hostname"] == socket.gethostname()
    ray_stages = _verdicts(ws, s["run_id"])

    # The same search run locally: conftest's tunable_run (the session's one; test_optimize.py
    # checks it on its own)
    local = tunable_run["summary"]
    assert local is not None, tunable_run["proc"].stderr
    local_stages = _verdicts(tunable_run["ws"], local["run_id"])
    assert ray_stages == local_stages  # the same 8 configurations, the same verdict on each
    assert "infra_failed" not in ray_stages.values()
    best = {name: read_config(source)["REPEAT"] for name, source in
            (("ray", s["best_source"]), ("local", local["best_source"]))}
    # Both end far from the REPEAT = 64 seed. Which of the two cheapest points wins compares
    # timings taken minutes apart in two runs; on a loaded CI machine the local run once
    # measured REPEAT = 8 ahead (the verdicts above, the gate's, were the same).
    assert set(best.values()) <= {1, 8}, best
