//! Node cases of operators whose size, shape or condition input is a graph input in the ONNX suite
//! (window lengths, CenterCropPad's shape, AffineGrid's size, If's condition, MaxUnpool's
//! output_shape): the case's own values are folded in as initializers first, as a deployed model
//! carries them, then the model runs through import → lowering → the reference executor.

use std::path::Path;

mod common;

use common::{close, data_sets, read_pb};
use pilot_compiler::onnx;

/// Runs case `dir` with the inputs named in `fold` made initializers.
fn run_folded(dir: &Path, fold: &[&str]) -> Result<(), String> {
    let model = onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let names: Vec<String> = model.graph.real_inputs().map(|v| v.name.clone()).collect();
    for name in fold {
        if !names.iter().any(|n| n == name) {
            return Err(format!("no input `{name}`"));
        }
    }
    for set in data_sets(dir)? {
        let mut m = model.clone();
        let mut inputs = Vec::new();
        for (j, name) in names.iter().enumerate() {
            let t = read_pb(&set.join(format!("input_{j}.pb")));
            if fold.contains(&name.as_str()) {
                m.graph.initializers.push((name.clone(), t));
            } else {
                inputs.push(t);
            }
        }
        let lowered = pilot_compiler::lower::lower(&m, &Default::default()).map_err(|e| e.to_string())?;
        let outs = pilot_compiler::exec::run(&lowered.program, &inputs)?;
        for (k, got) in outs.iter().enumerate() {
            close(got, &read_pb(&set.join(format!("output_{k}.pb")))).map_err(|e| format!("output {k}: {e}"))?;
        }
    }
    Ok(())
}

/// Runs every `(case, inputs to fold)`, reporting every failure at once.
fn run_cases(cases: impl IntoIterator<Item = (String, &'static [&'static str])>) {
    let dir = common::node::node_dir();
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|(c, fold)| run_folded(&dir.join(&c), fold).err().map(|e| format!("{c}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each of `cases` and its function body (`_expanded`), folding `fold`.
fn with_expanded(cases: &[&str], fold: &'static [&'static str]) -> Vec<(String, &'static [&'static str])> {
    cases.iter().flat_map(|c| [(c.to_string(), fold), (format!("{c}_expanded"), fold)]).collect()
}

#[test]
fn window_functions_of_a_folded_length() {
    let cases: Vec<String> = ["hann", "hamming", "blackman"]
        .iter()
        .flat_map(|w| [format!("test_{w}window"), format!("test_{w}window_symmetric")])
        .collect();
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    run_cases(with_expanded(&cases, &["x"]));
}

#[test]
fn center_crop_pad_with_a_folded_shape() {
    let cases = [
        "test_center_crop_pad_crop",
        "test_center_crop_pad_crop_and_pad",
        "test_center_crop_pad_crop_axes_chw",
        "test_center_crop_pad_crop_axes_hwc",
        "test_center_crop_pad_crop_negative_axes_hwc",
        "test_center_crop_pad_pad",
    ];
    run_cases(with_expanded(&cases, &["shape"]));
}

/// The function bodies (`_expanded`) branch with If on the size's rank, known once the size is.
#[test]
fn affine_grid_with_a_folded_size() {
    let cases = [
        "test_affine_grid_2d",
        "test_affine_grid_2d_align_corners",
        "test_affine_grid_3d",
        "test_affine_grid_3d_align_corners",
    ];
    run_cases(with_expanded(&cases, &["size"]));
}

/// The random cases draw their mask from numpy's RandomState(seed), as pilot does at compile time.
#[test]
fn training_dropout_with_folded_ratio_and_mode() {
    let cases = ["", "_default", "_zero_ratio"]
        .iter()
        .flat_map(|v| [format!("test_training_dropout{v}"), format!("test_training_dropout{v}_mask")])
        .map(|c| (c, &["r", "t"][..]));
    run_cases(cases);
}

#[test]
fn if_and_max_unpool_with_folded_inputs() {
    run_cases([
        ("test_if".to_string(), &["cond"][..]),
        ("test_maxunpool_export_with_output_shape".to_string(), &["output_shape"][..]),
    ]);
}
