//! Lazy tensors: every movement op is an index substitution, checked by evaluating the resulting
//! expression at every point against the values numpy would give; reductions and folding likewise.

use std::collections::HashMap;

use pilot_core::DType;

use crate::ir::{interp, BinOp, Const, Op, RedOp};
use crate::lazy::{strides, Lazy};
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

/// Every element of `x` in C order, where input buffer `b` holds `data[b]`.
fn values(p: &Program, x: &Lazy, data: &[Vec<f64>]) -> Vec<f64> {
    let st = strides(&x.shape);
    let load = |buf: u32, i: i64| -> Option<Const> {
        data.get(buf as usize)?.get(usize::try_from(i).ok()?).map(|&v| Const::float(v))
    };
    (0..x.numel() as i64)
        .map(|flat| {
            let mut env: HashMap<u32, i64> =
                x.vars.iter().enumerate().map(|(i, &v)| (v, flat / st[i] % x.shape[i] as i64)).collect();
            interp::eval(&p.ctx, x.expr, &mut env, &load).expect("every read is in range").as_f64()
        })
        .collect()
}

/// A program with input 0 of `shape` holding 0, 1, 2, ... (so a value names the element it came from).
fn iota(shape: &[usize]) -> (Program, Lazy, Vec<Vec<f64>>) {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, shape);
    let n = x.numel();
    (p, x, vec![(0..n).map(|i| i as f64).collect()])
}

#[test]
fn reshape_keeps_c_order_and_splitting_dims_stays_a_plain_view() {
    let (mut p, x, _) = iota(&[6, 4]);
    let split = p.reshape(&x, &[2, 3, 4]);
    assert_eq!(p.is_buffer_view(&split), Some(0), "the index simplifies back to the flat one");
    let (mut p, x, data24) = iota(&[24]);
    let rows = p.reshape(&x, &[2, 12]);
    assert_eq!(p.is_buffer_view(&rows), Some(0));
    let (mut p, x, _) = iota(&[2, 3, 4]);
    for shape in [&[6, 4][..], &[24], &[4, 6], &[3, 2, 4]] {
        let y = p.reshape(&x, shape);
        assert_eq!(values(&p, &y, &data24), data24[0], "{shape:?}");
    }
    assert_eq!(p.reshape(&x, &[2, 3, 4]), x, "the same shape is the same tensor");
}

#[test]
fn permute_transposes() {
    let (mut p, x, data) = iota(&[2, 3]);
    let t = p.permute(&x, &[1, 0]);
    assert_eq!(t.shape, vec![3, 2]);
    assert_eq!(values(&p, &t, &data), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(p.is_buffer_view(&t), None, "a transposed view is not the plain one");
    let (mut p, x, data) = iota(&[2, 3, 4]);
    let t = p.permute(&x, &[2, 0, 1]);
    assert_eq!(t.shape, vec![4, 2, 3]);
    let got = values(&p, &t, &data);
    // t[k, i, j] = x[i, j, k]
    for (k, i, j) in (0..4).flat_map(|k| (0..2).flat_map(move |i| (0..3).map(move |j| (k, i, j)))) {
        assert_eq!(got[(k * 2 + i) * 3 + j], ((i * 3 + j) * 4 + k) as f64);
    }
}

#[test]
fn slices_step_forwards_and_backwards() {
    let (mut p, x, data) = iota(&[10]);
    let s = p.slice(&x, &[1], &[3], &[3]);
    assert_eq!(values(&p, &s, &data), vec![1.0, 4.0, 7.0]);
    let r = p.slice(&x, &[9], &[-2], &[3]);
    assert_eq!(values(&p, &r, &data), vec![9.0, 7.0, 5.0]);
    let (mut p, x, data) = iota(&[3, 4]);
    let s = p.slice(&x, &[1, 0], &[1, 2], &[2, 2]);
    assert_eq!(values(&p, &s, &data), vec![4.0, 6.0, 8.0, 10.0]);
}

#[test]
fn pad_fills_and_guards_reads_and_negative_pads_crop() {
    let (mut p, x, data) = iota(&[3]);
    let y = p.pad(&x, &[2], &[1], -1.0);
    assert_eq!(y.shape, vec![6]);
    assert_eq!(values(&p, &y, &data), vec![-1.0, -1.0, 0.0, 1.0, 2.0, -1.0]);
    // The read itself is guarded: no out-of-range address is ever formed into a load.
    let guarded = p.ctx.toposort(&[y.expr]).into_iter().any(|n| matches!(p.ctx.op(n), Op::Load { valid: Some(_), .. }));
    assert!(guarded);
    let zero = p.pad(&x, &[1], &[0], 0.0);
    assert!(matches!(p.ctx.op(zero.expr), Op::Load { valid: Some(_), .. }), "a zero fill is the guard itself");
    let crop = p.pad(&x, &[-1], &[0], 0.0);
    assert_eq!(values(&p, &crop, &data), vec![1.0, 2.0]);
    let (mut p, x, data) = iota(&[2, 2]);
    let y = p.pad(&x, &[0, 1], &[1, 0], 9.0);
    assert_eq!(values(&p, &y, &data), vec![9.0, 0.0, 1.0, 9.0, 2.0, 3.0, 9.0, 9.0, 9.0]);
}

#[test]
fn expand_and_broadcast_repeat_size_one_dims() {
    let (mut p, x, data) = iota(&[1, 3]);
    let e = p.expand(&x, &[2, 3]);
    assert_eq!(values(&p, &e, &data), vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
    let (mut p, a, mut data) = iota(&[2, 3]);
    let b = p.input(1, DType::F32, &[3]);
    data.push(vec![10.0, 20.0, 30.0]);
    let ab = p.broadcast(&[&a, &b]).unwrap();
    assert_eq!(ab[1].shape, vec![2, 3]);
    let sum = p.binary(BinOp::Add, &ab[0], &ab[1]);
    assert_eq!(values(&p, &sum, &data), vec![10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
    let c = p.input(2, DType::F32, &[2]);
    assert!(p.broadcast(&[&a, &c]).is_none(), "3 and 2 do not broadcast");
}

#[test]
fn reductions_bind_a_fresh_variable_per_axis() {
    let (mut p, x, data) = iota(&[2, 3]);
    let s = p.reduce(RedOp::Sum, &x, &[1]);
    assert_eq!(s.shape, vec![2, 1]);
    assert_eq!(values(&p, &s, &data), vec![3.0, 12.0]);
    let Op::Reduce { var, extent, .. } = *p.ctx.op(s.expr) else { panic!("a reduction") };
    assert_eq!(extent, 3);
    assert!(!x.vars.contains(&var) && !s.vars.contains(&var));
    let m = p.reduce(RedOp::Max, &x, &[0]);
    assert_eq!(values(&p, &m, &data), vec![3.0, 4.0, 5.0]);
    let all = p.reduce(RedOp::Sum, &x, &[0, 1]);
    assert_eq!(values(&p, &all, &data), vec![15.0]);
    let (mut p, x, data) = iota(&[3, 1]);
    let one = p.reduce(RedOp::Sum, &x, &[1]);
    assert!(!p.ctx.has_reduce(one.expr), "an axis of one point needs no loop");
    assert_eq!(values(&p, &one, &data), data[0]);
}

#[test]
fn a_stored_tensors_innermost_axes_reduce_as_one_row() {
    let (mut p, x, data) = iota(&[2, 3, 4, 5]);
    let s = p.reduce(RedOp::Sum, &x, &[2, 3]);
    assert_eq!(s.shape, vec![2, 3, 1, 1]);
    let want: Vec<f64> = (0..6).map(|r| (20 * r..20 * r + 20).map(|i| i as f64).sum()).collect();
    assert_eq!(values(&p, &s, &data), want);
    let Op::Reduce { extent, body, .. } = *p.ctx.op(s.expr) else { panic!("a reduction") };
    assert_eq!(extent, 20, "one row of 4·5");
    assert!(!p.ctx.has_reduce(body), "not nested");
    let m = p.reduce(RedOp::Max, &x, &[3, 2]);
    assert_eq!(values(&p, &m, &data), (0..6).map(|r| (20 * r + 19) as f64).collect::<Vec<_>>());
    // Axes that are not the innermost, or an expression not stored: one loop per axis.
    let outer = p.reduce(RedOp::Sum, &x, &[1, 2]);
    let Op::Reduce { body, .. } = *p.ctx.op(outer.expr) else { panic!("a reduction") };
    assert!(p.ctx.has_reduce(body));
    let twice = p.binary(BinOp::Add, &x, &x);
    let t = p.reduce(RedOp::Sum, &twice, &[2, 3]);
    let Op::Reduce { body, .. } = *p.ctx.op(t.expr) else { panic!("a reduction") };
    assert!(p.ctx.has_reduce(body));
    assert_eq!(values(&p, &t, &data), want.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
}

#[test]
fn realize_makes_a_kernel_and_returns_a_plain_view() {
    let (mut p, x, _) = iota(&[2, 3]);
    let t = p.permute(&x, &[1, 0]);
    let r = p.realize(&t, BufKind::Scratch, "t/1");
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].name, "k0_t_1");
    assert_eq!(p.kernels[0].shape, vec![3, 2]);
    assert_eq!(p.is_buffer_view(&r), Some(p.kernels[0].out));
    assert_eq!(p.kernel_inputs(&p.kernels[0].clone()), vec![0]);
}

#[test]
fn constants_fold_through_movement_and_arithmetic() {
    let mut p = Program::new();
    let w = p.constant(Tensor::from_f64(DType::F32, vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let t = p.permute(&w, &[1, 0]);
    let folded = p.fold(&t).expect("constant");
    assert_eq!(folded.shape, vec![3, 2]);
    assert_eq!(folded.to_f64(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let two = p.full(DType::F32, &[3, 2], 2.0);
    let d = p.binary(BinOp::Mul, &t, &two);
    assert_eq!(p.fold(&d).unwrap().to_f64(), vec![2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
    let x = p.input(0, DType::F32, &[3, 2]);
    let mixed = p.binary(BinOp::Add, &t, &x);
    assert!(p.fold(&mixed).is_none(), "run-time inputs do not fold");
}
