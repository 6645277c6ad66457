//! The decoder against LLVM: every instruction of every code object the rdna3 tests build, for gfx1100 and for
//! gfx1201, is printed by the emulator's disassembler and compared with `llvm-objdump-19 -d --mcpu=gfx1100` (or
//! `gfx1201`), operand for operand (only the `_e32`/`_e64` encoding suffixes are dropped).

mod rdna3_support;

use std::collections::HashMap;
use std::process::Command;

use pilot_rdna3::{CodeObjectKernel, Isa};

/// LLVM's listing: per function, its instructions as (normalized text, encoded words).
fn objdump(isa: Isa, co: &[u8]) -> HashMap<String, Vec<(String, String)>> {
    let path = std::env::temp_dir().join(format!("pilot-rdna3-disasm-{}-{isa:?}.co", std::process::id()));
    std::fs::write(&path, co).unwrap();
    let out = Command::new("llvm-objdump-19")
        .args(["-d", &format!("--mcpu={}", isa.mcpu())])
        .arg(&path)
        .output()
        .expect("llvm-objdump-19");
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "llvm-objdump-19 failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut funcs: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n.to_string()) {
            current = Some(name);
            continue;
        }
        let (Some(f), Some((asm, comment))) = (&current, line.split_once("//")) else { continue };
        if !line.starts_with('\t') {
            continue;
        }
        let words = comment.split_once(": ").map(|(_, w)| w.split(" <").next().unwrap().trim().to_string());
        funcs.entry(f.clone()).or_default().push((normalize(asm), words.unwrap_or_default()));
    }
    funcs
}

fn normalize(asm: &str) -> String {
    let asm = asm.split_whitespace().collect::<Vec<_>>().join(" ");
    let (mnemonic, rest) = asm.split_once(' ').unwrap_or((&asm, ""));
    let mnemonic = mnemonic.trim_end_matches("_e32").trim_end_matches("_e64");
    if rest.is_empty() {
        mnemonic.to_string()
    } else {
        format!("{mnemonic} {rest}")
    }
}

#[test]
fn decoder_matches_llvm_objdump_on_every_gfx11_instruction() {
    matches_llvm(Isa::Gfx11);
}

#[test]
fn decoder_matches_llvm_objdump_on_every_gfx12_instruction() {
    matches_llvm(Isa::Gfx12);
}

fn matches_llvm(isa: Isa) {
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (stem, src, flags) in rdna3_support::SOURCES {
        let Some(co) = rdna3_support::build_for(isa, stem, src, flags) else { return };
        let listing = objdump(isa, &co);
        for name in CodeObjectKernel::names(&co).unwrap() {
            let kernel = CodeObjectKernel::load(&co, &name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(kernel.isa, isa, "{name}: the ISA read from the code object");
            let llvm = &listing[&name];
            assert!(llvm.len() >= kernel.insts.len(), "{name}: LLVM lists fewer instructions");
            for (inst, (text, words)) in kernel.insts.iter().zip(llvm) {
                let n = words.split_whitespace().count();
                assert_eq!(n, inst.words as usize, "{name} at {:#x}: length differs for `{text}`", inst.offset);
                if inst.to_string() != *text {
                    mismatches.push(format!("{name} at {:#x} ({words}):\n  ours: {inst}\n  llvm: {text}", inst.offset));
                }
                checked += 1;
            }
        }
    }
    assert!(mismatches.is_empty(), "{} of {checked} instructions differ:\n{}", mismatches.len(), mismatches.join("\n"));
    eprintln!("{checked} {isa:?} instructions match LLVM");
}
