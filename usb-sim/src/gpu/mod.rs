//! The simulated AMD GPU behind the simulated bridge: a register-level model of a gfx1100 (Navi31) or gfx1201
//! (Navi48) board, decoded with its own tables ([`regs`], [`board`]) — never pilot's driver's.
//!
//! - BAR5 dword registers ([`Gpu::host_read_reg`], [`Gpu::host_write_reg`]): `RCC_CONFIG_MEMSIZE` (0xDE3),
//!   MM_INDEX/MM_DATA into VRAM, the RSMU index/data pair for registers past BAR5, and per-block behaviour
//!   (`psp`, `smu`, `gfx`); other registers are plain storage.
//! - BAR2 doorbells ([`Gpu::host_write_doorbell`]) run the queue they belong to (`queue`, with the [`pm4`] and
//!   [`sdma`] executors; DISPATCH_DIRECT on the RDNA3 emulator in `dispatch`).
//! - At power-on the IP discovery table ([`discovery`]) is written at VRAM end - 64 KB.
//! - GPU-side memory goes through [`mem`] (address translation with `GMMU=0`); the host's BAR0 writes reach it only
//!   through an HDP flush ([`hdp`]).
//!
//! Engine faults are recorded ([`Gpu::faults`]) with the engine, the place and the reason. Kernels are confined
//! to the step's memory: the GPU's own (page tables, rings, firmware) is refused to them ([`confine`]). A
//! dispatch with scratch gets the region its registers describe, checked before it runs ([`scratch`]).

pub mod board;
pub mod coherence;
mod confine;
pub mod discovery;
mod dispatch;
mod fwfiles;
mod gfx;
pub mod hdp;
mod kernel_mem;
pub mod mem;
pub mod pm4;
pub mod psp;
mod queue;
pub mod regs;
mod scratch;
pub mod sdma;
pub mod smu;

use super::timing::Timing;
use board::Board;
#[cfg(test)]
use board::Ip;
use mem::{Aperture, Context, Fabric, Hub, HubView, Mem, FB_BASE};
use regs::{Reg, RegMap};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A fault an engine recorded: which engine, where, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuFault {
    /// "PSP", "SMU", "compute queue (doorbell 0x18)", "SDMA0 queue 0", ...
    pub engine: String,
    /// Byte offset of the packet in its ring or indirect buffer, when the fault is in a packet.
    pub offset: Option<u64>,
    pub reason: String,
}

impl std::fmt::Display for GpuFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} at packet offset {o:#x}: {}", self.engine, self.reason),
            None => write!(f, "{}: {}", self.engine, self.reason),
        }
    }
}

/// The register value `*MC_VM_FB_LOCATION_BASE` reports.
const FB_LOCATION_BASE: u32 = (FB_BASE >> 24) as u32;
/// What `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` reads: the byte offset in BAR5 of the register a write to which flushes
/// HDP ([`hdp`]): Linux `soc21.c` `soc21_common_early_init` sets `rmmio_remap.reg_offset` to
/// `MMIO_REG_HOLE_OFFSET`, 0x80000 - PAGE_SIZE.
pub const HDP_FLUSH_REMAP_BYTES: u32 = 0x7_F000;

/// What the emulator ran, over every dispatch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dispatched {
    pub dispatches: u64,
    pub instructions: u64,
}

/// The simulated GPU.
pub struct Gpu {
    pub board: Board,
    map: RegMap,
    /// Plain storage for every register without behaviour (and the stored half of those with some).
    regs: HashMap<u32, u32>,
    vram_bytes: u64,
    doorbells: HashMap<u32, u32>,
    faults: Vec<GpuFault>,
    psp: psp::PspState,
    smu: smu::SmuState,
    gfx: gfx::GfxState,
    queues: Vec<queue::Queue>,
    timing: Timing,
    /// Modelled time of the current host access.
    now: Duration,
    kernels: HashMap<u64, (Vec<u8>, Arc<pilot_rdna3::CodeObjectKernel>)>,
    /// Each queue's (ring GPU address, ring bytes, rptr write-back address), as of the last run of the queues:
    /// kernels may not touch them ([`confine`]).
    rings: Vec<(u64, u64, u64)>,
    dispatched: Dispatched,
    firmware_dir: PathBuf,
    /// Which dispatch stored where, for the cache model between dispatches.
    coherence: coherence::Coherence,
    /// Which scratch slots waves get and what they leave there ([`scratch`]), seeded.
    scratch_draws: scratch::Draws,
    /// CP DMA copies (DMA_DATA without CP_SYNC) still in flight: destination and bytes ([`pm4`]).
    cp_dma: Vec<(u64, Vec<u8>)>,
    /// The GC hub's TLB as kernels see it: every VRAM mapping a dispatch could use since the last invalidation
    /// of VMID 0 ([`confine`]).
    kernel_tlb: Vec<(u64, u64, u64)>,
}

impl Gpu {
    /// A GPU at power-on, checking firmware against the files in `firmware_dir`, its random choices drawn from
    /// `seed`. The caller writes [`Gpu::discovery_table`] into VRAM.
    pub fn new(board: Board, vram_bytes: u64, timing: Timing, firmware_dir: PathBuf, seed: u64) -> Gpu {
        let mut gpu = Gpu {
            board,
            map: RegMap::new(board),
            regs: HashMap::new(),
            vram_bytes,
            doorbells: HashMap::new(),
            faults: Vec::new(),
            psp: psp::PspState::new(fwfiles::Files::new(firmware_dir.clone())),
            smu: smu::SmuState::default(),
            gfx: gfx::GfxState::default(),
            queues: Vec::new(),
            timing,
            now: Duration::ZERO,
            kernels: HashMap::new(),
            rings: Vec::new(),
            dispatched: Dispatched::default(),
            firmware_dir,
            coherence: coherence::Coherence::default(),
            scratch_draws: scratch::Draws::new(seed),
            cp_dma: Vec::new(),
            kernel_tlb: Vec::new(),
        };
        // The AGP apertures are closed (BOT > TOP) until the driver opens them.
        gpu.set(Reg::MmAgpBot, 0xFF_FFFF);
        gpu.set(Reg::GcAgpBot, 0xFF_FFFF);
        gpu
    }

    /// Mode-1 reset: every block back to its power-on state (sOS stopped, SMU without firmware, no RLC
    /// autoload, MEC and SDMA halted, no queues, registers cleared). VRAM keeps its contents; the discovery
    /// table is written again. Faults recorded so far are kept.
    fn mode1_reset(&mut self, fabric: &mut dyn Fabric) {
        fabric.hdp_flush();
        let faults = std::mem::take(&mut self.faults);
        let (dispatched, draws) = (self.dispatched, self.scratch_draws);
        *self = Gpu::new(self.board, self.vram_bytes, self.timing, self.firmware_dir.clone(), 0);
        self.faults = faults;
        self.dispatched = dispatched;
        self.scratch_draws = draws;
        let (at, table) = self.discovery_table();
        fabric.vram()[at..at + table.len()].copy_from_slice(&table);
    }

    /// When the GPU's engines finish the work they were given (modelled).
    pub fn idle_at(&self) -> Duration {
        self.queues.iter().filter(|q| !q.stopped).map(|q| q.busy_until).max().unwrap_or(Duration::ZERO)
    }

    pub fn dispatched(&self) -> Dispatched {
        self.dispatched
    }

    /// Runs stalled queues again (after a host write that may satisfy what they wait for).
    pub fn poll(&mut self, now: Duration, fabric: &mut dyn Fabric) {
        self.now = now;
        if self.queues.iter().any(|q| !q.stopped && (q.rptr < q.wptr || q.ib.is_some())) {
            self.run_queues(fabric);
        }
    }

    /// The discovery table and the VRAM offset it goes to.
    pub fn discovery_table(&self) -> (usize, Vec<u8>) {
        ((self.vram_bytes - discovery::FROM_END) as usize, discovery::table(self.board))
    }

    pub fn faults(&self) -> &[GpuFault] {
        &self.faults
    }

    fn fault(&mut self, engine: impl Into<String>, offset: Option<u64>, reason: impl Into<String>) {
        let f = GpuFault { engine: engine.into(), offset, reason: reason.into() };
        log::debug!("sim GPU fault: {f}");
        self.faults.push(f);
    }

    fn stored(&self, index: u32) -> u32 {
        self.regs.get(&index).copied().unwrap_or(0)
    }

    fn get(&self, reg: Reg) -> u32 {
        self.stored(self.map.index(reg))
    }

    fn set(&mut self, reg: Reg, v: u32) {
        let i = self.map.index(reg);
        self.regs.insert(i, v);
    }

    fn get64(&self, lo: Reg, hi: Reg) -> u64 {
        u64::from(self.get(lo)) | u64::from(self.get(hi)) << 32
    }

    /// How `hub` translates, from its registers.
    fn hub_view(&self, hub: Hub) -> HubView {
        use Reg::*;
        let r = match hub {
            Hub::Mm => [
                MmApertureLow,
                MmApertureHigh,
                MmAgpBot,
                MmAgpTop,
                MmAgpBase,
                MmCtx0Cntl,
                MmPtStartLo,
                MmPtStartHi,
                MmPtEndLo,
                MmPtEndHi,
                MmPtBaseLo,
                MmPtBaseHi,
            ],
            Hub::Gc => [
                GcApertureLow,
                GcApertureHigh,
                GcAgpBot,
                GcAgpTop,
                GcAgpBase,
                GcCtx0Cntl,
                GcPtStartLo,
                GcPtStartHi,
                GcPtEndLo,
                GcPtEndHi,
                GcPtBaseLo,
                GcPtBaseHi,
            ],
        };
        let aperture = Aperture::from_regs(self.get(r[0]), self.get(r[1]));
        let (bot, top) = (u64::from(self.get(r[2]) & 0xFF_FFFF), u64::from(self.get(r[3]) & 0xFF_FFFF));
        let agp =
            (bot <= top).then(|| (bot << 24, (top << 24) | 0xFF_FFFF, u64::from(self.get(r[4]) & 0xFF_FFFF) << 24));
        let cntl = self.get(r[5]);
        let context = (cntl & 1 != 0).then(|| Context {
            start: self.get64(r[6], r[7]) << 12,
            end: (self.get64(r[8], r[9]) << 12) | 0xFFF,
            root: self.get64(r[10], r[11]) & 0x0000_FFFF_FFFF_F000,
            levels: ((cntl >> 1) & 3) as usize + 1,
            gfx12: self.board == Board::Navi48,
        });
        HubView { aperture, agp, context }
    }

    /// An engine's view of memory through `hub`.
    fn mem<'a>(&self, hub: Hub, fabric: &'a mut dyn Fabric, at: Duration) -> Mem<'a> {
        Mem { hub: self.hub_view(hub), fabric, at }
    }

    /// MM_INDEX/MM_INDEX_HI: the VRAM byte address MM_DATA reaches (bit 31 of MM_INDEX selects VRAM).
    fn mm_address(&self) -> Option<usize> {
        let index = self.get(Reg::MmIndex);
        let addr = (u64::from(self.get(Reg::MmIndexHi)) << 31) | u64::from(index & 0x7FFF_FFFF);
        (index & 0x8000_0000 != 0 && addr + 4 <= self.vram_bytes && addr.is_multiple_of(4)).then_some(addr as usize)
    }

    /// A host read of register `index` (BAR5 dword index) at modelled time `now`.
    pub fn host_read_reg(&mut self, index: u32, now: Duration, fabric: &mut dyn Fabric) -> u32 {
        self.now = now;
        self.read_reg(index, fabric)
    }

    /// A host write of register `index` at modelled time `now`.
    pub fn host_write_reg(&mut self, index: u32, value: u32, now: Duration, fabric: &mut dyn Fabric) {
        self.now = now;
        self.write_reg(index, value, fabric)
    }

    /// A host write of the doorbell dword at BAR2 byte offset `byte` at modelled time `now`; the queue whose
    /// doorbell it is runs.
    pub fn host_write_doorbell(&mut self, byte: u32, value: u32, now: Duration, fabric: &mut dyn Fabric) {
        self.now = now;
        self.doorbells.insert(byte, value);
        self.ring_doorbell(byte, fabric);
    }

    fn read_reg(&mut self, index: u32, fabric: &mut dyn Fabric) -> u32 {
        let Some(reg) = self.map.reg(index) else { return self.stored(index) };
        if let Some(v) = self.psp_read(reg).or_else(|| self.gfx_read(reg)) {
            return v;
        }
        match reg {
            Reg::ConfigMemsize => (self.vram_bytes >> 20) as u32,
            Reg::MmData => match self.mm_address() {
                Some(a) => u32::from_le_bytes(fabric.vram()[a..a + 4].try_into().expect("4 bytes")),
                None => 0xFFFF_FFFF,
            },
            Reg::RsmuData => {
                let target = self.get(Reg::RsmuIndex) / 4;
                if target == self.map.index(Reg::RsmuData) {
                    return 0;
                }
                self.read_reg(target, fabric)
            }
            Reg::MmFbBase | Reg::GcFbBase => FB_LOCATION_BASE,
            Reg::MmFbTop | Reg::GcFbTop => ((FB_BASE + self.vram_bytes - 1) >> 24) as u32,
            Reg::RemapHdpMemFlushCntl => HDP_FLUSH_REMAP_BYTES,
            // Invalidations complete at once: the semaphore is free, every VMID acknowledged.
            Reg::MmInvSem => 1,
            Reg::MmInvAck | Reg::GcInvAck => 0xFFFF,
            _ => self.stored(index),
        }
    }

    fn write_reg(&mut self, index: u32, value: u32, fabric: &mut dyn Fabric) {
        if index == HDP_FLUSH_REMAP_BYTES / 4 {
            fabric.hdp_flush();
            return;
        }
        let Some(reg) = self.map.reg(index) else {
            self.regs.insert(index, value);
            return;
        };
        if self.psp_write(reg, value, fabric)
            || self.smu_write(reg, value, fabric)
            || self.gfx_write(reg, value, fabric)
        {
            return;
        }
        match reg {
            Reg::ConfigMemsize | Reg::MmFbBase | Reg::GcFbBase | Reg::MmFbTop | Reg::GcFbTop => {}
            Reg::MmData => {
                if let Some(a) = self.mm_address() {
                    fabric.vram()[a..a + 4].copy_from_slice(&value.to_le_bytes());
                }
            }
            Reg::RsmuData => {
                let target = self.get(Reg::RsmuIndex) / 4;
                if target != index {
                    self.write_reg(target, value, fabric);
                }
            }
            // PER_VMID_INVALIDATE_REQ bit 0: VMID 0's translations are gone.
            Reg::GcInvReq => {
                if value & 1 != 0 {
                    self.kernel_tlb.clear();
                }
                self.regs.insert(index, value);
            }
            // A flush request completes at once: DONE shows the requested bits.
            Reg::HdpFlushReq => {
                fabric.hdp_flush();
                self.set(Reg::HdpFlushReq, value);
                self.set(Reg::HdpFlushDone, value);
            }
            _ => {
                self.regs.insert(index, value);
            }
        }
    }

    /// A host read of a doorbell dword (what was last written).
    pub fn read_doorbell(&self, byte: u32) -> u32 {
        self.doorbells.get(&byte).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_register_sits_inside_bar5() {
        for board in [Board::Navi31, Board::Navi48] {
            for &(reg, ip, seg, off, _) in regs::rows(board) {
                let at = regs::absolute(board, ip, seg, off);
                let direct = at < (2 << 20) / 4;
                // Only the RSMU pair itself must be direct; the model serves any index either way.
                assert!(direct || !matches!(reg, Reg::RsmuIndex | Reg::RsmuData), "{reg:?} at {at:#x}");
            }
            assert_eq!(regs::absolute(board, Ip::Nbio, 2, 0xC3), 0xDE3, "RCC_CONFIG_MEMSIZE is fixed at 0xDE3");
            assert_eq!(board.bases(Ip::Gc)[0] + 0x1BAC - 0x2C00, 0x20C, "COMPUTE_PGM_LO is SH register 0x20C");
        }
    }
}
