//! Mesa's `cffdump` decodes every model test's step as pilot submits it on QCOM (captured as an `.rd` file by the
//! fake KGSL): no bad or unknown packet, no unknown register, every CP_LOAD_STATE6 and dispatch decoded, one dispatch
//! per kernel. And the check can fail: streams with a planted bug (an unknown register, a wrong packet length, an
//! unknown opcode) are reported, and so is an undecodable instruction where a program is a6xx code (the check ir3
//! artifacts get). The encoder-side mutants are `scripts/mutate_qcom.py --cffdump`.

use std::collections::HashMap;
use std::path::Path;

use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::{Backend, Target};
use pilot_tests::cffdump::{capture_step, check_artifact_step, decode, Decoded};
use pilot_tests::models::test_models;

/// Input dimensions pinned at compile time.
type Pins = &'static [(&'static str, &'static [usize])];

const MODELS: [(&str, Pins); 4] =
    [("vision", &[]), ("policy", &[]), ("dmonitoring", &[]), ("exporter", &[("x", &[2, 3, 8, 12])])];

fn compile(name: &str, shapes: &[(&str, &[usize])], car: bool, out: &Path) -> usize {
    compile_with(QcomCompiler::Fake, name, shapes, car, out)
}

fn compile_with(compiler: QcomCompiler, name: &str, shapes: &[(&str, &[usize])], car: bool, out: &Path) -> usize {
    let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    o.target.image = car;
    o.target.float16 = car;
    o.target.nolocals = car;
    o.cl.qcom_compiler = compiler;
    o.shapes = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>();
    let model = test_models().join(format!("{name}.onnx"));
    pilot_compiler::compile(&model, out, &o, &|_| {}).unwrap_or_else(|e| panic!("{name}: {e}")).kernels
}

#[test]
fn every_model_step_decodes_in_cffdump() {
    let dir = tempfile::tempdir().unwrap();
    for car in [false, true] {
        for (name, shapes) in MODELS {
            let art = dir.path().join(format!("{name}-{car}.pkl"));
            let kernels = compile(name, shapes, car, &art);
            let d = check_artifact_step(&art, false);
            let what = format!("{name} (image/half/nolocals: {car})");
            assert_eq!(d.dispatches, kernels, "{what}: one decoded dispatch per kernel");
            eprintln!(
                "{what}: {} packets, {} CP_LOAD_STATE6, {} dispatches decoded by cffdump",
                d.packets.len(),
                d.load_state6,
                d.dispatches
            );
        }
    }
}

/// The same with `--qcom-compiler ir3`: the runtime's ir3 launch (CP_EXEC_CS, ISAMMODE GL, SP_CS_CONST_CONFIG_0)
/// decodes, and cffdump disassembles every shader inline with no unknown instruction.
#[test]
fn every_model_ir3_step_decodes_in_cffdump_with_its_shaders() {
    let dir = tempfile::tempdir().unwrap();
    for car in [false, true] {
        for (name, shapes) in MODELS {
            let art = dir.path().join(format!("{name}-ir3-{car}.pkl"));
            let kernels = compile_with(QcomCompiler::Ir3, name, shapes, car, &art);
            let d = check_artifact_step(&art, true);
            let what = format!("{name} ir3 (image/half/nolocals: {car})");
            assert_eq!(d.dispatches, kernels, "{what}: one decoded dispatch per kernel");
            let exec_cs = d.packets.iter().filter(|p| *p == "CP_EXEC_CS").count();
            assert_eq!(exec_cs, kernels, "{what}: every launch is CP_EXEC_CS");
            // Mesa 25.0.7's names: SP_MODE_CONTROL is pilot's SP_MODE_CNTL, SP_TP_MODE_CNTL TPL1_MODE_CNTL,
            // HLSQ_CS_CNTL_0 SP_CS_CONST_CONFIG_0.
            for decoded in [
                "SP_MODE_CONTROL: { CONSTANT_DEMOTION_ENABLE | ISAMMODE = ISAMMODE_GL }",
                "SP_TP_MODE_CNTL: { ISAMMODE = ISAMMODE_GL }",
                "HLSQ_CS_CNTL_1: { LINEARLOCALIDREGID = r63.x | THREADSIZE = THREAD64 }",
            ] {
                let n = d.text.lines().filter(|l| l.trim() == decoded).count();
                assert!(n >= kernels, "{what}: cffdump shows `{decoded}` {n} times for {kernels} launches");
            }
            eprintln!(
                "{what}: {} packets, {} dispatches, {} instructions disassembled inline by cffdump",
                d.packets.len(),
                d.dispatches,
                d.instructions
            );
        }
    }
}

/// Odd parity as the CP checks it (bit set when `v` has an even number of ones), written here from the PM4 header
/// layout in Mesa's `adreno_pm4.xml`, not taken from pilot's encoder.
fn parity(v: u32) -> u32 {
    (v.count_ones() + 1) & 1
}

fn pkt4(reg: u32, cnt: u32) -> u32 {
    0x4000_0000 | cnt | (parity(cnt) << 7) | (reg << 8) | (parity(reg) << 27)
}

fn pkt7(op: u32, cnt: u32) -> u32 {
    0x7000_0000 | cnt | (parity(cnt) << 15) | (op << 16) | (parity(op) << 23)
}

/// `rd` with the first dword equal to `old` (at a 4-byte boundary) replaced by `new`, decoded.
fn decode_with(rd: &[u8], old: u32, new: u32) -> Decoded {
    let mut bytes = rd.to_vec();
    let at = bytes.chunks(4).position(|c| c == old.to_le_bytes()).unwrap_or_else(|| panic!("no dword {old:#x}"));
    bytes[at * 4..at * 4 + 4].copy_from_slice(&new.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bug.rd");
    std::fs::write(&path, bytes).unwrap();
    decode(&path)
}

fn assert_reports(d: &Decoded, what: &str, kinds: &[&str]) {
    assert!(
        d.problems.iter().any(|p| kinds.iter().any(|k| p.contains(k))),
        "{what}: expected one of {kinds:?}, cffdump's check found {:?}",
        &d.problems
    );
}

#[test]
fn planted_stream_bugs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("policy.pkl");
    compile("policy", &[], false, &art);
    let captured = capture_step(&art).unwrap();
    let rd = captured.rd;
    let path = dir.path().join("policy.rd");
    std::fs::write(&path, &rd).unwrap();
    decode(&path).assert_clean("the unplanted capture");
    captured.step.unwrap();

    // SP_CS_TEX_COUNT (0xa9ba) written at 0xa9d0, where the a6xx has no register.
    let d = decode_with(&rd, pkt4(0xa9ba, 1), pkt4(0xa9d0, 1));
    assert_reports(&d, "register offset", &["unknown register"]);
    // CP_RUN_OPENCL (0x31) two dwords longer: it swallows the next packet's header, and cffdump reads that
    // packet's payload as headers. What it reports depends on the payload (an address of the fake's, which varies
    // from run to run): a word with no packet type, or one that reads as a write to a register the a6xx lacks.
    let d = decode_with(&rd, pkt7(0x31, 1), pkt7(0x31, 3));
    assert_reports(&d, "packet length", &["bad packet", "unknown register", "unknown opcode"]);
    // An opcode the CP does not have.
    let d = decode_with(&rd, pkt7(0x31, 1), pkt7(0x7e, 1));
    assert_reports(&d, "opcode", &["unknown opcode"]);

    // And the check sees CP_EXEC_CS (0x33), ir3's launch: the first CP_RUN_OPENCL and the CP_EVENT_WRITE after it
    // (7 dwords) become CP_EXEC_CS of 8x1x1 groups and two CP_WAIT_FOR_IDLE (0x26).
    let mut bytes = rd.clone();
    let words: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let at = words.windows(3).position(|w| w == [pkt7(0x31, 1), 0, pkt7(0x46, 4)]).expect("CP_RUN_OPENCL");
    let exec = [pkt7(0x33, 4), 0, 8, 1, 1, pkt7(0x26, 0), pkt7(0x26, 0)];
    bytes[at * 4..at * 4 + 28].copy_from_slice(&exec.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<_>>());
    let path = dir.path().join("exec_cs.rd");
    std::fs::write(&path, bytes).unwrap();
    let d = decode(&path);
    d.assert_clean("CP_EXEC_CS");
    assert!(d.packets.iter().any(|p| p == "CP_EXEC_CS"), "{:?}", d.packets);
    assert_eq!(d.dispatches, decode(&dir.path().join("policy.rd")).dispatches, "CP_EXEC_CS counts as a dispatch");
}

#[test]
fn without_cffdump_the_check_fails_naming_setup() {
    let err = std::panic::catch_unwind(|| pilot_tests::cffdump::mesa_tool("src/freedreno/decode/no-such-tool"))
        .expect_err("a missing tool panics");
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("scripts/setup.sh"), "{msg}");
}

/// a6xx instructions Mesa's ir3 emitted for a tinygrad kernel (hi, lo dwords as ir3-disasm prints them): a move, an
/// `isam`, an `stib`, an `(ss)nop` and `end`.
const A6XX_CODE: [(u32, u32); 5] = [
    (0x2024_4903, 0x0000_0008),
    (0xa000_1f0c, 0x0000_0015),
    (0xc022_0020, 0x1267_7a00),
    (0x0000_1000, 0x0000_0000),
    (0x0300_0000, 0x0000_0000),
];

/// The hook for ir3 artifacts: with a6xx code where the fake blobs were, every instruction cffdump disassembles inline
/// decodes; a word no a6xx instruction has is reported.
#[test]
fn shader_instructions_are_checked_inline() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("policy.pkl");
    compile("policy", &[], false, &art);
    let rd = capture_step(&art).unwrap().rd;
    let with_code = |code: &[(u32, u32)]| {
        let mut bytes = rd.clone();
        let mut words: Vec<u8> = code.iter().flat_map(|&(hi, lo)| [lo, hi]).flat_map(u32::to_le_bytes).collect();
        // Each fake blob (its `PILOTCL1` magic at the start of a buffer) becomes the code, zero-padded (`nop`s).
        let mut replaced = 0;
        let mut at = 0;
        while let Some(i) = bytes[at..].windows(8).position(|w| w == b"PILOTCL1").map(|i| at + i) {
            let len = u32::from_le_bytes(bytes[i - 4..i].try_into().unwrap()) as usize;
            words.resize(len, 0);
            bytes[i..i + len].copy_from_slice(&words);
            replaced += 1;
            at = i + len;
        }
        assert!(replaced > 0, "the capture holds the fake blobs");
        let path = dir.path().join("code.rd");
        std::fs::write(&path, bytes).unwrap();
        decode(&path)
    };
    let d = with_code(&A6XX_CODE);
    d.assert_clean("a6xx code");
    d.assert_shaders_decode("a6xx code");
    assert!(d.text.contains("isam") && d.text.contains("stib"), "disassembled inline");
    let mut bad = A6XX_CODE;
    bad[1] = (0x6170_5f74, 0x6163_6e6f);
    let d = with_code(&bad);
    assert!(!d.unknown_instructions.is_empty(), "an undecodable word is reported");
}
