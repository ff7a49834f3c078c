"""Worker-side integrity probes, armed before candidate code is imported.

- `Snapshot`: identities of every attribute of torch, torch.nn.functional, torch.Tensor,
  nn.Module, time, the problem module and its `Model`, plus global torch settings. Compared
  after import, after each forward and after timing: a candidate that patches a timer, a
  comparison function or the reference (to slow the baseline) is caught by identity.
- `OpRecorder`: the ATen ops a forward dispatches, for fallback detection.
- thread checks: no new Python threads, and, when threads beyond the warmed pools exist after a
  forward, no CPU used by them in the 10 ms after it returned (the pools run with
  OMP_WAIT_POLICY=PASSIVE, so idle team members of any team size sleep and use none).
- input mutation: inputs compared bytewise with copies taken before the forward.
"""
from __future__ import annotations

import os
import threading
import time
import types
from typing import Any

# ATen ops that move, view, allocate or describe data but compute nothing.
_NON_COMPUTE = frozenset("""
alias as_strided clone contiguous copy copy_ detach detach_ empty empty_like empty_strided
expand expand_as fill_ full full_like lift_fresh lift_fresh_copy new_empty new_empty_strided
new_full new_ones new_zeros ones ones_like permute reshape resize_ select slice split squeeze
squeeze_ stride sym_size sym_stride sym_numel size dim t transpose unbind unflatten unsqueeze
unsqueeze_ view view_as _unsafe_view _reshape_alias _to_copy to zero_ zeros zeros_like
_local_scalar_dense is_contiguous numel item set_ narrow unfold flatten movedim moveaxis
chunk tensor_split as_strided_ _conj _neg_view resolve_conj resolve_neg record_stream
broadcast_in_dim convert_element_type collapse_view expand_dims split_dim view_of
""".split())

_WATCHED_SETTINGS = (
    ("torch.get_num_threads()", lambda t: t.get_num_threads()),
    ("torch.get_default_dtype()", lambda t: t.get_default_dtype()),
    ("torch.are_deterministic_algorithms_enabled()", lambda t: t.are_deterministic_algorithms_enabled()),
    ("torch.get_float32_matmul_precision()", lambda t: t.get_float32_matmul_precision()),
    ("torch.backends.mkldnn.enabled", lambda t: t.backends.mkldnn.enabled),
    ("torch.backends.cudnn.benchmark", lambda t: t.backends.cudnn.benchmark),
    ("torch.backends.cudnn.allow_tf32", lambda t: t.backends.cudnn.allow_tf32),
    ("torch.backends.cuda.matmul.allow_tf32", lambda t: t.backends.cuda.matmul.allow_tf32),
)


_MISSING = object()  # a name no longer bound (None may be a value)


def _namespace(obj: Any) -> dict[str, Any]:
    return dict(vars(obj)) if isinstance(obj, (types.ModuleType, type)) else {}


def _stream_modules() -> dict[str, Any]:
    """The registered platforms' device stream modules (torch.cuda...) that are imported here:
    a candidate that patches one hides work from the timer."""
    import sys

    from kernelevolve.plugins import device_stream_modules

    return {name: sys.modules[name] for name in device_stream_modules() if name in sys.modules}


class Snapshot:
    """Identity of every attribute of the objects a candidate could patch."""

    def __init__(self, problem_module: types.ModuleType, models: list[Any] = ()):
        import torch
        import torch.nn.functional as F

        targets: dict[str, Any] = {
            "torch": torch, "torch.nn.functional": F, "torch.Tensor": torch.Tensor,
            "torch.nn.Module": torch.nn.Module, "torch.nn": torch.nn, "time": time,
            "torch.testing": torch.testing, "problem module": problem_module,
            **_stream_modules(),
        }
        model = getattr(problem_module, "Model", None)
        if isinstance(model, type):
            targets["Model"] = model
        # Per target, the names and the very objects bound to them (held, so that no id can
        # be reused by a replacement): `changes` compares them by identity in C, ~2,500 names
        # in well under a millisecond (a Python loop of id() took ~5 ms a check, 15 checks a job).
        self._names: dict[str, list[str]] = {}
        self._values: dict[str, list[Any]] = {}
        for label, obj in targets.items():
            names, values = [], []
            for name, value in _namespace(obj).items():
                if label == "problem module" and not callable(value):
                    continue  # size globals are rebound per case by the harness itself
                names.append(name)
                values.append(value)
            self._names[label], self._values[label] = names, values
        self._targets = targets
        self._settings = self._read_settings()
        # The reference model instances timed beside the candidate: their attributes,
        # submodules, parameters and buffers must not be swapped (e.g. a slower forward set on
        # the instance, found through gc) to make the baseline look slow.
        self._models = [m for model in models for m in _submodules(model)]
        self._model_state = [self._module_state(m) for m in self._models]
        self.threads: set[str] | None = None

    @staticmethod
    def _module_state(module: Any) -> dict[str, Any]:
        import torch

        state: dict[str, Any] = {f"attr {k}": id(v) for k, v in vars(module).items()}
        for group in ("_parameters", "_buffers", "_modules"):
            for name, value in (getattr(module, group, None) or {}).items():
                state[f"{group[1:-1]} {name}"] = id(value)
                if isinstance(value, torch.Tensor):
                    state[f"{group[1:-1]} {name} data"] = (value.data_ptr(), str(value.dtype),
                                                           tuple(value.shape))
        return state

    @staticmethod
    def _read_settings() -> dict[str, Any]:
        import torch

        out = {}
        for label, read in _WATCHED_SETTINGS:
            try:
                out[label] = read(torch)
            except Exception:  # noqa: BLE001 - a setting this torch build lacks
                continue
        return out

    def changes(self) -> list[str]:
        import operator
        from itertools import repeat

        found = []
        for label, obj in self._targets.items():
            current = _namespace(obj)
            names, before = self._names[label], self._values[label]
            now = list(map(current.get, names, repeat(_MISSING)))
            if all(map(operator.is_, now, before)):
                continue
            for name, old, new in zip(names, before, now):
                if new is _MISSING:
                    found.append(f"{label}.{name} was deleted")
                elif new is not old:
                    found.append(f"{label}.{name} was replaced")
        for i, (module, before) in enumerate(zip(self._models, self._model_state)):
            after = self._module_state(module)
            for key in sorted(set(before) | set(after)):
                if before.get(key) != after.get(key):
                    found.append(f"reference model {type(module).__name__} ({i}): {key} changed")
                    break
        for label, value in self._read_settings().items():
            if self._settings.get(label, value) != value:
                found.append(f"{label} changed from {self._settings[label]!r} to {value!r}")
        return found


def _submodules(model: Any) -> list[Any]:
    modules = getattr(model, "modules", None)
    return list(modules()) if callable(modules) else [model]


class OpRecorder:
    """Records the ATen ops dispatched inside a `with` block (views and allocations excluded)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
                recorder.ops.add(func.overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        self.ops: set[str] = set()
        self._mode = _Mode()

    def __enter__(self) -> "OpRecorder":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    def compute_ops(self) -> list[str]:
        return sorted(op for op in self.ops if op.rstrip("_") not in _NON_COMPUTE
                      and op not in _NON_COMPUTE)


def decomposed_ops(model: Any, inputs: list[Any]) -> list[str]:
    """The reference's compute ops after torch's core decompositions (softmax -> amax, sub, exp,
    sum, div): a candidate that rebuilds the reference from these smaller ops is a fallback too.
    Empty when the model cannot be traced (data-dependent control flow, ...)."""
    import torch
    from torch._decomp import decomposition_table
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with torch.no_grad():
            graph = make_fx(lambda *xs: model(*xs),
                            decomposition_table=decomposition_table)(*inputs)
    except Exception:  # noqa: BLE001 - not traceable: the plain op check still applies
        return []
    ops = set()
    for node in graph.graph.nodes:
        packet = getattr(node.target, "overloadpacket", None)
        if node.op == "call_function" and packet is not None:
            ops.add(packet.__name__)
    return sorted(op for op in ops if op.rstrip("_") not in _NON_COMPUTE and op not in _NON_COMPUTE)


# ---- threads -----------------------------------------------------------------------------------
def python_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def native_threads() -> set[str]:
    """Thread ids of this process (Linux), the main thread excluded."""
    try:
        return set(os.listdir("/proc/self/task")) - {str(os.getpid())}
    except OSError:
        return set()


def _all_threads() -> list[str]:
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


def _thread_cpu_s(tid: str) -> float:
    """CPU time of one thread of this process (its per-thread CPU clock); 0 once it is gone."""
    try:
        return time.clock_gettime(((~int(tid)) << 3) | 6)  # MAKE_THREAD_CPUCLOCK(tid, SCHED)
    except (OSError, ValueError):
        return 0.0


def cpu_of_new_threads(baseline: set[str], window_s: float = 0.01) -> float:
    """CPU seconds used, while this thread sleeps for `window_s`, by the process's threads that
    are not in `baseline` (the warmed pools): the process clock minus this thread's and the
    baseline threads' own clocks. Threads that exit during the window count too (the process
    clock keeps their time), so a detached thread finishing a kernel's work just after forward
    returned is seen, while parked threads (an OpenMP team of any size waiting for its next
    region) use nothing; so do libgomp's surplus threads leaving when torch, which shares that
    libgomp (same soname), runs a region with fewer threads than the candidate did. Baseline
    threads are left out (a pool may spin for a while after its last call).

    Reading a thread's own clock brings its run time up to date in the kernel, so every thread
    is read before the process clock: otherwise time a running thread had not yet been charged
    for appears in the window when it stops (seen: 1.8 ms of nothing)."""
    def sample() -> tuple[float, float, float]:
        base = 0.0
        for tid in _all_threads():
            cpu = _thread_cpu_s(tid)
            base += cpu if tid in baseline else 0.0
        return (time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID),
                time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID), base)

    proc0, main0, base0 = sample()
    time.sleep(window_s)
    proc1, main1, base1 = sample()
    return max(0.0, (proc1 - proc0) - (main1 - main0) - (base1 - base0))


def warm_thread_pools(helpers: dict[str, dict[str, str]]) -> None:
    """Start every thread pool a legitimate candidate may use BEFORE it runs, so that any
    native thread alive after a forward (and not here before) is the candidate's own.

    torch's OpenMP runtime (bundled with torch), g++'s libgomp (which load_cpp libraries link
    against; one copy per process, so warming it here warms the candidate's) and numpy's BLAS
    (the Triton interpreter's tl.dot) each create their pool on first use. The libgomp warm-up
    is a harness helper the driver built (`helpers["ke_warm_omp"]`: path and sha256); it is
    loaded only if its bytes still hash to what the driver recorded.
    """
    import numpy as np
    import torch

    from kernelevolve.runtime import launches

    with torch.no_grad():
        torch.ones(1 << 20).sum()
        torch.mm(torch.ones(128, 128), torch.ones(128, 128))
    np.ones((128, 128)) @ np.ones((128, 128))
    lib = load_helper(helpers.get("ke_warm_omp"))
    if lib is not None:
        lib.ke_warm_omp()
    launches.reset_launch_counts()


def load_helper(spec: dict[str, str] | None):
    """A harness helper library by (path, sha256), verified before it is loaded."""
    import ctypes

    from kernelevolve.runtime.cpp_cache import sha256_file

    if not spec:
        return None
    try:
        if sha256_file(spec["path"]) != spec["sha256"]:
            return None
        return ctypes.CDLL(spec["path"])
    except (OSError, KeyError, TypeError):
        return None


# ---- inputs --------------------------------------------------------------------------------
def copy_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def mutated_inputs(inputs: list[Any], copies: list[Any]) -> list[int]:
    """Indices of tensor inputs whose bytes differ from the copy taken before the forward."""
    import torch

    changed = []
    for i, (x, c) in enumerate(zip(inputs, copies)):
        if not isinstance(x, torch.Tensor):
            continue
        if x.shape != c.shape or x.dtype != c.dtype:
            changed.append(i)
            continue
        a = x.detach().contiguous().reshape(-1)
        b = c.contiguous().reshape(-1)
        if a.numel() and not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
            changed.append(i)
    return changed


def non_plain_outputs(outputs: list[Any]) -> list[str]:
    """Outputs that are not plain, materialised torch.Tensor objects (lazy subclasses etc.)."""
    import torch

    bad = []
    for i, t in enumerate(outputs):
        if type(t) is not torch.Tensor:
            bad.append(f"output {i} is a {type(t).__module__}.{type(t).__qualname__}, "
                       "not a plain torch.Tensor")
    return bad
