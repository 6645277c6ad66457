//! General VRAM as the GPU sees it: every allocation is mapped into VMID 0 while it lives, at the window's VA
//! plus its physical address, and followed by an unmapped guard page; freeing it unmaps it. So a kernel that
//! strays past the end of a buffer, or into VRAM nothing holds (a freed buffer, the page tables, what no
//! allocation reached yet), faults on the card instead of reading or writing someone else's bytes — and the
//! simulator, which gives kernels no system-aperture access, shows it (`pilot-usb-sim`'s `gpu/confine.rs`).
//!
//! Changes invalidate the GC hub's TLB before the GPU next uses memory: [`GpuVram::flush`], which the device
//! calls before every submission and copy (Linux likewise flushes after `amdgpu_vm_update_range`, before the
//! next job), so a model's many allocations at load cost one invalidation, not one each.
//! Allocations of 2 MB or more are 2 MB aligned so their mapping takes 2 MB leaves (one entry per 2 MB written
//! over the bridge instead of 512).

use super::gmc::{self, Hub};
use super::hw::Hw;
use super::memory::{VramAllocator, PAGE};
use super::vm::{Target, Vm};
use super::BootError;
use std::collections::BTreeMap;

const LARGE: u64 = 2 << 20;

/// General VRAM, handed out mapped.
#[derive(Clone, Debug)]
pub struct GpuVram {
    alloc: VramAllocator,
    vm: Vm,
    /// The VA of VRAM physical address 0.
    window: u64,
    /// Live allocations: physical address → mapped bytes.
    mapped: BTreeMap<u64, u64>,
    /// Mappings changed since the last TLB invalidation.
    changed: bool,
}

impl GpuVram {
    /// General memory `alloc` mapped through `vm`, VRAM physical `p` at VA `window + p`.
    pub fn new(alloc: VramAllocator, vm: Vm, window: u64) -> GpuVram {
        GpuVram { alloc, vm, window, mapped: BTreeMap::new(), changed: false }
    }

    /// The VA of VRAM physical address `paddr`.
    pub fn va(&self, paddr: u64) -> u64 {
        self.window + paddr
    }

    /// `size` bytes (at least one page) at an `align`-aligned physical address, mapped at [`va`](Self::va) of
    /// it (usable once [`flush`](Self::flush)ed); returns the physical address.
    pub fn alloc(&mut self, hw: &mut Hw, size: u64, align: u64) -> Result<u64, BootError> {
        let bytes = size.max(1).div_ceil(PAGE) * PAGE;
        let align = if bytes >= LARGE { align.max(LARGE) } else { align };
        let paddr = self.alloc.alloc(bytes + PAGE, align)?;
        let Self { alloc, vm, .. } = self;
        self.changed = true;
        let mapped = vm.map(hw, self.window + paddr, bytes, Target::Vram(paddr), true, &mut || alloc.alloc(PAGE, PAGE));
        if let Err(e) = mapped {
            // Best effort: what was mapped of it stays mapped, but the memory goes back.
            let _ = self.alloc.free(paddr);
            return Err(e);
        }
        self.mapped.insert(paddr, bytes);
        Ok(paddr)
    }

    /// Unmaps and returns an allocation (unreachable once [`flush`](Self::flush)ed); an address
    /// [`alloc`](Self::alloc) did not give is an error.
    pub fn free(&mut self, hw: &mut Hw, paddr: u64) -> Result<(), BootError> {
        let bytes = *self.mapped.get(&paddr).ok_or(BootError::Invalid {
            step: hw.step,
            msg: format!("free of {paddr:#x}, which is not an allocation"),
        })?;
        self.changed = true;
        self.vm.unmap(hw, self.window + paddr, bytes, Target::Vram(paddr))?;
        self.mapped.remove(&paddr);
        self.alloc.free(paddr)
    }

    /// Invalidates the GC hub's TLB if a mapping changed since the last invalidation: before the GPU uses memory.
    pub fn flush(&mut self, hw: &mut Hw) -> Result<(), BootError> {
        if self.changed {
            gmc::flush_tlb(hw, Hub::Gc, true)?;
            self.changed = false;
        }
        Ok(())
    }

    /// Maps `size` bytes of system memory at bus address `bus` (a bridge window) at a new VA; returns the VA.
    pub fn map_system(&mut self, hw: &mut Hw, bus: u64, size: u64) -> Result<u64, BootError> {
        let va = self.vm.alloc_va(size, PAGE);
        let Self { alloc, vm, .. } = self;
        self.changed = true;
        vm.map(hw, va, size, Target::System(bus), true, &mut || alloc.alloc(PAGE, PAGE))?;
        Ok(va)
    }
}
