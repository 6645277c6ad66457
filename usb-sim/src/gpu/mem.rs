//! What the GPU's engines reach, and how their addresses translate through a hub (the PSP through MMHUB; CP,
//! SDMA and shaders through the GC hub), for VMID 0 as the driver programs it:
//! - the system aperture (`*MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR`, 256 KB units) over the frame buffer
//!   (`*MC_VM_FB_LOCATION_BASE`, which the GPU reports): VRAM at `addr - fb_base` (tinygrad `paddr2mc`);
//! - the AGP aperture (`*MC_VM_AGP_BOT/TOP`, 16 MB units; disabled at power-on, BOT > TOP): system memory at
//!   `addr - bot + AGP_BASE`;
//! - context 0's page table (`*VM_CONTEXT0_CNTL.enable_context`, `PAGE_TABLE_START/END_ADDR` in 4 KB pages,
//!   `PAGE_TABLE_BASE_ADDR` & ~1 = the root's VRAM address, `page_table_depth` + 1 levels of 512 8-byte
//!   entries at VA shifts ..39/30/21/12, indices counted from START; Linux `amdgpu_vm.h`): an entry needs
//!   VALID (bit 0); it is a leaf at the last level, or above it with PDE_PTE (bit 54 on gfx11, bit 63 on
//!   gfx12); a leaf's address is bits 12..47 plus the offset in its page, system memory when SYSTEM (bit 1)
//!   is set, VRAM otherwise. Walked on every access (no TLB: a changed entry takes effect at once).
//!
//! A read of VRAM that HDP's write buffer still holds a host write for is refused, a poll's read sees VRAM as it is
//! ([`super::hdp`]).
//!
//! System memory is the bridge's windows (SRAM at bus 0x200000, XDATA windows at 0x800000/0x820000/0x822000).
//! Anything else faults naming the address. A hub the driver has not programmed translates nothing.

use std::time::Duration;

/// The memories behind the GPU: VRAM and the bridge's windows on the PCIe bus.
pub trait Fabric {
    fn vram(&mut self) -> &mut [u8];
    /// A device-side read of bridge memory at bus address `addr`; `None` when nothing decodes it.
    fn bridge_read(&mut self, addr: u64, len: usize) -> Option<Vec<u8>>;
    /// A device-side write landing at time `at`; false when nothing decodes it.
    fn bridge_write(&mut self, addr: u64, data: &[u8], at: Duration) -> bool;
    /// An HDP flush: the host's BAR0 writes held in HDP's write buffer land in VRAM ([`super::hdp`]).
    fn hdp_flush(&mut self);
    /// The first VRAM offset in `off..off+len` that HDP's write buffer still holds a host write for.
    fn hdp_held(&self, off: usize, len: usize) -> Option<usize>;
}

/// Where the frame buffer sits in the GPU's address space (the value `MC_VM_FB_LOCATION_BASE` reports, << 24).
pub const FB_BASE: u64 = 0x80_0000_0000;
/// The VA shifts of the four page-table levels (PDB2, PDB1, PDB0, PTB).
const SHIFTS: [u32; 4] = [39, 30, 21, 12];
const PTE_VALID: u64 = 1;
const PTE_SYSTEM: u64 = 1 << 1;
const PDE_PTE_GFX11: u64 = 1 << 54;
const PDE_PTE_GFX12: u64 = 1 << 63;
const PTE_ADDR: u64 = 0x0000_FFFF_FFFF_F000;

/// Which hub an engine's accesses go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hub {
    Mm,
    Gc,
}

/// A hub's programmed system aperture, in bytes (inclusive range).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aperture {
    pub low: u64,
    pub high: u64,
}

impl Aperture {
    /// From the LOW/HIGH register values (256 KB units).
    pub fn from_regs(low: u32, high: u32) -> Aperture {
        Aperture { low: u64::from(low) << 18, high: (u64::from(high) << 18) | 0x3_FFFF }
    }
}

/// Context 0's page table as programmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// First and last VA (inclusive).
    pub start: u64,
    pub end: u64,
    /// VRAM address of the root table.
    pub root: u64,
    /// 1 to 4.
    pub levels: usize,
    /// gfx12's PDE_PTE bit.
    pub gfx12: bool,
}

/// How one hub translates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HubView {
    pub aperture: Aperture,
    /// (first, last, system base) of the AGP aperture, when enabled.
    pub agp: Option<(u64, u64, u64)>,
    pub context: Option<Context>,
}

/// A resolved address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Vram(usize),
    Bridge(u64),
}

/// The bridge windows the GPU may reach as system memory: (bus address, size).
pub const BRIDGE_WINDOWS: [(u64, u64); 4] =
    [(0x20_0000, 0x8_0000), (0x80_0000, 0x200), (0x82_0000, 0x1000), (0x82_2000, 0x1000)];

fn read64(vram: &[u8], at: u64) -> Option<u64> {
    let a = at as usize;
    Some(u64::from_le_bytes(vram.get(a..a + 8)?.try_into().ok()?))
}

impl HubView {
    /// Translates `addr`: the target and how many bytes from it translate contiguously (to the end of the page
    /// or aperture).
    pub fn translate(&self, addr: u64, vram: &[u8]) -> Result<(Target, u64), String> {
        let vram_end = FB_BASE + vram.len() as u64;
        let ap = self.aperture;
        if addr >= FB_BASE && addr < vram_end && addr >= ap.low && addr <= ap.high {
            return Ok((Target::Vram((addr - FB_BASE) as usize), vram_end.min(ap.high + 1) - addr));
        }
        if let Some((bot, top, base)) = self.agp.filter(|&(bot, top, _)| addr >= bot && addr <= top) {
            return system(addr - bot + base, top + 1 - addr);
        }
        if let Some(c) = self.context.filter(|c| addr >= c.start && addr <= c.end) {
            return walk(&c, addr, vram);
        }
        if addr >= FB_BASE && addr < vram_end {
            return Err(format!(
                "address {addr:#x} is VRAM outside the hub's system aperture {:#x}..={:#x} (hub not programmed?)",
                ap.low, ap.high
            ));
        }
        Err(format!("address {addr:#x} is in no aperture and outside context 0's page table"))
    }

    /// Every VRAM range this hub maps, as (GPU address, bytes, VRAM offset), merged where contiguous.
    pub fn vram_ranges(&self, vram: &[u8]) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let vram_end = FB_BASE + vram.len() as u64;
        let (lo, hi) = (self.aperture.low.max(FB_BASE), (self.aperture.high + 1).min(vram_end));
        if lo < hi {
            out.push((lo, hi - lo, lo - FB_BASE));
        }
        out.extend(self.context_ranges(vram));
        merged(out)
    }

    /// The VRAM ranges context 0's page table maps (not the system aperture), as [`vram_ranges`](Self::vram_ranges).
    pub fn context_ranges(&self, vram: &[u8]) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        if let Some(c) = self.context {
            leaves(&c, c.root, 0, c.start, vram, &mut out);
        }
        merged(out)
    }
}

/// `ranges` sorted, contiguous neighbours merged.
fn merged(mut ranges: Vec<(u64, u64, u64)>) -> Vec<(u64, u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64, u64)> = Vec::with_capacity(ranges.len());
    for (va, len, pa) in ranges {
        match merged.last_mut() {
            Some(m) if m.0 + m.1 == va && m.2 + m.1 == pa => m.1 += len,
            _ => merged.push((va, len, pa)),
        }
    }
    merged
}

fn system(bus: u64, room: u64) -> Result<(Target, u64), String> {
    match BRIDGE_WINDOWS.iter().find(|&&(b, s)| bus >= b && bus < b + s) {
        Some(&(b, s)) => Ok((Target::Bridge(bus), room.min(b + s - bus))),
        None => Err(format!("system address {bus:#x} is not one of the bridge's windows")),
    }
}

fn is_leaf(c: &Context, level: usize, entry: u64) -> bool {
    level + 1 == c.levels || entry & if c.gfx12 { PDE_PTE_GFX12 } else { PDE_PTE_GFX11 } != 0
}

fn shift(c: &Context, level: usize) -> u32 {
    SHIFTS[SHIFTS.len() - c.levels + level]
}

fn walk(c: &Context, addr: u64, vram: &[u8]) -> Result<(Target, u64), String> {
    let rel = addr - c.start;
    let mut table = c.root;
    for level in 0..c.levels {
        let sh = shift(c, level);
        let at = table + 8 * ((rel >> sh) & 511);
        let entry = read64(vram, at)
            .ok_or_else(|| format!("VA {addr:#x}: level-{level} table at {table:#x} is outside VRAM"))?;
        if entry & PTE_VALID == 0 {
            return Err(format!("VA {addr:#x}: the level-{level} entry at VRAM {at:#x} is not valid"));
        }
        if is_leaf(c, level, entry) {
            let page = 1u64 << sh;
            let target = (entry & PTE_ADDR & !(page - 1)) + (rel & (page - 1));
            let room = page - (rel & (page - 1));
            if entry & PTE_SYSTEM != 0 {
                return system(target, room);
            }
            if target >= vram.len() as u64 {
                return Err(format!("VA {addr:#x} maps to {target:#x}, past the end of VRAM"));
            }
            return Ok((Target::Vram(target as usize), room.min(vram.len() as u64 - target)));
        }
        table = entry & PTE_ADDR;
    }
    unreachable!("the last level is a leaf")
}

/// The VRAM address of every table of `c` (the root and each table a valid, non-leaf entry points to), each
/// 512 8-byte entries; at most `max` of them, the levels nearest the root first.
pub fn table_pages(c: &Context, vram: &[u8], max: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut level_tables = vec![c.root];
    for level in 0..c.levels {
        let mut next = Vec::new();
        for &table in &level_tables {
            if out.len() == max {
                return out;
            }
            out.push(table);
            for i in 0..512u64 {
                match read64(vram, table + 8 * i) {
                    Some(e) if e & PTE_VALID != 0 && !is_leaf(c, level, e) => next.push(e & PTE_ADDR),
                    _ => {}
                }
            }
        }
        level_tables = next;
    }
    out
}

/// Collects the VRAM leaves under `table` (at `level`, covering VAs from `va`).
fn leaves(c: &Context, table: u64, level: usize, va: u64, vram: &[u8], out: &mut Vec<(u64, u64, u64)>) {
    let sh = shift(c, level);
    for i in 0..512u64 {
        let Some(entry) = read64(vram, table + 8 * i) else { return };
        let at = va + (i << sh);
        if entry & PTE_VALID == 0 || at > c.end {
            continue;
        }
        if is_leaf(c, level, entry) {
            let page = 1u64 << sh;
            let pa = entry & PTE_ADDR & !(page - 1);
            if entry & PTE_SYSTEM == 0 && pa + page <= vram.len() as u64 {
                out.push((at, page, pa));
            }
        } else {
            leaves(c, entry & PTE_ADDR, level + 1, at, vram, out);
        }
    }
}

/// One engine's view: its hub and the fabric.
pub struct Mem<'a> {
    pub hub: HubView,
    pub fabric: &'a mut dyn Fabric,
    /// When the engine's writes land (for the bridge's host-visible windows).
    pub at: Duration,
}

impl Mem<'_> {
    /// The pieces `addr..addr+len` translates to.
    fn pieces(&mut self, addr: u64, len: usize) -> Result<Vec<(Target, usize)>, String> {
        addr.checked_add(len as u64).ok_or_else(|| format!("address {addr:#x}+{len} overflows"))?;
        let mut out = Vec::new();
        let (mut a, mut left) = (addr, len as u64);
        while left > 0 {
            let (t, room) =
                self.hub.translate(a, self.fabric.vram()).map_err(|e| format!("{e} (access {addr:#x}+{len})"))?;
            let n = room.min(left);
            out.push((t, n as usize));
            a += n;
            left -= n;
        }
        Ok(out)
    }

    /// Where `addr` goes, after checking that all of `addr..addr+len` translates.
    pub fn resolve(&mut self, addr: u64, len: usize) -> Result<Target, String> {
        let p = self.pieces(addr, len.max(1))?;
        Ok(p[0].0)
    }

    /// Reads `addr..addr+len`; refuses VRAM that HDP's write buffer holds a host write for.
    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        self.read_checked(addr, len, true)
    }

    /// A poll's read (WAIT_REG_MEM, POLL_REGMEM on memory): VRAM as it is, so the poll waits until an HDP flush lands
    /// the host's write.
    pub fn poll32(&mut self, addr: u64) -> Result<u32, String> {
        let b = self.read_checked(addr, 4, false)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn read_checked(&mut self, addr: u64, len: usize, hdp: bool) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(len);
        for (t, n) in self.pieces(addr, len)? {
            match t {
                Target::Vram(off) => {
                    if let Some(at) = self.fabric.hdp_held(off, n).filter(|_| hdp) {
                        return Err(format!(
                            "VRAM {at:#x} (access {addr:#x}+{len}) was written by the host through BAR0 and is still \
                             in HDP's write buffer: no HDP flush between that write and this read"
                        ));
                    }
                    out.extend_from_slice(&self.fabric.vram()[off..off + n])
                }
                Target::Bridge(bus) => out.extend(
                    self.fabric.bridge_read(bus, n).ok_or_else(|| format!("bridge read at {bus:#x}+{n} failed"))?,
                ),
            }
        }
        Ok(out)
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), String> {
        let mut at = 0;
        for (t, n) in self.pieces(addr, data.len())? {
            let d = &data[at..at + n];
            match t {
                Target::Vram(off) => self.fabric.vram()[off..off + n].copy_from_slice(d),
                Target::Bridge(bus) => {
                    if !self.fabric.bridge_write(bus, d, self.at) {
                        return Err(format!("bridge write at {bus:#x}+{n} failed"));
                    }
                }
            }
            at += n;
        }
        Ok(())
    }

    pub fn read32(&mut self, addr: u64) -> Result<u32, String> {
        let b = self.read(addr, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn read64(&mut self, addr: u64) -> Result<u64, String> {
        let b = self.read(addr, 8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub fn write32(&mut self, addr: u64, v: u32) -> Result<(), String> {
        self.write(addr, &v.to_le_bytes())
    }

    pub fn write64(&mut self, addr: u64, v: u64) -> Result<(), String> {
        self.write(addr, &v.to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4 MB VRAM with a 4-level table at 0: the root at 0, PDB1 at 0x1000, PDB0 at 0x2000, a PTB at 0x3000.
    fn vram_with_tables(gfx12: bool) -> Vec<u8> {
        let mut v = vec![0u8; 4 << 20];
        let mut put = |at: u64, e: u64| v[at as usize..at as usize + 8].copy_from_slice(&e.to_le_bytes());
        let leaf_above_ptb = if gfx12 { PDE_PTE_GFX12 } else { PDE_PTE_GFX11 };
        put(0, 0x1000 | PTE_VALID);
        put(0x1000, 0x2000 | PTE_VALID);
        put(0x2000, (2 << 20) | PTE_VALID | leaf_above_ptb); // VA +0: a 2 MB page at VRAM 2 MB
        put(0x2008, 0x3000 | PTE_VALID); // VA +2 MB: through the PTB
        put(0x3000, 0x20_0000 | PTE_VALID | PTE_SYSTEM); // 4 KB of bridge SRAM
        put(0x3008, 0x5000 | PTE_VALID); // 4 KB of VRAM at 0x5000
        v
    }

    fn hub(gfx12: bool) -> HubView {
        let context = Context { start: 1 << 44, end: (1 << 44) + (1 << 30) - 1, root: 0, levels: 4, gfx12 };
        HubView { context: Some(context), ..HubView::default() }
    }

    #[test]
    fn the_walk_finds_huge_pages_system_pages_and_invalid_entries() {
        for gfx12 in [false, true] {
            let v = vram_with_tables(gfx12);
            let h = hub(gfx12);
            let va = 1u64 << 44;
            assert_eq!(h.translate(va + 0x10, &v), Ok((Target::Vram((2 << 20) + 0x10), (2 << 20) - 0x10)));
            assert_eq!(h.translate(va + (2 << 20) + 4, &v), Ok((Target::Bridge(0x20_0004), 0xFFC)));
            assert_eq!(h.translate(va + (2 << 20) + 0x1008, &v), Ok((Target::Vram(0x5008), 0xFF8)));
            let e = h.translate(va + (2 << 20) + 0x2000, &v).unwrap_err();
            assert!(e.contains("is not valid"), "{e}");
            assert!(h.translate(va - 1, &v).is_err(), "below the context");
            assert_eq!(h.vram_ranges(&v), vec![(va, 2 << 20, 2 << 20), (va + (2 << 20) + 0x1000, 0x1000, 0x5000)]);
        }
        // Without gfx11's PDE_PTE bit the 2 MB entry is a table pointer: its "table" at 2 MB is empty.
        let mut v = vram_with_tables(false);
        v[0x2000..0x2008].copy_from_slice(&((2u64 << 20) | PTE_VALID).to_le_bytes());
        assert!(hub(false).translate(1 << 44, &v).unwrap_err().contains("level-3"));
    }

    #[test]
    fn agp_maps_bus_addresses_and_only_bridge_windows() {
        let v = vec![0u8; 1 << 20];
        let h = HubView { agp: Some((0, 0xFF_FFFF, 0)), ..HubView::default() };
        assert_eq!(h.translate(0x82_200C, &v), Ok((Target::Bridge(0x82_200C), 0xFF4)));
        assert!(h.translate(0x1_0000, &v).unwrap_err().contains("not one of the bridge's windows"));
        assert!(HubView::default().translate(0x20_0000, &v).unwrap_err().contains("in no aperture"));
    }
}
