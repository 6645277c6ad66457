//! SMU, the power manager, through its mailbox (tinygrad `ip.py` `AM_SMU`; message ids from Linux
//! `smu_v13_0_0_ppsmc.h` / `smu_v14_0_2_ppsmc.h`, equal on both cards): response register ← 0, argument,
//! message, then the response turns 1.

use super::hw::Hw;
use super::BootError;
use crate::regs::SmuMailbox;
use std::time::Duration;

/// `PPSMC_MSG_*` (the same ids on SMU 13.0.0 and 14.0.2/3).
pub mod msg {
    pub const GET_SMU_VERSION: u32 = 0x2;
    pub const ENABLE_ALL_SMU_FEATURES: u32 = 0x6;
    pub const SET_DRIVER_DRAM_ADDR_HIGH: u32 = 0xe;
    pub const SET_DRIVER_DRAM_ADDR_LOW: u32 = 0xf;
    pub const SET_SOFT_MIN_BY_FREQ: u32 = 0x19;
    pub const SET_SOFT_MAX_BY_FREQ: u32 = 0x1a;
    pub const GET_DPM_FREQ_BY_INDEX: u32 = 0x1f;
    /// On the debug mailbox (`DEBUGSMC_MSG_Mode1Reset`): MP0 13.0.0 and ≥ 14 reset this way.
    pub const DEBUG_MODE1_RESET: u32 = 2;
}

/// `PPCLK_*`: the clocks set to one DPM level.
pub const CLOCKS: [(u32, &str); 4] = [(2, "UCLK"), (3, "FCLK"), (1, "SOCCLK"), (0, "GFXCLK")];
/// The SMU's default answer time (tinygrad `_send_msg`).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `msg` with `arg` and waits for the answer; returns the argument register afterwards (the answer's value).
pub fn send(hw: &mut Hw, mailbox: SmuMailbox, msg: u32, arg: u32, timeout: Duration) -> Result<u32, BootError> {
    hw.write(mailbox.resp, 0)?;
    hw.write(mailbox.arg, arg)?;
    hw.write(mailbox.msg, msg)?;
    hw.wait(mailbox.resp, u32::MAX, 1, timeout, &format!("the SMU to answer message {msg:#x}"))?;
    hw.read(mailbox.arg)
}

/// Whether the SMU answers (tinygrad `is_smu_alive`: a version query with a short timeout, then a nonzero
/// response register).
pub fn alive(hw: &mut Hw) -> Result<bool, BootError> {
    match send(hw, SmuMailbox::regular(), msg::GET_SMU_VERSION, 0, Duration::from_millis(100)) {
        Ok(_) | Err(BootError::Timeout { .. }) => Ok(hw.read(SmuMailbox::regular().resp)? != 0),
        Err(e) => Err(e),
    }
}

/// Tells the SMU where its driver table is and enables every feature (tinygrad `AM_SMU.init_hw`).
pub fn init(hw: &mut Hw, driver_table_mc: u64) -> Result<(), BootError> {
    hw.step = "SMU";
    let mb = SmuMailbox::regular();
    send(hw, mb, msg::SET_DRIVER_DRAM_ADDR_HIGH, (driver_table_mc >> 32) as u32, TIMEOUT)?;
    send(hw, mb, msg::SET_DRIVER_DRAM_ADDR_LOW, driver_table_mc as u32, TIMEOUT)?;
    send(hw, mb, msg::ENABLE_ALL_SMU_FEATURES, 0, TIMEOUT)?;
    Ok(())
}

/// Mode-1 reset through the debug mailbox (MP0 13.0.0 and 14.x: tinygrad `AM_SMU.mode1_reset`), then 500 ms.
pub fn mode1_reset(hw: &mut Hw) -> Result<(), BootError> {
    hw.step = "SMU mode-1 reset";
    send(hw, SmuMailbox::debug(), msg::DEBUG_MODE1_RESET, 0, TIMEOUT)?;
    hw.sleep(Duration::from_millis(500));
    Ok(())
}

/// Which DPM level to run every clock at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Lowest,
    Highest,
}

/// Sets UCLK, FCLK, SOCCLK and GFXCLK to one DPM level (tinygrad `AM_SMU.set_clocks`): the level count and
/// frequencies come from `GetDpmFreqByIndex`; soft min (its timeout tolerated, as tinygrad does), then soft max.
pub fn set_clocks(hw: &mut Hw, level: Level) -> Result<(), BootError> {
    hw.step = "SMU clocks";
    let mb = SmuMailbox::regular();
    for (clk, _name) in CLOCKS {
        let count = send(hw, mb, msg::GET_DPM_FREQ_BY_INDEX, (clk << 16) | 0xff, TIMEOUT)? & 0x7fff_ffff;
        if count == 0 {
            continue;
        }
        let index = match level {
            Level::Lowest => 0,
            Level::Highest => count - 1,
        };
        let freq = send(hw, mb, msg::GET_DPM_FREQ_BY_INDEX, (clk << 16) | index, TIMEOUT)? & 0x7fff_ffff;
        match send(hw, mb, msg::SET_SOFT_MIN_BY_FREQ, (clk << 16) | freq, Duration::from_millis(20)) {
            Ok(_) | Err(BootError::Timeout { .. }) => {}
            Err(e) => return Err(e),
        }
        send(hw, mb, msg::SET_SOFT_MAX_BY_FREQ, (clk << 16) | freq, TIMEOUT)?;
    }
    Ok(())
}
