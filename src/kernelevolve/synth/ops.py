"""The op set the planner fuses: ATen op names mapped to a small normalised vocabulary.

A normalised op is `(kind, name)`: kind is "unary", "binary", "where", "clamp", "cast",
"reduce" or "view"; the emitters spell each name in C++ and Triton (emit_cpp.py,
emit_triton.py). Anything not listed here stays a torch call.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.synth.capture import NotCovered, Ref, Value

UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "sin": "sin", "cos": "cos",
    "erf": "erf", "reciprocal": "reciprocal", "log1p": "log1p", "expm1": "expm1",
    "floor": "floor", "ceil": "ceil", "logical_not": "not", "exp2": "exp2", "log2": "log2",
    "sign": "sign", "square": "square",
}
BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min",
    "pow": "pow", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "logical_and": "and", "logical_or": "or", "rsub": "rsub", "fmax": "max", "fmin": "min",
}
REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "var": "var"}
VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "alias", "clone",
         "expand", "broadcast_in_dim"}
FLOAT_TYPES = ("float32",)
ELEMENT_TYPES = ("float32", "bool")


def normalise(v: Value) -> tuple[str, str, tuple[Any, ...], dict[str, Any]] | None:
    """(kind, name, operands, attrs) for a fusable node, or None when it stays in torch."""
    if v.dtype not in ELEMENT_TYPES:
        return None
    op, args, kw = v.op, v.args, v.attrs.get("kwargs", {})
    if op in UNARY and len(args) == 1:
        return "unary", UNARY[op], args, {}
    if op == "gelu":
        approx = kw.get("approximate", args[1] if len(args) > 1 else "none")
        return "unary", "gelu_tanh" if approx == "tanh" else "gelu", args[:1], {}
    if op == "leaky_relu":
        slope = args[1] if len(args) > 1 else 0.01
        return "binary", "leaky_relu", (args[0], float(slope)), {}
    if op in BINARY and len(args) >= 2:
        a, b = args[0], args[1]
        alpha = kw.get("alpha", args[2] if len(args) > 2 else 1)
        if op == "div" and kw.get("rounding_mode") not in (None,):
            return None
        if op in ("add", "sub") and alpha != 1:
            if isinstance(b, Ref):
                return None
            b = b * alpha
        return "binary", BINARY[op], (a, b), {}
    if op == "where" and len(args) == 3:
        return "where", "where", args, {}
    if op == "clamp":
        lo = args[1] if len(args) > 1 else kw.get("min")
        hi = args[2] if len(args) > 2 else kw.get("max")
        if isinstance(lo, Ref) or isinstance(hi, Ref):
            return None
        return "clamp", "clamp", (args[0],), {"lo": lo, "hi": hi}
    if op == "hardtanh":
        lo = args[1] if len(args) > 1 else -1.0
        hi = args[2] if len(args) > 2 else 1.0
        return "clamp", "clamp", (args[0],), {"lo": lo, "hi": hi}
    if op in ("_to_copy", "convert_element_type"):
        return "cast", v.dtype, args[:1], {}
    if op in REDUCE:
        return _reduce(v, op, args, kw)
    if op in VIEWS:
        return "view", op, args[:1], {}
    return None


def _reduce(v: Value, op: str, args: tuple, kw: dict) -> tuple | None:
    if v.dtype not in FLOAT_TYPES or len(args) < 1:
        return None
    dims = args[1] if len(args) > 1 else kw.get("dim")
    if isinstance(dims, int):
        dims = (dims,)
    keepdim = args[2] if len(args) > 2 else kw.get("keepdim", False)
    if op == "var":
        keepdim = kw.get("keepdim", False)
    if dims is None or len(dims) != 1 or kw.get("dtype") is not None:
        return None
    attrs = {"dim": int(dims[0]), "keepdim": bool(keepdim)}
    if op == "var":
        correction = kw.get("correction", 1)
        attrs["correction"] = 1.0 if correction is None else float(correction)
    return "reduce", REDUCE[op], args[:1], attrs


def describe_not_fusable(v: Value) -> str:
    if v.dtype not in ELEMENT_TYPES:
        return f"{v.op} ({v.dtype} result; only float32 is fused)"
    return v.op


def check_supported_graph(values: dict[str, Value]) -> None:
    for v in values.values():
        if v.op in ("input", "param") and v.dtype not in ELEMENT_TYPES:
            raise NotCovered(f"{v.op} {v.name} has dtype {v.dtype}; only float32 is covered")
