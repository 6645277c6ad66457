//! The IR's own contracts: hash-consing, folding and simplifying constructors, traversal and the
//! invariant checks.

use std::collections::HashMap;

use pilot_core::DType;

use super::*;

/// Evaluates an index expression with loop variables bound by `env`.
fn eval_int(ctx: &Ctx, n: N, env: &[(u32, i64)]) -> i64 {
    let mut env: HashMap<u32, i64> = env.iter().copied().collect();
    interp::eval(ctx, n, &mut env, &|_, _| None).expect("no loads, no division by zero").as_i64()
}

#[test]
fn equal_nodes_are_one_node() {
    let mut c = Ctx::new();
    let v = c.fresh_var(8);
    let x = c.var(v);
    let a = c.mul_i(x, 3);
    let before = c.len();
    let b = c.mul_i(x, 3);
    assert_eq!(a, b);
    assert_eq!(c.len(), before, "building the same expression again interns nothing");
    // The dtype is part of a node: the same value in two dtypes is two nodes.
    let f = c.constant(DType::F32, 1.0);
    let i = c.constant(DType::I32, 1.0);
    assert_ne!(f, i);
    assert_eq!((c.dtype(f), c.dtype(i)), (DType::F32, DType::I32));
}

#[test]
fn fresh_variables_are_never_reused_and_keep_their_extent() {
    let mut c = Ctx::new();
    let vs = c.fresh_vars(&[2, 3, 4]);
    let w = c.fresh_var(4);
    assert_eq!(vs, vec![0, 1, 2]);
    assert_eq!(w, 3, "a fresh variable with an extent already used is still new");
    assert_eq!((c.var_extent(1), c.var_extent(w)), (3, 4));
    // A renamed reduction variable is fresh once, then the same on every call.
    let (r, b) = (N(7), N(9));
    let first = c.renamed_var(r, b, 5);
    assert_eq!(c.renamed_var(r, b, 5), first);
    assert_ne!(c.renamed_var(r, N(10), 5), first);
}

#[test]
fn constants_fold_as_they_are_built() {
    let mut c = Ctx::new();
    let (two, three) = (c.constant(DType::F32, 2.0), c.constant(DType::F32, 3.0));
    let sum = c.binary(BinOp::Add, two, three);
    assert_eq!(c.const_value(sum), Some(Const::float(5.0)));
    // Float constants are rounded to their dtype, as compiled code sees them.
    let tenth = c.constant(DType::F32, 0.1);
    assert_eq!(c.const_value(tenth).map(Const::as_f64), Some(0.1f32 as f64));
    // Integer division and remainder truncate, as in C.
    let (m7, k2) = (c.constant(DType::I32, -7.0), c.constant(DType::I32, 2.0));
    let q = c.binary(BinOp::Div, m7, k2);
    let r = c.binary(BinOp::Rem, m7, k2);
    assert_eq!((c.const_value(q), c.const_value(r)), (Some(Const::Int(-3)), Some(Const::Int(-1))));
    // Integer division by zero is left to run time, not folded.
    let zero = c.constant(DType::I32, 0.0);
    let d0 = c.binary(BinOp::Div, m7, zero);
    assert!(matches!(c.op(d0), Op::Binary(BinOp::Div, ..)));
    // Comparisons are bool; casts wrap like C conversions.
    let lt = c.binary(BinOp::Lt, two, three);
    assert_eq!((c.dtype(lt), c.const_value(lt)), (DType::Bool, Some(Const::Int(1))));
    let big = c.constant(DType::I32, 300.0);
    let byte = c.cast(big, DType::U8);
    assert_eq!(c.const_value(byte), Some(Const::Int(44)));
    let e = c.unary(UnOp::Exp, zero);
    assert_eq!(c.dtype(e), DType::I32, "unary ops keep the operand's dtype");
}

#[test]
fn where_and_guarded_loads_fold_what_is_known() {
    let mut c = Ctx::new();
    let v = c.fresh_var(10);
    let x = c.var(v);
    let cond = c.lt_i(x, 5);
    let (a, b) = (c.constant(DType::F32, 1.0), c.constant(DType::F32, 2.0));
    let yes = c.constant(DType::Bool, 1.0);
    let no = c.constant(DType::Bool, 0.0);
    assert_eq!(c.where_(yes, a, b), a);
    assert_eq!(c.where_(no, a, b), b);
    assert_eq!(c.where_(cond, a, a), a, "equal branches need no condition");
    let w = c.where_(cond, a, b);
    assert!(matches!(c.op(w), Op::Where(..)));
    // A load guarded by `cond` already reads zero where `cond` fails: the where is redundant.
    let guarded = c.load(0, DType::F32, x, Some(cond));
    let zero = c.constant(DType::F32, 0.0);
    assert_eq!(c.where_(cond, guarded, zero), guarded);
    assert_ne!(c.where_(cond, guarded, b), guarded, "only a zero fill is absorbed");
    // Constant guards: always true drops the guard, always false is the zero constant.
    let always = c.load(0, DType::F32, x, Some(yes));
    assert!(matches!(c.op(always), Op::Load { valid: None, .. }));
    let never = c.load(0, DType::F32, x, Some(no));
    assert_eq!(c.const_value(never), Some(Const::float(0.0)));
}

#[test]
fn a_reduction_over_one_point_is_its_body_at_zero() {
    let mut c = Ctx::new();
    let (o, r) = (c.fresh_var(4), c.fresh_var(1));
    let (vo, vr) = (c.var(o), c.var(r));
    let idx = c.add(vo, vr);
    let body = c.load(0, DType::F32, idx, None);
    let red = c.reduce(RedOp::Sum, r, 1, body);
    let expected = c.load(0, DType::F32, vo, None);
    assert_eq!(red, expected);
    let r8 = c.fresh_var(8);
    let v8 = c.var(r8);
    let idx8 = c.add(vo, v8);
    let body8 = c.load(0, DType::F32, idx8, None);
    let red8 = c.reduce(RedOp::Max, r8, 8, body8);
    assert!(matches!(c.op(red8), Op::Reduce { op: RedOp::Max, extent: 8, .. }));
    assert!(c.has_reduce(red8) && !c.has_reduce(body8));
    let ident = c.reduce_identity(RedOp::Max, DType::F32);
    assert_eq!(c.const_value(ident).map(Const::as_f64), Some(f64::NEG_INFINITY));
    let ident = c.reduce_identity(RedOp::Min, DType::U8);
    assert_eq!(c.const_value(ident), Some(Const::Int(255)));
}

#[test]
fn toposort_lists_children_first_and_each_node_once() {
    let mut c = Ctx::new();
    let v = c.fresh_var(16);
    let x = c.var(v);
    let a = c.load(0, DType::F32, x, None);
    let b = c.load(1, DType::F32, x, None);
    let s = c.binary(BinOp::Add, a, b);
    let m = c.binary(BinOp::Mul, s, a);
    let order = c.toposort(&[m]);
    assert_eq!(order.len(), 5, "x, a, b, s, m: the shared `a` and `x` once");
    let pos = |n: N| order.iter().position(|&o| o == n).unwrap();
    for (child, parent) in [(x, a), (x, b), (a, s), (b, s), (s, m), (a, m)] {
        assert!(pos(child) < pos(parent));
    }
    assert_eq!(c.loads(m), vec![0, 1]);
    // Index arithmetic is not counted as work; float ops are.
    assert_eq!(c.cost(m), 2);
    let r = c.fresh_var(4);
    let vr = c.var(r);
    let idx = c.add(x, vr);
    let l = c.load(0, DType::F32, idx, None);
    let sq = c.binary(BinOp::Mul, l, l);
    let red = c.reduce(RedOp::Sum, r, 4, sq);
    assert_eq!(flops_per_point(&c, red), 4 * (1 + 1), "body and accumulation per iteration");
}

#[test]
fn validate_reports_broken_invariants() {
    let mut c = Ctx::new();
    let v = c.fresh_var(4);
    let x = c.var(v);
    let f = c.load(0, DType::F32, x, None);
    let i = c.load(1, DType::I32, x, None);
    assert_eq!(validate(&c, &[f]), Ok(()));
    let mixed = c.intern(Op::Binary(BinOp::Add, f, i), DType::F32);
    assert!(validate(&c, &[mixed]).unwrap_err().contains("Add of float32 and int32"));
    let not_bool = c.intern(Op::Where(f, f, f), DType::F32);
    assert!(validate(&c, &[not_bool]).unwrap_err().contains("where with condition float32"));
    let float_index = c.intern(Op::Load { buf: 0, index: f, valid: None }, DType::F32);
    assert!(validate(&c, &[float_index]).unwrap_err().contains("load index float32"));
    // One variable bound by two reductions.
    let r = c.fresh_var(4);
    let vr = c.var(r);
    let body = c.load(0, DType::F32, vr, None);
    let sum = c.reduce(RedOp::Sum, r, 4, body);
    let max = c.reduce(RedOp::Max, r, 4, body);
    let both = c.binary(BinOp::Add, sum, max);
    assert!(validate(&c, &[both]).unwrap_err().contains(&format!("variable v{r} is bound by reductions")));
}

#[test]
fn index_helpers_build_what_they_say() {
    let mut c = Ctx::new();
    let v = c.fresh_var(100);
    let x = c.var(v);
    let a = c.add_i(x, 7);
    let m = c.mul_i(a, 3);
    let d = c.div_i(m, 4);
    let r = c.rem_i(m, 5);
    let ge = c.ge_i(x, 10);
    for xv in [0, 1, 9, 10, 57, 99] {
        let env = [(v, xv)];
        assert_eq!(eval_int(&c, d, &env), (xv + 7) * 3 / 4);
        assert_eq!(eval_int(&c, r, &env), (xv + 7) * 3 % 5);
        assert_eq!(eval_int(&c, ge, &env), (xv >= 10) as i64);
    }
    assert_eq!((cast_int(DType::I8, 200.0), cast_int(DType::I32, f64::NAN)), (-56, 0));
    assert_eq!((wrap_int(DType::U16, -1), wrap_int(DType::Bool, 5)), (65535, 1));
}

/// Float16 and bfloat16 sums accumulate in float32: ones summed in half stop growing at 2048 (and
/// at 256 in bfloat16), where adding 1 rounds back down.
#[test]
fn half_sums_accumulate_in_float32() {
    for (dtype, n) in [(DType::F16, 4096u64), (DType::BF16, 512)] {
        let mut c = Ctx::new();
        let r = c.fresh_var(n);
        let one = c.constant(dtype, 1.0);
        let sum = c.reduce(RedOp::Sum, r, n, one);
        assert_eq!(c.dtype(sum), dtype, "the sum keeps its element type");
        let got = interp::eval(&c, sum, &mut HashMap::new(), &|_, _| None).unwrap().as_f64();
        assert_eq!(got, n as f64, "{dtype}");
    }
}
