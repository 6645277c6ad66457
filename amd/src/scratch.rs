//! Scratch memory (a kernel's private segment): one VRAM region the GPU carves into per-wave slots, sized as
//! tinygrad 0.14.0 sizes it for gfx11 and gfx12 (`runtime/ops_amd.py`, `AMDDevice._ensure_has_local_memory`) and
//! handed to every dispatch as tinygrad's `AMDComputeQueue.exec` does:
//!
//! - a work-item's share: the kernel's `private_segment_fixed_size` rounded up to 4 bytes;
//! - a wave's slot, `COMPUTE_TMPRING_SIZE.WAVESIZE` in 256-byte units: 64 work-items' shares (tinygrad's
//!   `lanes_per_wave = 64` and `mem_alignment_size = 256`, for wave32 kernels too);
//! - `COMPUTE_TMPRING_SIZE.WAVES`: slots per shader engine (gfx11 and later count WAVES per SE: tinygrad divides
//!   the slot count by `se_cnt`). Full occupancy is gc_info's `max_scratch_slots_per_cu` x CUs, divided among the
//!   SEs; the driver takes fewer when the region would pass [`budget`], since the SPI launches no more waves with
//!   scratch at once than there are slots (fewer slots slow a kernel down, they never corrupt it);
//! - the region, WAVES x SEs x the slot, at `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI` (address >> 8): LLVM's
//!   "architected flat scratch", where the hardware points each wave's scratch at its slot and the kernel gets no
//!   private-segment user SGPRs (pilot's code-object reader refuses kernels that ask for them).
//!
//! The largest share a kernel may ask for is what WAVESIZE can describe ([`max_per_item`]); more is refused
//! before anything is allocated.

use crate::discovery::GcInfo;
use crate::firmware::Card;

/// Bytes of one `COMPUTE_TMPRING_SIZE.WAVESIZE` unit on gfx11 and gfx12 (tinygrad `mem_alignment_size`).
pub const WAVESIZE_UNIT: u64 = 256;
/// Work-items a slot is sized for (tinygrad `lanes_per_wave`).
pub const SLOT_LANES: u64 = 64;
/// `COMPUTE_TMPRING_SIZE.WAVES`: bits 0-11 on both GC 11 and GC 12.
const WAVES_MAX: u32 = 0xFFF;
const WAVESIZE_SHIFT: u32 = 12;

/// `COMPUTE_TMPRING_SIZE.WAVESIZE`'s largest value: bits 12-26 on GC 11, 12-29 on GC 12 (`gc_11_0_0.regs`,
/// `gc_12_0_0.regs`; tinygrad `union_COMPUTE_TMPRING_SIZE_GFX11/GFX12_bitfields`).
pub fn wavesize_max(card: Card) -> u32 {
    match card {
        Card::Gfx1100 => 0x7FFF,
        Card::Gfx1201 => 0x3_FFFF,
    }
}

/// The most scratch bytes per work-item a kernel may need on `card`: a slot of [`wavesize_max`] units shared by
/// [`SLOT_LANES`] work-items.
pub fn max_per_item(card: Card) -> u32 {
    (u64::from(wavesize_max(card)) * WAVESIZE_UNIT / SLOT_LANES) as u32
}

/// The most VRAM the region may take: an eighth of the general memory `general` bytes.
pub fn budget(general: u64) -> u64 {
    general / 8
}

/// A scratch region's shape: what `COMPUTE_TMPRING_SIZE` says and how big the region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per work-item the region serves (a multiple of 4).
    pub per_item: u32,
    /// COMPUTE_TMPRING_SIZE.WAVESIZE: a slot in 256-byte units.
    pub wavesize: u32,
    /// COMPUTE_TMPRING_SIZE.WAVES: slots per shader engine.
    pub waves: u32,
    /// Shader engines (gc_info `num_se`).
    pub se: u32,
}

impl Layout {
    /// The layout for kernels needing up to `per_item` scratch bytes per work-item, at full occupancy or as many
    /// slots per SE as `budget` bytes hold. Errors (one line) when `per_item` passes [`max_per_item`] or one slot
    /// per SE does not fit the budget.
    pub fn new(card: Card, gc: &GcInfo, per_item: u32, budget: u64) -> Result<Layout, String> {
        let max = max_per_item(card);
        if per_item == 0 || per_item > max {
            return Err(format!("{per_item} scratch bytes per work-item: {} takes 1 to {max}", card.arch()));
        }
        let per_item = per_item.next_multiple_of(4);
        let wavesize = (SLOT_LANES * u64::from(per_item)).div_ceil(WAVESIZE_UNIT) as u32;
        let se = gc.num_se.max(1);
        let full = (gc.cu_count() * gc.max_scratch_slots_per_cu) / se;
        let slot = u64::from(wavesize) * WAVESIZE_UNIT;
        let fit = budget / (slot * u64::from(se));
        let waves = (u64::from(full.min(WAVES_MAX))).min(fit) as u32;
        if waves == 0 {
            return Err(format!(
                "{per_item} scratch bytes per work-item need {} bytes for one wave per shader engine, over the {budget}-byte scratch budget",
                slot * u64::from(se)
            ));
        }
        Ok(Layout { per_item, wavesize, waves, se })
    }

    /// The region's size in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.waves) * u64::from(self.se) * u64::from(self.wavesize) * WAVESIZE_UNIT
    }

    /// The `COMPUTE_TMPRING_SIZE` value.
    pub fn tmpring_size(&self) -> u32 {
        self.waves | self.wavesize << WAVESIZE_SHIFT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn navi31() -> GcInfo {
        GcInfo { num_se: 6, cu_per_sa: 8, sa_per_se: 2, max_scratch_slots_per_cu: 32, ..GcInfo::default() }
    }

    #[test]
    fn tinygrads_sizes_at_full_occupancy() {
        // tinygrad's default 128 bytes: WAVESIZE 32 (8 KB slots), 96 CUs x 32 slots / 6 SEs = 512 per SE.
        let l = Layout::new(Card::Gfx1100, &navi31(), 128, u64::MAX).unwrap();
        assert_eq!((l.wavesize, l.waves, l.bytes()), (32, 512, 512 * 6 * 8192));
        assert_eq!(l.tmpring_size(), 512 | 32 << 12);
        // 1028 bytes (a 256-float private array and a spill) round to 257 units.
        let l = Layout::new(Card::Gfx1100, &navi31(), 1027, u64::MAX).unwrap();
        assert_eq!((l.per_item, l.wavesize), (1028, 257));
    }

    #[test]
    fn the_budget_lowers_waves_and_the_field_width_bounds_a_work_item() {
        let l = Layout::new(Card::Gfx1100, &navi31(), 1024, 6 * 65536 * 10 + 5).unwrap();
        assert_eq!((l.waves, l.bytes()), (10, 6 * 65536 * 10));
        let e = Layout::new(Card::Gfx1100, &navi31(), 1024, 65536).unwrap_err();
        assert!(e.contains("need 393216 bytes for one wave per shader engine"), "{e}");
        assert_eq!(max_per_item(Card::Gfx1100), 131_068);
        assert_eq!(max_per_item(Card::Gfx1201), 1_048_572);
        assert!(Layout::new(Card::Gfx1100, &navi31(), 131_068, u64::MAX).is_ok());
        let e = Layout::new(Card::Gfx1100, &navi31(), 131_069, u64::MAX).unwrap_err();
        assert_eq!(e, "131069 scratch bytes per work-item: gfx1100 takes 1 to 131068");
        assert!(Layout::new(Card::Gfx1201, &navi31(), 131_069, u64::MAX).is_ok());
    }
}
