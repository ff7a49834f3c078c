"""Triton spelling of one planned node: literals, the node's expression, and the jit helpers
(Python-rounding integer division and remainder, bucketize) a module includes when used."""
from __future__ import annotations

from kernelevolve.synth.capture import NotCovered, Ref
from kernelevolve.synth.kernel import KNode
from kernelevolve.synth.writer import INTS

TL = {"float32": "tl.float32", "int64": "tl.int64", "int32": "tl.int32", "bool": "tl.int1"}
# Python-rounding integer helpers and bucketize, emitted once into modules that use them.
HELPERS = {
    "_ke_trunc": ["@triton.jit", "def _ke_trunc(q):", "    # rounds toward zero",
                  "    return tl.where(q < 0, tl.ceil(q), tl.floor(q))"],
    "_ke_rem": ["@triton.jit", "def _ke_rem(a, b):",
             "    # a % b with the sign of b (Triton's % truncates, like C)",
             "    r = a % b", "    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)"],
    "_ke_floordiv": ["@triton.jit", "def _ke_floordiv(a, b):",
                  "    # a // b rounded toward minus infinity (Triton's // truncates, like C)",
                  "    q = a // b", "    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), "
                  "q - 1, q)"],
    "_ke_ffloordiv": ["@triton.jit", "def _ke_ffloordiv(a, b):",
                   "    # torch.floor_divide on floats: the exact multiple, not floor(a / b)",
                   "    mod = a % b  # on floats: fmod (truncated, exact)",
                   "    div = (a - mod) / b",
                   "    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)",
                   "    fl = tl.floor(div)",
                   "    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)",
                   "    zero = tl.where((a / b) < 0, -0.0, 0.0)",
                   "    return tl.where(b == 0, a / b, tl.where(div == 0, zero, fl))"],
    "_ke_bucketize": ["@triton.jit", "def _ke_bucketize(x, table, n, RIGHT: tl.constexpr):",
                  "    # boundaries before x, counted (sorted boundaries: torch.bucketize's index)",
                  "    count = tl.zeros_like(x).to(tl.int64)",
                  "    for j in range(0, n):",
                  "        b = tl.load(table + j)",
                  "        if RIGHT:",
                  "            count += ((b > x) == 0).to(tl.int64)",
                  "        else:",
                  "            count += ((b >= x) == 0).to(tl.int64)",
                  "    return count"],
}


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


def _int_expr(n: KNode, x: list[str]) -> str | None:
    a = x[0]
    if n.kind == "unary":
        return {"relu": f"tl.maximum({a}, 0)", "bnot": f"(~{a})",
                "sign": f"tl.where({a} > 0, 1, tl.where({a} < 0, -1, 0))",
                "square": f"({a} * {a})"}.get(n.op)
    if n.kind == "binary":
        b = x[1]
        if n.op == "pow":
            e = n.args[1]
            if isinstance(e, Ref) or e not in (1, 2):
                raise NotCovered("integer pow is not covered by the Triton emitter")
            return a if e == 1 else f"({a} * {a})"
        return {"rem": f"_ke_rem({a}, {b})", "floordiv": f"_ke_floordiv({a}, {b})",
                "truncdiv": f"({a} // {b})", "shl": f"({a} << {b})",
                "shr": f"({a} >> {b})"}.get(n.op)
    return None


def expr(n: KNode, x: list[str], t: str = "float32") -> str:
    a = x[0] if x else ""
    if t in INTS and n.kind in ("unary", "binary"):
        spelled = _int_expr(n, x)
        if spelled is not None:
            return spelled
    if n.kind == "bucketize":
        return f"_ke_bucketize({a}, {x[1]}, {x[1]}_n, {n.attrs['right']})"
    if n.kind == "unary":
        tanh = "(2.0 * tl.sigmoid(2.0 * ({0})) - 1.0)"
        return {
            "abs": f"tl.abs({a})", "neg": f"(-{a})", "exp": f"tl.exp({a})", "log": f"tl.log({a})",
            "sqrt": f"tl.sqrt({a})", "rsqrt": f"tl.rsqrt({a})", "sigmoid": f"tl.sigmoid({a})",
            "tanh": tanh.format(a), "relu": f"tl.where({a} < 0.0, 0.0, {a})", "sin": f"tl.sin({a})",
            "cos": f"tl.cos({a})", "erf": f"tl.math.erf({a})", "reciprocal": f"(1.0 / {a})",
            "log1p": f"tl.log(1.0 + {a})", "expm1": f"(tl.exp({a}) - 1.0)",
            "floor": f"tl.floor({a})", "ceil": f"tl.ceil({a})", "not": f"({a} == 0)",
            "exp2": f"tl.exp2({a})", "log2": f"tl.log2({a})", "square": f"({a} * {a})",
            "sign": f"tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0))",
            "gelu": f"(0.5 * {a} * (1.0 + tl.math.erf({a} * 0.7071067811865476)))",
            "gelu_tanh": "(0.5 * {0} * (1.0 + ".format(a) + tanh.format(
                f"0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})") + "))",
            "bnot": f"({a} == 0)",
        }[n.op]
    if n.kind == "binary":
        b = x[1]
        if n.op == "pow":
            e = n.args[1]
            if isinstance(e, Ref) or float(e) not in (2.0, 0.5, 1.0, -1.0, 3.0):
                raise NotCovered("pow with a general exponent is not covered by the Triton emitter")
            return {2.0: f"({a} * {a})", 0.5: f"tl.sqrt({a})", 1.0: a, -1.0: f"(1.0 / {a})",
                    3.0: f"({a} * {a} * {a})"}[float(e)]
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=",
               "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|",
               "band": "&", "bor": "|", "bxor": "^"}
        if n.op in ops:
            return f"({a} {ops[n.op]} {b})"
        if n.op in ("shl", "shr"):
            raise NotCovered(f"{n.source_op} on {t} is not covered")
        # maximum / minimum propagate NaN (either side); fmax / fmin return the other side
        return {"max": f"tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})",
                "min": f"tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})",
                "fmax": f"tl.where(({a} > {b}) | ({b} != {b}), {a}, {b})",
                "fmin": f"tl.where(({a} < {b}) | ({b} != {b}), {a}, {b})",
                "rsub": f"({b} - {a})",
                "leaky_relu": f"tl.where({a} > 0, {a}, {a} * {b})",
                "rem": f"_ke_rem({a}, {b})", "floordiv": f"_ke_ffloordiv({a}, {b})",
                "truncdiv": f"_ke_trunc({a} / {b})"}[n.op]
    if n.kind == "where":
        return f"tl.where({a}, {x[1]}, {x[2]})"
    if n.kind == "clamp":
        out = a
        if n.attrs["lo"] is not None:
            out = f"tl.maximum({out}, {lit(n.attrs['lo'], t)})"
        if n.attrs["hi"] is not None:
            out = f"tl.minimum({out}, {lit(n.attrs['hi'], t)})"
        return out
    if n.kind == "cast":
        return f"({a} != 0)" if n.op == "bool" else f"({a}).to({TL[n.op]})"
    if n.kind == "view":
        return a
    raise NotCovered(f"no Triton spelling for {n.kind} {n.op}")
