//! The IR interpreter: constant folding of scalars and of whole tensors at compile time.
//! Float math is done in f64 and rounded to the node's dtype; integer math wraps to the dtype.

use std::collections::HashMap;

use pilot_core::DType;

use super::{cast_int, wrap_int, BinOp, Const, Ctx, Op, RedOp, UnOp, N};

fn round_to(dtype: DType, v: f64) -> Const {
    match dtype {
        DType::F32 => Const::float(v as f32 as f64),
        DType::F16 => Const::float(half::f16::from_f64(v).to_f64()),
        DType::BF16 => Const::float(half::bf16::from_f64(v).to_f64()),
        DType::F64 => Const::float(v),
        _ => Const::Int(cast_int(dtype, v)),
    }
}

/// erf(x) for constant folding: the Taylor series below |x| = 2 (converged to 1e-17), and the
/// Numerical Recipes Chebyshev fit of erfc above (relative error < 1.2e-7, below f32 resolution).
pub fn erf(x: f64) -> f64 {
    if x.abs() < 2.0 {
        let mut sum = x;
        let mut term = x;
        let x2 = x * x;
        for n in 1..60 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 {
                break;
            }
        }
        return sum * 2.0 / std::f64::consts::PI.sqrt();
    }
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        1.0 - r
    } else {
        r - 1.0
    }
}

/// Folds a unary op on a constant of `dtype`.
pub fn unary(op: UnOp, dtype: DType, c: Const) -> Const {
    if !dtype.is_float() && dtype != DType::Bool || matches!(op, UnOp::Not) {
        let i = c.as_i64();
        let r = match op {
            UnOp::Neg => i.wrapping_neg(),
            UnOp::Not => (i == 0) as i64,
            UnOp::Abs => i.wrapping_abs(),
            UnOp::Sign => i.signum(),
            UnOp::IsNan | UnOp::IsInf => 0,
            _ => return round_to(dtype, unary_f(op, i as f64)),
        };
        return if matches!(op, UnOp::Not) { Const::Int(r) } else { Const::Int(wrap_int(dtype, r)) };
    }
    let x = c.as_f64();
    match op {
        UnOp::IsNan => Const::Int(x.is_nan() as i64),
        UnOp::IsInf => Const::Int(x.is_infinite() as i64),
        _ => round_to(dtype, unary_f(op, x)),
    }
}

fn unary_f(op: UnOp, x: f64) -> f64 {
    match op {
        UnOp::Neg => -x,
        UnOp::Not => (x == 0.0) as i64 as f64,
        UnOp::Abs => x.abs(),
        UnOp::Exp => x.exp(),
        UnOp::Log => x.ln(),
        UnOp::Sqrt => x.sqrt(),
        UnOp::Recip => 1.0 / x,
        UnOp::Sin => x.sin(),
        UnOp::Cos => x.cos(),
        UnOp::Tan => x.tan(),
        UnOp::Tanh => x.tanh(),
        UnOp::Erf => erf(x),
        UnOp::Floor => x.floor(),
        UnOp::Ceil => x.ceil(),
        UnOp::Round => x.round_ties_even(),
        UnOp::Trunc => x.trunc(),
        UnOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnOp::IsNan => x.is_nan() as i64 as f64,
        UnOp::IsInf => x.is_infinite() as i64 as f64,
        UnOp::Atan => x.atan(),
        UnOp::Asin => x.asin(),
        UnOp::Acos => x.acos(),
    }
}

/// Folds a binary op on constants of `dtype` (the operands' dtype); `None` for integer division by
/// zero, which is left to run time.
pub fn binary(op: BinOp, dtype: DType, a: Const, b: Const) -> Option<Const> {
    let boolean = |v: bool| Some(Const::Int(v as i64));
    if dtype.is_float() {
        let (x, y) = (a.as_f64(), b.as_f64());
        return match op {
            BinOp::Lt => boolean(x < y),
            BinOp::Le => boolean(x <= y),
            BinOp::Eq => boolean(x == y),
            BinOp::Ne => boolean(x != y),
            _ => Some(round_to(
                dtype,
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::Rem => x % y,
                    BinOp::Max => {
                        if x.is_nan() || y.is_nan() {
                            f64::NAN
                        } else {
                            x.max(y)
                        }
                    }
                    BinOp::Min => {
                        if x.is_nan() || y.is_nan() {
                            f64::NAN
                        } else {
                            x.min(y)
                        }
                    }
                    BinOp::Pow => x.powf(y),
                    BinOp::Atan2 => x.atan2(y),
                    _ => return None,
                },
            )),
        };
    }
    let (x, y) = (a.as_i64(), b.as_i64());
    let unsigned = matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool);
    let r = match op {
        BinOp::Lt => return boolean(if unsigned { (x as u64) < (y as u64) } else { x < y }),
        BinOp::Le => return boolean(if unsigned { (x as u64) <= (y as u64) } else { x <= y }),
        BinOp::Eq => return boolean(x == y),
        BinOp::Ne => return boolean(x != y),
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div if y == 0 => return None,
        BinOp::Div if unsigned => ((x as u64) / (y as u64)) as i64,
        BinOp::Div => x.wrapping_div(y),
        BinOp::Rem if y == 0 => return None,
        BinOp::Rem if unsigned => ((x as u64) % (y as u64)) as i64,
        BinOp::Rem => x.wrapping_rem(y),
        BinOp::Max => {
            if unsigned {
                (x as u64).max(y as u64) as i64
            } else {
                x.max(y)
            }
        }
        BinOp::Min => {
            if unsigned {
                (x as u64).min(y as u64) as i64
            } else {
                x.min(y)
            }
        }
        BinOp::Pow => (x as f64).powf(y as f64) as i64,
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl if y as u64 >= (dtype.size() * 8) as u64 => 0,
        BinOp::Shr if y as u64 >= (dtype.size() * 8) as u64 => {
            if !unsigned && x < 0 {
                -1
            } else {
                0
            }
        }
        BinOp::Shl => x.wrapping_shl(y as u32),
        BinOp::Shr => {
            if unsigned {
                ((x as u64) >> y as u32) as i64
            } else {
                x >> y as u32
            }
        }
        BinOp::Atan2 => (x as f64).atan2(y as f64) as i64,
    };
    Some(Const::Int(wrap_int(dtype, r)))
}

fn combine(op: RedOp, dtype: DType, acc: Const, x: Const) -> Const {
    let bin = match op {
        RedOp::Sum => BinOp::Add,
        RedOp::Prod => BinOp::Mul,
        RedOp::Max => BinOp::Max,
        RedOp::Min => BinOp::Min,
    };
    binary(bin, dtype, acc, x).unwrap_or(acc)
}

/// Reads element `index` of buffer `buf`; out-of-range reads are the caller's error to report.
pub type Loader<'a> = dyn Fn(u32, i64) -> Option<Const> + 'a;

/// Evaluates `root` with loop variables bound in `env`. `None` if a load fails or a value cannot be
/// computed (integer division by zero).
pub fn eval(ctx: &Ctx, root: N, env: &mut HashMap<u32, i64>, load: &Loader<'_>) -> Option<Const> {
    let mut memo = HashMap::new();
    eval_in(ctx, root, env, load, &mut memo)
}

fn eval_in(
    ctx: &Ctx,
    n: N,
    env: &mut HashMap<u32, i64>,
    load: &Loader<'_>,
    memo: &mut HashMap<N, Const>,
) -> Option<Const> {
    if let Some(&c) = memo.get(&n) {
        return Some(c);
    }
    let dtype = ctx.dtype(n);
    let v = match ctx.op(n) {
        Op::Var(v) => Const::Int(*env.get(v)?),
        Op::Const(c) => *c,
        Op::Load { buf, index, valid } => {
            let ok = match valid {
                Some(v) => eval_in(ctx, *v, env, load, memo)?.as_i64() != 0,
                None => true,
            };
            if ok {
                let i = eval_in(ctx, *index, env, load, memo)?.as_i64();
                load(*buf, i)?
            } else if dtype.is_float() {
                Const::float(0.0)
            } else {
                Const::Int(0)
            }
        }
        Op::Unary(op, x) => {
            let xv = eval_in(ctx, *x, env, load, memo)?;
            unary(*op, ctx.dtype(*x), xv)
        }
        Op::Binary(op, a, b) => {
            let av = eval_in(ctx, *a, env, load, memo)?;
            let bv = eval_in(ctx, *b, env, load, memo)?;
            binary(*op, ctx.dtype(*a), av, bv)?
        }
        Op::Where(c, a, b) => {
            if eval_in(ctx, *c, env, load, memo)?.as_i64() != 0 {
                eval_in(ctx, *a, env, load, memo)?
            } else {
                eval_in(ctx, *b, env, load, memo)?
            }
        }
        Op::Cast(x) => {
            let from = ctx.dtype(*x);
            let xv = eval_in(ctx, *x, env, load, memo)?;
            if dtype.is_float() {
                round_to(dtype, xv.as_f64())
            } else if dtype == DType::Bool {
                Const::Int((xv.as_f64() != 0.0) as i64)
            } else if from.is_float() {
                Const::Int(cast_int(dtype, xv.as_f64()))
            } else {
                Const::Int(wrap_int(dtype, xv.as_i64()))
            }
        }
        Op::Bitcast(x) => {
            let from = ctx.dtype(*x);
            let xv = eval_in(ctx, *x, env, load, memo)?;
            let bits: u64 = match from {
                DType::F32 => (xv.as_f64() as f32).to_bits() as u64,
                DType::F64 => xv.as_f64().to_bits(),
                DType::F16 => half::f16::from_f64(xv.as_f64()).to_bits() as u64,
                DType::BF16 => half::bf16::from_f64(xv.as_f64()).to_bits() as u64,
                _ => xv.as_i64() as u64,
            };
            match dtype {
                DType::F32 => Const::float(f32::from_bits(bits as u32) as f64),
                DType::F64 => Const::float(f64::from_bits(bits)),
                DType::F16 => Const::float(half::f16::from_bits(bits as u16).to_f64()),
                DType::BF16 => Const::float(half::bf16::from_bits(bits as u16).to_f64()),
                _ => Const::Int(wrap_int(dtype, bits as i64)),
            }
        }
        Op::Reduce { op, var, extent, body } => {
            let mut acc = ctx.reduce_identity_const(*op, dtype)?;
            let saved = env.get(var).copied();
            for i in 0..*extent {
                env.insert(*var, i as i64);
                // A fresh memo per iteration: nodes under the body may depend on `var`.
                let mut inner = HashMap::new();
                let x = eval_in(ctx, *body, env, load, &mut inner)?;
                acc = combine(*op, dtype, acc, x);
            }
            match saved {
                Some(s) => env.insert(*var, s),
                None => env.remove(var),
            };
            acc
        }
    };
    memo.insert(n, v);
    Some(v)
}

impl Ctx {
    /// The identity of a reduction as a constant, without interning.
    pub fn reduce_identity_const(&self, op: RedOp, dtype: DType) -> Option<Const> {
        let v = match op {
            RedOp::Sum => 0.0,
            RedOp::Prod => 1.0,
            RedOp::Max => super::min_value(dtype),
            RedOp::Min => super::max_value(dtype),
        };
        Some(if dtype.is_float() { Const::float(v) } else { Const::Int(cast_int(dtype, v)) })
    }
}
