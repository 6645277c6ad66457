//! A real int8 model: the convolutional trunk of ddddocr 1.6.1's `common_old.onnx` (a captcha OCR
//! model quantized by onnxruntime's `quantize_dynamic`: 21 DynamicQuantizeLinear + ConvInteger pairs
//! on uint8 activations and weights, with their float rescaling), made by
//! `scripts/fetch_quant_model.py` and committed as `tests/data/ddddocr_int8_trunk.onnx` (MIT, see
//! `tests/data/README.md`). Compiled for the CPU and for OpenCL (PoCL), stepped through the runtime and
//! compared with onnxruntime on the same seeded input.

use pilot_core::cpu::CpuDevice;
use pilot_core::npy;
use pilot_core::{Artifact, Backend, DType, Session, Target};
use pilot_tests::models::{compare_with_onnxruntime, root, seeded_inputs};

/// Scaled error allowed against onnxruntime for most elements (as every model test).
const TOLERANCE: f64 = 1e-4;

/// Scaled error allowed for the few others. Every layer requantizes its input with
/// DynamicQuantizeLinear, `round(x / scale)`: a float difference in the last bit of `x` (another
/// summation order in the previous layer, another `exp` in its Sigmoid) flips a value lying on a
/// rounding boundary by one quantization step, which the later layers carry on.
const ROUNDING_TOLERANCE: f64 = 1e-2;

/// The share of elements allowed beyond [`TOLERANCE`].
const ROUNDING_SHARE: f64 = 0.02;

fn compile_run_compare(backend: Backend, device: Box<dyn pilot_core::Device>) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("tests/data/ddddocr_int8_trunk.onnx");
    let art = dir.path().join("trunk.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(backend).unwrap());
    let report = pilot_compiler::compile(&model, &art, &opts, &|_| {}).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    let mut session = Session::new(Artifact::open(&art).unwrap(), device).unwrap();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    session.step(&refs).unwrap();
    let label = format!("ddddocr int8 {backend:?}");
    let worst = compare_with_onnxruntime(&label, &model, &feeds, &session, ROUNDING_TOLERANCE, dir.path());
    let want = npy::read(dir.path().join("ort/0.npy")).unwrap().to_f64();
    let got =
        npy::Array { dtype: DType::F32, shape: want_shape(&session), data: session.outputs()[0].clone() }.to_f64();
    let beyond = got.iter().zip(&want).filter(|(a, b)| (*a - *b).abs() / b.abs().max(1.0) > TOLERANCE).count();
    let share = beyond as f64 / want.len() as f64;
    eprintln!(
        "{label}: {} kernels, worst scaled error {worst:.2e}, {beyond} of {} elements beyond {TOLERANCE:e}",
        report.kernels,
        want.len()
    );
    assert!(share <= ROUNDING_SHARE, "{label}: {beyond} of {} elements beyond {TOLERANCE:e}", want.len());
    worst
}

fn want_shape(session: &Session) -> Vec<usize> {
    session.output_specs()[0].shape.clone()
}

#[test]
fn int8_ocr_trunk_matches_onnxruntime_on_the_cpu() {
    compile_run_compare(Backend::Cpu, Box::new(CpuDevice::new(2)));
}

#[test]
fn int8_ocr_trunk_matches_onnxruntime_on_opencl() {
    let cl = pilot_cl::ClDevice::open(None).expect("the OpenCL tests need PoCL: run scripts/setup.sh");
    compile_run_compare(Backend::Cl, Box::new(cl));
}
