//! Bounds on what a model can make the compiler allocate or compute, so that a hostile or broken
//! model ends in a one-line error instead of exhausting memory or running for hours.
//!
//! - Memory: no value the model computes (a node output, folded or not) and no buffer of the
//!   artifact may exceed [`Limits::max_memory`] bytes, nor may all the weights together. Ops that
//!   build tensors at compile time (`Range`, `ConstantOfShape`, index tables) check their size
//!   before allocating.
//! - Folding: a constant is folded only when evaluating it takes at most [`FOLD_WORK_LIMIT`]
//!   element evaluations (elements times the extents of the reductions inside). Past that, a
//!   constant the model needs at compile time (a shape, an index table) is an error, and any other
//!   is computed at run time like any other value.

use pilot_core::DType;

use crate::ir::{Ctx, Op, N};
use crate::program::{BufKind, Program};

/// The default of [`Limits::max_memory`]: 16 GiB, more than any device pilot targets has.
pub const DEFAULT_MAX_MEMORY: u64 = 16 << 30;
/// Element evaluations constant folding may spend on one value (a few seconds at most).
pub const FOLD_WORK_LIMIT: u64 = 1 << 25;
/// Where the memory limit is set, for error messages.
pub const MEMORY_KNOBS: &str = "--max-memory or PILOT_MAX_MEMORY";

/// The limits of one compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes any one value or buffer, or all the weights together, may take.
    pub max_memory: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_memory: DEFAULT_MAX_MEMORY }
    }
}

/// `bytes` for people: "4096 GiB", "1.50 MiB".
pub fn human(bytes: u64) -> String {
    let units = [("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in units {
        if bytes >= 1 << shift {
            let v = bytes as f64 / (1u64 << shift) as f64;
            return if v.fract() == 0.0 { format!("{v} {unit}") } else { format!("{v:.2} {unit}") };
        }
    }
    format!("{bytes} bytes")
}

pub use pilot_core::bounds::parse_size;

/// The bytes of a `shape` of `dtype`, `None` if that overflows.
pub fn bytes_of(dtype: DType, shape: &[usize]) -> Option<u64> {
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64))
}

impl Limits {
    /// `Err(reason)` when a value of `shape` and `dtype` exceeds the memory limit.
    pub fn check_value(&self, what: &str, dtype: DType, shape: &[usize]) -> Result<(), String> {
        match bytes_of(dtype, shape) {
            Some(b) if b <= self.max_memory => Ok(()),
            Some(b) => Err(format!(
                "{what} of shape {shape:?} needs {}, the limit is {} ({MEMORY_KNOBS})",
                human(b),
                human(self.max_memory)
            )),
            None => Err(format!("{what} of shape {shape:?} has more bytes than a 64-bit size can count")),
        }
    }
}

/// Refuses a lowered program whose memory at run time, as the planner would lay it out (the
/// scratch arena after reuse, plus weights, inputs, outputs, state and images), exceeds the limit.
/// The arena is estimated at 64-byte alignment; targets that align more differ by less than their
/// alignment per buffer.
pub fn check_planned(p: &Program, limits: Limits) -> Result<(), String> {
    let plan = crate::plan::plan(p, 64, 0);
    let arena = plan.arena_bytes as u64;
    let others: u64 = p
        .bufs
        .iter()
        .enumerate()
        .filter(|(i, b)| !(b.kind == BufKind::Scratch && plan.offsets.contains_key(&(*i as u32))))
        .map(|(_, b)| b.nbytes() as u64)
        .sum();
    let total = arena.saturating_add(others);
    if total > limits.max_memory {
        return Err(format!(
            "the model needs {} at run time ({} of scratch after reuse, {} in weights, inputs, outputs and images), the limit is {} ({MEMORY_KNOBS})",
            human(total),
            human(arena),
            human(others),
            human(limits.max_memory)
        ));
    }
    Ok(())
}

/// Element evaluations to fold `root` over `numel` points: `numel` times the work per point, where
/// a reduction costs its extent times its body (saturating). Each node is visited once.
pub fn fold_work(ctx: &Ctx, root: N, numel: usize) -> u64 {
    let order = ctx.toposort(&[root]);
    let mut per_point: std::collections::HashMap<N, u64> = std::collections::HashMap::with_capacity(order.len());
    for n in order {
        let children = ctx.children(n);
        let below = children.iter().map(|c| per_point[c]).max().unwrap_or(1).max(1);
        let w = match ctx.op(n) {
            Op::Reduce { extent, .. } => below.saturating_mul(*extent),
            _ => below,
        };
        per_point.insert(n, w);
    }
    per_point[&root].saturating_mul(numel as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size(" 1.5 k"), Ok(1536));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["", "G", "-1G", "nanG", "12Q", "0", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(human(4 << 40), "4096 GiB");
        assert_eq!(human(3 << 19), "1.50 MiB");
        assert_eq!(human(12), "12 bytes");
    }

    #[test]
    fn values_over_the_limit_are_named() {
        let l = Limits { max_memory: 1 << 30 };
        assert!(l.check_value("x", DType::F32, &[1 << 28]).is_ok());
        let e = l.check_value("output", DType::F32, &[1 << 20, 1 << 20]).unwrap_err();
        assert_eq!(
            e,
            "output of shape [1048576, 1048576] needs 4096 GiB, the limit is 1 GiB (--max-memory or PILOT_MAX_MEMORY)"
        );
        assert!(l.check_value("x", DType::F32, &[usize::MAX, 2]).unwrap_err().contains("64-bit"));
    }

    #[test]
    fn fold_work_counts_reductions() {
        let mut ctx = Ctx::new();
        let v = ctx.fresh_var(1 << 20);
        let body = ctx.var(v);
        let body = ctx.cast(body, DType::F32);
        let r = ctx.reduce(crate::ir::RedOp::Sum, v, 1 << 20, body);
        assert_eq!(fold_work(&ctx, r, 1 << 20), 1 << 40);
        assert_eq!(fold_work(&ctx, body, 10), 10);
    }
}
