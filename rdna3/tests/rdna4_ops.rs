//! gfx12 instruction tests: the opcodes gfx1201 has and gfx1100 lacks (or names differently) run in small OpenCL C
//! kernels built by clang-19 for gfx1201, where inline assembly picks the exact opcode, and every result is compared
//! with the same computation written in Rust: the scalar float unit (`s_*_f32`, `s_cvt_*`, `s_cmp_*_f32`), the
//! 64-bit scalar integer ops, the VALU opcodes gfx12 renamed (`v_mad_co_*`), gfx12's minimumNumber/maximumNumber
//! family (`*_num_f16/f32/f64`, packed and VOPD too, on operands with both zeros and quiet and signaling NaNs), and
//! the waits and cache write-back/invalidate, which are no-ops over the emulator's synchronous memory.
//!
//! `every_implemented_gfx12_opcode_is_exercised` is the coverage guard: each opcode the emulator implements for
//! gfx12 ([`implemented_opcodes_of`]) either is implemented for gfx11 under the same name and encoding (the same
//! executor code, which `rdna3_ops.rs`'s guard covers; gfx12's opcode numbers are checked against llvm-objdump-19 by
//! `rdna3_disasm.rs`), or ran here, or is in a gfx1201 code object the kernel tests run, or is listed with a reason in
//! `rdna4_unexercised.txt` (a list that only shrinks).

mod rdna3_support;

use std::collections::BTreeSet;

use pilot_rdna3::{dispatch_traced, implemented_opcodes_of, CodeObjectKernel, Dispatch, Isa};
use rdna3_support::{kernargs, Arg, Device};

/// How a case's operands come in and its result goes out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Two uniform 32-bit sources, one 32-bit scalar result.
    S2,
    /// A scalar compare: SCC, read back with s_cselect.
    Scc,
    /// Two uniform 64-bit sources, a 64-bit scalar result.
    S64,
    /// Per-lane sources in VGPRs (two or three), a 32-bit result.
    V2,
    V3,
    /// v_mad_co_*: two 32-bit sources and a 64-bit addend, a 64-bit result.
    Mad64,
    /// As `V2`/`V3` on [`F16_SPECIAL`] values in the low halves (the high halves hold other values), the result in
    /// the low half.
    H2,
    H3,
    /// As `H2`, the result in both halves (`v_pk_*`): the low halves give `op(x, y)`, the high halves `op(y, x)`.
    Pk,
    /// Two f64 sources from [`F64_SPECIAL`] in VGPR pairs, a 64-bit result.
    D2,
    /// As `S2` on [`RTZ_SPECIAL`], the result two f16 halves.
    Rtz,
}

struct Case {
    name: &'static str,
    shape: Shape,
    /// The instruction, with %0 the result and %1.. the sources.
    asm: &'static str,
    reference: fn(u64, u64, u64) -> u64,
}

fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
fn fb(x: f32) -> u64 {
    x.to_bits() as u64
}
fn h(x: u64) -> f32 {
    half::f16::from_bits(x as u16).to_f32()
}
fn hb(x: f32) -> u64 {
    half::f16::from_f32(x).to_bits() as u64
}
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
/// IEEE 754-2019 minimumNumber/maximumNumber (a NaN yields the other operand; -0 < +0), computed in f64, where
/// f16 and f32 values and their signs are exact.
fn min_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}
fn max_num(a: f64, b: f64) -> f64 {
    -min_num(-a, -b)
}
/// V_MED3_NUM_* as the RDNA4 ISA pseudocode states it (tinygrad 0.14.0 `runtime/autogen/amd/rdna4/str_pcode.py`).
fn med3_num(a: f64, b: f64, c: f64) -> f64 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return min_num(min_num(a, b), c);
    }
    let hi = max_num(max_num(a, b), c);
    if hi == a {
        max_num(b, c)
    } else if hi == b {
        max_num(a, c)
    } else {
        max_num(a, b)
    }
}
fn fmin(a: u64, b: u64) -> u64 {
    fb(min_num(f(a) as f64, f(b) as f64) as f32)
}
fn fmax(a: u64, b: u64) -> u64 {
    fb(max_num(f(a) as f64, f(b) as f64) as f32)
}
fn hmin(a: u64, b: u64) -> u64 {
    hb(min_num(h(a) as f64, h(b) as f64) as f32)
}
fn hmax(a: u64, b: u64) -> u64 {
    hb(max_num(h(a) as f64, h(b) as f64) as f32)
}
/// Both halves of a `v_pk_*` result.
fn pk(a: u64, b: u64, op: fn(u64, u64) -> u64) -> u64 {
    op(a & 0xffff, b & 0xffff) | op(a >> 16 & 0xffff, b >> 16 & 0xffff) << 16
}
/// f32 to f16 rounding toward zero, from the f32's fields: the mantissa truncated to 10 bits, f16 denormals as whole
/// multiples of 2^-24, finite values past the largest f16 clamped to it.
fn rtz16(x: u64) -> u64 {
    let (bits, v) = (x as u32, (f(x) as f64).abs());
    let magnitude = if v.is_nan() {
        0x7e00 | (bits >> 13 & 0x3ff)
    } else if v.is_infinite() {
        0x7c00
    } else if v >= 65504.0 {
        0x7bff
    } else if v < 2f64.powi(-14) {
        (v * 2f64.powi(24)).floor() as u32
    } else {
        (((bits >> 23 & 0xff) as i32 - 127 + 15) as u32) << 10 | (bits >> 13 & 0x3ff)
    };
    (bits >> 16 & 0x8000 | magnitude) as u64
}

/// `v_dual_<x>_num_f32 v12, a, b :: v_dual_<y>_num_f32 v13, b, a`, then `out` to the result.
macro_rules! dual {
    ($x:literal, $y:literal, $out:literal) => {
        concat!(
            "v_mov_b32 v10, %1\\n v_mov_b32 v11, %2\\n v_dual_",
            $x,
            "_num_f32 v12, v10, v11 :: v_dual_",
            $y,
            "_num_f32 v13, v11, v10\\n v_mov_b32 %0, ",
            $out
        )
    };
}

/// Every gfx12 wait and the cache write-back/invalidate around a computation (the harness's loads come before it,
/// its store after).
const WAITS: &str = "global_wb scope:SCOPE_SYS\\n s_wait_storecnt 0x0\\n s_wait_storecnt_dscnt 0x0\\n \
                     global_inv scope:SCOPE_SYS\\n s_wait_loadcnt_dscnt 0x0\\n s_wait_alu 0xfffe\\n v_xor_b32 %0, %1, %2";

fn cases() -> Vec<Case> {
    use Shape::*;
    let c = |name, shape, asm, reference| Case { name, shape, asm, reference };
    vec![
        c("s_add_f32", S2, "s_add_f32 %0, %1, %2", |a, b, _| fb(f(a) + f(b))),
        c("s_sub_f32", S2, "s_sub_f32 %0, %1, %2", |a, b, _| fb(f(a) - f(b))),
        c("s_mul_f32", S2, "s_mul_f32 %0, %1, %2", |a, b, _| fb(f(a) * f(b))),
        c("s_min_num_f32", S2, "s_min_num_f32 %0, %1, %2", |a, b, _| fmin(a, b)),
        c("s_max_num_f32", S2, "s_max_num_f32 %0, %1, %2", |a, b, _| fmax(a, b)),
        c("s_minimum_f32", S2, "s_minimum_f32 %0, %1, %2", |a, b, _| {
            if f(a).is_nan() || f(b).is_nan() {
                fb(f32::NAN)
            } else {
                fmin(a, b)
            }
        }),
        c("s_maximum_f32", S2, "s_maximum_f32 %0, %1, %2", |a, b, _| {
            if f(a).is_nan() || f(b).is_nan() {
                fb(f32::NAN)
            } else {
                fmax(a, b)
            }
        }),
        c("s_fmac_f32", S2, "s_mov_b32 %0, 0x3fc00000\\n s_fmac_f32 %0, %1, %2", |a, b, _| fb(f(a).mul_add(f(b), 1.5))),
        c("s_fmaak_f32", S2, "s_fmaak_f32 %0, %1, %2, 0xc0200000", |a, b, _| fb(f(a).mul_add(f(b), -2.5))),
        c("s_fmamk_f32", S2, "s_fmamk_f32 %0, %1, 0x40400000, %2", |a, b, _| fb(f(a).mul_add(3.0, f(b)))),
        c("s_cvt_f32_i32", S2, "s_cvt_f32_i32 %0, %1", |a, _, _| fb(a as i32 as f32)),
        c("s_cvt_f32_u32", S2, "s_cvt_f32_u32 %0, %1", |a, _, _| fb(a as u32 as f32)),
        c("s_cvt_i32_f32", S2, "s_cvt_i32_f32 %0, %1", |a, _, _| f(a) as i32 as u32 as u64),
        c("s_cvt_u32_f32", S2, "s_cvt_u32_f32 %0, %1", |a, _, _| f(a) as u32 as u64),
        c("s_cvt_f16_f32", S2, "s_cvt_f16_f32 %0, %1", |a, _, _| half::f16::from_f32(f(a)).to_bits() as u64),
        c("s_cvt_f32_f16", S2, "s_cvt_f32_f16 %0, %1", |a, _, _| fb(h(a))),
        c("s_cvt_hi_f32_f16", S2, "s_cvt_hi_f32_f16 %0, %1", |a, _, _| fb(h(a >> 16))),
        c("s_ceil_f32", S2, "s_ceil_f32 %0, %1", |a, _, _| fb(f(a).ceil())),
        c("s_floor_f32", S2, "s_floor_f32 %0, %1", |a, _, _| fb(f(a).floor())),
        c("s_trunc_f32", S2, "s_trunc_f32 %0, %1", |a, _, _| fb(f(a).trunc())),
        c("s_rndne_f32", S2, "s_rndne_f32 %0, %1", |a, _, _| fb(f(a).round_ties_even())),
        c("s_bitset0_b32", S2, "s_mov_b32 %0, %2\\n s_bitset0_b32 %0, %1", |a, b, _| {
            (b as u32 & !(1 << (a & 31))) as u64
        }),
        c("s_bitset1_b32", S2, "s_mov_b32 %0, %2\\n s_bitset1_b32 %0, %1", |a, b, _| (b as u32 | 1 << (a & 31)) as u64),
        c("s_cmp_lt_f32", Scc, "s_cmp_lt_f32 %1, %2", |a, b, _| (f(a) < f(b)) as u64),
        c("s_cmp_eq_f32", Scc, "s_cmp_eq_f32 %1, %2", |a, b, _| (f(a) == f(b)) as u64),
        c("s_cmp_le_f32", Scc, "s_cmp_le_f32 %1, %2", |a, b, _| (f(a) <= f(b)) as u64),
        c("s_cmp_gt_f32", Scc, "s_cmp_gt_f32 %1, %2", |a, b, _| (f(a) > f(b)) as u64),
        c("s_cmp_lg_f32", Scc, "s_cmp_lg_f32 %1, %2", |a, b, _| (f(a) < f(b) || f(a) > f(b)) as u64),
        c("s_cmp_ge_f32", Scc, "s_cmp_ge_f32 %1, %2", |a, b, _| (f(a) >= f(b)) as u64),
        c("s_cmp_o_f32", Scc, "s_cmp_o_f32 %1, %2", |a, b, _| (!f(a).is_nan() && !f(b).is_nan()) as u64),
        c("s_cmp_u_f32", Scc, "s_cmp_u_f32 %1, %2", |a, b, _| (f(a).is_nan() || f(b).is_nan()) as u64),
        c("s_cmp_nge_f32", Scc, "s_cmp_nge_f32 %1, %2", |a, b, _| {
            (f(a).partial_cmp(&f(b)).is_none_or(|o| o.is_lt())) as u64
        }),
        c("s_cmp_nlg_f32", Scc, "s_cmp_nlg_f32 %1, %2", |a, b, _| {
            (f(a).partial_cmp(&f(b)).is_none_or(|o| o.is_eq())) as u64
        }),
        c("s_cmp_ngt_f32", Scc, "s_cmp_ngt_f32 %1, %2", |a, b, _| {
            (f(a).partial_cmp(&f(b)).is_none_or(|o| o.is_le())) as u64
        }),
        c("s_cmp_nle_f32", Scc, "s_cmp_nle_f32 %1, %2", |a, b, _| {
            (f(a).partial_cmp(&f(b)).is_none_or(|o| o.is_gt())) as u64
        }),
        c("s_cmp_neq_f32", Scc, "s_cmp_neq_f32 %1, %2", |a, b, _| (f(a) != f(b)) as u64),
        c("s_cmp_nlt_f32", Scc, "s_cmp_nlt_f32 %1, %2", |a, b, _| {
            (f(a).partial_cmp(&f(b)).is_none_or(|o| o.is_ge())) as u64
        }),
        c("v_s_exp_f32", S2, "v_s_exp_f32 %0, %1", |a, _, _| fb(f(a).exp2())),
        c("v_s_log_f32", S2, "v_s_log_f32 %0, %1", |a, _, _| fb(f(a).log2())),
        c("v_s_rcp_f32", S2, "v_s_rcp_f32 %0, -%1 mul:2", |a, _, _| fb(-2.0 / f(a))),
        c("v_s_rsq_f32", S2, "v_s_rsq_f32 %0, %1", |a, _, _| fb((1.0 / (f(a) as f64).sqrt()) as f32)),
        c("v_s_sqrt_f32", S2, "v_s_sqrt_f32 %0, |%1|", |a, _, _| fb(f(a).abs().sqrt())),
        c("s_add_nc_u64", S64, "s_add_nc_u64 %0, %1, %2", |a, b, _| a.wrapping_add(b)),
        c("s_sub_nc_u64", S64, "s_sub_nc_u64 %0, %1, %2", |a, b, _| a.wrapping_sub(b)),
        c("s_mul_u64", S64, "s_mul_u64 %0, %1, %2", |a, b, _| a.wrapping_mul(b)),
        c("v_max_num_f32", V2, "v_max_num_f32_e32 %0, %1, %2", |a, b, _| fmax(a, b)),
        c("v_min_num_f32", V2, "v_min_num_f32_e64 %0, %1, %2", |a, b, _| fmin(a, b)),
        c("v_max_num_f32", V2, "v_max_num_f32_e64 %0, %1, %2", |a, b, _| fmax(a, b)),
        c("v_min_num_f32", V2, "v_min_num_f32_e32 %0, %1, %2", |a, b, _| fmin(a, b)),
        c("v_max3_num_f32", V3, "v_max3_num_f32 %0, %1, %2, %3", |a, b, c| fmax(fmax(a, b), c)),
        c("v_min3_num_f32", V3, "v_min3_num_f32 %0, %1, %2, %3", |a, b, c| fmin(fmin(a, b), c)),
        c("v_maxmin_num_f32", V3, "v_maxmin_num_f32 %0, %1, %2, %3", |a, b, c| fmin(fmax(a, b), c)),
        c("v_minmax_num_f32", V3, "v_minmax_num_f32 %0, %1, %2, %3", |a, b, c| fmax(fmin(a, b), c)),
        c("v_med3_num_f32", V3, "v_med3_num_f32 %0, %1, %2, %3", |a, b, c| {
            fb(med3_num(f(a) as f64, f(b) as f64, f(c) as f64) as f32)
        }),
        // VOPD's halves need their first sources, second sources and destinations in different VGPR banks (the
        // register number mod 4; LLVM's assembler enforces it): fixed registers, which the V templates clobber.
        c("v_dual_min_num_f32", V2, dual!("min", "max", "v12"), |a, b, _| fmin(a, b)),
        c("v_dual_max_num_f32", V2, dual!("min", "max", "v13"), |a, b, _| fmax(b, a)),
        c("v_dual_max_num_f32", V2, dual!("max", "min", "v12"), |a, b, _| fmax(a, b)),
        c("v_dual_min_num_f32", V2, dual!("max", "min", "v13"), |a, b, _| fmin(b, a)),
        c("v_min_num_f16", H2, "v_min_num_f16_e32 %0, %1, %2", |a, b, _| hmin(a, b)),
        c("v_max_num_f16", H2, "v_max_num_f16_e32 %0, %1, %2", |a, b, _| hmax(a, b)),
        c("v_min_num_f16", H2, "v_min_num_f16_e64 %0, %1, %2", |a, b, _| hmin(a, b)),
        c("v_max_num_f16", H2, "v_max_num_f16_e64 %0, %1, %2", |a, b, _| hmax(a, b)),
        c("v_med3_num_f16", H3, "v_med3_num_f16 %0, %1, %2, %3", |a, b, c| {
            hb(med3_num(h(a) as f64, h(b) as f64, h(c) as f64) as f32)
        }),
        c("v_pk_min_num_f16", Pk, "v_pk_min_num_f16 %0, %1, %2", |a, b, _| pk(a, b, hmin)),
        c("v_pk_max_num_f16", Pk, "v_pk_max_num_f16 %0, %1, %2", |a, b, _| pk(a, b, hmax)),
        c("v_min_num_f64", D2, "v_min_num_f64_e32 %0, %1, %2", |a, b, _| min_num(d(a), d(b)).to_bits()),
        c("v_max_num_f64", D2, "v_max_num_f64_e32 %0, %1, %2", |a, b, _| max_num(d(a), d(b)).to_bits()),
        c("v_min_num_f64", D2, "v_min_num_f64_e64 %0, %1, %2", |a, b, _| min_num(d(a), d(b)).to_bits()),
        c("v_max_num_f64", D2, "v_max_num_f64_e64 %0, %1, -%2", |a, b, _| max_num(d(a), -d(b)).to_bits()),
        c("v_add_f64", D2, "v_add_f64_e32 %0, %1, %2", |a, b, _| (d(a) + d(b)).to_bits()),
        c("v_mul_f64", D2, "v_mul_f64_e32 %0, %1, %2", |a, b, _| (d(a) * d(b)).to_bits()),
        c("s_add_co_u32", S2, "s_add_co_u32 %0, %1, %2", |a, b, _| (a as u32).wrapping_add(b as u32) as u64),
        c("s_sub_co_u32", S2, "s_sub_co_u32 %0, %1, %2", |a, b, _| (a as u32).wrapping_sub(b as u32) as u64),
        c("s_sub_co_i32", S2, "s_sub_co_i32 %0, %1, %2", |a, b, _| (a as u32).wrapping_sub(b as u32) as u64),
        c("s_add_co_ci_u32", S2, "s_cmp_lt_u32 %2, %1\\n s_add_co_ci_u32 %0, %1, %2", |a, b, _| {
            (a as u32).wrapping_add(b as u32).wrapping_add((b < a) as u32) as u64
        }),
        c("s_sub_co_ci_u32", S2, "s_cmp_lt_u32 %2, %1\\n s_sub_co_ci_u32 %0, %1, %2", |a, b, _| {
            (a as u32).wrapping_sub(b as u32).wrapping_sub((b < a) as u32) as u64
        }),
        c("s_addk_co_i32", S2, "s_mov_b32 %0, %1\\n s_addk_co_i32 %0, 0xff9c", |a, _, _| {
            (a as u32).wrapping_sub(100) as u64
        }),
        c("s_cvt_pk_rtz_f16_f32", Rtz, "s_cvt_pk_rtz_f16_f32 %0, %1, %2", |a, b, _| rtz16(a) | rtz16(b) << 16),
        c("s_wait_alu", V2, WAITS, |a, b, _| a ^ b),
        c("v_mad_co_u64_u32", Mad64, "v_mad_co_u64_u32 %0, null, %1, %2, %3", |a, b, c| {
            (a as u32 as u64).wrapping_mul(b as u32 as u64).wrapping_add(c)
        }),
        c("v_mad_co_i64_i32", Mad64, "v_mad_co_i64_i32 %0, null, %1, %2, %3", |a, b, c| {
            (a as u32 as i32 as i64).wrapping_mul(b as u32 as i32 as i64).wrapping_add(c as i64) as u64
        }),
    ]
}

/// f32 values that reach every branch: zeros, ones, halves, infinities, NaN, denormals, the largest finite, and
/// integers past i32/u32's range.
const SPECIAL: [u32; 16] = [
    0x0000_0000,
    0x8000_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x3f00_0000,
    0x3fc0_0000,
    0xc020_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0x0000_0001,
    0x8040_0000,
    0x7f7f_ffff,
    0x4f80_0001,
    0xcf00_0001,
    0x4b80_0001,
];

/// f16 values for the `*_num_f16` cases: both zeros, quiet and signaling NaNs of either sign, infinities, denormals.
const F16_SPECIAL: [u16; 16] = [
    0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x3e00, 0xc100, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x8200, 0x7bff,
    0xfe00, 0x0400,
];

/// f64 values for the `*_num_f64` cases, chosen as [`F16_SPECIAL`].
const F64_SPECIAL: [u64; 16] = [
    0,
    0x8000_0000_0000_0000,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x3fe0_0000_0000_0000,
    0x3ff0_0000_0000_0001,
    0xc004_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x0000_0000_0000_0001,
    0x8000_0000_0000_0400,
    0x7fef_ffff_ffff_ffff,
    0xfff8_0000_0000_0000,
    0x0010_0000_0000_0000,
];

/// f32 values whose f16 roundings toward zero and to nearest differ: just past a half ULP, a tie, just under 1, the
/// f16 overflow threshold and beyond, f16 denormals; and infinities, NaN, zero, an f32 denormal.
const RTZ_SPECIAL: [u32; 16] = [
    0x3f80_1001,
    0xbf80_1001,
    0x3f80_3000,
    0x3f7f_ffff,
    0x477f_f000,
    0xc77f_f000,
    0x477f_ffff,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0x33ff_ffff,
    0xb3ff_ffff,
    0x387f_e000,
    0x0000_0001,
    0x8000_0000,
    0x402d_f854,
];

/// Pairs of operands, the same for every lane: SPECIAL x SPECIAL.
const PAIRS: usize = SPECIAL.len() * SPECIAL.len();

/// The OpenCL C of one case: one workgroup per operand pair (uniform values in SGPRs; no loop whose SCC the
/// compares would clobber) or one lane per pair.
fn source(k: usize, c: &Case) -> String {
    let name = format!("t{k}");
    match c.shape {
        Shape::S2 | Shape::Scc | Shape::Rtz => {
            let body = if c.shape == Shape::Scc {
                format!("__asm volatile(\"{}\\n s_cselect_b32 %0, 1, 0\" : \"=s\"(r) : \"s\"(a), \"s\"(b));", c.asm)
            } else {
                format!("__asm volatile(\"{}\" : \"=&s\"(r) : \"s\"(a), \"s\"(b));", c.asm)
            };
            format!(
                "kernel void {name}(global const uint *in, global uint *out) {{\n  uint i = __builtin_amdgcn_workgroup_id_x();\n  \
                 uint a = R(in[2*i]), b = R(in[2*i+1]), r;\n  {body}\n  out[i] = r;\n}}\n"
            )
        }
        Shape::S64 => format!(
            "kernel void {name}(global const ulong *in, global ulong *out) {{\n  uint i = __builtin_amdgcn_workgroup_id_x();\n  \
             ulong a = R64(in[2*i]), b = R64(in[2*i+1]), r;\n  __asm volatile(\"{}\" : \"=s\"(r) : \"s\"(a), \"s\"(b));\n  \
             out[i] = r;\n}}\n",
            c.asm
        ),
        Shape::V2 | Shape::V3 | Shape::H2 | Shape::H3 | Shape::Pk => format!(
            "kernel void {name}(global const uint *in, global uint *out) {{\n  uint i = __builtin_amdgcn_workgroup_id_x() * 64 \
             + __builtin_amdgcn_workitem_id_x();\n  uint a = in[3*i], b = in[3*i+1], c = in[3*i+2], r;\n  \
             __asm volatile(\"{}\" : \"=v\"(r) : \"v\"(a), \"v\"(b), \"v\"(c) : \"v10\", \"v11\", \"v12\", \"v13\");\n  \
             out[i] = r;\n}}\n",
            c.asm
        ),
        Shape::D2 => format!(
            "kernel void {name}(global const ulong *in, global ulong *out) {{\n  uint i = __builtin_amdgcn_workgroup_id_x() * 64 \
             + __builtin_amdgcn_workitem_id_x();\n  ulong a = in[2*i], b = in[2*i+1], r;\n  \
             __asm volatile(\"{}\" : \"=v\"(r) : \"v\"(a), \"v\"(b));\n  out[i] = r;\n}}\n",
            c.asm
        ),
        Shape::Mad64 => format!(
            "kernel void {name}(global const uint *in, global ulong *out) {{\n  uint i = __builtin_amdgcn_workgroup_id_x() * 64 \
             + __builtin_amdgcn_workitem_id_x();\n  uint a = in[3*i], b = in[3*i+1]; ulong c = a * (ulong)in[3*i+2], r;\n  \
             __asm volatile(\"{}\" : \"=v\"(r) : \"v\"(a), \"v\"(b), \"v\"(c));\n  out[i] = r;\n}}\n",
            c.asm
        ),
    }
}

/// The operand values of pair `p`: (a, b, c) as the kernel reads them.
fn operands(c: &Case, p: usize) -> (u64, u64, u64) {
    let (x, y) = (SPECIAL[p / SPECIAL.len()], SPECIAL[p % SPECIAL.len()]);
    let z = SPECIAL[(p * 7 + 3) % SPECIAL.len()];
    match c.shape {
        // 64-bit operands: the pair's bits in both halves, rotated so the carries differ.
        Shape::S64 => ((x as u64) << 32 | y as u64, (y as u64) << 29 | z as u64, 0),
        Shape::Mad64 => (x as u64, y as u64, x as u64 * z as u64),
        Shape::H2 | Shape::H3 | Shape::Pk => {
            let (i, j, k) = (p / SPECIAL.len(), p % SPECIAL.len(), (p * 7 + 3) % SPECIAL.len());
            let (x, y, z) = (F16_SPECIAL[i] as u64, F16_SPECIAL[j] as u64, F16_SPECIAL[k] as u64);
            (x | y << 16, y | x << 16, z | x << 16)
        }
        Shape::D2 => (F64_SPECIAL[p / SPECIAL.len()], F64_SPECIAL[p % SPECIAL.len()], 0),
        Shape::Rtz => (RTZ_SPECIAL[p / SPECIAL.len()] as u64, RTZ_SPECIAL[p % SPECIAL.len()] as u64, 0),
        _ => (x as u64, y as u64, z as u64),
    }
}

/// Results compare bit for bit, except that any NaN equals any NaN of the result's format (but not where an integer
/// conversion writes the bits).
fn same(c: &Case, got: u64, want: u64) -> bool {
    let nan16 = |x: u64| h(x).is_nan();
    let halves = |g: u64, w: u64| {
        (0..2).all(|k| g >> (16 * k) & 0xffff == w >> (16 * k) & 0xffff || nan16(g >> (16 * k)) && nan16(w >> (16 * k)))
    };
    got == want
        || match c.shape {
            Shape::S2 | Shape::V2 | Shape::V3 => !c.name.contains("cvt_") && f(got).is_nan() && f(want).is_nan(),
            Shape::H2 | Shape::H3 => nan16(got) && nan16(want),
            Shape::Pk | Shape::Rtz => halves(got, want),
            Shape::D2 => d(got).is_nan() && d(want).is_nan(),
            Shape::Scc | Shape::S64 | Shape::Mad64 => false,
        }
}

#[test]
fn gfx12_opcodes_match_rust_and_cover_what_the_emulator_implements() {
    let cases = cases();
    // clang-19 gives an "s" constraint a VGPR when the value is in one: read uniform operands into SGPRs first.
    let prelude = "#define R(x) __builtin_amdgcn_readfirstlane(x)\n\
                   #define R64(x) (((ulong)R((uint)((x) >> 32)) << 32) | (uint)R((uint)(x)))\n";
    let src: String =
        std::iter::once(prelude.to_string()).chain(cases.iter().enumerate().map(|(k, c)| source(k, c))).collect();
    let Some(co) = rdna3_support::build_for(Isa::Gfx12, "gfx12_ops", &src, &[]) else { return };
    let mut ran = BTreeSet::new();
    let mut failures = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let kernel = CodeObjectKernel::load(&co, &format!("t{k}")).unwrap_or_else(|e| panic!("{e}"));
        let vector = !matches!(c.shape, Shape::S2 | Shape::Scc | Shape::S64 | Shape::Rtz);
        let ops: Vec<(u64, u64, u64)> = (0..PAIRS).map(|p| operands(c, p)).collect();
        let input: Vec<u8> = match c.shape {
            Shape::S64 | Shape::D2 => {
                ops.iter().flat_map(|o| [o.0.to_le_bytes(), o.1.to_le_bytes()].concat()).collect()
            }
            Shape::S2 | Shape::Scc | Shape::Rtz => {
                ops.iter().flat_map(|o| [o.0 as u32, o.1 as u32]).flat_map(u32::to_le_bytes).collect()
            }
            Shape::Mad64 => {
                let z = |p: usize| SPECIAL[(p * 7 + 3) % SPECIAL.len()];
                (0..PAIRS).flat_map(|p| [ops[p].0 as u32, ops[p].1 as u32, z(p)]).flat_map(u32::to_le_bytes).collect()
            }
            _ => ops.iter().flat_map(|o| [o.0 as u32, o.1 as u32, o.2 as u32]).flat_map(u32::to_le_bytes).collect(),
        };
        let wide = matches!(c.shape, Shape::S64 | Shape::Mad64 | Shape::D2);
        let mask = match c.shape {
            Shape::H2 | Shape::H3 => 0xffff,
            _ if wide => !0,
            _ => 0xffff_ffff,
        };
        let mut dev = Device::new();
        let pin = dev.alloc(&input);
        let out = dev.zeros(PAIRS * 8);
        let kernarg = dev.alloc(&kernargs(&[Arg::Ptr(pin), Arg::Ptr(out)]));
        let grid = if vector { [(PAIRS / 64) as u32, 1, 1] } else { [PAIRS as u32, 1, 1] };
        let d = Dispatch::for_kernel(&kernel, grid, [if vector { 64 } else { 1 }, 1, 1], kernarg).unwrap();
        let mut executed = vec![false; kernel.insts.len()];
        dispatch_traced(&kernel, &d, &mut dev.mem, &mut executed).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        for (inst, _) in kernel.insts.iter().zip(&executed).filter(|(_, r)| **r) {
            ran.insert(format!("{:?} {}", inst.enc, inst.name()));
            if let Some(y) = &inst.y {
                ran.insert(format!("{:?} {}", y.enc, y.name()));
            }
        }
        assert!(ran.iter().any(|r| r.ends_with(&format!(" {}", c.name))), "{}: the kernel never ran it", c.name);
        let bytes = dev.read(out, PAIRS * if wide { 8 } else { 4 });
        for (p, o) in ops.iter().enumerate() {
            let got = if wide {
                u64::from_le_bytes(bytes[8 * p..8 * p + 8].try_into().unwrap())
            } else {
                u32::from_le_bytes(bytes[4 * p..4 * p + 4].try_into().unwrap()) as u64
            };
            let (got, want) = (got & mask, (c.reference)(o.0, o.1, o.2) & mask);
            if !same(c, got, want) {
                failures
                    .push(format!("{}({:#x}, {:#x}, {:#x}) = {got:#x}; Rust says {want:#x}", c.name, o.0, o.1, o.2));
                break;
            }
        }
    }
    failures.extend(uncovered(&ran));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The guard (see the module docs): what is implemented for gfx12 only and neither ran nor is listed.
fn uncovered(ran: &BTreeSet<String>) -> Vec<String> {
    let key = |(e, n): &(pilot_rdna3::decode::Enc, &str)| format!("{e:?} {n}");
    let gfx11: BTreeSet<String> = implemented_opcodes_of(Isa::Gfx11).iter().map(key).collect();
    let mut covered = ran.clone();
    for (stem, src, flags) in rdna3_support::SOURCES {
        let Some(co) = rdna3_support::build_for(Isa::Gfx12, stem, src, flags) else { continue };
        for name in CodeObjectKernel::names(&co).unwrap() {
            for inst in &CodeObjectKernel::load(&co, &name).unwrap().insts {
                covered.insert(format!("{:?} {}", inst.enc, inst.name()));
                if let Some(y) = &inst.y {
                    covered.insert(format!("{:?} {}", y.enc, y.name()));
                }
            }
        }
    }
    let listed: Vec<String> = include_str!("rdna4_unexercised.txt")
        .lines()
        .filter(|l| !l.starts_with("//") && !l.trim().is_empty())
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .collect();
    let mut failures = Vec::new();
    let only12: Vec<String> =
        implemented_opcodes_of(Isa::Gfx12).iter().map(key).filter(|k| !gfx11.contains(k)).collect();
    for k in &only12 {
        match (covered.contains(k), listed.contains(k)) {
            (false, false) => failures.push(format!("{k}: implemented for gfx12, but no test runs it")),
            (true, true) => failures.push(format!("{k}: runs in a test now: remove it from rdna4_unexercised.txt")),
            _ => {}
        }
    }
    failures.extend(
        listed.iter().filter(|l| !only12.contains(l)).map(|l| format!("{l}: listed but not a gfx12-only opcode")),
    );
    failures
}
