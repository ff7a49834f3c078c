"""A bound kernel as a `torch.library` custom op, so `torch.compile` keeps it as one opaque op.

Without it, Dynamo would try to trace into the kernel's Python (ctypes calls, raw pointers)
and break the graph there. The op `kernelevolve::<name>_v<version>_m<k>` (k: which patched
module, since each closes over its own weights) takes the call's positional arguments as
declared by the validated region (Tensor, int, float, bool) and returns a Tensor or a Tensor[].
Its fake (meta) implementation runs the original module on meta tensors, so shapes and dtypes
come from the reference, never from the kernel. A kernel whose arguments do not fit a schema
gets no op; under compilation its calls then run the original module.
"""
from __future__ import annotations

import itertools
import re
from typing import Any

_counter = itertools.count()
_libs: list[Any] = []  # torch.library.Library objects must outlive their ops


def _schema_types(region: dict[str, Any]) -> list[str] | None:
    types = []
    for arg in region.get("args", []):
        if arg["kind"] == "tensor":
            types.append("Tensor")
            continue
        kinds = {type(v) for v in arg["values"]}
        if len(kinds) != 1 or kinds.pop() not in (int, float, bool):
            return None
        types.append({int: "int", float: "float", bool: "bool"}[type(arg["values"][0])])
    return types


def _meta_outputs(original: Any, args: tuple) -> list[Any]:
    import torch
    from torch.func import functional_call

    state = {k: torch.empty(v.shape, dtype=v.dtype, device="meta")
             for k, v in [*original.named_parameters(), *original.named_buffers()]}
    meta = tuple(torch.empty(a.shape, dtype=a.dtype, device="meta")
                 if isinstance(a, torch.Tensor) else a for a in args)
    with torch.no_grad():
        out = functional_call(original, state, meta)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def register(bound: Any, original: Any) -> Any | None:
    """Register `bound` (a Bound with a kernel) as a custom op; the op, or None if it cannot."""
    import torch

    region = bound.record.entry["region"]
    types = _schema_types(region)
    shapes = (region.get("shapes") or [None])[0]
    if types is None or shapes is None:
        return None
    example = tuple(torch.empty(s, device="meta") if s is not None else a["values"][0]
                    for s, a in zip(shapes, region["args"]))
    try:
        n_out = len(_meta_outputs(original, example))
    except Exception:  # noqa: BLE001 - the reference cannot run on meta tensors: no op
        return None
    stem = re.sub(r"[^A-Za-z0-9_]", "_", bound.record.name)
    op_name = f"{stem}_v{bound.record.version}_m{next(_counter)}"
    params = ", ".join(f"{t} a{i}" for i, t in enumerate(types))
    ret = "Tensor" if n_out == 1 else "Tensor[]"
    lib = torch.library.Library("kernelevolve", "FRAGMENT")
    lib.define(f"{op_name}({params}) -> {ret}")
    call = bound.call

    def impl(*args: Any) -> Any:
        out = call(*args)
        return out if n_out == 1 else list(out)

    def fake(*args: Any) -> Any:
        outs = _meta_outputs(original, args)
        first = next(a for a in args if isinstance(a, torch.Tensor))
        made = [first.new_empty(o.shape, dtype=o.dtype) for o in outs]
        return made[0] if n_out == 1 else made

    lib.impl(op_name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"kernelevolve::{op_name}", fake, lib=lib)
    _libs.append(lib)
    return getattr(torch.ops.kernelevolve, op_name)
