//! The `usb+amd` device end to end on the simulated bridge and GPU: boot from the real firmware, SDMA copies
//! through the bridge's SRAM, kernels clang-19 builds for gfx1100 run by the simulated GPU's RDNA3 emulator from
//! the prebuilt step, a constant number of USB transactions per step, partial boot after a clean close, a mode-1
//! reset after a crash, and a wrong dispatch encoding caught.
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...` (`scripts/setup.sh`); skipped when absent, a
//! failure under `PILOT_REQUIRE=1`.

// The clang-19 kernel builder of the emulator's tests (it uses `pilot_rdna3`, a dev-dependency).
#[path = "../../rdna3/tests/rdna3_support/mod.rs"]
mod rdna3_support;
mod sim_device;

use pilot_amd::boot::BootKind;
use pilot_amd::device::AmdDevice;
use pilot_amd_codeobj::CodeObject;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramFormat, ProgramId, ProgramSpec, StepOp};
use pilot_usb_sim::{Board, Simulator};
use sim_device::open;
use std::path::Path;

const SOURCE: &str = r#"
#define GID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void axpy(global const float *x, global float *y) {
  y[GID] = 2.0f * x[GID] + y[GID];
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void inc(global float *y) {
  y[GID] = y[GID] + 1.0f;
}
"#;

use pilot_test_support::amd_firmware_dir as firmware_dir;

fn sim(dir: &Path) -> Simulator {
    sim_device::sim(dir, Board::Navi31)
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(f: &[f32]) -> Vec<u8> {
    f.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Loads `name` from `co` with the record the compiler would write.
fn load(dev: &mut AmdDevice, co: &[u8], name: &str, args: usize) -> ProgramId {
    let obj = CodeObject::parse(co).unwrap();
    let record = obj.kernel(name).unwrap().dispatch_record();
    let spec = ProgramSpec {
        name,
        format: ProgramFormat::AmdCodeObject,
        code: co,
        arg_count: args,
        amdgpu: Some(&record),
        ir3: None,
    };
    dev.load_program(&spec).unwrap()
}

fn dispatch(program: ProgramId, args: &[BufferId], n: u32) -> StepOp {
    StepOp::Dispatch {
        program,
        args: args.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect(),
        global: [n, 1, 1],
        local: [64, 1, 1],
    }
}

#[test]
fn copies_round_trip_through_sdma_and_the_bridge_sram() {
    let Some(dir) = firmware_dir() else { return };
    let s = sim(&dir);
    let mut dev = open(&s, &dir);
    assert_eq!(dev.boot_kind(), BootKind::Cold);
    for len in [4usize, 1000, 0x4_0000 - 4, 0x4_0000 + 12, 3 * 0x4_0000 + 100, 0x9_0000] {
        let b = dev.alloc(len, BufferUse::Weight).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        dev.copy_in(b, 0, &data).unwrap();
        let mut back = vec![0u8; len];
        dev.copy_out(b, 0, &mut back).unwrap();
        assert!(back == data, "{len} bytes did not round-trip");
    }
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

#[test]
fn a_gfx1201_board_boots_and_copies() {
    let Some(dir) = firmware_dir() else { return };
    let s = sim_device::sim(&dir, Board::Navi48);
    let mut dev = open(&s, &dir);
    assert_eq!(dev.info().arch, "gfx1201");
    let b = dev.alloc(0x5_0000, BufferUse::Weight).unwrap();
    let data: Vec<u8> = (0..0x5_0000).map(|i| (i % 251) as u8).collect();
    dev.copy_in(b, 0, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    dev.copy_out(b, 0, &mut back).unwrap();
    assert!(back == data);
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

/// Also guards issue 25 item A (HDP): each submission flushes HDP before its doorbell, or the simulated CP refuses the
/// ring bytes and indirect buffer the host wrote through BAR0 (`pilot_usb_sim::gpu::hdp`).
#[test]
fn a_step_runs_clangs_kernels_and_replays() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_run_device", SOURCE) else { return };
    let s = sim(&dir);
    let mut dev = open(&s, &dir);
    let (axpy, inc) = (load(&mut dev, &co, "axpy", 2), load(&mut dev, &co, "inc", 1));
    let n = 256;
    let x = dev.alloc(4 * n, BufferUse::Input).unwrap();
    let y = dev.alloc(4 * n, BufferUse::Output).unwrap();
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    dev.copy_in(x, 0, &bytes(&xs)).unwrap();
    dev.copy_in(y, 0, &bytes(&vec![1.0; n])).unwrap();
    // y = 2x + y, then y + 1: the second depends on the first.
    let step = dev.link_step(&[dispatch(axpy, &[x, y], n as u32), dispatch(inc, &[y], n as u32)]).unwrap();
    for _ in 0..3 {
        let v = dev.submit(step).unwrap();
        dev.wait(v).unwrap();
    }
    let mut out = vec![0u8; 4 * n];
    dev.copy_out(y, 0, &mut out).unwrap();
    let want: Vec<f32> = (0..n).map(|i| 1.0 + 3.0 * (2.0 * i as f32 + 1.0)).collect();
    assert_eq!(floats(&out), want);
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

/// USB transactions of one submit and its wait.
fn step_transactions(dev: &mut AmdDevice, step: pilot_core::device::StepId) -> u64 {
    let before = dev.bridge().stats().transactions();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    dev.bridge().stats().transactions() - before
}

#[test]
fn usb_transactions_per_step_do_not_grow_with_the_kernel_count() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_run_device", SOURCE) else { return };
    let s = sim(&dir);
    let mut dev = open(&s, &dir);
    let inc = load(&mut dev, &co, "inc", 1);
    let y = dev.alloc(4 * 64, BufferUse::Output).unwrap();
    dev.copy_in(y, 0, &bytes(&[0.0; 64])).unwrap();
    let one = dev.link_step(&[dispatch(inc, &[y], 64)]).unwrap();
    let many = dev.link_step(&vec![dispatch(inc, &[y], 64); 24]).unwrap();
    // The first submission also lands the staged copy-in of y (`pilot_amd::stage`).
    assert_eq!(step_transactions(&mut dev, one), 11);
    let (t1, t24) = (step_transactions(&mut dev, one), step_transactions(&mut dev, many));
    // A ring write, the write pointer and the doorbell (two transactions each), the HDP flush before the doorbell (one
    // posted register write; issue 25 item A), one signal read (two).
    assert_eq!((t1, t24), (9, 9));
    let mut out = vec![0u8; 4 * 64];
    dev.copy_out(y, 0, &mut out).unwrap();
    assert_eq!(floats(&out), vec![26.0; 64]);
}

#[test]
fn reopening_after_a_clean_close_boots_partially_and_after_a_crash_resets() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_run_device", SOURCE) else { return };
    let s = sim(&dir);
    open(&s, &dir).close().unwrap();
    let mut dev = open(&s, &dir);
    assert_eq!(dev.boot_kind(), BootKind::Partial);
    let inc = load(&mut dev, &co, "inc", 1);
    let y = dev.alloc(4 * 64, BufferUse::Output).unwrap();
    dev.copy_in(y, 0, &bytes(&[1.0; 64])).unwrap();
    let step = dev.link_step(&[dispatch(inc, &[y], 64)]).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    dev.abandon();
    let mut dev = open(&s, &dir);
    assert_eq!(dev.boot_kind(), BootKind::AfterReset);
    let inc = load(&mut dev, &co, "inc", 1);
    let y = dev.alloc(4 * 64, BufferUse::Output).unwrap();
    dev.copy_in(y, 0, &bytes(&[5.0; 64])).unwrap();
    let step = dev.link_step(&[dispatch(inc, &[y], 64)]).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let mut out = vec![0u8; 4 * 64];
    dev.copy_out(y, 0, &mut out).unwrap();
    assert_eq!(floats(&out), vec![6.0; 64]);
}

#[test]
fn a_wrong_dispatch_encoding_gives_wrong_outputs_or_a_gpu_fault() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_run_device", SOURCE) else { return };
    let s = sim(&dir);
    let mut dev = open(&s, &dir);
    let axpy = load(&mut dev, &co, "axpy", 2);
    let x = dev.alloc(4 * 64, BufferUse::Input).unwrap();
    let y = dev.alloc(4 * 64, BufferUse::Output).unwrap();
    dev.copy_in(x, 0, &bytes(&[1.0; 64])).unwrap();
    dev.copy_in(y, 0, &bytes(&[0.0; 64])).unwrap();
    // The kernarg offsets swapped: the kernel reads y as x and writes x.
    dev.program_mut(axpy).unwrap().arg_offsets.reverse();
    let step = dev.link_step(&[dispatch(axpy, &[x, y], 64)]).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let mut out = vec![0u8; 4 * 64];
    dev.copy_out(y, 0, &mut out).unwrap();
    assert_ne!(floats(&out), vec![2.0; 64], "a wrong kernarg offset must change the outputs");
    // RSRC2 saying no user SGPRs: the kernarg pointer in USER_DATA_0/1 never reaches s[0:1], and the emulator
    // stops on the kernel's first access through it.
    let p = dev.program_mut(axpy).unwrap();
    p.arg_offsets.reverse();
    p.rsrc[1] &= !(0x1F << 1);
    let step = dev.link_step(&[dispatch(axpy, &[x, y], 64)]).unwrap();
    let v = dev.submit(step).unwrap();
    let err = dev.wait(v).unwrap_err().to_string();
    assert!(err.contains("did not reach timeline value"), "{err}");
    // #26: the wait reports the VM fault the GPU latched (a mapping error, bit 8, at page 0).
    assert!(err.ends_with("; VM protection fault (status 0x100) at page 0x0"), "{err}");
    let faults: Vec<String> = s.gpu_faults().iter().map(|f| f.to_string()).collect();
    assert!(!faults.is_empty(), "the GPU must report why the dispatch stopped");
    assert!(faults.iter().any(|f| f.contains("scalar load at 0x0 is out of bounds")), "{faults:?}");
}
