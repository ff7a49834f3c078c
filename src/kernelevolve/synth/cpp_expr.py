"""C++ spelling of one planned node: literals, type promotion, the compute type of a node and
its expression (float ops by libm or the prelude's vectorisable approximations; integer ops
wrapping around and rounding as torch does)."""
from __future__ import annotations

from kernelevolve.synth.capture import NotCovered, Ref
from kernelevolve.synth.kernel import KNode
from kernelevolve.synth.writer import INTS

CTYPE = {"float32": "float", "bool": "bool", "int64": "int64_t", "int32": "int32_t"}
# Ops worth caching between passes and that weigh in the parallel threshold.
EXPENSIVE = {"exp", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh", "log", "sin", "cos", "log1p",
             "expm1", "exp2", "log2", "pow"}


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


def _int_expr(n: KNode, x: list[str], t: str) -> str | None:
    """Integer spellings that differ from the float ones (wrapping, Python rounding)."""
    a, T = x[0], CTYPE[t]
    if n.kind == "unary":
        return {"neg": f"ke_wrap_sub({T}(0), {a})", "relu": f"({a} > 0 ? {a} : {T}(0))",
                "abs": f"({a} < 0 ? ke_wrap_sub({T}(0), {a}) : {a})",
                "sign": f"{T}(({a} > 0) - ({a} < 0))", "square": f"ke_wrap_mul({a}, {a})",
                "bnot": f"{T}(~{a})"}.get(n.op) or _no_int(n)
    if n.kind == "binary":
        b = x[1]
        if n.op == "pow":
            e = n.args[1]
            if isinstance(e, Ref) or e not in (1, 2):
                return _no_int(n)
            return a if e == 1 else f"ke_wrap_mul({a}, {a})"
        return {"add": f"ke_wrap_add({a}, {b})", "sub": f"ke_wrap_sub({a}, {b})",
                "mul": f"ke_wrap_mul({a}, {b})", "rsub": f"ke_wrap_sub({b}, {a})",
                "rem": f"ke_irem({a}, {b})", "floordiv": f"ke_ifloordiv({a}, {b})",
                "truncdiv": f"({a} / {b})", "shl": f"ke_shl({a}, int({b}))",
                "shr": f"{T}({a} >> int({b}))"}.get(n.op)
    return None


def _no_int(n: KNode):
    raise NotCovered(f"{n.source_op or n.op} on integers is not covered by the C++ emitter")


def expr(n: KNode, x: list[str], uniform_divisor: bool = False, t: str = "float32") -> str:
    """The C++ expression of a non-reduction node over operand expressions `x` (already of the
    compute type `t`); `uniform_divisor`: a division's divisor is the same along a row."""
    a = x[0] if x else ""
    if t in INTS and n.kind in ("unary", "binary"):
        spelled = _int_expr(n, x, t)
        if spelled is not None:
            return spelled
    if n.kind == "bucketize":
        return f"ke_bucketize({a}, {x[1]}, {x[1]}_n, {lit(n.attrs['right'])})"
    if n.kind == "gather":
        raise NotCovered("an embedding lookup is read through its row pointer")
    if n.kind == "unary":
        return {
            "abs": f"std::fabs({a})", "neg": f"(-{a})", "exp": f"KE_EXP({a})",
            "log": f"std::log({a})", "sqrt": f"std::sqrt({a})", "rsqrt": f"(1.0f / std::sqrt({a}))",
            "sigmoid": f"ke_sigmoid({a})", "tanh": f"ke_tanh({a})",
            "relu": f"({a} < 0.0f ? 0.0f : {a})", "sin": f"std::sin({a})", "cos": f"std::cos({a})",
            "erf": f"ke_erf({a})", "reciprocal": f"(1.0f / {a})", "log1p": f"std::log1p({a})",
            "expm1": f"std::expm1({a})", "floor": f"std::floor({a})", "ceil": f"std::ceil({a})",
            "not": f"(!{a})", "exp2": f"std::exp2({a})", "log2": f"std::log2({a})",
            "sign": f"(float)(({a} > 0.0f) - ({a} < 0.0f))", "square": f"({a} * {a})",
            "gelu": f"({a} * ke_normal_cdf({a}))",
            "gelu_tanh": f"(0.5f * {a} * (1.0f + ke_tanh(0.79788456080286536f * "
                         f"({a} + 0.044715f * {a} * {a} * {a}))))",
            "bnot": f"(!{a})",
        }[n.op]
    if n.kind == "binary":
        b = x[1]
        if n.op == "pow":
            exp = n.args[1]
            if not isinstance(exp, Ref):
                if float(exp) == 2.0:
                    return f"({a} * {a})"
                if float(exp) == 0.5:
                    return f"std::sqrt({a})"
                if float(exp) == 1.0:
                    return a
                if float(exp) == -1.0:
                    return f"(1.0f / {a})"
            return f"std::pow({a}, {b})"
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=",
               "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&&", "or": "||",
               "band": "&", "bor": "|", "bxor": "^"}
        if n.op == "div" and uniform_divisor:
            # a per-row or constant divisor: one reciprocal per row (hoisted), a multiply each
            return f"({a} * (1.0f / {b}))"
        if n.op in ops:
            return f"({a} {ops[n.op]} {b})"
        if n.op in ("shl", "shr"):
            raise NotCovered(f"{n.source_op} on {t} is not covered")
        # maximum / minimum propagate NaN (either side); fmax / fmin return the other side
        return {"max": f"(({a} > {b} || {a} != {a}) ? {a} : {b})",
                "min": f"(({a} < {b} || {a} != {a}) ? {a} : {b})",
                "fmax": f"(({a} > {b} || {b} != {b}) ? {a} : {b})",
                "fmin": f"(({a} < {b} || {b} != {b}) ? {a} : {b})",
                "rsub": f"({b} - {a})", "leaky_relu": f"({a} > 0.0f ? {a} : {a} * {b})",
                "rem": f"ke_frem({a}, {b})", "floordiv": f"ke_ffloordiv({a}, {b})",
                "truncdiv": f"std::trunc({a} / {b})"}[n.op]
    if n.kind == "where":
        return f"({a} ? {x[1]} : {x[2]})"
    if n.kind == "clamp":
        out = a
        if n.attrs["lo"] is not None:
            lo = lit(n.attrs["lo"], t)
            out = f"({out} < {lo} ? {lo} : {out})"
        if n.attrs["hi"] is not None:
            hi = lit(n.attrs["hi"], t)
            out = f"({out} > {hi} ? {hi} : {out})"
        return out
    if n.kind == "cast":
        return f"({a} != 0)" if n.op == "bool" else f"({CTYPE[n.op]})({a})"
    if n.kind == "view":
        return a
    raise NotCovered(f"no C++ spelling for {n.kind} {n.op}")
