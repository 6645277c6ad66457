//! PCIe bring-up behind the bridge, as tinygrad's `System.pci_setup_usb_bars(gpu_bus=4, ...)` does it:
//! program each bridge on buses 0..gpu_bus (bus numbers, memory windows, command), turn off the GPU link's ASPM
//! (tinygrad `AMDev._disable_aspm`: with L1 enabled across retimers, reads oscillate to 0xffffffff), resize the
//! GPU's BAR0 to the largest size its Resizable BAR capability offers, size and assign its memory BARs, enable
//! memory decoding and bus mastering. Until ASPM is off only config space is read.

use crate::bridge::Bridge;
use crate::error::{Error, Result};
use crate::proto::Bdf;

/// Type 0/1 config-space registers (PCI Local Bus / PCIe base specification).
pub mod cfg {
    pub const VENDOR_ID: u16 = 0x00;
    pub const COMMAND: u16 = 0x04;
    /// The first entry of the (legacy) capability list; each entry is id, next pointer.
    pub const CAP_PTR: u16 = 0x34;
    pub const CAP_ID_PCIE: u32 = 0x10;
    /// PCI Express capability + 0x10: Link Control; bits [1:0] are ASPM control (L0s, L1).
    pub const PCIE_LINK_CONTROL: u16 = 0x10;
    pub const LINK_CONTROL_ASPM: u32 = 0x3;
    pub const CLASS_REV: u16 = 0x08;
    pub const HEADER_TYPE: u16 = 0x0E;
    pub const BAR0: u16 = 0x10;
    /// Type 1: primary, secondary, subordinate bus numbers.
    pub const BUS_NUMBERS: u16 = 0x18;
    /// Type 1: memory base (low 16) and limit (high 16).
    pub const MEMORY_WINDOW: u16 = 0x20;
    /// Type 1: prefetchable base (low 16) and limit (high 16), then their upper 32 bits.
    pub const PREF_WINDOW: u16 = 0x24;
    pub const PREF_BASE_UPPER: u16 = 0x28;
    pub const PREF_LIMIT_UPPER: u16 = 0x2C;
    pub const EXT_CAP_START: u16 = 0x100;
    pub const CMD_IO: u32 = 1 << 0;
    pub const CMD_MEMORY: u32 = 1 << 1;
    pub const CMD_MASTER: u32 = 1 << 2;
    pub const HEADER_TYPE_BRIDGE: u32 = 1;
    /// Extended capability id of Resizable BAR; its capability dword at +4, control at +8.
    pub const EXT_CAP_REBAR: u32 = 0x15;
    pub const REBAR_CAP: u16 = 4;
    pub const REBAR_CTRL: u16 = 8;
    /// Control bits [13:8]: the BAR size as log2(MB).
    pub const REBAR_SIZE_SHIFT: u32 = 8;
    pub const REBAR_SIZE_MASK: u32 = 0x3F << REBAR_SIZE_SHIFT;
    pub const BAR_IO: u32 = 1;
    pub const BAR_TYPE_MASK: u32 = 0x6;
    pub const BAR_TYPE_64: u32 = 0x4;
    pub const BAR_PREFETCH: u32 = 0x8;
}

/// Where the bridge chain and the GPU's BARs go (tinygrad's `gpu_bus=4, mem_base=0x10000000, pref_mem_base=32<<30`).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub gpu_bus: u8,
    pub mem_base: u64,
    pub pref_base: u64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { gpu_bus: 4, mem_base: 0x1000_0000, pref_base: 32 << 30 }
    }
}

/// BARs are assigned at least this aligned (tinygrad rounds to 2 MiB).
const BAR_ALIGN: u64 = 2 << 20;
/// Extended capabilities walked before giving up on a looping list.
const MAX_EXT_CAPS: usize = 64;
/// Legacy capabilities walked at most (48 dword-aligned slots fit between 0x40 and 0x100).
const MAX_CAPS: usize = 48;

/// One function found on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    pub bdf: Bdf,
    pub vendor: u16,
    pub device: u16,
    /// Class code (base, sub, prog-if) in bits [23:0].
    pub class: u32,
}

/// A memory BAR after assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub index: u8,
    pub addr: u64,
    pub size: u64,
    pub is64: bool,
    pub prefetchable: bool,
}

/// What bring-up found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub bridges: Vec<Function>,
    pub gpu: Function,
    /// BAR0 size before and after the resize, when the GPU offers Resizable BAR for BAR0.
    pub rebar: Option<(u64, u64)>,
    /// The GPU's PCIe Link Control as found, before its ASPM bits were cleared; `None` when the capability list
    /// has no PCI Express capability (then nothing was changed, as in tinygrad).
    pub link_control: Option<u16>,
    pub bars: Vec<Bar>,
}

impl Topology {
    pub fn bar(&self, index: u8) -> Option<&Bar> {
        self.bars.iter().find(|b| b.index == index)
    }
}

/// Brings up the chain and the GPU at `layout.gpu_bus`:00.0.
pub fn bring_up(b: &mut Bridge, layout: &Layout) -> Result<Topology> {
    let mut bridges = Vec::new();
    for bus in 0..layout.gpu_bus {
        let f = identify(b, Bdf { bus, dev: 0, func: 0 })?;
        let header = b.config_read(f.bdf, cfg::HEADER_TYPE, 1)? & 0x7F;
        if header != cfg::HEADER_TYPE_BRIDGE {
            return Err(pcie_err(b, format!("{} is not a PCI bridge (header type {header})", f.bdf)));
        }
        program_bridge(b, f.bdf, layout)?;
        bridges.push(f);
    }
    let gpu = identify(b, Bdf { bus: layout.gpu_bus, dev: 0, func: 0 })?;
    let link_control = disable_aspm(b, gpu.bdf)?;
    let rebar = resize_bar0(b, gpu.bdf)?;
    let bars = assign_bars(b, gpu.bdf, layout)?;
    b.config_write(gpu.bdf, cfg::COMMAND, 2, cfg::CMD_IO | cfg::CMD_MEMORY | cfg::CMD_MASTER)?;
    Ok(Topology { bridges, gpu, rebar, link_control, bars })
}

/// Clears the ASPM bits of the GPU's PCIe Link Control (tinygrad `AMDev._disable_aspm`): the walk of the capability
/// list is bounded and stops at a pointer seen before, since a dead link can return 0xff pointers forever. Clearing
/// the endpoint alone suffices (L1 engages only when both ends enable it). Returns Link Control as found.
fn disable_aspm(b: &mut Bridge, gpu: Bdf) -> Result<Option<u16>> {
    let mut seen = [0u16; MAX_CAPS];
    let mut cap = (b.config_read(gpu, cfg::CAP_PTR, 1)? & 0xFC) as u16;
    for n in 0..MAX_CAPS {
        if cap == 0 || seen[..n].contains(&cap) {
            return Ok(None);
        }
        if b.config_read(gpu, cap, 1)? == cfg::CAP_ID_PCIE {
            let at = cap + cfg::PCIE_LINK_CONTROL;
            let link_control = b.config_read(gpu, at, 2)?;
            b.config_write(gpu, at, 2, link_control & !cfg::LINK_CONTROL_ASPM)?;
            return Ok(Some(link_control as u16));
        }
        seen[n] = cap;
        cap = (b.config_read(gpu, cap + 1, 1)? & 0xFC) as u16;
    }
    Ok(None)
}

fn identify(b: &mut Bridge, bdf: Bdf) -> Result<Function> {
    let id = b.config_read(bdf, cfg::VENDOR_ID, 4).map_err(|e| pcie_err(b, format!("no function at {bdf}: {e}")))?;
    if id & 0xFFFF == 0xFFFF {
        return Err(pcie_err(b, format!("no function at {bdf} (vendor id 0xffff)")));
    }
    let class = b.config_read(bdf, cfg::CLASS_REV, 4)? >> 8;
    Ok(Function { bdf, vendor: id as u16, device: (id >> 16) as u16, class })
}

fn program_bridge(b: &mut Bridge, bdf: Bdf, layout: &Layout) -> Result<()> {
    let buses = u32::from(bdf.bus) | (u32::from(bdf.bus) + 1) << 8 | u32::from(layout.gpu_bus) << 16;
    b.config_write(bdf, cfg::BUS_NUMBERS, 4, buses)?;
    b.config_write(bdf, cfg::MEMORY_WINDOW, 4, ((layout.mem_base >> 16) as u32 & 0xFFFF) | 0xFFFF << 16)?;
    b.config_write(bdf, cfg::PREF_WINDOW, 4, ((layout.pref_base >> 16) as u32 & 0xFFFF) | 0xFFFF << 16)?;
    b.config_write(bdf, cfg::PREF_BASE_UPPER, 4, (layout.pref_base >> 32) as u32)?;
    b.config_write(bdf, cfg::PREF_LIMIT_UPPER, 4, 0xFFFF_FFFF)?;
    b.config_write(bdf, cfg::COMMAND, 2, cfg::CMD_IO | cfg::CMD_MEMORY | cfg::CMD_MASTER)
}

/// Sets BAR0's Resizable BAR control to the largest size offered; returns (old, new) sizes in bytes.
fn resize_bar0(b: &mut Bridge, gpu: Bdf) -> Result<Option<(u64, u64)>> {
    let mut at = cfg::EXT_CAP_START;
    for _ in 0..MAX_EXT_CAPS {
        let header = b.config_read(gpu, at, 4)?;
        if header == 0 || header == 0xFFFF_FFFF {
            return Ok(None);
        }
        if header & 0xFFFF == cfg::EXT_CAP_REBAR {
            let sizes = b.config_read(gpu, at + cfg::REBAR_CAP, 4)? >> 4;
            let ctrl = b.config_read(gpu, at + cfg::REBAR_CTRL, 4)?;
            if ctrl & 7 != 0 || sizes == 0 {
                return Ok(None);
            }
            let largest = 31 - sizes.leading_zeros();
            let old = (ctrl & cfg::REBAR_SIZE_MASK) >> cfg::REBAR_SIZE_SHIFT;
            let new_ctrl = (ctrl & !cfg::REBAR_SIZE_MASK) | largest << cfg::REBAR_SIZE_SHIFT;
            b.config_write(gpu, at + cfg::REBAR_CTRL, 4, new_ctrl)?;
            return Ok(Some((1u64 << (20 + old), 1u64 << (20 + largest))));
        }
        let next = (header >> 20) as u16;
        if next == 0 {
            return Ok(None);
        }
        if next < cfg::EXT_CAP_START || !next.is_multiple_of(4) {
            return Err(pcie_err(b, format!("{gpu}: extended capability list points at 0x{next:x}")));
        }
        at = next;
    }
    Err(pcie_err(b, format!("{gpu}: extended capability list does not end")))
}

/// Sizes each memory BAR (all ones, read back) and assigns it: 64-bit prefetchable BARs from the
/// prefetchable base, the others from the memory base, each aligned to its size and at least 2 MiB.
fn assign_bars(b: &mut Bridge, gpu: Bdf, layout: &Layout) -> Result<Vec<Bar>> {
    let (mut mem, mut pref) = (layout.mem_base, layout.pref_base);
    let mut bars = Vec::new();
    let mut i = 0u8;
    while i < 6 {
        let reg = cfg::BAR0 + 4 * u16::from(i);
        let orig = b.config_read(gpu, reg, 4)?;
        if orig & cfg::BAR_IO != 0 {
            i += 1;
            continue;
        }
        let is64 = orig & cfg::BAR_TYPE_MASK == cfg::BAR_TYPE_64;
        if is64 && i == 5 {
            return Err(pcie_err(b, format!("{gpu}: BAR5 claims to be 64-bit")));
        }
        b.config_write(gpu, reg, 4, 0xFFFF_FFFF)?;
        let lo = b.config_read(gpu, reg, 4)? & !0xF;
        let hi = if is64 {
            b.config_write(gpu, reg + 4, 4, 0xFFFF_FFFF)?;
            b.config_read(gpu, reg + 4, 4)?
        } else {
            0xFFFF_FFFF
        };
        let mask = u64::from(hi) << 32 | u64::from(lo);
        let step = if is64 { 2 } else { 1 };
        if lo == 0 && (!is64 || hi == 0) {
            i += step;
            continue;
        }
        let size = (!mask).wrapping_add(1);
        let prefetchable = orig & cfg::BAR_PREFETCH != 0;
        let cursor = if is64 && prefetchable { &mut pref } else { &mut mem };
        let addr = cursor.next_multiple_of(size.max(BAR_ALIGN));
        if !is64 && addr + size > 1 << 32 {
            return Err(pcie_err(b, format!("{gpu}: 32-bit BAR{i} of {size} bytes does not fit below 4 GiB")));
        }
        *cursor = addr + size;
        b.config_write(gpu, reg, 4, addr as u32 | (orig & 0xF))?;
        if is64 {
            b.config_write(gpu, reg + 4, 4, (addr >> 32) as u32)?;
        }
        bars.push(Bar { index: i, addr, size, is64, prefetchable });
        i += step;
    }
    Ok(bars)
}

fn pcie_err(b: &Bridge, msg: String) -> Error {
    Error::Pcie { device: b.name().to_string(), msg }
}
