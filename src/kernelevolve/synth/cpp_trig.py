"""Vectorisable float32 trigonometry for the C++ prelude: sin, cos, tan and their inverses.

Branch-free like cpp_math.py (whose helpers and COEFFS these use); FAST_EXP off falls back to
libm. sin / cos / tan reduce by Cody-Waite with a three-part pi/2, exact to about an ulp for
|x| <= 2^18 = 262144. Beyond that they return NaN rather than a wrong value: a correct
reduction of larger arguments (Payne-Hanek, the bits of 2/pi picked by the exponent) needs
table lookups, which g++ does not vectorise here (it emulates gathers), and would cost every
element. FAST_EXP=0 (libm) is right for every argument; the harness tells the two apart.
"""
from __future__ import annotations

from kernelevolve.synth.cpp_math import expand

# |x| above this: NaN (see the module docstring); the reduction's bounds are checked for it.
TRIG_BOUND = 262144.0

TRIG = expand(r"""
// pi/2, pi/4 and pi as float pairs hi + lo (hi is the nearest float).
#define KE_PIO2_HI 1.5707963705062866f
#define KE_PIO2_LO -4.371138828673793e-08f
#define KE_PIO4_HI 0.7853981852531433f
#define KE_PIO4_LO -2.1855694143368964e-08f
#define KE_PI_HI 3.1415927410125732f
#define KE_PI_LO -8.742277657347586e-08f

// x = n pi/2 + r: n = round(x * 2/pi) by the magic-number rounding of cpp_math.py (its bits
// give the quadrant, no conversion), r = x - n pi/2 with pi/2 in three floats (the first fma is
// exact, the other two round once each), for |x| <= 2^18 (beyond, and for inf / NaN, q and r
// are garbage the callers select away). The float 2/pi can pick n one off near a quadrant
// boundary, leaving |r| up to pi/4 + 0.03: the polynomials are fitted on that interval.
static inline float ke_trig_reduce(float x, int32_t* q) {
    const float t = std::fma(x, 0.636619772367581343f, KE_ROUND_MAGIC);
    const float n = t - KE_ROUND_MAGIC;
    float r = std::fma(n, -1.5707963705062866f, x);
    r = std::fma(n, 4.371138828673793e-08f, r);
    r = std::fma(n, 1.7151245100058819e-15f, r);
    *q = static_cast<int32_t>(ke_round_bits(t));
    return r;
}

static inline float ke_sin_r(float r, float r2) {
POLY(p, r2, sin);
    return std::fma(r * r2, p, r);
}

static inline float ke_cos_r(float r2) {
POLY(p, r2, cos);
    return std::fma(r2, std::fma(r2, p, -0.5f), 1.0f);
}

// In range: the value; +-0: x (sin and tan keep the sign); else (|x| > 2^18, inf, NaN): NaN.
static inline float ke_trig_ends(float x, float v, bool odd) {
    v = (odd && x == 0.0f) ? x : v;
    return std::fabs(x) <= 262144.0f ? v : NAN;
}

static inline float ke_sin(float x) {
#if FAST_EXP
    int32_t q;
    const float r = ke_trig_reduce(x, &q);
    const float r2 = r * r;
    const float v = (q & 1) ? ke_cos_r(r2) : ke_sin_r(r, r2);
    return ke_trig_ends(x, (q & 2) ? -v : v, true);
#else
    return std::sin(x);
#endif
}

static inline float ke_cos(float x) {
#if FAST_EXP
    int32_t q;
    const float r = ke_trig_reduce(x, &q);
    const float r2 = r * r;
    const float v = (q & 1) ? ke_sin_r(r, r2) : ke_cos_r(r2);
    return ke_trig_ends(x, ((q + 1) & 2) ? -v : v, false);
#else
    return std::cos(x);
#endif
}

// tan = sin r / cos r, or -cos r / sin r in the odd quadrants.
static inline float ke_tan(float x) {
#if FAST_EXP
    int32_t q;
    const float r = ke_trig_reduce(x, &q);
    const float r2 = r * r;
    const float s = ke_sin_r(r, r2), c = ke_cos_r(r2);
    const float v = (q & 1) ? -c / s : s / c;
    return ke_trig_ends(x, v, true);
#else
    return std::tan(x);
#endif
}

// atan: |x| > tan(3 pi/8) uses pi/2 + atan(-1/|x|), |x| > tan(pi/8) pi/4 + atan((|x| - 1) /
// (|x| + 1)), so the polynomial sees |t| <= tan(pi/8); one division either way. The sign is
// copied back (atan(-0) = -0; NaN stays NaN).
static inline float ke_atan(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const bool big = a > 2.41421356237309505f, mid = a > 0.414213562373095049f;
    const float num = big ? -1.0f : (mid ? a - 1.0f : a);
    const float den = big ? a : (mid ? a + 1.0f : 1.0f);
    const float t = num / den;
    const float t2 = t * t;
POLY(p, t2, atan);
    const float hi = big ? KE_PIO2_HI : (mid ? KE_PIO4_HI : 0.0f);
    const float lo = big ? KE_PIO2_LO : (mid ? KE_PIO4_LO : 0.0f);
    return std::copysign(hi + (std::fma(t * t2, p, t) + lo), x);
#else
    return std::atan(x);
#endif
}

// atan2(y, x) as C99 and torch: atan of min(|x|, |y|) / max(|x|, |y|) (0 / 0 taken as 0,
// inf / inf as 1), then pi/2 - a when |y| > |x|, pi - a when x has its sign bit (so -0 and
// -inf give pi), and y's sign on the result.
static inline float ke_atan2(float y, float x) {
#if FAST_EXP
    const float ax = std::fabs(x), ay = std::fabs(y);
    const float mx = ax > ay ? ax : ay, mn = ax > ay ? ay : ax;
    float t = mn / mx;
    t = mx == 0.0f ? 0.0f : t;
    t = mn == INFINITY ? 1.0f : t;
    float a = ke_atan(t);
    a = ay > ax ? KE_PIO2_HI - (a - KE_PIO2_LO) : a;
    a = std::signbit(x) ? KE_PI_HI - (a - KE_PI_LO) : a;
    const float v = std::copysign(a, y);
    return (x != x || y != y) ? NAN : v;
#else
    return std::atan2(y, x);
#endif
}

// asin: |x| <= 1/2 is s + s^3 P(s^2) at s = |x|; above, pi/2 - 2 asin(sqrt((1 - |x|) / 2))
// (1 - |x| is exact there). |x| > 1 takes the square root of a negative: NaN, as torch.
static inline float ke_asin_parts(float a) {
    const bool small = a <= 0.5f;
    const float z = 0.5f * (1.0f - a);
    const float s = small ? a : std::sqrt(z);
    const float w = small ? a * a : z;
POLY(p, w, asin);
    return std::fma(s * w, p, s);
}

static inline float ke_asin(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float p = ke_asin_parts(a);
    const float v = a <= 0.5f ? p : KE_PIO2_HI - (2.0f * p - KE_PIO2_LO);
    return std::copysign(v, x);
#else
    return std::asin(x);
#endif
}

// acos: pi/2 - asin(x) for |x| <= 1/2, 2 asin(sqrt((1 - x) / 2)) above, pi minus that below.
static inline float ke_acos(float x) {
#if FAST_EXP
    const float a = std::fabs(x);
    const float p = ke_asin_parts(a);
    const float small = KE_PIO2_HI - (std::copysign(p, x) - KE_PIO2_LO);
    const float v = x > 0.0f ? 2.0f * p : KE_PI_HI - (2.0f * p - KE_PI_LO);
    return a <= 0.5f ? small : v;
#else
    return std::acos(x);
#endif
}
""")
