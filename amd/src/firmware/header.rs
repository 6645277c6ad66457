//! AMD firmware file headers (Linux `drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h`), read and checked.
//!
//! Every file starts with `struct common_firmware_header` (32 bytes, little endian); the per-IP header
//! continues it. Linux's own check (`amdgpu_ucode_validate`) is only `size_bytes == file length`; pilot
//! also checks that every size and offset it uses stays inside the file, so a truncated or corrupt file
//! is an error here, never a short copy on the GPU. The header's `crc32` is reported but not checked:
//! Linux never checks it, and it is not a plain CRC-32 of the payload in AMD's files.

use super::{FirmwareError, FwType, Part, PartId, SosComponent};
use std::ops::Range;

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

pub const COMMON_HEADER_BYTES: usize = 32;

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

/// Bounds-checked little-endian reads of one named file.
struct Bytes<'a> {
    file: &'a str,
    data: &'a [u8],
}

impl Bytes<'_> {
    fn err(&self, field: &str, problem: impl Into<String>) -> FirmwareError {
        FirmwareError::Invalid { file: self.file.to_string(), field: field.to_string(), problem: problem.into() }
    }

    fn u32(&self, offset: usize, field: &str) -> Result<u32, FirmwareError> {
        let bytes = self.data.get(offset..offset + 4).ok_or_else(|| {
            self.err(
                field,
                format!("at byte {offset} is past the end of the {}-byte file (truncated?)", self.data.len()),
            )
        })?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    }

    fn u16(&self, offset: usize, field: &str) -> Result<u16, FirmwareError> {
        let bytes = self.data.get(offset..offset + 2).ok_or_else(|| {
            self.err(
                field,
                format!("at byte {offset} is past the end of the {}-byte file (truncated?)", self.data.len()),
            )
        })?;
        Ok(u16::from_le_bytes(bytes.try_into().expect("2 bytes")))
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
    let h = CommonHeader {
        size_bytes: b.u32(0, "size_bytes")?,
        header_size_bytes: b.u32(4, "header_size_bytes")?,
        header_version: (b.u16(8, "header_version_major")?, b.u16(10, "header_version_minor")?),
        ip_version: (b.u16(12, "ip_version_major")?, b.u16(14, "ip_version_minor")?),
        ucode_version: b.u32(16, "ucode_version")?,
        ucode_size_bytes: b.u32(20, "ucode_size_bytes")?,
        ucode_array_offset_bytes: b.u32(24, "ucode_array_offset_bytes")?,
        crc32: b.u32(28, "crc32")?,
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
    let need_header = |bytes: u32| -> Result<(), FirmwareError> {
        if common.header_size_bytes < bytes {
            return Err(b.err(
                "header_size_bytes",
                format!("{} is too small for a v{major}.{minor} header ({bytes} bytes)", common.header_size_bytes),
            ));
        }
        Ok(())
    };
    let unsupported =
        |what: &str| b.err("header_version", format!("v{major}.{minor} is not a {what} header pilot reads"));
    let part = |id: PartId, range: Range<usize>| Part { id, range };
    let mut parts = Vec::new();
    let mut pc = None;
    match ip {
        Ip::PspSos => {
            if (major, minor) != (2, 0) {
                return Err(unsupported("psp_firmware_header v2.0"));
            }
            need_header(36)?;
            let count = b.u32(32, "psp_fw_bin_count")? as usize;
            let table_end = 36 + count * 16;
            if count == 0 || table_end > ucode_start {
                return Err(b.err(
                    "psp_fw_bin_count",
                    format!("{count} descriptors do not fit between the header and the ucode array at {ucode_start}"),
                ));
            }
            for i in 0..count {
                let at = 36 + i * 16;
                let fw_type = b.u32(at, "psp_fw_bin.fw_type")?;
                let component = SosComponent::from_psp_fw_type(fw_type)
                    .ok_or_else(|| b.err("psp_fw_bin.fw_type", format!("descriptor {i} has unknown type {fw_type}")))?;
                let offset = b.u32(at + 8, "psp_fw_bin.offset_bytes")?;
                let size = b.u32(at + 12, "psp_fw_bin.size_bytes")?;
                let field = format!("psp_fw_bin[{}].offset_bytes", component.name());
                let range = b.range(&field, ucode_start as u64 + u64::from(offset), size.into(), &ucode)?;
                if parts.iter().any(|p: &Part| p.id == PartId::Sos(component)) {
                    return Err(b.err("psp_fw_bin.fw_type", format!("{} appears twice", component.name())));
                }
                parts.push(part(PartId::Sos(component), range));
            }
        }
        Ip::Smu => {
            if !matches!((major, minor), (1, 0) | (2, 0) | (2, 1)) {
                return Err(unsupported("smc_firmware_header v1.0/v2.0/v2.1"));
            }
            need_header(if major == 1 { 36 } else { 44 })?;
            pc = Some(u64::from(b.u32(32, "ucode_start_addr")?));
            if (major, minor) == (2, 0) {
                let (off, size) = (b.u32(36, "ppt_offset_bytes")?, b.u32(40, "ppt_size_bytes")?);
                b.range("ppt_offset_bytes", off.into(), size.into(), &whole)?;
            } else if (major, minor) == (2, 1) {
                let count = b.u32(36, "pptable_count")?;
                let table = b.u32(40, "pptable_entry_offset")?;
                b.range("pptable_entry_offset", table.into(), u64::from(count) * 12, &whole)?;
                for i in 0..count as usize {
                    let at = table as usize + i * 12;
                    let (off, size) = (b.u32(at + 4, "ppt_offset_bytes")?, b.u32(at + 8, "ppt_size_bytes")?);
                    b.range(&format!("pptable[{i}].ppt_offset_bytes"), off.into(), size.into(), &whole)?;
                }
            }
            parts.push(part(PartId::Ip(FwType::SMU), ucode.clone()));
        }
        Ip::Sdma => match major {
            2 if minor == 0 => {
                need_header(64)?;
                let ctx_size = b.u32(36, "ctx_ucode_size_bytes")?;
                let ctx = b.range("ctx_ucode_size_bytes", ucode_start as u64, ctx_size.into(), &ucode)?;
                jump_table(&b, "ctx_jt_offset", b.u32(40, "ctx_jt_offset")?, b.u32(44, "ctx_jt_size")?, ctx.len())?;
                let (ctl_off, ctl_size) = (b.u32(48, "ctl_ucode_offset")?, b.u32(52, "ctl_ucode_size_bytes")?);
                let ctl = b.range("ctl_ucode_offset", ctl_off.into(), ctl_size.into(), &ucode)?;
                jump_table(&b, "ctl_jt_offset", b.u32(56, "ctl_jt_offset")?, b.u32(60, "ctl_jt_size")?, ctl.len())?;
                // tinygrad `AMFirmware`: the control thread (TH1) first, then the context thread (TH0).
                parts.push(part(PartId::Ip(FwType::SDMA_UCODE_TH1), ctl));
                parts.push(part(PartId::Ip(FwType::SDMA_UCODE_TH0), ctx));
            }
            3 if minor == 0 => {
                need_header(44)?;
                let (off, size) = (b.u32(36, "ucode_offset_bytes")?, b.u32(40, "ucode_size_bytes(v3)")?);
                parts.push(part(
                    PartId::Ip(FwType::SDMA_UCODE_TH0),
                    b.range("ucode_offset_bytes", off.into(), size.into(), &ucode)?,
                ));
            }
            _ => return Err(unsupported("sdma_firmware_header v2.0/v3.0")),
        },
        Ip::Rs64(engine) => {
            if (major, minor) != (2, 0) {
                return Err(unsupported("gfx_firmware_header v2.0 (RS64)"));
            }
            need_header(60)?;
            let code_size = b.u32(36, "ucode_size_bytes(v2)")?;
            let code_off = b.u32(40, "ucode_offset_bytes")?;
            let code = b.range("ucode_offset_bytes", code_off.into(), code_size.into(), &ucode)?;
            let (data_size, data_off) = (b.u32(44, "data_size_bytes")?, b.u32(48, "data_offset_bytes")?);
            let stack = b.range("data_offset_bytes", data_off.into(), data_size.into(), &ucode)?;
            pc =
                Some(u64::from(b.u32(52, "ucode_start_addr_lo")?) | u64::from(b.u32(56, "ucode_start_addr_hi")?) << 32);
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
            need_header(48)?;
            let iram = b.u32(32, "imu_iram_ucode_size_bytes")?;
            let dram = b.u32(40, "imu_dram_ucode_size_bytes")?;
            // Linux `amdgpu_ucode_init_single_fw` and tinygrad: IMU_D follows IMU_I in the ucode array.
            let i = b.range("imu_iram_ucode_size_bytes", ucode_start as u64, iram.into(), &ucode)?;
            let d = b.range("imu_dram_ucode_size_bytes", i.end as u64, dram.into(), &ucode)?;
            parts.push(part(PartId::Ip(FwType::IMU_I), i));
            parts.push(part(PartId::Ip(FwType::IMU_D), d));
        }
        Ip::Rlc => {
            if major != 2 || !(2..=4).contains(&minor) {
                return Err(unsupported("rlc_firmware_header v2.2..v2.4"));
            }
            need_header(if minor >= 3 { 204 } else { 172 })?;
            let mut region = |id: FwType, size_at: usize, size_field: &str, off_at: usize, off_field: &str| {
                let (size, off) = (b.u32(size_at, size_field)?, b.u32(off_at, off_field)?);
                parts.push(part(PartId::Ip(id), b.range(off_field, off.into(), size.into(), &whole)?));
                Ok::<(), FirmwareError>(())
            };
            // v2.1: the save/restore lists; v2.2: IRAM and DRAM boot; v2.3: RLC_P and RLC_V (byte offsets
            // of struct rlc_firmware_header_v2_{1,2,3}); RLC_G (the common ucode array) last.
            // The restore lists follow Linux (`amdgpu_rlc.c` `amdgpu_gfx_rlc_init_microcode_v2_1`: every header from
            // v2.1 on, each list whose size is nonzero), not tinygrad (`amdev.py` loads them for v2.1 only). The
            // pinned gc_11_0_0 and gc_12_0_1 files have an empty CNTL list, which pilot does not load: a file with
            // one is refused rather than booted differently from Linux.
            if b.u32(116, "save_restore_list_cntl_size_bytes")? != 0 {
                return Err(b.err(
                    "save_restore_list_cntl_size_bytes",
                    "a nonzero RLC_RESTORE_LIST_CNTL, which pilot does not load (Linux does)".to_string(),
                ));
            }
            region(
                FwType::RLC_RESTORE_LIST_GPM_MEM,
                132,
                "save_restore_list_gpm_size_bytes",
                136,
                "save_restore_list_gpm_offset_bytes",
            )?;
            region(
                FwType::RLC_RESTORE_LIST_SRM_MEM,
                148,
                "save_restore_list_srm_size_bytes",
                152,
                "save_restore_list_srm_offset_bytes",
            )?;
            region(FwType::RLC_IRAM, 156, "rlc_iram_ucode_size_bytes", 160, "rlc_iram_ucode_offset_bytes")?;
            region(FwType::RLC_DRAM_BOOT, 164, "rlc_dram_ucode_size_bytes", 168, "rlc_dram_ucode_offset_bytes")?;
            if minor >= 3 {
                region(FwType::RLC_P, 180, "rlcp_ucode_size_bytes", 184, "rlcp_ucode_offset_bytes")?;
                region(FwType::RLC_V, 196, "rlcv_ucode_size_bytes", 200, "rlcv_ucode_offset_bytes")?;
            }
            parts.push(part(PartId::Ip(FwType::RLC_G), ucode.clone()));
        }
    }
    Ok(Parsed { common, parts, ucode_start: pc })
}

/// An SDMA jump table (offset and size in dwords) must lie inside its thread's code.
fn jump_table(b: &Bytes, field: &str, offset_dw: u32, size_dw: u32, code_len: usize) -> Result<(), FirmwareError> {
    let end = (u64::from(offset_dw) + u64::from(size_dw)) * 4;
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
