"""Class-index losses: nll_loss (and so cross_entropy) as a kernel of its own.

`F.cross_entropy(x, t)` is log_softmax over the class dim, then `nll_loss_forward` (or
`nll_loss2d_forward` for (N, C, d1, ...) inputs). capture keeps the nll op whole (decomp.py);
the log_softmax fuses as usual (a row or mid kernel) and the nll op becomes a `LossKernel`: a
gather of one log-probability per target, weighted, with torch's rules kept --

- a target equal to `ignore_index` contributes 0 loss and 0 weight;
- reduction mean divides the weighted sum by the sum of the non-ignored targets' weights, so an
  all-ignored batch gives 0 / 0 = NaN (sum gives 0);
- a target outside [0, C) (and not ignored) raises IndexError: the kernel never reads there, it
  sets a flag the forward checks, as the embedding gather does.

The log-probabilities are read as (outer, C, inner): outer the batch (1 for a 1-D input), inner
the product of the dims after the class dim; the targets as (outer, inner).
Label-smoothed cross_entropy is traced as one op, `smoothed_nll` (loss_trace.py), which the
same kernel takes: per target (1 - eps) * nll + eps / C * (-sum_c w_c logp_c), C read at call
time (torch's mean divides both terms by the same weight total).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelevolve.synth.capture import Graph, Ref, Value

LOSS_OPS = ("nll_loss_forward", "nll_loss2d_forward", "smoothed_nll")
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@dataclass(frozen=True)
class LossKernel:
    name: str
    source: str               # the log-probabilities (float32)
    target: str               # the class indices (int64)
    weight: str | None        # a per-class weight (float32, (C,)), or None
    out: str                  # the (loss, total_weight) tuple value
    op: str                   # the reduction: none, mean or sum
    ignore_index: int
    shape: tuple[int, ...]    # the input's case-0 shape
    kind: str = "loss"
    in_dtype: str = "float32"
    out_dtype: str = "float32"
    keepdim: bool = False
    indices: bool = False
    values: None = None
    smoothing: float = 0.0    # label smoothing (smoothed_nll, loss_trace.py)

    @property
    def dim(self) -> int:
        """The class dim (what every case must agree on, with the rank)."""
        return 0 if len(self.shape) == 1 else 1

    @property
    def label(self) -> str:
        w = ", weighted" if self.weight else ""
        w += f", label smoothing {self.smoothing}" if self.smoothing else ""
        what = {"none": "per target", "mean": "mean over the non-ignored targets",
                "sum": "summed"}[self.op]
        return (f"nll loss: gather of the target class's log-probability{w}, {what}, "
                f"ignore_index {self.ignore_index}")


def loss_of(v: Value, g: Graph, name: str) -> LossKernel | None:
    """The loss kernel of node `v`, or None (it stays a torch call)."""
    if v.op not in LOSS_OPS or len(v.args) != (6 if v.op == "smoothed_nll" else 5):
        return None
    x, t, w, reduction, ignore = v.args[:5]
    smoothing = v.args[5] if v.op == "smoothed_nll" else 0.0
    if not isinstance(smoothing, (int, float)) or isinstance(smoothing, bool):
        return None
    if not isinstance(x, Ref) or not isinstance(t, Ref):
        return None
    xs, ts = g.values[x.name], g.values[t.name]
    if xs.dtype != "float32" or ts.dtype != "int64" or not xs.shape:
        return None
    if reduction not in REDUCTIONS or not isinstance(ignore, int) or isinstance(ignore, bool):
        return None
    if w is not None and (not isinstance(w, Ref) or g.values[w.name].dtype != "float32"
                          or len(g.values[w.name].shape) != 1):
        return None
    return LossKernel(name, x.name, t.name, w.name if w is not None else None, v.name,
                      REDUCTIONS[reduction], ignore, tuple(xs.shape),
                      smoothing=float(smoothing))
