//! One hand-assembled program dispatched on a cold-booted gfx1100, for tests of the dispatch registers.

use super::boot::*;
use super::pm4::{self, reg};
use super::*;

const VRAM: u64 = 64 * MB;
const CODE: u64 = 0x40_0000;
const SIGNAL: u64 = 0x70_0000;
pub const S_ENDPGM: u32 = 0xbfb0_0000;
pub const S_CODE_END: u32 = 0xbf9f_0000;

/// Boots a gfx1100, runs `program` over one workgroup of `threads` and returns (signal, faults).
pub fn run(program: &[u32], threads: [u32; 3]) -> Option<(u32, Vec<String>)> {
    let (mut rig, r, fw) = rig(Board::Navi31, VRAM)?;
    rig.cold_boot(&r, VRAM, &fw);
    let mut p = Producer::default();
    let code = [program, &[S_CODE_END]].concat();
    rig.put_vram(CODE, &pm4::bytes(&code));
    let (pgm, signal) = (rig.mc(&r, CODE), rig.mc(&r, SIGNAL));
    let s = [
        pm4::set_sh(reg::PGM_LO, &[(pgm >> 8) as u32, (pgm >> 40) as u32]),
        pm4::set_sh(reg::RSRC1, &[0x60af_0000, 0]),
        pm4::set_sh(reg::RSRC3, &[0]),
        pm4::set_sh(reg::TMPRING_SIZE, &[0]),
        pm4::set_sh(reg::NUM_THREAD_X, &threads),
        pm4::dispatch([1, 1, 1]),
        pm4::cs_partial_flush(),
        pm4::release_mem(signal, 7),
    ]
    .concat();
    rig.submit_compute(&mut p, &s);
    let faults = rig.sim.gpu_faults().iter().map(|f| f.to_string()).collect();
    Some((rig.u32_at(SIGNAL), faults))
}
