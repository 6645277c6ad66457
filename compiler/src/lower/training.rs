//! BatchNormalization in training mode: normalizes with the batch's own statistics (population
//! variance over every axis but the channel) and outputs the updated running mean and variance.
//! Inference mode is the `nn` lowering's.

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "BatchNormalization" => batch_norm,
        _ => return None,
    })
}

/// A per-channel vector `[C]` laid over `x` (`[N, C, ...]`).
fn per_channel(p: &mut Program, v: &Lazy, x: &Lazy) -> Lazy {
    let mut dims = vec![1; x.rank()];
    dims[1] = x.shape[1];
    let r = p.reshape(v, &dims);
    p.expand(&r, &x.shape)
}

fn batch_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    if c.attr_int("training_mode", 0) == 0 {
        let inference = super::nn::lookup("BatchNormalization").expect("the nn lowering has BatchNormalization");
        return inference(c);
    }
    let x = c.input(0)?;
    let (scale, bias, mean, var) = (c.input(1)?, c.input(2)?, c.input(3)?, c.input(4)?);
    if x.rank() < 2 || [&scale, &bias, &mean, &var].iter().any(|v| v.shape != [x.shape[1]]) {
        return Err(c.err(format!("input {:?} with per-channel vectors of another length", x.shape)));
    }
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    let momentum = c.attr_float("momentum", 0.9) as f64;
    let axes: Vec<usize> = (0..x.rank()).filter(|&a| a != 1).collect();
    let count = (x.numel() / x.shape[1]) as f64;
    let x = c.reduce_input(&x, 3.0);
    let p = c.p();
    let sum = p.reduce(RedOp::Sum, &x, &axes);
    let batch_mean = with(p, BinOp::Div, &sum, count);
    let batch_mean = p.realize(&batch_mean, BufKind::Scratch, "batch_mean");
    let centered = {
        let m = p.expand(&batch_mean, &x.shape);
        p.binary(BinOp::Sub, &x, &m)
    };
    let sq = p.binary(BinOp::Mul, &centered, &centered);
    let ssum = p.reduce(RedOp::Sum, &sq, &axes);
    let batch_var = with(p, BinOp::Div, &ssum, count);
    let batch_var = p.realize(&batch_var, BufKind::Scratch, "batch_var");
    let denom = with(p, BinOp::Add, &batch_var, eps);
    let denom = p.unary(UnOp::Sqrt, &denom);
    let denom = p.expand(&denom, &x.shape);
    let normed = p.binary(BinOp::Div, &centered, &denom);
    let s = per_channel(p, &scale, &x);
    let b = per_channel(p, &bias, &x);
    let y = p.binary(BinOp::Mul, &normed, &s);
    let y = p.binary(BinOp::Add, &y, &b);
    // running = running · momentum + batch · (1 - momentum)
    let channels = [x.shape[1]];
    let mut running = |old: &Lazy, batch: &Lazy| {
        let batch = p.reshape(batch, &channels);
        let kept = with(p, BinOp::Mul, old, momentum);
        let new = with(p, BinOp::Mul, &batch, 1.0 - momentum);
        p.binary(BinOp::Add, &kept, &new)
    };
    let (out_mean, out_var) = (running(&mean, &batch_mean), running(&var, &batch_var));
    Ok(vec![y, out_mean, out_var])
}
