"""The forward lines around a solo kernel's launch (plan_solo.py), shared by both emitters:
the input made contiguous, its (outer, n, inner) geometry and the outputs allocated."""
from __future__ import annotations

from kernelevolve.synth.capture import Graph
from kernelevolve.synth.module import var
from kernelevolve.synth.plan_solo import SoloKernel


def solo_setup(k: SoloKernel, g: Graph, ref) -> tuple[list[str], str, list[str]]:
    """(lines, the contiguous input's name, the output tensors' names). The lines leave
    `{name}_outer`, `{name}_n` and `{name}_inner` set from the input's run-time shape."""
    x, s = f"{k.name}_in", f"{k.name}_shape"
    lines = [f"# kernel {k.name}: {k.label} (a kernel of its own)",
             f"{x} = {var(g, k.source, ref)}.contiguous()", f"{s} = {x}.shape"]
    if k.dim is None:
        lines += [f"{k.name}_outer, {k.name}_n, {k.name}_inner = 1, {x}.numel(), 1"]
    else:
        d = k.dim
        lines += [f"{k.name}_outer = {s}[:{d}].numel()",
                  f"{k.name}_n = {s}[{d}]", f"{k.name}_inner = {s}[{d + 1}:].numel()"]
    dtype = f"torch.{k.out_dtype}"
    if k.kind == "scan":
        shape = s
    elif k.dim is None:
        shape = f"(1,) * {len(k.shape)}" if k.keepdim else "()"
    elif k.keepdim:
        shape = f"{s}[:{k.dim}] + (1,) + {s}[{k.dim + 1}:]"
    else:
        shape = f"{s}[:{k.dim}] + {s}[{k.dim + 1}:]"
    out = f"{k.name}_out"
    lines.append(f"{out} = torch.empty({shape}, dtype={dtype}, device={x}.device)")
    outs = [out]
    if k.values is not None:
        lines.append(f"{var(g, k.values, ref)} = torch.empty({shape}, dtype=torch.{k.in_dtype}, "
                     f"device={x}.device)")
        outs.append(var(g, k.values, ref))
    if k.indices:
        lines.append(f"{k.name}_idx = torch.empty({shape}, dtype=torch.int64, device={x}.device)")
        outs.append(f"{k.name}_idx")
        lines.append(f"{var(g, k.out, ref)} = ({out}, {k.name}_idx)")
    else:
        lines.append(f"{var(g, k.out, ref)} = {out}")
    return lines, x, outs

