//! GFX and SDMA bring-up state and queue activation from registers (tinygrad `AM_GFX`, `AM_SDMA`).
//!
//! - RLC: `RLC_RLCS_BOOTLOAD_STATUS.bootload_complete` (bit 31) and `CP_STAT` = 0 only after the PSP's
//!   AUTOLOAD_RLC succeeded with the GC images loaded.
//! - MEC: runs when `CP_MEC_RS64_CNTL` has halt (bit 30) and pipe 0 reset (bit 16) clear and pipe 0 active
//!   (bit 26) set, after the autoload, with `CP_MEC_RS64_PRGRM_CNTR_START(_HI)` equal to the MEC firmware's
//!   `ucode_start_addr >> 2`. `GRBM_SOFT_RESET.soft_reset_cp` halts it and drops its queues.
//! - Compute HQD (banked by `GRBM_GFX_CNTL` me/pipe/queue): `CP_HQD_ACTIVE` = 1 on ME 1 creates a PM4 queue
//!   from PQ_BASE(_HI) << 8, PQ_CONTROL.queue_size (ring = 4 << (queue_size + 1) bytes), the rptr report
//!   address and PQ_DOORBELL_CONTROL (offset bits 2-27, in dwords; enable bit 30) — refused (a
//!   fault, ACTIVE stays 0) unless the MEC runs. `CP_HQD_DEQUEUE_REQUEST` != 0 removes it.
//! - SDMA0: the engine runs when `SDMA0_F32_CNTL`/`SDMA0_MCU_CNTL.halt` is clear, after the autoload with the
//!   SDMA image loaded. `SDMA0_QUEUE0_RB_CNTL.rb_enable` creates an SDMA queue from RB_BASE(_HI) << 8,
//!   rb_size (ring = 4 << rb_size bytes), the rptr writeback address and `DOORBELL`
//!   (enable bit 28) / `DOORBELL_OFFSET` (bits 2-27, dwords) — refused unless the engine runs.
//!   `GRBM_SOFT_RESET.soft_reset_sdma0` (bit 23) halts the engine's queue.

use super::board::Ip;
use super::fwfiles;
use super::mem::{Fabric, Hub};
use super::psp::fw_type;
use super::queue::{Kind, Queue};
use super::regs::Reg;
use super::Gpu;
use std::collections::HashMap;

const MEC_PIPE0_RESET: u32 = 1 << 16;
const MEC_PIPE0_ACTIVE: u32 = 1 << 26;
const MEC_HALT: u32 = 1 << 30;
const SOFT_RESET_CP: u32 = 1 << 0;
const SOFT_RESET_CPC: u32 = 1 << 18;
const SOFT_RESET_SDMA0: u32 = 1 << 23;
const RB_ENABLE: u32 = 1;
const SDMA_DOORBELL_ENABLE: u32 = 1 << 28;
const HQD_DOORBELL_ENABLE: u32 = 1 << 30;

/// The HQD registers banked by GRBM_GFX_CNTL.
const HQD_REGS: [Reg; 15] = [
    Reg::MqdBaseAddr,
    Reg::HqdActive,
    Reg::HqdPqBase,
    Reg::HqdPqBaseHi,
    Reg::HqdPqRptr,
    Reg::HqdRptrReportAddr,
    Reg::HqdRptrReportAddrHi,
    Reg::HqdWptrPollAddr,
    Reg::HqdWptrPollAddrHi,
    Reg::HqdDoorbellControl,
    Reg::HqdPqControl,
    Reg::HqdDequeueRequest,
    Reg::HqdPqWptrLo,
    Reg::HqdPqWptrHi,
    Reg::SpiComputeQueueReset,
];

/// (me, pipe, queue) from GRBM_GFX_CNTL.
type HqdSel = (u32, u32, u32);

#[derive(Debug, Default)]
pub struct GfxState {
    pub mec_running: bool,
    pub sdma_running: bool,
    hqd: HashMap<HqdSel, HashMap<Reg, u32>>,
}

impl Gpu {
    fn hqd_sel(&self) -> HqdSel {
        let v = self.get(Reg::GrbmGfxCntl);
        ((v >> 2) & 3, v & 3, (v >> 8) & 7)
    }

    fn hqd_get(&self, reg: Reg) -> u32 {
        self.gfx.hqd.get(&self.hqd_sel()).and_then(|m| m.get(&reg)).copied().unwrap_or(0)
    }

    fn hqd_set(&mut self, reg: Reg, v: u32) {
        let sel = self.hqd_sel();
        self.gfx.hqd.entry(sel).or_default().insert(reg, v);
    }

    pub(super) fn gfx_read(&self, reg: Reg) -> Option<u32> {
        Some(match reg {
            Reg::RlcBootloadStatus => u32::from(self.psp.autoloaded) << 31,
            Reg::CpStat => {
                if self.psp.autoloaded {
                    0
                } else {
                    0x8000_0000
                }
            }
            r if HQD_REGS.contains(&r) => self.hqd_get(r),
            _ => return None,
        })
    }

    /// Handles a write to a GFX/SDMA register with behaviour; false when `reg` has none here.
    pub(super) fn gfx_write(&mut self, reg: Reg, value: u32, fabric: &mut dyn Fabric) -> bool {
        match reg {
            // The RLC acknowledges a safe-mode request at once: CMD (bit 0) reads back clear.
            Reg::RlcSafeMode => self.set(reg, value & !1),
            Reg::MecRs64Cntl => {
                self.set(reg, value);
                self.mec_control(value);
            }
            Reg::GrbmSoftReset => {
                self.set(reg, value);
                if value & (SOFT_RESET_CP | SOFT_RESET_CPC) != 0 {
                    self.gfx.mec_running = false;
                    self.queues.retain(|q| q.kind != Kind::Pm4);
                    for bank in self.gfx.hqd.values_mut() {
                        bank.insert(Reg::HqdActive, 0);
                    }
                }
                if value & SOFT_RESET_SDMA0 != 0 {
                    self.queues.retain(|q| q.kind != Kind::Sdma);
                    let cntl = self.get(Reg::SdmaRbCntl) & !RB_ENABLE;
                    self.set(Reg::SdmaRbCntl, cntl);
                }
            }
            Reg::HqdActive => {
                if value & 1 == 0 {
                    self.hqd_set(reg, 0);
                } else {
                    self.activate_hqd(fabric);
                }
            }
            Reg::HqdDequeueRequest => {
                if value != 0 {
                    let doorbell = self.hqd_doorbell();
                    self.queues.retain(|q| !(q.kind == Kind::Pm4 && Some(q.doorbell) == doorbell));
                    self.hqd_set(Reg::HqdActive, 0);
                }
            }
            r if HQD_REGS.contains(&r) => self.hqd_set(r, value),
            Reg::SdmaEngineCntl => {
                self.set(reg, value);
                self.sdma_control(value);
            }
            Reg::SdmaRbCntl => {
                self.set(reg, value);
                if value & RB_ENABLE != 0 {
                    self.activate_sdma(fabric);
                } else {
                    self.queues.retain(|q| q.kind != Kind::Sdma);
                }
            }
            _ => return false,
        }
        true
    }

    fn mec_control(&mut self, v: u32) {
        let run = v & MEC_HALT == 0 && v & MEC_PIPE0_RESET == 0 && v & MEC_PIPE0_ACTIVE != 0;
        if !run {
            self.gfx.mec_running = false;
            return;
        }
        if !self.psp.autoloaded {
            return self.fault("MEC", None, "un-halted before the RLC autoload completed");
        }
        let name = format!("gc_{}_mec.bin", self.board.file_stem(Ip::Gc));
        let want = match self.psp.files.get(&name).and_then(|f| fwfiles::rs64_start(&name, f)) {
            Ok(s) => s >> 2,
            Err(e) => return self.fault("MEC", None, e),
        };
        let pc = u64::from(self.get(Reg::MecRs64PcStart)) | u64::from(self.get(Reg::MecRs64PcStartHi)) << 32;
        if pc != want {
            return self.fault("MEC", None, format!("program counter start {pc:#x}, the firmware's is {want:#x}"));
        }
        self.gfx.mec_running = true;
    }

    fn sdma_control(&mut self, v: u32) {
        if v & 1 != 0 {
            self.gfx.sdma_running = false;
            return;
        }
        if !self.psp.autoloaded || !self.psp.loaded.contains(&fw_type::SDMA_TH0) {
            return self.fault("SDMA0", None, "un-halted before its firmware was loaded and autoloaded");
        }
        self.gfx.sdma_running = true;
    }

    fn hqd_doorbell(&self) -> Option<u32> {
        let c = self.hqd_get(Reg::HqdDoorbellControl);
        (c & HQD_DOORBELL_ENABLE != 0).then_some(((c >> 2) & 0x3FF_FFFF) * 4)
    }

    fn activate_hqd(&mut self, fabric: &mut dyn Fabric) {
        let (me, pipe, queue) = self.hqd_sel();
        let name = format!("compute queue (ME{me} pipe {pipe} queue {queue})");
        if me != 1 {
            return self.fault(name, None, "CP_HQD_ACTIVE on an ME that is not a MEC");
        }
        if !self.gfx.mec_running {
            return self.fault(name, None, "CP_HQD_ACTIVE=1 refused: the MEC is not running");
        }
        let Some(doorbell) = self.hqd_doorbell() else {
            return self.fault(name, None, "CP_HQD_ACTIVE=1 refused: PQ_DOORBELL_CONTROL has no enabled doorbell");
        };
        let base = (u64::from(self.hqd_get(Reg::HqdPqBase)) | u64::from(self.hqd_get(Reg::HqdPqBaseHi)) << 32) << 8;
        let qsize = self.hqd_get(Reg::HqdPqControl) & 0x3F;
        let bytes = 4u64 << (qsize + 1);
        if let Err(e) = self.mem(Hub::Gc, fabric, self.now).resolve(base, bytes as usize) {
            return self.fault(name, None, format!("CP_HQD_ACTIVE=1 refused: ring {e}"));
        }
        let rptr_report =
            u64::from(self.hqd_get(Reg::HqdRptrReportAddr)) | u64::from(self.hqd_get(Reg::HqdRptrReportAddrHi)) << 32;
        let rptr = u64::from(self.hqd_get(Reg::HqdPqRptr)) * 4;
        self.queues.retain(|q| q.doorbell != doorbell);
        self.queues.push(Queue::new(
            Kind::Pm4,
            format!("compute queue (doorbell {doorbell:#x})"),
            base,
            bytes,
            rptr,
            doorbell,
            rptr_report,
        ));
        self.hqd_set(Reg::HqdActive, 1);
    }

    fn activate_sdma(&mut self, fabric: &mut dyn Fabric) {
        let name = "SDMA0 queue 0";
        if !self.gfx.sdma_running {
            return self.fault(name, None, "RB_CNTL.rb_enable refused: the SDMA engine is not running");
        }
        let db = self.get(Reg::SdmaDoorbell);
        if db & SDMA_DOORBELL_ENABLE == 0 {
            return self.fault(name, None, "RB_CNTL.rb_enable refused: the queue's DOORBELL is not enabled");
        }
        let doorbell = ((self.get(Reg::SdmaDoorbellOffset) >> 2) & 0x3FF_FFFF) * 4;
        let base = (u64::from(self.get(Reg::SdmaRbBase)) | u64::from(self.get(Reg::SdmaRbBaseHi)) << 32) << 8;
        let rb_size = (self.get(Reg::SdmaRbCntl) >> 1) & 0x1F;
        let bytes = 4u64 << rb_size;
        if let Err(e) = self.mem(Hub::Gc, fabric, self.now).resolve(base, bytes as usize) {
            return self.fault(name, None, format!("RB_CNTL.rb_enable refused: ring {e}"));
        }
        let rptr_addr = u64::from(self.get(Reg::SdmaRptrAddrLo)) | u64::from(self.get(Reg::SdmaRptrAddrHi)) << 32;
        let rptr = u64::from(self.get(Reg::SdmaRbRptr)) | u64::from(self.get(Reg::SdmaRbRptrHi)) << 32;
        self.queues.retain(|q| q.kind != Kind::Sdma);
        self.queues.push(Queue::new(
            Kind::Sdma,
            format!("SDMA0 queue 0 (doorbell {doorbell:#x})"),
            base,
            bytes,
            rptr,
            doorbell,
            rptr_addr,
        ));
    }
}
