//! A real float CNN + LSTM recognizer: ddddocr 1.6.1's `common.onnx` (MIT; 21 convolutions with
//! Sigmoid-gated activations and residual additions, a bidirectional LSTM of 512 units per direction, a
//! Gemm head over 8210 characters), fetched from the PyPI wheel by `scripts/fetch_ocr_model.py` into
//! `target/models/` (54 MB, too big to commit; `scripts/setup.sh` fetches it). Its width is pinned to
//! 160 (ddddocr resizes a captcha to height 64 keeping the aspect ratio: a 100×40 captcha becomes
//! 160×64). Compiled for the CPU in float32 and for OpenCL (PoCL) with `--image --float16`, stepped
//! through the runtime and compared with onnxruntime on the seeded input and on the captcha-like image
//! of `scripts/ocr_half_error.py` (grey strokes on a light noisy background, values in [0, 1]).

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

/// The captcha-like input of `scripts/ocr_half_error.py`, written to `dir`: the kind of image ddddocr
/// is given, on which half precision errs most (BENCHMARKS.md).
fn captcha_input(dir: &std::path::Path) -> (pilot_core::npy::Array, String) {
    let path = dir.join("captcha.npy");
    let st = Command::new(venv_python())
        .arg("-c")
        .arg(
            "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); from ocr_half_error import captcha; \
              np.save(sys.argv[2], captcha(np.random.default_rng(7)))",
        )
        .arg(root().join("scripts"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(st.status.success(), "captcha input: {}", String::from_utf8_lossy(&st.stderr));
    (pilot_core::npy::read(&path).unwrap(), format!("input1={}", path.display()))
}

/// Compiles the model with `opts` (width pinned), steps it on `device` with the seeded input and the
/// captcha-like one and returns the worst scaled error against onnxruntime over both; fails beyond
/// `tolerance`.
fn check(mut opts: pilot_compiler::CompileOptions, device: Box<dyn pilot_core::Device>, tolerance: f64) -> Option<f64> {
    let model = model()?;
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("ocr.pkl");
    opts.shapes.insert("input1".into(), vec![1, 1, 64, 160]);
    let report = pilot_compiler::compile(&model, &art, &opts, &|_| {}).unwrap();
    let mut session = Session::new(Artifact::open(&art).unwrap(), device).unwrap();
    let (seeded, seeded_feeds) = seeded_inputs(&session, dir.path());
    let (captcha, captcha_feed) = captcha_input(dir.path());
    assert_eq!(captcha.shape, session.inputs()[0].shape, "the captcha input's shape");
    let mut worst = 0f64;
    for (name, array, feeds) in [("seeded", &seeded[0], seeded_feeds), ("captcha-like", &captcha, vec![captcha_feed])] {
        session.step(&[array.data.as_slice()]).unwrap();
        assert_eq!(session.output_specs()[0].shape, [20, 1, 8210]);
        let label = format!(
            "ddddocr common.onnx {:?} image {} float16 {}, {name} input",
            opts.target.backend, opts.target.image, opts.target.float16
        );
        let err = compare_with_onnxruntime(&label, &model, &feeds, &session, tolerance, dir.path());
        eprintln!("{label}: {} kernels, worst scaled error {err:.2e}", report.kernels);
        worst = worst.max(err);
    }
    Some(worst)
}

#[test]
fn ddddocr_recognizer_in_float32_on_the_cpu() {
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    check(opts, Box::new(CpuDevice::new(2)), 1e-4);
}

/// `--float16` stores every convolution's input, the large weights (the 3×3 expansions on small maps),
/// the LSTM's input projection and the Gemm head as half images; state and sums stay float32, and the
/// weights cheaper than their convolution's input stay float32. Each half rounding moves the logits by
/// about 1e-3, none dominates: 6.9e-3 on the captcha-like input, 1.12e-2 when every weight was half
/// (BENCHMARKS.md, "Half precision on a real OCR recognizer").
#[test]
fn ddddocr_recognizer_in_half_images_on_opencl() {
    let mut opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cl).unwrap());
    opts.target.image = true;
    opts.target.float16 = true;
    let device = pilot_cl::ClDevice::open(None).expect("the OpenCL tests need PoCL: run scripts/setup.sh");
    check(opts, Box::new(device), 1e-2);
}
