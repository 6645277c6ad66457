//! CenterCropPad: each named axis cropped or zero-padded to a compile-time length, centred (an odd
//! excess goes to the end).

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "CenterCropPad" => center_crop_pad,
        _ => return None,
    })
}

fn center_crop_pad(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let lengths = c.const_input(1)?.to_i64();
    let rank = x.rank();
    let axes: Vec<usize> = match c.attr_ints("axes") {
        Some(a) => a.iter().map(|&v| c.axis(v, rank)).collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    if axes.len() != lengths.len() {
        return Err(c.err(format!("{} lengths for {} axes", lengths.len(), axes.len())));
    }
    let (mut lo, mut hi) = (vec![0i64; rank], vec![0i64; rank]);
    for (&a, &len) in axes.iter().zip(&lengths) {
        if len < 0 {
            return Err(c.err(format!("length {len} for axis {a} is negative")));
        }
        // Growing by `d` pads `d / 2` before; shrinking by `d` crops `d / 2` before.
        let d = len - x.shape[a] as i64;
        let before = if d >= 0 { d / 2 } else { -((-d) / 2) };
        lo[a] = before;
        hi[a] = d - before;
    }
    Ok(vec![c.p().pad(&x, &lo, &hi, 0.0)])
}
