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

/// The operand domain of a cat2 mnemonic (`add.f` → F, …).
pub(crate) fn domain(name: &str) -> Domain {
    match name.rsplit('.').next().unwrap_or("") {
        "f" => Domain::F,
        "s" | "s24" => Domain::S,
        "u" | "u24" => Domain::U,
        _ => Domain::B,
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

/// Cat2. `half` operands are already widened; `None` means the opcode is not implemented.
pub(crate) fn cat2(name: &str, cond: Option<Cond>, a: u32, b: u32, half: bool) -> Option<u32> {
    let bits = if half { 16 } else { 32 };
    let mask = if half { 0xffff } else { u32::MAX };
    let (sa, sb) = (a as i32, b as i32);
    Some(match name {
        "add.f" => fb(f(a) + f(b)),
        "mul.f" => fb(f(a) * f(b)),
        "min.f" => fb(f(a).min(f(b))),
        "max.f" => fb(f(a).max(f(b))),
        "sign.f" => fb(if f(a) > 0.0 {
            1.0
        } else if f(a) < 0.0 {
            -1.0
        } else {
            0.0
        }),
        "absneg.f" => a,
        "floor.f" => fb(f(a).floor()),
        "ceil.f" => fb(f(a).ceil()),
        "rndne.f" => fb(rndne(f(a))),
        "rndaz.f" => fb(f(a).round()),
        "trunc.f" => fb(f(a).trunc()),
        "cmps.f" => compare(cond?, f(a), f(b)) as u32,
        "cmps.u" => compare(cond?, a & mask, b & mask) as u32,
        "cmps.s" => compare(cond?, sa, sb) as u32,
        "add.u" | "add.s" => a.wrapping_add(b),
        "sub.u" | "sub.s" => a.wrapping_sub(b),
        "min.u" => (a & mask).min(b & mask),
        "max.u" => (a & mask).max(b & mask),
        "min.s" => sa.min(sb) as u32,
        "max.s" => sa.max(sb) as u32,
        "absneg.s" => a,
        "and.b" => a & b,
        "or.b" => a | b,
        "xor.b" => a ^ b,
        "not.b" => !a,
        "mul.u24" => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff),
        "mul.s24" => (((sa << 8) >> 8).wrapping_mul((sb << 8) >> 8)) as u32,
        // nir `umul_low`: the low halves multiplied.
        "mull.u" => {
            let m = (1u64 << (bits / 2)) - 1;
            ((a as u64 & m) * (b as u64 & m)) as u32
        }
        "shl.b" => a.wrapping_shl(b & (bits - 1)),
        "shr.b" => (a & mask).wrapping_shr(b & (bits - 1)),
        "ashr.b" => {
            let v = if half { (a as u16 as i16) as i32 } else { sa };
            (v >> (b & (bits - 1))) as u32
        }
        "bfrev.b" => {
            if half {
                (a as u16).reverse_bits() as u32
            } else {
                a.reverse_bits()
            }
        }
        "clz.b" => {
            if half {
                (a as u16).leading_zeros()
            } else {
                a.leading_zeros()
            }
        }
        "cbits.b" => (a & mask).count_ones(),
        _ => return None,
    })
}

/// Cat3 (`a`, `b`, `c` are the first, second and third sources).
pub(crate) fn cat3(name: &str, a: u32, b: u32, c: u32, half: bool) -> Option<u32> {
    let bits = if half { 16 } else { 32 };
    let (sa, sb, sc) = (a as i32, b as i32, c as i32);
    Some(match name {
        // Two roundings, as the multiply and add of `mad` are not fused on a6xx.
        "mad.f32" | "mad.f16" => fb(f(a) * f(b) + f(c)),
        "mad.u24" => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c),
        // nir `imad24_ir3`.
        "mad.s24" => ((sa << 8) >> 8).wrapping_mul((sb << 8) >> 8).wrapping_add(sc) as u32,
        "mad.u16" => (a & 0xffff).wrapping_mul(b & 0xffff).wrapping_add(c),
        "mad.s16" => ((a as i16 as i32).wrapping_mul(b as i16 as i32).wrapping_add(sc)) as u32,
        // nir `imadsh_mix16`: al * bh << 16 + c.
        "madsh.m16" => ((a & 0xffff).wrapping_mul(b >> 16) << 16).wrapping_add(c),
        // ir3 emits `sel.b dst, x, cond, y` for `bcsel(cond, x, y)`.
        "sel.b32" | "sel.b16" => {
            if b != 0 {
                a
            } else {
                c
            }
        }
        // nir `shrm_ir3(src0, src1, src2)` is emitted as `shrm dst, src1, src0, src2`.
        "shrm" => (b >> (a & (bits - 1))) & c,
        "shlm" => (b << (a & (bits - 1))) & c,
        "shrg" => (b >> (a & (bits - 1))) | c,
        "shlg" => (b << (a & (bits - 1))) | c,
        "andg" => (a & b) | c,
        // ir3 emits nir `iadd3` (a + b + c) as `sad.s32`/`sad.s16` (ir3_compiler_nir.c).
        "sad.s32" | "sad.s16" => a.wrapping_add(b).wrapping_add(c),
        _ => return None,
    })
}

/// Cat4 on f32 values.
pub(crate) fn cat4(name: &str, a: u32) -> Option<u32> {
    let x = f(a);
    Some(fb(match name {
        "rcp" => 1.0 / x,
        "rsq" | "hrsq" => 1.0 / x.sqrt(),
        "sqrt" => x.sqrt(),
        "log2" | "hlog2" => x.log2(),
        "exp2" | "hexp2" => x.exp2(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        _ => return None,
    }))
}
