//! #26: a kernel on the simulated GPU is confined to the step's memory. A hand-assembled program that loads from
//! the GPU's own memory (a page table, the PSP's TMR where the firmware lives, the PSP's ring, the compute ring,
//! the IP discovery table), which these page tables map like any VRAM, stops with a fault naming the dispatch,
//! the address and the region, never reaching its signal; the fault is latched in
//! GCVM_L2_PROTECTION_FAULT_STATUS/ADDR for the driver. So does a load through the system aperture (an MC
//! address, which a card would let a VMID-0 kernel use) and one the page table does not map. A load from an
//! ordinary buffer through its VA runs.

mod sim_gpu_support;
use pilot_usb_sim::gpu::mem::FB_BASE;
use pilot_usb_sim::Board;
use sim_gpu_support::boot::*;
use sim_gpu_support::pm4::{self, reg};
use sim_gpu_support::program::{S_CODE_END, S_ENDPGM};
use sim_gpu_support::*;

const VRAM: u64 = 64 * MB;
const CODE: u64 = 0x40_0000;
const BUFFER: u64 = 0x60_0000;
const SIGNAL: u64 = 0x70_0000;
/// The rig's page-table root (`Rig::page_tables`).
const PT_ROOT: u64 = 0x30_0000;
/// Linux gc_11_0_0_offset.h, base segment 0: GCVM_L2_PROTECTION_FAULT_STATUS, _ADDR_LO32, _ADDR_HI32.
const FAULT_REGS: [u32; 3] = [0x15C8, 0x15C9, 0x15CA];

/// `s_load_b32 s2` from `addr` (llvm-mc-19 -mcpu=gfx1100 encodings), then the end.
fn load_from(addr: u64) -> Vec<u32> {
    vec![0xBE80_00FF, addr as u32, 0xBE81_00FF, (addr >> 32) as u32, 0xF400_0080, 0xF800_0000, 0xBF89_FC07, S_ENDPGM]
}

struct Outcome {
    signal: u32,
    faults: Vec<String>,
    /// GCVM_L2_PROTECTION_FAULT_STATUS and the faulting address it latched (page << 12).
    status: u32,
    page: u64,
}

/// Boots a gfx1100 with page tables, runs `program` over one wave and reports what happened.
fn run(program: &[u32]) -> Option<Outcome> {
    let (mut rig, r, fw) = rig(Board::Navi31, VRAM)?;
    rig.cold_boot(&r, VRAM, &fw);
    rig.page_tables(&r, VRAM);
    let gc = discovery_bases(&mut rig, VRAM)[&11].1[0];
    let mut p = Producer::default();
    rig.put_vram(CODE, &pm4::bytes(&[program, &[S_CODE_END]].concat()));
    let (pgm, signal) = (VA_BASE + CODE, rig.mc(&r, SIGNAL));
    let s = [
        pm4::set_sh(reg::PGM_LO, &[(pgm >> 8) as u32, (pgm >> 40) as u32]),
        pm4::set_sh(reg::RSRC1, &[0x60af_0000, 0]),
        pm4::set_sh(reg::RSRC3, &[0]),
        pm4::set_sh(reg::TMPRING_SIZE, &[0]),
        pm4::set_sh(reg::NUM_THREAD_X, &[32, 1, 1]),
        pm4::dispatch([1, 1, 1]),
        pm4::cs_partial_flush(),
        pm4::release_mem(signal, 7),
    ]
    .concat();
    rig.submit_compute(&mut p, &s);
    let [status, lo, hi] = FAULT_REGS.map(|o| rig.rreg(gc + o));
    Some(Outcome {
        signal: rig.u32_at(SIGNAL),
        faults: rig.sim.gpu_faults().iter().map(|f| f.to_string()).collect(),
        status,
        page: (u64::from(lo) | u64::from(hi) << 32) << 12,
    })
}

#[test]
fn a_kernel_reading_the_gpus_own_memory_faults_naming_the_address() {
    let Some(ok) = run(&load_from(VA_BASE + BUFFER)) else { return };
    assert_eq!((ok.signal, ok.faults.len(), ok.status), (7, 0, 0), "a buffer: {:?}", ok.faults);
    for (paddr, region) in [
        (PT_ROOT + 0x1008, "a page table"),
        (TMR + 0x1_0000, "the PSP's TMR (firmware)"),
        (PSP_RING + 0x40, "the PSP's ring"),
        (COMPUTE_RING + 4, "a queue's ring"),
        (VRAM - 0x100, "the IP discovery table"),
    ] {
        let addr = VA_BASE + paddr;
        let o = run(&load_from(addr)).unwrap();
        assert_eq!(o.signal, 0, "{region}: the step's signal must not arrive");
        let want = format!("a 4-byte load at {addr:#x} reaches {region}, which no kernel may touch");
        assert!(o.faults.iter().any(|f| f.contains("dispatch 1 (") && f.contains(&want)), "{region}: {:?}", o.faults);
        assert_eq!((o.status, o.page), (0xF0, addr & !0xFFF), "{region}: the latched VM fault");
    }
    // Memory the page table does not map, and the buffer through the system aperture: the mapping error is
    // latched the same way.
    for addr in [0x1234_0000_0000, FB_BASE + BUFFER] {
        let o = run(&load_from(addr)).unwrap();
        assert_eq!((o.signal, o.status, o.page), (0, 0x100, addr), "{addr:#x}: {:?}", o.faults);
        let f = &o.faults;
        assert!(f.iter().any(|f| f.contains("reaches memory the page table does not map")), "{addr:#x}: {f:?}");
    }
}
