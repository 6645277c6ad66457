//! Window functions of a compile-time length: HannWindow, HammingWindow, BlackmanWindow (computed in
//! float64 at compile time as the ONNX reference does, stored in `output_datatype`).

use std::f64::consts::PI;

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::lazy::Lazy;
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "HannWindow" => |c| window(c, |n, m| (PI * n / m).sin().powi(2)),
        "HammingWindow" => |c| {
            let alpha = 25.0 / 46.0;
            window(c, move |n, m| alpha - (2.0 * PI * n / m).cos() * (1.0 - alpha))
        },
        "BlackmanWindow" => {
            |c| window(c, |n, m| 0.42 - 0.5 * (2.0 * PI * n / m).cos() + 0.08 * (4.0 * PI * n / m).cos())
        }
        _ => return None,
    })
}

/// `w(n, m)` for `n` in `0..size`, `m` the period: `size` if `periodic`, else `size - 1`.
fn window(c: &mut NodeCtx<'_>, w: impl Fn(f64, f64) -> f64) -> Result<Vec<Lazy>> {
    let size = c.const_input(0)?.to_i64().first().copied().ok_or_else(|| c.err("size is empty"))?;
    if size < 0 {
        return Err(c.err(format!("size {size} is negative")));
    }
    let dtype = match c.node.attr_int("output_datatype") {
        None => DType::F32,
        Some(code) => crate::onnx::data::dtype_from_onnx(code).ok_or_else(|| {
            c.err(format!("output_datatype {} is not supported", crate::onnx::data::onnx_dtype_name(code)))
        })?,
    };
    let size = size as usize;
    c.check_value("window", dtype, &[size])?;
    let m = if c.attr_int("periodic", 1) != 0 { size as f64 } else { size as f64 - 1.0 };
    let values: Vec<f64> = (0..size).map(|n| w(n as f64, m)).collect();
    Ok(vec![c.p().constant(Tensor::from_f64(dtype, vec![size], &values))])
}
