"""C++ spelling of one planned node, as tables keyed by ops.py's (kind, op) pairs.

SPELL gives the float / bool spelling of each pair: a function (node, operand expressions
already of the compute type, compute type) -> expression, using libm where it vectorises and
the prelude's branch-free math (cpp_prelude.py) elsewhere. INT_SPELL overrides it for int64
/ int32 compute types (wrapping arithmetic, Python rounding); INT_SAME are the pairs whose
float spelling is right for integers too. UNSUPPORTED and INT_UNSUPPORTED say why a pair has
no spelling; BY_WRITER are the pairs the kernel writer (emit_cpp.py) spells itself.
tests/test_synth_ops.py checks that every pair of the vocabulary is in one of them.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from kernelevolve.synth.capture import NotCovered, Ref
from kernelevolve.synth.kernel import KNode
from kernelevolve.synth.ops import FLOAT_UNSPELLED, VIEWS
from kernelevolve.synth.writer import INTS

CTYPE = {"float32": "float", "bool": "bool", "int64": "int64_t", "int32": "int32_t"}

Spell = Callable[[KNode, list, str], str]


def lit(a, dtype: str = "float32") -> str:
    """`a` as a C++ literal of type `dtype` (float32, an integer type or bool)."""
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, int) and dtype in INTS:
        if dtype == "int64" and a == -2**63:
            return "INT64_MIN"
        return f"{CTYPE[dtype]}({a}LL)"
    if isinstance(a, (int, float)):
        f = float(a)
        if f != f:
            return "NAN"
        if f in (float("inf"), -float("inf")):
            return "INFINITY" if f > 0 else "(-INFINITY)"
        return f"{f!r}f"
    raise NotCovered(f"cannot write {a!r} as a C++ literal")


def _t(template: str) -> Spell:
    """A spelling from a format string over the operands ({0}, {1}, {2})."""
    return lambda n, x, t: template.format(*x)


_UNARY = {
    "abs": "std::fabs({0})", "neg": "(-{0})", "exp": "KE_EXP({0})", "log": "ke_log({0})",
    "sqrt": "std::sqrt({0})", "rsqrt": "(1.0f / std::sqrt({0}))", "sigmoid": "ke_sigmoid({0})",
    "tanh": "ke_tanh({0})", "relu": "({0} < 0.0f ? 0.0f : {0})", "sin": "ke_sin({0})",
    "cos": "ke_cos({0})", "erf": "ke_erf({0})", "reciprocal": "(1.0f / {0})",
    "log1p": "ke_log1p({0})", "expm1": "ke_expm1({0})", "floor": "std::floor({0})",
    "ceil": "std::ceil({0})", "not": "(!{0})", "exp2": "ke_exp2({0})", "log2": "ke_log2({0})",
    "sign": "(float)(({0} > 0.0f) - ({0} < 0.0f))", "square": "({0} * {0})",
    # torch's vectorised gelu is NaN at +-inf (x - x is 0 exactly when x is finite)
    "gelu": "(({0} - {0}) == 0.0f ? {0} * ke_normal_cdf({0}) : ({0} - {0}))",
    "gelu_tanh": "(0.5f * {0} * (1.0f + ke_tanh(0.79788456080286536f * "
                 "({0} + 0.044715f * {0} * {0} * {0}))))",
    "bnot": "(!{0})", "tan": "ke_tan({0})", "asin": "ke_asin({0})", "acos": "ke_acos({0})",
    "atan": "ke_atan({0})", "sinh": "ke_sinh({0})", "cosh": "ke_cosh({0})",
    "asinh": "ke_asinh({0})", "acosh": "ke_acosh({0})", "atanh": "ke_atanh({0})",
    "erfc": "ke_erfc({0})", "trunc": "std::trunc({0})", "log10": "ke_log10({0})",
}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||", "band": "&", "bor": "|",
          "bxor": "^"}
_BINARY = {
    # maximum / minimum propagate NaN (either side); fmax / fmin return the other side
    "max": "(({0} > {1} || {0} != {0}) ? {0} : {1})",
    "min": "(({0} < {1} || {0} != {0}) ? {0} : {1})",
    "fmax": "(({0} > {1} || {1} != {1}) ? {0} : {1})",
    "fmin": "(({0} < {1} || {1} != {1}) ? {0} : {1})",
    "rsub": "({1} - {0})", "leaky_relu": "({0} > 0.0f ? {0} : {0} * {1})",
    "truncdiv": "std::trunc({0} / {1})",
    "atan2": "ke_atan2({0}, {1})", "hypot": "ke_hypot({0}, {1})",
    "copysign": "std::copysign({0}, {1})", "nextafter": "ke_nextafter({0}, {1})",
    "xor": "({0} != {1})",
}


def _pow(n: KNode, x: list, t: str) -> str:
    """x ** e. torch computes e = 2, 3 and -2 as products (bit-identical here), 0.5 / -0.5 as
    (r)sqrt; other small integer exponents are products here too (within 2 ulp of torch's
    std::pow, which is scalar libm: x ** 3 was 0.16x eager as std::pow). A general exponent
    is ke_pow (cpp_pow.py: in double inside, since exp(e log x) in float loses |e log2 x|
    ulps)."""
    a, b = x
    e = n.args[1]
    if not isinstance(e, Ref) and not isinstance(e, bool):
        e = float(e)
        special = {0.5: f"std::sqrt({a})", -0.5: f"(1.0f / std::sqrt({a}))", 0.0: "1.0f"}
        if e in special:
            return special[e]
        if e == int(e) and 1 <= abs(e) <= 16:
            prod = power_product(a, int(abs(e)))
            return prod if e > 0 else f"(1.0f / {prod})"
    return f"ke_pow({a}, {b})"


def power_product(a: str, k: int) -> str:
    """a ** k for k >= 1 as products: a * a * a for 3 (torch's own order), by squaring above."""
    if k <= 3:
        return "(" + " * ".join([a] * k) + ")"
    half = power_product(a, k // 2)
    return f"({half} * {half}" + (f" * {a})" if k % 2 else ")")


def fmod_steps(b) -> int:
    """Reduction steps ke_fmod needs for the divisor `b`: 13 for a tensor (any exponent gap),
    fewer for a constant (|a| <= FLT_MAX bounds the gap by 127 - exponent(b))."""
    if isinstance(b, Ref) or not isinstance(b, (int, float)):
        return 13
    y = abs(float(np.float32(b)))
    if y == 0 or y != y or y == float("inf"):
        return 1
    gap = 127 - (math.frexp(y)[1] - 1)
    return min(13, -(-max(gap - 22, 0) // 22) + 1)


def _fmod_family(name: str) -> Spell:
    return lambda n, x, t: f"{name}<{fmod_steps(n.args[1])}>({x[0]}, {x[1]})"


def _compare_eq(n: KNode, x: list, t: str) -> str:
    # isinf(x) arrives as |x| == inf (ops.py)
    return f"(std::fabs({x[0]}) == {x[1]})" if n.attrs.get("abs") else f"({x[0]} == {x[1]})"


def ten_pow(d: int) -> float:
    """10^|d| as torch's round(decimals=d) uses it: std::pow(10, |d|) rounded to float."""
    return float(np.float32(10.0 ** abs(d))) if abs(d) <= 38 else float("inf")


def _round(n: KNode, x: list, t: str) -> str:
    """torch.round: half to even; with decimals d, round(x * 10^d) / 10^d in float (or
    round(x / 10^-d) * 10^-d), 10^|d| rounded to float as torch does."""
    d = n.attrs.get("decimals", 0)
    if not d:
        return f"std::nearbyint({x[0]})"
    scale = lit(ten_pow(d))
    if d > 0:
        return f"(std::nearbyint({x[0]} * {scale}) / {scale})"
    return f"(std::nearbyint({x[0]} / {scale}) * {scale})"


def _elu(n: KNode, x: list, t: str) -> str:
    """torch's elu: x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale (alpha * scale
    rounded to float, as torch computes it)."""
    a = x[0]
    neg = lit(float(np.float32(n.attrs["alpha"]) * np.float32(n.attrs["scale"])))
    pos, inp = lit(n.attrs["scale"]), lit(n.attrs["input_scale"])
    return f"({a} <= 0.0f ? ke_expm1({a} * {inp}) * {neg} : {a} * {pos})"


def _clamp(n: KNode, x: list, t: str) -> str:
    out = x[0]
    lo, hi = n.attrs["lo"], n.attrs["hi"]
    if any(isinstance(b, float) and b != b for b in (lo, hi)):
        return "NAN"    # torch.clamp with a NaN bound is NaN everywhere
    if lo is not None:
        out = f"({out} < {lit(lo, t)} ? {lit(lo, t)} : {out})"
    if hi is not None:
        out = f"({out} > {lit(hi, t)} ? {lit(hi, t)} : {out})"
    return out


def _clamp_t(n: KNode, x: list, t: str) -> str:
    """min(max(x, lo), hi) with NaN from any operand, as torch.clamp with tensor bounds."""
    a, lo, hi = x
    m = f"(({a} > {lo} || {a} != {a}) ? {a} : {lo})"
    return f"(({m} < {hi} || {m} != {m}) ? {m} : {hi})"


def _cast(n: KNode, x: list, t: str) -> str:
    if n.op == "float32" and t == "bool":
        # g++ 12 vectorises a select, not a bool -> float conversion, of a comparison: var_mean's
        # count of infs over dim 1 of 16x256x256 took 0.88 ms, 0.09 ms once it vectorised
        return f"({x[0]} ? 1.0f : 0.0f)"
    return f"({x[0]} != 0)" if n.op == "bool" else f"({CTYPE[n.op]})({x[0]})"


SPELL: dict[tuple[str, str], Spell] = {
    **{("unary", op): _t(s) for op, s in _UNARY.items()},
    **{("binary", op): _t(f"({{0}} {s} {{1}})") for op, s in _INFIX.items()},
    **{("binary", op): _t(s) for op, s in _BINARY.items()},
    ("binary", "eq"): _compare_eq, ("binary", "pow"): _pow, ("unary", "round"): _round,
    ("binary", "fmod"): _fmod_family("ke_fmod"), ("binary", "rem"): _fmod_family("ke_frem"),
    ("binary", "floordiv"): _fmod_family("ke_ffloordiv"),
    ("unary", "elu"): _elu, ("clamp", "clamp"): _clamp, ("clamp", "clamp_t"): _clamp_t,
    # a bit blend of both sides (cpp_prelude.py): a side read straight from memory (a scalar or
    # per-row operand, `in1[0]`) would otherwise become a conditional load g++ cannot vectorise
    ("where", "where"): _t("ke_select({0}, {1}, {2})"),
    ("bucketize", "bucketize"):
        lambda n, x, t: f"ke_bucketize({x[0]}, {x[1]}, {x[1]}_n, {lit(n.attrs['right'])})",
    **{("cast", d): _cast for d in CTYPE},
    **{("view", v): _t("{0}") for v in VIEWS},
}
UNSUPPORTED = dict(FLOAT_UNSPELLED)
BY_WRITER = {
    ("gather", "embedding"): "read through the table row pointer the kernel writer sets up",
    **{("reduce", r): "the kernel writer's reduction passes" for r in
       ("sum", "mean", "max", "min", "var")},
}


def _int_pow(n: KNode, x: list, t: str) -> str:
    e = n.args[1]
    if isinstance(e, Ref) or e not in (1, 2):
        raise NotCovered(f"{n.source_op or n.op} on integers with exponent {e!r} is not "
                         "covered by the C++ emitter")
    return x[0] if e == 1 else f"ke_wrap_mul({x[0]}, {x[0]})"


def _int(template: str) -> Spell:
    """An integer spelling; {T} is the C++ type."""
    return lambda n, x, t: template.format(*x, T=CTYPE[t])


INT_SPELL: dict[tuple[str, str], Spell] = {
    ("unary", "neg"): _int("ke_wrap_sub({T}(0), {0})"),
    ("unary", "relu"): _int("({0} > 0 ? {0} : {T}(0))"),
    ("unary", "abs"): _int("({0} < 0 ? ke_wrap_sub({T}(0), {0}) : {0})"),
    ("unary", "sign"): _int("{T}(({0} > 0) - ({0} < 0))"),
    ("unary", "square"): _int("ke_wrap_mul({0}, {0})"), ("unary", "bnot"): _int("{T}(~{0})"),
    **{("unary", op): _int("{0}") for op in ("floor", "ceil", "round", "trunc")},
    ("binary", "add"): _int("ke_wrap_add({0}, {1})"),
    ("binary", "sub"): _int("ke_wrap_sub({0}, {1})"),
    ("binary", "mul"): _int("ke_wrap_mul({0}, {1})"),
    ("binary", "rsub"): _int("ke_wrap_sub({1}, {0})"),
    ("binary", "rem"): _int("ke_irem({0}, {1})"),
    ("binary", "floordiv"): _int("ke_ifloordiv({0}, {1})"),
    ("binary", "truncdiv"): _int("({0} / {1})"), ("binary", "fmod"): _int("({0} % {1})"),
    ("binary", "shl"): _int("ke_shl({0}, int({1}))"),
    ("binary", "shr"): _int("{T}({0} >> int({1}))"), ("binary", "pow"): _int_pow,
}
# Pairs an integer type may compute (ops.INT_COMPUTE) whose float spelling is right as is.
INT_SAME = {("binary", op) for op in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "band",
                                      "bor", "bxor", "max", "min", "fmax", "fmin")} | \
    {("unary", "not"), ("where", "where"), ("clamp", "clamp"), ("clamp", "clamp_t"),
     ("bucketize", "bucketize")} | {k for k in SPELL if k[0] in ("cast", "view")}
INT_UNSUPPORTED: dict[tuple[str, str], str] = {}


def expr(n: KNode, x: list, uniform_divisor: bool = False, t: str = "float32") -> str:
    """The C++ expression of a non-reduction node over operand expressions `x` (already of the
    compute type `t`); `uniform_divisor`: a division's divisor is the same along a row."""
    key = (n.kind, n.op)
    if t in INTS and key in INT_SPELL:
        return INT_SPELL[key](n, x, t)
    if t in INTS and key not in INT_SAME:
        reason = INT_UNSUPPORTED.get(key, "no integer spelling")
        raise NotCovered(f"{n.source_op or n.op} on {t} is not covered by the C++ emitter "
                         f"({reason})")
    if key == ("binary", "div") and uniform_divisor:
        # a per-row or constant divisor: one reciprocal per row (hoisted), a multiply each
        return f"({x[0]} * (1.0f / {x[1]}))"
    if key in SPELL:
        return SPELL[key](n, x, t)
    reason = UNSUPPORTED.get(key) or BY_WRITER.get(key) or "no spelling"
    raise NotCovered(f"{n.source_op or n.op} ({n.kind} {n.op}) on {t} is not covered by the "
                     f"C++ emitter: {reason}")
