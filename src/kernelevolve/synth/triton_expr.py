"""Triton spelling of one planned node, as tables keyed by ops.py's (kind, op) pairs, and the
`@triton.jit` helpers a module includes when its kernels call them (triton_math.py), and one
reduction step (`reduce_step`, row and mid kernels).

The tables mirror cpp_expr.py's: SPELL (float / bool compute types), INT_SPELL (int64 /
int32) and INT_SAME, UNSUPPORTED / INT_UNSUPPORTED with the reason, BY_WRITER for what the
kernel writer (emit_triton.py) spells itself. Only functions that exist both in the
interpreter (TRITON_INTERPRET=1) and on GPUs are used: tl.exp / log / exp2 / log2 / sin / cos /
sqrt / floor / ceil / abs / where / math.erf / math.fma and bit casts; the rest is written
out from them (tests/test_synth_ops.py checks every pair is covered).
"""
from __future__ import annotations

from typing import Callable

from kernelevolve.synth.capture import NotCovered, Ref
from kernelevolve.synth.cpp_expr import power_product, ten_pow
from kernelevolve.synth.kernel import KNode, Reduction
from kernelevolve.synth.ops import FLOAT_UNSPELLED, VIEWS
from kernelevolve.synth.triton_math import HELPERS  # noqa: F401  (the emitter reads it here)
from kernelevolve.synth.writer import INTS

TL = {"float32": "tl.float32", "int64": "tl.int64", "int32": "tl.int32", "bool": "tl.int1"}

Spell = Callable[[KNode, list, str], str]


def lit(a, dtype: str = "float32") -> str:
    if isinstance(a, bool):
        return "True" if a else "False"
    if isinstance(a, int) and dtype in INTS:
        return repr(a)
    if isinstance(a, (int, float)):
        f = float(a)
        if f != f or f in (float("inf"), -float("inf")):
            return f'float("{f}")'
        return repr(f)
    raise NotCovered(f"cannot write {a!r} as a Triton literal")


def _t(template: str) -> Spell:
    return lambda n, x, t: template.format(*x)


_TANH = "(2.0 * tl.sigmoid(2.0 * ({0})) - 1.0)"
_UNARY = {
    "abs": "tl.abs({0})", "neg": "(-{0})", "exp": "tl.exp({0})", "log": "tl.log({0})",
    "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "sigmoid": "tl.sigmoid({0})",
    "tanh": _TANH, "relu": "tl.where({0} < 0.0, 0.0, {0})", "sin": "tl.sin({0})",
    "cos": "tl.cos({0})", "erf": "tl.math.erf({0})", "reciprocal": "(1.0 / {0})",
    "log1p": "_ke_log1p({0})", "expm1": "_ke_expm1({0})", "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})", "not": "({0} == 0)", "exp2": "tl.exp2({0})", "log2": "tl.log2({0})",
    "square": "({0} * {0})", "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, 0.0))",
    # NaN at +-inf, as torch's vectorised gelu (x - x is 0 exactly when x is finite)
    "gelu": "tl.where(({0} - {0}) == 0.0, 0.5 * {0} * (1.0 + tl.math.erf({0} * "
            "0.7071067811865476)), {0} - {0})",
    "gelu_tanh": "(0.5 * {0} * (1.0 + " + _TANH.format(
        "0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})") + "))",
    "bnot": "({0} == 0)", "tan": "(tl.sin({0}) / tl.cos({0}))", "asin": "_ke_asin({0})",
    "acos": "_ke_acos({0})", "atan": "_ke_atan({0})", "sinh": "_ke_sinh({0})",
    "cosh": "_ke_cosh({0})", "asinh": "_ke_asinh({0})", "acosh": "_ke_acosh({0})",
    "atanh": "_ke_atanh({0})", "erfc": "_ke_erfc({0})", "trunc": "_ke_trunc({0})",
    "log10": "(tl.log2({0}) * 0.30102999566398120)",
}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "xor": "!="}
# Nested selects rather than | and & on masks: the interpreter cannot or a scalar's mask (a
# 0-d value: a scalar operand) with a block's.
_BINARY = {
    # maximum / minimum propagate NaN (either side); fmax / fmin return the other side
    "max": "tl.where({0} != {0}, {0}, tl.where({0} > {1}, {0}, {1}))",
    "min": "tl.where({0} != {0}, {0}, tl.where({0} < {1}, {0}, {1}))",
    "fmax": "tl.where({1} != {1}, {0}, tl.where({0} > {1}, {0}, {1}))",
    "fmin": "tl.where({1} != {1}, {0}, tl.where({0} < {1}, {0}, {1}))",
    # logical and / or of any operand type (floats included: nonzero is true)
    "and": "tl.where({0} != 0, {1} != 0, False)", "or": "tl.where({0} != 0, True, {1} != 0)",
    "rsub": "({1} - {0})", "leaky_relu": "tl.where({0} > 0, {0}, {0} * {1})",
    "rem": "_ke_rem({0}, {1})", "floordiv": "_ke_ffloordiv({0}, {1})",
    "truncdiv": "_ke_trunc({0} / {1})", "fmod": "({0} % {1})",
    "atan2": "_ke_atan2({0}, {1})", "hypot": "_ke_hypot({0}, {1})",
    "copysign": "_ke_copysign({0}, {1})", "nextafter": "_ke_nextafter({0}, {1})",
}


def _pow(n: KNode, x: list, t: str) -> str:
    """The C++ emitter's products and square roots (cpp_expr._pow); a general exponent (or
    base) is _ke_pow, in float64 inside (triton_math.py), a literal operand broadcast to the
    other's shape."""
    a, b = x
    e = n.args[1]
    if isinstance(e, Ref) or isinstance(e, bool) or isinstance(n.args[0], (int, float)):
        if not isinstance(n.args[0], Ref):
            a = f"(tl.zeros_like({b}) + {a})"
        if not isinstance(e, Ref):
            b = f"(tl.zeros_like({a}) + {b})"
        return f"_ke_pow({a}, {b})"
    e = float(e)
    special = {0.5: f"tl.sqrt({a})", -0.5: f"(1.0 / tl.sqrt({a}))", 0.0: f"tl.where({a} == {a}, 1.0, 1.0)"}
    if e in special:
        return special[e]
    if e != int(e) or not 1 <= abs(e) <= 16:
        return f"_ke_pow({a}, (tl.zeros_like({a}) + {b}))"
    prod = power_product(a, int(abs(e)))
    return prod if e > 0 else f"(1.0 / {prod})"


def _compare_eq(n: KNode, x: list, t: str) -> str:
    # isinf(x) arrives as |x| == inf (ops.py)
    return f"(tl.abs({x[0]}) == {x[1]})" if n.attrs.get("abs") else f"({x[0]} == {x[1]})"


def _round(n: KNode, x: list, t: str) -> str:
    """Half to even (_ke_rint); with decimals as torch computes them (cpp_expr._round)."""
    d = n.attrs.get("decimals", 0)
    if not d:
        return f"_ke_rint({x[0]})"
    scale = lit(ten_pow(d))
    if d > 0:
        return f"(_ke_rint({x[0]} * {scale}) / {scale})"
    return f"(_ke_rint({x[0]} / {scale}) * {scale})"


def _elu(n: KNode, x: list, t: str) -> str:
    import numpy as np

    a = x[0]
    neg = lit(float(np.float32(n.attrs["alpha"]) * np.float32(n.attrs["scale"])))
    pos, inp = lit(n.attrs["scale"]), lit(n.attrs["input_scale"])
    return f"tl.where({a} <= 0.0, _ke_expm1({a} * {inp}) * {neg}, {a} * {pos})"


def _clamp(n: KNode, x: list, t: str) -> str:
    """Selects, not tl.maximum / minimum (which drop a NaN x on GPUs); a NaN bound gives NaN
    everywhere, as torch.clamp."""
    out = x[0]
    lo, hi = n.attrs["lo"], n.attrs["hi"]
    if any(isinstance(b, float) and b != b for b in (lo, hi)):
        return f'({out} * 0.0 + float("nan"))'
    if lo is not None:
        out = f"tl.where({out} < {lit(lo, t)}, {lit(lo, t)}, {out})"
    if hi is not None:
        out = f"tl.where({out} > {lit(hi, t)}, {lit(hi, t)}, {out})"
    return out


def _clamp_t(n: KNode, x: list, t: str) -> str:
    a, lo, hi = x
    m = f"tl.where({a} != {a}, {a}, tl.where({a} > {lo}, {a}, {lo}))"
    return f"tl.where({m} != {m}, {m}, tl.where({m} < {hi}, {m}, {hi}))"


def _bitwise(op: str) -> Spell:
    """& | ^ on integers; on bools the logical forms (selects and !=, see _BINARY)."""
    logical = {"&": "tl.where({0}, {1}, False)", "|": "tl.where({0}, True, {1})",
               "^": "({0} != {1})"}[op]
    return lambda n, x, t: (logical if t == "bool" else f"({{0}} {op} {{1}})").format(*x)


def _cast(n: KNode, x: list, t: str) -> str:
    return f"({x[0]} != 0)" if n.op == "bool" else f"({x[0]}).to({TL[n.op]})"


SPELL: dict[tuple[str, str], Spell] = {
    **{("unary", op): _t(s) for op, s in _UNARY.items()},
    **{("binary", op): _t(f"({{0}} {s} {{1}})") for op, s in _INFIX.items()},
    **{("binary", op): _t(s) for op, s in _BINARY.items()},
    ("binary", "eq"): _compare_eq, ("binary", "pow"): _pow, ("unary", "round"): _round,
    ("unary", "elu"): _elu, ("clamp", "clamp"): _clamp, ("clamp", "clamp_t"): _clamp_t,
    ("binary", "band"): _bitwise("&"), ("binary", "bor"): _bitwise("|"),
    ("binary", "bxor"): _bitwise("^"), ("where", "where"): _t("tl.where({0}, {1}, {2})"),
    ("bucketize", "bucketize"):
        lambda n, x, t: f"_ke_bucketize({x[0]}, {x[1]}, {x[1]}_n, {n.attrs['right']})",
    **{("cast", d): _cast for d in TL},
    **{("view", v): _t("{0}") for v in VIEWS},
}
UNSUPPORTED = dict(FLOAT_UNSPELLED)
BY_WRITER = {
    ("gather", "embedding"): "loaded from the table row the kernel writer indexes",
    **{("reduce", r): "the kernel writer's reduction walks" for r in
       ("sum", "mean", "max", "min", "var")},
}


def _int_pow(n: KNode, x: list, t: str) -> str:
    e = n.args[1]
    if isinstance(e, Ref) or e not in (1, 2):
        raise NotCovered("integer pow is not covered by the Triton emitter")
    return x[0] if e == 1 else f"({x[0]} * {x[0]})"


INT_SPELL: dict[tuple[str, str], Spell] = {
    ("unary", "relu"): _t("tl.maximum({0}, 0)"), ("unary", "bnot"): _t("(~{0})"),
    ("unary", "sign"): _t("tl.where({0} > 0, 1, tl.where({0} < 0, -1, 0))"),
    ("unary", "square"): _t("({0} * {0})"), ("unary", "abs"): _t("tl.abs({0})"),
    **{("unary", op): _t("{0}") for op in ("floor", "ceil", "round", "trunc")},
    ("binary", "rem"): _t("_ke_rem({0}, {1})"),
    ("binary", "floordiv"): _t("_ke_floordiv({0}, {1})"),
    ("binary", "truncdiv"): _t("({0} // {1})"), ("binary", "fmod"): _t("({0} % {1})"),
    ("binary", "shl"): _t("({0} << {1})"), ("binary", "shr"): _t("({0} >> {1})"),
    ("binary", "pow"): _int_pow,
}
# Pairs an integer type may compute (ops.INT_COMPUTE) whose float spelling is right as is
# (Triton's integer + - * and negation wrap around, as torch's do).
INT_SAME = {("binary", op) for op in ("add", "sub", "mul", "rsub", "eq", "ne", "lt", "le", "gt",
                                      "ge", "and", "or", "band", "bor", "bxor", "max", "min",
                                      "fmax", "fmin")} | \
    {("unary", "neg"), ("unary", "not"), ("where", "where"), ("clamp", "clamp"),
     ("clamp", "clamp_t"), ("bucketize", "bucketize")} | \
    {k for k in SPELL if k[0] in ("cast", "view")}
INT_UNSUPPORTED: dict[tuple[str, str], str] = {}


def expr(n: KNode, x: list, t: str = "float32") -> str:
    key = (n.kind, n.op)
    if t in INTS and key in INT_SPELL:
        return INT_SPELL[key](n, x, t)
    if t in INTS and key not in INT_SAME:
        reason = INT_UNSUPPORTED.get(key, "no integer spelling")
        raise NotCovered(f"{n.source_op or n.op} on {t} is not covered by the Triton emitter "
                         f"({reason})")
    if key in SPELL:
        return SPELL[key](n, x, t)
    reason = UNSUPPORTED.get(key) or BY_WRITER.get(key) or "no spelling"
    raise NotCovered(f"{n.source_op or n.op} ({n.kind} {n.op}) on {t} is not covered by the "
                     f"Triton emitter: {reason}")


def reduce_step(r: Reduction, v: str) -> str:
    """One tile into an accumulator (row and mid kernels); max / min keep a NaN once seen (torch's amax / amin)."""
    acc = f"acc_{r.node}"
    if r.propagates_nan:
        cmp = ">" if r.op == "max" else "<"
        return f"{acc} = tl.where(({v} {cmp} {acc}) | ({v} != {v}), {v}, {acc})"
    return f"{acc} += {v}"
