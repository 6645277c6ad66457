//! AffineGrid: the sampling grid of an affine transform `theta` (`[N, 2, 3]` or `[N, 3, 4]`) over
//! a compile-time output size `[N, C, (D,) H, W]`, as normalized coordinates in `[-1, 1]`.

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::lazy::Lazy;
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "AffineGrid" => affine_grid,
        _ => return None,
    })
}

/// The normalized coordinate of index `i` of `n` (pixel centres, or corners with `align_corners`).
fn coordinate(i: usize, n: usize, align_corners: bool) -> f64 {
    if align_corners {
        if n <= 1 {
            -1.0
        } else {
            -1.0 + i as f64 * 2.0 / (n - 1) as f64
        }
    } else {
        let step = 2.0 / n as f64;
        -1.0 + step / 2.0 + i as f64 * step
    }
}

fn affine_grid(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let theta = c.input(0)?;
    let size = c.const_input(1)?.to_i64();
    let align = c.attr_int("align_corners", 0) != 0;
    let k = size.len().saturating_sub(2);
    if !(k == 2 || k == 3) || theta.shape != [size[0].max(0) as usize, k, k + 1] || !theta.dtype.is_float() {
        return Err(c.err(format!(
            "theta {} {:?} and size {size:?}: [N, 2, 3] with [N, C, H, W], or [N, 3, 4] with [N, C, D, H, W]",
            theta.dtype, theta.shape
        )));
    }
    if size.iter().any(|&d| d < 1) {
        return Err(c.err(format!("size {size:?} has an empty dimension")));
    }
    let spatial: Vec<usize> = size[2..].iter().map(|&d| d as usize).collect();
    let points: usize = spatial.iter().product();
    c.check_value("grid", DType::F64, &[points, k + 1])?;
    // The homogeneous base grid [points, k + 1]: (x, y, (z,) 1), x along the last axis.
    let mut base = Vec::with_capacity(points * (k + 1));
    for flat in 0..points {
        let mut rest = flat;
        let mut idx = vec![0; k];
        for a in (0..k).rev() {
            idx[a] = rest % spatial[a];
            rest /= spatial[a];
        }
        for a in (0..k).rev() {
            base.push(coordinate(idx[a], spatial[a], align));
        }
        base.push(1.0);
    }
    let p = c.p();
    let base = p.constant(Tensor::from_f64(theta.dtype, vec![points, k + 1], &base));
    // grid[n, point, i] = Σ_j base[point, j] · theta[n, i, j]
    let n = theta.shape[0];
    let tt = p.permute(&theta, &[0, 2, 1]);
    let b = p.reshape(&base, &[1, points, k + 1]);
    let b = p.expand(&b, &[n, points, k + 1]);
    let grid = super::nn::matmul_lazy(c, &b, &tt)?;
    let mut shape = vec![n];
    shape.extend_from_slice(&spatial);
    shape.push(k);
    Ok(vec![c.p().reshape(&grid, &shape)])
}
