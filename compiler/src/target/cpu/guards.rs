//! The guard-free range of an innermost loop.
//!
//! A read of padding is guarded, `valid ? b[valid ? i : 0] : 0`, and where `valid` does not change
//! along the loop clang still sees a select in the index and gathers: the row guard of a padded
//! copy whose rows the parts fuse into one counter, a pooling window's row guard. Each guard is a
//! conjunction of comparisons `x < c` and their negations with `x = a·v + Σ bⱼ·wⱼ + r` affine in the
//! loop variable `v` (`a ≥ 0`) and in reduction variables `wⱼ ∈ 0..Eⱼ`, `r` fixed for the loop. Such a
//! comparison holds (or fails) for every `wⱼ` on a range of `v` that `r` gives at run time, so the
//! loop is cut in three: the range on which every guard holds, emitted with those comparisons
//! known (its loads plain, contiguous or interleaved), and the iterations before and after it,
//! emitted as they were.

use std::collections::HashMap;
use std::fmt::Write;

use pilot_core::DType;

use crate::ir::{BinOp, Ctx, Op, UnOp, N};

use super::peel::{at_zero, ceil_div, floor_div};
use super::period::Period;
use super::render::{LoopSpan, Renderer};
use super::tile::coefficient;

/// A comparison `x < c` that the guards need to hold (`holds`) or to fail.
struct Literal {
    cmp: N,
    holds: bool,
    x: N,
    c: i64,
}

/// The guards of the loads inside one loop, and what bounds the variables of their indices.
pub(super) struct Guards<'k> {
    ctx: &'k Ctx,
    free: &'k HashMap<N, Vec<u32>>,
    valids: Vec<N>,
    /// The extent of each reduction variable of the kernel.
    extents: HashMap<u32, u64>,
    /// The loop's index divisions, run in whole periods where every guard holds (or in the only loop).
    period: Option<Period>,
}

impl<'k> Guards<'k> {
    /// The guards of the loads among `order` that depend on `v`.
    pub fn new(ctx: &'k Ctx, free: &'k HashMap<N, Vec<u32>>, order: &[N], v: u32) -> Guards<'k> {
        let mut valids = Vec::new();
        let mut extents = HashMap::new();
        for &n in order {
            match *ctx.op(n) {
                Op::Load { valid: Some(g), .. } if free[&n].contains(&v) && !valids.contains(&g) => valids.push(g),
                Op::Reduce { var, extent, .. } => {
                    extents.insert(var, extent);
                }
                _ => {}
            }
        }
        Guards { ctx, free, valids, extents, period: None }
    }

    /// These guards with the loop that runs unguarded (or the only one) emitted in whole periods of
    /// `period`; the iterations where some guard fails, a border, run as they are.
    pub fn with_period(self, period: Option<Period>) -> Self {
        Guards { period, ..self }
    }

    /// One loop, in whole periods where `periodic`.
    fn emit_one(
        &self,
        r: &mut Renderer<'_>,
        span: LoopSpan<'_>,
        periodic: bool,
        body: &mut dyn FnMut(&mut Renderer<'_>, usize),
    ) {
        if let Some(period) = self.period.as_ref().filter(|_| periodic) {
            return period.emit(r, span, body);
        }
        let LoopSpan { v, lo, hi, indent, pragma } = span;
        let pad = "  ".repeat(indent);
        let _ = writeln!(r.out, "{pad}{pragma}for (i64 v{v} = {lo}; v{v} < {hi}; v{v}++) {{");
        body(r, indent + 1);
        let _ = writeln!(r.out, "{pad}}}");
    }

    /// The loop `span`, `body` emitting its statements at the indent it is given: one loop, or
    /// three around the range where every guard not already `known` to the renderer holds.
    pub fn emit_loop(&self, r: &mut Renderer<'_>, span: LoopSpan<'_>, body: &mut dyn FnMut(&mut Renderer<'_>, usize)) {
        let LoopSpan { v, lo, hi, indent, .. } = span;
        let pad = "  ".repeat(indent);
        let literals = self.literals(&r.known, v);
        if literals.is_empty() {
            return self.emit_one(r, span, true, body);
        }
        let _ = writeln!(r.out, "{pad}{{ const i64 g{v}_a = {lo}, g{v}_b = {hi};");
        let _ = writeln!(r.out, "{pad}  i64 g{v}_lo = g{v}_a, g{v}_hi = g{v}_b; u8 g{v}_ok = 1;");
        for l in &literals {
            let _ = writeln!(r.out, "{pad}  {}", self.bound(r, l, v));
        }
        let _ = writeln!(
            r.out,
            "{pad}  g{v}_lo = g{v}_lo < g{v}_a ? g{v}_a : g{v}_lo > g{v}_b ? g{v}_b : g{v}_lo;\n\
             {pad}  g{v}_hi = !g{v}_ok || g{v}_hi < g{v}_lo ? g{v}_lo : g{v}_hi > g{v}_b ? g{v}_b : g{v}_hi;"
        );
        let names = r.names.clone();
        let known = r.known.clone();
        let ranges = [(format!("g{v}_a"), format!("g{v}_lo")), (format!("g{v}_lo"), format!("g{v}_hi"))];
        let ranges = ranges.into_iter().chain([(format!("g{v}_hi"), format!("g{v}_b"))]);
        for (i, (from, to)) in ranges.enumerate() {
            r.names = names.clone();
            r.known = known.clone();
            if i == 1 {
                r.known.extend(literals.iter().map(|l| (l.cmp, l.holds)));
                for &g in &self.valids {
                    self.settle(g, true, &mut r.known);
                }
            }
            let part = LoopSpan { lo: &from, hi: &to, indent: indent + 1, ..span };
            self.emit_one(r, part, i == 1, body);
        }
        r.names = names;
        r.known = known;
        let _ = writeln!(r.out, "{pad}}}");
    }

    /// The comparisons every live guard needs, each one way (a comparison some guard needs to hold
    /// and another to fail stays evaluated), whose index is affine in `v`, not falling along it,
    /// and in the reductions' variables.
    fn literals(&self, known: &HashMap<N, bool>, v: u32) -> Vec<Literal> {
        let mut need: Vec<(N, Option<bool>)> = Vec::new();
        for &g in &self.valids {
            let mut terms = Vec::new();
            if !self.conjuncts(g, true, known, &mut terms) {
                continue;
            }
            for (cmp, holds) in terms {
                match need.iter_mut().find(|(n, _)| *n == cmp) {
                    Some((_, h)) if *h != Some(holds) => *h = None,
                    Some(_) => {}
                    None => need.push((cmp, Some(holds))),
                }
            }
        }
        need.into_iter()
            .filter_map(|(cmp, holds)| {
                let Op::Binary(BinOp::Lt, x, c) = *self.ctx.op(cmp) else { unreachable!() };
                let c = self.ctx.const_value(c)?.as_i64();
                // Rising along the loop or constant: indices fall along it only where a copy
                // reverses a row after padding it, which guards the reversed index instead.
                let rising = coefficient(self.ctx, self.free, x, v).is_some_and(|a| a >= 0);
                let affine = self.free[&x]
                    .iter()
                    .filter(|&&w| self.extents.contains_key(&w))
                    .all(|&w| coefficient(self.ctx, self.free, x, w).is_some());
                (rising && affine).then_some(Literal { cmp, holds: holds?, x, c })
            })
            .collect()
    }

    /// Pushes the comparisons `n` (read as `positive` or negated) is a conjunction of, with the
    /// value each needs for `n` to be `positive`; false where a part is known to make it fail.
    fn conjuncts(&self, n: N, positive: bool, known: &HashMap<N, bool>, out: &mut Vec<(N, bool)>) -> bool {
        if let Some(&k) = known.get(&n) {
            return k == positive;
        }
        match *self.ctx.op(n) {
            Op::Binary(BinOp::And, a, b) if positive && self.ctx.dtype(n) == DType::Bool => {
                self.conjuncts(a, true, known, out) && self.conjuncts(b, true, known, out)
            }
            Op::Unary(UnOp::Not, x) => self.conjuncts(x, !positive, known, out),
            Op::Binary(BinOp::Lt, x, c) if !self.ctx.dtype(x).is_float() && self.ctx.const_value(c).is_some() => {
                out.push((n, positive));
                true
            }
            Op::Const(c) => (c.as_i64() != 0) == positive,
            _ => true,
        }
    }

    /// Whether `n` is known to be `positive` from the comparisons in `known`; the conjunctions and
    /// negations that it settles (guards already emitted outside the loop among them) are added.
    fn settle(&self, n: N, positive: bool, known: &mut HashMap<N, bool>) -> bool {
        if let Some(&k) = known.get(&n) {
            return k == positive;
        }
        let settled = match *self.ctx.op(n) {
            Op::Binary(BinOp::And, a, b) if positive && self.ctx.dtype(n) == DType::Bool => {
                self.settle(a, true, known) & self.settle(b, true, known)
            }
            Op::Unary(UnOp::Not, x) => self.settle(x, !positive, known),
            Op::Const(c) => return (c.as_i64() != 0) == positive,
            _ => false,
        };
        if settled {
            known.insert(n, positive);
        }
        settled
    }

    /// The C statement that narrows `g{v}_lo..g{v}_hi` (or clears `g{v}_ok`) to where `l` holds
    /// as it needs to for every value of the reductions' variables.
    fn bound(&self, r: &Renderer<'_>, l: &Literal, v: u32) -> String {
        let (ctx, free) = (self.ctx, self.free);
        let zeroed: Vec<u32> =
            free[&l.x].iter().copied().filter(|&w| w == v || self.extents.contains_key(&w)).collect();
        let rest = at_zero(ctx, free, l.x, &zeroed, &|n| r.value(n));
        let (mut bmin, mut bmax) = (0i64, 0i64);
        for &w in zeroed.iter().filter(|&&w| w != v) {
            let span = coefficient(ctx, free, l.x, w).expect("affine") * (self.extents[&w] as i64 - 1);
            bmin += span.min(0);
            bmax += span.max(0);
        }
        let a = coefficient(ctx, free, l.x, v).expect("affine");
        let c = l.c;
        let rest = format!("(i64)({rest})");
        // max x = a·v + rest + bmax < c, or min x = a·v + rest + bmin >= c, for every v in range
        // (a >= 0: the last v bounds the first, the first v the second).
        match (a, l.holds) {
            (0, true) => format!("g{v}_ok &= {rest} + {bmax}LL < {c}LL;"),
            (0, false) => format!("g{v}_ok &= {rest} + {bmin}LL >= {c}LL;"),
            (_, true) => {
                let f = floor_div(&format!("{}LL - {rest}", c - 1 - bmax), a);
                format!("{{ const i64 e_ = {f} + 1; if (e_ < g{v}_hi) g{v}_hi = e_; }}")
            }
            (_, false) => {
                let f = ceil_div(&format!("{}LL - {rest}", c - bmin), a);
                format!("{{ const i64 e_ = {f}; if (e_ > g{v}_lo) g{v}_lo = e_; }}")
            }
        }
    }
}
