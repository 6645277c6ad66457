//! pilot's IR operations as NIR instructions, with the semantics the OpenCL renderer gives them
//! (`compiler/src/target/cl/render.rs`): half is computed as float, float max/min propagate NaN,
//! integer division by zero gives 0, shifts by the width or more give 0 (or the sign), float to integer
//! conversion truncates to a saturated i64 (NaN to 0) then wraps to the width.

use pilot_core::DType;

use super::ffi::{Def, Shader};
use crate::ir::{BinOp, RedOp, UnOp};

/// Bits of a value of type `d` in NIR (half and bfloat16 are computed as 32-bit float; bool is NIR's 1-bit
/// bool).
pub fn bits(d: DType) -> u32 {
    match d {
        DType::Bool => 1,
        DType::F16 | DType::BF16 => 32,
        _ => 8 * d.size() as u32,
    }
}

pub fn signed(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// `x` (an integer of `from_bits` bits, signed or not) as `to` bits.
pub fn resize(s: &mut Shader, x: Def, from_bits: u32, signed: bool, to: u32) -> Def {
    if from_bits == to {
        return x;
    }
    if from_bits == 1 {
        return s.alu(&format!("b2i{to}"), &[x]);
    }
    let k = if signed && to > from_bits { "i" } else { "u" };
    s.alu(&format!("{k}2{k}{to}"), &[x])
}

pub fn fimm(s: &mut Shader, v: f32) -> Def {
    s.imm(32, u64::from(v.to_bits()))
}

fn is_nan(s: &mut Shader, x: Def) -> Def {
    s.alu("fneu", &[x, x])
}

/// A 1-bit condition as type `d`.
pub fn from_bool(s: &mut Shader, c: Def, d: DType) -> Def {
    match d {
        DType::Bool => c,
        DType::F16 | DType::BF16 | DType::F32 => s.alu("b2f32", &[c]),
        _ => s.alu(&format!("b2i{}", bits(d)), &[c]),
    }
}

/// `x != 0` for a value of type `d` computed in `ibits` bits.
pub fn truthy(s: &mut Shader, x: Def, d: DType, ibits: u32) -> Def {
    match d {
        DType::Bool => x,
        DType::F16 | DType::BF16 | DType::F32 => {
            let z = fimm(s, 0.0);
            s.alu("fneu", &[x, z])
        }
        _ => {
            let z = s.imm(ibits, 0);
            s.alu("ine", &[x, z])
        }
    }
}

/// C's `fmod` (the OpenCL renderer's): NIR's `frem` is `a - b·trunc(a/b)`, NaN for a finite `a` over an infinite
/// `b`, where `fmod` gives `a`.
fn frem(s: &mut Shader, a: Def, b: Def) -> Def {
    let r = s.alu("frem", &[a, b]);
    let (abs_a, abs_b) = (s.alu("fabs", &[a]), s.alu("fabs", &[b]));
    let inf = fimm(s, f32::INFINITY);
    let (a_finite, b_inf) = (s.alu("flt", &[abs_a, inf]), s.alu("feq", &[abs_b, inf]));
    let keep_a = s.alu("iand", &[a_finite, b_inf]);
    s.alu("bcsel", &[keep_a, a, r])
}

/// NaN-propagating float max/min (the OpenCL renderer's `pl_fmax`/`pl_fmin`).
fn fmaxmin(s: &mut Shader, max: bool, a: Def, b: Def) -> Def {
    let r = s.alu(if max { "fmax" } else { "fmin" }, &[a, b]);
    let (na, nb) = (is_nan(s, a), is_nan(s, b));
    let either = s.alu("ior", &[na, nb]);
    let nan = fimm(s, f32::NAN);
    s.alu("bcsel", &[either, nan, r])
}

/// `a op b` on operands of type `d` (`ibits` bits when an integer is computed narrower than its type).
pub fn binary(s: &mut Shader, op: BinOp, d: DType, ibits: u32, a: Def, b: Def) -> Def {
    let f = d.is_float();
    let sg = signed(d);
    let i = |x: &str, y: &str| if sg { x.to_string() } else { y.to_string() };
    if d == DType::Bool {
        return match op {
            BinOp::Lt => {
                let na = s.alu("inot", &[a]);
                s.alu("iand", &[na, b])
            }
            BinOp::Le => {
                let na = s.alu("inot", &[a]);
                s.alu("ior", &[na, b])
            }
            BinOp::Eq => s.alu("ieq", &[a, b]),
            BinOp::Ne => s.alu("ine", &[a, b]),
            BinOp::And | BinOp::Mul | BinOp::Min => s.alu("iand", &[a, b]),
            BinOp::Or | BinOp::Max => s.alu("ior", &[a, b]),
            BinOp::Xor | BinOp::Add | BinOp::Sub => s.alu("ixor", &[a, b]),
            other => {
                let (x, y) = (s.alu("b2i32", &[a]), s.alu("b2i32", &[b]));
                let r = binary(s, other, DType::I32, 32, x, y);
                let z = s_zero(s, 32);
                s.alu("ine", &[r, z])
            }
        };
    }
    match op {
        BinOp::Add => s.alu(if f { "fadd" } else { "iadd" }, &[a, b]),
        BinOp::Sub => s.alu(if f { "fsub" } else { "isub" }, &[a, b]),
        BinOp::Mul => s.alu(if f { "fmul" } else { "imul" }, &[a, b]),
        BinOp::Div if f => s.alu("fdiv", &[a, b]),
        BinOp::Rem if f => frem(s, a, b),
        BinOp::Div | BinOp::Rem => {
            let name = match op {
                BinOp::Div => i("idiv", "udiv"),
                _ => i("irem", "umod"),
            };
            let q = s.alu(&name, &[a, b]);
            let z = s_zero(s, ibits);
            let by_zero = s.alu("ieq", &[b, z]);
            s.alu("bcsel", &[by_zero, z, q])
        }
        BinOp::Max if f => fmaxmin(s, true, a, b),
        BinOp::Min if f => fmaxmin(s, false, a, b),
        BinOp::Max => s.alu(&i("imax", "umax"), &[a, b]),
        BinOp::Min => s.alu(&i("imin", "umin"), &[a, b]),
        BinOp::Pow => pow(s, a, b),
        BinOp::Atan2 => s.builtin("atan2", a, Some(b)),
        BinOp::Lt if f => s.alu("flt", &[a, b]),
        BinOp::Le if f => s.alu("fge", &[b, a]),
        BinOp::Eq if f => s.alu("feq", &[a, b]),
        BinOp::Ne if f => s.alu("fneu", &[a, b]),
        BinOp::Lt => s.alu(&i("ilt", "ult"), &[a, b]),
        BinOp::Le => s.alu(&i("ige", "uge"), &[b, a]),
        BinOp::Eq => s.alu("ieq", &[a, b]),
        BinOp::Ne => s.alu("ine", &[a, b]),
        BinOp::And => s.alu("iand", &[a, b]),
        BinOp::Or => s.alu("ior", &[a, b]),
        BinOp::Xor => s.alu("ixor", &[a, b]),
        BinOp::Shl | BinOp::Shr => {
            // NIR shifts take a 32-bit amount and use it modulo the width.
            let width = s.imm(ibits, u64::from(8 * d.size() as u32));
            let too_far = s.alu("uge", &[b, width]);
            let amount = resize(s, b, ibits, false, 32);
            let (shifted, fill) = if op == BinOp::Shl {
                (s.alu("ishl", &[a, amount]), s_zero(s, ibits))
            } else if sg {
                let top = s.imm(32, u64::from(ibits - 1));
                (s.alu("ishr", &[a, amount]), s.alu("ishr", &[a, top]))
            } else {
                (s.alu("ushr", &[a, amount]), s_zero(s, ibits))
            };
            s.alu("bcsel", &[too_far, fill, shifted])
        }
    }
}

fn s_zero(s: &mut Shader, bits: u32) -> Def {
    s.imm(bits, 0)
}

/// `pow` as OpenCL defines it for a negative base: real for an integer exponent (its sign from the
/// exponent's parity), NaN otherwise.
fn pow(s: &mut Shader, x: Def, y: Def) -> Def {
    let ax = s.alu("fabs", &[x]);
    let r = s.alu("fpow", &[ax, y]);
    let zero = fimm(s, 0.0);
    let neg = s.alu("flt", &[x, zero]);
    let ty = s.alu("ftrunc", &[y]);
    let integral = s.alu("feq", &[ty, y]);
    let half = fimm(s, 0.5);
    let hy = s.alu("fmul", &[y, half]);
    let thy = s.alu("ftrunc", &[hy]);
    let odd = s.alu("fneu", &[thy, hy]);
    let nr = s.alu("fneg", &[r]);
    let signed = s.alu("bcsel", &[odd, nr, r]);
    let nan = fimm(s, f32::NAN);
    let neg_result = s.alu("bcsel", &[integral, signed, nan]);
    s.alu("bcsel", &[neg, neg_result, r])
}

/// `op x` for `x` of type `from` (computed in `ibits` bits) giving type `d`.
pub fn unary(s: &mut Shader, op: UnOp, from: DType, ibits: u32, x: Def, d: DType) -> Def {
    if op == UnOp::Not {
        let t = truthy(s, x, from, ibits);
        let n = s.alu("inot", &[t]);
        return from_bool(s, n, d);
    }
    if !from.is_float() {
        let sg = signed(from);
        return match op {
            UnOp::Neg => s.alu("ineg", &[x]),
            UnOp::Abs if sg => s.alu("iabs", &[x]),
            UnOp::Abs | UnOp::Floor | UnOp::Ceil | UnOp::Round | UnOp::Trunc => x,
            UnOp::Sign if sg => s.alu("isign", &[x]),
            UnOp::Sign => {
                let z = s_zero(s, ibits);
                let nz = s.alu("ine", &[x, z]);
                resize(s, nz, 1, false, ibits)
            }
            UnOp::IsNan | UnOp::IsInf => {
                let f = s.imm(1, 0);
                from_bool(s, f, d)
            }
            _ => {
                let xf = s.alu(&format!("{}2f32", if sg { "i" } else { "u" }), &[x]);
                let r = unary(s, op, DType::F32, 32, xf, DType::F32);
                float_to_int(s, r, d)
            }
        };
    }
    match op {
        UnOp::Neg => s.alu("fneg", &[x]),
        UnOp::Abs => s.alu("fabs", &[x]),
        UnOp::Recip => s.alu("frcp", &[x]),
        UnOp::Sign => s.alu("fsign", &[x]),
        UnOp::IsNan => {
            let c = is_nan(s, x);
            from_bool(s, c, d)
        }
        UnOp::IsInf => {
            let a = s.alu("fabs", &[x]);
            let inf = fimm(s, f32::INFINITY);
            let c = s.alu("feq", &[a, inf]);
            from_bool(s, c, d)
        }
        UnOp::Exp => {
            let k = fimm(s, std::f32::consts::LOG2_E);
            let y = s.alu("fmul", &[x, k]);
            s.alu("fexp2", &[y])
        }
        UnOp::Log => {
            let l = s.alu("flog2", &[x]);
            let k = fimm(s, std::f32::consts::LN_2);
            s.alu("fmul", &[l, k])
        }
        UnOp::Sqrt => s.alu("fsqrt", &[x]),
        UnOp::Sin => s.alu("fsin", &[x]),
        UnOp::Cos => s.alu("fcos", &[x]),
        UnOp::Tan => {
            let (sn, cs) = (s.alu("fsin", &[x]), s.alu("fcos", &[x]));
            s.alu("fdiv", &[sn, cs])
        }
        UnOp::Tanh => tanh(s, x),
        UnOp::Erf => erf(s, x),
        UnOp::Floor => s.alu("ffloor", &[x]),
        UnOp::Ceil => s.alu("fceil", &[x]),
        UnOp::Round => s.alu("fround_even", &[x]),
        UnOp::Trunc => s.alu("ftrunc", &[x]),
        UnOp::Atan => s.builtin("atan", x, None),
        UnOp::Asin | UnOp::Acos => {
            // asin x = atan2(x, √(1-x²)), acos x = atan2(√(1-x²), x)
            let one = fimm(s, 1.0);
            let xx = s.alu("fmul", &[x, x]);
            let r = s.alu("fsub", &[one, xx]);
            let c = s.alu("fsqrt", &[r]);
            if op == UnOp::Asin {
                s.builtin("atan2", x, Some(c))
            } else {
                s.builtin("atan2", c, Some(x))
            }
        }
        UnOp::Not => unreachable!("handled above"),
    }
}

/// tanh x = sign(x)·(1 - e)/(1 + e), e = exp(-2|x|): no overflow for any x.
fn tanh(s: &mut Shader, x: Def) -> Def {
    let a = s.alu("fabs", &[x]);
    let k = fimm(s, -2.0 * std::f32::consts::LOG2_E);
    let t = s.alu("fmul", &[a, k]);
    let e = s.alu("fexp2", &[t]);
    let one = fimm(s, 1.0);
    let num = s.alu("fsub", &[one, e]);
    let den = s.alu("fadd", &[one, e]);
    let r = s.alu("fdiv", &[num, den]);
    let neg = s.alu("fneg", &[r]);
    let zero = fimm(s, 0.0);
    let lt = s.alu("flt", &[x, zero]);
    s.alu("bcsel", &[lt, neg, r])
}

/// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, float's own precision near 1).
fn erf(s: &mut Shader, x: Def) -> Def {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_7, -1.453_152_1, 1.061_405_4];
    let a = s.alu("fabs", &[x]);
    let one = fimm(s, 1.0);
    let p = fimm(s, P);
    let pa = s.alu("fmul", &[p, a]);
    let den = s.alu("fadd", &[one, pa]);
    let t = s.alu("frcp", &[den]);
    let mut poly = fimm(s, A[4]);
    for &c in A[..4].iter().rev() {
        let m = s.alu("fmul", &[poly, t]);
        let cc = fimm(s, c);
        poly = s.alu("fadd", &[m, cc]);
    }
    poly = s.alu("fmul", &[poly, t]);
    let aa = s.alu("fmul", &[a, a]);
    let k = fimm(s, -std::f32::consts::LOG2_E);
    let ex = s.alu("fmul", &[aa, k]);
    let e = s.alu("fexp2", &[ex]);
    let pe = s.alu("fmul", &[poly, e]);
    let r = s.alu("fsub", &[one, pe]);
    let neg = s.alu("fneg", &[r]);
    let zero = fimm(s, 0.0);
    let lt = s.alu("flt", &[x, zero]);
    s.alu("bcsel", &[lt, neg, r])
}

/// A float truncated to a saturated i64 (NaN to 0), then wrapped to integer type `d`.
pub fn float_to_int(s: &mut Shader, x: Def, d: DType) -> Def {
    let lo = fimm(s, -9.223_372e18);
    let hi = fimm(s, 9.223_371_5e18);
    let c = s.alu("fmax", &[x, lo]);
    let c = s.alu("fmin", &[c, hi]);
    let i = s.alu("f2i64", &[c]);
    let nan = is_nan(s, x);
    let z = s.imm(64, 0);
    let i = s.alu("bcsel", &[nan, z, i]);
    // Saturation at the top: float's largest below 2^63 is 2^63 - 2^39; values beyond go to i64::MAX.
    let big = fimm(s, 9.223_372e18);
    let over = s.alu("fge", &[x, big]);
    let max = s.imm(64, i64::MAX as u64);
    let i = s.alu("bcsel", &[over, max, i]);
    resize(s, i, 64, true, bits(d))
}

/// `(d) x` for `x` of type `from` (an integer computed in `ibits` bits).
pub fn cast(s: &mut Shader, x: Def, from: DType, ibits: u32, d: DType) -> Def {
    if d == DType::Bool {
        return truthy(s, x, from, ibits);
    }
    if d.is_float() {
        let f = if from.is_float() {
            x
        } else if from == DType::Bool {
            s.alu("b2f32", &[x])
        } else {
            s.alu(&format!("{}2f32", if signed(from) { "i" } else { "u" }), &[x])
        };
        return match d {
            DType::F16 => round_half(s, f),
            DType::BF16 => round_bf16(s, f),
            _ => f,
        };
    }
    if from.is_float() {
        return float_to_int(s, x, d);
    }
    resize(s, x, ibits, signed(from), bits(d))
}

/// A float rounded to the nearest half (ties to even), kept as float.
pub fn round_half(s: &mut Shader, f: Def) -> Def {
    let h = s.alu("f2f16_rtne", &[f]);
    s.alu("f2f32", &[h])
}

/// The 16 bits of the bfloat16 nearest to float `f` (ties to even; a NaN stays a quiet NaN), as the OpenCL
/// renderer's `pl_bf16_bits`.
pub fn bf16_bits(s: &mut Shader, f: Def) -> Def {
    let abs_mask = s.imm(32, 0x7fff_ffff);
    let abs = s.alu("iand", &[f, abs_mask]);
    let inf = s.imm(32, 0x7f80_0000);
    let nan = s.alu("ult", &[inf, abs]);
    let quiet_bit = s.imm(32, 0x0040_0000);
    let quiet = s.alu("ior", &[f, quiet_bit]);
    let sixteen = s.imm(32, 16);
    let one = s.imm(32, 1);
    let high = s.alu("ushr", &[f, sixteen]);
    let lsb = s.alu("iand", &[high, one]);
    let half_ulp = s.imm(32, 0x7fff);
    let biased = s.alu("iadd", &[f, half_ulp]);
    let rounded = s.alu("iadd", &[biased, lsb]);
    let r = s.alu("bcsel", &[nan, quiet, rounded]);
    let r = s.alu("ushr", &[r, sixteen]);
    resize(s, r, 32, false, 16)
}

/// The float whose top 16 bits are the bfloat16 `b` (16 bits).
pub fn bf16_value(s: &mut Shader, b: Def) -> Def {
    let w = resize(s, b, 16, false, 32);
    let sixteen = s.imm(32, 16);
    s.alu("ishl", &[w, sixteen])
}

/// A float rounded to the nearest bfloat16 (ties to even), kept as float.
pub fn round_bf16(s: &mut Shader, f: Def) -> Def {
    let b = bf16_bits(s, f);
    bf16_value(s, b)
}

/// The reinterpretation of `x` (type `from`, `ibits` bits) as type `d`.
pub fn bitcast(s: &mut Shader, x: Def, from: DType, ibits: u32, d: DType) -> Def {
    match (from, d) {
        (DType::F16, _) => {
            let h = s.alu("f2f16_rtne", &[x]);
            resize(s, h, 16, false, bits(d))
        }
        (_, DType::F16) => {
            let h = resize(s, x, ibits, false, 16);
            s.alu("f2f32", &[h])
        }
        (DType::BF16, _) => {
            let b = bf16_bits(s, x);
            resize(s, b, 16, false, bits(d))
        }
        (_, DType::BF16) => {
            let b = resize(s, x, ibits, false, 16);
            bf16_value(s, b)
        }
        _ => resize(s, x, ibits, signed(from), bits(d)),
    }
}

/// `a` and `b` combined by a reduction's operator on type `d`.
pub fn combine(s: &mut Shader, op: RedOp, d: DType, a: Def, b: Def) -> Def {
    let bop = match op {
        RedOp::Sum => BinOp::Add,
        RedOp::Prod => BinOp::Mul,
        RedOp::Max => BinOp::Max,
        RedOp::Min => BinOp::Min,
    };
    binary(s, bop, d, bits(d), a, b)
}
