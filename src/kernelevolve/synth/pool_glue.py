"""The forward lines around a pool kernel's launch (plan_pool.py), shared by both emitters:
the input made contiguous, its (planes, D, H, W) sizes, the output sizes by torch's rules
and the outputs allocated."""
from __future__ import annotations

from kernelevolve.synth.capture import Graph
from kernelevolve.synth.module import var
from kernelevolve.synth.plan_pool import PoolKernel

DIMS = ("d", "h", "w")


def _out_size(k: PoolKernel, i: int, n: str) -> list[str]:
    """Lines setting output size `{k.name}_o{dim}` from input size `n` (torch's pooling
    output shape: floor or ceil of the strided count, a ceil window that would start in the
    right padding dropped)."""
    o = f"{k.name}_o{DIMS[i]}"
    if k.op == "adaptive":
        return [f"{o} = {k.out_size[i - (3 - k.nd)]}"]
    kk, s, p, d = k.kernel[i], k.stride[i], k.padding[i], k.dilation[i]
    extra = 2 * p - d * (kk - 1) - 1 + (s - 1 if k.ceil_mode else 0)
    lines = [f"{o} = ({n} + {extra}) // {s} + 1"]
    if k.ceil_mode:
        lines.append(f"{o} -= int(({o} - 1) * {s} >= {n} + {p})")
    return lines


def pool_setup(k: PoolKernel, g: Graph, ref) -> tuple[list[str], str, list[str]]:
    """(lines, the contiguous input's name, [values, indices or None]). The lines leave
    `{name}_planes`, `{name}_i{d,h,w}` and `{name}_o{d,h,w}` set from the run-time shape."""
    x, s, nd = f"{k.name}_in", f"{k.name}_shape", k.nd
    lines = [f"# kernel {k.name}: {k.label} (a kernel of its own)",
             f"{x} = {var(g, k.source, ref)}.contiguous()", f"{s} = {x}.shape",
             f"{k.name}_planes = {s}[:-{nd}].numel()",
             f"{', '.join(f'{k.name}_i{c}' for c in DIMS)} = "
             f"{(1,) * (3 - nd)} + tuple({s}[-{nd}:])"]
    for i in range(3):
        if i < 3 - nd:
            lines.append(f"{k.name}_o{DIMS[i]} = 1")
        else:
            lines += _out_size(k, i, f"{k.name}_i{DIMS[i]}")
    shape = f"{s}[:-{nd}] + ({', '.join(f'{k.name}_o{c}' for c in DIMS[3 - nd:])},)"
    out, idx = f"{k.name}_out", f"{k.name}_idx"
    lines.append(f"{out} = torch.empty({shape}, dtype=torch.float32, device={x}.device)")
    if k.indices:
        lines.append(f"{idx} = torch.empty({shape}, dtype=torch.int64, device={x}.device)")
    target = var(g, k.out, ref)
    if k.op == "max":
        lines.append(f"{target} = ({out}, {idx if k.indices else 'None'})")
    else:
        lines.append(f"{target} = {out}")
    return lines, x, [out, idx if k.indices else "None"]


def size_args(k: PoolKernel) -> list[str]:
    """The integer kernel arguments: planes, the input sizes, the output sizes."""
    return ([f"{k.name}_planes"] + [f"{k.name}_i{c}" for c in DIMS]
            + [f"{k.name}_o{c}" for c in DIMS])
