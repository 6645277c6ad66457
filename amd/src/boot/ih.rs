//! IH, the interrupt handler: two rings in boot memory, programmed and enabled (tinygrad `ip.py` `AM_IH`).
//! pilot polls on USB and never takes interrupts; the rings exist because the firmware writes to them.

use super::hw::Hw;
use super::memory::VramLayout;
use super::BootError;
use crate::regs::{osssys, reg, HwIp, RegAddr};

pub const RING_SIZE: u64 = 256 << 10;

/// Where the two rings and ring 0's write-pointer page are (VRAM physical addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IhRings {
    pub ring0: u64,
    pub wptr0: u64,
    pub ring1: u64,
    pub wptr1: u64,
}

/// tinygrad `AM_IH.init_hw`.
pub fn init(hw: &mut Hw, layout: &VramLayout, rings: &IhRings) -> Result<(), BootError> {
    // rb_size is log2 of the ring in dwords.
    let rb_size = 64 - (RING_SIZE / 4 - 1).leading_zeros();
    struct Ring {
        base: RegAddr,
        base_hi: RegAddr,
        cntl: RegAddr,
        cntl_value: u32,
        enable: fn(u32) -> u32,
        wptr: RegAddr,
        rptr: RegAddr,
        doorbell: RegAddr,
    }
    let (r0, r1, wptr_addr, storm) = osssys!(hw.card(), m => (
        Ring {
            base: reg!(HwIp::Osssys, m::IH_RB_BASE),
            base_hi: reg!(HwIp::Osssys, m::IH_RB_BASE_HI),
            cntl: reg!(HwIp::Osssys, m::IH_RB_CNTL),
            cntl_value: m::IH_RB_CNTL::new().with_mc_space(4).with_wptr_overflow_clear(true).with_rb_size(rb_size)
                .with_mc_snoop(true).with_mc_ro(false).with_mc_vmid(0).with_wptr_overflow_enable(true)
                .with_rptr_rearm(true).bits(),
            enable: |v| m::IH_RB_CNTL(v).with_rb_enable(true).with_enable_intr(true).bits(),
            wptr: reg!(HwIp::Osssys, m::IH_RB_WPTR),
            rptr: reg!(HwIp::Osssys, m::IH_RB_RPTR),
            doorbell: reg!(HwIp::Osssys, m::IH_DOORBELL_RPTR),
        },
        Ring {
            base: reg!(HwIp::Osssys, m::IH_RB_BASE_RING1),
            base_hi: reg!(HwIp::Osssys, m::IH_RB_BASE_HI_RING1),
            cntl: reg!(HwIp::Osssys, m::IH_RB_CNTL_RING1),
            cntl_value: m::IH_RB_CNTL_RING1::new().with_mc_space(4).with_wptr_overflow_clear(true).with_rb_size(rb_size)
                .with_mc_snoop(true).with_mc_ro(false).with_mc_vmid(0).with_rb_full_drain_enable(true).bits(),
            enable: |v| m::IH_RB_CNTL_RING1(v).with_rb_enable(true).bits(),
            wptr: reg!(HwIp::Osssys, m::IH_RB_WPTR_RING1),
            rptr: reg!(HwIp::Osssys, m::IH_RB_RPTR_RING1),
            doorbell: reg!(HwIp::Osssys, m::IH_DOORBELL_RPTR_RING1),
        },
        [reg!(HwIp::Osssys, m::IH_RB_WPTR_ADDR_LO), reg!(HwIp::Osssys, m::IH_RB_WPTR_ADDR_HI)],
        [
            (reg!(HwIp::Osssys, m::IH_STORM_CLIENT_LIST_CNTL),
                (|v| m::IH_STORM_CLIENT_LIST_CNTL(v).with_client18_is_storm_client(true).bits()) as fn(u32) -> u32),
            (reg!(HwIp::Osssys, m::IH_INT_FLOOD_CNTL), |v| m::IH_INT_FLOOD_CNTL(v).with_flood_cntl_enable(true).bits()),
            (reg!(HwIp::Osssys, m::IH_MSI_STORM_CTRL), |v| m::IH_MSI_STORM_CTRL(v).with_delay(3).bits()),
        ],
    ));
    for (ring, addr, first) in [(&r0, rings.ring0, true), (&r1, rings.ring1, false)] {
        hw.write64(ring.base, ring.base_hi, layout.mc(addr) >> 8)?;
        hw.write(ring.cntl, ring.cntl_value)?;
        if first {
            hw.write64(wptr_addr[0], wptr_addr[1], layout.mc(rings.wptr0))?;
        }
        hw.write(ring.wptr, 0)?;
        hw.write(ring.rptr, 0)?;
        hw.write(ring.doorbell, 0)?; // ENABLE = 0
    }
    for (r, f) in storm {
        hw.update(r, f)?;
    }
    for ring in [&r0, &r1] {
        hw.update(ring.cntl, ring.enable)?;
    }
    Ok(())
}
