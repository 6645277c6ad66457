//! What every renderer asks of a kernel: where each node can be placed (its free loop variables) and
//! the flat index of the output point.

use std::collections::HashMap;

use crate::ir::{Ctx, Op, N};
use crate::lazy::strides;
use crate::program::Kernel;

/// Free variables of every node in `order` (a reduction's own variable is bound, not free), where a
/// node depends on `deps(n)`: its IR children, or what a renderer computes it from instead. `order`
/// lists dependencies first.
pub fn free_vars_by(ctx: &Ctx, order: &[N], deps: impl Fn(N) -> Vec<N>) -> HashMap<N, Vec<u32>> {
    let mut free: HashMap<N, Vec<u32>> = HashMap::new();
    for &n in order {
        let mut vs: Vec<u32> = match ctx.op(n) {
            Op::Var(v) => vec![*v],
            _ => deps(n).iter().flat_map(|c| free[c].clone()).collect(),
        };
        if let Op::Reduce { var, .. } = ctx.op(n) {
            vs.retain(|v| v != var);
        }
        vs.sort_unstable();
        vs.dedup();
        free.insert(n, vs);
    }
    free
}

/// The C-order flat index of the kernel's output point, in the C syntax OpenCL C shares.
pub fn flat_index(k: &Kernel) -> String {
    let st = strides(&k.shape);
    let flat: Vec<String> =
        k.vars.iter().zip(&st).zip(&k.shape).filter(|(_, &d)| d > 1).map(|((v, s), _)| format!("v{v} * {s}")).collect();
    if flat.is_empty() {
        "0".to_string()
    } else {
        flat.join(" + ")
    }
}
