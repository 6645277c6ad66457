//! Confinement of kernels. A kernel reaches VRAM only through what context 0's page table maps: the system
//! aperture, which a real card lets a VMID-0 kernel use to reach all of VRAM, is refused to kernels (pilot's
//! driver hands a kernel VAs only, so an aperture address in a kernel is a stray), and so is every VA no valid
//! leaf maps. pilot's driver maps each allocation while it lives and leaves an unmapped page after it
//! (`pilot-amd`'s `boot/vram.rs`), so a kernel that runs past the end of a buffer, into a freed one or into VRAM
//! nothing holds faults here as on a card.
//!
//! Of what the page table maps, the GPU's own memory, which no kernel of a step has business touching, is refused
//! as well (tinygrad's driver maps some of it, and so may a driver that maps everything):
//! - every table of both hubs' context-0 page tables;
//! - the IP discovery table (the last [`discovery::FROM_END`] bytes of VRAM);
//! - each queue's ring and read-pointer write-back (GC hub), the PSP's ring and the TMR where the PSP keeps the
//!   firmware it loaded (MM hub).
//!
//! The TLB, for kernels: a translation a dispatch could use stays usable, even after its page-table entry
//! changed, until the driver invalidates VMID 0 (`GCVM_INVALIDATE_ENG17_REQ`, as tinygrad's `flush_tlb` and
//! Linux after every page-table update); a stale range gives way once the table maps any VA inside it again.
//! So a driver that unmaps a buffer without the invalidation leaves it reachable here, as a card may. (The
//! CP, SDMA and the PSP walk the table on every access.)
//!
//! Any refused kernel access is latched as the VM protection fault a card reports:
//! `GCVM_L2_PROTECTION_FAULT_STATUS` nonzero (MAPPING_ERROR, bit 8, for unmapped memory; PERMISSION_FAULTS, bits
//! 4-7, for a refused region; RW, bit 18, for a store) and `GCVM_L2_PROTECTION_FAULT_ADDR_LO32/HI32` the faulting
//! page (address >> 12), which is what tinygrad's driver reads when a UTCL2 fault arrives (tinygrad
//! runtime/support/am/ip.py, `AM_IH.interrupt_handler`).
//!
//! Not refused: whatever the driver maps — a step's buffers, code, kernarg segments, scratch and signals, but
//! also another loaded model's buffers: one VMID serves every model on the card (like one process's VM on Linux).

use super::discovery;
use super::mem::{table_pages, Fabric, Hub, HubView, Target};
use super::regs::Reg;
use super::Gpu;

/// The most page-table pages refused (far more than a driver's tables span).
const MAX_TABLES: usize = 4096;
const FAULT_PERMISSION: u32 = 0xF << 4;
const FAULT_MAPPING: u32 = 1 << 8;
const FAULT_WRITE: u32 = 1 << 18;

/// VRAM a kernel may not touch: disjoint `[start, end)` VRAM offsets, sorted, each with what it holds.
#[derive(Debug, Default)]
pub struct Protected {
    spans: Vec<(u64, u64, &'static str)>,
}

impl Protected {
    /// The regions `spans` (`[start, end)` VRAM offsets and what each holds), overlapping ones merged.
    pub fn new(mut spans: Vec<(u64, u64, &'static str)>) -> Protected {
        spans.sort_unstable_by_key(|s| s.0);
        let mut merged: Vec<(u64, u64, &'static str)> = Vec::with_capacity(spans.len());
        for s in spans.into_iter().filter(|s| s.0 < s.1) {
            match merged.last_mut() {
                Some(m) if s.0 <= m.1 => m.1 = m.1.max(s.1),
                _ => merged.push(s),
            }
        }
        Protected { spans: merged }
    }

    /// What `[start, end)` (VRAM offsets) overlaps, if it overlaps a protected region.
    pub fn hit(&self, start: u64, end: u64) -> Option<&'static str> {
        let i = self.spans.partition_point(|s| s.0 < end);
        i.checked_sub(1).map(|i| self.spans[i]).filter(|s| s.1 > start).map(|s| s.2)
    }
}

/// A kernel access the memory refused: the GPU address, its length, a store or a load, and the protected
/// region it reached (`None`: memory the page table does not map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stray {
    pub addr: u64,
    pub len: usize,
    pub write: bool,
    pub region: Option<&'static str>,
}

impl std::fmt::Display for Stray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.write { "store" } else { "load" };
        match self.region {
            Some(r) => {
                write!(f, "a {}-byte {what} at {:#x} reaches {r}, which no kernel may touch", self.len, self.addr)
            }
            None => write!(
                f,
                "a {}-byte {what} at {:#x} reaches memory the page table does not map (kernels reach nothing else)",
                self.len, self.addr
            ),
        }
    }
}

/// The VRAM pieces `addr..addr + len` translates to through `view` (what translates; the rest is skipped).
fn vram_pieces(view: &HubView, addr: u64, len: u64, vram: &[u8], what: &'static str) -> Vec<(u64, u64, &'static str)> {
    let mut out = Vec::new();
    let (mut a, end) = (addr, addr.saturating_add(len));
    while a < end {
        let Ok((target, room)) = view.translate(a, vram) else { break };
        let n = room.min(end - a).max(1);
        if let Target::Vram(off) = target {
            out.push((off as u64, off as u64 + n, what));
        }
        a += n;
    }
    out
}

impl Gpu {
    /// The regions of the module docs, as the GPU is programmed now.
    pub(super) fn protected(&self, fabric: &mut dyn Fabric) -> Protected {
        let vram = fabric.vram();
        let size = vram.len() as u64;
        let mut spans = vec![(size.saturating_sub(discovery::FROM_END), size, "the IP discovery table")];
        let (gc, mm) = (self.hub_view(Hub::Gc), self.hub_view(Hub::Mm));
        for c in [gc.context, mm.context].into_iter().flatten() {
            spans.extend(table_pages(&c, vram, MAX_TABLES).into_iter().map(|t| (t, t + 4096, "a page table")));
        }
        for &(base, bytes, rptr) in &self.rings {
            spans.extend(vram_pieces(&gc, base, bytes, vram, "a queue's ring"));
            if rptr != 0 {
                spans.extend(vram_pieces(&gc, rptr, 8, vram, "a queue's read-pointer write-back"));
            }
        }
        if let Some((addr, bytes)) = self.psp.ring {
            spans.extend(vram_pieces(&mm, addr, u64::from(bytes), vram, "the PSP's ring"));
        }
        if let Some((addr, bytes)) = self.psp.tmr {
            spans.extend(vram_pieces(&mm, addr, u64::from(bytes), vram, "the PSP's TMR (firmware)"));
        }
        Protected::new(spans)
    }

    /// The VRAM ranges a dispatch's kernels reach now: what context 0's page table maps, and what the TLB still
    /// holds from earlier dispatches at VAs the table no longer maps (see the module docs).
    pub(super) fn kernel_translations(&mut self, vram: &[u8]) -> Vec<(u64, u64, u64)> {
        let mut ranges = self.hub_view(Hub::Gc).context_ranges(vram);
        let overlaps =
            |r: &(u64, u64, u64), rs: &[(u64, u64, u64)]| rs.iter().any(|c| r.0 < c.0 + c.1 && c.0 < r.0 + r.1);
        let stale: Vec<_> = self.kernel_tlb.iter().filter(|r| !overlaps(r, &ranges)).copied().collect();
        ranges.extend(stale);
        ranges.sort_unstable();
        self.kernel_tlb.clone_from(&ranges);
        ranges
    }

    /// Latches `stray` as the VM protection fault (see the module docs); the first fault stays until a reset.
    pub(super) fn latch_vm_fault(&mut self, stray: &Stray) {
        if self.get(Reg::GcFaultStatus) != 0 {
            return;
        }
        let kind = if stray.region.is_some() { FAULT_PERMISSION } else { FAULT_MAPPING };
        self.set(Reg::GcFaultStatus, kind | if stray.write { FAULT_WRITE } else { 0 });
        let page = stray.addr >> 12;
        self.set(Reg::GcFaultAddrLo, page as u32);
        self.set(Reg::GcFaultAddrHi, (page >> 32) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_merge_and_overlaps_are_found() {
        let p = Protected::new(vec![(0x3000, 0x4000, "b"), (0x1000, 0x2000, "a"), (0x1800, 0x2800, "a2"), (5, 5, "x")]);
        assert_eq!(p.spans, vec![(0x1000, 0x2800, "a"), (0x3000, 0x4000, "b")]);
        assert_eq!(p.hit(0xFFC, 0x1000), None);
        assert_eq!(p.hit(0xFFC, 0x1001), Some("a"));
        assert_eq!(p.hit(0x27FF, 0x2803), Some("a"));
        assert_eq!(p.hit(0x2800, 0x3000), None);
        assert_eq!(p.hit(0x3FFF, 0x4000), Some("b"));
        assert_eq!(p.hit(0, 0x10000), Some("b"));
        assert_eq!(Protected::default().hit(0, u64::MAX), None);
    }
}
