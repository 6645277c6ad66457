//! Shared by the emulator's tests: Mesa's tools, built by `scripts/setup.sh` (`scripts/build_mesa.sh`,
//! `scripts/build_ir3_asm.sh`). A missing tool fails the test with the command that builds it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn tool(rel: &str, how: &str) -> PathBuf {
    let p = repo().join(rel);
    assert!(p.is_file(), "{} is missing: run {how}", p.display());
    p
}

/// Mesa's `ir3-disasm`.
pub fn ir3_disasm() -> PathBuf {
    tool("target/mesa/build/src/freedreno/isa/ir3-disasm", "scripts/setup.sh (scripts/build_mesa.sh)")
}

/// Mesa's ISA test vectors.
pub fn mesa_disasm_tests() -> PathBuf {
    tool("target/mesa/src/mesa/src/freedreno/ir3/tests/disasm.c", "scripts/setup.sh (scripts/build_mesa.sh)")
}

/// Our `ir3-asm` (Mesa's ir3_parse_asm).
pub fn ir3_asm() -> PathBuf {
    tool("target/ir3-asm/ir3-asm", "scripts/setup.sh (scripts/build_ir3_asm.sh)")
}

/// What Mesa's assembler reports about a program.
#[derive(Debug, Clone)]
pub struct Assembled {
    pub code: Vec<u8>,
    pub max_reg: i32,
    pub max_half_reg: i32,
    pub max_const: i32,
}

/// Assembles ir3 assembly text with Mesa's assembler (gpu 630).
pub fn assemble(src: &str) -> Assembled {
    let dir = tempfile::tempdir().unwrap();
    let (i, o) = (dir.path().join("in.asm"), dir.path().join("out.bin"));
    std::fs::write(&i, src).unwrap();
    let out = Command::new(ir3_asm()).arg(&i).arg(&o).output().unwrap();
    assert!(out.status.success(), "ir3-asm failed on:\n{src}\n{}", String::from_utf8_lossy(&out.stderr));
    let info = String::from_utf8(out.stdout).unwrap();
    let field = |k: &str| -> i32 {
        info.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{k}="))).unwrap().parse().unwrap()
    };
    Assembled {
        code: std::fs::read(&o).unwrap(),
        max_reg: field("max_reg"),
        max_half_reg: field("max_half_reg"),
        max_const: field("max_const"),
    }
}

/// `ir3-disasm -g FD630` on `code`: one line per instruction, branch targets as relative `#N`
/// (the tool prints `#lN` labels in file mode) and label lines dropped.
pub fn mesa_disasm(code: &[u8]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("code.bin");
    std::fs::write(&p, code).unwrap();
    let out = Command::new(ir3_disasm()).args(["-g", "FD630"]).arg(&p).output().unwrap();
    assert!(out.status.success(), "ir3-disasm failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = Vec::new();
    for line in text.lines() {
        // "  12[hi_lo] text"
        let Some((idx, rest)) = line.trim_start().split_once('[') else { continue };
        let Some((_, body)) = rest.split_once("] ") else { continue };
        let idx: i64 = idx.parse().unwrap();
        if body.ends_with(':') && body.starts_with('l') && !body.contains(' ') {
            continue;
        }
        let body = match body.rsplit_once("#l") {
            Some((head, n)) if n.chars().all(|c| c.is_ascii_digit()) => {
                format!("{head}#{}", n.parse::<i64>().unwrap() - idx)
            }
            _ => body.to_string(),
        };
        lines.push(body);
    }
    lines
}
