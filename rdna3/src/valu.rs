//! Vector ALU: VOP1, VOP2, VOP3/VOP3SD, VOPC, VOP3P and VOPD, lane by lane over EXEC.
//!
//! Floating point follows the hardware where Rust's defaults differ: fused multiply-add for the fma
//! family, f32 denormals flushed when the mode says so, `v_sin/v_cos` take revolutions. The
//! transcendentals (`v_exp/v_log/v_rcp/v_rsq/v_sqrt/v_sin/v_cos`) are computed exactly here; the ISA
//! documents them to 1 ULP, so results may differ from a GPU by that much.

use half::f16;

use super::decode::{operand as op, Dpp, Enc, Inst, MASK};
use super::dpp;
use super::valu_cmp;
use super::wave::{kind, semantics, Kind, Src, Wave, DST16, LANES, SRC16};

semantics!(V {
    Nop = "v_nop",
    MovB32 = "v_mov_b32",
    Readfirstlane = "v_readfirstlane_b32",
    Readlane = "v_readlane_b32",
    Writelane = "v_writelane_b32",
    CndmaskB32 = "v_cndmask_b32",
    AddF32 = "v_add_f32",
    SubF32 = "v_sub_f32",
    SubrevF32 = "v_subrev_f32",
    MulF32 = "v_mul_f32",
    FmaF32 = "v_fma_f32",
    FmacF32 = "v_fmac_f32",
    FmamkF32 = "v_fmamk_f32",
    FmaakF32 = "v_fmaak_f32",
    MaxF32 = "v_max_f32",
    MinF32 = "v_min_f32",
    Max3F32 = "v_max3_f32",
    Min3F32 = "v_min3_f32",
    Med3F32 = "v_med3_f32",
    MaxminF32 = "v_maxmin_f32",
    MinmaxF32 = "v_minmax_f32",
    MaxNumF32 = "v_max_num_f32",
    MinNumF32 = "v_min_num_f32",
    Max3NumF32 = "v_max3_num_f32",
    Min3NumF32 = "v_min3_num_f32",
    MaxminNumF32 = "v_maxmin_num_f32",
    MinmaxNumF32 = "v_minmax_num_f32",
    Med3NumF32 = "v_med3_num_f32",
    LdexpF32 = "v_ldexp_f32",
    FractF32 = "v_fract_f32",
    FloorF32 = "v_floor_f32",
    CeilF32 = "v_ceil_f32",
    TruncF32 = "v_trunc_f32",
    RndneF32 = "v_rndne_f32",
    ExpF32 = "v_exp_f32",
    LogF32 = "v_log_f32",
    RcpF32 = "v_rcp_f32",
    RcpIflagF32 = "v_rcp_iflag_f32",
    RsqF32 = "v_rsq_f32",
    SqrtF32 = "v_sqrt_f32",
    // gfx12's scalar transcendentals: VOP3 with an SGPR destination and a uniform source.
    SExpF32 = "v_s_exp_f32",
    SLogF32 = "v_s_log_f32",
    SRcpF32 = "v_s_rcp_f32",
    SRsqF32 = "v_s_rsq_f32",
    SSqrtF32 = "v_s_sqrt_f32",
    SinF32 = "v_sin_f32",
    CosF32 = "v_cos_f32",
    FrexpMantF32 = "v_frexp_mant_f32",
    FrexpExpF32 = "v_frexp_exp_i32_f32",
    DivScaleF32 = "v_div_scale_f32",
    DivFmasF32 = "v_div_fmas_f32",
    DivFixupF32 = "v_div_fixup_f32",
    CvtF32U32 = "v_cvt_f32_u32",
    CvtF32I32 = "v_cvt_f32_i32",
    CvtU32F32 = "v_cvt_u32_f32",
    CvtI32F32 = "v_cvt_i32_f32",
    CvtFloorI32F32 = "v_cvt_floor_i32_f32",
    CvtNearestI32F32 = "v_cvt_nearest_i32_f32",
    CvtF16F32 = "v_cvt_f16_f32",
    CvtF32F16 = "v_cvt_f32_f16",
    CvtF32Ubyte0 = "v_cvt_f32_ubyte0",
    CvtF32Ubyte1 = "v_cvt_f32_ubyte1",
    CvtF32Ubyte2 = "v_cvt_f32_ubyte2",
    CvtF32Ubyte3 = "v_cvt_f32_ubyte3",
    CvtPkRtzF16F32 = "v_cvt_pk_rtz_f16_f32",
    PackB32F16 = "v_pack_b32_f16",
    AddF16 = "v_add_f16",
    SubF16 = "v_sub_f16",
    SubrevF16 = "v_subrev_f16",
    MulF16 = "v_mul_f16",
    FmaF16 = "v_fma_f16",
    FmacF16 = "v_fmac_f16",
    FmamkF16 = "v_fmamk_f16",
    FmaakF16 = "v_fmaak_f16",
    MaxF16 = "v_max_f16",
    MinF16 = "v_min_f16",
    MaxNumF16 = "v_max_num_f16",
    MinNumF16 = "v_min_num_f16",
    Med3NumF16 = "v_med3_num_f16",
    AddNcU32 = "v_add_nc_u32",
    SubNcU32 = "v_sub_nc_u32",
    SubrevNcU32 = "v_subrev_nc_u32",
    AddNcI32 = "v_add_nc_i32",
    SubNcI32 = "v_sub_nc_i32",
    AddCoU32 = "v_add_co_u32",
    SubCoU32 = "v_sub_co_u32",
    SubrevCoU32 = "v_subrev_co_u32",
    AddCoCiU32 = "v_add_co_ci_u32",
    SubCoCiU32 = "v_sub_co_ci_u32",
    SubrevCoCiU32 = "v_subrev_co_ci_u32",
    MulLoU32 = "v_mul_lo_u32",
    MulHiU32 = "v_mul_hi_u32",
    MulHiI32 = "v_mul_hi_i32",
    MulU32U24 = "v_mul_u32_u24",
    MulI32I24 = "v_mul_i32_i24",
    MulHiU32U24 = "v_mul_hi_u32_u24",
    MadU32U24 = "v_mad_u32_u24",
    MadI32I24 = "v_mad_i32_i24",
    MadU64U32 = "v_mad_u64_u32" | "v_mad_co_u64_u32",
    MadI64I32 = "v_mad_i64_i32" | "v_mad_co_i64_i32",
    LshlrevB32 = "v_lshlrev_b32",
    LshrrevB32 = "v_lshrrev_b32",
    AshrrevI32 = "v_ashrrev_i32",
    LshlrevB64 = "v_lshlrev_b64",
    LshrrevB64 = "v_lshrrev_b64",
    AshrrevI64 = "v_ashrrev_i64",
    AndB32 = "v_and_b32",
    OrB32 = "v_or_b32",
    XorB32 = "v_xor_b32",
    XnorB32 = "v_xnor_b32",
    NotB32 = "v_not_b32",
    AndOrB32 = "v_and_or_b32",
    Or3B32 = "v_or3_b32",
    Xor3B32 = "v_xor3_b32",
    LshlAddU32 = "v_lshl_add_u32",
    AddLshlU32 = "v_add_lshl_u32",
    LshlOrB32 = "v_lshl_or_b32",
    Add3U32 = "v_add3_u32",
    XadU32 = "v_xad_u32",
    BfeU32 = "v_bfe_u32",
    BfeI32 = "v_bfe_i32",
    BfiB32 = "v_bfi_b32",
    BfmB32 = "v_bfm_b32",
    AlignbitB32 = "v_alignbit_b32",
    AlignbyteB32 = "v_alignbyte_b32",
    PermB32 = "v_perm_b32",
    BfrevB32 = "v_bfrev_b32",
    ClzU32 = "v_clz_i32_u32",
    CtzB32 = "v_ctz_i32_b32",
    BcntU32 = "v_bcnt_u32_b32",
    MbcntLo = "v_mbcnt_lo_u32_b32",
    MbcntHi = "v_mbcnt_hi_u32_b32",
    MaxI32 = "v_max_i32",
    MinI32 = "v_min_i32",
    MaxU32 = "v_max_u32",
    MinU32 = "v_min_u32",
    Max3I32 = "v_max3_i32",
    MaxminI32 = "v_maxmin_i32",
    MinmaxI32 = "v_minmax_i32",
    MaxminU32 = "v_maxmin_u32",
    MinmaxU32 = "v_minmax_u32",
    Min3I32 = "v_min3_i32",
    Max3U32 = "v_max3_u32",
    Min3U32 = "v_min3_u32",
    Med3I32 = "v_med3_i32",
    Med3U32 = "v_med3_u32",
    CvtF64F32 = "v_cvt_f64_f32",
    CvtF32F64 = "v_cvt_f32_f64",
    AddF64 = "v_add_f64",
    MulF64 = "v_mul_f64",
    FmaF64 = "v_fma_f64",
    MadU16 = "v_mad_u16",
    AddNcU16 = "v_add_nc_u16",
    SubNcU16 = "v_sub_nc_u16",
    MulLoU16 = "v_mul_lo_u16",
    LshlrevB16 = "v_lshlrev_b16",
    LshrrevB16 = "v_lshrrev_b16",
    PkAddF16 = "v_pk_add_f16",
    PkMulF16 = "v_pk_mul_f16",
    PkFmaF16 = "v_pk_fma_f16",
    PkMaxF16 = "v_pk_max_f16",
    PkMinF16 = "v_pk_min_f16",
    PkMaxNumF16 = "v_pk_max_num_f16",
    PkMinNumF16 = "v_pk_min_num_f16",
    PkAddU16 = "v_pk_add_u16",
    FmaMixF32 = "v_fma_mix_f32",
    FmaMixloF16 = "v_fma_mixlo_f16",
    FmaMixhiF16 = "v_fma_mixhi_f16",
    PkMulLoU16 = "v_pk_mul_lo_u16",
    MulHiI32I24 = "v_mul_hi_i32_i24",
    ClsI32 = "v_cls_i32",
    MaxI16 = "v_max_i16",
    MinI16 = "v_min_i16",
    MaxU16 = "v_max_u16",
    MinU16 = "v_min_u16",
    Max3I16 = "v_max3_i16",
    Min3I16 = "v_min3_i16",
    Max3U16 = "v_max3_u16",
    Min3U16 = "v_min3_u16",
    AshrrevI16 = "v_ashrrev_i16",
    TruncF64 = "v_trunc_f64",
    FloorF64 = "v_floor_f64",
    CeilF64 = "v_ceil_f64",
    RndneF64 = "v_rndne_f64",
    FractF64 = "v_fract_f64",
    MaxF64 = "v_max_f64",
    MinF64 = "v_min_f64",
    MaxNumF64 = "v_max_num_f64",
    MinNumF64 = "v_min_num_f64",
    LdexpF64 = "v_ldexp_f64",
    FrexpMantF64 = "v_frexp_mant_f64",
    FrexpExpF64 = "v_frexp_exp_i32_f64",
    RcpF64 = "v_rcp_f64",
    RsqF64 = "v_rsq_f64",
    SqrtF64 = "v_sqrt_f64",
    CvtF64I32 = "v_cvt_f64_i32",
    CvtF64U32 = "v_cvt_f64_u32",
    CvtI32F64 = "v_cvt_i32_f64",
    CvtU32F64 = "v_cvt_u32_f64",
    DivScaleF64 = "v_div_scale_f64",
    DivFmasF64 = "v_div_fmas_f64",
    DivFixupF64 = "v_div_fixup_f64",
});

pub(super) fn resolve(name: &str) -> u16 {
    match V::from_name(name) {
        0 => valu_cmp::resolve(name),
        n => n,
    }
}

/// Reads f32 operands and writes f32 results under the wave's denormal mode.
#[derive(Clone, Copy)]
struct F32Mode {
    flush: bool,
}

impl F32Mode {
    #[inline]
    fn get(self, x: u64) -> f32 {
        let f = f32::from_bits(x as u32);
        if self.flush && f.is_subnormal() {
            f32::from_bits(x as u32 & 0x8000_0000)
        } else {
            f
        }
    }

    #[inline]
    fn put(self, f: f32) -> u64 {
        let f = if self.flush && f.is_subnormal() { f32::from_bits(f.to_bits() & 0x8000_0000) } else { f };
        f.to_bits() as u64
    }
}

fn h(x: u64) -> f32 {
    f16::from_bits(x as u16).to_f32()
}

fn hb(x: u64) -> f16 {
    f16::from_bits(x as u16)
}

fn hput(f: f32) -> u64 {
    f16::from_f32(f).to_bits() as u64
}

fn hfma(a: u64, b: u64, c: u64) -> u64 {
    f16::from_f64(h(a) as f64 * h(b) as f64 + h(c) as f64).to_bits() as u64
}

fn med3<T: PartialOrd + Copy>(a: T, b: T, c: T) -> T {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if c < lo {
        lo
    } else if c > hi {
        hi
    } else {
        c
    }
}

/// The sources' modifiers as an AND mask and an XOR mask on the raw bits.
fn modifier_masks(inst: &Inst, i: usize, k: Kind) -> (u64, u64) {
    let sign = match k {
        Kind::F16 => 0x8000u64,
        // v_cndmask_b32 takes f32 input modifiers (LLVM folds fneg/fabs of a select into them).
        Kind::F32 | Kind::Int => 0x8000_0000,
        Kind::F64 => 0x8000_0000_0000_0000,
    };
    let and = if inst.abs >> i & 1 != 0 { !sign } else { !0 };
    let xor = if inst.neg >> i & 1 != 0 { sign } else { 0 };
    (and, xor)
}

/// Refuses VOP3 modifiers the emulator would otherwise ignore: output modifiers and clamp beyond f32
/// results, input modifiers on integer operands, OPSEL on 32-bit operands.
fn check_modifiers(inst: &Inst, k: Kind) -> Result<(), String> {
    if inst.enc != Enc::Vop3 {
        return Ok(());
    }
    let f32_result = k == Kind::F32 && inst.info.w[0] == 1 && inst.info.sdst == 0;
    if (inst.clamp || inst.omod != 0) && !f32_result {
        return Err("clamp or an output modifier on this opcode is not emulated".into());
    }
    if k == Kind::Int && (inst.abs | inst.neg) != 0 && inst.info.name != "v_cndmask_b32" {
        return Err("input modifiers on integer operands are not emulated".into());
    }
    if inst.opsel != 0 && inst.types & (SRC16 | DST16) == 0 {
        return Err("OPSEL on 32-bit operands is not emulated".into());
    }
    Ok(())
}

/// Runs `f(a, b, c, lane)` on every active lane and writes the destination (32 or 64 bits, or a 16-bit
/// half). With `carry`, bit 32 of each result goes to the carry-out mask.
pub(super) fn lanes<F: Fn(u64, u64, u64, usize) -> u64>(
    w: &mut Wave,
    inst: &Inst,
    carry: bool,
    f: F,
) -> Result<(), String> {
    let info = inst.info;
    let k = kind(inst.types);
    let mut srcs = [Src::Uniform(0); 3];
    let mut masks = [(!0u64, 0u64); 3];
    let mut hi = [false; 3];
    for i in 0..3 {
        let width = info.w[1 + i];
        let code = inst.src[i];
        if width == 0 && code == 0 {
            continue;
        }
        srcs[i] = if width == MASK || (width == 0 && code < 256) {
            Src::Uniform(w.scalar(code, 1, inst.literal, Kind::Int)?)
        } else {
            w.src(code, width, inst.literal, k)?
        };
        if inst.enc == Enc::Vop3 || matches!(inst.dpp, Dpp::Dpp16(_)) {
            masks[i] = modifier_masks(inst, i, k);
            hi[i] = inst.types & SRC16 != 0 && inst.opsel >> i & 1 != 0;
        }
    }
    check_modifiers(inst, k)?;
    if w.flush_f16 && matches!(k, Kind::F16 | Kind::F64) {
        return Err("flushing f16/f64 denormals (FLOAT_DENORM_MODE_16_64 = 0) is not emulated".into());
    }
    let wide = [info.w[1] == 2, info.w[2] == 2, info.w[3] == 2];
    let mut exec = w.exec();
    let dpp_src0 = match inst.dpp {
        Dpp::None => None,
        _ => {
            let (vals, write) = dpp::gather(w, inst, exec)?;
            exec = write;
            Some(vals)
        }
    };
    let mut out = [0u64; LANES];
    for (lane, o) in out.iter_mut().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut v = [0u64; 3];
        for i in 0..3 {
            let raw = match (&dpp_src0, i) {
                (Some(vals), 0) => vals[lane],
                _ => w.get(srcs[i], lane, wide[i]),
            };
            let raw = if hi[i] { raw >> 16 } else { raw };
            v[i] = (raw & masks[i].0) ^ masks[i].1;
        }
        *o = f(v[0], v[1], v[2], lane);
    }
    if k == Kind::F32 && info.w[0] == 1 && (inst.clamp || inst.omod != 0) {
        for x in out.iter_mut() {
            let mut v = f32::from_bits(*x as u32);
            v *= [1.0, 2.0, 4.0, 0.5][inst.omod as usize];
            if inst.clamp {
                v = v.clamp(0.0, 1.0);
            }
            *x = v.to_bits() as u64;
        }
    }
    if carry {
        let mut mask = 0u32;
        for (lane, x) in out.iter().enumerate() {
            mask |= ((x >> 32) as u32 & 1) << lane;
        }
        let sdst = if inst.enc == Enc::Vop3 { inst.sdst } else { op::VCC_LO };
        // Inactive lanes' carry bits read 0, as compares write them.
        w.write_scalar(sdst, 1, (mask & exec) as u64)?;
    }
    write_dst(w, inst, exec, &out)
}

fn write_dst(w: &mut Wave, inst: &Inst, exec: u32, out: &[u64; LANES]) -> Result<(), String> {
    let dw = inst.info.w[0].max(1);
    let r = (inst.dst - op::VGPR0) as usize;
    w.check_vgpr(r, dw)?;
    let base = r * LANES;
    let d16_hi = (inst.types & DST16 != 0).then_some(inst.enc == Enc::Vop3 && inst.opsel & 8 != 0);
    for (lane, &x) in out.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        match d16_hi {
            Some(false) => w.v[base + lane] = w.v[base + lane] & 0xffff_0000 | x as u32 & 0xffff,
            Some(true) => w.v[base + lane] = w.v[base + lane] & 0xffff | (x as u32) << 16,
            None => {
                w.v[base + lane] = x as u32;
                if dw == 2 {
                    w.v[base + LANES + lane] = (x >> 32) as u32;
                }
            }
        }
    }
    Ok(())
}

/// `v_exp/v_log/v_rcp/v_rsq/v_sqrt_f32` and their gfx12 scalar forms (`v_s_*`).
fn transcendental(s: V, x: f32) -> f32 {
    match s {
        V::ExpF32 | V::SExpF32 => x.exp2(),
        V::LogF32 | V::SLogF32 => x.log2(),
        V::RcpF32 | V::RcpIflagF32 | V::SRcpF32 => 1.0 / x,
        V::RsqF32 | V::SRsqF32 => (1.0 / (x as f64).sqrt()) as f32,
        _ => x.sqrt(),
    }
}

/// gfx12's `v_s_*_f32`: one uniform source (an SGPR or a constant), input modifiers, clamp and output modifier as
/// for a VOP3 f32 result, the result in an SGPR.
fn scalar_transcendental(w: &mut Wave, inst: &Inst, s: V, m: F32Mode) -> Result<(), String> {
    check_modifiers(inst, Kind::F32)?;
    if inst.src[0] >= op::VGPR0 {
        return Err("a VGPR source of a scalar transcendental".into());
    }
    let (and, xor) = modifier_masks(inst, 0, Kind::F32);
    let a = (w.scalar(inst.src[0], 1, inst.literal, Kind::F32)? & and) ^ xor;
    let mut v = f32::from_bits(m.put(transcendental(s, m.get(a))) as u32);
    v *= [1.0, 2.0, 4.0, 0.5][inst.omod as usize];
    if inst.clamp {
        v = v.clamp(0.0, 1.0);
    }
    w.write_scalar(inst.dst, 1, v.to_bits() as u64)
}

pub(super) fn exec(w: &mut Wave, inst: &Inst) -> Result<(), String> {
    use V::*;
    if inst.enc == Enc::Vopd {
        return super::valu_cmp::vopd(w, inst);
    }
    if inst.dpp != Dpp::None
        && (valu_cmp::is_compare(inst.sem) || matches!(V::of(inst.sem), Readfirstlane | Readlane | Writelane))
    {
        return Err("DPP on compares and lane reads/writes is not emulated".into());
    }
    if valu_cmp::is_compare(inst.sem) {
        return valu_cmp::compare(w, inst);
    }
    let m = F32Mode { flush: w.flush_f32 };
    let vcc = w.vcc();
    let s = V::of(inst.sem);
    match s {
        Nop => Ok(()),
        Readfirstlane | Readlane => {
            let r = (inst.src[0].checked_sub(op::VGPR0)).ok_or("the source must be a VGPR")? as usize;
            w.check_vgpr(r, 1)?;
            let lane = if s == Readlane {
                w.scalar(inst.src[1], 1, inst.literal, Kind::Int)? as usize % LANES
            } else {
                let e = w.exec();
                if e == 0 {
                    0
                } else {
                    e.trailing_zeros() as usize
                }
            };
            let v = w.v[r * LANES + lane] as u64;
            w.write_scalar(inst.dst, 1, v)
        }
        Writelane => {
            let v = w.scalar(inst.src[0], 1, inst.literal, Kind::Int)? as u32;
            let lane = w.scalar(inst.src[1], 1, inst.literal, Kind::Int)? as usize % LANES;
            let r = (inst.dst - op::VGPR0) as usize;
            w.check_vgpr(r, 1)?;
            w.v[r * LANES + lane] = v;
            Ok(())
        }
        MovB32 => lanes(w, inst, false, |a, _, _, _| a),
        CndmaskB32 => {
            let mask_from_vcc = inst.enc == Enc::Vop2;
            lanes(w, inst, false, |a, b, c, l| {
                let mask = if mask_from_vcc { vcc } else { c as u32 };
                if mask >> l & 1 != 0 {
                    b
                } else {
                    a
                }
            })
        }
        AddF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(a) + m.get(b))),
        SubF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(a) - m.get(b))),
        SubrevF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(b) - m.get(a))),
        MulF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(a) * m.get(b))),
        // v_fmac's third source is its destination (set when the kernel is loaded).
        FmaF32 | FmamkF32 | FmaakF32 | FmacF32 => {
            lanes(w, inst, false, |a, b, c, _| m.put(m.get(a).mul_add(m.get(b), m.get(c))))
        }
        MaxNumF32 => lanes(w, inst, false, |a, b, _, _| m.put(max_num(m.get(a), m.get(b)))),
        MinNumF32 => lanes(w, inst, false, |a, b, _, _| m.put(min_num(m.get(a), m.get(b)))),
        Max3NumF32 => lanes(w, inst, false, |a, b, c, _| m.put(max_num(max_num(m.get(a), m.get(b)), m.get(c)))),
        Min3NumF32 => lanes(w, inst, false, |a, b, c, _| m.put(min_num(min_num(m.get(a), m.get(b)), m.get(c)))),
        MaxminNumF32 => lanes(w, inst, false, |a, b, c, _| m.put(min_num(max_num(m.get(a), m.get(b)), m.get(c)))),
        MinmaxNumF32 => lanes(w, inst, false, |a, b, c, _| m.put(max_num(min_num(m.get(a), m.get(b)), m.get(c)))),
        Med3NumF32 => lanes(w, inst, false, |a, b, c, _| m.put(med3_num(m.get(a), m.get(b), m.get(c)))),
        MaxF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(a).max(m.get(b)))),
        MinF32 => lanes(w, inst, false, |a, b, _, _| m.put(m.get(a).min(m.get(b)))),
        Max3F32 => lanes(w, inst, false, |a, b, c, _| m.put(m.get(a).max(m.get(b)).max(m.get(c)))),
        Min3F32 => lanes(w, inst, false, |a, b, c, _| m.put(m.get(a).min(m.get(b)).min(m.get(c)))),
        Med3F32 => lanes(w, inst, false, |a, b, c, _| m.put(med3(m.get(a), m.get(b), m.get(c)))),
        MaxminF32 => lanes(w, inst, false, |a, b, c, _| m.put(m.get(a).max(m.get(b)).min(m.get(c)))),
        MinmaxF32 => lanes(w, inst, false, |a, b, c, _| m.put(m.get(a).min(m.get(b)).max(m.get(c)))),
        LdexpF32 => lanes(w, inst, false, |a, b, _, _| {
            let e = (b as u32 as i32).clamp(-400, 400);
            m.put((m.get(a) as f64 * 2f64.powi(e)) as f32)
        }),
        FractF32 => lanes(w, inst, false, |a, _, _, _| {
            let x = m.get(a);
            m.put(if x.is_infinite() { f32::NAN } else { (x - x.floor()).min(f32::from_bits(0x3f7f_ffff)) })
        }),
        FloorF32 => lanes(w, inst, false, |a, _, _, _| m.put(m.get(a).floor())),
        CeilF32 => lanes(w, inst, false, |a, _, _, _| m.put(m.get(a).ceil())),
        TruncF32 => lanes(w, inst, false, |a, _, _, _| m.put(m.get(a).trunc())),
        RndneF32 => lanes(w, inst, false, |a, _, _, _| m.put(m.get(a).round_ties_even())),
        ExpF32 | LogF32 | RcpF32 | RcpIflagF32 | RsqF32 | SqrtF32 => {
            lanes(w, inst, false, |a, _, _, _| m.put(transcendental(s, m.get(a))))
        }
        SExpF32 | SLogF32 | SRcpF32 | SRsqF32 | SSqrtF32 => scalar_transcendental(w, inst, s, m),
        SinF32 => lanes(w, inst, false, |a, _, _, _| m.put((m.get(a) as f64 * std::f64::consts::TAU).sin() as f32)),
        CosF32 => lanes(w, inst, false, |a, _, _, _| m.put((m.get(a) as f64 * std::f64::consts::TAU).cos() as f32)),
        FrexpMantF32 => lanes(w, inst, false, |a, _, _, _| {
            let x = m.get(a);
            if x == 0.0 || !x.is_finite() {
                return m.put(x);
            }
            m.put((x as f64 / 2f64.powi(frexp_exp(x))) as f32)
        }),
        FrexpExpF32 => lanes(w, inst, false, |a, _, _, _| {
            let x = m.get(a);
            if x == 0.0 || !x.is_finite() {
                0
            } else {
                frexp_exp(x) as u32 as u64
            }
        }),
        // Within the exponent range where no pre-scaling is needed (all but extreme quotients),
        // v_div_scale returns its operand unchanged and clears VCC; v_div_fmas then is a plain fma,
        // else it undoes the scale.
        DivScaleF32 => lanes(w, inst, true, |a, b, c, _| {
            let (d, vcc) = div_scale(m.get(a), m.get(b), m.get(c));
            m.put(d) | (vcc as u64) << 32
        }),
        DivFmasF32 => {
            let vcc = w.vcc();
            lanes(w, inst, false, move |a, b, c, l| {
                let r = m.get(a).mul_add(m.get(b), m.get(c));
                if vcc >> l & 1 == 0 {
                    return m.put(r);
                }
                let k = super::valu_f64::fmas_scale(m.get(c) as f64, 64);
                m.put(super::valu_f64::ldexp(r as f64, k) as f32)
            })
        }
        DivFixupF32 => lanes(w, inst, false, |a, b, c, _| m.put(div_fixup(m.get(a), m.get(b), m.get(c)))),
        CvtF32U32 => lanes(w, inst, false, |a, _, _, _| m.put(a as u32 as f32)),
        CvtF32I32 => lanes(w, inst, false, |a, _, _, _| m.put(a as u32 as i32 as f32)),
        CvtU32F32 => lanes(w, inst, false, |a, _, _, _| m.get(a) as u32 as u64),
        CvtI32F32 => lanes(w, inst, false, |a, _, _, _| m.get(a) as i32 as u32 as u64),
        CvtFloorI32F32 => lanes(w, inst, false, |a, _, _, _| m.get(a).floor() as i32 as u32 as u64),
        CvtNearestI32F32 => lanes(w, inst, false, |a, _, _, _| (m.get(a) + 0.5).floor() as i32 as u32 as u64),
        CvtF16F32 => lanes(w, inst, false, |a, _, _, _| hput(m.get(a))),
        CvtF32F16 => lanes(w, inst, false, |a, _, _, _| m.put(h(a))),
        CvtF32Ubyte0 | CvtF32Ubyte1 | CvtF32Ubyte2 | CvtF32Ubyte3 => {
            let sh = 8 * (s as u16 - CvtF32Ubyte0 as u16) as u32;
            lanes(w, inst, false, move |a, _, _, _| m.put((a as u32 >> sh & 0xff) as f32))
        }
        CvtPkRtzF16F32 => {
            lanes(w, inst, false, |a, b, _, _| rtz_f16(m.get(a)) as u64 | (rtz_f16(m.get(b)) as u64) << 16)
        }
        PackB32F16 => lanes(w, inst, false, |a, b, _, _| (a & 0xffff) | (b & 0xffff) << 16),
        AddF16 => lanes(w, inst, false, |a, b, _, _| hput(h(a) + h(b))),
        SubF16 => lanes(w, inst, false, |a, b, _, _| hput(h(a) - h(b))),
        SubrevF16 => lanes(w, inst, false, |a, b, _, _| hput(h(b) - h(a))),
        MulF16 => lanes(w, inst, false, |a, b, _, _| hput(h(a) * h(b))),
        FmaF16 | FmamkF16 | FmaakF16 | FmacF16 => lanes(w, inst, false, |a, b, c, _| hfma(a, b, c)),
        MaxF16 => lanes(w, inst, false, |a, b, _, _| hput(h(a).max(h(b)))),
        MinF16 => lanes(w, inst, false, |a, b, _, _| hput(h(a).min(h(b)))),
        MaxNumF16 => lanes(w, inst, false, |a, b, _, _| max_num(hb(a), hb(b)).to_bits() as u64),
        MinNumF16 => lanes(w, inst, false, |a, b, _, _| min_num(hb(a), hb(b)).to_bits() as u64),
        Med3NumF16 => lanes(w, inst, false, |a, b, c, _| med3_num(hb(a), hb(b), hb(c)).to_bits() as u64),
        _ => super::valu_int::exec(w, inst, s),
    }
}

fn frexp_exp(x: f32) -> i32 {
    let mut e = ((x.to_bits() >> 23) & 0xff) as i32;
    if e == 0 {
        // denormal: normalise
        e = -126 - ((x.to_bits() & 0x7f_ffff).leading_zeros() as i32 - 9) + 1;
        return e;
    }
    e - 126
}

/// v_div_scale_f32 (S0 the value to scale, S1 the denominator, S2 the numerator): the operand scaled
/// by 2^64 where the quotient would lose range, and whether v_div_fmas must undo a scale (VCC).
fn div_scale(s0: f32, den: f32, num: f32) -> (f32, bool) {
    let exp = |x: f32| ((x.to_bits() >> 23) & 0xff) as i32;
    let up = |x: f32| (x as f64 * 2f64.powi(64)) as f32;
    if num == 0.0 || den == 0.0 {
        (f32::NAN, false)
    } else if exp(num) - exp(den) >= 96 {
        (if s0 == den { up(s0) } else { s0 }, true)
    } else if den.is_subnormal() {
        (up(s0), false)
    } else if (num / den).is_subnormal() {
        (if s0 == num { up(s0) } else { s0 }, true)
    } else if exp(num) <= 23 {
        (up(s0), false)
    } else {
        (s0, false)
    }
}

/// v_div_fixup_f32: the quotient `q` of `n / d` with IEEE special cases restored.
fn div_fixup(q: f32, d: f32, n: f32) -> f32 {
    let sign = (d.to_bits() ^ n.to_bits()) & 0x8000_0000;
    let signed = |x: f32| f32::from_bits(x.to_bits() | sign);
    if n.is_nan() || d.is_nan() || (d == 0.0 && n == 0.0) || (d.is_infinite() && n.is_infinite()) {
        f32::NAN
    } else if d == 0.0 || n.is_infinite() {
        signed(f32::INFINITY)
    } else if d.is_infinite() || n == 0.0 {
        signed(0.0)
    } else {
        signed(q.abs())
    }
}

/// f32 to f16 rounding toward zero (v_cvt_pk_rtz_f16_f32).
fn rtz_f16(x: f32) -> u16 {
    let r = f16::from_f32(x);
    if (r.to_f32().abs() > x.abs() && r.is_finite()) || (r.is_infinite() && x.is_finite()) {
        f16::from_bits(r.to_bits() - 1).to_bits()
    } else {
        r.to_bits()
    }
}

/// A float format's predicates for gfx12's `*_num_*` min/max.
pub(super) trait NumFloat: Copy + PartialOrd {
    fn nan(self) -> bool;
    fn negative(self) -> bool;
    fn zero(self) -> bool;
    /// The value with its quiet bit set.
    fn quiet(self) -> Self;
}

macro_rules! num_float {
    ($t:ty, $quiet:expr) => {
        impl NumFloat for $t {
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn negative(self) -> bool {
                self.is_sign_negative()
            }
            fn zero(self) -> bool {
                self == <$t>::from_bits(0)
            }
            fn quiet(self) -> Self {
                <$t>::from_bits(self.to_bits() | $quiet)
            }
        }
    };
}
num_float!(f16, 0x200);
num_float!(f32, 0x40_0000);
num_float!(f64, 0x8_0000_0000_0000);

/// gfx12's minimumNumber (`V_MIN_NUM_*` in the RDNA4 ISA pseudocode, tinygrad 0.14.0
/// `runtime/autogen/amd/rdna4/str_pcode.py`): a NaN operand yields the other, two NaNs the first quieted, and -0 is
/// below +0. A signaling NaN is no different (the pseudocode only sets TRAPSTS.INVALID, which is not emulated).
pub(super) fn min_num<T: NumFloat>(a: T, b: T) -> T {
    match (a.nan(), b.nan()) {
        (true, true) => a.quiet(),
        (true, false) => b,
        (false, true) => a,
        _ if a < b || (a.zero() && b.zero() && a.negative() && !b.negative()) => a,
        _ => b,
    }
}

/// gfx12's maximumNumber (`V_MAX_NUM_*`, as [`min_num`]): +0 is above -0.
pub(super) fn max_num<T: NumFloat>(a: T, b: T) -> T {
    match (a.nan(), b.nan()) {
        (true, true) => a.quiet(),
        (true, false) => b,
        (false, true) => a,
        _ if a > b || (a.zero() && b.zero() && !a.negative() && b.negative()) => a,
        _ => b,
    }
}

/// `V_MED3_NUM_F32`/`V_MED3_NUM_F16` as the RDNA4 pseudocode writes it: a NaN operand gives the minimumNumber of all three; else the
/// maximumNumber of the two operands other than the first (in source order) that compares equal to the maximum, so
/// with both zeros present the sign of the result follows the operand order.
fn med3_num<T: NumFloat>(a: T, b: T, c: T) -> T {
    if a.nan() || b.nan() || c.nan() {
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
