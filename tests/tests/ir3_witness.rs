//! The ir3 witness: every model test compiled with `--qcom-compiler ir3` (plain, and `--image
//! --float16 --nolocals` as openpilot compiles for the car) is real Adreno 630 machine code that Mesa's
//! own `ir3-disasm` decodes completely, every kernel ending in `end`; and the dispatch facts the
//! artifact records agree with what the disassembly shows (registers and consts used, length).
//! Fails, never skips, without Mesa's library or tool (`scripts/setup.sh` builds both).

use std::collections::HashMap;

use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::device::ProgramFormat;
use pilot_core::{Artifact, Backend, Target};
use pilot_test_support::ir3::{disassemble, Disassembly};
use pilot_tests::models::test_models;

fn options(images_half_nolocals: bool) -> pilot_compiler::CompileOptions {
    let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    o.target.image = images_half_nolocals;
    o.target.float16 = images_half_nolocals;
    o.target.nolocals = images_half_nolocals;
    o.cl.qcom_compiler = QcomCompiler::Ir3;
    o
}

/// The facts the artifact records for `p`, checked against the disassembly: the program must not
/// name a register beyond its footprint or read a const beyond its const length.
fn agrees(name: &str, r: &pilot_core::artifact::Ir3Program, d: &Disassembly, code_bytes: usize) -> Result<(), String> {
    if let Some(m) = d.max_full_reg.filter(|&m| m + 1 > r.full_regs && m < 48) {
        return Err(format!("{name}: r{m} used, the record's full footprint is {}", r.full_regs));
    }
    // The a6xx merges the register files: hrN is half of r(N/2), inside the full footprint.
    if let Some(m) = d.max_half_reg.filter(|&m| m / 2 + 1 > r.full_regs.max(r.half_regs) && m < 96) {
        return Err(format!(
            "{name}: hr{m} used, the record's footprint is {} full, {} half",
            r.full_regs, r.half_regs
        ));
    }
    if let Some(m) = d.max_const.filter(|&m| m >= r.constlen) {
        return Err(format!("{name}: c{m} read, the record's const length is {}", r.constlen));
    }
    let len = r.instrlen as usize * 16;
    if d.instructions > len + 16 || code_bytes / 8 < d.instructions {
        return Err(format!("{name}: {} instructions, instruction length {}", d.instructions, r.instrlen));
    }
    Ok(())
}

/// Compiles `model` with ir3 and checks every program; returns (kernels, instructions, isam).
fn witness(model: &str, shapes: &[(&str, &[usize])], images_half_nolocals: bool) -> (usize, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("m.pkl");
    let opts = pilot_compiler::CompileOptions {
        shapes: shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>(),
        ..options(images_half_nolocals)
    };
    pilot_compiler::compile(&test_models().join(format!("{model}.onnx")), &art, &opts, &|_| {})
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let a = Artifact::open(&art).unwrap();
    assert!(a.manifest.metadata.compiler.contains("Mesa 25.0.7"), "{}", a.manifest.metadata.compiler);
    let mut instructions = 0;
    let mut isam = 0;
    for p in &a.manifest.programs {
        assert_eq!(p.format, ProgramFormat::A6xxIr3, "{model}: {}", p.name);
        let code = a.blob(p.blob);
        let d = disassemble(code).unwrap_or_else(|e| panic!("{model} {}: {e}", p.name));
        agrees(&p.name, p.ir3.as_ref().unwrap(), &d, code.len()).unwrap_or_else(|e| panic!("{model} {e}\n{}", d.text));
        let textures = p.ir3.as_ref().unwrap().textures;
        assert_eq!(textures > 0, d.texture > 0, "{model} {}: {textures} textures\n{}", p.name, d.text);
        instructions += d.instructions;
        isam += d.text.matches(" isam").count();
    }
    (a.manifest.programs.len(), instructions, isam)
}

#[test]
fn every_model_test_is_a6xx_code_that_ir3_disasm_decodes() {
    for (name, shapes) in [
        ("vision", &[][..]),
        ("policy", &[][..]),
        ("dmonitoring", &[][..]),
        ("exporter", &[("x", &[2usize, 3, 8, 12][..])][..]),
        ("grouped", &[][..]),
        ("gru", &[][..]),
    ] {
        for ihn in [false, true] {
            let (k, n, isam) = witness(name, shapes, ihn);
            let mode = if ihn { "--image --float16 --nolocals" } else { "plain" };
            eprintln!("{name} ({mode}): {k} kernels, {n} a6xx instructions, {isam} isam");
            if ihn && matches!(name, "vision" | "dmonitoring" | "grouped") {
                assert!(isam > 0, "{name}: with --image, read images are texture reads (isam)");
            }
        }
    }
}
