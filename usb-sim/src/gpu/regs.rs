//! The simulated GPU's own register table: every register it gives behaviour to, as (IP, base segment,
//! offset) per board, with the name Linux's `*_offset.h` headers (and tinygrad's `autogen/am/regs.py`) give it.
//! Absolute dword index = the board's base segment (from [`super::board`]) + offset. Written from the Linux
//! headers' values; `usb-sim/tests/sim_gpu_peer_tables.rs` checks each row against tinygrad 0.14.0's tables.

use super::board::{Board, Ip};
use std::collections::HashMap;

/// A register the model reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    // NBIO
    MmIndex,
    MmData,
    MmIndexHi,
    RsmuIndex,
    RsmuData,
    ConfigMemsize,
    DoorbellAperEn,
    HdpFlushReq,
    HdpFlushDone,
    RemapHdpMemFlushCntl,
    // MP0 (PSP): C2PMSG_35/36 bootloader, _64 ring control, _67 wptr, _69/_70 ring address, _71 size, _81 sOS.
    PspBlCmd,
    PspBlAddr,
    PspRingCtl,
    PspRingWptr,
    PspRingLo,
    PspRingHi,
    PspRingSize,
    PspSosAlive,
    // MP1 (SMU): C2PMSG_66 msg, _82 arg, _90 resp; debug mailbox _75 msg, _53 arg, _54 resp.
    SmuMsg,
    SmuArg,
    SmuResp,
    SmuDbgMsg,
    SmuDbgArg,
    SmuDbgResp,
    // MMHUB
    MmFbBase,
    MmFbTop,
    MmApertureLow,
    MmApertureHigh,
    MmInvSem,
    MmInvReq,
    MmInvAck,
    MmAgpTop,
    MmAgpBot,
    MmAgpBase,
    MmCtx0Cntl,
    MmPtStartLo,
    MmPtStartHi,
    MmPtEndLo,
    MmPtEndHi,
    MmPtBaseLo,
    MmPtBaseHi,
    // GC: VM hub
    GcFbBase,
    GcFbTop,
    GcApertureLow,
    GcApertureHigh,
    GcInvReq,
    GcInvAck,
    GcFaultStatus,
    GcFaultAddrLo,
    GcFaultAddrHi,
    GcAgpTop,
    GcAgpBot,
    GcAgpBase,
    GcCtx0Cntl,
    GcPtStartLo,
    GcPtStartHi,
    GcPtEndLo,
    GcPtEndHi,
    GcPtBaseLo,
    GcPtBaseHi,
    RlcSafeMode,
    // GC: RLC, GRBM, CP
    Scratch6,
    Scratch7,
    CpStat,
    RlcBootloadStatus,
    GrbmGfxCntl,
    GrbmSoftReset,
    MecRs64Cntl,
    MecRs64PcStart,
    MecRs64PcStartHi,
    // GC: the compute HQD (banked by GRBM_GFX_CNTL's me/pipe/queue)
    MqdBaseAddr,
    HqdActive,
    HqdPqBase,
    HqdPqBaseHi,
    HqdPqRptr,
    HqdRptrReportAddr,
    HqdRptrReportAddrHi,
    HqdWptrPollAddr,
    HqdWptrPollAddrHi,
    HqdDoorbellControl,
    HqdPqControl,
    HqdDequeueRequest,
    HqdPqWptrLo,
    HqdPqWptrHi,
    SpiComputeQueueReset,
    // GC: the compute dispatch state (SH registers)
    PgmLo,
    PgmHi,
    Rsrc1,
    Rsrc2,
    Rsrc3,
    TmpringSize,
    ScratchBaseLo,
    ScratchBaseHi,
    UserData0,
    NumThreadX,
    NumThreadY,
    NumThreadZ,
    DispatchInitiator,
    // SDMA0 queue 0 and the engine
    SdmaRbCntl,
    SdmaRbBase,
    SdmaRbBaseHi,
    SdmaRbRptr,
    SdmaRbRptrHi,
    SdmaRbWptr,
    SdmaRbWptrHi,
    SdmaRptrAddrLo,
    SdmaRptrAddrHi,
    SdmaWptrPollLo,
    SdmaWptrPollHi,
    SdmaDoorbell,
    SdmaDoorbellOffset,
    SdmaIbCntl,
    SdmaEngineCntl,
    SdmaCntl,
}

/// One row: register, IP, base segment, offset, and the Linux name (empty: not in tinygrad's tables).
pub type Row = (Reg, Ip, u8, u32, &'static str);

use Ip::*;
use Reg::*;

/// Rows both boards share (same IP, segment, offset and name).
const COMMON: &[Row] = &[
    (MmIndex, Nbio, 0, 0x0, ""),
    (MmData, Nbio, 0, 0x1, ""),
    (MmIndexHi, Nbio, 0, 0x6, ""),
    (RsmuIndex, Nbio, 1, 0x0, "regBIF_BX_PF0_RSMU_INDEX"),
    (RsmuData, Nbio, 1, 0x1, "regBIF_BX_PF0_RSMU_DATA"),
    (ConfigMemsize, Nbio, 2, 0xC3, ""),
    (DoorbellAperEn, Nbio, 2, 0xC0, "regRCC_DEV0_EPF0_RCC_DOORBELL_APER_EN"),
    (HdpFlushReq, Nbio, 2, 0x106, "regBIF_BX_PF0_GPU_HDP_FLUSH_REQ"),
    (HdpFlushDone, Nbio, 2, 0x107, "regBIF_BX_PF0_GPU_HDP_FLUSH_DONE"),
    (RemapHdpMemFlushCntl, Nbio, 2, 0x12D, "regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL"),
    (SmuMsg, Mp1, 0, 0x282, "mmMP1_SMN_C2PMSG_66"),
    (SmuArg, Mp1, 0, 0x292, "mmMP1_SMN_C2PMSG_82"),
    (SmuResp, Mp1, 0, 0x29A, "mmMP1_SMN_C2PMSG_90"),
    (SmuDbgMsg, Mp1, 0, 0x28B, "mmMP1_SMN_C2PMSG_75"),
    (SmuDbgArg, Mp1, 0, 0x275, "mmMP1_SMN_C2PMSG_53"),
    (SmuDbgResp, Mp1, 0, 0x276, "mmMP1_SMN_C2PMSG_54"),
    (Scratch6, Gc, 1, 0x2046, "regSCRATCH_REG6"),
    (RlcSafeMode, Gc, 1, 0x980, "regRLC_SAFE_MODE"),
    (Scratch7, Gc, 1, 0x2047, "regSCRATCH_REG7"),
    (CpStat, Gc, 0, 0xF40, "regCP_STAT"),
    (GrbmGfxCntl, Gc, 1, 0x900, "regGRBM_GFX_CNTL"),
    (GrbmSoftReset, Gc, 0, 0xDA8, "regGRBM_SOFT_RESET"),
    (MecRs64Cntl, Gc, 1, 0x2904, "regCP_MEC_RS64_CNTL"),
    (MecRs64PcStart, Gc, 1, 0x2900, "regCP_MEC_RS64_PRGRM_CNTR_START"),
    (MecRs64PcStartHi, Gc, 1, 0x2938, "regCP_MEC_RS64_PRGRM_CNTR_START_HI"),
    (MqdBaseAddr, Gc, 0, 0x1FA9, "regCP_MQD_BASE_ADDR"),
    (HqdActive, Gc, 0, 0x1FAB, "regCP_HQD_ACTIVE"),
    (HqdPqBase, Gc, 0, 0x1FB1, "regCP_HQD_PQ_BASE"),
    (HqdPqBaseHi, Gc, 0, 0x1FB2, "regCP_HQD_PQ_BASE_HI"),
    (HqdPqRptr, Gc, 0, 0x1FB3, "regCP_HQD_PQ_RPTR"),
    (HqdRptrReportAddr, Gc, 0, 0x1FB4, "regCP_HQD_PQ_RPTR_REPORT_ADDR"),
    (HqdRptrReportAddrHi, Gc, 0, 0x1FB5, "regCP_HQD_PQ_RPTR_REPORT_ADDR_HI"),
    (HqdWptrPollAddr, Gc, 0, 0x1FB6, "regCP_HQD_PQ_WPTR_POLL_ADDR"),
    (HqdWptrPollAddrHi, Gc, 0, 0x1FB7, "regCP_HQD_PQ_WPTR_POLL_ADDR_HI"),
    (HqdDoorbellControl, Gc, 0, 0x1FB8, "regCP_HQD_PQ_DOORBELL_CONTROL"),
    (HqdPqControl, Gc, 0, 0x1FBA, "regCP_HQD_PQ_CONTROL"),
    (HqdDequeueRequest, Gc, 0, 0x1FC1, "regCP_HQD_DEQUEUE_REQUEST"),
    (HqdPqWptrLo, Gc, 0, 0x1FDF, "regCP_HQD_PQ_WPTR_LO"),
    (HqdPqWptrHi, Gc, 0, 0x1FE0, "regCP_HQD_PQ_WPTR_HI"),
    (SpiComputeQueueReset, Gc, 0, 0x1F73, "regSPI_COMPUTE_QUEUE_RESET"),
    (PgmLo, Gc, 0, 0x1BAC, "regCOMPUTE_PGM_LO"),
    (PgmHi, Gc, 0, 0x1BAD, "regCOMPUTE_PGM_HI"),
    (Rsrc1, Gc, 0, 0x1BB2, "regCOMPUTE_PGM_RSRC1"),
    (Rsrc2, Gc, 0, 0x1BB3, "regCOMPUTE_PGM_RSRC2"),
    (Rsrc3, Gc, 0, 0x1BC8, "regCOMPUTE_PGM_RSRC3"),
    (TmpringSize, Gc, 0, 0x1BB8, "regCOMPUTE_TMPRING_SIZE"),
    (ScratchBaseLo, Gc, 0, 0x1BB0, "regCOMPUTE_DISPATCH_SCRATCH_BASE_LO"),
    (ScratchBaseHi, Gc, 0, 0x1BB1, "regCOMPUTE_DISPATCH_SCRATCH_BASE_HI"),
    (UserData0, Gc, 0, 0x1BE0, "regCOMPUTE_USER_DATA_0"),
    (NumThreadX, Gc, 0, 0x1BA7, "regCOMPUTE_NUM_THREAD_X"),
    (NumThreadY, Gc, 0, 0x1BA8, "regCOMPUTE_NUM_THREAD_Y"),
    (NumThreadZ, Gc, 0, 0x1BA9, "regCOMPUTE_NUM_THREAD_Z"),
    (DispatchInitiator, Gc, 0, 0x1BA0, "regCOMPUTE_DISPATCH_INITIATOR"),
    (SdmaRbCntl, Sdma0, 0, 0x80, "regSDMA0_QUEUE0_RB_CNTL"),
    (SdmaRbBase, Sdma0, 0, 0x81, "regSDMA0_QUEUE0_RB_BASE"),
    (SdmaRbBaseHi, Sdma0, 0, 0x82, "regSDMA0_QUEUE0_RB_BASE_HI"),
    (SdmaRbRptr, Sdma0, 0, 0x83, "regSDMA0_QUEUE0_RB_RPTR"),
    (SdmaRbRptrHi, Sdma0, 0, 0x84, "regSDMA0_QUEUE0_RB_RPTR_HI"),
    (SdmaRbWptr, Sdma0, 0, 0x85, "regSDMA0_QUEUE0_RB_WPTR"),
    (SdmaRbWptrHi, Sdma0, 0, 0x86, "regSDMA0_QUEUE0_RB_WPTR_HI"),
    (SdmaRptrAddrHi, Sdma0, 0, 0x88, "regSDMA0_QUEUE0_RB_RPTR_ADDR_HI"),
];

const NAVI31: &[Row] = &[
    (PspBlCmd, Mp0, 0, 0x63, "regMP0_SMN_C2PMSG_35"),
    (PspBlAddr, Mp0, 0, 0x64, "regMP0_SMN_C2PMSG_36"),
    (PspRingCtl, Mp0, 0, 0x80, "regMP0_SMN_C2PMSG_64"),
    (PspRingWptr, Mp0, 0, 0x83, "regMP0_SMN_C2PMSG_67"),
    (PspRingLo, Mp0, 0, 0x85, "regMP0_SMN_C2PMSG_69"),
    (PspRingHi, Mp0, 0, 0x86, "regMP0_SMN_C2PMSG_70"),
    (PspRingSize, Mp0, 0, 0x87, "regMP0_SMN_C2PMSG_71"),
    (PspSosAlive, Mp0, 0, 0x91, "regMP0_SMN_C2PMSG_81"),
    (MmFbBase, Mmhub, 0, 0x8EC, "regMMMC_VM_FB_LOCATION_BASE"),
    (MmFbTop, Mmhub, 0, 0x8ED, "regMMMC_VM_FB_LOCATION_TOP"),
    (MmApertureLow, Mmhub, 0, 0x8F1, "regMMMC_VM_SYSTEM_APERTURE_LOW_ADDR"),
    (MmApertureHigh, Mmhub, 0, 0x8F2, "regMMMC_VM_SYSTEM_APERTURE_HIGH_ADDR"),
    (MmInvSem, Mmhub, 0, 0x762, "regMMVM_INVALIDATE_ENG17_SEM"),
    (MmInvReq, Mmhub, 0, 0x774, "regMMVM_INVALIDATE_ENG17_REQ"),
    (MmInvAck, Mmhub, 0, 0x786, "regMMVM_INVALIDATE_ENG17_ACK"),
    (MmAgpTop, Mmhub, 0, 0x8EE, "regMMMC_VM_AGP_TOP"),
    (MmAgpBot, Mmhub, 0, 0x8EF, "regMMMC_VM_AGP_BOT"),
    (MmAgpBase, Mmhub, 0, 0x8F0, "regMMMC_VM_AGP_BASE"),
    (MmCtx0Cntl, Mmhub, 0, 0x740, "regMMVM_CONTEXT0_CNTL"),
    (MmPtStartLo, Mmhub, 0, 0x7CB, "regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"),
    (MmPtStartHi, Mmhub, 0, 0x7CC, "regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"),
    (MmPtEndLo, Mmhub, 0, 0x7EB, "regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"),
    (MmPtEndHi, Mmhub, 0, 0x7EC, "regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"),
    (MmPtBaseLo, Mmhub, 0, 0x7AB, "regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"),
    (MmPtBaseHi, Mmhub, 0, 0x7AC, "regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"),
    (GcFbBase, Gc, 0, 0x1678, "regGCMC_VM_FB_LOCATION_BASE"),
    (GcFbTop, Gc, 0, 0x1679, "regGCMC_VM_FB_LOCATION_TOP"),
    (GcApertureLow, Gc, 0, 0x167D, "regGCMC_VM_SYSTEM_APERTURE_LOW_ADDR"),
    (GcApertureHigh, Gc, 0, 0x167E, "regGCMC_VM_SYSTEM_APERTURE_HIGH_ADDR"),
    (GcInvReq, Gc, 0, 0x16BC, "regGCVM_INVALIDATE_ENG17_REQ"),
    (GcInvAck, Gc, 0, 0x16CE, "regGCVM_INVALIDATE_ENG17_ACK"),
    (GcFaultStatus, Gc, 0, 0x15C8, "regGCVM_L2_PROTECTION_FAULT_STATUS"),
    (GcFaultAddrLo, Gc, 0, 0x15C9, "regGCVM_L2_PROTECTION_FAULT_ADDR_LO32"),
    (GcFaultAddrHi, Gc, 0, 0x15CA, "regGCVM_L2_PROTECTION_FAULT_ADDR_HI32"),
    (GcAgpTop, Gc, 0, 0x167A, "regGCMC_VM_AGP_TOP"),
    (GcAgpBot, Gc, 0, 0x167B, "regGCMC_VM_AGP_BOT"),
    (GcAgpBase, Gc, 0, 0x167C, "regGCMC_VM_AGP_BASE"),
    (GcCtx0Cntl, Gc, 0, 0x1688, "regGCVM_CONTEXT0_CNTL"),
    (GcPtStartLo, Gc, 0, 0x1713, "regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"),
    (GcPtStartHi, Gc, 0, 0x1714, "regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"),
    (GcPtEndLo, Gc, 0, 0x1733, "regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"),
    (GcPtEndHi, Gc, 0, 0x1734, "regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"),
    (GcPtBaseLo, Gc, 0, 0x16F3, "regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"),
    (GcPtBaseHi, Gc, 0, 0x16F4, "regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"),
    (RlcBootloadStatus, Gc, 1, 0x4E82, "regRLC_RLCS_BOOTLOAD_STATUS"),
    (SdmaRptrAddrLo, Sdma0, 0, 0x89, "regSDMA0_QUEUE0_RB_RPTR_ADDR_LO"),
    (SdmaWptrPollHi, Sdma0, 0, 0xB2, "regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI"),
    (SdmaWptrPollLo, Sdma0, 0, 0xB3, "regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO"),
    (SdmaDoorbell, Sdma0, 0, 0x92, "regSDMA0_QUEUE0_DOORBELL"),
    (SdmaDoorbellOffset, Sdma0, 0, 0xAB, "regSDMA0_QUEUE0_DOORBELL_OFFSET"),
    (SdmaIbCntl, Sdma0, 0, 0x8A, "regSDMA0_QUEUE0_IB_CNTL"),
    (SdmaEngineCntl, Sdma0, 1, 0x589A, "regSDMA0_F32_CNTL"),
    (SdmaCntl, Sdma0, 0, 0x1C, "regSDMA0_CNTL"),
];

const NAVI48: &[Row] = &[
    (PspBlCmd, Mp0, 0, 0x63, "regMPASP_SMN_C2PMSG_35"),
    (PspBlAddr, Mp0, 0, 0x64, "regMPASP_SMN_C2PMSG_36"),
    (PspRingCtl, Mp0, 0, 0x80, "regMPASP_SMN_C2PMSG_64"),
    (PspRingWptr, Mp0, 0, 0x83, "regMPASP_SMN_C2PMSG_67"),
    (PspRingLo, Mp0, 0, 0x85, "regMPASP_SMN_C2PMSG_69"),
    (PspRingHi, Mp0, 0, 0x86, "regMPASP_SMN_C2PMSG_70"),
    (PspRingSize, Mp0, 0, 0x87, "regMPASP_SMN_C2PMSG_71"),
    (PspSosAlive, Mp0, 0, 0x91, "regMPASP_SMN_C2PMSG_81"),
    (MmFbBase, Mmhub, 0, 0x554, "regMMMC_VM_FB_LOCATION_BASE"),
    (MmFbTop, Mmhub, 0, 0x555, "regMMMC_VM_FB_LOCATION_TOP"),
    (MmApertureLow, Mmhub, 0, 0x559, "regMMMC_VM_SYSTEM_APERTURE_LOW_ADDR"),
    (MmApertureHigh, Mmhub, 0, 0x55A, "regMMMC_VM_SYSTEM_APERTURE_HIGH_ADDR"),
    (MmInvSem, Mmhub, 0, 0x586, "regMMVM_INVALIDATE_ENG17_SEM"),
    (MmInvReq, Mmhub, 0, 0x598, "regMMVM_INVALIDATE_ENG17_REQ"),
    (MmInvAck, Mmhub, 0, 0x5AA, "regMMVM_INVALIDATE_ENG17_ACK"),
    (MmAgpTop, Mmhub, 0, 0x556, "regMMMC_VM_AGP_TOP"),
    (MmAgpBot, Mmhub, 0, 0x557, "regMMMC_VM_AGP_BOT"),
    (MmAgpBase, Mmhub, 0, 0x558, "regMMMC_VM_AGP_BASE"),
    (MmCtx0Cntl, Mmhub, 0, 0x564, "regMMVM_CONTEXT0_CNTL"),
    (MmPtStartLo, Mmhub, 0, 0x5EF, "regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"),
    (MmPtStartHi, Mmhub, 0, 0x5F0, "regMMVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"),
    (MmPtEndLo, Mmhub, 0, 0x60F, "regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"),
    (MmPtEndHi, Mmhub, 0, 0x610, "regMMVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"),
    (MmPtBaseLo, Mmhub, 0, 0x5CF, "regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"),
    (MmPtBaseHi, Mmhub, 0, 0x5D0, "regMMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"),
    (GcFbBase, Gc, 0, 0x1614, "regGCMC_VM_FB_LOCATION_BASE"),
    (GcFbTop, Gc, 0, 0x1615, "regGCMC_VM_FB_LOCATION_TOP"),
    (GcApertureLow, Gc, 0, 0x1619, "regGCMC_VM_SYSTEM_APERTURE_LOW_ADDR"),
    (GcApertureHigh, Gc, 0, 0x161A, "regGCMC_VM_SYSTEM_APERTURE_HIGH_ADDR"),
    (GcInvReq, Gc, 0, 0x1658, "regGCVM_INVALIDATE_ENG17_REQ"),
    (GcInvAck, Gc, 0, 0x166A, "regGCVM_INVALIDATE_ENG17_ACK"),
    (GcFaultStatus, Gc, 0, 0x15D0, "regGCVM_L2_PROTECTION_FAULT_STATUS_LO32"),
    (GcFaultAddrLo, Gc, 0, 0x15D2, "regGCVM_L2_PROTECTION_FAULT_ADDR_LO32"),
    (GcFaultAddrHi, Gc, 0, 0x15D3, "regGCVM_L2_PROTECTION_FAULT_ADDR_HI32"),
    (GcAgpTop, Gc, 0, 0x1616, "regGCMC_VM_AGP_TOP"),
    (GcAgpBot, Gc, 0, 0x1617, "regGCMC_VM_AGP_BOT"),
    (GcAgpBase, Gc, 0, 0x1618, "regGCMC_VM_AGP_BASE"),
    (GcCtx0Cntl, Gc, 0, 0x1624, "regGCVM_CONTEXT0_CNTL"),
    (GcPtStartLo, Gc, 0, 0x16AF, "regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32"),
    (GcPtStartHi, Gc, 0, 0x16B0, "regGCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32"),
    (GcPtEndLo, Gc, 0, 0x16CF, "regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32"),
    (GcPtEndHi, Gc, 0, 0x16D0, "regGCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32"),
    (GcPtBaseLo, Gc, 0, 0x168F, "regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"),
    (GcPtBaseHi, Gc, 0, 0x1690, "regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32"),
    (RlcBootloadStatus, Gc, 1, 0x4E7C, "regRLC_RLCS_BOOTLOAD_STATUS"),
    (SdmaRptrAddrLo, Sdma0, 0, 0x87, "regSDMA0_QUEUE0_RB_RPTR_ADDR_LO"),
    (SdmaWptrPollLo, Sdma0, 0, 0x98, "regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO"),
    (SdmaWptrPollHi, Sdma0, 0, 0x99, "regSDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI"),
    (SdmaDoorbell, Sdma0, 0, 0x8F, "regSDMA0_QUEUE0_DOORBELL"),
    (SdmaDoorbellOffset, Sdma0, 0, 0x91, "regSDMA0_QUEUE0_DOORBELL_OFFSET"),
    (SdmaIbCntl, Sdma0, 0, 0x89, "regSDMA0_QUEUE0_IB_CNTL"),
    (SdmaEngineCntl, Sdma0, 1, 0x588E, "regSDMA0_MCU_CNTL"),
    (SdmaCntl, Sdma0, 0, 0x0D, "regSDMA0_CNTL"),
];

/// Every row of `board`'s table.
pub fn rows(board: Board) -> impl Iterator<Item = &'static Row> {
    let own = match board {
        Board::Navi31 => NAVI31,
        Board::Navi48 => NAVI48,
    };
    COMMON.iter().chain(own.iter())
}

/// The tinygrad module a row's IP is looked up in for `board` (tinygrad `amdev.py` `_build_regs`: MP1 through
/// `mp_11_0_0`, GC 12.0.1 through `gc_12_0_0`).
pub fn peer_module(board: Board, ip: Ip) -> &'static str {
    match (board, ip) {
        (Board::Navi31, Gc | Sdma0) => "gc_11_0_0",
        (Board::Navi48, Gc | Sdma0) => "gc_12_0_0",
        (Board::Navi31, Mmhub) => "mmhub_3_0_0",
        (Board::Navi48, Mmhub) => "mmhub_4_1_0",
        (Board::Navi31, Nbio) => "nbio_4_3_0",
        (Board::Navi48, Nbio) => "nbif_6_3_1",
        (Board::Navi31, Mp0) => "mp_13_0_0",
        (Board::Navi48, Mp0) => "mp_14_0_2",
        (_, Mp1) => "mp_11_0_0",
        (Board::Navi31, Hdp) => "hdp_6_0_0",
        (Board::Navi48, Hdp) => "hdp_7_0_0",
        (Board::Navi31, Osssys) => "osssys_6_0_0",
        (Board::Navi48, Osssys) => "osssys_7_0_0",
    }
}

/// Absolute dword index of `(ip, seg, off)` on `board`.
pub fn absolute(board: Board, ip: Ip, seg: u8, off: u32) -> u32 {
    board.bases(ip)[seg as usize] + off
}

/// Register lookups both ways for one board.
#[derive(Clone, Debug)]
pub struct RegMap {
    by_index: HashMap<u32, Reg>,
    by_reg: HashMap<Reg, u32>,
}

/// COMPUTE_USER_DATA_0..15.
pub const USER_DATA_COUNT: u32 = 16;

impl RegMap {
    pub fn new(board: Board) -> RegMap {
        let mut m = RegMap { by_index: HashMap::new(), by_reg: HashMap::new() };
        for &(reg, ip, seg, off, _) in rows(board) {
            let at = absolute(board, ip, seg, off);
            let dup = m.by_index.insert(at, reg);
            debug_assert!(dup.is_none(), "two registers at {at:#x}");
            m.by_reg.insert(reg, at);
        }
        m
    }

    pub fn reg(&self, index: u32) -> Option<Reg> {
        self.by_index.get(&index).copied()
    }

    /// The absolute index of `reg`.
    pub fn index(&self, reg: Reg) -> u32 {
        self.by_reg[&reg]
    }
}
