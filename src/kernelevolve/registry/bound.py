"""One registered version made ready to serve one module: loaded, bound, checked once.

`bind` does every check that does not depend on the call (the machine's fingerprint, the
module's init inputs and weights, the artifacts' hashes through the loader) and leaves
`Bound.why_not(args)` with only the per-call region test. A version that cannot serve this
module is still a `Bound`, with `refusal` set to (reason class, one line): every call then
falls back, counted under that reason.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

from kernelevolve.registry.db import KernelRecord, Registry, RegistryError
from kernelevolve.registry.region import Region


@dataclass
class Bound:
    record: KernelRecord
    region: Region
    kernel: Any = None                      # the ModelNew instance sharing the original's weights
    call: Callable[..., Any] | None = None  # kernel forward (through the library service if lazy)
    refusal: tuple[str, str] | None = None  # (reason class, why) when it cannot serve at all
    op: Any = None                          # its torch.library op (custom_op.py), if any
    _saved: dict[tuple, float] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return self.record.state

    def why_not(self, args: tuple) -> str | None:
        if self.refusal is not None:
            return self.refusal[0]
        return self.region.admits(args)

    def saved_ms(self, args: tuple) -> float:
        """Eager minus kernel ms of the validated case nearest this call in size (log of the
        inputs' element count), as measured at promotion: the estimate `coverage` sums."""
        key = tuple(tuple(a.shape) if hasattr(a, "shape") else a for a in args)
        if key not in self._saved:
            self._saved[key] = _nearest_saving(self.record.entry, args)
        return self._saved[key]


def _numel(args: tuple) -> int:
    return sum(int(a.numel()) for a in args if hasattr(a, "numel"))


def _nearest_saving(entry: dict[str, Any], args: tuple) -> float:
    timed = [c for c in entry.get("evaluation", {}).get("cases", [])
             if c.get("ref_ms") and c.get("cand_ms") and not c.get("held_out")]
    if not timed:
        return 0.0
    sizes = {b["case"]: b.get("numel") for b in entry.get("binding", [])}
    n = max(1, _numel(args))
    best = min(timed, key=lambda c: abs(math.log(max(1, sizes.get(c["name"]) or n) / n)))
    return float(best["ref_ms"]) - float(best["cand_ms"])


def bind(registry: Registry, record: KernelRecord, original: Any,
         init_inputs: list[Any] | None = None, custom_op: bool = True) -> Bound:
    from kernelevolve.registry import binding
    from kernelevolve.registry.compat import current_fingerprint, mismatch
    from kernelevolve.registry.loader import load_kernel

    entry = record.entry
    bound = Bound(record=record, region=Region(entry["region"]))
    why = mismatch(entry.get("fingerprint", {}), current_fingerprint(record.platform),
                   record.language)
    if why is not None:
        bound.refusal = ("fingerprint", why)
        return bound
    loaded = load_kernel(registry, record)  # RegistryError on a tampered artifact: not caught
    init = init_inputs
    if init is None:
        cases = [c for c in entry.get("binding", []) if c.get("signature")]
        init, why = binding.infer_init(_problem_model(registry, record), cases,
                                       binding.signature(original))
        if init is None:
            bound.refusal = ("module", f"{original.__class__.__name__} is not the validated "
                                       f"module: {why}")
            return bound
    kernel, why = _build(loaded, record, init, original)
    if why is not None:
        bound.refusal = ("module", why)
        return bound
    kernel.train(original.training)
    bound.kernel = kernel
    if loaded.lazy:
        def call(*args: Any) -> Any:
            with loaded.serving():
                return kernel(*args)
        bound.call = call
    else:
        bound.call = kernel
    if custom_op:
        from kernelevolve.registry.custom_op import register

        bound.op = register(bound, original)
    return bound


def _build(loaded: Any, record: KernelRecord, init: list[Any], original: Any
           ) -> tuple[Any, str | None]:
    """ModelNew(*init) sharing the original's weights. Built on the meta device first (its
    own weights are replaced anyway: a 20000 x 64 table need not be filled to be thrown away);
    built for real when a tensor it keeps outside its parameters and buffers would stay on
    meta."""
    import torch

    from kernelevolve.registry import binding

    for device in ("meta", None):
        try:
            with loaded.serving(), (torch.device(device) if device else nullcontext()):
                kernel = loaded.model_class(*init)
        except Exception as exc:  # noqa: BLE001 - the kernel's constructor is its own code
            if device == "meta":
                continue
            raise RegistryError(f"{record.label}: ModelNew({init}) raised "
                                f"{type(exc).__name__}: {str(exc)[:200]}") from None
        why = binding.tie_state(kernel, original)
        if why is not None or device is None or not _keeps_meta(kernel):
            return kernel, why
    raise AssertionError("unreachable")


def _keeps_meta(module: Any) -> bool:
    import torch

    for sub in module.modules():
        for value in list(vars(sub).values()) + list(sub._parameters.values()) + \
                list(sub._buffers.values()):
            if isinstance(value, torch.Tensor) and value.is_meta:
                return True
    return False


def _problem_model(registry: Registry, record: KernelRecord) -> type:
    """The problem's `Model` class, from the registry's verified copy of the problem."""
    import types

    from kernelevolve.registry.loader import verified_bytes

    prob = record.entry["problem"]
    code = verified_bytes(registry, prob["object"], prob["sha256"],
                          f"{record.label}: problem source")
    module = types.ModuleType(f"kernelevolve_registry_problem_{record.name}")
    exec(compile(code, f"<problem of {record.label}>", "exec"), module.__dict__)  # noqa: S102
    return module.Model
