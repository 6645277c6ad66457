//! The ONNX backend node cases (generated from the `onnx` Python package by
//! `scripts/gen_onnx_node_tests.py`) and running one through the real pipeline on a device: shared by
//! the conformance tests of each target (`onnx_node.rs`, `onnx_node_amd.rs`).
#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};

use pilot_compiler::onnx;
use pilot_compiler::tensor::Tensor;

use super::pins::split_inputs;
use super::{close_within, data_sets, read_pb, root};

/// The generated node tests, generating them with the project's venv on first use.
pub fn node_dir() -> PathBuf {
    if let Ok(d) = std::env::var("PILOT_ONNX_NODE_DIR") {
        return PathBuf::from(d);
    }
    // Generated once per process (the tests of this binary run in parallel), into a temporary
    // directory renamed into place, so no test ever reads a half-written case.
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = root().join("target/onnx-node");
        if !dir.join("test_abs").exists() {
            let python = pilot_test_support::venv_python_or_fail();
            let tmp = root().join(format!("target/onnx-node.tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            let st = std::process::Command::new(python)
                .arg(root().join("scripts/gen_onnx_node_tests.py"))
                .arg(&tmp)
                .status()
                .expect("python runs");
            assert!(st.success(), "generating the ONNX node tests failed");
            // Another process may have won the race: then its complete copy stays.
            if std::fs::rename(&tmp, &dir).is_err() {
                let _ = std::fs::remove_dir_all(&tmp);
            }
        }
        dir
    })
    .clone()
}

/// The case names a list in `compiler/tests` names, one per line (`# reason` and `//` lines dropped).
pub fn listed(file: &str) -> Vec<String> {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(file))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("//"))
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A fresh runtime device for one case.
pub type DeviceFn = fn() -> Result<Box<dyn pilot_core::Device>, String>;

/// Runs one case through the real pipeline: compile with `opts` and the case's shape-like inputs
/// pinned with `--const` (see [`super::pins`]; one artifact per data set), load, and step on
/// `device` with the other inputs; floats compare within `tol` (default: the dtype's tolerance).
pub fn run_case_on(
    dir: &Path,
    opts: &pilot_compiler::CompileOptions,
    device: DeviceFn,
    tol: Option<f64>,
) -> Result<(), String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let art = tmp.path().join("case.pkl");
    let model = onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    for set in data_sets(dir)? {
        let (pins, runtime) = split_inputs(&model, &set);
        let opts = pilot_compiler::CompileOptions { consts: pins, ..opts.clone() };
        pilot_compiler::compile(&dir.join("model.onnx"), &art, &opts, &|_| {}).map_err(|e| e.to_string())?;
        let artifact = pilot_core::Artifact::open(&art).map_err(|e| e.to_string())?;
        let mut session = pilot_core::Session::new(artifact, device()?).map_err(|e| e.to_string())?;
        let specs = session.inputs().to_vec();
        let inputs: Vec<Tensor> = runtime.iter().map(|j| read_pb(&set.join(format!("input_{j}.pb")))).collect();
        if inputs.len() != specs.len() {
            return Err(format!("{} run-time inputs given, the artifact has {}", inputs.len(), specs.len()));
        }
        for (spec, t) in specs.iter().zip(&inputs) {
            if spec.dtype != t.dtype || spec.nbytes() != t.data.len() {
                return Err(format!(
                    "input `{}`: {} {:?} given, {} {:?} compiled",
                    spec.name, t.dtype, t.shape, spec.dtype, spec.shape
                ));
            }
        }
        let refs: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_slice()).collect();
        session.step(&refs).map_err(|e| e.to_string())?;
        for (k, (spec, got)) in session.output_specs().iter().zip(session.outputs()).enumerate() {
            let got = Tensor { dtype: spec.dtype, shape: spec.shape.clone(), data: got.clone() };
            let want = read_pb(&set.join(format!("output_{k}.pb")));
            close_within(&got, &want, tol).map_err(|e| format!("output {k}: {e}"))?;
        }
    }
    Ok(())
}

/// A case compiled with `opts` (`--image`, `--float16`: compared at 1e-2) and run on `device`. The image path needs
/// constant weights, which node tests feed as graph inputs: every input but the first is frozen into
/// an initializer from each data set (one compiled model per data set). Returns how many
/// `read_image` the kernels have.
pub fn run_case_half_images(
    dir: &Path,
    opts: &pilot_compiler::CompileOptions,
    device: DeviceFn,
) -> Result<usize, String> {
    use prost::Message;
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut reads = 0;
    for set in data_sets(dir)? {
        let mut m = onnx::proto::ModelProto::decode(&bytes[..]).map_err(|e| e.to_string())?;
        let g = m.graph.as_mut().ok_or("no graph")?;
        let init: Vec<String> = g.initializer.iter().filter_map(|t| t.name.clone()).collect();
        let inputs: Vec<String> = g.input.iter().filter_map(|i| i.name.clone()).filter(|n| !init.contains(n)).collect();
        for (j, name) in inputs.iter().enumerate().skip(1) {
            let pb = std::fs::read(set.join(format!("input_{j}.pb"))).map_err(|e| e.to_string())?;
            let mut t = onnx::proto::TensorProto::decode(&pb[..]).map_err(|e| e.to_string())?;
            t.name = Some(name.clone());
            g.initializer.push(t);
            g.input.retain(|i| i.name.as_ref() != Some(name));
        }
        let model = tmp.path().join("model.onnx");
        std::fs::write(&model, m.encode_to_vec()).map_err(|e| e.to_string())?;
        let art = tmp.path().join("case.pkl");
        let report = pilot_compiler::compile(&model, &art, opts, &|_| {}).map_err(|e| e.to_string())?;
        reads += report.read_images;
        let artifact = pilot_core::Artifact::open(&art).map_err(|e| e.to_string())?;
        let mut session = pilot_core::Session::new(artifact, device()?).map_err(|e| e.to_string())?;
        let first = read_pb(&set.join("input_0.pb"));
        session.step(&[first.data.as_slice()]).map_err(|e| e.to_string())?;
        for (k, (spec, got)) in session.output_specs().iter().zip(session.outputs()).enumerate() {
            let got = Tensor { dtype: spec.dtype, shape: spec.shape.clone(), data: got.clone() };
            let want = read_pb(&set.join(format!("output_{k}.pb")));
            close_within(&got, &want, Some(1e-2)).map_err(|e| format!("output {k}: {e}"))?;
        }
    }
    Ok(reads)
}

/// Runs every `every`-th manifest case that no `skip_files` list names on `run` (`all_env` set: every case),
/// and every listed case, which must still fail (so the list stays honest); panics listing the failures.
pub fn check_manifest_on(
    target: &str,
    skip_files: &[&str],
    every: usize,
    all_env: &str,
    run: fn(&Path) -> Result<(), String>,
) {
    let dir = node_dir();
    let manifest = listed("onnx_node_passing.txt");
    let skip_file = skip_files.join(" + ");
    let mut skipped: Vec<String> = skip_files.iter().flat_map(|f| listed(f)).collect();
    let mut failures: Vec<String> = skipped
        .iter()
        .filter(|c| !manifest.contains(c))
        .map(|c| format!("{c}: in {skip_file} but not in the manifest"))
        .collect();
    let every = if std::env::var_os(all_env).is_some() { 1 } else { every };
    let mut cases: Vec<&String> = manifest.iter().filter(|c| !skipped.contains(c)).step_by(every).collect();
    // A developer's focus: only these cases (comma-separated names), as if `all_env` were set.
    if let Ok(only) = std::env::var("PILOT_CONFORMANCE_CASES") {
        let only: Vec<&str> = only.split(',').collect();
        cases = manifest.iter().filter(|c| only.contains(&c.as_str()) && !skipped.contains(c)).collect();
        skipped.retain(|c| only.contains(&c.as_str()));
    }
    failures.extend(cases.iter().filter_map(|c| run(&dir.join(c)).err().map(|e| format!("{c}: {e}"))));
    failures.extend(
        skipped
            .iter()
            .filter(|c| run(&dir.join(c)).is_ok())
            .map(|c| format!("{c}: passes on {target} now: remove it from {skip_file}")),
    );
    eprintln!(
        "{target}: {} of {} run manifest cases pass ({} of the manifest's {} in {skip_file})",
        cases.len() - failures.iter().filter(|f| !f.contains(&skip_file)).count(),
        cases.len(),
        skipped.len(),
        manifest.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures over {} sampled and {} skipped cases on {target}:\n{}",
        failures.len(),
        cases.len(),
        skipped.len(),
        failures.join("\n")
    );
}

/// Reasons given in a skip list: every non-empty line must carry `# reason`.
pub fn check_reasons(file: &str) {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(file)).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("//")) {
        let (case, reason) = line.split_once('#').unwrap_or((line, ""));
        assert!(!reason.trim().is_empty(), "{file}: skipped case `{}` has no reason", case.trim());
    }
}
