//! Conformance on `--target usb+amd --device sim` (gfx1100 and gfx1201): the manifest's ONNX node cases compiled into
//! code objects by clang-19 and run by the `usb+amd` device on the simulated bridge and GPU (booted
//! from the real firmware; weights and inputs through the SDMA copies; each DISPATCH_DIRECT runs the code
//! object on pilot's RDNA3 emulator), compared with the cases' outputs. One simulated GPU serves every case:
//! the first case cold-boots it, each later one opens it again (a partial boot) after the previous closed it.
//!
//! - `onnx_node_amd_skipped.txt`: manifest cases the AMD target cannot run, each with its reason; they
//!   run too and must still fail, so the list stays honest.
//! - CI runs every `AMD_SAMPLE`-th remaining case; `PILOT_CONFORMANCE_AMD_ALL=1` runs all of them.
//! - `cargo test -p pilot-compiler --test onnx_node_amd -- --ignored survey_amd` runs every manifest
//!   case and writes `target/onnx-node-amd-survey.txt` (pass/fail, error and time per case), to
//!   refresh the skip list.

use std::path::{Path, PathBuf};

#[allow(dead_code)] // the helpers this file does not use (`close`)
mod common;

use common::node::{check_manifest_on, check_reasons, listed, node_dir, run_case_on, DeviceFn};
use pilot_amd::boot::BootOptions;
use pilot_amd::device::AmdDevice;
use pilot_core::{Arch, Backend, Target};
use pilot_usb_sim::{Board, SimConfig, Simulator};

/// The real firmware the simulated PSP checks: `PILOT_AMD_FIRMWARE`, else what `scripts/setup.sh` fetched.
fn firmware_dir() -> PathBuf {
    std::env::var_os("PILOT_AMD_FIRMWARE")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::root().join("target/amd-firmware/root/usr/lib/firmware/amdgpu"))
}

thread_local! {
    static NAVI31: Simulator = simulator(Board::Navi31);
    static NAVI48: Simulator = simulator(Board::Navi48);
}

fn simulator(board: Board) -> Simulator {
    Simulator::new(SimConfig {
        vram_bytes: 512 << 20,
        firmware_dir: Some(firmware_dir()),
        board,
        ..SimConfig::default()
    })
}

/// Runs `f` on this thread's simulated board for `arch` (one per architecture, booted once).
fn with_sim<R>(arch: Arch, f: impl FnOnce(&Simulator) -> R) -> R {
    match arch {
        Arch::Gfx1201 => NAVI48.with(f),
        _ => NAVI31.with(f),
    }
}

/// The device the cases run on: `usb+amd` on the simulated bridge and GPU (`--device sim`).
fn amd_device(arch: Arch) -> Result<Box<dyn pilot_core::Device>, String> {
    with_sim(arch, |sim| {
        let bridge = pilot_usb_bridge::Bridge::open(sim.transport(), None).map_err(|e| e.to_string())?;
        let device = AmdDevice::open(bridge, &firmware_dir(), BootOptions::default())
            .map_err(|e| format!("open: {e}; GPU faults: {:?}", sim.gpu_faults()))?;
        Ok(Box::new(device) as Box<dyn pilot_core::Device>)
    })
}

/// Compiles `dir`'s model for usb+amd `arch` and steps it on [`amd_device`].
fn run_case_on_arch(arch: Arch, dir: &Path) -> Result<(), String> {
    let target = Target::new(Backend::UsbAmd, arch, Default::default()).map_err(|e| e.to_string())?;
    let faults_before = with_sim(arch, |sim| sim.gpu_faults().len());
    let device: DeviceFn = match arch {
        Arch::Gfx1201 => || amd_device(Arch::Gfx1201),
        _ => || amd_device(Arch::Gfx1100),
    };
    run_case_on(dir, &pilot_compiler::CompileOptions::new(target), device, None).map_err(|e| {
        // A hung queue shows on the host only as a wait timeout; the simulated GPU knows why.
        let faults = with_sim(arch, |sim| sim.gpu_faults());
        match faults.get(faults_before..) {
            Some(new) if !new.is_empty() => format!("{e}; GPU faults: {new:?}"),
            _ => e,
        }
    })
}

fn run_case_amd(dir: &Path) -> Result<(), String> {
    run_case_on_arch(Arch::Gfx1100, dir)
}

fn run_case_gfx1201(dir: &Path) -> Result<(), String> {
    run_case_on_arch(Arch::Gfx1201, dir)
}

/// The whole manifest (1438 cases) took 3 min 9 s on two shared cores, mostly clang building code
/// objects; CI runs this deterministic subset (144 cases, about 20 s).
const AMD_SAMPLE: usize = 10;

#[test]
fn manifest_cases_pass_on_the_simulated_amd_gpu() {
    check_manifest_on("usb+amd", &["onnx_node_amd_skipped.txt"], AMD_SAMPLE, "PILOT_CONFORMANCE_AMD_ALL", run_case_amd);
}

/// The same sample on gfx1201 (RDNA4: the simulated Navi48, the emulator's gfx12 decoder); the skip list is
/// shared, since both cards compile from the same kernels.
#[test]
fn manifest_cases_pass_on_the_simulated_gfx1201() {
    check_manifest_on(
        "usb+amd gfx1201",
        &["onnx_node_amd_skipped.txt"],
        AMD_SAMPLE,
        "PILOT_CONFORMANCE_AMD_ALL",
        run_case_gfx1201,
    );
}

#[test]
fn amd_skipped_cases_have_reasons() {
    check_reasons("onnx_node_amd_skipped.txt");
}

/// `PILOT_ONNX_CASE=test_x cargo test -p pilot-compiler --test onnx_node_amd -- --ignored one_amd`
#[test]
#[ignore]
fn one_amd() {
    let case = std::env::var("PILOT_ONNX_CASE").expect("set PILOT_ONNX_CASE");
    if let Err(e) = run_case_amd(&node_dir().join(&case)) {
        panic!("{case}: {e}");
    }
}

/// Every manifest case on usb+amd: writes `target/onnx-node-amd-survey.txt` (pass/fail with the error
/// and the time per case), to refresh `onnx_node_amd_skipped.txt`. `PILOT_SURVEY_FROM=N` starts at
/// the Nth case.
#[test]
#[ignore]
fn survey_amd() {
    let dir = node_dir();
    let cases = listed("onnx_node_passing.txt");
    let from: usize = std::env::var("PILOT_SURVEY_FROM").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let out = common::root().join("target/onnx-node-amd-survey.txt");
    let mut report = String::new();
    let (mut pass, start) = (0, std::time::Instant::now());
    for c in &cases[from.min(cases.len())..] {
        let t = std::time::Instant::now();
        let r = std::panic::catch_unwind(|| run_case_amd(&dir.join(c)));
        let ms = t.elapsed().as_millis();
        match r {
            Ok(Ok(())) => {
                pass += 1;
                report.push_str(&format!("PASS {c} {ms}ms\n"));
            }
            Ok(Err(e)) => report.push_str(&format!("FAIL {c} {ms}ms # {}\n", e.replace('\n', " "))),
            Err(_) => report.push_str(&format!("FAIL {c} {ms}ms # panic\n")),
        }
        // Written as it goes: the survey is long and its partial results are useful.
        std::fs::write(&out, &report).unwrap();
    }
    eprintln!("{pass} of {} manifest cases pass on usb+amd in {:.1?}", cases.len() - from, start.elapsed());
}
