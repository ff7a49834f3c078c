"""Problems: KernelBench-format modules plus our optional `CASES` and `TOLERANCE` extensions.

A problem module defines `Model`, `get_inputs()`, `get_init_inputs()` and module-level size
globals. `CASES` (optional) lists dicts with `name`, `weight` and values for size globals that are
rebound in the module before `get_init_inputs()`/`get_inputs()` run; without it the module's own
globals form one case. A case with `"held_out": True` is checked for correctness but never timed
nor weighted (an odd shape the kernel is not told about). `TOLERANCE` (optional) is `{"atol": float, "rtol": float}`.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import itertools
import linecache
import math
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve.errors import ProblemError

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_counter = itertools.count()


@dataclass(frozen=True)
class Case:
    name: str
    weight: float
    bindings: dict[str, Any] = field(default_factory=dict)
    held_out: bool = False


@dataclass(frozen=True)
class Problem:
    path: str
    name: str
    source_hash: str
    cases: tuple[Case, ...]
    tolerance: dict[str, float] | None
    size_globals: dict[str, int]

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)


def import_module(path: str | Path, prefix: str = "ke_problem", *,
                  wrap_errors: bool = True) -> types.ModuleType:
    """Import a Python file by path under a unique module name.

    With `wrap_errors` (problems), failures become a one-line ProblemError; without (candidates),
    the original exception propagates so its traceback can be shown."""
    path = Path(path)
    mod_name = f"{prefix}_{next(_counter)}_{_ident(path.stem)}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(str(path), "not a loadable Python file")
    return _execute(spec, importlib.util.module_from_spec(spec), str(path), wrap_errors)


class _TextLoader(importlib.abc.InspectLoader):
    """A module from source text. `get_source` lets tracebacks, linecache and inspect show its
    lines though no file exists."""

    def __init__(self, source: str, filename: str):
        self.source, self.filename = source, filename

    def get_source(self, fullname: str) -> str:
        return self.source

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(self.source, self.filename, "exec", dont_inherit=True)


def import_source(source: str, filename: str, prefix: str = "ke_problem", *,
                  wrap_errors: bool = True) -> types.ModuleType:
    """Import Python source text as a module named after `filename` (a bare name such as
    `problem.py`: the worker gets the problem as text and never the folder it came from).
    Errors as `import_module`; tracebacks show `filename` and its lines."""
    mod_name = f"{prefix}_{next(_counter)}_{_ident(Path(filename).stem)}"
    loader = _TextLoader(source, filename)
    spec = importlib.util.spec_from_loader(mod_name, loader, origin=filename, is_package=False)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename  # inspect.getsource finds the lines through linecache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return _execute(spec, module, filename, wrap_errors)


def _execute(spec, module: types.ModuleType, label: str, wrap_errors: bool) -> types.ModuleType:
    mod_name = spec.name
    sys.modules[mod_name] = module
    if not wrap_errors:
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(mod_name, None)
            raise
        return module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(mod_name, None)
        raise ProblemError(label, f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # the user's module raised (or exited) at import
        sys.modules.pop(mod_name, None)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ProblemError(label, f"importing it raised {type(exc).__name__}: {first}") from None
    return module


def load_problem(path: str | Path) -> Problem:
    """Load and validate a problem file; every fault is a one-line ProblemError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(str(path), "no such file; pass the path of a problem .py file")
    source = path.read_bytes()
    module = import_module(path)
    try:
        return _describe(path, source, module)
    finally:
        sys.modules.pop(module.__name__, None)


def _describe(path: Path, source: bytes, module: types.ModuleType) -> Problem:
    p = str(path)
    for attr in _REQUIRED:
        if not hasattr(module, attr):
            raise ProblemError(p, f"defines no `{attr}`; a KernelBench problem needs "
                                  "Model, get_inputs and get_init_inputs")
    if not isinstance(module.Model, type):
        raise ProblemError(p, "`Model` is not a class")
    for attr in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, attr)):
            raise ProblemError(p, f"`{attr}` is not callable")
    size_globals = {k: v for k, v in vars(module).items()
                    if not k.startswith("_") and type(v) is int and k not in ("CASES", "TOLERANCE")}
    cases = _parse_cases(p, module)
    tolerance = _parse_tolerance(p, getattr(module, "TOLERANCE", None))
    return Problem(path=str(path.resolve()), name=path.parent.name if path.stem == "problem"
                   else path.stem, source_hash=hashlib.sha256(source).hexdigest(),
                   cases=cases, tolerance=tolerance, size_globals=size_globals)


def _parse_cases(p: str, module: types.ModuleType) -> tuple[Case, ...]:
    raw = getattr(module, "CASES", None)
    if raw is None:
        return (Case(name="default", weight=1.0),)
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ProblemError(p, "CASES must be a non-empty list of dicts")
    cases, seen = [], set()
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ProblemError(p, f"CASES[{i}] is a {type(entry).__name__}, not a dict")
        name = entry.get("name", f"case{i}")
        if not isinstance(name, str) or not name:
            raise ProblemError(p, f"CASES[{i}] has a name that is not a non-empty string")
        if name in seen:
            raise ProblemError(p, f"CASES[{i}] repeats the case name {name!r}")
        seen.add(name)
        held_out = entry.get("held_out", False)
        if not isinstance(held_out, bool):
            raise ProblemError(p, f"case {name!r} has held_out {held_out!r}; use True or False")
        weight = entry.get("weight", 0.0 if held_out else 1.0)
        if held_out:  # checked for correctness, never timed nor weighted
            weight = 0.0
        elif isinstance(weight, bool) or not isinstance(weight, (int, float)) or not \
                (weight > 0 and math.isfinite(weight)):
            raise ProblemError(p, f"case {name!r} has weight {weight!r}; weights must be positive, "
                                  "finite numbers")
        bindings = {k: v for k, v in entry.items() if k not in ("name", "weight", "held_out")}
        for key in bindings:
            if not hasattr(module, key):
                raise ProblemError(p, f"case {name!r} sets {key}, which is not a global of the "
                                      "module; define it at module level or fix the name")
        cases.append(Case(name=name, weight=float(weight), bindings=bindings, held_out=held_out))
    if all(c.held_out for c in cases):
        raise ProblemError(p, "every case in CASES is held out; at least one must be timed")
    return tuple(cases)


def _parse_tolerance(p: str, raw: Any) -> dict[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not set(raw) <= {"atol", "rtol"} or not raw:
        raise ProblemError(p, "TOLERANCE must be a dict with keys atol and/or rtol")
    out = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not \
                (value >= 0 and math.isfinite(value)):
            raise ProblemError(p, f"TOLERANCE[{key!r}] must be a non-negative, finite number")
        out[key] = float(value)
    return out


class CaseBinder:
    """Rebinds a case's size globals in a live module; globals a case leaves out keep their
    module defaults, whatever case ran before."""

    def __init__(self, module: types.ModuleType, cases: tuple[Case, ...]):
        self.module = module
        keys = {k for case in cases for k in case.bindings}
        self.defaults = {k: getattr(module, k) for k in keys if hasattr(module, k)}

    def bind(self, case: Case) -> None:
        for key, value in {**self.defaults, **case.bindings}.items():
            setattr(self.module, key, value)


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def _effective_sizes(problem: Problem, case: Case) -> dict[str, int]:
    merged = {**problem.size_globals, **case.bindings}
    return {k: v for k, v in merged.items() if type(v) is int and k in problem.size_globals}


def derive_held_out(problem: Problem) -> Case | None:
    """A shape the candidate has not been told about, when the problem declares no odd one.

    Kernels that hard-code a shape or skip the remainder loop pass every size that is a
    multiple of their vector width. When no case has an odd size (>= 8), take the first case
    and make each even size >= 8 odd (n -> n - 1); the harness checks correctness on it (not
    timed, not weighted). If the reference cannot run that shape, the case is dropped.
    """
    if any(v % 2 for case in problem.cases for v in _effective_sizes(problem, case).values()
           if v >= 8):
        return None
    base = problem.cases[0]
    odd = {k: v - 1 for k, v in _effective_sizes(problem, base).items() if v >= 8 and v % 2 == 0}
    if not odd:
        return None
    return Case(name="held_out_odd", weight=0.0, bindings={**base.bindings, **odd}, held_out=True)
