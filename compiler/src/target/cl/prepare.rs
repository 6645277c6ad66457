//! Kernel rewrites that shape the IR for OpenCL before rendering; they need `&mut Ctx`.
//!
//! - A kernel writing an image computes the four channels of a pixel in one work-item: its channel
//!   variable is unrolled into four roots.
//! - With `quads`, a kernel writing a buffer computes four consecutive outputs of its last axis in
//!   one work-item where its reduction reads an operand that axis does not index (the vector of a
//!   matrix-vector product, a convolution's weights): the four outputs share those reads, as the
//!   channels of a pixel do. With `quads` too, outermost reductions of one extent share a variable,
//!   so they run as one loop.
//! - Innermost reductions of extent 4 that read images (the 4 channels of a pixel) are unrolled, so
//!   the four channel loads share one `read_imagef`.
//! - Reductions at the same place in the unrolled roots are given one variable (lockstep fusion),
//!   so the renderer runs them as one loop with several accumulators.
//! - Every image load gets its pixel coordinates, channel and remaining guard as IR nodes (`texel`).
//!
//! The prepared roots are for the renderer only: lockstep fusion deliberately binds one variable in
//! several Reduce nodes, which the IR's invariant elsewhere (one binder per variable) forbids, so they
//! must not be substituted or validated again.

use std::collections::HashMap;

use super::texel::{locate, Texel};
use crate::ir::{subst::substitute, BinOp, Ctx, Op, RedOp, N};
use crate::program::{Image, Kernel, Program};

/// Four outputs per work-item only where at least this many work-items remain. A reduction over a
/// few thousand outputs (a batch-1 matrix-vector product) keeps one output per work-item: it is
/// bound by memory, and more work-items keep more reads in flight.
const QUAD_MIN_ITEMS: usize = 4096;

/// A kernel ready to render.
pub struct Prepared {
    /// One root per output element a work-item writes (four for an image pixel or a quad).
    pub roots: Vec<N>,
    /// The variable the roots were unrolled over (the image channel, or the last output axis of
    /// a buffer kernel: root `j` is that axis at `4·quad + j`), if any.
    pub unrolled: Option<u32>,
    /// For a buffer kernel writing four outputs per work-item, the variable of the grid that
    /// replaces `unrolled`, with its extent (a quarter of the axis).
    pub quad: Option<(u32, usize)>,
    pub texels: HashMap<N, Texel>,
}

impl Prepared {
    /// The output variables a work-item is indexed by, with their extents: `k`'s, less the one the
    /// roots were unrolled over, plus the quad variable that replaces it, if any.
    pub fn item_vars(&self, k: &Kernel) -> Vec<(u32, usize)> {
        k.vars
            .iter()
            .zip(&k.shape)
            .map(|(&v, &e)| (v, e))
            .filter(|&(v, _)| Some(v) != self.unrolled)
            .chain(self.quad)
            .collect()
    }
}

/// Rewrites `k` for rendering; `p.ctx` gains the new nodes. `quads` (the targets that do not reduce
/// across a work-group): buffer kernels may compute four outputs per work-item, and outermost
/// reductions of one extent share a loop.
pub fn prepare(p: &mut Program, k: &Kernel, quads: bool) -> Prepared {
    let images: HashMap<u32, Image> =
        p.bufs.iter().enumerate().filter_map(|(i, b)| b.image.map(|im| (i as u32, im))).collect();
    let ctx = &mut p.ctx;
    let out_image = images.contains_key(&k.out);
    let (mut roots, unrolled, quad) = match (out_image, k.vars.last()) {
        (true, Some(&c)) => {
            debug_assert_eq!(k.shape.last(), Some(&4), "an image kernel iterates (y, x, channel)");
            let roots = (0..4)
                .map(|j| {
                    let jn = ctx.int(j);
                    substitute(ctx, k.expr, &HashMap::from([(c, jn)]), None)
                })
                .collect();
            (roots, Some(c), None)
        }
        (false, Some(&v)) if quads && shares_reads(ctx, k) => {
            let extent = k.shape[k.shape.len() - 1] / 4;
            let q = ctx.fresh_var(extent as u64);
            let qn = ctx.var(q);
            let base = ctx.mul_i(qn, 4);
            let roots = (0..4)
                .map(|j| {
                    let jn = ctx.int(j);
                    let at = ctx.add(base, jn);
                    substitute(ctx, k.expr, &HashMap::from([(v, at)]), None)
                })
                .collect();
            (roots, Some(v), Some((q, extent)))
        }
        _ => (vec![k.expr], None, None),
    };
    if !images.is_empty() {
        let mut memo = HashMap::new();
        roots = roots.iter().map(|&r| unroll_small(ctx, r, &images, &mut memo)).collect();
    }
    if roots.len() > 1 {
        let mut memo = HashMap::new();
        roots = fuse(ctx, &roots, &mut memo);
    }
    if quads {
        roots = merge_siblings(ctx, &roots);
    }
    let mut texels = HashMap::new();
    for n in ctx.toposort(&roots) {
        if let Op::Load { buf, index, valid } = *ctx.op(n) {
            if let Some(&im) = images.get(&buf) {
                texels.insert(n, locate(ctx, im, index, valid));
            }
        }
    }
    Prepared { roots, unrolled, quad, texels }
}

/// Gives the outermost reductions of equal extent one variable, so the renderer runs them as one
/// loop (one loop's overhead, and an operand they share read once per iteration: the vector of
/// several products of one GRU step). Only reductions whose bodies hold no reduction are merged:
/// such a body never reads another reduction's result, which a shared loop could not provide.
fn merge_siblings(ctx: &mut Ctx, roots: &[N]) -> Vec<N> {
    // The reductions not inside another reduction's body (sorted below, for a stable choice).
    let mut outer = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<N> = roots.to_vec();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        match *ctx.op(n) {
            Op::Reduce { .. } => outer.push(n),
            _ => stack.extend(ctx.children(n)),
        }
    }
    let mut first: HashMap<u64, u32> = HashMap::new();
    let mut rename: HashMap<N, N> = HashMap::new();
    outer.sort_unstable();
    for n in outer {
        let Op::Reduce { op, var, extent, body } = *ctx.op(n) else { continue };
        if ctx.has_reduce(body) {
            continue;
        }
        let to = *first.entry(extent).or_insert(var);
        if to != var {
            let tv = ctx.var(to);
            let body = substitute(ctx, body, &HashMap::from([(var, tv)]), None);
            let merged = ctx.intern(Op::Reduce { op, var: to, extent, body }, ctx.dtype(n));
            rename.insert(n, merged);
        }
    }
    if rename.is_empty() {
        return roots.to_vec();
    }
    let mut memo = HashMap::new();
    roots.iter().map(|&r| replace(ctx, r, &rename, &mut memo)).collect()
}

/// `n` with the nodes of `map` replaced (structure otherwise kept).
fn replace(ctx: &mut Ctx, n: N, map: &HashMap<N, N>, memo: &mut HashMap<N, N>) -> N {
    for m in ctx.toposort(&[n]) {
        if memo.contains_key(&m) {
            continue;
        }
        let r = match map.get(&m) {
            Some(&to) => to,
            None => {
                let ch: Vec<N> = ctx.children(m).iter().map(|c| memo[c]).collect();
                if ch == ctx.children(m) {
                    m
                } else {
                    with_children(ctx, m, &ch)
                }
            }
        };
        memo.insert(m, r);
    }
    memo[&n]
}

/// Whether `k` (writing a buffer) has a last axis of whole quads and a reduction that reads an
/// operand that axis does not index: the reads four outputs of that axis would share.
fn shares_reads(ctx: &Ctx, k: &Kernel) -> bool {
    let (Some(&v), Some(&extent)) = (k.vars.last(), k.shape.last()) else { return false };
    if extent < 8 || extent % 4 != 0 || k.shape.iter().product::<usize>() < 4 * QUAD_MIN_ITEMS {
        return false;
    }
    let order = ctx.toposort(&[k.expr]);
    // Children come first: whether each node depends on `v`, and whether it lies under a reduction
    // is settled from the root down afterwards.
    let mut on_v: HashMap<N, bool> = HashMap::new();
    for &n in &order {
        let d = matches!(ctx.op(n), Op::Var(u) if *u == v) || ctx.children(n).iter().any(|c| on_v[c]);
        on_v.insert(n, d);
    }
    let mut reduced: HashMap<N, bool> = HashMap::new();
    for &n in order.iter().rev() {
        let under = reduced.get(&n).copied().unwrap_or(false) || matches!(ctx.op(n), Op::Reduce { .. });
        if under {
            if let Op::Load { .. } = ctx.op(n) {
                if !on_v[&n] {
                    return true;
                }
            }
        }
        for c in ctx.children(n) {
            let e = reduced.entry(c).or_insert(false);
            *e |= under;
        }
    }
    false
}

/// `n` rebuilt over new children (no simplification: the structure is kept as is).
fn with_children(ctx: &mut Ctx, n: N, ch: &[N]) -> N {
    let node = ctx.node(n).clone();
    let op = match node.op {
        Op::Var(_) | Op::Const(_) => return n,
        Op::Load { buf, valid, .. } => Op::Load { buf, index: ch[0], valid: valid.map(|_| ch[1]) },
        Op::Unary(op, _) => Op::Unary(op, ch[0]),
        Op::Binary(op, _, _) => Op::Binary(op, ch[0], ch[1]),
        Op::Where(..) => Op::Where(ch[0], ch[1], ch[2]),
        Op::Cast(_) => Op::Cast(ch[0]),
        Op::Bitcast(_) => Op::Bitcast(ch[0]),
        Op::Reduce { op, var, extent, .. } => Op::Reduce { op, var, extent, body: ch[0] },
    };
    ctx.intern(op, node.dtype)
}

fn reads_image(ctx: &Ctx, root: N, images: &HashMap<u32, Image>) -> bool {
    ctx.loads(root).iter().any(|b| images.contains_key(b))
}

/// Unrolls innermost reductions of extent 4 whose body reads an image (the channels of a pixel).
fn unroll_small(ctx: &mut Ctx, root: N, images: &HashMap<u32, Image>, memo: &mut HashMap<N, N>) -> N {
    for n in ctx.toposort(&[root]) {
        if memo.contains_key(&n) {
            continue;
        }
        let ch: Vec<N> = ctx.children(n).iter().map(|c| memo[c]).collect();
        let mut r = if ch == ctx.children(n) { n } else { with_children(ctx, n, &ch) };
        if let Op::Reduce { op, var, extent, body } = *ctx.op(r) {
            if extent == 4 && !ctx.has_reduce(body) && reads_image(ctx, body, images) {
                let terms: Vec<N> = (0..extent as i64)
                    .map(|j| {
                        let jn = ctx.int(j);
                        substitute(ctx, body, &HashMap::from([(var, jn)]), None)
                    })
                    .collect();
                let combine = match op {
                    RedOp::Sum => BinOp::Add,
                    RedOp::Prod => BinOp::Mul,
                    RedOp::Max => BinOp::Max,
                    RedOp::Min => BinOp::Min,
                };
                let d = ctx.dtype(r);
                r = terms[1..].iter().fold(terms[0], |acc, &t| ctx.intern(Op::Binary(combine, acc, t), d));
            }
        }
        memo.insert(n, r);
    }
    memo[&root]
}

/// Gives reductions at the same position of structurally equal roots one shared variable.
fn fuse(ctx: &mut Ctx, roots: &[N], memo: &mut HashMap<Vec<N>, Vec<N>>) -> Vec<N> {
    if let Some(r) = memo.get(roots) {
        return r.clone();
    }
    let first = ctx.node(roots[0]).clone();
    let same_shape = roots.iter().all(|&r| {
        let n = ctx.node(r);
        n.dtype == first.dtype
            && std::mem::discriminant(&n.op) == std::mem::discriminant(&first.op)
            && ctx.children(r).len() == ctx.children(roots[0]).len()
    });
    let all_equal = roots.iter().all(|&r| r == roots[0]);
    let out = if all_equal || !same_shape {
        roots.to_vec()
    } else if let Op::Reduce { op, var, extent, .. } = first.op {
        let same =
            roots.iter().all(|&r| matches!(ctx.op(r), Op::Reduce { op: o, extent: e, .. } if *o == op && *e == extent));
        if !same {
            roots.to_vec()
        } else {
            let v0 = ctx.var(var);
            let bodies: Vec<N> = roots
                .iter()
                .map(|&r| {
                    let Op::Reduce { var: v, body, .. } = *ctx.op(r) else { unreachable!() };
                    if v == var {
                        body
                    } else {
                        substitute(ctx, body, &HashMap::from([(v, v0)]), None)
                    }
                })
                .collect();
            let bodies = fuse(ctx, &bodies, memo);
            bodies.iter().map(|&b| ctx.intern(Op::Reduce { op, var, extent, body: b }, first.dtype)).collect()
        }
    } else {
        let arity = ctx.children(roots[0]).len();
        let mut cols: Vec<Vec<N>> = vec![Vec::new(); roots.len()];
        for i in 0..arity {
            let column: Vec<N> = roots.iter().map(|&r| ctx.children(r)[i]).collect();
            for (j, n) in fuse(ctx, &column, memo).into_iter().enumerate() {
                cols[j].push(n);
            }
        }
        roots
            .iter()
            .zip(&cols)
            .map(|(&r, ch)| if *ch == ctx.children(r) { r } else { with_children(ctx, r, ch) })
            .collect()
    };
    memo.insert(roots.to_vec(), out.clone());
    out
}
