//! Where an image load reads, and which conditions of its guard the image's border already gives.
//!
//! A load of an image `width` RGBA pixels wide at flat element `index` reads pixel
//! `((index / 4) % width, index / (4 · width))`, channel `index % 4`: the flat coordinates, right
//! wherever the load reads inside the image, which an unguarded load always does.
//!
//! A guarded load can do better. Images are sampled with clamp-to-border and a transparent black
//! border (`CLK_ADDRESS_CLAMP` in the OpenCL prelude, `pilot_qcom::dispatch::SAMPLER_CLAMP_NEAREST`
//! with a zeroed border colour for ir3's `isam`), so a read outside the image gives zero — what a
//! failed guard gives. Where the index splits into `4 · (width · Y + X) + C` with `X`, `Y` linear
//! and `C` in `0..4`, a condition whose failure always puts `(X, Y)` outside the image is dropped
//! (tinygrad does the same for image loads: `_drop_valid_stmts` and `simplify_valid_image_load` in
//! `codegen/late/coalesce.py`). A padded convolution then reads its unpadded input image with no
//! select per tap.
//!
//! Sound because `X` is proven to stay in `0..width` wherever the whole guard holds, from the
//! guard's own bounds, before anything is dropped: there the 2-D read is the flat read (the flat
//! index lies inside the image, so `Y` does too). Where that proof or every drop fails, the flat
//! coordinates and the whole guard are kept.

use crate::ir::simplify::{from_linear, linear_form, range};
use crate::ir::{BinOp, Ctx, Op, UnOp, N};
use crate::program::Image;

/// Where an image load reads: pixel `(x, y)` and channel `c` (0..4), if `valid` holds (the part
/// of the load's guard the border does not give; `None`: always read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Texel {
    pub x: N,
    pub y: N,
    pub c: N,
    pub valid: Option<N>,
}

/// `Σ coef · term + constant`.
type Linear = (Vec<(N, i64)>, i64);

/// The texel a load of `im` at `index` guarded by `valid` reads (see the module doc).
pub fn locate(ctx: &mut Ctx, im: Image, index: N, valid: Option<N>) -> Texel {
    if let Some(t) = valid.and_then(|v| bordered(ctx, im, index, v)) {
        return t;
    }
    let px = ctx.div_i(index, 4);
    let x = ctx.rem_i(px, im.width as i64);
    let y = ctx.div_i(px, im.width as i64);
    let c = ctx.rem_i(index, 4);
    Texel { x, y, c, valid }
}

/// One condition of a guard: `lo <= Σ terms` or `Σ terms < hi` (the constant moved into the bound).
struct Bound {
    node: N,
    terms: Vec<(N, i64)>,
    lo: Option<i64>,
    hi: Option<i64>,
}

/// The 2-D texel with the conditions the border gives dropped, or `None` (see the module doc).
fn bordered(ctx: &mut Ctx, im: Image, index: N, valid: N) -> Option<Texel> {
    let (w, h) = (im.width as i64, im.height as i64);
    let (terms, k) = linear_form(ctx, index);
    let (mut ys, mut xs, mut cs) = (vec![], vec![], vec![]);
    for (t, a) in terms {
        match a {
            _ if a % (4 * w) == 0 => ys.push((t, a / (4 * w))),
            _ if a % 4 == 0 => xs.push((t, a / 4)),
            _ => cs.push((t, a)),
        }
    }
    // The channel's constant: congruent to `k` mod 4 and keeping C inside 0..4.
    let (cmin, cmax) = span(ctx, &(cs.clone(), 0))?;
    let kc = (k + cmin).rem_euclid(4) - cmin;
    if cmax + kc > 3 {
        return None;
    }
    let pixel = (k - kc) / 4;
    let mut conds = Vec::new();
    clauses(ctx, valid, &mut conds);
    let bounds: Vec<Bound> = conds.iter().filter_map(|&n| bound(ctx, n)).collect();
    // The pixel constant splits between rows and columns two ways near `pixel / w`; the one that
    // keeps X inside the image under the guard is the reading.
    for ky in [pixel.div_euclid(w), pixel.div_euclid(w) + 1] {
        let x: Linear = (xs.clone(), pixel - w * ky);
        let y: Linear = (ys.clone(), ky);
        let Some((lo, hi)) = under(ctx, &x, &bounds) else { continue };
        if lo < 0 || hi >= w {
            continue;
        }
        let given = |b: &Bound| outside(ctx, b, &x, w) || outside(ctx, b, &y, h);
        let dropped: Vec<N> = bounds.iter().filter(|b| given(b)).map(|b| b.node).collect();
        if dropped.is_empty() {
            return None;
        }
        let kept = conds.iter().filter(|n| !dropped.contains(n)).fold(None, |acc, &n| match acc {
            None => Some(n),
            Some(a) => Some(ctx.and(a, n)),
        });
        return Some(Texel {
            x: from_linear(ctx, &x.0, x.1),
            y: from_linear(ctx, &y.0, y.1),
            c: from_linear(ctx, &cs, kc),
            valid: kept,
        });
    }
    None
}

/// The conditions `valid` is the conjunction of.
fn clauses(ctx: &Ctx, n: N, out: &mut Vec<N>) {
    match *ctx.op(n) {
        Op::Binary(BinOp::And, a, b) => {
            clauses(ctx, a, out);
            clauses(ctx, b, out);
        }
        _ => out.push(n),
    }
}

/// `n` as a bound on a linear form, if it is one (`e < k`, `k < e`, `!(e < k)`, `!(k < e)`).
fn bound(ctx: &Ctx, n: N) -> Option<Bound> {
    let (negated, m) = match *ctx.op(n) {
        Op::Unary(UnOp::Not, m) => (true, m),
        _ => (false, n),
    };
    let Op::Binary(BinOp::Lt, a, b) = *ctx.op(m) else { return None };
    let (e, k, e_left) = match (ctx.const_value(a), ctx.const_value(b)) {
        (None, Some(k)) => (a, k.as_i64(), true),
        (Some(k), None) => (b, k.as_i64(), false),
        _ => return None,
    };
    range(ctx, e)?;
    let (terms, c) = linear_form(ctx, e);
    // e < k | !(e < k): e >= k | k < e: e >= k + 1 | !(k < e): e < k + 1.
    let (lo, hi) = match (e_left, negated) {
        (true, false) => (None, Some(k - c)),
        (true, true) => (Some(k - c), None),
        (false, false) => (Some(k + 1 - c), None),
        (false, true) => (None, Some(k + 1 - c)),
    };
    Some(Bound { node: n, terms, lo, hi })
}

/// Inclusive range of a linear form over every value of its terms.
fn span(ctx: &Ctx, l: &Linear) -> Option<(i64, i64)> {
    l.0.iter().try_fold((l.1, l.1), |(lo, hi), &(t, a)| {
        let (t0, t1) = range(ctx, t)?;
        let (p, q) = (t0.checked_mul(a)?, t1.checked_mul(a)?);
        Some((lo.checked_add(p.min(q))?, hi.checked_add(p.max(q))?))
    })
}

/// `l` as `p · Σ e + rest` (p ≠ 0, no term of `e` in `rest`), if it contains `e` that way.
fn factor(l: &Linear, e: &[(N, i64)]) -> Option<(i64, Linear)> {
    let (t0, a0) = *e.first()?;
    let (_, b0) = *l.0.iter().find(|(t, _)| *t == t0)?;
    if b0 % a0 != 0 {
        return None;
    }
    let p = b0 / a0;
    let mut rest = l.0.clone();
    for &(t, a) in e {
        let at = rest.iter().position(|&(u, b)| u == t && b == p * a)?;
        rest.swap_remove(at);
    }
    Some((p, (rest, l.1)))
}

/// Inclusive range of `l` wherever every bound holds.
fn under(ctx: &Ctx, l: &Linear, bounds: &[Bound]) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = span(ctx, l)?;
    for b in bounds {
        let Some((p, rest)) = factor(l, &b.terms) else { continue };
        let (Some((r0, r1)), Some((e0, e1))) = (span(ctx, &rest), span(ctx, &(b.terms.clone(), 0))) else {
            continue;
        };
        let (e0, e1) = (b.lo.map_or(e0, |v| v.max(e0)), b.hi.map_or(e1, |v| (v - 1).min(e1)));
        let (a, z) = if p > 0 { (p * e0, p * e1) } else { (p * e1, p * e0) };
        lo = lo.max(a + r0);
        hi = hi.min(z + r1);
    }
    Some((lo, hi))
}

/// Whether `coord` (an axis of `size` pixels) lies outside the image wherever `b` fails.
fn outside(ctx: &Ctx, b: &Bound, coord: &Linear, size: i64) -> bool {
    let Some((p, rest)) = factor(coord, &b.terms) else { return false };
    let Some((r0, r1)) = span(ctx, &rest) else { return false };
    // Failing `lo <= e` is e <= lo - 1; failing `e < hi` is e >= hi. The coordinate moves
    // monotonically with e (slope p), so its extreme on the failing side decides.
    let below = b.lo.is_none_or(|lo| if p > 0 { p * (lo - 1) + r1 < 0 } else { p * (lo - 1) + r0 >= size });
    let above = b.hi.is_none_or(|hi| if p > 0 { p * hi + r0 >= size } else { p * hi + r1 < 0 });
    below && above
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use pilot_core::DType;

    use super::*;
    use crate::ir::interp::eval;
    use crate::ir::subst::substitute;
    use crate::lazy::Lazy;
    use crate::program::Program;

    /// Every read of a strided, padded window over `batch` images stacked in rows, of `packed`
    /// pixels per column (the convolution's layout), reads through [`locate`] and a transparent
    /// border what the flat guarded load reads: the same element where the guard holds, zero
    /// elsewhere. Returns how many reads lost a condition of their guard.
    fn window_reads_agree(batch: usize, size: [usize; 2], packed: usize, pads: [[i64; 2]; 2], stride: i64) -> usize {
        let ([h, w], [lo, hi]) = (size, pads);
        let mut p = Program::new();
        let x = p.input(0, DType::F32, &[batch * h, w * packed, 4]);
        let img = p.realize_image(&x, batch * h, w * packed, "img");
        let width = (w * packed) as i64;
        // The tensor [batch, 4·packed channels, h, w] read from the image as `lower::image` reads it.
        let vars = p.ctx.fresh_vars(&[batch, 4 * packed, h, w]);
        let (n, c, r, q) = (p.ctx.var(vars[0]), p.ctx.var(vars[1]), p.ctx.var(vars[2]), p.ctx.var(vars[3]));
        let n = p.ctx.mul_i(n, h as i64);
        let r = p.ctx.add(n, r);
        let (pixel, lane) = (p.ctx.div_i(c, 4), p.ctx.rem_i(c, 4));
        let column = p.ctx.mul_i(q, packed as i64);
        let column = p.ctx.add(column, pixel);
        let read = substitute(
            &mut p.ctx,
            img.expr,
            &HashMap::from([(img.vars[0], r), (img.vars[1], column), (img.vars[2], lane)]),
            None,
        );
        let view = Lazy { dtype: DType::F32, shape: vec![batch, 4 * packed, h, w], vars, expr: read };
        let padded = p.pad(&view, &[0, 0, lo[0], lo[1]], &[0, 0, hi[0], hi[1]], 0.0);
        let out = |axis: usize| ((padded.shape[axis] as i64 - 3) / stride + 1) as u64;
        let (oh, ow) = (p.ctx.fresh_var(out(2)), p.ctx.fresh_var(out(3)));
        let (kh, kw, ch, b) =
            (p.ctx.fresh_var(3), p.ctx.fresh_var(3), p.ctx.fresh_var(4 * packed as u64), p.ctx.fresh_var(batch as u64));
        let at = |p: &mut Program, o: u32, k: u32| {
            let (o, k) = (p.ctx.var(o), p.ctx.var(k));
            let o = p.ctx.mul_i(o, stride);
            p.ctx.add(o, k)
        };
        let (row, col) = (at(&mut p, oh, kh), at(&mut p, ow, kw));
        let (cv, bv) = (p.ctx.var(ch), p.ctx.var(b));
        let map =
            HashMap::from([(padded.vars[0], bv), (padded.vars[1], cv), (padded.vars[2], row), (padded.vars[3], col)]);
        let e = substitute(&mut p.ctx, padded.expr, &map, None);
        let Op::Load { index, valid, .. } = *p.ctx.op(e) else { panic!("a guarded load, not {:?}", p.ctx.op(e)) };
        let t = locate(&mut p.ctx, Image { width: w * packed, height: batch * h }, index, valid);
        let loops = [oh, ow, kh, kw, ch, b];
        let extents: Vec<i64> = loops.iter().map(|&v| p.ctx.var_extent(v) as i64).collect();
        let no_loads = |_: u32, _: i64| None;
        let mut dropped = 0;
        let total: i64 = extents.iter().product();
        for flat in 0..total {
            let mut env = HashMap::new();
            let mut rest = flat;
            for (&v, &e) in loops.iter().zip(&extents) {
                env.insert(v, rest % e);
                rest /= e;
            }
            let mut at = |n: N| eval(&p.ctx, n, &mut env, &no_loads).unwrap().as_i64();
            let holds = |at: &mut dyn FnMut(N) -> i64, g: Option<N>| g.is_none_or(|g| at(g) != 0);
            let flat_read = holds(&mut at, valid).then(|| at(index));
            let (x, y, c) = (at(t.x), at(t.y), at(t.c));
            let inside = (0..width).contains(&x) && (0..(batch * h) as i64).contains(&y);
            let texel_read = (holds(&mut at, t.valid) && inside).then(|| 4 * (width * y + x) + c);
            assert_eq!(
                flat_read, texel_read,
                "at {env:?} ({x}, {y}, {c}), batch {batch}, pads {pads:?}, stride {stride}"
            );
            dropped += usize::from(t.valid != valid);
        }
        dropped
    }

    #[test]
    fn dropped_guards_read_what_the_guarded_flat_load_reads() {
        let mut dropped = 0;
        for (batch, packed) in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)] {
            for pads in [[[1, 1], [1, 1]], [[0, 2], [2, 0]], [[2, 1], [0, 3]], [[1, 0], [0, 1]]] {
                for stride in [1, 2] {
                    dropped += window_reads_agree(batch, [3, 4], packed, pads, stride);
                }
            }
        }
        assert!(dropped > 0, "the border gave no guard");
    }

    #[test]
    fn a_guard_inside_a_pixel_is_kept() {
        let mut p = Program::new();
        let x = p.input(0, DType::F32, &[2, 3, 4]);
        let img = p.realize_image(&x, 2, 3, "img");
        let padded = p.pad(&img, &[0, 0, 1], &[0, 0, 1], 0.0);
        let Op::Load { index, valid, .. } = *p.ctx.op(padded.expr) else { panic!() };
        let t = locate(&mut p.ctx, Image { width: 3, height: 2 }, index, valid);
        assert_eq!(t.valid, valid);
    }
}
