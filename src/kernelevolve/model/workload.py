"""A user's model and its workload: a KernelBench-format MODEL file, its CASES, constructor inputs.

A model file is a problem file whose `Model` is a whole model: `Model`, `get_inputs()`,
`get_init_inputs()`, module-level size globals and optional `CASES` (the workload's input
distribution: dicts with `name`, `weight` and values for size globals, parsed exactly as a
problem's). Cases may vary only the inputs: the model is built once, so a case that changes what
`get_init_inputs()` returns is refused. When no case has an odd size, a held-out case is added
(each even input size >= 8 made odd, as `problem.derive_held_out` does, restricted to the sizes
that do not feed the constructor); it is dropped, with its reason in `ModelFile.dropped`, when
the model cannot run it.

`capture_inits()` records the constructor arguments of every `nn.Module` built while it is
active, so that a submodule can later be rebuilt exactly (`init_args(module)`).
"""
from __future__ import annotations

import contextlib
import functools
import random
import sys
import threading
import types
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from kernelevolve.errors import ProblemError
from kernelevolve.problem import Case, CaseBinder, _describe, derive_held_out, import_module

# ---- constructor capture -------------------------------------------------------------------

_records: "weakref.WeakKeyDictionary[nn.Module, tuple[tuple, dict]]" = weakref.WeakKeyDictionary()
_lock = threading.RLock()
_depth = 0
_wrapped: dict[type, Any] = {}   # class -> its own __init__, while capture is active


def _module_classes() -> list[type]:
    seen, todo = {nn.Module}, [nn.Module]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return list(seen)


def _recording(cls: type, init):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        # Only the __init__ that `cls(...)` resolves to records: it sees the call's own
        # arguments. A parent's __init__ reached through super() sees other ones, and copies
        # made by copy/pickle run no __init__ at all.
        if getattr(type(self), "__init__", None) is __init__:
            with contextlib.suppress(TypeError):  # not weakly referenceable
                if self not in _records:
                    _records[self] = (args, dict(kwargs))
        return init(self, *args, **kwargs)
    return __init__


@contextlib.contextmanager
def capture_inits():
    """While active, every `nn.Module` constructed records the arguments its class was called
    with; `init_args(module)` returns them (also after the block ends). Nestable.

    Each loaded `nn.Module` subclass that defines `__init__` gets a recording wrapper for the
    block, and its own `__init__` back after (classes defined inside the block are not
    covered). A class whose `__init__` comes from a non-module mixin records nothing."""
    global _depth
    with _lock:
        if _depth == 0:
            for cls in _module_classes():
                init = cls.__dict__.get("__init__")
                if init is None or not callable(init):
                    continue
                try:
                    type.__setattr__(cls, "__init__", _recording(cls, init))
                except (TypeError, AttributeError):  # an immutable class: left as it is
                    continue
                _wrapped[cls] = init
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for cls, init in _wrapped.items():
                    type.__setattr__(cls, "__init__", init)
                _wrapped.clear()


def init_args(module: nn.Module) -> tuple[tuple, dict] | None:
    """The (args, kwargs) `module`'s class was called with, if it was built under
    `capture_inits()`; None otherwise (built outside it, or a copy made by copy/pickle)."""
    try:
        record = _records.get(module)
    except TypeError:
        return None
    if record is None:
        return None
    args, kwargs = record
    return tuple(args), dict(kwargs)


# ---- the model file ------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadCase(Case):
    """One point of the workload: a name, a weight (0 for held-out cases) and the size globals
    it binds before `get_inputs()`."""


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@contextlib.contextmanager
def _seeded(seed: int):
    """torch's CPU generator and `random` seeded for the block, the caller's states restored."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object without a usable ==
        return a is b


class ModelFile:
    """A loaded model file: `path`, `module` (the imported module), `cases` (the workload's
    cases, then held-out ones), `dropped` ({case name: why} for derived cases left out)."""

    def __init__(self, path: Path, module: types.ModuleType, cases: list[WorkloadCase]):
        self.path = path
        self.module = module
        self.cases = cases
        self.dropped: dict[str, str] = {}
        self._binder = CaseBinder(module, tuple(cases))

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def workload(self) -> list[WorkloadCase]:
        """The timed, weighted cases (no held-out ones)."""
        return [c for c in self.cases if not c.held_out]

    def case(self, name: str) -> WorkloadCase:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    def _fail(self, fault: str) -> ProblemError:
        return ProblemError(str(self.path), fault)

    @contextlib.contextmanager
    def _bound(self, case: WorkloadCase | None):
        """The case's globals bound for the block, the module's defaults restored after."""
        self._binder.bind(case or WorkloadCase("default", 1.0))
        try:
            yield
        finally:
            self._binder.bind(WorkloadCase("default", 1.0))

    def init_inputs(self, case: WorkloadCase | None = None) -> list:
        with self._bound(case):
            try:
                return list(self.module.get_init_inputs())
            except Exception as exc:  # noqa: BLE001 - the user's code: one line, no traceback
                raise self._fail(f"get_init_inputs raised {_one_line(exc)}") from None

    def build(self, seed: int = 0) -> nn.Module:
        """`Model(*get_init_inputs())` with the module's default sizes, seeded, in eval mode,
        constructed under `capture_inits()` so every submodule's arguments are recorded."""
        init = self.init_inputs()
        with _seeded(seed), capture_inits():
            try:
                model = self.module.Model(*init)
            except Exception as exc:  # noqa: BLE001
                raise self._fail(f"Model(*get_init_inputs()) raised {_one_line(exc)}") from None
        if not isinstance(model, nn.Module):
            raise self._fail(f"Model(...) built a {type(model).__name__}, not an nn.Module")
        return model.eval()

    def inputs(self, case: WorkloadCase, seed: int = 0) -> list:
        """`get_inputs()` with the case's globals bound, seeded (the defaults restored after)."""
        with self._bound(case), _seeded(seed):
            try:
                values = self.module.get_inputs()
            except Exception as exc:  # noqa: BLE001
                raise self._fail(f"get_inputs raised {_one_line(exc)} (case "
                                 f"{case.name!r})") from None
        if not isinstance(values, (list, tuple)):
            raise self._fail(f"get_inputs returned a {type(values).__name__} for case "
                             f"{case.name!r}; return a list of inputs")
        return list(values)

    def check(self, seed: int = 0) -> None:
        """Build the model and run every case once: a case that changes the constructor's
        inputs or whose forward raises is a one-line ProblemError; a derived held-out case the
        model cannot run is dropped (its reason in `dropped`)."""
        default_init = self.init_inputs()
        for case in self.cases:
            if not _same(self.init_inputs(case), default_init):
                raise self._fail(f"case {case.name!r} changes what get_init_inputs returns; the "
                                 "model is built once, so cases may vary only its inputs")
        model = self.build(seed)
        for case in list(self.cases):
            derived = case.held_out and case.name == _DERIVED
            try:
                args = self.inputs(case, seed)
                with torch.inference_mode():
                    model(*args)
            except Exception as exc:  # noqa: BLE001
                why = exc.fault if isinstance(exc, ProblemError) else \
                    f"the model's forward raised {_one_line(exc)} on case {case.name!r}"
                if not derived:
                    raise self._fail(why) from None
                self.cases.remove(case)
                self.dropped[case.name] = why


_DERIVED = "held_out_odd"


def _input_sizes(module: types.ModuleType, size_globals: dict[str, int], path: str) -> dict:
    """The int size globals that do not feed `get_init_inputs()`: each one shifted by one, the
    constructor's inputs stay the same."""
    try:
        base = list(module.get_init_inputs())
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(path, f"get_init_inputs raised {_one_line(exc)}") from None
    out = {}
    for key, value in size_globals.items():
        setattr(module, key, value - 1)
        try:
            changed = not _same(list(module.get_init_inputs()), base)
        except Exception:  # noqa: BLE001 - it depends on this size in some way
            changed = True
        finally:
            setattr(module, key, value)
        if not changed:
            out[key] = value
    return out


def load_model_file(path: str | Path, *, check: bool = True, seed: int = 0) -> ModelFile:
    """Import a KernelBench-format model file and read its workload.

    Every fault is a one-line ProblemError naming the file and the problem: no such file, a
    missing `Model`/`get_inputs`/`get_init_inputs`, bad CASES, and with `check` (the default:
    builds the model and runs each case once) a constructor, `get_inputs` or forward that
    raises."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(str(path), "no such file; pass the path of a model .py file (Model, "
                                      "get_inputs, get_init_inputs, optional CASES)")
    module = import_module(path, prefix="ke_model")
    try:
        desc = _describe(path, path.read_bytes(), module)
        cases = [WorkloadCase(c.name, c.weight, dict(c.bindings), c.held_out) for c in desc.cases]
        if not any(c.held_out for c in cases):
            sizes = _input_sizes(module, desc.size_globals, str(path))
            held = derive_held_out(types.SimpleNamespace(cases=tuple(cases), size_globals=sizes))
            if held is not None:
                cases.append(WorkloadCase(_DERIVED, 0.0, dict(held.bindings), True))
        model_file = ModelFile(path.resolve(), module, cases)
        if check:
            model_file.check(seed)
    except BaseException:
        sys.modules.pop(module.__name__, None)
        raise
    return model_file
