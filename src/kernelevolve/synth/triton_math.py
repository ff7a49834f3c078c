"""The `@triton.jit` helpers synthesized Triton modules include when their kernels call them:
Python-rounding integer division and remainder, bucketize, and float functions Triton has no
builtin for in both the interpreter and on GPUs, written from tl.exp / tl.log / tl.sqrt and bit
casts with the polynomials of cpp_math.COEFFS: log1p and expm1 (corrected for the rounding of
1 + x and of exp, so small arguments keep their relative accuracy), the inverse trigonometric
and hyperbolic functions, erfc, round half to even, copysign, nextafter, hypot. Each helper's
lines include the helpers it calls (emit_triton.py includes a helper when a kernel names it).
"""
from __future__ import annotations

from kernelevolve.synth.cpp_math import COEFFS

HELPERS: dict[str, list[str]] = {}


def _horner(var: str, y: str, name: str) -> list[str]:
    c = COEFFS[name][1]
    out = [f"    {var} = {c[-1]!r} * {y} + {c[-2]!r}"]
    return out + [f"    {var} = tl.math.fma({var}, {y}, {k!r})" for k in reversed(c[:-2])]


def _jit(signature: str, body: list[str], deps: tuple[str, ...] = ()) -> None:
    name = signature.split("(")[0]
    lines = [line for d in deps for line in HELPERS[d]]
    HELPERS[name] = lines + ["@triton.jit", f"def {signature}:", *body]


_INF = 'float("inf")'
_NAN = 'float("nan")'

_jit("_ke_trunc(q)", ["    # rounds toward zero",
                      "    return tl.where(q < 0, tl.ceil(q), tl.floor(q))"])
_jit("_ke_rem(a, b)", ["    # a % b with the sign of b (Triton's % truncates, like C)", "    r = a % b",
                       "    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)"])
_jit("_ke_floordiv(a, b)", [
    "    # a // b rounded toward minus infinity (Triton's // truncates, like C)",
    "    q = a // b", "    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)"])
_jit("_ke_ffloordiv(a, b)", [
    "    # torch.floor_divide on floats: the exact multiple, not floor(a / b)",
    "    mod = a % b  # on floats: fmod (truncated, exact)",
    "    div = (a - mod) / b",
    "    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)",
    "    fl = tl.floor(div)",
    "    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)",
    "    zero = tl.where((a / b) < 0, -0.0, 0.0)",
    "    return tl.where(b == 0, a / b, tl.where(div == 0, zero, fl))"])
_jit("_ke_pow(x, y)", [
    "    # C's pow (cpp_pow.py's ke_pow): 2^(y log2|x|) in float64, where a float exp(y log x)",
    "    # loses |y log2 x| ulps; y = 0 and x = 1 give 1 beside NaN, zero and infinite x and",
    "    # infinite y by their limits, the sign of a negative x to an odd integer y, NaN for a",
    "    # negative finite x to a non-integer y",
    "    ax = tl.abs(x)",
    "    ay = tl.abs(y)",
    "    t = y.to(tl.float64) * tl.log2(ax.to(tl.float64))",
    "    t = tl.where(t < -190.0, -190.0, tl.where(t > 190.0, 190.0, t))",
    "    v = tl.exp2(t).to(tl.float32)",
    "    whole = y == tl.where(y < 0, tl.ceil(y), tl.floor(y))",
    "    odd = (ay - 2.0 * tl.floor(0.5 * ay)) == 1.0",
    f"    lim = tl.where((ax < 1.0) ^ (y < 0), 0.0, {_INF})",
    f"    v = tl.where((ax == 0) | (ax == {_INF}), tl.where((ax == 0) ^ (y < 0), 0.0, {_INF}), v)",
    f"    v = tl.where(ay == {_INF}, tl.where(ax == 1.0, 1.0, lim), v)",
    "    v = tl.where((x.to(tl.int32, bitcast=True) < 0) & odd, -v, v)",
    f"    v = tl.where((x < 0) & (ax != {_INF}) & (whole == 0), {_NAN}, v)",
    f"    v = tl.where((x != x) | (y != y), {_NAN}, v)",
    "    return tl.where((y == 0) | (x == 1.0), 1.0, v)"])
_jit("_ke_bucketize(x, table, n, RIGHT: tl.constexpr)", [
    "    # boundaries before x, counted (sorted boundaries: torch.bucketize's index)",
    "    count = tl.zeros_like(x).to(tl.int64)",
    "    for j in range(0, n):",
    "        b = tl.load(table + j)",
    "        if RIGHT:",
    "            count += ((b > x) == 0).to(tl.int64)",
    "        else:",
    "            count += ((b >= x) == 0).to(tl.int64)",
    "    return count"])
_jit("_ke_copysign(a, b)", [
    "    # |a| with the sign bit of b (-0 and -NaN included)",
    "    return tl.where(b.to(tl.int32, bitcast=True) < 0, -tl.abs(a), tl.abs(a))"])
_jit("_ke_rint(x)", [
    "    # round half to even: adding 2^23 leaves no fraction bits (the default rounding does",
    "    # the rest); |x| >= 2^23 is an integer already; the sign is x's (-0.4 gives -0)",
    "    a = tl.abs(x)",
    "    r = (a + 8388608.0) - 8388608.0",
    "    r = tl.where(x.to(tl.int32, bitcast=True) < 0, -r, r)",
    "    return tl.where(a < 8388608.0, r, x)"])
_jit("_ke_log1p(x)", [
    "    # log(u) * x / (u - 1) with u = 1 + x: exact for the rounded u (no loss for small x)",
    "    u = 1.0 + x",
    "    d = u - 1.0",
    "    r = tl.where(d == 0.0, x, tl.log(u) * (x / tl.where(d == 0.0, 1.0, d)))",
    f"    return tl.where(u == {_INF}, u, r)"])
_jit("_ke_expm1(x)", [
    "    # (u - 1) * x / log(u) with u = exp(x) (Kahan): the rounding of u cancels",
    "    u = tl.exp(x)",
    "    um = u - 1.0",
    "    lu = tl.log(u)",
    "    r = tl.where(um == 0.0, x, um * (x / tl.where(lu == 0.0, 1.0, lu)))",
    "    r = tl.where(um == -1.0, -1.0, r)",
    f"    return tl.where(u == {_INF}, u, r)"])
_jit("_ke_atan(x)", [
    "    # pi/2 + atan(-1/|x|) above tan(3pi/8), pi/4 + atan((|x|-1)/(|x|+1)) above tan(pi/8)",
    "    a = tl.abs(x)",
    "    big = a > 2.414213562373095",
    "    mid = a > 0.4142135623730950",
    "    t = tl.where(big, -1.0, tl.where(mid, a - 1.0, a)) / "
    "tl.where(big, a, tl.where(mid, a + 1.0, 1.0))",
    "    t2 = t * t",
    *_horner("p", "t2", "atan"),
    "    hi = tl.where(big, 1.5707963705062866, tl.where(mid, 0.7853981852531433, 0.0))",
    "    lo = tl.where(big, -4.371138828673793e-08, tl.where(mid, -2.1855694143368964e-08, 0.0))",
    "    r = hi + (tl.math.fma(t * t2, p, t) + lo)",
    "    return _ke_copysign(r, x)"], deps=("_ke_copysign",))
_jit("_ke_atan2(y, x)", [
    "    # C99 atan2: atan(min/max) (0/0 as 0, inf/inf as 1), pi/2 - a when |y| > |x|,",
    "    # pi - a when x has its sign bit, y's sign",
    "    ax = tl.abs(x)",
    "    ay = tl.abs(y)",
    "    mx = tl.where(ax > ay, ax, ay)",
    "    mn = tl.where(ax > ay, ay, ax)",
    "    t = tl.where(mx == 0.0, 0.0, mn / tl.where(mx == 0.0, 1.0, mx))",
    f"    t = tl.where(mn == {_INF}, 1.0, t)",
    "    a = _ke_atan(t)",
    "    a = tl.where(ay > ax, 1.5707963705062866 - (a + 4.371138828673793e-08), a)",
    "    a = tl.where(x.to(tl.int32, bitcast=True) < 0, 3.1415927410125732 - (a + "
    "8.742277657347586e-08), a)",
    f"    return tl.where(x != x, {_NAN}, tl.where(y != y, {_NAN}, _ke_copysign(a, y)))"],
    deps=("_ke_atan",))
_jit("_ke_asin_core(a)", [
    "    # asin(a) for a in [0, 1]: the polynomial at a below 1/2, at sqrt((1 - a) / 2) above",
    "    small = a <= 0.5",
    "    z = 0.5 * (1.0 - a)",
    "    s = tl.where(small, a, tl.sqrt(z))",
    "    w = tl.where(small, a * a, z)",
    *_horner("p", "w", "asin"),
    "    return tl.math.fma(s * w, p, s)"])
_jit("_ke_asin(x)", [
    "    a = tl.abs(x)",
    "    p = _ke_asin_core(a)",
    "    r = tl.where(a <= 0.5, p, 1.5707963705062866 - (2.0 * p + 4.371138828673793e-08))",
    "    return _ke_copysign(r, x)"], deps=("_ke_copysign", "_ke_asin_core"))
_jit("_ke_acos(x)", [
    "    a = tl.abs(x)",
    "    p = _ke_asin_core(a)",
    "    small = 1.5707963705062866 - (_ke_copysign(p, x) + 4.371138828673793e-08)",
    "    r = tl.where(x > 0.0, 2.0 * p, 3.1415927410125732 - (2.0 * p + 8.742277657347586e-08))",
    "    return tl.where(a <= 0.5, small, r)"], deps=("_ke_copysign", "_ke_asin_core"))
_jit("_ke_sinh(x)", [
    "    # the polynomial below 1; above, h h / 2 - 1 / (2 h h) with h = exp(|x| / 2), finite",
    "    # up to where sinh overflows",
    "    a = tl.abs(x)",
    "    a2 = a * a",
    *_horner("p", "a2", "sinh"),
    "    h = tl.exp(0.5 * a)",
    "    big = (0.5 * h) * h - 0.5 / (h * h)",
    "    return _ke_copysign(tl.where(a < 1.0, tl.math.fma(a * a2, p, a), big), x)"],
    deps=("_ke_copysign",))
_jit("_ke_cosh(x)", [
    "    h = tl.exp(0.5 * tl.abs(x))",
    "    return (0.5 * h) * h + 0.5 / (h * h)"])
_jit("_ke_asinh(x)", [
    "    # log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(2|x|) above 2^28",
    "    a = tl.abs(x)",
    "    big = a > 268435456.0",
    "    t = a + (a * a) / (1.0 + tl.sqrt(1.0 + a * a))",
    "    r = _ke_log1p(tl.where(big, a, t)) + tl.where(big, 0.6931471805599453, 0.0)",
    "    return _ke_copysign(r, x)"], deps=("_ke_copysign", "_ke_log1p"))
_jit("_ke_acosh(x)", [
    "    # log1p((x - 1) + sqrt((x - 1)(x + 1))); log(2x) above 2^28; NaN below 1",
    "    big = x > 268435456.0",
    "    xm = x - 1.0",
    "    t = xm + tl.sqrt(xm * (x + 1.0))",
    "    r = _ke_log1p(tl.where(big, x, t)) + tl.where(big, 0.6931471805599453, 0.0)",
    f"    return tl.where(x < 1.0, {_NAN}, r)"], deps=("_ke_log1p",))
_jit("_ke_atanh(x)", [
    "    a = tl.abs(x)",
    "    return _ke_copysign(0.5 * _ke_log1p((2.0 * a) / (1.0 - a)), x)"],
    deps=("_ke_copysign", "_ke_log1p"))
_jit("_ke_erfc(x)", [
    "    # (1 + s) exp(-z^2 + s P(s)) at z = |x|, s = -z / (2 + z) (cpp_math.COEFFS), 2 minus",
    "    # it for negative x",
    "    z = tl.minimum(tl.abs(x), 10.1)",
    "    inv = 1.0 / (2.0 + z)",
    "    s = -z * inv",
    *_horner("p", "s", "erfc"),
    "    tail = (2.0 * inv) * tl.exp(tl.math.fma(-z, z, s * p))",
    "    tail = tl.where(tl.abs(x) > 10.1, 0.0, tail)",
    f"    tail = tl.where(x != x, {_NAN}, tail)",
    "    return tl.where(x < 0.0, 2.0 - tail, tail)"])
_jit("_ke_nextafter(a, b)", [
    "    # one step of a's bit pattern toward b; from +-0 the smallest subnormal of b's sign",
    "    ia = a.to(tl.int32, bitcast=True)",
    "    away = (b > a) == (a > 0.0)",
    "    v = tl.where(away, ia + 1, ia - 1).to(tl.float32, bitcast=True)",
    "    tiny = tl.where(b.to(tl.int32, bitcast=True) < 0, -1.401298464324817e-45, "
    "1.401298464324817e-45)",
    "    v = tl.where(a == 0.0, tiny, v)",
    "    v = tl.where(a == b, b, v)",
    f"    return tl.where(a != a, {_NAN}, tl.where(b != b, {_NAN}, v))"])
_jit("_ke_hypot(a, b)", [
    "    # in float64 (exact squares, no overflow); an infinite operand gives inf beside NaN",
    "    # (nested selects, not | on masks: an operand may be a scalar's 0-d value)",
    "    a64 = a.to(tl.float64)",
    "    b64 = b.to(tl.float64)",
    "    h = tl.sqrt(a64 * a64 + b64 * b64).to(tl.float32)",
    f"    return tl.where(tl.abs(a) == {_INF}, {_INF}, tl.where(tl.abs(b) == {_INF}, {_INF}, h))"])
