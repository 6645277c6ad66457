//! Register tiles for [`super::upcast`]'s kernels: the reduction of a full tile of the inner output
//! dimension runs with its accumulators in vector registers (`pl_vN` variables, clang/GCC vector
//! extensions), `blocks × vectors` of them live at once:
//!
//! ```text
//! for x0 in tiles of T = vectors × lanes:          accv[u][j] = 0            (registers)
//!   for r1 .. rk:                                   (weights: one scalar per replica u)
//!     [a scalar loop fills a tile array with operands that need guards or gathers]
//!     for j in 0..vectors:  f = vector load at x0 + j·lanes   (straight from the buffer when contiguous)
//!       for u in replicas:  accv[u][j] += body_u(f, weights_u)
//!   store accv into the accumulator arrays the epilogue reads
//! ```
//!
//! The body's nodes that depend on the inner variable split in two: float arithmetic (adds,
//! subtractions, products, negations: the products of a convolution) is computed on vectors, once
//! per replica; the nodes below it are *operands* (an input row that a convolution's output
//! channels share), which must not depend on the blocked variable. Operands are loaded as vectors:
//! straight from the buffer when the node is an unguarded load whose index steps by 1 along the
//! inner variable (1×1 and depthwise convolutions on padded input, matrix products), else computed
//! by a vectorized scalar loop into an aligned tile array (guarded or gathered reads).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use pilot_core::DType;

use super::render::Renderer;
use crate::ir::{BinOp, Ctx, Op, RedOp, UnOp, N};

/// How a chain's body is computed on register tiles.
pub(super) struct TileBody {
    /// How the accumulators fold the body: a sum, or a maximum (pooling).
    pub op: RedOp,
    /// Per-replica nodes in topological order.
    pub replica: Vec<N>,
    /// Operands loaded as vectors, each straight from its buffer or through a tile array.
    pub operands: Vec<(N, Operand)>,
    /// Operands that depend on the blocked variable: loaded by each replica (always contiguous).
    pub per_replica: Vec<N>,
    /// Every node that depends on the inner variable but not on the blocked one (computed in the
    /// scalar loop when some operand needs a tile array).
    pub shared: Vec<N>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    /// An unguarded load whose index steps by one along the inner variable.
    Contiguous { buf: u32, index: N },
    /// An unguarded load whose index steps by two (a stride-2 window): two contiguous vectors,
    /// their even lanes kept. It reads one element past the last it keeps.
    Strided { buf: u32, index: N },
    /// Computed by the scalar loop into a tile array.
    Staged,
}

/// The coefficient of `var` in `n` when `n` is affine in it (integer adds, subtractions and
/// products by constants); `None` when it is not.
pub(super) fn coefficient(ctx: &Ctx, free: &HashMap<N, Vec<u32>>, n: N, var: u32) -> Option<i64> {
    if !free[&n].contains(&var) {
        return Some(0);
    }
    match *ctx.op(n) {
        Op::Var(v) if v == var => Some(1),
        Op::Binary(BinOp::Add, a, b) => Some(coefficient(ctx, free, a, var)? + coefficient(ctx, free, b, var)?),
        Op::Binary(BinOp::Sub, a, b) => Some(coefficient(ctx, free, a, var)? - coefficient(ctx, free, b, var)?),
        Op::Binary(BinOp::Mul, a, b) => match (ctx.const_value(a), ctx.const_value(b)) {
            (Some(c), _) => Some(c.as_i64() * coefficient(ctx, free, b, var)?),
            (_, Some(c)) => Some(c.as_i64() * coefficient(ctx, free, a, var)?),
            _ => None,
        },
        Op::Cast(x) if !ctx.dtype(n).is_float() && !ctx.dtype(x).is_float() && ctx.dtype(n).size() >= 4 => {
            coefficient(ctx, free, x, var)
        }
        _ => None,
    }
}

/// Most values of the inner variable [`runs_of`] evaluates.
const MAX_RUN_CHECK: usize = 1 << 16;

/// Whether `index` steps by one along `var` within every aligned run of `lanes` values of it (`var`
/// in `0..extent`, `extent` a multiple of `lanes`), though not from one run to the next: a weight
/// laid out in panels (`crate::lower::nn`'s packed right operands: column `n` of row `k` at
/// `(n / P)·K·P + k·P + n % P`). The terms of the index that use `var` must use nothing else; their
/// sum is evaluated for every value of `var`.
pub(super) fn runs_of(ctx: &Ctx, free: &HashMap<N, Vec<u32>>, index: N, var: u32, lanes: usize, extent: usize) -> bool {
    if lanes < 2 || !extent.is_multiple_of(lanes) || extent > MAX_RUN_CHECK {
        return false;
    }
    let mut terms = Vec::new();
    let mut stack = vec![index];
    while let Some(n) = stack.pop() {
        match *ctx.op(n) {
            Op::Binary(BinOp::Add, a, b) if free[&n].contains(&var) => stack.extend([a, b]),
            _ if free[&n].contains(&var) => terms.push(n),
            _ => {}
        }
    }
    if terms.iter().any(|t| free[t] != [var]) {
        return false;
    }
    let at = |v: usize| -> Option<i64> {
        let mut env = HashMap::from([(var, v as i64)]);
        terms
            .iter()
            .try_fold(0i64, |acc, &t| Some(acc + crate::ir::interp::eval(ctx, t, &mut env, &|_, _| None)?.as_i64()))
    };
    (0..extent)
        .step_by(lanes)
        .all(|start| at(start).is_some_and(|first| (1..lanes).all(|j| at(start + j) == Some(first + j as i64))))
}

/// The tile plan of a chain whose body is `body`, or `None` when it keeps the scalar path.
///
/// From the body down, float adds, subtractions, products and negations that depend on the inner
/// variable are computed on vectors (once per replica); the first node below them that is anything
/// else is an operand, loaded as a vector. Operands must not depend on the blocked variable (one
/// vector of an operand serves every replica) unless `replicated`: then an operand that does is
/// loaded by each replica for itself, straight from its buffer (a depthwise convolution blocked
/// over its output rows: each row reads its own input rows). `aligned` is `(lanes, extent)` when
/// every vector the tiles load starts at a multiple of `lanes` of the inner variable (of `extent`
/// values): loads that run by one only within such runs ([`runs_of`]) are then contiguous too.
/// A load stepping by 2 is read as two vectors where `strided_fits(buf, index)` (the element past
/// its last stays in the buffer).
#[allow(clippy::too_many_arguments)]
pub(super) fn classify(
    ctx: &Ctx,
    free: &HashMap<N, Vec<u32>>,
    op: RedOp,
    dtype: DType,
    body: N,
    inner: u32,
    blocked: Option<u32>,
    replicated: bool,
    aligned: Option<(usize, usize)>,
    strided_fits: &dyn Fn(u32, N) -> bool,
) -> Option<TileBody> {
    if !matches!(op, RedOp::Sum | RedOp::Max) || dtype != DType::F32 {
        return None;
    }
    let uses = |n: N, v: u32| free[&n].contains(&v);
    let arithmetic = |n: N| {
        ctx.dtype(n) == DType::F32
            && matches!(ctx.op(n), Op::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, _, _) | Op::Unary(UnOp::Neg, _))
    };
    let mut vector_set: HashSet<N> = HashSet::new();
    let mut operand_set: HashSet<N> = HashSet::new();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if !uses(n, inner) || vector_set.contains(&n) || operand_set.contains(&n) {
            continue;
        }
        if arithmetic(n) {
            vector_set.insert(n);
            stack.extend(ctx.children(n));
        } else {
            if ctx.dtype(n) != DType::F32 || (!replicated && blocked.is_some_and(|b| uses(n, b))) {
                return None;
            }
            operand_set.insert(n);
        }
    }
    let order = ctx.toposort(&[body]);
    let replica: Vec<N> = order.iter().copied().filter(|n| vector_set.contains(n)).collect();
    let operands = order
        .iter()
        .copied()
        .filter(|n| operand_set.contains(n))
        .map(|n| {
            let kind = match *ctx.op(n) {
                Op::Load { buf, index, valid: None }
                    if coefficient(ctx, free, index, inner) == Some(1)
                        || aligned.is_some_and(|(lanes, extent)| runs_of(ctx, free, index, inner, lanes, extent)) =>
                {
                    Operand::Contiguous { buf, index }
                }
                Op::Load { buf, index, valid: None }
                    if coefficient(ctx, free, index, inner) == Some(2) && strided_fits(buf, index) =>
                {
                    Operand::Strided { buf, index }
                }
                _ => Operand::Staged,
            };
            (n, kind)
        })
        .collect::<Vec<_>>();
    let per_replica: Vec<N> =
        operands.iter().map(|&(n, _)| n).filter(|&n| blocked.is_some_and(|b| uses(n, b))).collect();
    if per_replica.iter().any(|n| operands.iter().any(|(o, k)| o == n && *k == Operand::Staged)) {
        return None;
    }
    let shared = order.iter().copied().filter(|&n| uses(n, inner) && blocked.is_none_or(|b| !uses(n, b))).collect();
    Some(TileBody { op, replica, operands, per_replica, shared })
}

/// The vector type of `lanes` floats (declared in the prelude).
pub(super) fn vtype(lanes: usize) -> String {
    format!("pl_v{lanes}")
}

/// Geometry of a kernel's register tiles.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub lanes: usize,
    pub vectors: usize,
}

impl Geometry {
    pub fn width(self) -> usize {
        self.lanes * self.vectors
    }

    /// The widest tile of at most `max_vectors` vectors that computes at most 1/8 more points over a
    /// row of `extent` than the tightest one (wider tiles share each broadcast weight among more
    /// multiply-adds and pass over the reduction fewer times). Without `overhang` a tile must fit in
    /// the row (the last one shifts back); with it the last may reach past the end.
    pub fn fit(lanes: usize, max_vectors: usize, extent: usize, overhang: bool) -> Option<Geometry> {
        let fits: Vec<Geometry> = (1..=max_vectors)
            .map(|vectors| Geometry { lanes, vectors })
            .filter(|g| overhang || g.width() <= extent)
            .collect();
        let points = |g: &Geometry| extent.div_ceil(g.width()) * g.width();
        let fewest = fits.iter().map(points).min()?;
        fits.into_iter().filter(|g| 8 * points(g) <= 9 * fewest).max_by_key(|g| g.vectors)
    }
}

/// The most accumulator vectors per replica of any register tile.
pub(super) const MAX_TILE_VECTORS: usize = 8;

/// Most replicas of a replicated blocked variable (see [`classify`]).
pub(super) const MAX_REPLICAS: usize = 16;

/// The register-tile shapes worth timing for a kernel: `block` replicas (4, 8 or 16 dividing
/// `blocked`) × `vectors` keeping between half the unit's registers and all but four of them as
/// accumulators (fewer leave multiply-adds waiting on each other; more spill the operands); where
/// the replicas load their own operands (`replicated`), any block from 2 to [`MAX_REPLICAS`]
/// dividing `blocked` with 4 to all but eight registers as accumulators (the rest hold the rows
/// loaded for several replicas); or,
/// without a blocked variable, 2 to [`MAX_TILE_VECTORS`] vectors; each of a width that fits the row
/// of `extent` or may overhang it (`overhang(vectors)`) and computes at most 1/8 more points than
/// the tightest such width.
pub(super) fn candidates(
    unit: super::isa::VecUnit,
    lanes: usize,
    blocked: Option<usize>,
    replicated: bool,
    extent: usize,
    overhang: &dyn Fn(usize) -> bool,
) -> Vec<super::upcast::Tiling> {
    let (blocks, lo, hi): (Vec<usize>, usize, usize) = match blocked {
        Some(e) if replicated => ((2..=MAX_REPLICAS).filter(|b| e % b == 0).collect(), 4, unit.regs.saturating_sub(8)),
        Some(e) => {
            let mut blocks: Vec<usize> = [4, 8, 16].into_iter().filter(|b| e % b == 0).collect();
            if blocks.is_empty() {
                blocks.extend(super::upcast::block_for(e));
            }
            (blocks, unit.regs / 2, unit.regs.saturating_sub(4))
        }
        None => (vec![1], 2, MAX_TILE_VECTORS),
    };
    let mut out = Vec::new();
    for &block in &blocks {
        for vectors in 1..=(hi / block).min(MAX_TILE_VECTORS) {
            let width = lanes * vectors;
            if block * vectors >= lo && (width <= extent || overhang(vectors)) {
                let t = super::upcast::Tiling { block, vectors, tiles_outside: false };
                out.push((t, extent.div_ceil(width) * width));
            }
        }
    }
    let fewest = out.iter().map(|&(_, points)| points).min().unwrap_or(0);
    out.into_iter().filter(|&(_, points)| 8 * points <= 9 * fewest).map(|(t, _)| t).collect()
}

/// The largest value of `index` over the kernel's loops when `var` reaches `reach - 1`, where the
/// index is affine with non-negative coefficients in every variable; `None` when that is not known.
pub(super) fn max_index(ctx: &Ctx, free: &HashMap<N, Vec<u32>>, index: N, var: u32, reach: usize) -> Option<i64> {
    let mut env: HashMap<u32, i64> = free[&index].iter().map(|&v| (v, 0)).collect();
    let base = crate::ir::interp::eval(ctx, index, &mut env, &|_, _| None)?.as_i64();
    free[&index].iter().try_fold(base, |acc, &v| {
        let c = coefficient(ctx, free, index, v).filter(|&c| c >= 0)?;
        let extent = if v == var { reach as i64 } else { ctx.var_extent(v) as i64 };
        Some(acc + c * (extent - 1))
    })
}

/// Emits the tiled reduction of one chain for the full tile at `x0`: accumulator vectors, the
/// reduction loops (opened by `open_loops`, which emits the loop-invariant nodes too and returns
/// the indent inside), the vector body, and the stores into the accumulator arrays `acc`.
///
/// `acc(u)` names replica `u`'s accumulator array; `reps` are the replicas of this chain;
/// `set_rep` points the renderer at replica `u` (names and the blocked variable's value).
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_chain(
    r: &mut Renderer<'_>,
    tb: &TileBody,
    body: N,
    inner: u32,
    g: Geometry,
    indent: usize,
    reps: &[usize],
    acc: &dyn Fn(usize) -> String,
    set_rep: &dyn Fn(&mut Renderer<'_>, usize),
    open_loops: &mut dyn FnMut(&mut Renderer<'_>, usize) -> usize,
    close_loops: &mut dyn FnMut(&mut Renderer<'_>, usize),
) {
    let pad = "  ".repeat(indent);
    let vt = vtype(g.lanes);
    let width = g.width();
    // The identity: zero, or -inf for a maximum (a vector minus a scalar subtracts it from every lane).
    let init = if tb.op == RedOp::Max { format!("(({vt}){{0}}) - (float)PL_INF") } else { "{0}".to_string() };
    for &u in reps {
        for j in 0..g.vectors {
            let _ = writeln!(r.out, "{pad}{vt} {}_v{j} = {init};", acc(u));
        }
    }
    let staged: Vec<N> = tb.operands.iter().filter(|(_, k)| *k == Operand::Staged).map(|(n, _)| *n).collect();
    for &n in &staged {
        let _ = writeln!(r.out, "{pad}float s{}[{width}] __attribute__((aligned(64)));", n.0);
    }
    let ind = open_loops(r, indent);
    let pad = "  ".repeat(ind);
    if !staged.is_empty() {
        // The operands that need guards or gathers, computed as the scalar path computes them.
        let _ = writeln!(r.out, "{pad}PL_SIMD for (i64 v{inner} = x0; v{inner} < x0 + {width}; v{inner}++) {{");
        for &n in &tb.shared {
            r.emit(n, ind + 1);
        }
        for &n in &staged {
            let _ = writeln!(r.out, "{pad}  s{}[v{inner} - x0] = {};", n.0, r.value(n));
        }
        let _ = writeln!(r.out, "{pad}}}");
    }
    let ctx = r.ctx;
    for j in 0..g.vectors {
        let off = j * g.lanes;
        let load = |r: &mut Renderer<'_>, n: N, kind: Operand| match kind {
            Operand::Staged => format!("*(const {vt} *)&s{}[{off}]", n.0),
            Operand::Contiguous { buf, index } => contiguous_load(r, &vt, buf, index, inner, off, ind, 1),
            Operand::Strided { buf, index } => contiguous_load(r, &vt, buf, index, inner, off, ind, 2),
        };
        for &(n, kind) in tb.operands.iter().filter(|(n, _)| !tb.per_replica.contains(n)) {
            let v = load(r, n, kind);
            let _ = writeln!(r.out, "{pad}const {vt} f{}_{j} = {v};", n.0);
        }
        for &u in reps {
            set_rep(r, u);
            // Never staged (`classify` refuses them): read with this replica's blocked variable.
            for &(n, kind) in tb.operands.iter().filter(|(n, _)| tb.per_replica.contains(n)) {
                let v = load(r, n, kind);
                let _ = writeln!(r.out, "{pad}const {vt} f{}_u{u}_{j} = {v};", n.0);
            }
            let operand = |r: &Renderer<'_>, x: N| -> String {
                if tb.per_replica.contains(&x) {
                    format!("f{}_u{u}_{j}", x.0)
                } else if tb.operands.iter().any(|(o, _)| *o == x) {
                    format!("f{}_{j}", x.0)
                } else if tb.replica.contains(&x) {
                    format!("p{}_u{u}_{j}", x.0)
                } else {
                    r.value(x)
                }
            };
            for &n in &tb.replica {
                let e = match *ctx.op(n) {
                    Op::Binary(op, a, b) => {
                        let o = match op {
                            BinOp::Add => "+",
                            BinOp::Sub => "-",
                            _ => "*",
                        };
                        format!("{} {o} {}", operand(r, a), operand(r, b))
                    }
                    Op::Unary(_, a) => format!("-{}", operand(r, a)),
                    _ => unreachable!("classify admits only these"),
                };
                let _ = writeln!(r.out, "{pad}const {vt} p{}_u{u}_{j} = {e};", n.0);
            }
            let (a, x) = (format!("{}_v{j}", acc(u)), operand(r, body));
            let _ = match tb.op {
                RedOp::Max => writeln!(r.out, "{pad}{a} = PL_VMAX({a}, {x});"),
                _ => writeln!(r.out, "{pad}{a} += {x};"),
            };
        }
    }
    close_loops(r, ind);
    let pad = "  ".repeat(indent);
    for &u in reps {
        for j in 0..g.vectors {
            let a = acc(u);
            let _ = writeln!(r.out, "{pad}*({vt} *)&{a}[{}] = {a}_v{j};", j * g.lanes);
        }
    }
}

/// A vector load of `lanes` elements from `b{buf}` starting where `index` points for the inner
/// variable at `x0 + off`, `stride` (1 or 2) apart: the index nodes rendered inside a statement
/// expression; stride 2 loads twice as many consecutive elements and keeps the even ones.
#[allow(clippy::too_many_arguments)]
fn contiguous_load(
    r: &mut Renderer<'_>,
    vt: &str,
    buf: u32,
    index: N,
    inner: u32,
    off: usize,
    ind: usize,
    stride: usize,
) -> String {
    let saved_out = std::mem::take(&mut r.out);
    let saved_override = r.inner_override.replace((inner, format!("(x0 + {off})")));
    let ctx = r.ctx;
    let deps: Vec<N> = ctx
        .toposort(&[index])
        .into_iter()
        .filter(|&n| !matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) && depends_on(ctx, n, inner))
        .collect();
    for &n in &deps {
        r.emit(n, ind + 1);
    }
    let idx = r.value(index);
    let body = std::mem::replace(&mut r.out, saved_out);
    r.inner_override = saved_override;
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    if stride == 2 {
        let lanes: usize = vt.trim_start_matches("pl_v").parse().expect("a pl_vN type");
        let even: Vec<String> = (0..lanes).map(|i| (2 * i).to_string()).collect();
        return format!(
            "({{ {} {vt} lo_, hi_; __builtin_memcpy(&lo_, &b{buf}[{idx}], sizeof lo_); \
             __builtin_memcpy(&hi_, &b{buf}[({idx}) + {lanes}], sizeof hi_); __builtin_shufflevector(lo_, hi_, {}); }})",
            lines.join(" "),
            even.join(", ")
        );
    }
    format!("({{ {} {vt} v_; __builtin_memcpy(&v_, &b{buf}[{idx}], sizeof v_); v_; }})", lines.join(" "))
}

fn depends_on(ctx: &Ctx, n: N, var: u32) -> bool {
    ctx.toposort(&[n]).iter().any(|&m| matches!(ctx.op(m), Op::Var(v) if *v == var))
}
