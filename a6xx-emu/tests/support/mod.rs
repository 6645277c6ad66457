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

use pilot_a6xx_emu::{Buffers, Dispatch, Fault, Program, ProgramInfo, Stats};

/// Local invocation id x, y, z arrive in r0.x..z, the work-group id in r1.x..z.
pub const LOCAL_ID_REG: u16 = 0;
pub const WG_ID_REG: u16 = 4;

/// A program assembled by Mesa, decoded for the emulator with Mesa's register footprint.
pub fn program(asm: &Assembled) -> Program {
    Program::decode(&asm.code, ProgramInfo { max_reg: asm.max_reg, wave_size: 64 }).unwrap()
}

/// Runs `asm` on `mem` with `consts`, one work-group of `local` fibers per grid cell.
pub fn run(
    asm: &Assembled,
    consts: &[u32],
    mem: &Buffers,
    grid: [u32; 3],
    local: [u32; 3],
    local_mem: u32,
) -> Result<Stats, Fault> {
    run_with(asm, consts, mem, grid, local, local_mem, &Descriptors::default())
}

/// Texture, sampler and image descriptors for a dispatch, and its private memory per fiber.
#[derive(Default)]
pub struct Descriptors {
    pub textures: Vec<[u32; 16]>,
    pub samplers: Vec<[u32; 4]>,
    pub ibos: Vec<[u32; 16]>,
    pub private_mem: u32,
}

/// [`run`] with descriptors.
pub fn run_with(
    asm: &Assembled,
    consts: &[u32],
    mem: &Buffers,
    grid: [u32; 3],
    local: [u32; 3],
    local_mem: u32,
    descs: &Descriptors,
) -> Result<Stats, Fault> {
    let d = Dispatch {
        consts,
        grid,
        local_size: local,
        local_id_reg: Some(LOCAL_ID_REG),
        wg_id_reg: Some(WG_ID_REG),
        local_mem_bytes: local_mem,
        private_mem_bytes: descs.private_mem,
        textures: &descs.textures,
        samplers: &descs.samplers,
        ibos: &descs.ibos,
        fiber_step_limit: 1 << 24,
        threads: 1,
    };
    pilot_a6xx_emu::run(&program(asm), &d, mem)
}

/// Every instruction of `asm` decodes and prints as `ir3-disasm` prints it.
pub fn assert_disasm_matches(asm: &Assembled) {
    let theirs = mesa_disasm(&asm.code);
    let ours: Vec<String> = pilot_a6xx_emu::decode_all(&asm.code)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|e| panic!("instruction {i}: {e} (ir3-disasm: {:?})", theirs.get(i))).to_string()
        })
        .collect();
    assert_eq!(ours.len(), theirs.len(), "instruction counts differ");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "instruction {i} prints differently from ir3-disasm");
    }
}

pub fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

pub fn bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A small deterministic generator for test inputs.
pub fn lcg(seed: u32, n: usize) -> Vec<u32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            s ^ (s >> 13)
        })
        .collect()
}
