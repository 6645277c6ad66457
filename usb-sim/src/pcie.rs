//! The simulated PCIe side: four bridges on buses 0..3 and a GPU at 4:00.0 with sized, decoding BARs, a
//! Resizable BAR capability for BAR0, and VRAM behind BAR0.
//!
//! Routing is strict: a type 1 config request reaches bus N only through bridges whose secondary/subordinate
//! numbers cover it; a memory request reaches the GPU only when every bridge has memory decoding on and a
//! window covering the address, and the GPU has memory decoding on and a BAR there. Anything else is an
//! Unsupported Request.
//!
//! The GPU's capability list holds a PCI Express capability whose Link Control enables ASPM L1 at power-on
//! (tinygrad `runtime/support/am/amdev.py` `AMDev._disable_aspm`: "L1 across retimers makes reads oscillate to
//! 0xffffffff; power on defaults it enabled"). While it stays enabled, the firmware model corrupts memory reads
//! (`super::bridge_fw`). What BAR2 (doorbells) and BAR5 (registers) decode to is the GPU model's
//! (`super::gpu`); this module only says which BAR and offset an address hits.

use super::consts::*;

/// A function's 4 KB config space and the bits software may change.
struct ConfigSpace {
    bytes: Vec<u8>,
    writable: Vec<u8>,
}

impl ConfigSpace {
    fn new(id: (u16, u16), class: u32, header_type: u8) -> ConfigSpace {
        let mut c = ConfigSpace { bytes: vec![0; 4096], writable: vec![0; 4096] };
        c.put32(0, u32::from(id.0) | u32::from(id.1) << 16);
        c.put32(0x08, class << 8);
        c.bytes[0x0E] = header_type;
        c.writable[CFG_COMMAND] = 0x07;
        c
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn get32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }

    fn get16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes[at..at + 2].try_into().unwrap())
    }

    fn write(&mut self, at: usize, be: u8, value: u32) {
        for i in 0..4 {
            if be & (1 << i) != 0 {
                let m = self.writable[at + i];
                let v = (value >> (8 * i)) as u8;
                self.bytes[at + i] = (self.bytes[at + i] & !m) | (v & m);
            }
        }
    }
}

fn bridge_space(id: (u16, u16)) -> ConfigSpace {
    let mut c = ConfigSpace::new(id, CLASS_BRIDGE, 0x01);
    c.writable[CFG_BUSES..CFG_BUSES + 3].fill(0xFF);
    c.writable[CFG_MEM_BASE..CFG_MEM_BASE + 4].copy_from_slice(&[0xF0, 0xFF, 0xF0, 0xFF]);
    c.writable[CFG_PREF_BASE..CFG_PREF_BASE + 4].copy_from_slice(&[0xF0, 0xFF, 0xF0, 0xFF]);
    c.writable[CFG_PREF_BASE_HI..CFG_PREF_LIMIT_HI + 4].fill(0xFF);
    // Prefetchable window: 64-bit capable (read-only low nibble 1), closed (base > limit) out of reset.
    c.bytes[CFG_PREF_BASE] = 0xF1;
    c.bytes[CFG_PREF_BASE + 1] = 0xFF;
    c.bytes[CFG_PREF_BASE + 2] = 0x01;
    c.bytes[CFG_MEM_BASE] = 0xF0;
    c.bytes[CFG_MEM_BASE + 1] = 0xFF;
    c
}

fn bridge_buses(c: &ConfigSpace) -> (u8, u8) {
    (c.bytes[CFG_BUSES + 1], c.bytes[CFG_BUSES + 2])
}

fn bridge_forwards(c: &ConfigSpace, addr: u64, len: u64) -> bool {
    if c.bytes[CFG_COMMAND] & CMD_MEM == 0 {
        return false;
    }
    let mem_base = u64::from(c.get16(CFG_MEM_BASE) & 0xFFF0) << 16;
    let mem_limit = u64::from(c.get16(CFG_MEM_BASE + 2) & 0xFFF0) << 16 | 0xF_FFFF;
    let pref_base = u64::from(c.get16(CFG_PREF_BASE) & 0xFFF0) << 16 | u64::from(c.get32(CFG_PREF_BASE_HI)) << 32;
    let pref_limit =
        (u64::from(c.get16(CFG_PREF_BASE + 2) & 0xFFF0) << 16 | 0xF_FFFF) | u64::from(c.get32(CFG_PREF_LIMIT_HI)) << 32;
    let last = addr + len - 1;
    (mem_base <= addr && last <= mem_limit) || (pref_base <= addr && last <= pref_limit)
}

/// One GPU BAR: its size, flag bits and assigned address.
#[derive(Clone, Copy, Debug)]
struct BarModel {
    size: u64,
    flags: u32,
    addr: u64,
}

impl BarModel {
    fn is64(&self) -> bool {
        self.flags & 0x6 == 0x4
    }
    fn is_io(&self) -> bool {
        self.flags & 1 != 0
    }
    fn mask(&mut self) {
        self.addr &= !(self.size - 1);
        if !self.is64() {
            self.addr &= 0xFFFF_FFFF;
        }
    }
}

/// Backing memory a GPU BAR decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    Vram,
    Doorbell,
    Mmio,
}

struct Gpu {
    cfg: ConfigSpace,
    bars: [Option<BarModel>; 6],
    /// log2 of the largest BAR0 size in MB the Resizable BAR capability offers.
    rebar_max_log2_mb: u32,
}

const REBAR_CTRL: usize = CFG_EXT_CAP + 8;

/// Where the GPU's PCI Express capability sits.
fn pcie_cap() -> usize {
    CAP_LIST.iter().find(|&&(_, id)| id == CAP_ID_PCIE).expect("the model lists a PCIe capability").0
}

impl Gpu {
    fn new(vram_bytes: u64) -> Gpu {
        let mut cfg = ConfigSpace::new(GPU_ID, CLASS_DISPLAY, 0x00);
        let max = (vram_bytes >> 20).trailing_zeros();
        let bar0 = BAR0_DEFAULT_BYTES.min(vram_bytes);
        cfg.put32(CFG_EXT_CAP, EXT_CAP_ID_REBAR | 1 << 16);
        cfg.put32(CFG_EXT_CAP + 4, ((1u32 << (max + 1)) - 1) << 4);
        cfg.put32(REBAR_CTRL, 1 << 5 | ((bar0 >> 20).trailing_zeros()) << 8);
        cfg.writable[REBAR_CTRL + 1] = 0x3F;
        cfg.bytes[CFG_STATUS] |= STATUS_CAP_LIST;
        cfg.bytes[CFG_CAP_PTR] = CAP_LIST[0].0 as u8;
        for (i, &(at, id)) in CAP_LIST.iter().enumerate() {
            cfg.bytes[at] = id;
            cfg.bytes[at + 1] = CAP_LIST.get(i + 1).map_or(0, |&(next, _)| next as u8);
        }
        let lnkctl = pcie_cap() + PCIE_LNKCTL;
        cfg.bytes[lnkctl] = LNKCTL_POWER_ON;
        cfg.writable[lnkctl] = LNKCTL_ASPM_MASK;
        let mut bars = [None; 6];
        bars[BAR_VRAM] = Some(BarModel { size: bar0, flags: BAR_FLAGS_64_PREF, addr: 0 });
        bars[BAR_DOORBELL] = Some(BarModel { size: DOORBELL_BYTES, flags: BAR_FLAGS_64_PREF, addr: 0 });
        bars[BAR_IO] = Some(BarModel { size: IO_BYTES, flags: BAR_FLAGS_IO, addr: 0 });
        bars[BAR_MMIO] = Some(BarModel { size: MMIO_BYTES, flags: 0, addr: 0 });
        Gpu { cfg, bars, rebar_max_log2_mb: max }
    }

    fn read(&self, reg: usize) -> u32 {
        match self.bar_reg(reg) {
            Some((i, upper)) => self.bar_read(i, upper),
            None => self.cfg.get32(reg),
        }
    }

    /// (BAR index, upper half) when `reg` is a BAR register.
    fn bar_reg(&self, reg: usize) -> Option<(usize, bool)> {
        if !(CFG_BAR0..CFG_BAR0 + 24).contains(&reg) {
            return None;
        }
        let i = (reg - CFG_BAR0) / 4;
        match (i > 0).then(|| self.bars[i - 1]).flatten() {
            Some(lower) if lower.is64() => Some((i - 1, true)),
            _ => Some((i, false)),
        }
    }

    fn bar_read(&self, i: usize, upper: bool) -> u32 {
        match self.bars[i] {
            None => 0,
            Some(b) if upper => (b.addr >> 32) as u32,
            Some(b) => b.addr as u32 | b.flags,
        }
    }

    fn write(&mut self, reg: usize, be: u8, value: u32) {
        if let Some((i, upper)) = self.bar_reg(reg) {
            let old = self.bar_read(i, upper);
            let mut merged = old;
            for k in 0..4 {
                if be & (1 << k) != 0 {
                    merged = (merged & !(0xFF << (8 * k))) | (value & (0xFF << (8 * k)));
                }
            }
            if let Some(b) = self.bars[i].as_mut() {
                b.addr = if upper {
                    (b.addr & 0xFFFF_FFFF) | u64::from(merged) << 32
                } else {
                    (b.addr & !0xFFFF_FFFF) | u64::from(merged & !0xF)
                };
                b.mask();
            }
            return;
        }
        self.cfg.write(reg, be, value);
        if reg == REBAR_CTRL {
            let code = ((self.cfg.get32(REBAR_CTRL) >> 8) & 0x3F).min(self.rebar_max_log2_mb);
            let ctrl = (self.cfg.get32(REBAR_CTRL) & !(0x3F << 8)) | code << 8;
            self.cfg.put32(REBAR_CTRL, ctrl);
            if let Some(b) = self.bars[BAR_VRAM].as_mut() {
                b.size = 1 << (20 + code);
                b.mask();
            }
        }
    }

    /// Whether the endpoint's Link Control enables ASPM L1 (L1 engages only when both ends enable it; the
    /// model's upstream port always does, so the endpoint's bit decides).
    fn aspm_l1(&self) -> bool {
        self.cfg.bytes[pcie_cap() + PCIE_LNKCTL] & LNKCTL_ASPM_L1 != 0
    }

    fn decode(&self, addr: u64, len: u64) -> Option<(Region, u64)> {
        if self.cfg.bytes[CFG_COMMAND] & CMD_MEM == 0 {
            return None;
        }
        let regions = [(BAR_VRAM, Region::Vram), (BAR_DOORBELL, Region::Doorbell), (BAR_MMIO, Region::Mmio)];
        regions.into_iter().find_map(|(i, region)| {
            let b = self.bars[i].filter(|b| !b.is_io())?;
            (b.addr <= addr && addr + len <= b.addr + b.size).then(|| (region, addr - b.addr))
        })
    }
}

/// Which function a config request reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Bridge(usize),
    Gpu,
}

/// The PCIe tree behind the bridge's downstream port, with the GPU's memories.
pub struct Pcie {
    bridges: Vec<ConfigSpace>,
    gpu: Gpu,
    pub vram: Vec<u8>,
}

impl Pcie {
    /// A powered-on tree out of reset; `vram_bytes` is a power of two of at least 1 MB.
    pub fn new(vram_bytes: u64) -> Pcie {
        Pcie {
            bridges: BRIDGE_IDS.iter().map(|&id| bridge_space(id)).collect(),
            gpu: Gpu::new(vram_bytes),
            vram: vec![0; vram_bytes as usize],
        }
    }

    fn target(&self, type1: bool, bus: u8, dev: u8, func: u8) -> Option<Target> {
        if dev != 0 || func != 0 {
            return None;
        }
        if !type1 {
            return (bus == 0).then_some(Target::Bridge(0));
        }
        if bus == 0 {
            return None;
        }
        for (k, c) in self.bridges.iter().enumerate().take(usize::from(bus)) {
            let (secondary, subordinate) = bridge_buses(c);
            if usize::from(secondary) != k + 1 || subordinate < bus {
                return None;
            }
        }
        match bus {
            GPU_BUS => Some(Target::Gpu),
            b if usize::from(b) < self.bridges.len() => Some(Target::Bridge(usize::from(b))),
            _ => None,
        }
    }

    /// A config read of the dword at `addr` (bus<<24 | dev<<19 | fn<<16 | reg); `None` = Unsupported Request.
    pub fn config_read(&self, type1: bool, addr: u32) -> Option<u32> {
        let (bus, dev, func, reg) = split_config(addr);
        Some(match self.target(type1, bus, dev, func)? {
            Target::Bridge(i) => self.bridges[i].get32(reg),
            Target::Gpu => self.gpu.read(reg),
        })
    }

    /// A config write with byte enables; `false` = Unsupported Request.
    pub fn config_write(&mut self, type1: bool, addr: u32, be: u8, value: u32) -> bool {
        let (bus, dev, func, reg) = split_config(addr);
        match self.target(type1, bus, dev, func) {
            Some(Target::Bridge(i)) => self.bridges[i].write(reg, be, value),
            Some(Target::Gpu) => self.gpu.write(reg, be, value),
            None => return false,
        }
        true
    }

    /// Whether ASPM L1 can engage on the GPU's link (the endpoint's Link Control enables it).
    pub fn gpu_aspm_l1(&self) -> bool {
        self.gpu.aspm_l1()
    }

    /// Which GPU memory `len` bytes at bus address `addr` decode to, and the offset in it, when every hop
    /// forwards the request.
    pub fn decode(&self, addr: u64, len: u64) -> Option<(Region, u64)> {
        if len == 0 || !self.bridges.iter().all(|c| bridge_forwards(c, addr, len)) {
            return None;
        }
        let (region, off) = self.gpu.decode(addr, len)?;
        let size = match region {
            Region::Vram => self.vram.len(),
            Region::Doorbell => DOORBELL_BYTES as usize,
            Region::Mmio => MMIO_BYTES as usize,
        };
        (off + len <= size as u64).then_some((region, off))
    }
}

fn split_config(addr: u32) -> (u8, u8, u8, usize) {
    ((addr >> 24) as u8, ((addr >> 19) & 0x1F) as u8, ((addr >> 16) & 7) as u8, (addr & 0xFFC) as usize)
}
