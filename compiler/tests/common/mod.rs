//! Helpers shared by the compiler's integration tests that read ONNX backend test data.

pub mod node;
pub mod pins;
pub mod proto;

use std::path::{Path, PathBuf};

use pilot_compiler::onnx;
use pilot_compiler::tensor::Tensor;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A serialized `TensorProto` (`input_0.pb`, `output_0.pb`).
pub fn read_pb(path: &Path) -> Tensor {
    onnx::load_tensor(&std::fs::read(path).unwrap(), None).unwrap().1
}

/// Compares at `|a - b| <= tol · max(|b|, 1)`, tol 1e-4 (1e-3 for float16); exact for integers and bools.
pub fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    close_within(got, want, None)
}

/// [`close`] with the float tolerance `tol` instead of the dtype's (e.g. 1e-2 for half images).
pub fn close_within(got: &Tensor, want: &Tensor, tol: Option<f64>) -> Result<(), String> {
    if got.dtype != want.dtype {
        return Err(format!("dtype {} vs expected {}", got.dtype, want.dtype));
    }
    if got.numel() != want.numel() {
        return Err(format!("{} elements vs expected {:?}", got.numel(), want.shape));
    }
    // float16 carries about 3 decimal digits.
    let tol = tol.unwrap_or(if want.dtype == pilot_core::DType::F16 { 1e-3 } else { 1e-4 });
    let (g, w) = (got.to_f64(), want.to_f64());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if want.dtype.is_float() {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * b.abs().max(1.0)
        } else {
            a == b
        };
        if !ok {
            return Err(format!("element {i}: {a} vs expected {b}"));
        }
    }
    Ok(())
}

/// The case's `test_data_set_N` directories, in order.
pub fn data_sets(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    Ok(sets)
}
