"""Ray executor: evaluations go to actors on a Ray cluster; the driver keeps the search, the LLM
calls and the store.

One actor per slot (`ray_cluster.plan_actors`: a GPU each, or a share of a node's CPUs), each
running the same sandboxed worker pool and gates as a local evaluation (`ray_actor.EvalActor`).
In-flight requests are bounded by the idle-actor queue, whatever the engine has in flight.

When an actor or its node dies mid-evaluation, the request goes back to the queue (an
`eval_requeued` event) and runs on the next free actor, up to `max_retries` times; then it is an
infrastructure failure (`InfraError`: no verdict and no fitness for the candidate, never 0).
Ray restarts a dead actor (`max_restarts`); the slot returns once the restarted actor answers,
or is dropped (`actor_lost`) if it cannot, and the run continues on the remaining slots. With
none left the run stops with an `ExecutorError` and can be resumed.
"""
from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelevolve.candidate_file import Candidate
from kernelevolve.errors import ExecutorError, SandboxError
from kernelevolve.executors.base import EventSink, ignore_event
from kernelevolve.executors.ray_actor import ActorSpec, EvalActor, raise_error
from kernelevolve.executors.ray_cluster import ActorPlan, alive_nodes, connect, plan_actors
from kernelevolve.harness.driver.evaluate import EvalOptions
from kernelevolve.problem import Problem
from kernelevolve.target import as_target
from kernelevolve.errors import InfraError
from kernelevolve.types import EvalResult

# Ray's ways of saying "the actor, its worker process or its node is gone".
_FAILURE_NAMES = ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError",
                  "LocalRayletDiedError", "OutOfMemoryError")


@dataclass(eq=False)
class _Slot:
    handle: Any
    index: int
    node: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)


def actor_plan(ray: Any, platform: str, workers: int | None, threads: int | None) -> ActorPlan:
    """What each evaluation actor asks Ray for: CPUs, and the resources the platform declares
    (`Platform.ray_resources`: {"GPU": 1}, or a device's own)."""
    resources = as_target(platform).platform.ray_resources
    return plan_actors(alive_nodes(ray), resources, workers, threads)


class RayExecutor:
    name = "ray"

    def __init__(self, spec: ActorSpec, *, address: str | None = None, workers: int | None = None,
                 max_retries: int = 2, max_restarts: int = 3, ready_timeout_s: float = 300.0,
                 request_timeout_s: float | None = None, on_event: EventSink = ignore_event,
                 actor_cls: type | None = None):
        self.max_retries, self.ready_timeout_s = max_retries, ready_timeout_s
        limits_timeout = spec.limits.total_timeout if spec.limits else 1800.0
        # A request outlives a worker's own limit only if its actor hangs: restart that actor.
        self.request_timeout_s = request_timeout_s or 4 * limits_timeout + 120
        self.on_event = on_event
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._live: list[_Slot] = []
        self._unchecked: list[_Slot] = []   # probes cut short when an event loop ended
        self._probes: set[asyncio.Task] = set()
        self._libraries: Path | None = None  # remote nodes' kernels, made when one arrives
        self.conn = connect(address)
        self.ray = self.conn.ray
        self._failures = tuple(getattr(self.ray.exceptions, n) for n in _FAILURE_NAMES
                               if hasattr(self.ray.exceptions, n))
        try:
            self.plan = actor_plan(self.ray, spec.platform, workers, spec.threads)
            self.spec = replace(spec, threads=self.plan.threads)
            self._start(actor_cls or EvalActor, max_restarts)
        except BaseException:
            self.close()
            raise

    # ---- start -------------------------------------------------------------------------------
    def _start(self, actor_cls: type, max_restarts: int) -> None:
        ray, plan = self.ray, self.plan
        remote = ray.remote(actor_cls).options(**plan.options(max_restarts))
        slots = [_Slot(remote.remote(self.spec), i) for i in range(plan.count)]
        refs = {slot.handle.ready.remote(): slot for slot in slots}
        done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=self.ready_timeout_s)
        from kernelevolve.version import __version__

        failures = []
        for ref in done:
            slot = refs[ref]
            try:
                info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the actor's __init__ failed: say why
                failures.append(_reason(exc))
                self._kill(slot)
                continue
            if info["version"] != __version__:
                failures.append(f"kernelevolve {info['version']} on {info['node']['hostname']}, "
                                f"{__version__} here: install the same version on every node")
                self._kill(slot)
                continue
            slot.node, slot.fingerprint = info["node"], info["fingerprint"]
            self._live.append(slot)
        for ref in pending:
            failures.append(f"an actor was not ready after {self.ready_timeout_s:.0f} s "
                            "(not enough free resources on the cluster?)")
            self._kill(refs[ref])
        if not self._live:
            raise ExecutorError(f"no Ray evaluation actor started: {failures[0]}")
        self._live.sort(key=lambda s: s.index)
        for reason in failures:
            self.on_event("actor_failed", {"reason": reason})
        self._driver_node = ray.get_runtime_context().get_node_id()

    # ---- the executor interface ----------------------------------------------------------------
    @property
    def slots(self) -> int:
        return len(self._live)

    def fingerprint(self) -> dict[str, Any]:
        return dict(self._live[0].fingerprint) if self._live else {}

    def describe(self) -> dict[str, Any]:
        nodes: dict[str, dict[str, Any]] = {}
        for slot in self._live:
            entry = nodes.setdefault(slot.node.get("node_id", "?"), {
                "hostname": slot.node.get("hostname"), "node_id": slot.node.get("node_id"),
                "node_ip": slot.node.get("node_ip"), "actors": 0,
                "device": slot.fingerprint.get("device"),
                "threads": slot.fingerprint.get("threads")})
            entry["actors"] += 1
        return {"executor": self.name, "address": self.conn.address, "slots": self.slots,
                "actor": {"num_cpus": self.plan.num_cpus, "num_gpus": self.plan.num_gpus,
                          "resources": dict(self.plan.resources), "threads": self.plan.threads},
                "nodes": list(nodes.values())}

    async def evaluate(self, problem: Problem, candidate: Candidate,
                       options: EvalOptions | None = None) -> EvalResult:
        source = candidate.source
        problem_path = Path(problem.path)
        request = {"problem_relpath": f"{problem_path.parent.name}/{problem_path.name}",
                   "problem_source": problem_path.read_text(),
                   "candidate_name": candidate.file_name, "candidate_source": source,
                   "options": options}
        what = {"candidate": candidate.file_name,
                "source_hash": hashlib.sha256(source.encode()).hexdigest()}
        reasons: list[str] = []
        for attempt in range(1, self.max_retries + 2):
            slot = await self._take()
            request["ship_libraries"] = slot.node.get("node_id") != self._driver_node
            try:
                reply = await asyncio.wait_for(_awaitable(slot.handle.evaluate.remote(request)),
                                               self.request_timeout_s)
            except asyncio.CancelledError:  # the loop ended (run interrupted): the actor
                self._unchecked.append(slot)  # answers a readiness probe once it is done
                raise
            except (asyncio.TimeoutError, *self._failures) as exc:
                reason = (f"no answer after {self.request_timeout_s:.0f} s"
                          if isinstance(exc, asyncio.TimeoutError) else _reason(exc))
                self._lost(slot, reason, hung=isinstance(exc, asyncio.TimeoutError))
            else:
                self._queue_for_loop().put_nowait(slot)
                if "error" not in reply:
                    return self._result(reply, problem, candidate, attempt)
                try:
                    raise_error(reply["error"], problem.path)  # a problem error stops the run
                except SandboxError as exc:       # the node's sandbox, not the candidate
                    reason = f"worker sandbox failed on {slot.node.get('hostname')}: {exc}"
            reasons.append(reason)
            if attempt <= self.max_retries:
                self.on_event("eval_requeued", {**what, "attempt": attempt, "reason": reason,
                                                "hostname": slot.node.get("hostname"),
                                                "node_id": slot.node.get("node_id"),
                                                "actor_id": slot.node.get("actor_id")})
        raise InfraError(f"evaluation lost {len(reasons)} time(s) on the Ray cluster, last: "
                         f"{reasons[-1]}; not a verdict on the candidate")

    def close(self) -> None:
        for task in list(self._probes):
            task.cancel()
        slots = self._live + self._unchecked
        if slots:
            refs = []
            for slot in slots:
                try:
                    refs.append(slot.handle.close.remote())
                except Exception:  # noqa: BLE001 - already gone
                    pass
            try:  # let each actor stop its sandboxed worker and remove its scratch folder
                self.ray.wait(refs, num_returns=len(refs), timeout=15)
            except Exception:  # noqa: BLE001
                pass
            for slot in slots:
                self._kill(slot)
        self._live, self._unchecked = [], []
        if self._libraries is not None:
            shutil.rmtree(self._libraries, ignore_errors=True)
        if getattr(self, "conn", None) is not None:
            self.conn.close()

    # ---- slots ---------------------------------------------------------------------------------
    def _queue_for_loop(self) -> asyncio.Queue:
        """The idle-actor queue of the running event loop (`Run` runs the search and then each
        final measurement in its own loop; nothing is in flight between them)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._queue = loop, asyncio.Queue()
            self._probes = set()
            for slot in self._live:
                if slot not in self._unchecked:
                    self._queue.put_nowait(slot)
            unchecked, self._unchecked = self._unchecked, []
            for slot in unchecked:
                self._probe_later(slot)
            if not self._live:
                self._queue.put_nowait(None)
        assert self._queue is not None
        return self._queue

    async def _take(self) -> _Slot:
        queue = self._queue_for_loop()
        slot = await queue.get()
        if slot is None:  # no actor left: wake the next waiter too
            queue.put_nowait(None)
            raise ExecutorError("no Ray evaluation actor is left (all died and could not be "
                                "restarted); the run can be resumed with `kernelevolve resume`")
        return slot

    def _lost(self, slot: _Slot, reason: str, hung: bool) -> None:
        self.on_event("actor_failed", {"reason": reason, "hostname": slot.node.get("hostname"),
                                       "node_id": slot.node.get("node_id"),
                                       "actor_id": slot.node.get("actor_id")})
        if hung:
            self._kill(slot, restart=True)
        self._probe_later(slot)

    def _probe_later(self, slot: _Slot) -> None:
        task = asyncio.ensure_future(self._probe(slot))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, slot: _Slot) -> None:
        """Back into the queue once Ray's restart of the actor answers; dropped otherwise."""
        try:
            info = await asyncio.wait_for(self._ready_after_restart(slot), self.ready_timeout_s)
        except asyncio.CancelledError:
            self._unchecked.append(slot)
            raise
        except Exception as exc:  # noqa: BLE001 - restarts exhausted, node gone, timed out
            self._live = [s for s in self._live if s is not slot]
            self._kill(slot)
            self.on_event("actor_lost", {"reason": _reason(exc), "slots": len(self._live),
                                         "hostname": slot.node.get("hostname")})
            if not self._live:
                self._queue_for_loop().put_nowait(None)
            return
        slot.node, slot.fingerprint = info["node"], info["fingerprint"]
        self.on_event("actor_restarted", {"hostname": slot.node.get("hostname"),
                                          "node_id": slot.node.get("node_id"),
                                          "actor_id": slot.node.get("actor_id")})
        self._queue_for_loop().put_nowait(slot)

    async def _ready_after_restart(self, slot: _Slot) -> dict[str, Any]:
        """`ready` once the restarted actor answers. While Ray is still restarting it, a call
        can fail at once as temporarily unavailable (seen on a loaded machine): ask again."""
        unavailable = getattr(self.ray.exceptions, "ActorUnavailableError", ())
        while True:
            try:
                return await _awaitable(slot.handle.ready.remote())
            except unavailable:
                await asyncio.sleep(0.2)

    def _kill(self, slot: _Slot, restart: bool = False) -> None:
        try:
            self.ray.kill(slot.handle, no_restart=not restart)
        except Exception:  # noqa: BLE001 - already dead
            pass

    # ---- results -------------------------------------------------------------------------------
    def _result(self, reply: dict[str, Any], problem: Problem, candidate: Candidate,
                attempt: int) -> EvalResult:
        data, node = dict(reply["result"]), reply["node"]
        measured_on = {"executor": self.name, **node, "attempts": attempt}
        if reply.get("libraries"):  # the node's compiled kernels, for the run's artifacts
            if self._libraries is None:
                self._libraries = Path(tempfile.mkdtemp(prefix="kernelevolve-ray-libs-"))
            folder = self._libraries / str(node.get("node_id", "node"))[:16]
            folder.mkdir(parents=True, exist_ok=True)
            measured_on["libraries_on_node"] = list(data.get("libraries") or [])
            paths = []
            for remote_path, blob in reply["libraries"].items():
                local = folder / Path(remote_path).name
                local.write_bytes(blob)
                paths.append(str(local))
            data["libraries"] = paths
        # The driver's paths, as a local evaluation reports them.
        data["problem"], data["candidate"] = problem.path, candidate.name
        data["measured_on"] = measured_on
        return EvalResult.from_dict(data)


async def _awaitable(ref: Any) -> Any:
    return await ref


def _reason(exc: BaseException) -> str:
    """One line out of Ray's multi-line messages: the last non-empty one names the cause."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


__all__ = ["RayExecutor", "ActorSpec", "ActorPlan"]
