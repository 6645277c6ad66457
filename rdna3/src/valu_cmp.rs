//! Vector compares (VOPC and their VOP3 forms, `v_cmpx` writing EXEC) and VOPD dual-issue pairs.

use super::decode::{operand as op, Enc, Inst};
use super::isa::Isa;
use super::valu::{max_num, min_num};
use super::wave::{Kind, Src, Wave, LANES};

const COMPARE: u16 = 0x8000;
const CMPX: u16 = 0x4000;
const CLASS: u16 = 16;
const FLOAT_CONDS: [&str; 16] =
    ["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "t"];
const TYPES: [&str; 9] = ["f16", "f32", "f64", "i16", "u16", "i32", "u32", "i64", "u64"];

/// A compare's executor code: flag, CMPX, type index << 8, condition.
pub(super) fn resolve(name: &str) -> u16 {
    let (x, rest) = if let Some(r) = name.strip_prefix("v_cmpx_") {
        (CMPX, r)
    } else if let Some(r) = name.strip_prefix("v_cmp_") {
        (0, r)
    } else {
        return 0;
    };
    let Some((cond, ty)) = rest.rsplit_once('_') else { return 0 };
    let Some(t) = TYPES.iter().position(|t| *t == ty) else { return 0 };
    let c = match cond {
        "class" => CLASS,
        "ne" => 5,
        c => match FLOAT_CONDS.iter().position(|f| *f == c) {
            Some(i) => i as u16,
            None => return 0,
        },
    };
    COMPARE | x | (t as u16) << 8 | c
}

pub(super) fn is_compare(sem: u16) -> bool {
    sem & COMPARE != 0
}

fn float_cond(c: u16, a: f64, b: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let o = a.partial_cmp(&b); // None: unordered (a NaN)
    match c {
        0 => false,
        1 => o == Some(Less),
        2 => o == Some(Equal),
        3 => matches!(o, Some(Less | Equal)),
        4 => o == Some(Greater),
        5 => matches!(o, Some(Less | Greater)),
        6 => matches!(o, Some(Greater | Equal)),
        7 => o.is_some(),
        8 => o.is_none(),
        9 => !matches!(o, Some(Greater | Equal)),
        10 => !matches!(o, Some(Less | Greater)),
        11 => o != Some(Greater),
        12 => !matches!(o, Some(Less | Equal)),
        13 => o != Some(Equal),
        14 => o != Some(Less),
        _ => true,
    }
}

fn int_cond<T: Ord>(c: u16, a: T, b: T) -> bool {
    match c {
        0 => false,
        1 => a < b,
        2 => a == b,
        3 => a <= b,
        4 => a > b,
        5 => a != b,
        6 => a >= b,
        _ => true,
    }
}

/// v_cmp_class: bit i of `mask` tests class i (sNaN, qNaN, -inf, -normal, -denormal, -0, +0, +denormal,
/// +normal, +inf).
fn class(x: f64, quiet_bit: bool, subnormal: bool, mask: u32) -> bool {
    let neg = x.is_sign_negative();
    let i = if x.is_nan() {
        if quiet_bit {
            1
        } else {
            0
        }
    } else if x.is_infinite() {
        if neg {
            2
        } else {
            9
        }
    } else if x == 0.0 {
        if neg {
            5
        } else {
            6
        }
    } else if subnormal {
        if neg {
            4
        } else {
            7
        }
    } else if neg {
        3
    } else {
        8
    };
    mask >> i & 1 != 0
}

pub(super) fn compare(w: &mut Wave, inst: &Inst) -> Result<(), String> {
    let sem = inst.sem;
    if inst.opsel != 0 || inst.clamp || inst.omod != 0 {
        return Err("OPSEL, clamp or output modifiers on a compare are not emulated".into());
    }
    let (cond, ty) = (sem & 31, (sem >> 8) & 15);
    let kind = [Kind::F16, Kind::F32, Kind::F64][ty.min(2) as usize];
    let kind = if ty <= 2 { kind } else { Kind::Int };
    let wide = matches!(ty, 2 | 7 | 8);
    let wb = cond != CLASS && wide;
    let a = w.src(inst.src[0], if wide { 2 } else { 1 }, inst.literal, kind)?;
    let b = w.src(inst.src[1], if wb { 2 } else { 1 }, inst.literal, if cond == CLASS { Kind::Int } else { kind })?;
    let (neg, abs) = if inst.enc == Enc::Vop3 { (inst.neg, inst.abs) } else { (0, 0) };
    let exec = w.exec();
    let flush = w.flush_f32;
    if w.flush_f16 && matches!(ty, 0 | 2) && cond != CLASS {
        return Err("flushing f16/f64 denormals (FLOAT_DENORM_MODE_16_64 = 0) is not emulated".into());
    }
    let mut mask = 0u32;
    for lane in 0..LANES {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let (x, y) = (w.get(a, lane, wide), w.get(b, lane, wb));
        let to_f = |v: u64, i: usize| -> f64 {
            let f = match ty {
                0 => half::f16::from_bits(v as u16).to_f64(),
                // Compares see f32 denormals as zero when the mode flushes them (v_cmp_class does not).
                1 if flush && cond != CLASS && f32::from_bits(v as u32).is_subnormal() => 0.0,
                1 => f32::from_bits(v as u32) as f64,
                _ => f64::from_bits(v),
            };
            let f = if abs >> i & 1 != 0 { f.abs() } else { f };
            if neg >> i & 1 != 0 {
                -f
            } else {
                f
            }
        };
        let r = if cond == CLASS {
            let quiet = match ty {
                0 => x & 0x200 != 0,
                1 => x & 0x40_0000 != 0,
                _ => x & 0x8_0000_0000_0000 != 0,
            };
            // Denormal in the operand's own format (an f32 or f16 denormal is a normal f64).
            let subnormal = match ty {
                0 => x & 0x7c00 == 0 && x & 0x3ff != 0,
                1 => f32::from_bits(x as u32).is_subnormal(),
                _ => f64::from_bits(x).is_subnormal(),
            };
            class(to_f(x, 0), quiet, subnormal, y as u32)
        } else {
            match ty {
                0..=2 => float_cond(cond, to_f(x, 0), to_f(y, 1)),
                3 => int_cond(cond, x as i16, y as i16),
                4 => int_cond(cond, x as u16, y as u16),
                5 => int_cond(cond, x as i32, y as i32),
                6 => int_cond(cond, x as u32, y as u32),
                7 => int_cond(cond, x as i64, y as i64),
                _ => int_cond(cond, x, y),
            }
        };
        mask |= (r as u32) << lane;
    }
    if sem & CMPX != 0 {
        w.s[op::EXEC_LO as usize] = mask;
        Ok(())
    } else {
        let dst = if inst.enc == Enc::Vopc { op::VCC_LO } else { inst.dst };
        w.write_scalar(dst, 1, mask as u64)
    }
}

/// Runs `f(a, b, c, lane)` over the active lanes into `out`.
#[inline]
fn half<F: Fn(u32, u32, u32, usize) -> u32>(w: &Wave, srcs: [Src; 3], exec: u32, out: &mut [u32; LANES], f: F) {
    for (lane, r) in out.iter_mut().enumerate() {
        if exec >> lane & 1 != 0 {
            let [a, b, c] = srcs.map(|s| w.get(s, lane, false) as u32);
            *r = f(a, b, c, lane);
        }
    }
}

/// Whether [`vopd_half`] runs VOPD opcode `op`.
pub(super) fn vopd_implemented(op: u16) -> bool {
    matches!(op, 0..=11 | 16..=18)
}

/// One VOPD half over all lanes.
fn vopd_half(w: &Wave, i: &Inst, exec: u32, out: &mut [u32; LANES]) -> Result<(), String> {
    let mut srcs = [Src::Uniform(0); 3];
    for (s, code) in srcs.iter_mut().zip(i.src) {
        *s = w.src(code, 1, i.literal, Kind::F32)?;
    }
    let flush = w.flush_f32;
    let f = move |x: u32| {
        let v = f32::from_bits(x);
        if flush && v.is_subnormal() {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    let put = move |v: f32| if flush && v.is_subnormal() { 0.0f32.copysign(v).to_bits() } else { v.to_bits() };
    match i.info.op {
        0..=2 => half(w, srcs, exec, out, |a, b, c, _| put(f(a).mul_add(f(b), f(c)))),
        3 => half(w, srcs, exec, out, |a, b, _, _| put(f(a) * f(b))),
        4 => half(w, srcs, exec, out, |a, b, _, _| put(f(a) + f(b))),
        5 => half(w, srcs, exec, out, |a, b, _, _| put(f(a) - f(b))),
        6 => half(w, srcs, exec, out, |a, b, _, _| put(f(b) - f(a))),
        7 => half(w, srcs, exec, out, |a, b, _, _| if f(a) == 0.0 || f(b) == 0.0 { 0 } else { put(f(a) * f(b)) }),
        8 => half(w, srcs, exec, out, |a, _, _, _| a),
        9 => half(w, srcs, exec, out, |a, b, c, l| if c >> l & 1 != 0 { b } else { a }),
        // gfx12's VOPD 10 and 11 are v_dual_max_num_f32/v_dual_min_num_f32.
        10 if i.isa == Isa::Gfx12 => half(w, srcs, exec, out, |a, b, _, _| put(max_num(f(a), f(b)))),
        11 if i.isa == Isa::Gfx12 => half(w, srcs, exec, out, |a, b, _, _| put(min_num(f(a), f(b)))),
        10 => half(w, srcs, exec, out, |a, b, _, _| put(f(a).max(f(b)))),
        11 => half(w, srcs, exec, out, |a, b, _, _| put(f(a).min(f(b)))),
        16 => half(w, srcs, exec, out, |a, b, _, _| a.wrapping_add(b)),
        17 => half(w, srcs, exec, out, |a, b, _, _| b << (a & 31)),
        18 => half(w, srcs, exec, out, |a, b, _, _| a & b),
        _ => return Err(format!("{} is not implemented by the emulator", i.info.name)),
    }
    Ok(())
}

/// VOPD: both halves read their sources before either writes.
pub(super) fn vopd(w: &mut Wave, inst: &Inst) -> Result<(), String> {
    let y = inst.y.as_deref().ok_or("a VOPD without its Y half")?;
    let exec = w.exec();
    let mut results = [[0u32; LANES]; 2];
    vopd_half(w, inst, exec, &mut results[0])?;
    vopd_half(w, y, exec, &mut results[1])?;
    for (half, i) in [inst, y].into_iter().enumerate() {
        let r = (i.dst - op::VGPR0) as usize;
        w.check_vgpr(r, 1)?;
        for (lane, &x) in results[half].iter().enumerate() {
            if exec >> lane & 1 != 0 {
                w.v[r * LANES + lane] = x;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_names_resolve_to_condition_type_and_cmpx() {
        assert_eq!(resolve("v_cmp_gt_u32"), COMPARE | 6 << 8 | 4);
        assert_eq!(resolve("v_cmpx_ne_i64"), COMPARE | CMPX | 7 << 8 | 5);
        assert_eq!(resolve("v_cmp_nlt_f32"), COMPARE | 1 << 8 | 14);
        assert_eq!(resolve("v_cmp_class_f16"), COMPARE | CLASS);
        assert_eq!(resolve("v_add_f32"), 0);
    }

    #[test]
    fn unordered_float_conditions_hold_for_nan() {
        let nan = f64::NAN;
        assert!(!float_cond(1, nan, 1.0) && !float_cond(5, nan, 1.0) && float_cond(8, nan, 1.0));
        assert!(float_cond(14, nan, 1.0) && float_cond(13, nan, nan) && !float_cond(7, 1.0, nan));
        assert!(class(-0.0, false, false, 1 << 5) && class(f64::INFINITY, false, false, 1 << 9));
        assert!(!class(1.0, false, false, 1 << 3) && class(1e-40, false, true, 1 << 7));
    }
}
