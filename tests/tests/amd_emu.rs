//! The model tests (vision, policy, dmonitoring and exporter from `scripts/make_models.py`) compiled
//! for `usb+amd` gfx1100 and gfx1201 and EXECUTED: the code object pilot ships runs on the RDNA3/RDNA4 emulator
//! through `pilot_rdna3::device::EmuDevice` and the session, and its outputs are compared with
//! onnxruntime on the same seeded inputs (scaled error `|got - ref| / max(1, |ref|)` ≤ 1e-4). Each
//! program's `amdgpu` record in the artifact must equal the one the device derives from the code object.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pilot_core::device::{Device, ProgramSpec};
use pilot_core::target::{Arch, Modes};
use pilot_core::{Artifact, Session, SessionError, Target};
use pilot_rdna3::device::EmuDevice;
use pilot_tests::models::{compare_with_onnxruntime, seeded_inputs, test_models};

fn compile(name: &str, arch: &str, shapes: &[(&str, &[usize])], dir: &Path) -> PathBuf {
    let target = Target::parse("usb+amd", Some(arch), Modes::default()).unwrap();
    let shapes: HashMap<String, Vec<usize>> = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect();
    let opts = pilot_compiler::CompileOptions { shapes, ..pilot_compiler::CompileOptions::new(target) };
    let art = dir.join(format!("{name}-{arch}.pkl"));
    pilot_compiler::compile(&test_models().join(format!("{name}.onnx")), &art, &opts, &|_| {})
        .unwrap_or_else(|e| panic!("{name} {arch}: {e}"));
    art
}

/// Compiles `name` (dynamic dimensions pinned by `shapes`) for `arch`, steps it on the emulated GPU,
/// and returns the worst scaled error against onnxruntime.
fn run_and_compare(name: &str, arch: Arch, shapes: &[(&str, &[usize])]) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let art = compile(name, arch.name(), shapes, dir.path());
    let artifact = Artifact::open(&art).unwrap();

    // The device derives each program's dispatch record from the code object; the artifact's must agree.
    let mut dev = EmuDevice::new(1).with_arch(arch);
    for p in &artifact.manifest.programs {
        let spec = ProgramSpec {
            name: &p.name,
            format: p.format,
            code: artifact.blob(p.blob),
            arg_count: p.args,
            amdgpu: p.amdgpu.as_ref(),
            ir3: None,
        };
        let id = dev.load_program(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(dev.dispatch_record(id), p.amdgpu.as_ref(), "{name}: program {}", p.name);
    }

    let mut session = Session::new(artifact, Box::new(EmuDevice::new(2).with_arch(arch))).unwrap();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    let t = std::time::Instant::now();
    session.step(&refs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let step = t.elapsed();
    let model = test_models().join(format!("{name}.onnx"));
    let worst = compare_with_onnxruntime(name, &model, &feeds, &session, 1e-4, dir.path());
    let counters = session.device_counters();
    eprintln!("{name} {} on amd-emu: worst scaled error {worst:.2e}, step {step:.2?}, {counters:?}", arch.name());
    worst
}

#[test]
fn policy_runs_on_the_emulated_gpu() {
    run_and_compare("policy", Arch::Gfx1100, &[]);
}

#[test]
fn dmonitoring_runs_on_the_emulated_gpu() {
    run_and_compare("dmonitoring", Arch::Gfx1100, &[]);
}

#[test]
fn vision_runs_on_the_emulated_gpu() {
    run_and_compare("vision", Arch::Gfx1100, &[]);
}

#[test]
fn exporter_runs_on_the_emulated_gpu() {
    run_and_compare("exporter", Arch::Gfx1100, &[("x", &[2, 3, 8, 12])]);
}

#[test]
fn policy_runs_on_the_emulated_gfx1201() {
    run_and_compare("policy", Arch::Gfx1201, &[]);
}

#[test]
fn dmonitoring_runs_on_the_emulated_gfx1201() {
    run_and_compare("dmonitoring", Arch::Gfx1201, &[]);
}

#[test]
fn vision_runs_on_the_emulated_gfx1201() {
    run_and_compare("vision", Arch::Gfx1201, &[]);
}

#[test]
fn exporter_runs_on_the_emulated_gfx1201() {
    run_and_compare("exporter", Arch::Gfx1201, &[("x", &[2, 3, 8, 12])]);
}

#[test]
fn the_other_cards_code_objects_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let art = compile("policy", "gfx1201", &[], dir.path());
    let artifact = Artifact::open(&art).unwrap();
    let p = &artifact.manifest.programs[0];
    let spec = ProgramSpec {
        name: &p.name,
        format: p.format,
        code: artifact.blob(p.blob),
        arg_count: p.args,
        amdgpu: p.amdgpu.as_ref(),
        ir3: None,
    };
    let e = EmuDevice::new(1).load_program(&spec).unwrap_err().to_string();
    assert_eq!(e, format!("program `{}`: the code object is for gfx1201; this amd-emu device runs gfx1100", p.name));
    let e = Session::new(artifact, Box::new(EmuDevice::new(1))).err().unwrap();
    assert!(matches!(e, SessionError::Incompatible { .. }), "{e}");
    assert!(!e.to_string().contains('\n') && e.to_string().contains("gfx1201"), "{e}");
}
