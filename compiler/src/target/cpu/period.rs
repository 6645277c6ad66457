//! The innermost loop in whole periods of its index divisions.
//!
//! Nearest upsampling, depth-to-space and the like read through `x / d` and `x % d` of an index
//! `x = v + c` of the innermost loop variable `v` (`c` a constant): not affine in `v`, so clang
//! gathers or keeps the loop scalar (ppocr_det's upsample-and-add copies). Over whole periods
//! `x = D·q + K` (`D` the divisors' least common multiple, `K ∈ 0..D`) they are `(D/d)·q + K/d` and
//! `K % d`: the loop runs over `q`, its body emitted once per `K` with `v` and the divisions fixed,
//! so every access is affine in `q` (contiguous, or interleaved across the copies). The iterations
//! before the first whole period and after the last run as they were.

use std::collections::HashMap;
use std::fmt::Write;

use crate::ir::{BinOp, Ctx, Op, N};

use super::peel::{ceil_div, floor_div};
use super::render::{LoopSpan, Renderer};
use super::tile::coefficient;

/// The longest period unrolled (copies of the loop body).
const MAX_PERIOD: i64 = 8;

/// `x / divisor`, or `x % divisor` where `remainder`.
#[derive(Clone, Copy)]
struct Division {
    node: N,
    divisor: i64,
    remainder: bool,
}

/// The divisions of one index `x = v + c` by constants, and their period.
pub(super) struct Period {
    /// The least common multiple of the divisors.
    d: i64,
    c: i64,
    divisions: Vec<Division>,
}

impl Period {
    /// The divisions among `nodes` of the index with the most of them, if their period is at most
    /// [`MAX_PERIOD`].
    pub fn find(ctx: &Ctx, free: &HashMap<N, Vec<u32>>, nodes: &[N], v: u32) -> Option<Period> {
        let mut by_offset: Vec<(i64, Vec<Division>)> = Vec::new();
        for &n in nodes {
            let Op::Binary(op @ (BinOp::Div | BinOp::Rem), x, d) = *ctx.op(n) else { continue };
            let Some(d) = ctx.const_value(d).map(|d| d.as_i64()).filter(|&d| d >= 2) else { continue };
            if ctx.dtype(n).is_float() || free[&x] != [v] || coefficient(ctx, free, x, v) != Some(1) {
                continue;
            }
            let mut env = HashMap::from([(v, 0)]);
            let Some(c) = crate::ir::interp::eval(ctx, x, &mut env, &|_, _| None).map(|c| c.as_i64()) else {
                continue;
            };
            let division = Division { node: n, divisor: d, remainder: op == BinOp::Rem };
            match by_offset.iter_mut().find(|(o, _)| *o == c) {
                Some((_, ds)) => ds.push(division),
                None => by_offset.push((c, vec![division])),
            }
        }
        let (c, divisions) = by_offset.into_iter().max_by_key(|(_, ds)| ds.len())?;
        let d = divisions.iter().fold(1, |l, division| lcm(l, division.divisor));
        (d <= MAX_PERIOD).then_some(Period { d, c, divisions })
    }

    /// The loop `span` of an elementwise kernel: whole periods as one loop over `q` with the body
    /// emitted once per offset, the rest before and after as plain loops headed by its pragma.
    pub fn emit(&self, r: &mut Renderer<'_>, span: LoopSpan<'_>, body: &mut dyn FnMut(&mut Renderer<'_>, usize)) {
        let LoopSpan { v, lo, hi, indent, pragma } = span;
        let pad = "  ".repeat(indent);
        let (d, c) = (self.d, self.c);
        let _ = writeln!(r.out, "{pad}{{ const i64 pa{v} = {lo}, pb{v} = {hi};");
        // Whole periods q: x = v + c in d·q .. d·q + d, x >= 0 (C division truncates).
        let (first, last) = (ceil_div(&format!("pa{v} + {c}LL"), d), floor_div(&format!("pb{v} + {c}LL"), d));
        let _ = writeln!(r.out, "{pad}  i64 ql{v} = {first}, qh{v} = {last};");
        let _ = writeln!(r.out, "{pad}  if (ql{v} < 0) ql{v} = 0; if (qh{v} < ql{v}) qh{v} = ql{v};");
        let _ = writeln!(r.out, "{pad}  i64 m0{v} = {d}LL * ql{v} - {c}LL, m1{v} = {d}LL * qh{v} - {c}LL;");
        let _ = writeln!(
            r.out,
            "{pad}  if (m0{v} > pb{v}) m0{v} = pb{v}; if (m1{v} > pb{v}) m1{v} = pb{v}; if (m1{v} < m0{v}) m1{v} = m0{v};"
        );
        let names = r.names.clone();
        let _ = writeln!(r.out, "{pad}  {pragma}for (i64 v{v} = pa{v}; v{v} < m0{v}; v{v}++) {{");
        body(r, indent + 2);
        let _ = writeln!(r.out, "{pad}  }}");
        // Each (q, K) stores its own element of an output no input aliases: nothing carries from one
        // period to the next, which clang cannot prove through the copies' index arithmetic.
        let _ = writeln!(r.out, "{pad}  PL_SIMD for (i64 q{v} = ql{v}; q{v} < qh{v}; q{v}++) {{");
        for k in 0..d {
            r.names = names.clone();
            for &Division { node, divisor, remainder } in &self.divisions {
                let value = if remainder {
                    format!("{}LL", k % divisor)
                } else {
                    format!("({}LL * q{v} + {}LL)", d / divisor, k / divisor)
                };
                r.exprs.insert(node, value);
            }
            let _ = writeln!(r.out, "{pad}    {{ const i64 v{v} = {d}LL * q{v} + {}LL;", k - c);
            body(r, indent + 3);
            let _ = writeln!(r.out, "{pad}    }}");
        }
        for division in &self.divisions {
            r.exprs.remove(&division.node);
        }
        r.names = names.clone();
        let _ = writeln!(r.out, "{pad}  }}");
        let _ = writeln!(r.out, "{pad}  {pragma}for (i64 v{v} = m1{v}; v{v} < pb{v}; v{v}++) {{");
        body(r, indent + 2);
        let _ = writeln!(r.out, "{pad}  }}");
        r.names = names;
        let _ = writeln!(r.out, "{pad}}}");
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    let gcd = |mut a: i64, mut b: i64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}
