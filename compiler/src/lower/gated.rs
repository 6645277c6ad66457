//! Gated activations: Swish (`x · sigmoid(alpha · x)`) and SwiGLU (`swish(a) · b`).

use super::elementwise::{sigmoid, with};
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::BinOp;
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Swish" => swish,
        "SwiGLU" => swiglu,
        _ => return None,
    })
}

fn swish_of(p: &mut Program, x: &Lazy, alpha: f64) -> Lazy {
    let ax = with(p, BinOp::Mul, x, alpha);
    let s = sigmoid(p, &ax);
    p.binary(BinOp::Mul, x, &s)
}

fn swish(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let alpha = c.attr_float("alpha", 1.0) as f64;
    Ok(vec![swish_of(c.p(), &x, alpha)])
}

fn swiglu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    if a.shape != b.shape || a.dtype != b.dtype {
        return Err(c.err(format!(
            "A ({} {:?}) and B ({} {:?}) must have one type and one shape",
            a.dtype, a.shape, b.dtype, b.shape
        )));
    }
    let alpha = c.attr_float("alpha", 1.0) as f64;
    let p = c.p();
    let s = swish_of(p, &a, alpha);
    Ok(vec![p.binary(BinOp::Mul, &s, &b)])
}
