//! Reductions and the operators built on them: Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax, CumSum.

use pilot_core::DType;

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "ReduceSum" => |c| reduce(c, Kind::Sum),
        "ReduceMean" => |c| reduce(c, Kind::Mean),
        "ReduceMax" => |c| reduce(c, Kind::Max),
        "ReduceMin" => |c| reduce(c, Kind::Min),
        "ReduceProd" => |c| reduce(c, Kind::Prod),
        "ReduceL1" => |c| reduce(c, Kind::L1),
        "ReduceL2" => |c| reduce(c, Kind::L2),
        "ReduceSumSquare" => |c| reduce(c, Kind::SumSquare),
        "ReduceLogSum" => |c| reduce(c, Kind::LogSum),
        "ReduceLogSumExp" => |c| reduce(c, Kind::LogSumExp),
        "ArgMax" => |c| arg(c, true),
        "ArgMin" => |c| arg(c, false),
        "Softmax" => |c| softmax(c, false),
        "LogSoftmax" => |c| softmax(c, true),
        "CumSum" => cumsum,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

fn drop_axes(p: &mut Program, x: &Lazy, axes: &[usize]) -> Lazy {
    let shape: Vec<usize> = (0..x.rank()).filter(|i| !axes.contains(i)).map(|i| x.shape[i]).collect();
    p.reshape(x, &shape)
}

fn reduce(c: &mut NodeCtx<'_>, kind: Kind) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let input_since = if kind == Kind::Sum { 13 } else { 18 };
    let axes = if c.opset() < input_since { c.attr_ints("axes") } else { c.opt_const_input(1)?.map(|t| t.to_i64()) };
    let keep = c.attr_int("keepdims", 1) != 0;
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => a.iter().map(|&a| c.axis(a, x.rank())).collect::<Result<_>>()?,
        _ if c.attr_int("noop_with_empty_axes", 0) != 0 => return Ok(vec![x]),
        _ => (0..x.rank()).collect(),
    };
    let n: usize = axes.iter().map(|&a| x.shape[a]).product();
    let x = c.reduce_input(&x, 1.0);
    let p = c.p();
    let (op, body) = match kind {
        Kind::Sum | Kind::Mean | Kind::LogSum => (RedOp::Sum, x.clone()),
        Kind::Max => (RedOp::Max, x.clone()),
        Kind::Min => (RedOp::Min, x.clone()),
        Kind::Prod => (RedOp::Prod, x.clone()),
        Kind::L1 => (RedOp::Sum, p.unary(UnOp::Abs, &x)),
        Kind::L2 | Kind::SumSquare => (RedOp::Sum, p.binary(BinOp::Mul, &x, &x)),
        Kind::LogSumExp => {
            // Stabilized: max + log Σ exp(x - max).
            let m = p.reduce(RedOp::Max, &x, &axes);
            let mb = p.expand(&m, &x.shape);
            let d = p.binary(BinOp::Sub, &x, &mb);
            let e = p.unary(UnOp::Exp, &d);
            let s = p.reduce(RedOp::Sum, &e, &axes);
            let l = p.unary(UnOp::Log, &s);
            let m = p.reduce(RedOp::Max, &x, &axes);
            let y = p.binary(BinOp::Add, &l, &m);
            return Ok(vec![if keep { y } else { drop_axes(p, &y, &axes) }]);
        }
    };
    let mut y = p.reduce(op, &body, &axes);
    y = match kind {
        Kind::Mean => with(p, BinOp::Div, &y, n as f64),
        Kind::L2 => p.unary(UnOp::Sqrt, &y),
        Kind::LogSum => p.unary(UnOp::Log, &y),
        _ => y,
    };
    Ok(vec![if keep { y } else { drop_axes(p, &y, &axes) }])
}

/// The coordinate along `axis` as a tensor of `dtype`.
fn iota(p: &mut Program, shape: &[usize], axis: usize, dtype: DType) -> Lazy {
    let vars = p.ctx.fresh_vars(shape);
    let v = p.ctx.var(vars[axis]);
    let expr = p.ctx.cast(v, dtype);
    Lazy { dtype, shape: shape.to_vec(), vars, expr }
}

fn arg(c: &mut NodeCtx<'_>, is_max: bool) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axis = c.axis(c.attr_int("axis", 0), x.rank())?;
    let keep = c.attr_int("keepdims", 1) != 0;
    let last = c.attr_int("select_last_index", 0) != 0;
    let x = c.reduce_input(&x, 2.0);
    let p = c.p();
    let m = p.reduce(if is_max { RedOp::Max } else { RedOp::Min }, &x, &[axis]);
    let mb = p.expand(&m, &x.shape);
    let hit = p.binary(BinOp::Eq, &x, &mb);
    let idx = iota(p, &x.shape, axis, DType::I64);
    let miss = p.full(DType::I64, &x.shape, if last { -1.0 } else { x.shape[axis] as f64 });
    let cand = p.where_(&hit, &idx, &miss);
    let y = p.reduce(if last { RedOp::Max } else { RedOp::Min }, &cand, &[axis]);
    Ok(vec![if keep { y } else { drop_axes(p, &y, &[axis]) }])
}

fn softmax(c: &mut NodeCtx<'_>, log: bool) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let old = c.opset() < 13;
    let axis = c.axis(c.attr_int("axis", if old { 1 } else { -1 }), x.rank())?;
    let x = c.reduce_input(&x, 3.0);
    let p = c.p();
    // Before opset 13 the input is coerced to 2-D at `axis` and normalized over the inner part.
    let (work, axes) = if old {
        let outer: usize = x.shape[..axis].iter().product();
        (p.reshape(&x, &[outer, x.numel() / outer.max(1)]), vec![1])
    } else {
        (x.clone(), vec![axis])
    };
    let m = p.reduce(RedOp::Max, &work, &axes);
    let mb = p.expand(&m, &work.shape);
    let d = p.binary(BinOp::Sub, &work, &mb);
    let e = p.unary(UnOp::Exp, &d);
    let s = p.reduce(RedOp::Sum, &e, &axes);
    let sb = p.expand(&s, &work.shape);
    let y = if log {
        let l = p.unary(UnOp::Log, &sb);
        p.binary(BinOp::Sub, &d, &l)
    } else {
        p.binary(BinOp::Div, &e, &sb)
    };
    Ok(vec![p.reshape(&y, &x.shape)])
}

fn cumsum(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let x = c.input(0)?;
    let axis = c.const_input(1)?.to_i64().first().copied().ok_or_else(|| c.err("empty axis"))?;
    let axis = c.axis(axis, x.rank())?;
    let (exclusive, reverse) = (c.attr_int("exclusive", 0) != 0, c.attr_int("reverse", 0) != 0);
    let n = x.shape[axis];
    let x = c.reduce_input(&x, n as f64);
    let p = c.p();
    // y[i] = Σ_j x[j] · [j ≤ i] (or j < i, j ≥ i, j > i), as a reduction over a new axis.
    let mut ext = x.shape.clone();
    ext.insert(axis + 1, n);
    let i = iota(p, &ext, axis, DType::I64);
    let j = iota(p, &ext, axis + 1, DType::I64);
    let cond = match (reverse, exclusive) {
        (false, false) => p.binary(BinOp::Le, &j, &i),
        (false, true) => p.binary(BinOp::Lt, &j, &i),
        (true, false) => p.binary(BinOp::Le, &i, &j),
        (true, true) => p.binary(BinOp::Lt, &i, &j),
    };
    // x re-indexed so that axis+1 is its axis.
    let mut shape_b = x.shape.clone();
    shape_b.insert(axis, 1);
    let xb = p.reshape(&x, &shape_b);
    let xb = p.expand(&xb, &ext);
    let zero = p.full(x.dtype, &ext, 0.0);
    let terms = p.where_(&cond, &xb, &zero);
    let s = p.reduce(RedOp::Sum, &terms, &[axis + 1]);
    Ok(vec![p.reshape(&s, &x.shape)])
}
