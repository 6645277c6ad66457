//! Helpers shared by the code generation tests: emit a program, run it on the CPU backend, and
//! compare with the reference executor.

#![allow(dead_code)]

use std::path::PathBuf;

use pilot_compiler::emit::{emit, EmitOptions, EmitReport};
use pilot_compiler::exec;
use pilot_compiler::program::Program;
use pilot_compiler::tensor::Tensor;
use pilot_core::cpu::CpuDevice;
use pilot_core::{Artifact, Session};

/// A fresh artifact path under the system's temporary directory.
pub fn artifact_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pilot-codegen-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}.pkl"))
}

/// Emits `p` for this machine, loads the artifact on a two-thread CPU device, steps it once with
/// `inputs`, and returns the outputs (shaped as the artifact says) and the emit report.
pub fn run_with(p: &Program, opts: &EmitOptions, inputs: &[Tensor], name: &str) -> (Vec<Tensor>, EmitReport) {
    let path = artifact_path(name);
    let report = emit(p, opts, &path).unwrap_or_else(|e| panic!("emit {name}: {e}"));
    let artifact = Artifact::open(&path).unwrap();
    let mut session = Session::new(artifact, Box::new(CpuDevice::new(2))).unwrap();
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_slice()).collect();
    session.step(&bytes).unwrap();
    let outs = session
        .output_specs()
        .iter()
        .zip(session.outputs())
        .map(|(s, b)| Tensor::from_bytes(s.dtype, s.shape.clone(), b.clone()).unwrap())
        .collect();
    let _ = std::fs::remove_file(&path);
    (outs, report)
}

pub fn run(p: &Program, inputs: &[Tensor], name: &str) -> (Vec<Tensor>, EmitReport) {
    run_with(p, &EmitOptions::host(), inputs, name)
}

/// `|a - b| <= tol · max(|b|, 1)` elementwise (NaNs equal; exact for integers and booleans).
pub fn assert_close(got: &Tensor, want: &Tensor, tol: f64, what: &str) {
    assert_eq!(got.dtype, want.dtype, "{what}: dtype");
    assert_eq!(got.numel(), want.numel(), "{what}: element count");
    for (i, (a, b)) in got.to_f64().iter().zip(want.to_f64()).enumerate() {
        let ok = if want.dtype.is_float() {
            (a.is_nan() && b.is_nan()) || *a == b || (a - b).abs() <= tol * b.abs().max(1.0)
        } else {
            *a == b
        };
        assert!(ok, "{what}: element {i}: got {a}, expected {b}");
    }
}

/// Runs `p` compiled and with the reference executor and compares every output.
pub fn check(p: &Program, inputs: &[Tensor], tol: f64, name: &str) -> EmitReport {
    let want = exec::run(p, inputs).unwrap_or_else(|e| panic!("reference {name}: {e}"));
    let (got, report) = run(p, inputs, name);
    assert_eq!(got.len(), want.len(), "{name}: output count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_close(g, w, tol, &format!("{name} output {i}"));
    }
    report
}

/// Deterministic pseudo-random floats in `[lo, hi)`.
pub fn values(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}
