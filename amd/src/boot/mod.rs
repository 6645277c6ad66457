//! Bring-up of the AMD GPU from cold, the way tinygrad's userspace "AM" driver does it with `GMMU=0`
//! (tinygrad `runtime/support/am/amdev.py` `AMDev.__init__`, `ip.py`), one module per IP:
//!
//! discovery → firmware → boot memory → partial-boot check → (mode-1 reset if the chip runs) → [`soc`] →
//! [`gmc`] (MM hub) → [`ih`] → [`psp`] (sOS, KM ring, TOC, SMU image, TMR, every image, RLC autoload) → [`smu`]
//! → [`gfx`] (GC hub, MEC) → [`sdma`] → boot memory mapped ([`vm`], [`vram`]) → clocks and clock gating →
//! `SCRATCH_REG7` = [`VERSION`], `SCRATCH_REG6` = 1.
//!
//! A partial boot (the last session ended in [`fini`] without error, and GC has no VM fault) keeps what only a
//! full boot sets up — it lives in boot memory ([`memory`]) — and redoes GFX (a MEC reset) and SDMA. A session
//! that died leaves `SCRATCH_REG6` = 1, so the next boot is full, and if sOS and the SMU still run it starts
//! with a mode-1 reset.

pub mod gfx;
pub mod gmc;
pub mod hw;
pub mod ih;
pub mod memory;
pub mod psp;
pub mod sdma;
pub mod smu;
pub mod soc;
pub mod vm;
pub mod vram;

use super::bus::GpuBus;
use super::discovery::{self, Discovery, DiscoveryError};
use super::regs::{gc, reg, HwIp, RegAddr};
use crate::firmware::{self, FirmwareError, FirmwareSet, Ip, Rs64Engine};
use gmc::Hub;
use hw::Hw;
use memory::{BootAllocator, VramAllocator, VramLayout, BOOT_SIZE, PAGE};
use std::path::Path;
use vm::{Target, Vm};
use vram::GpuVram;

/// `SCRATCH_REG7` after a boot by this driver: pilot's own marker ("PI", boot-memory layout 1), not tinygrad's
/// [`TINYGRAD_VERSION`]. A partial boot trusts the previous session's boot memory (rings, MQDs, the PSP's ring and
/// TMR) to be where this driver puts them; tinygrad lays its boot memory out its own way, so a chip tinygrad left
/// running gets a full boot here (after a mode-1 reset), and tinygrad likewise fully boots a chip pilot left.
/// Change the layout number whenever [`memory`]'s boot layout changes.
pub const VERSION: u32 = 0x5049_0001;

/// What tinygrad's AM driver leaves in `SCRATCH_REG7` (`amdev.py` `AMDev.Version`).
pub const TINYGRAD_VERSION: u32 = 0xA000_0008;

/// A failed bring-up: one line naming the step and the register or value.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("firmware: {0}")]
    Firmware(#[from] FirmwareError),
    #[error("{step}: {source}")]
    Bus { step: &'static str, source: pilot_usb_bridge::error::Error },
    #[error("{step}: timed out after {ms} ms waiting for {what} ({reg} reads {value:#x})")]
    Timeout { step: &'static str, what: String, reg: &'static str, value: u32, ms: u64 },
    #[error("PSP: {cmd} failed: status {status:#x}")]
    PspCommand { cmd: String, status: u32 },
    #[error("{step}: {msg}")]
    Invalid { step: &'static str, msg: String },
    #[error("VRAM: no room in {region} memory for {what} ({size:#x} bytes)")]
    OutOfMemory { region: &'static str, what: String, size: u64 },
}

/// How the boot went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootKind {
    /// Everything from scratch: the chip was not running firmware.
    Cold,
    /// Only GFX (MEC reset) and SDMA: the previous session ended cleanly.
    Partial,
    /// A full boot after a mode-1 reset: firmware was running but the last session did not end cleanly.
    AfterReset,
}

/// Choices a caller makes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootOptions {
    /// Never partial-boot (tinygrad `AM_RESET=1`): a running chip gets a mode-1 reset and a full boot.
    pub force_reset: bool,
}

/// What a full boot placed in boot memory (VRAM physical addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootMemory {
    pub root_page_table: u64,
    pub scratch_page: u64,
    pub dummy_page: u64,
    pub ih: ih::IhRings,
    pub psp: psp::Psp,
    pub smu_driver_table: u64,
    /// One 4 KB MQD page per compute queue (tinygrad `AM_GFX.mqd_paddr`).
    pub mqd: [u64; 2],
}

/// A booted GPU: what it is, where things are, and the VRAM allocator for everything after boot.
#[derive(Debug)]
pub struct Booted {
    pub kind: BootKind,
    pub discovery: Discovery,
    pub layout: VramLayout,
    pub boot_memory: BootMemory,
    /// General VRAM (32 MB up to the reserved top), handed out mapped; owns VMID 0's page tables.
    pub vram: GpuVram,
    pub ucode_starts: gfx::UcodeStarts,
}

impl Booted {
    pub fn card(&self) -> firmware::Card {
        self.discovery.card
    }

    /// The bus dword address of register `r`.
    pub fn reg_addr(&self, r: RegAddr) -> Option<u32> {
        self.discovery.reg_addr(r.ip, r.base, r.offset)
    }

    /// The GPU VA of VRAM physical address `paddr`.
    pub fn va(&self, paddr: u64) -> u64 {
        self.vram.va(paddr)
    }

    /// The MC address of VRAM physical address `paddr` (inside both hubs' system aperture).
    pub fn mc(&self, paddr: u64) -> u64 {
        self.layout.mc(paddr)
    }
}

fn rs64_start(fw: &FirmwareSet, engine: Rs64Engine) -> Option<u64> {
    fw.file(Ip::Rs64(engine)).and_then(|f| f.header.ucode_start)
}

/// Brings the GPU on `bus` up with firmware from `firmware_dir` (see the module docs for the order).
pub fn boot(bus: &mut dyn GpuBus, firmware_dir: &Path, opts: BootOptions) -> Result<Booted, BootError> {
    let disc = discovery::discover(bus)?;
    let (index, data) = super::regs::nbio!(disc.card, m => (reg!(HwIp::Nbio, m::BIF_BX_PF0_RSMU_INDEX), reg!(HwIp::Nbio, m::BIF_BX_PF0_RSMU_DATA)));
    match (disc.reg_addr(index.ip, index.base, index.offset), disc.reg_addr(data.ip, data.base, data.offset)) {
        (Some(i), Some(d)) => bus.set_indirect_pair(i, d),
        _ => {
            return Err(BootError::Invalid {
                step: "discovery",
                msg: "NBIO has no base for the RSMU index/data pair".into(),
            })
        }
    }
    let fw = FirmwareSet::load(firmware_dir, disc.card)?;
    let ucode_starts = gfx::UcodeStarts {
        mec: rs64_start(&fw, Rs64Engine::Mec)
            .ok_or_else(|| BootError::Invalid { step: "GFX", msg: "the MEC firmware has no program start".into() })?,
        pfp: rs64_start(&fw, Rs64Engine::Pfp),
        me: rs64_start(&fw, Rs64Engine::Me),
    };
    let mut hw = Hw { bus, disc: &disc, step: "GMC" };
    let layout = gmc::read_fb_location(&mut hw, disc.vram_size)?;
    if layout.vram_size <= BOOT_SIZE + memory::RESERVED_TOP {
        return Err(BootError::Invalid {
            step: "VRAM",
            msg: format!("{:#x} bytes of VRAM is too little", layout.vram_size),
        });
    }

    // Boot memory, in tinygrad's `init_sw` order (zeroed only where tinygrad zeroes).
    let mut bm = BootAllocator::default();
    let root_page_table = bm.alloc(PAGE, PAGE, "the root page table")?;
    hw.write_vram(root_page_table, &[0u8; PAGE as usize])?;
    let scratch_page = bm.alloc(PAGE, PAGE, "the GMC scratch page")?;
    let dummy_page = bm.alloc(PAGE, PAGE, "the GMC dummy page")?;
    let ih = ih::IhRings {
        ring0: bm.alloc(ih::RING_SIZE, PAGE, "IH ring 0")?,
        wptr0: bm.alloc(PAGE, PAGE, "IH ring 0's wptr")?,
        ring1: bm.alloc(ih::RING_SIZE, PAGE, "IH ring 1")?,
        wptr1: bm.alloc(PAGE, PAGE, "IH ring 1's wptr")?,
    };
    let psp_cmd = bm.alloc(psp::CMD_SIZE, PAGE, "the PSP command buffer")?;
    let psp_fence = bm.alloc(psp::FENCE_SIZE, PAGE, "the PSP fence")?;
    hw.write_vram(psp_fence, &[0u8; psp::FENCE_SIZE as usize])?;
    let psp_ring = bm.alloc(psp::RING_SIZE, PAGE, "the PSP ring")?;
    let tmr = match firmware::boot_time_tmr(disc.card.mp0()) {
        true => None,
        false => Some(bm.alloc(psp::MAX_TMR_SIZE, 1 << 20, "the PSP TMR")?),
    };
    let mut psp = psp::Psp { cmd: psp_cmd, fence: psp_fence, ring: psp_ring, tmr, msg1: None, tmr_size: 0 };
    let smu_driver_table = bm.alloc(0x4000, PAGE, "the SMU driver table")?;
    let mqd = [bm.alloc(PAGE, PAGE, "MQD 0")?, bm.alloc(PAGE, PAGE, "MQD 1")?];
    let mut vm = Vm::new(disc.card, root_page_table);

    // Partial boot: a clean previous session of this driver, and no GC VM fault.
    hw.step = "boot";
    let (reg6, reg7) = gc!(disc.card, m => (reg!(HwIp::Gc, m::SCRATCH_REG6), reg!(HwIp::Gc, m::SCRATCH_REG7)));
    let partial = !opts.force_reset
        && hw.read(reg7)? == VERSION
        && hw.read(reg6)? == 0
        && hw.read(gmc::gc_fault_status(disc.card))? == 0;

    let mut kind = if partial { BootKind::Partial } else { BootKind::Cold };
    if !partial {
        if psp::Psp::sos_alive(&mut hw)? && smu::alive(&mut hw)? {
            let master = |hw: &mut Hw, on: bool| {
                hw.bus.set_bus_master(on).map_err(|source| BootError::Bus { step: "mode-1 reset", source })
            };
            master(&mut hw, false)?;
            smu::mode1_reset(&mut hw)?;
            master(&mut hw, true)?;
            kind = BootKind::AfterReset;
        }
        hw.step = "SOC";
        soc::init(&mut hw)?;
        hw.step = "GMC";
        gmc::init_hub(&mut hw, Hub::Mm, &layout, root_page_table, scratch_page, dummy_page)?;
        hw.step = "IH";
        ih::init(&mut hw, &layout, &ih)?;
        let mut alloc_table = || bm.alloc(PAGE, PAGE, "a page table");
        psp.init(&mut hw, &fw, &layout, &mut vm, &mut alloc_table)?;
        smu::init(&mut hw, layout.mc(smu_driver_table))?;
    }

    hw.step = "GFX";
    gfx::wait_rlc_autoload(&mut hw)?;
    gmc::init_hub(&mut hw, Hub::Gc, &layout, root_page_table, scratch_page, dummy_page)?;
    if partial {
        gfx::reset_mec(&mut hw, &ucode_starts)?;
    } else {
        gfx::init(&mut hw, &ucode_starts)?;
    }
    hw.step = "SDMA";
    sdma::init(&mut hw)?;

    // A window over usable VRAM aligned to its size: boot memory mapped now, general memory per allocation
    // ([`vram`]); page tables from general memory.
    hw.step = "VM";
    let mut general = VramAllocator::new(BOOT_SIZE, layout.usable_end());
    let usable = layout.usable_end();
    let window = vm.alloc_va(usable, usable.next_power_of_two());
    let mut alloc_table = || general.alloc(PAGE, PAGE);
    vm.map(&mut hw, window, BOOT_SIZE, Target::Vram(0), true, &mut alloc_table)?;
    let vram = GpuVram::new(general, vm, window);
    gmc::flush_tlb(&mut hw, Hub::Gc, true)?;
    gmc::flush_tlb(&mut hw, Hub::Mm, true)?;

    smu::set_clocks(&mut hw, smu::Level::Highest)?;
    hw.step = "clock gating";
    soc::clockgating(&mut hw)?;
    gfx::clockgating(&mut hw)?;
    hw.step = "boot";
    hw.write(reg7, VERSION)?;
    hw.write(reg6, 1)?;

    let boot_memory = BootMemory { root_page_table, scratch_page, dummy_page, ih, psp, smu_driver_table, mqd };
    Ok(Booted { kind, discovery: disc, layout, boot_memory, vram, ucode_starts })
}

/// Ends a session (tinygrad `AMDev.fini`): SDMA queue 0 down and the engine reset, compute queues dequeued,
/// clocks to their lowest level, and `SCRATCH_REG6` = `err_state` — 0 lets the next boot be partial.
pub fn fini(bus: &mut dyn GpuBus, booted: &Booted, err_state: bool) -> Result<(), BootError> {
    let mut hw = Hw { bus, disc: &booted.discovery, step: "fini" };
    sdma::fini(&mut hw)?;
    gfx::dequeue_hqds(&mut hw, err_state)?;
    smu::set_clocks(&mut hw, smu::Level::Lowest)?;
    hw.step = "fini";
    let reg6 = gc!(booted.card(), m => reg!(HwIp::Gc, m::SCRATCH_REG6));
    hw.write(reg6, u32::from(err_state))
}

/// Restarts the compute engine after a hang without a full boot (tinygrad `AMDev.recover`): the compute queues
/// are dequeued and MEC is reset and started again; the caller sets its queues up anew.
pub fn recover(bus: &mut dyn GpuBus, booted: &Booted) -> Result<(), BootError> {
    let mut hw = Hw { bus, disc: &booted.discovery, step: "GFX recovery" };
    gfx::reset_mec(&mut hw, &booted.ucode_starts)
}

#[cfg(test)]
mod test_bus;
#[cfg(test)]
mod tests;
