//! `Einsum` over any number of operands, as one reduction kernel.

use std::collections::HashMap;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{RedOp, N};
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Einsum" => einsum,
        _ => return None,
    })
}

/// An einsum subscript: a letter, or position `k` of the (right-aligned) broadcast ellipsis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Label {
    Letter(char),
    Ell(usize),
}

/// Parses one subscript term for an operand of `rank` (`None` for the output, whose ellipsis is
/// `ell` long), expanding `...` into right-aligned ellipsis labels.
fn parse_term(term: &str, rank: Option<usize>, ell: usize) -> std::result::Result<Vec<Label>, String> {
    let (head, tail, has) = match term.split_once("...") {
        Some((h, t)) => (h, t, true),
        None => (term, "", false),
    };
    let letter = |ch: char| {
        if ch.is_ascii_alphabetic() {
            Ok(Label::Letter(ch))
        } else {
            Err(format!("invalid subscript `{ch}`"))
        }
    };
    let mut out: Vec<Label> = head.chars().map(letter).collect::<std::result::Result<_, _>>()?;
    let rest: Vec<Label> = tail.chars().map(letter).collect::<std::result::Result<_, _>>()?;
    let n = match (has, rank) {
        (false, _) => 0,
        (true, Some(r)) => r
            .checked_sub(out.len() + rest.len())
            .ok_or_else(|| format!("`{term}` has more subscripts than rank {r}"))?,
        (true, None) => ell,
    };
    if n > ell {
        return Err(format!("`{term}`: ellipsis longer than {ell}"));
    }
    out.extend((0..n).map(|k| Label::Ell(ell - n + k)));
    out.extend(rest);
    if let Some(r) = rank {
        if out.len() != r {
            return Err(format!("`{term}` has {} subscripts for rank {r}", out.len()));
        }
    }
    Ok(out)
}

/// Einsum over any number of operands: output subscripts become coordinates, the others are summed;
/// a repeated subscript within one operand reads its diagonal; ellipsis dimensions broadcast.
fn einsum(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let eq: String = c.attr_str("equation", "").chars().filter(|ch| !ch.is_whitespace()).collect();
    let xs: Vec<Lazy> = (0..c.num_inputs()).map(|i| c.input(i)).collect::<Result<_>>()?;
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != xs.len() {
        return Err(c.err(format!("equation `{eq}` has {} operands, the node {}", terms.len(), xs.len())));
    }
    // The ellipsis spans the most dimensions any operand gives it.
    let ell = terms
        .iter()
        .zip(&xs)
        .filter(|(t, _)| t.contains("..."))
        .map(|(t, x)| x.rank().saturating_sub(t.chars().count() - 3))
        .max()
        .unwrap_or(0);
    let labels: Vec<Vec<Label>> = terms
        .iter()
        .zip(&xs)
        .map(|(t, x)| parse_term(t, Some(x.rank()), ell))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| c.err(e))?;
    let mut extent: HashMap<Label, usize> = HashMap::new();
    for (ls, x) in labels.iter().zip(&xs) {
        for (l, &d) in ls.iter().zip(&x.shape) {
            let e = extent.entry(*l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return Err(c.err(format!("subscript {l:?} has sizes {e} and {d}")));
            }
        }
    }
    let out: Vec<Label> = match rhs {
        Some(r) => parse_term(r, None, ell).map_err(|e| c.err(e))?,
        None => {
            let mut once: Vec<char> = labels
                .iter()
                .flatten()
                .filter_map(|l| match l {
                    Label::Letter(ch) => Some(*ch),
                    Label::Ell(_) => None,
                })
                .collect();
            once.sort_unstable();
            let singles: Vec<char> =
                once.iter().copied().filter(|ch| once.iter().filter(|d| *d == ch).count() == 1).collect();
            (0..ell).map(Label::Ell).chain(singles.into_iter().map(Label::Letter)).collect()
        }
    };
    if (1..out.len()).any(|i| out[..i].contains(&out[i])) {
        return Err(c.err(format!("equation `{eq}` repeats an output subscript")));
    }
    if let Some(l) = out.iter().find(|l| !extent.contains_key(l)) {
        return Err(c.err(format!("output subscript {l:?} is not in any operand")));
    }
    let shape: Vec<usize> = out.iter().map(|l| extent[l]).collect();
    let mut summed: Vec<Label> = labels.iter().flatten().copied().filter(|l| !out.contains(l)).collect();
    let mut seen = Vec::new();
    summed.retain(|l| {
        let fresh = !seen.contains(l);
        seen.push(*l);
        fresh
    });
    let reduced: usize = summed.iter().map(|l| extent[l]).product();
    let dtype = xs.first().ok_or_else(|| c.err("no operands"))?.dtype;
    if xs.iter().any(|x| x.dtype != dtype) {
        return Err(c.err("operand types differ"));
    }
    let xs: Vec<Lazy> = xs
        .iter()
        .map(|x| {
            let reuse = (shape.iter().product::<usize>() * reduced) as f64 / x.numel().max(1) as f64;
            c.reduce_input(x, reuse)
        })
        .collect();
    let p = c.p();
    let vars = p.ctx.fresh_vars(&shape);
    let mut var_of: HashMap<Label, u32> = out.iter().copied().zip(vars.iter().copied()).collect();
    for l in &summed {
        var_of.insert(*l, p.ctx.fresh_var(extent[l] as u64));
    }
    let mut acc: Option<N> = None;
    for (x, ls) in xs.iter().zip(&labels) {
        let m: HashMap<u32, N> = x
            .vars
            .iter()
            .zip(ls)
            .zip(&x.shape)
            .map(|((&v, l), &d)| {
                let n = if d == 1 { p.ctx.int(0) } else { p.ctx.var(var_of[l]) };
                (v, n)
            })
            .collect();
        let e = substitute(&mut p.ctx, x.expr, &m, None);
        acc = Some(match acc {
            Some(a) => p.ctx.mul(a, e),
            None => e,
        });
    }
    let Some(mut expr) = acc else {
        return Err(c.err("no operands"));
    };
    for l in summed.iter().rev() {
        expr = p.ctx.reduce(RedOp::Sum, var_of[l], extent[l] as u64, expr);
    }
    Ok(vec![Lazy { dtype, shape, vars, expr }])
}
