//! Algebraic simplification of index arithmetic, with range analysis.
//!
//! Clean indices matter: a reshape turns coordinates into `(flat / stride) % dim` chains, and the
//! rules here fold them back (`(a*k + b) / k → a` when `0 <= b < k`, `x % k → x` when `x < k`, ...),
//! so kernels index memory as plainly as hand-written loops.

use super::{BinOp, Const, Ctx, Op, INDEX, N};

/// Inclusive value range of an integer node; `None` when unknown.
pub fn range(ctx: &Ctx, n: N) -> Option<(i64, i64)> {
    if ctx.dtype(n) != INDEX {
        return None;
    }
    match ctx.op(n) {
        Op::Const(c) => Some((c.as_i64(), c.as_i64())),
        Op::Var(v) => Some((0, ctx.var_extent(*v) as i64 - 1)),
        Op::Binary(op, a, b) => {
            let (a0, a1) = range(ctx, *a)?;
            let (b0, b1) = range(ctx, *b)?;
            match op {
                BinOp::Add => Some((a0.checked_add(b0)?, a1.checked_add(b1)?)),
                BinOp::Sub => Some((a0.checked_sub(b1)?, a1.checked_sub(b0)?)),
                BinOp::Mul => {
                    let c = [a0.checked_mul(b0)?, a0.checked_mul(b1)?, a1.checked_mul(b0)?, a1.checked_mul(b1)?];
                    Some((*c.iter().min()?, *c.iter().max()?))
                }
                BinOp::Div if b0 == b1 && b0 > 0 => Some((a0 / b0, a1 / b0)),
                BinOp::Rem if b0 == b1 && b0 > 0 && a0 >= 0 => Some((0, (b0 - 1).min(a1))),
                BinOp::Max => Some((a0.max(b0), a1.max(b1))),
                BinOp::Min => Some((a0.min(b0), a1.min(b1))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// An integer expression as `Σ coef·term + constant`.
struct Linear {
    terms: Vec<(N, i64)>,
    constant: i64,
}

fn linearize(ctx: &Ctx, n: N, scale: i64, out: &mut Linear) {
    match ctx.op(n) {
        Op::Const(Const::Int(c)) => out.constant += c * scale,
        Op::Binary(BinOp::Add, a, b) => {
            linearize(ctx, *a, scale, out);
            linearize(ctx, *b, scale, out);
        }
        Op::Binary(BinOp::Mul, a, b) => match (ctx.op(*a), ctx.op(*b)) {
            (_, Op::Const(Const::Int(k))) => linearize(ctx, *a, scale * k, out),
            (Op::Const(Const::Int(k)), _) => linearize(ctx, *b, scale * k, out),
            _ => out.terms.push((n, scale)),
        },
        _ => out.terms.push((n, scale)),
    }
}

/// Equal terms merged, zero coefficients dropped; first-seen order.
fn merge(terms: Vec<(N, i64)>) -> Vec<(N, i64)> {
    let mut merged: Vec<(N, i64)> = Vec::new();
    for (t, k) in terms {
        match merged.iter_mut().find(|(u, _)| *u == t) {
            Some(m) => m.1 += k,
            None => merged.push((t, k)),
        }
    }
    merged.retain(|&(_, k)| k != 0);
    merged
}

/// An integer node as `(Σ coef·term, constant)`: sums and products by constants flattened, equal
/// terms merged; every other node (a variable, a division, ...) is a term.
pub fn linear_form(ctx: &Ctx, n: N) -> (Vec<(N, i64)>, i64) {
    let mut l = Linear { terms: vec![], constant: 0 };
    linearize(ctx, n, 1, &mut l);
    (merge(l.terms), l.constant)
}

/// `Σ coef·term + constant` built through the simplifying constructors.
pub fn from_linear(ctx: &mut Ctx, terms: &[(N, i64)], constant: i64) -> N {
    let mut acc = ctx.int(constant);
    for &(t, k) in terms {
        let kt = ctx.mul_i(t, k);
        acc = ctx.add(acc, kt);
    }
    acc
}

fn rebuild(ctx: &mut Ctx, terms: &[(N, i64)], constant: i64) -> N {
    let mut acc: Option<N> = None;
    for &(t, k) in terms {
        let kt = if k == 1 {
            t
        } else {
            let kn = ctx.int(k);
            ctx.intern(Op::Binary(BinOp::Mul, t, kn), INDEX)
        };
        acc = Some(match acc {
            None => kt,
            Some(a) => ctx.intern(Op::Binary(BinOp::Add, a, kt), INDEX),
        });
    }
    match acc {
        None => ctx.int(constant),
        Some(a) if constant == 0 => a,
        Some(a) => {
            let c = ctx.int(constant);
            ctx.intern(Op::Binary(BinOp::Add, a, c), INDEX)
        }
    }
}

/// `(g·q + r) / (g·m) → q / m` and `(g·q + r) % (g·m) → (q % m)·g + r` for a factor `g > 1` of
/// `k = g·m` that divides the coefficients of `q`'s terms, where the rest `r` stays in `[0, g)`:
/// the lanes `j` of `(4·v + j) / 32` all read `v / 8`. `l` is non-negative, `k > 1`.
fn common_factor(ctx: &mut Ctx, op: BinOp, l: &Linear, k: i64) -> Option<N> {
    let mut factors: Vec<i64> = l.terms.iter().map(|&(_, c)| gcd(c, k)).filter(|&g| g > 1 && g < k).collect();
    factors.sort_unstable_by(|a, b| b.cmp(a));
    factors.dedup();
    for g in factors {
        let (q, r): (Vec<_>, Vec<_>) = l.terms.iter().partition(|&&(_, c)| c % g == 0);
        let r_const = l.constant % g;
        let r_n = rebuild(ctx, &r, r_const);
        if !range(ctx, r_n).is_some_and(|(lo, hi)| lo >= 0 && hi < g) {
            continue;
        }
        let q: Vec<(N, i64)> = q.iter().map(|&(t, c)| (t, c / g)).collect();
        let q_n = rebuild(ctx, &q, (l.constant - r_const) / g);
        return Some(if op == BinOp::Div {
            ctx.div_i(q_n, k / g)
        } else {
            let m = ctx.rem_i(q_n, k / g);
            let scaled = ctx.mul_i(m, g);
            ctx.add(scaled, r_n)
        });
    }
    None
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn nonneg(ctx: &Ctx, n: N) -> bool {
    range(ctx, n).is_some_and(|(lo, _)| lo >= 0)
}

fn upper(ctx: &Ctx, n: N) -> Option<i64> {
    range(ctx, n).map(|(_, hi)| hi)
}

/// Simplifies `a op b` for index arithmetic; `None` keeps the node as built.
pub fn binary(ctx: &mut Ctx, op: BinOp, a: N, b: N) -> Option<N> {
    let int = ctx.dtype(a) == INDEX;
    let kb = ctx.const_value(b).map(|c| c.as_i64());
    let ka = ctx.const_value(a).map(|c| c.as_i64());
    if matches!(op, BinOp::And | BinOp::Or) && ctx.dtype(a) == pilot_core::DType::Bool {
        // x & true = x, x & false = false, x | false = x, x | true = true, x & x = x.
        let truth = |k: Option<i64>| k.map(|v| v != 0);
        return match (op, truth(ka), truth(kb)) {
            (BinOp::And, _, Some(true)) | (BinOp::Or, _, Some(false)) => Some(a),
            (BinOp::And, Some(true), _) | (BinOp::Or, Some(false), _) => Some(b),
            (BinOp::And, _, Some(false)) | (BinOp::Or, _, Some(true)) => Some(b),
            (BinOp::And, Some(false), _) | (BinOp::Or, Some(true), _) => Some(a),
            _ if a == b => Some(a),
            _ => None,
        };
    }
    if !int {
        // Float identities that are exact: x+0 is not (-0.0), x*1 and x/1 are.
        return match (op, ctx.const_value(b).map(Const::as_f64)) {
            (BinOp::Mul | BinOp::Div, Some(1.0)) => Some(a),
            _ => None,
        };
    }
    match op {
        BinOp::Add if kb == Some(0) => Some(a),
        BinOp::Add if ka == Some(0) => Some(b),
        BinOp::Add | BinOp::Sub => {
            let mut l = Linear { terms: vec![], constant: 0 };
            linearize(ctx, a, 1, &mut l);
            linearize(ctx, b, if op == BinOp::Sub { -1 } else { 1 }, &mut l);
            let merged = merge(l.terms);
            Some(rebuild(ctx, &merged, l.constant))
        }
        BinOp::Mul if kb == Some(0) || ka == Some(0) => Some(ctx.int(0)),
        BinOp::Mul if kb == Some(1) => Some(a),
        BinOp::Mul if ka == Some(1) => Some(b),
        BinOp::Mul if ka.is_some() => Some(ctx.binary(BinOp::Mul, b, a)),
        BinOp::Mul => {
            let k = kb?;
            // (x*j)*k → x*(j*k); distribute over sums so linear forms stay flat.
            let mut l = Linear { terms: vec![], constant: 0 };
            linearize(ctx, a, k, &mut l);
            Some(rebuild(ctx, &l.terms, l.constant))
        }
        BinOp::Div | BinOp::Rem => {
            let k = kb?;
            if k == 1 {
                return Some(if op == BinOp::Div { a } else { ctx.int(0) });
            }
            if k <= 0 || !nonneg(ctx, a) {
                return None;
            }
            if let Some(hi) = upper(ctx, a) {
                if hi < k {
                    return Some(if op == BinOp::Div { ctx.int(0) } else { a });
                }
            }
            let mut l = Linear { terms: vec![], constant: 0 };
            linearize(ctx, a, 1, &mut l);
            if l.terms.iter().any(|&(_, c)| c < 0) || l.constant < 0 {
                return None;
            }
            // Split into the part divisible by k and the rest; exact when the rest stays in [0, k).
            let (whole, rest): (Vec<_>, Vec<_>) = l.terms.iter().partition(|&&(_, c)| c % k == 0);
            let rest_const = l.constant % k;
            let whole_const = l.constant - rest_const;
            let rest_n = rebuild(ctx, &rest, rest_const);
            let rest_small = rest.is_empty() || upper(ctx, rest_n).is_some_and(|hi| hi < k);
            if let Some(n) = common_factor(ctx, op, &l, k) {
                return Some(n);
            }
            if whole.is_empty() && whole_const == 0 {
                // (x / a) / b → x / (a*b)
                if let (BinOp::Div, Op::Binary(BinOp::Div, x, j)) = (op, ctx.op(a).clone()) {
                    let j = ctx.const_value(j)?.as_i64();
                    return Some(ctx.div_i(x, j * k));
                }
                // (x % (k*m)) % k → x % k
                if let (BinOp::Rem, Op::Binary(BinOp::Rem, x, j)) = (op, ctx.op(a).clone()) {
                    let j = ctx.const_value(j)?.as_i64();
                    if j % k == 0 {
                        return Some(ctx.rem_i(x, k));
                    }
                }
                return None;
            }
            if !rest_small && op == BinOp::Div {
                // (k*q + r) / k = q + r / k for non-negative q and r.
                let q: Vec<(N, i64)> = whole.iter().map(|&(t, c)| (t, c / k)).collect();
                let qn = rebuild(ctx, &q, whole_const / k);
                let rn = ctx.div_i(rest_n, k);
                return Some(ctx.add(qn, rn));
            }
            if op == BinOp::Rem {
                return Some(if rest_small { rest_n } else { ctx.rem_i(rest_n, k) });
            }
            let q: Vec<(N, i64)> = whole.iter().map(|&(t, c)| (t, c / k)).collect();
            Some(rebuild(ctx, &q, whole_const / k))
        }
        BinOp::Lt => {
            // Decide comparisons that the ranges settle.
            let (lo, hi) = range(ctx, a)?;
            let k = kb?;
            if hi < k {
                Some(ctx.constant(pilot_core::DType::Bool, 1.0))
            } else if lo >= k {
                Some(ctx.constant(pilot_core::DType::Bool, 0.0))
            } else {
                None
            }
        }
        _ => None,
    }
}
