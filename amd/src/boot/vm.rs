//! VMID 0's page tables (tinygrad `memory.py` `MemoryManager.map_range`, `amdev.py` `AMPageTableEntry`; PTE bits
//! from Linux `amdgpu_vm.h`): four levels (PDB2 → PDB1 → PDB0 → PTB, 9 bits each over 4 KB pages, 48-bit VAs
//! counted from the context's start), leaves as large as alignment and size allow.
//!
//! What is mapped: the PSP's msg1 window in the bridge's SRAM (system memory) while the PSP boots, the bridge
//! windows the copies use, boot memory, and each live allocation of general memory ([`super::vram`]), all VRAM
//! at one window's VA plus its physical address (tinygrad `identity_va`). Unmapping writes invalid leaves.

use super::hw::Hw;
use super::BootError;
use crate::firmware::Card;

/// The first VA of the context (tinygrad `AMMemoryManager.va_allocator` base); page-table indices count from it.
pub const VA_BASE: u64 = 0x2000_0000_0000;
/// The context's last VA (tinygrad `AM_GMC.vm_end`).
pub const VA_END: u64 = 0x7fff_ffff_ffff;
const SHIFTS: [u32; 4] = [39, 30, 21, 12];
const PTB: usize = 3;

const PTE_VALID: u64 = 1;
const PTE_SYSTEM: u64 = 1 << 1;
const PTE_EXECUTABLE: u64 = 1 << 4;
const PTE_READABLE: u64 = 1 << 5;
const PTE_WRITEABLE: u64 = 1 << 6;
/// `MTYPE_UC` (soc21/soc24 `enum MTYPE`).
const MTYPE_UC: u64 = 3;
const ADDR_MASK: u64 = 0x0000_ffff_ffff_f000;

/// What a mapping points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// VRAM at this physical address.
    Vram(u64),
    /// System memory at this PCIe bus address (the bridge's SRAM).
    System(u64),
}

/// A page-table entry's bits for `card` (tinygrad `AM_GMC.get_pte_flags`).
pub fn pte_flags(card: Card, level: usize, table: bool, frag: u32, uncached: bool, system: bool) -> u64 {
    let mut f = PTE_VALID | if system { PTE_SYSTEM } else { 0 } | (u64::from(frag & 0x1f) << 7);
    if !table {
        f |= PTE_WRITEABLE | PTE_READABLE | PTE_EXECUTABLE;
    }
    let mtype = if uncached { MTYPE_UC } else { 0 };
    match card {
        // AMDGPU_PTE_MTYPE_NV10 (bits 48..50), AMDGPU_PDE_PTE (bit 54) on a leaf above the PTB.
        Card::Gfx1100 => f |= (mtype << 48) | if !table && level != PTB { 1 << 54 } else { 0 },
        // AMDGPU_PTE_MTYPE_GFX12 (bits 54..55); bit 63 is AMDGPU_PDE_PTE_GFX12 above the PTB and AMDGPU_PTE_IS_PTE in it.
        Card::Gfx1201 => f |= (mtype << 54) | if table { 0 } else { 1 << 63 },
    }
    f
}

/// tinygrad `MemoryManager._frag_size`: the TLB fragment (0 = 4 KB) of a run at context offset `va` of `size` bytes.
fn frag(va: u64, size: u64) -> u32 {
    let va_div = if va > 0 { va & va.wrapping_neg() } else { 1 << 63 };
    let size_div = size & size.wrapping_neg();
    (64 - va_div.min(size_div).leading_zeros()) - 1 - 12
}

/// VMID 0's page tables: the root in boot memory, the tables below it where the caller's allocator says.
#[derive(Clone, Debug)]
pub struct Vm {
    pub root: u64,
    card: Card,
    /// (level, VA offset >> the level above's shift) → the table's VRAM address.
    tables: std::collections::HashMap<(usize, u64), u64>,
    /// Tables a leaf replaced, reused before new ones are allocated.
    spare: Vec<u64>,
    next_va: u64,
}

impl Vm {
    /// A VM whose root table (already zeroed) is at VRAM `root`.
    pub fn new(card: Card, root: u64) -> Vm {
        Vm { root, card, tables: Default::default(), spare: Vec::new(), next_va: VA_BASE }
    }

    /// A free VA range of `size` bytes aligned to `align` (a power of two).
    pub fn alloc_va(&mut self, size: u64, align: u64) -> u64 {
        let at = self.next_va.div_ceil(align) * align;
        self.next_va = at + size;
        at
    }

    /// Maps `size` bytes at `va` to `target`; new tables come from `alloc_table` (4 KB each, zeroed here).
    pub fn map(
        &mut self,
        hw: &mut Hw,
        va: u64,
        size: u64,
        target: Target,
        uncached: bool,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
    ) -> Result<(), BootError> {
        let card = self.card;
        self.write_leaves(hw, va, size, target, Some(alloc_table), &mut |level, rel, run, addr| {
            let system = matches!(target, Target::System(_));
            pte_flags(card, level, false, frag(rel, run), uncached, system) | (addr & ADDR_MASK)
        })
    }

    /// Takes back a [`map`](Self::map) of the same `va`, `size` and `target`: its leaves become invalid entries
    /// (the tables stay for the next mapping). The caller flushes the TLB.
    pub fn unmap(&mut self, hw: &mut Hw, va: u64, size: u64, target: Target) -> Result<(), BootError> {
        self.write_leaves(hw, va, size, target, None, &mut |_, _, _, _| 0)
    }

    /// Writes the leaf entries that map `va..va + size` to `target`, each `entry(level, VA offset, bytes of
    /// the run it is in, address)`, choosing per run the largest page (1 GB, 2 MB, 4 KB) both addresses are
    /// aligned to and the rest still fills. A leaf written over a table's entry retires that table and those
    /// below it (they are reused, zeroed, for later tables). Without `alloc_table` a missing table is an error.
    fn write_leaves(
        &mut self,
        hw: &mut Hw,
        va: u64,
        size: u64,
        target: Target,
        alloc_table: Option<&mut dyn FnMut() -> Result<u64, BootError>>,
        entry: &mut dyn FnMut(usize, u64, u64, u64) -> u64,
    ) -> Result<(), BootError> {
        let step = hw.step;
        let mut never_mapped = move || -> Result<u64, BootError> {
            Err(BootError::Invalid { step, msg: format!("VA {va:#x} was never mapped") })
        };
        let create = alloc_table.is_some();
        let alloc_table = alloc_table.unwrap_or(&mut never_mapped);
        let mut addr = match target {
            Target::Vram(a) | Target::System(a) => a,
        };
        if size == 0 || va < VA_BASE || va + size - 1 > VA_END || (va | size | addr) & 0xfff != 0 {
            return Err(BootError::Invalid {
                step: hw.step,
                msg: format!(
                    "cannot map {size:#x} bytes at VA {va:#x} to {addr:#x}: outside the context or not 4 KB aligned"
                ),
            });
        }
        let (mut rel, mut left) = (va - VA_BASE, size);
        while left > 0 {
            let level = (1..=PTB).find(|&l| {
                let page = 1u64 << SHIFTS[l];
                rel % page == 0 && addr % page == 0 && left >= page
            });
            let level = level.expect("4 KB pages always fit");
            let page = 1u64 << SHIFTS[level];
            let table = self.table(hw, rel, level, create, alloc_table)?;
            let index = (rel >> SHIFTS[level]) & 511;
            let count = (left / page).min(512 - index);
            let run = count * page;
            if level < PTB {
                self.retire_below(level, rel, run);
            }
            let mut bytes = Vec::with_capacity(count as usize * 8);
            for i in 0..count {
                bytes.extend_from_slice(&entry(level, rel, run, addr + i * page).to_le_bytes());
            }
            hw.write_vram(table + index * 8, &bytes)?;
            rel += run;
            addr += run;
            left -= run;
        }
        Ok(())
    }

    /// Forgets the tables under leaves at `level` that cover VA offsets `rel..rel + run`.
    fn retire_below(&mut self, level: usize, rel: u64, run: u64) {
        let spare = &mut self.spare;
        self.tables.retain(|&(l, key), &mut t| {
            let start = key << SHIFTS[l - 1];
            let retire = l > level && start >= rel && start < rel + run;
            if retire {
                spare.push(t);
            }
            !retire
        });
    }

    /// The table at `level` that holds `rel`'s entry, creating the tables above it where `create` (from spare
    /// tables, else `alloc_table`); otherwise a missing table is `alloc_table`'s error.
    fn table(
        &mut self,
        hw: &mut Hw,
        rel: u64,
        level: usize,
        create: bool,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
    ) -> Result<u64, BootError> {
        let mut table = self.root;
        for l in 1..=level {
            let key = (l, rel >> SHIFTS[l - 1]);
            table = match self.tables.get(&key) {
                Some(t) => *t,
                None => {
                    let child = match if create { self.spare.pop() } else { None } {
                        Some(t) => t,
                        None => alloc_table()?,
                    };
                    hw.write_vram(child, &[0u8; 4096])?;
                    let pde = pte_flags(self.card, l - 1, true, 0, false, false) | (child & ADDR_MASK);
                    hw.write_vram(table + ((rel >> SHIFTS[l - 1]) & 511) * 8, &pde.to_le_bytes())?;
                    self.tables.insert(key, child);
                    child
                }
            };
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_bus::ScriptedBus;
    use super::*;

    #[test]
    fn pte_bits_match_tinygrad() {
        // gfx11 uncached system 4 KB page: VALID|SYSTEM|RWX|MTYPE_UC<<48.
        assert_eq!(pte_flags(Card::Gfx1100, 3, false, 0, true, true), 0x3 | 0x70 | (3 << 48));
        // gfx11 2 MB leaf in PDB0: PDE_PTE.
        assert_eq!(pte_flags(Card::Gfx1100, 2, false, 9, false, false), 1 | 0x70 | (9 << 7) | (1 << 54));
        // A directory entry is just VALID on both.
        assert_eq!(pte_flags(Card::Gfx1201, 0, true, 0, false, false), 1);
        assert_eq!(pte_flags(Card::Gfx1201, 3, false, 0, true, false), 1 | 0x70 | (3 << 54) | (1 << 63));
        assert_eq!(frag(0, 0x80000), 7);
        assert_eq!(frag(0x1000, 0x80000), 0);
    }

    /// The simulator's page walker (`pilot-usb-sim`, independent of this module) translating `va` in `bus`'s VRAM.
    fn walk(bus: &ScriptedBus, root: u64, va: u64) -> Result<u64, String> {
        use pilot_usb_sim::gpu::mem::{Context, HubView, Target as SimTarget};
        let context = Context { start: VA_BASE, end: VA_END, root, levels: 4, gfx12: false };
        let vram = bus.snapshot(8 << 20);
        match (HubView { context: Some(context), ..HubView::default() }).translate(va, &vram)? {
            (SimTarget::Vram(p), _) => Ok(p as u64),
            (t, _) => Err(format!("{t:?}")),
        }
    }

    #[test]
    fn leaves_over_tables_and_tables_under_old_leaves_translate() {
        let mut bus = ScriptedBus::new(Card::Gfx1100);
        let disc = bus.disc.clone();
        let (root, mut next_table) = (0x1000, 0x10_0000);
        let mut tables = || -> Result<u64, BootError> {
            next_table += 0x1000;
            Ok(next_table)
        };
        let mut vm = Vm::new(Card::Gfx1100, root);
        let window = vm.alloc_va(8 << 20, 8 << 20);
        let big = (window + (2 << 20), 4 << 20, 2 << 20);
        let small = (window + (2 << 20) + 0x3000, 0x2000, (2 << 20) + 0x3000);
        // 4 KB pages, gone; 2 MB leaves over their table, gone; 4 KB pages under the old leaf again; the leaf.
        for (va, size, p) in [small, big, small, big] {
            let mut hw = Hw { bus: &mut bus, disc: &disc, step: "test" };
            vm.map(&mut hw, va, size, Target::Vram(p), true, &mut tables).unwrap();
            for off in [0, 0x1000, size - 4] {
                assert_eq!(walk(&bus, root, va + off), Ok(p + off), "{size:#x} at {va:#x}, +{off:#x}");
            }
            assert!(walk(&bus, root, va + size).is_err(), "{size:#x} at {va:#x}: the page after it");
            let mut hw = Hw { bus: &mut bus, disc: &disc, step: "test" };
            vm.unmap(&mut hw, va, size, Target::Vram(p)).unwrap();
            assert!(walk(&bus, root, va).is_err(), "{size:#x} at {va:#x} unmapped");
        }
        let mut hw = Hw { bus: &mut bus, disc: &disc, step: "test" };
        assert!(vm.unmap(&mut hw, window + (6 << 20), 0x1000, Target::Vram(6 << 20)).is_err(), "never mapped");
    }
}
