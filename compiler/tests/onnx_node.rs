//! Conformance: the ONNX backend node tests (generated from the `onnx` Python package by
//! `scripts/gen_onnx_node_tests.py`) run through pilot, driven by a manifest of passing cases.
//!
//! Inputs the model uses as shapes, axes or counts are pinned at compile time from each data set
//! (`pilot compile --const`, see `common::pins`); the others are fed at run time.
//!
//! - `onnx_node_passing.txt`: cases that must pass (CI fails on any regression);
//! - `onnx_node_skipped.txt`: cases we skip, each with its reason;
//! - `cargo test -p pilot-compiler --test onnx_node -- --ignored survey` runs every case and writes
//!   `target/onnx-node-survey.txt` (pass/fail with the error), to refresh both lists.
//! - `onnx_node_cl_skipped.txt`: manifest cases the OpenCL target cannot run (float64), each with its
//!   reason; `-- --ignored survey_cl` runs every manifest case on OpenCL and writes
//!   `target/onnx-node-cl-survey.txt` (pass/fail, error and time per case), to refresh that list.

use std::path::Path;

mod common;

use common::node::{check_manifest_on, check_reasons, listed, node_dir, run_case_half_images, run_case_on};
use common::pins::split_inputs;
use common::{close, data_sets, read_pb, root};
use pilot_compiler::onnx;
use pilot_compiler::tensor::Tensor;
use pilot_core::{Backend, Target};

/// `backend` on its default architecture.
fn target(backend: Backend) -> Target {
    Target::default_for(backend).expect("cpu and cl have default architectures here")
}

/// Runs one case through import, lowering and the reference executor, its shape-like inputs pinned
/// to each data set's values (see [`common::pins`]; one lowering per data set).
fn run_case(dir: &Path) -> Result<(), String> {
    let model = onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    for set in data_sets(dir)? {
        let (pins, runtime) = split_inputs(&model, &set);
        let lowered = pilot_compiler::lower::lower_pinned(
            &model,
            &Default::default(),
            &pins,
            None,
            Default::default(),
            Default::default(),
            0,
        )
        .map_err(|e| e.to_string())?;
        let inputs: Vec<Tensor> = runtime.iter().map(|j| read_pb(&set.join(format!("input_{j}.pb")))).collect();
        let outs = pilot_compiler::exec::run(&lowered.program, &inputs)?;
        for (k, got) in outs.iter().enumerate() {
            let path = set.join(format!("output_{k}.pb"));
            if !path.exists() {
                return Err(format!("output {k} is not a tensor"));
            }
            close(got, &read_pb(&path)).map_err(|e| format!("output {k}: {e}"))?;
        }
    }
    Ok(())
}

fn cpu_device() -> Result<Box<dyn pilot_core::Device>, String> {
    Ok(Box::new(pilot_core::cpu::CpuDevice::new(1)))
}

fn cl_device() -> Result<Box<dyn pilot_core::Device>, String> {
    pilot_cl::ClDevice::open(None)
        .map(|d| Box::new(d) as Box<dyn pilot_core::Device>)
        .map_err(|e| format!("the OpenCL conformance tests need PoCL (scripts/setup.sh): {e}"))
}

/// The C code generator (clang) on the CPU runtime.
fn run_case_cpu(dir: &Path) -> Result<(), String> {
    run_case_on(dir, &pilot_compiler::CompileOptions::new(target(Backend::Cpu)), cpu_device, None)
}

/// The OpenCL code generator (plain buffers) on the OpenCL runtime (PoCL).
fn run_case_cl(dir: &Path) -> Result<(), String> {
    run_case_on(dir, &pilot_compiler::CompileOptions::new(target(Backend::Cl)), cl_device, None)
}

/// [`run_case_half_images`] on the OpenCL target with `--image --float16`.
fn run_case_cl_half_images(dir: &Path) -> Result<usize, String> {
    let mut opts = pilot_compiler::CompileOptions::new(target(Backend::Cl));
    opts.target.image = true;
    opts.target.float16 = true;
    run_case_half_images(dir, &opts, cl_device)
}

#[test]
fn manifest_cases_pass() {
    let dir = node_dir();
    let cases = listed("onnx_node_passing.txt");
    assert!(cases.len() > 100, "the manifest lists {} cases", cases.len());
    let failures: Vec<String> =
        cases.iter().filter_map(|c| run_case(&dir.join(c)).err().map(|e| format!("{c}: {e}"))).collect();
    eprintln!("reference: {} of {} manifest cases pass", cases.len() - failures.len(), cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} manifest cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Every `CPU_SAMPLE`-th manifest case also runs through the C code generator and the CPU runtime
/// (`PILOT_CONFORMANCE_CPU_ALL=1`: every case).
const CPU_SAMPLE: usize = 5;

/// A kernel whose value, read from a reduction, does not vary along the inner loop (ScatterND's
/// `max` over the index rows) once crashed the CPU back end's register-tile path.
#[test]
fn scatternd_passes_on_the_cpu_backend() {
    run_case_cpu(&node_dir().join("test_scatternd")).unwrap();
}

#[test]
fn manifest_sample_passes_on_the_cpu_backend() {
    let dir = node_dir();
    let every = if std::env::var_os("PILOT_CONFORMANCE_CPU_ALL").is_some() { 1 } else { CPU_SAMPLE };
    let cases: Vec<String> = listed("onnx_node_passing.txt").into_iter().step_by(every).collect();
    let failures: Vec<String> =
        cases.iter().filter_map(|c| run_case_cpu(&dir.join(c)).err().map(|e| format!("{c}: {e}"))).collect();
    eprintln!("cpu: {} of {} run manifest cases pass", cases.len() - failures.len(), cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} sampled cases failed on the CPU backend:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Every `CL_SAMPLE`-th manifest case that the OpenCL target can run also runs through the OpenCL
/// code generator and the OpenCL runtime (PoCL here). The whole manifest takes about 22 minutes on two
/// cores with PoCL's kernel cache cold (mostly PoCL building each case's program; about 2 minutes warm),
/// far more than CI allows, so CI runs this deterministic subset (`PILOT_CONFORMANCE_CL_ALL=1`: every
/// case). Cases in `onnx_node_cl_skipped.txt` (float64, which the target lacks) all run, and must
/// still fail, so the list stays honest.
const CL_SAMPLE: usize = 6;

#[test]
fn manifest_cases_pass_on_opencl() {
    check_manifest_on("OpenCL", &["onnx_node_cl_skipped.txt"], CL_SAMPLE, "PILOT_CONFORMANCE_CL_ALL", run_case_cl);
}

/// Every manifest case with a convolution or a matrix product (the ops `--image` reroutes through
/// images) passes with `--image --float16` at scaled error 1e-2, its weights frozen to constants, and
/// many of them really read images.
#[test]
fn conv_and_matmul_cases_pass_with_half_images() {
    let dir = node_dir();
    let skipped = listed("onnx_node_cl_skipped.txt");
    let cases: Vec<String> = listed("onnx_node_passing.txt")
        .into_iter()
        .filter(|c| ["conv", "matmul", "gemm"].iter().any(|op| c.contains(op)) && !skipped.contains(c))
        .collect();
    assert!(cases.len() > 30, "{} cases", cases.len());
    let mut failures = Vec::new();
    let mut with_images = 0;
    for c in &cases {
        match run_case_cl_half_images(&dir.join(c)) {
            Ok(reads) => with_images += usize::from(reads > 0),
            Err(e) => failures.push(format!("{c}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // 18 of 64 today: 1-D and 3-D convolutions, batched and integer products keep plain buffers.
    assert!(with_images >= 15, "only {with_images} of {} cases read images", cases.len());
    eprintln!("{with_images} of {} conv/matmul/gemm cases read half images", cases.len());
}

#[test]
fn skipped_cases_have_reasons() {
    check_reasons("onnx_node_skipped.txt");
    check_reasons("onnx_node_cl_skipped.txt");
}

/// `PILOT_ONNX_CASE=test_x cargo test -p pilot-compiler --test onnx_node -- --ignored one --nocapture`
#[test]
#[ignore]
fn one() {
    let case = std::env::var("PILOT_ONNX_CASE").expect("set PILOT_ONNX_CASE");
    let dir = node_dir().join(&case);
    let results = [("reference", run_case(&dir)), ("cpu", run_case_cpu(&dir)), ("cl", run_case_cl(&dir))];
    let failed: Vec<String> =
        results.iter().filter_map(|(k, r)| r.as_ref().err().map(|e| format!("{k}: {e}"))).collect();
    assert!(failed.is_empty(), "{case}:\n{}", failed.join("\n"));
}

#[test]
#[ignore]
fn survey() {
    let dir = node_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut report = String::new();
    let mut pass = 0;
    for n in &names {
        let r = std::panic::catch_unwind(|| run_case(&dir.join(n)));
        match r {
            Ok(Ok(())) => {
                pass += 1;
                report.push_str(&format!("PASS {n}\n"));
            }
            Ok(Err(e)) => report.push_str(&format!("FAIL {n} # {}\n", e.replace('\n', " "))),
            Err(_) => report.push_str(&format!("FAIL {n} # panic\n")),
        }
    }
    std::fs::write(root().join("target/onnx-node-survey.txt"), &report).unwrap();
    eprintln!("{pass} of {} node cases pass", names.len());
}

/// Every manifest case on the OpenCL target: writes `target/onnx-node-cl-survey.txt` (pass/fail with
/// the error and the time per case), to refresh `onnx_node_cl_skipped.txt`.
#[test]
#[ignore]
fn survey_cl() {
    let dir = node_dir();
    let cases = listed("onnx_node_passing.txt");
    let mut report = String::new();
    let (mut pass, start) = (0, std::time::Instant::now());
    for c in &cases {
        let t = std::time::Instant::now();
        let r = std::panic::catch_unwind(|| run_case_cl(&dir.join(c)));
        let ms = t.elapsed().as_millis();
        match r {
            Ok(Ok(())) => {
                pass += 1;
                report.push_str(&format!("PASS {c} {ms}ms\n"));
            }
            Ok(Err(e)) => report.push_str(&format!("FAIL {c} {ms}ms # {}\n", e.replace('\n', " "))),
            Err(_) => report.push_str(&format!("FAIL {c} {ms}ms # panic\n")),
        }
    }
    std::fs::write(root().join("target/onnx-node-cl-survey.txt"), &report).unwrap();
    eprintln!("{pass} of {} manifest cases pass on OpenCL in {:.1?}", cases.len(), start.elapsed());
}

/// The cases listed in the file `PILOT_ONNX_CASES` (one a line; default: the manifest) on the
/// reference executor and the CPU and OpenCL back ends (`PILOT_SURVEY_BACKENDS=reference`, `cpu` or
/// `cl`: one of them): writes `target/onnx-node-backend-survey.txt` (`case reference:PASS|FAIL(error)
/// cpu:... cl:...`), to check cases before they join the manifest.
#[test]
#[ignore]
fn survey_backends() {
    let dir = node_dir();
    let cases: Vec<String> = match std::env::var("PILOT_ONNX_CASES") {
        Ok(file) => std::fs::read_to_string(file)
            .expect("PILOT_ONNX_CASES names a readable file")
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect(),
        Err(_) => listed("onnx_node_passing.txt"),
    };
    let verdict = |r: std::thread::Result<Result<(), String>>| match r {
        Ok(Ok(())) => "PASS".to_string(),
        Ok(Err(e)) => format!("FAIL({})", e.replace('\n', " ")),
        Err(_) => "FAIL(panic)".to_string(),
    };
    let only = std::env::var("PILOT_SURVEY_BACKENDS").unwrap_or_default();
    type CaseFn = fn(&Path) -> Result<(), String>;
    let backends: [(&str, CaseFn); 3] = [("reference", run_case), ("cpu", run_case_cpu), ("cl", run_case_cl)];
    let mut report = String::new();
    for c in &cases {
        report.push_str(c);
        for (name, run) in backends.iter().filter(|(name, _)| only.is_empty() || only == *name) {
            let v = verdict(std::panic::catch_unwind(|| run(&dir.join(c))));
            report.push_str(&format!(" {name}:{v}"));
        }
        report.push('\n');
    }
    std::fs::write(root().join("target/onnx-node-backend-survey.txt"), &report).unwrap();
    eprintln!("{} cases surveyed", cases.len());
}
