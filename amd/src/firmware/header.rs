//! AMD firmware file headers (Linux `drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h`), read and checked.
//!
//! Every file starts with `struct common_firmware_header` (32 bytes, little endian); the per-IP header
//! continues it. The layouts are Linux's structs ([`super::ucode`]), read in place. Linux's own check
//! (`amdgpu_ucode_validate`) is only `size_bytes == file length`; pilot also checks that every size and
//! offset it uses stays inside the file, so a truncated or corrupt file is an error here, never a short
//! copy on the GPU. The header's `crc32` is reported but not checked: Linux never checks it, and it is not
//! a plain CRC-32 of the payload in AMD's files.

use super::ucode::{
    CommonFirmwareHeader, GfxFirmwareHeaderV2_0, ImuFirmwareHeaderV1_0, PspFirmwareHeaderV2_0, PspFwBinDesc,
    RlcFirmwareHeaderV2_2, RlcFirmwareHeaderV2_3, SdmaFirmwareHeaderV2_0, SdmaFirmwareHeaderV3_0,
    SmcFirmwareHeaderV1_0, SmcFirmwareHeaderV2_0, SmcFirmwareHeaderV2_1, SmcSoftPptableEntry, COMMON_FIELDS,
};
use super::{FirmwareError, FwType, Part, PartId, SosComponent};
use std::ops::Range;
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

/// `struct common_firmware_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonHeader {
    pub size_bytes: u32,
    pub header_size_bytes: u32,
    pub header_version: (u16, u16),
    pub ip_version: (u16, u16),
    pub ucode_version: u32,
    pub ucode_size_bytes: u32,
    pub ucode_array_offset_bytes: u32,
    pub crc32: u32,
}

pub const COMMON_HEADER_BYTES: usize = size_of::<CommonFirmwareHeader>();

/// Which per-IP header a file carries, by the IP it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    /// `psp_*_sos.bin`: `psp_firmware_header_v2_0`, a table of sOS components.
    PspSos,
    /// `smu_*.bin`: `smc_firmware_header_v1_0`, `v2_0` (one pptable) or `v2_1` (a pptable table).
    Smu,
    /// `sdma_*.bin`: `sdma_firmware_header_v2_0` (two threads) or `v3_0` (one).
    Sdma,
    /// `gc_*_{pfp,me,mec}.bin`: `gfx_firmware_header_v2_0` (RS64: code + stack); the argument names the
    /// engine, which decides the PSP firmware types.
    Rs64(Rs64Engine),
    /// `gc_*_imu.bin`: `imu_firmware_header_v1_0`.
    Imu,
    /// `gc_*_rlc.bin`: `rlc_firmware_header_v2_2`..`v2_4` (v2.4 is read as its v2.3 prefix).
    Rlc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rs64Engine {
    Pfp,
    Me,
    Mec,
}

/// What one file's header says: the common header, the loadable parts (byte ranges of the file, in the
/// order the PSP takes them), and the RS64 program-counter start where the header has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub common: CommonHeader,
    pub parts: Vec<Part>,
    pub ucode_start: Option<u64>,
}

/// Bounds-checked reads of one named file.
struct Bytes<'a> {
    file: &'a str,
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    fn err(&self, field: &str, problem: impl Into<String>) -> FirmwareError {
        FirmwareError::Invalid { file: self.file.to_string(), field: field.to_string(), problem: problem.into() }
    }

    fn past_end(&self, field: &str, offset: usize) -> FirmwareError {
        self.err(field, format!("at byte {offset} is past the end of the {}-byte file (truncated?)", self.data.len()))
    }

    /// The common header at byte 0; a file too short for it is refused naming the first field it cuts.
    fn common(&self) -> Result<&'a CommonFirmwareHeader, FirmwareError> {
        CommonFirmwareHeader::ref_from_prefix(self.data).map(|(h, _)| h).map_err(|_| {
            let ends = COMMON_FIELDS.iter().skip(1).map(|f| f.1).chain([COMMON_HEADER_BYTES]);
            let (field, at) = COMMON_FIELDS
                .iter()
                .zip(ends)
                .find(|(_, end)| *end > self.data.len())
                .map(|(f, _)| *f)
                .expect("the file is shorter than the header");
            self.past_end(field, at)
        })
    }

    /// The per-IP header `T` (named `what`) at byte 0, whose `header_size_bytes` must cover it.
    fn header<T: FromBytes + KnownLayout + Immutable + Unaligned>(
        &self,
        common: &CommonHeader,
        what: &str,
    ) -> Result<&'a T, FirmwareError> {
        let bytes = size_of::<T>();
        if (common.header_size_bytes as usize) < bytes {
            let (major, minor) = common.header_version;
            return Err(self.err(
                "header_size_bytes",
                format!("{} is too small for a v{major}.{minor} header ({bytes} bytes)", common.header_size_bytes),
            ));
        }
        T::ref_from_prefix(self.data).map(|(h, _)| h).map_err(|_| self.past_end(what, 0))
    }

    /// `[offset, offset + size)`, checked to lie inside `within` (itself inside the file).
    fn range(&self, field: &str, offset: u64, size: u64, within: &Range<usize>) -> Result<Range<usize>, FirmwareError> {
        let end = offset.checked_add(size).ok_or_else(|| self.err(field, "offset + size overflows"))?;
        if offset < within.start as u64 || end > within.end as u64 {
            return Err(self.err(
                field,
                format!("bytes {offset:#x}..{end:#x} fall outside {:#x}..{:#x}", within.start, within.end),
            ));
        }
        Ok(offset as usize..end as usize)
    }
}

/// Reads and checks the common header: the file is as long as `size_bytes` says, the header and the
/// ucode array lie inside it, and the ucode array starts after the header.
pub fn common(file: &str, data: &[u8]) -> Result<CommonHeader, FirmwareError> {
    let b = Bytes { file, data };
    let raw = b.common()?;
    let h = CommonHeader {
        size_bytes: raw.size_bytes.get(),
        header_size_bytes: raw.header_size_bytes.get(),
        header_version: (raw.header_version_major.get(), raw.header_version_minor.get()),
        ip_version: (raw.ip_version_major.get(), raw.ip_version_minor.get()),
        ucode_version: raw.ucode_version.get(),
        ucode_size_bytes: raw.ucode_size_bytes.get(),
        ucode_array_offset_bytes: raw.ucode_array_offset_bytes.get(),
        crc32: raw.crc32.get(),
    };
    if h.size_bytes as usize != data.len() {
        return Err(
            b.err("size_bytes", format!("says {} bytes but the file has {} (truncated?)", h.size_bytes, data.len()))
        );
    }
    if (h.header_size_bytes as usize) < COMMON_HEADER_BYTES || h.header_size_bytes as usize > data.len() {
        return Err(b.err("header_size_bytes", format!("{} is outside 32..={}", h.header_size_bytes, data.len())));
    }
    b.range(
        "ucode_array_offset_bytes",
        h.ucode_array_offset_bytes.into(),
        h.ucode_size_bytes.into(),
        &(0..data.len()),
    )?;
    if h.ucode_array_offset_bytes < h.header_size_bytes {
        return Err(b.err(
            "ucode_array_offset_bytes",
            format!("{} overlaps the {}-byte header", h.ucode_array_offset_bytes, h.header_size_bytes),
        ));
    }
    Ok(h)
}

/// Reads the per-IP header of `ip` after [`common`], checking every size and offset against the file.
pub fn parse(file: &str, data: &[u8], ip: Ip) -> Result<Parsed, FirmwareError> {
    let common = common(file, data)?;
    let b = Bytes { file, data };
    let whole = 0..data.len();
    let ucode_start = common.ucode_array_offset_bytes as usize;
    let ucode = ucode_start..ucode_start + common.ucode_size_bytes as usize;
    let (major, minor) = common.header_version;
    let unsupported =
        |what: &str| b.err("header_version", format!("v{major}.{minor} is not a {what} header pilot reads"));
    let part = |id: PartId, range: Range<usize>| Part { id, range };
    // An offset and a size field as a checked byte range.
    let span = |field: &str, offset: U32, size: U32, within: &Range<usize>| {
        b.range(field, offset.get().into(), size.get().into(), within)
    };
    let mut parts = Vec::new();
    let mut pc = None;
    match ip {
        Ip::PspSos => {
            if (major, minor) != (2, 0) {
                return Err(unsupported("psp_firmware_header v2.0"));
            }
            let head = b.header::<PspFirmwareHeaderV2_0>(&common, "psp_firmware_header_v2_0")?;
            let (count, table_at) = (head.psp_fw_bin_count.get() as usize, size_of::<PspFirmwareHeaderV2_0>());
            let table_end = table_at + count * size_of::<PspFwBinDesc>();
            if count == 0 || table_end > ucode_start {
                return Err(b.err(
                    "psp_fw_bin_count",
                    format!("{count} descriptors do not fit between the header and the ucode array at {ucode_start}"),
                ));
            }
            let (table, _) = <[PspFwBinDesc]>::ref_from_prefix_with_elems(&data[table_at..], count)
                .map_err(|_| b.past_end("psp_fw_bin", table_at))?;
            for (i, desc) in table.iter().enumerate() {
                let fw_type = desc.fw_type.get();
                let component = SosComponent::from_psp_fw_type(fw_type)
                    .ok_or_else(|| b.err("psp_fw_bin.fw_type", format!("descriptor {i} has unknown type {fw_type}")))?;
                let field = format!("psp_fw_bin[{}].offset_bytes", component.name());
                let offset = ucode_start as u64 + u64::from(desc.offset_bytes.get());
                let range = b.range(&field, offset, desc.size_bytes.get().into(), &ucode)?;
                if parts.iter().any(|p: &Part| p.id == PartId::Sos(component)) {
                    return Err(b.err("psp_fw_bin.fw_type", format!("{} appears twice", component.name())));
                }
                parts.push(part(PartId::Sos(component), range));
            }
        }
        Ip::Smu => {
            let v1 = match (major, minor) {
                (1, 0) => b.header::<SmcFirmwareHeaderV1_0>(&common, "smc_firmware_header_v1_0")?,
                (2, 0) => {
                    let h = b.header::<SmcFirmwareHeaderV2_0>(&common, "smc_firmware_header_v2_0")?;
                    span("ppt_offset_bytes", h.ppt_offset_bytes, h.ppt_size_bytes, &whole)?;
                    &h.v1_0
                }
                (2, 1) => {
                    let h = b.header::<SmcFirmwareHeaderV2_1>(&common, "smc_firmware_header_v2_1")?;
                    let (count, table) = (h.pptable_count.get(), h.pptable_entry_offset.get());
                    let entry = size_of::<SmcSoftPptableEntry>() as u64;
                    let at = b.range("pptable_entry_offset", table.into(), u64::from(count) * entry, &whole)?;
                    let (entries, _) = <[SmcSoftPptableEntry]>::ref_from_prefix_with_elems(&data[at], count as usize)
                        .map_err(|_| b.past_end("pptable_entry_offset", table as usize))?;
                    for (i, e) in entries.iter().enumerate() {
                        span(&format!("pptable[{i}].ppt_offset_bytes"), e.ppt_offset_bytes, e.ppt_size_bytes, &whole)?;
                    }
                    &h.v1_0
                }
                _ => return Err(unsupported("smc_firmware_header v1.0/v2.0/v2.1")),
            };
            pc = Some(u64::from(v1.ucode_start_addr.get()));
            parts.push(part(PartId::Ip(FwType::SMU), ucode.clone()));
        }
        Ip::Sdma => match (major, minor) {
            (2, 0) => {
                let h = b.header::<SdmaFirmwareHeaderV2_0>(&common, "sdma_firmware_header_v2_0")?;
                let ctx =
                    b.range("ctx_ucode_size_bytes", ucode_start as u64, h.ctx_ucode_size_bytes.get().into(), &ucode)?;
                jump_table(&b, "ctx_jt_offset", h.ctx_jt_offset, h.ctx_jt_size, ctx.len())?;
                let ctl = span("ctl_ucode_offset", h.ctl_ucode_offset, h.ctl_ucode_size_bytes, &ucode)?;
                jump_table(&b, "ctl_jt_offset", h.ctl_jt_offset, h.ctl_jt_size, ctl.len())?;
                // tinygrad `AMFirmware`: the control thread (TH1) first, then the context thread (TH0).
                parts.push(part(PartId::Ip(FwType::SDMA_UCODE_TH1), ctl));
                parts.push(part(PartId::Ip(FwType::SDMA_UCODE_TH0), ctx));
            }
            (3, 0) => {
                let h = b.header::<SdmaFirmwareHeaderV3_0>(&common, "sdma_firmware_header_v3_0")?;
                let code = span("ucode_offset_bytes", h.ucode_offset_bytes, h.ucode_size_bytes, &ucode)?;
                parts.push(part(PartId::Ip(FwType::SDMA_UCODE_TH0), code));
            }
            _ => return Err(unsupported("sdma_firmware_header v2.0/v3.0")),
        },
        Ip::Rs64(engine) => {
            if (major, minor) != (2, 0) {
                return Err(unsupported("gfx_firmware_header v2.0 (RS64)"));
            }
            let h = b.header::<GfxFirmwareHeaderV2_0>(&common, "gfx_firmware_header_v2_0")?;
            let code = span("ucode_offset_bytes", h.ucode_offset_bytes, h.ucode_size_bytes, &ucode)?;
            let stack = span("data_offset_bytes", h.data_offset_bytes, h.data_size_bytes, &ucode)?;
            pc = Some(u64::from(h.ucode_start_addr_lo.get()) | u64::from(h.ucode_start_addr_hi.get()) << 32);
            let (code_type, stack_type) = match engine {
                Rs64Engine::Pfp => (FwType::RS64_PFP, FwType::RS64_PFP_P0_STACK),
                Rs64Engine::Me => (FwType::RS64_ME, FwType::RS64_ME_P0_STACK),
                Rs64Engine::Mec => (FwType::RS64_MEC, FwType::RS64_MEC_P0_STACK),
            };
            parts.push(part(PartId::Ip(code_type), code));
            parts.push(part(PartId::Ip(stack_type), stack));
        }
        Ip::Imu => {
            if (major, minor) != (1, 0) {
                return Err(unsupported("imu_firmware_header v1.0"));
            }
            let h = b.header::<ImuFirmwareHeaderV1_0>(&common, "imu_firmware_header_v1_0")?;
            // Linux `amdgpu_ucode_init_single_fw` and tinygrad: IMU_D follows IMU_I in the ucode array (the
            // header's offsets are not used).
            let iram = h.imu_iram_ucode_size_bytes.get().into();
            let i = b.range("imu_iram_ucode_size_bytes", ucode_start as u64, iram, &ucode)?;
            let dram = h.imu_dram_ucode_size_bytes.get().into();
            let d = b.range("imu_dram_ucode_size_bytes", i.end as u64, dram, &ucode)?;
            parts.push(part(PartId::Ip(FwType::IMU_I), i));
            parts.push(part(PartId::Ip(FwType::IMU_D), d));
        }
        Ip::Rlc => {
            if major != 2 || !(2..=4).contains(&minor) {
                return Err(unsupported("rlc_firmware_header v2.2..v2.4"));
            }
            let v2_3 = match minor {
                2 => None,
                _ => Some(b.header::<RlcFirmwareHeaderV2_3>(&common, "rlc_firmware_header_v2_3")?),
            };
            let v2_2 = match v2_3 {
                Some(h) => &h.v2_2,
                None => b.header::<RlcFirmwareHeaderV2_2>(&common, "rlc_firmware_header_v2_2")?,
            };
            let v2_1 = &v2_2.v2_1;
            let mut region = |id: FwType, field: &str, offset: U32, size: U32| {
                parts.push(part(PartId::Ip(id), span(field, offset, size, &whole)?));
                Ok::<(), FirmwareError>(())
            };
            // v2.1: the save/restore lists; v2.2: IRAM and DRAM boot; v2.3: RLC_P and RLC_V (byte offsets
            // of struct rlc_firmware_header_v2_{1,2,3}); RLC_G (the common ucode array) last.
            // The restore lists follow Linux (`amdgpu_rlc.c` `amdgpu_gfx_rlc_init_microcode_v2_1`: every header from
            // v2.1 on, each list whose size is nonzero), not tinygrad (`amdev.py` loads them for v2.1 only). The
            // pinned gc_11_0_0 and gc_12_0_1 files have an empty CNTL list, which pilot does not load: a file with
            // one is refused rather than booted differently from Linux.
            if v2_1.save_restore_list_cntl_size_bytes.get() != 0 {
                return Err(b.err(
                    "save_restore_list_cntl_size_bytes",
                    "a nonzero RLC_RESTORE_LIST_CNTL, which pilot does not load (Linux does)".to_string(),
                ));
            }
            region(
                FwType::RLC_RESTORE_LIST_GPM_MEM,
                "save_restore_list_gpm_offset_bytes",
                v2_1.save_restore_list_gpm_offset_bytes,
                v2_1.save_restore_list_gpm_size_bytes,
            )?;
            region(
                FwType::RLC_RESTORE_LIST_SRM_MEM,
                "save_restore_list_srm_offset_bytes",
                v2_1.save_restore_list_srm_offset_bytes,
                v2_1.save_restore_list_srm_size_bytes,
            )?;
            region(
                FwType::RLC_IRAM,
                "rlc_iram_ucode_offset_bytes",
                v2_2.rlc_iram_ucode_offset_bytes,
                v2_2.rlc_iram_ucode_size_bytes,
            )?;
            region(
                FwType::RLC_DRAM_BOOT,
                "rlc_dram_ucode_offset_bytes",
                v2_2.rlc_dram_ucode_offset_bytes,
                v2_2.rlc_dram_ucode_size_bytes,
            )?;
            if let Some(h) = v2_3 {
                region(FwType::RLC_P, "rlcp_ucode_offset_bytes", h.rlcp_ucode_offset_bytes, h.rlcp_ucode_size_bytes)?;
                region(FwType::RLC_V, "rlcv_ucode_offset_bytes", h.rlcv_ucode_offset_bytes, h.rlcv_ucode_size_bytes)?;
            }
            parts.push(part(PartId::Ip(FwType::RLC_G), ucode.clone()));
        }
    }
    Ok(Parsed { common, parts, ucode_start: pc })
}

/// An SDMA jump table (offset and size in dwords) must lie inside its thread's code.
fn jump_table(b: &Bytes, field: &str, offset_dw: U32, size_dw: U32, code_len: usize) -> Result<(), FirmwareError> {
    let end = (u64::from(offset_dw.get()) + u64::from(size_dw.get())) * 4;
    if end > code_len as u64 {
        return Err(b.err(field, format!("jump table ends at byte {end:#x}, past the {code_len:#x}-byte code")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes with a common header: header version, header size, ucode at 0x100.
    fn file(len: usize, version: (u16, u16), header_size: u32, ucode_size: u32) -> Vec<u8> {
        let mut f = vec![0u8; len];
        put(&mut f, 0, len as u32);
        put(&mut f, 4, header_size);
        f[8..10].copy_from_slice(&version.0.to_le_bytes());
        f[10..12].copy_from_slice(&version.1.to_le_bytes());
        f[12..14].copy_from_slice(&11u16.to_le_bytes());
        put(&mut f, 20, ucode_size);
        put(&mut f, 24, 0x100);
        f
    }

    fn put(f: &mut [u8], at: usize, v: u32) {
        f[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn message(r: Result<Parsed, FirmwareError>) -> String {
        let m = r.expect_err("must be refused").to_string();
        assert!(!m.contains('\n'), "one line: {m}");
        m
    }

    #[test]
    fn common_header_fields() {
        let mut f = file(0x200, (1, 0), 48, 0x100);
        put(&mut f, 16, 0x1234);
        put(&mut f, 28, 0xdead_beef);
        let h = common("x.bin", &f).unwrap();
        assert_eq!(
            h,
            CommonHeader {
                size_bytes: 0x200,
                header_size_bytes: 48,
                header_version: (1, 0),
                ip_version: (11, 0),
                ucode_version: 0x1234,
                ucode_size_bytes: 0x100,
                ucode_array_offset_bytes: 0x100,
                crc32: 0xdead_beef,
            }
        );
    }

    #[test]
    fn truncated_and_outside_are_one_line_errors() {
        let f = file(0x200, (1, 0), 48, 0x100);
        let m = message(parse("imu.bin", &f[..0x1ff], Ip::Imu));
        assert!(m.starts_with("imu.bin: size_bytes: says 512 bytes but the file has 511"), "{m}");
        let m = message(parse("imu.bin", &f[..10], Ip::Imu));
        assert!(m.starts_with("imu.bin: header_version_minor: at byte 10"), "{m}");
        let mut f = file(0x200, (1, 0), 48, 0x101);
        let m = message(parse("imu.bin", &f, Ip::Imu));
        assert!(m.contains("ucode_array_offset_bytes: bytes 0x100..0x201 fall outside 0x0..0x200"), "{m}");
        put(&mut f, 20, 0x100);
        put(&mut f, 4, 0x180);
        let m = message(parse("imu.bin", &f, Ip::Imu));
        assert!(m.contains("ucode_array_offset_bytes: 256 overlaps the 384-byte header"), "{m}");
    }

    #[test]
    fn imu_parts_follow_each_other() {
        let mut f = file(0x200, (1, 0), 48, 0x100);
        put(&mut f, 32, 0x40);
        put(&mut f, 40, 0xc0);
        let p = parse("imu.bin", &f, Ip::Imu).unwrap();
        assert_eq!(
            p.parts,
            vec![
                Part { id: PartId::Ip(FwType::IMU_I), range: 0x100..0x140 },
                Part { id: PartId::Ip(FwType::IMU_D), range: 0x140..0x200 },
            ]
        );
        put(&mut f, 40, 0xc1);
        let m = message(parse("imu.bin", &f, Ip::Imu));
        assert!(m.starts_with("imu.bin: imu_dram_ucode_size_bytes: bytes 0x140..0x201"), "{m}");
    }

    #[test]
    fn psp_components_and_their_errors() {
        let mut f = file(0x200, (2, 0), 36, 0x100);
        put(&mut f, 32, 2);
        // SYS_DRV (2) at +0 (0x80 bytes), SOS (1) at +0x80 (0x80 bytes).
        for (i, (ty, off)) in [(2u32, 0u32), (1, 0x80)].into_iter().enumerate() {
            put(&mut f, 36 + i * 16, ty);
            put(&mut f, 36 + i * 16 + 8, off);
            put(&mut f, 36 + i * 16 + 12, 0x80);
        }
        let p = parse("sos.bin", &f, Ip::PspSos).unwrap();
        assert_eq!(
            p.parts,
            vec![
                Part { id: PartId::Sos(SosComponent::SysDrv), range: 0x100..0x180 },
                Part { id: PartId::Sos(SosComponent::Sos), range: 0x180..0x200 },
            ]
        );
        put(&mut f, 36 + 16 + 8, 0x81);
        let m = message(parse("sos.bin", &f, Ip::PspSos));
        assert!(m.starts_with("sos.bin: psp_fw_bin[SOS].offset_bytes: bytes 0x181..0x201"), "{m}");
        put(&mut f, 36 + 16 + 8, 0x80);
        put(&mut f, 36 + 16, 2);
        assert!(message(parse("sos.bin", &f, Ip::PspSos)).contains("SYS_DRV appears twice"));
        put(&mut f, 36 + 16, 99);
        assert!(message(parse("sos.bin", &f, Ip::PspSos)).contains("descriptor 1 has unknown type 99"));
        put(&mut f, 32, 100);
        assert!(message(parse("sos.bin", &f, Ip::PspSos)).contains("psp_fw_bin_count: 100 descriptors do not fit"));
        let f = file(0x200, (1, 0), 36, 0x100);
        let m = message(parse("sos.bin", &f, Ip::PspSos));
        assert_eq!(m, "sos.bin: header_version: v1.0 is not a psp_firmware_header v2.0 header pilot reads");
    }

    #[test]
    fn sdma_v2_threads_and_jump_tables() {
        let mut f = file(0x200, (2, 0), 64, 0x100);
        put(&mut f, 36, 0x80); // ctx size
        put(&mut f, 40, 0x10); // ctx jt offset (dwords)
        put(&mut f, 44, 0x10); // ctx jt size (dwords): ends at byte 0x80
        put(&mut f, 48, 0x180); // ctl offset
        put(&mut f, 52, 0x80); // ctl size
        let p = parse("sdma.bin", &f, Ip::Sdma).unwrap();
        assert_eq!(
            p.parts,
            vec![
                Part { id: PartId::Ip(FwType::SDMA_UCODE_TH1), range: 0x180..0x200 },
                Part { id: PartId::Ip(FwType::SDMA_UCODE_TH0), range: 0x100..0x180 },
            ]
        );
        put(&mut f, 44, 0x11);
        assert!(message(parse("sdma.bin", &f, Ip::Sdma)).contains("ctx_jt_offset: jump table ends at byte 0x84"));
    }

    #[test]
    fn rs64_code_stack_and_start() {
        let mut f = file(0x200, (2, 0), 60, 0x100);
        put(&mut f, 36, 0x40);
        put(&mut f, 40, 0x100);
        put(&mut f, 44, 0xc0);
        put(&mut f, 48, 0x140);
        put(&mut f, 52, 0x3000);
        put(&mut f, 56, 0x7);
        let p = parse("mec.bin", &f, Ip::Rs64(Rs64Engine::Mec)).unwrap();
        assert_eq!(p.ucode_start, Some(0x7_0000_3000));
        assert_eq!(
            p.parts,
            vec![
                Part { id: PartId::Ip(FwType::RS64_MEC), range: 0x100..0x140 },
                Part { id: PartId::Ip(FwType::RS64_MEC_P0_STACK), range: 0x140..0x200 },
            ]
        );
        put(&mut f, 4, 56);
        let m = message(parse("mec.bin", &f, Ip::Rs64(Rs64Engine::Mec)));
        assert_eq!(m, "mec.bin: header_size_bytes: 56 is too small for a v2.0 header (60 bytes)");
    }

    #[test]
    fn smu_pptable_entries_are_checked() {
        let mut f = file(0x200, (2, 1), 44, 0x80);
        put(&mut f, 32, 0x2_0000); // ucode_start_addr
        put(&mut f, 36, 2); // pptable_count
        put(&mut f, 40, 0x180); // pptable_entry_offset: 2 entries of 12 bytes
        for (i, off) in [0x1a0u32, 0x1c0].into_iter().enumerate() {
            put(&mut f, 0x180 + i * 12 + 4, off);
            put(&mut f, 0x180 + i * 12 + 8, 0x20);
        }
        let p = parse("smu.bin", &f, Ip::Smu).unwrap();
        assert_eq!(p.ucode_start, Some(0x2_0000));
        assert_eq!(p.parts, vec![Part { id: PartId::Ip(FwType::SMU), range: 0x100..0x180 }]);
        put(&mut f, 0x180 + 12 + 8, 0x41);
        let m = message(parse("smu.bin", &f, Ip::Smu));
        assert_eq!(m, "smu.bin: pptable[1].ppt_offset_bytes: bytes 0x1c0..0x201 fall outside 0x0..0x200");
    }

    #[test]
    fn an_rlc_cntl_restore_list_is_refused() {
        let mut f = file(0x400, (2, 3), 204, 0x40);
        put(&mut f, 116, 0x20);
        let m = parse("rlc.bin", &f, Ip::Rlc).unwrap_err().to_string();
        assert!(m.contains("RLC_RESTORE_LIST_CNTL"), "{m}");
    }

    #[test]
    fn rlc_v2_3_parts_in_load_order() {
        let mut f = file(0x400, (2, 3), 204, 0x40);
        // (size at, offset at, offset): GPM, SRM, IRAM, DRAM, RLC_P, RLC_V, each 0x20 bytes.
        let regions = [
            (132, 136, 0x200),
            (148, 152, 0x220),
            (156, 160, 0x240),
            (164, 168, 0x260),
            (180, 184, 0x280),
            (196, 200, 0x2a0),
        ];
        for (size_at, off_at, off) in regions {
            put(&mut f, size_at, 0x20);
            put(&mut f, off_at, off);
        }
        let ids: Vec<_> =
            parse("rlc.bin", &f, Ip::Rlc).unwrap().parts.into_iter().map(|p| (p.id, p.range.start)).collect();
        assert_eq!(
            ids,
            vec![
                (PartId::Ip(FwType::RLC_RESTORE_LIST_GPM_MEM), 0x200),
                (PartId::Ip(FwType::RLC_RESTORE_LIST_SRM_MEM), 0x220),
                (PartId::Ip(FwType::RLC_IRAM), 0x240),
                (PartId::Ip(FwType::RLC_DRAM_BOOT), 0x260),
                (PartId::Ip(FwType::RLC_P), 0x280),
                (PartId::Ip(FwType::RLC_V), 0x2a0),
                (PartId::Ip(FwType::RLC_G), 0x100),
            ]
        );
        put(&mut f, 10, 2); // v2.2: no RLC_P / RLC_V
        assert_eq!(parse("rlc.bin", &f, Ip::Rlc).unwrap().parts.len(), 5);
        put(&mut f, 10, 1);
        assert!(message(parse("rlc.bin", &f, Ip::Rlc)).contains("v2.1 is not a rlc_firmware_header v2.2..v2.4 header"));
    }
}
