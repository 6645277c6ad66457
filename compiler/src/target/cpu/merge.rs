//! Merging of adjacent output dimensions that every load walks as one, and splitting of a dimension
//! that the loads only divide.
//!
//! A 1×1 convolution over `[C, H, W]`, a bias add or an activation reads each input at
//! `… + y·W·s + x·s`: the rows of the output are contiguous in every buffer, so the kernel may iterate
//! one dimension of `H·W` points instead of `H` rows of `W`. The renderers then see a long inner
//! dimension (whole register tiles instead of a short row with a shifted last tile, and fewer loop
//! heads). Dimensions merge only where every use of their variables is such an index: a comparison,
//! a division or a value computed from a coordinate keeps them apart.

use std::collections::{HashMap, HashSet};

use crate::ir::subst::substitute;
use crate::ir::{BinOp, Ctx, Op, N};
use crate::program::Kernel;

use super::render::free_vars;
use super::tile::coefficient;

/// Splits the innermost output dimension of `k` while the loads divide its variable, `v` of extent
/// `E` into `[E/d, d]` (`v = q·d + r`), when that leaves fewer divisions and remainders of loop
/// variables and the new innermost extent `d` is at least `min_inner`. (Outer dimensions stay whole:
/// a convolution's output pixels flattened into one dimension are blocked into replicas by 4 where
/// a row of 14 would not be; a transposed convolution's output row interleaving two phases, `x / 2`
/// and `x % 2`, stays one row of full vectors rather than rows of 2.)
///
/// A matrix product whose output a Transpose and Reshape merge into a wider row (attention's
/// `[heads, seq, size]` written as `[seq, heads·size]`) reads its operands at `(v / size)·… + v % size`:
/// with `v` split, the product's inner dimension is `r`, contiguous in both, and a register tile
/// takes it. The output keeps its layout (row-major over `E` is row-major over `[E/d, d]`).
/// Divisions inside the index of a weight (`is_weight`) do not count: packed weights are laid out
/// in panels (`n / P`, `n % P`) that the register tiles read as they are.
pub fn split_dims(ctx: &mut Ctx, k: &mut Kernel, is_weight: &dyn Fn(u32) -> bool, min_inner: usize) {
    while let Some(i) = k.vars.len().checked_sub(1) {
        let (v, extent) = (k.vars[i], k.shape[i] as i64);
        let before = divisions(ctx, k.expr, is_weight);
        let mut divisors: Vec<i64> = before
            .iter()
            .filter(|d| d.dividend.contains(&v))
            .map(|d| d.divisor)
            .filter(|&d| d >= min_inner as i64 && d < extent && extent % d == 0)
            .collect();
        divisors.sort_unstable();
        divisors.dedup();
        let best = divisors
            .into_iter()
            .map(|d| {
                let (q, r) = (ctx.fresh_var((extent / d) as u64), ctx.fresh_var(d as u64));
                let (qn, rn) = (ctx.var(q), ctx.var(r));
                let qd = ctx.mul_i(qn, d);
                let at = ctx.add(qd, rn);
                let expr = substitute(ctx, k.expr, &HashMap::from([(v, at)]), None);
                (divisions(ctx, expr, is_weight).len(), d, q, r, expr)
            })
            .min_by_key(|&(n, d, ..)| (n, std::cmp::Reverse(d)));
        match best {
            Some((n, d, q, r, expr)) if n < before.len() => {
                k.expr = expr;
                k.vars.splice(i..=i, [q, r]);
                k.shape.splice(i..=i, [(extent / d) as usize, d as usize]);
            }
            _ => return,
        }
    }
}

/// An integer division or remainder by a constant whose dividend depends on loop variables.
struct Division {
    divisor: i64,
    dividend: Vec<u32>,
}

/// The divisions under `root`, except those only inside the index of a weight.
fn divisions(ctx: &Ctx, root: N, is_weight: &dyn Fn(u32) -> bool) -> Vec<Division> {
    let order = ctx.toposort(&[root]);
    let free = free_vars(ctx, &order);
    let mut seen: HashSet<N> = HashSet::new();
    let mut stack = vec![root];
    let mut out = Vec::new();
    while let Some(n) = stack.pop() {
        if free[&n].is_empty() || !seen.insert(n) {
            continue;
        }
        match *ctx.op(n) {
            Op::Load { buf, valid, .. } if is_weight(buf) => stack.extend(valid),
            Op::Binary(BinOp::Div | BinOp::Rem, a, b) if !ctx.dtype(n).is_float() => {
                if let Some(c) = ctx.const_value(b) {
                    out.push(Division { divisor: c.as_i64(), dividend: free[&a].clone() });
                }
                stack.extend([a, b]);
            }
            _ => stack.extend(ctx.children(n)),
        }
    }
    out
}

/// Merges adjacent dimensions of `k` pairwise, from the inside out, wherever [`mergeable`] allows
/// (outer pairs too: a product computed channels innermost over `[h, w]` rows gets `h·w` rows that
/// register tiles block, where rows of 7 would leave them few).
pub fn merge_dims(ctx: &mut Ctx, k: &mut Kernel) {
    let mut i = k.vars.len().saturating_sub(1);
    while i >= 1 {
        let (vy, vx, h, w) = (k.vars[i - 1], k.vars[i], k.shape[i - 1], k.shape[i]);
        if h <= 1 || w <= 1 || !mergeable(ctx, k.expr, vy, vx, w as i64) {
            i -= 1;
            continue;
        }
        let z = ctx.fresh_var((h * w) as u64);
        let zero = ctx.int(0);
        let zv = ctx.var(z);
        k.expr = substitute(ctx, k.expr, &HashMap::from([(vy, zero), (vx, zv)]), None);
        k.vars.splice(i - 1..=i, [z]);
        k.shape.splice(i - 1..=i, [h * w]);
        i = (i - 1).min(k.vars.len() - 1);
    }
}

/// Whether `y` (outer) and `x` (inner, extent `w`) appear in `root` only inside load indices that
/// step by `w` times as much along `y` as along `x`.
fn mergeable(ctx: &Ctx, root: N, y: u32, x: u32, w: i64) -> bool {
    let order = ctx.toposort(&[root]);
    let free = free_vars(ctx, &order);
    // Nodes that carry a coordinate itself (not a value loaded at it).
    let mut coordinate: HashSet<N> = HashSet::new();
    for &n in &order {
        let carries = match ctx.op(n) {
            Op::Var(v) => *v == y || *v == x,
            Op::Load { index, valid, .. } => {
                if valid.is_some_and(|v| coordinate.contains(&v)) {
                    return false;
                }
                if coordinate.contains(index) {
                    let (cy, cx) = (coefficient(ctx, &free, *index, y), coefficient(ctx, &free, *index, x));
                    if !matches!((cy, cx), (Some(cy), Some(cx)) if cy == w * cx) {
                        return false;
                    }
                }
                false
            }
            _ => ctx.children(n).iter().any(|c| coordinate.contains(c)),
        };
        if carries {
            let index_arithmetic = match ctx.op(n) {
                Op::Var(_) => true,
                Op::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, _, _) => !ctx.dtype(n).is_float(),
                Op::Cast(c) => !ctx.dtype(n).is_float() && !ctx.dtype(*c).is_float(),
                _ => false,
            };
            if !index_arithmetic {
                return false;
            }
            coordinate.insert(n);
        }
    }
    !coordinate.contains(&root)
}
