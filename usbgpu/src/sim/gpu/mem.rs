//! What the GPU's engines reach, and how their addresses translate (`GMMU=0`: no page tables).
//!
//! An engine's address goes through its hub (the PSP through MMHUB; CP, SDMA and shaders through the GC hub):
//! - inside the hub's system aperture (`*MC_VM_SYSTEM_APERTURE_LOW_ADDR`/`HIGH_ADDR`, 256 KB units, as the
//!   driver programs it) and inside the frame buffer (`*MC_VM_FB_LOCATION_BASE`, which the GPU reports, up to
//!   VRAM's size): VRAM at `addr - fb_base` — the MC address tinygrad calls `paddr2mc(paddr)`;
//! - inside one of the bridge's windows (SRAM at 0x200000, the XDATA windows at 0x800000/0x820000/0x822000):
//!   system memory at that bus address, as the bridge decodes it;
//! - anything else is a fault naming the engine and the address. A hub the driver has not programmed has an
//!   empty aperture, so an engine started before its hub faults on its first VRAM access.

use std::time::Duration;

/// The memories behind the GPU: VRAM and the bridge's windows on the PCIe bus.
pub trait Fabric {
    fn vram(&mut self) -> &mut [u8];
    /// A device-side read of bridge memory at bus address `addr`; `None` when nothing decodes it.
    fn bridge_read(&mut self, addr: u64, len: usize) -> Option<Vec<u8>>;
    /// A device-side write landing at time `at`; false when nothing decodes it.
    fn bridge_write(&mut self, addr: u64, data: &[u8], at: Duration) -> bool;
}

/// The bridge windows the GPU may address as system memory: (bus address, size).
pub const BRIDGE_WINDOWS: [(u64, u64); 4] =
    [(0x20_0000, 0x8_0000), (0x80_0000, 0x200), (0x82_0000, 0x1000), (0x82_2000, 0x1000)];

/// Where the frame buffer sits in the GPU's address space (the value `MC_VM_FB_LOCATION_BASE` reports, << 24).
pub const FB_BASE: u64 = 0x80_0000_0000;

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

/// A resolved address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Vram(usize),
    Bridge(u64),
}

/// One engine's view: the aperture of its hub, the VRAM size and the fabric.
pub struct Mem<'a> {
    pub aperture: Aperture,
    pub vram_bytes: u64,
    pub fabric: &'a mut dyn Fabric,
    /// When the engine's writes land (for the bridge's host-visible windows).
    pub at: Duration,
}

impl Mem<'_> {
    pub fn resolve(&self, addr: u64, len: usize) -> Result<Target, String> {
        let end = addr.checked_add(len as u64).ok_or_else(|| format!("address {addr:#x}+{len} overflows"))?;
        let ap = self.aperture;
        if addr >= FB_BASE && end <= FB_BASE + self.vram_bytes && addr >= ap.low && end - 1 <= ap.high && len > 0 {
            return Ok(Target::Vram((addr - FB_BASE) as usize));
        }
        if BRIDGE_WINDOWS.iter().any(|&(b, s)| addr >= b && end <= b + s) {
            return Ok(Target::Bridge(addr));
        }
        if addr >= FB_BASE && end <= FB_BASE + self.vram_bytes {
            return Err(format!(
                "address {addr:#x}+{len} is VRAM outside the hub's system aperture {:#x}..={:#x} (GMC not programmed?)",
                ap.low, ap.high
            ));
        }
        Err(format!("address {addr:#x}+{len} is neither VRAM (MC {FB_BASE:#x}+) nor a bridge window"))
    }

    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        match self.resolve(addr, len)? {
            Target::Vram(off) => Ok(self.fabric.vram()[off..off + len].to_vec()),
            Target::Bridge(bus) => {
                self.fabric.bridge_read(bus, len).ok_or_else(|| format!("bridge read at {bus:#x}+{len} failed"))
            }
        }
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), String> {
        match self.resolve(addr, data.len())? {
            Target::Vram(off) => {
                self.fabric.vram()[off..off + data.len()].copy_from_slice(data);
                Ok(())
            }
            Target::Bridge(bus) => {
                if self.fabric.bridge_write(bus, data, self.at) {
                    Ok(())
                } else {
                    Err(format!("bridge write at {bus:#x}+{} failed", data.len()))
                }
            }
        }
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
