//! A `usb+amd` step on the simulated bridge and GPU makes no heap allocation on the host once the first has run:
//! small inputs copied in (staged, [`pilot_amd::stage`]), the submit, the wait, the outputs copied out. A counting
//! global allocator pauses while the simulator runs (what the simulated USB device and GPU allocate is theirs), as
//! `qcom/tests/submit_no_alloc.rs` does around the fake KGSL. Also counts a step's USB transactions with small
//! inputs: the staged inputs cost one 0xF2 write whatever their number.
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...`; skipped when absent, a failure under
//! `PILOT_REQUIRE=1`.

#[path = "../../rdna3/tests/rdna3_support/mod.rs"]
mod rdna3_support;

use pilot_amd::boot::BootOptions;
use pilot_amd::device::AmdDevice;
use pilot_amd_codeobj::CodeObject;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramFormat, ProgramSpec, StepId, StepOp};
use pilot_test_support::{amd_firmware_dir, paused, thread_allocs};
use pilot_usb_bridge::error::TransferError;
use pilot_usb_bridge::proto::Setup;
use pilot_usb_bridge::transport::{Ticket, Transport};
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{SimConfig, Simulator};
use std::time::Duration;

pilot_test_support::counting_allocator!();

const SOURCE: &str = r#"
#define GID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void fma3(global float *y, global const float *a,
                                                                  global const float *b, global const float *c) {
  y[GID] = a[GID] * b[GID] + c[GID];
}
"#;

/// The simulator's transport with counting paused while it runs.
struct Paused(Box<dyn Transport>);

impl Transport for Paused {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn product(&self) -> &str {
        self.0.product()
    }
    fn claim(&mut self) -> Result<(), TransferError> {
        paused(|| self.0.claim())
    }
    fn control_in(&mut self, setup: Setup, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        paused(|| self.0.control_in(setup, buf, timeout))
    }
    fn control_out(&mut self, setup: Setup, data: &[u8], timeout: Duration) -> Result<(), TransferError> {
        paused(|| self.0.control_out(setup, data, timeout))
    }
    fn bulk_in(&mut self, ep: u8, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        paused(|| self.0.bulk_in(ep, buf, timeout))
    }
    fn bulk_out(&mut self, ep: u8, data: &[u8], timeout: Duration) -> Result<usize, TransferError> {
        paused(|| self.0.bulk_out(ep, data, timeout))
    }
    fn submit_bulk_out(&mut self, ep: u8, data: Vec<u8>, timeout: Duration) -> Result<Ticket, TransferError> {
        paused(|| self.0.submit_bulk_out(ep, data, timeout))
    }
    fn reap(&mut self, ticket: Ticket) -> Result<(usize, Vec<u8>), TransferError> {
        paused(|| self.0.reap(ticket))
    }
    fn now(&self) -> Duration {
        self.0.now()
    }
    fn sleep(&mut self, d: Duration) {
        paused(|| self.0.sleep(d))
    }
}

const N: usize = 256;

struct Rig {
    _sim: Simulator,
    dev: AmdDevice,
    step: StepId,
    inputs: [BufferId; 3],
    y: BufferId,
}

fn rig() -> Option<Rig> {
    let dir = amd_firmware_dir()?;
    let co = rdna3_support::build("amd_no_alloc_sim", SOURCE)?;
    let sim =
        Simulator::new(SimConfig { vram_bytes: 256 << 20, firmware_dir: Some(dir.clone()), ..SimConfig::default() });
    let bridge = Bridge::open(Box::new(Paused(sim.transport())), None).unwrap();
    let mut dev = AmdDevice::open(bridge, &dir, BootOptions::default()).unwrap();
    let record = CodeObject::parse(&co).unwrap().kernel("fma3").unwrap().dispatch_record();
    let spec = ProgramSpec {
        name: "fma3",
        format: ProgramFormat::AmdCodeObject,
        code: &co,
        arg_count: 4,
        amdgpu: Some(&record),
        ir3: None,
    };
    let program = dev.load_program(&spec).unwrap();
    let y = dev.alloc(4 * N, BufferUse::Output).unwrap();
    let inputs = [0; 3].map(|_| dev.alloc(4 * N, BufferUse::Input).unwrap());
    let args = [y, inputs[0], inputs[1], inputs[2]].map(|buffer| Arg { buffer, offset: 0 }).to_vec();
    let step =
        dev.link_step(&[StepOp::Dispatch { program, args, global: [N as u32, 1, 1], local: [64, 1, 1] }]).unwrap();
    Some(Rig { _sim: sim, dev, step, inputs, y })
}

fn floats(v: impl Fn(usize) -> f32) -> Vec<u8> {
    (0..N).flat_map(|i| v(i).to_le_bytes()).collect()
}

/// One step as `pilot_core::Session::step` makes it: copy-ins, submit, wait, copy-out.
fn step(r: &mut Rig, inputs: &[Vec<u8>; 3], out: &mut [u8]) {
    for (&b, data) in r.inputs.iter().zip(inputs) {
        r.dev.copy_in(b, 0, data).unwrap();
    }
    let v = r.dev.submit(r.step).unwrap();
    r.dev.wait(v).unwrap();
    r.dev.copy_out(r.y, 0, out).unwrap();
}

#[test]
fn a_step_with_small_inputs_allocates_nothing_and_gives_the_right_outputs() {
    let Some(mut r) = rig() else { return };
    let steps: Vec<[Vec<u8>; 3]> =
        (0..4).map(|k| [floats(|i| i as f32 + k as f32), floats(|_| 2.0), floats(|i| (k * i) as f32)]).collect();
    let mut out = vec![0u8; 4 * N];
    step(&mut r, &steps[0], &mut out);
    let before = thread_allocs();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(thread_allocs() - before, 1, "the counting allocator counts");
    for (k, inputs) in steps.iter().enumerate().cycle().take(24) {
        let before = thread_allocs();
        step(&mut r, inputs, &mut out);
        assert_eq!(thread_allocs() - before, 0, "heap allocations in a usb+amd step");
        let want = floats(|i| (i as f32 + k as f32) * 2.0 + (k * i) as f32);
        assert!(out == want, "step {k}: the outputs differ");
    }
}

#[test]
fn small_inputs_cost_one_sram_write_whatever_their_number() {
    let Some(mut r) = rig() else { return };
    let mut out = vec![0u8; 4 * N];
    let inputs = [floats(|i| i as f32), floats(|_| 3.0), floats(|_| 1.0)];
    step(&mut r, &inputs, &mut out);
    let stats = |r: &Rig| r.dev.bridge().stats();
    let before = stats(&r);
    for (&b, data) in r.inputs.iter().zip(&inputs) {
        r.dev.copy_in(b, 0, data).unwrap();
    }
    assert_eq!(stats(&r).transactions(), before.transactions(), "a staged copy-in sends nothing by itself");
    let v = r.dev.submit(r.step).unwrap();
    r.dev.wait(v).unwrap();
    let after = stats(&r);
    // The staged inputs' 0xF2 arm and bulk OUT (2); the ring, the write pointer, the HDP flush and the doorbell (7);
    // one signal read (2).
    assert_eq!(after.transactions() - before.transactions(), 11);
    assert_eq!((after.bulk_out - before.bulk_out, after.control_out - before.control_out), (4, 6));
    r.dev.copy_out(r.y, 0, &mut out).unwrap();
    assert_eq!(out, floats(|i| 3.0 * i as f32 + 1.0));
}
