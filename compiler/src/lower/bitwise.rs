//! Bitwise operators on integers: BitwiseAnd, BitwiseOr, BitwiseXor (broadcasting) and BitwiseNot.

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::BinOp;
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "BitwiseAnd" => |c| binary(c, BinOp::And),
        "BitwiseOr" => |c| binary(c, BinOp::Or),
        "BitwiseXor" => |c| binary(c, BinOp::Xor),
        "BitwiseNot" => not,
        _ => return None,
    })
}

fn integers(c: &NodeCtx<'_>, x: &Lazy) -> Result<()> {
    if x.dtype.is_float() || x.dtype == pilot_core::DType::Bool {
        return Err(c.err(format!("operand of type {}: an integer type is required", x.dtype)));
    }
    Ok(())
}

fn binary(c: &mut NodeCtx<'_>, op: BinOp) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    integers(c, &a)?;
    if a.dtype != b.dtype {
        return Err(c.err(format!("operand types differ: {} and {}", a.dtype, b.dtype)));
    }
    let v = c.broadcast(&[&a, &b])?;
    Ok(vec![c.p().binary(op, &v[0], &v[1])])
}

fn not(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    integers(c, &x)?;
    // `x ^ ~0`: all ones is -1 in two's complement, whatever the width and signedness.
    let p = c.p();
    let ones = p.full(x.dtype, &x.shape, -1.0);
    Ok(vec![p.binary(BinOp::Xor, &x, &ones)])
}
