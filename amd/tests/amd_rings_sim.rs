//! The compute and SDMA rings wrapped many times on the simulated GPU, which honours the programmed ring sizes
//! (issue 25: "ring size honoured", and item 4: an SDMA wrap during a copy-out reads nothing while the SRAM read
//! is armed).
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...`; clang-19 for the kernel. Skipped when absent, a
//! failure under `PILOT_REQUIRE=1`.

#[path = "../../rdna3/tests/rdna3_support/mod.rs"]
mod rdna3_support;

use pilot_amd::boot::BootOptions;
use pilot_amd::device::{AmdDevice, RingSizes};
use pilot_amd_codeobj::CodeObject;
use pilot_core::device::{Arg, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};
use pilot_test_support::amd_firmware_dir as firmware_dir;
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{SimConfig, Simulator};
use std::path::Path;

const SOURCE: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void inc(global float *y) {
  y[__builtin_amdgcn_workitem_id_x()] += 1.0f;
}
"#;

/// The smallest rings: a copy-out's SDMA packets (48 bytes) wrap the SDMA ring every 21 copies, a step's ring
/// packets (64 bytes) the compute ring every 16 submissions.
const SMALL: RingSizes = RingSizes { compute: RingSizes::MIN, sdma: RingSizes::MIN };

fn open(dir: &Path) -> (Simulator, AmdDevice) {
    let s = Simulator::new(SimConfig {
        vram_bytes: 256 << 20,
        firmware_dir: Some(dir.to_path_buf()),
        ..Default::default()
    });
    let bridge = Bridge::open(s.transport(), None).unwrap();
    let dev = AmdDevice::open_with_rings(bridge, dir, BootOptions::default(), SMALL)
        .unwrap_or_else(|e| panic!("open: {e}; GPU faults: {:?}", s.gpu_faults()));
    (s, dev)
}

#[test]
fn item4_and_ring_size_copies_wrap_the_sdma_ring_many_times_without_reading_while_armed() {
    let Some(dir) = firmware_dir() else { return };
    let (s, mut dev) = open(&dir);
    let b = dev.alloc(0x2000, BufferUse::Weight).unwrap();
    // 200 copy-outs and 50 copy-ins: about ten wraps of the SDMA ring, most of them while a read is armed.
    for i in 0..250u32 {
        let len = 4 + (i as usize * 52) % 0x1F00;
        if i % 5 == 0 {
            let data: Vec<u8> = (0..len).map(|k| (k as u32 * 13 + i) as u8).collect();
            dev.copy_in(b, 0, &data).unwrap_or_else(|e| panic!("copy-in {i}: {e}; faults {:?}", s.gpu_faults()));
        }
        let mut back = vec![0u8; len];
        dev.copy_out(b, 0, &mut back).unwrap_or_else(|e| panic!("copy-out {i}: {e}; faults {:?}", s.gpu_faults()));
        let last_in = i - i % 5;
        let want: Vec<u8> = (0..len).map(|k| (k as u32 * 13 + last_in) as u8).collect();
        let written = 4 + (last_in as usize * 52) % 0x1F00;
        let n = len.min(written);
        assert!(back[..n] == want[..n], "copy {i}: the bytes differ");
    }
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

/// Also guards issue 25 item A (HDP): every ring write, the wrap padding included, is flushed before its doorbell.
#[test]
fn ring_size_steps_wrap_the_compute_ring_many_times() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_rings_sim", SOURCE) else { return };
    let (s, mut dev) = open(&dir);
    let obj = CodeObject::parse(&co).unwrap();
    let record = obj.kernel("inc").unwrap().dispatch_record();
    let spec = ProgramSpec {
        name: "inc",
        format: ProgramFormat::AmdCodeObject,
        code: &co,
        arg_count: 1,
        amdgpu: Some(&record),
        ir3: None,
    };
    let inc = dev.load_program(&spec).unwrap();
    let y = dev.alloc(4 * 64, BufferUse::Output).unwrap();
    dev.copy_in(y, 0, &[0u8; 4 * 64]).unwrap();
    let op = StepOp::Dispatch {
        program: inc,
        args: vec![Arg { buffer: y, offset: 0 }],
        global: [64, 1, 1],
        local: [64, 1, 1],
    };
    let step = dev.link_step(&[op]).unwrap();
    // 160 submissions of 64 bytes: ten wraps of a 1 KB ring, each waited for so the CP has read the tail.
    for i in 0..160 {
        let v = dev.submit(step).unwrap();
        dev.wait(v).unwrap_or_else(|e| panic!("step {i}: {e}; faults {:?}", s.gpu_faults()));
    }
    let mut out = vec![0u8; 4 * 64];
    dev.copy_out(y, 0, &mut out).unwrap();
    let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, vec![160.0; 64]);
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

#[test]
fn ring_sizes_that_are_not_a_power_of_two_are_refused() {
    let Some(dir) = firmware_dir() else { return };
    let s = Simulator::new(SimConfig { vram_bytes: 256 << 20, firmware_dir: Some(dir.clone()), ..Default::default() });
    let bridge = Bridge::open(s.transport(), None).unwrap();
    let rings = RingSizes { compute: 0x3000, sdma: 1 << 20 };
    let err = AmdDevice::open_with_rings(bridge, &dir, BootOptions::default(), rings).err().unwrap().to_string();
    assert!(err.contains("compute ring of 0x3000 bytes is not a power of two"), "{err}");
}
