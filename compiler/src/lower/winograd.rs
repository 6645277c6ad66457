//! Winograd convolutions F(m×m, 3×3) for 3×3, stride-1, undilated, ungrouped float32 convolutions
//! with constant weights (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
//!
//! ```text
//! V[t, ci, n, ty, tx] = Σ_a Σ_b Bᵀ[ξ,a] Bᵀ[ν,b] · x_padded[n, ci, ty·m + a, tx·m + b]    (input transform)
//! M[t, co, p]         = Σ_ci U[t, co, ci] · V[t, ci, p]     p = (n, ty, tx) flattened   (batched matmul)
//! y[n, co, oy, ox]    = Σ_ξ Σ_ν Aᵀ[oy%m, ξ] Aᵀ[ox%m, ν] · M[t, co, p(n, oy/m, ox/m)]   (output transform)
//! ```
//!
//! with `t = ξ·α + ν` over the α = m + 2 transformed positions and `U = G·g·Gᵀ` the weights transformed
//! at compile time (in f64). The matmul has the shape of a 1×1 convolution, which the CPU back end
//! renders as register tiles; it does (α/m)²/9 of the direct convolution's multiply-adds (0.44 for
//! F(2×2), 0.25 for F(4×4)). The output transform stays lazy: bias, normalization, activation and a
//! residual add fuse into it like into a direct convolution.

use std::collections::HashMap;

use pilot_core::DType;

use super::nn::Window;
use super::NodeCtx;
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{RedOp, N};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

/// When convolutions take the Winograd path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Never (every target but the CPU).
    #[default]
    Off,
    /// Where [`rule`] says it is faster than the direct convolution on the CPU.
    Measured,
    /// Every eligible convolution (`PILOT_WINOGRAD=1`, for testing).
    All,
}

impl Policy {
    /// The policy for the CPU target: [`Policy::Measured`] unless `PILOT_WINOGRAD` is `0` (off) or
    /// `1` (every eligible convolution).
    pub fn for_cpu() -> Result<Policy, String> {
        match std::env::var("PILOT_WINOGRAD") {
            Err(std::env::VarError::NotPresent) => Policy::parse(None),
            Ok(v) => Policy::parse(Some(&v)),
            Err(e) => Err(format!("PILOT_WINOGRAD: {e}")),
        }
    }

    /// The policy `PILOT_WINOGRAD` asks for, given its value (`None`: not set).
    pub fn parse(value: Option<&str>) -> Result<Policy, String> {
        match value {
            None => Ok(Policy::Measured),
            Some("0") => Ok(Policy::Off),
            Some("1") => Ok(Policy::All),
            Some(v) => Err(format!("PILOT_WINOGRAD={v}: expected 0 (off) or 1 (every 3×3 stride-1 convolution)")),
        }
    }
}

/// A Winograd algorithm F(m×m, 3×3): its output tile `m` and the matrices Bᵀ (α×α), G (α×3), Aᵀ
/// (m×α), row-major.
pub struct Algorithm {
    pub m: usize,
    bt: &'static [f64],
    g: &'static [f64],
    at: &'static [f64],
}

impl Algorithm {
    fn alpha(&self) -> usize {
        self.m + 2
    }
}

/// F(2×2, 3×3): interpolation points 0, ±1, ∞; the transforms only add and subtract.
pub const F2: Algorithm = Algorithm {
    m: 2,
    bt: &[
        1.0, 0.0, -1.0, 0.0, //
        0.0, 1.0, 1.0, 0.0, //
        0.0, -1.0, 1.0, 0.0, //
        0.0, 1.0, 0.0, -1.0,
    ],
    g: &[
        1.0, 0.0, 0.0, //
        0.5, 0.5, 0.5, //
        0.5, -0.5, 0.5, //
        0.0, 0.0, 1.0,
    ],
    at: &[
        1.0, 1.0, 1.0, 0.0, //
        0.0, 1.0, -1.0, -1.0,
    ],
};

/// F(4×4, 3×3): interpolation points 0, ±1, ±2, ∞.
pub const F4: Algorithm = Algorithm {
    m: 4,
    bt: &[
        4.0, 0.0, -5.0, 0.0, 1.0, 0.0, //
        0.0, -4.0, -4.0, 1.0, 1.0, 0.0, //
        0.0, 4.0, -4.0, -1.0, 1.0, 0.0, //
        0.0, -2.0, -1.0, 2.0, 1.0, 0.0, //
        0.0, 2.0, -1.0, -2.0, 1.0, 0.0, //
        0.0, 4.0, 0.0, -5.0, 0.0, 1.0,
    ],
    g: &[
        1.0 / 4.0,
        0.0,
        0.0,
        -1.0 / 6.0,
        -1.0 / 6.0,
        -1.0 / 6.0,
        -1.0 / 6.0,
        1.0 / 6.0,
        -1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 12.0,
        1.0 / 6.0,
        1.0 / 24.0,
        -1.0 / 12.0,
        1.0 / 6.0,
        0.0,
        0.0,
        1.0,
    ],
    at: &[
        1.0, 1.0, 1.0, 1.0, 1.0, 0.0, //
        0.0, 1.0, -1.0, 2.0, -2.0, 0.0, //
        0.0, 1.0, 1.0, 4.0, 4.0, 0.0, //
        0.0, 1.0, -1.0, 8.0, -8.0, 1.0,
    ],
};

/// The algorithm for a convolution of `cin` → `cout` channels over an `oh`×`ow` output, or `None`
/// where the direct convolution is faster.
pub fn rule(cin: usize, cout: usize, oh: usize, ow: usize) -> Option<&'static Algorithm> {
    let _ = (cin, cout, oh, ow);
    Some(&F2)
}

/// Whether a convolution has the shape the Winograd path computes: float32, 2-D, 3×3 kernel,
/// stride 1, dilation 1, one group, non-negative padding.
pub(super) fn eligible(dtype: DType, weight_shape: &[usize], w: &Window, groups: usize) -> bool {
    dtype == DType::F32
        && groups == 1
        && weight_shape.len() == 4
        && w.kernel == [3, 3]
        && weight_shape[2..] == [3, 3]
        && w.strides == [1, 1]
        && w.dilations == [1, 1]
        && w.pad_lo.iter().chain(&w.pad_hi).all(|&p| p >= 0)
}

/// Tiles of `alg` covering the `out` output (rows, columns).
pub fn tiles(alg: &Algorithm, out: &[usize]) -> (usize, usize) {
    (out[0].div_ceil(alg.m), out[1].div_ceil(alg.m))
}

/// The padding of the input the input transform reads (`lo`, `hi` per spatial axis): the
/// convolution's own, widened at the end so that every tile's α×α window is inside.
pub(super) fn input_padding(alg: &Algorithm, input: &[usize], w: &Window) -> (Vec<i64>, Vec<i64>) {
    let (th, tw) = tiles(alg, &w.out);
    let need = [th * alg.m + 2, tw * alg.m + 2];
    let hi = (0..2).map(|i| need[i] as i64 - input[i] as i64 - w.pad_lo[i]).collect();
    (w.pad_lo.clone(), hi)
}

/// `U[t, co, ci] = (G·g[co, ci]·Gᵀ)[ξ, ν]` for weights `g: [cout, cin, 3, 3]`, computed in f64.
pub fn transform_weights(alg: &Algorithm, g: &Tensor) -> Tensor {
    let (cout, cin) = (g.shape[0], g.shape[1]);
    let a = alg.alpha();
    let w = g.to_f64();
    let mut u = vec![0.0; a * a * cout * cin];
    for co in 0..cout {
        for ci in 0..cin {
            let k = &w[(co * cin + ci) * 9..][..9];
            // gk = G·k (α×3), then G·k·Gᵀ (α×α).
            let mut gk = vec![0.0; a * 3];
            for i in 0..a {
                for j in 0..3 {
                    gk[i * 3 + j] = (0..3).map(|r| alg.g[i * 3 + r] * k[r * 3 + j]).sum();
                }
            }
            for xi in 0..a {
                for nu in 0..a {
                    let v: f64 = (0..3).map(|j| gk[xi * 3 + j] * alg.g[nu * 3 + j]).sum();
                    u[((xi * a + nu) * cout + co) * cin + ci] = v;
                }
            }
        }
    }
    Tensor::from_f64(DType::F32, vec![a * a, cout, cin], &u)
}

/// The Winograd convolution of node `c` (weights input 1), when the lowering's policy picks it for
/// this convolution; `None` leaves it to the direct path.
pub(super) fn lower(
    c: &mut NodeCtx<'_>,
    x: &Lazy,
    wt: &Lazy,
    bias: Option<&Lazy>,
    w: &Window,
    groups: usize,
) -> Result<Option<Lazy>> {
    let policy = c.winograd();
    if policy == Policy::Off || !eligible(x.dtype, &wt.shape, w, groups) || !c.p().is_constant(wt) {
        return Ok(None);
    }
    let (cin, cout) = (x.shape[1], wt.shape[0]);
    let alg = match policy {
        Policy::All => &F2,
        _ => match rule(cin, cout, w.out[0], w.out[1]) {
            Some(alg) => alg,
            None => return Ok(None),
        },
    };
    let g = c.const_input(1)?;
    let (lo, hi) = input_padding(alg, &x.shape[2..], w);
    // Each input element feeds about (α/m)² transformed tiles of α² positions.
    let reuse = (alg.alpha() * alg.alpha()) as f64;
    // Stored split by column phase (stride m), the input transform reads its rows contiguously.
    let xp = c.windowed_input(x, &lo, &hi, 0.0, reuse, alg.m);
    let name = c.node.name.clone();
    Ok(Some(conv(c.p(), alg, &xp, transform_weights(alg, &g), bias, &w.out, &name)))
}

/// `x` (a lazy tensor) read at the expressions `at`, one per dimension.
fn read(p: &mut Program, x: &Lazy, at: &[N]) -> N {
    let map: HashMap<u32, N> = x.vars.iter().copied().zip(at.iter().copied()).collect();
    substitute(&mut p.ctx, x.expr, &map, None)
}

/// The convolution `y = conv(x, g) (+ bias)` by `alg`, for `xp` the input padded by
/// [`input_padding`] (shape `[n, cin, th·m + 2, tw·m + 2]`), `u` the weights by
/// [`transform_weights`] and `out` the output's spatial size. The input transform and the matmul
/// and the output transform are realized (named after `name`), the output transform with the bias;
/// the result is a view of it.
pub fn conv(
    p: &mut Program,
    alg: &Algorithm,
    xp: &Lazy,
    u: Tensor,
    bias: Option<&Lazy>,
    out: &[usize],
    name: &str,
) -> Lazy {
    let (m, a) = (alg.m, alg.alpha());
    let (n, cin) = (xp.shape[0], xp.shape[1]);
    let cout = u.shape[1];
    let (th, tw) = tiles(alg, out);
    let tiles_all = n * th * tw;
    let table = |p: &mut Program, shape: Vec<usize>, v: Vec<f64>| p.constant(Tensor::from_f64(DType::F32, shape, &v));

    // Input transform: V[t, ci, n, ty, tx], the inner loop along tx.
    let coef: Vec<f64> = (0..a * a * a * a)
        .map(|i| {
            let (t, ab) = (i / (a * a), i % (a * a));
            alg.bt[(t / a) * a + ab / a] * alg.bt[(t % a) * a + ab % a]
        })
        .collect();
    let bb = table(p, vec![a * a, a, a], coef);
    let vshape = [a * a, cin, n, th, tw];
    let vars = p.ctx.fresh_vars(&vshape);
    let (ra, rb) = (p.ctx.fresh_var(a as u64), p.ctx.fresh_var(a as u64));
    let [vt, vci, vn, vty, vtx] = [0, 1, 2, 3, 4].map(|i| p.ctx.var(vars[i]));
    let (rav, rbv) = (p.ctx.var(ra), p.ctx.var(rb));
    let row = p.ctx.mul_i(vty, m as i64);
    let row = p.ctx.add(row, rav);
    let col = p.ctx.mul_i(vtx, m as i64);
    let col = p.ctx.add(col, rbv);
    let xv = read(p, xp, &[vn, vci, row, col]);
    let cv = read(p, &bb, &[vt, rav, rbv]);
    let body = p.ctx.mul(cv, xv);
    let body = p.ctx.reduce(RedOp::Sum, rb, a as u64, body);
    let body = p.ctx.reduce(RedOp::Sum, ra, a as u64, body);
    let v = Lazy { dtype: DType::F32, shape: vshape.to_vec(), vars, expr: body };
    p.realize(&v, BufKind::Scratch, &format!("{name}_wino_in"));
    let vbuf = p.kernels.last().expect("just realized").out;
    let v = p.view_buf(vbuf, &[a * a, cin, tiles_all]);

    // Batched matmul: M[t, co, p], the inner loop along the tiles p.
    let u = p.constant(u);
    let mshape = [a * a, cout, tiles_all];
    let vars = p.ctx.fresh_vars(&mshape);
    let rci = p.ctx.fresh_var(cin as u64);
    let [mt, mco, mp] = [0, 1, 2].map(|i| p.ctx.var(vars[i]));
    let rciv = p.ctx.var(rci);
    let uv = read(p, &u, &[mt, mco, rciv]);
    let vv = read(p, &v, &[mt, rciv, mp]);
    let body = p.ctx.mul(uv, vv);
    let body = p.ctx.reduce(RedOp::Sum, rci, cin as u64, body);
    let mm = Lazy { dtype: DType::F32, shape: mshape.to_vec(), vars, expr: body };
    let mm = p.realize(&mm, BufKind::Scratch, &format!("{name}_wino_mm"));

    // Output transform, into the rows split by column phase: yp[n, co, oy, j, tx] = y[n, co, oy,
    // tx·m + j], so that its inner loop (along tx) reads the matmul's tiles contiguously.
    let coef: Vec<f64> = (0..m * m * a * a)
        .map(|i| {
            let (ij, t) = (i / (a * a), i % (a * a));
            alg.at[(ij / m) * a + t / a] * alg.at[(ij % m) * a + t % a]
        })
        .collect();
    let aa = table(p, vec![m, m, a, a], coef);
    let pshape = [n, cout, out[0], m, tw];
    let vars = p.ctx.fresh_vars(&pshape);
    let (rxi, rnu) = (p.ctx.fresh_var(a as u64), p.ctx.fresh_var(a as u64));
    let [yn, yco, yoy, yj, ytx] = [0, 1, 2, 3, 4].map(|i| p.ctx.var(vars[i]));
    let (rxiv, rnuv) = (p.ctx.var(rxi), p.ctx.var(rnu));
    let t = p.ctx.mul_i(rxiv, a as i64);
    let t = p.ctx.add(t, rnuv);
    let ty = p.ctx.div_i(yoy, m as i64);
    let tile = p.ctx.mul_i(yn, (th * tw) as i64);
    let trow = p.ctx.mul_i(ty, tw as i64);
    let tile = p.ctx.add(tile, trow);
    let tile = p.ctx.add(tile, ytx);
    let mv = read(p, &mm, &[t, yco, tile]);
    let i = p.ctx.rem_i(yoy, m as i64);
    let av = read(p, &aa, &[i, yj, rxiv, rnuv]);
    let body = p.ctx.mul(av, mv);
    let body = p.ctx.reduce(RedOp::Sum, rnu, a as u64, body);
    let mut expr = p.ctx.reduce(RedOp::Sum, rxi, a as u64, body);
    if let Some(b) = bias {
        let bv = read(p, b, &[yco]);
        expr = p.ctx.add(expr, bv);
    }
    let yp = Lazy { dtype: DType::F32, shape: pshape.to_vec(), vars, expr };
    let yp = p.realize(&yp, BufKind::Scratch, &format!("{name}_wino_out"));

    // y as a view of yp: whatever follows the convolution fuses into its consumer.
    let yshape = vec![n, cout, out[0], out[1]];
    let vars = p.ctx.fresh_vars(&yshape);
    let [yn, yco, yoy, yox] = [0, 1, 2, 3].map(|i| p.ctx.var(vars[i]));
    let j = p.ctx.rem_i(yox, m as i64);
    let tx = p.ctx.div_i(yox, m as i64);
    let expr = read(p, &yp, &[yn, yco, yoy, j, tx]);
    Lazy { dtype: DType::F32, shape: yshape, vars, expr }
}

#[cfg(test)]
#[path = "winograd_tests.rs"]
mod tests;
