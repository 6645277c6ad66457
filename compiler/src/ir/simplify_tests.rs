//! The index simplifier: each rewrite it implements, checked both for the shape it produces and,
//! over every value of the variables, for the value (a wrong rewrite fails here, not in a model).

use std::collections::HashMap;

use pilot_core::DType;

use super::simplify::range;
use super::*;

/// A context with variables of the given extents, returned as nodes.
fn vars(extents: &[u64]) -> (Ctx, Vec<u32>, Vec<N>) {
    let mut c = Ctx::new();
    let vs: Vec<u32> = extents.iter().map(|&e| c.fresh_var(e)).collect();
    let ns = vs.iter().map(|&v| c.var(v)).collect();
    (c, vs, ns)
}

/// Checks that `got` equals `want(values)` for every assignment of `vs` within their extents.
fn agrees(c: &Ctx, vs: &[u32], got: N, want: impl Fn(&[i64]) -> i64) {
    let extents: Vec<i64> = vs.iter().map(|&v| c.var_extent(v) as i64).collect();
    let total: i64 = extents.iter().product();
    for flat in 0..total {
        let mut rest = flat;
        let values: Vec<i64> = extents
            .iter()
            .map(|&e| {
                let x = rest % e;
                rest /= e;
                x
            })
            .collect();
        let mut env: HashMap<u32, i64> = vs.iter().copied().zip(values.iter().copied()).collect();
        let v = interp::eval(c, got, &mut env, &|_, _| None).expect("evaluates").as_i64();
        assert_eq!(v, want(&values), "at {values:?}");
    }
}

#[test]
fn ranges_follow_the_arithmetic() {
    let (mut c, _, n) = vars(&[8, 4]);
    let (x, y) = (n[0], n[1]);
    assert_eq!(range(&c, x), Some((0, 7)));
    let x4 = c.mul_i(x, 4);
    let e = c.add(x4, y);
    assert_eq!(range(&c, e), Some((0, 31)));
    let s = c.add_i(x, -3);
    assert_eq!(range(&c, s), Some((-3, 4)));
    let m = c.rem_i(e, 5);
    assert_eq!(range(&c, m), Some((0, 4)));
    let three = c.int(3);
    let mx = c.binary(BinOp::Max, x, three);
    let mn = c.binary(BinOp::Min, x, three);
    assert_eq!((range(&c, mx), range(&c, mn)), (Some((3, 7)), Some((0, 3))));
    let f = c.load(0, DType::F32, x, None);
    assert_eq!(range(&c, f), None, "only index expressions have ranges");
}

#[test]
fn division_and_remainder_by_the_stride_recover_the_coordinates() {
    // A reshape's `(flat / stride) % dim` chains over flat = x*12 + y*4 + z.
    let (mut c, vs, n) = vars(&[2, 3, 4]);
    let (x, y, z) = (n[0], n[1], n[2]);
    let a = c.mul_i(x, 12);
    let b = c.mul_i(y, 4);
    let ab = c.add(a, b);
    let flat = c.add(ab, z);
    let d12 = c.div_i(flat, 12);
    assert_eq!(d12, x);
    let d4 = c.div_i(flat, 4);
    let yy = c.rem_i(d4, 3);
    assert_eq!(yy, y);
    let zz = c.rem_i(flat, 4);
    assert_eq!(zz, z);
    // (x*4 + y) / 4 with y < 4 is x; its remainder is y.
    let (mut c, _, n) = vars(&[8, 4]);
    let x4 = c.mul_i(n[0], 4);
    let e = c.add(x4, n[1]);
    assert_eq!(c.div_i(e, 4), n[0]);
    assert_eq!(c.rem_i(e, 4), n[1]);
    // With a remainder part that can reach k: q + r / k, still exact.
    let (mut c, vs2, n) = vars(&[8, 8]);
    let x4 = c.mul_i(n[0], 4);
    let e = c.add(x4, n[1]);
    let d = c.div_i(e, 4);
    assert_ne!(d, n[0]);
    agrees(&c, &vs2, d, |v| (v[0] * 4 + v[1]) / 4);
    let r = c.rem_i(e, 4);
    agrees(&c, &vs2, r, |v| (v[0] * 4 + v[1]) % 4);
    let _ = vs;
}

#[test]
fn small_values_divide_to_zero_and_stay_their_own_remainder() {
    let (mut c, _, n) = vars(&[8]);
    let x = n[0];
    assert_eq!(c.rem_i(x, 8), x);
    assert_eq!(c.rem_i(x, 100), x);
    let zero = c.int(0);
    assert_eq!(c.div_i(x, 8), zero);
    assert_ne!(c.rem_i(x, 7), x, "x may reach 7");
    assert_eq!(c.div_i(x, 1), x);
    assert_eq!(c.rem_i(x, 1), zero);
}

#[test]
fn nested_divisions_and_remainders_merge() {
    let (mut c, vs, n) = vars(&[100]);
    let x = n[0];
    let d2 = c.div_i(x, 2);
    let d23 = c.div_i(d2, 3);
    assert_eq!(d23, c.div_i(x, 6));
    let r12 = c.rem_i(x, 12);
    let r12_4 = c.rem_i(r12, 4);
    assert_eq!(r12_4, c.rem_i(x, 4));
    let r10 = c.rem_i(x, 10);
    let r10_4 = c.rem_i(r10, 4);
    assert_ne!(r10_4, c.rem_i(x, 4), "4 does not divide 10: no merge");
    agrees(&c, &vs, r10_4, |v| v[0] % 10 % 4);
}

#[test]
fn possibly_negative_operands_are_left_alone() {
    // C division truncates toward zero, so (x - 4) / 4 is not x/4 - 1: nothing is rewritten.
    let (mut c, vs, n) = vars(&[16]);
    let s = c.add_i(n[0], -4);
    let d = c.div_i(s, 4);
    assert!(matches!(c.op(d), Op::Binary(BinOp::Div, a, _) if *a == s));
    agrees(&c, &vs, d, |v| (v[0] - 4) / 4);
    let r = c.rem_i(s, 4);
    agrees(&c, &vs, r, |v| (v[0] - 4) % 4);
}

#[test]
fn sums_are_flattened_and_like_terms_merged() {
    let (mut c, vs, n) = vars(&[5, 6]);
    let (x, y) = (n[0], n[1]);
    let zero = c.int(0);
    assert_eq!(c.add(x, zero), x);
    assert_eq!(c.add(zero, x), x);
    let xy = c.add(x, y);
    assert_eq!(c.sub(xy, x), y);
    assert_eq!(c.sub(x, x), zero);
    let x2 = c.mul_i(x, 2);
    let x3 = c.mul_i(x, 3);
    let x5 = c.add(x2, x3);
    assert_eq!(x5, c.mul_i(x, 5));
    // Constants distribute: (x + 2) * 3 = 3x + 6.
    let x_2 = c.add_i(x, 2);
    let t = c.mul_i(x_2, 3);
    let expected = {
        let x3 = c.mul_i(x, 3);
        c.add_i(x3, 6)
    };
    assert_eq!(t, expected);
    assert_eq!(c.mul_i(x, 1), x);
    assert_eq!(c.mul_i(x, 0), zero);
    let k = c.int(7);
    assert_eq!(c.mul(k, y), c.mul_i(y, 7), "the constant goes right");
    let mix = c.sub(t, y);
    agrees(&c, &vs, mix, |v| (v[0] + 2) * 3 - v[1]);
}

#[test]
fn comparisons_the_ranges_settle_are_constants() {
    let (mut c, _, n) = vars(&[8]);
    let x = n[0];
    let t = c.lt_i(x, 8);
    let f = c.lt_i(x, 0);
    assert_eq!((c.const_value(t), c.const_value(f)), (Some(Const::Int(1)), Some(Const::Int(0))));
    let open = c.lt_i(x, 4);
    assert!(matches!(c.op(open), Op::Binary(BinOp::Lt, ..)));
}

#[test]
fn float_identities_are_only_the_exact_ones() {
    let mut c = Ctx::new();
    let v = c.fresh_var(4);
    let x = c.var(v);
    let f = c.load(0, DType::F32, x, None);
    let one = c.constant(DType::F32, 1.0);
    let zero = c.constant(DType::F32, 0.0);
    assert_eq!(c.binary(BinOp::Mul, f, one), f);
    assert_eq!(c.binary(BinOp::Div, f, one), f);
    // -0.0 + 0.0 is +0.0: x + 0 is not x for floats.
    assert_ne!(c.binary(BinOp::Add, f, zero), f);
    assert_ne!(c.binary(BinOp::Mul, f, zero), zero, "x * 0 is NaN for infinite x");
}

#[test]
fn boolean_and_or_with_known_sides() {
    let mut c = Ctx::new();
    let v = c.fresh_var(8);
    let x = c.var(v);
    let p = c.lt_i(x, 3);
    let yes = c.constant(DType::Bool, 1.0);
    let no = c.constant(DType::Bool, 0.0);
    assert_eq!(c.and(p, yes), p);
    assert_eq!(c.and(yes, p), p);
    assert_eq!(c.and(p, no), no);
    assert_eq!(c.binary(BinOp::Or, p, no), p);
    assert_eq!(c.binary(BinOp::Or, p, yes), yes);
    assert_eq!(c.and(p, p), p);
    let q = c.lt_i(x, 5);
    let pq = c.and(p, q);
    assert!(matches!(c.op(pq), Op::Binary(BinOp::And, ..)));
}

#[test]
fn a_factor_shared_with_the_divisor_comes_out_when_the_rest_stays_below_it() {
    // The four lanes j of (4·v + j) / 32 all read v / 8; % gives (v % 8)·4 + j.
    let (mut c, vs, n) = vars(&[40, 4]);
    let v4 = c.mul_i(n[0], 4);
    let x = c.add(v4, n[1]);
    let q = c.div_i(x, 32);
    let want_q = c.div_i(n[0], 8);
    assert_eq!(q, want_q);
    agrees(&c, &vs, q, |a| (4 * a[0] + a[1]) / 32);
    let r = c.rem_i(x, 32);
    agrees(&c, &vs, r, |a| (4 * a[0] + a[1]) % 32);
    assert!(matches!(c.op(r), Op::Binary(BinOp::Add, ..)), "no division left over the lanes");
    // A rest that can reach the factor keeps the division: (4·v + j + 1) / 32 with j up to 3.
    let x1 = c.add_i(x, 1);
    let q1 = c.div_i(x1, 32);
    agrees(&c, &vs, q1, |a| (4 * a[0] + a[1] + 1) / 32);
    assert_ne!(c.div_i(n[0], 8), q1);
}
