"""`kernelevolve.patch(model, ...)`: registered kernels into a live model, with fallback.

Which modules: by default every submodule whose class is a registered problem's `Model` (the
same class definition, compared by the digest of its source, so the class the model imports
from the problem file matches wherever it is imported from); `modules={"mlp.norm": "rmsnorm"}`
(dotted paths, `*` globs allowed) and `classes={MyNorm: "rmsnorm"}` map explicitly. Each matched
module gets a `Dispatcher` as its `forward`; `unpatch()` (or leaving `with patched(...)`)
restores it. No harness and no sandbox at serving time: what protects the model is that only
hash-verified artifacts load (loader.py), the machine must match the measuring one (compat.py),
the module must be the validated one (binding.py), and the call must be inside the validated
region (region.py); everything else runs the original module.

Registry changes made elsewhere (`kernelevolve registry set-state`, `rollback`) are picked up
within `refresh_s` seconds: one read of the registry's generation counter per period.
"""
from __future__ import annotations

import contextlib
import fnmatch
import inspect
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from kernelevolve.registry.bound import Bound, bind
from kernelevolve.registry.db import KernelRecord, Registry, RegistryError
from kernelevolve.registry.dispatch import Coverage, Dispatcher

_COVERAGE: dict[str, Coverage] = {}
_SESSIONS: list["PatchSession"] = []


@dataclass(frozen=True)
class ServeOptions:
    shadow_share: float = 1.0    # share of calls a shadow version is run and compared on
    canary_share: float = 0.1    # share of in-region calls a canary version serves
    max_mismatches: int = 0      # shadow mismatches tolerated before demotion
    refresh_s: float = 5.0       # how often registry state changes are looked for
    seed: int = 0                # the sampling streams' seed
    demote: bool = True          # write shadow demotions to the registry
    custom_op: bool = True       # register each bound kernel as a torch.library op

    def __post_init__(self) -> None:
        for key in ("shadow_share", "canary_share"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise RegistryError(f"{key} must be between 0 and 1, not {value}")
        if self.max_mismatches < 0 or self.refresh_s < 0:
            raise RegistryError("max_mismatches and refresh_s must not be negative")


@dataclass
class PatchSession:
    registry: Registry
    options: ServeOptions
    dispatchers: list[Dispatcher] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    model: Any = None
    _generation: int = 0
    _next_check: float = 0.0
    _flushed: dict[str, dict[str, Any]] = field(default_factory=dict)

    def coverage_of(self, name: str) -> Coverage:
        return _COVERAGE.setdefault(name, Coverage(name))

    # ---- state changes -------------------------------------------------------------------

    def maybe_refresh(self) -> None:
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + self.options.refresh_s
        try:
            generation = self.registry.generation()
            if generation != self._generation:
                self.refresh(generation, strict=False)
        except Exception as exc:  # noqa: BLE001 - a registry gone bad must not break serving
            self.problems.append(f"refresh failed, states kept: {type(exc).__name__}: {exc}")

    def refresh(self, generation: int | None = None, strict: bool = True) -> None:
        """Re-read every patched name's versions and states from the registry. `strict`
        (at patch time): a version that cannot be bound (a tampered artifact) raises; live
        (strict=False): it is kept with a refusal, so its calls fall back, counted."""
        self._generation = self.registry.generation() if generation is None else generation
        for d in self.dispatchers:
            default, trial = self.registry.serving(d.name)
            d.default = self._bound(d, default, d.default, strict)
            d.trial = self._bound(d, trial, d.trial, strict)

    def _bound(self, d: Dispatcher, rec: KernelRecord | None, old: Bound | None,
               strict: bool = True) -> Bound | None:
        if rec is None:
            return None
        if old is not None and old.record.version == rec.version:
            old.record = rec  # same artifacts, maybe a new state
            return old
        try:
            return bind(self.registry, rec, d.module, self.init_for(d), self.options.custom_op)
        except RegistryError as exc:
            if strict:
                raise
            from kernelevolve.registry.region import Region

            self.problems.append(str(exc))
            return Bound(record=rec, region=Region(rec.entry["region"]),
                         refusal=("artifact", str(exc)))

    def init_for(self, d: Dispatcher) -> list[Any] | None:
        fn = self.init_inputs.get(d.name) if self.init_inputs else None
        return list(fn(d.module)) if fn is not None else None

    init_inputs: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)  # what went wrong while serving, kept

    def demote(self, d: Dispatcher, trial: Bound, cov: Coverage) -> None:
        why = (f"shadow: {cov.shadow_mismatches} mismatch(es) in {cov.shadow_calls} compared "
               f"calls at {d.path}: {cov.mismatches[0]['reason'] if cov.mismatches else ''}")
        for other in self.dispatchers:
            if other.name == d.name and other.trial is trial:
                other.trial = None
        if self.options.demote:
            try:
                self.registry.demote(trial.record.name, trial.record.version, why,
                                     data={"mismatches": cov.mismatches})
                self._generation = self.registry.generation()
            except Exception as exc:  # noqa: BLE001 - demoted here even if not recorded
                self.problems.append(f"could not record the demotion of {trial.record.label} "
                                     f"({type(exc).__name__}: {exc}); it is off in this process")

    # ---- reporting -----------------------------------------------------------------------

    def report(self) -> list[dict[str, Any]]:
        return [d.describe() for d in self.dispatchers] + list(self.skipped)

    def explain(self) -> list[str]:
        """What answers each patched module's calls, in words; in shadow, that a call runs the
        original and the kernel both (registry/serving_text.py)."""
        from kernelevolve.registry.serving_text import serving_lines

        return serving_lines(self)

    def unpatch(self) -> None:
        for d in self.dispatchers:
            d.uninstall()
        if self in _SESSIONS:
            _SESSIONS.remove(self)

    def flush(self) -> None:
        """Write the counters gathered since the last flush to the registry (`registry stats`)."""
        for name in sorted({d.name for d in self.dispatchers}):
            now = _COVERAGE[name].to_dict()
            delta = _delta(now, self._flushed.get(name, {}))
            self._flushed[name] = now
            if delta.get("calls"):
                default, trial = self.registry.serving(name)
                version = (default or trial).version if (default or trial) else 0
                self.registry.add_stats(name, version, delta, socket.gethostname())


def _delta(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in now.items():
        old = before.get(key)
        if isinstance(value, dict):
            out[key] = _delta(value, old or {})
        elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                and key != "fallback_share":
            out[key] = value - (old or 0)
        elif isinstance(value, list):
            out[key] = value[len(old or []):]
    return out


def _class_file(cls: type) -> str | None:
    """The file defining `cls`: through its module, or (a module loaded by path and never put
    in sys.modules) through the code of any function defined in its body."""
    try:
        return inspect.getsourcefile(cls)
    except (OSError, TypeError):
        pass
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is not None:
            return code.co_filename
    return None


def _class_digest(cls: type, cache: dict[type, str | None]) -> str | None:
    """The digest of `cls`'s definition under the name Model (a problem's class name)."""
    if cls not in cache:
        digest = None
        path = None if cls.__module__.startswith("torch.") else _class_file(cls)
        if path:
            from kernelevolve.registry.promote import class_digest

            try:
                tree_src = Path(path).read_text()
            except (OSError, UnicodeDecodeError):
                tree_src = ""
            digest = class_digest(tree_src, cls.__name__, as_name="Model")
        cache[cls] = digest
    return cache[cls]


def _matches(model: Any, registry: Registry, names: list[str] | None,
             modules: dict[str, str] | None, classes: dict[type, str] | None
             ) -> list[tuple[str, Any, str]]:
    """(path, module, kernel name) for every module to patch, explicit mappings first."""
    by_digest: dict[str, str] = {}
    wanted = names if names is not None else registry.names()
    for name in wanted:
        default, trial = registry.serving(name)
        rec = default or trial or registry.get(name)
        digest = rec.entry.get("problem", {}).get("model_digest")
        if digest:
            by_digest.setdefault(digest, name)
    out, cache = [], {}
    for path, mod in model.named_modules():
        name = None
        for pattern, target in (modules or {}).items():
            if fnmatch.fnmatchcase(path, pattern):
                name = target
                break
        if name is None and classes:
            name = next((t for c, t in classes.items() if type(mod) is c), None)
        if name is None and not modules and not classes:
            name = by_digest.get(_class_digest(type(mod), cache) or "")
        if name is not None:
            out.append((path, mod, name))
    return out


def patch(model: Any, registry: str | Path | Registry | None = None,
          names: list[str] | None = None, *, modules: dict[str, str] | None = None,
          classes: dict[type, str] | None = None,
          init_inputs: dict[str, Any] | None = None, **options: Any) -> PatchSession:
    """Patch `model` in place; returns the session (its `report()`, `unpatch()`, `flush()`).
    `options` are ServeOptions fields. Raises RegistryError for a tampered artifact or an
    unknown name; a module that the kernel cannot serve is listed in `report()` as skipped."""
    reg = registry if isinstance(registry, Registry) else Registry.open(registry, create=False)
    for name in list(names or []) + list((modules or {}).values()) + list((classes or {}).values()):
        reg.get(name)  # an unknown name is an error naming what is registered
    session = PatchSession(registry=reg, options=ServeOptions(**options), model=model,
                           init_inputs=init_inputs)
    for path, mod, name in _matches(model, reg, names, modules, classes):
        if mod is model:
            session.skipped.append({"path": path or "(root)", "name": name, "skipped":
                                    "the model itself is the problem's module; patch its parent"})
            continue
        if hasattr(vars(mod).get("forward"), "__kernelevolve_dispatcher__"):
            session.skipped.append({"path": path, "name": name,
                                    "skipped": "already patched (unpatch the other session)"})
            continue
        d = Dispatcher(mod, name, path, session)
        session.dispatchers.append(d)
    try:
        session.refresh()  # binds every version: a tampered artifact raises here, unpatched
    except BaseException:
        if reg is not registry:
            reg.close()
        raise
    for d in session.dispatchers:
        d.install()
    _SESSIONS.append(session)
    return session


@contextlib.contextmanager
def patched(model: Any, registry: str | Path | Registry | None = None,
            names: list[str] | None = None, **kwargs: Any) -> Iterator[PatchSession]:
    """`patch` for the block's duration; the original forwards are back afterwards."""
    session = patch(model, registry, names, **kwargs)
    try:
        yield session
    finally:
        session.unpatch()


def coverage(name: str | None = None) -> dict[str, Any]:
    """Live counters per kernel name in this process (see dispatch.Coverage.to_dict)."""
    if name is not None:
        return _COVERAGE[name].to_dict() if name in _COVERAGE else {}
    return {k: v.to_dict() for k, v in sorted(_COVERAGE.items())}


def reset_coverage() -> None:
    """Zero every kernel's counters in place: live dispatchers keep counting into the same
    objects (clearing the map left them counting where coverage() no longer looked)."""
    for cov in _COVERAGE.values():
        cov.__init__(cov.name)
    for session in _SESSIONS:
        session._flushed.clear()  # the next flush's deltas start from zero too


def flush() -> None:
    """Flush every live patch session's counters to its registry."""
    for session in list(_SESSIONS):
        session.flush()
