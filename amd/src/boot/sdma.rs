//! SDMA 6/7 engine 0: watchdog, UTCL1, un-halt, traps, and its doorbell port (tinygrad `ip.py` `AM_SDMA`);
//! `fini` takes queue 0 down and soft-resets the engine.

use super::hw::Hw;
use super::soc::{self, DoorbellPort};
use super::BootError;
use crate::firmware::Card;
use crate::regs::{gc, reg, HwIp};
use std::time::Duration;

/// `AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0`: SDMA0 queue 0's doorbell index (a 64-bit slot).
pub const DOORBELL_SDMA0: u32 = 0x100;

/// tinygrad `AM_SDMA.init_hw` for SDMA ≥ 6 (one pipe).
pub fn init(hw: &mut Hw) -> Result<(), BootError> {
    gc!(hw.card(), m => {
        hw.update(reg!(HwIp::Gc, m::SDMA0_WATCHDOG_CNTL), |v| m::SDMA0_WATCHDOG_CNTL(v).with_queue_hang_count(100).bits())?;
        hw.update(reg!(HwIp::Gc, m::SDMA0_UTCL1_CNTL), |v| m::SDMA0_UTCL1_CNTL(v).with_resp_mode(3).with_redo_delay(9).bits())?;
    });
    // rd = NOA, wr = bypass; the F32 (SDMA 6) also takes LLC_NOALLOC. SDMA 7's microcontroller is the MCU.
    match hw.card() {
        Card::Gfx1100 => {
            use crate::regs::gc_11_0_0 as m;
            hw.update(reg!(HwIp::Gc, m::SDMA0_UTCL1_PAGE), |v| {
                m::SDMA0_UTCL1_PAGE(v).with_rd_l2_policy(2).with_wr_l2_policy(3).with_llc_noalloc(true).bits()
            })?;
            hw.update(reg!(HwIp::Gc, m::SDMA0_F32_CNTL), |v| {
                m::SDMA0_F32_CNTL(v).with_halt(false).with_th1_reset(false).bits()
            })?;
        }
        Card::Gfx1201 => {
            use crate::regs::gc_12_0_0 as m;
            hw.update(reg!(HwIp::Gc, m::SDMA0_UTCL1_PAGE), |v| {
                m::SDMA0_UTCL1_PAGE(v).with_rd_l2_policy(2).with_wr_l2_policy(3).bits()
            })?;
            hw.update(reg!(HwIp::Gc, m::SDMA0_MCU_CNTL), |v| {
                m::SDMA0_MCU_CNTL(v).with_halt(false).with_reset(false).bits()
            })?;
        }
    }
    gc!(hw.card(), m => hw.update(reg!(HwIp::Gc, m::SDMA0_CNTL), |v| m::SDMA0_CNTL(v).with_trap_enable(true).bits()))?;
    soc::doorbell_enable(
        hw,
        DoorbellPort { port: 2, awid: 0xe, awaddr_31_28: 0x3, offset: DOORBELL_SDMA0 * 2, size: 4 },
    )
}

/// Stops queue 0 and soft-resets SDMA0 (tinygrad `AM_SDMA.fini_hw`).
pub fn fini(hw: &mut Hw) -> Result<(), BootError> {
    gc!(hw.card(), m => {
        hw.update(reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_CNTL), |v| m::SDMA0_QUEUE0_RB_CNTL(v).with_rb_enable(false).bits())?;
        hw.update(reg!(HwIp::Gc, m::SDMA0_QUEUE0_IB_CNTL), |v| m::SDMA0_QUEUE0_IB_CNTL(v).with_ib_enable(false).bits())?;
        hw.update(reg!(HwIp::Gc, m::SDMA0_QUEUE0_DOORBELL), |v| m::SDMA0_QUEUE0_DOORBELL(v).with_enable(false).bits())?;
        hw.update(reg!(HwIp::Gc, m::SDMA0_QUEUE0_DOORBELL_OFFSET), |v| m::SDMA0_QUEUE0_DOORBELL_OFFSET(v).with_offset(0).bits())?;
        let reset = reg!(HwIp::Gc, m::GRBM_SOFT_RESET);
        hw.write(reset, m::GRBM_SOFT_RESET::new().with_soft_reset_sdma0(true).bits())?;
        hw.sleep(Duration::from_millis(10));
        hw.write(reset, 0)
    })
}
