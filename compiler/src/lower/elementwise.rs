//! Elementwise operators: arithmetic, activations, comparisons and logic, casts.

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Add" => |c| binary(c, BinOp::Add),
        "Sub" => |c| binary(c, BinOp::Sub),
        "Mul" => |c| binary(c, BinOp::Mul),
        "Div" => |c| binary(c, BinOp::Div),
        "Pow" => pow,
        "Mod" => modulo,
        "Max" => |c| variadic(c, BinOp::Max),
        "Min" => |c| variadic(c, BinOp::Min),
        "Sum" => |c| variadic(c, BinOp::Add),
        "Mean" => mean,
        "Equal" => |c| binary(c, BinOp::Eq),
        "Less" => |c| binary(c, BinOp::Lt),
        "LessOrEqual" => |c| binary(c, BinOp::Le),
        "Greater" => |c| swapped(c, BinOp::Lt),
        "GreaterOrEqual" => |c| swapped(c, BinOp::Le),
        "And" => |c| binary(c, BinOp::And),
        "Or" => |c| binary(c, BinOp::Or),
        "Xor" => |c| binary(c, BinOp::Xor),
        "BitShift" => bitshift,
        "Not" => |c| unary(c, UnOp::Not),
        "Neg" => |c| unary(c, UnOp::Neg),
        "Abs" => |c| unary(c, UnOp::Abs),
        "Exp" => |c| unary(c, UnOp::Exp),
        "Log" => |c| unary(c, UnOp::Log),
        "Sqrt" => |c| unary(c, UnOp::Sqrt),
        "Reciprocal" => |c| unary(c, UnOp::Recip),
        "Floor" => |c| unary(c, UnOp::Floor),
        "Ceil" => |c| unary(c, UnOp::Ceil),
        "Round" => |c| unary(c, UnOp::Round),
        "Sign" => |c| unary(c, UnOp::Sign),
        "Sin" => |c| unary(c, UnOp::Sin),
        "Cos" => |c| unary(c, UnOp::Cos),
        "Tan" => |c| unary(c, UnOp::Tan),
        "Atan" => |c| unary(c, UnOp::Atan),
        "Asin" => |c| unary(c, UnOp::Asin),
        "Acos" => |c| unary(c, UnOp::Acos),
        "Tanh" => |c| unary(c, UnOp::Tanh),
        "Erf" => |c| unary(c, UnOp::Erf),
        "IsNaN" => |c| unary(c, UnOp::IsNan),
        "IsInf" => is_inf,
        "Relu" => relu,
        "LeakyRelu" => leaky_relu,
        "PRelu" => prelu,
        "Elu" => elu,
        "Selu" => selu,
        "Celu" => celu,
        "ThresholdedRelu" => thresholded_relu,
        "Sigmoid" => |c| one(c, sigmoid),
        "HardSigmoid" => hard_sigmoid,
        "HardSwish" => hard_swish,
        "Softplus" => |c| one(c, softplus),
        "Softsign" => softsign,
        "Mish" => mish,
        "Gelu" => gelu,
        "Clip" => clip,
        "Shrink" => shrink,
        "Where" => where_,
        "Cast" => cast,
        "CastLike" => cast_like,
        "Identity" => identity,
        "Dropout" => dropout,
        _ => return None,
    })
}

/// A constant with `x`'s dtype and shape.
pub(super) fn konst(p: &mut Program, x: &Lazy, v: f64) -> Lazy {
    p.full(x.dtype, &x.shape, v)
}

/// `x op v` for a scalar `v`.
pub(super) fn with(p: &mut Program, op: BinOp, x: &Lazy, v: f64) -> Lazy {
    let k = konst(p, x, v);
    p.binary(op, x, &k)
}

pub(super) fn sigmoid(p: &mut Program, x: &Lazy) -> Lazy {
    let neg = p.unary(UnOp::Neg, x);
    let e = p.unary(UnOp::Exp, &neg);
    let d = with(p, BinOp::Add, &e, 1.0);
    p.unary(UnOp::Recip, &d)
}

pub(super) fn tanh(p: &mut Program, x: &Lazy) -> Lazy {
    p.unary(UnOp::Tanh, x)
}

fn softplus(p: &mut Program, x: &Lazy) -> Lazy {
    // log(1 + exp(x)), switching to x where exp would overflow the float.
    let e = p.unary(UnOp::Exp, x);
    let e1 = with(p, BinOp::Add, &e, 1.0);
    let l = p.unary(UnOp::Log, &e1);
    let lim = konst(p, x, 20.0);
    let big = p.binary(BinOp::Lt, &lim, x);
    p.where_(&big, x, &l)
}

fn one(c: &mut NodeCtx<'_>, f: fn(&mut Program, &Lazy) -> Lazy) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    Ok(vec![f(c.p(), &x)])
}

fn unary(c: &mut NodeCtx<'_>, op: UnOp) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    Ok(vec![c.p().unary(op, &x)])
}

fn bin(c: &mut NodeCtx<'_>, op: BinOp, a: &Lazy, b: &Lazy) -> Result<Lazy> {
    let b = if a.dtype != b.dtype { c.p().cast(b, a.dtype) } else { b.clone() };
    let v = c.broadcast(&[a, &b])?;
    Ok(c.p().binary(op, &v[0], &v[1]))
}

fn binary(c: &mut NodeCtx<'_>, op: BinOp) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    if a.dtype != b.dtype {
        return Err(c.err(format!("operand types differ: {} and {}", a.dtype, b.dtype)));
    }
    Ok(vec![bin(c, op, &a, &b)?])
}

fn swapped(c: &mut NodeCtx<'_>, op: BinOp) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    Ok(vec![bin(c, op, &b, &a)?])
}

fn pow(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    if !a.dtype.is_float() {
        // Integer bases: compute in float64 and convert back, as onnxruntime does.
        let af = c.p().cast(&a, DType::F64);
        let bf = c.p().cast(&b, DType::F64);
        let r = bin(c, BinOp::Pow, &af, &bf)?;
        return Ok(vec![c.p().cast(&r, a.dtype)]);
    }
    Ok(vec![bin(c, BinOp::Pow, &a, &b)?])
}

fn modulo(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    let fmod = c.attr_int("fmod", 0) != 0;
    let v = c.broadcast(&[&a, &b])?;
    let p = c.p();
    let r = p.binary(BinOp::Rem, &v[0], &v[1]);
    if fmod {
        return Ok(vec![r]);
    }
    // Python-style: the result takes the divisor's sign.
    let zero = konst(p, &r, 0.0);
    let r_neg = p.binary(BinOp::Lt, &r, &zero);
    let b_neg = p.binary(BinOp::Lt, &v[1], &zero);
    let differ = p.binary(BinOp::Xor, &r_neg, &b_neg);
    let nonzero = p.binary(BinOp::Ne, &r, &zero);
    let fix = p.binary(BinOp::And, &differ, &nonzero);
    let shifted = p.binary(BinOp::Add, &r, &v[1]);
    Ok(vec![p.where_(&fix, &shifted, &r)])
}

fn bitshift(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let op = match c.attr_str("direction", "").as_str() {
        "LEFT" => BinOp::Shl,
        "RIGHT" => BinOp::Shr,
        d => return Err(c.err(format!("unknown direction `{d}`"))),
    };
    binary(c, op)
}

fn variadic(c: &mut NodeCtx<'_>, op: BinOp) -> Result<Vec<Lazy>> {
    let mut acc = c.input(0)?;
    for i in 1..c.num_inputs() {
        let x = c.input(i)?;
        acc = bin(c, op, &acc, &x)?;
    }
    Ok(vec![acc])
}

fn mean(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let n = c.num_inputs() as f64;
    let s = variadic(c, BinOp::Add)?.remove(0);
    Ok(vec![with(c.p(), BinOp::Div, &s, n)])
}

fn is_inf(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let (pos, neg) = (c.attr_int("detect_positive", 1) != 0, c.attr_int("detect_negative", 1) != 0);
    let p = c.p();
    let inf = p.unary(UnOp::IsInf, &x);
    let zero = konst(p, &x, 0.0);
    let sign_ok = match (pos, neg) {
        (true, true) => return Ok(vec![inf]),
        (true, false) => p.binary(BinOp::Lt, &zero, &x),
        (false, true) => p.binary(BinOp::Lt, &x, &zero),
        (false, false) => return Ok(vec![p.full(DType::Bool, &x.shape, 0.0)]),
    };
    Ok(vec![p.binary(BinOp::And, &inf, &sign_ok)])
}

fn relu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    Ok(vec![with(c.p(), BinOp::Max, &x, 0.0)])
}

/// `where(x > 0, x, neg(x))`.
fn piecewise(p: &mut Program, x: &Lazy, neg: &Lazy) -> Lazy {
    let zero = konst(p, x, 0.0);
    let pos = p.binary(BinOp::Lt, &zero, x);
    p.where_(&pos, x, neg)
}

fn leaky_relu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 0.01) as f64;
    let p = c.p();
    let neg = with(p, BinOp::Mul, &x, alpha);
    Ok(vec![piecewise(p, &x, &neg)])
}

fn prelu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, slope) = (c.input(0)?, c.input(1)?);
    let v = c.broadcast(&[&x, &slope])?;
    let p = c.p();
    let neg = p.binary(BinOp::Mul, &v[0], &v[1]);
    Ok(vec![piecewise(p, &v[0], &neg)])
}

fn expm1_scaled(p: &mut Program, x: &Lazy, alpha: f64) -> Lazy {
    let e = p.unary(UnOp::Exp, x);
    let e1 = with(p, BinOp::Sub, &e, 1.0);
    with(p, BinOp::Mul, &e1, alpha)
}

fn elu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 1.0) as f64;
    let p = c.p();
    let neg = expm1_scaled(p, &x, alpha);
    Ok(vec![piecewise(p, &x, &neg)])
}

fn selu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 1.673_263_2) as f64;
    let gamma = c.attr_float("gamma", 1.050_701) as f64;
    let p = c.p();
    let neg = expm1_scaled(p, &x, alpha);
    let y = piecewise(p, &x, &neg);
    Ok(vec![with(p, BinOp::Mul, &y, gamma)])
}

fn celu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 1.0) as f64;
    let p = c.p();
    let xa = with(p, BinOp::Div, &x, alpha);
    let neg = expm1_scaled(p, &xa, alpha);
    let zero = konst(p, &x, 0.0);
    let neg = p.binary(BinOp::Min, &neg, &zero);
    let pos = p.binary(BinOp::Max, &x, &zero);
    Ok(vec![p.binary(BinOp::Add, &pos, &neg)])
}

fn thresholded_relu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 1.0) as f64;
    let p = c.p();
    let a = konst(p, &x, alpha);
    let zero = konst(p, &x, 0.0);
    let above = p.binary(BinOp::Lt, &a, &x);
    Ok(vec![p.where_(&above, &x, &zero)])
}

fn clamp01(p: &mut Program, x: &Lazy) -> Lazy {
    let lo = with(p, BinOp::Max, x, 0.0);
    with(p, BinOp::Min, &lo, 1.0)
}

fn hard_sigmoid(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let (alpha, beta) = (c.attr_float("alpha", 0.2) as f64, c.attr_float("beta", 0.5) as f64);
    let p = c.p();
    let ax = with(p, BinOp::Mul, &x, alpha);
    let y = with(p, BinOp::Add, &ax, beta);
    Ok(vec![clamp01(p, &y)])
}

fn hard_swish(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let p = c.p();
    let ax = with(p, BinOp::Mul, &x, 1.0 / 6.0);
    let y = with(p, BinOp::Add, &ax, 0.5);
    let s = clamp01(p, &y);
    Ok(vec![p.binary(BinOp::Mul, &x, &s)])
}

fn softsign(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let p = c.p();
    let a = p.unary(UnOp::Abs, &x);
    let d = with(p, BinOp::Add, &a, 1.0);
    Ok(vec![p.binary(BinOp::Div, &x, &d)])
}

fn mish(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let p = c.p();
    let sp = softplus(p, &x);
    let t = tanh(p, &sp);
    Ok(vec![p.binary(BinOp::Mul, &x, &t)])
}

fn gelu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let approx = c.attr_str("approximate", "none");
    let p = c.p();
    let inner = match approx.as_str() {
        "none" => {
            let s = with(p, BinOp::Mul, &x, std::f64::consts::FRAC_1_SQRT_2);
            p.unary(UnOp::Erf, &s)
        }
        "tanh" => {
            let x3 = p.binary(BinOp::Mul, &x, &x);
            let x3 = p.binary(BinOp::Mul, &x3, &x);
            let t = with(p, BinOp::Mul, &x3, 0.044715);
            let s = p.binary(BinOp::Add, &x, &t);
            let s = with(p, BinOp::Mul, &s, (2.0 / std::f64::consts::PI).sqrt());
            tanh(p, &s)
        }
        other => return Err(c.err(format!("unknown approximate `{other}`"))),
    };
    let one = with(p, BinOp::Add, &inner, 1.0);
    let hx = with(p, BinOp::Mul, &x, 0.5);
    Ok(vec![p.binary(BinOp::Mul, &hx, &one)])
}

fn clip(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let (lo, hi) = if c.opset() < 11 {
        let min = c.node.attr_float("min").map_or(f64::NEG_INFINITY, f64::from);
        let max = c.node.attr_float("max").map_or(f64::INFINITY, f64::from);
        let lo = c.p().full(x.dtype, &[], min);
        let hi = c.p().full(x.dtype, &[], max);
        (Some(lo), Some(hi))
    } else {
        (c.opt_input(1)?, c.opt_input(2)?)
    };
    let mut y = x;
    if let Some(lo) = lo {
        y = bin(c, BinOp::Max, &y, &lo)?;
    }
    if let Some(hi) = hi {
        y = bin(c, BinOp::Min, &y, &hi)?;
    }
    Ok(vec![y])
}

fn shrink(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let (bias, lambd) = (c.attr_float("bias", 0.0) as f64, c.attr_float("lambd", 0.5) as f64);
    let p = c.p();
    let lo = konst(p, &x, -lambd);
    let hi = konst(p, &x, lambd);
    let below = p.binary(BinOp::Lt, &x, &lo);
    let above = p.binary(BinOp::Lt, &hi, &x);
    let plus = with(p, BinOp::Add, &x, bias);
    let minus = with(p, BinOp::Sub, &x, bias);
    let zero = konst(p, &x, 0.0);
    let y = p.where_(&above, &minus, &zero);
    Ok(vec![p.where_(&below, &plus, &y)])
}

fn where_(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (cond, a, b) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let v = c.broadcast(&[&cond, &a, &b])?;
    Ok(vec![c.p().where_(&v[0], &v[1], &v[2])])
}

fn cast_to(c: &mut NodeCtx<'_>, x: &Lazy, to: DType) -> Lazy {
    if to == DType::Bool {
        let zero = konst(c.p(), x, 0.0);
        return c.p().binary(BinOp::Ne, x, &zero);
    }
    c.p().cast(x, to)
}

fn cast(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let code = c.node.attr_int("to").ok_or_else(|| c.err("missing attribute `to`"))?;
    let to = crate::onnx::data::dtype_from_onnx(code)
        .ok_or_else(|| c.err(format!("unsupported target type {}", crate::onnx::data::onnx_dtype_name(code))))?;
    Ok(vec![cast_to(c, &x, to)])
}

fn cast_like(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, like) = (c.input(0)?, c.input(1)?);
    Ok(vec![cast_to(c, &x, like.dtype)])
}

fn identity(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    Ok(vec![c.input(0)?])
}

fn dropout(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    // Inference: the identity, and an all-true mask.
    let x = c.input(0)?;
    if let Some(t) = c.opt_const_input(2)? {
        if t.to_i64().first().is_some_and(|&v| v != 0) {
            return Err(c.err("training mode (random dropout) is not supported"));
        }
    }
    let mask = c.p().full(DType::Bool, &x.shape, 1.0);
    Ok(vec![x, mask])
}
