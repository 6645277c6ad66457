//! C spellings of types, constants and single IR operations; [`super::c`] schedules them.
//!
//! Every expression agrees with [`crate::ir::interp`]:
//! - integer arithmetic wraps in the dtype (computed in an unsigned type, never signed overflow);
//! - integer division and remainder truncate; division by zero gives 0 at run time (the interpreter
//!   refuses to fold it), and `MIN / -1` wraps to `MIN` (`MIN % -1` is 0) — never a trap;
//! - shifts use the amount modulo 64 on the value widened to 64 bits, then wrap;
//! - float `Max`/`Min` propagate NaN; float-to-int casts truncate, saturate to int64, map NaN to 0,
//!   then wrap to the target (the interpreter's `cast_int`); casts to bool test `!= 0`;
//! - float16 values compute in float and are rounded to float16 after every operation.

use std::collections::BTreeSet;

use pilot_core::DType;

use crate::ir::{BinOp, Const, RedOp, UnOp};

/// The prelude sections an expression needs (see [`super::cmath::prelude`]).
pub type Uses = BTreeSet<&'static str>;

/// The C type of values of `d` in registers (float16 computes in float, bool is 0/1 in `u8`).
pub fn value_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F16 => "f32",
        DType::F64 => "f64",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 | DType::Bool => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
    }
}

/// The C element type of a buffer of `d` (float16 is stored as its bits).
pub fn storage_type(d: DType) -> &'static str {
    if d == DType::F16 {
        "u16"
    } else {
        value_type(d)
    }
}

fn is_unsigned(d: DType) -> bool {
    matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool)
}

/// The unsigned type integer arithmetic of `d` wraps in.
fn wrap_type(d: DType) -> &'static str {
    if d.size() == 8 {
        "u64"
    } else {
        "u32"
    }
}

/// `e` converted to integer dtype `d` as a C conversion (two's complement wrap), bool as `!= 0`.
fn wrap(d: DType, e: &str) -> String {
    if d == DType::Bool {
        format!("({e} != 0)")
    } else {
        format!("({})({e})", value_type(d))
    }
}

/// Suffix of the prelude function for float dtype `d`.
fn suffix(d: DType) -> &'static str {
    if d == DType::F64 {
        "d"
    } else {
        "f"
    }
}

/// Rounds a float16 result to float16 (identity for other dtypes).
fn fround(d: DType, e: String, uses: &mut Uses) -> String {
    if d == DType::F16 {
        uses.insert("half");
        format!("pl_rh({e})")
    } else {
        e
    }
}

/// A C literal for `v` as a float (`f` suffix) or double, exact (hexadecimal), with inf and NaN.
pub fn float_literal(v: f64, single: bool) -> String {
    let f = if single { "f" } else { "" };
    if v.is_nan() {
        return format!("__builtin_nan{f}(\"\")");
    }
    if v.is_infinite() {
        let s = if v < 0.0 { "-" } else { "" };
        return format!("({s}__builtin_inf{f}())");
    }
    let bits = v.to_bits();
    let sign = if bits >> 63 != 0 { "-" } else { "" };
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let man = bits & ((1u64 << 52) - 1);
    let body = match (exp, man) {
        (0, 0) => "0x0p+0".to_string(),
        (0, m) => format!("0x0.{m:013x}p-1022"),
        (e, m) => format!("0x1.{m:013x}p{:+}", e - 1023),
    };
    if sign.is_empty() {
        format!("{body}{f}")
    } else {
        format!("({sign}{body}{f})")
    }
}

/// A C constant of dtype `d`.
pub fn constant(d: DType, c: Const) -> String {
    match d {
        DType::F32 => float_literal(c.as_f64() as f32 as f64, true),
        DType::F16 => float_literal(half::f16::from_f64(c.as_f64()).to_f64(), true),
        DType::F64 => float_literal(c.as_f64(), false),
        DType::Bool => if c.as_i64() != 0 { "1" } else { "0" }.to_string(),
        DType::U64 => format!("{}ull", c.as_i64() as u64),
        _ => {
            let i = c.as_i64();
            let lit = if i == i64::MIN {
                "(-0x7fffffffffffffffll - 1)".to_string()
            } else if i < 0 {
                format!("({i}ll)")
            } else {
                format!("{i}ll")
            };
            if d == DType::I64 {
                lit
            } else {
                format!("(({}){lit})", value_type(d))
            }
        }
    }
}

/// A float result `e` (a double) converted to non-float dtype `d` as the interpreter does.
fn from_double(d: DType, e: &str, uses: &mut Uses) -> String {
    if d == DType::Bool {
        format!("({e} != 0)")
    } else {
        uses.insert("f2i");
        format!("({})pl_d2i({e})", value_type(d))
    }
}

/// `op x` for an operand of dtype `d` (the result dtype is `d`, or bool for Not/IsNan/IsInf).
pub fn unary(op: UnOp, d: DType, x: &str, uses: &mut Uses) -> String {
    if !d.is_float() {
        return match op {
            UnOp::Not => format!("({x} == 0)"),
            UnOp::IsNan | UnOp::IsInf => "0".to_string(),
            UnOp::Floor | UnOp::Ceil | UnOp::Round | UnOp::Trunc => x.to_string(),
            UnOp::Neg | UnOp::Abs | UnOp::Sign if d == DType::Bool => x.to_string(),
            UnOp::Neg => wrap(d, &format!("0 - ({}){x}", wrap_type(d))),
            UnOp::Abs if is_unsigned(d) => x.to_string(),
            UnOp::Abs => format!("({x} < 0 ? {} : {x})", wrap(d, &format!("0 - ({}){x}", wrap_type(d)))),
            UnOp::Sign if is_unsigned(d) => format!("({})({x} != 0)", value_type(d)),
            UnOp::Sign => format!("({})(({x} > 0) - ({x} < 0))", value_type(d)),
            _ => {
                let e = unary(op, DType::F64, &format!("(f64){x}"), uses);
                from_double(d, &e, uses)
            }
        };
    }
    let s = suffix(d);
    let one = if d == DType::F64 { "1.0" } else { "1.0f" };
    let call = |name: &str, section: &'static str, uses: &mut Uses| {
        uses.insert(section);
        fround(d, format!("pl_{name}{s}({x})"), uses)
    };
    match op {
        UnOp::Neg => format!("(-{x})"),
        UnOp::Not => format!("({x} == 0)"),
        UnOp::Abs => call("fabs", "fabs", uses),
        UnOp::Exp => call("exp", "exp", uses),
        UnOp::Log => call("log", "log", uses),
        UnOp::Sqrt => {
            let b = if d == DType::F64 { "__builtin_sqrt" } else { "__builtin_sqrtf" };
            fround(d, format!("{b}({x})"), uses)
        }
        UnOp::Recip => fround(d, format!("({one} / {x})"), uses),
        UnOp::Sin => call("sin", "trig", uses),
        UnOp::Cos => call("cos", "trig", uses),
        UnOp::Tan => call("tan", "trig", uses),
        UnOp::Tanh => call("tanh", "tanh", uses),
        UnOp::Erf => call("erf", "erf", uses),
        UnOp::Floor => call("floor", "round", uses),
        UnOp::Ceil => call("ceil", "round", uses),
        UnOp::Round => call("round", "round", uses),
        UnOp::Trunc => call("trunc", "round", uses),
        UnOp::Sign => format!("({x} > 0 ? {one} : {x} < 0 ? -{one} : {x})"),
        UnOp::IsNan => format!("({x} != {x})"),
        UnOp::IsInf => {
            uses.insert("fabs");
            format!("(pl_fabs{s}({x}) == __builtin_inf{}())", if d == DType::F64 { "" } else { "f" })
        }
        UnOp::Atan => call("atan", "atan", uses),
        UnOp::Asin => call("asin", "atan", uses),
        UnOp::Acos => call("acos", "atan", uses),
    }
}

fn symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Max | BinOp::Min | BinOp::Pow | BinOp::Atan2 => "?",
    }
}

/// How a binary operation may be spelled.
#[derive(Clone, Copy, Debug, Default)]
pub struct BinHints {
    /// The right operand's value when it is a constant.
    pub rhs: Option<Const>,
    /// Index arithmetic (int64 over loop variables and constants only, no loaded values): it cannot
    /// overflow, so plain signed C arithmetic (which the optimizer reasons about best) is exact.
    pub index: bool,
}

/// `a op b` for operands of dtype `d`; `Err` for operations the IR does not define (bitwise ops
/// on floats).
pub fn binary(op: BinOp, d: DType, a: &str, b: &str, hints: BinHints, uses: &mut Uses) -> Result<String, String> {
    let sym = symbol(op);
    if op.is_compare() {
        return Ok(format!("({a} {sym} {b})"));
    }
    if d.is_float() {
        let s = suffix(d);
        return Ok(match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => fround(d, format!("({a} {sym} {b})"), uses),
            BinOp::Rem => {
                uses.insert("fmod");
                fround(d, format!("pl_fmod{s}({a}, {b})"), uses)
            }
            BinOp::Max => format!("(({a} > {b} || {a} != {a}) ? {a} : {b})"),
            BinOp::Min => format!("(({a} < {b} || {a} != {a}) ? {a} : {b})"),
            BinOp::Pow if hints.rhs.is_some_and(|c| c.as_f64() == 1.0) => a.to_string(),
            BinOp::Pow if hints.rhs.is_some_and(|c| c.as_f64() == 2.0) => fround(d, format!("({a} * {a})"), uses),
            BinOp::Pow => {
                uses.insert("pow");
                fround(d, format!("pl_pow{s}({a}, {b})"), uses)
            }
            BinOp::Atan2 => {
                uses.insert("atan");
                fround(d, format!("pl_atan2{s}({a}, {b})"), uses)
            }
            _ => return Err(format!("{op:?} on {d}")),
        });
    }
    let t = value_type(d);
    let w = wrap_type(d);
    let rhs_plain = hints.rhs.is_some_and(|c| c.as_i64() != 0 && (is_unsigned(d) || c.as_i64() != -1));
    Ok(match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul if hints.index => format!("({a} {sym} {b})"),
        BinOp::Add | BinOp::Sub | BinOp::Mul => wrap(d, &format!("({w}){a} {sym} ({w}){b}")),
        BinOp::Div | BinOp::Rem if rhs_plain => format!("({t})({a} {sym} {b})"),
        BinOp::Div | BinOp::Rem if is_unsigned(d) => format!("({t})({b} == 0 ? 0 : {a} {sym} {b})"),
        BinOp::Div => format!("({t})({b} == 0 ? 0 : {b} == -1 ? (i64)(0 - (u64){a}) : (i64){a} / {b})"),
        BinOp::Rem => format!("({t})(({b} == 0 || {b} == -1) ? 0 : {a} % {b})"),
        BinOp::Max => format!("({a} > {b} ? {a} : {b})"),
        BinOp::Min => format!("({a} < {b} ? {a} : {b})"),
        BinOp::Pow | BinOp::Atan2 => {
            let e = binary(op, DType::F64, &format!("(f64){a}"), &format!("(f64){b}"), BinHints::default(), uses)?;
            from_double(d, &e, uses)
        }
        BinOp::And | BinOp::Or | BinOp::Xor => format!("({t})({a} {sym} {b})"),
        BinOp::Shl => wrap(d, &format!("(u64)(i64){a} << ((u64){b} & 63)")),
        BinOp::Shr if is_unsigned(d) => wrap(d, &format!("(u64){a} >> ((u64){b} & 63)")),
        BinOp::Shr => wrap(d, &format!("(i64){a} >> ((u64){b} & 63)")),
        _ => return Err(format!("{op:?} on {d}")),
    })
}

/// The binary operation a reduction combines with.
pub fn combine_op(op: RedOp) -> BinOp {
    match op {
        RedOp::Sum => BinOp::Add,
        RedOp::Prod => BinOp::Mul,
        RedOp::Max => BinOp::Max,
        RedOp::Min => BinOp::Min,
    }
}

/// `x` (of dtype `from`) converted to `to`.
pub fn cast(from: DType, to: DType, x: &str, uses: &mut Uses) -> String {
    if to == DType::Bool {
        return format!("({x} != 0)");
    }
    if to == DType::F16 {
        uses.insert("half");
        return if from == DType::F16 { x.to_string() } else { format!("pl_rh((f32){x})") };
    }
    if to.is_float() {
        return format!("({}){x}", value_type(to));
    }
    if from.is_float() {
        uses.insert("f2i");
        let f = if from == DType::F64 { "pl_d2i" } else { "pl_f2i" };
        return format!("({}){f}({x})", value_type(to));
    }
    format!("({}){x}", value_type(to))
}

/// The bits of `x` (of dtype `from`) reinterpreted as `to` (same size).
pub fn bitcast(from: DType, to: DType, x: &str, uses: &mut Uses) -> String {
    let bits = match from {
        DType::F32 => format!("pl_fbits({x})"),
        DType::F64 => format!("pl_dbits({x})"),
        DType::F16 => {
            uses.insert("half");
            format!("pl_f2h({x})")
        }
        _ => x.to_string(),
    };
    match to {
        DType::F32 => format!("pl_bitsf((u32){bits})"),
        DType::F64 => format!("pl_bitsd((u64){bits})"),
        DType::F16 => {
            uses.insert("half");
            format!("pl_h2f((u16){bits})")
        }
        _ => wrap(to, &bits),
    }
}

/// Element `index` of buffer pointer `buf` of dtype `d`, as a value.
pub fn load(d: DType, buf: &str, index: &str, uses: &mut Uses) -> String {
    if d == DType::F16 {
        uses.insert("half");
        format!("pl_h2f({buf}[{index}])")
    } else {
        format!("{buf}[{index}]")
    }
}

/// A value of dtype `d` converted for storing into a buffer of `d`.
pub fn store(d: DType, v: &str, uses: &mut Uses) -> String {
    if d == DType::F16 {
        uses.insert("half");
        format!("pl_f2h({v})")
    } else {
        v.to_string()
    }
}
