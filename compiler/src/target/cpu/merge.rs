//! Merging of adjacent output dimensions that every load walks as one.
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

/// Merges `k`'s innermost dimensions pairwise, from the inside out, while [`mergeable`] allows.
pub fn merge_dims(ctx: &mut Ctx, k: &mut Kernel) {
    while k.vars.len() >= 2 {
        let i = k.vars.len() - 1;
        let (vy, vx, h, w) = (k.vars[i - 1], k.vars[i], k.shape[i - 1], k.shape[i]);
        if h <= 1 || w <= 1 || !mergeable(ctx, k.expr, vy, vx, w as i64) {
            return;
        }
        let z = ctx.fresh_var((h * w) as u64);
        let zero = ctx.int(0);
        let zv = ctx.var(z);
        k.expr = substitute(ctx, k.expr, &HashMap::from([(vy, zero), (vx, zv)]), None);
        k.vars.truncate(i - 1);
        k.vars.push(z);
        k.shape.truncate(i - 1);
        k.shape.push(h * w);
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
