//! Attention (opset 23+): scaled dot-product attention over 3-D (`[batch, seq, heads·size]`) or 4-D
//! (`[batch, heads, seq, size]`) operands, with a past key/value cache, boolean or additive masks,
//! causal and sliding-window masking (aligned bottom-right to the cache or to `nonpad_kv_seqlen`),
//! grouped-query heads, softcap, and the `qk_matmul_output` modes — as the ONNX reference computes it.

use pilot_core::DType;

use super::elementwise::with;
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Attention" => attention,
        _ => return None,
    })
}

/// `[batch, seq, heads·size]` as `[batch, heads, seq, size]`.
fn split_heads(c: &mut NodeCtx<'_>, x: &Lazy, heads: i64, what: &str) -> Result<Lazy> {
    let [b, s, hidden] = x.shape[..] else { unreachable!("rank checked by the caller") };
    if heads < 1 || hidden % heads as usize != 0 {
        return Err(c.err(format!("{what} hidden size {hidden} does not split into {heads} heads")));
    }
    let h = heads as usize;
    let p = c.p();
    let r = p.reshape(x, &[b, s, h, hidden / h]);
    Ok(p.permute(&r, &[0, 2, 1, 3]))
}

/// The coordinate along `axis` of a tensor of `shape`, as int64.
fn iota(p: &mut Program, shape: &[usize], axis: usize) -> Lazy {
    let vars = p.ctx.fresh_vars(shape);
    let expr = p.ctx.var(vars[axis]);
    Lazy { dtype: crate::ir::INDEX, shape: shape.to_vec(), vars, expr }
}

/// `0` where `allowed`, `-inf` elsewhere, in `dtype`.
fn bias_from(p: &mut Program, allowed: &Lazy, dtype: DType) -> Lazy {
    let zero = p.full(dtype, &allowed.shape, 0.0);
    let ninf = p.full(dtype, &allowed.shape, f64::NEG_INFINITY);
    p.where_(allowed, &zero, &ninf)
}

fn add(c: &mut NodeCtx<'_>, a: &Lazy, b: &Lazy) -> Result<Lazy> {
    let v = c.broadcast(&[a, b])?;
    Ok(c.p().binary(BinOp::Add, &v[0], &v[1]))
}

/// Softmax over the last axis where a row of `-inf` gives zeros rather than NaN.
fn safe_softmax(c: &mut NodeCtx<'_>, x: &Lazy) -> Lazy {
    let x = c.reduce_input(x, 3.0);
    let last = x.rank() - 1;
    let p = c.p();
    let m = p.reduce(RedOp::Max, &x, &[last]);
    let ninf = p.full(m.dtype, &m.shape, f64::NEG_INFINITY);
    let masked = p.binary(BinOp::Eq, &m, &ninf);
    let zero = p.full(m.dtype, &m.shape, 0.0);
    let m = p.where_(&masked, &zero, &m);
    let mb = p.expand(&m, &x.shape);
    let d = p.binary(BinOp::Sub, &x, &mb);
    let e = p.unary(UnOp::Exp, &d);
    let s = p.reduce(RedOp::Sum, &e, &[last]);
    let empty = p.binary(BinOp::Eq, &s, &zero);
    let one = p.full(s.dtype, &s.shape, 1.0);
    let s = p.where_(&empty, &one, &s);
    let sb = p.expand(&s, &x.shape);
    p.binary(BinOp::Div, &e, &sb)
}

fn attention(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (q, k, v) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let (mask, past_k, past_v, nonpad) = (c.opt_input(3)?, c.opt_input(4)?, c.opt_input(5)?, c.opt_input(6)?);
    let rank = q.rank();
    if !(rank == 3 || rank == 4) || k.rank() != rank || v.rank() != rank {
        return Err(c.err(format!("Q {:?}, K {:?}, V {:?}: all 3-D or all 4-D", q.shape, k.shape, v.shape)));
    }
    if !q.dtype.is_float() || k.dtype != q.dtype || v.dtype != q.dtype {
        return Err(c.err(format!("Q, K, V of types {}, {}, {}: one float type", q.dtype, k.dtype, v.dtype)));
    }
    if past_k.is_some() != past_v.is_some() {
        return Err(c.err("past_key and past_value go together"));
    }
    if nonpad.is_some() && past_k.is_some() {
        return Err(c.err("nonpad_kv_seqlen cannot be combined with past_key/past_value"));
    }
    let (q, k, v) = if rank == 3 {
        let (qh, kvh) = (c.node.attr_int("q_num_heads"), c.node.attr_int("kv_num_heads"));
        let (Some(qh), Some(kvh)) = (qh, kvh) else {
            return Err(c.err("3-D inputs need the q_num_heads and kv_num_heads attributes"));
        };
        (split_heads(c, &q, qh, "Q")?, split_heads(c, &k, kvh, "K")?, split_heads(c, &v, kvh, "V")?)
    } else {
        (q, k, v)
    };
    let dtype = q.dtype;
    let (batch, q_heads, q_len, head) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    let scale = c.node.attr_float("scale").map_or(1.0 / (head as f64).sqrt(), f64::from);
    let (k, v) = match (&past_k, &past_v) {
        (Some(pk), Some(pv)) => {
            (super::shape::concat_lazy(c, &[pk.clone(), k], 2)?, super::shape::concat_lazy(c, &[pv.clone(), v], 2)?)
        }
        _ => (k, v),
    };
    let (present_k, present_v) = (k.clone(), v.clone());
    let kv_len = k.shape[2];
    if k.shape[0] != batch || k.shape[3] != head || v.shape[2] != kv_len || k.shape[1] != v.shape[1] {
        return Err(c.err(format!("K {:?} and V {:?} do not fit Q {:?}", k.shape, v.shape, q.shape)));
    }

    // The additive bias over [batch|1, heads|1, q, kv]: mask, causal, window, padding.
    let mut bias: Option<Lazy> = None;
    if let Some(m) = mask {
        let pad = kv_len as i64 - *m.shape.last().unwrap_or(&0) as i64;
        let p = c.p();
        let m = if m.dtype == DType::Bool {
            let lo = vec![0; m.rank()];
            let mut hi = vec![0; m.rank()];
            hi[m.rank() - 1] = pad.max(0);
            let m = p.pad(&m, &lo, &hi, 0.0);
            bias_from(p, &m, dtype)
        } else {
            let m = p.cast(&m, dtype);
            let lo = vec![0; m.rank()];
            let mut hi = vec![0; m.rank()];
            hi[m.rank() - 1] = pad.max(0);
            p.pad(&m, &lo, &hi, f64::NEG_INFINITY)
        };
        if *m.shape.last().unwrap_or(&0) != kv_len {
            return Err(c.err(format!("attn_mask {:?} is longer than the {kv_len} keys", m.shape)));
        }
        bias = Some(m);
    }
    // Query i attends key j where j - (i + offset) is within the window; the offset aligns the
    // queries to the end of the cache (or of each batch's real keys).
    let grid = [1, 1, q_len, kv_len];
    let offset = {
        let p = c.p();
        match &nonpad {
            Some(n) => {
                let n = p.cast(n, crate::ir::INDEX);
                let n = p.reshape(&n, &[n.numel(), 1, 1, 1]);
                Some(with(p, BinOp::Sub, &n, q_len as f64))
            }
            None => None,
        }
    };
    let past_len = past_k.as_ref().map_or(0, |pk| pk.shape[2]) as f64;
    let frontier = |c: &mut NodeCtx<'_>| -> Result<(Lazy, Lazy)> {
        let p = c.p();
        let i = iota(p, &grid, 2);
        let j = iota(p, &grid, 3);
        let pos = match &offset {
            Some(o) => {
                let v = c.broadcast(&[&i, o])?;
                c.p().binary(BinOp::Add, &v[0], &v[1])
            }
            None => with(p, BinOp::Add, &i, past_len),
        };
        let v = c.broadcast(&[&pos, &j])?;
        Ok((v[0].clone(), v[1].clone()))
    };
    if c.attr_int("is_causal", 0) != 0 {
        let (pos, j) = frontier(c)?;
        let allowed = c.p().binary(BinOp::Le, &j, &pos);
        let causal = bias_from(c.p(), &allowed, dtype);
        bias = Some(match bias {
            Some(b) => add(c, &b, &causal)?,
            None => causal,
        });
    }
    let (left, right) = (c.attr_int("left_window_size", -1), c.attr_int("right_window_size", -1));
    if left >= 0 || right >= 0 {
        let (pos, j) = frontier(c)?;
        let p = c.p();
        let diff = p.binary(BinOp::Sub, &pos, &j);
        let mut allowed = p.full(DType::Bool, &diff.shape, 1.0);
        if left >= 0 {
            let lim = p.full(diff.dtype, &diff.shape, left as f64);
            let ok = p.binary(BinOp::Le, &diff, &lim);
            allowed = p.binary(BinOp::And, &allowed, &ok);
        }
        if right >= 0 {
            let lim = p.full(diff.dtype, &diff.shape, -right as f64);
            let ok = p.binary(BinOp::Le, &lim, &diff);
            allowed = p.binary(BinOp::And, &allowed, &ok);
        }
        let window = bias_from(p, &allowed, dtype);
        bias = Some(match bias {
            Some(b) => add(c, &b, &window)?,
            None => window,
        });
    }
    if let Some(n) = &nonpad {
        let p = c.p();
        let n = p.cast(n, crate::ir::INDEX);
        let n = p.reshape(&n, &[n.numel(), 1, 1, 1]);
        let j = iota(p, &[1, 1, 1, kv_len], 3);
        let v = c.broadcast(&[&j, &n])?;
        let p = c.p();
        let real = p.binary(BinOp::Lt, &v[0], &v[1]);
        let padding = bias_from(p, &real, dtype);
        bias = Some(match bias {
            Some(b) => add(c, &b, &padding)?,
            None => padding,
        });
    }

    // Grouped-query attention: each K/V head serves q_heads / kv_heads query heads.
    let kv_heads = k.shape[1];
    let (k, v) = if kv_heads != q_heads && kv_heads > 0 && q_heads % kv_heads == 0 {
        let reps = q_heads / kv_heads;
        let p = c.p();
        let mut repeat = |x: &Lazy| {
            let [b, h, s, d] = x.shape[..] else { unreachable!("4-D") };
            let r = p.reshape(x, &[b, h, 1, s, d]);
            let e = p.expand(&r, &[b, h, reps, s, d]);
            p.reshape(&e, &[b, h * reps, s, d])
        };
        (repeat(&k), repeat(&v))
    } else {
        (k, v)
    };

    let s = scale.sqrt();
    let p = c.p();
    let qs = with(p, BinOp::Mul, &q, s);
    let ks = with(p, BinOp::Mul, &k, s);
    let kt = p.permute(&ks, &[0, 1, 3, 2]);
    let mut qk = super::nn::matmul_lazy(c, &qs, &kt)?;
    let softcap = c.attr_float("softcap", 0.0) as f64;
    if softcap > 0.0 {
        let p = c.p();
        let t = with(p, BinOp::Div, &qk, softcap);
        let t = p.unary(UnOp::Tanh, &t);
        qk = with(p, BinOp::Mul, &t, softcap);
    }
    let with_bias = match &bias {
        Some(b) => add(c, &qk, b)?,
        None => qk.clone(),
    };
    let mode = c.attr_int("qk_matmul_output_mode", 0);
    let precision = match c.node.attr_int("softmax_precision") {
        Some(code) if code != 0 => {
            Some(crate::onnx::data::dtype_from_onnx(code).filter(|d| d.is_float()).ok_or_else(|| {
                c.err(format!("softmax_precision {} is not supported", crate::onnx::data::onnx_dtype_name(code)))
            })?)
        }
        _ => None,
    };
    let logits = match precision {
        Some(d) => c.p().cast(&with_bias, d),
        None => with_bias.clone(),
    };
    let mut probs = safe_softmax(c, &logits);
    // Rows the bias masks entirely attend to nothing.
    if let Some(b) = &bias {
        let p = c.p();
        let last = b.rank() - 1;
        let m = p.reduce(RedOp::Max, b, &[last]);
        let ninf = p.full(m.dtype, &m.shape, f64::NEG_INFINITY);
        let dead = p.binary(BinOp::Eq, &m, &ninf);
        let zero = p.full(probs.dtype, &[], 0.0);
        let v = c.broadcast(&[&dead, &probs, &zero])?;
        probs = c.p().where_(&v[0], &v[2], &v[1]);
    }
    let p = c.p();
    let qk_out = match mode {
        2 => with_bias,
        3 => probs.clone(),
        _ => qk,
    };
    let qk_out = p.cast(&qk_out, dtype);
    let probs = p.cast(&probs, dtype);
    let y = super::nn::matmul_lazy(c, &probs, &v)?;
    let y = if rank == 3 {
        let p = c.p();
        let t = p.permute(&y, &[0, 2, 1, 3]);
        let [b, s, h, d] = t.shape[..] else { unreachable!("4-D") };
        p.reshape(&t, &[b, s, h * d])
    } else {
        y
    };
    Ok(vec![y, present_k, present_v, qk_out])
}
