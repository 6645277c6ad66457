//! Normalizations and pooling not covered by `nn`: LpNormalization, MeanVarianceNormalization,
//! GroupNormalization, RMSNormalization, LRN and LpPool.

use std::collections::HashMap;

use pilot_core::DType;

use super::elementwise::{konst, with};
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp, N};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "LpNormalization" => lp_normalization,
        "MeanVarianceNormalization" => mvn,
        "GroupNormalization" => group_norm,
        "RMSNormalization" => rms_norm,
        "LRN" => lrn,
        "LpPool" => lp_pool,
        _ => return None,
    })
}

/// `Σ |x|^p` over `axes` (kept as size 1) for p = 1 or 2, and its p-th root.
fn lp_norm(p: &mut Program, x: &Lazy, axes: &[usize], pw: i64) -> Lazy {
    let t = if pw == 1 { p.unary(UnOp::Abs, x) } else { p.binary(BinOp::Mul, x, x) };
    let s = p.reduce(RedOp::Sum, &t, axes);
    if pw == 1 {
        s
    } else {
        p.unary(UnOp::Sqrt, &s)
    }
}

fn lp_normalization(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axis = c.axis(c.attr_int("axis", -1), x.rank())?;
    let pw = c.attr_int("p", 2);
    if pw != 1 && pw != 2 {
        return Err(c.err(format!("p = {pw}: only 1 and 2 are defined")));
    }
    let x = c.reduce_input(&x, 2.0);
    let p = c.p();
    let n = lp_norm(p, &x, &[axis], pw);
    // A zero norm gives zeros (as onnxruntime), not NaN.
    let zero = konst(p, &n, 0.0);
    let is0 = p.binary(BinOp::Eq, &n, &zero);
    let one = konst(p, &n, 1.0);
    let n = p.where_(&is0, &one, &n);
    let nb = p.expand(&n, &x.shape);
    Ok(vec![p.binary(BinOp::Div, &x, &nb)])
}

/// `(x - mean, 1 / sqrt(var + eps))` over `axes`, the second broadcast to `x`'s shape.
fn centered(c: &mut NodeCtx<'_>, x: &Lazy, axes: &[usize]) -> (Lazy, Lazy) {
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let x = c.reduce_input(x, 2.0);
    let p = c.p();
    let s = p.reduce(RedOp::Sum, &x, axes);
    let mean = with(p, BinOp::Div, &s, n as f64);
    let mb = p.expand(&mean, &x.shape);
    let d = p.binary(BinOp::Sub, &x, &mb);
    let d2 = p.binary(BinOp::Mul, &d, &d);
    let ss = p.reduce(RedOp::Sum, &d2, axes);
    let var = with(p, BinOp::Div, &ss, n as f64);
    (d, var)
}

fn mvn(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axes: Vec<usize> = match c.attr_ints("axes") {
        Some(a) => a.iter().map(|&a| c.axis(a, x.rank())).collect::<Result<_>>()?,
        None if x.rank() >= 4 => vec![0, 2, 3],
        None => return Err(c.err("default axes [0, 2, 3] need rank >= 4")),
    };
    let (d, var) = centered(c, &x, &axes);
    let p = c.p();
    // The ONNX function: (x - mean) / (sqrt(var) + 1e-9).
    let sd = p.unary(UnOp::Sqrt, &var);
    let sd = with(p, BinOp::Add, &sd, 1e-9);
    let sdb = p.expand(&sd, &d.shape);
    Ok(vec![p.binary(BinOp::Div, &d, &sdb)])
}

/// `(x - mean) / sqrt(var + eps)` over `axes`.
fn standardize(c: &mut NodeCtx<'_>, x: &Lazy, axes: &[usize], eps: f64) -> Lazy {
    let (d, var) = centered(c, x, axes);
    let p = c.p();
    let ve = with(p, BinOp::Add, &var, eps);
    let sd = p.unary(UnOp::Sqrt, &ve);
    let inv = p.unary(UnOp::Recip, &sd);
    let ib = p.expand(&inv, &d.shape);
    p.binary(BinOp::Mul, &d, &ib)
}

/// `x` in the precision statistics are computed in: float16 is widened to float32 when
/// `stash_type` is float32 (the default), as onnxruntime does.
fn stash(c: &mut NodeCtx<'_>, x: &Lazy) -> Lazy {
    if x.dtype == DType::F16 && c.attr_int("stash_type", 1) == 1 {
        c.p().cast(x, DType::F32)
    } else {
        x.clone()
    }
}

/// A vector of `C` entries shaped to broadcast along axis 1 of rank `rank`.
fn per_channel(p: &mut Program, v: &Lazy, rank: usize) -> Lazy {
    let mut shape = vec![1usize; rank];
    shape[1] = v.numel();
    p.reshape(v, &shape)
}

fn group_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale, bias) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let g = c.attr_int("num_groups", 0).max(0) as usize;
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    if x.rank() < 2 || g == 0 || x.shape[1] % g != 0 {
        return Err(c.err(format!("num_groups {g} does not divide the channels of {:?}", x.shape)));
    }
    let (n, ch) = (x.shape[0], x.shape[1]);
    let per = x.numel() / (n * g).max(1);
    for v in [&scale, &bias] {
        if v.numel() != ch && (c.opset() >= 21 || v.numel() != g) {
            return Err(c.err(format!("scale/bias of shape {:?}", v.shape)));
        }
    }
    let xs = stash(c, &x);
    let xr = c.p().reshape(&xs, &[n, g, per]);
    let y = standardize(c, &xr, &[2], eps);
    let p = c.p();
    let y = p.reshape(&y, &x.shape);
    let y = p.cast(&y, x.dtype);
    // Opset 21 has per-channel scale and bias; opset 18 had one per group.
    let expand_groups = |p: &mut Program, v: &Lazy| -> Lazy {
        if v.numel() == ch {
            return v.clone();
        }
        let v = p.reshape(v, &[g, 1]);
        let v = p.expand(&v, &[g, ch / g]);
        p.reshape(&v, &[ch])
    };
    let s = expand_groups(p, &scale);
    let b = expand_groups(p, &bias);
    let s = per_channel(p, &s, x.rank());
    let b = per_channel(p, &b, x.rank());
    let v = c.broadcast(&[&y, &s, &b])?;
    let p = c.p();
    let y = p.binary(BinOp::Mul, &v[0], &v[1]);
    Ok(vec![p.binary(BinOp::Add, &y, &v[2])])
}

fn rms_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale) = (c.input(0)?, c.input(1)?);
    let axis = c.axis(c.attr_int("axis", -1), x.rank())?;
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    let axes: Vec<usize> = (axis..x.rank()).collect();
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let dtype = x.dtype;
    let x = c.reduce_input(&x, 2.0);
    let x = stash(c, &x);
    let p = c.p();
    let x2 = p.binary(BinOp::Mul, &x, &x);
    let s = p.reduce(RedOp::Sum, &x2, &axes);
    let ms = with(p, BinOp::Div, &s, n as f64);
    let ms = with(p, BinOp::Add, &ms, eps);
    let r = p.unary(UnOp::Sqrt, &ms);
    let inv = p.unary(UnOp::Recip, &r);
    let ib = p.expand(&inv, &x.shape);
    let y = p.binary(BinOp::Mul, &x, &ib);
    let y = p.cast(&y, dtype);
    let v = c.broadcast(&[&y, &scale])?;
    Ok(vec![c.p().binary(BinOp::Mul, &v[0], &v[1])])
}

fn lrn(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let size = c.attr_int("size", 0);
    if x.rank() < 3 || size < 1 {
        return Err(c.err(format!("size {size} on shape {:?}", x.shape)));
    }
    let (alpha, beta, bias) =
        (c.attr_float("alpha", 1e-4) as f64, c.attr_float("beta", 0.75) as f64, c.attr_float("bias", 1.0) as f64);
    let ch = x.shape[1] as i64;
    let lo = (size - 1) / 2;
    let x = c.reduce_input(&x, size as f64);
    let p = c.p();
    // Σ x[c - lo + k]² over k in 0..size, channels outside 0..C reading as zero.
    let k = p.ctx.fresh_var(size as u64);
    let kv = p.ctx.var(k);
    let cv = p.ctx.var(x.vars[1]);
    let src = p.ctx.add(cv, kv);
    let src = p.ctx.add_i(src, -lo);
    let ok = p.ctx.ge_i(src, 0);
    let below = p.ctx.lt_i(src, ch);
    let ok = p.ctx.and(ok, below);
    let m = HashMap::from([(x.vars[1], src)]);
    let xv = substitute(&mut p.ctx, x.expr, &m, Some(ok));
    let sq = p.ctx.mul(xv, xv);
    let zero = p.ctx.constant(x.dtype, 0.0);
    let sq = p.ctx.where_(ok, sq, zero);
    let sum = p.ctx.reduce(RedOp::Sum, k, size as u64, sq);
    let s = Lazy { expr: sum, ..x.clone() };
    let s = with(p, BinOp::Mul, &s, alpha / size as f64);
    let s = with(p, BinOp::Add, &s, bias);
    let d = with(p, BinOp::Pow, &s, beta);
    Ok(vec![p.binary(BinOp::Div, &x, &d)])
}

fn lp_pool(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    if x.rank() < 3 {
        return Err(c.err("expects rank >= 3"));
    }
    let pw = c.attr_int("p", 2);
    if pw < 1 {
        return Err(c.err(format!("p = {pw}")));
    }
    let kernel: Vec<i64> = c.attr_ints("kernel_shape").ok_or_else(|| c.err("missing kernel_shape"))?;
    let k = x.rank() - 2;
    let get = |name: &str| c.attr_ints(name).unwrap_or_else(|| vec![1; k]);
    let (strides, dil) = (get("strides"), get("dilations"));
    if kernel.len() != k || strides.len() != k || dil.len() != k {
        return Err(c.err("kernel_shape, strides or dilations do not match the spatial rank"));
    }
    let ceil = c.attr_int("ceil_mode", 0) != 0;
    let auto = c.attr_str("auto_pad", "NOTSET");
    let pads = c.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    if pads.len() != 2 * k {
        return Err(c.err(format!("{} pads for {k} spatial dims", pads.len())));
    }
    let (mut lo, mut hi, mut out) = (vec![0i64; k + 2], vec![0i64; k + 2], Vec::new());
    for i in 0..k {
        let (d, s) = (x.shape[2 + i] as i64, strides[i]);
        let eff = (kernel[i] - 1) * dil[i] + 1;
        let o = match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = (d + s - 1) / s;
                let total = ((o - 1) * s + eff - d).max(0);
                let small = total / 2;
                lo[2 + i] = if auto == "SAME_UPPER" { small } else { total - small };
                o
            }
            "NOTSET" | "VALID" => {
                if auto == "NOTSET" {
                    lo[2 + i] = pads[i];
                    hi[2 + i] = pads[i + k];
                }
                let span = d + lo[2 + i] + hi[2 + i] - eff;
                if span < 0 {
                    return Err(c.err("window larger than the padded input"));
                }
                if ceil {
                    let o = (span + s - 1) / s + 1;
                    if (o - 1) * s >= d + lo[2 + i] {
                        o - 1
                    } else {
                        o
                    }
                } else {
                    span / s + 1
                }
            }
            other => return Err(c.err(format!("unknown auto_pad `{other}`"))),
        };
        // Room on the right for every window (read as zeros).
        hi[2 + i] = hi[2 + i].max((o - 1) * s + eff - d - lo[2 + i]);
        out.push(o as usize);
    }
    let reuse = kernel.iter().product::<i64>() as f64 / strides.iter().product::<i64>() as f64;
    let x = c.reduce_input(&x, reuse);
    let p = c.p();
    let xp = p.pad(&x, &lo, &hi, 0.0);
    let mut shape = x.shape[..2].to_vec();
    shape.extend_from_slice(&out);
    let vars = p.ctx.fresh_vars(&shape);
    let kvars: Vec<u32> = kernel.iter().map(|&kk| p.ctx.fresh_var(kk as u64)).collect();
    let mut m: HashMap<u32, N> = HashMap::new();
    for (&old, &new) in xp.vars.iter().zip(&vars).take(2) {
        m.insert(old, p.ctx.var(new));
    }
    for i in 0..k {
        let o = p.ctx.var(vars[2 + i]);
        let o = p.ctx.mul_i(o, strides[i]);
        let kk = p.ctx.var(kvars[i]);
        let kk = p.ctx.mul_i(kk, dil[i]);
        m.insert(xp.vars[2 + i], p.ctx.add(o, kk));
    }
    let v = substitute(&mut p.ctx, xp.expr, &m, None);
    let a = p.ctx.unary(UnOp::Abs, v);
    let term = match pw {
        1 => a,
        2 => p.ctx.mul(v, v),
        _ => {
            let e = p.ctx.constant(x.dtype, pw as f64);
            p.ctx.binary(BinOp::Pow, a, e)
        }
    };
    let mut acc = term;
    for (&kv, &kk) in kvars.iter().zip(&kernel).rev() {
        acc = p.ctx.reduce(RedOp::Sum, kv, kk as u64, acc);
    }
    let expr = match pw {
        1 => acc,
        2 => p.ctx.unary(UnOp::Sqrt, acc),
        _ => {
            let e = p.ctx.constant(x.dtype, 1.0 / pw as f64);
            p.ctx.binary(BinOp::Pow, acc, e)
        }
    };
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr }])
}
