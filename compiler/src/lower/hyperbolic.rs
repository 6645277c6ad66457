//! The hyperbolic functions Sinh, Cosh, Asinh, Acosh and Atanh, built from exp, log and sqrt.

use super::elementwise::{konst, with};
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, UnOp};
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Sinh" => |c| hyperbolic(c, Hyp::Sinh),
        "Cosh" => |c| hyperbolic(c, Hyp::Cosh),
        "Asinh" => |c| hyperbolic(c, Hyp::Asinh),
        "Acosh" => |c| hyperbolic(c, Hyp::Acosh),
        "Atanh" => |c| hyperbolic(c, Hyp::Atanh),
        _ => return None,
    })
}

#[derive(Clone, Copy)]
enum Hyp {
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
}

fn hyperbolic(c: &mut NodeCtx<'_>, f: Hyp) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    if !x.dtype.is_float() {
        return Err(c.err(format!("{} input is not supported", x.dtype)));
    }
    let p = c.p();
    let y = match f {
        Hyp::Sinh | Hyp::Cosh => {
            let e = p.unary(UnOp::Exp, &x);
            let n = p.unary(UnOp::Neg, &x);
            let en = p.unary(UnOp::Exp, &n);
            let op = if matches!(f, Hyp::Sinh) { BinOp::Sub } else { BinOp::Add };
            let s = p.binary(op, &e, &en);
            with(p, BinOp::Mul, &s, 0.5)
        }
        Hyp::Asinh => {
            // sign(x) · log(|x| + sqrt(x² + 1)), accurate for negative x.
            let a = p.unary(UnOp::Abs, &x);
            let x2 = p.binary(BinOp::Mul, &x, &x);
            let r = with(p, BinOp::Add, &x2, 1.0);
            let r = p.unary(UnOp::Sqrt, &r);
            let s = p.binary(BinOp::Add, &a, &r);
            let l = p.unary(UnOp::Log, &s);
            let sg = p.unary(UnOp::Sign, &x);
            p.binary(BinOp::Mul, &sg, &l)
        }
        Hyp::Acosh => {
            let x2 = p.binary(BinOp::Mul, &x, &x);
            let r = with(p, BinOp::Sub, &x2, 1.0);
            let r = p.unary(UnOp::Sqrt, &r);
            let s = p.binary(BinOp::Add, &x, &r);
            p.unary(UnOp::Log, &s)
        }
        Hyp::Atanh => {
            let one = konst(p, &x, 1.0);
            let num = p.binary(BinOp::Add, &one, &x);
            let den = p.binary(BinOp::Sub, &one, &x);
            let q = p.binary(BinOp::Div, &num, &den);
            let l = p.unary(UnOp::Log, &q);
            with(p, BinOp::Mul, &l, 0.5)
        }
    };
    Ok(vec![y])
}
