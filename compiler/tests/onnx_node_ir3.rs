//! Conformance through Mesa's ir3: a sample of the ONNX node-test manifest (every
//! [`IR3_SAMPLE`]-th case; `PILOT_CONFORMANCE_IR3_ALL=1`: every case) compiles with `--target qcom
//! --qcom-compiler ir3`, plain and with `--nolocals` (`--image --float16` needs constant weights, which
//! node tests feed as inputs: the model tests cover it), and every kernel is a6xx machine code
//! that Mesa's `ir3-disasm` decodes completely, ending in `end`. The same sample then runs on
//! `--device fake-kgsl`: the runtime lays out and launches each kernel through the fake KGSL, whose
//! dispatches execute the a6xx machine code on pilot's a6xx emulator, and the outputs are compared with the
//! cases' expected outputs. Cases the OpenCL target cannot express (float64, `onnx_node_cl_skipped.txt`)
//! cannot be expressed here either and must still fail.

use std::path::Path;

#[allow(dead_code)] // the helpers this file does not use (`close`, ...)
mod common;

use common::data_sets;
use common::node::{check_manifest_on, run_case_on};
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
    check_manifest_on("ir3", "onnx_node_cl_skipped.txt", IR3_SAMPLE, "PILOT_CONFORMANCE_IR3_ALL", compile_case_both);
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
        "onnx_node_cl_skipped.txt",
        IR3_SAMPLE,
        "PILOT_CONFORMANCE_IR3_ALL",
        run_case_both,
    );
    eprintln!("ir3 emulated conformance sample: {:.1} s", st.elapsed().as_secs_f64());
}
