"""Vectorisable float32 sigmoid, tanh, hyperbolic functions and their inverses, erf and erfc
for the C++ prelude: branch-free like cpp_math.py, whose exp/log helpers and polynomials
they are built on; with FAST_EXP off each falls back to libm.
"""
from __future__ import annotations

from kernelevolve.synth.cpp_math import expand

SPECIAL = expand(r"""
static inline float ke_sigmoid(float x) { return 1.0f / (1.0f + KE_EXP(-x)); }

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) for |x| >= 0.3; below, the odd Taylor series
// to x^11 (relative error < 1e-7 there, and no cancellation). Both are computed, one selected;
// the sign is copied back (tanh(-0) = -0).
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
    return std::copysign(t, x);
#else
    return std::tanh(x);
#endif
}

// sinh: a + a^3 P(a^2) below |x| = 1; above, e^a / 2 - 1 / (4 (e^a / 2)) with e^a / 2 by
// the exponent shifted by -1 (finite up to 89.4, where sinh overflows). The sign copied back.
static inline float ke_sinh(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float a2 = a * a;
POLY(p, a2, sinh);
    const float small = std::fma(a * a2, p, a);
    const float h = ke_exp_shifted(a, -1);
    return std::copysign(a < 1.0f ? small : h - 0.25f / h, x);
#else
    return std::sinh(x);
#endif
}

static inline float ke_cosh(float x) {
#if FAST_EXP
    const float h = ke_exp_shifted(std::fabs(x), -1);
    return h + 0.25f / h;
#else
    return std::cosh(x);
#endif
}

// asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (no cancellation near 0); above 2^28,
// where 1/x^2 is below float precision, log(2 |x|) = log1p(|x|) + ln 2.
static inline float ke_asinh(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const bool big = a > 268435456.0f;
    const float a2 = a * a;
    const float t = a + a2 / (1.0f + std::sqrt(1.0f + a2));
    return std::copysign(ke_log1p(big ? a : t) + (big ? 0.693147182464599609f : 0.0f), x);
#else
    return std::asinh(x);
#endif
}

// acosh x = log1p((x - 1) + sqrt((x - 1)(x + 1))) (x - 1 exact near 1), log(2x) above 2^28;
// NaN below 1.
static inline float ke_acosh(float x) {
#if FAST_EXP
    const bool big = x > 268435456.0f;
    const float xm = x - 1.0f;
    const float t = xm + std::sqrt(xm * (x + 1.0f));
    const float v = ke_log1p(big ? x : t) + (big ? 0.693147182464599609f : 0.0f);
    return x < 1.0f ? NAN : v;
#else
    return std::acosh(x);
#endif
}

// atanh |x| = log1p(2 |x| / (1 - |x|)) / 2: inf at 1, NaN beyond (log1p below -1).
static inline float ke_atanh(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    return std::copysign(0.5f * ke_log1p((2.0f * a) / (1.0f - a)), x);
#else
    return std::atanh(x);
#endif
}

// erfc(z) = (1 + s) exp(-z^2 + s P(s)) for z >= 0, s = -z / (2 + z) in (-1, 0]: a minimax
// fit of that form (cpp_math.COEFFS["erfc"]; the exponent's error below 7e-9 for every z,
// and s P(s) keeps its relative accuracy as z -> 0). Returns s P(s); *t = 1 + s (as 2 / (2 +
// z): 1 + s would lose t's relative accuracy as s -> -1).
static inline float ke_erfc_exponent(float z, float* t) {
    const float inv = 1.0f / (2.0f + z);
    const float s = -z * inv;
    *t = 2.0f * inv;
POLY(p, s, erfc);
    return s * p;
}

static inline float ke_half_erfc_abs(float z) {
    float t;
    z = z > 10.1f ? 10.1f : z;     // erfc(10.1) is 0 in float (inf would give inf / inf)
    const float g = ke_erfc_exponent(z, &t);
    return 0.5f * t * ke_exp_poly(std::fma(-z, z, g));
}

// erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) rounds to 1 in float): a
// rational minimax fit (the coefficients of Eigen's fast float erf), absolute error < 5e-7,
// no exp, one division; NaN propagates.
static inline float ke_erf_rational(float x) {
    const float xc = ke_clamp(x, -4.0f, 4.0f);
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

// erf(a) for |a| < 0.5: the Taylor series to a^13 (relative error < 1e-8).
static inline float ke_erf_series(float a) {
    const float a2 = a * a;
    float s = 1.0f / 9360.0f;
    s = std::fma(s, -a2, 1.0f / 1320.0f);
    s = std::fma(s, -a2, 1.0f / 216.0f);
    s = std::fma(s, -a2, 1.0f / 42.0f);
    s = std::fma(s, -a2, 1.0f / 10.0f);
    s = std::fma(s, -a2, 1.0f / 3.0f);
    s = std::fma(s, -a2, 1.0f);
    return 1.12837916709551257f * s * a;
}

// erf: the series below |x| = 0.5, 1 - erfc above; the sign copied back.
static inline float ke_erf(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float e = a < 0.5f ? ke_erf_series(a) : 1.0f - 2.0f * ke_half_erfc_abs(a);
    return std::copysign(e, x);
#else
    return std::erf(x);
#endif
}

// erfc: the fit above at |x| (its bound holds from 0 up), 2 minus it for negative x. Its
// exp(-z^2 + g) is taken as exp(-zh^2 + (g - (z - zh)(z + zh))) for zh = z with its low 12
// bits cleared (-zh^2 exact), so the far tail keeps its relative accuracy; subnormal results
// come out of the exp's scaling; above 10.1 erfc is 0 in float, erfc(-inf) = 2; NaN stays.
static inline float ke_erfc(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float z = a > 10.1f ? 10.1f : a;
    float t;
    const float g = ke_erfc_exponent(z, &t);
    const float zh = ke_i2f(ke_f2i(z) & static_cast<int32_t>(0xfffff000u));
    float tail = t * ke_exp_sum(-zh * zh, g - (z - zh) * (z + zh));
    tail = a > 10.1f ? 0.0f : tail;
    return x < 0.0f ? 2.0f - tail : tail;
#else
    return std::erfc(x);
#endif
}
""")
