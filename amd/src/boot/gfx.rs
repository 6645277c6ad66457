//! GFX: after the RLC has autoloaded GC's firmware, the compute micro-engine (MEC, RS64) is pointed at its code
//! and started, with the golden settings, the doorbell ports, and SH_MEM for every VMID (tinygrad `ip.py`
//! `AM_GFX`). GC 12 also starts the PFP and ME from their headers.

use super::hw::Hw;
use super::soc::{self, DoorbellPort};
use super::BootError;
use crate::firmware::Card;
use crate::regs::{gc, reg, HwIp};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);
/// `AMDGPU_NAVI10_DOORBELL_MEC_RING0`: the compute queue's doorbell index (a 64-bit slot; the HQD's doorbell
/// offset field takes `index * 2`).
pub const DOORBELL_MEC_RING0: u32 = 3;

/// The RS64 program-counter starts from the firmware headers (byte addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UcodeStarts {
    pub mec: u64,
    /// GC 12 only.
    pub pfp: Option<u64>,
    pub me: Option<u64>,
}

/// Selects which ME/pipe/queue/VMID the banked GC registers address (`GRBM_GFX_CNTL`).
pub fn grbm_select(hw: &mut Hw, me: u32, pipe: u32, queue: u32, vmid: u32) -> Result<(), BootError> {
    let (r, v) = gc!(hw.card(), m => (reg!(HwIp::Gc, m::GRBM_GFX_CNTL),
        m::GRBM_GFX_CNTL::new().with_meid(me).with_pipeid(pipe).with_queueid(queue).with_vmid(vmid).bits()));
    hw.write(r, v)
}

/// Waits for the RLC to have loaded GC's firmware: `CP_STAT` idle or `RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE`
/// (tinygrad `AM_GFX.init_hw`; Linux `gfx_v11_0_wait_for_rlc_autoload_complete`).
pub fn wait_rlc_autoload(hw: &mut Hw) -> Result<(), BootError> {
    let (cp_stat, boot) =
        gc!(hw.card(), m => (reg!(HwIp::Gc, m::CP_STAT), reg!(HwIp::Gc, m::RLC_RLCS_BOOTLOAD_STATUS)));
    let complete = gc!(hw.card(), m => m::RLC_RLCS_BOOTLOAD_STATUS::new().with_bootload_complete(true).bits());
    let mut waited = Duration::ZERO;
    loop {
        let stat = hw.read(cp_stat)?;
        let status = hw.read(boot)?;
        if stat == 0 || status & complete != 0 {
            return Ok(());
        }
        if waited >= TIMEOUT {
            return Err(BootError::Timeout {
                step: hw.step,
                what: format!("the RLC autoload (CP_STAT {stat:#x})"),
                reg: "RLC_RLCS_BOOTLOAD_STATUS",
                value: status,
                ms: TIMEOUT.as_millis() as u64,
            });
        }
        hw.sleep(super::hw::POLL);
        waited += super::hw::POLL;
    }
}

/// Points each RS64 engine at its code and pulses its pipe reset (tinygrad `AM_GFX._config_mec`).
pub fn config_mec(hw: &mut Hw, starts: &UcodeStarts) -> Result<(), BootError> {
    let card = hw.card();
    if card == Card::Gfx1201 {
        let missing = || BootError::Invalid { step: "GFX", msg: "GC 12 needs the PFP and ME program starts".into() };
        let (pfp, me) = (starts.pfp.ok_or_else(missing)?, starts.me.ok_or_else(missing)?);
        use crate::regs::gc_12_0_0 as m;
        grbm_select(hw, 0, 0, 0, 0)?;
        hw.write64(
            reg!(HwIp::Gc, m::CP_PFP_PRGRM_CNTR_START),
            reg!(HwIp::Gc, m::CP_PFP_PRGRM_CNTR_START_HI),
            pfp >> 2,
        )?;
        grbm_select(hw, 0, 0, 0, 0)?;
        let cntl = reg!(HwIp::Gc, m::CP_ME_CNTL);
        hw.update(cntl, |v| m::CP_ME_CNTL(v).with_pfp_pipe0_reset(true).bits())?;
        hw.update(cntl, |v| m::CP_ME_CNTL(v).with_pfp_pipe0_reset(false).bits())?;
        grbm_select(hw, 0, 0, 0, 0)?;
        hw.write64(reg!(HwIp::Gc, m::CP_ME_PRGRM_CNTR_START), reg!(HwIp::Gc, m::CP_ME_PRGRM_CNTR_START_HI), me >> 2)?;
        grbm_select(hw, 0, 0, 0, 0)?;
        hw.update(cntl, |v| m::CP_ME_CNTL(v).with_me_pipe0_reset(true).bits())?;
        hw.update(cntl, |v| m::CP_ME_CNTL(v).with_me_pipe0_reset(false).bits())?;
    }
    grbm_select(hw, 1, 0, 0, 0)?;
    let (lo, hi, cntl) = gc!(card, m => (reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START),
        reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START_HI), reg!(HwIp::Gc, m::CP_MEC_RS64_CNTL)));
    hw.write64(lo, hi, starts.mec >> 2)?;
    grbm_select(hw, 0, 0, 0, 0)?;
    let (set, clear) = gc!(card, m => (
        (|v| m::CP_MEC_RS64_CNTL(v).with_mec_pipe0_reset(true).bits()) as fn(u32) -> u32,
        (|v| m::CP_MEC_RS64_CNTL(v).with_mec_pipe0_reset(false).bits()) as fn(u32) -> u32));
    hw.update(cntl, set)?;
    hw.update(cntl, clear)
}

/// Un-halts MEC pipe 0 and gives it 50 ms (tinygrad `AM_GFX._enable_mec`).
pub fn enable_mec(hw: &mut Hw) -> Result<(), BootError> {
    let (cntl, f) = gc!(hw.card(), m => (reg!(HwIp::Gc, m::CP_MEC_RS64_CNTL),
        (|v| m::CP_MEC_RS64_CNTL(v).with_mec_pipe0_reset(false).with_mec_pipe0_active(true).with_mec_halt(false).bits())
            as fn(u32) -> u32));
    hw.update(cntl, f)?;
    hw.sleep(Duration::from_millis(50));
    Ok(())
}

/// The full GFX bring-up after the GC hub is set up (tinygrad `AM_GFX.init_hw`, one XCC).
pub fn init(hw: &mut Hw, starts: &UcodeStarts) -> Result<(), BootError> {
    config_mec(hw, starts)?;
    let card = hw.card();
    let (tcp, rlc, srm, spm) = gc!(card, m => (reg!(HwIp::Gc, m::TCP_CNTL), reg!(HwIp::Gc, m::RLC_CNTL),
        (reg!(HwIp::Gc, m::RLC_SRM_CNTL),
            (|v| m::RLC_SRM_CNTL(v).with_srm_enable(true).with_auto_incr_addr(true).bits()) as fn(u32) -> u32),
        reg!(HwIp::Gc, m::RLC_SPM_MC_CNTL)));
    // Linux's golden setting for GC 11 only ORs bit 29 into TCP_CNTL.
    hw.update(tcp, |v| v | 0x2000_0000)?;
    hw.write(rlc, 1)?;
    hw.update(srm.0, srm.1)?;
    hw.write(spm, 0xf)?;
    soc::doorbell_enable(hw, DoorbellPort { port: 0, awid: 0x3, awaddr_31_28: 0x3, offset: 0, size: 0 })?;
    soc::doorbell_enable(hw, DoorbellPort { port: 3, awid: 0x6, awaddr_31_28: 0x3, offset: 0, size: 0 })?;
    let grbm = gc!(card, m => (reg!(HwIp::Gc, m::GRBM_CNTL),
        (|v| m::GRBM_CNTL(v).with_read_timeout(0xff).bits()) as fn(u32) -> u32));
    hw.update(grbm.0, grbm.1)?;
    // SH_MEM_ADDRESS_MODE_64 (0), SH_MEM_ALIGNMENT_MODE_UNALIGNED (3); LDS at 1 << 48 << 12, scratch at 2 << ...
    let (config, bases) = gc!(card, m => (
        (reg!(HwIp::Gc, m::SH_MEM_CONFIG),
            m::SH_MEM_CONFIG::new().with_initial_inst_prefetch(3).with_address_mode(false).with_alignment_mode(3).bits()),
        (reg!(HwIp::Gc, m::SH_MEM_BASES), m::SH_MEM_BASES::new().with_shared_base(1).with_private_base(2).bits())));
    for vmid in 0..16 {
        grbm_select(hw, 0, 0, 0, vmid)?;
        hw.write(config.0, config.1)?;
        hw.write(bases.0, bases.1)?;
    }
    grbm_select(hw, 0, 0, 0, 0)?;
    let (lower, upper) = gc!(card, m => (reg!(HwIp::Gc, m::CP_MEC_DOORBELL_RANGE_LOWER), reg!(HwIp::Gc, m::CP_MEC_DOORBELL_RANGE_UPPER)));
    hw.write(lower, 0)?;
    hw.write(upper, 0xf8)?;
    enable_mec(hw)
}

/// Takes down the two compute queues pilot uses, if active (tinygrad `AM_GFX._dequeue_hqds`). After an error the
/// drain is not waited for.
pub fn dequeue_hqds(hw: &mut Hw, err_state: bool) -> Result<(), BootError> {
    let (active, dequeue, spi) = gc!(hw.card(), m => (reg!(HwIp::Gc, m::CP_HQD_ACTIVE),
        reg!(HwIp::Gc, m::CP_HQD_DEQUEUE_REQUEST), reg!(HwIp::Gc, m::SPI_COMPUTE_QUEUE_RESET)));
    for queue in 0..2 {
        grbm_select(hw, 1, 0, queue, 0)?;
        if hw.read(active)? & 1 != 0 {
            hw.write(dequeue, 0x2)?; // RESET_WAVES
            hw.write(spi, 0x1)?;
            if !err_state {
                // Linux tolerates a queue that does not drain; so does tinygrad.
                match hw.wait(active, 1, 0, Duration::from_secs(1), "the compute queue to dequeue") {
                    Ok(_) | Err(BootError::Timeout { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    grbm_select(hw, 0, 0, 0, 0)
}

/// Resets and restarts MEC (a partial boot, or recovery): tinygrad `AM_GFX.reset_mec`.
pub fn reset_mec(hw: &mut Hw, starts: &UcodeStarts) -> Result<(), BootError> {
    dequeue_hqds(hw, false)?;
    if hw.card() == Card::Gfx1100 {
        use crate::regs::gc_11_0_0 as m;
        let r = reg!(HwIp::Gc, m::GRBM_SOFT_RESET);
        hw.write(r, m::GRBM_SOFT_RESET::new().with_soft_reset_cp(true).with_soft_reset_cpc(true).bits())?;
        hw.sleep(Duration::from_millis(50));
        hw.write(r, 0)?;
    }
    config_mec(hw, starts)?;
    enable_mec(hw)
}

/// Clock gating (tinygrad `AM_GFX.set_clockgating_state`), inside RLC safe mode.
pub fn clockgating(hw: &mut Hw) -> Result<(), BootError> {
    let card = hw.card();
    // MMHUB 3.0.0 has MM_ATC_L2_MISC_CG; MMHUB 4.1.0 does not.
    if card == Card::Gfx1100 {
        use crate::regs::mmhub_3_0_0 as mm;
        let r = reg!(HwIp::Mmhub, mm::MM_ATC_L2_MISC_CG);
        hw.write(r, mm::MM_ATC_L2_MISC_CG::new().with_enable(true).with_mem_ls_enable(true).bits())?;
    }
    gc!(card, m => {
        let safe = reg!(HwIp::Gc, m::RLC_SAFE_MODE);
        hw.write(safe, m::RLC_SAFE_MODE::new().with_message(1).with_cmd(true).bits())?;
        hw.wait(safe, 1, 0, TIMEOUT, "RLC safe mode")?;
        hw.update(reg!(HwIp::Gc, m::RLC_CGCG_CGLS_CTRL), |v| {
            m::RLC_CGCG_CGLS_CTRL(v).with_cgcg_gfx_idle_threshold(0x36).with_cgcg_en(true)
                .with_cgls_rep_compansat_delay(0xf).with_cgls_en(true).bits()
        })?;
        hw.update(reg!(HwIp::Gc, m::CP_RB_WPTR_POLL_CNTL), |v| {
            m::CP_RB_WPTR_POLL_CNTL(v).with_poll_frequency(0x100).with_idle_poll_count(0x90).bits()
        })?;
        hw.update(reg!(HwIp::Gc, m::CP_INT_CNTL), |v| {
            m::CP_INT_CNTL(v).with_cntx_busy_int_enable(true).with_cntx_empty_int_enable(true)
                .with_cmp_busy_int_enable(true).bits()
        })?;
        hw.update(reg!(HwIp::Gc, m::SDMA0_RLC_CGCG_CTRL), |v| m::SDMA0_RLC_CGCG_CTRL(v).with_cgcg_int_enable(true).bits())?;
        hw.update(reg!(HwIp::Gc, m::SDMA1_RLC_CGCG_CTRL), |v| m::SDMA1_RLC_CGCG_CTRL(v).with_cgcg_int_enable(true).bits())?;
        hw.update(reg!(HwIp::Gc, m::RLC_CGTT_MGCG_OVERRIDE), |v| {
            m::RLC_CGTT_MGCG_OVERRIDE(v).with_perfmon_clock_state(true).with_gfxip_repeater_fgcg_override(false)
                .with_gfxip_fgcg_override(false).with_grbm_cgtt_sclk_override(false).with_rlc_cgtt_sclk_override(false)
                .with_gfxip_mgcg_override(false).with_gfxip_cgls_override(false).with_gfxip_cgcg_override(false).bits()
        })?;
        hw.write(safe, m::RLC_SAFE_MODE::new().with_message(0).with_cmd(true).bits())
    })
}
