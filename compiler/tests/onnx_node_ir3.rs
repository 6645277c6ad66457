//! Conformance through Mesa's ir3: a sample of the ONNX node-test manifest (every
//! [`IR3_SAMPLE`]-th case; `PILOT_CONFORMANCE_IR3_ALL=1`: every case) compiles with `--target qcom
//! --qcom-compiler ir3`, plain and with `--nolocals` (`--image --float16` needs constant weights, which
//! node tests feed as inputs: the model tests cover it), and every kernel is a6xx machine code
//! that Mesa's `ir3-disasm` decodes completely, ending in `end`. The same sample then runs on
//! `--device fake-kgsl`: the runtime lays out and launches each kernel through the fake KGSL, whose
//! dispatches execute the a6xx machine code on pilot's a6xx emulator, and the outputs are compared with the
//! cases' expected outputs. Cases the OpenCL target cannot express (float64, `onnx_node_cl_skipped.txt`)
//! cannot be expressed here either and must still fail, as must the few whose emulated results differ for a reason
//! `onnx_node_ir3_emulated_skipped.txt` names.

use std::path::Path;

#[allow(dead_code)] // the helpers this file does not use (`close`, ...)
mod common;

use common::data_sets;
use common::node::{check_manifest_on, listed, node_dir, run_case_half_images, run_case_on};
use common::pins::split_inputs;
use pilot_compiler::onnx;
use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::device::ProgramFormat;
use pilot_core::{Backend, Target};

const IR3_SAMPLE: usize = 25;

fn ir3_options(nolocals: bool) -> pilot_compiler::CompileOptions {
    let mut opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    opts.cl.qcom_compiler = QcomCompiler::Ir3;
    opts.target.nolocals = nolocals;
    opts
}

fn compile_case(dir: &Path, nolocals: bool) -> Result<(), String> {
    let opts = ir3_options(nolocals);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let art = tmp.path().join("case.pkl");
    let model = onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    for set in data_sets(dir)? {
        let (pins, _) = split_inputs(&model, &set);
        let opts = pilot_compiler::CompileOptions { consts: pins, ..opts.clone() };
        pilot_compiler::compile(&dir.join("model.onnx"), &art, &opts, &|_| {}).map_err(|e| e.to_string())?;
        let a = pilot_core::Artifact::open(&art).map_err(|e| e.to_string())?;
        for p in &a.manifest.programs {
            if p.format != ProgramFormat::A6xxIr3 {
                return Err(format!("{}: format {:?}", p.name, p.format));
            }
            pilot_test_support::ir3::disassemble(a.blob(p.blob)).map_err(|e| format!("{}: {e}", p.name))?;
        }
    }
    Ok(())
}

fn compile_case_both(dir: &Path) -> Result<(), String> {
    compile_case(dir, false)?;
    compile_case(dir, true).map_err(|e| format!("--nolocals: {e}"))
}

#[test]
fn manifest_sample_compiles_to_a6xx_code_ir3_disasm_decodes() {
    let st = std::time::Instant::now();
    check_manifest_on("ir3", &["onnx_node_cl_skipped.txt"], IR3_SAMPLE, "PILOT_CONFORMANCE_IR3_ALL", compile_case_both);
    eprintln!("ir3 conformance sample: {:.1} s", st.elapsed().as_secs_f64());
}

/// The fake KGSL with the a6xx emulator as its executor (what `--device fake-kgsl` runs ir3 programs on).
fn fake_kgsl_emulated() -> Result<Box<dyn pilot_core::Device>, String> {
    let fake = pilot_qcom::fake::FakeKgsl::new().with_executor(Box::new(pilot_qcom::fake_emu::EmuExecutor::new()));
    let device = pilot_qcom::device::QcomDevice::with_file(Box::new(fake), "fake-kgsl").map_err(|e| e.to_string())?;
    Ok(Box::new(device))
}

fn run_case_both(dir: &Path) -> Result<(), String> {
    run_case_on(dir, &ir3_options(false), fake_kgsl_emulated, None)?;
    run_case_on(dir, &ir3_options(true), fake_kgsl_emulated, None).map_err(|e| format!("--nolocals: {e}"))
}

#[test]
fn manifest_sample_runs_on_the_a6xx_emulator() {
    let st = std::time::Instant::now();
    check_manifest_on(
        "ir3 on the a6xx emulator",
        &["onnx_node_cl_skipped.txt", "onnx_node_ir3_emulated_skipped.txt"],
        IR3_SAMPLE,
        "PILOT_CONFORMANCE_IR3_ALL",
        run_case_both,
    );
    eprintln!("ir3 emulated conformance sample: {:.1} s", st.elapsed().as_secs_f64());
}

/// Every manifest case with a convolution or a matrix product compiled with ir3 in the car's mode (`--image
/// --float16 --nolocals`, weights frozen to constants) runs on the a6xx emulator within 1e-2, and many of them
/// really sample images (`isam`).
#[test]
fn conv_and_matmul_cases_run_with_half_images_on_the_a6xx_emulator() {
    let dir = node_dir();
    let skipped: Vec<String> =
        ["onnx_node_cl_skipped.txt", "onnx_node_ir3_emulated_skipped.txt"].iter().flat_map(|f| listed(f)).collect();
    let cases: Vec<String> = listed("onnx_node_passing.txt")
        .into_iter()
        .filter(|c| ["conv", "matmul", "gemm"].iter().any(|op| c.contains(op)) && !skipped.contains(c))
        .collect();
    assert!(cases.len() > 30, "{} cases", cases.len());
    let mut opts = ir3_options(true);
    opts.target.image = true;
    opts.target.float16 = true;
    let (mut failures, mut with_images) = (Vec::new(), 0);
    for c in &cases {
        match run_case_half_images(&dir.join(c), &opts, fake_kgsl_emulated) {
            Ok(reads) => with_images += usize::from(reads > 0),
            Err(e) => failures.push(format!("{c}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(with_images >= 15, "only {with_images} of {} cases read images", cases.len());
    eprintln!("{with_images} of {} conv/matmul/gemm cases read half images on the a6xx emulator", cases.len());
}
