//! Winograd convolutions for 3×3, stride-1, undilated, ungrouped float32 convolutions with constant
//! weights, on the CPU target: F(m, 3) along the rows (Lavin & Gray, "Fast Algorithms for
//! Convolutional Neural Networks", 2015), the three column taps direct.
//!
//! ```text
//! V[ci, ξ, n, ty, col] = Σ_a Bᵀ[ξ, a] · x_padded[n, ci, ty·m + a, col]                (input transform)
//! M[ξ, co, q]          = Σ_kx Σ_ci U[ξ, co, kx, ci] · V[ci, ξ, q + kx]                 (α convolutions 1×3)
//! y[n, co, oy, ox]     = Σ_ξ Aᵀ[oy % m, ξ] · M[ξ, co, (n·th + oy/m)·wp + ox]          (output transform)
//! ```
//!
//! over the α = m + 2 transformed rows ξ, with `U = G·g` the weights transformed at compile time (in
//! f64) and `q` running over the padded rows of width `wp` back to back: the matmul's inner loop
//! never breaks at a row end (the two columns past each row are computed and never read). It does
//! 3α/(9m) of the direct convolution's multiply-adds (½ for F(4, 3), 4/9 for F(6, 3)) on the
//! register tiles of a 1×3 convolution; every access is contiguous along the rows, and the output
//! transform is a lazy elementwise expression, so the bias, normalization, activation and residual
//! add fuse with it into the convolution's consumer.
//!
//! Why one dimension: the 2-D F(2×2, 3×3) (tried first) saves more on paper, but its transforms
//! gather along the rows (tiles interleave the output columns) and cost as much as the saving; in one
//! dimension they are plain row operations. The rounding error is that of one transform: under 1e-5
//! scaled on random convolutions for F(4, 3) and F(6, 3) alike.

use std::collections::HashMap;

use pilot_core::{Backend, DType};

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
    /// Every eligible convolution, by the algorithm with the fewest multiply-adds (`PILOT_WINOGRAD=1`,
    /// for testing).
    All,
}

impl Policy {
    /// The policy for `backend`: [`Policy::Off`] but on the CPU, where `pilot_winograd` (the value of
    /// `PILOT_WINOGRAD`, `None` when unset) is `0` (off), `1` (every eligible convolution) or unset
    /// ([`Policy::Measured`]).
    pub fn for_backend(backend: Backend, pilot_winograd: Option<&str>) -> Result<Policy, String> {
        if backend != Backend::Cpu {
            return Ok(Policy::Off);
        }
        match pilot_winograd {
            None => Ok(Policy::Measured),
            Some("0") => Ok(Policy::Off),
            Some("1") => Ok(Policy::All),
            Some(v) => Err(format!("PILOT_WINOGRAD={v}: expected 0 (off) or 1 (every 3×3 stride-1 convolution)")),
        }
    }
}

/// A Winograd algorithm F(m, 3): its output tile `m` and the matrices Bᵀ (α×α), G (α×3), Aᵀ (m×α),
/// row-major, α = m + 2.
struct Algorithm {
    m: usize,
    bt: &'static [f64],
    g: &'static [f64],
    at: &'static [f64],
}

impl Algorithm {
    fn alpha(&self) -> usize {
        self.m + 2
    }
}

/// F(4, 3): interpolation points 0, ±1, ±2, ∞.
const F4: Algorithm = Algorithm {
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

/// F(6, 3): interpolation points 0, ±1, ±2, ±½, ∞.
const F6: Algorithm = Algorithm {
    m: 6,
    bt: &[
        1.0, 0.0, -5.25, 0.0, 5.25, 0.0, -1.0, 0.0, //
        0.0, 1.0, 1.0, -4.25, -4.25, 1.0, 1.0, 0.0, //
        0.0, -1.0, 1.0, 4.25, -4.25, -1.0, 1.0, 0.0, //
        0.0, 0.5, 0.25, -2.5, -1.25, 2.0, 1.0, 0.0, //
        0.0, -0.5, 0.25, 2.5, -1.25, -2.0, 1.0, 0.0, //
        0.0, 2.0, 4.0, -2.5, -5.0, 0.5, 1.0, 0.0, //
        0.0, -2.0, 4.0, 2.5, -5.0, -0.5, 1.0, 0.0, //
        0.0, -1.0, 0.0, 5.25, 0.0, -5.25, 0.0, 1.0,
    ],
    g: &[
        1.0,
        0.0,
        0.0,
        -2.0 / 9.0,
        -2.0 / 9.0,
        -2.0 / 9.0,
        -2.0 / 9.0,
        2.0 / 9.0,
        -2.0 / 9.0,
        1.0 / 90.0,
        1.0 / 45.0,
        2.0 / 45.0,
        1.0 / 90.0,
        -1.0 / 45.0,
        2.0 / 45.0,
        32.0 / 45.0,
        16.0 / 45.0,
        8.0 / 45.0,
        32.0 / 45.0,
        -16.0 / 45.0,
        8.0 / 45.0,
        0.0,
        0.0,
        1.0,
    ],
    at: &[
        1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, //
        0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 0.0, //
        0.0, 1.0, 1.0, 4.0, 4.0, 0.25, 0.25, 0.0, //
        0.0, 1.0, -1.0, 8.0, -8.0, 0.125, -0.125, 0.0, //
        0.0, 1.0, 1.0, 16.0, 16.0, 0.0625, 0.0625, 0.0, //
        0.0, 1.0, -1.0, 32.0, -32.0, 0.03125, -0.03125, 1.0,
    ],
};

/// Multiply-adds per output pixel and input-output channel pair of `alg`'s matmul for an `oh`×`ow`
/// output, counting the rows of a last partial tile and the two columns computed past each row
/// (the direct convolution does 9).
fn macs(alg: &Algorithm, oh: usize, ow: usize) -> f64 {
    let rows = (oh.div_ceil(alg.m) * alg.m) as f64 / oh as f64;
    let cols = (ow + 2) as f64 / ow as f64;
    (3 * alg.alpha()) as f64 / alg.m as f64 * rows * cols
}

/// The algorithm with the fewest multiply-adds for an `oh`×`ow` output (F(4, 3) on ties: its
/// rounding error is the smaller), and that count.
fn fastest(oh: usize, ow: usize) -> (&'static Algorithm, f64) {
    let f4 = (&F4, macs(&F4, oh, ow));
    let f6 = (&F6, macs(&F6, oh, ow));
    if f6.1 < f4.1 {
        f6
    } else {
        f4
    }
}

/// The algorithm for a convolution of `cin` → `cout` channels over an `oh`×`ow` output, or `None`
/// where the direct convolution is faster.
///
/// Measured on Zen 4 (AVX-512), one thread, single convolutions with a ReLU against the direct
/// convolution (the least of three alternating runs each, on a loaded machine): the transforms move
/// about (cin + cout)·α/m values per output pixel through memory while the matmul saves
/// cin·cout·(9 − macs) multiply-adds, so what decides is cin·cout/(cin + cout). At 8 (16→16,
/// 120×180) Winograd ties, at 16 (32→32) it takes 0.75 of the time, at 19 (96→24) 0.84–0.92, and
/// from 32 (64→64 and up) 0.47–0.65. Under about a million channel-pixel products (96→24 at 8×16:
/// 1.07) the fixed costs of two more kernels make it lose, and it must save a third of the
/// multiply-adds (partial tiles of small outputs eat the saving).
fn rule(cin: usize, cout: usize, oh: usize, ow: usize) -> Option<&'static Algorithm> {
    let (alg, macs) = fastest(oh, ow);
    let wide = cin * cout >= 16 * (cin + cout);
    let large = cin * cout * oh * ow >= 1 << 20;
    (wide && large && macs <= 6.0).then_some(alg)
}

/// Whether a convolution has the shape the Winograd path computes: float32, 2-D, 3×3 kernel,
/// stride 1, dilation 1, one group, non-negative padding.
fn eligible(dtype: DType, weight_shape: &[usize], w: &Window, groups: usize) -> bool {
    dtype == DType::F32
        && groups == 1
        && weight_shape.len() == 4
        && w.kernel == [3, 3]
        && weight_shape[2..] == [3, 3]
        && w.strides == [1, 1]
        && w.dilations == [1, 1]
        && w.pad_lo.iter().chain(&w.pad_hi).all(|&p| p >= 0)
}

/// The padding of the input the input transform reads (`lo`, `hi` per spatial axis): the
/// convolution's own, with rows added at the bottom so that every tile's α rows are inside.
fn input_padding(alg: &Algorithm, input: &[usize], w: &Window) -> (Vec<i64>, Vec<i64>) {
    let rows = w.out[0].div_ceil(alg.m) * alg.m + 2;
    let hi = vec![rows as i64 - input[0] as i64 - w.pad_lo[0], w.pad_hi[1]];
    (w.pad_lo.clone(), hi)
}

/// `U[ξ, co, kx, ci] = Σ_ky G[ξ, ky] · g[co, ci, ky, kx]` for weights `g: [cout, cin, 3, 3]`,
/// computed in f64 (`ci` last: the matmul's innermost loop runs along it).
fn transform_weights(alg: &Algorithm, g: &Tensor) -> Tensor {
    let (cout, cin) = (g.shape[0], g.shape[1]);
    let a = alg.alpha();
    let w = g.to_f64();
    let mut u = vec![0.0; a * cout * 3 * cin];
    for (i, out) in u.iter_mut().enumerate() {
        let (xi, co, kx, ci) = (i / (cout * 3 * cin), i / (3 * cin) % cout, i / cin % 3, i % cin);
        *out = (0..3).map(|ky| alg.g[xi * 3 + ky] * w[(co * cin + ci) * 9 + ky * 3 + kx]).sum();
    }
    Tensor::from_f64(DType::F32, vec![a, cout, 3, cin], &u)
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
        Policy::All => fastest(w.out[0], w.out[1]).0,
        _ => match rule(cin, cout, w.out[0], w.out[1]) {
            Some(alg) => alg,
            None => return Ok(None),
        },
    };
    let g = c.const_input(1)?;
    let (lo, hi) = input_padding(alg, &x.shape[2..], w);
    // Each input row is read by the α/m tiles that overlap it, α times each.
    let reuse = (alg.alpha() * alg.alpha()) as f64 / alg.m as f64;
    // A padded copy, as for the direct convolution: read through guards instead, the rows would be
    // gathered once per transformed row ξ (F(4, 3)'s six do not form a register block).
    let xp = c.windowed_input(x, &lo, &hi, 0.0, reuse, 1, true);
    let name = c.node.name.clone();
    Ok(Some(conv(c.p(), alg, &xp, transform_weights(alg, &g), bias, &w.out, &name)))
}

/// `x` (a lazy tensor) read at the expressions `at`, one per dimension.
fn read(p: &mut Program, x: &Lazy, at: &[N]) -> N {
    let map: HashMap<u32, N> = x.vars.iter().copied().zip(at.iter().copied()).collect();
    substitute(&mut p.ctx, x.expr, &map, None)
}

/// A constant table of `shape`.
fn table(p: &mut Program, shape: Vec<usize>, values: &[f64]) -> Lazy {
    p.constant(Tensor::from_f64(DType::F32, shape, values))
}

/// The convolution `y = conv(x, g) (+ bias)` by `alg`, for `xp` the input padded by
/// [`input_padding`] (shape `[n, cin, th·m + 2, out[1] + 2]`), `u` the weights by
/// [`transform_weights`] and `out` the output's spatial size. The input transform and the matmul
/// are realized (named after `name`); the output transform is returned lazy.
fn conv(
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
    let th = out[0].div_ceil(m);
    let wp = xp.shape[3];
    // Rows past the tiles' (the padded copy's slack, `lower::ROW_SLACK`) are never read.
    debug_assert!(xp.shape[2] >= th * m + 2 && wp == out[1] + 2, "the input is padded for whole tiles");

    // Input transform: V[ci, ξ, n, ty, col], the inner loop along the columns, threads splitting the
    // channels (the rows ξ form one register block).
    let bt = table(p, vec![a, a], alg.bt);
    let vshape = [cin, a, n, th, wp];
    let vars = p.ctx.fresh_vars(&vshape);
    let ra = p.ctx.fresh_var(a as u64);
    let [vci, vxi, vn, vty, vcol] = [0, 1, 2, 3, 4].map(|i| p.ctx.var(vars[i]));
    let rav = p.ctx.var(ra);
    let row = p.ctx.mul_i(vty, m as i64);
    let row = p.ctx.add(row, rav);
    let xv = read(p, xp, &[vn, vci, row, vcol]);
    let cv = read(p, &bt, &[vxi, rav]);
    let body = p.ctx.mul(cv, xv);
    let body = p.ctx.reduce(RedOp::Sum, ra, a as u64, body);
    let v = Lazy { dtype: DType::F32, shape: vshape.to_vec(), vars, expr: body };
    p.realize(&v, BufKind::Scratch, &format!("{name}_wino_in"));
    let vbuf = p.kernels.last().expect("just realized").out;
    let rows = n * th * wp;
    let v = p.view_buf(vbuf, &[cin, a, rows]);

    // α convolutions 1×3 over the transformed rows laid end to end: M[ξ, co, q].
    let q_len = rows - 2;
    let u = p.constant(u);
    let mshape = [a, cout, q_len];
    let vars = p.ctx.fresh_vars(&mshape);
    let (rci, rkx) = (p.ctx.fresh_var(cin as u64), p.ctx.fresh_var(3));
    let [mxi, mco, mq] = [0, 1, 2].map(|i| p.ctx.var(vars[i]));
    let (rciv, rkxv) = (p.ctx.var(rci), p.ctx.var(rkx));
    let uv = read(p, &u, &[mxi, mco, rkxv, rciv]);
    let col = p.ctx.add(mq, rkxv);
    let vv = read(p, &v, &[rciv, mxi, col]);
    let body = p.ctx.mul(vv, uv);
    // The channels innermost: a tap loop of 3 inside would be unrolled, its weights all loaded
    // ahead of the multiply-adds, and the accumulators spilled.
    let body = p.ctx.reduce(RedOp::Sum, rci, cin as u64, body);
    let body = p.ctx.reduce(RedOp::Sum, rkx, 3, body);
    let mm = Lazy { dtype: DType::F32, shape: mshape.to_vec(), vars, expr: body };
    let mm = p.realize(&mm, BufKind::Scratch, &format!("{name}_wino_mm"));

    // Output transform: a sum of α terms, lazy.
    let at = table(p, vec![m, a], alg.at);
    let yshape = vec![n, cout, out[0], out[1]];
    let vars = p.ctx.fresh_vars(&yshape);
    let [yn, yco, yoy, yox] = [0, 1, 2, 3].map(|i| p.ctx.var(vars[i]));
    let i = p.ctx.rem_i(yoy, m as i64);
    let ty = p.ctx.div_i(yoy, m as i64);
    let tile = p.ctx.mul_i(yn, th as i64);
    let tile = p.ctx.add(tile, ty);
    let q = p.ctx.mul_i(tile, wp as i64);
    let q = p.ctx.add(q, yox);
    let mut expr = None;
    for xi in 0..a {
        let xin = p.ctx.int(xi as i64);
        let mv = read(p, &mm, &[xin, yco, q]);
        let av = read(p, &at, &[i, xin]);
        let term = p.ctx.mul(av, mv);
        expr = Some(match expr {
            Some(e) => p.ctx.add(e, term),
            None => term,
        });
    }
    let mut expr = expr.expect("α > 0 terms");
    if let Some(b) = bias {
        let bv = read(p, b, &[yco]);
        expr = p.ctx.add(expr, bv);
    }
    Lazy { dtype: DType::F32, shape: yshape, vars, expr }
}

#[cfg(test)]
#[path = "winograd_tests.rs"]
mod tests;
