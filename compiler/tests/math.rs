//! Accuracy of the freestanding math prelude (`compiler/src/target/cpu/cmath.rs`), end to end: kernels compiled by
//! the CPU back end, run by the runtime, compared with Rust's f64 functions on dense grids. The bounds
//! asserted here are the ones the prelude's documentation states.

use pilot_compiler::artifact::{write, ModelInfo};
use pilot_compiler::ir::{BinOp, UnOp};
use pilot_compiler::lazy::Lazy;
use pilot_compiler::lower::Port;
use pilot_compiler::program::{BufKind, Program};
use pilot_compiler::target::cpu::Cpu;
use pilot_compiler::target::{Codegen, Gates};
use pilot_core::cpu::CpuDevice;
use pilot_core::{Artifact, DType, Session};

const N: usize = 200_000;

/// Runs `f(x)` (one output per function) over `xs` and returns each output as f64.
/// One function under test: builds its output from the inputs `x` and `y`.
type MathFn<'a> = &'a dyn Fn(&mut Program, &Lazy, &Lazy) -> Lazy;

fn run(dtype: DType, xs: &[f64], ys: &[f64], fs: &[MathFn<'_>]) -> Vec<Vec<f64>> {
    let mut p = Program::new();
    let x = p.input(0, dtype, &[xs.len()]);
    let y = p.input(1, dtype, &[ys.len()]);
    let mut outputs = Vec::new();
    for (i, f) in fs.iter().enumerate() {
        let r = f(&mut p, &x, &y);
        p.realize(&r, BufKind::Output(i), &format!("f{i}"));
        outputs.push(Port { name: format!("f{i}"), dtype, shape: vec![xs.len()] });
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("math.pkl");
    let port = |n: &str| Port { name: n.into(), dtype, shape: vec![xs.len()] };
    let info = ModelInfo {
        model_hash: "math".into(),
        props: vec![],
        inputs: vec![port("x"), port("y")],
        outputs,
        pinned: vec![],
    };
    let cpu = Cpu { target: pilot_core::Target::default_for(pilot_core::Backend::Cpu).unwrap(), cc: None, cpu: None };
    let built = cpu.build(&mut p, &Gates::default()).unwrap();
    write(&p, &info, built, &path).unwrap();
    let mut s = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(2))).unwrap();
    let enc = |v: &[f64]| -> Vec<u8> {
        match dtype {
            DType::F64 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            _ => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
        }
    };
    let (bx, by) = (enc(xs), enc(ys));
    s.step(&[&bx, &by]).unwrap();
    s.outputs().iter().map(|o| pilot_core::dtype::to_f64(dtype, o)).collect()
}

fn grid(lo: f64, hi: f64) -> Vec<f64> {
    (0..N).map(|i| lo + (hi - lo) * i as f64 / (N - 1) as f64).collect()
}

fn worst(got: &[f64], want: impl Fn(usize) -> f64, scale: impl Fn(f64) -> f64) -> f64 {
    got.iter().enumerate().map(|(i, &g)| (g - want(i)).abs() / scale(want(i))).fold(0.0, f64::max)
}

#[test]
fn double_precision_functions() {
    let xs = grid(-700.0, 700.0);
    let pos: Vec<f64> = (0..N).map(|i| 10f64.powf(-300.0 + 600.0 * i as f64 / (N - 1) as f64)).collect();
    let trig = grid(-1e5, 1e5);
    let small = grid(-6.0, 6.0);
    let out = run(DType::F64, &xs, &pos, &[&|p, x, _| p.unary(UnOp::Exp, x), &|p, _, y| p.unary(UnOp::Log, y)]);
    let e = worst(&out[0], |i| xs[i].exp(), |r| r.abs().max(f64::MIN_POSITIVE));
    assert!(e < 5e-14, "exp relative error {e:e}");
    let e = worst(&out[1], |i| pos[i].ln(), |r| r.abs().max(1.0));
    assert!(e < 1e-14, "log error {e:e}");
    let out = run(
        DType::F64,
        &trig,
        &small,
        &[
            &|p, x, _| p.unary(UnOp::Sin, x),
            &|p, x, _| p.unary(UnOp::Cos, x),
            &|p, x, _| p.unary(UnOp::Atan, x),
            &|p, _, y| p.unary(UnOp::Tanh, y),
            &|p, _, y| p.unary(UnOp::Erf, y),
        ],
    );
    for (k, (name, f)) in
        [("sin", f64::sin as fn(f64) -> f64), ("cos", f64::cos), ("atan", f64::atan)].iter().enumerate()
    {
        let e = worst(&out[k], |i| f(trig[i]), |_| 1.0);
        assert!(e < 1e-11, "{name} absolute error {e:e}");
    }
    let e = worst(&out[3], |i| small[i].tanh(), |_| 1.0);
    assert!(e < 1e-7, "tanh absolute error {e:e}");
    let erf = |x: f64| pilot_compiler::ir::interp::erf(x);
    let e = worst(&out[4], |i| erf(small[i]), |_| 1.0);
    assert!(e < 2e-7, "erf absolute error {e:e}");
}

#[test]
fn pow_and_rounding() {
    let a: Vec<f64> = (0..N).map(|i| 0.01 + 100.0 * i as f64 / N as f64).collect();
    let b: Vec<f64> = (0..N).map(|i| -5.0 + 10.0 * ((i * 7919) % N) as f64 / N as f64).collect();
    let out = run(
        DType::F64,
        &a,
        &b,
        &[&|p, x, y| p.binary(BinOp::Pow, x, y), &|p, _, y| {
            let s = p.full(DType::F64, &y.shape, 37.0);
            let z = p.binary(BinOp::Mul, y, &s);
            p.unary(UnOp::Round, &z)
        }],
    );
    let e = worst(&out[0], |i| a[i].powf(b[i]), |r| r.abs().max(f64::MIN_POSITIVE));
    assert!(e < 1e-13, "pow relative error {e:e}");
    let e = worst(&out[1], |i| (b[i] * 37.0).round_ties_even(), |_| 1.0);
    assert_eq!(e, 0.0, "round half to even is exact");
}

#[test]
fn single_precision_fast_paths() {
    let xs = grid(-87.0, 88.0);
    let ys = grid(-9.0, 9.0);
    let out = run(
        DType::F32,
        &xs,
        &ys,
        &[&|p, x, _| p.unary(UnOp::Exp, x), &|p, _, y| p.unary(UnOp::Tanh, y), &|p, _, y| p.unary(UnOp::Erf, y)],
    );
    let e = worst(&out[0], |i| (xs[i] as f32 as f64).exp(), |r| r.abs().max(f64::MIN_POSITIVE));
    assert!(e < 3e-7, "expf relative error {e:e}");
    let e = worst(&out[1], |i| (ys[i] as f32 as f64).tanh(), |_| 1.0);
    assert!(e < 1e-6, "tanhf absolute error {e:e}");
    let erf = |x: f64| pilot_compiler::ir::interp::erf(x);
    let e = worst(&out[2], |i| erf(ys[i] as f32 as f64), |_| 1.0);
    assert!(e < 1e-6, "erff absolute error {e:e}");
    // Special values.
    let specials = [f64::NEG_INFINITY, f64::INFINITY, f64::NAN, -1000.0, 1000.0, 0.0];
    let out =
        run(DType::F32, &specials, &specials, &[&|p, x, _| p.unary(UnOp::Exp, x), &|p, x, _| p.unary(UnOp::Erf, x)]);
    assert_eq!(&out[0][..2], &[0.0, f64::INFINITY]);
    assert!(out[0][2].is_nan());
    assert_eq!(&out[0][3..], &[0.0, f64::INFINITY, 1.0]);
    assert_eq!(&out[1][..2], &[-1.0, 1.0]);
    assert!(out[1][2].is_nan());
    assert_eq!(&out[1][3..], &[-1.0, 1.0, 0.0]);
}
