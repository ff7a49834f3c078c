"""Where a model's time goes: forward hooks on every module, per instance and per kind.

Timing, and why it can be defended: each module's forward is timed on the wall clock
(`time.perf_counter_ns`) by a pre-hook and a post-hook; on CUDA both hooks synchronise the
device first, so a module's time includes its kernels. Inclusive time is the whole call,
exclusive time is inclusive minus the children's inclusive times. The hooks cost time
themselves, which lands in the parent's exclusive time: it is measured once per process
(`hook_cost_ns`, an empty module timed with and without hooks) and taken off each parent per
hooked child call. The model's time without any hook is measured too, in the same process, and
reported next to the hooked total, so the perturbation is visible rather than assumed.

A module's kind is its class plus its constructor inputs (recorded by `capture_inits` when the
model was built there), or, for a module built elsewhere, its class plus its state's shapes and
plain attributes. Amdahl's bounds per kind use the inclusive share s of the model's time: the
model's speedup if the kind became 2x faster, 1 / (1 - s / 2), and if it became free, 1 / (1 - s).

Workload cases carry weights: every figure is a weighted sum over cases of per-forward times
(a case's median forward time; a module's median time per call times its calls per forward),
divided by the weights' sum, so shares are of the workload's time rather than of one input's.
Medians, because on a busy machine a multi-threaded op now and then waits for a descheduled
thread; the shares then add up to about, not exactly, 100%.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

TIMING = ("wall clock per module call by forward hooks (CUDA synchronised in each hook), "
          "the hooks' own measured cost taken off each parent")


def _sync_for(model: Any) -> Callable[[], None]:
    """The device's synchronize for the model's device (a no-op on the CPU): the backend
    module torch names after the device type (platform-neutral: no vendor named here)."""
    import torch

    try:
        device = next(model.parameters()).device
    except (StopIteration, AttributeError):
        device = torch.device("cpu")
    return device_sync(device.type)


def device_sync(kind: str) -> Callable[[], None]:
    """The synchronize of torch's backend module named after a device type; a no-op on cpu."""
    import torch

    sync = None if kind == "cpu" else getattr(getattr(torch, kind, None), "synchronize", None)
    return sync if callable(sync) else (lambda: None)


def signature_of(args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> str:
    """A call's inputs as text: each tensor as dtype[shape], other values by repr (short)."""
    import torch

    def one(a: Any) -> str:
        if isinstance(a, torch.Tensor):
            return f"{str(a.dtype)[6:]}{list(a.shape)}"
        if isinstance(a, (list, tuple)) and a and all(isinstance(x, torch.Tensor) for x in a):
            return "[" + ", ".join(one(x) for x in a) + "]"
        text = repr(a)
        return text if len(text) <= 40 else text[:37] + "..."
    parts = [one(a) for a in args]
    parts += [f"{k}={one(v)}" for k, v in sorted((kwargs or {}).items())]
    return ", ".join(parts)


def kind_of(module: Any) -> tuple[str, str]:
    """(kind key, readable label): the class plus its constructor inputs when they were
    recorded, else the class plus its parameters' shapes and plain attributes."""
    cls = type(module)
    qual = f"{cls.__module__}.{cls.__qualname__}"
    # a class named like many others (every problem file's `Model`) is shown with its module
    home = re.sub(r"^ke_(model|problem)_\d+_", "", cls.__module__.rsplit(".", 1)[-1])
    name = f"{home}.{cls.__name__}" if cls.__name__ in ("Model", "Block", "Layer") else \
        cls.__name__
    init = None
    try:
        from kernelevolve.model.workload import init_args
        init = init_args(module)
    except ImportError:  # pragma: no cover - workload.py is part of the package
        pass
    if init is not None:
        args, kwargs = init
        shown = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
        label = f"{name}({', '.join(shown)})"
        key_src = json.dumps([qual, [repr(a) for a in args],
                              {k: repr(v) for k, v in sorted(kwargs.items())}])
    else:
        from kernelevolve.registry.binding import signature

        sig = signature(module)
        state = ", ".join(f"{k}:{'x'.join(map(str, v[0])) or 'scalar'}"
                          for k, v in sig["state"].items() if "." not in k)
        label = f"{name}({state})" if state else f"{name}()"
        key_src = json.dumps([qual, sig], sort_keys=True, default=repr)
    return hashlib.sha256(key_src.encode()).hexdigest()[:12], label


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 24 else text[:21] + "..."


@dataclass
class _Site:
    """One module instance's calls within one workload case."""
    incl: list[int] = field(default_factory=list)   # ns per call
    excl: list[int] = field(default_factory=list)
    shapes: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def calls(self) -> int:
        return len(self.incl)

    # A call's typical time is the median of its calls, times the number of calls: on a busy
    # machine a multi-threaded op now and then waits for a descheduled thread and takes 10x
    # longer, which a mean would hand to whichever module was unlucky.
    @property
    def incl_ns(self) -> float:
        return statistics.median(self.incl) * len(self.incl) if self.incl else 0.0

    @property
    def excl_ns(self) -> float:
        return statistics.median(self.excl) * len(self.excl) if self.excl else 0.0


class Recorder:
    """Forward hooks on every module of `model`; `with recorder.case(name):` attributes the
    calls made inside to a workload case. Use as a context manager (hooks on while inside)."""

    def __init__(self, model: Any):
        self.model = model
        self.paths = {id(m): p for p, m in model.named_modules(remove_duplicate=False)}
        self.modules = {p: m for p, m in model.named_modules()}
        self.sites: dict[str, dict[str, _Site]] = defaultdict(lambda: defaultdict(_Site))
        self.forwards: dict[str, list[int]] = defaultdict(list)  # case -> root inclusive ns
        self.hooked_calls: dict[str, int] = defaultdict(int)
        self._case = "default"
        self._stack: list[list[int]] = []   # [start_ns, children_ns, hooked children]
        self._handles: list[Any] = []
        self._sync = _sync_for(model)
        self.hook_cost_ns = 0

    # ---- hooks ---------------------------------------------------------------------------

    def _pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        self._sync()
        self._stack.append([time.perf_counter_ns(), 0, 0])

    def _post(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        self._sync()
        end = time.perf_counter_ns()
        start, children, hooked = self._stack.pop()
        incl = end - start
        excl = max(0, incl - children - hooked * self.hook_cost_ns)
        path = self.paths.get(id(module), f"<unnamed {type(module).__name__}>")
        site = self.sites[self._case][path]
        site.incl.append(incl)
        site.excl.append(excl)
        site.shapes[signature_of(args, kwargs)] += 1
        if self._stack:
            self._stack[-1][1] += incl
            self._stack[-1][2] += 1
        else:
            self.forwards[self._case].append(incl)

    def __enter__(self) -> "Recorder":
        if not self.hook_cost_ns:
            self.hook_cost_ns = measure_hook_cost()
        for module in self.modules.values():
            self._handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post, with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._stack.clear()

    @contextlib.contextmanager
    def case(self, name: str) -> Iterator[None]:
        before, self._case = self._case, name
        try:
            yield
        finally:
            self._case = before


def measure_hook_cost(calls: int = 2000) -> int:
    """ns that a pair of profiling hooks adds to one call of a module (median of 5 rounds)."""
    import torch

    class _Empty(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x

    m, x = _Empty(), torch.zeros(1)
    probe = Recorder.__new__(Recorder)
    probe._stack, probe.sites = [], defaultdict(lambda: defaultdict(_Site))
    probe.forwards, probe.paths, probe._case = defaultdict(list), {}, "calibration"
    probe._sync, probe.hook_cost_ns = (lambda: None), 0
    bare, hooked = [], []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            m(x)
        bare.append(time.perf_counter_ns() - t0)
        handles = [m.register_forward_pre_hook(probe._pre, with_kwargs=True),
                   m.register_forward_hook(probe._post, with_kwargs=True)]
        probe._stack.append([0, 0, 0])  # a parent, so nothing lands in `forwards`
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            m(x)
        hooked.append(time.perf_counter_ns() - t0)
        probe._stack.clear()
        for h in handles:
            h.remove()
    return max(0, int((statistics.median(hooked) - statistics.median(bare)) / calls))


Case = tuple[str, float, Callable[[], Sequence[Any]]]  # (name, weight, inputs factory)


def profile(model: Any, cases: Sequence[Case], *, reps: int = 5, warmup: int = 1,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every case `warmup + reps` times without hooks (the model's own time), then `reps`
    times with them; returns the profile (see `summarise`)."""
    import torch

    sync = _sync_for(model)
    bare: dict[str, list[int]] = {}
    rec = Recorder(model)
    with torch.inference_mode():
        for name, weight, make in cases:
            if progress:
                progress(name)
            inputs = list(make())
            for _ in range(warmup):
                model(*inputs)
            times = []
            for _ in range(reps):
                sync()
                t0 = time.perf_counter_ns()
                model(*inputs)
                sync()
                times.append(time.perf_counter_ns() - t0)
            bare[name] = times
            with rec, rec.case(name):
                for _ in range(reps):
                    model(*inputs)
    return summarise(rec, [(n, w) for n, w, _ in cases], bare)


def summarise(rec: Recorder, cases: Sequence[tuple[str, float]],
              bare: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """Per instance and per kind, weighted over cases by per-forward time."""
    weights = {n: w for n, w in cases if w > 0}
    total_w = sum(weights.values()) or 1.0
    fwd = {n: statistics.median(rec.forwards[n]) for n in weights if rec.forwards.get(n)}
    runs = {n: len(rec.forwards[n]) for n in fwd}
    total_ns = sum(weights[n] * fwd[n] for n in fwd) / total_w
    kinds: dict[str, dict[str, Any]] = {}
    instances = []
    for path, module in rec.modules.items():
        inst = _instance(rec, path, module, weights, total_w, runs)
        if not inst["calls"]:
            continue
        key, label = kind_of(module)
        inst["kind"] = key
        instances.append(inst)
        k = kinds.setdefault(key, {"kind": key, "label": label, "class": type(module).__name__,
                                   "module": type(module).__module__, "instances": [],
                                   "calls": 0.0, "incl_ms": 0.0, "excl_ms": 0.0,
                                   "shapes": defaultdict(float)})
        k["instances"].append(inst["path"])
        for f in ("calls", "incl_ms", "excl_ms"):
            k[f] += inst[f]
        for sig, n in inst["shapes"].items():
            k["shapes"][sig] += n
    total_ms = total_ns / 1e6
    for row in instances + list(kinds.values()):
        row["share_incl"] = row["incl_ms"] / total_ms if total_ms else 0.0
        row["share_excl"] = row["excl_ms"] / total_ms if total_ms else 0.0
        row["shapes"] = _shape_list(row["shapes"])
    for k in kinds.values():
        s = min(k["share_incl"], 1.0)
        k["amdahl_2x"] = 1.0 / (1.0 - s / 2.0)
        k["amdahl_free"] = (1.0 / (1.0 - s)) if s < 1.0 else None
    bare_ms = {n: statistics.median(v) / 1e6 for n, v in (bare or {}).items() if v}
    bare_total = (sum(weights[n] * bare_ms[n] for n in bare_ms if n in weights) / total_w
                  if bare_ms else None)
    return {
        "timing": TIMING,
        "hook_cost_us": rec.hook_cost_ns / 1e3,
        "cases": [{"name": n, "weight": w, "hooked_ms": fwd.get(n, 0.0) / 1e6,
                   "ms": bare_ms.get(n)} for n, w in cases],
        "total_ms": bare_total if bare_total is not None else total_ms,
        "hooked_total_ms": total_ms,
        "instances": sorted(instances, key=lambda r: -r["excl_ms"]),
        "kinds": sorted(kinds.values(), key=lambda r: (-r["incl_ms"], r["label"])),
    }


def _instance(rec: Recorder, path: str, module: Any, weights: dict[str, float],
              total_w: float, runs: dict[str, int]) -> dict[str, Any]:
    """One instance's figures per weighted forward, and per case unweighted (`by_case`)."""
    inst = {"path": path or "(model)", "class": type(module).__name__, "calls": 0,
            "incl_ms": 0.0, "excl_ms": 0.0, "shapes": defaultdict(float), "by_case": {}}
    for case, w in weights.items():
        site = rec.sites.get(case, {}).get(path)
        if site is None or not runs.get(case):
            continue
        per_fwd = w / total_w / runs[case]
        inst["calls"] += site.calls * per_fwd
        inst["incl_ms"] += site.incl_ns * per_fwd / 1e6
        inst["excl_ms"] += site.excl_ns * per_fwd / 1e6
        for sig, n in site.shapes.items():
            inst["shapes"][sig] += n / runs[case] * w
        inst["by_case"][case] = {
            "calls": site.calls / runs[case], "incl_ms": site.incl_ns / runs[case] / 1e6,
            "excl_ms": site.excl_ns / runs[case] / 1e6,
            "shapes": {sig: n / runs[case] for sig, n in site.shapes.items()}}
    return inst


def _shape_list(shapes: dict[str, float]) -> list[dict[str, Any]]:
    """[{inputs, weight (calls per weighted forward), share of the weight}] largest first."""
    total = sum(shapes.values()) or 1.0
    return [{"inputs": s, "weight": w, "share": w / total}
            for s, w in sorted(shapes.items(), key=lambda kv: -kv[1])]


@contextlib.contextmanager
def profiling(model: Any, case: str = "default") -> Iterator[Callable[[], dict[str, Any]]]:
    """Record while the caller's own code runs `model` on real inputs:

        with kernelevolve.profiling(model) as result:
            for batch in loader:
                model(batch)
        print(result()["kinds"][0])

    Every forward of the model inside the block counts, with weight 1 (one case)."""
    rec = Recorder(model)
    with rec, rec.case(case):
        yield lambda: summarise(rec, [(case, 1.0)])
