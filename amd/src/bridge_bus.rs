//! [`BridgeBus`]: [`GpuBus`] over the bridge, with the BARs [`pilot_usb_bridge::pcie::bring_up`] assigned.
//!
//! - Registers: one single-TLP (F0 mode 0) memory access per dword of BAR5 (a posted write is one USB transaction, a
//!   read two). Registers past the BAR5 window go through the `BIF_BX_PF0_RSMU_INDEX/DATA` pair (tinygrad
//!   `AMDev.indirect_rreg/indirect_wreg`), whose indices the caller sets after discovery ([`BusMap::indirect`]).
//!
//!   tinygrad streams registers instead (`USBMMIOInterface` over BAR5: `pcie_mem_write`, mode 1 and a bulk OUT;
//!   `pcie_mem_read`, mode 2 and a bulk IN) and keeps mode 0 for config space. To the GPU both are the same TLP: the
//!   bridge firmware (tinygrad/asm2464pd-firmware `handmade/src/main.c` `handle_usb_control`, 0xF0 DATA_OUT) loads
//!   the TLP engine's format, byte enables and address from the request in every mode; mode 0 then loads the data
//!   registers and triggers one TLP, and a stream does the same per dword (`handmade/src/pcie_pio.h`
//!   `pcie_write_chunk`, `pcie_read_chunk`), with byte enables 0x0F as pilot's register accesses use. A register
//!   write costs one USB transaction this way, two streamed; a read costs two either way. Mode 0's read is also the
//!   one that reports a failed completion (its F0 IN returns the engine's error bit and completion status, which
//!   [`Bridge::mem_read`] turns into errors), where `pcie_read_chunk` stops polling on the error bit and sends the
//!   data registers as they are. The simulator serves a memory TLP the same way from either mode
//!   (`pilot_usb_sim`'s `item3_*` test in `sim_fidelity.rs`).
//! - VRAM: F0 streaming through BAR0 (large BAR only: the physical address is the BAR0 offset). Unaligned
//!   edges are read, merged and written back as whole dwords.
//! - Doorbells: one 64-bit streaming write into BAR2 (tinygrad's `doorbell64` view).
//! - Staging: the bridge SRAM at bus 0x200000 through the 0xF2 engine (tinygrad `USBPCIDevice.alloc_sysmem`).
//! - Sleep: the bridge transport's clock (a real sleep on hardware, modelled time on the simulator).
//! - Bus master: a config read-modify-write of the GPU's COMMAND register.

use super::bus::GpuBus;
use pilot_usb_bridge::bridge::Bridge;
use pilot_usb_bridge::error::{Error, Result};
use pilot_usb_bridge::pcie::{cfg, Topology};
use pilot_usb_bridge::proto::{self, Bdf};
use std::time::Duration;

/// The register pair that reaches registers past the BAR5 window (dword indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indirect {
    pub index: u32,
    pub data: u32,
}

/// Where the GPU's BARs sit on the bus after PCIe bring-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusMap {
    /// BAR0 (VRAM aperture): bus address and size.
    pub vram: (u64, u64),
    /// BAR2 (doorbells): bus address and size.
    pub doorbell: (u64, u64),
    /// BAR5 (registers): bus address and size.
    pub mmio: (u64, u64),
    /// Set once discovery has named the RSMU pair; until then registers past BAR5 are an error.
    pub indirect: Option<Indirect>,
    /// The GPU's function (its config space holds the bus-master bit).
    pub gpu: Bdf,
}

impl BusMap {
    /// The map of a brought-up GPU: BAR0, BAR2 and BAR5 must all be assigned.
    pub fn from_topology(device: &str, topo: &Topology) -> Result<BusMap> {
        let bar = |i: u8| {
            topo.bar(i).map(|b| (b.addr, b.size)).ok_or_else(|| Error::Pcie {
                device: device.to_string(),
                msg: format!("{}: BAR{i} is not assigned (the AMD driver needs BAR0, BAR2 and BAR5)", topo.gpu.bdf),
            })
        };
        Ok(BusMap { vram: bar(0)?, doorbell: bar(2)?, mmio: bar(5)?, indirect: None, gpu: topo.gpu.bdf })
    }

    /// Registers BAR5 holds directly (dwords).
    pub fn mmio_regs(&self) -> u64 {
        self.mmio.1 / 4
    }
}

/// [`GpuBus`] on a borrowed bridge: a cheap view made wherever the bridge and the map are at hand.
pub struct BridgeBus<'a> {
    b: &'a mut Bridge,
    map: BusMap,
}

impl<'a> BridgeBus<'a> {
    pub fn new(b: &'a mut Bridge, map: BusMap) -> BridgeBus<'a> {
        BridgeBus { b, map }
    }

    /// The bridge underneath (its statistics, clock and copies).
    pub fn bridge(&mut self) -> &mut Bridge {
        self.b
    }

    pub fn map(&self) -> &BusMap {
        &self.map
    }

    fn err(&self, op: &str, msg: String) -> Error {
        self.b.invalid(op, msg)
    }

    /// The indirect pair for `reg`, which lies past BAR5.
    fn indirect(&self, reg: u32) -> Result<Indirect> {
        self.map.indirect.ok_or_else(|| {
            let n = self.map.mmio_regs();
            self.err(
                "register access",
                format!(
                    "register 0x{reg:x} lies past BAR5 ({n} registers) and the RSMU index/data pair is not known yet"
                ),
            )
        })
    }

    fn vram_addr(&self, op: &str, addr: u64, len: usize) -> Result<u64> {
        let (base, size) = self.map.vram;
        match addr.checked_add(len as u64) {
            Some(end) if end <= size => Ok(base + addr),
            _ => Err(self.err(
                op,
                format!("VRAM 0x{addr:x}+{len} is outside BAR0 ({size} bytes; small-BAR access is not supported)"),
            )),
        }
    }
}

impl GpuBus for BridgeBus<'_> {
    fn read_reg(&mut self, reg: u32) -> Result<u32> {
        if u64::from(reg) < self.map.mmio_regs() {
            return self.b.mem_read(self.map.mmio.0 + u64::from(reg) * 4, 4);
        }
        let ind = self.indirect(reg)?;
        self.write_reg(ind.index, reg.wrapping_mul(4))?;
        self.read_reg(ind.data)
    }

    fn write_reg(&mut self, reg: u32, value: u32) -> Result<()> {
        if u64::from(reg) < self.map.mmio_regs() {
            return self.b.mem_write(self.map.mmio.0 + u64::from(reg) * 4, 4, value);
        }
        let ind = self.indirect(reg)?;
        self.write_reg(ind.index, reg.wrapping_mul(4))?;
        self.write_reg(ind.data, value)
    }

    fn read_vram(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let at = self.vram_addr("VRAM read", addr, buf.len())?;
        let (start, end) = (at & !3, (at + buf.len() as u64).next_multiple_of(4));
        if start == at && end == at + buf.len() as u64 {
            return self.b.mmio_read(at, buf);
        }
        let mut whole = vec![0u8; (end - start) as usize];
        self.b.mmio_read(start, &mut whole)?;
        let skip = (at - start) as usize;
        buf.copy_from_slice(&whole[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_vram(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let at = self.vram_addr("VRAM write", addr, data.len())?;
        let (start, end) = (at & !3, (at + data.len() as u64).next_multiple_of(4));
        if start == at && end == at + data.len() as u64 {
            return self.b.mmio_write(at, data);
        }
        // Streaming moves whole dwords: merge the partial edge dwords with what VRAM holds.
        let mut whole = vec![0u8; (end - start) as usize];
        let head = (at - start) as usize;
        self.b.mmio_read(start, &mut whole[..4])?;
        if whole.len() > 4 {
            let n = whole.len();
            self.b.mmio_read(end - 4, &mut whole[n - 4..])?;
        }
        whole[head..head + data.len()].copy_from_slice(data);
        self.b.mmio_write(start, &whole)
    }

    fn ring_doorbell(&mut self, index: u32, value: u64) -> Result<()> {
        let (base, size) = self.map.doorbell;
        let off = u64::from(index) * 8;
        if off + 8 > size {
            return Err(self.err("doorbell", format!("doorbell {index} is outside BAR2 ({size} bytes)")));
        }
        self.b.write64(base + off, value)
    }

    fn write_staging(&mut self, data: &[u8]) -> Result<u64> {
        if data.is_empty() || data.len() > proto::bus::SRAM_SIZE {
            let msg = format!("{} bytes do not fit the 512 KB SRAM staging window", data.len());
            return Err(self.err("staging write", msg));
        }
        self.b.sram_write(0, data)?;
        Ok(proto::bus::SRAM)
    }

    fn sleep(&mut self, d: Duration) {
        self.b.sleep(d)
    }

    fn set_indirect_pair(&mut self, index: u32, data: u32) {
        self.map.indirect = Some(Indirect { index, data });
    }

    fn set_bus_master(&mut self, enable: bool) -> Result<()> {
        let command = self.b.config_read(self.map.gpu, cfg::COMMAND, 2)?;
        let v = if enable { command | cfg::CMD_MASTER } else { command & !cfg::CMD_MASTER };
        self.b.config_write(self.map.gpu, cfg::COMMAND, 2, v)
    }
}
