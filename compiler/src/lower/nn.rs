//! Neural-network operators: convolutions, matrix products, normalization, pooling.

use std::collections::HashMap;

use pilot_core::DType;

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp, N};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Conv" => conv,
        "ConvTranspose" => conv_transpose,
        "MatMul" => matmul,
        "Gemm" => gemm,
        "BatchNormalization" => batch_norm,
        "InstanceNormalization" => instance_norm,
        "LayerNormalization" => layer_norm,
        "GlobalAveragePool" => |c| global_pool(c, RedOp::Sum),
        "GlobalMaxPool" => |c| global_pool(c, RedOp::Max),
        "MaxPool" => |c| pool(c, RedOp::Max),
        "AveragePool" => |c| pool(c, RedOp::Sum),
        _ => return None,
    })
}

/// Spatial geometry of a windowed op (conv or pool) over `spatial` input dims.
pub(super) struct Window {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pad_lo: Vec<i64>,
    pub pad_hi: Vec<i64>,
    /// `pad_hi` as the model declared it, before the ceil_mode overhang.
    pub declared_hi: Vec<i64>,
    pub out: Vec<usize>,
}

/// The values of attribute `name`, each of which must be at least 1.
fn positive(c: &NodeCtx<'_>, name: &str, v: &[i64]) -> Result<Vec<usize>> {
    match v.iter().find(|&&x| x < 1) {
        Some(bad) => Err(c.err(format!("{name} {v:?} has {bad}: every value must be at least 1"))),
        None => Ok(v.iter().map(|&x| x as usize).collect()),
    }
}

fn window(c: &NodeCtx<'_>, spatial: &[usize], kernel: Vec<usize>, ceil_mode: bool) -> Result<Window> {
    let k = spatial.len();
    let get = |name: &str| -> Result<Vec<usize>> {
        match c.attr_ints(name) {
            None => Ok(vec![1; k]),
            Some(v) => positive(c, name, &v),
        }
    };
    let strides = get("strides")?;
    let dilations = get("dilations")?;
    if kernel.len() != k || strides.len() != k || dilations.len() != k {
        return Err(c.err("kernel_shape, strides or dilations do not match the spatial rank"));
    }
    let auto = c.attr_str("auto_pad", "NOTSET");
    let mut pad_lo = vec![0i64; k];
    let mut pad_hi = vec![0i64; k];
    let mut out = vec![0usize; k];
    let mut declared_hi = vec![0i64; k];
    for i in 0..k {
        let eff = ((kernel[i] - 1) * dilations[i] + 1) as i64;
        let d = spatial[i] as i64;
        let s = strides[i] as i64;
        match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = (d + s - 1) / s;
                let total = ((o - 1) * s + eff - d).max(0);
                let small = total / 2;
                (pad_lo[i], pad_hi[i]) =
                    if auto == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
                out[i] = o as usize;
                declared_hi[i] = pad_hi[i];
            }
            "VALID" | "NOTSET" => {
                if auto == "NOTSET" {
                    if let Some(p) = c.attr_ints("pads") {
                        if p.len() != 2 * k {
                            return Err(c.err(format!("{} pads for {k} spatial dims", p.len())));
                        }
                        pad_lo[i] = p[i];
                        pad_hi[i] = p[i + k];
                    }
                }
                let span = d + pad_lo[i] + pad_hi[i] - eff;
                if span < 0 {
                    return Err(c.err(format!("window {eff} larger than padded input {}", d + pad_lo[i] + pad_hi[i])));
                }
                let o = if ceil_mode { (span + s - 1) / s + 1 } else { span / s + 1 };
                // The last window must start inside the input or the left padding.
                let o = if ceil_mode && (o - 1) * s >= d + pad_lo[i] { o - 1 } else { o };
                out[i] = o as usize;
                declared_hi[i] = pad_hi[i];
                // Extra room on the right for ceil_mode windows (read as padding).
                pad_hi[i] = pad_hi[i].max((o - 1) * s + eff - d - pad_lo[i]);
            }
            other => return Err(c.err(format!("unknown auto_pad `{other}`"))),
        }
    }
    Ok(Window { kernel, strides, dilations, pad_lo, pad_hi, declared_hi, out })
}

/// The padded input read at window positions: maps `x`'s vars (batch, channel, spatial...) to
/// `(n, ch, out*stride + k*dilation)`.
pub(super) fn window_read(p: &mut Program, xp: &Lazy, n: N, ch: N, out_vars: &[u32], kvars: &[u32], w: &Window) -> N {
    let out: Vec<N> = out_vars.iter().map(|&v| p.ctx.var(v)).collect();
    window_read_at(p, xp, n, ch, &out, kvars, w)
}

/// [`window_read`] at output positions given as expressions.
fn window_read_at(p: &mut Program, xp: &Lazy, n: N, ch: N, out: &[N], kvars: &[u32], w: &Window) -> N {
    let mut map = HashMap::new();
    map.insert(xp.vars[0], n);
    map.insert(xp.vars[1], ch);
    for i in 0..w.kernel.len() {
        let o = p.ctx.mul_i(out[i], w.strides[i] as i64);
        let kk = p.ctx.var(kvars[i]);
        let kk = p.ctx.mul_i(kk, w.dilations[i] as i64);
        map.insert(xp.vars[2 + i], p.ctx.add(o, kk));
    }
    substitute(&mut p.ctx, xp.expr, &map, None)
}

fn conv(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, wt) = (c.input(0)?, c.input(1)?);
    let bias = c.opt_input(2)?;
    if x.rank() < 3 || wt.rank() != x.rank() {
        return Err(c.err(format!("input {:?} and weight {:?} ranks do not fit", x.shape, wt.shape)));
    }
    let groups = match c.attr_int("group", 1) {
        g if g >= 1 => g as usize,
        g => return Err(c.err(format!("group {g}: must be at least 1"))),
    };
    let (n, cin) = (x.shape[0], x.shape[1]);
    let cout = wt.shape[0];
    let cig = wt.shape[1];
    if cin != cig * groups || cout % groups != 0 {
        return Err(c.err(format!("channels: input {cin}, weight {:?}, groups {groups}", wt.shape)));
    }
    let kernel = match c.attr_ints("kernel_shape") {
        Some(k) => positive(c, "kernel_shape", &k)?,
        None => wt.shape[2..].to_vec(),
    };
    let w = window(c, &x.shape[2..], kernel, false)?;
    if let Some(y) = super::image::conv(c, &x, &wt, bias.as_ref(), &w, groups) {
        return Ok(vec![y]);
    }
    if let Some(y) = super::winograd::lower(c, &x, &wt, bias.as_ref(), &w, groups)? {
        return Ok(vec![y]);
    }
    let reuse =
        (cout / groups * w.kernel.iter().product::<usize>()) as f64 / w.strides.iter().product::<usize>() as f64;
    if channels_inner(c, &x, &wt, groups, &w) {
        return channels_inner_conv(c, &x, bias.as_ref(), &w, reuse).map(|y| vec![y]);
    }
    // The CPU's register tiles block output channels by 4 or more where they share an input row.
    let shared = cout / groups >= 4;
    let wt = if groups == 1 { conv_panels(c, wt) } else { wt };
    let xp = c.windowed_input(&x, &w.pad_lo, &w.pad_hi, 0.0, reuse, *w.strides.last().unwrap_or(&1), shared);
    let p = c.p();
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&w.out);
    let vars = p.ctx.fresh_vars(&shape);
    let ci = p.ctx.fresh_var(cig as u64);
    let kvars: Vec<u32> = w.kernel.iter().map(|&k| p.ctx.fresh_var(k as u64)).collect();
    let (vn, vco) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]));
    let cog = (cout / groups) as i64;
    let g = p.ctx.div_i(vco, cog);
    let gbase = p.ctx.mul_i(g, cig as i64);
    let civ = p.ctx.var(ci);
    let ch = p.ctx.add(gbase, civ);
    let xv = window_read(p, &xp, vn, ch, &vars[2..], &kvars, &w);
    let mut wmap = HashMap::from([(wt.vars[0], vco), (wt.vars[1], civ)]);
    for (i, &kv) in kvars.iter().enumerate() {
        wmap.insert(wt.vars[2 + i], p.ctx.var(kv));
    }
    let wv = substitute(&mut p.ctx, wt.expr, &wmap, None);
    let prod = p.ctx.mul(xv, wv);
    let expr = window_sum(p, prod, ci, &kvars, &w, bias.as_ref(), vco);
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr }])
}

/// A convolution's output: `prod` (input × weight) summed over the window variables `kvars` and
/// then the input-channel variable `ci`, plus the bias at output channel `co`.
fn window_sum(p: &mut Program, prod: N, ci: u32, kvars: &[u32], w: &Window, bias: Option<&Lazy>, co: N) -> N {
    let mut acc = prod;
    for (&kv, &k) in kvars.iter().zip(&w.kernel).rev() {
        acc = p.ctx.reduce(RedOp::Sum, kv, k as u64, acc);
    }
    acc = p.ctx.reduce(RedOp::Sum, ci, p.ctx.var_extent(ci), acc);
    match bias {
        Some(b) => {
            let bv = substitute(&mut p.ctx, b.expr, &HashMap::from([(b.vars[0], co)]), None);
            p.ctx.add(acc, bv)
        }
        None => acc,
    }
}

/// Whether a convolution computes along its output channels on the CPU ([`channels_inner_conv`]):
/// where the vector lanes its output rows keep busy are at most 3/4 of those its output channels
/// would (lanes busy over a row of `e` outputs: `e / (⌈e / lanes⌉ · lanes)`). Small maps with many
/// channels — the deep layers of a backbone, a 1-D convolution over a few frames — qualify.
/// Ungrouped float32 convolutions with constant weights only.
fn channels_inner(c: &mut NodeCtx<'_>, x: &Lazy, wt: &Lazy, groups: usize, w: &Window) -> bool {
    let lanes = c.cpu_lanes();
    let busy = |e: usize| e as f64 / (e.div_ceil(lanes) * lanes) as f64;
    let (cout, row) = (wt.shape[0], *w.out.last().unwrap_or(&1));
    lanes > 0
        && groups == 1
        && x.dtype == DType::F32
        && cout >= lanes
        && 4.0 * busy(row) <= 3.0 * busy(cout)
        && c.p().is_constant(wt)
}

/// The convolution realized as `[n, positions, cout]` (output channels innermost, the output
/// positions one dimension, so the register tiles can block any number of them) from weights stored
/// as `[cin, kernel..., cout]`: the CPU's register tiles load a vector of output channels' weights
/// and broadcast one input value per output position. Returned as an `[n, cout, out...]` view.
fn channels_inner_conv(c: &mut NodeCtx<'_>, x: &Lazy, bias: Option<&Lazy>, w: &Window, reuse: f64) -> Result<Lazy> {
    let g = c.const_input(1)?;
    let (cout, cin) = (g.shape[0], g.shape[1]);
    let taps: usize = w.kernel.iter().product();
    let values = g.to_f64();
    let moved: Vec<f64> = (0..values.len()).map(|i| values[(i % cout) * cin * taps + i / cout]).collect();
    let mut moved_shape = vec![cin];
    moved_shape.extend_from_slice(&w.kernel);
    moved_shape.push(cout);
    // Broadcast scalars: a stride costs these loads nothing.
    let xp = c.windowed_input(x, &w.pad_lo, &w.pad_hi, 0.0, reuse, *w.strides.last().unwrap_or(&1), true);
    let name = format!("{}_ci", c.node.name);
    let positions: usize = w.out.iter().product();
    // Panels of output channels where the tiles block positions (as a product's right operand): a
    // block of 4 covers a count of 4 or more that is not a multiple of 4 (some recomputed); fewer
    // positions are a matrix-vector product, which reads whole rows (orientation_lcnet's last
    // convolution on a 1×1 map: 0.135 ms by rows, 0.48 in panels).
    let k_len = moved.len() / cout;
    let wt = c.p().constant(Tensor::from_f64(DType::F32, vec![k_len, cout], &moved));
    let rows = x.shape[0] * positions;
    let wt = panels(c, wt, if rows >= PANEL_MIN_ROWS { rows.next_multiple_of(4) } else { rows });
    let p = c.p();
    let wt = p.reshape(&wt, &moved_shape);
    // Register tiles block a dimension by 4: from 16 positions (at most 3/16 recomputed) they are
    // computed in whole blocks unless the batch blocks, the ones past the end repeating the last and
    // sliced off the view.
    let computed =
        if x.shape[0].is_multiple_of(4) || positions < 16 { positions } else { positions.next_multiple_of(4) };
    let shape = vec![x.shape[0], computed, cout];
    let vars = p.ctx.fresh_vars(&shape);
    let ci = p.ctx.fresh_var(cin as u64);
    let kvars: Vec<u32> = w.kernel.iter().map(|&k| p.ctx.fresh_var(k as u64)).collect();
    let (vn, vco) = (p.ctx.var(vars[0]), p.ctx.var(vars[2]));
    let vpos = p.ctx.var(vars[1]);
    let vpos = if computed > positions {
        let inside = p.ctx.lt_i(vpos, positions as i64);
        let last = p.ctx.int(positions as i64 - 1);
        p.ctx.where_(inside, vpos, last)
    } else {
        vpos
    };
    let mut at = Vec::new();
    let mut inner: usize = positions;
    for &e in &w.out {
        inner /= e;
        let q = p.ctx.div_i(vpos, inner as i64);
        at.push(p.ctx.rem_i(q, e as i64));
    }
    let civ = p.ctx.var(ci);
    let xv = window_read_at(p, &xp, vn, civ, &at, &kvars, w);
    let mut wmap = HashMap::from([(wt.vars[0], civ), (wt.vars[wt.vars.len() - 1], vco)]);
    for (i, &kv) in kvars.iter().enumerate() {
        wmap.insert(wt.vars[1 + i], p.ctx.var(kv));
    }
    let wv = substitute(&mut p.ctx, wt.expr, &wmap, None);
    let prod = p.ctx.mul(xv, wv);
    let acc = window_sum(p, prod, ci, &kvars, w, bias, vco);
    let y = Lazy { dtype: DType::F32, shape, vars, expr: acc };
    let y = p.realize(&y, BufKind::Scratch, &name);
    let y = p.slice(&y, &[0, 0, 0], &[1, 1, 1], &[x.shape[0], positions, cout]);
    let mut spatial = vec![x.shape[0]];
    spatial.extend_from_slice(&w.out);
    spatial.push(cout);
    let y = p.reshape(&y, &spatial);
    let r = y.rank();
    let perm: Vec<usize> = [0, r - 1].into_iter().chain(1..r - 1).collect();
    Ok(p.permute(&y, &perm))
}

fn conv_transpose(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, wt) = (c.input(0)?, c.input(1)?);
    let bias = c.opt_input(2)?;
    if x.rank() < 3 || wt.rank() != x.rank() {
        return Err(c.err("input and weight ranks do not fit"));
    }
    let groups = match c.attr_int("group", 1) {
        g if g >= 1 => g as usize,
        g => return Err(c.err(format!("group {g}: must be at least 1"))),
    };
    let (n, cin) = (x.shape[0], x.shape[1]);
    let cog = wt.shape[1];
    let cout = cog * groups;
    let k = x.rank() - 2;
    let kernel: Vec<usize> =
        c.attr_ints("kernel_shape").map_or(wt.shape[2..].to_vec(), |v| v.iter().map(|&d| d as usize).collect());
    let attr = |name: &str, d: i64| c.attr_ints(name).unwrap_or_else(|| vec![d; k]);
    let (strides, dil, outpad) = (attr("strides", 1), attr("dilations", 1), attr("output_padding", 0));
    let mut pads = c.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
    let auto = c.attr_str("auto_pad", "NOTSET");
    let mut out = Vec::new();
    for i in 0..k {
        let d = x.shape[2 + i] as i64;
        let full = strides[i] * (d - 1) + outpad[i] + (kernel[i] as i64 - 1) * dil[i] + 1;
        if let Some(os) = c.attr_ints("output_shape") {
            let total = full - os[os.len() - k + i];
            let small = total.div_euclid(2);
            (pads[i], pads[i + k]) = if auto == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
        } else if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
            let total = full - d * strides[i];
            let small = total.div_euclid(2);
            (pads[i], pads[i + k]) = if auto == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
        }
        out.push((full - pads[i] - pads[i + k]) as usize);
    }
    if wt.shape[2..] == kernel[..] && super::patch_transpose::applies(groups, &kernel, &strides, &pads, &dil, &outpad) {
        return Ok(vec![super::patch_transpose::lower(c, &x, &wt, bias.as_ref())]);
    }
    // y[n, co, o] = Σ_{ci in group, kk} x[n, ci, (o + pad - kk*dil)/stride] · w[ci, co%cog, kk]
    // over the kk for which the division is exact and in range.
    let x = c.reduce_input(&x, kernel.iter().product::<usize>() as f64);
    let p = c.p();
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&out);
    let vars = p.ctx.fresh_vars(&shape);
    let cig = cin / groups;
    let ci = p.ctx.fresh_var(cig as u64);
    let kvars: Vec<u32> = kernel.iter().map(|&kk| p.ctx.fresh_var(kk as u64)).collect();
    let vco = p.ctx.var(vars[1]);
    let g = p.ctx.div_i(vco, cog as i64);
    let gbase = p.ctx.mul_i(g, cig as i64);
    let civ = p.ctx.var(ci);
    let ch = p.ctx.add(gbase, civ);
    let mut xmap = HashMap::from([(x.vars[0], p.ctx.var(vars[0])), (x.vars[1], ch)]);
    let mut guard: Option<N> = None;
    for i in 0..k {
        let o = p.ctx.var(vars[2 + i]);
        let kk = p.ctx.var(kvars[i]);
        let kd = p.ctx.mul_i(kk, dil[i]);
        let num = p.ctx.add_i(o, pads[i]);
        let num = p.ctx.sub(num, kd);
        // num >= 0, num % stride == 0, num / stride < d
        let nonneg = p.ctx.ge_i(num, 0);
        let shifted = p.ctx.add_i(num, strides[i] * x.shape[2 + i] as i64);
        let rem = p.ctx.rem_i(shifted, strides[i]);
        let exact = p.ctx.lt_i(rem, 1);
        let q = p.ctx.div_i(num, strides[i]);
        let inside = p.ctx.lt_i(q, x.shape[2 + i] as i64);
        let ok = p.ctx.and(nonneg, exact);
        let ok = p.ctx.and(ok, inside);
        guard = Some(match guard {
            Some(g0) => p.ctx.and(g0, ok),
            None => ok,
        });
        xmap.insert(x.vars[2 + i], q);
    }
    let xv = substitute(&mut p.ctx, x.expr, &xmap, guard);
    let cog_var = p.ctx.rem_i(vco, cog as i64);
    let mut wmap = HashMap::from([(wt.vars[0], ch), (wt.vars[1], cog_var)]);
    for (i, &kv) in kvars.iter().enumerate() {
        wmap.insert(wt.vars[2 + i], p.ctx.var(kv));
    }
    let wv = substitute(&mut p.ctx, wt.expr, &wmap, None);
    let prod = p.ctx.mul(xv, wv);
    let zero = p.ctx.constant(x.dtype, 0.0);
    let mut acc = p.ctx.where_(guard.expect("rank >= 3"), prod, zero);
    for (&kv, &kk) in kvars.iter().zip(&kernel).rev() {
        acc = p.ctx.reduce(RedOp::Sum, kv, kk as u64, acc);
    }
    acc = p.ctx.reduce(RedOp::Sum, ci, cig as u64, acc);
    if let Some(b) = bias {
        let bv = substitute(&mut p.ctx, b.expr, &HashMap::from([(b.vars[0], vco)]), None);
        acc = p.ctx.add(acc, bv);
    }
    Ok(vec![Lazy { dtype: x.dtype, shape, vars, expr: acc }])
}

/// Batched matrix product with numpy semantics (1-D operands are promoted and the axis removed).
pub(super) fn matmul_lazy(c: &mut NodeCtx<'_>, a: &Lazy, b: &Lazy) -> Result<Lazy> {
    matmul_via(c, a, b, true)
}

/// [`matmul_lazy`] that never reads its operands as images (`--image`): for operands that must stay
/// in float32 plain buffers under `--float16`, as a recurrent state and its weights do (half storage
/// would round the state again at every step, and the error would grow with the sequence).
pub(super) fn matmul_plain(c: &mut NodeCtx<'_>, a: &Lazy, b: &Lazy) -> Result<Lazy> {
    matmul_via(c, a, b, false)
}

fn matmul_via(c: &mut NodeCtx<'_>, a: &Lazy, b: &Lazy, images: bool) -> Result<Lazy> {
    let (a1, b1) = (a.rank() == 1, b.rank() == 1);
    let p = c.p();
    let a = if a1 { p.reshape(a, &[1, a.shape[0]]) } else { a.clone() };
    let b = if b1 { p.reshape(b, &[b.shape[0], 1]) } else { b.clone() };
    let (m, k) = (a.shape[a.rank() - 2], a.shape[a.rank() - 1]);
    let (k2, nn) = (b.shape[b.rank() - 2], b.shape[b.rank() - 1]);
    if k != k2 {
        return Err(c.err(format!("inner dimensions differ: {:?} × {:?}", a.shape, b.shape)));
    }
    if images && !a1 && !b1 {
        if let Some(y) = super::image::matmul(c, &a, &b) {
            return Ok(y);
        }
    }
    let a = c.reduce_input(&a, nn as f64);
    let b = c.reduce_input(&b, m as f64);
    let b = contiguous_columns(c, b, m);
    // A constant right operand that is not plain row-major (Gemm's transB, a transposed weight) is
    // folded now, so the product's inner loop reads it contiguously.
    let p = c.p();
    let b = match (p.is_constant(&b) && b.numel() <= super::FOLD_LIMIT && p.is_buffer_view(&b).is_none())
        .then(|| p.fold(&b))
        .flatten()
    {
        Some(t) => p.constant(t),
        None => b,
    };
    let b = panels(c, b, m);
    let p = c.p();
    // a[..., m, 1, k] * b^T[..., 1, n, k] summed over k.
    let mut ashape = a.shape.clone();
    ashape.insert(ashape.len() - 1, 1);
    let a3 = p.reshape(&a, &ashape);
    let mut perm: Vec<usize> = (0..b.rank()).collect();
    perm.swap(b.rank() - 2, b.rank() - 1);
    let bt = p.permute(&b, &perm);
    let mut bshape = bt.shape.clone();
    bshape.insert(bshape.len() - 2, 1);
    let b3 = p.reshape(&bt, &bshape);
    let v = c.broadcast(&[&a3, &b3])?;
    let p = c.p();
    let prod = p.binary(BinOp::Mul, &v[0], &v[1]);
    let r = prod.rank();
    let s = p.reduce(RedOp::Sum, &prod, &[r - 1]);
    let mut out: Vec<usize> = s.shape[..r - 1].to_vec();
    if b1 {
        out.remove(out.len() - 1);
    }
    if a1 {
        out.remove(out.len() - if b1 { 1 } else { 2 });
    }
    Ok(p.reshape(&s, &out))
}

/// A computed right operand `[..., k, n]` whose columns lie apart in memory (attention's keys read as
/// `Kᵀ`: column `n` of row `k` at `n·stride + k`) copied row-major on the CPU when at least 16 left
/// rows reuse it: the register tiles then load its rows as vectors instead of gathering every
/// column (minilm's 128×32×128 score products per head).
fn contiguous_columns(c: &mut NodeCtx<'_>, b: Lazy, rows: usize) -> Lazy {
    let lanes = c.cpu_lanes();
    let p = c.p();
    let crate::ir::Op::Load { index, .. } = *p.ctx.op(b.expr) else { return b };
    let Some(&last) = b.vars.last() else { return b };
    if lanes == 0 || rows < 16 || b.shape[b.rank() - 1] < 2 * lanes || p.is_constant(&b) {
        return b;
    }
    let at = |x: i64| {
        let mut env: HashMap<u32, i64> = b.vars.iter().map(|&v| (v, 0)).collect();
        env.insert(last, x);
        crate::ir::interp::eval(&p.ctx, index, &mut env, &|_, _| None).map(|v| v.as_i64())
    };
    if at(1).zip(at(0)).is_some_and(|(one, zero)| one - zero == 1) {
        return b;
    }
    let name = format!("{}_columns", c.node.name);
    c.p().realize(&b, BufKind::Scratch, &name)
}

/// Columns per panel of a packed right operand: one 64-byte line of float32, a whole number of
/// vectors on every CPU target (4, 8 or 16 lanes).
pub const PANEL: usize = 16;

/// Left rows from which a constant right operand is stored in panels (see [`panels`]).
pub const PANEL_MIN_ROWS: usize = 4;

/// A constant float32 right operand `[k, n]` of a product with `rows` left rows, stored in panels of
/// [`PANEL`] columns (`[n / PANEL, k, PANEL]`) on the CPU and read back as `[k, n]`: the register
/// tiles then stream each panel from consecutive cache lines instead of one short piece per row of
/// `n` floats (a 128×384×1536 product on a Zen 3 core: 62 → 87 GFLOP/s; a 4×512×3072 one on Zen 4,
/// which streams its weight from memory, 0.54 → 0.27 ms). Only where the tiles block rows (`rows` a
/// multiple of 4, at least [`PANEL_MIN_ROWS`]) and `n` is whole panels; a matrix-vector product keeps
/// its rows, which its whole-row loops read contiguously.
fn panels(c: &mut NodeCtx<'_>, b: Lazy, rows: usize) -> Lazy {
    let packs = c.cpu_lanes() > 0
        && b.rank() == 2
        && b.dtype == DType::F32
        && rows >= PANEL_MIN_ROWS
        && rows.is_multiple_of(4)
        && b.shape[0] >= 16
        && b.shape[1] >= 2 * PANEL
        && b.shape[1].is_multiple_of(PANEL)
        && b.numel() <= super::FOLD_LIMIT
        && c.p().is_constant(&b);
    if !packs {
        return b;
    }
    let (k, n) = (b.shape[0], b.shape[1]);
    let p = c.p();
    let split = p.reshape(&b, &[k, n / PANEL, PANEL]);
    let laid = p.permute(&split, &[1, 0, 2]);
    let Some(t) = p.fold(&laid) else { return b };
    let packed = p.constant(t);
    let back = p.permute(&packed, &[1, 0, 2]);
    p.reshape(&back, &[k, n])
}

/// A constant float32 convolution weight `[cout, cin, k...]` stored in panels of [`PANEL`] output
/// channels (`[cout / PANEL, cin·k…, PANEL]`) on the CPU and read back as before: the register
/// tiles, whose replicas are consecutive output channels, then read their weights for one step of
/// the reduction from one cache line, the whole block's from one stream (the 16 rows of a plain
/// weight are 16 streams; a weight that must come from memory every step streams at a fraction of
/// that speed).
fn conv_panels(c: &mut NodeCtx<'_>, wt: Lazy) -> Lazy {
    let cout = wt.shape[0];
    let packs = c.cpu_lanes() > 0
        && wt.dtype == DType::F32
        && cout >= PANEL
        && cout.is_multiple_of(PANEL)
        && wt.numel() <= super::FOLD_LIMIT
        && c.p().is_constant(&wt);
    if !packs {
        return wt;
    }
    let k = wt.numel() / cout;
    let p = c.p();
    let split = p.reshape(&wt, &[cout / PANEL, PANEL, k]);
    let laid = p.permute(&split, &[0, 2, 1]);
    let Some(t) = p.fold(&laid) else { return wt };
    let packed = p.constant(t);
    let back = p.permute(&packed, &[0, 2, 1]);
    p.reshape(&back, &wt.shape)
}

fn matmul(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    Ok(vec![matmul_lazy(c, &a, &b)?])
}

fn gemm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (mut a, mut b) = (c.input(0)?, c.input(1)?);
    if a.rank() != 2 || b.rank() != 2 {
        return Err(c.err("A and B must be 2-D"));
    }
    if c.attr_int("transA", 0) != 0 {
        a = c.p().permute(&a, &[1, 0]);
    }
    if c.attr_int("transB", 0) != 0 {
        b = c.p().permute(&b, &[1, 0]);
    }
    let (alpha, beta) = (c.attr_float("alpha", 1.0) as f64, c.attr_float("beta", 1.0) as f64);
    let mut y = matmul_lazy(c, &a, &b)?;
    if alpha != 1.0 {
        y = with(c.p(), BinOp::Mul, &y, alpha);
    }
    if let Some(bias) = c.opt_input(2)? {
        let bias = if beta != 1.0 { with(c.p(), BinOp::Mul, &bias, beta) } else { bias };
        let v = c.broadcast(&[&y, &bias])?;
        y = c.p().binary(BinOp::Add, &v[0], &v[1]);
    }
    Ok(vec![y])
}

/// Folds `x` to a constant if it is one (so per-channel parameters cost nothing per step).
fn settle_const(p: &mut Program, x: Lazy) -> Lazy {
    match p.fold(&x) {
        Some(t) if x.numel() > 1 => p.constant(t),
        _ => x,
    }
}

/// Reshapes a per-channel vector `[C]` to broadcast against rank `rank` on axis 1.
fn per_channel(p: &mut Program, v: &Lazy, rank: usize) -> Lazy {
    let mut shape = vec![1usize; rank];
    shape[1] = v.numel();
    p.reshape(v, &shape)
}

fn batch_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    if c.attr_int("training_mode", 0) != 0 || c.node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(c.err("training mode (running statistics outputs) is not supported"));
    }
    let x = c.input(0)?;
    let (scale, bias, mean, var) = (c.input(1)?, c.input(2)?, c.input(3)?, c.input(4)?);
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    let p = c.p();
    let ve = with(p, BinOp::Add, &var, eps);
    let sd = p.unary(UnOp::Sqrt, &ve);
    let s = p.binary(BinOp::Div, &scale, &sd);
    let ms = p.binary(BinOp::Mul, &mean, &s);
    let shift = p.binary(BinOp::Sub, &bias, &ms);
    let s = settle_const(p, s);
    let shift = settle_const(p, shift);
    let s = per_channel(p, &s, x.rank());
    let shift = per_channel(p, &shift, x.rank());
    let v = c.broadcast(&[&x, &s, &shift])?;
    let p = c.p();
    let y = p.binary(BinOp::Mul, &v[0], &v[1]);
    Ok(vec![p.binary(BinOp::Add, &y, &v[2])])
}

/// `(x - mean) / sqrt(var + eps)` over `axes`, with mean and variance realized once.
fn normalize(c: &mut NodeCtx<'_>, x: &Lazy, axes: &[usize], eps: f64) -> Result<(Lazy, Lazy, Lazy)> {
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let x = c.reduce_input(x, 2.0);
    let p = c.p();
    let s = p.reduce(RedOp::Sum, &x, axes);
    let mean = with(p, BinOp::Div, &s, n as f64);
    let v = c.broadcast(&[&x, &mean])?;
    let p = c.p();
    let d = p.binary(BinOp::Sub, &v[0], &v[1]);
    let d2 = p.binary(BinOp::Mul, &d, &d);
    let ss = p.reduce(RedOp::Sum, &d2, axes);
    let var = with(p, BinOp::Div, &ss, n as f64);
    let ve = with(p, BinOp::Add, &var, eps);
    let sd = p.unary(UnOp::Sqrt, &ve);
    let inv = p.unary(UnOp::Recip, &sd);
    let v = c.broadcast(&[&d, &inv])?;
    let y = c.p().binary(BinOp::Mul, &v[0], &v[1]);
    Ok((y, mean, inv))
}

fn instance_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale, bias) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    let axes: Vec<usize> = (2..x.rank()).collect();
    let (y, _, _) = normalize(c, &x, &axes, eps)?;
    let p = c.p();
    let s = per_channel(p, &scale, x.rank());
    let b = per_channel(p, &bias, x.rank());
    let v = c.broadcast(&[&y, &s, &b])?;
    let p = c.p();
    let y = p.binary(BinOp::Mul, &v[0], &v[1]);
    Ok(vec![p.binary(BinOp::Add, &y, &v[2])])
}

fn layer_norm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale) = (c.input(0)?, c.input(1)?);
    let bias = c.opt_input(2)?;
    let axis = c.axis(c.attr_int("axis", -1), x.rank())?;
    let eps = c.attr_float("epsilon", 1e-5) as f64;
    let axes: Vec<usize> = (axis..x.rank()).collect();
    let (y, mean, inv) = normalize(c, &x, &axes, eps)?;
    let v = c.broadcast(&[&y, &scale])?;
    let mut y = c.p().binary(BinOp::Mul, &v[0], &v[1]);
    if let Some(b) = bias {
        let v = c.broadcast(&[&y, &b])?;
        y = c.p().binary(BinOp::Add, &v[0], &v[1]);
    }
    Ok(vec![y, mean, inv])
}

fn global_pool(c: &mut NodeCtx<'_>, op: RedOp) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axes: Vec<usize> = (2..x.rank()).collect();
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let x = c.reduce_input(&x, 1.0);
    let p = c.p();
    let r = p.reduce(op, &x, &axes);
    Ok(vec![if op == RedOp::Sum { with(p, BinOp::Div, &r, n as f64) } else { r }])
}

fn pool(c: &mut NodeCtx<'_>, op: RedOp) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    if c.node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(c.err("the Indices output is not supported"));
    }
    if x.rank() < 3 {
        return Err(c.err("expects rank >= 3"));
    }
    let kernel =
        positive(c, "kernel_shape", &c.attr_ints("kernel_shape").ok_or_else(|| c.err("missing kernel_shape"))?)?;
    let w = window(c, &x.shape[2..], kernel, c.attr_int("ceil_mode", 0) != 0)?;
    let reuse = w.kernel.iter().product::<usize>() as f64 / w.strides.iter().product::<usize>() as f64;
    let fill = if op == RedOp::Max { f64::NEG_INFINITY } else { 0.0 };
    let lo = [&[0, 0][..], &w.pad_lo].concat();
    let hi = [&[0, 0][..], &w.pad_hi].concat();
    // A max window over short rows reads a padded copy instead: the CPU's register tiles then run
    // it unguarded, output rows side by side (guarded, a row of 10 peels into loops of a few points).
    let short_rows = c.cpu_lanes() > 0 && w.out.last().is_some_and(|&e| e <= 2 * c.cpu_lanes());
    let xp = if op == RedOp::Max && !short_rows {
        c.guarded_window(&x, &w.pad_lo, &w.pad_hi, fill, reuse)
    } else {
        c.windowed_input(&x, &w.pad_lo, &w.pad_hi, fill, reuse, *w.strides.last().unwrap_or(&1), false)
    };
    let p = c.p();
    let mut shape = x.shape[..2].to_vec();
    shape.extend_from_slice(&w.out);
    let vars = p.ctx.fresh_vars(&shape);
    let kvars: Vec<u32> = w.kernel.iter().map(|&k| p.ctx.fresh_var(k as u64)).collect();
    let (vn, vc) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]));
    let mut acc = window_read(p, &xp, vn, vc, &vars[2..], &kvars, &w);
    for (&kv, &k) in kvars.iter().zip(&w.kernel).rev() {
        acc = p.ctx.reduce(op, kv, k as u64, acc);
    }
    let y = Lazy { dtype: x.dtype, shape: shape.clone(), vars, expr: acc };
    if op == RedOp::Max {
        return Ok(vec![y]);
    }
    // Divisor per output position: the window size, or the count of real (unpadded) elements.
    let include_pad = c.attr_int("count_include_pad", 0) != 0;
    let p = c.p();
    let ones = p.full(x.dtype, &x.shape, 1.0);
    let decl_hi = [&[0, 0][..], &w.declared_hi].concat();
    let mask = if include_pad {
        // Padding declared by the model counts; the ceil_mode overhang does not.
        let m = p.pad(&ones, &lo, &decl_hi, 1.0);
        let extra: Vec<i64> = hi.iter().zip(&decl_hi).map(|(a, b)| a - b).collect();
        p.pad(&m, &vec![0; extra.len()], &extra, 0.0)
    } else {
        p.pad(&ones, &lo, &hi, 0.0)
    };
    let p = c.p();
    let vars2 = p.ctx.fresh_vars(&shape);
    let kv2: Vec<u32> = w.kernel.iter().map(|&k| p.ctx.fresh_var(k as u64)).collect();
    let (vn2, vc2) = (p.ctx.var(vars2[0]), p.ctx.var(vars2[1]));
    let mut cnt = window_read(p, &mask, vn2, vc2, &vars2[2..], &kv2, &w);
    for (&kv, &k) in kv2.iter().zip(&w.kernel).rev() {
        cnt = p.ctx.reduce(RedOp::Sum, kv, k as u64, cnt);
    }
    let count = Lazy { dtype: x.dtype, shape: shape.clone(), vars: vars2, expr: cnt };
    // The count only depends on the spatial position: fold it over one batch and channel.
    let mut start = vec![0i64; shape.len()];
    start[..2].copy_from_slice(&[0, 0]);
    let mut len = shape.clone();
    len[0] = 1;
    len[1] = 1;
    let one_plane = p.slice(&count, &start, &vec![1; shape.len()], &len);
    let plane = match p.fold(&one_plane) {
        Some(t) => p.constant(t),
        None => one_plane,
    };
    let plane = p.expand(&plane, &shape);
    Ok(vec![p.binary(BinOp::Div, &y, &plane)])
}
