"""Solo kernels: ops that get a kernel of their own instead of fusing into a row or mid kernel.

An index reduction (argmax / argmin), a product or an integer sum over one dim or over
everything, and a scan (cumsum, cumprod, logcumsumexp, cummax / cummin) each read one tensor
viewed as (outer, n, inner) -- n the reduced or scanned dim, inner the dims after it -- and
write (outer, inner) for a reduction, the input's shape for a scan. They carry a value and,
for the index ops, an index per position, which the fused kernels' accumulators do not model.
A solo kernel closes the kernels it reads, like a torch-kept op (plan.py), and the emitters
spell it whole (emit_cpp_solo.py, triton_solo.py).

Torch semantics kept: argmax / argmin take the first extreme, a NaN is the extreme and the
first NaN wins; indices are int64; integer sums and cumsums are int64; cummax / cummin take
the last index of a tie or NaN, as torch's CPU kernel does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kernelevolve.synth.capture import Graph, Ref, Value

REDUCE_OPS = {"argmax": "argmax", "argmin": "argmin", "prod": "prod", "sum": "sum",
              "any": "any", "all": "all", "max": "max", "min": "min"}
SCAN_OPS = {"cumsum": "sum", "cumprod": "prod", "logcumsumexp": "logsumexp",
            "cummax": "max", "cummin": "min"}
INTS = ("int64", "int32", "bool")
FLOATS = ("float32",)


@dataclass(frozen=True)
class SoloKernel:
    name: str
    kind: str                 # "reduce" or "scan"
    op: str                   # reduce: argmax argmin prod sum any all max min;
                              # scan: sum prod logsumexp max min
    source: str               # the value read
    out: str                  # the value written (a (values, indices) tuple for cummax)
    in_dtype: str
    out_dtype: str
    dim: int | None           # None: over everything (the input seen as one row)
    keepdim: bool
    shape: tuple[int, ...]    # the input's case-0 shape
    indices: bool = False     # cummax / cummin: also write int64 indices
    values: str | None = None  # argmax / argmin: also write the extreme to this value

    @property
    def acc(self) -> str:
        """The accumulator's type: int64 for integer inputs, double for float sums and
        products (torch's CPU kernels accumulate these in double too), else the input's."""
        if self.op in ("any", "all"):
            return "bool"
        if self.in_dtype in INTS:
            return "int64"
        if self.op in ("sum", "prod", "logsumexp"):
            return "float64"
        return self.in_dtype

    @property
    def label(self) -> str:
        where = "everything" if self.dim is None else f"dim {self.dim}"
        what = {"reduce": "reduction", "scan": "scan"}[self.kind]
        both = " (and the values)" if self.values is not None else ""
        return f"{self.op} {what} over {where}{both}"


def solo_of(v: Value, g: Graph, name: str) -> SoloKernel | None:
    """The solo kernel of node `v`, or None (it stays a torch call)."""
    if v.op in SCAN_OPS:
        return _scan(v, g, name)
    if v.op in REDUCE_OPS:
        return _reduce(v, g, name)
    return None


def _source(v: Value, g: Graph) -> Value | None:
    if not v.args or not isinstance(v.args[0], Ref):
        return None
    src = g.values[v.args[0].name]
    if src.dtype not in FLOATS + INTS or not src.shape or math.prod(src.shape) == 0:
        return None
    return src


def _scan(v: Value, g: Graph, name: str) -> SoloKernel | None:
    src = _source(v, g)
    kw = v.attrs.get("kwargs", {})
    if src is None or len(v.args) < 2 or not isinstance(v.args[1], int):
        return None
    op = SCAN_OPS[v.op]
    pair = v.op in ("cummax", "cummin")
    out_dtype = src.dtype if pair else v.dtype
    if kw.get("dtype") is not None or out_dtype not in ("float32", "int64", "int32"):
        return None
    if op in ("prod", "logsumexp") and src.dtype not in FLOATS:
        return None
    if pair and src.dtype not in FLOATS:
        return None
    return SoloKernel(name, "scan", op, src.name, v.name, src.dtype, out_dtype,
                      v.args[1] % len(src.shape), False, tuple(src.shape), indices=pair)


def _reduce(v: Value, g: Graph, name: str) -> SoloKernel | None:
    src = _source(v, g)
    if src is None:
        return None
    kw = v.attrs.get("kwargs", {})
    args = v.args[1:]
    dim = args[0] if args else kw.get("dim")
    keep = bool(args[1] if len(args) > 1 else kw.get("keepdim", False))
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            return None
        dim = dim[0]
    if dim is not None and not isinstance(dim, int):
        return None
    op = REDUCE_OPS[v.op]
    if op == "sum" and (src.dtype not in INTS or v.dtype != "int64"):
        return None                       # float sums fuse (plan_row / plan_mid)
    if op == "prod" and (src.dtype not in FLOATS or v.dtype != "float32"):
        return None
    if op in ("any", "all") and v.dtype != "bool":
        return None
    if op in ("max", "min") and (dim is not None or src.dtype not in FLOATS):
        return None                       # torch.max(x): over a dim it is amax and argmax
    if kw.get("dtype") is not None:
        return None
    return SoloKernel(name, "reduce", op, src.name, v.name, src.dtype, v.dtype,
                      None if dim is None else dim % len(src.shape), keep, tuple(src.shape))



def pair_values(steps: list, kernels: list, g: Graph) -> None:
    """torch.max(x, dim) decomposes into amax and argmax of the same x: when a kernel computes
    nothing but that amax (or amin) and writes only it, the argmax's solo kernel writes the
    value too, at the kernel's place, and the kernel goes (one read of x instead of two)."""
    for i, (kind, s) in enumerate(list(steps)):
        if kind != "solo" or s.op not in ("argmax", "argmin"):
            continue
        want = {"argmax": "amax", "argmin": "amin"}[s.op]
        for j, (kind2, k) in enumerate(steps):
            if kind2 != "kernel" or not _only_reduce(k, g, want, s):
                continue
            steps[j] = ("solo", replace(s, values=k.outputs[0].name))
            steps.remove((kind, s))
            kernels.remove(k)
            break


def _only_reduce(k, g: Graph, op: str, s: SoloKernel) -> bool:
    """Kernel `k` is one `op` of `s`'s source over `s`'s dim (keepdim alike), written alone."""
    real = [n for n in k.nodes if n.kind != "view"]
    if len(real) != 1 or len(k.outputs) != 1 or k.outputs[0].name != real[0].name:
        return False
    v = g.values[real[0].name]
    if v.op != op or not v.args or v.args[0] != Ref(s.source) or s.dim is None:
        return False
    dims = v.args[1] if len(v.args) > 1 else ()
    keep = bool(v.args[2]) if len(v.args) > 2 else False
    nd = len(s.shape)
    return (len(dims) == 1 and dims[0] % nd == s.dim and keep == s.keepdim
            and v.dtype == s.in_dtype)
