//! `scripts/ir3_stats.py`, the side-by-side count of a6xx instructions: tinygrad 0.14.0's IR3 path compiles a model
//! test (compile-only, as the seed's CI gate), every kernel decodes in Mesa's `ir3-disasm` with the (ss)/(sy) counts
//! Mesa's compiler reported, the split adds up and images are read with texture instructions; a pilot artifact that
//! is not ir3 machine code is refused.

use std::process::{Command, Output};

use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::{Backend, Target};
use pilot_tests::models::{root, test_models, venv_python};

fn ir3_stats(args: &[&str]) -> Output {
    Command::new(venv_python()).arg(root().join("scripts/ir3_stats.py")).args(args).output().expect("python runs")
}

#[test]
fn tinygrad_ir3_kernels_are_counted_from_their_disassembly() {
    let model = test_models().join("dmonitoring.onnx");
    let o = ir3_stats(&["tinygrad", model.to_str().unwrap(), "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "ir3_stats.py (needs tinymesa from scripts/requirements.txt and target/mesa): {err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(n("kernels") > 0 && n("instructions") > n("kernels"), "{v}");
    let split: u64 = ["alu", "memory", "texture", "flow", "sync"].iter().map(|k| n(k)).sum();
    assert_eq!(split, n("instructions"), "{v}");
    assert!(n("texture") > 0, "with IMAGE=1 images are read with isam: {v}");
    assert!(n("alu") > n("memory"), "{v}");
}

#[test]
fn pilot_artifacts_without_ir3_code_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("dm.pkl");
    let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    o.cl.qcom_compiler = QcomCompiler::Fake;
    pilot_compiler::compile(&test_models().join("dmonitoring.onnx"), &art, &o, &|_| {}).unwrap();
    let model = test_models().join("dmonitoring.onnx");
    for (path, expected) in
        [(art.as_path(), "not ir3 machine code"), (model.as_path(), "not a readable pilot artifact")]
    {
        let out = ir3_stats(&["pilot", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expected) && err.trim().lines().count() == 1, "{err}");
    }
}
