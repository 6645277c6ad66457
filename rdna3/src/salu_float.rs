//! gfx12's scalar float instructions (SOP1/SOP2/SOPC `s_*_f32`, `s_cvt_*`): the VALU's f32 semantics on one
//! value, under the wave's f32 denormal mode (AMD's "RDNA4 Instruction Set Architecture", "Scalar ALU
//! Operations"). gfx1100 has the same opcodes in its tables but no SALU float unit; clang-19 emits them for
//! gfx1201 only.

use super::wave::semantics;

semantics!(F {
    CvtF32I32 = "s_cvt_f32_i32",
    CvtF32U32 = "s_cvt_f32_u32",
    CvtI32F32 = "s_cvt_i32_f32",
    CvtU32F32 = "s_cvt_u32_f32",
    CvtF16F32 = "s_cvt_f16_f32",
    CvtF32F16 = "s_cvt_f32_f16",
    CvtHiF32F16 = "s_cvt_hi_f32_f16",
    CvtPkRtzF16F32 = "s_cvt_pk_rtz_f16_f32",
    CeilF32 = "s_ceil_f32",
    FloorF32 = "s_floor_f32",
    TruncF32 = "s_trunc_f32",
    RndneF32 = "s_rndne_f32",
    AddF32 = "s_add_f32",
    SubF32 = "s_sub_f32",
    MulF32 = "s_mul_f32",
    MinF32 = "s_min_num_f32",
    MaxF32 = "s_max_num_f32",
    MinimumF32 = "s_minimum_f32",
    MaximumF32 = "s_maximum_f32",
    FmacF32 = "s_fmac_f32",
    FmaakF32 = "s_fmaak_f32",
    FmamkF32 = "s_fmamk_f32",
    CmpLtF32 = "s_cmp_lt_f32",
    CmpEqF32 = "s_cmp_eq_f32",
    CmpLeF32 = "s_cmp_le_f32",
    CmpGtF32 = "s_cmp_gt_f32",
    CmpLgF32 = "s_cmp_lg_f32",
    CmpGeF32 = "s_cmp_ge_f32",
    CmpOF32 = "s_cmp_o_f32",
    CmpUF32 = "s_cmp_u_f32",
    CmpNgeF32 = "s_cmp_nge_f32",
    CmpNlgF32 = "s_cmp_nlg_f32",
    CmpNgtF32 = "s_cmp_ngt_f32",
    CmpNleF32 = "s_cmp_nle_f32",
    CmpNeqF32 = "s_cmp_neq_f32",
    CmpNltF32 = "s_cmp_nlt_f32",
});

/// The operation for an opcode name (0: not a scalar float operation here).
pub(super) fn resolve(name: &str) -> u16 {
    F::from_name(name)
}

/// What a scalar float operation produces: a new SCC (compares) or a 32-bit result.
pub(super) enum Out {
    Scc(bool),
    Value(u32),
}

/// Runs operation `sem` on the sources `a`, `b` and `c` (`c`: the addend of the fused multiply-adds);
/// `flush` flushes f32 denormals on input and output.
#[allow(clippy::neg_cmp_op_on_partial_ord, clippy::double_comparisons)] // NaN: `x < y || x > y` is not `x != y`
pub(super) fn exec(sem: u16, a: u32, b: u32, c: u32, flush: bool) -> Option<Out> {
    use F::*;
    let ftz = |x: f32| if flush && x.is_subnormal() { 0.0f32.copysign(x) } else { x };
    let (x, y, z) = (ftz(f32::from_bits(a)), ftz(f32::from_bits(b)), ftz(f32::from_bits(c)));
    let f = |v: f32| Out::Value(ftz(v).to_bits());
    let half = |bits: u32| half::f16::from_bits(bits as u16).to_f32();
    Some(match F::of(sem) {
        CvtF32I32 => f(a as i32 as f32),
        CvtF32U32 => f(a as f32),
        // Saturating, NaN to 0: Rust's float-to-int casts.
        CvtI32F32 => Out::Value(x as i32 as u32),
        CvtU32F32 => Out::Value(x as u32),
        CvtF16F32 => Out::Value(half::f16::from_f32(x).to_bits() as u32),
        CvtF32F16 => f(half(a)),
        CvtHiF32F16 => f(half(a >> 16)),
        CvtPkRtzF16F32 => Out::Value(rtz_f16(x) as u32 | (rtz_f16(y) as u32) << 16),
        CeilF32 => f(x.ceil()),
        FloorF32 => f(x.floor()),
        TruncF32 => f(x.trunc()),
        RndneF32 => f(x.round_ties_even()),
        AddF32 => f(x + y),
        SubF32 => f(x - y),
        MulF32 => f(x * y),
        // IEEE 754-2019 minimumNumber/maximumNumber: a NaN operand yields the other; -0 < +0.
        MinF32 => f(if x.is_nan() {
            y
        } else if y.is_nan() || x < y || (x == y && x.is_sign_negative()) {
            x
        } else {
            y
        }),
        MaxF32 => f(if x.is_nan() {
            y
        } else if y.is_nan() || x > y || (x == y && x.is_sign_positive()) {
            x
        } else {
            y
        }),
        // minimum/maximum propagate NaN.
        MinimumF32 if x.is_nan() || y.is_nan() => f(f32::NAN),
        MaximumF32 if x.is_nan() || y.is_nan() => f(f32::NAN),
        MinimumF32 => f(if x == y && x.is_sign_positive() { y } else { x.min(y) }),
        MaximumF32 => f(if x == y && x.is_sign_negative() { y } else { x.max(y) }),
        // The sources in assembler order: s_fmamk's K is the second, s_fmaak's the third, s_fmac's the destination.
        FmacF32 | FmaakF32 | FmamkF32 => f(x.mul_add(y, z)),
        CmpLtF32 => Out::Scc(x < y),
        CmpEqF32 => Out::Scc(x == y),
        CmpLeF32 => Out::Scc(x <= y),
        CmpGtF32 => Out::Scc(x > y),
        CmpLgF32 => Out::Scc(x < y || x > y),
        CmpGeF32 => Out::Scc(x >= y),
        CmpOF32 => Out::Scc(!x.is_nan() && !y.is_nan()),
        CmpUF32 => Out::Scc(x.is_nan() || y.is_nan()),
        CmpNgeF32 => Out::Scc(!(x >= y)),
        CmpNlgF32 => Out::Scc(!(x < y || x > y)),
        CmpNgtF32 => Out::Scc(!(x > y)),
        CmpNleF32 => Out::Scc(!(x <= y)),
        CmpNeqF32 => Out::Scc(x != y),
        CmpNltF32 => Out::Scc(!(x < y)),
        Unimplemented => return None,
    })
}

/// f32 to f16 rounding toward zero.
fn rtz_f16(x: f32) -> u16 {
    let h = half::f16::from_f32(x);
    let back = h.to_f32();
    if x.is_nan() || back.abs() <= x.abs() {
        h.to_bits()
    } else {
        // Rounded away from zero: step one ULP toward zero (magnitudes are ordered as their bit patterns).
        h.to_bits() - 1
    }
}
