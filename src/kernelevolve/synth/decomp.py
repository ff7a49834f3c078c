"""Decompositions of our own, applied while tracing, that turn composite ops into the op set the
planner handles (reductions over one dim, element-wise arithmetic, views).

- A reduction over several dims that are one contiguous block (mean over (H, W), a sum over
  everything) becomes a view merging the block into one dim, the one-dim reduction, and a view
  to the result's shape. Dims in several blocks are reduced one block at a time
  (decomp_blocks.py); a variance over them stays a torch call.
- Batch norm in inference (running statistics, `training=False`) becomes per-channel
  arithmetic: (x - mean) * rsqrt(var + eps) * weight + bias, the statistics viewed as (C, 1, ...).
  Batch-statistics batch norm over a batch of one (an instance norm with running statistics
  traces to it; one without: decomp_norms.instance_norm, routed in trace.py) becomes a row
  normalisation over (C, H*W). Batch statistics over a real batch: decomp_norms.py.
- Group norm becomes a row normalisation over (N, G, C/G * H*W); with an affine step, the
  row kernel's statistics and one per-channel kernel over (N, G, C/G, H*W) (decomp_norms.py).
- Vector norms become their sums and maxima (p = 2: sqrt(sum(x*x)); inf: amax(abs(x)); ...).
- max/min over a dim become amax/amin and argmax/argmin (a caller that uses only the values
  leaves the index op dead).
- all stays all (not the core table's not(any(not x))): a solo kernel computes it
  (plan_solo.py), as it does max/min over everything.
- var_mean (and std_mean, which torch's own table makes var_mean and sqrt) becomes var and
  mean over the same dims, the mean NaN where torch's Welford mean is (see var_mean).

A decomposition returns NotImplemented for the cases it leaves alone, so make_fx records the op.
"""
from __future__ import annotations

import math
from typing import Any

from kernelevolve.synth.decomp_blocks import reduce_blocks
from kernelevolve.synth.decomp_norms import affine, batch_norm_batch_stats, group_norm_affine


def _aten():
    import torch

    return torch.ops.aten


def _dims(x, dim) -> list[int] | None:
    """The reduced dims, normalised and sorted; every dim for None or []."""
    nd = x.dim()
    if nd == 0:
        return None
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(nd))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % nd for d in dims})


def _block(shape: tuple[int, ...], dims: list[int]) -> tuple[tuple[int, ...], int] | None:
    """(shape with the dims merged into one, the merged dim) when the dims are one block."""
    if len(dims) < 2 or dims != list(range(dims[0], dims[-1] + 1)):
        return None
    a, b = dims[0], dims[-1] + 1
    return tuple(shape[:a]) + (math.prod(shape[a:b]),) + tuple(shape[b:]), a


def _result_shape(shape: tuple[int, ...], dims: list[int], keepdim: bool) -> list[int]:
    if keepdim:
        return [1 if i in dims else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in dims]


def _merged(one_dim):
    """A multi-dim reduction `fn(x, dim, keepdim, **kw)` as a view, `one_dim(x, dim, **kw)` over
    the merged dim (keepdim False) and a view to the result's shape."""
    def decompose(x, dim=None, keepdim=False, **kw):
        if kw.get("dtype") is not None:
            return NotImplemented
        kw.pop("dtype", None)
        dims = _dims(x, dim)
        if dims is None or len(dims) == 1:       # one dim: the planner's own case
            return NotImplemented
        shape = tuple(int(s) for s in x.shape)
        block = _block(shape, dims)
        if block is None:
            if one_dim is _var:                # variances do not compose over blocks
                return NotImplemented
            return reduce_blocks(lambda y, a: one_dim(y, a, **kw), x, shape, dims, bool(keepdim))
        merged, a = block
        aten = _aten()
        y = one_dim(aten.view.default(x, list(merged)), a, **kw)
        return aten.view.default(y, _result_shape(shape, dims, bool(keepdim)))
    return decompose


def _full(one_dim):
    """`x.sum()` / `x.mean()` (the `.default` overloads, every dim): over a 1-d input the
    reduction over dim 0 the planner covers (nothing to merge, so `_merged` would leave the
    whole-tensor op in torch); otherwise the dims merged as for an explicit dim list."""
    def decompose(x, dtype=None):
        if dtype is None and x.dim() == 1:
            return one_dim(x, 0)
        return _merged(one_dim)(x, None, dtype=dtype)
    return decompose


def _sum(x, a):
    return _aten().sum.dim_IntList(x, [a], False)


def _mean(x, a):
    return _aten().mean.dim(x, [a], False)


def _amax(x, a):
    return _aten().amax.default(x, [a], False)


def _amin(x, a):
    return _aten().amin.default(x, [a], False)


def _var(x, a, correction=None):
    return _aten().var.correction(x, [a], correction=correction, keepdim=False)


def _var_decompose(x, dim=None, *, correction=None, keepdim=False):
    return _merged(_var)(x, dim, keepdim, correction=correction)


def var_mean(x, dim=None, *, correction=None, keepdim=False):
    """var and mean over the same dims (a contiguous block of them merged into one). torch's
    var_mean takes its mean from Welford's recurrence, which turns NaN once an inf is followed
    by another element (mean + (x - inf) / n), and is that inf when it comes last: torch.mean
    would give inf for both. So the mean here is NaN where the reduced infs outnumber the last
    element's own (the last element read through a torch view, select(-1))."""
    import torch

    dims = _dims(x, dim)
    if dims is None or x.dtype != torch.float32:
        return NotImplemented
    aten, shape = _aten(), tuple(int(s) for s in x.shape)
    y, d = x, dims[0]
    if len(dims) > 1:
        block = _block(shape, dims)
        if block is None:
            return NotImplemented
        merged, d = block
        y = aten.view.default(x, list(merged))
    var = aten.var.correction(y, [d], correction=correction, keepdim=True)
    mean = aten.mean.dim(y, [d], True)
    infs = aten.sum.dim_IntList(_float(aten.isinf.default(y)), [d], True)
    last = aten.unsqueeze.default(aten.select.int(y, d, -1), d)
    early = aten.gt.Scalar(aten.sub.Tensor(infs, _float(aten.isinf.default(last))), 0.5)
    mean = aten.where.self(early, aten.scalar_tensor.default(math.nan, dtype=torch.float32),
                           mean)
    out = _result_shape(shape, dims, bool(keepdim))
    return aten.view.default(var, out), aten.view.default(mean, out)


def _float(t):
    import torch

    return _aten()._to_copy.default(t, dtype=torch.float32)


def _channel_view(t, nd: int):
    return _aten().view.default(t, [int(t.shape[0])] + [1] * (nd - 2))


def _empty_like_stat(x):
    return _aten().empty.memory_format([0], dtype=x.dtype, device=x.device)


def batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    aten = _aten()
    nd = x.dim()
    if nd < 2:
        return NotImplemented
    if not training and running_mean is not None and running_var is not None:
        rstd = aten.rsqrt.default(aten.add.Tensor(_channel_view(running_var, nd), eps))
        out = aten.mul.Tensor(aten.sub.Tensor(x, _channel_view(running_mean, nd)), rstd)
        out = affine(out, weight, bias, [int(x.shape[1])] + [1] * (nd - 2))
        return out, _empty_like_stat(x), _empty_like_stat(x)
    if training and running_mean is None and running_var is None and int(x.shape[0]) == 1:
        shape = [int(s) for s in x.shape]
        c, rest = shape[1], math.prod(shape[2:])
        rows = aten.view.default(x, [c, rest])
        out, mean, rstd = _normalise_rows(rows, eps)
        out = affine(out, weight, bias, [c, 1])
        return (aten.view.default(out, shape), aten.view.default(mean, [c]),
                aten.view.default(rstd, [c]))
    if training or running_mean is None or running_var is None:
        return batch_norm_batch_stats(x, weight, bias, eps)
    return NotImplemented


def _normalise_rows(rows, eps):
    """(rows - mean) * rsqrt(biased var + eps) over the last dim: (out, mean, rstd)."""
    aten = _aten()
    mean = aten.mean.dim(rows, [-1], True)
    centred = aten.sub.Tensor(rows, mean)
    var = aten.mean.dim(aten.mul.Tensor(centred, centred), [-1], True)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    return aten.mul.Tensor(centred, rstd), mean, rstd


def group_norm(x, weight, bias, n, c, hxw, group, eps):
    aten = _aten()
    n, c, hxw, group = int(n), int(c), int(hxw), int(group)
    if group <= 0 or c % group:
        return NotImplemented
    if weight is not None or bias is not None:
        return group_norm_affine(x, weight, bias, n, c, hxw, group, eps)
    shape = [int(s) for s in x.shape]
    per = c // group
    out, mean, rstd = _normalise_rows(aten.view.default(x, [n, group, per * hxw]), eps)
    return (aten.view.default(out, shape), aten.view.default(mean, [n, group]),
            aten.view.default(rstd, [n, group]))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None or x.dim() == 0:
        return NotImplemented
    aten = _aten()
    dims = _dims(x, dim)
    p = float(ord)
    ax = aten.abs.default(x)
    if p == math.inf:
        return aten.amax.default(ax, dims, keepdim)
    if p == -math.inf:
        return aten.amin.default(ax, dims, keepdim)
    if p == 0.0:
        nonzero = aten._to_copy.default(aten.ne.Scalar(x, 0), dtype=x.dtype)
        return aten.sum.dim_IntList(nonzero, dims, keepdim)
    if p == 1.0:
        return aten.sum.dim_IntList(ax, dims, keepdim)
    if p == 2.0:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(x, x), dims, keepdim))
    powered = aten.pow.Tensor_Scalar(ax, p)
    return aten.pow.Tensor_Scalar(aten.sum.dim_IntList(powered, dims, keepdim), 1.0 / p)


def max_dim(x, dim, keepdim=False):
    aten = _aten()
    return aten.amax.default(x, [dim], keepdim), aten.argmax.default(x, dim, keepdim)


def min_dim(x, dim, keepdim=False):
    aten = _aten()
    return aten.amin.default(x, [dim], keepdim), aten.argmin.default(x, dim, keepdim)


def _keep(*args, **kwargs):
    """Record the op (any / all stay whole for the solo kernels, plan_solo.py)."""
    return NotImplemented


def table() -> dict[Any, Any]:
    """Our decompositions, keyed by ATen overload (laid over the core table by capture)."""
    aten = _aten()
    return {
        aten.sum.dim_IntList: _merged(_sum),
        aten.mean.dim: _merged(_mean),
        aten.amax.default: _merged(_amax),
        aten.amin.default: _merged(_amin),
        aten.sum.default: _full(_sum),
        aten.mean.default: _full(_mean),
        aten.var.correction: _var_decompose,
        aten.var_mean.correction: var_mean,
        aten.native_batch_norm.default: batch_norm,
        aten.native_group_norm.default: group_norm,
        aten.linalg_vector_norm.default: vector_norm,
        aten.max.dim: max_dim,
        aten.min.dim: min_dim,
        aten.all.default: _keep,
        aten.all.dim: _keep,
        aten.all.dims: _keep,
        aten.nll_loss_forward.default: _keep,      # a loss kernel of its own (plan_loss.py)
        aten.nll_loss2d_forward.default: _keep,
    }
