//! VALU and SALU opcodes as table rows: the operand types, the encodings to emit (`_e32`/`_e64`, or
//! the VOP3-only/scalar form), and the result computed by Rust from the raw lane values.

/// An operand or result type, which also names the input array a source reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum T {
    /// f32 bits (specials and random values).
    F,
    /// Random 32-bit integers.
    I,
    /// f64 bits.
    D,
    /// f16 bits in the low half, random bits above.
    H,
    /// Small signed integers (exponents).
    K,
    /// Scalar (uniform) 32-bit integers: one per workgroup.
    S,
    /// Scalar 64-bit integers.
    S64,
    /// Results: 32 bits, 64 bits, the low 16 bits; floats compare equal when both are NaN.
    B32,
    B64,
    B16,
    F32,
    F64,
    F16,
    /// Two f16 halves.
    PkF16,
}

/// One opcode: name, forms to emit, result type, sources, the operand text (`None`: `%0, %1, ...`)
/// and Rust's result.
pub struct Alu {
    pub name: &'static str,
    pub forms: &'static [&'static str],
    pub dst: T,
    pub srcs: &'static [T],
    pub operands: Option<&'static str>,
    pub reference: fn([u64; 3]) -> u64,
}

const E32_E64: &[&str] = &["_e32", "_e64"];
const PLAIN: &[&str] = &[""];

fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
fn fb(x: f32) -> u64 {
    x.to_bits() as u64
}
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
fn db(x: f64) -> u64 {
    x.to_bits()
}
fn h(x: u64) -> f32 {
    half::f16::from_bits(x as u16).to_f32()
}
fn hb(x: f32) -> u64 {
    half::f16::from_f32(x).to_bits() as u64
}
fn u(x: u64) -> u32 {
    x as u32
}
fn i(x: u64) -> i32 {
    x as u32 as i32
}
fn i24(x: u64) -> i64 {
    ((x as u32) << 8) as i32 as i64 >> 8
}
fn med<T: PartialOrd + Copy>(a: T, b: T, c: T) -> T {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if c < lo {
        lo
    } else if c > hi {
        hi
    } else {
        c
    }
}
fn fract32(x: f32) -> f32 {
    if x.is_infinite() {
        f32::NAN
    } else {
        (x - x.floor()).min(1.0 - f32::EPSILON / 2.0)
    }
}
fn fract64(x: f64) -> f64 {
    if x.is_infinite() {
        f64::NAN
    } else {
        (x - x.floor()).min(1.0 - f64::EPSILON / 2.0)
    }
}
/// f32 to f16 rounding toward zero: the nearest f16, stepped back toward zero when it rounded away.
fn rtz(x: f32) -> u16 {
    let r = half::f16::from_f32(x);
    if !x.is_finite() || r.is_finite() && r.to_f32().abs() <= x.abs() {
        r.to_bits()
    } else {
        r.to_bits() - 1
    }
}
/// frexp for f64 through the exponent field (denormals scaled by 2^64 first).
fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    if x.is_subnormal() {
        let (m, e) = frexp(x * 18446744073709551616.0);
        return (m, e - 64);
    }
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1022;
    (f64::from_bits(x.to_bits() & !(0x7ff << 52) | 1022 << 52), e)
}
/// v_div_fixup_f64: the quotient estimate `q` of `n / d` with IEEE's special cases.
fn div_fixup(q: f64, d: f64, n: f64) -> f64 {
    let negative = d.is_sign_negative() != n.is_sign_negative();
    let sign = |x: f64| if negative { -x } else { x };
    if d.is_nan() || n.is_nan() || d == 0.0 && n == 0.0 || d.is_infinite() && n.is_infinite() {
        f64::NAN
    } else if d == 0.0 || n.is_infinite() {
        sign(f64::INFINITY)
    } else if d.is_infinite() || n == 0.0 {
        sign(0.0)
    } else {
        sign(q.abs())
    }
}

/// Two 16-bit lanes of `a` and `b` combined by `op`.
fn pk(a: u64, b: u64, op: fn(u16, u16) -> u16) -> u64 {
    (op(a as u16, b as u16) as u32 | (op((a >> 16) as u16, (b >> 16) as u16) as u32) << 16) as u64
}
/// [`pk`] on f16 halves (computed in f32, rounded once to f16).
fn pkh(a: u64, b: u64, op: fn(f32, f32) -> f32) -> u64 {
    let half = |x: u64, y: u64| hb(op(h(x), h(y)));
    (half(a, b) | half(a >> 16, b >> 16) << 16) & 0xffff_ffff
}
fn perm(a: u32, b: u32, sel: u32) -> u32 {
    let bytes = (a as u64) << 32 | b as u64;
    (0..4).fold(0, |out, k| {
        let s = (sel >> (8 * k)) & 0xff;
        let byte = match s {
            0..=7 => (bytes >> (8 * s)) as u32 & 0xff,
            8..=11 => 0xff * ((bytes >> (16 * (s - 8) + 15)) as u32 & 1),
            12 => 0,
            _ => 0xff,
        };
        out | byte << (8 * k)
    })
}

macro_rules! alu {
    ($name:literal, $forms:expr, $dst:ident, [$($s:ident),*], |$a:ident, $b:ident, $c:ident| $body:expr) => {
        Alu { name: $name, forms: $forms, dst: T::$dst, srcs: &[$(T::$s),*], operands: None,
              reference: |[$a, $b, $c]: [u64; 3]| { let _ = (&$a, &$b, &$c); $body } }
    };
    ($name:literal, $forms:expr, $dst:ident, [$($s:ident),*], $ops:expr, |$a:ident, $b:ident, $c:ident| $body:expr) => {
        Alu { name: $name, forms: $forms, dst: T::$dst, srcs: &[$(T::$s),*], operands: Some($ops),
              reference: |[$a, $b, $c]: [u64; 3]| { let _ = (&$a, &$b, &$c); $body } }
    };
}

/// Vector opcodes.
pub fn valu() -> Vec<Alu> {
    vec![
        alu!("v_subrev_f32", E32_E64, F32, [F, F], |a, b, c| fb(f(b) - f(a))),
        alu!("v_fract_f32", E32_E64, F32, [F], |a, b, c| fb(fract32(f(a)))),
        alu!("v_ceil_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).ceil())),
        alu!("v_cvt_nearest_i32_f32", E32_E64, B32, [F], |a, b, c| (f(a) + 0.5).floor() as i32 as u32 as u64),
        alu!("v_cvt_floor_i32_f32", E32_E64, B32, [F], |a, b, c| f(a).floor() as i32 as u32 as u64),
        alu!("v_cvt_f32_ubyte1", E32_E64, F32, [I], |a, b, c| fb((u(a) >> 8 & 0xff) as f32)),
        alu!("v_cvt_f32_ubyte2", E32_E64, F32, [I], |a, b, c| fb((u(a) >> 16 & 0xff) as f32)),
        alu!("v_cvt_f32_ubyte3", E32_E64, F32, [I], |a, b, c| fb((u(a) >> 24) as f32)),
        alu!("v_cvt_f64_f32", E32_E64, F64, [F], |a, b, c| db(f(a) as f64)),
        alu!("v_cvt_f32_f64", E32_E64, F32, [D], |a, b, c| fb(d(a) as f32)),
        alu!("v_cvt_pk_rtz_f16_f32", E32_E64, B32, [F, F], |a, b, c| (rtz(f(a)) as u32 | (rtz(f(b)) as u32) << 16)
            as u64),
        alu!("v_min3_f32", PLAIN, F32, [F, F, F], |a, b, c| fb(f(a).min(f(b)).min(f(c)))),
        alu!("v_max3_f32", PLAIN, F32, [F, F, F], |a, b, c| fb(f(a).max(f(b)).max(f(c)))),
        alu!("v_med3_f32", PLAIN, F32, [F, F, F], |a, b, c| fb(med(f(a), f(b), f(c)))),
        alu!("v_maxmin_f32", PLAIN, F32, [F, F, F], |a, b, c| fb(f(a).max(f(b)).min(f(c)))),
        alu!("v_minmax_f32", PLAIN, F32, [F, F, F], |a, b, c| fb(f(a).min(f(b)).max(f(c)))),
        alu!("v_mul_i32_i24", E32_E64, B32, [I, I], |a, b, c| (i24(a) * i24(b)) as u32 as u64),
        alu!("v_mul_hi_i32_i24", E32_E64, B32, [I, I], |a, b, c| ((i24(a) * i24(b)) >> 32) as u32 as u64),
        alu!("v_mul_u32_u24", E32_E64, B32, [I, I], |a, b, c| ((a & 0xff_ffff) * (b & 0xff_ffff)) as u32 as u64),
        alu!("v_mul_hi_u32_u24", E32_E64, B32, [I, I], |a, b, c| ((a & 0xff_ffff) * (b & 0xff_ffff)) >> 32),
        alu!("v_min_u32", E32_E64, B32, [I, I], |a, b, c| u(a).min(u(b)) as u64),
        alu!("v_max_u32", E32_E64, B32, [I, I], |a, b, c| u(a).max(u(b)) as u64),
        alu!("v_or_b32", E32_E64, B32, [I, I], |a, b, c| (u(a) | u(b)) as u64),
        alu!("v_xnor_b32", E32_E64, B32, [I, I], |a, b, c| !(u(a) ^ u(b)) as u64),
        alu!("v_subrev_nc_u32", E32_E64, B32, [I, I], |a, b, c| u(b).wrapping_sub(u(a)) as u64),
        alu!("v_not_b32", E32_E64, B32, [I], |a, b, c| !u(a) as u64),
        alu!("v_clz_i32_u32", E32_E64, B32, [I], |a, b, c| u(a).checked_ilog2().map_or(u32::MAX, |l| 31 - l) as u64),
        alu!("v_ctz_i32_b32", E32_E64, B32, [I], |a, b, c| if u(a) == 0 {
            u32::MAX as u64
        } else {
            u(a).trailing_zeros() as u64
        }),
        alu!("v_cls_i32", E32_E64, B32, [I], |a, b, c| {
            let x = i(a);
            if x == 0 || x == -1 {
                u32::MAX as u64
            } else {
                (if x < 0 { !x } else { x }).leading_zeros() as u64
            }
        }),
        alu!("v_mad_i32_i24", PLAIN, B32, [I, I, I], |a, b, c| (i24(a) * i24(b) + i(c) as i64) as u32 as u64),
        alu!("v_mad_u32_u24", PLAIN, B32, [I, I, I], |a, b, c| ((a & 0xff_ffff) * (b & 0xff_ffff) + (c & 0xffff_ffff))
            as u32 as u64),
        alu!("v_bfe_i32", PLAIN, B32, [I, I, I], |a, b, c| {
            let (off, w) = (u(b) & 31, u(c) & 31);
            if w == 0 {
                0
            } else {
                ((i(a) >> off) << (32 - w) >> (32 - w)) as u32 as u64
            }
        }),
        alu!("v_bfi_b32", PLAIN, B32, [I, I, I], |a, b, c| (u(a) & u(b) | !u(a) & u(c)) as u64),
        alu!("v_alignbit_b32", PLAIN, B32, [I, I, I], |a, b, c| ((((a & 0xffff_ffff) << 32) | (b & 0xffff_ffff))
            >> (c & 31)) as u32 as u64),
        alu!("v_alignbyte_b32", PLAIN, B32, [I, I, I], |a, b, c| ((((a & 0xffff_ffff) << 32) | (b & 0xffff_ffff))
            >> (8 * (c & 3))) as u32 as u64),
        alu!("v_min3_i32", PLAIN, B32, [I, I, I], |a, b, c| i(a).min(i(b)).min(i(c)) as u32 as u64),
        alu!("v_min3_u32", PLAIN, B32, [I, I, I], |a, b, c| u(a).min(u(b)).min(u(c)) as u64),
        alu!("v_max3_u32", PLAIN, B32, [I, I, I], |a, b, c| u(a).max(u(b)).max(u(c)) as u64),
        alu!("v_med3_i32", PLAIN, B32, [I, I, I], |a, b, c| med(i(a), i(b), i(c)) as u32 as u64),
        alu!("v_maxmin_i32", PLAIN, B32, [I, I, I], |a, b, c| i(a).max(i(b)).min(i(c)) as u32 as u64),
        alu!("v_minmax_i32", PLAIN, B32, [I, I, I], |a, b, c| i(a).min(i(b)).max(i(c)) as u32 as u64),
        alu!("v_maxmin_u32", PLAIN, B32, [I, I, I], |a, b, c| u(a).max(u(b)).min(u(c)) as u64),
        alu!("v_minmax_u32", PLAIN, B32, [I, I, I], |a, b, c| u(a).min(u(b)).max(u(c)) as u64),
        alu!("v_med3_u32", PLAIN, B32, [I, I, I], |a, b, c| med(u(a), u(b), u(c)) as u64),
        alu!("v_xor3_b32", PLAIN, B32, [I, I, I], |a, b, c| (u(a) ^ u(b) ^ u(c)) as u64),
        alu!("v_perm_b32", PLAIN, B32, [I, I, I], |a, b, c| perm(u(a), u(b), u(c)) as u64),
        alu!("v_xad_u32", PLAIN, B32, [I, I, I], |a, b, c| (u(a) ^ u(b)).wrapping_add(u(c)) as u64),
        alu!("v_add_lshl_u32", PLAIN, B32, [I, I, I], |a, b, c| (u(a).wrapping_add(u(b)) << (c & 31)) as u64),
        alu!("v_lshl_or_b32", PLAIN, B32, [I, I, I], |a, b, c| (u(a) << (b & 31) | u(c)) as u64),
        alu!("v_or3_b32", PLAIN, B32, [I, I, I], |a, b, c| (u(a) | u(b) | u(c)) as u64),
        alu!("v_bfm_b32", PLAIN, B32, [I, I], |a, b, c| (((1u64 << (a & 31)) - 1) << (b & 31)) as u32 as u64),
        alu!("v_bcnt_u32_b32", PLAIN, B32, [I, I], |a, b, c| u(a).count_ones().wrapping_add(u(b)) as u64),
        alu!("v_mbcnt_hi_u32_b32", PLAIN, B32, [I, I], |a, b, c| b & 0xffff_ffff), // wave32: no lanes 32-63
        alu!("v_sub_nc_i32", PLAIN, B32, [I, I], |a, b, c| i(a).wrapping_sub(i(b)) as u32 as u64),
        alu!("v_add_nc_i32", PLAIN, B32, [I, I], |a, b, c| i(a).wrapping_add(i(b)) as u32 as u64),
        alu!("v_mul_hi_i32", PLAIN, B32, [I, I], |a, b, c| ((i(a) as i64 * i(b) as i64) >> 32) as u32 as u64),
        alu!("v_lshrrev_b64", PLAIN, B64, [I, D], |a, b, c| b >> (a & 63)),
        alu!("v_ashrrev_i64", PLAIN, B64, [I, D], |a, b, c| ((b as i64) >> (a & 63)) as u64),
        alu!("v_add_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(a) + h(b))),
        alu!("v_subrev_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(b) - h(a))),
        alu!("v_mul_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(a) * h(b))),
        alu!("v_max_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(a).max(h(b)))),
        alu!("v_min_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(a).min(h(b)))),
        alu!(
            "v_fma_f16",
            PLAIN,
            F16,
            [H, H, H],
            |a, b, c| half::f16::from_f64(h(a) as f64 * h(b) as f64 + h(c) as f64).to_bits() as u64
        ),
        alu!("v_fmamk_f16", PLAIN, F16, [H, H], "%0, %1, 0x4200, %2", |a, b, c| half::f16::from_f64(
            h(a) as f64 * 3.0 + h(b) as f64
        )
        .to_bits() as u64),
        alu!("v_fmaak_f16", PLAIN, F16, [H, H], "%0, %1, %2, 0xbc00", |a, b, c| half::f16::from_f64(
            h(a) as f64 * h(b) as f64 - 1.0
        )
        .to_bits() as u64),
        alu!("v_add_nc_u16", PLAIN, B16, [H, H], |a, b, c| (a as u16).wrapping_add(b as u16) as u64),
        alu!("v_sub_nc_u16", PLAIN, B16, [H, H], |a, b, c| (a as u16).wrapping_sub(b as u16) as u64),
        alu!("v_mul_lo_u16", PLAIN, B16, [H, H], |a, b, c| (a as u16).wrapping_mul(b as u16) as u64),
        alu!("v_max_u16", PLAIN, B16, [H, H], |a, b, c| (a as u16).max(b as u16) as u64),
        alu!("v_min_u16", PLAIN, B16, [H, H], |a, b, c| (a as u16).min(b as u16) as u64),
        alu!("v_max_i16", PLAIN, B16, [H, H], |a, b, c| (a as i16).max(b as i16) as u16 as u64),
        alu!("v_min_i16", PLAIN, B16, [H, H], |a, b, c| (a as i16).min(b as i16) as u16 as u64),
        alu!("v_lshlrev_b16", PLAIN, B16, [H, H], |a, b, c| ((b as u16) << (a & 15)) as u64),
        alu!("v_lshrrev_b16", PLAIN, B16, [H, H], |a, b, c| ((b as u16) >> (a & 15)) as u64),
        alu!("v_ashrrev_i16", PLAIN, B16, [H, H], |a, b, c| ((b as i16) >> (a & 15)) as u16 as u64),
        alu!("v_min3_i16", PLAIN, B16, [H, H, H], |a, b, c| (a as i16).min(b as i16).min(c as i16) as u16 as u64),
        alu!("v_max3_i16", PLAIN, B16, [H, H, H], |a, b, c| (a as i16).max(b as i16).max(c as i16) as u16 as u64),
        alu!("v_min3_u16", PLAIN, B16, [H, H, H], |a, b, c| (a as u16).min(b as u16).min(c as u16) as u64),
        alu!("v_max3_u16", PLAIN, B16, [H, H, H], |a, b, c| (a as u16).max(b as u16).max(c as u16) as u64),
        alu!("v_cvt_i32_f64", E32_E64, B32, [D], |a, b, c| d(a) as i32 as u32 as u64),
        alu!("v_cvt_u32_f64", E32_E64, B32, [D], |a, b, c| d(a) as u32 as u64),
        alu!("v_cvt_f64_i32", E32_E64, F64, [I], |a, b, c| db(i(a) as f64)),
        alu!("v_cvt_f64_u32", E32_E64, F64, [I], |a, b, c| db(u(a) as f64)),
        alu!("v_trunc_f64", E32_E64, F64, [D], |a, b, c| db(d(a).trunc())),
        alu!("v_ceil_f64", E32_E64, F64, [D], |a, b, c| db(d(a).ceil())),
        alu!("v_floor_f64", E32_E64, F64, [D], |a, b, c| db(d(a).floor())),
        alu!("v_rndne_f64", E32_E64, F64, [D], |a, b, c| db(d(a).round_ties_even())),
        alu!("v_fract_f64", E32_E64, F64, [D], |a, b, c| db(fract64(d(a)))),
        alu!("v_rcp_f64", E32_E64, F64, [D], |a, b, c| db(1.0 / d(a))),
        alu!("v_rsq_f64", E32_E64, F64, [D], |a, b, c| db(1.0 / d(a).sqrt())),
        alu!("v_sqrt_f64", E32_E64, F64, [D], |a, b, c| db(d(a).sqrt())),
        alu!("v_frexp_mant_f64", E32_E64, F64, [D], |a, b, c| db(frexp(d(a)).0)),
        alu!("v_frexp_exp_i32_f64", E32_E64, B32, [D], |a, b, c| frexp(d(a)).1 as u32 as u64),
        alu!("v_add_f64", PLAIN, F64, [D, D], |a, b, c| db(d(a) + d(b))),
        alu!("v_mul_f64", PLAIN, F64, [D, D], |a, b, c| db(d(a) * d(b))),
        alu!("v_min_f64", PLAIN, F64, [D, D], |a, b, c| db(d(a).min(d(b)))),
        alu!("v_max_f64", PLAIN, F64, [D, D], |a, b, c| db(d(a).max(d(b)))),
        alu!("v_ldexp_f64", PLAIN, F64, [D, K], |a, b, c| db(d(a) * 2f64.powi(i(b)))),
        alu!("v_fma_f64", PLAIN, F64, [D, D, D], |a, b, c| db(d(a).mul_add(d(b), d(c)))),
        alu!("v_div_fixup_f64", PLAIN, F64, [D, D, D], |a, b, c| db(div_fixup(d(a), d(b), d(c)))),
        // Accumulating into the destination: it is set from the third source first.
        alu!(
            "v_fmac_f32_e32",
            PLAIN,
            F32,
            [F, F, F],
            "!v_mov_b32 %0, %3\\n\\tv_fmac_f32_e32 %0, %1, %2",
            |a, b, c| fb(f(a).mul_add(f(b), f(c)))
        ),
        alu!(
            "v_fmac_f32_e64",
            PLAIN,
            F32,
            [F, F, F],
            "!v_mov_b32 %0, %3\\n\\tv_fmac_f32_e64 %0, %1, %2",
            |a, b, c| fb(f(a).mul_add(f(b), f(c)))
        ),
        alu!("v_fmac_f16_e64", PLAIN, F16, [H, H, H], "!v_mov_b32 %0, %3\\n\\tv_fmac_f16_e64 %0, %1, %2", |a, b, c| {
            half::f16::from_f64(h(a) as f64 * h(b) as f64 + h(c) as f64).to_bits() as u64
        }),
        alu!("v_add_f32", E32_E64, F32, [F, F], |a, b, c| fb(f(a) + f(b))),
        alu!("v_mul_f32", E32_E64, F32, [F, F], |a, b, c| fb(f(a) * f(b))),
        alu!("v_min_f32", E32_E64, F32, [F, F], |a, b, c| fb(f(a).min(f(b)))),
        alu!("v_max_f32", E32_E64, F32, [F, F], |a, b, c| fb(f(a).max(f(b)))),
        alu!("v_min_i32", E32_E64, B32, [I, I], |a, b, c| i(a).min(i(b)) as u32 as u64),
        alu!("v_max_i32", E32_E64, B32, [I, I], |a, b, c| i(a).max(i(b)) as u32 as u64),
        alu!("v_lshlrev_b32", E32_E64, B32, [I, I], |a, b, c| (u(b) << (a & 31)) as u64),
        alu!("v_lshrrev_b32", E32_E64, B32, [I, I], |a, b, c| (u(b) >> (a & 31)) as u64),
        alu!("v_ashrrev_i32", E32_E64, B32, [I, I], |a, b, c| (i(b) >> (a & 31)) as u32 as u64),
        alu!("v_and_b32", E32_E64, B32, [I, I], |a, b, c| (u(a) & u(b)) as u64),
        alu!("v_xor_b32", E32_E64, B32, [I, I], |a, b, c| (u(a) ^ u(b)) as u64),
        alu!("v_add_nc_u32", E32_E64, B32, [I, I], |a, b, c| u(a).wrapping_add(u(b)) as u64),
        alu!("v_sub_nc_u32", E32_E64, B32, [I, I], |a, b, c| u(a).wrapping_sub(u(b)) as u64),
        alu!("v_sub_f16", E32_E64, F16, [H, H], |a, b, c| hb(h(a) - h(b))),
        alu!("v_mov_b32", E32_E64, B32, [I], |a, b, c| a),
        alu!("v_cvt_f32_i32", E32_E64, F32, [I], |a, b, c| fb(i(a) as f32)),
        alu!("v_cvt_f32_u32", E32_E64, F32, [I], |a, b, c| fb(u(a) as f32)),
        alu!("v_cvt_u32_f32", E32_E64, B32, [F], |a, b, c| f(a) as u32 as u64),
        alu!("v_cvt_i32_f32", E32_E64, B32, [F], |a, b, c| f(a) as i32 as u32 as u64),
        alu!("v_cvt_f16_f32", E32_E64, F16, [F], |a, b, c| hb(f(a))),
        alu!("v_cvt_f32_f16", E32_E64, F32, [H], |a, b, c| fb(h(a))),
        alu!("v_cvt_f32_ubyte0", E32_E64, F32, [I], |a, b, c| fb((a & 0xff) as f32)),
        alu!("v_trunc_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).trunc())),
        alu!("v_rndne_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).round_ties_even())),
        alu!("v_floor_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).floor())),
        alu!("v_bfrev_b32", E32_E64, B32, [I], |a, b, c| u(a).reverse_bits() as u64),
        // The transcendentals as the emulator computes them (exactly; hardware is within 1 ULP).
        alu!("v_exp_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).exp2())),
        alu!("v_log_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).log2())),
        alu!("v_rcp_f32", E32_E64, F32, [F], |a, b, c| fb(1.0 / f(a))),
        alu!("v_rcp_iflag_f32", E32_E64, F32, [F], |a, b, c| fb(1.0 / f(a))),
        alu!("v_rsq_f32", E32_E64, F32, [F], |a, b, c| fb((1.0 / (f(a) as f64).sqrt()) as f32)),
        alu!("v_sqrt_f32", E32_E64, F32, [F], |a, b, c| fb(f(a).sqrt())),
        alu!("v_sin_f32", E32_E64, F32, [F], |a, b, c| fb((f(a) as f64 * std::f64::consts::TAU).sin() as f32)),
        alu!("v_cos_f32", E32_E64, F32, [F], |a, b, c| fb((f(a) as f64 * std::f64::consts::TAU).cos() as f32)),
        alu!("v_frexp_mant_f32", E32_E64, F32, [F], |a, b, c| fb(frexp(f(a) as f64).0 as f32)),
        alu!("v_frexp_exp_i32_f32", E32_E64, B32, [F], |a, b, c| frexp(f(a) as f64).1 as u32 as u64),
        alu!("v_pk_add_u16", PLAIN, B32, [I, I], |a, b, c| pk(a, b, |x, y| x.wrapping_add(y))),
        alu!("v_pk_mul_lo_u16", PLAIN, B32, [I, I], |a, b, c| pk(a, b, |x, y| x.wrapping_mul(y))),
        alu!("v_pk_add_f16", PLAIN, PkF16, [I, I], |a, b, c| pkh(a, b, |x, y| x + y)),
        alu!("v_pk_mul_f16", PLAIN, PkF16, [I, I], |a, b, c| pkh(a, b, |x, y| x * y)),
        alu!("v_pk_min_f16", PLAIN, PkF16, [I, I], |a, b, c| pkh(a, b, f32::min)),
        alu!("v_pk_max_f16", PLAIN, PkF16, [I, I], |a, b, c| pkh(a, b, f32::max)),
        // No-ops: they run, and the move after them sees its operand unchanged.
        alu!("v_nop", E32_E64, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_sleep", PLAIN, B32, [I], "1\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_set_inst_prefetch_distance", PLAIN, B32, [I], "0x1\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_wait_idle", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_setprio", PLAIN, B32, [I], "1\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_icache_inv", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_dcache_inv", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_gl1_inv", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("buffer_gl0_inv", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("buffer_gl1_inv", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("ds_nop", PLAIN, B32, [I], "\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_waitcnt_vscnt", PLAIN, B32, [I], "null, 0x0\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_waitcnt_vmcnt", PLAIN, B32, [I], "null, 0x0\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
        alu!("s_waitcnt_lgkmcnt", PLAIN, B32, [I], "null, 0x0\\n\\tv_mov_b32 %0, %1", |a, b, c| a),
    ]
}

/// Scalar opcodes (one value per workgroup).
pub fn salu() -> Vec<Alu> {
    let cmp = "%1, %2\\n\\ts_cselect_b32 %0, 1, 0";
    vec![
        alu!("s_clz_i32_u32", PLAIN, B32, [S], |a, b, c| u(a).checked_ilog2().map_or(u32::MAX, |l| 31 - l) as u64),
        alu!("s_cls_i32", PLAIN, B32, [S], |a, b, c| {
            let x = u(a) ^ (i(a) >> 31) as u32;
            x.checked_ilog2().map_or(u32::MAX, |l| 31 - l) as u64
        }),
        alu!("s_sext_i32_i8", PLAIN, B32, [S], |a, b, c| a as i8 as i32 as u32 as u64),
        alu!("s_sext_i32_i16", PLAIN, B32, [S], |a, b, c| a as i16 as i32 as u32 as u64),
        alu!("s_abs_i32", PLAIN, B32, [S], |a, b, c| i(a).wrapping_abs() as u32 as u64),
        alu!("s_not_b32", PLAIN, B32, [S], |a, b, c| !u(a) as u64),
        alu!("s_mov_b64", PLAIN, B64, [S64], |a, b, c| a),
        alu!("s_not_b64", PLAIN, B64, [S64], |a, b, c| !a),
        alu!("s_bcnt1_i32_b64", PLAIN, B32, [S64], |a, b, c| a.count_ones() as u64),
        alu!("s_sub_u32", PLAIN, B32, [S, S], |a, b, c| u(a).wrapping_sub(u(b)) as u64),
        alu!("s_sub_i32", PLAIN, B32, [S, S], |a, b, c| u(a).wrapping_sub(u(b)) as u64),
        alu!("s_absdiff_i32", PLAIN, B32, [S, S], |a, b, c| i(a).wrapping_sub(i(b)).wrapping_abs() as u32 as u64),
        alu!("s_lshr_b32", PLAIN, B32, [S, S], |a, b, c| (u(a) >> (b & 31)) as u64),
        alu!("s_ashr_i32", PLAIN, B32, [S, S], |a, b, c| (i(a) >> (b & 31)) as u32 as u64),
        alu!("s_lshl1_add_u32", PLAIN, B32, [S, S], |a, b, c| (u(a) << 1).wrapping_add(u(b)) as u64),
        alu!("s_lshl2_add_u32", PLAIN, B32, [S, S], |a, b, c| (u(a) << 2).wrapping_add(u(b)) as u64),
        alu!("s_lshl3_add_u32", PLAIN, B32, [S, S], |a, b, c| (u(a) << 3).wrapping_add(u(b)) as u64),
        alu!("s_lshl4_add_u32", PLAIN, B32, [S, S], |a, b, c| (u(a) << 4).wrapping_add(u(b)) as u64),
        alu!("s_min_i32", PLAIN, B32, [S, S], |a, b, c| i(a).min(i(b)) as u32 as u64),
        alu!("s_min_u32", PLAIN, B32, [S, S], |a, b, c| u(a).min(u(b)) as u64),
        alu!("s_max_u32", PLAIN, B32, [S, S], |a, b, c| u(a).max(u(b)) as u64),
        alu!("s_nand_b32", PLAIN, B32, [S, S], |a, b, c| !(u(a) & u(b)) as u64),
        alu!("s_nor_b32", PLAIN, B32, [S, S], |a, b, c| !(u(a) | u(b)) as u64),
        alu!("s_xnor_b32", PLAIN, B32, [S, S], |a, b, c| !(u(a) ^ u(b)) as u64),
        alu!("s_or_not1_b32", PLAIN, B32, [S, S], |a, b, c| (u(a) | !u(b)) as u64),
        alu!("s_bfe_u32", PLAIN, B32, [S, S], |a, b, c| {
            let (off, w) = (u(b) & 31, (u(b) >> 16) & 0x7f);
            if w == 0 {
                0
            } else {
                (u(a) >> off) as u64 & ((1u64 << w.min(32)) - 1)
            }
        }),
        alu!("s_bfe_i32", PLAIN, B32, [S, S], |a, b, c| {
            let (off, w) = (u(b) & 31, (u(b) >> 16) & 0x7f);
            if w == 0 {
                0
            } else if w >= 32 {
                (i(a) >> off) as u32 as u64
            } else {
                ((i(a) >> off) << (32 - w) >> (32 - w)) as u32 as u64
            }
        }),
        alu!("s_bfm_b32", PLAIN, B32, [S, S], |a, b, c| (((1u64 << (a & 31)) - 1) << (b & 31)) as u32 as u64),
        alu!("s_mul_hi_u32", PLAIN, B32, [S, S], |a, b, c| ((a & 0xffff_ffff) * (b & 0xffff_ffff)) >> 32),
        alu!("s_mul_hi_i32", PLAIN, B32, [S, S], |a, b, c| ((i(a) as i64 * i(b) as i64) >> 32) as u32 as u64),
        alu!("s_pack_ll_b32_b16", PLAIN, B32, [S, S], |a, b, c| (u(a) & 0xffff | u(b) << 16) as u64),
        alu!("s_pack_lh_b32_b16", PLAIN, B32, [S, S], |a, b, c| (u(a) & 0xffff | u(b) & 0xffff_0000) as u64),
        alu!("s_pack_hh_b32_b16", PLAIN, B32, [S, S], |a, b, c| (u(a) >> 16 | u(b) & 0xffff_0000) as u64),
        alu!("s_pack_hl_b32_b16", PLAIN, B32, [S, S], |a, b, c| (u(a) >> 16 | u(b) << 16) as u64),
        alu!("s_and_b64", PLAIN, B64, [S64, S64], |a, b, c| a & b),
        alu!("s_or_b64", PLAIN, B64, [S64, S64], |a, b, c| a | b),
        alu!("s_xor_b64", PLAIN, B64, [S64, S64], |a, b, c| a ^ b),
        alu!("s_and_not1_b64", PLAIN, B64, [S64, S64], |a, b, c| a & !b),
        alu!("s_or_not1_b64", PLAIN, B64, [S64, S64], |a, b, c| a | !b),
        alu!("s_lshr_b64", PLAIN, B64, [S64, S], |a, b, c| a >> (b & 63)),
        alu!("s_ashr_i64", PLAIN, B64, [S64, S], |a, b, c| ((a as i64) >> (b & 63)) as u64),
        alu!("s_cmp_eq_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) == i(b)) as u64),
        alu!("s_cmp_lg_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) != i(b)) as u64),
        alu!("s_cmp_gt_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) > i(b)) as u64),
        alu!("s_cmp_ge_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) >= i(b)) as u64),
        alu!("s_cmp_lt_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) < i(b)) as u64),
        alu!("s_cmp_le_i32", PLAIN, B32, [S, S], cmp, |a, b, c| (i(a) <= i(b)) as u64),
        alu!("s_cmp_gt_u32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) > u(b)) as u64),
        alu!("s_cmp_ge_u32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) >= u(b)) as u64),
        alu!("s_cmp_lt_u32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) < u(b)) as u64),
        alu!("s_cmp_le_u32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) <= u(b)) as u64),
        alu!("s_bitset0_b32", PLAIN, B32, [S, S], "!s_mov_b32 %0, %2\\n\\ts_bitset0_b32 %0, %1", |a, b, c| (u(b)
            & !(1 << (a & 31)))
            as u64),
        alu!("s_bitset1_b32", PLAIN, B32, [S, S], "!s_mov_b32 %0, %2\\n\\ts_bitset1_b32 %0, %1", |a, b, c| (u(b)
            | 1 << (a & 31))
            as u64),
        alu!("s_bitcmp0_b32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) >> (b & 31) & 1 == 0) as u64),
        alu!("s_bitcmp1_b32", PLAIN, B32, [S, S], cmp, |a, b, c| (u(a) >> (b & 31) & 1 == 1) as u64),
        alu!("s_cmp_eq_u64", PLAIN, B32, [S64, S64], cmp, |a, b, c| (a == b) as u64),
        alu!("s_cmp_lg_u64", PLAIN, B32, [S64, S64], cmp, |a, b, c| (a != b) as u64),
        alu!("s_cmpk_eq_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            == 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_lg_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            != 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_gt_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            > 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_ge_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            >= 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_lt_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            < 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_le_i32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (i(a)
            <= 0x8234u16 as i16 as i32)
            as u64),
        alu!("s_cmpk_eq_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) == 0x8234)
            as u64),
        alu!("s_cmpk_lg_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) != 0x8234)
            as u64),
        alu!("s_cmpk_gt_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) > 0x8234)
            as u64),
        alu!("s_cmpk_ge_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) >= 0x8234)
            as u64),
        alu!("s_cmpk_lt_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) < 0x8234)
            as u64),
        alu!("s_cmpk_le_u32", PLAIN, B32, [S], "%1, 0x8234\\n\\ts_cselect_b32 %0, 1, 0", |a, b, c| (u(a) <= 0x8234)
            as u64),
        alu!("s_movk_i32", PLAIN, B32, [], "%0, 0x8123", |a, b, c| 0xffff_8123),
        alu!("s_addk_i32", PLAIN, B32, [S], "!s_mov_b32 %0, %1\\n\\ts_addk_i32 %0, 0x8001", |a, b, c| u(a)
            .wrapping_add(0xffff_8001)
            as u64),
        alu!("s_mulk_i32", PLAIN, B32, [S], "!s_mov_b32 %0, %1\\n\\ts_mulk_i32 %0, 0x8003", |a, b, c| u(a)
            .wrapping_mul(0xffff_8003)
            as u64),
        alu!(
            "s_cmovk_i32",
            PLAIN,
            B32,
            [S, S],
            "!s_mov_b32 %0, %1\\n\\ts_cmp_lt_u32 %1, %2\\n\\ts_cmovk_i32 %0, 0x7123",
            |a, b, c| if u(a) < u(b) { 0x7123 } else { a & 0xffff_ffff }
        ),
        alu!(
            "s_cmov_b32",
            PLAIN,
            B32,
            [S, S],
            "!s_mov_b32 %0, %1\\n\\ts_cmp_lt_u32 %1, %2\\n\\ts_cmov_b32 %0, %2",
            |a, b, c| if u(a) < u(b) { b } else { a } & 0xffff_ffff
        ),
        alu!(
            "s_cmov_b64",
            PLAIN,
            B64,
            [S64, S64, S],
            "!s_mov_b64 %0, %1\\n\\ts_cmp_lt_u32 %3, 0x80000000\\n\\ts_cmov_b64 %0, %2",
            |a, b, c| if u(c) < 0x8000_0000 { b } else { a }
        ),
        alu!(
            "s_cselect_b64",
            PLAIN,
            B64,
            [S64, S64, S],
            "!s_cmp_lt_u32 %3, 0x80000000\\n\\ts_cselect_b64 %0, %1, %2",
            |a, b, c| if u(c) < 0x8000_0000 { a } else { b }
        ),
        alu!(
            "s_subb_u32",
            PLAIN,
            B32,
            [S, S, S],
            "!s_cmp_lt_u32 %3, 0x80000000\\n\\ts_subb_u32 %0, %1, %2",
            |a, b, c| u(a).wrapping_sub(u(b)).wrapping_sub((u(c) < 0x8000_0000) as u32) as u64
        ),
    ]
}
