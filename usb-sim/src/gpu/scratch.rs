//! Scratch (private memory) as the GPU hands it to a dispatch's waves, from the registers alone:
//!
//! - A wave gets scratch only when `COMPUTE_PGM_RSRC2.SCRATCH_EN` (bit 0) is set; the emulator then gives each
//!   work-item `WAVESIZE` x 256 / 64 bytes (`COMPUTE_TMPRING_SIZE.WAVESIZE`, bits 12-26 on GC 11 and 12-29 on
//!   GC 12, in 256-byte units, a slot sized for 64 lanes as tinygrad's `_ensure_has_local_memory` and ROCR size
//!   it), and a scratch access past a work-item's share stops the dispatch with the emulator's fault. A wave32 on a
//!   real card would stop only past twice that (its 32 lanes share the slot); the simulator holds a driver to the
//!   64-lane sizing it documents.
//! - The region the registers describe is `COMPUTE_TMPRING_SIZE.WAVES` (bits 0-11, slots per shader engine on
//!   gfx11 and later: tinygrad divides its slot count by `se_cnt`) x the board's SEs x the slot, at
//!   `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI` << 8 (tinygrad `AMDComputeQueue.exec`, LLVM's "architected flat
//!   scratch"). Mesa's `ac_get_scratch_tmpring_size` reads the register the same way: "WAVES means NUM_RECORDS,
//!   WAVESIZE is the size of each element, meaning STRIDE".
//! - Refused before any wave runs, each with a fault naming the registers: SCRATCH_EN with WAVESIZE 0 (no slot:
//!   the kernel's first scratch access would hit another wave's memory or none), SCRATCH_EN with WAVES 0 (no wave
//!   with scratch can launch: a card hangs), and a region any byte of which the GC hub does not map to VRAM or that
//!   reaches the GPU's own memory ([`super::confine`]): the VM protection fault is latched as for a kernel's access.
//! - A real card keeps a wave's private data in its slot in VRAM; which slot a wave gets depends on timing. After
//!   a dispatch the simulator writes seeded bytes (`SimConfig::seed`: one seed, one sequence) over one slot per
//!   wave that ran, up to every slot, the slots drawn at random without repeats: a region larger than the memory
//!   the driver gave it overwrites whatever follows, as the card's waves would.
//!
//! The emulator keeps the work-items' private bytes itself (they start zeroed, where a card's hold whatever the
//! slot held), and serves at most [`pilot_rdna3::dispatch::MAX_SCRATCH_PER_ITEM`] bytes per work-item: a gfx12
//! dispatch whose WAVESIZE describes more (its field is wider) is refused with the emulator's error.

use super::confine::Stray;
use super::mem::{Fabric, Hub, Target};
use super::regs::Reg;
use super::Gpu;

const RSRC2_SCRATCH_EN: u32 = 1;
const WAVESIZE_UNIT: u64 = 256;
const SLOT_LANES: u64 = 64;

/// A xorshift64* stream: deterministic per seed.
#[derive(Clone, Copy, Debug)]
pub struct Draws(u64);

impl Draws {
    pub fn new(seed: u64) -> Draws {
        Draws(seed ^ 0x5C4A_7C11 | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// `n` distinct values below `of` (`n <= of`), in draw order.
    fn distinct(&mut self, n: u64, of: u64) -> Vec<u64> {
        if n >= of {
            return (0..of).collect();
        }
        let mut taken = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(n as usize);
        while (out.len() as u64) < n {
            let s = self.next() % of;
            if taken.insert(s) {
                out.push(s);
            }
        }
        out
    }
}

/// What a dispatch's waves get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Scratch bytes per work-item (0: SCRATCH_EN clear).
    pub per_item: u32,
    /// The region: GPU address, slot bytes, slots in all.
    region: Option<(u64, u64, u64)>,
}

impl Gpu {
    /// The scratch a dispatch with `rsrc2` gets, the region checked (see the module docs).
    pub(super) fn scratch_plan(&mut self, gfx12: bool, rsrc2: u32, fabric: &mut dyn Fabric) -> Result<Plan, String> {
        if rsrc2 & RSRC2_SCRATCH_EN == 0 {
            return Ok(Plan::default());
        }
        let tmpring = self.get(Reg::TmpringSize);
        let (waves, wavesize) = (tmpring & 0xFFF, (tmpring >> 12) & if gfx12 { 0x3_FFFF } else { 0x7FFF });
        let what = format!("COMPUTE_PGM_RSRC2.SCRATCH_EN is set and COMPUTE_TMPRING_SIZE is {tmpring:#x}");
        if wavesize == 0 {
            return Err(format!("{what}: WAVESIZE 0 gives the waves no scratch slot (scratch not set up)"));
        }
        if waves == 0 {
            return Err(format!("{what}: WAVES 0 lets no wave with scratch launch (the GPU hangs)"));
        }
        let se = self.board.gc_info().num_se;
        let slot = u64::from(wavesize) * WAVESIZE_UNIT;
        let slots = u64::from(waves) * u64::from(se);
        let len = slots * slot;
        let base = (u64::from(self.get(Reg::ScratchBaseLo)) | u64::from(self.get(Reg::ScratchBaseHi)) << 32) << 8;
        let region = format!(
            "{what} (WAVES {waves} x {se} SEs x WAVESIZE {wavesize} x 256 bytes) and the scratch base {base:#x}"
        );
        if let Err(stray) = self.check_region(base, len, fabric) {
            self.latch_vm_fault(&stray);
            return Err(format!("{region}: the region {base:#x}+{len:#x} is not the step's memory: {stray}"));
        }
        Ok(Plan { per_item: (slot / SLOT_LANES) as u32, region: Some((base, slot, slots)) })
    }

    /// Every byte of `base..base + len` must translate on the GC hub to VRAM outside the GPU's own memory.
    fn check_region(&mut self, base: u64, len: u64, fabric: &mut dyn Fabric) -> Result<(), Stray> {
        let protected = self.protected(fabric);
        let view = self.hub_view(Hub::Gc);
        let vram = fabric.vram();
        let (mut a, end) = (base, base.saturating_add(len));
        while a < end {
            let stray = |region| Stray { addr: a, len: (end - a).min(1 << 30) as usize, write: true, region };
            let (target, room) = view.translate(a, vram).map_err(|_| stray(None))?;
            let n = room.min(end - a).max(1);
            match target {
                Target::Vram(off) => {
                    if let Some(r) = protected.hit(off as u64, off as u64 + n) {
                        return Err(stray(Some(r)));
                    }
                }
                Target::Bridge(_) => return Err(stray(Some("host memory behind the bridge"))),
            }
            a += n;
        }
        Ok(())
    }

    /// After a dispatch of `waves` waves: seeded bytes over one drawn slot per wave (see the module docs).
    pub(super) fn scratch_spill(&mut self, plan: &Plan, waves: u64, fabric: &mut dyn Fabric) -> Result<(), String> {
        let Some((base, slot, slots)) = plan.region else { return Ok(()) };
        let mut draws = self.scratch_draws;
        let chosen = draws.distinct(waves, slots);
        let mut bytes = vec![0u8; slot as usize];
        for s in chosen {
            for c in bytes.chunks_mut(8) {
                c.copy_from_slice(&draws.next().to_le_bytes()[..c.len()]);
            }
            self.mem(Hub::Gc, fabric, self.now).write(base + s * slot, &bytes).map_err(|e| format!("scratch: {e}"))?;
        }
        self.scratch_draws = draws;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_distinct_deterministic_and_cover_every_slot_when_asked() {
        let (mut a, mut b) = (Draws::new(7), Draws::new(7));
        let x = a.distinct(50, 60);
        assert_eq!(x, b.distinct(50, 60));
        let mut sorted = x.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 50);
        assert!(x.iter().all(|&s| s < 60));
        assert_ne!(x, Draws::new(8).distinct(50, 60));
        assert_eq!(a.distinct(70, 60), (0..60).collect::<Vec<_>>());
    }
}
