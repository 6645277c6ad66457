//! Reductions whose output is a transposed view: computed in the order their loads walk, then
//! transposed by a copy.
//!
//! A convolution followed by a Transpose to channels-last (ConvNeXt's depthwise convolution before
//! its LayerNorm, every tf2onnx export) is one fused kernel whose innermost output dimension is the
//! channel: its input is read at a stride of a whole plane along it, so neither a vector nor a
//! register tile runs, and each output sums its window in scalar. Computed into a scratch buffer in
//! the order where the input's row is innermost (a plain convolution) and then copied transposed,
//! the sums run on register tiles; the copy moves each output once more. The same holds for a
//! product over channels-last rows transposed back to channels-first (ConvNeXt's second pointwise
//! product before its residual add): written channels-first, it gathers its row operand.

use pilot_core::DType;

use crate::ir::{Ctx, Op, N};
use crate::program::{BufKind, Kernel, Program};

use super::render::free_vars;
use super::tile::{coefficient, runs_of};

/// Floating-point operations per output below which a kernel keeps its order: the copy would cost
/// as much as the slow order loses.
pub const MIN_FLOPS_PER_OUTPUT: u64 = 16;

/// Replaces each kernel of `p` that [`natural_order`] reorders by two: the kernel with its
/// dimensions reordered, writing a new scratch buffer, and a copy of that buffer into the
/// original output in the original order.
pub(super) fn reorder_transposed_outputs(p: &mut Program, lanes: usize) {
    let kernels = std::mem::take(&mut p.kernels);
    for k in kernels {
        let Some(perm) = natural_order(p, &k, lanes) else {
            p.kernels.push(k);
            continue;
        };
        let dtype = p.bufs[k.out as usize].dtype;
        let numel = p.bufs[k.out as usize].numel;
        let scratch = p.add_buf(dtype, numel, BufKind::Scratch);
        let computed = Kernel {
            name: k.name.clone(),
            out: scratch,
            vars: perm.iter().map(|&i| k.vars[i]).collect(),
            shape: perm.iter().map(|&i| k.shape[i]).collect(),
            expr: k.expr,
        };
        let copy = transposed_copy(&mut p.ctx, &k, &perm, scratch, dtype);
        p.kernels.push(computed);
        p.kernels.push(copy);
    }
}

/// `out[v] = scratch[v permuted by perm]` over `k`'s output.
fn transposed_copy(ctx: &mut Ctx, k: &Kernel, perm: &[usize], scratch: u32, dtype: DType) -> Kernel {
    let vars = ctx.fresh_vars(&k.shape);
    let mut index = ctx.int(0);
    let mut stride = 1i64;
    for &i in perm.iter().rev() {
        let v = ctx.var(vars[i]);
        let term = ctx.mul_i(v, stride);
        index = ctx.add(index, term);
        stride *= k.shape[i] as i64;
    }
    let expr = ctx.load(scratch, dtype, index, None);
    Kernel { name: format!("{}_transposed", k.name), out: k.out, vars, shape: k.shape.clone(), expr }
}

/// The order of `k`'s dimensions to compute it in (a permutation, innermost last), or `None` to
/// keep it. A float reduction worth [`MIN_FLOPS_PER_OUTPUT`] per output is reordered where its
/// summed operands (the loads under its reductions) vary along its innermost dimension, none of them
/// as a register tile reads (steps of 1 or 2, or of 1 within each aligned vector: a weight packed
/// in panels). The new innermost dimension is the innermost one that every operand varying along it
/// reads that way with steps of 1 (even of 7 values: the tiles shift their last vector back; at
/// least `2 · lanes` where replicas could share the old one's gathered operands); the rest keep
/// their order.
pub(super) fn natural_order(p: &Program, k: &Kernel, lanes: usize) -> Option<Vec<usize>> {
    let ctx = &p.ctx;
    let inner = k.vars.len().checked_sub(1)?;
    let outputs: u64 = k.shape.iter().map(|&d| d as u64).product();
    if !ctx.has_reduce(k.expr) || !ctx.dtype(k.expr).is_float() || k.shape[inner] < 2 {
        return None;
    }
    if p.kernel_flops(k) < MIN_FLOPS_PER_OUTPUT * outputs {
        return None;
    }
    let order = ctx.toposort(&[k.expr]);
    let free = free_vars(ctx, &order);
    let bodies: Vec<N> = order
        .iter()
        .filter_map(|&n| match ctx.op(n) {
            Op::Reduce { body, .. } => Some(*body),
            _ => None,
        })
        .collect();
    let operands: Vec<N> = ctx
        .toposort(&bodies)
        .into_iter()
        .filter_map(|n| match ctx.op(n) {
            Op::Load { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    // The operands whose index depends on `var`.
    let varying = |var: u32| -> Vec<N> { operands.iter().copied().filter(|g| free[g].contains(&var)).collect() };
    let gathered = varying(k.vars[inner]);
    let tile_read = |g: N| {
        matches!(coefficient(ctx, &free, g, k.vars[inner]), Some(1 | 2))
            || runs_of(ctx, &free, g, k.vars[inner], lanes, k.shape[inner])
    };
    if gathered.is_empty() || operands.iter().any(|&g| tile_read(g)) {
        return None;
    }
    // An outer dimension that no operand varying along the innermost one depends on: register
    // tiles replicated along it share those operands' gathered rows (a matrix product's output
    // channels sharing one gathered row of its left operand). Gathering still costs a scalar load
    // and store per element and a vector load that cannot be forwarded from them: 39 GFLOP/s for
    // ConvNeXt's 192→48 product written channels-first, 2.4× that in operand order plus the copy.
    // The new innermost dimension must then fill two vectors, so the tiles it feeds stay wide.
    let shared = (0..inner).any(|i| k.shape[i] > 1 && gathered.iter().all(|g| !free[g].contains(&k.vars[i])));
    let min_extent = if shared { 2 * lanes } else { 2 };
    // Steps of 1, or of 1 within each aligned vector (a weight packed in panels).
    let contiguous = |i: usize| {
        let (var, extent) = (k.vars[i], k.shape[i]);
        let reads = varying(var);
        !reads.is_empty()
            && reads
                .iter()
                .all(|&g| coefficient(ctx, &free, g, var) == Some(1) || runs_of(ctx, &free, g, var, lanes, extent))
    };
    let best = (0..inner).rev().find(|&i| k.shape[i] >= min_extent && contiguous(i))?;
    let mut perm: Vec<usize> = (0..k.vars.len()).filter(|&i| i != best).collect();
    perm.push(best);
    Some(perm)
}
