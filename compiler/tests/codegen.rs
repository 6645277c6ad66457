//! The C back end end to end: programs built with the lazy API are emitted as artifacts, loaded on
//! the CPU backend and stepped, and their outputs compared with the reference executor.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{assert_close, check, run, run_with, values};
use pilot_compiler::codegen::build::{Arch, Toolchain};
use pilot_compiler::emit::{emit, plan_scratch, render_all, EmitOptions};
use pilot_compiler::error::CompileError;
use pilot_compiler::ir::subst::substitute;
use pilot_compiler::ir::{BinOp, RedOp, UnOp};
use pilot_compiler::lazy::Lazy;
use pilot_compiler::program::{BufKind, Program};
use pilot_compiler::tensor::Tensor;
use pilot_core::DType;

fn f32s(shape: &[usize], seed: u64, lo: f32, hi: f32) -> Tensor {
    Tensor::from_f32(shape.to_vec(), &values(shape.iter().product(), lo, hi, seed))
}

#[test]
fn elementwise_chain_with_broadcast() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[2, 3, 4]);
    let y = p.input(1, DType::F32, &[3, 1]);
    let b = p.broadcast(&[&x, &y]).unwrap();
    let m = p.binary(BinOp::Mul, &b[0], &b[1]);
    let one = p.full(DType::F32, &[2, 3, 4], 1.0);
    let s = p.binary(BinOp::Add, &m, &one);
    let zero = p.full(DType::F32, &[2, 3, 4], 0.0);
    let r = p.binary(BinOp::Max, &s, &zero);
    let e = p.unary(UnOp::Exp, &b[1]);
    let out = p.binary(BinOp::Sub, &r, &e);
    p.realize(&out, BufKind::Output(0), "chain");
    let report = check(&p, &[f32s(&[2, 3, 4], 1, -2.0, 2.0), f32s(&[3, 1], 2, -1.0, 1.0)], 1e-6, "chain");
    assert_eq!((report.kernels, report.copies), (1, 0));
}

/// `[m, k] x [k, n]` with the right side a weight: a reduction over the shared axis.
fn matmul(p: &mut Program, a: &Lazy, w: Tensor) -> Lazy {
    let (m, k, n) = (a.shape[0], a.shape[1], w.shape[1]);
    let b = p.constant(w);
    let a3 = p.reshape(a, &[m, k, 1]);
    let b3 = p.reshape(&b, &[1, k, n]);
    let ab = p.broadcast(&[&a3, &b3]).unwrap();
    let prod = p.binary(BinOp::Mul, &ab[0], &ab[1]);
    let sum = p.reduce(RedOp::Sum, &prod, &[1]);
    p.reshape(&sum, &[m, n])
}

#[test]
fn matmul_like_reduce() {
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[8, 64]);
    let c = matmul(&mut p, &a, f32s(&[64, 12], 3, -1.0, 1.0));
    p.realize(&c, BufKind::Output(0), "matmul");
    let src = render_all(&p).unwrap();
    assert_eq!(src[0].parts, 8, "the outer loop is split");
    assert_eq!(src[0].args.len(), 3);
    let report = check(&p, &[f32s(&[8, 64], 4, -1.0, 1.0)], 1e-5, "matmul");
    assert!(report.weight_bytes == 64 * 12 * 4 && report.flops > 0);
}

#[test]
fn sum_over_two_axes_and_nested_reductions() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[4, 5, 6]);
    let s = p.reduce(RedOp::Sum, &x, &[0, 2]);
    p.realize(&s, BufKind::Output(0), "sum02");
    // Σ_i max_j x[i, j, 0]: the max is a reduction inside the sum's body.
    let x0 = p.slice(&x, &[0, 0, 0], &[1, 1, 1], &[4, 5, 1]);
    let mx = p.reduce(RedOp::Max, &x0, &[1]);
    let total = p.reduce(RedOp::Sum, &mx, &[0]);
    p.realize(&total, BufKind::Output(1), "sum_of_max");
    let mn = p.reduce(RedOp::Min, &x, &[2]);
    let prod = p.reduce(RedOp::Prod, &mn, &[1]);
    p.realize(&prod, BufKind::Output(2), "prod_of_min");
    check(&p, &[f32s(&[4, 5, 6], 5, -1.5, 1.5)], 1e-5, "reductions");
}

#[test]
fn max_pool_with_padding_reads_guarded() {
    // 3x3 max pool, stride 2, padding 1 with -inf, on a 7x7 image: out[i, j] = max_{a, b} x[2i+a-1, 2j+b-1].
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[1, 1, 7, 7]);
    let padded = p.pad(&x, &[0, 0, 1, 1], &[0, 0, 1, 1], f64::NEG_INFINITY);
    let vars = p.ctx.fresh_vars(&[1, 1, 4, 4]);
    let (ra, rb) = (p.ctx.fresh_var(3), p.ctx.fresh_var(3));
    let mut map = HashMap::new();
    for (d, (&pv, &v)) in padded.vars.iter().zip(&vars).enumerate() {
        let node = p.ctx.var(v);
        let node = if d >= 2 {
            let two = p.ctx.mul_i(node, 2);
            let r = p.ctx.var(if d == 2 { ra } else { rb });
            p.ctx.add(two, r)
        } else {
            node
        };
        map.insert(pv, node);
    }
    let body = substitute(&mut p.ctx, padded.expr, &map, None);
    let inner = p.ctx.reduce(RedOp::Max, rb, 3, body);
    let expr = p.ctx.reduce(RedOp::Max, ra, 3, inner);
    let pooled = Lazy { dtype: DType::F32, shape: vec![1, 1, 4, 4], vars, expr };
    p.realize(&pooled, BufKind::Output(0), "maxpool");
    let src = render_all(&p).unwrap();
    assert!(src[0].source.contains(" ? b0["), "loads are guarded:\n{}", src[0].source);
    check(&p, &[f32s(&[1, 1, 7, 7], 6, -3.0, -1.0)], 0.0, "maxpool");
}

#[test]
fn transpose_reshape_and_plain_copies() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[2, 3, 4]);
    let t = p.permute(&x, &[2, 0, 1]);
    let r = p.reshape(&t, &[4, 6]);
    let one = p.full(DType::F32, &[4, 6], 1.0);
    let y = p.binary(BinOp::Add, &r, &one);
    p.realize(&y, BufKind::Output(0), "transposed");
    p.realize(&x, BufKind::Output(1), "same_as_input");
    let w = p.constant(Tensor::from_f32(vec![2, 2], &[1.0, -2.0, 3.5, 4.0]));
    p.realize(&w, BufKind::Output(2), "a_weight");
    let report = check(&p, &[f32s(&[2, 3, 4], 7, -5.0, 5.0)], 0.0, "transpose");
    assert_eq!((report.kernels, report.copies), (1, 2), "outputs that are an input or a weight are copies");
}

#[test]
fn math_functions_agree_with_the_interpreter() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[1000]);
    let ax = p.unary(UnOp::Abs, &x);
    let small = p.full(DType::F32, &[1000], 0.1);
    let pos = p.binary(BinOp::Add, &ax, &small);
    let half = p.full(DType::F32, &[1000], 0.75);
    let outs = [
        p.unary(UnOp::Exp, &x),
        p.unary(UnOp::Tanh, &x),
        p.unary(UnOp::Erf, &x),
        p.unary(UnOp::Log, &pos),
        p.unary(UnOp::Sqrt, &ax),
        p.binary(BinOp::Pow, &pos, &half),
        p.binary(BinOp::Pow, &x, &x),
        p.unary(UnOp::Sin, &x),
        p.unary(UnOp::Atan, &x),
        p.unary(UnOp::Round, &x),
        p.binary(BinOp::Rem, &x, &half),
        p.unary(UnOp::Recip, &x),
    ];
    for (i, o) in outs.iter().enumerate() {
        p.realize(o, BufKind::Output(i), "math");
    }
    let xs: Vec<f32> = (0..1000).map(|i| -4.0 + 8.0 * i as f32 / 999.0).collect();
    check(&p, &[Tensor::from_f32(vec![1000], &xs)], 1e-6, "math");
}

fn ints(dtype: DType, v: &[i64]) -> Tensor {
    let t = Tensor::from_i64(vec![v.len()], v);
    let mut p = Program::new();
    let x = p.constant(t);
    let c = p.cast(&x, dtype);
    p.fold(&c).unwrap()
}

#[test]
fn integer_operations_match_c_semantics() {
    let a_vals = [7, -7, 7, -7, 0, 100, -128, 127, 2147483647, -2147483648, 13, -1];
    let b_vals = [2, 2, -2, -2, 5, -3, 3, 1, 1, -1, 4, 3];
    let n = a_vals.len();
    let mut p = Program::new();
    let a = p.input(0, DType::I32, &[n]);
    let b = p.input(1, DType::I32, &[n]);
    let f = p.input(2, DType::F32, &[n]);
    let u = p.input(3, DType::U8, &[n]);
    let mut k = 0;
    let mut out = |p: &mut Program, x: &Lazy| {
        p.realize(x, BufKind::Output(k), "int");
        k += 1;
    };
    for op in [BinOp::Div, BinOp::Rem, BinOp::Add, BinOp::Mul, BinOp::Sub, BinOp::Max, BinOp::Lt, BinOp::Shr] {
        let r = p.binary(op, &a, &b);
        out(&mut p, &r);
    }
    let three = p.full(DType::I32, &[n], 3.0);
    let shl = p.binary(BinOp::Shl, &a, &three);
    out(&mut p, &shl);
    let neg = p.unary(UnOp::Neg, &a);
    out(&mut p, &neg);
    let a8 = p.cast(&a, DType::I8);
    out(&mut p, &a8);
    let fi = p.cast(&f, DType::I32);
    out(&mut p, &fi);
    let fu = p.cast(&f, DType::U8);
    out(&mut p, &fu);
    let uf = p.cast(&u, DType::F32);
    let scale = p.full(DType::F32, &[n], 1.0 / 255.0);
    let un = p.binary(BinOp::Mul, &uf, &scale);
    out(&mut p, &un);
    let uu = p.binary(BinOp::Div, &u, &u);
    out(&mut p, &uu);
    let fb = p.cast(&f, DType::Bool);
    out(&mut p, &fb);
    let fl = p.unary(UnOp::Floor, &f);
    out(&mut p, &fl);
    let fs: Vec<f32> = vec![1.9, -1.9, 300.7, -0.5, f32::NAN, 3e9, -3e9, 0.0, 255.5, 1e30, -1e30, 2.5];
    let us: Vec<i64> = (0..n as i64).map(|i| (i * 37 + 1) % 256).collect();
    let inputs =
        [ints(DType::I32, &a_vals), ints(DType::I32, &b_vals), Tensor::from_f32(vec![n], &fs), ints(DType::U8, &us)];
    // Float outputs within 1e-6: the interpreter multiplies by the f64 constant 1/255 (see the report).
    check(&p, &inputs, 1e-6, "ints");
}

#[test]
fn integer_division_by_zero_is_zero_not_a_trap() {
    let mut p = Program::new();
    let a = p.input(0, DType::I64, &[3]);
    let b = p.input(1, DType::I64, &[3]);
    let q = p.binary(BinOp::Div, &a, &b);
    p.realize(&q, BufKind::Output(0), "div");
    let r = p.binary(BinOp::Rem, &a, &b);
    p.realize(&r, BufKind::Output(1), "rem");
    let (got, _) = run(&p, &[ints(DType::I64, &[5, i64::MIN, -9]), ints(DType::I64, &[0, -1, 4])], "divzero");
    assert_eq!(got[0].to_i64(), vec![0, i64::MIN, -2]);
    assert_eq!(got[1].to_i64(), vec![0, 0, -1]);
}

#[test]
fn float64_and_float16_kernels() {
    let mut p = Program::new();
    let x = p.input(0, DType::F64, &[6, 50]);
    let e = p.unary(UnOp::Exp, &x);
    let l = p.unary(UnOp::Tanh, &e);
    let s = p.reduce(RedOp::Sum, &l, &[1]);
    p.realize(&s, BufKind::Output(0), "f64");
    let h = p.input(1, DType::F16, &[6, 50]);
    let hh = p.binary(BinOp::Mul, &h, &h);
    let hs = p.unary(UnOp::Sqrt, &hh);
    let hm = p.reduce(RedOp::Max, &hs, &[0]);
    p.realize(&hm, BufKind::Output(1), "f16");
    let hc = p.cast(&h, DType::F32);
    p.realize(&hc, BufKind::Output(2), "f16_to_f32");
    let xs = Tensor::from_f64(
        DType::F64,
        vec![6, 50],
        &values(300, -3.0, 3.0, 9).iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    let hs = Tensor::from_f64(
        DType::F16,
        vec![6, 50],
        &values(300, -60.0, 60.0, 10).iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    check(&p, &[xs, hs], 1e-12, "wide_and_half");
}

#[test]
fn scratch_arena_reuses_memory_across_a_chain() {
    let mut p = Program::new();
    let mut x = p.input(0, DType::F32, &[64, 64]);
    for i in 0..5 {
        let t = p.permute(&x, &[1, 0]);
        let c = p.full(DType::F32, &[64, 64], 0.5 + i as f64);
        let y = p.binary(BinOp::Mul, &t, &c);
        let kind = if i == 4 { BufKind::Output(0) } else { BufKind::Scratch };
        x = p.realize(&y, kind, &format!("step{i}"));
    }
    let plan = plan_scratch(&p).unwrap();
    assert_eq!(plan.offsets.len(), 4);
    let report = check(&p, &[f32s(&[64, 64], 11, -1.0, 1.0)], 1e-6, "chain5");
    assert_eq!(report.kernels, 5);
    assert_eq!(report.naive_scratch_bytes, 4 * 64 * 64 * 4);
    assert_eq!(report.arena_bytes, 2 * 64 * 64 * 4, "two buffers alternate");
}

#[test]
fn long_float_sums_stay_accurate_with_reassociation() {
    let n = 1 << 16;
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[n]);
    let s = p.reduce(RedOp::Sum, &x, &[0]);
    p.realize(&s, BufKind::Output(0), "bigsum");
    let v = values(n, 0.0, 1.0, 12);
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let (got, _) = run(&p, &[Tensor::from_f32(vec![n], &v)], "bigsum");
    let rel = (got[0].to_f64()[0] - exact).abs() / exact;
    assert!(rel < 1e-4, "relative error {rel}");
    assert!(render_all(&p).unwrap()[0].source.contains("reassociate(on)"));
}

#[test]
fn parts_follow_the_outermost_loop() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[1, 7, 5]);
    let y = p.unary(UnOp::Neg, &x);
    p.realize(&y, BufKind::Output(0), "neg");
    let s = p.reduce(RedOp::Sum, &x, &[0, 1, 2]);
    p.realize(&s, BufKind::Output(1), "all");
    let src = render_all(&p).unwrap();
    assert_eq!((src[0].parts, src[1].parts), (7, 1));
    check(&p, &[f32s(&[1, 7, 5], 13, -1.0, 1.0)], 1e-6, "parts");
}

fn tiny_program() -> Program {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[4]);
    let y = p.unary(UnOp::Neg, &x);
    p.realize(&y, BufKind::Output(0), "neg");
    p
}

#[test]
fn a_missing_compiler_is_a_clear_error() {
    let opts = EmitOptions { cc: Some(PathBuf::from("/nonexistent/cc")), ..EmitOptions::host() };
    let err = emit(&tiny_program(), &opts, &common::artifact_path("nocc")).unwrap_err();
    assert!(matches!(err, CompileError::NoCompiler { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/cc") && msg.contains("apt-get install clang-19"), "{msg}");
}

#[test]
fn a_failing_compiler_names_the_kernel_and_shows_its_errors() {
    let dir = common::artifact_path("badcc").with_extension("d");
    std::fs::create_dir_all(&dir).unwrap();
    let cc = dir.join("cc");
    std::fs::write(
        &cc,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake; exit 0; fi\necho 'k.c:1: error: boom' >&2\nexit 1\n",
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&cc).status().unwrap();
    let opts = EmitOptions { cc: Some(cc), ..EmitOptions::host() };
    let err = emit(&tiny_program(), &opts, &dir.join("a.pkl")).unwrap_err().to_string();
    assert!(err.contains("k0_neg") && err.contains("boom"), "{err}");
}

#[test]
fn aarch64_objects_cross_compile() {
    let Ok(tc) = Toolchain::find(None, Arch::Aarch64, None) else {
        eprintln!("no clang: skipping the aarch64 cross build");
        return;
    };
    let p = {
        let mut p = Program::new();
        let a = p.input(0, DType::F32, &[4, 32]);
        let c = matmul(&mut p, &a, f32s(&[32, 8], 14, -1.0, 1.0));
        let e = p.unary(UnOp::Erf, &c);
        p.realize(&e, BufKind::Output(0), "cross");
        p
    };
    let objects = tc.compile_all(&render_all(&p).unwrap()).unwrap();
    let o = &objects[0];
    assert_eq!(&o[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([o[16], o[17]]), 1, "ET_REL");
    assert_eq!(u16::from_le_bytes([o[18], o[19]]), 183, "EM_AARCH64");
}

#[test]
fn reports_and_options_are_consistent() {
    let p = tiny_program();
    let opts = EmitOptions {
        model_hash: "abc".into(),
        props: vec![("k".into(), "v".into())],
        inputs: vec![pilot_compiler::emit::IoSpec { name: "x".into(), shape: vec![2, 2], slices: vec![] }],
        ..EmitOptions::host()
    };
    let (out, report) = run_with(&p, &opts, &[f32s(&[2, 2], 15, -1.0, 1.0)], "named");
    assert_eq!(out[0].shape, vec![4]);
    assert!(report.artifact_bytes > 0 && report.compile_seconds > 0.0);
    let want = pilot_compiler::exec::run(&p, &[f32s(&[4], 15, -1.0, 1.0)]).unwrap();
    assert_close(&out[0], &want[0], 0.0, "named");
}
