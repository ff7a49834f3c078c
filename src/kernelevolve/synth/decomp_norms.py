"""Decompositions of the normalisations whose statistics span several dims, into the reductions
over one dim that the row and mid planners handle.

- Layer norm over several trailing dims (`nn.LayerNorm((H, W))`): the normalised dims are one
  contiguous block, so the input is viewed as rows of their product, normalised as a
  one-dim layer norm (the affine weight and bias viewed as one row), and viewed back.
- Batch norm with batch statistics over a real batch (training mode, or no running stats):
  the statistics of channel c span N and the spatial dims, which lie on both sides of C. The
  input is viewed as (N, C, S) and each statistic is a mean over S (a row reduction, the
  (1, C, 1) statistics read as per-channel operands) followed by a mean over N of the (N, C)
  means (a middle-dim walk, vectorised along C); both counts are the same for every channel, so the mean of the means is the
  mean. The variance is the biased one of the centred values (two passes, as torch's), so a
  constant input gives rsqrt(eps). The running statistics are not updated: a training-mode
  output never reads them, and the candidate's contract is its forward output (the module's
  buffers are the reference's side effect; docs/ARCHITECTURE.md says so). One value per
  channel (N * S == 1) never reaches here: `F.batch_norm` raises ValueError while tracing,
  which the capture reports as NotCovered with torch's own message.
"""
from __future__ import annotations

import math


def _aten():
    import torch

    return torch.ops.aten


def layer_norm_rows(x, normalized_shape, weight, bias, eps):
    """native_layer_norm over k >= 1 trailing dims: (out, mean, rstd) as torch returns them
    (the statistics shaped (lead..., 1, ..., 1))."""
    aten = _aten()
    shape = [int(s) for s in x.shape]
    k = len(normalized_shape)
    width = math.prod(shape[len(shape) - k:]) if k else 1
    lead = shape[:len(shape) - k]
    rows = aten.view.default(x, lead + [width]) if k != 1 else x
    mean = aten.mean.dim(rows, [-1], True)
    centred = aten.sub.Tensor(rows, mean)
    var = aten.mean.dim(aten.mul.Tensor(centred, centred), [-1], True)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = affine(aten.mul.Tensor(centred, rstd), weight, bias, None if k == 1 else [width])
    if k == 1:
        return out, mean, rstd
    stat = lead + [1] * k
    return (aten.view.default(out, shape), aten.view.default(mean, stat),
            aten.view.default(rstd, stat))


def affine(out, weight, bias, shape: list[int] | None):
    """The normalisations' affine tail: `out * weight + bias`, each parameter present or None and
    viewed as `shape` (its values laid along the dims it varies over, ones elsewhere) so it
    broadcasts per channel, per group or per row as the caller's layout needs; None: used as
    they are (no view op in the trace, so none in the draft's glue)."""
    aten = _aten()
    if weight is not None:
        out = aten.mul.Tensor(out, weight if shape is None else aten.view.default(weight, shape))
    if bias is not None:
        out = aten.add.Tensor(out, bias if shape is None else aten.view.default(bias, shape))
    return out


def batch_norm_batch_stats(x, weight, bias, eps):
    """Batch norm normalising with the batch's own statistics: (out, mean, rstd), the
    statistics of shape (C,). Float32 only (NotImplemented: a torch call): torch keeps a
    half input's statistics in float32, which these steps would round to half."""
    import torch

    if x.dtype != torch.float32:
        return NotImplemented
    aten = _aten()
    shape = [int(s) for s in x.shape]
    n, c, rest = shape[0], shape[1], math.prod(shape[2:])
    v = aten.view.default(x, [n, c, rest]) if len(shape) != 3 else x
    mean = _channel_mean(v, n, c, rest)
    centred = aten.sub.Tensor(v, mean)
    var = _channel_mean(aten.mul.Tensor(centred, centred), n, c, rest)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    # centred again, not reused: the store kernel reads x, not a saved full-size centred copy
    out = affine(aten.mul.Tensor(aten.sub.Tensor(v, mean), rstd), weight, bias, [c, 1])
    return (aten.view.default(out, shape), aten.view.default(mean, [c]),
            aten.view.default(rstd, [c]))


def _channel_mean(v, n: int, c: int, rest: int):
    """The mean of (N, C, S) over N and S, kept as (1, C, 1): a mean over dims (0, 2), which
    decomp_blocks.py makes a row mean over S and then a middle-dim walk over N of the (N, C)
    means, so each kernel reads the (1, C, 1) statistics as a per-channel operand of a row
    kernel; a one-wide S needs only the walk."""
    aten = _aten()
    return aten.mean.dim(v, [0] if rest == 1 else [0, 2], True)


def group_norm_affine(x, weight, bias, n: int, c: int, hxw: int, group: int, eps):
    """Group norm with an affine step: the statistics from rows of (N, G, C/G * HxW) (one row
    kernel, two passes), then one element-wise kernel over (N, G, C/G, HxW) that normalises
    and applies the weight and bias, the statistics (N, G, 1, 1) and the parameters
    (1, G, C/G, 1) read per channel. Normalising inside the row kernel instead would write a
    full-size normalised copy for a second kernel to read back (the affine parameters vary
    inside a row, which a row kernel cannot read)."""
    aten = _aten()
    per = c // group
    shape = [int(s) for s in x.shape]
    rows = aten.view.default(x, [n, group, per * hxw])
    mean = aten.mean.dim(rows, [-1], True)
    centred = aten.sub.Tensor(rows, mean)
    var = aten.mean.dim(aten.mul.Tensor(centred, centred), [-1], True)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    stat = [n, group, 1, 1]
    x4 = aten.view.default(x, [n, group, per, hxw])
    out = aten.mul.Tensor(aten.sub.Tensor(x4, aten.view.default(mean, stat)),
                          aten.view.default(rstd, stat))
    out = affine(out, weight, bias, [1, group, per, 1])
    return (aten.view.default(out, shape), aten.view.default(mean, [n, group]),
            aten.view.default(rstd, [n, group]))


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """F.instance_norm with the input's own statistics, as rows of (N, C, S) normalised and the
    affine weight and bias read per channel ((C, 1) over the rows): one row kernel. torch's own
    composition repeats the weight once per sample, a batch size the trace would bake in (a
    held-out case with another batch traced to another graph); NotImplemented for running
    statistics and non-float32 inputs. One spatial element is refused as torch refuses it."""
    import torch
    import torch.nn.functional as F

    if not use_input_stats or running_mean is not None or running_var is not None or \
            x.dtype != torch.float32 or x.dim() < 3:
        return NotImplemented
    F._verify_spatial_size(x.size())
    n, c = int(x.shape[0]), int(x.shape[1])
    rows = x.reshape(n, c, -1)
    mean = rows.mean(-1, keepdim=True)
    centred = rows - mean
    out = centred * torch.rsqrt((centred * centred).mean(-1, keepdim=True) + eps)
    if weight is not None:
        out = out * weight.view(c, 1)
    if bias is not None:
        out = out + bias.view(c, 1)
    return out.view(x.shape)


def instance_norm_mode():
    """A TorchFunctionMode for the trace that routes F.instance_norm to instance_norm() (its
    torch.instance_norm is CompositeImplicit: make_fx's decomposition table never sees it)."""
    from torch.nn import functional
    from torch.overrides import TorchFunctionMode

    class InstanceNormMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is functional.instance_norm:
                out = instance_norm(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            return func(*args, **kwargs)

    return InstanceNormMode()
