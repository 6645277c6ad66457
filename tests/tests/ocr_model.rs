//! A real float CNN + LSTM recognizer: ddddocr 1.6.1's `common.onnx` (MIT; 21 convolutions with
//! Sigmoid-gated activations and residual additions, a bidirectional LSTM of 512 units per direction, a
//! Gemm head over 8210 characters), fetched from the PyPI wheel by `scripts/fetch_ocr_model.py` into
//! `target/models/` (54 MB, too big to commit; `scripts/setup.sh` fetches it). Its width is pinned to
//! 160 (ddddocr resizes a captcha to height 64 keeping the aspect ratio: a 100×40 captcha becomes
//! 160×64). Compiled for the CPU in float32 and for OpenCL (PoCL) with `--image --float16`, stepped
//! through the runtime and compared with onnxruntime on the seeded input.

use std::path::PathBuf;
use std::process::Command;

use pilot_core::cpu::CpuDevice;
use pilot_core::{Artifact, Backend, Session, Target};
use pilot_tests::models::{compare_with_onnxruntime, root, seeded_inputs, venv_python};

/// The model, fetched on first use; `None` (after a skip note, or a failure under `PILOT_REQUIRE=1`)
/// when it cannot be fetched (no network and no cached copy).
fn model() -> Option<PathBuf> {
    let out = root().join("target/models/ddddocr_common.onnx");
    let st = Command::new(venv_python()).arg(root().join("scripts/fetch_ocr_model.py")).arg(&out).output().unwrap();
    if !st.status.success() {
        eprintln!("fetch_ocr_model.py: {}", String::from_utf8_lossy(&st.stderr));
    }
    pilot_test_support::require::or_missing(
        (st.status.success() && out.is_file()).then_some(out),
        "ddddocr 1.6.1's common.onnx (target/models/ddddocr_common.onnx)",
        "run scripts/setup.sh, which runs scripts/fetch_ocr_model.py",
    )
}

/// Compiles the model with `opts` (width pinned), steps it once on `device` with the seeded input and
/// returns the worst scaled error against onnxruntime and the kernel count; fails beyond `tolerance`.
fn check(mut opts: pilot_compiler::CompileOptions, device: Box<dyn pilot_core::Device>, tolerance: f64) -> Option<f64> {
    let model = model()?;
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("ocr.pkl");
    opts.shapes.insert("input1".into(), vec![1, 1, 64, 160]);
    let report = pilot_compiler::compile(&model, &art, &opts, &|_| {}).unwrap();
    let mut session = Session::new(Artifact::open(&art).unwrap(), device).unwrap();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    session.step(&refs).unwrap();
    assert_eq!(session.output_specs()[0].shape, [20, 1, 8210]);
    let label = format!(
        "ddddocr common.onnx {:?} image {} float16 {}",
        opts.target.backend, opts.target.image, opts.target.float16
    );
    let worst = compare_with_onnxruntime(&label, &model, &feeds, &session, tolerance, dir.path());
    eprintln!("{label}: {} kernels, worst scaled error {worst:.2e}", report.kernels);
    Some(worst)
}

#[test]
fn ddddocr_recognizer_in_float32_on_the_cpu() {
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    check(opts, Box::new(CpuDevice::new(2)), 1e-4);
}

/// `--float16` stores every convolution's input and weight, the LSTM's input projection and the
/// Gemm head as half images (21 convolutions; state and sums stay float32): each rounding moves the
/// logits by about 1e-3, none dominates, and together they reach 9.4e-3 on this input (BENCHMARKS.md,
/// "Half precision on a real OCR recognizer").
#[test]
fn ddddocr_recognizer_in_half_images_on_opencl() {
    let mut opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cl).unwrap());
    opts.target.image = true;
    opts.target.float16 = true;
    let device = pilot_cl::ClDevice::open(None).expect("the OpenCL tests need PoCL: run scripts/setup.sh");
    check(opts, Box::new(device), 1e-2);
}
