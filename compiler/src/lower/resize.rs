//! `Resize` (opsets 10–19) and `Upsample` (opsets 7–9).
//!
//! Resizing is separable: each resized axis is resampled on its own. For one axis, the source taps
//! and their weights depend only on the output coordinate, so they are computed at compile time
//! (in f64, following the ONNX reference implementation step by step) into an [`AxisTable`]; the
//! kernel then reads `Σ_t w[o, t] · x[.., idx[o, t], ..]`. Nearest-neighbour tables have one tap of
//! weight 1 and become plain gathers — affine ones (`o / 2` for a 2× upsample) as index arithmetic,
//! others through a constant index table.

mod table;

use std::collections::HashMap;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::N;
use crate::lazy::Lazy;
use crate::program::Program;
use crate::tensor::Tensor;
use table::{affine, axis_table, AxisTable, Coord, Mode, Rounding, Spec};

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Resize" => resize,
        "Upsample" => upsample,
        _ => return None,
    })
}

/// Element `(o, t)` of a constant `[out, taps]` table.
fn table_at(p: &mut Program, table: &Lazy, o: N, t: i64) -> N {
    let mut m = HashMap::from([(table.vars[0], o)]);
    if table.rank() > 1 {
        m.insert(table.vars[1], p.ctx.int(t));
    }
    substitute(&mut p.ctx, table.expr, &m, None)
}

/// `x` resampled along `axis` by `t`; extrapolated positions read `extrapolation`.
fn apply_axis(p: &mut Program, x: &Lazy, axis: usize, t: &AxisTable, extrapolation: f64) -> Lazy {
    let mut shape = x.shape.clone();
    shape[axis] = t.out;
    let vars = p.ctx.fresh_vars(&shape);
    let o = p.ctx.var(vars[axis]);
    let mut map: HashMap<u32, N> = x.vars.iter().zip(&vars).map(|(&old, &new)| (old, p.ctx.var(new))).collect();
    let shape2 = vec![t.out, t.taps];
    let expr = if t.is_gather() {
        let src = match affine(&t.idx) {
            Some((num, off, den)) => {
                let a = p.ctx.mul_i(o, num);
                let a = p.ctx.add_i(a, off);
                p.ctx.div_i(a, den)
            }
            None => {
                let table = p.constant(Tensor::from_i64(shape2, &t.idx));
                table_at(p, &table, o, 0)
            }
        };
        map.insert(x.vars[axis], src);
        substitute(&mut p.ctx, x.expr, &map, None)
    } else {
        let itab = p.constant(Tensor::from_i64(shape2.clone(), &t.idx));
        let wtab = p.constant(Tensor::from_f64(x.dtype, shape2, &t.w));
        let mut acc: Option<N> = None;
        for k in 0..t.taps as i64 {
            map.insert(x.vars[axis], table_at(p, &itab, o, k));
            let v = substitute(&mut p.ctx, x.expr, &map, None);
            let w = table_at(p, &wtab, o, k);
            let term = p.ctx.mul(v, w);
            acc = Some(match acc {
                Some(a) => p.ctx.add(a, term),
                None => term,
            });
        }
        acc.expect("at least one tap")
    };
    let expr = if t.extrapolated.contains(&true) {
        let flags: Vec<f64> = t.extrapolated.iter().map(|&e| e as u8 as f64).collect();
        let mtab = p.constant(Tensor::from_f64(pilot_core::DType::Bool, vec![t.out], &flags));
        let m = table_at(p, &mtab, o, 0);
        let e = p.ctx.constant(x.dtype, extrapolation);
        p.ctx.where_(m, e, expr)
    } else {
        expr
    };
    Lazy { dtype: x.dtype, shape, vars, expr }
}

/// One resized axis: its index, output length, scale and region of interest.
struct AxisPlan {
    axis: usize,
    out: usize,
    scale: f64,
    roi: (f64, f64),
}

/// Resamples `x` along every planned axis.
fn run_plan(c: &mut NodeCtx<'_>, x: &Lazy, spec: &Spec, plan: &[AxisPlan], extrapolation: f64) -> Result<Lazy> {
    if spec.mode != Mode::Nearest && !x.dtype.is_float() {
        return Err(c.err(format!("{:?} interpolation of {} tensors is not supported", spec.mode, x.dtype)));
    }
    for a in plan {
        if a.scale <= 0.0 || !a.scale.is_finite() {
            return Err(c.err(format!("invalid scale {} on axis {}", a.scale, a.axis)));
        }
    }
    let mut shape = x.shape.clone();
    for a in plan {
        shape[a.axis] = a.out;
    }
    if shape.contains(&0) || x.numel() == 0 {
        return Ok(c.p().full(x.dtype, &shape, 0.0));
    }
    let tables: Vec<AxisTable> =
        plan.iter().map(|a| axis_table(spec, x.shape[a.axis], a.out, a.scale, a.roi)).collect();
    let taps: usize = tables.iter().map(|t| t.taps).product();
    let reuse = shape.iter().product::<usize>() as f64 / x.numel() as f64 * taps as f64;
    let mut y = c.reduce_input(x, reuse);
    for (a, t) in plan.iter().zip(&tables) {
        if !t.is_identity(y.shape[a.axis]) {
            y = apply_axis(c.p(), &y, a.axis, t, extrapolation);
        }
    }
    Ok(y)
}

/// `floor(scale · len)` computed in f32, as onnxruntime does (so `10 × 0.7` is 7).
fn out_len(scale: f64, len: usize) -> usize {
    ((scale as f32) * (len as f32)).max(0.0) as usize
}

/// A constant input that counts as absent when missing or empty.
fn nonempty_const(c: &mut NodeCtx<'_>, i: usize) -> Result<Option<Tensor>> {
    Ok(c.opt_const_input(i)?.filter(|t| t.numel() > 0))
}

fn resize(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let r = x.rank();
    let legacy = c.opset() < 11;
    let mode = match c.attr_str("mode", "nearest").as_str() {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" if !legacy => Mode::Cubic,
        other => return Err(c.err(format!("unsupported mode `{other}`"))),
    };
    let coord = if legacy {
        Coord::Asymmetric
    } else {
        match c.attr_str("coordinate_transformation_mode", "half_pixel").as_str() {
            "half_pixel" => Coord::HalfPixel,
            "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coord::PytorchHalfPixel,
            "align_corners" => Coord::AlignCorners,
            "asymmetric" => Coord::Asymmetric,
            "tf_half_pixel_for_nn" => Coord::TfHalfPixelForNn,
            "tf_crop_and_resize" => Coord::TfCropAndResize,
            other => return Err(c.err(format!("unsupported coordinate_transformation_mode `{other}`"))),
        }
    };
    let rounding = if legacy {
        Rounding::Legacy
    } else {
        match c.attr_str("nearest_mode", "round_prefer_floor").as_str() {
            "round_prefer_floor" => Rounding::RoundPreferFloor,
            "round_prefer_ceil" => Rounding::RoundPreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            other => return Err(c.err(format!("unsupported nearest_mode `{other}`"))),
        }
    };
    let antialias = c.attr_int("antialias", 0) != 0;
    if antialias && mode == Mode::Nearest {
        return Err(c.err("antialias is not defined for nearest mode"));
    }
    let spec = Spec {
        mode,
        coord,
        rounding,
        cubic_a: c.attr_float("cubic_coeff_a", -0.75) as f64,
        exclude_outside: c.attr_int("exclude_outside", 0) != 0,
        antialias,
    };
    let axes: Vec<usize> = match c.attr_ints("axes") {
        Some(a) => a.iter().map(|&a| c.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
        return Err(c.err(format!("repeated axes {axes:?}")));
    }
    let n = axes.len();
    let (scales, sizes) =
        if legacy { (Some(c.const_input(1)?), None) } else { (nonempty_const(c, 2)?, nonempty_const(c, 3)?) };
    let roi: Vec<f64> = if coord == Coord::TfCropAndResize {
        let t = nonempty_const(c, 1)?.ok_or_else(|| c.err("tf_crop_and_resize needs roi"))?;
        let v = t.to_f64();
        if v.len() != 2 * n {
            return Err(c.err(format!("roi has {} values for {n} axes", v.len())));
        }
        v
    } else {
        [vec![0.0; n], vec![1.0; n]].concat()
    };
    let (scale, out): (Vec<f64>, Vec<usize>) = match (scales, sizes) {
        (Some(_), Some(_)) => return Err(c.err("both scales and sizes are given")),
        (None, None) => return Err(c.err("neither scales nor sizes is given")),
        (Some(s), None) => {
            let s = s.to_f64();
            if s.len() != n {
                return Err(c.err(format!("{} scales for {n} axes", s.len())));
            }
            let out = axes.iter().zip(&s).map(|(&a, &s)| out_len(s, x.shape[a])).collect();
            (s, out)
        }
        (None, Some(z)) => {
            let z = z.to_i64();
            if z.len() != n || z.iter().any(|&v| v < 0) {
                return Err(c.err(format!("sizes {z:?} do not fit {n} axes")));
            }
            let s: Vec<f64> = axes.iter().zip(&z).map(|(&a, &v)| v as f64 / x.shape[a] as f64).collect();
            let policy = c.attr_str("keep_aspect_ratio_policy", "stretch");
            let one = match policy.as_str() {
                "stretch" => None,
                "not_larger" => s.iter().copied().reduce(f64::min),
                "not_smaller" => s.iter().copied().reduce(f64::max),
                other => return Err(c.err(format!("unsupported keep_aspect_ratio_policy `{other}`"))),
            };
            match one {
                None => (s, z.iter().map(|&v| v as usize).collect()),
                Some(k) => (vec![k; n], axes.iter().map(|&a| (k * x.shape[a] as f64 + 0.5) as usize).collect()),
            }
        }
    };
    let plan: Vec<AxisPlan> =
        (0..n).map(|i| AxisPlan { axis: axes[i], out: out[i], scale: scale[i], roi: (roi[i], roi[n + i]) }).collect();
    let extrapolation = c.attr_float("extrapolation_value", 0.0) as f64;
    check_plan(c, &x, &plan)?;
    Ok(vec![run_plan(c, &x, &spec, &plan, extrapolation)?])
}

fn upsample(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let mode = match c.attr_str("mode", "nearest").as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        other => return Err(c.err(format!("unsupported mode `{other}`"))),
    };
    let scales: Vec<f64> = if c.opset() < 9 {
        c.node
            .attr_floats("scales")
            .ok_or_else(|| c.err("missing attribute `scales`"))?
            .iter()
            .map(|&v| v as f64)
            .collect()
    } else {
        c.const_input(1)?.to_f64()
    };
    if scales.len() != x.rank() {
        return Err(c.err(format!("{} scales for rank {}", scales.len(), x.rank())));
    }
    let spec = Spec {
        mode,
        coord: Coord::Asymmetric,
        rounding: Rounding::Legacy,
        cubic_a: -0.75,
        exclude_outside: false,
        antialias: false,
    };
    let plan: Vec<AxisPlan> = scales
        .iter()
        .enumerate()
        .map(|(a, &s)| AxisPlan { axis: a, out: out_len(s, x.shape[a]), scale: s, roi: (0.0, 1.0) })
        .collect();
    check_plan(c, &x, &plan)?;
    Ok(vec![run_plan(c, &x, &spec, &plan, 0.0)?])
}

/// Refuses an output over the memory limit before any index table is built.
fn check_plan(c: &NodeCtx<'_>, x: &Lazy, plan: &[AxisPlan]) -> Result<()> {
    let mut shape = x.shape.clone();
    for a in plan {
        shape[a.axis] = a.out;
    }
    c.check_value("output", x.dtype, &shape)
}
