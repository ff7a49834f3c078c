"""The C++ prelude every synthesized kernel file starts with: schedule macros, the
vectorisable float math (cpp_math.py: exp and log; cpp_special.py: sigmoid, tanh, hyperbolic,
erf; cpp_trig.py: trigonometry; cpp_pow.py: pow; each falls back to libm when FAST_EXP is 0), integer helpers
with torch's wrap-around and rounding, and exact branch-free float helpers (fmod, remainder,
floor division, hypot, nextafter, bucketize)."""
from __future__ import annotations

import re

from kernelevolve.synth.cpp_math import EXP_LOG
from kernelevolve.synth.cpp_pow import POW
from kernelevolve.synth.cpp_special import SPECIAL
from kernelevolve.synth.cpp_trig import TRIG

# What kernel code reads each tunable through: a kernel that calls none of these is the same
# whatever the tunable's value, so the module does not declare it (the tuner would spend
# evaluations on identical kernels: 7 of 30 on FAST_EXP for relu(x)*2+1).
TUNABLE_READERS = {
    "PARALLEL_MIN_ELEMENTS": ("PARALLEL_MIN_ELEMENTS",),
    "ROWS_PER_TASK": ("KE_SCHEDULE",),
    "FAST_EXP": ("KE_EXP", "ke_exp2", "ke_expm1", "ke_log", "ke_log2", "ke_log10", "ke_log1p",
                 "ke_sigmoid", "ke_tanh", "ke_sinh", "ke_cosh", "ke_asinh", "ke_acosh",
                 "ke_atanh", "ke_normal_cdf", "ke_erf", "ke_erfc", "ke_sin", "ke_cos", "ke_tan",
                 "ke_atan", "ke_atan2", "ke_asin", "ke_acos", "ke_pow"),
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

""" + EXP_LOG + SPECIAL + TRIG + POW + r"""

// where(c, a, b) as a bit blend of both sides: with `c ? a : b` g++ may sink a side read
// straight from memory (a scalar operand, `in1[0]`) into its branch, a conditional load that
// keeps the whole loop scalar (see cpp_expr.py's where).
static inline float ke_select(bool c, float a, float b) {
    const int32_t m = -static_cast<int32_t>(c);
    return ke_i2f((ke_f2i(a) & m) | (ke_f2i(b) & ~m));
}
static inline int64_t ke_select(bool c, int64_t a, int64_t b) {
    const int64_t m = -static_cast<int64_t>(c);
    return (a & m) | (b & ~m);
}
static inline int32_t ke_select(bool c, int32_t a, int32_t b) {
    const int32_t m = -static_cast<int32_t>(c);
    return (a & m) | (b & ~m);
}
static inline bool ke_select(bool c, bool a, bool b) { return (c & a) | (!c & b); }

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
// fmod(a, b), exact and branch-free: |a| is reduced modulo |b| 2^k, k stepping down by 22
// from the exponent gap, each step taking a quotient below 2^23: one division, trunc, and an
// fma that is exact (the remainder of the exact quotient, or that minus |b| 2^k when the
// division rounded up to the next integer, fixed by one add). STEPS covers the widest gap:
// 13 for any b (276 bits, FLT_MAX over the smallest subnormal); cpp_expr.py passes fewer for
// a constant b (the gap is at most 127 - exponent(b)). Subnormal exponents are read after
// scaling by 2^24. Then C's ends: NaN for a zero divisor, an infinite or NaN operand; |a| <
// |b| (b = inf included) gives a; the sign is a's (fmod(-0, 3) = -0).
static inline int32_t ke_exponent(float v) {
    const bool sub = v < 1.17549435e-38f;
    return ((ke_f2i(sub ? v * 16777216.0f : v) >> 23) & 0xff) - (sub ? 151 : 127);
}
template <int STEPS = 13> static inline float ke_fmod(float a, float b) {
    const float x = std::fabs(a), y = std::fabs(b);
    int32_t k = ke_exponent(x) - ke_exponent(y) - 22;
    k = k < 0 ? 0 : (k > 254 ? 254 : k);
    float d = (y * ke_pow2k(static_cast<uint32_t>(k >> 1))) *
              ke_pow2k(static_cast<uint32_t>(k - (k >> 1)));
    float r = x;
    #pragma GCC unroll 13
    for (int step = 0; step < STEPS; ++step) {
        const float q = std::trunc(r / d);
        r = std::fma(-q, d, r);
        r = r < 0.0f ? r + d : r;
        const float dn = d * 2.38418579e-07f;  // 2^-22
        d = dn > y ? dn : y;
    }
    r = x < y ? x : r;
    r = (y == 0.0f || x == INFINITY || a != a || b != b) ? NAN : r;
    return std::copysign(r, a);
}
// fmod in one step, in double: for float a and b the exact quotient |a| / |b| is either an
// integer or at least 2^-24 away from one, so below 2^28 its double (relative error 2^-53)
// truncates to the exact integer n, and |a| - n |b| is exact in double (n |b| has at most 52
// significant bits) and in float (it is a multiple of |b|'s unit below |b|). A larger quotient
// raises `far` (a zero divisor does not: its NaN needs no quotient), and the kernel then runs
// again with ke_fmod<13> (emit_cpp.py, flat kernels).
static inline float ke_fmod_fast(int& far, float a, float b) {
    const float x = std::fabs(a), y = std::fabs(b);
    const double q = static_cast<double>(x) / static_cast<double>(y);
    float r = static_cast<float>(std::fma(-std::trunc(q), static_cast<double>(y),
                                          static_cast<double>(x)));
    far |= (q >= 268435456.0) & (x != INFINITY) & (y != 0.0f);
    r = x < y ? x : r;
    r = (y == 0.0f || x == INFINITY || a != a || b != b) ? NAN : r;
    return std::copysign(r, a);
}
// torch.remainder on floats: fmod, plus b when the signs differ.
static inline float ke_rem_of(float r, float b) {
    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
template <int STEPS = 13> static inline float ke_frem(float a, float b) {
    return ke_rem_of(ke_fmod<STEPS>(a, b), b);
}
static inline float ke_frem_fast(int& far, float a, float b) {
    return ke_rem_of(ke_fmod_fast(far, a, b), b);
}
// torch.floor_divide on floats (c10's div_floor_floating): floor(a / b) rounds the quotient
// first and is off by one when a / b rounds up to an integer (a = 1, b = 0.1: 10, torch 9).
// So: the exact multiple (a - fmod(a, b)) / b, one less when the remainder's sign differs
// from b's, snapped to the nearest integer; a zero quotient keeps the sign of a / b, and a
// zero divisor gives a / b (inf or NaN), as torch does. All selects.
static inline float ke_floordiv_of(float a, float b, float mod) {
    float div = (a - mod) / b;
    div = (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) ? div - 1.0f : div;
    float fl = std::floor(div);
    fl = div - fl > 0.5f ? fl + 1.0f : fl;
    fl = div == 0.0f ? std::copysign(0.0f, a / b) : fl;
    return b == 0.0f ? a / b : fl;
}
template <int STEPS = 13> static inline float ke_ffloordiv(float a, float b) {
    return ke_floordiv_of(a, b, ke_fmod<STEPS>(a, b));
}
static inline float ke_ffloordiv_fast(int& far, float a, float b) {
    return ke_floordiv_of(a, b, ke_fmod_fast(far, a, b));
}
// hypot in double: the squares of floats are exact there and cannot overflow; an infinite
// operand gives inf even beside a NaN (C99, torch).
static inline float ke_hypot(float a, float b) {
    const double x = a, y = b;
    const float h = static_cast<float>(std::sqrt(x * x + y * y));
    return (std::fabs(a) == INFINITY || std::fabs(b) == INFINITY) ? INFINITY : h;
}
// nextafter: one step of the bit pattern toward b (away from zero when b is beyond a on a's
// side); from +-0 the smallest subnormal with b's sign; b itself when a == b; NaN if either is.
static inline float ke_nextafter(float a, float b) {
    const int32_t ia = ke_f2i(a);
    const bool away = (b > a) == (a > 0.0f);
    float v = ke_i2f(away ? ia + 1 : ia - 1);
    v = a == 0.0f ? std::copysign(1.40129846e-45f, b) : v;
    v = a == b ? b : v;
    return (a != a || b != b) ? NAN : v;
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
