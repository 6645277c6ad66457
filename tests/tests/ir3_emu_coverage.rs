//! What the a6xx emulator must execute: every model test compiled with `--qcom-compiler ir3` (plain, and `--image
//! --float16 --nolocals`) decodes completely with the emulator's own decoder, and every instruction up to `end` is
//! one the executor implements ([`pilot_a6xx_emu::implemented_mnemonics`]). A kernel that needs an instruction the
//! emulator lacks fails here, by name, before any model test runs it. Fails, never skips, without Mesa's library
//! (`scripts/setup.sh` builds it).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use pilot_a6xx_emu::{decode_all, implemented_mnemonics};
use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::{Artifact, Backend, Target};
use pilot_tests::models::test_models;

fn compile(model: &str, shapes: &[(&str, &[usize])], images_half_nolocals: bool) -> Artifact {
    let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    o.target.image = images_half_nolocals;
    o.target.float16 = images_half_nolocals;
    o.target.nolocals = images_half_nolocals;
    o.cl.qcom_compiler = QcomCompiler::Ir3;
    o.shapes = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>();
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("m.pkl");
    pilot_compiler::compile(&test_models().join(format!("{model}.onnx")), &art, &o, &|_| {})
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    Artifact::open(&art).unwrap()
}

#[test]
fn every_model_kernel_decodes_and_uses_only_implemented_instructions() {
    let implemented: BTreeSet<String> = implemented_mnemonics().into_iter().collect();
    // Mnemonic -> the first kernel that needs it, for those the emulator lacks.
    let mut lacking: BTreeMap<String, String> = BTreeMap::new();
    for (model, shapes) in [
        ("vision", &[][..]),
        ("policy", &[][..]),
        ("dmonitoring", &[][..]),
        ("exporter", &[("x", &[2usize, 3, 8, 12][..])][..]),
    ] {
        for ihn in [false, true] {
            let art = compile(model, shapes, ihn);
            let mut used = BTreeSet::new();
            for p in &art.manifest.programs {
                let at = format!("{model}{} {}", if ihn { " (image half nolocals)" } else { "" }, p.name);
                for (i, instr) in decode_all(art.blob(p.blob)).into_iter().enumerate() {
                    let m = match instr {
                        Ok(instr) => instr.mnemonic(),
                        Err(e) => format!("{e} (instruction {i})"),
                    };
                    if !implemented.contains(&m) {
                        lacking.entry(m.clone()).or_insert(at.clone());
                    }
                    used.insert(m.clone());
                    if m == "end" {
                        break;
                    }
                }
            }
            eprintln!("{model} ihn={ihn}: {} kernels use {used:?}", art.manifest.programs.len());
        }
    }
    assert!(lacking.is_empty(), "instructions the model kernels need and the emulator lacks: {lacking:?}");
}
