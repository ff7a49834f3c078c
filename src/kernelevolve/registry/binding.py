"""Build a registered kernel's `ModelNew` for one module of the user's model, sharing its weights.

A problem's `Model(*init_inputs)` is the module the kernel was validated against, and the
kernel may have frozen what the constructor decided (a hidden size, an `eps`) into its code.
So a user's module gets the kernel only when it is what `Model` builds from some init inputs:

1. its signature (parameter and buffer names, shapes and dtypes, and the plain attributes of
   each submodule: ints, floats, bools, strings) equals a validated case's, or
2. init inputs that vary between cases can be read off it (an init input that equals the same
   parameter dim or attribute in every case, e.g. `dim` = `weight.shape[0]`), the constant
   ones are kept, and `Model` built from them on the meta device has its signature.

Anything else is not patched, with the first difference as the reason. The kernel's module is
then built from those inputs and its parameters and buffers are replaced by the user's own
tensor objects (same storage, so in-place weight updates are seen); a kernel whose state has a
name the original lacks is refused (it would compute with weights of its own).
"""
from __future__ import annotations

from typing import Any, Sequence

_PLAIN = (bool, int, float, str, type(None))


def signature(module: Any) -> dict[str, Any]:
    """{"state": {name: [shape, dtype]}, "attrs": {path: value}} of an nn.Module."""
    state = {}
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        state[name] = [list(t.shape), str(t.dtype)[6:]]
    attrs = {}
    for path, sub in module.named_modules():
        for key, value in vars(sub).items():
            if key.startswith("_") or key == "training" or not isinstance(value, _PLAIN):
                continue
            attrs[f"{path}.{key}" if path else key] = value
    return {"state": state, "attrs": attrs}


def case_signature(model_cls: type, init: Sequence[Any]) -> dict[str, Any]:
    """The signature of `model_cls(*init)`, built on the meta device (no memory, no data)."""
    import torch

    with torch.device("meta"):
        return signature(model_cls(*init))


def difference(want: dict[str, Any], have: dict[str, Any]) -> str | None:
    for name, spec in want["state"].items():
        if name not in have["state"]:
            return f"it has no {name} (the validated module does)"
        if have["state"][name] != spec:
            return f"its {name} is {have['state'][name]}, validated {spec}"
    for name in have["state"]:
        if name not in want["state"]:
            return f"it has {name}, which the validated module does not"
    for key, value in want["attrs"].items():
        if have["attrs"].get(key, object()) != value:
            return f"its {key} is {have['attrs'].get(key)!r}, validated {value!r}"
    return None


def _locate(sig: dict[str, Any], value: int) -> set[str]:
    found = {f"attr:{k}" for k, v in sig["attrs"].items() if type(v) is int and v == value}
    for name, (shape, _) in sig["state"].items():
        found |= {f"state:{name}:{d}" for d, size in enumerate(shape) if size == value}
    return found


def _read(sig: dict[str, Any], where: str) -> Any:
    kind, _, rest = where.partition(":")
    if kind == "attr":
        return sig["attrs"].get(rest)
    name, _, dim = rest.rpartition(":")
    shape = sig["state"].get(name, [[]])[0]
    return shape[int(dim)] if int(dim) < len(shape) else None


def infer_init(model_cls: type, cases: list[dict[str, Any]], user: dict[str, Any]
               ) -> tuple[list[Any] | None, str]:
    """(init inputs, "") that make `model_cls` build the user's module, or (None, why not).
    `cases`: [{"init": [...], "signature": {...}}] recorded at promotion."""
    if not cases:
        return None, "the kernel's promotion recorded no init inputs"
    first_diff = ""
    for case in cases:
        diff = difference(case["signature"], user)
        if diff is None:
            return list(case["init"]), ""
        first_diff = first_diff or diff
    inits = [c["init"] for c in cases]
    init = list(inits[0])
    for i, value in enumerate(init):
        column = [c[i] if i < len(c) else None for c in inits]
        if all(v == value for v in column):
            continue
        if not all(type(v) is int for v in column):
            return None, f"init input {i} varies between cases and is not an int; {first_diff}"
        places = set.intersection(*(_locate(c["signature"], v) for c, v in zip(cases, column)))
        readings = {_read(user, where) for where in places}
        readings.discard(None)
        if len(readings) != 1:
            return None, first_diff
        init[i] = readings.pop()
    try:
        built = case_signature(model_cls, init)
    except Exception as exc:  # noqa: BLE001 - the problem's constructor refused these inputs
        return None, f"{first_diff} (Model({init}) raised {type(exc).__name__})"
    diff = difference(built, user)
    return (init, "") if diff is None else (None, diff)


def tie_state(kernel: Any, original: Any) -> str | None:
    """Point the kernel module's parameters and buffers at the original's tensors; None when
    done, else why not (the kernel has state the original lacks, or of another shape)."""
    theirs = dict(original.named_parameters())
    theirs.update(dict(original.named_buffers()))
    for name, tensor in list(kernel.named_parameters()) + list(kernel.named_buffers()):
        other = theirs.get(name)
        if other is None:
            return f"the kernel has {name}, which the original module lacks"
        if tuple(other.shape) != tuple(tensor.shape) or other.dtype != tensor.dtype:
            return f"the kernel's {name} is {list(tensor.shape)}, the original's " \
                   f"{list(other.shape)}"
        owner_path, _, leaf = name.rpartition(".")
        owner = kernel.get_submodule(owner_path) if owner_path else kernel
        if leaf in owner._parameters:
            owner._parameters[leaf] = other
        else:
            owner._buffers[leaf] = other
    return None
