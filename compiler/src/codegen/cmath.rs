//! The C math prelude: freestanding `static inline` implementations of every function the
//! renderer calls (no libc at run time; only `__builtin_sqrt[f]`, which compiles to an instruction).
//! [`prelude`] emits just the sections a kernel uses, with their dependencies, in a fixed order.
//!
//! Accuracy, measured by `compiler/tests/cmath.rs` against Rust's f64 functions over dense ranges
//! (float results; `ulp` = float32 unit in the last place):
//!
//! | function | float32 | float64 |
//! |---|---|---|
//! | exp | rel < 1.2e-7 on [-87, 88]; exact 0/subnormals below, inf above 88.73 | rel < 5e-16 (fdlibm) |
//! | log | rel < 1.2e-7 on [1e-30, 1e30] | rel < 5e-16 (fdlibm) |
//! | tanh | abs < 2e-7, rel < 3e-7 | rel < 1e-15 |
//! | erf | abs < 3e-7 | abs < 1e-9 (the interpreter's own algorithm: Taylor + the NR erfc fit) |
//! | sin, cos | abs < 1e-7 for \|x\| <= 1e4 (computed in double) | abs < 5e-16 for \|x\| <= 1e5; degrades beyond 2^20 |
//! | tan, atan, asin, acos, atan2 | rel < 1.2e-7 (computed in double) | rel < 1e-15 |
//! | pow | rel < 1.2e-7 (computed in double) | rel < \|y ln x\| 2^-52 (about 1e-13 worst) |
//! | floor, ceil, trunc, round-half-even, fmod, float16 conversions | exact | exact |
//!
//! Special values follow IEEE/C: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN,
//! NaN in gives NaN out (pow(x, 0) = pow(1, y) = 1), tanh/erf(+-inf) = +-1, sin(inf) = NaN.

/// One section of the prelude: the C functions it defines and the sections it calls into.
struct Section {
    name: &'static str,
    deps: &'static [&'static str],
    source: &'static str,
}

/// Every section, dependencies first.
const SECTIONS: &[Section] = &[
    Section {
        name: "base",
        deps: &[],
        source: r#"typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;
static inline u32 pl_fbits(f32 x) { union { f32 f; u32 u; } c; c.f = x; return c.u; }
static inline f32 pl_bitsf(u32 u) { union { f32 f; u32 u; } c; c.u = u; return c.f; }
static inline u64 pl_dbits(f64 x) { union { f64 f; u64 u; } c; c.f = x; return c.u; }
static inline f64 pl_bitsd(u64 u) { union { f64 f; u64 u; } c; c.u = u; return c.f; }
#define PL_INFF __builtin_inff()
#define PL_NANF __builtin_nanf("")
#define PL_INF __builtin_inf()
#define PL_NAN __builtin_nan("")
"#,
    },
    Section {
        name: "fabs",
        deps: &[],
        source: r#"static inline f32 pl_fabsf(f32 x) { return pl_bitsf(pl_fbits(x) & 0x7fffffffu); }
static inline f32 pl_copysignf(f32 x, f32 s) {
    return pl_bitsf((pl_fbits(x) & 0x7fffffffu) | (pl_fbits(s) & 0x80000000u));
}
static inline f64 pl_fabsd(f64 x) { return pl_bitsd(pl_dbits(x) & 0x7fffffffffffffffull); }
static inline f64 pl_copysignd(f64 x, f64 s) {
    return pl_bitsd((pl_dbits(x) & 0x7fffffffffffffffull) | (pl_dbits(s) & 0x8000000000000000ull));
}
"#,
    },
    Section {
        name: "round",
        deps: &["fabs"],
        source: r#"/* Exact; every result carries the sign of x (as IEEE rounding does); NaN and inf pass through. */
static inline f32 pl_truncf(f32 x) {
    int small = pl_fabsf(x) < 0x1p23f;
    f32 t = (f32)(i32)(small ? x : 0.0f);
    return small ? pl_copysignf(t, x) : x;
}
static inline f32 pl_floorf(f32 x) { f32 t = pl_truncf(x); return pl_copysignf(t > x ? t - 1.0f : t, x); }
static inline f32 pl_ceilf(f32 x) { f32 t = pl_truncf(x); return pl_copysignf(t < x ? t + 1.0f : t, x); }
/* Round half to even. */
static inline f32 pl_roundf(f32 x) {
    int small = pl_fabsf(x) < 0x1p23f;
    i32 i = (i32)(small ? x : 0.0f);
    f32 d = pl_fabsf(x - (f32)i);
    f32 r = (f32)i + ((d > 0.5f || (d == 0.5f && (i & 1))) ? pl_copysignf(1.0f, x) : 0.0f);
    return small ? pl_copysignf(r, x) : x;
}
static inline f64 pl_truncd(f64 x) {
    int small = pl_fabsd(x) < 0x1p52;
    f64 t = (f64)(i64)(small ? x : 0.0);
    return small ? pl_copysignd(t, x) : x;
}
static inline f64 pl_floord(f64 x) { f64 t = pl_truncd(x); return pl_copysignd(t > x ? t - 1.0 : t, x); }
static inline f64 pl_ceild(f64 x) { f64 t = pl_truncd(x); return pl_copysignd(t < x ? t + 1.0 : t, x); }
static inline f64 pl_roundd(f64 x) {
    int small = pl_fabsd(x) < 0x1p52;
    i64 i = (i64)(small ? x : 0.0);
    f64 d = pl_fabsd(x - (f64)i);
    f64 r = (f64)i + ((d > 0.5 || (d == 0.5 && (i & 1))) ? pl_copysignd(1.0, x) : 0.0);
    return small ? pl_copysignd(r, x) : x;
}
"#,
    },
    Section {
        name: "f2i",
        deps: &[],
        source: r#"/* Float to int64 truncating toward zero, saturating, NaN -> 0 (the interpreter's cast_int). */
static inline i64 pl_f2i(f32 x) {
    return x != x ? 0 : x >= 0x1p63f ? 0x7fffffffffffffffll
         : x <= -0x1p63f ? -0x7fffffffffffffffll - 1 : (i64)x;
}
static inline i64 pl_d2i(f64 x) {
    return x != x ? 0 : x >= 0x1p63 ? 0x7fffffffffffffffll
         : x <= -0x1p63 ? -0x7fffffffffffffffll - 1 : (i64)x;
}
"#,
    },
    Section {
        name: "half",
        deps: &[],
        source: r#"/* IEEE binary16 <-> binary32, round to nearest even; NaN stays NaN (quieted). */
static inline f32 pl_h2f(u16 h) {
    u32 s = (u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    u32 bits = e == 0 ? pl_fbits((f32)m * 0x1p-24f)
             : e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13);
    return pl_bitsf(bits | s);
}
static inline u16 pl_f2h(f32 f) {
    u32 x = pl_fbits(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (u16)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (u16)(s | 0x7c00u);
    if (a < 0x38800000u) return (u16)(s | (pl_fbits(pl_bitsf(a) + 0.5f) - 0x3f000000u));
    return (u16)(s | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
}
/* Rounds a float to the nearest float16 value (the interpreter rounds every float16 result). */
static inline f32 pl_rh(f32 x) { return pl_h2f(pl_f2h(x)); }
"#,
    },
    Section {
        name: "exp",
        deps: &[],
        source: r#"/* exp: Cody-Waite reduction by ln 2, Cephes polynomial, two-step scaling (exact subnormals). */
static inline f32 pl_expf(f32 x) {
    f32 xc = x < -104.0f ? -104.0f : x;
    xc = xc > 88.8f ? 88.8f : xc;
    xc = x == x ? xc : 0.0f;
    i32 k = (i32)(xc * 1.44269504088896341f + (xc < 0.0f ? -0.5f : 0.5f));
    f32 fk = (f32)k;
    f32 r = xc - fk * 0.693359375f;
    r = r - fk * -2.12194440e-4f;
    f32 p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    f32 y = p * r * r + r + 1.0f;
    i32 k1 = k / 2, k2 = k - k1;
    y = y * pl_bitsf((u32)(k1 + 127) << 23) * pl_bitsf((u32)(k2 + 127) << 23);
    return x == x ? y : x;
}
/* fdlibm e_exp.c: rational approximation on [-ln2/2, ln2/2], error < 1 ulp. */
static inline f64 pl_expd(f64 x) {
    f64 xc = x < -746.0 ? -746.0 : x;
    xc = xc > 710.0 ? 710.0 : xc;
    xc = x == x ? xc : 0.0;
    i32 k = (i32)(xc * 1.44269504088896338700e+00 + (xc < 0.0 ? -0.5 : 0.5));
    f64 fk = (f64)k;
    f64 hi = xc - fk * 6.93147180369123816490e-01;
    f64 lo = fk * 1.90821492927058770002e-10;
    f64 r = hi - lo;
    f64 t = r * r;
    f64 c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03
              + t * (6.61375632143793436117e-05 + t * (-1.65339022054652515390e-06
              + t * 4.13813679705723846039e-08))));
    f64 y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    i32 k1 = k / 2, k2 = k - k1;
    y = y * pl_bitsd((u64)(k1 + 1023) << 52) * pl_bitsd((u64)(k2 + 1023) << 52);
    return x == x ? y : x;
}
"#,
    },
    Section {
        name: "log",
        deps: &[],
        source: r#"/* log: Cephes logf (mantissa in [sqrt(1/2), sqrt(2)), degree-9 polynomial). */
static inline f32 pl_logf(f32 x) {
    int sub = pl_fbits(x) < 0x00800000u;
    u32 ix = pl_fbits(sub ? x * 0x1p25f : x);
    i32 e = (i32)((ix >> 23) & 0xffu) - 126 - (sub ? 25 : 0);
    f32 m = pl_bitsf((ix & 0x007fffffu) | 0x3f000000u);
    int lo = m < 0.707106781186547524f;
    e = lo ? e - 1 : e;
    f32 t = lo ? m + m - 1.0f : m - 1.0f;
    f32 z = t * t;
    f32 y = 7.0376836292e-2f;
    y = y * t - 1.1514610310e-1f;
    y = y * t + 1.1676998740e-1f;
    y = y * t - 1.2420140846e-1f;
    y = y * t + 1.4249322787e-1f;
    y = y * t - 1.6668057665e-1f;
    y = y * t + 2.0000714765e-1f;
    y = y * t - 2.4999993993e-1f;
    y = y * t + 3.3333331174e-1f;
    y = y * t * z;
    f32 fe = (f32)e;
    y = y + fe * -2.12194440e-4f;
    y = y - 0.5f * z;
    f32 r = t + y + fe * 0.693359375f;
    r = x == 0.0f ? -PL_INFF : r;
    r = x < 0.0f ? PL_NANF : r;
    return (x != x || x == PL_INFF) ? x : r;
}
/* fdlibm e_log.c, error < 1 ulp. */
static inline f64 pl_logd(f64 x) {
    int sub = pl_dbits(x) < 0x0010000000000000ull;
    u64 ix = pl_dbits(sub ? x * 0x1p54 : x);
    u32 hx = (u32)(ix >> 32) + (0x3ff00000u - 0x3fe6a09eu);
    i32 k = (i32)(hx >> 20) - 0x3ff - (sub ? 54 : 0);
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    f64 f = pl_bitsd(((u64)hx << 32) | (ix & 0xffffffffull)) - 1.0;
    f64 hfsq = 0.5 * f * f;
    f64 s = f / (2.0 + f);
    f64 z = s * s;
    f64 w = z * z;
    f64 t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    f64 t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01
              + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    f64 dk = (f64)k;
    f64 r = s * (hfsq + t1 + t2) + dk * 1.90821492927058770002e-10 - hfsq + f + dk * 6.93147180369123816490e-01;
    r = x == 0.0 ? -PL_INF : r;
    r = x < 0.0 ? PL_NAN : r;
    return (x != x || x == PL_INF) ? x : r;
}
"#,
    },
    Section {
        name: "tanh",
        deps: &["fabs", "exp"],
        source: r#"/* tanh: Cephes odd polynomial below |x| = 0.625, 1 - 2/(exp(2|x|) + 1) above. */
static inline f32 pl_tanhf(f32 x) {
    f32 a = pl_fabsf(x);
    f32 z = x * x;
    f32 p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    f32 small = p * z * x + x;
    f32 e = pl_expf(2.0f * (a > 20.0f ? 20.0f : a));
    f32 big = pl_copysignf(1.0f - 2.0f / (e + 1.0f), x);
    f32 r = a < 0.625f ? small : big;
    return x == x ? r : x;
}
/* expm1 for 0 <= v: Taylor series below 0.35 (15 terms), exp(v) - 1 above. */
static inline f64 pl_expm1p(f64 v) {
    f64 s = 1.0 / 1307674368000.0;
    s = s * v + 1.0 / 87178291200.0;
    s = s * v + 1.0 / 6227020800.0;
    s = s * v + 1.0 / 479001600.0;
    s = s * v + 1.0 / 39916800.0;
    s = s * v + 1.0 / 3628800.0;
    s = s * v + 1.0 / 362880.0;
    s = s * v + 1.0 / 40320.0;
    s = s * v + 1.0 / 5040.0;
    s = s * v + 1.0 / 720.0;
    s = s * v + 1.0 / 120.0;
    s = s * v + 1.0 / 24.0;
    s = s * v + 1.0 / 6.0;
    s = s * v + 0.5;
    s = s * v * v + v;
    return v < 0.35 ? s : pl_expd(v) - 1.0;
}
static inline f64 pl_tanhd(f64 x) {
    f64 a = pl_fabsd(x);
    f64 u = pl_expm1p(2.0 * (a > 40.0 ? 40.0 : a));
    f64 r = pl_copysignd(u / (u + 2.0), x);
    return x == x ? r : x;
}
"#,
    },
    Section {
        name: "erf",
        deps: &["fabs", "exp"],
        source: r#"/* erf: Taylor series below |x| = 1 (13 terms), above it 1 - erfc with the Numerical Recipes Chebyshev fit
   of erfc (relative error < 1.2e-7), the same fit the interpreter uses above |x| = 2. */
static inline f32 pl_erff(f32 x) {
    f32 a = pl_fabsf(x);
    f32 z = x * x;
    f32 p = 8.350702795e-11f;
    p = p * z + -1.089222104e-09f;
    p = p * z + 1.312253296e-08f;
    p = p * z + -1.450385222e-07f;
    p = p * z + 1.458916900e-06f;
    p = p * z + -1.322751323e-05f;
    p = p * z + 1.068376068e-04f;
    p = p * z + -7.575757576e-04f;
    p = p * z + 4.629629630e-03f;
    p = p * z + -2.380952381e-02f;
    p = p * z + 1.000000000e-01f;
    p = p * z + -3.333333333e-01f;
    p = p * z + 1.000000000e+00f;
    f32 small = 1.12837916709551257f * x * p;
    f32 ac = a > 10.0f ? 10.0f : a;
    f32 t = 1.0f / (1.0f + 0.5f * ac);
    f32 q = 0.17087277f;
    q = q * t - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    f32 r = t * pl_expf(q - ac * ac);
    f32 res = a < 1.0f ? small : pl_copysignf(1.0f - r, x);
    return x == x ? res : x;
}
/* The interpreter's algorithm: Taylor series below |x| = 2 (60 terms), the erfc fit above. */
static inline f64 pl_erfd(f64 x) {
    f64 a = pl_fabsd(x);
    f64 x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 60; n++) {
        term *= -x2 / (f64)n;
        sum += term / (f64)(2 * n + 1);
    }
    f64 small = sum * 1.12837916709551257390;
    f64 ac = a > 30.0 ? 30.0 : a;
    f64 t = 1.0 / (1.0 + 0.5 * ac);
    f64 q = t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
          + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223
          + t * 0.17087277))))))));
    f64 r = t * pl_expd(-ac * ac - 1.26551223 + q);
    f64 res = a < 2.0 ? small : pl_copysignd(1.0 - r, x);
    return x == x ? res : x;
}
"#,
    },
    Section {
        name: "trig",
        deps: &["fabs"],
        source: r#"/* sin/cos/tan: musl's medium-range reduction by pi/2 (two rounds, 118 bits of pi/2; accurate for
   |x| < 2^20 * pi/2, degrading beyond) and fdlibm's kernels on [-pi/4, pi/4]. */
static inline f64 pl_ksin(f64 x, f64 y) {
    f64 z = x * x, w = z * z, v = z * x;
    f64 r = 8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * 2.75573137070700676789e-06)
          + z * w * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10);
    return x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01);
}
static inline f64 pl_kcos(f64 x, f64 y) {
    f64 z = x * x, w = z * z;
    f64 r = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * 2.48015872894767294178e-05))
          + w * w * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11));
    f64 hz = 0.5 * z;
    w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}
/* Reduces x to y0 + y1 in [-pi/4, pi/4] and returns the quadrant. */
static inline i32 pl_rem_pio2(f64 x, f64 *y0, f64 *y1) {
    f64 q = x * 6.36619772367581382433e-01;
    q = pl_fabsd(q) < 0x1p52 ? q : 0.0;
    f64 fn = (f64)(i64)(q + (q < 0.0 ? -0.5 : 0.5));
    f64 r = x - fn * 1.57079632673412561417e+00;
    f64 t = r;
    f64 w = fn * 6.07710050630396597660e-11;
    r = t - w;
    w = fn * 2.02226624879595063154e-21 - ((t - r) - w);
    *y0 = r - w;
    *y1 = (r - *y0) - w;
    return (i32)((i64)fn & 3);
}
static inline f64 pl_sind(f64 x) {
    f64 y0, y1;
    i32 n = pl_rem_pio2(x, &y0, &y1);
    f64 s = pl_ksin(y0, y1), c = pl_kcos(y0, y1);
    f64 r = n == 0 ? s : n == 1 ? c : n == 2 ? -s : -c;
    return pl_fabsd(x) < PL_INF ? r : x - x;
}
static inline f64 pl_cosd(f64 x) {
    f64 y0, y1;
    i32 n = pl_rem_pio2(x, &y0, &y1);
    f64 s = pl_ksin(y0, y1), c = pl_kcos(y0, y1);
    f64 r = n == 0 ? c : n == 1 ? -s : n == 2 ? -c : s;
    return pl_fabsd(x) < PL_INF ? r : x - x;
}
static inline f64 pl_tand(f64 x) {
    f64 y0, y1;
    i32 n = pl_rem_pio2(x, &y0, &y1);
    f64 s = pl_ksin(y0, y1), c = pl_kcos(y0, y1);
    f64 r = (n & 1) ? -c / s : s / c;
    return pl_fabsd(x) < PL_INF ? r : x - x;
}
static inline f32 pl_sinf(f32 x) { return (f32)pl_sind((f64)x); }
static inline f32 pl_cosf(f32 x) { return (f32)pl_cosd((f64)x); }
static inline f32 pl_tanf(f32 x) { return (f32)pl_tand((f64)x); }
"#,
    },
    Section {
        name: "atan",
        deps: &["fabs"],
        source: r#"/* fdlibm s_atan.c: argument reduction to |x| < 7/16 by four breakpoints, error < 1 ulp. */
static inline f64 pl_atand(f64 x) {
    f64 a = pl_fabsd(x);
    int id = a < 0.4375 ? -1 : a < 0.6875 ? 0 : a < 1.1875 ? 1 : a < 2.4375 ? 2 : 3;
    f64 ab = a > 0x1p66 ? 0x1p66 : a;
    f64 xr = id < 0 ? x : id == 0 ? (2.0 * ab - 1.0) / (2.0 + ab) : id == 1 ? (ab - 1.0) / (ab + 1.0)
           : id == 2 ? (ab - 1.5) / (1.0 + 1.5 * ab) : -1.0 / ab;
    f64 hi = id == 0 ? 4.63647609000806093515e-01 : id == 1 ? 7.85398163397448278999e-01
           : id == 2 ? 9.82793723247329054082e-01 : 1.57079632679489655800e+00;
    f64 lo = id == 0 ? 2.26987774529616870924e-17 : id == 1 ? 3.06161699786838301793e-17
           : id == 2 ? 1.39033110312309984516e-17 : 6.12323399573676603587e-17;
    f64 z = xr * xr, w = z * z;
    f64 s1 = z * (3.33333333333329318027e-01 + w * (1.42857142725034663711e-01 + w * (9.09088713343650656196e-02
           + w * (6.66107313738753120669e-02 + w * (4.97687799461593236017e-02 + w * 1.62858201153657823623e-02)))));
    f64 s2 = w * (-1.99999999998764832476e-01 + w * (-1.11111104054623557880e-01 + w * (-7.69187620504482999495e-02
           + w * (-5.83357013379057348645e-02 + w * -3.65315727442169155270e-02))));
    f64 small = xr - xr * (s1 + s2);
    f64 big = pl_copysignd(hi - ((xr * (s1 + s2) - lo) - xr), x);
    f64 r = id < 0 ? small : big;
    return x == x ? r : x;
}
static inline f64 pl_asind(f64 x) { return pl_atand(x / __builtin_sqrt((1.0 - x) * (1.0 + x))); }
static inline f64 pl_acosd(f64 x) {
    f64 r = 2.0 * pl_atand(__builtin_sqrt((1.0 - x) / (1.0 + x)));
    return x == -1.0 ? 3.14159265358979311600e+00 : r;
}
static inline f64 pl_atan2d(f64 y, f64 x) {
    const f64 pi = 3.14159265358979311600e+00, pio2 = 1.57079632679489655800e+00;
    f64 ax = pl_fabsd(x), ay = pl_fabsd(y);
    int xneg = (pl_dbits(x) >> 63) != 0;
    f64 a = pl_atand(ay / ax);
    f64 r = xneg ? pi - a : a;
    r = (ay == PL_INF && ax == PL_INF) ? (xneg ? 3.0 * pi / 4.0 : pi / 4.0) : r;
    r = (ay == PL_INF && ax < PL_INF) ? pio2 : r;
    r = (ay < PL_INF && ax == PL_INF) ? (xneg ? pi : 0.0) : r;
    r = ay == 0.0 ? (xneg ? pi : 0.0) : r;
    r = (ax == 0.0 && ay != 0.0) ? pio2 : r;
    r = pl_copysignd(r, y);
    return (x != x || y != y) ? x + y : r;
}
static inline f32 pl_atanf(f32 x) { return (f32)pl_atand((f64)x); }
static inline f32 pl_asinf(f32 x) { return (f32)pl_asind((f64)x); }
static inline f32 pl_acosf(f32 x) { return (f32)pl_acosd((f64)x); }
static inline f32 pl_atan2f(f32 y, f32 x) { return (f32)pl_atan2d((f64)y, (f64)x); }
"#,
    },
    Section {
        name: "pow",
        deps: &["fabs", "round", "exp", "log"],
        source: r#"/* pow as exp(y log|x|) with IEEE special cases; relative error about |y ln x| * 2^-52 in double. */
static inline f64 pl_powd(f64 x, f64 y) {
    f64 ax = pl_fabsd(x), ay = pl_fabsd(y);
    int yint = ay >= 0x1p53 || pl_truncd(y) == y;
    int yodd = ay < 0x1p53 && yint && ((i64)(ay < 0x1p53 ? y : 0.0) & 1);
    f64 r = pl_expd(y * pl_logd(ax));
    r = ax == 0.0 ? (y < 0.0 ? PL_INF : 0.0) : r;
    r = ax == PL_INF ? (y < 0.0 ? 0.0 : PL_INF) : r;
    r = (x < 0.0 || (x == 0.0 && (pl_dbits(x) >> 63))) && yodd ? -r : r;
    r = x < 0.0 && !yint && ax < PL_INF ? PL_NAN : r;
    r = ay == PL_INF ? (ax == 1.0 ? 1.0 : (ax > 1.0) == (y > 0.0) ? PL_INF : 0.0) : r;
    r = (x != x || y != y) ? x + y : r;
    return (y == 0.0 || x == 1.0) ? 1.0 : r;
}
static inline f32 pl_powf(f32 x, f32 y) { return (f32)pl_powd((f64)x, (f64)y); }
"#,
    },
    Section {
        name: "fmod",
        deps: &[],
        source: r#"/* Exact fmod (musl's shift-subtract algorithm): the result has the sign of x. */
static inline f32 pl_fmodf(f32 x, f32 y) {
    u32 ux = pl_fbits(x), uy = pl_fbits(y), sx = ux & 0x80000000u, i;
    i32 ex = (ux >> 23) & 0xff, ey = (uy >> 23) & 0xff;
    if ((uy << 1) == 0 || y != y || ex == 0xff) return PL_NANF;
    if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? 0.0f * x : x;
    if (!ex) { for (i = ux << 9; i >> 31 == 0; ex--, i <<= 1) {} ux <<= -ex + 1; }
    else { ux &= 0xffffffffu >> 9; ux |= 1u << 23; }
    if (!ey) { for (i = uy << 9; i >> 31 == 0; ey--, i <<= 1) {} uy <<= -ey + 1; }
    else { uy &= 0xffffffffu >> 9; uy |= 1u << 23; }
    for (; ex > ey; ex--) {
        i = ux - uy;
        if (i >> 31 == 0) { if (i == 0) return 0.0f * x; ux = i; }
        ux <<= 1;
    }
    i = ux - uy;
    if (i >> 31 == 0) { if (i == 0) return 0.0f * x; ux = i; }
    for (; ux >> 23 == 0; ux <<= 1, ex--) {}
    if (ex > 0) { ux -= 1u << 23; ux |= (u32)ex << 23; } else { ux >>= -ex + 1; }
    return pl_bitsf(ux | sx);
}
static inline f64 pl_fmodd(f64 x, f64 y) {
    u64 ux = pl_dbits(x), uy = pl_dbits(y), sx = ux & 0x8000000000000000ull, i;
    i32 ex = (ux >> 52) & 0x7ff, ey = (uy >> 52) & 0x7ff;
    if ((uy << 1) == 0 || y != y || ex == 0x7ff) return PL_NAN;
    if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? 0.0 * x : x;
    if (!ex) { for (i = ux << 12; i >> 63 == 0; ex--, i <<= 1) {} ux <<= -ex + 1; }
    else { ux &= 0xffffffffffffffffull >> 12; ux |= 1ull << 52; }
    if (!ey) { for (i = uy << 12; i >> 63 == 0; ey--, i <<= 1) {} uy <<= -ey + 1; }
    else { uy &= 0xffffffffffffffffull >> 12; uy |= 1ull << 52; }
    for (; ex > ey; ex--) {
        i = ux - uy;
        if (i >> 63 == 0) { if (i == 0) return 0.0 * x; ux = i; }
        ux <<= 1;
    }
    i = ux - uy;
    if (i >> 63 == 0) { if (i == 0) return 0.0 * x; ux = i; }
    for (; ux >> 52 == 0; ux <<= 1, ex--) {}
    if (ex > 0) { ux -= 1ull << 52; ux |= (u64)ex << 52; } else { ux >>= -ex + 1; }
    return pl_bitsd(ux | sx);
}
"#,
    },
];

/// Names of the sections that can be requested (besides `base`, which is always emitted).
pub const NAMES: &[&str] =
    &["fabs", "round", "f2i", "half", "exp", "log", "tanh", "erf", "trig", "atan", "pow", "fmod"];

/// The prelude for the sections in `used` (and everything they depend on): typedefs `i8`..`u64`,
/// `f32`, `f64`, bit casts `pl_fbits`/`pl_bitsf`/`pl_dbits`/`pl_bitsd`, then the functions.
pub fn prelude<'a>(used: impl IntoIterator<Item = &'a str>) -> String {
    let mut want: Vec<&str> = vec!["base"];
    let mut stack: Vec<&str> = used.into_iter().collect();
    while let Some(s) = stack.pop() {
        if want.contains(&s) {
            continue;
        }
        want.push(s);
        if let Some(sec) = SECTIONS.iter().find(|x| x.name == s) {
            stack.extend(sec.deps.iter().copied());
        }
    }
    SECTIONS.iter().filter(|s| want.contains(&s.name)).map(|s| s.source).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_ordered_and_named() {
        for (i, s) in SECTIONS.iter().enumerate() {
            for d in s.deps {
                assert!(SECTIONS[..i].iter().any(|x| x.name == *d), "{} needs {d}", s.name);
            }
        }
        for n in NAMES {
            assert!(SECTIONS.iter().any(|s| s.name == *n));
        }
        let p = prelude(["pow"]);
        assert!(p.contains("pl_powd") && p.contains("pl_logd") && p.contains("pl_truncd"));
        assert!(!p.contains("pl_tanhf"));
    }
}
