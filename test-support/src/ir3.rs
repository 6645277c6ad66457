//! Mesa's `ir3-disasm` (built by `scripts/setup.sh` into target/mesa) as an independent witness of
//! pilot's a6xx machine code: it decodes with Mesa's isaspec tables, never pilot's.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The Adreno 630's chip id, as `ir3-disasm -c` takes it.
pub const A630_CHIP_ID: &str = "0x06030001";

/// What the disassembly of one program shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disassembly {
    /// Instructions up to and including `end` (the padding after it is not counted).
    pub instructions: usize,
    /// Highest full and half registers named (vec4 units: `r5.y` is 5), if any.
    pub max_full_reg: Option<u32>,
    pub max_half_reg: Option<u32>,
    /// Highest const vec4 read (`c9.w` is 9), if any.
    pub max_const: Option<u32>,
    /// The split of the instructions: texture (`isam`, `sam`, ...), memory (global, IBO, const and
    /// local loads and stores), sync (`nop`s, and instructions waiting on `(ss)`/`(sy)`), the rest ALU.
    pub texture: usize,
    pub memory: usize,
    pub sync: usize,
    pub alu: usize,
    /// The text, for messages.
    pub text: String,
}

/// The path of `ir3-disasm`; panics naming `scripts/setup.sh` when it is missing.
pub fn ir3_disasm() -> PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mesa/build/src/freedreno/isa/ir3-disasm");
    assert!(p.exists(), "{} is missing: run scripts/setup.sh (it builds Mesa's ir3-disasm once)", p.display());
    p
}

/// Disassembles `code` (a6xx machine code) with Mesa's `ir3-disasm` for the Adreno 630. Fails on an
/// encoding it does not know (`no match`, unexpected bits), on code without `end`, and on anything
/// but `nop`s after `end`.
pub fn disassemble(code: &[u8]) -> Result<Disassembly, String> {
    static N: AtomicU64 = AtomicU64::new(0);
    let file = std::env::temp_dir().join(format!(
        "pilot-ir3-{}-{}.bin",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&file, code).map_err(|e| e.to_string())?;
    let out = Command::new(ir3_disasm()).args(["-c", A630_CHIP_ID]).arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("ir3-disasm failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    parse(&text, code.len() / 8)
}

fn max_index(text: &str, prefix: &str, out: &mut Option<u32>) {
    // `prefix` followed by digits and `.`: r12.x, hr3.w, c9.y (not `c[`, not names like `cov`).
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find(prefix) {
        let at = i + pos;
        let before_ok = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'.');
        let digits: String = text[at + prefix.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
        let after = text[at + prefix.len() + digits.len()..].chars().next();
        if before_ok && !digits.is_empty() && after == Some('.') {
            let n: u32 = digits.parse().unwrap_or(0);
            *out = Some(out.map_or(n, |m| m.max(n)));
        }
        i = at + prefix.len();
    }
}

/// Parses `ir3-disasm` output of a program of `words` 64-bit words.
pub fn parse(text: &str, words: usize) -> Result<Disassembly, String> {
    let mut d = Disassembly { text: text.to_string(), ..Default::default() };
    let mut seen = 0usize;
    let mut ended = false;
    for line in text.lines() {
        let Some((head, body)) = line.split_once(']') else { continue };
        let Some((_, hex)) = head.split_once('[') else { continue };
        if hex.len() != 17 || !hex.chars().all(|c| c.is_ascii_hexdigit() || c == '_') {
            continue;
        }
        let body = body.trim();
        if body.ends_with(':') {
            continue; // a label line repeats the next instruction's word
        }
        seen += 1;
        if body.contains("no match") || body.contains("WARNING") || body.contains("unexpected") {
            return Err(format!("word {}: ir3-disasm does not know `{hex}`: {body}", seen - 1));
        }
        if ended {
            if body != "nop" {
                return Err(format!("word {}: `{body}` after `end`", seen - 1));
            }
            continue;
        }
        d.instructions += 1;
        // Leading flags: `(sy)(ss)shpe`, `(rpt3)nop`, `(jp)mov.u32u32`, `(nop2) mull.u ...`.
        let mut rest = body;
        while let Some(r) = rest.trim_start().strip_prefix('(') {
            rest = r.split_once(')').map_or("", |(_, after)| after);
        }
        let flags = &body[..body.len() - rest.len()];
        let op = rest.split_whitespace().next().unwrap_or("");
        let name = op.split('.').next().unwrap_or(op);
        if name == "end" {
            ended = true;
        }
        if name == "nop" || flags.contains("(ss)") || flags.contains("(sy)") {
            d.sync += 1;
        } else if ["isam", "sam", "saml", "samb", "samgq", "getsize", "getinfo", "resinfo", "isaml", "isamm"]
            .contains(&name)
        {
            d.texture += 1;
        } else if [
            "ldg", "stg", "ldib", "stib", "ldc", "ldl", "stl", "ldlw", "stlw", "ldp", "stp", "ldgb", "stgb", "stc",
        ]
        .contains(&name)
        {
            d.memory += 1;
        } else {
            d.alu += 1;
        }
        max_index(body, "hr", &mut d.max_half_reg);
        let no_half = body.replace("hr", "h_");
        max_index(&no_half, "r", &mut d.max_full_reg);
        max_index(body, "c", &mut d.max_const);
    }
    if seen != words {
        return Err(format!("ir3-disasm decoded {seen} of {words} instructions"));
    }
    if !ended {
        return Err("the program has no `end`".into());
    }
    Ok(d)
}
