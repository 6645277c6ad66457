//! Vector ALU, f64: rounding, conversions, min/max, ldexp/frexp, the reciprocal family and the
//! division helpers (`v_div_scale/fmas/fixup_f64`) clang expands `double` division into.
//!
//! `v_rcp_f64`, `v_rsq_f64` and `v_sqrt_f64` are computed exactly (the ISA documents them to about
//! 1 ULP; clang refines them with fma iterations, which converge to the same result either way).
//! f64 denormals are kept (FLOAT_DENORM_MODE_16_64 = 3, what clang sets); flushing is refused by
//! [`lanes`].

use std::cell::Cell;

use super::decode::Inst;
use super::valu::{lanes, max_num, min_num, V};
use super::wave::Wave;

fn f(x: u64) -> f64 {
    f64::from_bits(x)
}

fn put(x: f64) -> u64 {
    x.to_bits()
}

/// 2^e, exactly, for `e` in -1074..=1023.
fn pow2(e: i32) -> f64 {
    debug_assert!((-1074..=1023).contains(&e));
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1 << (e + 1074))
    }
}

/// `(m, e)` with `x = m · 2^e`, `|m|` in [0.5, 1), for finite non-zero `x` (denormals too).
fn frexp(x: f64) -> (f64, i32) {
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32;
    if e == 0 {
        // A denormal: scale it into the normal range first.
        let (m, e) = frexp(x * pow2(64));
        return (m, e - 64);
    }
    (f64::from_bits(x.to_bits() & !(0x7ff << 52) | 1022 << 52), e - 1022)
}

/// `x · 2^n` with one rounding (to a denormal or to zero where the result is that small).
pub(super) fn ldexp(x: f64, n: i64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let (m, e) = frexp(x);
    let ne = e as i64 + n.clamp(-4000, 4000);
    if ne > 1024 {
        f64::INFINITY.copysign(x)
    } else if ne > -1074 {
        (2.0 * m) * pow2((ne - 1) as i32)
    } else if ne == -1074 {
        m * pow2(-1074)
    } else {
        0.0f64.copysign(x) // below half the smallest denormal
    }
}

fn exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32
}

/// v_div_scale_f64 (S0 the value to scale, S1 the denominator, S2 the numerator): the operand scaled
/// by 2^±128 where the quotient would lose range, and whether v_div_fmas must undo a scale (VCC).
/// AMD's RDNA3 ISA, V_DIV_SCALE_F64.
fn div_scale(s0: f64, den: f64, num: f64) -> (f64, bool) {
    let up = |x: f64| ldexp(x, 128);
    if num == 0.0 || den == 0.0 {
        (f64::NAN, false)
    } else if exponent(num) - exponent(den) >= 768 {
        (if s0 == den { up(s0) } else { s0 }, true)
    } else if den.is_subnormal() {
        (up(s0), false)
    } else if (1.0 / den).is_subnormal() && (num / den).is_normal() {
        (if s0 == den { up(s0) } else { s0 }, true)
    } else if (1.0 / den).is_subnormal() {
        (ldexp(s0, -128), false)
    } else if (num / den).is_subnormal() {
        (if s0 == num { up(s0) } else { s0 }, true)
    } else if exponent(num) <= 53 {
        (up(s0), false)
    } else {
        (s0, false)
    }
}

/// The power of two v_div_fmas applies where v_div_scale set VCC: up when the quotient estimate `q` is at
/// least 2 (its denominator was scaled up), down otherwise (its numerator was). The ISA's pseudocode
/// writes a fixed 2^64 here; tinygrad's RDNA3 emulator corrects it to this rule
/// (`extra/assembly/amd`, the V_DIV_FMAS pseudocode fixes).
pub(super) fn fmas_scale(q: f64, k: i64) -> i64 {
    // exponent(q) > bias, the NaN exponent included.
    if q.is_nan() || q.abs() >= 2.0 {
        k
    } else {
        -k
    }
}

/// v_div_fixup_f64: the quotient `q` of `n / d` with IEEE special cases restored.
fn div_fixup(q: f64, d: f64, n: f64) -> f64 {
    let sign = (d.to_bits() ^ n.to_bits()) & (1 << 63);
    let signed = |x: f64| f64::from_bits(x.to_bits() | sign);
    if n.is_nan() || d.is_nan() || (d == 0.0 && n == 0.0) || (d.is_infinite() && n.is_infinite()) {
        f64::NAN
    } else if d == 0.0 || n.is_infinite() {
        signed(f64::INFINITY)
    } else if d.is_infinite() || n == 0.0 {
        signed(0.0)
    } else {
        signed(q.abs())
    }
}

pub(super) fn exec(w: &mut Wave, inst: &Inst, s: V) -> Result<(), String> {
    use V::*;
    match s {
        TruncF64 => lanes(w, inst, false, |a, _, _, _| put(f(a).trunc())),
        FloorF64 => lanes(w, inst, false, |a, _, _, _| put(f(a).floor())),
        CeilF64 => lanes(w, inst, false, |a, _, _, _| put(f(a).ceil())),
        RndneF64 => lanes(w, inst, false, |a, _, _, _| put(f(a).round_ties_even())),
        FractF64 => lanes(w, inst, false, |a, _, _, _| {
            let x = f(a);
            put(if x.is_infinite() { f64::NAN } else { (x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff)) })
        }),
        MaxF64 => lanes(w, inst, false, |a, b, _, _| put(f(a).max(f(b)))),
        MinF64 => lanes(w, inst, false, |a, b, _, _| put(f(a).min(f(b)))),
        MaxNumF64 => lanes(w, inst, false, |a, b, _, _| put(max_num(f(a), f(b)))),
        MinNumF64 => lanes(w, inst, false, |a, b, _, _| put(min_num(f(a), f(b)))),
        LdexpF64 => lanes(w, inst, false, |a, b, _, _| put(ldexp(f(a), b as u32 as i32 as i64))),
        FrexpMantF64 => lanes(w, inst, false, |a, _, _, _| {
            let x = f(a);
            put(if x == 0.0 || !x.is_finite() { x } else { frexp(x).0 })
        }),
        FrexpExpF64 => lanes(w, inst, false, |a, _, _, _| {
            let x = f(a);
            if x == 0.0 || !x.is_finite() {
                0
            } else {
                frexp(x).1 as u32 as u64
            }
        }),
        RcpF64 => lanes(w, inst, false, |a, _, _, _| put(1.0 / f(a))),
        RsqF64 => lanes(w, inst, false, |a, _, _, _| put(1.0 / f(a).sqrt())),
        SqrtF64 => lanes(w, inst, false, |a, _, _, _| put(f(a).sqrt())),
        CvtF64I32 => lanes(w, inst, false, |a, _, _, _| put(a as u32 as i32 as f64)),
        CvtF64U32 => lanes(w, inst, false, |a, _, _, _| put(a as u32 as f64)),
        // Saturating, NaN to 0: as Rust's `as`.
        CvtI32F64 => lanes(w, inst, false, |a, _, _, _| f(a) as i32 as u32 as u64),
        CvtU32F64 => lanes(w, inst, false, |a, _, _, _| f(a) as u32 as u64),
        DivScaleF64 => {
            // The carry-out is a lane mask beside the 64-bit result, gathered while the lanes run.
            let vcc = Cell::new(0u32);
            lanes(w, inst, false, |a, b, c, l| {
                let (d, scaled) = div_scale(f(a), f(b), f(c));
                vcc.set(vcc.get() | (scaled as u32) << l);
                put(d)
            })?;
            w.write_scalar(inst.sdst, 1, vcc.get() as u64)
        }
        DivFmasF64 => {
            let vcc = w.vcc();
            lanes(w, inst, false, move |a, b, c, l| {
                let r = f(a).mul_add(f(b), f(c));
                put(if vcc >> l & 1 != 0 { ldexp(r, fmas_scale(f(c), 128)) } else { r })
            })
        }
        DivFixupF64 => lanes(w, inst, false, |a, b, c, _| put(div_fixup(f(a), f(b), f(c)))),
        _ => Err("not implemented by the emulator".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldexp_rounds_once_into_denormals() {
        assert_eq!(ldexp(1.5, 3), 12.0);
        assert_eq!(ldexp(1.0, -1074), f64::from_bits(1));
        assert_eq!(ldexp(1.0, -1075), 0.0); // a tie: to even
        assert_eq!(ldexp(1.5, -1075), f64::from_bits(1));
        assert_eq!(ldexp(3.0, -1075), f64::from_bits(2)); // 1.5 ulp: a tie, to even
        assert_eq!(ldexp(f64::MAX, 1), f64::INFINITY);
        assert_eq!(ldexp(f64::from_bits(1), 1074), 1.0);
        assert_eq!(ldexp(-1.0, -5000), -0.0);
        assert_eq!(ldexp(f64::from_bits(3), -1), f64::from_bits(2)); // 1.5 ulp: to even
    }

    #[test]
    fn frexp_of_denormals() {
        assert_eq!(frexp(1.0), (0.5, 1));
        assert_eq!(frexp(0.75), (0.75, 0));
        assert_eq!(frexp(f64::from_bits(1)), (0.5, -1073));
        assert_eq!(frexp(-24.0), (-0.75, 5));
    }

    #[test]
    fn div_scale_and_fixup() {
        assert_eq!(div_scale(3.0, 3.0, 1e200), (3.0, false));
        assert!(div_scale(3.0, 3.0, 1e300).1); // a quotient past 2^768: scaled, VCC set
        assert_eq!(div_scale(2.0, 2.0, 1e-300).0, ldexp(2.0, 128)); // a tiny numerator: scaled up
        assert!(div_fixup(0.5, 0.0, 1.0).is_infinite());
        assert_eq!(div_fixup(0.5, -2.0, 1.0), -0.5);
        assert_eq!((fmas_scale(2.0, 128), fmas_scale(-1.99, 128)), (128, -128));
    }
}
