//! VRAM as the bring-up lays it out (tinygrad `memory.py` `MemoryManager`, `amdev.py` `init_sw`):
//!
//! ```text
//! 0 .. 32 MB                     boot memory: what only a full boot sets up (page tables, PSP ring, IH rings,
//!                                the SMU driver table, MQDs); allocated in the same order on every boot, so a
//!                                partial boot finds everything where the full boot left it
//! 32 MB .. VRAM - reserved       general memory: queues, buffers, code ([`VramAllocator`])
//! VRAM - reserved .. VRAM        reserved (64 MB): firmware's, with the discovery table at VRAM - 64 KB
//! ```

use super::BootError;

pub const BOOT_SIZE: u64 = 32 << 20;
/// The top of VRAM the driver never allocates (tinygrad `reserved_vram_size` for gfx11/gfx12).
pub const RESERVED_TOP: u64 = 64 << 20;
pub const PAGE: u64 = 0x1000;

/// Where VRAM's regions are. Addresses are VRAM physical addresses (the BAR0 offset on a large BAR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VramLayout {
    pub vram_size: u64,
    /// The frame buffer's MC address (`MMMC_VM_FB_LOCATION_BASE` << 24): physical address `p` is MC `fb_base + p`.
    pub fb_base: u64,
    pub fb_top: u64,
}

impl VramLayout {
    /// The end of general memory.
    pub fn usable_end(&self) -> u64 {
        self.vram_size - RESERVED_TOP
    }

    /// The MC address of VRAM physical address `paddr` (tinygrad `paddr2mc`).
    pub fn mc(&self, paddr: u64) -> u64 {
        self.fb_base + paddr
    }
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// The boot-memory allocator: a bump allocator over the first 32 MB. Deterministic, so every boot places the
/// same allocations at the same addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootAllocator {
    next: u64,
}

impl BootAllocator {
    /// `size` bytes (rounded up to 4 KB) aligned to `align`; `what` names the allocation in errors.
    pub fn alloc(&mut self, size: u64, align: u64, what: &str) -> Result<u64, BootError> {
        let at = round_up(self.next, align.max(PAGE));
        let end = at + round_up(size, PAGE);
        if end > BOOT_SIZE {
            return Err(BootError::OutOfMemory { region: "boot", what: what.to_string(), size });
        }
        self.next = end;
        Ok(at)
    }

    /// Bytes handed out so far.
    pub fn used(&self) -> u64 {
        self.next
    }
}

/// General VRAM for whatever runs after boot (queues, buffers, code): first fit over a sorted free list, with
/// alignment; [`VramAllocator::free`] takes back what [`VramAllocator::alloc`] gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VramAllocator {
    /// Free ranges `(start, end)`, sorted and never adjacent.
    free: Vec<(u64, u64)>,
    /// Live allocations: start → end.
    live: std::collections::BTreeMap<u64, u64>,
}

impl VramAllocator {
    /// Manages `start..end`.
    pub fn new(start: u64, end: u64) -> VramAllocator {
        VramAllocator { free: vec![(start, end)], live: Default::default() }
    }

    /// `size` bytes (rounded up to 4 KB) at an `align`-aligned VRAM address.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64, BootError> {
        let size = round_up(size.max(1), PAGE);
        let align = align.max(PAGE);
        for i in 0..self.free.len() {
            let (start, end) = self.free[i];
            let at = round_up(start, align);
            if at + size > end {
                continue;
            }
            self.free.remove(i);
            if at + size < end {
                self.free.insert(i, (at + size, end));
            }
            if start < at {
                self.free.insert(i, (start, at));
            }
            self.live.insert(at, at + size);
            return Ok(at);
        }
        Err(BootError::OutOfMemory { region: "general", what: format!("{size:#x}-byte allocation"), size })
    }

    /// Returns an allocation; an address [`alloc`](Self::alloc) did not give is an error.
    pub fn free(&mut self, addr: u64) -> Result<(), BootError> {
        let end = self.live.remove(&addr).ok_or(BootError::Invalid {
            step: "VRAM",
            msg: format!("free of {addr:#x}, which is not an allocation"),
        })?;
        let i = self.free.partition_point(|r| r.0 < addr);
        self.free.insert(i, (addr, end));
        // Merge with the neighbours.
        if i + 1 < self.free.len() && self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 = self.free.remove(i + 1).1;
        }
        if i > 0 && self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 = self.free.remove(i).1;
        }
        Ok(())
    }

    /// Free bytes.
    pub fn available(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_allocations_are_deterministic_and_bounded() {
        let mut a = BootAllocator::default();
        assert_eq!(a.alloc(0x10, PAGE, "x").unwrap(), 0);
        assert_eq!(a.alloc(0x1000, 1 << 20, "tmr").unwrap(), 1 << 20);
        assert_eq!(a.alloc(1, PAGE, "y").unwrap(), (1 << 20) + 0x1000);
        let e = a.alloc(BOOT_SIZE, PAGE, "too big").unwrap_err().to_string();
        assert!(e.contains("boot") && e.contains("too big"), "{e}");
    }

    #[test]
    fn general_allocator_aligns_frees_and_merges() {
        let mut a = VramAllocator::new(BOOT_SIZE, BOOT_SIZE + (16 << 20));
        let x = a.alloc(0x1800, PAGE).unwrap();
        assert_eq!(x, BOOT_SIZE);
        let y = a.alloc(0x1000, 1 << 20).unwrap();
        assert_eq!(y, BOOT_SIZE + (1 << 20));
        let z = a.alloc(0x1000, PAGE).unwrap();
        assert_eq!(z, BOOT_SIZE + 0x2000, "first fit takes the gap before the aligned one");
        assert!(a.free(x + 1).is_err());
        for p in [y, x, z] {
            a.free(p).unwrap();
        }
        assert_eq!(a.free, vec![(BOOT_SIZE, BOOT_SIZE + (16 << 20))]);
        assert!(a.alloc(17 << 20, PAGE).is_err());
        assert_eq!(a.available(), 16 << 20);
    }
}
