//! Scratch memory on `usb+amd` (#25 item 8), on the simulated bridge and GPU: a kernel whose private array
//! lives in scratch (256 ints indexed at run time) runs from the prebuilt step on gfx1100 and gfx1201 and matches
//! Rust; the scratch setup of the driver before scratch support (no TMPRING_SIZE), a short slot, a base left
//! unprogrammed and a region larger than its allocation each fail in the simulator; a kernel needing more than
//! WAVESIZE can describe, or more than the scratch budget, is refused at load in one line.
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...` (`scripts/setup.sh`); skipped when absent, a
//! failure under `PILOT_REQUIRE=1`. clang-19 builds the kernels (skipped without it).

#[path = "../../rdna3/tests/rdna3_support/mod.rs"]
mod rdna3_support;
mod sim_device;

use pilot_amd::device::AmdDevice;
use pilot_amd_codeobj::CodeObject;
use pilot_core::device::{
    Arg, BufferId, BufferUse, Device, DeviceResult, ProgramFormat, ProgramId, ProgramSpec, StepOp,
};
use pilot_rdna3::Isa;
use pilot_test_support::amd_firmware_dir as firmware_dir;
use pilot_usb_sim::{Board, Simulator};
use sim_device::{open, sim};
use std::path::Path;

/// `p` is `volatile`, so it stays in memory: 1 KB of scratch per work-item, read back at indices the kernel
/// learns only at run time.
const SOURCE: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void spill(global const int *x, global const int *idx, global int *y) {
  uint g = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  volatile int p[256];
  for (int j = 0; j < 256; j++) p[j] = x[g] * j + (int)g;
  int s = 0;
  for (int j = 0; j < 4; j++) s += p[(idx[g] + 61 * j) & 255];
  y[g] = s;
}
"#;

/// Private arrays past what gfx1100's WAVESIZE describes (160 KB) and past the scratch budget of a 256 MB board
/// (96 KB: 6 SEs x 64 lanes x 96 KB = 36 MB).
const HUGE: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void huge(global const int *idx, global int *y) {
  uint g = __builtin_amdgcn_workitem_id_x();
  volatile int p[40000];
  p[idx[g]] = (int)g;
  y[g] = p[idx[g] + 1];
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void big(global const int *idx, global int *y) {
  uint g = __builtin_amdgcn_workitem_id_x();
  volatile int p[24000];
  p[idx[g]] = (int)g;
  y[g] = p[idx[g] + 1];
}
"#;

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn load(dev: &mut AmdDevice, co: &[u8], name: &str, args: usize) -> DeviceResult<ProgramId> {
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
    dev.load_program(&spec)
}

fn want(x: &[i32], idx: &[i32]) -> Vec<i32> {
    (0..x.len())
        .map(|g| (0..4).map(|j| x[g] * ((idx[g] + 61 * j) & 255) + g as i32).fold(0i32, i32::wrapping_add))
        .collect()
}

/// A device with `spill` loaded and its buffers (allocated after the scratch region, so a region larger than its
/// allocation runs into them) filled for `n` work-items.
struct Setup {
    dev: AmdDevice,
    spill: ProgramId,
    bufs: [BufferId; 3],
    x: Vec<i32>,
    idx: Vec<i32>,
}

fn setup(s: &Simulator, dir: &Path, co: &[u8], n: usize) -> Setup {
    let mut dev = open(s, dir);
    let spill = load(&mut dev, co, "spill", 3).unwrap();
    let x: Vec<i32> = (0..n as i32).map(|i| i * 7 - 1000).collect();
    let idx: Vec<i32> = (0..n as i32).map(|i| (i * 37 + 11) % 1000).collect();
    let bufs = [0; 3].map(|_| dev.alloc(4 * n, BufferUse::Input).unwrap());
    dev.copy_in(bufs[0], 0, &bytes(&x)).unwrap();
    dev.copy_in(bufs[1], 0, &bytes(&idx)).unwrap();
    dev.copy_in(bufs[2], 0, &bytes(&vec![0; n])).unwrap();
    Setup { dev, spill, bufs, x, idx }
}

impl Setup {
    /// Links and runs the dispatch over all `n` work-items: the outputs, or the wait's error.
    fn run(&mut self) -> Result<Vec<i32>, String> {
        let n = self.x.len();
        let op = StepOp::Dispatch {
            program: self.spill,
            args: self.bufs.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect(),
            global: [n as u32, 1, 1],
            local: [64, 1, 1],
        };
        let step = self.dev.link_step(&[op]).map_err(|e| e.to_string())?;
        let v = self.dev.submit(step).map_err(|e| e.to_string())?;
        self.dev.wait(v).map_err(|e| e.to_string())?;
        let mut out = vec![0u8; 4 * n];
        self.dev.copy_out(self.bufs[2], 0, &mut out).map_err(|e| e.to_string())?;
        Ok(ints(&out))
    }
}

fn spills_and_matches_rust(isa: Isa, board: Board) {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build_for(isa, "amd_scratch_sim", SOURCE, &[]) else { return };
    let record = CodeObject::parse(&co).unwrap().kernel("spill").unwrap().dispatch_record();
    assert!(record.scratch >= 1024, "the private array must live in scratch: {record:?}");
    let s = sim(&dir, board);
    let mut t = setup(&s, &dir, &co, 64 * 24);
    let region = *t.dev.scratch_mut().expect("loading a kernel with scratch sets up the region");
    assert_eq!(region.layout.per_item, record.scratch.next_multiple_of(4));
    for _ in 0..2 {
        assert_eq!(t.run().unwrap(), want(&t.x, &t.idx));
    }
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}

#[test]
fn a_kernel_that_spills_runs_on_gfx1100() {
    spills_and_matches_rust(Isa::Gfx11, Board::Navi31);
}

#[test]
fn a_kernel_that_spills_runs_on_gfx1201() {
    spills_and_matches_rust(Isa::Gfx12, Board::Navi48);
}

/// The fault the simulator recorded for the failed dispatch, after checking the wait reported a hang.
fn fault(s: &Simulator, err: &str) -> String {
    assert!(err.contains("did not reach timeline value"), "{err}");
    let faults: Vec<String> = s.gpu_faults().iter().map(|f| f.to_string()).collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    faults[0].clone()
}

#[test]
fn wrong_scratch_setups_fail_in_the_simulator() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_scratch_sim", SOURCE) else { return };

    // The driver before scratch support: TMPRING_SIZE 0.
    let s = sim(&dir, Board::Navi31);
    let mut t = setup(&s, &dir, &co, 64);
    let r = t.dev.scratch_mut().unwrap();
    (r.layout.waves, r.layout.wavesize) = (0, 0);
    let f = fault(&s, &t.run().unwrap_err());
    assert!(
        f.contains("SCRATCH_EN is set and COMPUTE_TMPRING_SIZE is 0x0: WAVESIZE 0 gives the waves no scratch slot"),
        "{f}"
    );

    // A slot half the size the kernel needs: its stores past the share stop the dispatch.
    let s = sim(&dir, Board::Navi31);
    let mut t = setup(&s, &dir, &co, 64);
    t.dev.scratch_mut().unwrap().layout.wavesize /= 2;
    let f = fault(&s, &t.run().unwrap_err());
    assert!(f.contains("bytes of scratch"), "{f}");

    // WAVES 0: no wave with scratch may launch.
    let s = sim(&dir, Board::Navi31);
    let mut t = setup(&s, &dir, &co, 64);
    t.dev.scratch_mut().unwrap().layout.waves = 0;
    let f = fault(&s, &t.run().unwrap_err());
    assert!(f.contains("WAVES 0 lets no wave with scratch launch"), "{f}");

    // The scratch base never programmed: the region is at 0, which the page table does not map; the VM fault is latched.
    let s = sim(&dir, Board::Navi31);
    let mut t = setup(&s, &dir, &co, 64);
    t.dev.scratch_mut().unwrap().va = 0;
    let err = t.run().unwrap_err();
    assert!(err.ends_with("; VM protection fault (status 0x40100) at page 0x0"), "{err}");
    let f = fault(&s, &err);
    assert!(f.contains("and the scratch base 0x0") && f.contains("reaches memory the page table does not map"), "{f}");
}

#[test]
fn a_region_larger_than_its_allocation_overwrites_the_buffers_after_it() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_scratch_sim", SOURCE) else { return };
    let s = sim(&dir, Board::Navi31);
    // More waves than the doubled region has slots, so the seeded draw hands out every slot.
    let probe = setup(&s, &dir, &co, 64);
    let slots = {
        let mut d = probe.dev;
        let l = d.scratch_mut().unwrap().layout;
        d.close().unwrap();
        2 * (l.waves * l.se) as usize
    };
    let mut t = setup(&s, &dir, &co, 32 * (slots + 2));
    let good = t.run().unwrap();
    assert_eq!(good, want(&t.x, &t.idx), "the region as allocated: outputs right, nothing overwritten");
    t.dev.scratch_mut().unwrap().layout.waves *= 2;
    match t.run() {
        Ok(out) => assert_ne!(out, good, "twice the WAVES the allocation holds must overwrite the buffers after it"),
        Err(e) => assert!(!s.gpu_faults().is_empty(), "{e}"),
    }
}

#[test]
fn kernels_needing_more_scratch_than_wavesize_or_the_budget_are_refused_at_load() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_scratch_sim_huge", HUGE) else { return };
    let s = sim(&dir, Board::Navi31);
    let mut dev = open(&s, &dir);
    let e = load(&mut dev, &co, "huge", 2).unwrap_err().to_string();
    assert!(e.contains("scratch bytes per work-item: gfx1100 takes 1 to 131068") && !e.contains('\n'), "{e}");
    let e = load(&mut dev, &co, "big", 2).unwrap_err().to_string();
    assert!(e.contains("for one wave per shader engine, over the") && e.contains("scratch budget"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(dev.scratch_mut().is_none(), "nothing is allocated for a refused kernel");
}
