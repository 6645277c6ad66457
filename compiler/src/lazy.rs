//! Lazy tensors: a shape, one fresh variable per dimension, and an expression of those variables.
//!
//! Movement ops substitute index expressions for variables (no data moves); elementwise ops combine
//! expressions; reductions bind fresh variables. Nothing is computed until [`Program::realize`] turns
//! a lazy tensor into a kernel writing a buffer — that is where fusion boundaries are drawn.

use std::collections::HashMap;

use pilot_core::DType;

use crate::ir::subst::substitute;
use crate::ir::{interp, BinOp, Const, Op, RedOp, UnOp, N};
use crate::lower::budget;
use crate::program::{BufKind, Kernel, Program};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Lazy {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// `vars[i]` ranges over `0..shape[i]`.
    pub vars: Vec<u32>,
    pub expr: N,
}

impl Lazy {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Operand costs above this count as equal when choosing whose variables an elementwise op keeps.
const BASE_COST_CAP: usize = 64;

/// C-order strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as i64;
    }
    s
}

impl Program {
    /// The C-order flat index of `vars` over `shape`.
    pub fn flat_index(&mut self, vars: &[u32], shape: &[usize]) -> N {
        let mut idx = self.ctx.int(0);
        for ((&v, &d), s) in vars.iter().zip(shape).zip(strides(shape)) {
            if d == 1 {
                continue;
            }
            let var = self.ctx.var(v);
            let term = self.ctx.mul_i(var, s);
            idx = self.ctx.add(idx, term);
        }
        idx
    }

    /// A lazy tensor reading all of buffer `buf` in C order.
    pub fn view_buf(&mut self, buf: u32, shape: &[usize]) -> Lazy {
        let dtype = self.bufs[buf as usize].dtype;
        let vars = self.ctx.fresh_vars(shape);
        let index = self.flat_index(&vars, shape);
        let expr = self.ctx.load(buf, dtype, index, None);
        Lazy { dtype, shape: shape.to_vec(), vars, expr }
    }

    /// A model input.
    pub fn input(&mut self, index: usize, dtype: DType, shape: &[usize]) -> Lazy {
        let buf = self.add_buf(dtype, shape.iter().product(), BufKind::Input(index));
        self.view_buf(buf, shape)
    }

    /// A compile-time constant: single elements become immediates, larger tensors weight buffers.
    pub fn constant(&mut self, t: Tensor) -> Lazy {
        if t.numel() == 1 {
            let v = t.to_f64()[0];
            return self.full(t.dtype, &t.shape, v);
        }
        let shape = t.shape.clone();
        let buf = self.add_buf(t.dtype, t.numel(), BufKind::Weight(t));
        self.view_buf(buf, &shape)
    }

    /// A tensor of `shape` filled with `v`.
    pub fn full(&mut self, dtype: DType, shape: &[usize], v: f64) -> Lazy {
        let vars = self.ctx.fresh_vars(shape);
        let expr = self.ctx.constant(dtype, v);
        Lazy { dtype, shape: shape.to_vec(), vars, expr }
    }

    /// `x` with its variables renamed to fresh ones over `new_shape`, each old variable mapped to
    /// `map(ctx, new_vars)[i]`, and loads guarded by `guard`.
    fn remap(
        &mut self,
        x: &Lazy,
        new_shape: &[usize],
        map: impl FnOnce(&mut Program, &[u32]) -> (Vec<N>, Option<N>),
    ) -> (Lazy, Option<N>) {
        let vars = self.ctx.fresh_vars(new_shape);
        let (targets, guard) = map(self, &vars);
        let m: HashMap<u32, N> = x.vars.iter().copied().zip(targets).collect();
        let expr = substitute(&mut self.ctx, x.expr, &m, guard);
        (Lazy { dtype: x.dtype, shape: new_shape.to_vec(), vars, expr }, guard)
    }

    pub fn reshape(&mut self, x: &Lazy, shape: &[usize]) -> Lazy {
        debug_assert_eq!(x.numel(), shape.iter().product::<usize>(), "reshape keeps the element count");
        if x.shape == shape {
            return x.clone();
        }
        let old_shape = x.shape.clone();
        self.remap(x, shape, |p, vars| {
            let flat = p.flat_index(vars, shape);
            let old = old_shape
                .iter()
                .zip(strides(&old_shape))
                .map(|(&d, s)| {
                    if d == 1 {
                        return p.ctx.int(0);
                    }
                    let q = p.ctx.div_i(flat, s);
                    p.ctx.rem_i(q, d as i64)
                })
                .collect();
            (old, None)
        })
        .0
    }

    /// Output dimension `j` is input dimension `perm[j]`.
    pub fn permute(&mut self, x: &Lazy, perm: &[usize]) -> Lazy {
        let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
        self.remap(x, &shape, |p, vars| {
            let mut old = vec![N(0); perm.len()];
            for (j, &src) in perm.iter().enumerate() {
                old[src] = p.ctx.var(vars[j]);
            }
            (old, None)
        })
        .0
    }

    /// Broadcasts size-1 dimensions of `x` (same rank) to `shape`. A value containing a reduction is
    /// realized first: broadcasting it lazily would recompute the reduction for every copy.
    pub fn expand(&mut self, x: &Lazy, shape: &[usize]) -> Lazy {
        if x.shape == shape {
            return x.clone();
        }
        let x = &if shape.iter().product::<usize>() > x.numel() && self.ctx.has_reduce(x.expr) {
            self.realize(x, BufKind::Scratch, "expanded")
        } else {
            x.clone()
        };
        let old_shape = x.shape.clone();
        self.remap(x, shape, |p, vars| {
            let old = old_shape
                .iter()
                .zip(shape)
                .zip(vars)
                .map(|((&o, &n), &v)| if o == 1 && n != 1 { p.ctx.int(0) } else { p.ctx.var(v) })
                .collect();
            (old, None)
        })
        .0
    }

    /// Pads dimension `i` with `lo[i]` elements before and `hi[i]` after (negative values crop), the
    /// new elements being `value`.
    pub fn pad(&mut self, x: &Lazy, lo: &[i64], hi: &[i64], value: f64) -> Lazy {
        let shape: Vec<usize> = (0..x.rank()).map(|i| (x.shape[i] as i64 + lo[i] + hi[i]).max(0) as usize).collect();
        let old_shape = x.shape.clone();
        let (mut y, guard) = self.remap(x, &shape, |p, vars| {
            let mut guard: Option<N> = None;
            let mut old = Vec::new();
            for i in 0..old_shape.len() {
                let v = p.ctx.var(vars[i]);
                old.push(p.ctx.add_i(v, -lo[i]));
                if lo[i] > 0 || hi[i] > 0 {
                    let ge = p.ctx.ge_i(v, lo[i].max(0));
                    let lt = p.ctx.lt_i(v, lo[i] + old_shape[i] as i64);
                    let both = p.ctx.and(ge, lt);
                    guard = Some(match guard {
                        Some(g) => p.ctx.and(g, both),
                        None => both,
                    });
                }
            }
            (old, guard)
        });
        if let Some(g) = guard {
            let fill = self.ctx.constant(y.dtype, value);
            y.expr = self.ctx.where_(g, y.expr, fill);
        }
        y
    }

    /// Elements `start[i] + k*step[i]` for `k` in `0..len[i]` of every dimension.
    pub fn slice(&mut self, x: &Lazy, start: &[i64], step: &[i64], len: &[usize]) -> Lazy {
        self.remap(x, len, |p, vars| {
            let old = (0..vars.len())
                .map(|i| {
                    let v = p.ctx.var(vars[i]);
                    let scaled = p.ctx.mul_i(v, step[i]);
                    p.ctx.add_i(scaled, start[i])
                })
                .collect();
            (old, None)
        })
        .0
    }

    pub fn unary(&mut self, op: UnOp, x: &Lazy) -> Lazy {
        let expr = self.ctx.unary(op, x.expr);
        Lazy { dtype: self.ctx.dtype(expr), expr, ..x.clone() }
    }

    pub fn cast(&mut self, x: &Lazy, dtype: DType) -> Lazy {
        let expr = self.ctx.cast(x.expr, dtype);
        Lazy { dtype, expr, ..x.clone() }
    }

    /// `b`'s expression over `a`'s variables (shapes must be equal).
    fn align(&mut self, a: &Lazy, b: &Lazy) -> N {
        debug_assert_eq!(a.shape, b.shape, "elementwise operands are broadcast first");
        if a.vars == b.vars {
            return b.expr;
        }
        let m: HashMap<u32, N> = b.vars.iter().zip(&a.vars).map(|(&bv, &av)| (bv, self.ctx.var(av))).collect();
        substitute(&mut self.ctx, b.expr, &m, None)
    }

    /// The operand whose variables the result keeps: the most expensive one, so that the others
    /// (constants, plain loads) are the ones substituted.
    fn base<'a>(&self, xs: &[&'a Lazy]) -> &'a Lazy {
        // Costs are capped: past the cap any operand is heavy enough, and an exact count would make
        // a long fused chain quadratic.
        xs.iter()
            .copied()
            .max_by_key(|x| (self.ctx.has_reduce(x.expr), self.ctx.cost_capped(x.expr, BASE_COST_CAP)))
            .expect("operands")
    }

    /// `a op b` elementwise; shapes must match (see [`Program::broadcast`]).
    pub fn binary(&mut self, op: BinOp, a: &Lazy, b: &Lazy) -> Lazy {
        let base = self.base(&[a, b]).clone();
        let ae = self.align(&base, a);
        let be = self.align(&base, b);
        let expr = self.ctx.binary(op, ae, be);
        Lazy { dtype: self.ctx.dtype(expr), expr, ..base }
    }

    pub fn where_(&mut self, c: &Lazy, a: &Lazy, b: &Lazy) -> Lazy {
        let base = self.base(&[c, a, b]).clone();
        let ce = self.align(&base, c);
        let ae = self.align(&base, a);
        let be = self.align(&base, b);
        let expr = self.ctx.where_(ce, ae, be);
        Lazy { dtype: a.dtype, expr, ..base }
    }

    /// Numpy broadcasting of several tensors to their common shape.
    pub fn broadcast(&mut self, xs: &[&Lazy]) -> Option<Vec<Lazy>> {
        let rank = xs.iter().map(|x| x.rank()).max()?;
        let mut shape = vec![1usize; rank];
        for x in xs {
            for (i, &d) in x.shape.iter().enumerate() {
                let s = &mut shape[rank - x.rank() + i];
                if *s == 1 {
                    *s = d;
                } else if d != 1 && d != *s {
                    return None;
                }
            }
        }
        Some(
            xs.iter()
                .map(|x| {
                    let mut full = vec![1usize; rank - x.rank()];
                    full.extend_from_slice(&x.shape);
                    let r = self.reshape(x, &full);
                    self.expand(&r, &shape)
                })
                .collect(),
        )
    }

    /// Reduces `axes` of `x` with `op`; reduced dimensions stay as size 1.
    ///
    /// Where `x` is a stored buffer and `axes` are its innermost ones, they are reduced as one row
    /// (a global pooling's H·W elements): the row vectorizes across its lanes as a whole, where H
    /// rows of W would each be folded across their lanes on their own (EfficientNet's squeeze-excite
    /// poolings: 0.73 → 0.30 ms of 13.4 at one thread on a Zen 4). The order of the sum changes.
    pub fn reduce(&mut self, op: RedOp, x: &Lazy, axes: &[usize]) -> Lazy {
        let (rank, k) = (x.rank(), axes.len());
        let trailing = (0..k).all(|i| axes.contains(&(rank - k + i)));
        if let Some(buf) = self.is_buffer_view(x).filter(|_| k > 1 && trailing) {
            let outer = &x.shape[..rank - k];
            let flat = self.view_buf(buf, &[outer, &[x.shape[rank - k..].iter().product()]].concat());
            let row = self.reduce(op, &flat, &[rank - k]);
            let shape = [outer, &vec![1; k][..]].concat();
            return self
                .remap(&row, &shape, |p, vars| {
                    let mut kept: Vec<N> = vars[..rank - k].iter().map(|&v| p.ctx.var(v)).collect();
                    kept.push(p.ctx.int(0));
                    (kept, None)
                })
                .0;
        }
        let shape: Vec<usize> = (0..x.rank()).map(|i| if axes.contains(&i) { 1 } else { x.shape[i] }).collect();
        let mut rvars = Vec::new();
        let old_shape = x.shape.clone();
        let (mut y, _) = self.remap(x, &shape, |p, vars| {
            let old = (0..old_shape.len())
                .map(|i| {
                    if axes.contains(&i) {
                        let r = p.ctx.fresh_var(old_shape[i] as u64);
                        rvars.push((r, old_shape[i] as u64));
                        p.ctx.var(r)
                    } else {
                        p.ctx.var(vars[i])
                    }
                })
                .collect();
            (old, None)
        });
        for (r, extent) in rvars.into_iter().rev() {
            y.expr = self.ctx.reduce(op, r, extent, y.expr);
        }
        y
    }

    /// Computes `x` into a new buffer with a kernel and returns a plain view of that buffer.
    pub fn realize(&mut self, x: &Lazy, kind: BufKind, name: &str) -> Lazy {
        #[cfg(debug_assertions)]
        if let Err(e) = crate::ir::validate(&self.ctx, &[x.expr]) {
            panic!("IR invariant broken while realizing `{name}`: {e}");
        }
        let buf = self.add_buf(x.dtype, x.numel(), kind);
        self.kernels.push(Kernel {
            name: format!("k{}_{}", self.kernels.len(), sanitize(name)),
            out: buf,
            vars: x.vars.clone(),
            shape: x.shape.clone(),
            expr: x.expr,
        });
        self.view_buf(buf, &x.shape)
    }

    /// Computes `x` into an image of `height` rows of `width` RGBA pixels (`x.numel()` must be
    /// `height * width * 4`, in the image's linear order) and returns a view of it shaped
    /// `[height, width, 4]`. A constant `x` is folded into an image weight.
    pub fn realize_image(&mut self, x: &Lazy, height: usize, width: usize, name: &str) -> Lazy {
        debug_assert_eq!(x.numel(), height * width * 4, "an image holds its pixels exactly");
        let shape = [height, width, 4];
        let x = self.reshape(x, &shape);
        let image = Some(crate::program::Image { width, height });
        if let Some(t) = self.fold(&x) {
            let buf = self.add_buf(x.dtype, x.numel(), BufKind::Weight(t));
            self.bufs[buf as usize].image = image;
            return self.view_buf(buf, &shape);
        }
        let view = self.realize(&x, BufKind::Scratch, name);
        let buf = self.kernels.last().expect("just realized").out;
        self.bufs[buf as usize].image = image;
        view
    }

    /// The buffer `x` is a plain C-order view of, if it is one (realizing it again would only copy).
    pub fn is_buffer_view(&mut self, x: &Lazy) -> Option<u32> {
        let Op::Load { buf, index, valid: None } = *self.ctx.op(x.expr) else {
            return None;
        };
        if self.bufs[buf as usize].numel != x.numel() {
            return None;
        }
        (self.flat_index(&x.vars, &x.shape) == index).then_some(buf)
    }

    /// Whether `x` depends only on compile-time constants. Memoized per node, so that asking after
    /// every lowered node costs O(new nodes), not O(expression): a long fused chain stays linear.
    pub fn is_constant(&self, x: &Lazy) -> bool {
        let mut memo = self.constant_memo.lock().unwrap_or_else(|p| p.into_inner());
        let mut stack = vec![(x.expr, false)];
        while let Some((n, children_done)) = stack.pop() {
            if memo.contains_key(&n) {
                continue;
            }
            let children = self.ctx.children(n);
            if children_done {
                let own = match self.ctx.op(n) {
                    Op::Load { buf, .. } => matches!(self.bufs[*buf as usize].kind, BufKind::Weight(_)),
                    _ => true,
                };
                let all = own && children.iter().all(|c| memo.get(c).copied().unwrap_or(false));
                memo.insert(n, all);
            } else {
                stack.push((n, true));
                stack.extend(children.into_iter().filter(|c| !memo.contains_key(c)).map(|c| (c, false)));
            }
        }
        memo.get(&x.expr).copied().unwrap_or(false)
    }

    /// Evaluates a constant lazy tensor at compile time; `None` if it reads run-time data or would
    /// take more than [`budget::FOLD_WORK_LIMIT`] element evaluations (see [`budget::fold_work`]).
    pub fn fold(&self, x: &Lazy) -> Option<Tensor> {
        if !self.is_constant(x) {
            return None;
        }
        let n = x.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        if budget::fold_work(&self.ctx, x.expr, n) > budget::FOLD_WORK_LIMIT {
            return None;
        }
        let st = strides(&x.shape);
        let mut env = HashMap::new();
        // Fast path for pure movement (a transposed or sliced weight): only the index is
        // interpreted, element bytes are copied.
        if let Op::Load { buf, index, valid: None } = *self.ctx.op(x.expr) {
            if let BufKind::Weight(t) = &self.bufs[buf as usize].kind {
                let sz = t.dtype.size();
                let mut data = Vec::with_capacity(n * sz);
                let no_loads = |_: u32, _: i64| -> Option<Const> { None };
                for flat in 0..n {
                    for (i, &v) in x.vars.iter().enumerate() {
                        env.insert(v, (flat as i64 / st[i]) % x.shape[i] as i64);
                    }
                    let i = interp::eval(&self.ctx, index, &mut env, &no_loads)?.as_i64();
                    let i = usize::try_from(i).ok().filter(|&i| i < t.numel())?;
                    data.extend_from_slice(&t.data[i * sz..(i + 1) * sz]);
                }
                return Some(Tensor { dtype: t.dtype, shape: x.shape.clone(), data });
            }
        }
        let loader = |buf: u32, i: i64| -> Option<Const> {
            let BufKind::Weight(t) = &self.bufs[buf as usize].kind else {
                return None;
            };
            t.element(usize::try_from(i).ok()?)
        };
        let mut values = Vec::with_capacity(n);
        for flat in 0..n {
            for (i, &v) in x.vars.iter().enumerate() {
                env.insert(v, (flat as i64 / st[i]) % x.shape[i] as i64);
            }
            values.push(interp::eval(&self.ctx, x.expr, &mut env, &loader)?);
        }
        let mut t = Tensor { dtype: x.dtype, shape: x.shape.clone(), data: Vec::with_capacity(n * x.dtype.size()) };
        for v in values {
            let one = match v {
                Const::Int(i) if !x.dtype.is_float() => int_bytes(x.dtype, i),
                c => Tensor::from_f64(x.dtype, vec![1], &[c.as_f64()]).data,
            };
            t.data.extend_from_slice(&one);
        }
        Some(t)
    }
}

fn int_bytes(dtype: DType, i: i64) -> Vec<u8> {
    i.to_le_bytes()[..dtype.size()].to_vec()
}

/// Keeps `[A-Za-z0-9_]`, for kernel names that are C identifiers.
pub fn sanitize(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
    s
}

#[cfg(test)]
#[path = "lazy_tests.rs"]
mod tests;
