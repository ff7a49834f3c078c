"""x ** y for any float exponent, vectorisable, in double precision inside (the C++ prelude's
ke_pow). A float exp(y log x) loses |y log2 x| ulps (x ** 50 on x near 2: 50 ulps), so the
synthesizer spelled a general exponent std::pow, scalar libm, and pow(x, y) drew 0.65x eager.
Here log2|x| and 2^t are series in double, cut where their terms fall below 2^-50 of the
first, so the double result is within about 1e-13 relative of x^y whatever y is, and its
rounding to float is the correctly rounded value except in near-ties (glibc's powf is
correctly rounded; torch's vectorised pow, Sleef's, is within 1 ulp). Every special case of
C's pow is a select.
"""
from __future__ import annotations

POW = r"""
// Bits of a double and back.
static inline double ke_d_of(int64_t i) { double d; std::memcpy(&d, &i, sizeof d); return d; }
static inline int64_t ke_d_bits(double d) { int64_t i; std::memcpy(&i, &d, sizeof i); return i; }

// log2 of a positive finite double: |x| = 2^e m, m in [sqrt(1/2), sqrt(2)) (subtracting the
// bits of sqrt(1/2) moves the exponent field so that the borrow picks e), then
// ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: s (1 + s^2 / 3 + ... + s^18 / 19).
// e is read without an int64 -> double conversion or an arithmetic 64-bit shift (AVX2 has
// neither, and either left pow's loop scalar there): e + 1022, a logical shift of ib with the
// bias put back (non-negative: x is at least float's least subnormal, far above
// sqrt(1/2) 2^-1022), goes into the mantissa of 2^52, and 2^52 + 1022 comes off.
static inline double ke_log2_d(double x) {
    const int64_t ib = ke_d_bits(x) - 0x3FE6A09E667F3BCDLL;
    const uint64_t biased = static_cast<uint64_t>(ib + (1022LL << 52)) >> 52;
    const double e = ke_d_of(static_cast<int64_t>(biased) | 0x4330000000000000LL) -
                     4503599627371518.0;
    const double m = ke_d_of((ib & 0x000FFFFFFFFFFFFFLL) + 0x3FE6A09E667F3BCDLL);
    const double s = (m - 1.0) / (m + 1.0);
    const double s2 = s * s;
    double p = 0.05263157894736842;
    p = std::fma(p, s2, 0.058823529411764705);
    p = std::fma(p, s2, 0.06666666666666667);
    p = std::fma(p, s2, 0.07692307692307693);
    p = std::fma(p, s2, 0.09090909090909091);
    p = std::fma(p, s2, 0.1111111111111111);
    p = std::fma(p, s2, 0.14285714285714285);
    p = std::fma(p, s2, 0.2);
    p = std::fma(p, s2, 0.3333333333333333);
    p = std::fma(p, s2, 1.0);
    return std::fma(s * p, 2.8853900817779268, e);   // 2 / ln 2
}

// 2^t, t clamped to [-190, 190] (a float result is 0 or inf beyond): n = round(t) by adding
// 1.5 * 2^52 (its low bits are n), r = t - n exact in [-1/2, 1/2], 2^r = e^(r ln 2) by its
// Taylor series to the 12th power (|r ln 2| <= 0.347: last term 6e-15), times 2^n by bits.
static inline double ke_exp2_d(double t) {
    t = t < -190.0 ? -190.0 : (t > 190.0 ? 190.0 : t);
    const double k = t + 6755399441055744.0;
    const double u = (t - (k - 6755399441055744.0)) * 0.6931471805599453;
    double p = 2.08767569878681e-09;
    p = std::fma(p, u, 2.505210838544172e-08);
    p = std::fma(p, u, 2.755731922398589e-07);
    p = std::fma(p, u, 2.7557319223985893e-06);
    p = std::fma(p, u, 2.48015873015873e-05);
    p = std::fma(p, u, 0.0001984126984126984);
    p = std::fma(p, u, 0.001388888888888889);
    p = std::fma(p, u, 0.008333333333333333);
    p = std::fma(p, u, 0.041666666666666664);
    p = std::fma(p, u, 0.16666666666666666);
    p = std::fma(p, u, 0.5);
    p = std::fma(p, u, 1.0);
    p = std::fma(p, u, 1.0);
    const int64_t n = ke_d_bits(k) - ke_d_bits(6755399441055744.0);
    return p * ke_d_of((n + 1023) << 52);
}

// x ** y as C's pow (torch's on a CPU): y = 0 and x = 1 give 1 even beside NaN; a zero or an
// infinite x gives 0 or inf by the sign of y; an infinite y gives 1 at |x| = 1, else 0 or inf
// by whether |x| < 1 and y < 0 agree; a negative x takes the sign of an odd integer y and is
// NaN for a non-integer y (-inf excepted); NaN otherwise propagates.
static inline float ke_pow(float x, float y) {
#if FAST_EXP
    const float ax = std::fabs(x), ay = std::fabs(y);
    float v = static_cast<float>(ke_exp2_d(static_cast<double>(y) *
                                           ke_log2_d(static_cast<double>(ax))));
    // (bitwise & and | on the conditions, and y's parity in float, not through an int32:
    // either way g++ left the loop scalar)
    const bool whole = y == std::trunc(y);
    const bool odd = ay - 2.0f * std::trunc(0.5f * ay) == 1.0f;   // exact; inf and NaN: no
    v = ((ax == 0.0f) | (ax == INFINITY)) ? (((ax == 0.0f) == (y < 0.0f)) ? INFINITY : 0.0f) : v;
    v = ay == INFINITY ? (ax == 1.0f ? 1.0f : (((ax < 1.0f) == (y < 0.0f)) ? INFINITY : 0.0f)) : v;
    v = (std::signbit(x) & odd) ? -v : v;
    v = ((x < 0.0f) & (ax != INFINITY) & !whole) ? NAN : v;
    v = ((x != x) | (y != y)) ? NAN : v;
    return ((y == 0.0f) | (x == 1.0f)) ? 1.0f : v;
#else
    return std::pow(x, y);
#endif
}
"""
