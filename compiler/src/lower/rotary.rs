//! RotaryEmbedding (opset 23): rotates the first `rotary_embedding_dim` features of each head by the
//! cached angles at each position, halves split (or pairs interleaved), the rest passed through.

use super::compose::{int_attr, run_op};
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::BinOp;
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "RotaryEmbedding" => rotary_embedding,
        _ => return None,
    })
}

fn rotary_embedding(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, cos, sin) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let positions = c.opt_input(3)?;
    // Work in [batch, seq, heads, head_size].
    let work = match x.rank() {
        4 => c.p().permute(&x, &[0, 2, 1, 3]),
        3 => {
            let heads = c.attr_int("num_heads", 0);
            let [b, s, hidden] = x.shape[..] else { unreachable!("rank 3") };
            if heads < 1 || hidden % heads as usize != 0 {
                return Err(c.err(format!("hidden size {hidden} does not split into num_heads {heads}")));
            }
            let h = heads as usize;
            c.p().reshape(&x, &[b, s, h, hidden / h])
        }
        r => return Err(c.err(format!("input of rank {r}: 3 or 4 is required"))),
    };
    let [b, s, h, head] = work.shape[..] else { unreachable!("rank 4") };
    let rd = match c.attr_int("rotary_embedding_dim", 0) {
        0 => head,
        d if d > 0 && d as usize <= head && d % 2 == 0 => d as usize,
        d => return Err(c.err(format!("rotary_embedding_dim {d} does not fit head size {head}"))),
    };
    let half = rd / 2;
    let (cos, sin) = match &positions {
        Some(pos) => {
            let axis = vec![int_attr("axis", 0)];
            let cos = run_op(c, "Gather", &[Some(&cos), Some(pos)], axis.clone())?.remove(0);
            let sin = run_op(c, "Gather", &[Some(&sin), Some(pos)], axis)?.remove(0);
            (cos, sin)
        }
        None => (cos, sin),
    };
    for t in [&cos, &sin] {
        if t.shape != [b, s, half] {
            return Err(
                c.err(format!("cos/sin cache gives {:?} per position, [{b}, {s}, {half}] is required", t.shape))
            );
        }
    }
    let interleaved = c.attr_int("interleaved", 0) != 0;
    let p = c.p();
    let cos = p.reshape(&cos, &[b, s, 1, half]);
    let cos = p.expand(&cos, &[b, s, h, half]);
    let sin = p.reshape(&sin, &[b, s, 1, half]);
    let sin = p.expand(&sin, &[b, s, h, half]);
    let (first, step) = if interleaved { ([0, 1], 2) } else { ([0, half as i64], 1) };
    let x1 = p.slice(&work, &[0, 0, 0, first[0]], &[1, 1, 1, step], &[b, s, h, half]);
    let x2 = p.slice(&work, &[0, 0, 0, first[1]], &[1, 1, 1, step], &[b, s, h, half]);
    let (c1, s2) = (p.binary(BinOp::Mul, &cos, &x1), p.binary(BinOp::Mul, &sin, &x2));
    let real = p.binary(BinOp::Sub, &c1, &s2);
    let (s1, c2) = (p.binary(BinOp::Mul, &sin, &x1), p.binary(BinOp::Mul, &cos, &x2));
    let imag = p.binary(BinOp::Add, &s1, &c2);
    let rotated = if interleaved {
        let r = p.reshape(&real, &[b, s, h, half, 1]);
        let i = p.reshape(&imag, &[b, s, h, half, 1]);
        let pairs = super::shape::concat_lazy(c, &[r, i], 4)?;
        c.p().reshape(&pairs, &[b, s, h, rd])
    } else {
        super::shape::concat_lazy(c, &[real, imag], 3)?
    };
    let out = if rd < head {
        let rest = c.p().slice(&work, &[0, 0, 0, rd as i64], &[1, 1, 1, 1], &[b, s, h, head - rd]);
        super::shape::concat_lazy(c, &[rotated, rest], 3)?
    } else {
        rotated
    };
    let p = c.p();
    Ok(vec![if x.rank() == 4 { p.permute(&out, &[0, 2, 1, 3]) } else { p.reshape(&out, &x.shape) }])
}
