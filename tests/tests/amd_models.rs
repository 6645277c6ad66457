//! The model tests (vision, policy, dmonitoring and exporter from `scripts/make_models.py`) compiled for `usb+amd`
//! gfx1100 and gfx1201 and run by the `usb+amd` device on the simulated bridge and GPU (`--device sim`, a Navi31 or
//! a Navi48 board): booted from the real firmware, weights uploaded through the SDMA copies, the prebuilt step
//! executed by the simulated GPU, whose DISPATCH_DIRECT runs the code object on the RDNA3/RDNA4 emulator. Outputs
//! are compared with onnxruntime on the same seeded inputs (scaled error `|got - ref| / max(1, |ref|)` ≤ 1e-4). The
//! gfx1100 boots: cold (vision, exporter), partial after a clean close (policy), and after a simulated crash, which
//! takes a mode-1 reset (dmonitoring); every gfx1201 model runs after a cold boot.
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...` (`scripts/setup.sh`); skipped when absent, a
//! failure under `PILOT_REQUIRE=1`. Each test prints the USB transactions, bytes and host time per step and the
//! simulator's modelled step and load times (the numbers in BENCHMARKS.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pilot_amd::boot::{BootKind, BootOptions};
use pilot_amd::device::AmdDevice;
use pilot_core::target::Modes;
use pilot_core::{Artifact, Session, Target};
use pilot_tests::models::{compare_with_onnxruntime, seeded_inputs, test_models};
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{Board, SimConfig, Simulator};

use pilot_test_support::amd_firmware_dir as firmware_dir;

fn compile(name: &str, arch: &str, shapes: &[(&str, &[usize])], dir: &Path) -> PathBuf {
    let target = Target::parse("usb+amd", Some(arch), Modes::default()).unwrap();
    let shapes: HashMap<String, Vec<usize>> = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect();
    let opts = pilot_compiler::CompileOptions { shapes, ..pilot_compiler::CompileOptions::new(target) };
    let art = dir.join(format!("{name}.pkl"));
    pilot_compiler::compile(&test_models().join(format!("{name}.onnx")), &art, &opts, &|_| {})
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    art
}

/// How the session before the measured one ended, which decides the measured one's boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Before {
    Nothing,
    CleanClose,
    Crash,
}

fn open(sim: &Simulator, fw: &Path) -> AmdDevice {
    let bridge = Bridge::open(sim.transport(), None).unwrap();
    AmdDevice::open(bridge, fw, BootOptions::default())
        .unwrap_or_else(|e| panic!("open: {e}; GPU faults: {:?}", sim.gpu_faults()))
}

fn counter(c: &[(&str, u64)], name: &str) -> u64 {
    c.iter().find(|(n, _)| *n == name).map_or(0, |x| x.1)
}

/// Compiles `name`, runs it on a simulated gfx1100 after `before`, checks the boot and the outputs.
fn run_on_sim(name: &str, shapes: &[(&str, &[usize])], before: Before) {
    run_on_board(name, Board::Navi31, shapes, before)
}

/// [`run_on_sim`] on `board` (Navi31: gfx1100, Navi48: gfx1201).
fn run_on_board(name: &str, board: Board, shapes: &[(&str, &[usize])], before: Before) {
    let Some(fw) = firmware_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let art = compile(name, board.name(), shapes, dir.path());
    let sim = Simulator::new(SimConfig {
        vram_bytes: 512 << 20,
        firmware_dir: Some(fw.clone()),
        board,
        ..SimConfig::default()
    });
    let expected = match before {
        Before::Nothing => BootKind::Cold,
        Before::CleanClose => {
            open(&sim, &fw).close().unwrap();
            BootKind::Partial
        }
        Before::Crash => {
            open(&sim, &fw).abandon();
            BootKind::AfterReset
        }
    };
    let t0 = sim.now();
    let dev = open(&sim, &fw);
    assert_eq!(dev.boot_kind(), expected, "{name}");
    let booted = sim.now();
    let mut session = Session::new(Artifact::open(&art).unwrap(), Box::new(dev))
        .unwrap_or_else(|e| panic!("{name}: {e}; GPU faults: {:?}", sim.gpu_faults()));
    let loaded = sim.now();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    // A first step, then the measured ones (the outputs compared are the last step's).
    session.step(&refs).unwrap_or_else(|e| panic!("{name}: {e}; GPU faults: {:?}", sim.gpu_faults()));
    let steps = 2;
    let (c0, m0, h0) = (session.device_counters(), sim.now(), Instant::now());
    for _ in 0..steps {
        session.step(&refs).unwrap_or_else(|e| panic!("{name}: {e}; GPU faults: {:?}", sim.gpu_faults()));
    }
    let (c1, m1, host) = (session.device_counters(), sim.now(), h0.elapsed());
    let per = |k: &str| (counter(&c1, k) - counter(&c0, k)) as f64 / steps as f64;
    let worst =
        compare_with_onnxruntime(name, &test_models().join(format!("{name}.onnx")), &feeds, &session, 1e-4, dir.path());
    assert!(sim.gpu_faults().is_empty(), "{name}: {:?}", sim.gpu_faults());
    eprintln!(
        "BENCH usb+amd sim {} {name}: boot {expected:?} {:.1} ms, load {:.1} ms modelled; per step: {:.0} USB transactions, \
         {:.0} bytes, host {:.1} ms, modelled {:.3} ms; worst scaled error {worst:.2e}",
        board.name(),
        (booted - t0).as_secs_f64() * 1e3,
        (loaded - booted).as_secs_f64() * 1e3,
        per("usb_transactions"),
        per("usb_bytes"),
        host.as_secs_f64() * 1e3 / steps as f64,
        (m1 - m0).as_secs_f64() * 1e3 / steps as f64,
    );
}

#[test]
fn vision_on_the_simulated_gpu_after_a_cold_boot() {
    run_on_sim("vision", &[], Before::Nothing);
}

#[test]
fn policy_on_the_simulated_gpu_after_a_partial_boot() {
    run_on_sim("policy", &[], Before::CleanClose);
}

#[test]
fn dmonitoring_on_the_simulated_gpu_after_a_crash() {
    run_on_sim("dmonitoring", &[], Before::Crash);
}

#[test]
fn exporter_on_the_simulated_gpu_after_a_cold_boot() {
    run_on_sim("exporter", &[("x", &[2, 3, 8, 12])], Before::Nothing);
}

#[test]
fn vision_on_the_simulated_gfx1201_after_a_cold_boot() {
    run_on_board("vision", Board::Navi48, &[], Before::Nothing);
}

#[test]
fn policy_on_the_simulated_gfx1201_after_a_cold_boot() {
    run_on_board("policy", Board::Navi48, &[], Before::Nothing);
}

#[test]
fn dmonitoring_on_the_simulated_gfx1201_after_a_cold_boot() {
    run_on_board("dmonitoring", Board::Navi48, &[], Before::Nothing);
}

#[test]
fn exporter_on_the_simulated_gfx1201_after_a_cold_boot() {
    run_on_board("exporter", Board::Navi48, &[("x", &[2, 3, 8, 12])], Before::Nothing);
}
