//! The SMU (MP1) mailbox: message `C2PMSG_66`, argument `_82`, response `_90`; the debug mailbox `_75`/`_53`/`_54`
//! (tinygrad `AM_SMU._send_msg`). It answers only once its firmware was loaded through the PSP (`LOAD_IP_FW`
//! of type SMU); before that a message gets no response. Messages are Linux `smu_v13_0_0_ppsmc.h` /
//! `smu_v14_0_2_ppsmc.h` numbers (the same for the ones modelled); others get `UnknownCmd`.

use super::mem::Fabric;
use super::psp::fw_type;
use super::regs::Reg;
use super::Gpu;

pub const RESULT_OK: u32 = 1;
pub const RESULT_FAILED: u32 = 0xFF;
pub const RESULT_UNKNOWN_CMD: u32 = 0xFE;

pub const MSG_TEST_MESSAGE: u32 = 0x1;
pub const MSG_GET_SMU_VERSION: u32 = 0x2;
pub const MSG_ENABLE_ALL_SMU_FEATURES: u32 = 0x6;
pub const MSG_SET_DRIVER_DRAM_ADDR_HIGH: u32 = 0xE;
pub const MSG_SET_DRIVER_DRAM_ADDR_LOW: u32 = 0xF;
pub const MSG_TRANSFER_TABLE_SMU2DRAM: u32 = 0x12;
pub const MSG_SET_SOFT_MIN_BY_FREQ: u32 = 0x19;
pub const MSG_SET_SOFT_MAX_BY_FREQ: u32 = 0x1A;
pub const MSG_GET_DPM_FREQ_BY_INDEX: u32 = 0x1F;
/// Only in the v13.0.0 table.
pub const MSG_MODE1_RESET: u32 = 0x2F;
pub const MSG_SET_PPT_LIMIT: u32 = 0x32;
/// The debug mailbox's Mode1Reset (tinygrad `AM_SMU.mode1_reset`: MP0 13.0.0 and 14.x).
pub const DEBUG_MSG_MODE1_RESET: u32 = 2;

/// DPM levels per clock (PPCLK_GFXCLK 0, SOCCLK 1, UCLK 2, FCLK 3), in MHz.
const DPM: [&[u32]; 4] = [&[500, 1500, 2500], &[500, 960, 1200], &[96, 456, 1249], &[400, 1400, 2000]];

#[derive(Debug, Default)]
pub struct SmuState {
    dram_hi: Option<u32>,
    dram_lo: Option<u32>,
    pub features_enabled: bool,
    /// Current soft min/max per clock, MHz.
    pub clocks: [(u32, u32); 4],
    pub messages: u64,
}

/// What a message did.
pub(super) enum SmuOutcome {
    Respond(u32, Option<u32>),
    Mode1Reset,
}

impl Gpu {
    pub(super) fn smu_running(&self) -> bool {
        self.psp.loaded.contains(&fw_type::SMU)
    }

    /// Handles a write to an SMU mailbox register; false when `reg` is not the SMU's.
    pub(super) fn smu_write(&mut self, reg: Reg, value: u32, fabric: &mut dyn Fabric) -> bool {
        let debug = match reg {
            Reg::SmuMsg => false,
            Reg::SmuDbgMsg => true,
            _ => return false,
        };
        self.set(reg, value);
        if !self.smu_running() {
            self.fault("SMU", None, format!("message {value:#x} before the SMU firmware was loaded through the PSP"));
            return true;
        }
        self.smu.messages += 1;
        let arg = self.get(if debug { Reg::SmuDbgArg } else { Reg::SmuArg });
        let outcome = if debug { self.smu_debug(value) } else { self.smu_message(value, arg) };
        match outcome {
            SmuOutcome::Respond(resp, out) => {
                if resp != RESULT_OK {
                    self.fault("SMU", None, format!("message {value:#x} (arg {arg:#x}) answered {resp:#x}"));
                }
                if let Some(o) = out {
                    self.set(if debug { Reg::SmuDbgArg } else { Reg::SmuArg }, o);
                }
                self.set(if debug { Reg::SmuDbgResp } else { Reg::SmuResp }, resp);
            }
            SmuOutcome::Mode1Reset => {
                self.mode1_reset(fabric);
                self.set(if debug { Reg::SmuDbgResp } else { Reg::SmuResp }, RESULT_OK);
            }
        }
        true
    }

    fn smu_debug(&mut self, msg: u32) -> SmuOutcome {
        match msg {
            DEBUG_MSG_MODE1_RESET => SmuOutcome::Mode1Reset,
            _ => SmuOutcome::Respond(RESULT_UNKNOWN_CMD, None),
        }
    }

    fn smu_message(&mut self, msg: u32, arg: u32) -> SmuOutcome {
        use SmuOutcome::Respond;
        match msg {
            MSG_TEST_MESSAGE => Respond(RESULT_OK, Some(arg.wrapping_add(1))),
            MSG_GET_SMU_VERSION => {
                let name = format!("smu_{}.bin", self.board.file_stem(super::board::Ip::Mp1));
                let v =
                    self.psp.files.get(&name).and_then(|f| super::fwfiles::common(&name, f)).map(|c| c.ucode_version);
                Respond(RESULT_OK, Some(v.unwrap_or(0)))
            }
            MSG_SET_DRIVER_DRAM_ADDR_HIGH => {
                self.smu.dram_hi = Some(arg);
                Respond(RESULT_OK, None)
            }
            MSG_SET_DRIVER_DRAM_ADDR_LOW => {
                self.smu.dram_lo = Some(arg);
                Respond(RESULT_OK, None)
            }
            MSG_ENABLE_ALL_SMU_FEATURES => {
                if self.smu.dram_hi.is_none() || self.smu.dram_lo.is_none() {
                    return Respond(RESULT_FAILED, None);
                }
                self.smu.features_enabled = true;
                Respond(RESULT_OK, None)
            }
            MSG_GET_DPM_FREQ_BY_INDEX => {
                let (clk, idx) = ((arg >> 16) as usize, arg & 0xFFFF);
                let Some(levels) = DPM.get(clk) else { return Respond(RESULT_FAILED, None) };
                match idx {
                    0xFF => Respond(RESULT_OK, Some(levels.len() as u32)),
                    i => match levels.get(i as usize) {
                        Some(&f) => Respond(RESULT_OK, Some(f)),
                        None => Respond(RESULT_FAILED, None),
                    },
                }
            }
            MSG_SET_SOFT_MIN_BY_FREQ | MSG_SET_SOFT_MAX_BY_FREQ => {
                let (clk, f) = ((arg >> 16) as usize, arg & 0xFFFF);
                if !self.smu.features_enabled || clk >= DPM.len() {
                    return Respond(RESULT_FAILED, None);
                }
                let levels = DPM[clk];
                let f = if f == 0xFFFF { levels[levels.len() - 1] } else { f };
                let c = &mut self.smu.clocks[clk];
                if msg == MSG_SET_SOFT_MIN_BY_FREQ {
                    c.0 = f;
                } else {
                    c.1 = f;
                }
                Respond(RESULT_OK, None)
            }
            MSG_TRANSFER_TABLE_SMU2DRAM | MSG_SET_PPT_LIMIT => {
                if self.smu.features_enabled {
                    Respond(RESULT_OK, None)
                } else {
                    Respond(RESULT_FAILED, None)
                }
            }
            MSG_MODE1_RESET if self.board.mp0_major() == 13 => SmuOutcome::Mode1Reset,
            _ => Respond(RESULT_UNKNOWN_CMD, None),
        }
    }
}
