"""The op set the planner fuses: ATen op names mapped to a small normalised vocabulary.

A normalised op is `(kind, name)`: kind is "unary", "binary", "where", "clamp", "cast",
"bucketize", "gather" (an embedding lookup, or index_select of a 2-D table's rows along
dim 0, the same lookup), "reduce" or "view"; `vocabulary()` lists every
pair normalise() can give, and both emitters spell each one or say why not (cpp_expr.py,
triton_expr.py; tests/test_synth_ops.py checks). Anything not listed here stays a torch call.
A few ATen ops become ops of another name: isnan(x) is x != x, isinf(x) the comparison
|x| == inf (a binary "eq" with attrs {"abs": True}), clamp with one tensor bound maximum or
minimum.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.synth.capture import NotCovered, Ref, Value

UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "sin": "sin", "cos": "cos",
    "erf": "erf", "reciprocal": "reciprocal", "log1p": "log1p", "expm1": "expm1",
    "floor": "floor", "ceil": "ceil", "logical_not": "not", "exp2": "exp2", "log2": "log2",
    "sign": "sign", "square": "square", "tan": "tan", "asin": "asin", "acos": "acos",
    "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "erfc": "erfc", "trunc": "trunc", "log10": "log10", "fix": "trunc",
}
BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min",
    "pow": "pow", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "logical_and": "and", "logical_or": "or", "rsub": "rsub", "fmax": "fmax", "fmin": "fmin",
    "remainder": "rem", "floor_divide": "floordiv", "bitwise_and": "band", "bitwise_or": "bor",
    "bitwise_xor": "bxor", "__lshift__": "shl", "__rshift__": "shr", "bitwise_left_shift": "shl",
    "bitwise_right_shift": "shr", "fmod": "fmod", "atan2": "atan2", "hypot": "hypot",
    "copysign": "copysign", "nextafter": "nextafter", "logical_xor": "xor",
}
# Pairs normalise() gives besides UNARY's and BINARY's (and the cast, reduce and view ones).
EXTRA = {("unary", "bnot"), ("unary", "gelu"), ("unary", "gelu_tanh"), ("unary", "elu"),
         ("unary", "round"), ("binary", "leaky_relu"), ("binary", "floordiv"),
         ("binary", "truncdiv"), ("where", "where"), ("clamp", "clamp"), ("clamp", "clamp_t"),
         ("bucketize", "bucketize"), ("gather", "embedding")}
# Ops whose result keeps an integer operand's type (torch does not promote them to float), so
# an emitter computes them in int64 / int32; the others compute in float32 (or compare).
INT_RESULT = {("unary", op) for op in ("abs", "neg", "relu", "sign", "square", "bnot", "floor",
                                       "ceil", "round", "trunc")} | \
    {("binary", op) for op in ("add", "sub", "mul", "rsub", "max", "min", "fmax", "fmin", "pow",
                               "rem", "floordiv", "truncdiv", "fmod", "band", "bor", "bxor",
                               "shl", "shr")} | \
    {("where", "where"), ("clamp", "clamp"), ("clamp", "clamp_t")}
# Integer ops whose second operand must be a constant: a constant divisor cannot be zero or
# -1 at run time (no trap), and a constant shift stays below the bit width.
CONST_RHS = {"rem", "floordiv", "truncdiv", "fmod", "shl", "shr"}
INT_TYPES = ("int64", "int32")
REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "var": "var"}
VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "alias", "clone",
         "expand", "broadcast_in_dim"}
# What neither emitter spells on float or bool operands, and why.
FLOAT_UNSPELLED = {
    ("binary", "shl"): "shifts are integer ops (torch has none on float or bool)",
    ("binary", "shr"): "shifts are integer ops (torch has none on float or bool)",
}
FLOAT_TYPES = ("float32",)
ELEMENT_TYPES = ("float32", "bool", "int64", "int32")
BITS = {"int64": 64, "int32": 32}
# Ops worth caching between passes, and that weigh in the C++ parallel threshold (schedule.py).
EXPENSIVE = {"exp", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh", "log", "sin", "cos", "log1p",
             "expm1", "exp2", "log2", "pow", "log10", "tan", "asin", "acos", "atan", "sinh",
             "cosh", "asinh", "acosh", "atanh", "erfc", "elu", "atan2", "hypot", "fmod",
             "rem", "floordiv"}
# Pairs an integer type may compute in: those, plus what takes its operand's type
# (writer.compute_dtype: comparisons, logical not, bucketize, casts and views).
INT_COMPUTE = INT_RESULT | {("binary", op) for op in ("eq", "ne", "lt", "le", "gt", "ge", "and",
                                                      "or")} | \
    {("unary", "not"), ("bucketize", "bucketize")} | \
    {("cast", t) for t in ELEMENT_TYPES} | {("view", v) for v in VIEWS}


def normalise(v: Value) -> tuple[str, str, tuple[Any, ...], dict[str, Any]] | None:
    """(kind, name, operands, attrs) for a fusable node, or None when it stays in torch."""
    if v.dtype not in ELEMENT_TYPES:
        return None
    op, args, kw = v.op, v.args, v.attrs.get("kwargs", {})
    if op in UNARY and len(args) == 1:
        return "unary", UNARY[op], args, {}
    if op in ("isnan", "isinf", "elu", "round") and args:
        return _pointwise(v, op, args, kw)
    if op == "bitwise_not" and len(args) == 1:
        return "unary", "bnot", args, {}
    if op == "bucketize" and len(args) == 2 and isinstance(args[1], Ref):
        if kw.get("out_int32") or v.dtype != "int64":
            return None
        return "bucketize", "bucketize", args, {"right": bool(kw.get("right", False))}
    if op == "gelu":
        approx = kw.get("approximate", args[1] if len(args) > 1 else "none")
        return "unary", "gelu_tanh" if approx == "tanh" else "gelu", args[:1], {}
    if op == "leaky_relu":
        slope = args[1] if len(args) > 1 else 0.01
        return "binary", "leaky_relu", (args[0], float(slope)), {}
    if op == "embedding" and len(args) >= 2 and all(isinstance(a, Ref) for a in args[:2]):
        # padding_idx / scale_grad_by_freq / sparse change only the backward pass
        return "gather", "embedding", args[:2], {}
    if op == "index_select" and len(args) == 3 and args[1] == 0 and len(v.shape) == 2 and \
            isinstance(args[0], Ref) and isinstance(args[2], Ref):
        return "gather", "embedding", (args[0], args[2]), {}   # rows of a 2-D table by index
    if op in BINARY and len(args) >= 2:
        a, b = args[0], args[1]
        alpha = kw.get("alpha", args[2] if len(args) > 2 else 1)
        name = BINARY[op]
        if op == "div" and kw.get("rounding_mode") is not None:
            name = {"floor": "floordiv", "trunc": "truncdiv"}.get(kw["rounding_mode"])
            if name is None:
                return None
        if name in CONST_RHS and v.dtype in INT_TYPES and not _safe_const(name, b, v.dtype):
            return None
        if op in ("add", "sub") and alpha != 1:
            if isinstance(b, Ref):
                return None
            b = b * alpha
        return "binary", name, (a, b), {}
    if op == "where" and len(args) == 3:
        return "where", "where", args, {}
    if op == "clamp":
        return _clamp(args, kw)
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


def _pointwise(v: Value, op: str, args: tuple, kw: dict) -> tuple | None:
    """isnan / isinf as comparisons, elu (and selu) with its constants, round(decimals)."""
    x = args[0]
    if op == "isnan":
        return "binary", "ne", (x, x), {}
    if op == "isinf":
        return "binary", "eq", (x, float("inf")), {"abs": True}
    if op == "elu":
        consts = [args[i] if len(args) > i else kw.get(k, 1.0)
                  for i, k in ((1, "alpha"), (2, "scale"), (3, "input_scale"))]
        if v.dtype != "float32" or not all(_number(c) for c in consts):
            return None
        return "unary", "elu", (x,), dict(zip(("alpha", "scale", "input_scale"),
                                              map(float, consts)))
    decimals = kw.get("decimals", args[1] if len(args) > 1 else 0)
    if not isinstance(decimals, int) or isinstance(decimals, bool) or \
            (decimals and v.dtype != "float32"):
        return None
    return "unary", "round", (x,), {"decimals": decimals}


def _number(a: Any) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool)


def _clamp(args: tuple, kw: dict) -> tuple:
    """Scalar bounds are attrs; a tensor bound makes it maximum / minimum, or clamp_t with
    the bounds as operands min(max(x, lo), hi) when both are given."""
    lo = args[1] if len(args) > 1 else kw.get("min")
    hi = args[2] if len(args) > 2 else kw.get("max")
    if not isinstance(lo, Ref) and not isinstance(hi, Ref):
        return "clamp", "clamp", (args[0],), {"lo": lo, "hi": hi}
    if lo is None:
        return "binary", "min", (args[0], hi), {}
    if hi is None:
        return "binary", "max", (args[0], lo), {}
    return "clamp", "clamp_t", (args[0], lo, hi), {}


def vocabulary() -> set[tuple[str, str]]:
    """Every (kind, name) normalise() can give."""
    pairs = {("unary", n) for n in UNARY.values()} | {("binary", n) for n in BINARY.values()}
    pairs |= EXTRA | {("cast", t) for t in ELEMENT_TYPES}
    pairs |= {("reduce", n) for n in REDUCE.values()} | {("view", n) for n in VIEWS}
    return pairs


def _safe_const(name: str, b: Any, dtype: str) -> bool:
    if isinstance(b, Ref) or isinstance(b, bool) or not isinstance(b, int):
        return False
    if name in ("shl", "shr"):
        return 0 <= b < BITS[dtype]
    return b not in (0, -1)


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
        return f"{v.op} ({v.dtype} result; float32, int64, int32 and bool are fused)"
    return v.op


def check_supported_graph(values: dict[str, Value]) -> None:
    for v in values.values():
        if v.op in ("input", "param") and v.dtype not in ELEMENT_TYPES:
            raise NotCovered(f"{v.op} {v.name} has dtype {v.dtype}; float32, int64, int32 "
                             "and bool are covered")
