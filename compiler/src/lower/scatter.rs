//! Data-dependent indexing: `GatherND`, and `ScatterElements` / `Scatter` / `ScatterND` written as
//! gathers: every output element searches the updates that target it (a reduction over the update
//! positions), so indices may be run-time values. Without a reduction attribute the last matching
//! update wins, as in onnxruntime.

use std::collections::HashMap;

use super::index_ops::wrap_clamp;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, N};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "GatherND" => gather_nd,
        "ScatterElements" | "Scatter" => scatter_elements,
        "ScatterND" => scatter_nd,
        _ => return None,
    })
}

fn gather_nd(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let b = c.attr_int("batch_dims", 0).max(0) as usize;
    let ri = idx.rank();
    let q = *idx.shape.last().ok_or_else(|| c.err("indices must have rank >= 1"))?;
    if b >= ri || b + q > x.rank() || idx.shape[..b] != x.shape[..b] {
        return Err(c.err(format!("indices {:?} do not fit data {:?} with batch_dims {b}", idx.shape, x.shape)));
    }
    let p = c.p();
    let mut shape = idx.shape[..ri - 1].to_vec();
    shape.extend_from_slice(&x.shape[b + q..]);
    let vars = p.ctx.fresh_vars(&shape);
    let mut m: HashMap<u32, N> = HashMap::new();
    for (&old, &new) in x.vars.iter().zip(&vars).take(b) {
        m.insert(old, p.ctx.var(new));
    }
    for k in 0..q {
        let mut im: HashMap<u32, N> = (0..ri - 1).map(|d| (idx.vars[d], p.ctx.var(vars[d]))).collect();
        im.insert(idx.vars[ri - 1], p.ctx.int(k as i64));
        let iv = substitute(&mut p.ctx, idx.expr, &im, None);
        let iv = wrap_clamp(p, iv, x.shape[b + k]);
        m.insert(x.vars[b + k], iv);
    }
    for t in 0..x.rank() - b - q {
        m.insert(x.vars[b + q + t], p.ctx.var(vars[ri - 1 + t]));
    }
    let expr = substitute(&mut p.ctx, x.expr, &m, None);
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr }])
}

#[derive(Clone, Copy, PartialEq)]
enum Combine {
    Replace,
    Reduce(RedOp),
}

fn combine(c: &NodeCtx<'_>) -> Result<Combine> {
    Ok(match c.attr_str("reduction", "none").as_str() {
        "none" => Combine::Replace,
        "add" => Combine::Reduce(RedOp::Sum),
        "mul" => Combine::Reduce(RedOp::Prod),
        "max" => Combine::Reduce(RedOp::Max),
        "min" => Combine::Reduce(RedOp::Min),
        other => return Err(c.err(format!("unknown reduction `{other}`"))),
    })
}

/// The scattered result at the output coordinates: `data` combined with the updates whose target
/// `hit` holds, over update positions `u` in `0..n`. `upd_at(p, u)` reads the update at `u`.
fn scatter_value(
    p: &mut Program,
    how: Combine,
    data: N,
    hit: N,
    u: u32,
    n: usize,
    upd_at: &dyn Fn(&mut Program, N) -> N,
) -> N {
    let uv = p.ctx.var(u);
    match how {
        Combine::Replace => {
            // The last update that hits, if any.
            let none = p.ctx.int(-1);
            let cand = p.ctx.where_(hit, uv, none);
            let last = p.ctx.reduce(RedOp::Max, u, n as u64, cand);
            let found = p.ctx.ge_i(last, 0);
            let zero = p.ctx.int(0);
            let at = p.ctx.binary(BinOp::Max, last, zero);
            let v = upd_at(p, at);
            p.ctx.where_(found, v, data)
        }
        Combine::Reduce(op) => {
            let v = upd_at(p, uv);
            let dtype = p.ctx.dtype(v);
            let id = p.ctx.reduce_identity(op, dtype);
            let term = p.ctx.where_(hit, v, id);
            let r = p.ctx.reduce(op, u, n as u64, term);
            let bop = match op {
                RedOp::Sum => BinOp::Add,
                RedOp::Prod => BinOp::Mul,
                RedOp::Max => BinOp::Max,
                RedOp::Min => BinOp::Min,
            };
            p.ctx.binary(bop, data, r)
        }
    }
}

fn scatter_elements(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx, upd) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let how = combine(c)?;
    let r = x.rank();
    let axis = c.axis(c.attr_int("axis", 0), r)?;
    if idx.shape != upd.shape || idx.rank() != r || idx.shape.iter().zip(&x.shape).any(|(i, d)| i > d) {
        return Err(c.err(format!("indices {:?} / updates {:?} do not fit data {:?}", idx.shape, upd.shape, x.shape)));
    }
    let n = idx.shape[axis];
    if n == 0 || idx.numel() == 0 {
        return Ok(vec![x]);
    }
    let idx = c.reduce_input(&idx, n as f64);
    let upd = c.reduce_input(&upd, n as f64);
    let p = c.p();
    // Update coordinates: the output's, clamped into the updates' extent (out-of-extent outputs
    // are hit by nothing), with the axis coordinate searched.
    let u = p.ctx.fresh_var(n as u64);
    let mut inside: Option<N> = None;
    let mut coords: Vec<N> = Vec::with_capacity(r);
    for d in 0..r {
        let o = p.ctx.var(x.vars[d]);
        if d == axis {
            coords.push(p.ctx.var(u));
        } else if idx.shape[d] < x.shape[d] {
            let lt = p.ctx.lt_i(o, idx.shape[d] as i64);
            inside = Some(inside.map_or(lt, |g| p.ctx.and(g, lt)));
            let hi = p.ctx.int(idx.shape[d] as i64 - 1);
            coords.push(p.ctx.binary(BinOp::Min, o, hi));
        } else {
            coords.push(o);
        }
    }
    let at = |p: &mut Program, t: &Lazy, axis_coord: N| {
        let m: HashMap<u32, N> =
            t.vars.iter().enumerate().map(|(d, &v)| (v, if d == axis { axis_coord } else { coords[d] })).collect();
        substitute(&mut p.ctx, t.expr, &m, None)
    };
    let uv = p.ctx.var(u);
    let target = at(p, &idx, uv);
    let target = wrap_clamp(p, target, x.shape[axis]);
    let o = p.ctx.var(x.vars[axis]);
    let mut hit = p.ctx.binary(BinOp::Eq, target, o);
    if let Some(g) = inside {
        hit = p.ctx.and(hit, g);
    }
    let upd_at = |p: &mut Program, k: N| at(p, &upd, k);
    let expr = scatter_value(p, how, x.expr, hit, u, n, &upd_at);
    Ok(vec![Lazy { expr, ..x }])
}

fn scatter_nd(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx, upd) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let how = combine(c)?;
    let ri = idx.rank();
    let q = *idx.shape.last().ok_or_else(|| c.err("indices must have rank >= 1"))?;
    let mut want = idx.shape[..ri - 1].to_vec();
    if q <= x.rank() {
        want.extend_from_slice(&x.shape[q..]);
    }
    if q > x.rank() || upd.shape != want {
        return Err(c.err(format!("indices {:?} / updates {:?} do not fit data {:?}", idx.shape, upd.shape, x.shape)));
    }
    let n: usize = idx.shape[..ri - 1].iter().product();
    if n == 0 {
        return Ok(vec![x]);
    }
    let idx = c.reduce_input(&idx, n as f64);
    let upd = c.reduce_input(&upd, n as f64);
    let p = c.p();
    let idx = p.reshape(&idx, &[n, q]);
    let mut ushape = vec![n];
    ushape.extend_from_slice(&x.shape[q..]);
    let upd = p.reshape(&upd, &ushape);
    let u = p.ctx.fresh_var(n as u64);
    let uv = p.ctx.var(u);
    let mut hit = p.ctx.int(1);
    hit = p.ctx.cast(hit, pilot_core::DType::Bool);
    for k in 0..q {
        let kk = p.ctx.int(k as i64);
        let m = HashMap::from([(idx.vars[0], uv), (idx.vars[1], kk)]);
        let t = substitute(&mut p.ctx, idx.expr, &m, None);
        let t = wrap_clamp(p, t, x.shape[k]);
        let o = p.ctx.var(x.vars[k]);
        let eq = p.ctx.binary(BinOp::Eq, t, o);
        hit = p.ctx.and(hit, eq);
    }
    let tail: Vec<N> = (q..x.rank()).map(|d| p.ctx.var(x.vars[d])).collect();
    let upd_at = |p: &mut Program, k: N| {
        let mut m: HashMap<u32, N> = HashMap::from([(upd.vars[0], k)]);
        for (t, &e) in tail.iter().enumerate() {
            m.insert(upd.vars[1 + t], e);
        }
        substitute(&mut p.ctx, upd.expr, &m, None)
    };
    let expr = scatter_value(p, how, x.expr, hit, u, n, &upd_at);
    Ok(vec![Lazy { expr, ..x }])
}
