//! Index-range peeling of an elementwise kernel's innermost loop.
//!
//! Padding, concatenation and slicing guard their loads with comparisons of one affine index of the
//! inner variable `v` against constants: `x < c₁`, `x < c₂`, … with `x = a·v + r` (`a > 0`, `r` fixed
//! for the loop). Each comparison holds exactly for `v < ⌈(cᵢ − r) / a⌉`, so the sorted split points
//! cut the loop into segments on which every comparison is a constant. Each segment is emitted as its
//! own loop with the comparisons replaced by their value: the interior of a padded copy becomes a
//! plain copy clang vectorizes, and the borders a plain fill.

use std::collections::HashMap;
use std::fmt::Write;

use crate::ir::{BinOp, Ctx, Op, N};

use super::guards::Guards;
use super::render::{LoopSpan, Renderer};
use super::tile::coefficient;

/// The comparisons of one affine index against constants, sorted by constant.
pub(super) struct Peel {
    /// The compared index, `a·v + r`.
    pub index: N,
    pub a: i64,
    /// `(comparison node, constant)` in ascending constant order.
    pub cuts: Vec<(N, i64)>,
}

impl Peel {
    /// The comparisons among `nodes` (the inner loop's) that peel the loop over `v`, grouped by the
    /// index with the most of them; `None` when there are none.
    pub fn find(ctx: &Ctx, free: &HashMap<N, Vec<u32>>, nodes: &[N], v: u32) -> Option<Peel> {
        let mut groups: Vec<Peel> = Vec::new();
        for &n in nodes {
            let Op::Binary(BinOp::Lt, x, c) = *ctx.op(n) else { continue };
            let Some(c) = ctx.const_value(c).map(|c| c.as_i64()) else { continue };
            if ctx.dtype(x).is_float() || !free[&x].contains(&v) {
                continue;
            }
            let Some(a) = coefficient(ctx, free, x, v).filter(|&a| a > 0) else { continue };
            match groups.iter_mut().find(|g| g.index == x) {
                Some(g) => g.cuts.push((n, c)),
                None => groups.push(Peel { index: x, a, cuts: vec![(n, c)] }),
            }
        }
        let mut best = groups.into_iter().max_by_key(|g| g.cuts.len())?;
        best.cuts.sort_by_key(|&(n, c)| (c, n));
        Some(best)
    }
}

/// `n` with the variables `vars` set to 0, as a C expression over already emitted values
/// (`value`), for the affine index arithmetic [`coefficient`] accepts in each of them.
pub(super) fn at_zero(
    ctx: &Ctx,
    free: &HashMap<N, Vec<u32>>,
    n: N,
    vars: &[u32],
    value: &dyn Fn(N) -> String,
) -> String {
    if !free[&n].iter().any(|w| vars.contains(w)) {
        return value(n);
    }
    match *ctx.op(n) {
        Op::Var(_) => "0".into(),
        Op::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
            let sym = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                _ => "*",
            };
            format!("({} {sym} {})", at_zero(ctx, free, a, vars, value), at_zero(ctx, free, b, vars, value))
        }
        Op::Cast(x) => format!("({})({})", super::render::ctype(ctx.dtype(n)), at_zero(ctx, free, x, vars, value)),
        _ => unreachable!("coefficient() accepted only affine integer arithmetic"),
    }
}

/// `⌊n / d⌋` in C for `d > 0`.
pub(super) fn floor_div(n: &str, d: i64) -> String {
    if d == 1 {
        return format!("({n})");
    }
    format!("({n} >= 0 ? ({n}) / {d} : -((-({n}) + {}) / {d}))", d - 1)
}

/// `⌈n / d⌉` in C for `d > 0`.
pub(super) fn ceil_div(n: &str, d: i64) -> String {
    if d == 1 {
        return format!("({n})");
    }
    format!("({n} >= 0 ? ({n} + {}) / {d} : -((-({n})) / {d}))", d - 1)
}

/// The loop over `v` in `bounds` (C expressions) as one loop per segment of `peel`, each headed by
/// `pragma` and with the peeled comparisons known while `body` emits the loop's nodes and its
/// statement at the indent it is given; the innermost loop's segments each through `guards`.
#[allow(clippy::too_many_arguments)]
pub(super) fn emit(
    r: &mut Renderer<'_>,
    free: &HashMap<N, Vec<u32>>,
    peel: &Peel,
    v: u32,
    bounds: &(String, String),
    indent: usize,
    pragma: &str,
    guards: Option<&Guards<'_>>,
    body: &mut dyn FnMut(&mut Renderer<'_>, usize),
) {
    let pad = "  ".repeat(indent);
    let rest = at_zero(r.ctx, free, peel.index, &[v], &|n| r.value(n));
    let (a, hi) = (peel.a, &bounds.1);
    let _ = writeln!(r.out, "{pad}{{ const i64 r{v} = {rest}, s{v}_0 = {};", bounds.0);
    // Cut i holds exactly for v < ceil((c - r) / a); the split points are kept in order and in bounds.
    for (i, &(_, c)) in peel.cuts.iter().enumerate() {
        let ceil = ceil_div(&format!("{c}LL - r{v}"), a);
        let (s, prev) = (format!("s{v}_{}", i + 1), format!("s{v}_{i}"));
        let _ = writeln!(r.out, "{pad}  i64 {s} = {ceil}; {s} = {s} < {prev} ? {prev} : {s} > {hi} ? {hi} : {s};");
    }
    let m = peel.cuts.len();
    let names = r.names.clone();
    let known = r.known.clone();
    for seg in 0..=m {
        let lo = format!("s{v}_{seg}");
        let end = if seg == m { hi.clone() } else { format!("s{v}_{}", seg + 1) };
        // In segment `seg`, cut i holds iff i >= seg (on top of what enclosing loops know).
        r.known = known.clone();
        r.known.extend(peel.cuts.iter().enumerate().map(|(i, &(n, _))| (n, i >= seg)));
        r.names = names.clone();
        match guards {
            Some(g) => g.emit_loop(r, LoopSpan { v, lo: &lo, hi: &end, indent: indent + 1, pragma }, body),
            None => {
                let _ = writeln!(r.out, "{pad}  {pragma}for (i64 v{v} = {lo}; v{v} < {end}; v{v}++) {{");
                body(r, indent + 2);
                let _ = writeln!(r.out, "{pad}  }}");
            }
        }
    }
    r.known = known;
    r.names = names;
    let _ = writeln!(r.out, "{pad}}}");
}
