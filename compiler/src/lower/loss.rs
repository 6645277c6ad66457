//! Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the latter: a log-softmax over
//! the class axis, then the former).

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp, INDEX};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "NegativeLogLikelihoodLoss" => nll_loss,
        "SoftmaxCrossEntropyLoss" => softmax_cross_entropy,
        _ => return None,
    })
}

/// `x[.., idx[..], ..]` along `axis`: `idx` has `x`'s shape without `axis`; indices are clamped into
/// range (out-of-range ones are the ignored class, whose value is masked afterwards).
fn take(p: &mut Program, x: &Lazy, axis: usize, idx: &Lazy) -> Lazy {
    let d = x.shape[axis] as i64;
    let iv = p.ctx.cast(idx.expr, INDEX);
    let lo = p.ctx.int(0);
    let hi = p.ctx.int(d - 1);
    let iv = p.ctx.binary(BinOp::Max, iv, lo);
    let iv = p.ctx.binary(BinOp::Min, iv, hi);
    let map = x
        .vars
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let n = match i.cmp(&axis) {
                std::cmp::Ordering::Less => p.ctx.var(idx.vars[i]),
                std::cmp::Ordering::Equal => iv,
                std::cmp::Ordering::Greater => p.ctx.var(idx.vars[i - 1]),
            };
            (v, n)
        })
        .collect();
    let expr = substitute(&mut p.ctx, x.expr, &map, None);
    Lazy { dtype: x.dtype, shape: idx.shape.clone(), vars: idx.vars.clone(), expr }
}

fn sum_all(p: &mut Program, x: &Lazy) -> Lazy {
    let axes: Vec<usize> = (0..x.rank()).collect();
    let s = p.reduce(RedOp::Sum, x, &axes);
    p.reshape(&s, &[])
}

/// The negative log-likelihood of `logp` (`[N, C, d..]`) at classes `target` (`[N, d..]`), weighted
/// per class by `weight` (`[C]`), the `ignore_index` class contributing nothing, then reduced.
fn nll(c: &mut NodeCtx<'_>, logp: &Lazy, target: &Lazy, weight: Option<Lazy>) -> Result<Lazy> {
    if logp.rank() < 2 {
        return Err(c.err(format!("input of shape {:?}: rank 2 or more is required", logp.shape)));
    }
    let mut want = logp.shape.clone();
    let classes = want.remove(1);
    if target.shape != want || target.dtype.is_float() {
        return Err(c.err(format!(
            "target {} {:?} does not fit input {:?} (integers of shape {want:?})",
            target.dtype, target.shape, logp.shape
        )));
    }
    if let Some(w) = &weight {
        if w.shape != [classes] || w.dtype != logp.dtype {
            return Err(c.err(format!("weight {} {:?}: {} [{classes}] is required", w.dtype, w.shape, logp.dtype)));
        }
    }
    let reduction = c.attr_str("reduction", "mean");
    if !["none", "sum", "mean"].contains(&reduction.as_str()) {
        return Err(c.err(format!("unknown reduction `{reduction}`")));
    }
    let ignore = c.node.attr_int("ignore_index");
    let p = c.p();
    let picked = take(p, logp, 1, target);
    let loss = p.unary(UnOp::Neg, &picked);
    // Each position's weight: its class's, or 1; 0 for the ignored class.
    let mut w = weight.as_ref().map(|w| take(p, w, 0, target));
    if let Some(ii) = ignore {
        let ii = p.full(target.dtype, &target.shape, ii as f64);
        let keep = p.binary(BinOp::Ne, target, &ii);
        let one = p.full(logp.dtype, &target.shape, 1.0);
        let zero = p.full(logp.dtype, &target.shape, 0.0);
        let base = w.unwrap_or(one);
        w = Some(p.where_(&keep, &base, &zero));
    }
    let loss = match &w {
        Some(w) => p.binary(BinOp::Mul, &loss, w),
        None => loss,
    };
    Ok(match (reduction.as_str(), &w) {
        ("none", _) => loss,
        ("sum", _) => sum_all(p, &loss),
        (_, Some(w)) => {
            let total = sum_all(p, &loss);
            let wsum = sum_all(p, w);
            p.binary(BinOp::Div, &total, &wsum)
        }
        (_, None) => {
            let total = sum_all(p, &loss);
            with(p, BinOp::Div, &total, target.numel() as f64)
        }
    })
}

fn nll_loss(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, target) = (c.input(0)?, c.input(1)?);
    let weight = c.opt_input(2)?;
    Ok(vec![nll(c, &x, &target, weight)?])
}

/// `log(softmax(x))` along `axis`, as `x - max - log(sum(exp(x - max)))`.
pub(super) fn log_softmax(p: &mut Program, x: &Lazy, axis: usize) -> Lazy {
    let m = p.reduce(RedOp::Max, x, &[axis]);
    let m = p.expand(&m, &x.shape);
    let shifted = p.binary(BinOp::Sub, x, &m);
    let e = p.unary(UnOp::Exp, &shifted);
    let s = p.reduce(RedOp::Sum, &e, &[axis]);
    let ls = p.unary(UnOp::Log, &s);
    let ls = p.expand(&ls, &x.shape);
    p.binary(BinOp::Sub, &shifted, &ls)
}

fn softmax_cross_entropy(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, target) = (c.input(0)?, c.input(1)?);
    let weight = c.opt_input(2)?;
    if x.rank() < 2 || !x.dtype.is_float() {
        return Err(c.err(format!("scores {} {:?}: floats of rank 2 or more are required", x.dtype, x.shape)));
    }
    let p = c.p();
    let logp = log_softmax(p, &x, 1);
    // Both the loss and the log-probabilities read it: computed once.
    let logp = p.realize(&logp, crate::program::BufKind::Scratch, "log_prob");
    let loss = nll(c, &logp, &target, weight)?;
    Ok(vec![loss, logp])
}
