"""Hot spots of a profiled model -> ordinary problem files, one per region kind.

Each region kind (regions with equal code and constructor inputs: the 16 embedding bags of a
recommendation model are one kind) becomes a KernelBench-format problem: the region's `Model`
class (graph.py / codegen.py wrote it from the model's own ops), size globals for its inputs'
dims (dims equal in every observed call share one global), `CASES` from the observed input
shapes with weights from calls x time, and an odd held-out case, and `get_inputs()` drawing
values like the recorded ones (floats: their mean and spread; integers: their range; flags:
their rate of True). Every file is checked before it is kept: built and loaded with the
model's own weights, it must give the region's outputs exactly on the recorded inputs, and its
`get_inputs()` must produce the recorded shapes. What fails is listed with the reason.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class Call:
    """One distinct input signature of a region kind: an example of its inputs and how
    often it is called per forward in each workload case."""
    args: list[Any]
    calls: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def record_calls(module: Any, paths: Sequence[str], cases: Sequence[tuple[str, float, Any]]
                 ) -> dict[str, dict[str, Call]]:
    """{path: {signature: Call}} for the named submodules: one untimed forward per case,
    each distinct signature's first arguments kept (cloned)."""
    import torch

    from kernelevolve.model.profile import signature_of

    mods = dict(module.named_modules())
    out: dict[str, dict[str, Call]] = {p: {} for p in paths}
    state = {"case": ""}

    def hook(path: str):
        def pre(_m: Any, args: tuple) -> None:
            sig = signature_of(args)
            call = out[path].get(sig)
            if call is None:
                call = out[path][sig] = Call([a.detach().clone() if isinstance(a, torch.Tensor)
                                              else a for a in args])
            call.calls[state["case"]] += 1
        return pre

    handles = [mods[p].register_forward_pre_hook(hook(p)) for p in paths]
    try:
        with torch.inference_mode():
            for name, _w, make in cases:
                state["case"] = name
                module(*make())
    finally:
        for h in handles:
            h.remove()
    return out


@dataclass
class HotSpot:
    kind: str
    label: str
    instances: list[str]
    spec: Any                        # the first instance's RegionSpec
    calls: float                     # calls per weighted forward
    excl_ms: float
    share: float
    amdahl_2x: float
    amdahl_free: float | None
    problem: str | None = None
    name: str | None = None
    weights: dict[str, float] = field(default_factory=dict)
    held_out: str | None = None      # the held-out case's shape, or why there is none
    error: str | None = None         # why it could not be extracted

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "instances": self.instances,
                "ops": list(getattr(self.spec, "ops", [])), "calls": self.calls,
                "excl_ms": self.excl_ms, "share": self.share, "amdahl_2x": self.amdahl_2x,
                "amdahl_free": self.amdahl_free, "problem": self.problem, "name": self.name,
                "case_weights": self.weights, "held_out": self.held_out, "error": self.error}


def hot_spots(outlined: Any, prof: dict[str, Any]) -> list[HotSpot]:
    """Region kinds ranked by their exclusive share of the workload's time."""
    by_path = {spec.name: spec for spec in outlined.regions}
    kinds: dict[str, HotSpot] = {}
    for inst in prof["instances"]:
        spec = by_path.get(inst["path"])
        if spec is None:
            continue
        hs = kinds.get(spec.kind)
        if hs is None:
            hs = kinds[spec.kind] = HotSpot(spec.kind, spec.label, [], spec, 0.0, 0.0, 0.0,
                                            1.0, 1.0)
        hs.instances.append(inst["path"])
        hs.calls += inst["calls"]
        hs.excl_ms += inst["incl_ms"]  # a region module has no hooked children
    total = prof["hooked_total_ms"] or 1.0
    for hs in kinds.values():
        hs.share = hs.excl_ms / total
        s = min(hs.share, 0.999999)
        hs.amdahl_2x, hs.amdahl_free = 1.0 / (1.0 - s / 2.0), 1.0 / (1.0 - s)
    return sorted(kinds.values(), key=lambda h: -h.excl_ms)


def _ident(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower() or "region"


def _num(x: float) -> str:
    return f"{float(f'{x:.4g}')!r}"


def _dtype(t: Any) -> str:
    return str(t.dtype)  # torch.float32


def _value_expr(t: Any, shape: str) -> str:
    """How get_inputs draws a tensor like `t` (one recorded example)."""
    import torch

    dtype = _dtype(t)
    if t.dtype == torch.bool:
        rate = float(t.float().mean()) if t.numel() else 0.5
        return f"torch.rand({shape}) < {_num(rate)}"
    if not t.dtype.is_floating_point and not t.dtype.is_complex:
        lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 1)
        return f"torch.randint({lo}, {hi + 1}, {shape}, dtype={dtype})"
    f = t.detach().double()
    mean = float(f.mean()) if t.numel() else 0.0
    std = float(f.std()) if t.numel() > 1 else 0.0
    if not (math.isfinite(mean) and math.isfinite(std)):
        mean, std = 0.0, 1.0
    if std == 0.0:
        return f"torch.full({shape}, {_num(mean)}, dtype={dtype})"
    return f"torch.randn({shape}, dtype={dtype}) * {_num(std)} + {_num(mean)}"


def _size_globals(calls: list[Call]) -> tuple[list[str], list[list[list[str]]]]:
    """Global names for every tensor dim: dims with the same values in every call share one.
    Returns (names in order, per-arg list of per-dim names) (a non-tensor arg: [])."""
    import torch

    first = calls[0].args
    classes: dict[tuple[int, ...], str] = {}
    names: list[str] = []
    per_arg: list[list[str]] = []
    for i, a in enumerate(first):
        if not isinstance(a, torch.Tensor):
            per_arg.append([])
            continue
        dims = []
        for d in range(a.dim()):
            values = tuple(int(c.args[i].shape[d]) for c in calls)
            if values not in classes:
                classes[values] = f"S{len(names)}"
                names.append(classes[values])
            dims.append(classes[values])
        per_arg.append(dims)
    return names, per_arg


def _dims(examples: list[Call]) -> tuple[list[str], list[list[str]], dict[str, int], list[str]]:
    """(size global names, per-arg dim names, each global's value in the first call, the
    globals whose value differs between calls)."""
    names, per_arg = _size_globals(examples)
    first = examples[0].args
    values = {n: int(first[i].shape[d]) for i, dims in enumerate(per_arg)
              for d, n in enumerate(dims)}
    varying = [n for n in names if len({int(c.args[i].shape[d]) for c in examples
                                        for i, dims in enumerate(per_arg)
                                        for d, m in enumerate(dims) if m == n}) > 1]
    return names, per_arg, values, varying


def case_weights(hs: HotSpot, prof: dict[str, Any], records: dict[str, dict[str, Call]],
                 cases: Sequence[tuple[str, float]]) -> dict[str, float]:
    """{signature: weight}: over workload cases (by their weights), the calls per forward
    with that signature times the instance's mean time per call in that case; normalised
    to sum to 1."""
    total_w = sum(w for _, w in cases if w > 0) or 1.0
    insts = {i["path"]: i for i in prof["instances"]}
    out: dict[str, float] = defaultdict(float)
    for path in hs.instances:
        by_case = insts.get(path, {}).get("by_case", {})
        for sig, call in records.get(path, {}).items():
            for case, w in cases:
                stats = by_case.get(case)
                if w <= 0 or not stats or not stats["calls"]:
                    continue
                per_call = stats["incl_ms"] / stats["calls"]
                out[sig] += w / total_w * call.calls.get(case, 0.0) * per_call
    s = sum(out.values())
    if s <= 0:  # no timing (a region never called in a timed case): by calls alone
        out = defaultdict(float, {sig: sum(c.calls.values()) for p in hs.instances
                                  for sig, c in records.get(p, {}).items()})
        s = sum(out.values()) or 1.0
    return {sig: max(float(f"{v / s:.4g}"), 1e-4) for sig, v in out.items()}


def render_problem(hs: HotSpot, calls: list[tuple[str, Call, float]], origin: str,
                   held_out: dict[str, int] | None) -> str:
    """The problem file's text. `calls`: (signature, example, weight), heaviest first."""
    import torch

    examples = [c for _, c, _ in calls]
    names, per_arg, values, varying = _dims(examples)
    first = examples[0].args
    inputs = []
    for i, a in enumerate(first):
        if isinstance(a, torch.Tensor):
            shape = "(" + "".join(f"{n}, " for n in per_arg[i]) + ")"
            inputs.append(_value_expr(a, shape))
        else:
            if any(c.args[i] != a for c in examples):
                raise ValueError(f"argument {i} is a {type(a).__name__} that varies between "
                                 "calls; a problem's inputs are tensors")
            inputs.append(repr(a))
    lines = [f'"""{hs.label}: a hot region of {origin}, extracted by kernelevolve.', "",
             f"Instances in the model: {', '.join(hs.instances)}.",
             f"Ops: {', '.join(getattr(hs.spec, 'ops', []))}.",
             f"Share of the workload's time: {hs.share:.1%} (profiled in eager PyTorch).",
             "CASES are the observed input shapes, weighted by calls x time; the held-out case",
             "is an odd shape the workload did not show, checked but never timed.", '"""',
             hs.spec.source.strip(), ""]
    for n in names:
        dims = [f"input {i} dim {d}" for i, ds in enumerate(per_arg) for d, m in enumerate(ds)
                if m == n]
        lines.append(f"{n} = {values[n]}  # {', '.join(dims)}"
                     + ("" if n in varying else " (the same in every call)"))
    lines.append("")
    lines.append("CASES = [")
    for k, (_sig, call, weight) in enumerate(calls):
        binds = {n: int(call.args[i].shape[d]) for i, dims in enumerate(per_arg)
                 for d, n in enumerate(dims) if n in varying}
        label = "x".join(str(v) for v in binds.values()) or "fixed"
        entry = {"name": f"c{k}_{label}", "weight": weight, **binds}
        lines.append(f"    {entry!r},")
    if held_out:
        lines.append(f"    {({'name': 'held_out_odd', 'held_out': True, **held_out})!r},")
    lines.append("]")
    lines += ["", "", "def get_inputs():", "    return ["]
    lines += [f"        {expr}," for expr in inputs]
    lines += ["    ]", "", "", "def get_init_inputs():",
              f"    return {list(getattr(hs.spec, 'init_args', []))!r}", ""]
    return "\n".join(lines)


def held_out_case(calls: list[Call]) -> list[dict[str, int]]:
    """Candidate odd shapes to try, best first: each even varying size >= 8 of the heaviest
    call made odd (n - 1); failing that, each single even size >= 8 made odd."""
    names, _per_arg, value, varying = _dims(calls)
    tries = []
    odd = {n: value[n] - 1 for n in varying if value[n] >= 8 and value[n] % 2 == 0}
    if odd:
        tries.append(odd)
    for n in names:
        if value[n] >= 8 and value[n] % 2 == 0 and {n: value[n] - 1} not in tries:
            tries.append({n: value[n] - 1})
    return tries
