//! Vector ALU, continued: integer and bit operations (16-bit too), 64-bit shifts and multiply-adds, f64
//! add/mul/fma and conversions with f32, and the packed 16-bit VOP3P operations.

use half::f16;

use super::decode::{operand as op, Enc, Inst};
use super::valu::{lanes, max_num, min_num, V};
use super::wave::{Kind, Src, Wave, LANES};

fn carry_in(w: &Wave, inst: &Inst) -> Result<u32, String> {
    if inst.enc == Enc::Vop2 {
        Ok(w.vcc())
    } else {
        Ok(w.scalar(inst.src[2], 1, inst.literal, Kind::Int)? as u32)
    }
}

fn bfe(x: u32, off: u32, width: u32, signed: bool) -> u32 {
    let (off, width) = (off & 31, width & 31);
    if width == 0 {
        return 0;
    }
    // A signed field reaching past bit 31 reads sign bits there (S0 is shifted arithmetically).
    let v = if signed { ((x as i32) >> off) as u32 } else { x >> off };
    if signed {
        ((v << (32 - width)) as i32 >> (32 - width)) as u32
    } else if off + width < 32 {
        v & ((1 << width) - 1)
    } else {
        v
    }
}

fn med3<T: Ord + Copy>(a: T, b: T, c: T) -> T {
    a.max(b).min(a.min(b).max(c))
}

fn i24(x: u64) -> i64 {
    ((x as u32) << 8) as i32 as i64 >> 8
}

pub(super) fn exec(w: &mut Wave, inst: &Inst, s: V) -> Result<(), String> {
    use V::*;
    let u = |x: u64| x as u32;
    match s {
        AddNcU32 => lanes(w, inst, false, |a, b, _, _| u(a).wrapping_add(u(b)) as u64),
        SubNcU32 => lanes(w, inst, false, |a, b, _, _| u(a).wrapping_sub(u(b)) as u64),
        SubrevNcU32 => lanes(w, inst, false, |a, b, _, _| u(b).wrapping_sub(u(a)) as u64),
        AddNcI32 => lanes(w, inst, false, |a, b, _, _| u(a).wrapping_add(u(b)) as u64),
        SubNcI32 => lanes(w, inst, false, |a, b, _, _| u(a).wrapping_sub(u(b)) as u64),
        AddCoU32 => lanes(w, inst, true, |a, b, _, _| u(a) as u64 + u(b) as u64),
        SubCoU32 => lanes(w, inst, true, |a, b, _, _| sub_borrow(u(a), u(b), 0)),
        SubrevCoU32 => lanes(w, inst, true, |a, b, _, _| sub_borrow(u(b), u(a), 0)),
        AddCoCiU32 | SubCoCiU32 | SubrevCoCiU32 => {
            let ci = carry_in(w, inst)?;
            lanes(w, inst, true, move |a, b, _, l| {
                let c = ci >> l & 1;
                match s {
                    AddCoCiU32 => u(a) as u64 + u(b) as u64 + c as u64,
                    SubCoCiU32 => sub_borrow(u(a), u(b), c),
                    _ => sub_borrow(u(b), u(a), c),
                }
            })
        }
        MulLoU32 => lanes(w, inst, false, |a, b, _, _| u(a).wrapping_mul(u(b)) as u64),
        MulHiU32 => lanes(w, inst, false, |a, b, _, _| ((a & 0xffff_ffff) * (b & 0xffff_ffff)) >> 32),
        MulHiI32 => lanes(w, inst, false, |a, b, _, _| ((u(a) as i32 as i64 * u(b) as i32 as i64) >> 32) as u32 as u64),
        MulU32U24 => lanes(w, inst, false, |a, b, _, _| ((a & 0xff_ffff) * (b & 0xff_ffff)) as u32 as u64),
        MulI32I24 => lanes(w, inst, false, |a, b, _, _| (i24(a) * i24(b)) as u32 as u64),
        MulHiU32U24 => lanes(w, inst, false, |a, b, _, _| ((a & 0xff_ffff) * (b & 0xff_ffff)) >> 32),
        MadU32U24 => lanes(w, inst, false, |a, b, c, _| ((a & 0xff_ffff) * (b & 0xff_ffff) + c) as u32 as u64),
        MadI32I24 => lanes(w, inst, false, |a, b, c, _| (i24(a) * i24(b) + u(c) as i32 as i64) as u32 as u64),
        MadU64U32 | MadI64I32 => {
            // D.u64 = S0 * S1 + S2.u64; the carry-out (bit 64) goes to SDST.
            if inst.clamp || inst.neg != 0 || inst.omod != 0 {
                return Err("clamp or modifiers on a 64-bit multiply-add are not emulated".into());
            }
            let (srcs, exec) = (resolve3(w, inst)?, w.exec());
            let mut out = [0u64; LANES];
            let mut carry = 0u32;
            for (lane, o) in out.iter_mut().enumerate() {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let (a, b, c) = (w.get(srcs[0], lane, false), w.get(srcs[1], lane, false), w.get(srcs[2], lane, true));
                let r: u128 = if s == MadU64U32 {
                    (a as u32 as u128) * (b as u32 as u128) + c as u128
                } else {
                    ((a as u32 as i32 as i128) * (b as u32 as i32 as i128) + c as i64 as i128) as u128
                };
                *o = r as u64;
                carry |= (((r >> 64) & 1) as u32) << lane;
            }
            store64(w, inst, exec, &out)?;
            w.write_scalar(inst.sdst, 1, carry as u64)
        }
        LshlrevB32 => lanes(w, inst, false, |a, b, _, _| (u(b) << (a & 31)) as u64),
        LshrrevB32 => lanes(w, inst, false, |a, b, _, _| (u(b) >> (a & 31)) as u64),
        AshrrevI32 => lanes(w, inst, false, |a, b, _, _| ((u(b) as i32) >> (a & 31)) as u32 as u64),
        LshlrevB64 => lanes(w, inst, false, |a, b, _, _| b << (a & 63)),
        LshrrevB64 => lanes(w, inst, false, |a, b, _, _| b >> (a & 63)),
        AshrrevI64 => lanes(w, inst, false, |a, b, _, _| ((b as i64) >> (a & 63)) as u64),
        AndB32 => lanes(w, inst, false, |a, b, _, _| (u(a) & u(b)) as u64),
        OrB32 => lanes(w, inst, false, |a, b, _, _| (u(a) | u(b)) as u64),
        XorB32 => lanes(w, inst, false, |a, b, _, _| (u(a) ^ u(b)) as u64),
        XnorB32 => lanes(w, inst, false, |a, b, _, _| !(u(a) ^ u(b)) as u64),
        NotB32 => lanes(w, inst, false, |a, _, _, _| !u(a) as u64),
        AndOrB32 => lanes(w, inst, false, |a, b, c, _| (u(a) & u(b) | u(c)) as u64),
        Or3B32 => lanes(w, inst, false, |a, b, c, _| (u(a) | u(b) | u(c)) as u64),
        Xor3B32 => lanes(w, inst, false, |a, b, c, _| (u(a) ^ u(b) ^ u(c)) as u64),
        LshlAddU32 => lanes(w, inst, false, |a, b, c, _| (u(a) << (b & 31)).wrapping_add(u(c)) as u64),
        AddLshlU32 => lanes(w, inst, false, |a, b, c, _| (u(a).wrapping_add(u(b)) << (c & 31)) as u64),
        LshlOrB32 => lanes(w, inst, false, |a, b, c, _| ((u(a) << (b & 31)) | u(c)) as u64),
        Add3U32 => lanes(w, inst, false, |a, b, c, _| u(a).wrapping_add(u(b)).wrapping_add(u(c)) as u64),
        XadU32 => lanes(w, inst, false, |a, b, c, _| (u(a) ^ u(b)).wrapping_add(u(c)) as u64),
        BfeU32 => lanes(w, inst, false, |a, b, c, _| bfe(u(a), u(b), u(c), false) as u64),
        BfeI32 => lanes(w, inst, false, |a, b, c, _| bfe(u(a), u(b), u(c), true) as u64),
        BfiB32 => lanes(w, inst, false, |a, b, c, _| (u(a) & u(b) | !u(a) & u(c)) as u64),
        BfmB32 => lanes(w, inst, false, |a, b, _, _| ((((1u64 << (a & 31)) - 1) as u32) << (b & 31)) as u64),
        AlignbitB32 => lanes(w, inst, false, |a, b, c, _| (((a << 32 | b & 0xffff_ffff) >> (c & 31)) as u32) as u64),
        AlignbyteB32 => {
            lanes(w, inst, false, |a, b, c, _| (((a << 32 | b & 0xffff_ffff) >> (8 * (c & 3))) as u32) as u64)
        }
        PermB32 => lanes(w, inst, false, |a, b, c, _| perm(u(a), u(b), u(c)) as u64),
        BfrevB32 => lanes(w, inst, false, |a, _, _, _| u(a).reverse_bits() as u64),
        ClzU32 => lanes(w, inst, false, |a, _, _, _| if u(a) == 0 { u32::MAX } else { u(a).leading_zeros() } as u64),
        CtzB32 => lanes(w, inst, false, |a, _, _, _| if u(a) == 0 { u32::MAX } else { u(a).trailing_zeros() } as u64),
        BcntU32 => lanes(w, inst, false, |a, b, _, _| (u(a).count_ones() + u(b)) as u64),
        MbcntLo => lanes(w, inst, false, |a, b, _, l| ((u(a) & ((1u64 << l) - 1) as u32).count_ones() + u(b)) as u64),
        MbcntHi => lanes(w, inst, false, |_, b, _, _| u(b) as u64), // wave32: no lanes above 31
        MaxI32 => lanes(w, inst, false, |a, b, _, _| (u(a) as i32).max(u(b) as i32) as u32 as u64),
        MinI32 => lanes(w, inst, false, |a, b, _, _| (u(a) as i32).min(u(b) as i32) as u32 as u64),
        MaxU32 => lanes(w, inst, false, |a, b, _, _| u(a).max(u(b)) as u64),
        MinU32 => lanes(w, inst, false, |a, b, _, _| u(a).min(u(b)) as u64),
        Max3I32 => lanes(w, inst, false, |a, b, c, _| (u(a) as i32).max(u(b) as i32).max(u(c) as i32) as u32 as u64),
        Min3I32 => lanes(w, inst, false, |a, b, c, _| (u(a) as i32).min(u(b) as i32).min(u(c) as i32) as u32 as u64),
        Max3U32 => lanes(w, inst, false, |a, b, c, _| u(a).max(u(b)).max(u(c)) as u64),
        Min3U32 => lanes(w, inst, false, |a, b, c, _| u(a).min(u(b)).min(u(c)) as u64),
        MaxminI32 => lanes(w, inst, false, |a, b, c, _| (u(a) as i32).max(u(b) as i32).min(u(c) as i32) as u32 as u64),
        MinmaxI32 => lanes(w, inst, false, |a, b, c, _| (u(a) as i32).min(u(b) as i32).max(u(c) as i32) as u32 as u64),
        MaxminU32 => lanes(w, inst, false, |a, b, c, _| u(a).max(u(b)).min(u(c)) as u64),
        MinmaxU32 => lanes(w, inst, false, |a, b, c, _| u(a).min(u(b)).max(u(c)) as u64),
        Med3I32 => lanes(w, inst, false, |a, b, c, _| med3(u(a) as i32, u(b) as i32, u(c) as i32) as u32 as u64),
        Med3U32 => lanes(w, inst, false, |a, b, c, _| med3(u(a), u(b), u(c)) as u64),
        CvtF64F32 => lanes(w, inst, false, |a, _, _, _| (f32::from_bits(u(a)) as f64).to_bits()),
        CvtF32F64 => lanes(w, inst, false, |a, _, _, _| (f64::from_bits(a) as f32).to_bits() as u64),
        AddF64 => lanes(w, inst, false, |a, b, _, _| (f64::from_bits(a) + f64::from_bits(b)).to_bits()),
        MulF64 => lanes(w, inst, false, |a, b, _, _| (f64::from_bits(a) * f64::from_bits(b)).to_bits()),
        FmaF64 => lanes(w, inst, false, |a, b, c, _| {
            f64::from_bits(a).mul_add(f64::from_bits(b), f64::from_bits(c)).to_bits()
        }),
        MadU16 => lanes(w, inst, false, |a, b, c, _| (a as u16).wrapping_mul(b as u16).wrapping_add(c as u16) as u64),
        AddNcU16 => lanes(w, inst, false, |a, b, _, _| (a as u16).wrapping_add(b as u16) as u64),
        SubNcU16 => lanes(w, inst, false, |a, b, _, _| (a as u16).wrapping_sub(b as u16) as u64),
        MulLoU16 => lanes(w, inst, false, |a, b, _, _| (a as u16).wrapping_mul(b as u16) as u64),
        LshlrevB16 => lanes(w, inst, false, |a, b, _, _| ((b as u16) << (a & 15)) as u64),
        LshrrevB16 => lanes(w, inst, false, |a, b, _, _| ((b as u16) >> (a & 15)) as u64),
        PkAddF16 | PkMulF16 | PkFmaF16 | PkMaxF16 | PkMinF16 | PkMaxNumF16 | PkMinNumF16 | PkAddU16 | PkMulLoU16 => {
            packed(w, inst, s)
        }
        FmaMixF32 | FmaMixloF16 | FmaMixhiF16 => mix(w, inst, s),
        MulHiI32I24 => lanes(w, inst, false, |a, b, _, _| ((i24(a) * i24(b)) >> 32) as u32 as u64),
        // The count of leading bits equal to the sign bit, the sign bit included; -1 for 0 and -1.
        ClsI32 => lanes(w, inst, false, |a, _, _, _| {
            let x = u(a) ^ ((u(a) as i32) >> 31) as u32;
            (if x == 0 { u32::MAX } else { x.leading_zeros() }) as u64
        }),
        MaxI16 | MinI16 | Max3I16 | Min3I16 => lanes(w, inst, false, move |a, b, c, _| {
            let (a, b, c) = (a as i16, b as i16, c as i16);
            (match s {
                MaxI16 => a.max(b),
                MinI16 => a.min(b),
                Max3I16 => a.max(b).max(c),
                _ => a.min(b).min(c),
            }) as u16 as u64
        }),
        MaxU16 | MinU16 | Max3U16 | Min3U16 => lanes(w, inst, false, move |a, b, c, _| {
            let (a, b, c) = (a as u16, b as u16, c as u16);
            (match s {
                MaxU16 => a.max(b),
                MinU16 => a.min(b),
                Max3U16 => a.max(b).max(c),
                _ => a.min(b).min(c),
            }) as u64
        }),
        AshrrevI16 => lanes(w, inst, false, |a, b, _, _| ((b as u16 as i16) >> (a & 15)) as u16 as u64),
        _ => super::valu_f64::exec(w, inst, s),
    }
}

/// a - b - borrow, with the borrow-out in bit 32.
fn sub_borrow(a: u32, b: u32, borrow: u32) -> u64 {
    let r = (a as u64).wrapping_sub(b as u64).wrapping_sub(borrow as u64);
    (r & 0xffff_ffff) | (((b as u64 + borrow as u64) > a as u64) as u64) << 32
}

/// v_perm_b32: each selector byte of `sel` picks a byte of {a, b} (b is bytes 0-3) or a constant.
fn perm(a: u32, b: u32, sel: u32) -> u32 {
    let bytes = (a as u64) << 32 | b as u64;
    let mut out = 0u32;
    for i in 0..4 {
        let s = (sel >> (8 * i)) & 0xff;
        let byte = match s {
            0..=7 => (bytes >> (8 * s)) as u32 & 0xff,
            8..=11 => {
                let src = (bytes >> (16 * (s - 8) + 8)) as u32 & 0x80;
                if src != 0 {
                    0xff
                } else {
                    0
                }
            }
            12 => 0,
            _ => 0xff,
        };
        out |= byte << (8 * i);
    }
    out
}

fn resolve3(w: &Wave, inst: &Inst) -> Result<[Src; 3], String> {
    let mut srcs = [Src::Uniform(0); 3];
    for (i, s) in srcs.iter_mut().enumerate() {
        let width = inst.info.w[1 + i];
        if width != 0 {
            *s = w.src(inst.src[i], width, inst.literal, Kind::Int)?;
        }
    }
    Ok(srcs)
}

fn store64(w: &mut Wave, inst: &Inst, exec: u32, out: &[u64; LANES]) -> Result<(), String> {
    let r = (inst.dst - op::VGPR0) as usize;
    w.check_vgpr(r, 2)?;
    for (lane, x) in out.iter().enumerate() {
        if exec >> lane & 1 != 0 {
            w.v[r * LANES + lane] = *x as u32;
            w.v[(r + 1) * LANES + lane] = (*x >> 32) as u32;
        }
    }
    Ok(())
}

/// VOP3P: two 16-bit lanes per register; OPSEL/OPSEL_HI pick each source half, NEG/NEG_HI negate.
fn packed(w: &mut Wave, inst: &Inst, s: V) -> Result<(), String> {
    use V::*;
    if inst.clamp {
        return Err("clamp on packed math is not emulated".into());
    }
    if w.flush_f16 {
        return Err("flushing f16 denormals (FLOAT_DENORM_MODE_16_64 = 0) is not emulated".into());
    }
    let mut srcs = [Src::Uniform(0); 3];
    let n = inst.info.w[1..].iter().filter(|x| **x != 0).count();
    for (i, src) in srcs.iter_mut().enumerate().take(n) {
        *src = match w.src(inst.src[i], 1, inst.literal, Kind::F16)? {
            // An inline constant feeds both halves.
            Src::Uniform(c) if (128..=248).contains(&inst.src[i]) => Src::Uniform((c & 0xffff) * 0x1_0001),
            s => s,
        };
    }
    let float = matches!(s, PkAddF16 | PkMulF16 | PkFmaF16 | PkMaxF16 | PkMinF16 | PkMaxNumF16 | PkMinNumF16);
    let exec = w.exec();
    let r = (inst.dst - op::VGPR0) as usize;
    w.check_vgpr(r, 1)?;
    for lane in 0..LANES {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut halves = [[0u16; 3]; 2];
        for i in 0..n {
            let raw = w.get(srcs[i], lane, false) as u32;
            for (half, (sel, neg)) in [(inst.opsel, inst.neg), (inst.opsel_hi, inst.neg_hi)].into_iter().enumerate() {
                let mut x = (raw >> (16 * (sel >> i & 1) as u32)) as u16;
                if float && neg >> i & 1 != 0 {
                    x ^= 0x8000;
                }
                halves[half][i] = x;
            }
        }
        let mut out = 0u32;
        for (half, [a, b, c]) in halves.into_iter().enumerate() {
            let f = |x: u16| f16::from_bits(x).to_f32();
            let r = match s {
                PkAddF16 => f16::from_f32(f(a) + f(b)).to_bits(),
                PkMulF16 => f16::from_f32(f(a) * f(b)).to_bits(),
                PkFmaF16 => f16::from_f64(f(a) as f64 * f(b) as f64 + f(c) as f64).to_bits(),
                PkMaxF16 => f16::from_f32(f(a).max(f(b))).to_bits(),
                PkMinF16 => f16::from_f32(f(a).min(f(b))).to_bits(),
                PkMaxNumF16 => max_num(f16::from_bits(a), f16::from_bits(b)).to_bits(),
                PkMinNumF16 => min_num(f16::from_bits(a), f16::from_bits(b)).to_bits(),
                PkAddU16 => a.wrapping_add(b),
                _ => a.wrapping_mul(b),
            };
            out |= (r as u32) << (16 * half);
        }
        w.v[r * LANES + lane] = out;
    }
    Ok(())
}

/// v_fma_mix*: an f32 fma whose sources are f32, or f16 (OPSEL_HI set) taken from the half OPSEL picks;
/// NEG negates and NEG_HI takes the absolute value. `mixlo`/`mixhi` round the result to f16 into one
/// half of the destination.
fn mix(w: &mut Wave, inst: &Inst, s: V) -> Result<(), String> {
    if w.flush_f16 || w.flush_f32 {
        return Err("denormal flushing in v_fma_mix* is not emulated".into());
    }
    let mut srcs = [Src::Uniform(0); 3];
    for (i, src) in srcs.iter_mut().enumerate() {
        let kind = if inst.opsel_hi >> i & 1 != 0 { Kind::F16 } else { Kind::F32 };
        *src = w.src(inst.src[i], 1, inst.literal, kind)?;
    }
    let exec = w.exec();
    let r = (inst.dst - op::VGPR0) as usize;
    w.check_vgpr(r, 1)?;
    for lane in 0..LANES {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut v = [0f32; 3];
        for (i, x) in v.iter_mut().enumerate() {
            let raw = w.get(srcs[i], lane, false) as u32;
            let mut f = if inst.opsel_hi >> i & 1 != 0 {
                f16::from_bits((raw >> (16 * (inst.opsel >> i & 1) as u32)) as u16).to_f32()
            } else {
                f32::from_bits(raw)
            };
            if inst.neg_hi >> i & 1 != 0 {
                f = f.abs();
            }
            if inst.neg >> i & 1 != 0 {
                f = -f;
            }
            *x = f;
        }
        let mut d = v[0].mul_add(v[1], v[2]);
        if inst.clamp {
            d = d.clamp(0.0, 1.0);
        }
        let slot = &mut w.v[r * LANES + lane];
        *slot = match s {
            V::FmaMixF32 => d.to_bits(),
            V::FmaMixloF16 => *slot & 0xffff_0000 | f16::from_f32(d).to_bits() as u32,
            _ => *slot & 0xffff | (f16::from_f32(d).to_bits() as u32) << 16,
        };
    }
    Ok(())
}
