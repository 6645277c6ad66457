//! ALU semantics: cat2 (two-source), cat3 (three-source) and cat4 (SFU) operations on 32-bit values.
//! Half-precision operands arrive widened (f16 → f32 bits for float ops, zero/sign-extended for
//! integer ops) and results are narrowed by the caller. Operation formulas follow Mesa's
//! `src/compiler/nir/nir_opcodes.py` for the ir3-specific ops (`umul_low`, `imadsh_mix16`,
//! `imad24_ir3`, `shrm_ir3`, … `andg_ir3`) that ir3 maps one to one onto these instructions.

use crate::decode::Cond;

/// How an opcode reads its operands: float, signed/unsigned integer or bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    F,
    S,
    U,
    B,
}

/// The operand domain of a cat2 opcode (ir3-cat2.xml: `.f` 0–13, `.u`/`.s` 16–27 and 33–34, `.b` 28–31
/// and 51–62, `mul.u24`/`mul.s24`/`mull.u` 48–50).
pub(crate) fn domain2(opc: u8) -> Domain {
    match opc {
        0..=13 => Domain::F,
        17 | 19 | 21 | 23 | 25 | 26 | 34 | 49 => Domain::S,
        16..=27 | 33 | 48 | 50 => Domain::U,
        _ => Domain::B,
    }
}

/// The operand domain of a cat3 opcode: `mad.f*`/`sel.f*` float, `mad.s*`/`sel.s*`/`sad` signed.
pub(crate) fn domain3(alt: bool, opc: u8) -> Domain {
    match (alt, opc) {
        (false, 6 | 7 | 12 | 13) => Domain::F,
        (false, 2 | 5 | 10 | 11 | 14 | 15) => Domain::S,
        _ => Domain::U,
    }
}

fn f(v: u32) -> f32 {
    f32::from_bits(v)
}

fn fb(x: f32) -> u32 {
    x.to_bits()
}

fn compare<T: PartialOrd>(c: Cond, a: T, b: T) -> bool {
    match c {
        Cond::Lt => a < b,
        Cond::Le => a <= b,
        Cond::Gt => a > b,
        Cond::Ge => a >= b,
        Cond::Eq => a == b,
        Cond::Ne => a != b,
    }
}

/// `round half to even` of an f32 (`rndne.f`).
fn rndne(x: f32) -> f32 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// The saturating integer cat2 ops (`(sat)add.u` and the like: ir3 `nir_op_uadd_sat`, `iadd_sat`, `usub_sat`,
/// `isub_sat` in Mesa's ir3_compiler_nir.c), clamped to the operand width (16 bits for half operands, already
/// widened: zero-extended for `.u`, sign-extended for `.s`); `None` for any other integer opcode.
pub(crate) fn cat2_sat(opc: u8, a: u32, b: u32, half: bool) -> Option<u32> {
    let bits = if half { 16 } else { 32 };
    let (umax, smin, smax) = ((1i64 << bits) - 1, -(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1);
    let (ua, ub, sa, sb) = (a as i64, b as i64, a as i32 as i64, b as i32 as i64);
    let v = match opc {
        16 /* add.u */ => (ua + ub).min(umax),
        17 /* add.s */ => (sa + sb).clamp(smin, smax),
        18 /* sub.u */ => (ua - ub).max(0),
        19 /* sub.s */ => (sa - sb).clamp(smin, smax),
        _ => return None,
    };
    Some(v as u32)
}

/// Cat2 by opcode (ir3-cat2.xml, bits 53..58). `half` operands are already widened; `None` means the opcode is not implemented.
pub(crate) fn cat2(opc: u8, cond: Option<Cond>, a: u32, b: u32, half: bool) -> Option<u32> {
    let bits = if half { 16 } else { 32 };
    let mask = if half { 0xffff } else { u32::MAX };
    let (sa, sb) = (a as i32, b as i32);
    Some(match opc {
        0 /* add.f */ => fb(f(a) + f(b)),
        3 /* mul.f */ => fb(f(a) * f(b)),
        1 /* min.f */ => fb(f(a).min(f(b))),
        2 /* max.f */ => fb(f(a).max(f(b))),
        4 /* sign.f */ => fb(if f(a) > 0.0 {
            1.0
        } else if f(a) < 0.0 {
            -1.0
        } else {
            0.0
        }),
        6 /* absneg.f */ => a,
        9 /* floor.f */ => fb(f(a).floor()),
        10 /* ceil.f */ => fb(f(a).ceil()),
        11 /* rndne.f */ => fb(rndne(f(a))),
        12 /* rndaz.f */ => fb(f(a).round()),
        13 /* trunc.f */ => fb(f(a).trunc()),
        5 /* cmps.f */ => compare(cond?, f(a), f(b)) as u32,
        20 /* cmps.u */ => compare(cond?, a & mask, b & mask) as u32,
        21 /* cmps.s */ => compare(cond?, sa, sb) as u32,
        16 /* add.u */ | 17 /* add.s */ => a.wrapping_add(b),
        18 /* sub.u */ | 19 /* sub.s */ => a.wrapping_sub(b),
        22 /* min.u */ => (a & mask).min(b & mask),
        24 /* max.u */ => (a & mask).max(b & mask),
        23 /* min.s */ => sa.min(sb) as u32,
        25 /* max.s */ => sa.max(sb) as u32,
        26 /* absneg.s */ => a,
        28 /* and.b */ => a & b,
        29 /* or.b */ => a | b,
        31 /* xor.b */ => a ^ b,
        30 /* not.b */ => !a,
        48 /* mul.u24 */ => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff),
        49 /* mul.s24 */ => (((sa << 8) >> 8).wrapping_mul((sb << 8) >> 8)) as u32,
        // nir `umul_low`: the low halves multiplied.
        50 /* mull.u */ => {
            let m = (1u64 << (bits / 2)) - 1;
            ((a as u64 & m) * (b as u64 & m)) as u32
        }
        54 /* shl.b */ => a.wrapping_shl(b & (bits - 1)),
        55 /* shr.b */ => (a & mask).wrapping_shr(b & (bits - 1)),
        56 /* ashr.b */ => {
            let v = if half { (a as u16 as i16) as i32 } else { sa };
            (v >> (b & (bits - 1))) as u32
        }
        51 /* bfrev.b */ => {
            if half {
                (a as u16).reverse_bits() as u32
            } else {
                a.reverse_bits()
            }
        }
        // clz.b of 0 is -1: Mesa's ir3 builds nir `ufind_msb` as `sel.b32 (31 - clz), x, clz` and `find_lsb` as
        // `clz.b(bfrev.b x)`, both of which NIR defines as -1 for 0 (ir3_compiler_nir.c `emit_alu`).
        53 /* clz.b */ if a & mask == 0 => mask,
        53 /* clz.b */ => {
            if half {
                (a as u16).leading_zeros()
            } else {
                a.leading_zeros()
            }
        }
        61 /* cbits.b */ => (a & mask).count_ones(),
        _ => return None,
    })
}

/// Cat3 (`a`, `b`, `c` are the first, second and third sources).
pub(crate) fn cat3(alt: bool, opc: u8, a: u32, b: u32, c: u32, half: bool) -> Option<u32> {
    let bits = if half { 16 } else { 32 };
    let (sa, sb, sc) = (a as i32, b as i32, c as i32);
    Some(match (alt, opc) {
        // Two roundings, as the multiply and add of `mad` are not fused on a6xx.
        (false, 7) /* mad.f32 */ | (false, 6) /* mad.f16 */ => fb(f(a) * f(b) + f(c)),
        (false, 4) /* mad.u24 */ => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c),
        // nir `imad24_ir3`.
        (false, 5) /* mad.s24 */ => ((sa << 8) >> 8).wrapping_mul((sb << 8) >> 8).wrapping_add(sc) as u32,
        (false, 0) /* mad.u16 */ => (a & 0xffff).wrapping_mul(b & 0xffff).wrapping_add(c),
        (false, 2) /* mad.s16 */ => ((a as i16 as i32).wrapping_mul(b as i16 as i32).wrapping_add(sc)) as u32,
        // nir `imadsh_mix16`: al * bh << 16 + c.
        (false, 3) /* madsh.m16 */ => ((a & 0xffff).wrapping_mul(b >> 16) << 16).wrapping_add(c),
        // ir3 emits `sel.b dst, x, cond, y` for `bcsel(cond, x, y)`.
        (false, 9) /* sel.b32 */ | (false, 8) /* sel.b16 */ => {
            if b != 0 {
                a
            } else {
                c
            }
        }
        // nir `shrm_ir3(src0, src1, src2)` is emitted as `shrm dst, src1, src0, src2`.
        (true, 8) /* shrm */ => (b >> (a & (bits - 1))) & c,
        (true, 9) /* shlm */ => (b << (a & (bits - 1))) & c,
        (true, 10) /* shrg */ => (b >> (a & (bits - 1))) | c,
        (true, 11) /* shlg */ => (b << (a & (bits - 1))) | c,
        (true, 12) /* andg */ => (a & b) | c,
        // ir3 emits nir `iadd3` (a + b + c) as `sad.s32`/`sad.s16` (ir3_compiler_nir.c).
        (false, 15) /* sad.s32 */ | (false, 14) /* sad.s16 */ => a.wrapping_add(b).wrapping_add(c),
        _ => return None,
    })
}

/// Cat4 on f32 values.
pub(crate) fn cat4(opc: u8, a: u32) -> Option<u32> {
    let x = f(a);
    Some(fb(match opc {
        0 /* rcp */ => 1.0 / x,
        1 /* rsq */ | 9 /* hrsq */ => 1.0 / x.sqrt(),
        6 /* sqrt */ => x.sqrt(),
        2 /* log2 */ | 10 /* hlog2 */ => x.log2(),
        3 /* exp2 */ | 11 /* hexp2 */ => x.exp2(),
        4 /* sin */ => x.sin(),
        5 /* cos */ => x.cos(),
        _ => return None,
    }))
}
