"""Reaching Ray: a cluster given by address, or a private single-machine instance on loopback.

Why loopback for the private instance: Ray's default is to listen on the machine's routable
address, which on a workstation exposes a scheduler that runs arbitrary Python to the whole
network. `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` makes Ray resolve "this node" to 127.0.0.1 (it
is read when `ray` is imported, hence also the constant below for a `ray` already imported), and
the address Ray reports is checked after start: a private instance that is not on loopback is
shut down with an error instead of being used.

Slot planning (`plan_actors`) is pure, so its rules are tested without a cluster: one actor per
unit of the platform's declared Ray resource (a GPU, or a device's custom resource); on CPU,
one actor per node by default (its kernels use all the node's CPUs, as a default local worker
does) or `--workers N` actors sharing the CPUs.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve import knobs
from kernelevolve.errors import ExecutorError, UsageError

LOOPBACK = "127.0.0.1"
# Requests and results are small dicts (a few hundred KB with logs); Ray's default object store
# reserves 30% of RAM, 7 GB on a 24 GB workstation, for nothing.
LOCAL_OBJECT_STORE_BYTES = 256 << 20
INSTALL_HINT = "ray is not installed: pip install 'kernelevolve[ray]'"


def import_ray() -> Any:
    """The `ray` module, or a one-line UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray: {INSTALL_HINT}") from None
    return ray


def ray_available() -> bool:
    """Whether `ray` is installed, without importing it (0.5 s, and its settings are read from
    the environment at import: `connect` sets them first)."""
    if "ray" in sys.modules:
        return sys.modules["ray"] is not None
    return importlib.util.find_spec("ray") is not None


def _use_token_if_present() -> None:
    """Send the cluster token when one is here: as `ray start` does for a node, so a driver
    reaches a cluster with token authentication (Ray's default for new clusters) unasked."""
    token = Path.home() / ".ray" / "auth_token"
    mode, token_value = knobs.ray_auth()
    if mode is None and (token.is_file() or token_value):
        os.environ["RAY_AUTH_MODE"] = "token"


@dataclass
class Connection:
    ray: Any
    address: str
    started: bool        # a private instance this process started (shut down on close)
    connected: bool      # this process called ray.init (disconnect on close)

    def close(self) -> None:
        if self.connected and self.ray.is_initialized():
            self.ray.shutdown()


def _keep_on_loopback() -> None:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry from a private instance
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # `ray` was imported before the variable was set
        constants.ENABLE_RAY_CLUSTER = False


def local_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def connect(address: str | None) -> Connection:
    """Connect to the cluster at `address`; without one, reuse this process's Ray connection
    (a notebook, a test) or start a private instance on 127.0.0.1 with the dashboard off."""
    if not _initialized():  # Ray reads these variables when imported
        if address is None or _is_loopback(address):
            _keep_on_loopback()  # else Ray swaps 127.0.0.1 for this machine's routable address
        if address is not None:
            _use_token_if_present()
    ray = import_ray()
    if ray.is_initialized():
        return Connection(ray, _gcs_address(ray), started=False, connected=False)
    if address is not None:
        unreachable = _unreachable(address)
        if unreachable:  # ray.init would retry for minutes before saying so
            raise ExecutorError(f"--ray-address {address}: cannot reach the Ray cluster: "
                                f"{unreachable}")
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError...
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            hint = ("" if knobs.ray_auth()[0] == "token" else
                    " (a cluster with token authentication needs its token here: "
                    "~/.ray/auth_token or RAY_AUTH_TOKEN)")
            raise ExecutorError(f"--ray-address {address}: cannot connect to the Ray cluster: "
                                f"{first}{hint}") from None
        return Connection(ray, address, started=False, connected=True)
    ctx = ray.init(address="local", include_dashboard=False, num_cpus=local_cpus(),
                   object_store_memory=LOCAL_OBJECT_STORE_BYTES, _node_ip_address=LOOPBACK,
                   log_to_driver=False, logging_level=logging.WARNING)
    ip = ctx.address_info.get("node_ip_address")
    if ip != LOOPBACK:
        ray.shutdown()
        raise ExecutorError(f"the private Ray instance listened on {ip}, not {LOOPBACK}; "
                            "start a cluster yourself and pass --ray-address")
    return Connection(ray, ctx.address_info.get("address", ""), started=True, connected=True)


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a plain HOST:PORT address; None for "auto", "ray://..." and the like."""
    if "://" in address or address.count(":") != 1:
        return None
    host, port = address.rsplit(":", 1)
    return (host, int(port)) if port.isdigit() and host else None


def _is_loopback(address: str) -> bool:
    hp = _host_port(address)
    return hp is not None and (hp[0] == "localhost" or hp[0].startswith("127."))


def _unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why a TCP connection to the address's head fails, or None (also for unchecked forms)."""
    hp = _host_port(address)
    if hp is None:
        return None
    try:
        with socket.create_connection(hp, timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _initialized() -> bool:
    """Whether this process is connected to Ray already (without importing it)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _gcs_address(ray: Any) -> str:
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - informational only
        return ""


def alive_nodes(ray: Any) -> list[dict[str, Any]]:
    """Resources of the cluster's live nodes: [{"node_id", "ip", "CPU", "GPU", custom...}]."""
    out = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        res = node.get("Resources") or {}
        out.append({**{k: v for k, v in res.items() if not k.startswith("node:")},
                    "node_id": node.get("NodeID"), "ip": node.get("NodeManagerAddress"),
                    "CPU": int(res.get("CPU", 0)), "GPU": int(res.get("GPU", 0))})
    return out


@dataclass(frozen=True)
class ActorPlan:
    count: int
    num_cpus: int           # Ray resources each actor holds
    num_gpus: float
    threads: int | None     # torch/OpenMP threads of the actor's worker (None: all it sees)
    resources: dict[str, float] = field(default_factory=dict)  # a device's custom resources

    def options(self, max_restarts: int) -> dict[str, Any]:
        """What `ray.remote(actor).options(...)` is given for each actor."""
        out: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus,
                               "max_restarts": max_restarts}
        if self.resources:
            out["resources"] = dict(self.resources)
        return out


def plan_actors(nodes: list[dict[str, Any]], resources: dict[str, float], workers: int | None,
                threads: int | None = None) -> ActorPlan:
    """How many evaluation actors the cluster holds, and what each one reserves: one actor per
    unit of the platform's device resource (`Platform.ray_resources`: {"GPU": 1}, a device's own
    {"npu": 1}), else CPU slots."""
    threads = threads if threads is not None else knobs.worker_threads()
    if resources:
        return _device_plan(nodes, resources, workers, threads)
    cpus = [n["CPU"] for n in nodes if n["CPU"] >= 1]
    if not cpus:
        raise ExecutorError("the Ray cluster has no CPU for evaluation actors")
    if workers is None:
        per_actor = threads or min(cpus)  # one actor per node, each using the node's CPUs
    else:
        per_actor = threads or max(1, min(min(cpus), sum(cpus) // workers))
    capacity = sum(c // per_actor for c in cpus)
    count = workers or capacity
    if count > capacity or capacity == 0:
        raise UsageError(f"--workers {count}: the Ray cluster's {sum(cpus)} CPU(s) hold "
                         f"{capacity} actor(s) of {per_actor} thread(s)")
    return ActorPlan(count, num_cpus=per_actor, num_gpus=0, threads=per_actor)


def _device_plan(nodes: list[dict[str, Any]], resources: dict[str, float], workers: int | None,
                 threads: int | None) -> ActorPlan:
    name, need = next(iter(resources.items()))  # the first names the device counted
    units = sum(int(n.get(name, 0) // need) for n in nodes)
    if units == 0:
        raise ExecutorError(f"the Ray cluster has no {name}: start {name} workers with "
                            f"`ray start --address HEAD:6379` on each {name} node")
    count = workers or units
    if count > units:
        raise UsageError(f"--workers {count}: the Ray cluster has {units} {name}(s), and each "
                         "evaluation actor needs " + ("one" if need == 1 else f"{need}"))
    gpus = resources.get("GPU", 0)
    custom = {k: v for k, v in resources.items() if k != "GPU"}
    return ActorPlan(count, num_cpus=1, num_gpus=gpus, threads=threads, resources=custom)
