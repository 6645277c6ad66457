//! Mutated `usb+amd` artifacts never crash, hang or run away on `--device sim` or `--device amd-emu` (#26):
//! a seeded series of byte mutations (most resealed, so they reach the schema, the verifier, the code
//! object readers, the devices and the emulator), each loaded and stepped in a child process (this test
//! binary re-run with `PILOT_FUZZ_CASE`) under `ulimit -v` and a wall-clock bound. A child may fail with
//! an error; it must not die of a signal (abort, SIGSEGV), panic, outlive its bound or its memory.
//! `PILOT_FUZZ_CASES` sets the number of cases (default 96, half on each device; 300 run in about 15 s).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pilot_core::target::Modes;
use pilot_core::{Artifact, Device, Session, Target};
use pilot_test_support::Rng;

/// Address space of a child: the 512 MB simulated VRAM, the emulator and the compiler's runtime fit.
const CHILD_VM_KB: u64 = 4 << 20;
const CHILD_SECONDS: u64 = 60;

fn compile(dir: &Path) -> Vec<u8> {
    let target = Target::parse("usb+amd", Some("gfx1100"), Modes::default()).unwrap();
    let shapes = [("x".to_string(), vec![2, 3, 8, 12])].into_iter().collect();
    let opts = pilot_compiler::CompileOptions { shapes, ..pilot_compiler::CompileOptions::new(target) };
    let art = dir.join("exporter.pkl");
    let model = pilot_tests::models::test_models().join("exporter.onnx");
    pilot_compiler::compile(&model, &art, &opts, &|_| {}).unwrap_or_else(|e| panic!("exporter: {e}"));
    std::fs::read(art).unwrap()
}

/// The child: load and step the artifact at `path` on `device`; any error is a clean outcome. It reports
/// how far it got on stderr (`reached: load|session|step`).
fn child(path: &str, device: &str) {
    let bytes = std::fs::read(path).unwrap();
    let Ok(a) = Artifact::from_bytes(Arc::new(bytes)) else { return eprintln!("reached: load") };
    let dev: Box<dyn Device> = match device {
        "amd-emu" => Box::new(pilot_rdna3::device::EmuDevice::new(2)),
        _ => {
            let fw = pilot_test_support::amd_firmware_dir().expect("AMD firmware");
            let cfg = pilot_usb_sim::SimConfig {
                vram_bytes: 512 << 20,
                firmware_dir: Some(fw.clone()),
                ..Default::default()
            };
            let sim = pilot_usb_sim::Simulator::new(cfg);
            let bridge = pilot_usb_bridge::Bridge::open(sim.transport(), None).unwrap();
            let opts = pilot_amd::boot::BootOptions::default();
            Box::new(pilot_amd::device::AmdDevice::open(bridge, &fw, opts).expect("the simulated GPU boots"))
        }
    };
    let Ok(mut s) = Session::new(a, dev) else { return eprintln!("reached: session") };
    let mut inputs = Vec::new();
    for i in &s.artifact().manifest.inputs {
        let mut v = Vec::new();
        if v.try_reserve_exact(i.nbytes()).is_err() {
            return eprintln!("reached: session");
        }
        v.resize(i.nbytes(), 0);
        inputs.push(v);
    }
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let _ = s.step(&refs);
    eprintln!("reached: step");
}

fn mutate(bytes: &mut [u8], rng: &mut Rng) {
    for _ in 0..1 + rng.next_u64() % 3 {
        let n = bytes.len() as u64;
        let at = (rng.next_u64() % n) as usize;
        match rng.next_u64() % 4 {
            0 => bytes[at] = rng.next_u64() as u8,
            1 => bytes[at] ^= 1 << (rng.next_u64() % 8),
            2 if at + 8 <= bytes.len() => {
                let v = [i64::MIN, -1, i64::MAX, 1 << 40, u32::MAX as i64 + 1][(rng.next_u64() % 5) as usize];
                bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            _ => bytes[at] = bytes[at].wrapping_add(1),
        }
    }
}

#[test]
fn mutated_amd_artifacts_never_crash_hang_or_run_away() {
    if let (Ok(path), Ok(device)) = (std::env::var("PILOT_FUZZ_CASE"), std::env::var("PILOT_FUZZ_DEVICE")) {
        return child(&path, &device);
    }
    pilot_test_support::amd_firmware_dir().expect("AMD firmware");
    let cases: u64 = std::env::var("PILOT_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96);
    let dir = tempfile::tempdir().unwrap();
    let valid = compile(dir.path());
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng(0x005E_ED26);
    let mut stepped = [0u32; 2];
    for case in 0..cases {
        let mut bytes = valid.clone();
        mutate(&mut bytes, &mut rng);
        if !rng.next_u64().is_multiple_of(4) {
            pilot_tests::reseal(&mut bytes);
        }
        let path = dir.path().join(format!("case{case}.pkl"));
        std::fs::write(&path, &bytes).unwrap();
        let device = if case.is_multiple_of(2) { "amd-emu" } else { "sim" };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v {CHILD_VM_KB} && exec \"$0\" \"$@\""))
            .arg(&exe)
            .args([
                "--exact",
                "mutated_amd_artifacts_never_crash_hang_or_run_away",
                "--test-threads",
                "1",
                "--nocapture",
            ])
            .env("PILOT_FUZZ_CASE", &path)
            .env("PILOT_FUZZ_DEVICE", device)
            .env("PILOT_EMU_MAX_INSTRUCTIONS", "200000000")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(CHILD_SECONDS) {
                child.kill().unwrap();
                panic!("case {case} on {device}: still running after {CHILD_SECONDS} s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(status.success(), "case {case} on {device}: {status:?} (signal {:?}): {err}", status.signal());
        stepped[case as usize % 2] += u32::from(err.contains("reached: step"));
    }
    // Not vacuous: on each device some mutated artifacts pass verification and run.
    eprintln!("cases that reached a step: amd-emu {}, sim {}", stepped[0], stepped[1]);
    assert!(cases < 8 || stepped.iter().all(|&n| n > 0), "{stepped:?}");
}
