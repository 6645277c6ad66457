//! Operators computed from element coordinates: masks (Trilu, EyeLike, OneHot), selections (Hardmax,
//! TopK), and the data-dependent-shape ops NonZero and Compress (compile-time inputs only); with the
//! coordinate and index helpers other lowerings share (`coord`, `scalar`, `wrap_clamp`).

use std::collections::HashMap;

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp, INDEX, N};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Trilu" => trilu,
        "EyeLike" => eye_like,
        "Hardmax" => hardmax,
        "OneHot" => one_hot,
        "TopK" => top_k,
        "NonZero" => non_zero,
        "Compress" => compress,
        _ => return None,
    })
}

/// The coordinate along `axis` of `shape`, as an INDEX tensor.
pub(super) fn coord(p: &mut Program, shape: &[usize], axis: usize) -> Lazy {
    let vars = p.ctx.fresh_vars(shape);
    let expr = p.ctx.var(vars[axis]);
    Lazy { dtype: INDEX, shape: shape.to_vec(), vars, expr }
}

/// The single value of a one-element tensor as an expression (data-dependent if not constant).
pub(super) fn scalar(p: &mut Program, x: &Lazy) -> N {
    let m: HashMap<u32, N> = x.vars.iter().map(|&v| (v, p.ctx.int(0))).collect();
    substitute(&mut p.ctx, x.expr, &m, None)
}

/// Clamps an INDEX expression into `0..n`, wrapping negative values by `n` first.
pub(super) fn wrap_clamp(p: &mut Program, i: N, n: usize) -> N {
    let i = p.ctx.cast(i, INDEX);
    let zero = p.ctx.int(0);
    let neg = p.ctx.binary(BinOp::Lt, i, zero);
    let w = p.ctx.add_i(i, n as i64);
    let i = p.ctx.where_(neg, w, i);
    let hi = p.ctx.int(n as i64 - 1);
    let i = p.ctx.binary(BinOp::Max, i, zero);
    p.ctx.binary(BinOp::Min, i, hi)
}

fn trilu(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank();
    if r < 2 {
        return Err(c.err("expects rank >= 2"));
    }
    let upper = c.attr_int("upper", 1) != 0;
    let k = c.opt_input(1)?;
    if k.as_ref().is_some_and(|k| k.numel() != 1) {
        return Err(c.err("k must hold one value"));
    }
    let p = c.p();
    let k = match k {
        Some(k) => {
            let v = scalar(p, &k);
            p.ctx.cast(v, INDEX)
        }
        None => p.ctx.int(0),
    };
    let i = p.ctx.var(x.vars[r - 2]);
    let j = p.ctx.var(x.vars[r - 1]);
    let d = p.ctx.sub(j, i);
    let keep = if upper { p.ctx.binary(BinOp::Le, k, d) } else { p.ctx.binary(BinOp::Le, d, k) };
    let zero = p.ctx.constant(x.dtype, 0.0);
    let expr = p.ctx.where_(keep, x.expr, zero);
    Ok(vec![Lazy { expr, ..x }])
}

fn eye_like(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    if x.rank() != 2 {
        return Err(c.err("expects a 2-D input"));
    }
    let dtype = match c.node.attr_int("dtype") {
        Some(code) => {
            crate::onnx::data::dtype_from_onnx(code).ok_or_else(|| c.err(format!("unsupported dtype code {code}")))?
        }
        None => x.dtype,
    };
    let k = c.attr_int("k", 0);
    let p = c.p();
    let vars = p.ctx.fresh_vars(&x.shape);
    let (i, j) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]));
    let d = p.ctx.sub(j, i);
    let kk = p.ctx.int(k);
    let on = p.ctx.binary(BinOp::Eq, d, kk);
    let (one, zero) = (p.ctx.constant(dtype, 1.0), p.ctx.constant(dtype, 0.0));
    let expr = p.ctx.where_(on, one, zero);
    Ok(vec![Lazy { dtype, shape: x.shape.clone(), vars, expr }])
}

/// The index of the first maximum of `x` along `axis` (kept as size 1).
fn first_argmax(p: &mut Program, x: &Lazy, axis: usize) -> Lazy {
    let m = p.reduce(RedOp::Max, x, &[axis]);
    let mb = p.expand(&m, &x.shape);
    let hit = p.binary(BinOp::Eq, x, &mb);
    let idx = coord(p, &x.shape, axis);
    let miss = p.full(INDEX, &x.shape, x.shape[axis] as f64);
    let cand = p.where_(&hit, &idx, &miss);
    p.reduce(RedOp::Min, &cand, &[axis])
}

fn hardmax(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let old = c.opset() < 13;
    let axis = c.axis(c.attr_int("axis", if old { 1 } else { -1 }), x.rank())?;
    let x = c.reduce_input(&x, 3.0);
    let p = c.p();
    // Before opset 13 the input is coerced to 2-D at `axis`.
    let (work, ax) = if old {
        let outer: usize = x.shape[..axis].iter().product();
        (p.reshape(&x, &[outer, x.numel() / outer.max(1)]), 1)
    } else {
        (x.clone(), axis)
    };
    if work.shape[ax] == 0 {
        return Ok(vec![x]);
    }
    let am = first_argmax(p, &work, ax);
    let am = p.realize(&am, BufKind::Scratch, "hardmax_idx");
    let amb = p.expand(&am, &work.shape);
    let idx = coord(p, &work.shape, ax);
    let hit = p.binary(BinOp::Eq, &idx, &amb);
    let one = p.full(x.dtype, &work.shape, 1.0);
    let zero = p.full(x.dtype, &work.shape, 0.0);
    let y = p.where_(&hit, &one, &zero);
    Ok(vec![p.reshape(&y, &x.shape)])
}

fn one_hot(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (idx, values) = (c.input(0)?, c.input(2)?);
    let depth = c.const_input(1)?;
    let depth = depth.to_f64().first().copied().ok_or_else(|| c.err("empty depth"))?;
    if depth < 1.0 || values.numel() != 2 {
        return Err(c.err(format!("depth {depth} and {} values: need depth >= 1 and [off, on]", values.numel())));
    }
    let depth = depth as usize;
    let axis = c.axis(c.attr_int("axis", -1), idx.rank() + 1)?;
    let p = c.p();
    let mut shape = idx.shape.clone();
    shape.insert(axis, depth);
    let vars = p.ctx.fresh_vars(&shape);
    let m: HashMap<u32, N> =
        idx.vars.iter().enumerate().map(|(i, &v)| (v, p.ctx.var(vars[if i < axis { i } else { i + 1 }]))).collect();
    let iv = substitute(&mut p.ctx, idx.expr, &m, None);
    let iv = if idx.dtype.is_float() { p.ctx.unary(UnOp::Trunc, iv) } else { iv };
    let iv = p.ctx.cast(iv, INDEX);
    let zero = p.ctx.int(0);
    let neg = p.ctx.binary(BinOp::Lt, iv, zero);
    let wrapped = p.ctx.add_i(iv, depth as i64);
    let iv = p.ctx.where_(neg, wrapped, iv);
    let a = p.ctx.var(vars[axis]);
    let hit = p.ctx.binary(BinOp::Eq, iv, a);
    let v = if values.rank() == 1 { values.clone() } else { p.reshape(&values, &[2]) };
    let at = |p: &mut Program, k: i64| {
        let kk = p.ctx.int(k);
        substitute(&mut p.ctx, v.expr, &HashMap::from([(v.vars[0], kk)]), None)
    };
    let (off, on) = (at(p, 0), at(p, 1));
    let expr = p.ctx.where_(hit, on, off);
    Ok(vec![Lazy { dtype: values.dtype, shape, vars, expr }])
}

/// TopK by rank: `rank[i]` counts the elements that come before element `i` in the output order
/// (better value, or equal value at a smaller index); output `r` is the element of rank `r`.
fn top_k(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let k = if c.opset() < 10 {
        c.node.attr_int("k").ok_or_else(|| c.err("missing attribute `k`"))?
    } else {
        c.const_input(1)?.to_i64().first().copied().ok_or_else(|| c.err("empty k"))?
    };
    let axis = c.axis(c.attr_int("axis", -1), x.rank())?;
    let largest = c.attr_int("largest", 1) != 0;
    let n = x.shape[axis];
    if k < 0 || k as usize > n {
        return Err(c.err(format!("k = {k} out of range for axis of {n}")));
    }
    let k = k as usize;
    let mut out_shape = x.shape.clone();
    out_shape[axis] = k;
    if k == 0 {
        let p = c.p();
        return Ok(vec![p.full(x.dtype, &out_shape, 0.0), p.full(DType::I64, &out_shape, 0.0)]);
    }
    let x = c.reduce_input(&x, n as f64);
    let p = c.p();
    let j = p.ctx.fresh_var(n as u64);
    let jv = p.ctx.var(j);
    let xj = substitute(&mut p.ctx, x.expr, &HashMap::from([(x.vars[axis], jv)]), None);
    let iv = p.ctx.var(x.vars[axis]);
    let better = if largest { p.ctx.binary(BinOp::Lt, x.expr, xj) } else { p.ctx.binary(BinOp::Lt, xj, x.expr) };
    let same = p.ctx.binary(BinOp::Eq, xj, x.expr);
    let earlier = p.ctx.binary(BinOp::Lt, jv, iv);
    let tie = p.ctx.and(same, earlier);
    let before = p.ctx.binary(BinOp::Or, better, tie);
    let (one, zero) = (p.ctx.int(1), p.ctx.int(0));
    let cnt = p.ctx.where_(before, one, zero);
    let rank = Lazy { dtype: INDEX, expr: p.ctx.reduce(RedOp::Sum, j, n as u64, cnt), ..x.clone() };
    let rank = p.realize(&rank, BufKind::Scratch, "topk_rank");
    // idx[r] = the i with rank[i] == r.
    let vars = p.ctx.fresh_vars(&out_shape);
    let i = p.ctx.fresh_var(n as u64);
    let m: HashMap<u32, N> =
        rank.vars.iter().enumerate().map(|(d, &v)| (v, p.ctx.var(if d == axis { i } else { vars[d] }))).collect();
    let ri = substitute(&mut p.ctx, rank.expr, &m, None);
    let r = p.ctx.var(vars[axis]);
    let hit = p.ctx.binary(BinOp::Eq, ri, r);
    let ivar = p.ctx.var(i);
    let none = p.ctx.int(n as i64 - 1);
    let cand = p.ctx.where_(hit, ivar, none);
    let idx = Lazy {
        dtype: INDEX,
        shape: out_shape.clone(),
        vars: vars.clone(),
        expr: p.ctx.reduce(RedOp::Min, i, n as u64, cand),
    };
    let idx = p.realize(&idx, BufKind::Scratch, "topk_idx");
    let m: HashMap<u32, N> = x
        .vars
        .iter()
        .zip(&idx.vars)
        .enumerate()
        .map(|(d, (&v, &o))| (v, if d == axis { idx.expr } else { p.ctx.var(o) }))
        .collect();
    let values = Lazy { expr: substitute(&mut p.ctx, x.expr, &m, None), dtype: x.dtype, ..idx.clone() };
    Ok(vec![values, idx])
}

fn non_zero(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    // The output shape is the number of nonzeros: known only when the input is (a run-time input
    // is refused by `const_input`, naming the model input to pin with `--const`).
    let t = c.const_input(0)?;
    let st = crate::lazy::strides(&t.shape);
    let hits: Vec<usize> = t.to_f64().iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(i, _)| i).collect();
    let r = t.shape.len();
    let mut out = vec![0i64; r * hits.len()];
    for (n, &flat) in hits.iter().enumerate() {
        for d in 0..r {
            out[d * hits.len() + n] = (flat as i64 / st[d]) % t.shape[d] as i64;
        }
    }
    Ok(vec![c.p().constant(Tensor::from_i64(vec![r, hits.len()], &out))])
}

fn compress(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    // The output shape counts the true conditions: known only when the condition is.
    let cond = c.const_input(1)?;
    let (x, axis) = match c.node.attr_int("axis") {
        Some(a) => {
            let a = c.axis(a, x.rank())?;
            (x, a)
        }
        None => {
            let n = x.numel();
            (c.p().reshape(&x, &[n]), 0)
        }
    };
    let keep: Vec<i64> = cond
        .to_f64()
        .iter()
        .take(x.shape[axis])
        .enumerate()
        .filter(|(_, &v)| v != 0.0)
        .map(|(i, _)| i as i64)
        .collect();
    let p = c.p();
    let mut shape = x.shape.clone();
    shape[axis] = keep.len();
    if keep.is_empty() {
        return Ok(vec![p.full(x.dtype, &shape, 0.0)]);
    }
    let table = p.constant(Tensor::from_i64(vec![keep.len()], &keep));
    let vars = p.ctx.fresh_vars(&shape);
    let a = p.ctx.var(vars[axis]);
    let src = substitute(&mut p.ctx, table.expr, &HashMap::from([(table.vars[0], a)]), None);
    let m: HashMap<u32, N> = x
        .vars
        .iter()
        .zip(&vars)
        .enumerate()
        .map(|(d, (&v, &o))| (v, if d == axis { src } else { p.ctx.var(o) }))
        .collect();
    let expr = substitute(&mut p.ctx, x.expr, &m, None);
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr }])
}
