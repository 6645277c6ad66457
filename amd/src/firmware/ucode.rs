//! The byte layouts of the AMD firmware file headers pilot reads, as Linux declares them
//! (`drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h`): little endian, packed to 4 bytes with no padding, read
//! in place from the file's bytes ([`super::header`] checks every size and offset they give).
//!
//! Each per-IP header starts with `struct common_firmware_header`, as in Linux, so one read of the
//! per-IP struct at byte 0 gives both.

use std::mem::offset_of;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

/// `struct common_firmware_header` (32 bytes).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct CommonFirmwareHeader {
    pub size_bytes: U32,
    pub header_size_bytes: U32,
    pub header_version_major: U16,
    pub header_version_minor: U16,
    pub ip_version_major: U16,
    pub ip_version_minor: U16,
    pub ucode_version: U32,
    pub ucode_size_bytes: U32,
    pub ucode_array_offset_bytes: U32,
    pub crc32: U32,
}

/// The common header's fields in file order with their byte offsets, to name the first one a truncated
/// file cuts short.
pub(super) const COMMON_FIELDS: [(&str, usize); 10] = [
    ("size_bytes", offset_of!(CommonFirmwareHeader, size_bytes)),
    ("header_size_bytes", offset_of!(CommonFirmwareHeader, header_size_bytes)),
    ("header_version_major", offset_of!(CommonFirmwareHeader, header_version_major)),
    ("header_version_minor", offset_of!(CommonFirmwareHeader, header_version_minor)),
    ("ip_version_major", offset_of!(CommonFirmwareHeader, ip_version_major)),
    ("ip_version_minor", offset_of!(CommonFirmwareHeader, ip_version_minor)),
    ("ucode_version", offset_of!(CommonFirmwareHeader, ucode_version)),
    ("ucode_size_bytes", offset_of!(CommonFirmwareHeader, ucode_size_bytes)),
    ("ucode_array_offset_bytes", offset_of!(CommonFirmwareHeader, ucode_array_offset_bytes)),
    ("crc32", offset_of!(CommonFirmwareHeader, crc32)),
];

/// `struct psp_fw_bin_desc`: one sOS component of a v2.0 PSP file, `offset_bytes` counted from the ucode
/// array.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct PspFwBinDesc {
    pub fw_type: U32,
    pub fw_version: U32,
    pub offset_bytes: U32,
    pub size_bytes: U32,
}

/// `struct psp_firmware_header_v2_0` without its flexible array `psp_fw_bin[]`: `psp_fw_bin_count`
/// [`PspFwBinDesc`]s follow it.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct PspFirmwareHeaderV2_0 {
    pub header: CommonFirmwareHeader,
    pub psp_fw_bin_count: U32,
}

/// `struct smc_firmware_header_v1_0`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SmcFirmwareHeaderV1_0 {
    pub header: CommonFirmwareHeader,
    pub ucode_start_addr: U32,
}

/// `struct smc_firmware_header_v2_0`: one soft pptable.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SmcFirmwareHeaderV2_0 {
    pub v1_0: SmcFirmwareHeaderV1_0,
    pub ppt_offset_bytes: U32,
    pub ppt_size_bytes: U32,
}

/// `struct smc_firmware_header_v2_1`: `pptable_count` [`SmcSoftPptableEntry`]s at `pptable_entry_offset`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SmcFirmwareHeaderV2_1 {
    pub v1_0: SmcFirmwareHeaderV1_0,
    pub pptable_count: U32,
    pub pptable_entry_offset: U32,
}

/// `struct smc_soft_pptable_entry`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SmcSoftPptableEntry {
    pub id: U32,
    pub ppt_offset_bytes: U32,
    pub ppt_size_bytes: U32,
}

/// `struct sdma_firmware_header_v2_0`: the context thread at the ucode array's start, the control thread
/// at `ctl_ucode_offset`; jump tables in dwords within their thread's code.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SdmaFirmwareHeaderV2_0 {
    pub header: CommonFirmwareHeader,
    pub ucode_feature_version: U32,
    pub ctx_ucode_size_bytes: U32,
    pub ctx_jt_offset: U32,
    pub ctx_jt_size: U32,
    pub ctl_ucode_offset: U32,
    pub ctl_ucode_size_bytes: U32,
    pub ctl_jt_offset: U32,
    pub ctl_jt_size: U32,
}

/// `struct sdma_firmware_header_v3_0`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct SdmaFirmwareHeaderV3_0 {
    pub header: CommonFirmwareHeader,
    pub ucode_feature_version: U32,
    pub ucode_offset_bytes: U32,
    pub ucode_size_bytes: U32,
}

/// `struct gfx_firmware_header_v2_0` (RS64 engines: code, data (the stack) and the start address).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct GfxFirmwareHeaderV2_0 {
    pub header: CommonFirmwareHeader,
    pub ucode_feature_version: U32,
    pub ucode_size_bytes: U32,
    pub ucode_offset_bytes: U32,
    pub data_size_bytes: U32,
    pub data_offset_bytes: U32,
    pub ucode_start_addr_lo: U32,
    pub ucode_start_addr_hi: U32,
}

/// `struct imu_firmware_header_v1_0`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct ImuFirmwareHeaderV1_0 {
    pub header: CommonFirmwareHeader,
    pub imu_iram_ucode_size_bytes: U32,
    pub imu_iram_ucode_offset_bytes: U32,
    pub imu_dram_ucode_size_bytes: U32,
    pub imu_dram_ucode_offset_bytes: U32,
}

/// `struct rlc_firmware_header_v2_0`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct RlcFirmwareHeaderV2_0 {
    pub header: CommonFirmwareHeader,
    pub ucode_feature_version: U32,
    pub jt_offset: U32,
    pub jt_size: U32,
    pub save_and_restore_offset: U32,
    pub clear_state_descriptor_offset: U32,
    pub avail_scratch_ram_locations: U32,
    pub reg_restore_list_size: U32,
    pub reg_list_format_start: U32,
    pub reg_list_format_separate_start: U32,
    pub starting_offsets_start: U32,
    pub reg_list_format_size_bytes: U32,
    pub reg_list_format_array_offset_bytes: U32,
    pub reg_list_size_bytes: U32,
    pub reg_list_array_offset_bytes: U32,
    pub reg_list_format_separate_size_bytes: U32,
    pub reg_list_format_separate_array_offset_bytes: U32,
    pub reg_list_separate_size_bytes: U32,
    pub reg_list_separate_array_offset_bytes: U32,
}

/// `struct rlc_firmware_header_v2_1`: the save/restore lists (CNTL, GPM, SRM).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct RlcFirmwareHeaderV2_1 {
    pub v2_0: RlcFirmwareHeaderV2_0,
    pub reg_list_format_direct_reg_list_length: U32,
    pub save_restore_list_cntl_ucode_ver: U32,
    pub save_restore_list_cntl_feature_ver: U32,
    pub save_restore_list_cntl_size_bytes: U32,
    pub save_restore_list_cntl_offset_bytes: U32,
    pub save_restore_list_gpm_ucode_ver: U32,
    pub save_restore_list_gpm_feature_ver: U32,
    pub save_restore_list_gpm_size_bytes: U32,
    pub save_restore_list_gpm_offset_bytes: U32,
    pub save_restore_list_srm_ucode_ver: U32,
    pub save_restore_list_srm_feature_ver: U32,
    pub save_restore_list_srm_size_bytes: U32,
    pub save_restore_list_srm_offset_bytes: U32,
}

/// `struct rlc_firmware_header_v2_2`: IRAM and DRAM boot code.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct RlcFirmwareHeaderV2_2 {
    pub v2_1: RlcFirmwareHeaderV2_1,
    pub rlc_iram_ucode_size_bytes: U32,
    pub rlc_iram_ucode_offset_bytes: U32,
    pub rlc_dram_ucode_size_bytes: U32,
    pub rlc_dram_ucode_offset_bytes: U32,
}

/// `struct rlc_firmware_header_v2_3`: RLC_P and RLC_V (v2.4 starts with it).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct RlcFirmwareHeaderV2_3 {
    pub v2_2: RlcFirmwareHeaderV2_2,
    pub rlcp_ucode_version: U32,
    pub rlcp_ucode_feature_version: U32,
    pub rlcp_ucode_size_bytes: U32,
    pub rlcp_ucode_offset_bytes: U32,
    pub rlcv_ucode_version: U32,
    pub rlcv_ucode_feature_version: U32,
    pub rlcv_ucode_size_bytes: U32,
    pub rlcv_ucode_offset_bytes: U32,
}

// The sizes Linux's structs have (and pilot's tests place fields by).
const _: () = {
    assert!(size_of::<CommonFirmwareHeader>() == 32);
    assert!(size_of::<PspFirmwareHeaderV2_0>() == 36);
    assert!(size_of::<PspFwBinDesc>() == 16);
    assert!(size_of::<SmcFirmwareHeaderV1_0>() == 36);
    assert!(size_of::<SmcFirmwareHeaderV2_0>() == 44);
    assert!(size_of::<SmcFirmwareHeaderV2_1>() == 44);
    assert!(size_of::<SmcSoftPptableEntry>() == 12);
    assert!(size_of::<SdmaFirmwareHeaderV2_0>() == 64);
    assert!(size_of::<SdmaFirmwareHeaderV3_0>() == 44);
    assert!(size_of::<GfxFirmwareHeaderV2_0>() == 60);
    assert!(size_of::<ImuFirmwareHeaderV1_0>() == 48);
    assert!(size_of::<RlcFirmwareHeaderV2_0>() == 104);
    assert!(offset_of!(RlcFirmwareHeaderV2_1, save_restore_list_cntl_size_bytes) == 116);
    assert!(size_of::<RlcFirmwareHeaderV2_1>() == 156);
    assert!(size_of::<RlcFirmwareHeaderV2_2>() == 172);
    assert!(size_of::<RlcFirmwareHeaderV2_3>() == 204);
};
