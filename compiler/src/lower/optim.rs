//! Optimizer steps of the `ai.onnx.preview.training` domain: Adagrad, Adam and Momentum (standard and
//! Nesterov), each over one or more tensors sharing the learning rate `R` and the step count `T`.

use pilot_core::DType;

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

/// The domain's name.
pub const DOMAIN: &str = "ai.onnx.preview.training";

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Adagrad" => adagrad,
        "Adam" => adam,
        "Momentum" => momentum,
        _ => return None,
    })
}

/// The shared scalars `R` (learning rate) and `T` (update count, as a float), and the `per`-tensor
/// groups of the remaining inputs: `groups[k][i]` is the `k`-th input kind of tensor `i`.
fn operands(c: &mut NodeCtx<'_>, kinds: usize) -> Result<(Lazy, Lazy, Vec<Vec<Lazy>>)> {
    let n = c.num_inputs().saturating_sub(2);
    if n == 0 || !n.is_multiple_of(kinds) {
        return Err(c.err(format!("{} inputs: R, T, then {kinds} per optimized tensor", c.num_inputs())));
    }
    let (r, t) = (c.input(0)?, c.input(1)?);
    if r.numel() != 1 || t.numel() != 1 || !r.dtype.is_float() {
        return Err(c.err(format!("R {} {:?} and T {:?} must be scalars, R a float", r.dtype, r.shape, t.shape)));
    }
    let per = n / kinds;
    let mut groups = Vec::new();
    for k in 0..kinds {
        groups.push((0..per).map(|i| c.input(2 + k * per + i)).collect::<Result<Vec<_>>>()?);
    }
    let p = c.p();
    let r = p.reshape(&r, &[]);
    let r = p.cast(&r, DType::F32);
    let t = p.reshape(&t, &[]);
    let t = p.cast(&t, DType::F32);
    Ok((r, t, groups))
}

/// A scalar laid over `like`.
fn spread(p: &mut Program, s: &Lazy, like: &Lazy) -> Lazy {
    let one = p.reshape(s, &vec![1; like.rank()]);
    let e = p.expand(&one, &like.shape);
    p.cast(&e, like.dtype)
}

/// `norm_coefficient · x + g`.
fn regularized(p: &mut Program, x: &Lazy, g: &Lazy, norm: f64) -> Lazy {
    let nx = with(p, BinOp::Mul, x, norm);
    p.binary(BinOp::Add, &nx, g)
}

fn adagrad(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (r, t, g) = operands(c, 3)?;
    let decay = c.attr_float("decay_factor", 0.0) as f64;
    let eps = c.attr_float("epsilon", 0.0) as f64;
    let norm = c.attr_float("norm_coefficient", 0.0) as f64;
    let p = c.p();
    // r / (1 + t · decay_factor)
    let td = with(p, BinOp::Mul, &t, decay);
    let td = with(p, BinOp::Add, &td, 1.0);
    let rate = p.binary(BinOp::Div, &r, &td);
    let (mut xs, mut hs) = (Vec::new(), Vec::new());
    for ((x, grad), h) in g[0].iter().zip(&g[1]).zip(&g[2]) {
        let gr = regularized(p, x, grad, norm);
        let gg = p.binary(BinOp::Mul, &gr, &gr);
        let h_new = p.binary(BinOp::Add, h, &gg);
        let root = p.unary(UnOp::Sqrt, &h_new);
        let root = with(p, BinOp::Add, &root, eps);
        let step = p.binary(BinOp::Div, &gr, &root);
        let rate = spread(p, &rate, x);
        let step = p.binary(BinOp::Mul, &rate, &step);
        xs.push(p.binary(BinOp::Sub, x, &step));
        hs.push(h_new);
    }
    Ok(xs.into_iter().chain(hs).collect())
}

fn adam(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (r, t, g) = operands(c, 4)?;
    let alpha = c.attr_float("alpha", 0.9) as f64;
    let beta = c.attr_float("beta", 0.999) as f64;
    let eps = c.attr_float("epsilon", 0.0) as f64;
    let norm = c.attr_float("norm_coefficient", 0.0) as f64;
    let post = c.attr_float("norm_coefficient_post", 0.0) as f64;
    let p = c.p();
    // r · sqrt(1 - beta^t) / (1 - alpha^t) once an update has happened (t > 0), else r.
    let pow = |p: &mut Program, base: f64| {
        let b = p.full(DType::F32, &[], base);
        let bt = p.binary(BinOp::Pow, &b, &t);
        let one = p.full(DType::F32, &[], 1.0);
        p.binary(BinOp::Sub, &one, &bt)
    };
    let (one_b, one_a) = (pow(p, beta), pow(p, alpha));
    let root = p.unary(UnOp::Sqrt, &one_b);
    let adj = p.binary(BinOp::Mul, &r, &root);
    let adj = p.binary(BinOp::Div, &adj, &one_a);
    let zero = p.full(DType::F32, &[], 0.0);
    let started = p.binary(BinOp::Lt, &zero, &t);
    let rate = p.where_(&started, &adj, &r);
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for (((x, grad), v), h) in g[0].iter().zip(&g[1]).zip(&g[2]).zip(&g[3]) {
        let gr = regularized(p, x, grad, norm);
        let av = with(p, BinOp::Mul, v, alpha);
        let ag = with(p, BinOp::Mul, &gr, 1.0 - alpha);
        let v_new = p.binary(BinOp::Add, &av, &ag);
        let gg = p.binary(BinOp::Mul, &gr, &gr);
        let bh = with(p, BinOp::Mul, h, beta);
        let bg = with(p, BinOp::Mul, &gg, 1.0 - beta);
        let h_new = p.binary(BinOp::Add, &bh, &bg);
        let root = p.unary(UnOp::Sqrt, &h_new);
        let root = with(p, BinOp::Add, &root, eps);
        let step = p.binary(BinOp::Div, &v_new, &root);
        let rate = spread(p, &rate, x);
        let step = p.binary(BinOp::Mul, &rate, &step);
        let x_new = p.binary(BinOp::Sub, x, &step);
        xs.push(with(p, BinOp::Mul, &x_new, 1.0 - post));
        vs.push(v_new);
        hs.push(h_new);
    }
    Ok(xs.into_iter().chain(vs).chain(hs).collect())
}

fn momentum(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (r, t, g) = operands(c, 3)?;
    let alpha = c.attr_float("alpha", 0.0) as f64;
    let beta = c.attr_float("beta", 0.0) as f64;
    let norm = c.attr_float("norm_coefficient", 0.0) as f64;
    let nesterov = match c.attr_str("mode", "standard").as_str() {
        "standard" => false,
        "nesterov" => true,
        m => return Err(c.err(format!("unknown mode `{m}`"))),
    };
    let p = c.p();
    // The gradient's weight: beta once an update has happened (t > 0), else 1.
    let zero = p.full(DType::F32, &[], 0.0);
    let started = p.binary(BinOp::Lt, &zero, &t);
    let b = p.full(DType::F32, &[], beta);
    let one = p.full(DType::F32, &[], 1.0);
    let gw = p.where_(&started, &b, &one);
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for ((x, grad), v) in g[0].iter().zip(&g[1]).zip(&g[2]) {
        let gr = regularized(p, x, grad, norm);
        let av = with(p, BinOp::Mul, v, alpha);
        let gw = spread(p, &gw, x);
        let bg = p.binary(BinOp::Mul, &gw, &gr);
        let v_new = p.binary(BinOp::Add, &av, &bg);
        let dir = if nesterov {
            let av_new = with(p, BinOp::Mul, &v_new, alpha);
            p.binary(BinOp::Add, &gr, &av_new)
        } else {
            v_new.clone()
        };
        let rate = spread(p, &r, x);
        let step = p.binary(BinOp::Mul, &rate, &dir);
        xs.push(p.binary(BinOp::Sub, x, &step));
        vs.push(v_new);
    }
    Ok(xs.into_iter().chain(vs).collect())
}
