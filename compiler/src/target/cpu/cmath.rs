//! The freestanding math prelude emitted ahead of kernels that need it (no libm at run time).
//!
//! Accuracy, as asserted by `compiler/tests/math.rs` against Rust's f64 functions on dense grids:
//! - `pl_exp`: relative error < 5e-14 on [-700, 700]; `pl_log`: error < 1e-14 × max(1, |log x|) on
//!   [1e-300, 1e300] (range reduction + series in double);
//! - `pl_expf` (float, branch-free, vectorizes): relative error < 3e-7 on [-87.3, 88.7], 0 below
//!   (denormal results flush to zero), inf above;
//! - `pl_tanh`: absolute error < 1e-7; `pl_tanhf`: absolute error < 1e-6; `pl_erf`: absolute error
//!   < 2e-7 (Abramowitz–Stegun 7.1.26); `pl_erff` (float, branch-free, vectorizes: GELU): the same
//!   formula, absolute error < 1e-6;
//! - `pl_sin`, `pl_cos`, `pl_atan`: absolute error < 1e-11 for |x| < 1e5;
//! - `pl_pow`: by squaring for integer exponents up to 64 (exact where representable), else
//!   `pl_exp(b·pl_log(a))`; relative error < 1e-13 for a in [0.01, 100], b in [-5, 5];
//! - `pl_fmod`: `x - trunc(x/y)·y`, exact while |x/y| < 2^52; `fmod(finite x, ±inf) = x`;
//! - floor/ceil/trunc/round-half-even: exact (round is asserted; the others share its code).
//!
//! NaN and infinities follow IEEE conventions (exp(-inf)=0, log(0)=-inf, log(x<0)=NaN).

/// The math functions' source (one literal, shared by [`PRELUDE`] and [`FUNCTIONS`]).
macro_rules! functions {
    () => {
        r#"#define PL_NAN __builtin_nan("")
static inline double pl_fabs(double x) { return __builtin_fabs(x); }
static inline double pl_trunc(double x) { return (x != x || pl_fabs(x) >= 4503599627370496.0) ? x : (double)(i64)x; }
static inline double pl_floor(double x) { double t = pl_trunc(x); return t > x ? t - 1.0 : t; }
static inline double pl_ceil(double x) { double t = pl_trunc(x); return t < x ? t + 1.0 : t; }
static inline double pl_rint(double x) {
  double f = pl_floor(x), d = x - f;
  if (x != x || pl_fabs(x) >= 4503599627370496.0) return x;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return (pl_trunc(f * 0.5) * 2.0 == f) ? f : f + 1.0;
}
static inline double pl_fmod(double x, double y) {
  if ((y == PL_INF || y == -PL_INF) && x - x == 0.0) return x; /* finite x: x/inf truncates to 0 */
  return x - pl_trunc(x / y) * y;
}
static inline double pl_ldexp(double r, i64 n) {
  union { double d; u64 u; } s;
  while (n > 1000) { r *= 8.98846567431158e307; n -= 1023; }
  while (n < -1000) { r *= 2.2250738585072014e-308; n += 1022; }
  s.u = (u64)(n + 1023) << 52; return r * s.d;
}
static inline double pl_exp(double x) {
  if (x != x) return x;
  if (x > 709.8) return PL_INF;
  if (x < -745.2) return 0.0;
  double k = pl_rint(x * 1.4426950408889634);
  double r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10;
  double p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0/6 + r * (1.0/24 + r * (1.0/120 + r * (1.0/720 + r * (1.0/5040
    + r * (1.0/40320 + r * (1.0/362880 + r * (1.0/3628800 + r * (1.0/39916800 + r * (1.0/479001600))))))))))));
  return pl_ldexp(p, (i64)k);
}
static inline float pl_expf(float x) {
  /* Branch-free so loops over it vectorize: clamp, round to nearest, Horner, 2^k by bits. Adding
     and subtracting 1.5·2^23 rounds |t| < 2^22 to the nearest integer in two operations (kernels
     are built without reassociation, so the sum is not folded away); a rounding conversion made
     a swish 15% slower on a Zen 4. */
  float c = x > 88.7f ? 88.7f : (x < -87.3f ? -87.3f : x);
  float k = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = (c - k * 0.693145752f) - k * 1.42860677e-6f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f + r * (0.00138888892f + r * 0.000198412701f))))));
  union { float f; i32 i; } s; s.i = ((i32)k + 127) << 23;
  float y = p * s.f;
  y = x > 88.7f ? PL_INF : y;
  y = x < -87.3f ? 0.0f : y;
  return x != x ? x : y;
}
static inline double pl_log(double x) {
  if (x != x || x == PL_INF) return x;
  if (x < 0.0) return PL_NAN;
  if (x == 0.0) return -PL_INF;
  union { double d; u64 u; } v; v.d = x;
  i64 e = (i64)((v.u >> 52) & 0x7ff);
  if (e == 0) { v.d = x * 18014398509481984.0; e = (i64)((v.u >> 52) & 0x7ff) - 54; }
  e -= 1023;
  v.u = (v.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m = v.d;
  if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double t = s2 * (1.0/3 + s2 * (1.0/5 + s2 * (1.0/7 + s2 * (1.0/9 + s2 * (1.0/11 + s2 * (1.0/13 + s2 * (1.0/15 + s2 * (1.0/17 + s2 * (1.0/19 + s2 * (1.0/21))))))))));
  return 2.0 * s * (1.0 + t) + (double)e * 0.6931471805599453;
}
static inline double pl_tanh(double x) {
  if (x != x) return x;
  double a = pl_fabs(x);
  if (a > 19.0) return x > 0 ? 1.0 : -1.0;
  double t;
  if (a < 0.0004) t = a * (1.0 - a * a / 3.0);
  else { double e = pl_exp(2.0 * a); t = 1.0 - 2.0 / (e + 1.0); }
  return x < 0 ? -t : t;
}
static inline float pl_tanhf(float x) {
  if (x != x) return x;
  float a = __builtin_fabsf(x);
  if (a > 9.0f) return x > 0 ? 1.0f : -1.0f;
  float t;
  if (a < 0.004f) t = a * (1.0f - a * a * 0.333333343f);
  else { float e = pl_expf(2.0f * a); t = 1.0f - 2.0f / (e + 1.0f); }
  return x < 0 ? -t : t;
}
static inline float pl_erff(float x) {
  float a = __builtin_fabsf(x), t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t * pl_expf(-a * a);
  y = __builtin_copysignf(y, x);
  return x != x ? x : y;
}
static inline double pl_erf(double x) {
  if (x != x) return x;
  double a = pl_fabs(x), t = 1.0 / (1.0 + 0.3275911 * a);
  double y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * pl_exp(-a * a);
  return x < 0 ? -y : y;
}
static inline double pl_sin_poly(double r) { double r2 = r * r; return r * (1 + r2 * (-1.0/6 + r2 * (1.0/120 + r2 * (-1.0/5040 + r2 * (1.0/362880 + r2 * (-1.0/39916800 + r2 * (1.0/6227020800))))))); }
static inline double pl_cos_poly(double r) { double r2 = r * r; return 1 + r2 * (-0.5 + r2 * (1.0/24 + r2 * (-1.0/720 + r2 * (1.0/40320 + r2 * (-1.0/3628800 + r2 * (1.0/479001600 + r2 * (-1.0/87178291200))))))); }
static inline double pl_sincos(double x, int cos) {
  if (x != x || pl_fabs(x) == PL_INF) return PL_NAN;
  double k = pl_rint(x * 0.6366197723675814);
  double r = (x - k * 1.5707963267341256) - k * 6.077100506506192e-11;
  i64 q = ((i64)k + cos) & 3;
  double v = (q & 1) ? pl_cos_poly(r) : pl_sin_poly(r);
  return (q & 2) ? -v : v;
}
static inline double pl_sin(double x) { return pl_sincos(x, 0); }
static inline double pl_cos(double x) { return pl_sincos(x, 1); }
static inline double pl_tan(double x) { return pl_sin(x) / pl_cos(x); }
static inline double pl_atan(double x) {
  if (x != x) return x;
  double a = pl_fabs(x), off = 0.0;
  int inv = a > 1.0;
  if (inv) a = 1.0 / a;
  a = a / (1.0 + __builtin_sqrt(1.0 + a * a));
  a = a / (1.0 + __builtin_sqrt(1.0 + a * a));
  double a2 = a * a;
  double s = a * (1 - a2 * (1.0/3 - a2 * (1.0/5 - a2 * (1.0/7 - a2 * (1.0/9 - a2 * (1.0/11 - a2 * (1.0/13 - a2 * (1.0/15))))))));
  s *= 4.0;
  if (inv) s = 1.5707963267948966 - s;
  (void)off;
  return x < 0 ? -s : s;
}
static inline double pl_atan2(double y, double x) {
  if (x != x || y != y) return PL_NAN;
  if (x > 0) return pl_atan(y / x);
  if (x < 0) return y >= 0 ? pl_atan(y / x) + 3.141592653589793 : pl_atan(y / x) - 3.141592653589793;
  return y > 0 ? 1.5707963267948966 : (y < 0 ? -1.5707963267948966 : 0.0);
}
static inline double pl_asin(double x) { return (x > 1 || x < -1) ? PL_NAN : (pl_fabs(x) == 1 ? x * 1.5707963267948966 : pl_atan(x / __builtin_sqrt(1 - x * x))); }
static inline double pl_acos(double x) { return (x > 1 || x < -1) ? PL_NAN : 1.5707963267948966 - pl_asin(x); }
static inline double pl_pow(double a, double b) {
  if (b == 0.0) return 1.0;
  if (a != a || b != b) return PL_NAN;
  if (pl_trunc(b) == b && pl_fabs(b) <= 64.0) {
    /* Small integer exponents by squaring: exact where the result is (9^3 = 729, not 728.99...). */
    double r = 1.0, base = a;
    for (i64 n = (i64)pl_fabs(b); n; n >>= 1) { if (n & 1) r *= base; base *= base; }
    return b < 0 ? 1.0 / r : r;
  }
  if (a == 0.0) return b > 0 ? 0.0 : PL_INF;
  if (a < 0.0) {
    if (pl_trunc(b) != b) return PL_NAN;
    double m = pl_exp(b * pl_log(-a));
    return pl_fmod(b, 2.0) != 0.0 ? -m : m;
  }
  return pl_exp(b * pl_log(a));
}
static inline double pl_fmax(double a, double b) { return (a != a || b != b) ? PL_NAN : (a > b ? a : b); }
static inline double pl_fmin(double a, double b) { return (a != a || b != b) ? PL_NAN : (a < b ? a : b); }
static inline float pl_fmaxf(float a, float b) { return (a != a || b != b) ? (float)PL_NAN : (a > b ? a : b); }
static inline float pl_fminf(float a, float b) { return (a != a || b != b) ? (float)PL_NAN : (a < b ? a : b); }
static inline i64 pl_f2i(double x) { return x != x ? 0 : (x >= 9.2233720368547758e18 ? 0x7fffffffffffffffLL : (x <= -9.2233720368547758e18 ? (-0x7fffffffffffffffLL - 1) : (i64)x)); }
"#
    };
}

/// C source of the prelude: the types and loop pragmas of the CPU kernels, then [`FUNCTIONS`].
pub const PRELUDE: &str = concat!(
    r#"
typedef signed char i8; typedef unsigned char u8; typedef short i16; typedef unsigned short u16;
typedef int i32; typedef unsigned int u32; typedef long long i64; typedef unsigned long long u64;
typedef _Float16 f16; typedef __bf16 bf16;
/* float -> bfloat16, rounding to nearest even (NaN stays a quiet NaN). Clang lowers every narrowing to
   __bf16 to a call of this compiler-rt helper, which the loader does not provide: each object defines
   its own. */
__attribute__((weak)) bf16 __truncsfbf2(float x) {
  union { float f; u32 u; } v = { x };
  u32 u = (v.u & 0x7fffffffu) > 0x7f800000u ? v.u | 0x00400000u : v.u + 0x7fffu + ((v.u >> 16) & 1u);
  union { u16 s; bf16 b; } r = { (u16)(u >> 16) };
  return r.b;
}
/* Register tiles (target/cpu/tile.rs): vectors of 4, 8 and 16 floats (GCC vector extensions, which
   clang shares; a scalar operand is broadcast). */
typedef float pl_v4 __attribute__((vector_size(16)));
typedef float pl_v8 __attribute__((vector_size(32)));
typedef float pl_v16 __attribute__((vector_size(64)));
#define PL_INF __builtin_inf()
/* Iterations of the loop that follows are independent (no runtime alias checks needed), and it
   must stay a loop: fully unrolled short loops do not get vectorized. */
/* Reassociation only inside scalar reduction loops (so they vectorize); elsewhere float expressions
   keep their order: `(x - max) - log(sum)` must not become `x - (max + log(sum))`. */
#ifdef __clang__
#define PL_REASSOC _Pragma("clang fp reassociate(on)")
#else
#define PL_REASSOC
#endif
#ifdef __clang__
#define PL_SIMD _Pragma("clang loop vectorize(assume_safety) interleave(assume_safety) unroll(disable)")
#else
#define PL_SIMD _Pragma("GCC ivdep")
#endif
/* The loop that follows is long and its body is transcendental math (a swish over a whole map):
   `n` lanes wide and four vectors per iteration, whose independent chains of dependent multiply-adds
   overlap where clang's own choice, one vector of half the width, leaves the units waiting. */
#define PL_PRAGMA(x) _Pragma(#x)
#ifdef __clang__
#define PL_WIDE(n) PL_PRAGMA(clang loop vectorize(enable) vectorize_width(n) interleave_count(4))
#else
#define PL_WIDE(n)
#endif
/* The loop that follows is short (a few vectors or less): vectorized anyway, its last partial
   vector masked rather than run one element at a time. */
#ifdef __clang__
#define PL_SHORT _Pragma("clang loop vectorize(enable) vectorize_predicate(enable)")
#else
#define PL_SHORT
#endif
/* pl_fmaxf on float vectors, lane by lane: NaN where either lane is NaN, else the larger (bitwise
   selects over the comparison masks, which both clang and GCC vector extensions allow in C). */
#define PL_VMAX(a, b) ({ __typeof__(a) a_ = (a), b_ = (b); __typeof__(a_ > b_) gt_ = a_ > b_; \
  __typeof__(gt_) nan_ = (a_ != a_) | (b_ != b_); \
  __typeof__(gt_) r_ = ((__typeof__(gt_))a_ & gt_) | ((__typeof__(gt_))b_ & ~gt_); \
  (__typeof__(a_))((r_ & ~nan_) | ((__typeof__(gt_))(a_ * 0.0f + (float)PL_NAN) & nan_)); })
#ifdef __clang__
#define PL_UNROLL _Pragma("clang loop unroll(full)")
#else
#define PL_UNROLL _Pragma("GCC unroll 64")
#endif
"#,
    functions!()
);

/// The math functions alone: portable C over the typedefs `i32`, `i64`, `u64` and `PL_INF`, which the
/// AMD back end also compiles (as OpenCL C, with its own typedefs).
pub const FUNCTIONS: &str = functions!();
