//! What every model test shares: the repository root, the venv's Python, the models of
//! `scripts/make_models.py` (generated once per test binary) and seeded inputs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pilot_core::npy;
use pilot_core::DType;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The venv's Python (numpy, onnx, onnxruntime), made by `scripts/setup.sh`.
pub fn venv_python() -> PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(p.exists(), "the model tests need the venv with onnx and onnxruntime: run scripts/setup.sh");
    p
}

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
