//! The reduction-outside loop order for kernels like convolutions, matrix products and pooling:
//!
//! ```text
//! for outer output vars:            acc[L] = identity
//!   for r1: for r2: ... for rk:     (weights and other values not depending on the inner var)
//!     for inner in 0..L:            acc[inner] op= body(inner, r1..rk)
//!   for inner in 0..L:              out[...] = f(acc[inner])
//! ```
//!
//! The innermost loop runs over the last output dimension, so loads along it are contiguous (or a
//! fixed stride) and values that do not depend on it — a convolution's weight, a matrix's row — are
//! loaded once per reduction step: the loop clang vectorizes. Applies when every top-level reduction
//! of the kernel is a perfectly nested chain of one operator (Σ_ci Σ_ky Σ_kx ...), each with its own
//! accumulator array, and the last output dimension with extent > 1 has at most [`MAX_INNER`] points.

use std::collections::HashSet;
use std::fmt::Write;

use super::c::{ctype, flat_index, free_vars, header, CKernel, Renderer};
use crate::ir::{Op, RedOp, N};
use crate::program::{Kernel, Program};

/// One top-level reduction: a perfectly nested chain of one operator down to its body.
struct Chain {
    top: N,
    op: RedOp,
    links: Vec<N>,
    body: N,
}

/// Largest inner extent kept in an accumulator array on the stack.
pub const MAX_INNER: usize = 2048;

pub fn render(p: &Program, k: &Kernel) -> Option<CKernel> {
    let ctx = &p.ctx;
    let order = ctx.toposort(&[k.expr]);
    // Every reduction reachable from the root outside of reduction bodies, each a perfect chain.
    let mut tops: Vec<N> = Vec::new();
    let mut stack = vec![k.expr];
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if matches!(ctx.op(n), Op::Reduce { .. }) {
            tops.push(n);
            continue;
        }
        stack.extend(ctx.children(n));
    }
    if tops.is_empty() {
        return None;
    }
    tops.sort_unstable();
    let mut chains = Vec::new();
    for &top in &tops {
        let Op::Reduce { op, .. } = *ctx.op(top) else { return None };
        let mut chain = vec![top];
        let mut body = top;
        while let Op::Reduce { op: o, body: b, .. } = *ctx.op(body) {
            if o != op {
                return None;
            }
            body = b;
            if matches!(ctx.op(b), Op::Reduce { .. }) {
                chain.push(b);
            }
        }
        if ctx.has_reduce(body) {
            return None;
        }
        chains.push(Chain { top, op, links: chain, body });
    }
    let inner_pos = k.shape.iter().rposition(|&d| d > 1)?;
    let inner_extent = k.shape[inner_pos];
    if inner_extent > MAX_INNER {
        return None;
    }
    let vl = k.vars[inner_pos];
    let all_links: HashSet<N> = chains.iter().flat_map(|c| c.links.iter().copied()).collect();
    let rset: HashSet<u32> = chains
        .iter()
        .flat_map(|c| c.links.iter())
        .map(|&r| match *ctx.op(r) {
            Op::Reduce { var, .. } => var,
            _ => unreachable!("chains hold reductions"),
        })
        .collect();
    let free = free_vars(ctx, &order);
    // Nodes needed in the epilogue: reachable from the root without entering a reduction.
    let mut p2 = HashSet::new();
    let mut stack = vec![k.expr];
    while let Some(n) = stack.pop() {
        if tops.contains(&n) || !p2.insert(n) {
            continue;
        }
        stack.extend(ctx.children(n));
    }
    let outer: Vec<u32> = k.vars.iter().copied().filter(|&v| v != vl).collect();
    let depth_outer = |v: u32| outer.iter().position(|&o| o == v);

    let args = {
        let mut a = vec![k.out];
        a.extend(p.kernel_inputs(k));
        a
    };
    let mut r =
        Renderer { ctx, names: Default::default(), out: String::new(), by_scope: Default::default(), args: &args };
    header(p, &k.name, &args, &mut r.out);
    let skip = |n: N| matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) || all_links.contains(&n);
    let emit_where = |r: &mut Renderer<'_>, pred: &dyn Fn(N) -> bool, indent: usize| {
        for &n in &order {
            if !skip(n) && pred(n) {
                r.emit(n, indent);
            }
        }
    };
    let uses = |n: N, v: u32| free[&n].contains(&v);
    let uses_r = |n: N| free[&n].iter().any(|v| rset.contains(v));
    let outer_only = |n: N| !uses(n, vl) && !uses_r(n);

    // Outer loops (all output vars but the inner one), values hoisted to the loop they depend on.
    let split = k.shape.iter().position(|&d| d > 1).expect("inner_pos exists");
    emit_where(&mut r, &|n| outer_only(n) && free[&n].is_empty(), 1);
    let mut indent = 1;
    for (i, (&v, &extent)) in k.vars.iter().zip(&k.shape).enumerate() {
        if v == vl {
            continue;
        }
        let pad = "  ".repeat(indent);
        if extent == 1 {
            let _ = writeln!(r.out, "{pad}{{ const i64 v{v} = 0;");
        } else if i == split {
            let _ = writeln!(r.out, "{pad}for (i64 v{v} = (i64){extent}LL * part / nparts; v{v} < (i64){extent}LL * (part + 1) / nparts; v{v}++) {{");
        } else {
            let _ = writeln!(r.out, "{pad}for (i64 v{v} = 0; v{v} < {extent}; v{v}++) {{");
        }
        indent += 1;
        let here = depth_outer(v);
        emit_where(
            &mut r,
            &|n| outer_only(n) && free[&n].iter().filter_map(|&u| depth_outer(u)).max() == here && here.is_some(),
            indent,
        );
    }
    let (lo, hi) = if inner_pos == split {
        (format!("(i64){inner_extent}LL * part / nparts"), format!("(i64){inner_extent}LL * (part + 1) / nparts"))
    } else {
        ("0".to_string(), format!("{inner_extent}"))
    };
    for (ci, chain) in chains.iter().enumerate() {
        let dtype = ctx.dtype(chain.top);
        let t = ctype(dtype);
        let acc = format!("acc{ci}");
        let pad = "  ".repeat(indent);
        let init = super::c::literal(ctx.reduce_identity_const(chain.op, dtype)?, dtype);
        let _ = writeln!(r.out, "{pad}{t} {acc}[{inner_extent}];");
        let _ = writeln!(r.out, "{pad}for (i64 v{vl} = {lo}; v{vl} < {hi}; v{vl}++) {acc}[v{vl}] = {init};");
        // Phase 1: the reduction loops, the inner loop innermost.
        let p1: HashSet<N> = ctx.toposort(&[chain.body]).into_iter().collect();
        let rvars: Vec<(u32, u64)> = chain
            .links
            .iter()
            .map(|&l| match *ctx.op(l) {
                Op::Reduce { var, extent, .. } => (var, extent),
                _ => unreachable!("chains hold reductions"),
            })
            .collect();
        let mut ind = indent;
        for (j, &(rv, extent)) in rvars.iter().enumerate() {
            let pad = "  ".repeat(ind);
            let _ = writeln!(r.out, "{pad}for (i64 v{rv} = 0; v{rv} < {extent}; v{rv}++) {{");
            ind += 1;
            let deeper: Vec<u32> = rvars[j + 1..].iter().map(|x| x.0).collect();
            emit_where(
                &mut r,
                &|n| p1.contains(&n) && uses(n, rv) && !uses(n, vl) && !deeper.iter().any(|&d| uses(n, d)),
                ind,
            );
        }
        let pad = "  ".repeat(ind);
        let _ = writeln!(r.out, "{pad}PL_SIMD for (i64 v{vl} = {lo}; v{vl} < {hi}; v{vl}++) {{");
        emit_where(&mut r, &|n| p1.contains(&n) && uses(n, vl), ind + 1);
        let b = r.value(chain.body);
        let a = format!("{acc}[v{vl}]");
        let step = match (chain.op, dtype.is_float()) {
            (RedOp::Sum, _) => format!("{a} += {b};"),
            (RedOp::Prod, _) => format!("{a} *= {b};"),
            (RedOp::Max, true) => format!("{a} = pl_fmax({a}, {b});"),
            (RedOp::Min, true) => format!("{a} = pl_fmin({a}, {b});"),
            (RedOp::Max, false) => format!("{a} = {b} > {a} ? {b} : {a};"),
            (RedOp::Min, false) => format!("{a} = {b} < {a} ? {b} : {a};"),
        };
        let _ = writeln!(r.out, "{pad}  {step}");
        let _ = writeln!(r.out, "{pad}}}");
        for i in (indent..ind).rev() {
            let _ = writeln!(r.out, "{}}}", "  ".repeat(i));
        }
        r.names.insert(chain.top, a);
    }
    // Phase 2: the epilogue over the inner dimension.
    let pad = "  ".repeat(indent);
    let _ = writeln!(r.out, "{pad}PL_SIMD for (i64 v{vl} = {lo}; v{vl} < {hi}; v{vl}++) {{");
    emit_where(&mut r, &|n| p2.contains(&n) && uses(n, vl), indent + 1);
    let root = r.value(k.expr);
    let _ = writeln!(r.out, "{pad}  b{}[{}] = {root};", k.out, flat_index(k));
    let _ = writeln!(r.out, "{pad}}}");
    for i in (1..indent).rev() {
        let _ = writeln!(r.out, "{}}}", "  ".repeat(i));
    }
    r.out.push_str("}\n");
    let parts = k.shape[split] as u32;
    Some(CKernel { name: k.name.clone(), source: r.out, args, parts })
}
