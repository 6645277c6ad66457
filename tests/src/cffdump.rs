//! Mesa's `cffdump` as a witness of what pilot submits on QCOM: a step is captured as an `.rd` file by the fake KGSL
//! (`pilot_qcom::fake::rd`) and decoded by Mesa's own packet, register and instruction tables, none of which pilot's
//! encoder or fake share. `cffdump` and `ir3-disasm` are built from Mesa's source by `scripts/setup.sh` into
//! `target/mesa/build`; the checks fail, never skip, without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use pilot_core::{Artifact, Session};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::fake::rd::RdCapture;
use pilot_qcom::fake::FakeKgsl;

use crate::models::{root, seeded_inputs};

/// A Mesa tool from `target/mesa/build` (`src/freedreno/decode/cffdump`, `src/freedreno/isa/ir3-disasm`); panics
/// naming `scripts/setup.sh` when it has not been built.
pub fn mesa_tool(rel: &str) -> PathBuf {
    let p = root().join("target/mesa/build").join(rel);
    assert!(
        p.is_file(),
        "{} is missing: scripts/setup.sh (scripts/build_mesa.sh) builds Mesa's freedreno tools into target/mesa",
        p.display()
    );
    p
}

/// A step's submission as an `.rd` file, and what the fake KGSL made of the step.
pub struct Captured {
    pub rd: Vec<u8>,
    /// The step's outcome on the fake: its own decoder may refuse what it was sent (the capture is made first).
    pub step: Result<(), String>,
}

/// The first step of `artifact` (a `qcom` artifact) on the fake KGSL as an `.rd` capture. The fake checks the
/// submission but runs no kernel (its default executor), so any program format is captured; the inputs are seeded.
/// An error when no submission was captured.
pub fn capture_step(artifact: &Path) -> Result<Captured, String> {
    let capture = RdCapture::new();
    let fake = FakeKgsl::new().with_rd_capture(capture.clone());
    let device = QcomDevice::with_file(Box::new(fake), "fake-kgsl").map_err(|e| e.to_string())?;
    let art = Artifact::open(artifact).map_err(|e| format!("{}: {e}", artifact.display()))?;
    let mut session = Session::new(art, Box::new(device)).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (arrays, _) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    let step = session.step(&refs).map_err(|e| format!("the step on the fake KGSL: {e}"));
    match capture.take() {
        Some(rd) => Ok(Captured { rd: rd?, step }),
        None => Err(step.err().unwrap_or_else(|| "the step made no submission".into())),
    }
}

/// What `cffdump` made of a capture, with the problems it reported.
#[derive(Debug, Default)]
pub struct Decoded {
    /// cffdump's whole output (`--no-color`).
    pub text: String,
    /// Packets by name, in stream order (type-7 opcodes; register writes are `write REG`).
    pub packets: Vec<String>,
    /// CP_LOAD_STATE6 packets whose state type, source and block cffdump named.
    pub load_state6: usize,
    /// Dispatches: CP_EXEC_CS (with its group counts decoded) and CP_RUN_OPENCL, each shown as a draw.
    pub dispatches: usize,
    /// Shader instructions cffdump disassembled inline, and those it could not decode (`no match`), as lines.
    pub instructions: usize,
    pub unknown_instructions: Vec<String>,
    /// Unknown packets, unknown registers, packets overrunning the stream, undecoded loads: one line each.
    pub problems: Vec<String>,
}

/// Runs `cffdump --no-color` on the `.rd` file `rd` and checks its output: the GPU is the a630, no bad packet
/// header, no unknown opcode, no unknown register, no packet running past its stream, every CP_LOAD_STATE6 with
/// named state type, source and block, every CP_EXEC_CS with its group counts, every dispatch decoded as a draw.
pub fn decode(rd: &Path) -> Decoded {
    let out = Command::new(mesa_tool("src/freedreno/decode/cffdump"))
        .arg("--no-color")
        .arg(rd)
        .output()
        .unwrap_or_else(|e| panic!("running cffdump: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut d = Decoded { text, ..Default::default() };
    if !out.status.success() {
        d.problems.push(format!("cffdump exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    let lines: Vec<&str> = d.text.lines().collect();
    if !lines.iter().any(|l| l.trim() == "gpu_id: 630") {
        d.problems.push("cffdump did not read gpu_id 630".into());
    }
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let at = |what: &str| format!("line {}: {what}: {t}", i + 1);
        let next = |n: usize| lines[i + 1..lines.len().min(i + 1 + n)].join("\n");
        if t.starts_with("bad type!") || t.contains("this ain't right") || t == "corrupt file" {
            d.problems.push(at("bad packet"));
        } else if let Some(op) = t.strip_prefix("opcode: ") {
            let name = op.split_whitespace().next().unwrap_or_default().to_string();
            if name == "(null)" {
                d.problems.push(at("unknown opcode"));
            } else if name.starts_with("CP_LOAD_STATE6") {
                let f = next(1);
                if ["STATE_TYPE = ST6_", "STATE_SRC = SS6_", "STATE_BLOCK = SB6_"].iter().all(|k| f.contains(k)) {
                    d.load_state6 += 1;
                } else {
                    d.problems.push(at("CP_LOAD_STATE6 not decoded"));
                }
            } else if name == "CP_EXEC_CS" || name == "CP_RUN_OPENCL" {
                let f = next(6);
                let groups =
                    name != "CP_EXEC_CS" || ["NGROUPS_X", "NGROUPS_Y", "NGROUPS_Z"].iter().all(|k| f.contains(k));
                if groups && f.contains("register values") {
                    d.dispatches += 1;
                } else {
                    d.problems.push(at("dispatch not decoded"));
                }
            }
            d.packets.push(name);
        } else if let Some(reg) = t.strip_prefix("write ") {
            if reg.starts_with("0x") {
                d.problems.push(at("unknown register"));
            }
            d.packets.push(t.to_string());
        } else if t.split('\t').any(|f| f.starts_with("0x") && f.split(':').next().is_some_and(is_hex_literal)) {
            d.problems.push(at("unknown register"));
        } else if is_instruction(t) {
            d.instructions += 1;
            if t.contains("no match") {
                d.unknown_instructions.push(format!("line {}: {t}", i + 1));
            }
        }
    }
    d
}

/// `0x` and hex digits only: how cffdump names a register its tables do not have.
fn is_hex_literal(s: &str) -> bool {
    s.strip_prefix("0x").is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An inline disassembly line, `:CAT:NNNN:NNNN[HI_LO] text`, that is not a branch label (`... l5:`).
fn is_instruction(t: &str) -> bool {
    let mut f = t.split(':');
    let cat = f.next() == Some("") && f.next().is_some_and(|c| c.len() == 1 && c.bytes().all(|b| b.is_ascii_digit()));
    cat && !t.split_once("] ").is_some_and(|(_, text)| text.ends_with(':') && !text.contains(' '))
}

impl Decoded {
    /// Panics listing every problem (the first lines of each kind), naming `what`.
    pub fn assert_clean(&self, what: &str) {
        assert!(self.problems.is_empty(), "{what}: cffdump reports {} problems:\n{}", self.problems.len(), {
            self.problems.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        });
    }

    /// For ir3 programs: panics unless cffdump disassembled instructions inline and every one decoded.
    pub fn assert_shaders_decode(&self, what: &str) {
        assert!(self.instructions > 0, "{what}: cffdump disassembled no shader instruction");
        assert!(
            self.unknown_instructions.is_empty(),
            "{what}: {} of {} instructions do not decode:\n{}",
            self.unknown_instructions.len(),
            self.instructions,
            self.unknown_instructions.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// Captures the first step of `artifact` and decodes it; panics on any problem cffdump shows, then if the fake KGSL
/// refused the step. `ir3`: the artifact's programs are a6xx machine code, so every inline-disassembled instruction
/// must decode too (fake blobs are not machine code).
pub fn check_artifact_step(artifact: &Path, ir3: bool) -> Decoded {
    let what = artifact.display().to_string();
    let captured = capture_step(artifact).unwrap_or_else(|e| panic!("{what}: {e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("step.rd");
    std::fs::write(&path, &captured.rd).expect("writing the capture");
    let d = decode(&path);
    d.assert_clean(&what);
    assert!(d.dispatches > 0, "{what}: cffdump saw no dispatch");
    assert!(d.load_state6 >= d.dispatches, "{what}: fewer CP_LOAD_STATE6 than dispatches");
    if ir3 {
        d.assert_shaders_decode(&what);
    }
    if let Err(e) = captured.step {
        panic!("{what}: cffdump decodes the step, but {e}");
    }
    d
}
