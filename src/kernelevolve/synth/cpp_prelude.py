"""The C++ prelude every synthesized kernel file starts with: schedule macros and vectorisable
exp/sigmoid/tanh/erf/gelu approximations (with libm-matching inf/NaN), selected by FAST_EXP."""
from __future__ import annotations

import re

# What kernel code reads each tunable through: a kernel that calls none of these is the same
# whatever the tunable's value, so the module does not declare it (the tuner would spend
# evaluations on identical kernels: 7 of 30 on FAST_EXP for relu(x)*2+1).
TUNABLE_READERS = {
    "PARALLEL_MIN_ELEMENTS": ("PARALLEL_MIN_ELEMENTS",),
    "ROWS_PER_TASK": ("KE_SCHEDULE",),
    "FAST_EXP": ("KE_EXP", "ke_sigmoid", "ke_tanh", "ke_normal_cdf", "ke_erf"),
    "MID_BLOCK": ("MID_BLOCK",),
}


def tunables_read(kernel_code: str) -> set[str]:
    """The tunables `kernel_code` (the kernels, not the prelude) depends on."""
    return {name for name, readers in TUNABLE_READERS.items()
            if any(re.search(rf"\b{r}\b", kernel_code) for r in readers)}

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <type_traits>

#if ROWS_PER_TASK > 0
#define KE_SCHEDULE schedule(dynamic, ROWS_PER_TASK)
#else
#define KE_SCHEDULE schedule(static)
#endif

// exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2)/2, exp(r) by a degree-7 Taylor
// polynomial (< 2e-7 relative error). The argument is clamped to float's normal range for the
// arithmetic and the overflow / underflow ends are selected afterwards (inf above 88.72, 0
// below -103.97, as std::exp gives); NaN propagates through the polynomial. Branch-free, so
// `omp simd` loops vectorise it (with -fno-trapping-math for floor and the int conversion).
static inline float ke_exp_poly(float x) {
    const float xc = x < -87.3f ? -87.3f : (x > 88.7228f ? 88.7228f : x);
    const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
    float r = std::fma(n, -0.693145751953125f, xc);
    r = std::fma(n, -1.42860682030941723e-6f, r);
    float p = 1.0f / 5040.0f;
    p = std::fma(p, r, 1.0f / 720.0f);
    p = std::fma(p, r, 1.0f / 120.0f);
    p = std::fma(p, r, 1.0f / 24.0f);
    p = std::fma(p, r, 1.0f / 6.0f);
    p = std::fma(p, r, 0.5f);
    p = std::fma(p, r, 1.0f);
    p = std::fma(p, r, 1.0f);
    // 2^n by the exponent bits; n = 128 (x in (88.38, 88.72]) is done as 2^127 * 2.
    const float n_lo = n > 127.0f ? 127.0f : n;
    const int32_t bits = (static_cast<int32_t>(n_lo) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    const float e = (p * scale) * (n > n_lo ? 2.0f : 1.0f);
    return x > 88.7228390f ? INFINITY : (x < -103.972f ? 0.0f : e);
}

#if FAST_EXP
#define KE_EXP(x) ke_exp_poly(x)
#else
#define KE_EXP(x) std::exp(x)
#endif

static inline float ke_sigmoid(float x) { return 1.0f / (1.0f + KE_EXP(-x)); }

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) for |x| >= 0.3; below, the odd Taylor series
// to x^11 (relative error < 1e-7 there, and no cancellation). Both are computed, one selected.
static inline float ke_tanh(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float a2 = a * a;
    float s = -1382.0f / 155925.0f;
    s = std::fma(s, a2, 62.0f / 2835.0f);
    s = std::fma(s, a2, -17.0f / 315.0f);
    s = std::fma(s, a2, 2.0f / 15.0f);
    s = std::fma(s, a2, -1.0f / 3.0f);
    const float small = std::fma(s * a2, a, a);
    const float big = 1.0f - 2.0f / (KE_EXP(2.0f * a) + 1.0f);
    const float t = a < 0.3f ? small : big;
    return x < 0.0f ? -t : (x == x ? t : x);
#else
    return std::tanh(x);
#endif
}

// 0.5 * erfc(z) for z >= 0 by the Chebyshev fit of Numerical Recipes (erfcc: relative error
// below 1.2e-7 for every z, so the far tail stays accurate; no 1 - erf cancellation).
static inline float ke_half_erfc_abs(float z) {
    const float t = 2.0f / (2.0f + z);
    float p = 0.17087277f;
    p = std::fma(p, t, -0.82215223f);
    p = std::fma(p, t, 1.48851587f);
    p = std::fma(p, t, -1.13520398f);
    p = std::fma(p, t, 0.27886807f);
    p = std::fma(p, t, -0.18628806f);
    p = std::fma(p, t, 0.09678418f);
    p = std::fma(p, t, 0.37409196f);
    p = std::fma(p, t, 1.00002368f);
    p = std::fma(p, t, -1.26551223f);
    return 0.5f * t * ke_exp_poly(std::fma(-z, z, p));
}

// erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) rounds to 1 in float): a
// rational minimax fit (the coefficients of Eigen's fast float erf), absolute error < 5e-7,
// no exp, one division; NaN propagates.
static inline float ke_erf_rational(float x) {
    const float xc = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
    const float x2 = xc * xc;
    float p = -2.72614225801306e-10f;
    p = std::fma(p, x2, 2.77068142495902e-08f);
    p = std::fma(p, x2, -2.10102402082508e-06f);
    p = std::fma(p, x2, -5.69250639462346e-05f);
    p = std::fma(p, x2, -7.34990630326855e-04f);
    p = std::fma(p, x2, -2.95459980854025e-03f);
    p = std::fma(p, x2, -1.60960333262415e-02f);
    float q = -1.45660718464996e-05f;
    q = std::fma(q, x2, -2.13374055278905e-04f);
    q = std::fma(q, x2, -1.68282697438203e-03f);
    q = std::fma(q, x2, -7.37332916720468e-03f);
    q = std::fma(q, x2, -1.42647390514189e-02f);
    return x == x ? xc * p / q : x;
}

// Standard normal CDF for GELU: Phi(h) = 0.5 (1 + erf(h / sqrt 2)), the formula eager
// PyTorch's gelu uses (so far negative h gives 0, as there).
static inline float ke_normal_cdf(float h) {
#if FAST_EXP
    return 0.5f * (1.0f + ke_erf_rational(h * 0.70710678118654752f));
#else
    return 0.5f * (1.0f + std::erf(h * 0.70710678118654752f));
#endif
}

// erf: the Taylor series to x^13 below |x| = 0.5 (relative error < 1e-8), 1 - erfc above.
static inline float ke_erf(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float a2 = a * a;
    float s = 1.0f / 9360.0f;
    s = std::fma(s, -a2, 1.0f / 1320.0f);
    s = std::fma(s, -a2, 1.0f / 216.0f);
    s = std::fma(s, -a2, 1.0f / 42.0f);
    s = std::fma(s, -a2, 1.0f / 10.0f);
    s = std::fma(s, -a2, 1.0f / 3.0f);
    s = std::fma(s, -a2, 1.0f);
    const float small = 1.12837916709551257f * s * a;
    const float big = 1.0f - 2.0f * ke_half_erfc_abs(a);
    const float e = a < 0.5f ? small : big;
    return x < 0.0f ? -e : (x == x ? e : x);
#else
    return std::erf(x);
#endif
}

// Integer arithmetic as torch does it: add/sub/mul wrap around (two's complement, done in the
// unsigned type, where overflow is defined); remainder and floor division round toward minus
// infinity (Python semantics). Divisors and shift counts are constants the planner checked
// (never 0 or -1; shifts below the bit width).
template <typename T> static inline T ke_wrap_add(T a, T b) {
    typedef typename std::make_unsigned<T>::type U;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T> static inline T ke_wrap_sub(T a, T b) {
    typedef typename std::make_unsigned<T>::type U;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T> static inline T ke_wrap_mul(T a, T b) {
    typedef typename std::make_unsigned<T>::type U;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <typename T> static inline T ke_shl(T a, int s) {
    typedef typename std::make_unsigned<T>::type U;
    return static_cast<T>(static_cast<U>(a) << s);
}
template <typename T> static inline T ke_irem(T a, T b) {
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> static inline T ke_ifloordiv(T a, T b) {
    const T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline float ke_frem(float a, float b) {
    const float r = std::fmod(a, b);
    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
// torch.floor_divide on floats (c10's div_floor_floating): floor(a / b) rounds the quotient
// first and is off by one when a / b rounds up to an integer (a = 1, b = 0.1: 10, torch 9).
// So: the exact multiple (a - fmod(a, b)) / b, one less when the remainder's sign differs
// from b's, snapped to the nearest integer; a zero quotient keeps the sign of a / b, and a
// zero divisor gives a / b (inf or NaN), as torch does.
static inline float ke_ffloordiv(float a, float b) {
    if (b == 0.0f) return a / b;
    const float mod = std::fmod(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return std::copysign(0.0f, a / b);
    float fl = std::floor(div);
    if (div - fl > 0.5f) fl += 1.0f;
    return fl;
}
// torch.bucketize: the first boundary >= v (right: > v); the negated tests send NaN to the
// end, as torch's own search does.
template <typename T, typename B>
static inline int64_t ke_bucketize(T v, const B* b, int64_t n, bool right) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + ((hi - lo) >> 1);
        const bool before = right ? !(b[mid] > v) : !(b[mid] >= v);
        if (before) lo = mid + 1; else hi = mid;
    }
    return lo;
}
"""
