//! Recurrent layers: `LSTM`, `GRU` and `RNN`, unrolled over time at compile time.
//!
//! The sequence length is static, so each time step becomes a few kernels: the input projections
//! `X·Wᵀ + b` for all steps are computed once up front (one matmul kernel per direction), then each
//! step multiplies the previous hidden state by `Rᵀ` and applies the gate nonlinearities. Hidden
//! (and cell) states are realized after every step, so expression trees stay the size of one step.
//! `Y` gathers the per-step states with a balanced selection tree (depth log₂ seq). With `--image
//! --float16` only the input projections read half images; the recurrence `h·Rᵀ` reads plain float32
//! buffers, so the state is never rounded to half between steps.
//!
//! Supported: directions forward/reverse/bidirectional, optional `B`, `initial_h`, `initial_c`,
//! peepholes `P`, `clip`, layouts 0 and 1, `linear_before_reset` (GRU), `input_forget` (LSTM: f = 1 − i), and
//! the activations Sigmoid, Tanh, Relu, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
//! Softsign, Softplus and Affine (alpha/beta consumed in order, defaults as onnxruntime).
//! `sequence_lens` must be a constant with every entry equal to the sequence length.

mod act;

use std::cell::RefCell;
use std::collections::HashMap;

use super::elementwise::{konst, with};
use super::nn::{matmul_lazy, matmul_plain};
use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, N};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};
use act::{activations, apply, Act};

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "LSTM" => lstm,
        "GRU" => gru,
        "RNN" => rnn,
        _ => return None,
    })
}

/// What every recurrent layer shares: the input in `[seq, batch, input]` order, the weights and the
/// per-direction settings.
struct Layer {
    x: Lazy,
    w: Lazy,
    r: Lazy,
    b: Option<Lazy>,
    seq: usize,
    batch: usize,
    hidden: usize,
    dirs: usize,
    layout: bool,
    clip: Option<f64>,
    acts: Vec<Vec<Act>>,
    /// `R[rows]ᵀ` of each (direction, first row, rows) the recurrence reads, folded once: every time
    /// step reads the same buffer instead of folding its own copy.
    recurrent: RefCell<HashMap<(usize, usize, usize), Lazy>>,
}

fn layer(c: &mut NodeCtx<'_>, gates: usize, default_acts: &[&str]) -> Result<Layer> {
    let (x, w, r) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let b = c.opt_input(3)?;
    let dirs = match c.attr_str("direction", "forward").as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return Err(c.err(format!("unknown direction `{other}`"))),
    };
    let layout = match c.attr_int("layout", 0) {
        0 => false,
        1 => true,
        l => return Err(c.err(format!("unknown layout {l}"))),
    };
    if x.rank() != 3 || w.rank() != 3 || r.rank() != 3 {
        return Err(c.err("X, W and R must be 3-D"));
    }
    let x = if layout { c.p().permute(&x, &[1, 0, 2]) } else { x };
    let (seq, batch, input) = (x.shape[0], x.shape[1], x.shape[2]);
    let hidden = r.shape[2];
    if let Some(h) = c.node.attr_int("hidden_size") {
        if h as usize != hidden {
            return Err(c.err(format!("hidden_size {h} but R has {hidden} columns")));
        }
    }
    if w.shape != [dirs, gates * hidden, input] || r.shape != [dirs, gates * hidden, hidden] {
        return Err(c.err(format!(
            "W {:?} / R {:?} do not fit {dirs} direction(s), {gates} gates, hidden {hidden}, input {input}",
            w.shape, r.shape
        )));
    }
    if let Some(b) = &b {
        if b.shape != [dirs, 2 * gates * hidden] {
            return Err(c.err(format!("B has shape {:?}", b.shape)));
        }
    }
    if let Some(t) = c.opt_const_input(4)? {
        if t.to_i64().iter().any(|&l| l != seq as i64) {
            return Err(c.err(format!(
                "sequence_lens {:?} differ from the sequence length {seq}: variable lengths are not supported",
                t.to_i64()
            )));
        }
    }
    if seq == 0 {
        return Err(c.err("empty sequence"));
    }
    let clip = c.node.attr_float("clip").map(f64::from);
    let acts = activations(c, default_acts, dirs)?;
    Ok(Layer { x, w, r, b, seq, batch, hidden, dirs, layout, clip, acts, recurrent: Default::default() })
}

impl Layer {
    /// Whether direction `d` runs backwards in time.
    fn reverse(&self, c: &NodeCtx<'_>, d: usize) -> bool {
        d == 1 || c.attr_str("direction", "forward") == "reverse"
    }

    /// Rows `[lo, lo+n)` of direction `d` of a `[dirs, rows, cols]` weight, as `[n, cols]`.
    fn rows(p: &mut Program, w: &Lazy, d: usize, lo: usize, n: usize) -> Lazy {
        let s = p.slice(w, &[d as i64, lo as i64, 0], &[1, 1, 1], &[1, n, w.shape[2]]);
        p.reshape(&s, &[n, w.shape[2]])
    }

    /// Entries `[lo, lo+n)` of direction `d` of B as `[1, n]`, or `None` without B.
    fn bias(&self, p: &mut Program, d: usize, lo: usize, n: usize) -> Option<Lazy> {
        let b = self.b.as_ref()?;
        let s = p.slice(b, &[d as i64, lo as i64], &[1, 1], &[1, n]);
        Some(s)
    }

    /// An initial state input (`[dirs, batch, hidden]`, batch first in layout 1) for direction `d`,
    /// or zeros.
    fn initial(&self, c: &mut NodeCtx<'_>, i: usize, d: usize) -> Result<Lazy> {
        let (batch, hidden) = (self.batch, self.hidden);
        let Some(h) = c.opt_input(i)? else {
            return Ok(c.p().full(self.x.dtype, &[batch, hidden], 0.0));
        };
        let p = c.p();
        let h = if self.layout { p.permute(&h, &[1, 0, 2]) } else { h };
        if h.shape != [self.dirs, batch, hidden] {
            return Err(c.err(format!("initial state has shape {:?}", h.shape)));
        }
        let s = p.slice(&h, &[d as i64, 0, 0], &[1, 1, 1], &[1, batch, hidden]);
        Ok(p.reshape(&s, &[batch, hidden]))
    }

    /// `X·W[rows]ᵀ + bias` for every time step of direction `d`, realized: `[seq, batch, n]`.
    fn project(&self, c: &mut NodeCtx<'_>, d: usize, lo: usize, n: usize, bias: Option<Lazy>) -> Result<Lazy> {
        let p = c.p();
        let x2 = p.reshape(&self.x, &[self.seq * self.batch, self.x.shape[2]]);
        let wd = Self::rows(p, &self.w, d, lo, n);
        let wt = p.permute(&wd, &[1, 0]);
        let mut y = matmul_lazy(c, &x2, &wt)?;
        if let Some(b) = bias {
            let v = c.broadcast(&[&y, &b])?;
            y = c.p().binary(BinOp::Add, &v[0], &v[1]);
        }
        let name = format!("{}_xw{d}", c.node.name);
        let p = c.p();
        let y = p.realize(&y, BufKind::Scratch, &name);
        Ok(p.reshape(&y, &[self.seq, self.batch, n]))
    }

    /// Columns `[k*hidden, (k+1)*hidden)` of a `[batch, G*hidden]` tensor.
    fn gate(&self, p: &mut Program, g: &Lazy, k: usize) -> Lazy {
        let h = self.hidden;
        p.slice(g, &[0, (k * h) as i64], &[1, 1], &[self.batch, h])
    }

    /// Time step `t` of a projection `[seq, batch, n]` as `[batch, n]`.
    fn step(&self, p: &mut Program, xw: &Lazy, t: usize) -> Lazy {
        let n = xw.shape[2];
        let s = p.slice(xw, &[t as i64, 0, 0], &[1, 1, 1], &[1, self.batch, n]);
        p.reshape(&s, &[self.batch, n])
    }

    /// `act(clip(x))`, for gate pre-activations.
    fn act(&self, p: &mut Program, a: Act, x: &Lazy) -> Lazy {
        let x = match self.clip {
            Some(k) => {
                let lo = with(p, BinOp::Max, x, -k);
                with(p, BinOp::Min, &lo, k)
            }
            None => x.clone(),
        };
        apply(p, a, &x)
    }

    /// `h·R[rows]ᵀ` for direction `d`: `[batch, n]`, from plain float32 buffers (never half
    /// images: the state stays float32 under `--float16`).
    fn recur(&self, c: &mut NodeCtx<'_>, h: &Lazy, d: usize, lo: usize, n: usize) -> Result<Lazy> {
        let cached = self.recurrent.borrow().get(&(d, lo, n)).cloned();
        let rt = match cached {
            Some(rt) => rt,
            None => {
                let p = c.p();
                let rd = Self::rows(p, &self.r, d, lo, n);
                let rt = p.permute(&rd, &[1, 0]);
                // Folded here as the product would fold it (row-major), once for every step.
                let rt = match (p.is_constant(&rt) && rt.numel() <= super::FOLD_LIMIT).then(|| p.fold(&rt)).flatten() {
                    Some(t) => p.constant(t),
                    None => rt,
                };
                self.recurrent.borrow_mut().insert((d, lo, n), rt.clone());
                rt
            }
        };
        matmul_plain(c, h, &rt)
    }

    /// The outputs from per-direction, per-time-step states `[batch, hidden]` (in time order):
    /// `Y` and the final state of each direction (in the layer's layout).
    fn outputs(&self, p: &mut Program, states: &[Vec<Lazy>], finals: &[Lazy]) -> (Lazy, Lazy) {
        let steps: Vec<Lazy> = (0..self.seq)
            .map(|t| {
                let per_dir: Vec<Lazy> = states.iter().map(|s| s[t].clone()).collect();
                stack(p, &per_dir)
            })
            .collect();
        let y = stack(p, &steps);
        let last = stack(p, finals);
        if self.layout {
            (p.permute(&y, &[2, 0, 1, 3]), p.permute(&last, &[1, 0, 2]))
        } else {
            (y, last)
        }
    }
}

/// `[n, ...shape]` with `out[i] = parts[i]` (all of one shape), selected by a balanced tree of
/// comparisons on the new leading coordinate.
fn stack(p: &mut Program, parts: &[Lazy]) -> Lazy {
    let mut shape = vec![parts.len()];
    shape.extend_from_slice(&parts[0].shape);
    let vars = p.ctx.fresh_vars(&shape);
    let exprs: Vec<N> = parts
        .iter()
        .map(|x| {
            let m: HashMap<u32, N> = x.vars.iter().zip(&vars[1..]).map(|(&o, &n)| (o, p.ctx.var(n))).collect();
            substitute(&mut p.ctx, x.expr, &m, None)
        })
        .collect();
    fn pick(p: &mut Program, i: N, exprs: &[N], lo: usize) -> N {
        if exprs.len() == 1 {
            return exprs[0];
        }
        let mid = exprs.len() / 2;
        let cond = p.ctx.lt_i(i, (lo + mid) as i64);
        let a = pick(p, i, &exprs[..mid], lo);
        let b = pick(p, i, &exprs[mid..], lo + mid);
        p.ctx.where_(cond, a, b)
    }
    let i = p.ctx.var(vars[0]);
    let expr = pick(p, i, &exprs, 0);
    Lazy { dtype: parts[0].dtype, shape, vars, expr }
}

/// Realizes a state after step `t` of direction `d`.
fn keep(c: &mut NodeCtx<'_>, x: &Lazy, what: &str, d: usize, t: usize) -> Lazy {
    let name = format!("{}_{what}{d}_{t}", c.node.name);
    c.p().realize(x, BufKind::Scratch, &name)
}

/// The sum of two same-shape tensors, the second optional.
fn add_opt(p: &mut Program, a: &Lazy, b: Option<&Lazy>) -> Lazy {
    match b {
        Some(b) => p.binary(BinOp::Add, a, b),
        None => a.clone(),
    }
}

/// A `[1, n]` row broadcast to `[batch, n]`.
fn rows_of(p: &mut Program, v: &Lazy, batch: usize) -> Lazy {
    p.expand(v, &[batch, v.shape[1]])
}

fn lstm(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let l = layer(c, 4, &["Sigmoid", "Tanh", "Tanh"])?;
    let input_forget = c.attr_int("input_forget", 0) != 0;
    let hs = l.hidden;
    let peep = c.opt_input(7)?;
    if let Some(pp) = &peep {
        if pp.shape != [l.dirs, 3 * hs] {
            return Err(c.err(format!("P has shape {:?}", pp.shape)));
        }
    }
    let (mut states, mut finals_h, mut finals_c) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..l.dirs {
        let [f, g, h] = [l.acts[d][0], l.acts[d][1], l.acts[d][2]];
        let p = c.p();
        let bias = match (l.bias(p, d, 0, 4 * hs), l.bias(p, d, 4 * hs, 4 * hs)) {
            (Some(wb), Some(rb)) => Some(p.binary(BinOp::Add, &wb, &rb)),
            _ => None,
        };
        let xw = l.project(c, d, 0, 4 * hs, bias)?;
        // Peepholes i, o, f as [batch, hidden].
        let peeps: Option<Vec<Lazy>> = peep.as_ref().map(|pp| {
            (0..3)
                .map(|k| {
                    let p = c.p();
                    let s = p.slice(pp, &[d as i64, (k * hs) as i64], &[1, 1], &[1, hs]);
                    rows_of(p, &s, l.batch)
                })
                .collect()
        });
        let mut hcur = l.initial(c, 5, d)?;
        let mut ccur = l.initial(c, 6, d)?;
        let mut ys = vec![None; l.seq];
        let order: Vec<usize> = if l.reverse(c, d) { (0..l.seq).rev().collect() } else { (0..l.seq).collect() };
        for (k, &t) in order.iter().enumerate() {
            let hr = l.recur(c, &hcur, d, 0, 4 * hs)?;
            let p = c.p();
            let xt = l.step(p, &xw, t);
            let gates = p.binary(BinOp::Add, &xt, &hr);
            let gates = keep(c, &gates, "gates", d, k);
            let p = c.p();
            let pre = |p: &mut Program, gi: usize, pi: usize, cell: &Lazy| {
                let x = l.gate(p, &gates, gi);
                let pc = peeps.as_ref().map(|v| p.binary(BinOp::Mul, &v[pi], cell));
                add_opt(p, &x, pc.as_ref())
            };
            let ii = pre(p, 0, 0, &ccur);
            let it = l.act(p, f, &ii);
            // input_forget couples the gates as onnxruntime does: f = 1 - i.
            let ft = if input_forget {
                let one = konst(p, &it, 1.0);
                p.binary(BinOp::Sub, &one, &it)
            } else {
                let fi = pre(p, 2, 2, &ccur);
                l.act(p, f, &fi)
            };
            let gc = l.gate(p, &gates, 3);
            let gt = l.act(p, g, &gc);
            let fc = p.binary(BinOp::Mul, &ft, &ccur);
            let ig = p.binary(BinOp::Mul, &it, &gt);
            let cnew = p.binary(BinOp::Add, &fc, &ig);
            ccur = keep(c, &cnew, "c", d, k);
            let p = c.p();
            let oi = pre(p, 1, 1, &ccur);
            let ot = l.act(p, f, &oi);
            // onnxruntime clips gate inputs only, not the cell state h() reads.
            let hc = apply(p, h, &ccur);
            let hnew = p.binary(BinOp::Mul, &ot, &hc);
            hcur = keep(c, &hnew, "h", d, k);
            ys[t] = Some(hcur.clone());
        }
        states.push(ys.into_iter().map(|y| y.expect("every step ran")).collect());
        finals_h.push(hcur);
        finals_c.push(ccur);
    }
    let p = c.p();
    let (y, yh) = l.outputs(p, &states, &finals_h);
    let yc = stack(p, &finals_c);
    let yc = if l.layout { p.permute(&yc, &[1, 0, 2]) } else { yc };
    Ok(vec![y, yh, yc])
}

fn gru(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let l = layer(c, 3, &["Sigmoid", "Tanh"])?;
    let lbr = c.attr_int("linear_before_reset", 0) != 0;
    let hs = l.hidden;
    let (mut states, mut finals) = (Vec::new(), Vec::new());
    for d in 0..l.dirs {
        let [f, g] = [l.acts[d][0], l.acts[d][1]];
        let p = c.p();
        // z and r take both biases up front; the h gate takes Rb_h inside the reset product when
        // linear_before_reset, outside otherwise.
        let (wb, rb) = (l.bias(p, d, 0, 3 * hs), l.bias(p, d, 3 * hs, 3 * hs));
        let (bias, rbh) = match (wb, rb) {
            (Some(wb), Some(rb)) => {
                let rb_h = p.slice(&rb, &[0, (2 * hs) as i64], &[1, 1], &[1, hs]);
                let zr = p.slice(&rb, &[0, 0], &[1, 1], &[1, 2 * hs]);
                let zero = p.full(rb.dtype, &[1, hs], 0.0);
                let parts = [zr, if lbr { zero } else { rb_h.clone() }];
                let rb2 = super::shape::concat_lazy(c, &parts, 1)?;
                let p = c.p();
                (Some(p.binary(BinOp::Add, &wb, &rb2)), lbr.then_some(rb_h))
            }
            _ => (None, None),
        };
        let xw = l.project(c, d, 0, 3 * hs, bias)?;
        let mut hcur = l.initial(c, 5, d)?;
        let mut ys = vec![None; l.seq];
        let order: Vec<usize> = if l.reverse(c, d) { (0..l.seq).rev().collect() } else { (0..l.seq).collect() };
        for (k, &t) in order.iter().enumerate() {
            // With linear_before_reset one product serves all three gates.
            let hr = l.recur(c, &hcur, d, 0, if lbr { 3 * hs } else { 2 * hs })?;
            let p = c.p();
            let xt = l.step(p, &xw, t);
            let xzr = p.slice(&xt, &[0, 0], &[1, 1], &[l.batch, 2 * hs]);
            let hzr = p.slice(&hr, &[0, 0], &[1, 1], &[l.batch, 2 * hs]);
            let zr = p.binary(BinOp::Add, &xzr, &hzr);
            let zr = keep(c, &zr, "zr", d, k);
            let p = c.p();
            let zi = l.gate(p, &zr, 0);
            let zt = l.act(p, f, &zi);
            let ri = l.gate(p, &zr, 1);
            let rt = l.act(p, f, &ri);
            let xh = l.gate(p, &xt, 2);
            let hh = if lbr {
                let hrh = l.gate(p, &hr, 2);
                let hrh = match &rbh {
                    Some(b) => {
                        let b = rows_of(p, b, l.batch);
                        p.binary(BinOp::Add, &hrh, &b)
                    }
                    None => hrh,
                };
                let rh = p.binary(BinOp::Mul, &rt, &hrh);
                p.binary(BinOp::Add, &xh, &rh)
            } else {
                let rh = p.binary(BinOp::Mul, &rt, &hcur);
                let m = l.recur(c, &rh, d, 2 * hs, hs)?;
                c.p().binary(BinOp::Add, &xh, &m)
            };
            let p = c.p();
            let ht = l.act(p, g, &hh);
            // H = (1 - z)·h̃ + z·H = h̃ + z·(H - h̃)
            let diff = p.binary(BinOp::Sub, &hcur, &ht);
            let zd = p.binary(BinOp::Mul, &zt, &diff);
            let hnew = p.binary(BinOp::Add, &ht, &zd);
            hcur = keep(c, &hnew, "h", d, k);
            ys[t] = Some(hcur.clone());
        }
        states.push(ys.into_iter().map(|y| y.expect("every step ran")).collect());
        finals.push(hcur);
    }
    let (y, yh) = l.outputs(c.p(), &states, &finals);
    Ok(vec![y, yh])
}

fn rnn(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let l = layer(c, 1, &["Tanh"])?;
    let hs = l.hidden;
    let (mut states, mut finals) = (Vec::new(), Vec::new());
    for d in 0..l.dirs {
        let f = l.acts[d][0];
        let p = c.p();
        let bias = match (l.bias(p, d, 0, hs), l.bias(p, d, hs, hs)) {
            (Some(wb), Some(rb)) => Some(p.binary(BinOp::Add, &wb, &rb)),
            _ => None,
        };
        let xw = l.project(c, d, 0, hs, bias)?;
        let mut hcur = l.initial(c, 5, d)?;
        let mut ys = vec![None; l.seq];
        let order: Vec<usize> = if l.reverse(c, d) { (0..l.seq).rev().collect() } else { (0..l.seq).collect() };
        for (k, &t) in order.iter().enumerate() {
            let hr = l.recur(c, &hcur, d, 0, hs)?;
            let p = c.p();
            let xt = l.step(p, &xw, t);
            let pre = p.binary(BinOp::Add, &xt, &hr);
            let hnew = l.act(p, f, &pre);
            hcur = keep(c, &hnew, "h", d, k);
            ys[t] = Some(hcur.clone());
        }
        states.push(ys.into_iter().map(|y| y.expect("every step ran")).collect());
        finals.push(hcur);
    }
    let (y, yh) = l.outputs(c.p(), &states, &finals);
    Ok(vec![y, yh])
}
