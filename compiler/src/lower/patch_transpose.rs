//! ConvTranspose whose kernel equals its stride (no padding, no dilation, one group): the
//! upsampling layer of feature pyramids and U-Nets. Each output pixel then takes exactly one kernel
//! tap, `y[n, co, d·s + a] = Σ_ci x[n, ci, d] · w[ci, co, a] + b[co]`, so the layer is one matrix
//! product per tap, computed into `[n, co, a…, d…]` (the input's rows read contiguously, every
//! product useful) and read back interleaved. The general lowering instead evaluates all `Π s` taps
//! per output and discards all but one.

use std::collections::HashMap;

use super::NodeCtx;
use crate::ir::subst::substitute;
use crate::ir::RedOp;
use crate::lazy::Lazy;
use crate::program::BufKind;

/// Whether [`lower`] applies: one group, kernel = stride along every axis, no padding, dilation or
/// output padding.
pub(super) fn applies(
    groups: usize,
    kernel: &[usize],
    strides: &[i64],
    pads: &[i64],
    dil: &[i64],
    out_pad: &[i64],
) -> bool {
    groups == 1
        && kernel.iter().zip(strides).all(|(&k, &s)| k as i64 == s)
        && pads.iter().chain(out_pad).all(|&p| p == 0)
        && dil.iter().all(|&d| d == 1)
}

/// The layer for `x: [n, cin, d…]`, `wt: [cin, cout, s…]`, `bias: [cout]`.
pub(super) fn lower(c: &mut NodeCtx<'_>, x: &Lazy, wt: &Lazy, bias: Option<&Lazy>) -> Lazy {
    let k = x.rank() - 2;
    let (n, cin, cout) = (x.shape[0], x.shape[1], wt.shape[1]);
    let taps = &wt.shape[2..];
    let x = c.reduce_input(x, taps.iter().product::<usize>() as f64);
    let p = c.p();
    // [n, cout, a…, d…]
    let mut shape = vec![n, cout];
    shape.extend_from_slice(taps);
    shape.extend_from_slice(&x.shape[2..]);
    let vars = p.ctx.fresh_vars(&shape);
    let ci = p.ctx.fresh_var(cin as u64);
    let civ = p.ctx.var(ci);
    let vco = p.ctx.var(vars[1]);
    let mut xmap = HashMap::from([(x.vars[0], p.ctx.var(vars[0])), (x.vars[1], civ)]);
    let mut wmap = HashMap::from([(wt.vars[0], civ), (wt.vars[1], vco)]);
    for i in 0..k {
        xmap.insert(x.vars[2 + i], p.ctx.var(vars[2 + k + i]));
        wmap.insert(wt.vars[2 + i], p.ctx.var(vars[2 + i]));
    }
    let xv = substitute(&mut p.ctx, x.expr, &xmap, None);
    let wv = substitute(&mut p.ctx, wt.expr, &wmap, None);
    let prod = p.ctx.mul(xv, wv);
    let mut acc = p.ctx.reduce(RedOp::Sum, ci, cin as u64, prod);
    if let Some(b) = bias {
        let bv = substitute(&mut p.ctx, b.expr, &HashMap::from([(b.vars[0], vco)]), None);
        acc = p.ctx.add(acc, bv);
    }
    let name = format!("{}_taps", c.node.name);
    let p = c.p();
    let per_tap = Lazy { dtype: x.dtype, shape: shape.clone(), vars, expr: acc };
    let stored = p.realize(&per_tap, BufKind::Scratch, &name);
    // [n, cout, a1, .., ak, d1, .., dk] → [n, cout, d1, a1, .., dk, ak] → [n, cout, d1·s1, ..].
    let mut perm = vec![0, 1];
    for i in 0..k {
        perm.extend([2 + k + i, 2 + i]);
    }
    let interleaved = p.permute(&stored, &perm);
    let mut out = vec![n, cout];
    out.extend((0..k).map(|i| x.shape[2 + i] * taps[i]));
    p.reshape(&interleaved, &out)
}
