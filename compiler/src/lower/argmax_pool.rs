//! MaxPool with its Indices output, and MaxUnpool (its inverse).
//!
//! Indices are flat positions in the input tensor (row-major, or with `storage_order` 1 column-major
//! within each plane); among equal maxima the first in window order wins. MaxPool without Indices is
//! the `nn` lowering's. Only explicit geometry is taken here (`auto_pad` NOTSET, no `ceil_mode`).

use std::collections::HashMap;

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, INDEX, N};
use crate::lazy::Lazy;
use crate::program::BufKind;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "MaxPool" => max_pool,
        "MaxUnpool" => max_unpool,
        _ => return None,
    })
}

/// Kernel, strides, dilations and pads (begin, end) of a windowed op over `spatial` dimensions.
struct Geometry {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    lo: Vec<i64>,
    hi: Vec<i64>,
}

fn geometry(c: &NodeCtx<'_>, spatial: usize) -> Result<Geometry> {
    if c.attr_str("auto_pad", "NOTSET") != "NOTSET" || c.attr_int("ceil_mode", 0) != 0 {
        return Err(c.err("with Indices, only explicit pads (auto_pad NOTSET) and floor rounding are supported"));
    }
    let ints = |name: &str, default: i64, n: usize| -> Result<Vec<i64>> {
        let v = c.attr_ints(name).unwrap_or_else(|| vec![default; n]);
        if v.len() != n {
            return Err(c.err(format!("{name} {v:?}: {n} values are required")));
        }
        Ok(v)
    };
    let kernel = ints("kernel_shape", 0, spatial)?;
    let strides = ints("strides", 1, spatial)?;
    let dilations = ints("dilations", 1, spatial)?;
    let pads = ints("pads", 0, 2 * spatial)?;
    if kernel.iter().chain(&strides).chain(&dilations).any(|&v| v < 1) || pads.iter().any(|&v| v < 0) {
        return Err(c.err("kernel_shape, strides and dilations must be positive, pads not negative"));
    }
    let us = |v: Vec<i64>| v.into_iter().map(|x| x as usize).collect();
    Ok(Geometry {
        kernel: us(kernel),
        strides: us(strides),
        dilations: us(dilations),
        lo: pads[..spatial].to_vec(),
        hi: pads[spatial..].to_vec(),
    })
}

fn max_pool(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let wants_indices = c.node.outputs.get(1).is_some_and(|o| !o.is_empty());
    if !wants_indices {
        let plain = super::nn::lookup("MaxPool").expect("the nn lowering has MaxPool");
        return plain(c);
    }
    let x = c.input(0)?;
    if x.rank() < 3 {
        return Err(c.err(format!("input {:?}: rank 3 or more is required", x.shape)));
    }
    let k = x.rank() - 2;
    let g = geometry(c, k)?;
    let column_major = match c.attr_int("storage_order", 0) {
        0 => false,
        1 if k == 2 => true,
        s => return Err(c.err(format!("storage_order {s} is not supported"))),
    };
    let mut shape = x.shape[..2].to_vec();
    for i in 0..k {
        let span = (g.kernel[i] - 1) * g.dilations[i] + 1;
        let padded = x.shape[2 + i] as i64 + g.lo[i] + g.hi[i];
        if padded < span as i64 {
            return Err(c.err(format!("the window {span} is larger than the padded input {padded}")));
        }
        shape.push((padded as usize - span) / g.strides[i] + 1);
    }
    let p = c.p();
    let lo: Vec<i64> = [&[0, 0][..], &g.lo].concat();
    let hi: Vec<i64> = [&[0, 0][..], &g.hi].concat();
    let xp = p.pad(&x, &lo, &hi, f64::NEG_INFINITY);
    let vars = p.ctx.fresh_vars(&shape);
    let kvars: Vec<u32> = g.kernel.iter().map(|&kk| p.ctx.fresh_var(kk as u64)).collect();
    // Padded coordinate of kernel offset `kv` at output position `o`: o·stride + kv·dilation.
    let mut coords: Vec<N> = vec![p.ctx.var(vars[0]), p.ctx.var(vars[1])];
    for i in 0..k {
        let o = p.ctx.var(vars[2 + i]);
        let o = p.ctx.mul_i(o, g.strides[i] as i64);
        let kv = p.ctx.var(kvars[i]);
        let kv = p.ctx.mul_i(kv, g.dilations[i] as i64);
        coords.push(p.ctx.add(o, kv));
    }
    let map: HashMap<u32, N> = xp.vars.iter().copied().zip(coords.iter().copied()).collect();
    let window = substitute(&mut p.ctx, xp.expr, &map, None);
    let mut best = window;
    for (&kv, &kk) in kvars.iter().zip(&g.kernel).rev() {
        best = p.ctx.reduce(RedOp::Max, kv, kk as u64, best);
    }
    let y = Lazy { dtype: x.dtype, shape: shape.clone(), vars: vars.clone(), expr: best };
    let y = p.realize(&y, BufKind::Scratch, "maxpool");
    // The first window position holding the maximum, as a flat index into the input.
    let ymap: HashMap<u32, N> = y.vars.iter().zip(&vars).map(|(&a, &b)| (a, p.ctx.var(b))).collect();
    let yv = substitute(&mut p.ctx, y.expr, &ymap, None);
    let hit = p.ctx.binary(BinOp::Eq, window, yv);
    let mut spatial: Vec<N> = (0..k).map(|i| p.ctx.add_i(coords[2 + i], -g.lo[i])).collect();
    let mut extents: Vec<i64> = x.shape[2..].iter().map(|&d| d as i64).collect();
    if column_major {
        spatial.reverse();
        extents.reverse();
    }
    let mut flat = p.ctx.mul_i(coords[0], x.shape[1] as i64);
    flat = p.ctx.add(flat, coords[1]);
    for (s, e) in spatial.into_iter().zip(extents) {
        flat = p.ctx.mul_i(flat, e);
        flat = p.ctx.add(flat, s);
    }
    let none = p.ctx.constant(INDEX, i64::MAX as f64);
    let mut first = p.ctx.where_(hit, flat, none);
    for (&kv, &kk) in kvars.iter().zip(&g.kernel).rev() {
        first = p.ctx.reduce(RedOp::Min, kv, kk as u64, first);
    }
    let indices = Lazy { dtype: DType::I64, shape, vars, expr: first };
    Ok(vec![y, indices])
}

fn max_unpool(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    if x.rank() < 3 || idx.shape != x.shape || idx.dtype != DType::I64 {
        return Err(c.err(format!("X {:?} and int64 indices {:?} of one shape, rank 3 or more", x.shape, idx.shape)));
    }
    let k = x.rank() - 2;
    let g = geometry(c, k)?;
    let mut shape = x.shape[..2].to_vec();
    for i in 0..k {
        let d = (x.shape[2 + i] as i64 - 1) * g.strides[i] as i64 - g.lo[i] - g.hi[i] + g.kernel[i] as i64;
        shape.push(d.max(0) as usize);
    }
    // Indices address the inferred shape; a larger output_shape zero-pads it at the end.
    let padded = match c.opt_const_input(2)? {
        Some(t) => {
            let want: Vec<usize> = t.to_i64().into_iter().map(|v| v.max(0) as usize).collect();
            if want.len() != shape.len() || want[..2] != shape[..2] || want.iter().zip(&shape).any(|(w, s)| w < s) {
                return Err(c.err(format!("output_shape {want:?} is smaller than the unpooled {shape:?}")));
            }
            Some(want)
        }
        None => None,
    };
    // Each output element takes the input element whose index names it: a search of its own
    // (batch, channel) plane, as MaxPool's indices never leave their plane.
    let plane_in: usize = x.shape[2..].iter().product();
    let plane_out: usize = shape[2..].iter().product();
    let (n, ch) = (x.shape[0], x.shape[1]);
    let p = c.p();
    let xs = p.reshape(&x, &[n, ch, plane_in]);
    let is = p.reshape(&idx, &[n, ch, plane_in]);
    let vars = p.ctx.fresh_vars(&[n, ch, plane_out]);
    let j = p.ctx.fresh_var(plane_in as u64);
    let (vn, vc, vo) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]), p.ctx.var(vars[2]));
    let jv = p.ctx.var(j);
    let at = |p: &mut crate::program::Program, t: &Lazy| {
        let m = HashMap::from([(t.vars[0], vn), (t.vars[1], vc), (t.vars[2], jv)]);
        substitute(&mut p.ctx, t.expr, &m, None)
    };
    let xv = at(p, &xs);
    let iv = at(p, &is);
    let plane = p.ctx.mul_i(vn, ch as i64);
    let plane = p.ctx.add(plane, vc);
    let plane = p.ctx.mul_i(plane, plane_out as i64);
    let target = p.ctx.add(plane, vo);
    let hit = p.ctx.binary(BinOp::Eq, iv, target);
    let zero = p.ctx.constant(x.dtype, 0.0);
    let body = p.ctx.where_(hit, xv, zero);
    let expr = p.ctx.reduce(RedOp::Sum, j, plane_in as u64, body);
    let y = Lazy { dtype: x.dtype, shape: vec![n, ch, plane_out], vars, expr };
    let y = p.reshape(&y, &shape);
    Ok(vec![match padded {
        Some(want) => {
            let hi: Vec<i64> = want.iter().zip(&shape).map(|(w, s)| (w - s) as i64).collect();
            p.pad(&y, &vec![0; hi.len()], &hi, 0.0)
        }
        None => y,
    }])
}
