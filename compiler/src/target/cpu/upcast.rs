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
//! accumulator array. The inner dimension is covered in tiles: register tiles ([`super::tile`]) where
//! the body allows them, else accumulator arrays of at most [`MAX_INNER`] points (past that, only
//! where the inner loop reads memory contiguously).
//!
//! Register blocking: when [`BLOCK`] consecutive values of an outer variable share the inner loop's
//! loads (a convolution's output channels all read the same input row), that variable steps by
//! `BLOCK` and the body is replicated, one accumulator array per replica — each input load then
//! feeds `BLOCK` multiply-adds.

use std::collections::HashSet;
use std::fmt::Write;

use super::isa::VecUnit;
use super::peel::{self, Peel};
use super::render::{ctype, fold, free_vars, header, open_loop, CKernel, Renderer};
use super::split::{self, Loop, Split};
use super::tile;
use crate::ir::{Op, RedOp, N};
use crate::program::{BufKind, Kernel, Program};

/// One top-level reduction: a perfectly nested chain of one operator down to its body.
struct Chain {
    top: N,
    op: RedOp,
    links: Vec<N>,
    body: N,
}

/// Largest inner extent kept in an accumulator array on the stack.
pub const MAX_INNER: usize = 2048;

/// Replicas of the blocked outer variable (accumulator arrays live at once); register tiles on a
/// unit with 32 registers use 8.
pub const BLOCK: usize = 4;

/// The replicas an outer variable of `extent` values is blocked by untimed: [`BLOCK`] where it
/// divides the extent, else the largest divisor from 5 to 8 (the 49 rows of a 7×7 map in blocks
/// of 7), else none.
pub fn block_for(extent: usize) -> Option<usize> {
    if extent >= BLOCK && extent.is_multiple_of(BLOCK) {
        return Some(BLOCK);
    }
    (5..=8).rev().find(|&b| extent > b && extent.is_multiple_of(b))
}

/// Steps of a long reduction's innermost variable per pass over the accumulator array, where no
/// blocked variable or register tile applies: [`K_UNROLL_STREAMED`] where the kernel reads at least
/// [`STREAMED_BYTES`] (its weights come from memory every step: more rows in flight per pass),
/// else this (a recurrent cell's small products, run many times a step, keep their code short).
const K_UNROLL: usize = 4;
const K_UNROLL_STREAMED: usize = 8;
/// Bytes a kernel reads from which its matrix-vector passes are taken to stream from memory (twice
/// a Zen 4 core's L2). On a 2-vCPU AMD EPYC (Zen 4), 8 rows per pass instead of 4 took
/// policy_full and policy_gemv 12–17% faster; a bidirectional LSTM's 1.3 MB gate products ran 8–16%
/// slower at 8, hence the bound.
const STREAMED_BYTES: usize = 2 << 20;

/// Vectors of one replica in a register tile.
const MAX_VECTORS: usize = 4;

/// The longest reduction that takes a register tile without a blocked variable.
const MAX_UNBLOCKED_REDUCTION: u64 = 64;

/// Units of work the outer loops must give for the parts to be cut from them; below (one block of
/// rows: the kernel ran as one part), the inner range's whole tiles are cut instead where there are
/// more of them. Two or more units keep the outer split: their tile shapes are timed as they are.
const MIN_OUTER_UNITS: u64 = 2;

/// The parts are also cut from the inner range, where it has at least [`MIN_INNER_UNITS`] tiles,
/// when the bytes every part of an outer split would read whole (a 1×1 convolution's input, read by
/// every block of output channels) exceed [`SHARED_BYTES_RATIO`] times those every part of an
/// inner split would (its weights). On a 2-vCPU AMD EPYC this took 2-thread steps of vision_full,
/// effnet_se, ppocr_rec and centerface 4–8% faster, one thread unchanged.
const MIN_INNER_UNITS: u64 = 8;
const SHARED_BYTES_RATIO: usize = 4;

/// A register tile's shape: `block` replicas of the blocked variable (1 without one) × `vectors`
/// accumulator vectors per replica; with `tiles_outside`, the loop over the inner dimension's tiles
/// runs outside the blocked variable's loop, so the operands one tile reads along the reduction (a
/// panel of a matrix product's weights) are read again from cache by every block of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiling {
    pub block: usize,
    pub vectors: usize,
    pub tiles_outside: bool,
}

/// Renders `k` in this loop order, with register tiles sized for `unit`, or `None` when the kernel
/// is not a chain of reductions this order applies to. `tiling` replaces the default tile shape;
/// it must be one of the kernel's [`CKernel::tilings`] (any other is ignored).
pub fn render(p: &Program, k: &Kernel, unit: VecUnit, tiling: Option<Tiling>) -> Option<CKernel> {
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
    // A value computed from a reduction but not along the inner variable would be hoisted out of the tile
    // loop, ahead of the reduction it reads; such kernels take the generic loop nest.
    let mut after_reduce: HashSet<N> = HashSet::new();
    for &n in &order {
        if tops.contains(&n) || ctx.children(n).iter().any(|c| after_reduce.contains(c)) {
            after_reduce.insert(n);
        }
    }
    if p2.iter().any(|&n| after_reduce.contains(&n) && !tops.contains(&n) && !free[&n].contains(&vl)) {
        return None;
    }
    let outer: Vec<u32> = k.vars.iter().copied().filter(|&v| v != vl).collect();
    let depth_outer = |v: u32| outer.iter().position(|&o| o == v);
    let uses = |n: N, v: u32| free[&n].contains(&v);
    let uses_r = |n: N| free[&n].iter().any(|v| rset.contains(v));
    let outer_only = |n: N| !uses(n, vl) && !uses_r(n);
    let split = k.shape.iter().position(|&d| d > 1).expect("inner_pos exists");

    // Register blocking: an outer variable whose BLOCK consecutive values share the inner loop's loads
    // (a convolution's output channels share its input row) is stepped by BLOCK, the body replicated.
    let bodies: Vec<N> = ctx.toposort(&chains.iter().map(|c| c.body).collect::<Vec<_>>());
    let shares = |v: u32| {
        bodies.iter().any(|&n| matches!(ctx.op(n), Op::Load { .. }) && uses(n, vl) && !uses(n, v))
            && bodies.iter().any(|&n| uses(n, v))
    };
    let blocked_var =
        k.vars.iter().zip(&k.shape).find(|&(&v, &e)| v != vl && block_for(e).is_some() && shares(v)).map(|(&v, _)| v);
    // Register tiles where every chain's body allows them, else one tile spanning the inner range.
    // Without a blocked variable a tile pays only for short reductions (windows: depthwise
    // convolutions, pooling), whose accumulators would otherwise go through memory every few steps;
    // a long one (a matrix-vector product) streams its rows best through the whole-row arrays.
    let reduction_len = |c: &Chain| -> u64 {
        c.links.iter().map(|&l| if let Op::Reduce { extent, .. } = *ctx.op(l) { extent } else { 1 }).product()
    };
    let short = chains.iter().all(|c| reduction_len(c) <= MAX_UNBLOCKED_REDUCTION);
    let mut lanes = unit.lanes;
    while lanes > inner_extent && lanes > 4 {
        lanes /= 2;
    }
    // Every tile starts at a multiple of `lanes` where the row is a whole number of vectors (a part's
    // range is whole vectors, a last tile shifted back ends at the row's end).
    let aligned = inner_extent.is_multiple_of(lanes).then_some((lanes, inner_extent));
    // A stride-2 load reads one element past the last it keeps: it must stay in its buffer or in
    // the bytes the arena keeps after a scratch buffer.
    let strided_fits = |buf: u32, index: N| {
        let b = &p.bufs[buf as usize];
        let past = if b.kind == BufKind::Scratch { super::READ_PAST / b.dtype.size() } else { 0 };
        tile::max_index(ctx, &free, index, vl, inner_extent).is_some_and(|m| m + 1 < (b.numel + past) as i64)
    };
    // Replicated tiles may take wider vectors than `lanes` (below): they claim no aligned runs.
    let classify_all = |vb: Option<u32>, replicated: bool| -> Option<Vec<tile::TileBody>> {
        let aligned = if replicated { None } else { aligned };
        chains
            .iter()
            .map(|c| {
                tile::classify(ctx, &free, c.op, ctx.dtype(c.top), c.body, vl, vb, replicated, aligned, &strided_fits)
            })
            .collect()
    };
    let mut tiles: Option<Vec<tile::TileBody>> =
        if blocked_var.is_some() || short { classify_all(blocked_var, false) } else { None };
    let extent_of = |vb: u32| k.shape[k.vars.iter().position(|&v| v == vb).expect("a kernel var")];
    // Replicated blocking: where no variable shares the loads and every chain is a short window (a
    // depthwise convolution), an outer variable stepped by a block of replicas that each load their
    // own operands. Their sums are independent (a narrow row alone chains every multiply-add on one
    // accumulator), and with the window's loops unrolled the C compiler loads an input row once for
    // every replica that reads it (output rows y..y+b of a 5×5 window read rows y..y+b+4).
    let replicated = (blocked_var.is_none() && tiles.is_some())
        .then(|| replicated_var(ctx, &bodies, &outer, vl, &free, &|v| extent_of(v)))
        .flatten()
        .and_then(|rv| Some((rv, classify_all(Some(rv), true)?)));
    let mut blocked_var = blocked_var;
    let mut blocked_extent = blocked_var.map_or(0, extent_of);
    // Tiles may overhang the row's end (lanes computed and not stored) where every load they make
    // stays inside its buffer; the width then need not fit the row.
    let tileable = tiles.is_some();
    let overhang_lanes = |lanes: usize, vectors: usize| {
        tileable
            && bodies.iter().all(|&n| match *ctx.op(n) {
                Op::Load { buf, index, valid: None } if uses(n, vl) => {
                    let reach = inner_extent + lanes * vectors;
                    // A stride-2 vector reads one element past its last lane.
                    let past = i64::from(tile::coefficient(ctx, &free, index, vl) == Some(2));
                    tile::max_index(ctx, &free, index, vl, reach)
                        .is_some_and(|m| m + past < p.bufs[buf as usize].numel as i64)
                }
                _ => true,
            })
    };
    let overhang_for = |vectors: usize| overhang_lanes(lanes, vectors);
    // Replicas hold one accumulator per vector: a row of more than half the unit's lanes takes whole
    // vectors where they may overhang it (a row of 14 one vector of 16, not two of 8).
    let replicated_lanes =
        if inner_extent > unit.lanes / 2 && overhang_lanes(unit.lanes, 1) { unit.lanes.max(lanes) } else { lanes };
    let replicated_tilings = replicated.as_ref().map_or(Vec::new(), |&(rv, _)| {
        let overhang = |vectors: usize| overhang_lanes(replicated_lanes, vectors);
        tile::candidates(unit, replicated_lanes, Some(extent_of(rv)), true, inner_extent, &overhang)
    });
    let mut tilings: Vec<Tiling> = if tiles.is_some() {
        tile::candidates(unit, lanes, blocked_var.map(|_| blocked_extent), false, inner_extent, &overhang_for)
            .into_iter()
            .flat_map(|t| [t, Tiling { tiles_outside: true, ..t }].into_iter().take(if t.block > 1 { 2 } else { 1 }))
            .collect()
    } else {
        Vec::new()
    };
    tilings.extend(&replicated_tilings);
    let chosen = tiling.filter(|t| tilings.contains(t));
    // Untimed, a row of at most two vectors takes the replicas: the most accumulators within the
    // unit's budget, else the fewest.
    let replicate = match chosen {
        Some(t) => replicated_tilings.contains(&t).then_some(t),
        None if inner_extent <= 2 * replicated_lanes => replicated_tilings
            .iter()
            .filter(|t| t.block * t.vectors <= unit.acc_budget())
            .max_by_key(|t| t.block * t.vectors)
            .or(replicated_tilings.first())
            .copied(),
        None => None,
    };
    let mut tile_lanes = lanes;
    let replicate = replicate.zip(replicated).map(|(t, (rv, rtiles))| {
        tile_lanes = replicated_lanes;
        blocked_var = Some(rv);
        blocked_extent = extent_of(rv);
        tiles = Some(rtiles);
        t
    });
    let tiles_outside = chosen.is_some_and(|t| t.tiles_outside);
    let (block, geometry, overhang) = match (replicate, chosen) {
        (Some(t), _) => (
            t.block,
            Some(tile::Geometry { lanes: tile_lanes, vectors: t.vectors }),
            overhang_lanes(tile_lanes, t.vectors),
        ),
        (None, Some(t)) => (
            t.block.max(BLOCK),
            Some(tile::Geometry { lanes: tile_lanes, vectors: t.vectors }),
            overhang_for(t.vectors),
        ),
        (None, None) => {
            let block = if tiles.is_some() && blocked_extent % 8 == 0 && unit.acc_budget() >= 16 {
                8
            } else {
                block_for(blocked_extent).unwrap_or(BLOCK)
            };
            let replicas = if blocked_var.is_some() { block } else { 1 };
            let max_vectors = (unit.acc_budget() / replicas).clamp(1, MAX_VECTORS);
            let overhang = overhang_for(max_vectors);
            let geometry =
                tiles.as_ref().and_then(|_| tile::Geometry::fit(tile_lanes, max_vectors, inner_extent, overhang));
            (block, geometry, overhang)
        }
    };
    // Past MAX_INNER outputs the accumulator arrays cover the row in chunks: worth it where the
    // inner loop reads memory contiguously (a wide matrix-vector product), not where it would gather
    // (a row reduction along another axis, which the generic loop nest reads contiguously).
    let contiguous = bodies
        .iter()
        .any(|&n| matches!(*ctx.op(n), Op::Load { index, .. } if tile::coefficient(ctx, &free, index, vl) == Some(1)));
    if inner_extent > MAX_INNER && geometry.is_none() && !contiguous {
        return None;
    }
    // A row reduction (softmax's max and sum, a norm's mean) reads along its reduction, not along the
    // output: the generic loop nest reads each row contiguously with a vectorized reduction.
    let innermost: HashSet<u32> = chains
        .iter()
        .filter_map(|c| match *ctx.op(*c.links.last().expect("a chain has a link")) {
            Op::Reduce { var, .. } => Some(var),
            _ => None,
        })
        .collect();
    let streamed: Vec<N> = bodies
        .iter()
        .copied()
        .filter(|&n| matches!(ctx.op(n), Op::Load { .. }) && innermost.iter().any(|&rv| uses(n, rv)))
        .collect();
    let coefficient_of = |n: N, v: u32| match *ctx.op(n) {
        Op::Load { index, .. } => tile::coefficient(ctx, &free, index, v),
        _ => None,
    };
    let along_reduction = streamed.iter().any(|&n| innermost.iter().any(|&rv| coefficient_of(n, rv) == Some(1)));
    let along_output = streamed.iter().any(|&n| coefficient_of(n, vl) == Some(1));
    // A row's maximum is not tiled either (its tiles would gather along the row).
    let tiled_max = chains.iter().any(|c| c.op == RedOp::Max);
    if along_reduction && !along_output && (geometry.is_none() || tiled_max) {
        return None;
    }
    let reps: Vec<usize> = (0..if blocked_var.is_some() { block } else { 1 }).collect();

    let args = {
        let mut a = vec![k.out];
        a.extend(p.kernel_inputs(k));
        a
    };
    let read_bytes = read_bytes_where(p, k, &free, &|_| true);
    let mut r = Renderer::new(ctx, &args, Default::default());
    if let Some(vb) = blocked_var {
        r.blocked = order.iter().copied().filter(|&n| uses(n, vb)).collect();
    }
    header(p, &k.name, &args, &mut r.out);
    let skip = |n: N| matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) || all_links.contains(&n);
    let set_rep = |r: &mut Renderer<'_>, u: usize| {
        if let Some(vb) = blocked_var {
            r.suffix = format!("_u{u}");
            r.var_override = Some((vb, format!("(v{vb} + {u})")));
        }
    };
    let emit_where = |r: &mut Renderer<'_>, pred: &dyn Fn(N) -> bool, indent: usize| {
        for &n in &order {
            if skip(n) || !pred(n) {
                continue;
            }
            if r.blocked.contains(&n) {
                for &u in &reps {
                    set_rep(r, u);
                    r.emit(n, indent);
                }
            } else {
                r.emit(n, indent);
            }
        }
    };

    let width = geometry.map_or(inner_extent.min(MAX_INNER), tile::Geometry::width);
    // The parts: the outer loops' (see `split`), or the inner range's (whole vectors) where every
    // outer loop before it has extent 1, or the inner range's whole tiles where the outer loops give
    // fewer than [`MIN_OUTER_UNITS`] units and the inner range more tiles (a product of a few rows:
    // 4 × 512 by 512 × 3072 ran as one part), or where an outer split would have every part read
    // much more ([`SHARED_BYTES_RATIO`]).
    let step = |v: u32| if Some(v) == blocked_var { block } else { 1 } as u64;
    let outer_units: u64 =
        k.vars.iter().zip(&k.shape).filter(|&(&v, _)| v != vl).map(|(&v, &e)| e as u64 / step(v)).product();
    let inner_unit = if split == inner_pos { tile_lanes } else { width };
    let inner_units = (inner_extent as u64).div_ceil(inner_unit as u64);
    let split_inner = split == inner_pos
        || (outer_units < MIN_OUTER_UNITS && inner_units > outer_units)
        || (inner_units >= MIN_INNER_UNITS
            && shared_by_outer_parts(p, k, &free, vl) > SHARED_BYTES_RATIO * shared_by_inner_parts(p, k, &free, vl));
    let outer_split = (!split_inner).then(|| {
        let loops = k.vars.iter().zip(&k.shape).filter(|&(&v, _)| v != vl);
        Split::new(loops.map(|(&v, &e)| Loop { var: v, extent: e as u64, step: step(v) }).collect(), false)
            .expect("an outer loop has extent > 1")
    });
    let (lo, hi, inner_parts) = if split_inner {
        split::inner_range(inner_extent as u64, inner_unit as u64)
    } else {
        ("0".to_string(), format!("{inner_extent}"), 1)
    };
    // Outputs [xs, xe) per tile; the tile computed is [x0, xt): a last partial tile is shifted back
    // to end at `hi` (recomputing some outputs, which are not stored twice) so it stays full.
    let open_tiles = |out: &mut String, indent: usize| {
        let pad = "  ".repeat(indent);
        let _ = writeln!(out, "{pad}const i64 x_lo = {lo}, x_hi = {hi};");
        let _ = writeln!(out, "{pad}for (i64 xs = x_lo; xs < x_hi; xs += {width}) {{");
        let _ = writeln!(out, "{pad}  const i64 xe = xs + {width} < x_hi ? xs + {width} : x_hi;");
        if overhang && geometry.is_some() {
            let _ = writeln!(out, "{pad}  const i64 x0 = xs, xt = xs + {width};");
        } else {
            let _ = writeln!(
                out,
                "{pad}  const i64 x0 = xe - xs == {width} || x_hi - x_lo < {width} ? xs : x_hi - {width};"
            );
            let _ = writeln!(out, "{pad}  const i64 xt = x0 + {width} < x_hi ? x0 + {width} : x_hi;");
        }
    };
    // Outer loops (all output vars but the inner one), values hoisted to the loop they depend on.
    emit_where(&mut r, &|n| outer_only(n) && free[&n].is_empty(), 1);
    let mut indent = 1;
    for (&v, &extent) in k.vars.iter().zip(&k.shape) {
        if v == vl {
            continue;
        }
        let step = if Some(v) == blocked_var { block } else { 1 };
        if tiles_outside && Some(v) == blocked_var {
            open_tiles(&mut r.out, indent);
            indent += 1;
        }
        open_loop(&mut r.out, indent, v, extent, step, outer_split.as_ref().and_then(|s| s.header(v)));
        indent += 1;
        let here = depth_outer(v);
        emit_where(
            &mut r,
            &|n| outer_only(n) && free[&n].iter().filter_map(|&u| depth_outer(u)).max() == here && here.is_some(),
            indent,
        );
    }
    if !tiles_outside {
        open_tiles(&mut r.out, indent);
        indent += 1;
    }
    for (ci, chain) in chains.iter().enumerate() {
        let dtype = ctx.dtype(chain.top);
        let t = ctype(dtype);
        let blocked_chain = r.blocked.contains(&chain.top);
        let acc = if blocked_chain { format!("acc{ci}@") } else { format!("acc{ci}") };
        let pad = "  ".repeat(indent);
        let init = super::render::literal(ctx.reduce_identity_const(chain.op, dtype)?, dtype);
        let chain_reps: Vec<usize> = if blocked_chain { reps.clone() } else { vec![0] };
        // Only the scalar path fills the accumulator arrays with the identity: a full register tile
        // overwrites every element from its registers (the fills were 14% of a 16-deep 1×1
        // convolution on a Zen 4).
        let init_arrays = |r: &mut Renderer<'_>, pad: &str| {
            for &u in &chain_reps {
                set_rep(r, u);
                let a = acc.replace('@', &r.suffix);
                let _ = writeln!(r.out, "{pad}for (i64 v{vl} = x0; v{vl} < xt; v{vl}++) {a}[v{vl} - x0] = {init};");
            }
        };
        for &u in &chain_reps {
            set_rep(&mut r, u);
            let a = acc.replace('@', &r.suffix);
            let _ = writeln!(r.out, "{pad}{t} {a}[{width}] __attribute__((aligned(64)));");
        }
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
        let tiled = tiles.as_ref().map(|t| &t[ci]).zip(geometry);
        // A long reduction without a blocked variable or a tile (a matrix-vector product) steps its
        // innermost variable by `k_unroll`: each pass over the accumulator array adds that many
        // rows, in the same order as one at a time.
        let fits = |u: usize| rvars.last().is_some_and(|&(_, e)| e % u as u64 == 0 && e >= 4 * u as u64);
        let k_unroll =
            if read_bytes >= STREAMED_BYTES && fits(K_UNROLL_STREAMED) { K_UNROLL_STREAMED } else { K_UNROLL };
        let unroll =
            rvars.last().filter(|_| blocked_var.is_none() && tiled.is_none() && fits(k_unroll)).map(|&(rv, _)| rv);
        if let Some(ru) = unroll {
            r.blocked = p1.iter().copied().filter(|&n| uses(n, ru)).collect();
        }
        let unrolled = |r: &mut Renderer<'_>, ru: u32, u: usize| {
            r.suffix = format!("_k{u}");
            r.var_override = Some((ru, format!("(v{ru} + {u})")));
        };
        // Emits the nodes `pred` selects, each once per unrolled step where it depends on the
        // unrolled variable.
        let emit_unrolled = |r: &mut Renderer<'_>, ru: u32, pred: &dyn Fn(N) -> bool, ind: usize| {
            for &n in &order {
                if skip(n) || !pred(n) {
                    continue;
                }
                if r.blocked.contains(&n) {
                    for u in 0..k_unroll {
                        unrolled(r, ru, u);
                        r.emit(n, ind);
                    }
                    r.suffix.clear();
                    r.var_override = None;
                } else {
                    r.emit(n, ind);
                }
            }
        };
        let unroll_window = std::cell::Cell::new(false);
        let mut open_loops = |r: &mut Renderer<'_>, indent: usize| -> usize {
            let mut ind = indent;
            for (j, &(rv, extent)) in rvars.iter().enumerate() {
                let pad = "  ".repeat(ind);
                let step = if Some(rv) == unroll { k_unroll } else { 1 };
                let pragma = if unroll_window.get() { "PL_UNROLL " } else { "" };
                let _ = writeln!(r.out, "{pad}{pragma}for (i64 v{rv} = 0; v{rv} < {extent}; v{rv} += {step}) {{");
                ind += 1;
                let deeper: Vec<u32> = rvars[j + 1..].iter().map(|x| x.0).collect();
                let pred = |n: N| p1.contains(&n) && uses(n, rv) && !uses(n, vl) && !deeper.iter().any(|&d| uses(n, d));
                match unroll {
                    Some(ru) => emit_unrolled(r, ru, &pred, ind),
                    None => emit_where(r, &pred, ind),
                }
            }
            ind
        };
        let mut close_loops = |r: &mut Renderer<'_>, ind: usize| {
            for i in (ind - rvars.len()..ind).rev() {
                let _ = writeln!(r.out, "{}}}", "  ".repeat(i));
            }
        };
        let mut scalar_indent = indent;
        if let Some((tb, g)) = tiled {
            let _ = writeln!(r.out, "{pad}if (xt - x0 == {width}) {{");
            let acc_name = |u: usize| acc.replace('@', &if blocked_chain { format!("_u{u}") } else { String::new() });
            unroll_window.set(replicate.is_some());
            tile::emit_chain(
                &mut r,
                tb,
                chain.body,
                vl,
                g,
                indent + 1,
                &chain_reps,
                &acc_name,
                &set_rep,
                &mut open_loops,
                &mut close_loops,
            );
            unroll_window.set(false);
            let _ = writeln!(r.out, "{pad}}} else {{");
            scalar_indent += 1;
            init_arrays(&mut r, &"  ".repeat(scalar_indent));
        } else {
            init_arrays(&mut r, &pad);
        }
        let ind = open_loops(&mut r, scalar_indent);
        let pad_in = "  ".repeat(ind);
        // A window over unpadded input (pooling) guards its loads by the column: the inner loop is
        // peeled so that the interior runs unguarded.
        let inner_nodes: Vec<N> =
            order.iter().copied().filter(|&n| !skip(n) && p1.contains(&n) && uses(n, vl)).collect();
        let peel = (unroll.is_none() && chain_reps.len() == 1 && tiled.is_none())
            .then(|| Peel::find(ctx, &free, &inner_nodes, vl))
            .flatten();
        if let Some(peel) = peel {
            set_rep(&mut r, chain_reps[0]);
            let bounds = ("x0".to_string(), "xt".to_string());
            let a = format!("{}[v{vl} - x0]", acc.replace('@', &r.suffix));
            peel::emit(&mut r, &free, &peel, vl, &bounds, ind, "PL_SIMD ", None, &mut |r, i| {
                for &n in &inner_nodes {
                    r.emit(n, i);
                }
                let b = r.value(chain.body);
                let _ = writeln!(r.out, "{}{}", "  ".repeat(i), fold(chain.op, dtype, &a, &b));
            });
            close_loops(&mut r, ind);
            if tiled.is_some() {
                let _ = writeln!(r.out, "{pad}}}");
            }
            r.names.insert(chain.top, format!("{acc}[v{vl} - x0]"));
            continue;
        }
        let _ = writeln!(r.out, "{pad_in}PL_SIMD for (i64 v{vl} = x0; v{vl} < xt; v{vl}++) {{");
        let steps: Vec<(usize, usize)> = match unroll {
            Some(ru) => {
                emit_unrolled(&mut r, ru, &|n| p1.contains(&n) && uses(n, vl), ind + 1);
                (0..k_unroll).map(|k| (0, k)).collect()
            }
            None => {
                emit_where(&mut r, &|n| p1.contains(&n) && uses(n, vl), ind + 1);
                chain_reps.iter().map(|&u| (u, 0)).collect()
            }
        };
        for (u, k) in steps {
            match unroll {
                Some(ru) => unrolled(&mut r, ru, k),
                None => set_rep(&mut r, u),
            }
            let b = r.value(chain.body);
            let a = format!("{}[v{vl} - x0]", acc.replace('@', &r.suffix));
            let _ = writeln!(r.out, "{pad_in}  {}", fold(chain.op, dtype, &a, &b));
        }
        let _ = writeln!(r.out, "{pad_in}}}");
        if unroll.is_some() {
            r.suffix.clear();
            r.var_override = None;
            r.blocked.clear();
        }
        close_loops(&mut r, ind);
        if tiled.is_some() {
            let _ = writeln!(r.out, "{pad}}}");
        }
        r.names.insert(chain.top, format!("{acc}[v{vl} - x0]"));
    }
    // Phase 2: the epilogue over the inner dimension, one store per replica.
    let pad = "  ".repeat(indent);
    let _ = writeln!(r.out, "{pad}PL_SIMD for (i64 v{vl} = xs; v{vl} < xe; v{vl}++) {{");
    emit_where(&mut r, &|n| p2.contains(&n) && uses(n, vl), indent + 1);
    let st = crate::lazy::strides(&k.shape);
    for &u in &reps {
        set_rep(&mut r, u);
        let root = r.value(k.expr);
        let flat: Vec<String> = k
            .vars
            .iter()
            .zip(&st)
            .zip(&k.shape)
            .filter(|(_, &d)| d > 1)
            .map(
                |((&v, s), _)| {
                    if Some(v) == blocked_var {
                        format!("(v{v} + {u}) * {s}")
                    } else {
                        format!("v{v} * {s}")
                    }
                },
            )
            .collect();
        let _ = writeln!(r.out, "{pad}  b{}[{}] = {root};", k.out, flat.join(" + "));
    }
    let _ = writeln!(r.out, "{pad}}}");
    for i in (1..indent).rev() {
        let _ = writeln!(r.out, "{}}}", "  ".repeat(i));
    }
    r.out.push_str("}\n");
    let parts = outer_split.map_or(inner_parts, |s| s.parts());
    Some(CKernel { name: k.name.clone(), source: r.out, args, parts, tilings })
}

/// The outer variable a short window's register tile replicates where no variable shares its loads
/// ([`tile::classify`] with `replicated`): one that some load along the inner variable depends on,
/// with the fewest loads depending on it (a depthwise convolution's output row, on which only the
/// input depends, before its channel, on which the weight depends too), the innermost among equals.
fn replicated_var(
    ctx: &crate::ir::Ctx,
    bodies: &[N],
    outer: &[u32],
    vl: u32,
    free: &std::collections::HashMap<N, Vec<u32>>,
    extent: &dyn Fn(u32) -> usize,
) -> Option<u32> {
    let loads: Vec<N> = bodies.iter().copied().filter(|&n| matches!(ctx.op(n), Op::Load { .. })).collect();
    outer
        .iter()
        .enumerate()
        .filter(|&(_, &v)| extent(v) >= 2 && loads.iter().any(|n| free[n].contains(&v) && free[n].contains(&vl)))
        .min_by_key(|&(depth, &v)| (loads.iter().filter(|n| free[n].contains(&v)).count(), std::cmp::Reverse(depth)))
        .map(|(_, &v)| v)
}

/// Bytes of the buffers `k` reads with no outer variable in the index: every part of an outer
/// split reads them whole.
fn shared_by_outer_parts(p: &Program, k: &Kernel, free: &std::collections::HashMap<N, Vec<u32>>, vl: u32) -> usize {
    let outer: Vec<u32> = k.vars.iter().zip(&k.shape).filter(|&(&v, &e)| v != vl && e > 1).map(|(&v, _)| v).collect();
    read_bytes_where(p, k, free, &|vars| !outer.iter().any(|v| vars.contains(v)))
}

/// Bytes of the buffers `k` reads without the inner variable in the index: every part of an inner
/// split reads them whole.
fn shared_by_inner_parts(p: &Program, k: &Kernel, free: &std::collections::HashMap<N, Vec<u32>>, vl: u32) -> usize {
    read_bytes_where(p, k, free, &|vars| !vars.contains(&vl))
}

/// Bytes of the buffers (other than its output) `k` loads with indices whose variables `pred` accepts.
fn read_bytes_where(
    p: &Program,
    k: &Kernel,
    free: &std::collections::HashMap<N, Vec<u32>>,
    pred: &dyn Fn(&[u32]) -> bool,
) -> usize {
    let mut bufs: Vec<u32> = free
        .iter()
        .filter_map(|(&n, vars)| match *p.ctx.op(n) {
            Op::Load { buf, .. } if buf != k.out && pred(vars) => Some(buf),
            _ => None,
        })
        .collect();
    bufs.sort_unstable();
    bufs.dedup();
    bufs.iter().map(|&b| p.bufs[b as usize].nbytes()).sum()
}
