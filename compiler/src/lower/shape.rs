//! Movement and shape operators: they rewrite indices, never move data at run time on their own.

use pilot_core::DType;

use super::budget;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::BinOp;
use crate::lazy::Lazy;
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Constant" => constant,
        "Shape" => shape,
        "Size" => size,
        "ConstantOfShape" => constant_of_shape,
        "Range" => range,
        "Reshape" => reshape,
        "Flatten" => flatten,
        "Transpose" => transpose,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Expand" => expand,
        "Tile" => tile,
        "Concat" => concat,
        "Split" => split,
        "Slice" => slice,
        "Pad" => pad,
        "Gather" => gather,
        "GatherElements" => gather_elements,
        "DepthToSpace" => depth_to_space,
        "SpaceToDepth" => space_to_depth,
        _ => return None,
    })
}

fn dims_of(c: &NodeCtx<'_>, t: &Tensor) -> Result<Vec<usize>> {
    t.to_i64().into_iter().map(|d| usize::try_from(d).map_err(|_| c.err(format!("negative dimension {d}")))).collect()
}

fn constant(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let t = c.node.constant_value().ok_or_else(|| c.err("no supported value attribute"))?;
    Ok(vec![c.p().constant(t)])
}

fn shape(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank() as i64;
    let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clampi(c.attr_int("start", 0));
    let end = clampi(c.node.attr_int("end").unwrap_or(r));
    let dims: Vec<i64> = x.shape[start..end.max(start)].iter().map(|&d| d as i64).collect();
    let n = dims.len();
    Ok(vec![c.p().constant(Tensor::from_i64(vec![n], &dims))])
}

fn size(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    Ok(vec![c.p().full(DType::I64, &[], x.numel() as f64)])
}

fn constant_of_shape(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let t = c.const_input(0)?;
    let shape = dims_of(c, &t)?;
    let (dtype, v) = match c.node.attr_tensor("value") {
        Some(v) => (v.dtype, v.to_f64().first().copied().unwrap_or(0.0)),
        None => (DType::F32, 0.0),
    };
    c.check_value("output", dtype, &shape)?;
    Ok(vec![c.p().full(dtype, &shape, v)])
}

fn range(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (s, l, d) = (c.const_input(0)?, c.const_input(1)?, c.const_input(2)?);
    let (start, limit, delta) = (s.to_f64()[0], l.to_f64()[0], d.to_f64()[0]);
    if delta == 0.0 {
        return Err(c.err("delta is zero"));
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    if !n.is_finite() {
        return Err(c.err(format!("range {start}..{limit} by {delta} has no finite length")));
    }
    let n = n as usize;
    c.check_value("output", s.dtype, &[n])?;
    if n as u64 > budget::FOLD_WORK_LIMIT {
        return Err(c.err(format!(
            "a range of {n} values is too long to build at compile time (limit {})",
            budget::FOLD_WORK_LIMIT
        )));
    }
    let vals: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
    Ok(vec![c.p().constant(Tensor::from_f64(s.dtype, vec![n], &vals))])
}

/// ONNX Reshape's target: 0 copies the input dimension (unless allowzero), -1 is inferred.
fn reshape_target(c: &NodeCtx<'_>, input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(*input.get(i).ok_or_else(|| c.err("0 refers past the input rank"))?),
            d if d >= 0 => out.push(d as usize),
            _ => return Err(c.err(format!("invalid target shape {spec:?}"))),
        }
    }
    if let Some(i) = infer {
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(c.err(format!("cannot reshape {input:?} to {spec:?}")));
        }
        out[i] = total / known;
    }
    if out.iter().product::<usize>() != total {
        return Err(c.err(format!("cannot reshape {input:?} ({total} elements) to {out:?}")));
    }
    Ok(out)
}

fn reshape(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let spec = match c.opset() {
        o if o < 5 => c.attr_ints("shape").ok_or_else(|| c.err("missing attribute `shape`"))?,
        _ => c.const_input(1)?.to_i64(),
    };
    let target = reshape_target(c, &x.shape, &spec, c.attr_int("allowzero", 0) != 0)?;
    Ok(vec![c.p().reshape(&x, &target)])
}

fn flatten(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank() as i64;
    let a = c.attr_int("axis", 1);
    let a = if a < 0 { a + r } else { a };
    if a < 0 || a > r {
        return Err(c.err(format!("axis {a} out of range for rank {r}")));
    }
    let outer: usize = x.shape[..a as usize].iter().product();
    Ok(vec![c.p().reshape(&x, &[outer, x.numel() / outer.max(1)])])
}

fn transpose(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let perm: Vec<usize> = match c.attr_ints("perm") {
        Some(p) => p.iter().map(|&a| c.axis(a, x.rank())).collect::<Result<_>>()?,
        None => (0..x.rank()).rev().collect(),
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..x.rank()).collect::<Vec<_>>() {
        return Err(c.err(format!("perm {perm:?} is not a permutation of rank {}", x.rank())));
    }
    Ok(vec![c.p().permute(&x, &perm)])
}

/// Axes from the attribute (old opsets) or from input 1.
fn axes_arg(c: &mut NodeCtx<'_>, input_since: i64) -> Result<Option<Vec<i64>>> {
    if c.opset() < input_since {
        Ok(c.attr_ints("axes"))
    } else {
        Ok(c.opt_const_input(1)?.map(|t| t.to_i64()))
    }
}

fn squeeze(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axes = match axes_arg(c, 13)? {
        Some(a) => a.iter().map(|&a| c.axis(a, x.rank())).collect::<Result<Vec<_>>>()?,
        None => (0..x.rank()).filter(|&i| x.shape[i] == 1).collect(),
    };
    if let Some(&a) = axes.iter().find(|&&a| x.shape[a] != 1) {
        return Err(c.err(format!("cannot squeeze axis {a} of size {}", x.shape[a])));
    }
    let shape: Vec<usize> = (0..x.rank()).filter(|i| !axes.contains(i)).map(|i| x.shape[i]).collect();
    Ok(vec![c.p().reshape(&x, &shape)])
}

fn unsqueeze(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axes = axes_arg(c, 13)?.ok_or_else(|| c.err("missing axes"))?;
    let out_rank = x.rank() + axes.len();
    let mut axes: Vec<usize> = axes.iter().map(|&a| c.axis(a, out_rank)).collect::<Result<_>>()?;
    axes.sort_unstable();
    if let Some(w) = axes.windows(2).find(|w| w[0] == w[1]) {
        return Err(c.err(format!("axis {} is repeated", w[0])));
    }
    let mut shape = x.shape.clone();
    for a in axes {
        shape.insert(a, 1);
    }
    Ok(vec![c.p().reshape(&x, &shape)])
}

fn expand(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let t = c.const_input(1)?;
    let target = dims_of(c, &t)?;
    c.check_value("target shape", x.dtype, &target)?;
    let spec = c.p().full(DType::Bool, &target, 0.0);
    let v = c.broadcast(&[&x, &spec])?;
    Ok(vec![v[0].clone()])
}

fn tile(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let t = c.const_input(1)?;
    let reps = dims_of(c, &t)?;
    if reps.len() != x.rank() {
        return Err(c.err(format!("repeats has {} entries for rank {}", reps.len(), x.rank())));
    }
    let out: Vec<usize> = x.shape.iter().zip(&reps).map(|(&d, &r)| d.saturating_mul(r)).collect();
    c.check_value("output", x.dtype, &out)?;
    // Insert a repeat axis before each dimension, broadcast it, and merge.
    let mut with_axes = Vec::new();
    let mut expanded = Vec::new();
    for (&d, &r) in x.shape.iter().zip(&reps) {
        with_axes.extend([1, d]);
        expanded.extend([r, d]);
    }
    let p = c.p();
    let y = p.reshape(&x, &with_axes);
    let y = p.expand(&y, &expanded);
    Ok(vec![p.reshape(&y, &out)])
}

/// Joins `parts` along `axis` (all other dimensions equal).
pub(super) fn concat_lazy(c: &mut NodeCtx<'_>, parts: &[Lazy], axis: usize) -> Result<Lazy> {
    // A part holding a reduction is computed on its own first: fused into the concatenation, its
    // reduction loop would run (guarded) over every position of the joined axis.
    let parts: Vec<Lazy> = parts
        .iter()
        .map(|x| {
            let p = c.p();
            if p.ctx.has_reduce(x.expr) {
                p.realize(x, crate::program::BufKind::Scratch, "concat_part")
            } else {
                x.clone()
            }
        })
        .collect();
    let parts = &parts[..];
    let total: usize = parts.iter().map(|x| x.shape[axis]).sum();
    let mut offset = 0i64;
    let mut acc: Option<Lazy> = None;
    for x in parts {
        if x.shape.len() != parts[0].shape.len()
            || x.shape.iter().zip(&parts[0].shape).enumerate().any(|(i, (a, b))| i != axis && a != b)
        {
            return Err(c.err(format!("cannot concatenate {:?} with {:?} on axis {axis}", x.shape, parts[0].shape)));
        }
        let mut lo = vec![0i64; x.rank()];
        let mut hi = vec![0i64; x.rank()];
        lo[axis] = offset;
        hi[axis] = total as i64 - offset - x.shape[axis] as i64;
        let p = c.p();
        let padded = p.pad(x, &lo, &hi, 0.0);
        acc = Some(match acc {
            None => padded,
            Some(prev) => {
                // Select by position along the axis: the earlier parts cover [0, offset).
                let coord = p.ctx.var(padded.vars[axis]);
                let before = p.ctx.lt_i(coord, offset);
                let cond = Lazy { dtype: DType::Bool, expr: before, ..padded.clone() };
                p.where_(&cond, &prev, &padded)
            }
        });
        offset += x.shape[axis] as i64;
    }
    acc.ok_or_else(|| c.err("nothing to concatenate"))
}

fn concat(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let parts: Vec<Lazy> = (0..c.num_inputs()).map(|i| c.input(i)).collect::<Result<_>>()?;
    let parts: Vec<Lazy> = parts.into_iter().filter(|x| x.numel() > 0 || x.rank() == 0).collect();
    let first = parts.first().ok_or_else(|| c.err("no non-empty inputs"))?;
    let axis = c.axis(c.attr_int("axis", 0), first.rank())?;
    Ok(vec![concat_lazy(c, &parts, axis)?])
}

fn split(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axis = c.axis(c.attr_int("axis", 0), x.rank())?;
    let n = c.node.outputs.len();
    let sizes: Vec<usize> =
        match if c.opset() < 13 { c.attr_ints("split") } else { c.opt_const_input(1)?.map(|t| t.to_i64()) } {
            Some(s) => s.iter().map(|&v| v as usize).collect(),
            None => {
                let d = x.shape[axis];
                let k = c.node.attr_int("num_outputs").map_or(n, |v| v as usize);
                let chunk = d.div_ceil(k.max(1));
                (0..k).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
            }
        };
    if sizes.iter().sum::<usize>() != x.shape[axis] {
        return Err(c.err(format!("split sizes {sizes:?} do not add up to {}", x.shape[axis])));
    }
    let mut out = Vec::new();
    let mut start = 0i64;
    for s in sizes {
        let mut starts = vec![0i64; x.rank()];
        starts[axis] = start;
        let mut len = x.shape.clone();
        len[axis] = s;
        out.push(c.p().slice(&x, &starts, &vec![1; x.rank()], &len));
        start += s as i64;
    }
    Ok(out)
}

fn slice(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank();
    let (starts, ends, axes, steps) = if c.opset() < 10 {
        (
            c.attr_ints("starts").ok_or_else(|| c.err("missing starts"))?,
            c.attr_ints("ends").ok_or_else(|| c.err("missing ends"))?,
            c.attr_ints("axes"),
            None,
        )
    } else {
        (
            c.const_input(1)?.to_i64(),
            c.const_input(2)?.to_i64(),
            c.opt_const_input(3)?.map(|t| t.to_i64()),
            c.opt_const_input(4)?.map(|t| t.to_i64()),
        )
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..starts.len()).collect(),
    };
    let mut st = vec![0i64; r];
    let mut step = vec![1i64; r];
    let mut len = x.shape.clone();
    for (k, &a) in axes.iter().enumerate() {
        let d = x.shape[a] as i64;
        let s = steps.as_ref().map_or(1, |v| v[k]);
        if s == 0 {
            return Err(c.err("step is zero"));
        }
        let norm = |v: i64| if v < 0 { v + d } else { v };
        let (b, e) = if s > 0 {
            (norm(starts[k]).clamp(0, d), norm(ends[k]).clamp(0, d))
        } else {
            (norm(starts[k]).clamp(-1, d - 1), norm(ends[k]).clamp(-1, d - 1))
        };
        let n = if s > 0 { (e - b + s - 1).div_euclid(s) } else { (b - e + (-s) - 1).div_euclid(-s) };
        st[a] = b;
        step[a] = s;
        len[a] = n.max(0) as usize;
    }
    Ok(vec![c.p().slice(&x, &st, &step, &len)])
}

fn pad(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank();
    let mode = c.attr_str("mode", "constant");
    let (pads, value, axes) = if c.opset() < 11 {
        let pads = c.attr_ints("pads").or_else(|| c.attr_ints("paddings")).ok_or_else(|| c.err("missing pads"))?;
        (pads, c.attr_float("value", 0.0) as f64, None)
    } else {
        let pads = c.const_input(1)?.to_i64();
        let v = c.opt_const_input(2)?.map_or(0.0, |t| t.to_f64().first().copied().unwrap_or(0.0));
        (pads, v, c.opt_const_input(3)?.map(|t| t.to_i64()))
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(c.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mut lo = vec![0i64; r];
    let mut hi = vec![0i64; r];
    for (k, &a) in axes.iter().enumerate() {
        lo[a] = pads[k];
        hi[a] = pads[k + axes.len()];
        let d = x.shape[a] as i64;
        if d.checked_add(lo[a]).and_then(|n| n.checked_add(hi[a])).is_none_or(|n| n < 0) {
            return Err(c.err(format!("pads {}/{} make axis {a} of size {d} negative", lo[a], hi[a])));
        }
    }
    let out: Vec<usize> = (0..r).map(|a| (x.shape[a] as i64 + lo[a] + hi[a]) as usize).collect();
    c.check_value("output", x.dtype, &out)?;
    match mode.as_str() {
        "constant" => Ok(vec![c.p().pad(&x, &lo, &hi, value)]),
        "edge" | "reflect" | "wrap" => Ok(vec![index_pad(c, &x, &lo, &hi, &mode)?]),
        other => Err(c.err(format!("unsupported mode `{other}`"))),
    }
}

/// Pads by mapping each output coordinate to a source coordinate (edge, reflect, wrap).
fn index_pad(c: &mut NodeCtx<'_>, x: &Lazy, lo: &[i64], hi: &[i64], mode: &str) -> Result<Lazy> {
    let mut y = x.clone();
    for a in 0..x.rank() {
        if lo[a] == 0 && hi[a] == 0 {
            continue;
        }
        let d = y.shape[a] as i64;
        let n = d + lo[a] + hi[a];
        if d == 0 || n < 0 || (mode == "reflect" && (lo[a] >= d || hi[a] >= d)) {
            return Err(c.err(format!("cannot {mode}-pad a dimension of {d} by {}/{}", lo[a], hi[a])));
        }
        // Gather along the axis with a constant index table.
        let src: Vec<i64> = (0..n)
            .map(|i| {
                let j = i - lo[a];
                match mode {
                    "edge" => j.clamp(0, d - 1),
                    "wrap" => j.rem_euclid(d),
                    _ => {
                        let period = 2 * (d - 1).max(1);
                        let m = j.rem_euclid(period);
                        if m >= d {
                            period - m
                        } else {
                            m
                        }
                    }
                }
            })
            .collect();
        let table = Tensor::from_i64(vec![n as usize], &src);
        y = take(c, &y, a, &table)?;
    }
    Ok(y)
}

/// `x` indexed along `axis` by the constant table `idx` (values already in range).
fn take(c: &mut NodeCtx<'_>, x: &Lazy, axis: usize, idx: &Tensor) -> Result<Lazy> {
    let p = c.p();
    let table = p.constant(idx.clone());
    let mut shape = x.shape.clone();
    shape[axis] = idx.numel();
    let vars = p.ctx.fresh_vars(&shape);
    // The table read at the output coordinate along `axis`.
    let t_var = table.vars[0];
    let a_node = p.ctx.var(vars[axis]);
    let t_expr =
        crate::ir::subst::substitute(&mut p.ctx, table.expr, &std::collections::HashMap::from([(t_var, a_node)]), None);
    let map =
        x.vars.iter().enumerate().map(|(i, &v)| (v, if i == axis { t_expr } else { p.ctx.var(vars[i]) })).collect();
    let expr = crate::ir::subst::substitute(&mut p.ctx, x.expr, &map, None);
    Ok(Lazy { dtype: x.dtype, shape, vars, expr })
}

fn gather(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let axis = c.axis(c.attr_int("axis", 0), x.rank())?;
    let d = x.shape[axis] as i64;
    if c.p().is_constant(&idx) {
        // Constant indices are checked as onnxruntime checks them; only run-time ones are clamped.
        let t = c.const_input(1)?;
        if let Some(bad) = t.to_i64().into_iter().find(|&i| i < -d || i >= d) {
            return Err(c.err(format!("index {bad} is out of range for axis {axis} of size {d}")));
        }
    }
    let p = c.p();
    // Output shape: x.shape[..axis] + idx.shape + x.shape[axis+1..].
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    let vars = p.ctx.fresh_vars(&shape);
    let k = idx.rank();
    // Index value at the idx coordinates, wrapped if negative, clamped to stay in bounds.
    let imap = idx.vars.iter().enumerate().map(|(i, &v)| (v, p.ctx.var(vars[axis + i]))).collect();
    let iv = crate::ir::subst::substitute(&mut p.ctx, idx.expr, &imap, None);
    let iv = p.ctx.cast(iv, crate::ir::INDEX);
    let zero = p.ctx.int(0);
    let neg = p.ctx.binary(BinOp::Lt, iv, zero);
    let wrapped = p.ctx.add_i(iv, d);
    let iv = p.ctx.where_(neg, wrapped, iv);
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
                std::cmp::Ordering::Less => p.ctx.var(vars[i]),
                std::cmp::Ordering::Equal => iv,
                std::cmp::Ordering::Greater => p.ctx.var(vars[i + k - 1]),
            };
            (v, n)
        })
        .collect();
    let expr = crate::ir::subst::substitute(&mut p.ctx, x.expr, &map, None);
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr }])
}

fn gather_elements(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let axis = c.axis(c.attr_int("axis", 0), x.rank())?;
    if idx.rank() != x.rank() {
        return Err(c.err("indices and data ranks differ"));
    }
    let d = x.shape[axis] as i64;
    let p = c.p();
    let vars = idx.vars.clone();
    let iv = p.ctx.cast(idx.expr, crate::ir::INDEX);
    let zero = p.ctx.int(0);
    let neg = p.ctx.binary(BinOp::Lt, iv, zero);
    let wrapped = p.ctx.add_i(iv, d);
    let iv = p.ctx.where_(neg, wrapped, iv);
    let hi = p.ctx.int(d - 1);
    let iv = p.ctx.binary(BinOp::Max, iv, zero);
    let iv = p.ctx.binary(BinOp::Min, iv, hi);
    let map = x.vars.iter().enumerate().map(|(i, &v)| (v, if i == axis { iv } else { p.ctx.var(vars[i]) })).collect();
    let expr = crate::ir::subst::substitute(&mut p.ctx, x.expr, &map, None);
    Ok(vec![Lazy { dtype: x.dtype, shape: idx.shape.clone(), vars, expr }])
}

fn depth_to_space(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let b = c.attr_int("blocksize", 0) as usize;
    let [n, ch, h, w] = x.shape[..] else {
        return Err(c.err("expects rank 4"));
    };
    if b == 0 || ch % (b * b) != 0 {
        return Err(c.err(format!("blocksize {b} does not divide {ch} channels")));
    }
    let co = ch / (b * b);
    let crd = c.node.attr_str("mode").as_deref() == Some("CRD");
    let p = c.p();
    let y = if crd {
        let y = p.reshape(&x, &[n, co, b, b, h, w]);
        p.permute(&y, &[0, 1, 4, 2, 5, 3])
    } else {
        let y = p.reshape(&x, &[n, b, b, co, h, w]);
        p.permute(&y, &[0, 3, 4, 1, 5, 2])
    };
    Ok(vec![p.reshape(&y, &[n, co, h * b, w * b])])
}

fn space_to_depth(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let b = c.attr_int("blocksize", 0) as usize;
    let [n, ch, h, w] = x.shape[..] else {
        return Err(c.err("expects rank 4"));
    };
    if b == 0 || h % b != 0 || w % b != 0 {
        return Err(c.err(format!("blocksize {b} does not divide {h}x{w}")));
    }
    let crd = c.node.attr_str("mode").as_deref() == Some("CRD");
    let p = c.p();
    let y = p.reshape(&x, &[n, ch, h / b, b, w / b, b]);
    let y = if crd { p.permute(&y, &[0, 1, 3, 5, 2, 4]) } else { p.permute(&y, &[0, 3, 5, 1, 2, 4]) };
    Ok(vec![p.reshape(&y, &[n, ch * b * b, h / b, w / b])])
}
