//! Quantization: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
//! DynamicQuantizeLinear, and the integer products MatMulInteger, ConvInteger, QLinearMatMul and
//! QLinearConv.
//!
//! As the ONNX reference computes them: zero points are subtracted in int32, products accumulate in
//! int32 (the MatMul and Conv lowerings over int32 operands), and only the requantization scale is a
//! float multiplier; the result is rounded half to even, then saturated to the output type.

use std::collections::HashMap;

use pilot_core::DType;

use super::compose::{attrs_of, run_op};
use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "QuantizeLinear" => quantize,
        "DequantizeLinear" => dequantize,
        "DynamicQuantizeLinear" => dynamic_quantize,
        "MatMulInteger" => matmul_integer,
        "QLinearMatMul" => qlinear_matmul,
        "ConvInteger" => conv_integer,
        "QLinearConv" => qlinear_conv,
        _ => return None,
    })
}

/// The attributes Conv takes, which ConvInteger and QLinearConv share.
const CONV_ATTRS: [&str; 6] = ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"];

/// The saturation range of a quantized type, or an error naming the type.
fn range(c: &NodeCtx<'_>, dtype: DType) -> Result<(f64, f64)> {
    match dtype {
        DType::U8 => Ok((0.0, 255.0)),
        DType::I8 => Ok((-128.0, 127.0)),
        DType::U16 => Ok((0.0, 65535.0)),
        DType::I16 => Ok((-32768.0, 32767.0)),
        d => Err(c.err(format!("quantized type {d} is not supported (uint8, int8, uint16, int16 are)"))),
    }
}

/// A scale or zero point laid over `shape`: one value (per tensor), a 1-D tensor along `axis` (per
/// axis), or with `block > 0` a tensor of `shape`'s rank whose `axis` dimension has one value per
/// `block` elements (blocked).
/// `axis` may be negative; it is only checked where the parameter has more than one value.
fn param_over(c: &mut NodeCtx<'_>, v: &Lazy, shape: &[usize], axis: i64, block: usize) -> Result<Lazy> {
    let rank = shape.len();
    if v.numel() == 1 {
        let p = c.p();
        let one = p.reshape(v, &vec![1; rank]);
        return Ok(p.expand(&one, shape));
    }
    let axis = c.axis(axis, rank)?;
    if block == 0 {
        if v.rank() != 1 || v.shape[0] != shape[axis] {
            return Err(
                c.err(format!("per-axis parameter of shape {:?} does not match axis {axis} of {shape:?}", v.shape))
            );
        }
        let mut dims = vec![1; rank];
        dims[axis] = v.shape[0];
        let p = c.p();
        let r = p.reshape(v, &dims);
        return Ok(p.expand(&r, shape));
    }
    let fits = v.rank() == rank
        && (0..rank).all(|d| if d == axis { v.shape[d] == shape[d].div_ceil(block) } else { v.shape[d] == shape[d] });
    if !fits {
        return Err(c.err(format!(
            "blocked parameter of shape {:?} does not match {shape:?} in blocks of {block} along axis {axis}",
            v.shape
        )));
    }
    let p = c.p();
    let vars = p.ctx.fresh_vars(shape);
    let map: HashMap<u32, _> = (0..rank)
        .map(|d| {
            let x = p.ctx.var(vars[d]);
            (v.vars[d], if d == axis { p.ctx.div_i(x, block as i64) } else { x })
        })
        .collect();
    let expr = substitute(&mut p.ctx, v.expr, &map, None);
    Ok(Lazy { dtype: v.dtype, shape: shape.to_vec(), vars, expr })
}

/// `round_half_even(x) + zero_point`, saturated to `to` (whose range is `lo..=hi`): rounded in float,
/// the zero point added in int32 (the float is clamped first so the conversion is defined).
fn saturate(p: &mut Program, x: &Lazy, zero_point: Option<&Lazy>, to: DType, (lo, hi): (f64, f64)) -> Lazy {
    let r = p.unary(UnOp::Round, x);
    let r = with(p, BinOp::Max, &r, lo - 65536.0);
    let r = with(p, BinOp::Min, &r, hi + 65536.0);
    let mut q = p.cast(&r, DType::I32);
    if let Some(zp) = zero_point {
        let zp = p.cast(zp, DType::I32);
        q = p.binary(BinOp::Add, &q, &zp);
    }
    let q = with(p, BinOp::Max, &q, lo);
    let q = with(p, BinOp::Min, &q, hi);
    p.cast(&q, to)
}

/// `x - zero_point` in int32 (`zero_point` already laid over `x`).
fn centered(p: &mut Program, x: &Lazy, zero_point: Option<&Lazy>) -> Lazy {
    let x = p.cast(x, DType::I32);
    match zero_point {
        Some(zp) => {
            let zp = p.cast(zp, DType::I32);
            p.binary(BinOp::Sub, &x, &zp)
        }
        None => x,
    }
}

fn block_size(c: &NodeCtx<'_>) -> Result<usize> {
    match c.attr_int("block_size", 0) {
        b if b >= 0 => Ok(b as usize),
        b => Err(c.err(format!("block_size {b} is negative"))),
    }
}

/// The float type named by attribute `name` (a `TensorProto.DataType` code), if set.
fn float_attr(c: &NodeCtx<'_>, name: &str) -> Result<Option<DType>> {
    match c.node.attr_int(name) {
        Some(code) if code != 0 => crate::onnx::data::dtype_from_onnx(code)
            .map(Some)
            .ok_or_else(|| c.err(format!("{name} {} is not supported", crate::onnx::data::onnx_dtype_name(code)))),
        _ => Ok(None),
    }
}

fn quantize(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale) = (c.input(0)?, c.input(1)?);
    let zp = c.opt_input(2)?;
    let to = match (&zp, float_attr(c, "output_dtype")?) {
        (Some(z), _) => z.dtype,
        (None, Some(d)) => d,
        (None, None) => DType::U8,
    };
    let bounds = range(c, to)?;
    let axis = c.attr_int("axis", 1);
    let block = block_size(c)?;
    // The division runs in `precision` if given, else in the inputs' type (numpy's promotion).
    let work = match float_attr(c, "precision")? {
        Some(d) if d.is_float() => d,
        Some(d) => return Err(c.err(format!("precision {d} is not a float type"))),
        None if x.dtype == DType::F16 && scale.dtype == DType::F16 => DType::F16,
        None if x.dtype == DType::F64 || scale.dtype == DType::F64 => DType::F64,
        None => DType::F32,
    };
    let shape = x.shape.clone();
    let s = param_over(c, &scale, &shape, axis, block)?;
    let z = zp.map(|z| param_over(c, &z, &shape, axis, block)).transpose()?;
    let p = c.p();
    let xw = p.cast(&x, work);
    let sw = p.cast(&s, work);
    let q = p.binary(BinOp::Div, &xw, &sw);
    Ok(vec![saturate(p, &q, z.as_ref(), to, bounds)])
}

fn dequantize(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, scale) = (c.input(0)?, c.input(1)?);
    let zp = c.opt_input(2)?;
    if x.dtype.is_float() || x.dtype == DType::Bool {
        return Err(c.err(format!("input of type {} is not a supported quantized type", x.dtype)));
    }
    if !scale.dtype.is_float() {
        return Err(c.err(format!("scale of type {}: a float type is required", scale.dtype)));
    }
    let to = float_attr(c, "output_dtype")?.unwrap_or(scale.dtype);
    let axis = c.attr_int("axis", 1);
    let block = block_size(c)?;
    let shape = x.shape.clone();
    let s = param_over(c, &scale, &shape, axis, block)?;
    let z = zp.map(|z| param_over(c, &z, &shape, axis, block)).transpose()?;
    let p = c.p();
    // int32 holds every supported quantized value and their differences exactly.
    let d = if x.dtype == DType::I32 && z.is_none() { x.clone() } else { centered(p, &x, z.as_ref()) };
    let work = if scale.dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let df = p.cast(&d, work);
    let sf = p.cast(&s, work);
    let y = p.binary(BinOp::Mul, &df, &sf);
    Ok(vec![p.cast(&y, to)])
}

fn dynamic_quantize(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    if x.dtype != DType::F32 {
        return Err(c.err(format!("input of type {}: float32 is required", x.dtype)));
    }
    let p = c.p();
    let axes: Vec<usize> = (0..x.rank()).collect();
    let scalar = |p: &mut Program, v: &Lazy| p.reshape(v, &[]);
    let hi = p.reduce(RedOp::Max, &x, &axes);
    let hi = scalar(p, &hi);
    let hi = with(p, BinOp::Max, &hi, 0.0);
    let lo = p.reduce(RedOp::Min, &x, &axes);
    let lo = scalar(p, &lo);
    let lo = with(p, BinOp::Min, &lo, 0.0);
    // scale = (max - min) / 255, or 1 / 255 when max == min; zero point = round(clamp(-min / scale)).
    let span = p.binary(BinOp::Sub, &hi, &lo);
    let same = p.binary(BinOp::Eq, &hi, &lo);
    let one = p.full(DType::F32, &[], 1.0);
    let span = p.where_(&same, &one, &span);
    let scale = with(p, BinOp::Div, &span, 255.0);
    let scale = p.realize(&scale, crate::program::BufKind::Scratch, "dynamic_scale");
    let neg = p.unary(UnOp::Neg, &lo);
    let zp = p.binary(BinOp::Div, &neg, &scale);
    let zp = with(p, BinOp::Max, &zp, 0.0);
    let zp = with(p, BinOp::Min, &zp, 255.0);
    let zp = p.unary(UnOp::Round, &zp);
    let zp_u8 = p.cast(&zp, DType::U8);
    let ones = vec![1; x.rank()];
    let s1 = p.reshape(&scale, &ones);
    let s = p.expand(&s1, &x.shape);
    let z1 = p.reshape(&zp_u8, &ones);
    let z = p.expand(&z1, &x.shape);
    let q = p.binary(BinOp::Div, &x, &s);
    let y = saturate(p, &q, Some(&z), DType::U8, (0.0, 255.0));
    Ok(vec![y, scale, zp_u8])
}

/// The per-row zero point of a matrix product's left operand laid over `a`: a scalar, or one value
/// per row (`[M]`, or `[.., M, 1]`).
fn row_param(c: &mut NodeCtx<'_>, v: &Lazy, a: &Lazy) -> Result<Lazy> {
    if v.numel() == 1 || a.rank() < 2 {
        return param_over(c, v, &a.shape.clone(), 0, 0);
    }
    let m = a.shape[a.rank() - 2];
    let v = if v.rank() == 1 && v.shape[0] == m { c.p().reshape(v, &[m, 1]) } else { v.clone() };
    let b = c.broadcast(&[a, &v])?;
    if b[0].shape != a.shape {
        return Err(c.err(format!("parameter of shape {:?} does not fit operand {:?}", v.shape, a.shape)));
    }
    Ok(b[1].clone())
}

/// The per-column zero point of a matrix product's right operand laid over `b`: a scalar, or one value
/// per column (`[N]`, or `[.., 1, N]`).
fn col_param(c: &mut NodeCtx<'_>, v: &Lazy, b: &Lazy) -> Result<Lazy> {
    let x = c.broadcast(&[b, v])?;
    if x[0].shape != b.shape {
        return Err(c.err(format!("parameter of shape {:?} does not fit operand {:?}", v.shape, b.shape)));
    }
    Ok(x[1].clone())
}

/// `(a - a_zero_point) @ (b - b_zero_point)` in int32.
fn integer_product(c: &mut NodeCtx<'_>, a: &Lazy, az: Option<Lazy>, b: &Lazy, bz: Option<Lazy>) -> Result<Lazy> {
    for v in [a, b] {
        if !matches!(v.dtype, DType::U8 | DType::I8) {
            return Err(c.err(format!("operand of type {}: uint8 or int8 is required", v.dtype)));
        }
    }
    let az = az.map(|z| row_param(c, &z, a)).transpose()?;
    let bz = bz.map(|z| col_param(c, &z, b)).transpose()?;
    let p = c.p();
    let a32 = centered(p, a, az.as_ref());
    let b32 = centered(p, b, bz.as_ref());
    super::nn::matmul_lazy(c, &a32, &b32)
}

fn matmul_integer(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, b) = (c.input(0)?, c.input(1)?);
    let (az, bz) = (c.opt_input(2)?, c.opt_input(3)?);
    Ok(vec![integer_product(c, &a, az, &b, bz)?])
}

/// `acc · (in_scale · w_scale / y_scale) + y_zero_point`, rounded and saturated to `y_zero_point`'s
/// type (or `fallback`'s). The scales are already laid over `acc`.
fn requantize(
    c: &mut NodeCtx<'_>,
    acc: &Lazy,
    scales: [&Lazy; 3],
    y_zp: Option<&Lazy>,
    fallback: DType,
) -> Result<Lazy> {
    let to = y_zp.map_or(fallback, |z| z.dtype);
    let bounds = range(c, to)?;
    let z = y_zp.map(|z| param_over(c, z, &acc.shape.clone(), 0, 0)).transpose()?;
    let p = c.p();
    // The multiplier in the scales' own type, as the reference computes it; the product in float32.
    let ab = p.binary(BinOp::Mul, scales[0], scales[1]);
    let m = p.binary(BinOp::Div, &ab, scales[2]);
    let m = p.cast(&m, DType::F32);
    let accf = p.cast(acc, DType::F32);
    let r = p.binary(BinOp::Mul, &accf, &m);
    Ok(saturate(p, &r, z.as_ref(), to, bounds))
}

fn qlinear_matmul(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (a, a_scale, a_zp) = (c.input(0)?, c.input(1)?, c.opt_input(2)?);
    let (b, b_scale, b_zp) = (c.input(3)?, c.input(4)?, c.opt_input(5)?);
    let (y_scale, y_zp) = (c.input(6)?, c.opt_input(7)?);
    let acc = integer_product(c, &a, a_zp, &b, b_zp)?;
    // Per-row scales of A and per-column scales of B, as their zero points.
    let shape = acc.shape.clone();
    let over = |c: &mut NodeCtx<'_>, v: &Lazy, row: bool| -> Result<Lazy> {
        if v.numel() == 1 || shape.len() < 2 {
            return param_over(c, v, &shape, 0, 0);
        }
        let r = shape.len();
        let axis = if row { r - 2 } else { r - 1 };
        param_over(c, v, &shape, axis as i64, 0)
    };
    let sa = over(c, &a_scale, true)?;
    let sb = over(c, &b_scale, false)?;
    let sy = param_over(c, &y_scale, &shape, 0, 0)?;
    Ok(vec![requantize(c, &acc, [&sa, &sb, &sy], y_zp.as_ref(), a.dtype)?])
}

/// `x - x_zero_point` and `w - w_zero_point` (per tensor, or per output channel for `w`) in int32.
fn conv_operands(c: &mut NodeCtx<'_>, x: &Lazy, xz: Option<Lazy>, w: &Lazy, wz: Option<Lazy>) -> Result<(Lazy, Lazy)> {
    for v in [x, w] {
        if !matches!(v.dtype, DType::U8 | DType::I8) {
            return Err(c.err(format!("operand of type {}: uint8 or int8 is required", v.dtype)));
        }
    }
    if let Some(z) = &xz {
        if z.numel() != 1 {
            return Err(c.err(format!("input zero point of shape {:?}: one value is required", z.shape)));
        }
    }
    let xz = xz.map(|z| param_over(c, &z, &x.shape.clone(), 0, 0)).transpose()?;
    let wz = wz.map(|z| param_over(c, &z, &w.shape.clone(), 0, 0)).transpose()?;
    let p = c.p();
    Ok((centered(p, x, xz.as_ref()), centered(p, w, wz.as_ref())))
}

fn conv_integer(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, w) = (c.input(0)?, c.input(1)?);
    let (xz, wz) = (c.opt_input(2)?, c.opt_input(3)?);
    let (x32, w32) = conv_operands(c, &x, xz, &w, wz)?;
    let attrs = attrs_of(c, &CONV_ATTRS);
    run_op(c, "Conv", &[Some(&x32), Some(&w32)], attrs)
}

fn qlinear_conv(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (x, x_scale, x_zp) = (c.input(0)?, c.input(1)?, c.opt_input(2)?);
    let (w, w_scale, w_zp) = (c.input(3)?, c.input(4)?, c.opt_input(5)?);
    let (y_scale, y_zp) = (c.input(6)?, c.opt_input(7)?);
    let bias = c.opt_input(8)?;
    if let Some(b) = &bias {
        if b.dtype != DType::I32 {
            return Err(c.err(format!("bias of type {}: int32 is required", b.dtype)));
        }
    }
    let (x32, w32) = conv_operands(c, &x, x_zp, &w, w_zp)?;
    let attrs = attrs_of(c, &CONV_ATTRS);
    let acc = run_op(c, "Conv", &[Some(&x32), Some(&w32), bias.as_ref()], attrs)?.remove(0);
    let shape = acc.shape.clone();
    let sx = param_over(c, &x_scale, &shape, 0, 0)?;
    let sw = param_over(c, &w_scale, &shape, 1, 0)?;
    let sy = param_over(c, &y_scale, &shape, 0, 0)?;
    Ok(vec![requantize(c, &acc, [&sx, &sw, &sy], y_zp.as_ref(), x.dtype)?])
}
