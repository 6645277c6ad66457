//! #26, confinement between buffers on `usb+amd`, on the simulated bridge and GPU: the driver maps each
//! allocation while it lives, with an unmapped page after it, and kernels reach VRAM only through those mappings.
//! A kernel that reads or writes one page past its buffer, or into a buffer that was freed, stops with the VM
//! fault the card latches, and the wait reports it; the same read of a live neighbour runs (one VMID serves every
//! allocation). Freeing unmaps and invalidates the TLB: without the invalidation the simulated TLB keeps the
//! freed buffer reachable and the freed-buffer case fails. Allocations of every size, freed and made again in
//! any order, keep their mappings exact: SDMA copies through the same page table read back what was written, and
//! a kernel copies through the last ones made. (Leaves replacing tables and the reverse: `pilot-amd`'s
//! `boot/vm.rs` tests, on the simulator's walker.)
//!
//! Firmware and clang-19 as in `amd_scratch_sim.rs`.

#[path = "../../rdna3/tests/rdna3_support/mod.rs"]
mod rdna3_support;
mod sim_device;

use pilot_amd::device::AmdDevice;
use pilot_amd_codeobj::CodeObject;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramFormat, ProgramId, ProgramSpec, StepId, StepOp};
use pilot_rdna3::Isa;
use pilot_test_support::{amd_firmware_dir as firmware_dir, Rng};
use pilot_usb_sim::{Board, Simulator};
use sim_device::{open, sim};

/// `y[g + offs[1]] = x[g + offs[0]]`: the offsets are data, so the compiler cannot see the stray coming.
const SOURCE: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void stray(global const int *x, global int *y, global const int *offs) {
  uint g = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  y[g + offs[1]] = x[g + offs[0]];
}
"#;

const N: usize = 64;
const PAGE_INTS: i32 = 1024;

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn load(dev: &mut AmdDevice, co: &[u8]) -> ProgramId {
    let obj = CodeObject::parse(co).unwrap();
    let record = obj.kernel("stray").unwrap().dispatch_record();
    let spec = ProgramSpec {
        name: "stray",
        format: ProgramFormat::AmdCodeObject,
        code: co,
        arg_count: 3,
        amdgpu: Some(&record),
        ir3: None,
    };
    dev.load_program(&spec).unwrap()
}

/// `stray` over `N` work-items on `[x, y, offs]`, linked once (so nothing is allocated between runs).
fn link(dev: &mut AmdDevice, prog: ProgramId, bufs: [BufferId; 3]) -> StepId {
    let args = bufs.map(|buffer| Arg { buffer, offset: 0 }).to_vec();
    dev.link_step(&[StepOp::Dispatch { program: prog, args, global: [N as u32, 1, 1], local: [64, 1, 1] }]).unwrap()
}

/// Runs `step` with the read and write offsets `offs` (in ints) in `o`: `y`, or the wait's error.
fn run(dev: &mut AmdDevice, step: StepId, [_, y, o]: [BufferId; 3], offs: [i32; 2]) -> Result<Vec<i32>, String> {
    dev.copy_in(o, 0, &bytes(&offs)).unwrap();
    let v = dev.submit(step).map_err(|e| e.to_string())?;
    dev.wait(v).map_err(|e| e.to_string())?;
    let mut out = vec![0u8; 4 * N];
    dev.copy_out(y, 0, &mut out).unwrap();
    Ok(ints(&out))
}

/// The one fault the simulator recorded, after checking the wait reported the VM fault.
fn fault(s: &Simulator, err: &str) -> String {
    assert!(err.contains("did not reach timeline value") && err.contains("VM protection fault"), "{err}");
    let faults: Vec<String> = s.gpu_faults().iter().map(|f| f.to_string()).collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    faults[0].clone()
}

fn strays_fault(isa: Isa, board: Board) {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build_for(isa, "amd_confine_sim", SOURCE, &[]) else { return };
    let fresh = || {
        let s = sim(&dir, board);
        let mut dev = open(&s, &dir);
        let prog = load(&mut dev, &co);
        // x, y, the offsets, then z: first fit puts each 4 KB allocation and its guard page right after the one
        // before, so z starts six pages after x.
        let [x, y, o, z] = [0; 4].map(|_| dev.alloc(4 * N, BufferUse::Input).unwrap());
        let data: Vec<i32> = (0..N as i32).map(|i| i * 3 + 1).collect();
        dev.copy_in(x, 0, &bytes(&data)).unwrap();
        let step = link(&mut dev, prog, [x, y, o]);
        (s, dev, step, [x, y, o], z, data)
    };
    let (s, mut dev, step, bufs, z, want) = fresh();
    assert_eq!(run(&mut dev, step, bufs, [0, 0]).unwrap(), want, "in bounds");
    // A read reaching the live buffer z runs: one VMID serves every allocation.
    let z_data: Vec<i32> = (0..N as i32).map(|i| -i).collect();
    dev.copy_in(z, 0, &bytes(&z_data)).unwrap();
    assert_eq!(run(&mut dev, step, bufs, [6 * PAGE_INTS, 0]).unwrap(), z_data, "a live neighbour");
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
    // Freed, the same read faults.
    dev.free(z).unwrap();
    let f = fault(&s, &run(&mut dev, step, bufs, [6 * PAGE_INTS, 0]).unwrap_err());
    assert!(f.contains("-byte load at") && f.contains("reaches memory the page table does not map"), "{f}");

    // One page past x (its guard page), read or written.
    for (offs, what) in [([PAGE_INTS, 0], "-byte load at"), ([0, PAGE_INTS], "-byte store at")] {
        let (s, mut dev, step, bufs, _, _) = fresh();
        let f = fault(&s, &run(&mut dev, step, bufs, offs).unwrap_err());
        assert!(f.contains(what) && f.contains("reaches memory the page table does not map"), "{offs:?}: {f}");
    }
}

#[test]
fn a_kernel_straying_past_its_buffer_or_into_a_freed_one_faults_on_gfx1100() {
    strays_fault(Isa::Gfx11, Board::Navi31);
}

#[test]
fn a_kernel_straying_past_its_buffer_or_into_a_freed_one_faults_on_gfx1201() {
    strays_fault(Isa::Gfx12, Board::Navi48);
}

#[test]
fn mappings_stay_exact_through_allocation_churn() {
    let Some(dir) = firmware_dir() else { return };
    let Some(co) = rdna3_support::build("amd_confine_sim", SOURCE) else { return };
    let s = sim(&dir, Board::Navi31);
    let mut dev = open(&s, &dir);
    let prog = load(&mut dev, &co);
    let check = |dev: &mut AmdDevice, live: &[(BufferId, Vec<u8>)], when: &str| {
        for (b, data) in live {
            let mut back = vec![0u8; data.len()];
            dev.copy_out(*b, 0, &mut back).unwrap();
            assert!(&back == data, "{when}: a buffer of {} bytes read back differently", data.len());
        }
    };
    let fill = |dev: &mut AmdDevice, size: usize, seed: u32| {
        let b = dev.alloc(size, BufferUse::Input).unwrap();
        let data: Vec<u8> = (0..size).map(|i| (i as u32 ^ seed.wrapping_mul(2_654_435_761)) as u8).collect();
        dev.copy_in(b, 0, &data).unwrap();
        (b, data)
    };
    // Sizes across the leaf sizes: under a page, pages, 2 MB leaves with a 4 KB tail, several 2 MB leaves.
    let sizes = [100, 4096, 12_288, (2 << 20) + 4096, 6 << 20, 64 << 10];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut live: Vec<(BufferId, Vec<u8>)> = Vec::new();
    for round in 0..60u32 {
        if !live.is_empty() && rng.next_u64().is_multiple_of(3) {
            let gone = live.swap_remove(rng.next_u64() as usize % live.len());
            check(&mut dev, std::slice::from_ref(&gone), &format!("round {round}"));
            dev.free(gone.0).unwrap();
        } else {
            live.push(fill(&mut dev, sizes[rng.next_u64() as usize % sizes.len()], round));
        }
    }
    check(&mut dev, &live, "the end");
    // A kernel reads and writes through the mappings made last.
    let bufs = [0; 3].map(|_| dev.alloc(4 * N, BufferUse::Input).unwrap());
    let x: Vec<i32> = (0..N as i32).map(|i| i * i).collect();
    dev.copy_in(bufs[0], 0, &bytes(&x)).unwrap();
    let step = link(&mut dev, prog, bufs);
    assert_eq!(run(&mut dev, step, bufs, [0, 0]).unwrap(), x);
    assert!(s.gpu_faults().is_empty(), "{:?}", s.gpu_faults());
}
