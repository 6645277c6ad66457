//! GMC: the two memory hubs (MM for the PSP, SMU and IH; GC for CP, SDMA and shaders), programmed alike
//! (tinygrad `ip.py` `AM_GMC.init_hub`): AGP off, the system aperture over the frame buffer, the default and
//! dummy pages, L1 TLB and L2 setup, VM context 0 over [`vm::VA_BASE`]..[`vm::VA_END`] with its root table and
//! every fault reported, the identity aperture off, and the 18 invalidation engines over everything. Also
//! the HDP flush and the TLB invalidation every page-table change needs.

use super::hw::Hw;
use super::memory::VramLayout;
use super::vm::{VA_BASE, VA_END};
use super::BootError;
use crate::firmware::Card;
use crate::regs::{gc, mmhub, nbio, reg, HwIp, RegAddr};
use std::time::Duration;

/// Which hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hub {
    Mm,
    Gc,
}

/// One hub's registers and the values written to them, from the card's tables.
pub struct HubRegs {
    agp: [RegAddr; 3],
    aperture_low: RegAddr,
    aperture_high: RegAddr,
    default_addr: [RegAddr; 2],
    fault_default: [RegAddr; 2],
    fault_cntl2: (RegAddr, fn(u32) -> u32),
    l1_tlb: (RegAddr, fn(u32) -> u32),
    l2_cntl: (RegAddr, fn(u32) -> u32),
    l2_cntl2: (RegAddr, fn(u32) -> u32),
    l2_cntl3: (RegAddr, u32),
    l2_cntl4: (RegAddr, u32),
    l2_cntl5: (RegAddr, u32),
    ctx0_start: [RegAddr; 2],
    ctx0_end: [RegAddr; 2],
    ctx0_base: [RegAddr; 2],
    ctx0_cntl: (RegAddr, u32),
    identity_low: [RegAddr; 2],
    identity_high: [RegAddr; 2],
    identity_offset: [RegAddr; 2],
    inv_ranges: [[RegAddr; 2]; 18],
    inv_sem: RegAddr,
    /// ENG17_REQ with VMID 0's invalidation of every level (tinygrad `flush_tlb`).
    inv_req: (RegAddr, u32),
    inv_ack: RegAddr,
}

/// Builds [`HubRegs`] from a module `m` and that hub's register names (the hubs differ only in prefixes).
macro_rules! hub_regs {
    ($ip:expr, $m:ident, agp [$ab:ident $abot:ident $atop:ident], aperture [$lo:ident $hi:ident $dl:ident $dh:ident],
     fault [$fdl:ident $fdh:ident $fc2:ident], tlb [$l1:ident $l2:ident $l22:ident $l23:ident $l24:ident $l25:ident],
     ctx0 [$sl:ident $sh:ident $el:ident $eh:ident $bl:ident $bh:ident $cntl:ident],
     identity [$il:ident $ilh:ident $ih:ident $ihh:ident $pl:ident $ph:ident],
     inv [$sem:ident $req:ident $ack:ident], ranges [$($rl:ident $rh:ident)*]) => {{
        HubRegs {
            agp: [reg!($ip, $m::$ab), reg!($ip, $m::$abot), reg!($ip, $m::$atop)],
            aperture_low: reg!($ip, $m::$lo),
            aperture_high: reg!($ip, $m::$hi),
            default_addr: [reg!($ip, $m::$dl), reg!($ip, $m::$dh)],
            fault_default: [reg!($ip, $m::$fdl), reg!($ip, $m::$fdh)],
            fault_cntl2: (reg!($ip, $m::$fc2), |v| $m::$fc2(v).with_active_page_migration_pte_read_retry(true).bits()),
            l1_tlb: (reg!($ip, $m::$l1), |v| {
                $m::$l1(v)
                    .with_enable_l1_tlb(true)
                    .with_system_access_mode(3)
                    .with_enable_advanced_driver_model(true)
                    .with_system_aperture_unmapped_access(false)
                    .with_mtype(3) // MTYPE_UC
                    .bits()
            }),
            l2_cntl: (reg!($ip, $m::$l2), |v| {
                $m::$l2(v)
                    .with_enable_l2_cache(true)
                    .with_enable_default_page_out_to_system_memory(true)
                    .with_l2_pde0_cache_tag_generation_mode(false)
                    .with_pde_fault_classification(false)
                    .with_context1_identity_access_mode(1)
                    .with_identity_mode_fragment_size(0)
                    .with_enable_l2_fragment_processing(false)
                    .bits()
            }),
            l2_cntl2: (reg!($ip, $m::$l22), |v| {
                $m::$l22(v).with_invalidate_all_l1_tlbs(true).with_invalidate_l2_cache(true).bits()
            }),
            l2_cntl3: (
                reg!($ip, $m::$l23),
                $m::$l23::new()
                    .with_l2_cache_4k_associativity(true)
                    .with_l2_cache_bigk_associativity(true)
                    .with_bank_select(9)
                    .with_l2_cache_bigk_fragment_size(6)
                    .bits(),
            ),
            l2_cntl4: (reg!($ip, $m::$l24), $m::$l24::new().with_l2_cache_4k_partition_count(1).bits()),
            l2_cntl5: (reg!($ip, $m::$l25), $m::$l25::new().with_walker_priority_client_id(0x1ff).bits()),
            ctx0_start: [reg!($ip, $m::$sl), reg!($ip, $m::$sh)],
            ctx0_end: [reg!($ip, $m::$el), reg!($ip, $m::$eh)],
            ctx0_base: [reg!($ip, $m::$bl), reg!($ip, $m::$bh)],
            // tinygrad writes 0x1800000 under the fields; depth 3 = four levels from PDB2.
            ctx0_cntl: (
                reg!($ip, $m::$cntl),
                $m::$cntl(0x180_0000)
                    .with_enable_context(true)
                    .with_page_table_depth(3)
                    .with_page_table_block_size(0)
                    .with_range_protection_fault_enable_interrupt(true)
                    .with_range_protection_fault_enable_default(true)
                    .with_dummy_page_protection_fault_enable_interrupt(true)
                    .with_dummy_page_protection_fault_enable_default(true)
                    .with_pde0_protection_fault_enable_interrupt(true)
                    .with_pde0_protection_fault_enable_default(true)
                    .with_valid_protection_fault_enable_interrupt(true)
                    .with_valid_protection_fault_enable_default(true)
                    .with_read_protection_fault_enable_interrupt(true)
                    .with_read_protection_fault_enable_default(true)
                    .with_write_protection_fault_enable_interrupt(true)
                    .with_write_protection_fault_enable_default(true)
                    .with_execute_protection_fault_enable_interrupt(true)
                    .with_execute_protection_fault_enable_default(true)
                    .bits(),
            ),
            identity_low: [reg!($ip, $m::$il), reg!($ip, $m::$ilh)],
            identity_high: [reg!($ip, $m::$ih), reg!($ip, $m::$ihh)],
            identity_offset: [reg!($ip, $m::$pl), reg!($ip, $m::$ph)],
            inv_ranges: [$([reg!($ip, $m::$rl), reg!($ip, $m::$rh)]),*],
            inv_sem: reg!($ip, $m::$sem),
            inv_req: (
                reg!($ip, $m::$req),
                $m::$req::new()
                    .with_flush_type(0)
                    .with_per_vmid_invalidate_req(1)
                    .with_invalidate_l2_ptes(true)
                    .with_invalidate_l2_pde0(true)
                    .with_invalidate_l2_pde1(true)
                    .with_invalidate_l2_pde2(true)
                    .with_invalidate_l1_ptes(true)
                    .with_clear_protection_fault_status_addr(false)
                    .bits(),
            ),
            inv_ack: reg!($ip, $m::$ack),
        }
    }};
}

impl HubRegs {
    pub fn of(card: Card, hub: Hub) -> HubRegs {
        match hub {
            Hub::Gc => gc!(card, m => hub_regs!(HwIp::Gc, m,
            agp [GCMC_VM_AGP_BASE GCMC_VM_AGP_BOT GCMC_VM_AGP_TOP],
            aperture [GCMC_VM_SYSTEM_APERTURE_LOW_ADDR GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR
                GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB GCMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB],
            fault [GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32
                GCVM_L2_PROTECTION_FAULT_CNTL2],
            tlb [GCMC_VM_MX_L1_TLB_CNTL GCVM_L2_CNTL GCVM_L2_CNTL2 GCVM_L2_CNTL3 GCVM_L2_CNTL4 GCVM_L2_CNTL5],
            ctx0 [GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32 GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32
                GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32
                GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 GCVM_CONTEXT0_CNTL],
            identity [GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32 GCVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32
                GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32 GCVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32
                GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 GCVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32],
            inv [GCVM_INVALIDATE_ENG17_SEM GCVM_INVALIDATE_ENG17_REQ GCVM_INVALIDATE_ENG17_ACK],
            ranges [
                GCVM_INVALIDATE_ENG0_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG0_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG1_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG1_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG2_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG2_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG3_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG3_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG4_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG4_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG5_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG5_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG6_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG6_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG7_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG7_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG8_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG8_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG9_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG9_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG10_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG10_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG11_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG11_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG12_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG12_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG13_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG13_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG14_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG14_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG15_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG15_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG16_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG16_ADDR_RANGE_HI32
                GCVM_INVALIDATE_ENG17_ADDR_RANGE_LO32 GCVM_INVALIDATE_ENG17_ADDR_RANGE_HI32
            ])),
            Hub::Mm => mmhub!(card, m => hub_regs!(HwIp::Mmhub, m,
            agp [MMMC_VM_AGP_BASE MMMC_VM_AGP_BOT MMMC_VM_AGP_TOP],
            aperture [MMMC_VM_SYSTEM_APERTURE_LOW_ADDR MMMC_VM_SYSTEM_APERTURE_HIGH_ADDR
                MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB],
            fault [MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32 MMVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32
                MMVM_L2_PROTECTION_FAULT_CNTL2],
            tlb [MMMC_VM_MX_L1_TLB_CNTL MMVM_L2_CNTL MMVM_L2_CNTL2 MMVM_L2_CNTL3 MMVM_L2_CNTL4 MMVM_L2_CNTL5],
            ctx0 [MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32 MMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32
                MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32 MMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32
                MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32 MMVM_CONTEXT0_CNTL],
            identity [MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32 MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32
                MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32 MMVM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32
                MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32 MMVM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32],
            inv [MMVM_INVALIDATE_ENG17_SEM MMVM_INVALIDATE_ENG17_REQ MMVM_INVALIDATE_ENG17_ACK],
            ranges [
                MMVM_INVALIDATE_ENG0_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG0_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG1_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG1_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG2_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG2_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG3_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG3_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG4_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG4_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG5_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG5_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG6_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG6_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG7_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG7_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG8_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG8_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG9_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG9_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG10_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG10_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG11_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG11_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG12_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG12_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG13_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG13_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG14_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG14_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG15_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG15_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG16_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG16_ADDR_RANGE_HI32
                MMVM_INVALIDATE_ENG17_ADDR_RANGE_LO32 MMVM_INVALIDATE_ENG17_ADDR_RANGE_HI32
            ])),
        }
    }
}

/// The frame buffer's place in the MC address space, as the GPU reports it (tinygrad `AM_GMC.init_sw`).
pub fn read_fb_location(hw: &mut Hw, vram_size: u64) -> Result<VramLayout, BootError> {
    let (base, top) = mmhub!(hw.card(), m => (reg!(HwIp::Mmhub, m::MMMC_VM_FB_LOCATION_BASE), reg!(HwIp::Mmhub, m::MMMC_VM_FB_LOCATION_TOP)));
    let fb_base = u64::from(hw.read(base)? & 0xff_ffff) << 24;
    let fb_top = u64::from(hw.read(top)? & 0xff_ffff) << 24;
    Ok(VramLayout { vram_size, fb_base, fb_top })
}

/// Programs `hub` (tinygrad `AM_GMC.init_hub`). `root` is the page table's VRAM address; `scratch` and
/// `dummy` the default and fault pages.
pub fn init_hub(
    hw: &mut Hw,
    hub: Hub,
    layout: &VramLayout,
    root: u64,
    scratch: u64,
    dummy: u64,
) -> Result<(), BootError> {
    let r = HubRegs::of(hw.card(), hub);
    hw.write(r.agp[0], 0)?;
    hw.write(r.agp[1], (0xffff_ffff_ffff_u64 >> 24) as u32)?; // AGP off: bottom above top
    hw.write(r.agp[2], 0)?;
    hw.write(r.aperture_low, (layout.fb_base >> 18) as u32)?;
    hw.write(r.aperture_high, (layout.fb_top >> 18) as u32)?;
    hw.write64(r.default_addr[0], r.default_addr[1], scratch >> 12)?;
    hw.write64(r.fault_default[0], r.fault_default[1], dummy >> 12)?;
    hw.update(r.fault_cntl2.0, r.fault_cntl2.1)?;
    hw.update(r.l1_tlb.0, r.l1_tlb.1)?;
    hw.update(r.l2_cntl.0, r.l2_cntl.1)?;
    hw.update(r.l2_cntl2.0, r.l2_cntl2.1)?;
    hw.write(r.l2_cntl3.0, r.l2_cntl3.1)?;
    hw.write(r.l2_cntl4.0, r.l2_cntl4.1)?;
    hw.write(r.l2_cntl5.0, r.l2_cntl5.1)?;
    hw.write64(r.ctx0_start[0], r.ctx0_start[1], VA_BASE >> 12)?;
    hw.write64(r.ctx0_end[0], r.ctx0_end[1], VA_END >> 12)?;
    hw.write64(r.ctx0_base[0], r.ctx0_base[1], root | 1)?;
    hw.write(r.ctx0_cntl.0, r.ctx0_cntl.1)?;
    hw.write64(r.identity_low[0], r.identity_low[1], 0xf_ffff_ffff)?;
    hw.write64(r.identity_high[0], r.identity_high[1], 0)?;
    hw.write64(r.identity_offset[0], r.identity_offset[1], 0)?;
    for [lo, hi] in r.inv_ranges {
        hw.write64(lo, hi, 0x1f_ffff_ffff)?;
    }
    Ok(())
}

/// Flushes the HDP so the GPU sees the host's VRAM writes (tinygrad `AM_GMC.flush_hdp`: a write to the register
/// whose byte address `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` holds).
pub fn flush_hdp(hw: &mut Hw) -> Result<(), BootError> {
    let cntl = nbio!(hw.card(), m => reg!(HwIp::Nbio, m::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL));
    let at = hw.read(cntl)? / 4;
    hw.bus.write_reg(at, 0).map_err(|source| BootError::Bus { step: hw.step, source })
}

/// Invalidates VMID 0's translations in `hub` with engine 17 (tinygrad `AM_GMC.flush_tlb`); `initialized` says
/// whether the hub has been programmed (an unprogrammed hub only gets the HDP flush).
pub fn flush_tlb(hw: &mut Hw, hub: Hub, initialized: bool) -> Result<(), BootError> {
    flush_hdp(hw)?;
    if !initialized {
        return Ok(());
    }
    let r = HubRegs::of(hw.card(), hub);
    let timeout = Duration::from_secs(10);
    if hub == Hub::Mm {
        hw.wait(r.inv_sem, 1, 1, timeout, "the MM hub's invalidation semaphore")?;
    }
    hw.write(r.inv_req.0, r.inv_req.1)?;
    hw.wait(r.inv_ack, 1, 1, timeout, "the TLB invalidation ack of VMID 0")?;
    if hub == Hub::Mm {
        hw.write(r.inv_sem, 0)?;
        let cid2 = mmhub!(hw.card(), m => (reg!(HwIp::Mmhub, m::MMVM_L2_BANK_SELECT_RESERVED_CID2),
            (|v| m::MMVM_L2_BANK_SELECT_RESERVED_CID2(v).with_reserved_cache_private_invalidation(true).bits()) as fn(u32) -> u32));
        hw.update(cid2.0, cid2.1)?;
        // Read back so the invalidation has landed.
        hw.read(cid2.0)?;
    }
    Ok(())
}

/// GC's VM protection-fault status (nonzero after a fault; `_LO32` on GC 12).
pub fn gc_fault_status(card: Card) -> RegAddr {
    match card {
        Card::Gfx1100 => {
            use crate::regs::gc_11_0_0 as m;
            reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_STATUS)
        }
        Card::Gfx1201 => {
            use crate::regs::gc_12_0_0 as m;
            reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_STATUS_LO32)
        }
    }
}

/// GC's VM protection-fault address registers (LO32, HI32): the faulting page, address >> 12 (tinygrad
/// runtime/support/am/ip.py `AM_IH.interrupt_handler`, the UTCL2_FAULT branch).
pub fn gc_fault_addr(card: Card) -> [RegAddr; 2] {
    match card {
        Card::Gfx1100 => {
            use crate::regs::gc_11_0_0 as m;
            [
                reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_ADDR_LO32),
                reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_ADDR_HI32),
            ]
        }
        Card::Gfx1201 => {
            use crate::regs::gc_12_0_0 as m;
            [
                reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_ADDR_LO32),
                reg!(HwIp::Gc, m::GCVM_L2_PROTECTION_FAULT_ADDR_HI32),
            ]
        }
    }
}
