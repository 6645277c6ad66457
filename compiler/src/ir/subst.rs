//! Substitution of variables, the mechanism behind every movement op.

use std::collections::HashMap;

use super::{Ctx, Op, N};

/// Rebuilds `root` with each `Var(v)` in `map` replaced, and `guard` (if any) and-ed into the
/// validity of every load, so a load outside the valid region never reads memory. Rebuilding goes
/// through the simplifying constructors.
///
/// Invariant kept: every reduction variable is bound by exactly one Reduce node (a reduction whose
/// body changes gets a fresh variable), so renderers can scope loops by variable.
pub fn substitute(ctx: &mut Ctx, root: N, map: &HashMap<u32, N>, guard: Option<N>) -> N {
    rebuild(ctx, root, map, &HashMap::new(), guard)
}

/// Rebuilds `root` with each node in `nodes` replaced by its value (a load of a buffer replaced by
/// the expression that computes it), through the simplifying constructors. The replacements must
/// not be under a reduction of `root` whose variable they use.
pub fn replace_nodes(ctx: &mut Ctx, root: N, nodes: &HashMap<N, N>) -> N {
    rebuild(ctx, root, &HashMap::new(), nodes, None)
}

fn rebuild(ctx: &mut Ctx, root: N, map: &HashMap<u32, N>, nodes: &HashMap<N, N>, guard: Option<N>) -> N {
    let order = ctx.toposort(&[root]);
    let mut new: HashMap<N, N> = HashMap::with_capacity(order.len());
    for n in order {
        if let Some(&r) = nodes.get(&n) {
            new.insert(n, r);
            continue;
        }
        let m = |x: &N| new[x];
        let node = ctx.node(n).clone();
        let r = match &node.op {
            Op::Var(v) => map.get(v).copied().unwrap_or(n),
            Op::Const(_) => n,
            Op::Load { buf, index, valid } => {
                let valid = match (valid.map(|v| m(&v)), guard) {
                    (Some(v), Some(g)) => Some(ctx.and(v, g)),
                    (v, g) => v.or(g),
                };
                ctx.load(*buf, node.dtype, m(index), valid)
            }
            Op::Unary(op, x) => ctx.unary(*op, m(x)),
            Op::Binary(op, a, b) => ctx.binary(*op, m(a), m(b)),
            Op::Where(c, a, b) => ctx.where_(m(c), m(a), m(b)),
            Op::Cast(x) => ctx.cast(m(x), node.dtype),
            Op::Bitcast(x) => ctx.bitcast(m(x), node.dtype),
            Op::Reduce { op, var, extent, body } => {
                let b = m(body);
                if b == *body {
                    n
                } else {
                    // A changed reduction is a new binder: rename its variable so that every
                    // reduction variable stays bound by exactly one Reduce node.
                    // Deterministic: the same reduction with the same new body always gets the same
                    // variable, so equal substitutions still produce equal (shared) nodes.
                    let fresh = ctx.renamed_var(n, b, *extent);
                    let fresh_node = ctx.var(fresh);
                    let renamed = substitute(ctx, b, &HashMap::from([(*var, fresh_node)]), None);
                    ctx.reduce(*op, fresh, *extent, renamed)
                }
            }
        };
        new.insert(n, r);
    }
    new[&root]
}
