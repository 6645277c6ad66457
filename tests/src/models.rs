//! What every model test shares: the repository root, the venv's Python, the models of
//! `scripts/make_models.py` (generated once per test binary) and seeded inputs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pilot_core::npy;
use pilot_core::{DType, Session};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The venv's Python (numpy, onnx, onnxruntime), made by `scripts/setup.sh`: the model tests fail without it.
pub use pilot_test_support::venv_python_or_fail as venv_python;

/// The directory of generated models (`vision.onnx`, `policy.onnx`, ...), made on first use.
pub fn test_models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = root().join("target/test-models");
        let st = Command::new(venv_python()).arg(root().join("scripts/make_models.py")).arg(&dir).output().unwrap();
        assert!(st.status.success(), "make_models.py: {}", String::from_utf8_lossy(&st.stderr));
        dir
    })
}

/// Seeded inputs: uint8 planes uniform, floats in [-1, 1) (xorshift, so every test and device sees the
/// same values for the same seed).
pub fn seeded_input(dtype: DType, shape: &[usize], seed: u64) -> npy::Array {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let data = match dtype {
        DType::U8 => (0..n).map(|_| next() as u8).collect(),
        DType::F32 => (0..n)
            .flat_map(|_| (((next() >> 11) as f64 / (1u64 << 53) as f64) as f32 * 2.0 - 1.0).to_le_bytes())
            .collect(),
        d => panic!("no generator for {d}"),
    };
    npy::Array { dtype, shape: shape.to_vec(), data }
}

/// Seeded inputs for every input of `session` (seed = index + 1), also written to `dir` as `.npy`;
/// returns them with the `NAME=FILE.npy` arguments `scripts/ort_run.py` takes.
pub fn seeded_inputs(session: &Session, dir: &Path) -> (Vec<npy::Array>, Vec<String>) {
    let mut arrays = Vec::new();
    let mut feeds = Vec::new();
    for (i, s) in session.inputs().iter().enumerate() {
        let a = seeded_input(s.dtype, &s.shape, i as u64 + 1);
        let p = dir.join(format!("{}.npy", s.name));
        npy::write(&p, &a).unwrap();
        feeds.push(format!("{}={}", s.name, p.display()));
        arrays.push(a);
    }
    (arrays, feeds)
}

/// Runs `model` with onnxruntime on `feeds` and checks every output `session` holds against it:
/// scaled error `|got - ref| / max(1, |ref|)` at most `tolerance`, no all-zero reference. Returns the
/// worst scaled error. `label` names the case in failures.
pub fn compare_with_onnxruntime(
    label: &str,
    model: &Path,
    feeds: &[String],
    session: &Session,
    tolerance: f64,
    dir: &Path,
) -> f64 {
    let out = dir.join("ort");
    let st = Command::new(venv_python())
        .arg(root().join("scripts/ort_run.py"))
        .arg(model)
        .arg(&out)
        .args(feeds)
        .output()
        .unwrap();
    assert!(st.status.success(), "onnxruntime: {}", String::from_utf8_lossy(&st.stderr));
    let mut worst = 0f64;
    for (k, (spec, got)) in session.output_specs().iter().zip(session.outputs()).enumerate() {
        let want = npy::read(out.join(format!("{k}.npy"))).unwrap();
        let got = npy::Array { dtype: spec.dtype, shape: spec.shape.clone(), data: got.clone() };
        assert_eq!(got.shape.iter().product::<usize>(), want.shape.iter().product::<usize>(), "{label} output {k}");
        let (g, w) = (got.to_f64(), want.to_f64());
        assert!(w.iter().any(|&v| v != 0.0), "{label}: an all-zero reference proves nothing");
        for (a, b) in g.iter().zip(&w) {
            let e = (a - b).abs() / b.abs().max(1.0);
            assert!(e <= tolerance, "{label} output {k}: got {a}, onnxruntime {b} (scaled error {e:.2e})");
            worst = worst.max(e);
        }
    }
    worst
}
