//! Quantized models compiled for the CPU and for OpenCL (PoCL), stepped through the runtime and
//! compared with onnxruntime on the same seeded input:
//!
//! - a real int8 model: the convolutional trunk of ddddocr 1.6.1's `common_old.onnx` (a captcha OCR
//!   model quantized by onnxruntime's `quantize_dynamic`: 21 DynamicQuantizeLinear + ConvInteger pairs
//!   on uint8 activations and weights, with their float rescaling), made by
//!   `scripts/fetch_quant_model.py` and committed as `tests/data/ddddocr_int8_trunk.onnx` (MIT, see
//!   `tests/data/README.md`);
//! - a QOperator model as static quantizers emit them (`scripts/make_qop_model.py`: QuantizeLinear,
//!   per-channel and depthwise QLinearConv, QLinearMatMul, DequantizeLinear).

use std::path::Path;
use std::process::Command;

use pilot_core::cpu::CpuDevice;
use pilot_core::npy;
use pilot_core::{Artifact, Backend, DType, Session, Target};
use pilot_tests::models::{compare_with_onnxruntime, root, seeded_inputs, venv_python};

/// Scaled error allowed against onnxruntime for most elements (as every model test).
const TOLERANCE: f64 = 1e-4;

/// How far the others may be off, and how many of them there may be. Every layer requantizes with
/// `round(x / scale)`: a float difference in the last bit of `x` (another summation order, another
/// `exp` in a Sigmoid) flips a value lying on a rounding boundary by one quantization step, which the
/// later layers carry on.
struct Rounding {
    max_error: f64,
    max_share: f64,
}

fn open_device(backend: Backend) -> Box<dyn pilot_core::Device> {
    match backend {
        Backend::Cpu => Box::new(CpuDevice::new(2)),
        _ => Box::new(pilot_cl::ClDevice::open(None).expect("the OpenCL tests need PoCL: run scripts/setup.sh")),
    }
}

fn compile_run_compare(name: &str, model: &Path, backend: Backend, rounding: Rounding) {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("model.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(backend).unwrap());
    let report = pilot_compiler::compile(model, &art, &opts, &|_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut session = Session::new(Artifact::open(&art).unwrap(), open_device(backend)).unwrap();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    session.step(&refs).unwrap();
    let label = format!("{name} {backend:?}");
    let worst = compare_with_onnxruntime(&label, model, &feeds, &session, rounding.max_error, dir.path());
    let want = npy::read(dir.path().join("ort/0.npy")).unwrap().to_f64();
    let spec = &session.output_specs()[0];
    assert_eq!(spec.dtype, DType::F32, "{label}");
    let got = npy::Array { dtype: spec.dtype, shape: spec.shape.clone(), data: session.outputs()[0].clone() }.to_f64();
    let beyond = got.iter().zip(&want).filter(|(a, b)| (*a - *b).abs() / b.abs().max(1.0) > TOLERANCE).count();
    eprintln!(
        "{label}: {} kernels, worst scaled error {worst:.2e}, {beyond} of {} elements beyond {TOLERANCE:e}",
        report.kernels,
        want.len()
    );
    assert!(
        beyond as f64 <= rounding.max_share * want.len() as f64,
        "{label}: {beyond} of {} elements beyond {TOLERANCE:e}",
        want.len()
    );
}

fn ocr_trunk(backend: Backend) {
    let model = root().join("tests/data/ddddocr_int8_trunk.onnx");
    compile_run_compare("ddddocr int8 trunk", &model, backend, Rounding { max_error: 1e-2, max_share: 0.02 });
}

#[test]
fn int8_ocr_trunk_matches_onnxruntime_on_the_cpu() {
    ocr_trunk(Backend::Cpu);
}

#[test]
fn int8_ocr_trunk_matches_onnxruntime_on_opencl() {
    ocr_trunk(Backend::Cl);
}

/// Integer accumulation and one float multiplier per layer: pilot and onnxruntime agree exactly.
fn qoperator(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("qop.onnx");
    let st = Command::new(venv_python()).arg(root().join("scripts/make_qop_model.py")).arg(&model).output().unwrap();
    assert!(st.status.success(), "make_qop_model.py: {}", String::from_utf8_lossy(&st.stderr));
    compile_run_compare("QOperator int8", &model, backend, Rounding { max_error: TOLERANCE, max_share: 0.0 });
}

#[test]
fn qoperator_model_matches_onnxruntime_on_the_cpu() {
    qoperator(Backend::Cpu);
}

#[test]
fn qoperator_model_matches_onnxruntime_on_opencl() {
    qoperator(Backend::Cl);
}
