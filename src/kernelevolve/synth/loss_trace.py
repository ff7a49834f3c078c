"""Label-smoothed cross_entropy traced as one op, so the loss kernel (plan_loss.py) takes it.

ATen spells `F.cross_entropy(x, t, label_smoothing=eps)` as log_softmax, nll_loss and a
smoothing term built from row sums, masks, an in-place copy and (with class weights) a
gather whose shape depends on the data: a dozen nodes the planner would split into several
kernels, with eps / C baked in as a number. While the synthesizer traces, a torch-function
mode catches that call (class-index targets only) and records log_softmax followed by
`kernelevolve::smoothed_nll(logp, t, weight, reduction, ignore_index, eps)`, whose reference
implementation is torch's own formula. The candidate never calls it: the loss kernel
computes (1 - eps) * nll + eps / C * (-sum_c w_c logp_c) per target, C read at call time.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

REDUCTION = {"none": 0, "mean": 1, "sum": 2}


@torch.library.custom_op("kernelevolve::smoothed_nll", mutates_args=())
def smoothed_nll(logp: torch.Tensor, target: torch.Tensor, weight: Optional[torch.Tensor],
                 reduction: int, ignore_index: int, smoothing: float) -> torch.Tensor:
    """torch's label-smoothed loss from log-probabilities (the reference semantics)."""
    return F.cross_entropy(logp, target, weight, ignore_index=ignore_index,
                           reduction=["none", "mean", "sum"][reduction],
                           label_smoothing=smoothing)


@smoothed_nll.register_fake
def _(logp, target, weight, reduction, ignore_index, smoothing):
    return logp.new_empty(target.shape if reduction == 0 else ())


class _SmoothedCrossEntropy(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.cross_entropy:
            call = _smoothed(*args, **kwargs)
            if call is not None:
                return call
        return func(*args, **kwargs)


def _smoothed(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
              reduction="mean", label_smoothing=0.0):
    if not label_smoothing or size_average is not None or reduce is not None or \
            target.dtype != torch.int64 or input.dim() < 1 or reduction not in REDUCTION:
        return None
    logp = F.log_softmax(input, 1 if input.dim() >= 2 else 0)
    return torch.ops.kernelevolve.smoothed_nll(logp, target, weight, REDUCTION[reduction],
                                               ignore_index, float(label_smoothing))


@contextlib.contextmanager
def smoothed_cross_entropy():
    """Trace label-smoothed cross_entropy as log_softmax + smoothed_nll (see above)."""
    with _SmoothedCrossEntropy():
        yield
