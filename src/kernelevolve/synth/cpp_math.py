"""Vectorisable float32 exponentials and logarithms for the C++ prelude (see cpp_prelude.py).

Every function is branch-free (selects, no early returns, no libm calls), so `omp simd` loops
vectorise it without -ffast-math; inf, NaN and signed zeros come out as torch gives them,
selected at the end. With FAST_EXP off each falls back to libm. Polynomials are minimax fits
in float64 (Lawson's iteratively reweighted least squares on a dense grid, coefficients
rounded to float32 one at a time with the rest refitted: benchmarks/synth_math_fit.py);
COEFFS holds them for both emitters (triton_expr.py spells the same polynomials).
"""
from __future__ import annotations

import re

# name -> (the powers they multiply, the coefficients), as scripts/fit_synth_math.py prints
# them; each function's comment gives its fixed terms, interval and the fit's relative error.
COEFFS = {
    # e^r = 1 + r + r^2 P(r), |r| <= ln(2)/2 (3.2e-9)
    "exp": ([2, 3, 4, 5, 6], [0.4999999403953552, 0.1666652113199234, 0.04166829213500023,
                              0.00836871936917305, 0.0013818728039041162]),
    # 2^r = 1 + r P(r), |r| <= 1/2 (3e-9)
    "exp2": ([1, 2, 3, 4, 5, 6], [0.6931471824645996, 0.24022647738456726, 0.05550359562039375,
                                  0.009618505835533142, 0.0013391025131568313,
                                  0.00015326779976021498]),
    # e^r - 1 = r + r^2 / 2 + r^3 P(r), |r| <= ln(2)/2 (4.5e-10)
    "expm1": ([3, 4, 5, 6, 7], [0.1666666567325592, 0.04166649281978607, 0.008333543315529823,
                                0.0013932385481894016, 0.00019764425815083086]),
    # log(1 + f) = f - f^2 / 2 + f^3 P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1] (3.2e-8)
    "log1p": ([3, 4, 5, 6, 7, 8, 9], [0.33333921432495117, -0.2500137984752655,
                                      0.1996259242296219, -0.1657583862543106,
                                      0.14918451011180878, -0.14284034073352814,
                                      0.0871119573712349]),
    # sin r = r + r^3 P(r^2), |r| <= pi/4 + 0.03 (1.8e-10)
    "sin": ([3, 5, 7, 9], [-0.1666666716337204, 0.008333375677466393, -0.00019851098477374762,
                           2.808897079376038e-06]),
    # cos r = 1 - r^2 / 2 + r^4 P(r^2), |r| <= pi/4 + 0.03 (1.9e-10)
    "cos": ([4, 6, 8], [0.04166664183139801, -0.0013887115055695176, 2.440932257741224e-05]),
    # atan t = t + t^3 P(t^2), |t| <= tan(pi/8) (7.5e-10)
    "atan": ([3, 5, 7, 9, 11], [-0.3333331346511841, 0.19998358190059662, -0.1424126923084259,
                                0.10576282441616058, -0.06032029911875725]),
    # asin s = s + s^3 P(s^2), |s| <= 1/2 (5e-9)
    "asin": ([3, 5, 7, 9, 11], [0.16666755080223083, 0.07495182752609253, 0.04548584669828415,
                                0.024098487570881844, 0.0423111654818058]),
    # sinh a = a + a^3 P(a^2), |a| <= 1 (3.1e-10)
    "sinh": ([3, 5, 7, 9], [0.1666666716337204, 0.00833331048488617, 0.00019842886831611395,
                            2.7823211894428823e-06]),
    # erfc z = (1 + s) exp(-z^2 + s P(s)), s = -z / (2 + z), z in [0, 10.2] (absolute error
    # of the exponent 6.8e-9; Numerical Recipes' erfcc form, in s and refitted minimax)
    "erfc": (list(range(1, 11)), [1.2567591667175293, -0.3031999468803406, -0.16089202463626862,
                                  0.19666241109371185, -0.04814686253666878,
                                  -0.07867885380983353, -0.06887654960155487,
                                  -0.39267438650131226, -0.42885443568229675,
                                  -0.13769112527370453]),
}


def horner(var: str, y: str, name: str, indent: str = "    ") -> str:
    """C++ statements leaving P(y) of COEFFS[name] in float `var` (Horner's rule, fma)."""
    coeffs = COEFFS[name][1]
    lines = [f"{indent}float {var} = {coeffs[-1]!r}f;"]
    lines += [f"{indent}{var} = std::fma({var}, {y}, {c!r}f);" for c in reversed(coeffs[:-1])]
    return "\n".join(lines)


def expand(text: str) -> str:
    """Replace each `POLY(var, y, name);` line with its Horner statements."""
    def one(m: re.Match) -> str:
        return horner(m.group(2), m.group(3), m.group(4), m.group(1))
    return re.sub(r"^( *)POLY\((\w+), (\w+), (\w+)\);$", one, text, flags=re.M)


EXP_LOG = expand(r"""
// Bits of a float and back (memcpy: defined behaviour, one register move once vectorised).
static inline int32_t ke_f2i(float x) { int32_t i; std::memcpy(&i, &x, sizeof i); return i; }
static inline float ke_i2f(int32_t i) { float x; std::memcpy(&x, &i, sizeof x); return x; }
// 2^k for an integer k in [-126, 127] (by the exponent bits, in unsigned arithmetic: any k
// is defined behaviour, out-of-range ones give garbage the callers select away).
static inline float ke_pow2k(uint32_t k) { return ke_i2f(static_cast<int32_t>((k + 127u) << 23)); }

// Round to the nearest integer by adding 1.5 * 2^23 (in the fma that scales x): the sum's low
// mantissa bits are the integer, n = t - 1.5 * 2^23 is it as a float and bits(t) - bits(1.5 *
// 2^23) as an integer (valid for |x * scale| < 2^22; beyond, callers select the result).
#define KE_ROUND_MAGIC 12582912.0f
#define KE_ROUND_BITS 0x4b400000u
static inline uint32_t ke_round_bits(float t) {
    return static_cast<uint32_t>(ke_f2i(t)) - KE_ROUND_BITS;
}

// e^r * 2^k for |r| <= ln(2)/2 and an integer k in [-152, 130]: 1 + r (1 + r P(r)) by Horner,
// 2^k in two factors, so a result in the subnormal range is rounded once and k = 128 does not
// overflow on the way.
static inline float ke_exp_scale(float r, uint32_t k) {
POLY(p, r, exp);
    const float er = std::fma(std::fma(p, r, 1.0f), r, 1.0f);
    const uint32_t k1 = static_cast<uint32_t>(static_cast<int32_t>(k) >> 1);
    return (er * ke_pow2k(k1)) * ke_pow2k(k - k1);
}

// x clamped to [lo, hi] (a NaN x becomes lo or hi: callers select NaN back).
static inline float ke_clamp(float x, float lo, float hi) {
    const float a = x > lo ? x : lo;
    return a < hi ? a : hi;
}

// e^x: n = round(x / ln 2), r = x - n ln 2 (a two-part ln 2 with fma: the first step is
// exact), e^r by the polynomial; 0 and inf come out of the scaling up to where the reduction
// stays in range, and are selected beyond (below -104, above 89); NaN propagates through r.
static inline float ke_exp_poly(float x) {
    const float t = std::fma(x, 1.44269504088896341f, KE_ROUND_MAGIC);
    const float n = t - KE_ROUND_MAGIC;
    float r = std::fma(n, -0.693147182464599609f, x);
    r = std::fma(n, 1.90465421212593362e-09f, r);
    float e = ke_exp_scale(r, ke_round_bits(t));
    e = x < -104.0f ? 0.0f : e;
    return x > 89.0f ? INFINITY : e;
}

#if FAST_EXP
#define KE_EXP(x) ke_exp_poly(x)
#else
#define KE_EXP(x) std::exp(x)
#endif

// e^(a + b) for an exact a and a small correction b (erfc's exp(-z^2 + p), with z^2 split so
// that a = -zh^2 is exact): the reduction takes a exactly and b after it.
static inline float ke_exp_sum(float a, float b) {
    const float x = a + b;
    const float t = std::fma(x, 1.44269504088896341f, KE_ROUND_MAGIC);
    const float n = t - KE_ROUND_MAGIC;
    float r = std::fma(n, -0.693147182464599609f, a) + b;
    r = std::fma(n, 1.90465421212593362e-09f, r);
    float e = ke_exp_scale(r, ke_round_bits(t));
    e = x < -104.0f ? 0.0f : e;
    return x > 89.0f ? INFINITY : e;
}

// e^x * 2^k for a small integer k (sinh / cosh: e^x / 2 is finite up to x = 89.4).
static inline float ke_exp_shifted(float x, int32_t k) {
    const float t = std::fma(x, 1.44269504088896341f, KE_ROUND_MAGIC);
    const float n = t - KE_ROUND_MAGIC;
    float r = std::fma(n, -0.693147182464599609f, x);
    r = std::fma(n, 1.90465421212593362e-09f, r);
    float e = ke_exp_scale(r, ke_round_bits(t) + static_cast<uint32_t>(k));
    e = x < -104.0f ? 0.0f : e;
    return x > 90.0f ? INFINITY : e;
}

// 2^x: n = round(x), r = x - n (exact), 2^r = 1 + r P(r); integers give exact powers.
static inline float ke_exp2(float x) {
#if FAST_EXP
    const float t = x + KE_ROUND_MAGIC;
    const float r = x - (t - KE_ROUND_MAGIC);
POLY(p, r, exp2);
    const float er = std::fma(r, p, 1.0f);
    const uint32_t k = ke_round_bits(t);
    const uint32_t k1 = static_cast<uint32_t>(static_cast<int32_t>(k) >> 1);
    float e = (er * ke_pow2k(k1)) * ke_pow2k(k - k1);
    e = x < -151.0f ? 0.0f : e;
    return x > 129.0f ? INFINITY : e;
#else
    return std::exp2(x);
#endif
}

// e^x - 1: the exp reduction, then 2^n (e^r - 1) + (2^n - 1) in one fma (2^n - 1 is exact
// for the n where it matters; n = 128 is done as 2 (2^127 (e^r - 1) + 2^127 - 1/2)); below
// x = -25 the result is -1 in float. x = +-0 gives x.
static inline float ke_expm1(float x) {
#if FAST_EXP
    const float xc = x < -25.0f ? -25.0f : x;
    const float t = std::fma(xc, 1.44269504088896341f, KE_ROUND_MAGIC);
    const float n = t - KE_ROUND_MAGIC;
    float r = std::fma(n, -0.693147182464599609f, xc);
    r = std::fma(n, 1.90465421212593362e-09f, r);
POLY(p, r, expm1);
    const float em = std::fma(r * r, std::fma(p, r, 0.5f), r);
    const uint32_t k = ke_round_bits(t);
    const bool top = static_cast<int32_t>(k) > 127;
    const float s = ke_pow2k(top ? 127u : k);
    const float e = std::fma(s, em, s - (top ? 0.5f : 1.0f)) * (top ? 2.0f : 1.0f);
    return x == 0.0f ? x : (x > 89.0f ? INFINITY : e);
#else
    return std::expm1(x);
#endif
}

// log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2 / 2 + f^3 P(f).
static inline float ke_log1p_poly(float f) {
POLY(p, f, log1p);
    return std::fma(f * f, std::fma(p, f, -0.5f), f);
}

// x = 2^e m with m in [sqrt(1/2), sqrt(2)): subtracting the bits of sqrt(1/2) moves the
// exponent field so that the borrow picks e; subnormals are scaled by 2^23 first. f = m - 1.
// Meaningful for finite x > 0 only (ke_log_ends selects the rest).
static inline float ke_log_parts(float x, float* e) {
    const bool sub = x < 1.17549435e-38f;
    const int32_t ix = ke_f2i(x * (sub ? 8388608.0f : 1.0f)) - 0x3f3504f3;
    *e = static_cast<float>(ix >> 23) - (sub ? 23.0f : 0.0f);
    return ke_i2f((ix & 0x007fffff) + 0x3f3504f3) - 1.0f;
}

// The ends torch gives: log(+inf) = inf and NaN stay, x < 0 is NaN, log(+-0) = -inf.
static inline float ke_log_ends(float x, float v) {
    v = x < INFINITY ? v : x;
    v = x >= 0.0f ? v : NAN;
    return x == 0.0f ? -INFINITY : v;
}

static inline float ke_log(float x) {
#if FAST_EXP
    float e;
    const float f = ke_log_parts(x, &e);
    const float v = std::fma(e, 0.693147182464599609f,
                             std::fma(e, -1.90465421212593362e-09f, ke_log1p_poly(f)));
    return ke_log_ends(x, v);
#else
    return std::log(x);
#endif
}

static inline float ke_log2(float x) {
#if FAST_EXP
    float e;
    const float f = ke_log_parts(x, &e);
    return ke_log_ends(x, std::fma(ke_log1p_poly(f), 1.44269504088896341f, e));
#else
    return std::log2(x);
#endif
}

static inline float ke_log10(float x) {
#if FAST_EXP
    float e;
    const float f = ke_log_parts(x, &e);
    const float v = std::fma(e, 0.3010300099849701f,
                             std::fma(e, -1.432098889475597e-08f,
                                      ke_log1p_poly(f) * 0.43429448190325182f));
    return ke_log_ends(x, v);
#else
    return std::log10(x);
#endif
}

// log(1 + x): u = 1 + x split as above; when u's exponent is 0 the polynomial takes x itself
// (no rounding of 1 + x); otherwise log(u) plus the first-order correction (x - (u - 1)) / u
// for the rounding of 1 + x. x = +-0 gives x; x = -1 gives -inf, x < -1 NaN.
static inline float ke_log1p(float x) {
#if FAST_EXP
    const float u = 1.0f + x;
    const int32_t iu = ke_f2i(u) - 0x3f3504f3;
    const int32_t k = iu >> 23;
    const float f = k == 0 ? x : ke_i2f((iu & 0x007fffff) + 0x3f3504f3) - 1.0f;
    const float c = k == 0 ? 0.0f : (x - (u - 1.0f)) / u;
    const float e = static_cast<float>(k);
    const float v = std::fma(e, 0.693147182464599609f,
                             std::fma(e, -1.90465421212593362e-09f, ke_log1p_poly(f) + c));
    return x == 0.0f ? x : ke_log_ends(u, v);
#else
    return std::log1p(x);
#endif
}
""")
