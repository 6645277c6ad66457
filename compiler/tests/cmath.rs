//! Accuracy of the C math prelude, measured through the whole pipeline (program → C → object →
//! CPU backend) over dense ranges against Rust's f64 functions. The bounds asserted here are the ones
//! documented in `compiler/src/codegen/cmath.rs`; run with `--nocapture` to see the measured values.

mod common;

use common::run;
use pilot_compiler::ir::interp::erf as erf_ref;
use pilot_compiler::ir::{BinOp, UnOp};
use pilot_compiler::program::{BufKind, Program};
use pilot_compiler::tensor::Tensor;
use pilot_core::DType;

/// Applies each of `ops` to every element of `xs` (float32 or float64) on the CPU backend.
fn apply(dtype: DType, xs: &[f64], ops: &[UnOp], name: &str) -> Vec<Vec<f64>> {
    let mut p = Program::new();
    let x = p.input(0, dtype, &[xs.len()]);
    for (i, &op) in ops.iter().enumerate() {
        let y = p.unary(op, &x);
        p.realize(&y, BufKind::Output(i), name);
    }
    let (outs, _) = run(&p, &[Tensor::from_f64(dtype, vec![xs.len()], xs)], name);
    outs.iter().map(|t| t.to_f64()).collect()
}

fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64).collect()
}

/// `xs` rounded to float32.
fn f32s(xs: Vec<f64>) -> Vec<f64> {
    xs.into_iter().map(|x| x as f32 as f64).collect()
}

/// Largest error of `got` against `f(x)`: relative (against `max(|f(x)|, floor)`) or absolute.
fn max_err(xs: &[f64], got: &[f64], f: impl Fn(f64) -> f64, rel_floor: Option<f64>) -> (f64, f64) {
    let mut worst = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(got) {
        let r = f(x);
        let e = match rel_floor {
            Some(floor) => (y - r).abs() / r.abs().max(floor),
            None => (y - r).abs(),
        };
        assert!(!e.is_nan(), "NaN error at x = {x}: got {y}, want {r}");
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}

fn assert_bound(what: &str, (err, at): (f64, f64), bound: f64) {
    println!("{what:<36} max error {err:.3e} at x = {at:e} (bound {bound:e})");
    assert!(err <= bound, "{what}: error {err:e} at x = {at:e} exceeds {bound:e}");
}

const N: usize = 1 << 20;
const REL: Option<f64> = Some(f64::MIN_POSITIVE);

#[test]
fn float32_exp_log() {
    let xs = f32s(linspace(-87.0, 88.0, N));
    let r = apply(DType::F32, &xs, &[UnOp::Exp], "exp32");
    assert_bound("exp f32 rel [-87, 88]", max_err(&xs, &r[0], f64::exp, REL), 1.2e-7);
    let xs = f32s(linspace(-103.9, -87.0, N / 4));
    let r = apply(DType::F32, &xs, &[UnOp::Exp], "exp32sub");
    assert_bound("exp f32 abs [-104, -87] (subnormal)", max_err(&xs, &r[0], f64::exp, None), 1.5e-45);
    let xs = f32s(linspace(-69.0, 69.0, N).into_iter().map(f64::exp).collect());
    let r = apply(DType::F32, &xs, &[UnOp::Log], "log32");
    assert_bound("log f32 rel [1e-30, 1e30]", max_err(&xs, &r[0], f64::ln, REL), 1.2e-7);
    let xs = f32s(linspace(0.5, 2.0, N));
    let r = apply(DType::F32, &xs, &[UnOp::Log, UnOp::Sqrt], "log32b");
    assert_bound("log f32 abs [0.5, 2]", max_err(&xs, &r[0], f64::ln, None), 6e-8);
    assert_bound("sqrt f32 (correctly rounded)", max_err(&xs, &r[1], |x| x.sqrt() as f32 as f64, None), 0.0);
}

#[test]
fn float32_tanh_erf() {
    let xs = f32s(linspace(-10.0, 10.0, N));
    let r = apply(DType::F32, &xs, &[UnOp::Tanh, UnOp::Erf], "tanh_erf32");
    assert_bound("tanh f32 abs [-10, 10]", max_err(&xs, &r[0], f64::tanh, None), 2e-7);
    assert_bound("tanh f32 rel [-10, 10]", max_err(&xs, &r[0], f64::tanh, REL), 3e-7);
    assert_bound("erf f32 abs [-10, 10]", max_err(&xs, &r[1], erf_ref, None), 3e-7);
    let xs = f32s(linspace(-1e-3, 1e-3, N / 4));
    let r = apply(DType::F32, &xs, &[UnOp::Tanh, UnOp::Erf], "small32");
    assert_bound("tanh f32 rel near 0", max_err(&xs, &r[0], f64::tanh, REL), 1.2e-7);
    assert_bound("erf f32 rel near 0", max_err(&xs, &r[1], erf_ref, REL), 2.4e-7);
}

#[test]
fn float32_trigonometry() {
    let xs = f32s(linspace(-1e4, 1e4, N));
    let r = apply(DType::F32, &xs, &[UnOp::Sin, UnOp::Cos], "trig32");
    assert_bound("sin f32 abs [-1e4, 1e4]", max_err(&xs, &r[0], f64::sin, None), 6e-8);
    assert_bound("cos f32 abs [-1e4, 1e4]", max_err(&xs, &r[1], f64::cos, None), 6e-8);
    let xs = f32s(linspace(-1.5, 1.5, N / 4));
    let r = apply(DType::F32, &xs, &[UnOp::Tan, UnOp::Atan], "tan32");
    assert_bound("tan f32 rel [-1.5, 1.5]", max_err(&xs, &r[0], f64::tan, REL), 6e-8);
    assert_bound("atan f32 rel [-1.5, 1.5]", max_err(&xs, &r[1], f64::atan, REL), 6e-8);
    let xs = f32s(linspace(-1.0, 1.0, N / 4));
    let r = apply(DType::F32, &xs, &[UnOp::Asin, UnOp::Acos], "asin32");
    assert_bound("asin f32 rel [-1, 1]", max_err(&xs, &r[0], f64::asin, REL), 6e-8);
    assert_bound("acos f32 rel [-1, 1]", max_err(&xs, &r[1], f64::acos, REL), 6e-8);
}

#[test]
fn float32_pow_and_fmod() {
    let n = 1 << 18;
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[n]);
    let y = p.input(1, DType::F32, &[n]);
    let pw = p.binary(BinOp::Pow, &x, &y);
    p.realize(&pw, BufKind::Output(0), "pow");
    let rm = p.binary(BinOp::Rem, &y, &x);
    p.realize(&rm, BufKind::Output(1), "fmod");
    let xs: Vec<f32> = common::values(n, 0.01, 20.0, 1);
    let ys: Vec<f32> = common::values(n, -10.0, 10.0, 2);
    let (outs, _) = run(&p, &[Tensor::from_f32(vec![n], &xs), Tensor::from_f32(vec![n], &ys)], "pow32");
    let (pw, rm) = (outs[0].to_f32(), outs[1].to_f32());
    let mut worst: f64 = 0.0;
    for i in 0..n {
        let r = (xs[i] as f64).powf(ys[i] as f64);
        worst = worst.max((pw[i] as f64 - r).abs() / r);
        assert_eq!(rm[i].to_bits(), (ys[i] % xs[i]).to_bits(), "fmod({}, {})", ys[i], xs[i]);
    }
    assert_bound("pow f32 rel x in [0.01, 20], y in [-10, 10]", (worst, 0.0), 6e-8);
}

#[test]
fn float32_rounding_is_exact() {
    let mut xs: Vec<f64> = vec![0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 8388607.5, -8388607.5, 1e20, -1e20];
    xs.extend([f64::INFINITY, f64::NEG_INFINITY, 0.49999997, -0.49999997, 1e-40, -1e-40]);
    xs.extend(linspace(-1e3, 1e3, 200_001));
    xs.extend(common::values(100_000, -3e7, 3e7, 3).into_iter().map(f64::from));
    let xs = f32s(xs);
    let ops = [UnOp::Floor, UnOp::Ceil, UnOp::Trunc, UnOp::Round];
    let r = apply(DType::F32, &xs, &ops, "round32");
    let refs: [fn(f32) -> f32; 4] = [f32::floor, f32::ceil, f32::trunc, f32::round_ties_even];
    for (k, f) in refs.iter().enumerate() {
        for (i, &x) in xs.iter().enumerate() {
            let want = f(x as f32);
            assert_eq!((r[k][i] as f32).to_bits(), want.to_bits(), "{:?}({x}) = {}, want {want}", ops[k], r[k][i]);
        }
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let xs = [-inf, inf, nan, 0.0, -0.0, -1.0];
    let ops = [UnOp::Exp, UnOp::Log, UnOp::Tanh, UnOp::Erf, UnOp::Sin, UnOp::Sqrt, UnOp::Atan];
    for dtype in [DType::F32, DType::F64] {
        let r = apply(dtype, &xs, &ops, "special");
        let same = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs();
        for (k, op) in ops.iter().enumerate() {
            for (i, &x) in xs.iter().enumerate() {
                let want = match op {
                    UnOp::Exp => x.exp(),
                    UnOp::Log => x.ln(),
                    UnOp::Tanh => x.tanh(),
                    UnOp::Erf => erf_ref(x),
                    UnOp::Sin => x.sin(),
                    UnOp::Sqrt => x.sqrt(),
                    _ => x.atan(),
                };
                assert!(same(r[k][i], want), "{dtype} {op:?}({x}) = {}, want {want}", r[k][i]);
            }
        }
    }
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[6]);
    let y = p.input(1, DType::F32, &[6]);
    for (i, op) in [BinOp::Pow, BinOp::Max, BinOp::Min].into_iter().enumerate() {
        let z = p.binary(op, &x, &y);
        p.realize(&z, BufKind::Output(i), "special2");
    }
    let xv = [-0.0f32, -8.0, 2.0, f32::NAN, 1.0, f32::NEG_INFINITY];
    let yv = [-1.0f32, 1.0 / 3.0, f32::NAN, 0.0, f32::NAN, 3.0];
    let (o, _) = run(&p, &[Tensor::from_f32(vec![6], &xv), Tensor::from_f32(vec![6], &yv)], "special2");
    let pw = o[0].to_f32();
    assert_eq!(pw[0], f32::NEG_INFINITY);
    assert!(pw[1].is_nan() && pw[2].is_nan());
    assert_eq!((pw[3], pw[4], pw[5]), (1.0, 1.0, f32::NEG_INFINITY));
    let (mx, mn) = (o[1].to_f32(), o[2].to_f32());
    for i in 0..6 {
        let nan_in = xv[i].is_nan() || yv[i].is_nan();
        assert_eq!(mx[i].is_nan(), nan_in, "max({}, {}) = {}", xv[i], yv[i], mx[i]);
        assert_eq!(mn[i].is_nan(), nan_in, "min({}, {}) = {}", xv[i], yv[i], mn[i]);
    }
}

#[test]
fn float64_functions() {
    let n = N / 4;
    let xs = linspace(-700.0, 700.0, n);
    let r = apply(DType::F64, &xs, &[UnOp::Exp], "exp64");
    assert_bound("exp f64 rel [-700, 700]", max_err(&xs, &r[0], f64::exp, REL), 4.5e-16);
    let xs: Vec<f64> = linspace(-690.0, 690.0, n).into_iter().map(f64::exp).collect();
    let r = apply(DType::F64, &xs, &[UnOp::Log], "log64");
    assert_bound("log f64 rel [1e-300, 1e300]", max_err(&xs, &r[0], f64::ln, REL), 4.5e-16);
    let xs = linspace(-20.0, 20.0, n);
    let r = apply(DType::F64, &xs, &[UnOp::Tanh, UnOp::Erf, UnOp::Atan], "tanh64");
    assert_bound("tanh f64 rel [-20, 20]", max_err(&xs, &r[0], f64::tanh, REL), 1.2e-15);
    assert_bound("erf f64 abs [-20, 20]", max_err(&xs, &r[1], erf_ref, None), 1e-9);
    assert_bound("atan f64 rel [-20, 20]", max_err(&xs, &r[2], f64::atan, REL), 1e-15);
    let xs = linspace(-1e5, 1e5, n);
    let r = apply(DType::F64, &xs, &[UnOp::Sin, UnOp::Cos], "trig64");
    assert_bound("sin f64 abs [-1e5, 1e5]", max_err(&xs, &r[0], f64::sin, None), 3.4e-16);
    assert_bound("cos f64 abs [-1e5, 1e5]", max_err(&xs, &r[1], f64::cos, None), 3.4e-16);
    let xs = linspace(-0.999, 0.999, n);
    let r = apply(DType::F64, &xs, &[UnOp::Asin, UnOp::Acos, UnOp::Tan], "asin64");
    assert_bound("asin f64 rel (-1, 1)", max_err(&xs, &r[0], f64::asin, REL), 1e-15);
    assert_bound("acos f64 rel (-1, 1)", max_err(&xs, &r[1], f64::acos, REL), 1e-15);
    assert_bound("tan f64 rel (-1, 1)", max_err(&xs, &r[2], f64::tan, REL), 1e-15);
}
