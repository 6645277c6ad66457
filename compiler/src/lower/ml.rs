//! Operators of the `ai.onnx.ml` domain: Binarizer and ArrayFeatureExtractor.

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::BinOp;
use crate::lazy::Lazy;

/// The `ai.onnx.ml` domain's name.
pub const DOMAIN: &str = "ai.onnx.ml";

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Binarizer" => binarizer,
        "ArrayFeatureExtractor" => array_feature_extractor,
        _ => return None,
    })
}

/// `1` where `x > threshold`, else `0`, in `x`'s type.
fn binarizer(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let threshold = c.attr_float("threshold", 0.0) as f64;
    let p = c.p();
    let t = p.full(x.dtype, &x.shape, threshold);
    let above = p.binary(BinOp::Lt, &t, &x);
    Ok(vec![p.cast(&above, x.dtype)])
}

/// The elements of `x`'s last axis at `indices` (a 1-D `x` is one row).
fn array_feature_extractor(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    if x.rank() == 0 || idx.dtype != pilot_core::DType::I64 {
        return Err(
            c.err(format!("X {:?} and indices of type {}: X of rank 1 or more, int64 indices", x.shape, idx.dtype))
        );
    }
    let x = if x.rank() == 1 { c.p().reshape(&x, &[1, x.shape[0]]) } else { x };
    let idx = c.p().reshape(&idx, &[idx.numel()]);
    let axis = super::compose::int_attr("axis", x.rank() as i64 - 1);
    super::compose::run_op(c, "Gather", &[Some(&x), Some(&idx)], vec![axis])
}
