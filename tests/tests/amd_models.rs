//! The model tests (vision, policy, dmonitoring from `scripts/make_models.py`) compiled for `usb+amd`
//! on gfx1100 and gfx1201: one code object per artifact, every kernel of it accounted for by pilot's
//! reader and matching the program's recorded dispatch facts, every dispatch launching the work-group
//! size its kernel was compiled for, the object disassembled by `llvm-objdump-19` and its metadata
//! listing the same kernels for `llvm-readelf-19`; the artifact loads on the NULL device (compile-only
//! use). Running it: tests/tests/amd_emu.rs (on the RDNA3 emulator).

use std::path::Path;
use std::process::Command;

use pilot_core::device::{ProgramFormat, StepOp};
use pilot_core::null::NullDevice;
use pilot_core::target::Modes;
use pilot_core::{Artifact, Session, Target};
use pilot_tests::models::test_models;
use pilot_usbgpu::codeobj::CodeObject;

fn llvm(tool: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(tool)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e} (apt-get install llvm-19)"));
    assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn check(model: &str, arch: &str, dir: &Path) {
    let target = Target::parse("usb+amd", Some(arch), Modes::default()).unwrap();
    let opts = pilot_compiler::CompileOptions::new(target.clone());
    let art = dir.join(format!("{model}-{arch}.pkl"));
    let report = pilot_compiler::compile(&test_models().join(format!("{model}.onnx")), &art, &opts, &|_| {})
        .unwrap_or_else(|e| panic!("{model} {arch}: {e}"));
    let a = Artifact::open(&art).unwrap();
    let m = &a.manifest;
    assert_eq!(m.target, target);
    assert_eq!(m.programs.len(), report.kernels, "{model}");

    // One code object for every program, and every kernel in it accounted for.
    let blob = m.programs[0].blob;
    assert!(m.programs.iter().all(|p| p.format == ProgramFormat::AmdCodeObject && p.blob == blob), "{model}");
    let code = a.blob(blob);
    let obj = CodeObject::parse(code).unwrap_or_else(|e| panic!("{model} {arch}: {e}"));
    assert_eq!(obj.arch.name(), arch);
    assert_eq!(obj.kernels.len(), m.programs.len(), "{model} {arch}");
    for p in &m.programs {
        let k = obj.kernel(&p.name).unwrap_or_else(|| panic!("{model}: no kernel {}", p.name));
        let d = p.amdgpu.as_ref().unwrap();
        assert_eq!((d.descriptor, d.code), (k.descriptor_offset, k.code_offset), "{}", p.name);
        let r = &k.descriptor;
        assert_eq!(d.rsrc, [r.compute_pgm_rsrc1, r.compute_pgm_rsrc2, r.compute_pgm_rsrc3], "{}", p.name);
        assert_eq!((d.kernarg_size, &d.arg_offsets), (k.kernarg_size, &k.arg_offsets), "{}", p.name);
        assert_eq!((d.vgprs, d.sgprs, d.user_sgprs), (k.vgprs, k.sgprs, k.user_sgprs), "{}", p.name);
        assert_eq!((d.lds, d.scratch, d.wave32), (k.lds_bytes, k.scratch_bytes, true), "{}", p.name);
        assert_eq!(d.arg_offsets.len(), p.args, "{}", p.name);
    }
    for op in &m.step {
        let StepOp::Dispatch { program, global, local, .. } = op else { continue };
        let p = &m.programs[program.0 as usize];
        let k = obj.kernel(&p.name).unwrap();
        assert_eq!(k.reqd_workgroup_size, Some(*local), "{}", p.name);
        assert!(local.iter().product::<u32>() <= k.max_workgroup_size, "{}", p.name);
        assert!((0..3).all(|i| global[i] % local[i] == 0), "{}: {global:?} / {local:?}", p.name);
    }

    // LLVM's tools read the same object: the metadata lists the same kernels, and the disassembly
    // has each kernel at its code offset, ending its program.
    let co = dir.join(format!("{model}-{arch}.co"));
    std::fs::write(&co, code).unwrap();
    let notes = llvm("llvm-readelf-19", &["--notes"], &co);
    assert_eq!(notes.matches("    .symbol:").count(), m.programs.len(), "{model}");
    assert!(notes.contains(&format!("amdhsa.target:   amdgcn-amd-amdhsa--{arch}")), "{notes}");
    let dis = llvm("llvm-objdump-19", &["-d"], &co);
    for k in &obj.kernels {
        let at =
            dis.find(&format!("{:016x} <{}>:", k.code_offset, k.name)).unwrap_or_else(|| panic!("objdump: {}", k.name));
        let body = &dis[at..];
        let body = &body[..body[1..].find("\n\n").map_or(body.len(), |e| e + 1)];
        assert!(body.contains("s_endpgm"), "{}", k.name);
        assert!(!body.contains("<unknown>"), "{}: undecodable instructions", k.name);
    }

    // Compile-only use: the NULL device loads and steps it.
    let mut s = Session::new(a, Box::new(NullDevice::new(arch))).unwrap();
    let inputs: Vec<Vec<u8>> = s.inputs().iter().map(|t| vec![0u8; t.nbytes()]).collect();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    s.step(&refs).unwrap();
}

#[test]
fn model_tests_compile_for_gfx1100() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["vision", "policy", "dmonitoring"] {
        check(model, "gfx1100", dir.path());
    }
}

#[test]
fn model_tests_compile_for_gfx1201() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["vision", "policy", "dmonitoring"] {
        check(model, "gfx1201", dir.path());
    }
}
