//! Training-mode operators. BatchNormalization normalizes with the batch's own statistics
//! (population variance over every axis but the channel) and outputs the updated running mean and
//! variance. Dropout with a compile-time ratio and a `seed` draws its mask at compile time from
//! numpy's legacy generator (`RandomState(seed).uniform`, MT19937), as the ONNX reference does.
//! Inference modes are the `nn` and `elementwise` lowerings'.

use pilot_core::DType;

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "BatchNormalization" => batch_norm,
        "Dropout" => dropout,
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

/// numpy's legacy `RandomState(seed)`: MT19937 seeded with `init_genrand`, doubles from two draws.
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { state, next: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.next >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[i] = v;
            }
            self.next = 0;
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A double in `[0, 1)` with 53 random bits (numpy's `random_sample`).
    fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }
}

fn dropout(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let training = match c.opt_const_input(2)? {
        Some(t) => t.to_f64().first().is_some_and(|&v| v != 0.0),
        None => false,
    };
    if !training {
        let inference = super::elementwise::lookup("Dropout").expect("the elementwise lowering has Dropout");
        return inference(c);
    }
    let ratio = match c.opt_const_input(1)? {
        Some(r) => r.to_f64().first().copied().ok_or_else(|| c.err("ratio is empty"))?,
        None => 0.5,
    };
    if ratio == 0.0 {
        // Drops nothing: the identity and an all-true mask.
        let x = c.input(0)?;
        let mask = c.p().full(DType::Bool, &x.shape, 1.0);
        return Ok(vec![x, mask]);
    }
    if !(0.0..1.0).contains(&ratio) {
        return Err(c.err(format!("ratio {ratio} is outside [0, 1)")));
    }
    let seed = c
        .node
        .attr_int("seed")
        .ok_or_else(|| c.err("training-mode dropout without a `seed` attribute draws from an unspecified generator"))?;
    let seed = u32::try_from(seed).map_err(|_| c.err(format!("seed {seed} is outside numpy's 0..2^32")))?;
    let x = c.input(0)?;
    c.check_value("dropout mask", DType::Bool, &x.shape)?;
    let mut rng = Mt19937::new(seed);
    let keep: Vec<f64> = (0..x.numel()).map(|_| f64::from(u8::from(rng.next_f64() >= ratio))).collect();
    let p = c.p();
    let mask = p.constant(Tensor::from_f64(DType::Bool, x.shape.clone(), &keep));
    let kept = p.cast(&mask, x.dtype);
    let y = p.binary(BinOp::Mul, &kept, &x);
    let y = with(p, BinOp::Mul, &y, 1.0 / (1.0 - ratio));
    Ok(vec![y, mask])
}
