"""Tracing one case of a problem into an fx graph, without running the forward at full size.

The model and the inputs are built under a `FakeTensorMode`: tensors carry shapes, dtypes and
strides but no storage, so `Model.__init__`'s initialisers, `get_inputs()`'s random draws and
in-place edge rows cost nothing, and `make_fx` traces the forward on them (a 4 GiB intermediate
is a shape, not an allocation). Fake mode runs no fallback kernels: an op without a shape rule
is refused, never run on zero-filled full-size tensors.

Building the model or the inputs may still need real values (numpy, `.item()` or
`trunc_normal_` in `__init__`): then that part is built for real, as the harness builds it
anyway, and its tensors are converted to fake ones. The forward itself is never run for
real here; what the fake trace cannot follow (a value read with `.item()`, a shape that depends
on the data, an op with no shape rule) is reported as a `TraceRefused` reason.

`real=True` is the old full-size trace, kept as the reference the tests compare against.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable


class TraceRefused(Exception):
    """The forward cannot be traced without its data; says why (one line)."""


@dataclass
class Built:
    """One case's model and forward inputs, fake unless built for real (`real` says which)."""

    mode: Any                    # the FakeTensorMode, or None for a real build
    model: Any
    names: list[str]             # qualified parameter/buffer names, in functional_call order
    tensors: list[Any]           # their (fake) values
    inputs: list[Any]            # forward's arguments, tensors fake
    real: tuple[str, ...] = ()   # "model" and/or "inputs" when they needed real values


def build_case(module, case, *, real: bool = False, binder=None) -> Built:
    """Bind `case`'s size globals and build the model and inputs (fake; see the module doc).
    `binder` (a CaseBinder over all the cases) restores the module's value of a global this
    case leaves out; without one, only this case's globals are bound."""
    from kernelevolve.problem import CaseBinder

    (binder or CaseBinder(module, (case,))).bind(case)
    mode = None if real else _fake_mode()
    built_real: list[str] = []
    model = _build(mode, 1, lambda: module.Model(*module.get_init_inputs()), "model", built_real)
    inputs = _build(mode, 2, lambda: list(module.get_inputs()), "inputs", built_real)
    state = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    names = list(state)
    return Built(mode, model, names, [_fake(mode, state[n]) for n in names],
                 [_fake(mode, x) for x in inputs], tuple(built_real))


def trace_case(module, case, decompositions: dict, *, real: bool = False, binder=None):
    """(GraphModule, parameter/buffer names, forward inputs, the model's numeric attributes)
    for `case` of `module`."""
    import torch
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx

    from kernelevolve.synth.decomp_norms import instance_norm_mode

    b = build_case(module, case, real=real, binder=binder)

    from kernelevolve.synth.loss_trace import smoothed_cross_entropy

    def f(tensors, *args):
        # one op the loss kernel takes (loss_trace.py); torch.instance_norm without its
        # per-sample repeat (decomp_norms.py)
        with smoothed_cross_entropy(), instance_norm_mode():
            return functional_call(b.model, dict(zip(b.names, tensors)), args)

    with torch.no_grad(), _quiet():
        if real:
            return make_fx(f, decomposition_table=decompositions)(b.tensors, *b.inputs), \
                b.names, b.inputs, model_numbers(b.model)
        try:  # make_fx finds the mode on the fake tensors and traces under it
            gm = make_fx(f, decomposition_table=decompositions,
                         tracing_mode="fake")(b.tensors, *b.inputs)
        except Exception as exc:  # noqa: BLE001 - sorted into reasons below
            _refuse(exc)
            raise
    return gm, b.names, b.inputs, model_numbers(b.model)


def model_numbers(model) -> dict[str, float]:
    """The model's plain numeric attributes (`self.scale`, `self.block.eps`) by dotted path:
    the numbers a forward may read and the trace inlines (lift.py)."""
    out: dict[str, float] = {}
    for prefix, sub in model.named_modules():
        for key, value in vars(sub).items():
            if key.startswith("_") or key == "training" or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                out[f"{prefix}.{key}" if prefix else key] = value
    return out


@contextmanager
def _quiet():
    """Fake mode logs a traceback for every op whose shape rule raises (a broadcast error the
    caller reports in one line anyway)."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    # Real tensors the forward meets (module-level constants, a tensor attribute) become fake
    # constants; kernels without a shape rule are refused (a fallback would run them for real).
    return FakeTensorMode(allow_non_fake_inputs=True, allow_fallback_kernels=False)


def _build(mode, seed: int, make: Callable[[], Any], what: str, built_real: list[str]) -> Any:
    """`make()` under the fake mode; for real (seeded) when it needs values the fake mode does
    not have. Either way the harness builds the same model and inputs for real."""
    import torch

    if mode is not None:
        try:
            with mode, _quiet():
                torch.manual_seed(seed)
                return make()
        except Exception:  # noqa: BLE001 - numpy, .item(), a mask write: build it for real
            built_real.append(what)
    torch.manual_seed(seed)
    return make()


def _fake(mode, value: Any) -> Any:
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    if mode is None or not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor):
        return value
    return mode.from_tensor(value)


def _refuse(exc: BaseException) -> None:
    """Raise a TraceRefused for the failures that mean 'this forward needs its data'."""
    from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                               DynamicOutputShapeException,
                                               UnsupportedOperatorException)

    op = getattr(exc, "func", None)
    if isinstance(exc, DataDependentOutputException):
        raise TraceRefused(f"the forward reads a tensor's value ({op}: .item(), int()/bool() "
                           "of a tensor or a Python branch on one), so the traced graph would "
                           "depend on the data") from None
    if isinstance(exc, DynamicOutputShapeException):
        raise TraceRefused(f"the forward makes a tensor whose shape depends on the data ({op}: "
                           "boolean-mask indexing, nonzero, unique, ...)") from None
    if isinstance(exc, UnsupportedOperatorException):
        raise TraceRefused(f"{op} has no shape rule, so it cannot be traced without running "
                           "it at full size") from None
