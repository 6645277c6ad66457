//! The image layout (`--image`): convolutions and matmuls read activations and weights as 2-D RGBA
//! images, four channels per pixel, through the texture cache.
//!
//! A tensor is packed along one axis (the channels): that axis is padded with zeros to a multiple of
//! 4 and split into `(A/4, 4)`; the other axes are ordered into rows and columns, so that the image
//! has `prod(rows)` rows of `prod(cols) * A/4` pixels. Activations use NHWC (rows N·H, columns W),
//! as the seed does. The packing is a kernel (or, for weights, folded at compile time); readers see
//! the padded tensor in its original axis order, so the lowering of the op does not change.

use std::collections::HashMap;

use pilot_core::DType;

use super::NodeCtx;
use crate::ir::subst::substitute;
use crate::ir::{RedOp, N};
use crate::lazy::Lazy;

/// Image options of the lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageMode {
    /// Store images as half (math stays float32), except the weights [`NodeCtx::weight_image`]
    /// keeps in float32.
    pub float16: bool,
    /// Widest (and tallest) image in pixels.
    pub max_width: usize,
}

/// What a packed image holds: the tensor (its expression over its variables) and the packing.
/// Equal keys give equal images, so every consumer of a value shares one packing kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageKey {
    expr: N,
    vars: Vec<u32>,
    shape: Vec<usize>,
    axis: usize,
    rows: Vec<usize>,
    cols: Vec<usize>,
    stored: DType,
}

impl NodeCtx<'_> {
    /// `x` packed by 4 along `axis` into an image with rows `rows` and columns `cols` (the other axes,
    /// each listed once). Returns `x` with `axis` padded to a multiple of 4, read from the image, or
    /// `None` when `x` is not float or the image would be wider than the target allows.
    pub fn to_image(&mut self, x: &Lazy, axis: usize, rows: &[usize], cols: &[usize]) -> Option<Lazy> {
        let stored = if self.images()?.float16 { DType::F16 } else { DType::F32 };
        self.image_as(x, axis, rows, cols, stored)
    }

    /// [`Self::to_image`] for a constant weight read by an op whose activation input holds
    /// `activations` elements. Under `--float16` the weight is stored as float32 when that costs no
    /// more bytes than the op's half activation input (the weight is then at most half of the op's
    /// traffic): the rounding of a weight is shared by every output it touches, and a half weight
    /// is one of the largest errors a half model carries, so where float32 is cheap it is kept.
    /// Large weights (wide layers on small maps, matrix products) stay half, as the bandwidth
    /// goes there. Measured on ddddocr's recognizer in BENCHMARKS.md "Half precision on a real OCR
    /// recognizer".
    pub fn weight_image(
        &mut self,
        w: &Lazy,
        axis: usize,
        rows: &[usize],
        cols: &[usize],
        activations: usize,
    ) -> Option<Lazy> {
        let mode = self.images()?;
        let cheap = w.numel().saturating_mul(4) <= activations.saturating_mul(2);
        let stored = if mode.float16 && !cheap { DType::F16 } else { DType::F32 };
        self.image_as(w, axis, rows, cols, stored)
    }

    fn image_as(&mut self, x: &Lazy, axis: usize, rows: &[usize], cols: &[usize], stored: DType) -> Option<Lazy> {
        let mode = self.images()?;
        if !x.dtype.is_float() || x.dtype == DType::F64 {
            return None;
        }
        debug_assert_eq!(rows.len() + cols.len() + 1, x.rank(), "every axis is a row, a column or packed");
        let packed = x.shape[axis].div_ceil(4);
        let height: usize = rows.iter().map(|&a| x.shape[a]).product();
        let width: usize = cols.iter().map(|&a| x.shape[a]).product::<usize>() * packed;
        if width > mode.max_width || height > mode.max_width || width == 0 || height == 0 {
            return None;
        }
        let key = ImageKey {
            expr: x.expr,
            vars: x.vars.clone(),
            shape: x.shape.clone(),
            axis,
            rows: rows.to_vec(),
            cols: cols.to_vec(),
            stored,
        };
        if let Some(view) = self.packed_image(&key) {
            return Some(view);
        }
        let name = format!("{}_image", self.node.name);
        let p = self.p();
        let mut hi = vec![0i64; x.rank()];
        hi[axis] = (packed * 4 - x.shape[axis]) as i64;
        let lo = vec![0i64; x.rank()];
        let xp = p.pad(x, &lo, &hi, 0.0);
        // Split the packed axis into (A/4, 4): axis `axis` becomes A/4, a new axis r holds the 4.
        let r = x.rank();
        let mut split = xp.shape.clone();
        split[axis] = packed;
        split.insert(axis + 1, 4);
        let xs = p.reshape(&xp, &split);
        // Positions in the split tensor: axes after `axis` move up by one.
        let at = |a: usize| if a > axis { a + 1 } else { a };
        let perm: Vec<usize> = rows.iter().chain(cols).map(|&a| at(a)).chain([axis, axis + 1]).collect::<Vec<_>>();
        debug_assert_eq!(perm.len(), r + 1);
        let laid = p.permute(&xs, &perm);
        let laid = p.cast(&laid, stored);
        let image = p.realize_image(&laid, height, width, &name);
        // Back to the padded tensor's shape and axis order, read at pixel (row, column · A/4 + a / 4)
        // and channel a % 4 directly: rows and columns stay linear in the coordinates (no reshape's
        // division over them), so a guard a later pad adds is one the image's border can give.
        let vars = p.ctx.fresh_vars(&xp.shape);
        let mut linear = |axes: &[usize]| {
            axes.iter().fold(p.ctx.int(0), |acc, &a| {
                let scaled = p.ctx.mul_i(acc, xp.shape[a] as i64);
                let v = p.ctx.var(vars[a]);
                p.ctx.add(scaled, v)
            })
        };
        let (y, column) = (linear(rows), linear(cols));
        let a = p.ctx.var(vars[axis]);
        let (pixel, lane) = (p.ctx.div_i(a, 4), p.ctx.rem_i(a, 4));
        let column = p.ctx.mul_i(column, packed as i64);
        let x_px = p.ctx.add(column, pixel);
        let at = HashMap::from([(image.vars[0], y), (image.vars[1], x_px), (image.vars[2], lane)]);
        let read = substitute(&mut p.ctx, image.expr, &at, None);
        let view = Lazy { dtype: stored, shape: xp.shape.clone(), vars, expr: read };
        let view = p.cast(&view, x.dtype);
        // The view itself, asked for the same image, is that image.
        let own = ImageKey { expr: view.expr, vars: view.vars.clone(), shape: view.shape.clone(), ..key.clone() };
        self.remember_image(key, view.clone());
        self.remember_image(own, view.clone());
        Some(view)
    }
}

/// A 2-D convolution (plain, depthwise, or grouped by whole pixels) reading its input and weight as
/// images, or `None` when the image path does not apply (no image mode, runtime weights, groups that
/// split a pixel, too wide).
pub(super) fn conv(
    c: &mut NodeCtx<'_>,
    x: &Lazy,
    wt: &Lazy,
    bias: Option<&Lazy>,
    w: &super::nn::Window,
    groups: usize,
) -> Option<Lazy> {
    let mode = c.images()?;
    if x.rank() != 4 || !c.p().is_constant(wt) {
        return None;
    }
    let (n, cin, cout, cig) = (x.shape[0], x.shape[1], wt.shape[0], wt.shape[1]);
    let depthwise = cig == 1 && groups == cin && cout == cin;
    // Grouped convolutions whose groups span whole pixels (4 channels) read the input image like plain
    // ones, offset by the group's first channel.
    if groups != 1 && !depthwise && (!cig.is_multiple_of(4) || !(cout / groups).is_multiple_of(4)) {
        return None;
    }
    let padded_w = (x.shape[3] as i64 + w.pad_lo[1] + w.pad_hi[1]) as usize;
    let (kh, kw) = (wt.shape[2], wt.shape[3]);
    let weight_width = if depthwise { kw * cout.div_ceil(4) } else { kh * kw * cig.div_ceil(4) };
    if padded_w * cin.div_ceil(4) > mode.max_width || weight_width > mode.max_width {
        return None;
    }
    // Without padding (spatial or channel) the producer is computed straight into the image. So it
    // is with spatial padding alone on one image: the window reads the unpadded image through
    // guards that the image's border gives, which the renderers drop (`target::cl::texel`), as
    // tinygrad reads padded images. Otherwise, as on the CPU, an expensive producer (a reduction)
    // is computed first, so that the padded image is a cheap copy and no guarded read lands inside
    // the producer's loops.
    let (lo, hi) = ([0, 0, w.pad_lo[0], w.pad_lo[1]], [0, 0, w.pad_hi[0], w.pad_hi[1]]);
    let spatial = lo.iter().chain(&hi).any(|&p| p != 0);
    let activations: usize = (0..4).map(|a| (x.shape[a] as i64 + lo[a] + hi[a]).max(0) as usize).product();
    let ximg = if groups == 1 && cin < 4 {
        // Fewer than four channels fill no pixel (a camera's one or three planes): the window reads
        // the input where it is, its channels padded with zeros to one pixel, rather than an image
        // mostly empty that a kernel would first pack.
        let reuse = (cout * kh * kw) as f64 / w.strides.iter().product::<usize>() as f64;
        let x = c.reduce_input(x, reuse);
        let (clo, chi) = ([0, 0, lo[2], lo[3]], [0, 4 - cin as i64, hi[2], hi[3]]);
        c.p().pad(&x, &clo, &chi, 0.0)
    } else if spatial && n == 1 && cin % 4 == 0 && lo.iter().chain(&hi).all(|&p| p >= 0) {
        let ximg = c.to_image(x, 1, &[0, 2], &[3])?;
        c.p().pad(&ximg, &lo, &hi, 0.0)
    } else {
        let reuse = (cout / groups * kh * kw) as f64 / w.strides.iter().product::<usize>() as f64;
        let x = if spatial || cin % 4 != 0 { c.reduce_input(x, reuse) } else { x.clone() };
        // Unpadded, `x` itself: an image view of it is then found as the image it is.
        let xp = if spatial { c.p().pad(&x, &lo, &hi, 0.0) } else { x };
        c.to_image(&xp, 1, &[0, 2], &[3])?
    };
    let wimg = if depthwise {
        c.weight_image(wt, 0, &[2], &[1, 3], activations)?
    } else {
        c.weight_image(wt, 1, &[0], &[2, 3], activations)?
    };

    let p = c.p();
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&w.out);
    let vars = p.ctx.fresh_vars(&shape);
    let kvars: Vec<u32> = w.kernel.iter().map(|&k| p.ctx.fresh_var(k as u64)).collect();
    let (vn, vco) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]));
    let mut wmap: HashMap<u32, N> =
        kvars.iter().enumerate().map(|(i, &kv)| (wimg.vars[2 + i], p.ctx.var(kv))).collect();
    wmap.insert(wimg.vars[0], vco);
    let acc = if depthwise {
        let xv = super::nn::window_read(p, &ximg, vn, vco, &vars[2..], &kvars, w);
        let zero = p.ctx.int(0);
        wmap.insert(wimg.vars[1], zero);
        let wv = substitute(&mut p.ctx, wimg.expr, &wmap, None);
        let mut acc = p.ctx.mul(xv, wv);
        for (&kv, &k) in kvars.iter().zip(&w.kernel).rev() {
            acc = p.ctx.reduce(RedOp::Sum, kv, k as u64, acc);
        }
        acc
    } else {
        // Input channel g·cig + 4·ci4 + i of group g: the 4 values of i are one pixel of each image.
        let ci4 = p.ctx.fresh_var(cig.div_ceil(4) as u64);
        let lane = p.ctx.fresh_var(4);
        let ci4v = p.ctx.var(ci4);
        let base = p.ctx.mul_i(ci4v, 4);
        let lanev = p.ctx.var(lane);
        let ci = p.ctx.add(base, lanev);
        let group = p.ctx.div_i(vco, (cout / groups) as i64);
        let first = p.ctx.mul_i(group, cig as i64);
        let ch = p.ctx.add(first, ci);
        let xv = super::nn::window_read(p, &ximg, vn, ch, &vars[2..], &kvars, w);
        wmap.insert(wimg.vars[1], ci);
        let wv = substitute(&mut p.ctx, wimg.expr, &wmap, None);
        let mut acc = p.ctx.mul(xv, wv);
        acc = p.ctx.reduce(RedOp::Sum, lane, 4, acc);
        for (&kv, &k) in kvars.iter().zip(&w.kernel).rev() {
            acc = p.ctx.reduce(RedOp::Sum, kv, k as u64, acc);
        }
        p.ctx.reduce(RedOp::Sum, ci4, cig.div_ceil(4) as u64, acc)
    };
    let mut y = Lazy { dtype: x.dtype, shape, vars, expr: acc };
    if let Some(b) = bias {
        let bv = substitute(&mut p.ctx, b.expr, &HashMap::from([(b.vars[0], vco)]), None);
        y.expr = p.ctx.add(y.expr, bv);
    }
    Some(y)
}

/// `a (M, K) @ b (K, N)` with a constant `b` read as an image packed along K, or `None` when the
/// image path does not apply. A matrix `a` (M > 1) is read as an image packed along K too; a single
/// row (a batch-1 vector) is read from its buffer: every work-item reads the same K values, which
/// the buffer serves as well as the texture cache would, and no kernel packs it. Its producer is
/// realized first when it carries computation worth not repeating for each of the N outputs.
pub(super) fn matmul(c: &mut NodeCtx<'_>, a: &Lazy, b: &Lazy) -> Option<Lazy> {
    c.images()?;
    if a.rank() != 2 || b.rank() != 2 || a.shape[1] != b.shape[0] || !c.p().is_constant(b) {
        return None;
    }
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    let aimg = if m == 1 {
        // K padded to whole quads. A producer worth realizing is realized padded, so the product
        // reads whole quads without a guard; a buffer is read as it is, guarded past K.
        let pad = (k.div_ceil(4) * 4 - k) as i64;
        let p = c.p();
        if p.is_buffer_view(a).is_some() || p.is_constant(a) {
            p.pad(a, &[0, 0], &[0, pad], 0.0)
        } else {
            let padded = p.pad(a, &[0, 0], &[0, pad], 0.0);
            c.reduce_input(&padded, n as f64)
        }
    } else {
        // A K that is not a multiple of 4 pads the packed axis: then, as for convolutions, an
        // expensive producer is computed first. Otherwise it is computed straight into the image.
        let a = if k % 4 != 0 { c.reduce_input(a, n as f64) } else { a.clone() };
        c.to_image(&a, 1, &[0], &[])?
    };
    let bimg = c.weight_image(b, 0, &[1], &[], a.numel())?;
    let p = c.p();
    let vars = p.ctx.fresh_vars(&[m, n]);
    let k4 = p.ctx.fresh_var(k.div_ceil(4) as u64);
    let lane = p.ctx.fresh_var(4);
    let (vm, vn, k4v, lanev) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]), p.ctx.var(k4), p.ctx.var(lane));
    let base = p.ctx.mul_i(k4v, 4);
    let kk = p.ctx.add(base, lanev);
    let av = substitute(&mut p.ctx, aimg.expr, &HashMap::from([(aimg.vars[0], vm), (aimg.vars[1], kk)]), None);
    let bv = substitute(&mut p.ctx, bimg.expr, &HashMap::from([(bimg.vars[0], kk), (bimg.vars[1], vn)]), None);
    let prod = p.ctx.mul(av, bv);
    let acc = p.ctx.reduce(RedOp::Sum, lane, 4, prod);
    let expr = p.ctx.reduce(RedOp::Sum, k4, k.div_ceil(4) as u64, acc);
    Some(Lazy { dtype: a.dtype, shape: vec![m, n], vars, expr })
}
