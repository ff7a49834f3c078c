"""The ATen suite: the table's rows expanded into probes, and each probe written as a problem.

`probes()` expands aten_table.ROWS (one probe per dim of a reduction family and per integer
dtype); `select()` keeps those matching `--probes` patterns; `write_suite()` writes one
KernelBench-format file per probe for a size profile. A problem has three cases: "normal"
(weight 1), "second" (another size, odd where it can be, so the harness need not derive a
held-out shape) and "edge" (the normal size with EDGE = 1: get_inputs plants the probe's edge
values into fixed rows, aten_edges.py). Generation is deterministic: the same table and
profile give the same bytes, and a file is rewritten only when its text changes.
"""
from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from pathlib import Path

from kernelevolve.bench.aten_edges import DOMAINS, SHAPES, plants
from kernelevolve.bench.aten_table import ROWS
from kernelevolve.errors import UsageError

# (A, B, C) of the normal and the edge case, then of the second case. C++ on CPU is timed on
# suite-like shapes (large: 1M elements); the Triton interpreter needs small ones.
PROFILES = {
    "small": ((4, 16, 64), (3, 12, 33)),
    "medium": ((8, 32, 128), (5, 24, 99)),
    "large": ((16, 256, 256), (7, 96, 257)),
}
NAMES = "xyzwv"
_DIMS = {"0": ("_d0", "0", ""), "1": ("_d1", "1", ""), "-1": ("_dlast", "-1", ""),
         "all": ("_all", None, ""), "keep": ("_keep", "-1", ", keepdim=True")}


@dataclass(frozen=True)
class Probe:
    name: str
    op: str
    expr: str
    inputs: tuple[tuple[str, str, str], ...]   # (domain, shape, dtype) per input
    edges: str
    tol: dict | None = None
    finite: bool = False                        # the edge case's output is finite by design

    @property
    def float_special(self) -> bool:
        return any(t.split("@")[0] in ("special", "specialpos") for t in self.edges.split())


def _inputs(spec: str, dtype: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for token in spec.split():
        domain, _, shape = token.partition("@")
        kind = DOMAINS[domain][0]
        dt = {"float": "float32", "bool": "bool"}.get(kind) or (
            dtype if dtype in ("int64", "int32") else "int64")
        out.append((domain, shape or "full", dt))
    return tuple(out)


def probes() -> list[Probe]:
    """Every probe of the table, in table order; a repeated name is an error of the table."""
    out: list[Probe] = []
    for row in ROWS:
        name, op, expr, ins, dtypes, edges, *rest = row
        extra = rest[0] if rest else {}
        types = dtypes.split()
        for dt in types:
            dt_suffix = {"int64": "_i64", "int32": "_i32"}[dt] if len(types) > 1 else ""
            for dim in (extra.get("dims", "").split() or [None]):
                suffix, text = "", expr
                if dim is not None:
                    suffix, d, keep = _DIMS[dim]
                    dim_arg = "" if d is None else f", dim={d}{keep}"
                    if d is None and "{d}" in expr:
                        raise ValueError(f"{name}: 'all' needs {{dim}}, not {{d}}")
                    text = expr.format(dim=dim_arg, d=d, keep=keep)
                out.append(Probe(name=name + dt_suffix + suffix, op=op, expr=text,
                                 inputs=_inputs(ins, dt), edges=edges, tol=extra.get("tol"),
                                 finite=bool(extra.get("finite"))))
    seen: set[str] = set()
    for p in out:
        if p.name in seen:
            raise ValueError(f"probe name {p.name} repeats in the table")
        seen.add(p.name)
    return out


def select(patterns: list[str] | None) -> list[Probe]:
    """The probes whose name or operator matches one of the (glob) patterns; all without any.
    A pattern that matches nothing is a one-line UsageError."""
    every = probes()
    if not patterns:
        return every
    wanted = [p.strip() for raw in patterns for p in raw.split(",") if p.strip()]
    for pat in wanted:
        if not any(fnmatch.fnmatchcase(p.name, pat) or fnmatch.fnmatchcase(p.op, pat)
                   for p in every):
            raise UsageError(f"--probes {pat!r}: no probe or operator of the aten suite matches "
                             f"it ({len(every)} probes, e.g. exp, sum_d0, 'softmax*'; the table "
                             "is kernelevolve/bench/aten_table.py)")
    return [p for p in every if any(fnmatch.fnmatchcase(p.name, pat)
                                    or fnmatch.fnmatchcase(p.op, pat) for pat in wanted)]


def selection_tag(chosen: list[Probe]) -> str:
    """'' for the whole suite, else a short hash of the chosen names (for campaign names)."""
    if len(chosen) == len(probes()):
        return ""
    return hashlib.sha256("\n".join(p.name for p in chosen).encode()).hexdigest()[:8]


def _literal(value) -> str:
    if isinstance(value, float):
        if value != value:
            return "_NAN"
        if value in (float("inf"), float("-inf")):
            return "_INF" if value > 0 else "-_INF"
    return repr(value)


def _tuple(values: tuple) -> str:
    inner = ", ".join(_literal(v) for v in values)
    return f"({inner},)" if len(values) == 1 else f"({inner})"


# One probe's problem file (str.format fields; doubled braces are literal).
PROBLEM = '''"""ATen probe {probe.name}: `{probe.expr}` (operator {probe.op}; {doms}).

Generated by `kernelevolve bench --suite aten` (profile {profile}) from the table in
kernelevolve/bench/aten_table.py; do not edit. The "edge" case (EDGE = 1) also plants the edge
sets {probe.edges!r} into fixed rows of the inputs (kernelevolve/bench/aten_edges.py).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

A = {a}
B = {b}
C = {c}
EDGE = 0
CASES = [
    {{"name": "normal", "weight": 1.0}},
    {{"name": "second", "weight": 1.0, "A": {a2}, "B": {b2}, "C": {c2}}},
    {{"name": "edge", "weight": 1.0, "EDGE": 1}},
]
{tol}_NAN = float("nan")
_INF = float("inf")
# (input, row, start, step, values): in the input viewed as (rows, last dim), that row's
# columns start::step get the values, tiled
_PLANT = [
{plant_lines}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {probe.expr}


def get_inputs():
{draws}    if EDGE:
        _plant([{args}])
    return [{args}]


def _plant(tensors):
    for i, row, start, step, values in _PLANT:
        view = tensors[i].view(-1, tensors[i].shape[-1])
        cells = view[row % view.shape[0], start::step]
        fill = torch.tensor(values, dtype=view.dtype)
        cells.copy_(fill.repeat(cells.numel() // fill.numel() + 1)[:cells.numel()])


def get_init_inputs():
    return []
'''


def render(probe: Probe, profile: str) -> str:
    """The problem file of one probe for one size profile."""
    (a, b, c), (a2, b2, c2) = PROFILES[profile]
    names = NAMES[:len(probe.inputs)]
    plant = plants(probe.edges, list(probe.inputs))
    plant_lines = "".join(
        f"    ({i}, {r}, {s}, {st}, {_tuple(vals)}),\n"
        for i, r, s, st, vals in plant)
    draws = "".join(
        f"    {n} = {DOMAINS[dom][1].format(s=SHAPES[shape], dt='torch.' + dt)}\n"
        for n, (dom, shape, dt) in zip(names, probe.inputs))
    doms = ", ".join(f"{n}: {dom}" + (f" ({shape})" if shape != "full" else "")
                     + (f" {dt}" if dt != "float32" else "")
                     for n, (dom, shape, dt) in zip(names, probe.inputs))
    tol = f"TOLERANCE = {probe.tol!r}\n" if probe.tol else ""
    args = ", ".join(names)
    return PROBLEM.format(probe=probe, profile=profile, doms=doms, a=a, b=b, c=c, a2=a2,
                          b2=b2, c2=c2, tol=tol, plant_lines=plant_lines, args=args,
                          draws=draws)


def write_suite(folder: Path, profile: str, chosen: list[Probe]) -> list[Path]:
    """Write (or keep, when unchanged) one problem file per chosen probe; their paths."""
    if profile not in PROFILES:
        raise UsageError(f"--profile {profile!r}: choose one of {', '.join(PROFILES)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for probe in chosen:
        path = folder / f"{probe.name}.py"
        text = render(probe, profile)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        paths.append(path.resolve())
    return paths


def ops_of(chosen: list[Probe]) -> dict[str, str]:
    """Probe name -> operator."""
    return {p.name: p.op for p in chosen}
