//! SOC: the doorbell aperture, the NBIO strap fix-up, the S2A doorbell ports, and HDP's memory power
//! (tinygrad `ip.py` `AM_SOC`).

use super::hw::Hw;
use super::BootError;
use crate::firmware::Card;
use crate::regs::{hdp, nbio, reg, HwIp};

/// tinygrad `AM_SOC.init_hw` (NBIO other than 7.9).
pub fn init(hw: &mut Hw) -> Result<(), BootError> {
    let (strap, aper) = nbio!(hw.card(), m => (
        (reg!(HwIp::Nbio, m::RCC_DEV0_EPF2_STRAP2),
            (|v| m::RCC_DEV0_EPF2_STRAP2(v).with_strap_no_soft_reset_dev0_f2(false).bits()) as fn(u32) -> u32),
        reg!(HwIp::Nbio, m::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN),
    ));
    hw.update(strap.0, strap.1)?;
    hw.write(aper, 1)
}

/// tinygrad `AM_SOC.set_clockgating_state` (HDP ≥ 5.2.1, which both cards have).
pub fn clockgating(hw: &mut Hw) -> Result<(), BootError> {
    let (r, f) = hdp!(hw.card(), m => (reg!(HwIp::Hdp, m::HDP_MEM_POWER_CTRL),
        (|v| m::HDP_MEM_POWER_CTRL(v).with_atomic_mem_power_ctrl_en(true).with_atomic_mem_power_ds_en(true).bits()) as fn(u32) -> u32));
    hw.update(r, f)
}

/// One S2A doorbell port's routing (tinygrad `AM_SOC.doorbell_enable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellPort {
    pub port: u8,
    pub awid: u32,
    pub awaddr_31_28: u32,
    pub offset: u32,
    pub size: u32,
}

/// Enables doorbell port `p.port` (0, 2 or 3) of the S2A block (NBIO on GC 11, `GDC_S2A0` in NBIF on GC 12).
pub fn doorbell_enable(hw: &mut Hw, p: DoorbellPort) -> Result<(), BootError> {
    macro_rules! port {
        ($m:ident, $r:ident, $en:ident, $awid:ident, $size:ident, $aw:ident, $off:ident) => {
            (
                reg!(HwIp::Nbio, $m::$r),
                $m::$r::new().$en(true).$awid(p.awid).$size(p.size).$aw(p.awaddr_31_28).$off(p.offset).bits(),
            )
        };
    }
    macro_rules! ports {
        ($m:ident, $e0:ident, $e2:ident, $e3:ident) => {
            match p.port {
                0 => port!(
                    $m,
                    $e0,
                    with_s2a_doorbell_port0_enable,
                    with_s2a_doorbell_port0_awid,
                    with_s2a_doorbell_port0_range_size,
                    with_s2a_doorbell_port0_awaddr_31_28_value,
                    with_s2a_doorbell_port0_range_offset
                ),
                2 => port!(
                    $m,
                    $e2,
                    with_s2a_doorbell_port2_enable,
                    with_s2a_doorbell_port2_awid,
                    with_s2a_doorbell_port2_range_size,
                    with_s2a_doorbell_port2_awaddr_31_28_value,
                    with_s2a_doorbell_port2_range_offset
                ),
                3 => port!(
                    $m,
                    $e3,
                    with_s2a_doorbell_port3_enable,
                    with_s2a_doorbell_port3_awid,
                    with_s2a_doorbell_port3_range_size,
                    with_s2a_doorbell_port3_awaddr_31_28_value,
                    with_s2a_doorbell_port3_range_offset
                ),
                n => return Err(BootError::Invalid { step: hw.step, msg: format!("no S2A doorbell port {n}") }),
            }
        };
    }
    let (r, v) = match hw.card() {
        Card::Gfx1100 => {
            use crate::regs::nbio_4_3_0 as m;
            ports!(m, S2A_DOORBELL_ENTRY_0_CTRL, S2A_DOORBELL_ENTRY_2_CTRL, S2A_DOORBELL_ENTRY_3_CTRL)
        }
        Card::Gfx1201 => {
            use crate::regs::nbif_6_3_1 as m;
            ports!(
                m,
                GDC_S2A0_S2A_DOORBELL_ENTRY_0_CTRL,
                GDC_S2A0_S2A_DOORBELL_ENTRY_2_CTRL,
                GDC_S2A0_S2A_DOORBELL_ENTRY_3_CTRL
            )
        }
    };
    hw.write(r, v)
}
