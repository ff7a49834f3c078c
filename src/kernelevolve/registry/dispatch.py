"""The per-call decision: kernel or original, shadow comparisons, canary shares, and counts.

A `Dispatcher` replaces one module's `forward` (an instance attribute, so the module keeps its
class, parameters, hooks and state_dict keys). Per call, in order:

1. keyword arguments, or autograd wanting gradients through the module: the original runs
   (a registered kernel has no backward);
2. a trial version in `shadow` (on `shadow_share` of calls): the original runs and is served;
   the trial runs on the same inputs, inside its region, and is compared with the recorded
   tolerance; more than `max_mismatches` mismatches demote it in the registry;
3. a trial version in `canary`: `canary_share` of its in-region calls are served by it;
4. the default version, when the call is inside its region; otherwise the original, counted
   under the reason (shape, dtype, device, layout, arguments, value, fingerprint, module,
   state, autograd, error).

A kernel that raises is counted under "error" and the call falls back to the original.
Counters are per kernel name (all modules patched with it), in `Coverage`.
"""
from __future__ import annotations

import random
from typing import Any, Callable

import torch

from kernelevolve.registry.bound import Bound

MAX_KEPT = 5  # first mismatches and errors kept with their shapes


class Coverage:
    """Live counters of one kernel name."""

    def __init__(self, name: str):
        self.name = name
        self.calls = 0
        self.served: dict[int, int] = {}        # by version
        self.canary_served = 0
        self.fallbacks: dict[str, int] = {}
        self.shadow_calls = 0
        self.shadow_mismatches = 0
        self.mismatches: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.saved_ms = 0.0

    def to_dict(self) -> dict[str, Any]:
        served = sum(self.served.values())
        return {"calls": self.calls, "served": served,
                "served_by_version": {str(k): v for k, v in sorted(self.served.items())},
                "canary_served": self.canary_served,
                "fallbacks": dict(sorted(self.fallbacks.items())),
                "fallback_share": (sum(self.fallbacks.values()) / self.calls
                                   if self.calls else 0.0),
                "shadow": {"calls": self.shadow_calls, "mismatches": self.shadow_mismatches,
                           "first": list(self.mismatches)},
                "errors": list(self.errors), "time_saved_ms": round(self.saved_ms, 6)}


def _shapes(args: tuple) -> list[Any]:
    return [list(a.shape) if hasattr(a, "shape") else a for a in args]


def _flat(value: Any) -> list[Any]:
    from kernelevolve.harness.worker.session import flatten_outputs

    return flatten_outputs(value, "forward")


class Dispatcher:
    def __init__(self, module: Any, name: str, path: str, session: Any):
        self.module, self.name, self.path, self.session = module, name, path, session
        self.original: Callable[..., Any] = type(module).forward.__get__(module)
        self.coverage: Coverage = session.coverage_of(name)
        self.default: Bound | None = None
        self.trial: Bound | None = None
        self.rng = random.Random(session.options.seed)
        self._params = list(module.parameters())

    # ---- the call ------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return self._traced(args, kwargs)
        cov = self.coverage
        cov.calls += 1
        self.session.maybe_refresh()
        if kwargs:
            return self._fallback("arguments", args, kwargs)
        if self._wants_grad(args):
            return self._fallback("autograd", args)
        trial = self.trial
        if trial is not None and trial.refusal is None:
            opts = self.session.options
            if trial.state == "shadow":
                if self.rng.random() < opts.shadow_share:
                    return self._shadow(trial, args)
            elif trial.state == "canary" and self.rng.random() < opts.canary_share \
                    and trial.why_not(args) is None:
                cov.canary_served += 1
                return self._serve(trial, args)
        default = self.default
        if default is None:
            return self._fallback("state", args)
        reason = default.why_not(args)
        if reason is not None:
            return self._fallback(reason, args)
        return self._serve(default, args)

    def _traced(self, args: tuple, kwargs: dict) -> Any:
        """Under torch.compile: the default version's custom op when the call (its traced
        shapes) is inside the region, else the original, traced as usual. Not counted."""
        d = self.default
        if kwargs or d is None or d.op is None or d.why_not(args) is not None:
            return self.original(*args, **kwargs)
        out = d.op(*args)
        return tuple(out) if isinstance(out, list) else out

    def _wants_grad(self, args: tuple) -> bool:
        if not torch.is_grad_enabled():
            return False
        return any(p.requires_grad for p in self._params) or any(
            getattr(a, "requires_grad", False) for a in args)

    def _fallback(self, reason: str, args: tuple, kwargs: dict | None = None) -> Any:
        fb = self.coverage.fallbacks
        fb[reason] = fb.get(reason, 0) + 1
        return self.original(*args, **(kwargs or {}))

    def _serve(self, bound: Bound, args: tuple) -> Any:
        try:
            out = bound.call(*args)
        except Exception as exc:  # noqa: BLE001 - counted; the original answers instead
            if len(self.coverage.errors) < MAX_KEPT:
                self.coverage.errors.append({"version": bound.record.version,
                                             "shapes": _shapes(args),
                                             "error": f"{type(exc).__name__}: {exc}"[:300]})
            return self._fallback("error", args)
        served = self.coverage.served
        served[bound.record.version] = served.get(bound.record.version, 0) + 1
        self.coverage.saved_ms += bound.saved_ms(args)
        return out

    def _shadow(self, trial: Bound, args: tuple) -> Any:
        from kernelevolve.harness.gates.compare import compare_outputs

        cov = self.coverage
        ref = self.original(*args)
        if trial.why_not(args) is not None:
            return ref
        cov.shadow_calls += 1
        try:
            verdict = compare_outputs(_flat(ref), _flat(trial.call(*args)),
                                      trial.record.entry.get("tolerance"))
            ok, why = verdict.ok, verdict.reason
        except Exception as exc:  # noqa: BLE001 - a raising kernel is a mismatch too
            ok, why = False, f"raised {type(exc).__name__}: {exc}"
        if not ok:
            cov.shadow_mismatches += 1
            if len(cov.mismatches) < MAX_KEPT:
                cov.mismatches.append({"version": trial.record.version, "shapes": _shapes(args),
                                       "reason": str(why).splitlines()[0][:300]})
            if cov.shadow_mismatches > self.session.options.max_mismatches:
                self.session.demote(self, trial, cov)
        return ref

    # ---- states --------------------------------------------------------------------------

    def install(self) -> None:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return self(*args, **kwargs)

        forward.__kernelevolve_dispatcher__ = self  # type: ignore[attr-defined]
        self.module.forward = forward

    def uninstall(self) -> None:
        fwd = self.module.__dict__.get("forward")
        if getattr(fwd, "__kernelevolve_dispatcher__", None) is self:
            del self.module.forward

    def describe(self) -> dict[str, Any]:
        def one(b: Bound | None) -> Any:
            if b is None:
                return None
            return {"version": b.record.version, "state": b.state,
                    "refused": None if b.refusal is None else f"{b.refusal[0]}: {b.refusal[1]}"}

        return {"path": self.path, "name": self.name, "default": one(self.default),
                "trial": one(self.trial)}
