//! A reference executor: runs a [`Program`] kernel by kernel with the IR interpreter.
//!
//! Slow, obviously correct, and independent of any code generator — the oracle that code generators
//! and the lowering are tested against.

use std::collections::HashMap;

use crate::ir::{interp, Const};
use crate::lazy::strides;
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

fn store(t: &mut Tensor, i: usize, v: Const) {
    let sz = t.dtype.size();
    let bytes = match v {
        Const::Int(x) if !t.dtype.is_float() => x.to_le_bytes()[..sz].to_vec(),
        c => Tensor::from_f64(t.dtype, vec![1], &[c.as_f64()]).data,
    };
    t.data[i * sz..(i + 1) * sz].copy_from_slice(&bytes);
}

/// Runs `program` on `inputs` (model input order) and returns the outputs (model output order).
/// Errors name the kernel whose evaluation failed (an out-of-bounds load, say).
pub fn run(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let mut bufs: Vec<Tensor> = program
        .bufs
        .iter()
        .map(|b| match &b.kind {
            BufKind::Input(i) => inputs.get(*i).cloned().ok_or_else(|| format!("missing input {i}")),
            BufKind::Weight(t) => Ok(t.clone()),
            _ => Ok(Tensor { dtype: b.dtype, shape: vec![b.numel], data: vec![0; b.nbytes()] }),
        })
        .collect::<Result<_, _>>()?;
    for k in &program.kernels {
        let st = strides(&k.shape);
        let n: usize = k.shape.iter().product();
        let mut out = bufs[k.out as usize].clone();
        {
            let loader = |buf: u32, i: i64| usize::try_from(i).ok().and_then(|i| bufs[buf as usize].element(i));
            let mut env = HashMap::new();
            for flat in 0..n {
                for (i, &v) in k.vars.iter().enumerate() {
                    env.insert(v, (flat as i64 / st[i]) % k.shape[i] as i64);
                }
                let v = interp::eval(&program.ctx, k.expr, &mut env, &loader)
                    .ok_or_else(|| format!("kernel {}: evaluation failed at element {flat}", k.name))?;
                store(&mut out, flat, v);
            }
        }
        bufs[k.out as usize] = out;
    }
    let mut outs: Vec<(usize, Tensor)> = program
        .bufs
        .iter()
        .zip(bufs)
        .filter_map(|(b, t)| match b.kind {
            BufKind::Output(i) => Some((i, t)),
            _ => None,
        })
        .collect();
    outs.sort_by_key(|(i, _)| *i);
    Ok(outs.into_iter().map(|(_, t)| t).collect())
}
