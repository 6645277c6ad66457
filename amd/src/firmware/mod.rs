//! The AMD GPU firmware files pilot's bring-up loads through the PSP: which files each card needs, their
//! headers read and checked ([`header`]), and the PSP's load order as data ([`load_list`]).
//!
//! The files are linux-firmware's `amdgpu/*.bin` (Debian: `firmware-amd-graphics`), read from
//! `PILOT_AMD_FIRMWARE` or `/lib/firmware/amdgpu`. Which files and parts are loaded, and in which order,
//! follows tinygrad's userspace driver (`tinygrad/runtime/support/am/amdev.py` `AMFirmware`,
//! `ip.py` `AM_PSP.init_hw`); the ids are Linux's (`amdgpu_ucode.h` `enum psp_fw_type`,
//! `psp_gfx_if.h` `enum psp_gfx_fw_type`, `amdgpu_psp.h` `enum psp_bootloader_cmd`).

pub mod header;
mod load_list;
mod ucode;

pub use header::{CommonHeader, Ip, Rs64Engine};
pub use load_list::{boot_time_tmr, bootloader, PspStep};

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A firmware file that is missing, unreadable, or whose header does not check out: one line naming the
/// file and the header field.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareError {
    #[error("{}: cannot read: {source} (firmware is read from PILOT_AMD_FIRMWARE or /lib/firmware/amdgpu)", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{file}: {field}: {problem}")]
    Invalid { file: String, field: String, problem: String },
}

/// The GPU boards pilot boots, each with the IP versions its discovery table reports (Linux amdgpu:
/// Navi31 and Navi48).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Card {
    /// RX 7900 XTX / XT (Navi31): GC 11.0.0, MP0/MP1 13.0.0, SDMA 6.0.0.
    Gfx1100,
    /// RX 9070 / 9070 XT (Navi48): GC 12.0.1, MP0/MP1 14.0.3, SDMA 7.0.1.
    Gfx1201,
}

/// One IP's version, as in the firmware file names (`gc_11_0_0_mec.bin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpVersion(pub u16, pub u16, pub u16);

impl IpVersion {
    fn file_stem(self) -> String {
        format!("{}_{}_{}", self.0, self.1, self.2)
    }
}

impl Card {
    pub const ALL: [Card; 2] = [Card::Gfx1100, Card::Gfx1201];

    pub fn arch(self) -> &'static str {
        match self {
            Card::Gfx1100 => "gfx1100",
            Card::Gfx1201 => "gfx1201",
        }
    }

    /// The PSP (MP0) version; MP1 (the SMU) has the same on both cards.
    pub fn mp0(self) -> IpVersion {
        match self {
            Card::Gfx1100 => IpVersion(13, 0, 0),
            Card::Gfx1201 => IpVersion(14, 0, 3),
        }
    }

    pub fn mp1(self) -> IpVersion {
        self.mp0()
    }

    pub fn sdma(self) -> IpVersion {
        match self {
            Card::Gfx1100 => IpVersion(6, 0, 0),
            Card::Gfx1201 => IpVersion(7, 0, 1),
        }
    }

    pub fn gc(self) -> IpVersion {
        match self {
            Card::Gfx1100 => IpVersion(11, 0, 0),
            Card::Gfx1201 => IpVersion(12, 0, 1),
        }
    }

    /// The files this card's bring-up reads, in load order, with the header each carries and the IP
    /// version it must be for: sOS, SMU, SDMA, then GC's PFP and ME (GC ≥ 12 only), MEC, IMU, RLC.
    pub fn files(self) -> Vec<FileSpec> {
        let (gc, mp0, mp1, sdma) = (self.gc(), self.mp0(), self.mp1(), self.sdma());
        let spec = |name: String, ip: Ip, version: IpVersion| FileSpec { name, ip, version };
        let mut files = vec![
            spec(format!("psp_{}_sos.bin", mp0.file_stem()), Ip::PspSos, mp0),
            spec(format!("smu_{}.bin", mp1.file_stem()), Ip::Smu, mp1),
            spec(format!("sdma_{}.bin", sdma.file_stem()), Ip::Sdma, sdma),
        ];
        let gc_file = |part: &str| format!("gc_{}_{part}.bin", gc.file_stem());
        if gc >= IpVersion(12, 0, 0) {
            files.push(spec(gc_file("pfp"), Ip::Rs64(Rs64Engine::Pfp), gc));
            files.push(spec(gc_file("me"), Ip::Rs64(Rs64Engine::Me), gc));
        }
        files.push(spec(gc_file("mec"), Ip::Rs64(Rs64Engine::Mec), gc));
        files.push(spec(gc_file("imu"), Ip::Imu, gc));
        files.push(spec(gc_file("rlc"), Ip::Rlc, gc));
        files
    }
}

/// One firmware file a card needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    pub name: String,
    pub ip: Ip,
    /// The IP the file is for; its header's `ip_version_major.minor` must match.
    pub version: IpVersion,
}

/// A PSP firmware type for `GFX_CMD_ID_LOAD_IP_FW` (Linux `psp_gfx_if.h` `enum psp_gfx_fw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FwType(pub u32);

impl FwType {
    pub const RLC_V: FwType = FwType(7);
    pub const RLC_G: FwType = FwType(8);
    pub const SMU: FwType = FwType(18);
    pub const RLC_RESTORE_LIST_GPM_MEM: FwType = FwType(20);
    pub const RLC_RESTORE_LIST_SRM_MEM: FwType = FwType(21);
    pub const RLC_P: FwType = FwType(25);
    pub const RLC_IRAM: FwType = FwType(26);
    pub const RLC_DRAM_BOOT: FwType = FwType(48);
    pub const IMU_I: FwType = FwType(68);
    pub const IMU_D: FwType = FwType(69);
    pub const SDMA_UCODE_TH0: FwType = FwType(71);
    pub const SDMA_UCODE_TH1: FwType = FwType(72);
    pub const RS64_PFP: FwType = FwType(87);
    pub const RS64_ME: FwType = FwType(88);
    pub const RS64_MEC: FwType = FwType(89);
    pub const RS64_PFP_P0_STACK: FwType = FwType(90);
    pub const RS64_ME_P0_STACK: FwType = FwType(92);
    pub const RS64_MEC_P0_STACK: FwType = FwType(94);

    /// Linux's name without the `GFX_FW_TYPE_` prefix, for messages.
    pub fn name(self) -> String {
        let known = [
            (Self::RLC_V, "RLC_V"),
            (Self::RLC_G, "RLC_G"),
            (Self::SMU, "SMU"),
            (Self::RLC_RESTORE_LIST_GPM_MEM, "RLC_RESTORE_LIST_GPM_MEM"),
            (Self::RLC_RESTORE_LIST_SRM_MEM, "RLC_RESTORE_LIST_SRM_MEM"),
            (Self::RLC_P, "RLC_P"),
            (Self::RLC_IRAM, "RLC_IRAM"),
            (Self::RLC_DRAM_BOOT, "RLC_DRAM_BOOT"),
            (Self::IMU_I, "IMU_I"),
            (Self::IMU_D, "IMU_D"),
            (Self::SDMA_UCODE_TH0, "SDMA_UCODE_TH0"),
            (Self::SDMA_UCODE_TH1, "SDMA_UCODE_TH1"),
            (Self::RS64_PFP, "RS64_PFP"),
            (Self::RS64_ME, "RS64_ME"),
            (Self::RS64_MEC, "RS64_MEC"),
            (Self::RS64_PFP_P0_STACK, "RS64_PFP_P0_STACK"),
            (Self::RS64_ME_P0_STACK, "RS64_ME_P0_STACK"),
            (Self::RS64_MEC_P0_STACK, "RS64_MEC_P0_STACK"),
        ];
        known.iter().find(|(t, _)| *t == self).map_or_else(|| format!("type {}", self.0), |(_, n)| n.to_string())
    }
}

/// A component of the sOS file (Linux `amdgpu_ucode.h` `enum psp_fw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SosComponent {
    Sos,
    SysDrv,
    Kdb,
    Toc,
    Spl,
    Rl,
    SocDrv,
    IntfDrv,
    DbgDrv,
    RasDrv,
    IpKeyMgrDrv,
    SpdmDrv,
}

impl SosComponent {
    const BY_TYPE: [SosComponent; 12] = [
        SosComponent::Sos,
        SosComponent::SysDrv,
        SosComponent::Kdb,
        SosComponent::Toc,
        SosComponent::Spl,
        SosComponent::Rl,
        SosComponent::SocDrv,
        SosComponent::IntfDrv,
        SosComponent::DbgDrv,
        SosComponent::RasDrv,
        SosComponent::IpKeyMgrDrv,
        SosComponent::SpdmDrv,
    ];

    /// From `psp_fw_bin_desc.fw_type` (1 = SOS ... 12 = SPDM_DRV); 0 and unknown types are `None`.
    pub fn from_psp_fw_type(t: u32) -> Option<SosComponent> {
        Self::BY_TYPE.get((t as usize).checked_sub(1)?).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            SosComponent::Sos => "SOS",
            SosComponent::SysDrv => "SYS_DRV",
            SosComponent::Kdb => "KDB",
            SosComponent::Toc => "TOC",
            SosComponent::Spl => "SPL",
            SosComponent::Rl => "RL",
            SosComponent::SocDrv => "SOC_DRV",
            SosComponent::IntfDrv => "INTF_DRV",
            SosComponent::DbgDrv => "DBG_DRV",
            SosComponent::RasDrv => "RAS_DRV",
            SosComponent::IpKeyMgrDrv => "IPKEYMGR_DRV",
            SosComponent::SpdmDrv => "SPDM_DRV",
        }
    }
}

/// What a byte range of a file is: an sOS component, or an image for `LOAD_IP_FW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartId {
    Sos(SosComponent),
    Ip(FwType),
}

/// One loadable piece of a file: its id and its bytes in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub id: PartId,
    pub range: Range<usize>,
}

/// One firmware file, read and checked.
#[derive(Clone, Debug)]
pub struct FirmwareFile {
    pub spec: FileSpec,
    pub header: header::Parsed,
    pub data: Vec<u8>,
}

impl FirmwareFile {
    /// Checks `data` as the file `spec` names: every header field, and the IP version against the card's.
    pub fn parse(spec: &FileSpec, data: Vec<u8>) -> Result<FirmwareFile, FirmwareError> {
        let header = header::parse(&spec.name, &data, spec.ip)?;
        let (major, minor) = header.common.ip_version;
        if (major, minor) != (spec.version.0, spec.version.1) {
            return Err(FirmwareError::Invalid {
                file: spec.name.clone(),
                field: "ip_version".into(),
                problem: format!(
                    "the header is for IP {major}.{minor}, this file name needs {}.{} (another card's firmware?)",
                    spec.version.0, spec.version.1
                ),
            });
        }
        Ok(FirmwareFile { spec: spec.clone(), header, data })
    }

    /// The part `id`, if the file has it.
    pub fn part(&self, id: PartId) -> Option<&Part> {
        self.header.parts.iter().find(|p| p.id == id)
    }
}

/// The largest firmware file read: every file [`Card::files`] names is under 1 MB (the largest, a PSP sOS,
/// about 780 KB in linux-firmware), so a FIFO, a device node or a huge file is refused before reading.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Every firmware file one card needs, read from one directory and checked.
#[derive(Clone, Debug)]
pub struct FirmwareSet {
    pub card: Card,
    pub files: Vec<FirmwareFile>,
}

impl FirmwareSet {
    /// Reads and checks [`Card::files`] from `dir`.
    pub fn load(dir: &Path, card: Card) -> Result<FirmwareSet, FirmwareError> {
        let files = card
            .files()
            .iter()
            .map(|spec| {
                let path = dir.join(&spec.name);
                let data = pilot_core::fsio::read_regular(&path, MAX_FILE_BYTES)
                    .map_err(|source| FirmwareError::Read { path, source })?;
                FirmwareFile::parse(spec, data)
            })
            .collect::<Result<_, _>>()?;
        Ok(FirmwareSet { card, files })
    }

    /// The file for `ip`, if this card uses one (gfx1100 has no PFP/ME file).
    pub fn file(&self, ip: Ip) -> Option<&FirmwareFile> {
        self.files.iter().find(|f| f.spec.ip == ip)
    }

    /// The bytes of one step's image.
    pub fn bytes(&self, file: &str, range: &Range<usize>) -> Option<&[u8]> {
        self.files.iter().find(|f| f.spec.name == file)?.data.get(range.clone())
    }
}

/// Where firmware is read from: `PILOT_AMD_FIRMWARE` if set, else `/lib/firmware/amdgpu`.
pub fn firmware_dir() -> PathBuf {
    std::env::var_os("PILOT_AMD_FIRMWARE").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/lib/firmware/amdgpu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #26 item 6: firmware was read with `std::fs::read`, so a FIFO blocked for ever and `/dev/zero` was
    /// read until allocation failed. Only regular files of at most [`MAX_FILE_BYTES`] are read now.
    #[test]
    fn only_regular_firmware_files_under_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join(&Card::Gfx1100.files()[0].name);
        let mkfifo = std::process::Command::new("mkfifo").arg(&first).status().unwrap();
        assert!(mkfifo.success(), "mkfifo (coreutils) is needed for this test");
        let e = FirmwareSet::load(dir.path(), Card::Gfx1100).unwrap_err().to_string();
        assert!(e.contains("psp_13_0_0_sos.bin: cannot read: is a FIFO, not a regular file"), "{e}");
        std::fs::remove_file(&first).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &first).unwrap();
        let e = FirmwareSet::load(dir.path(), Card::Gfx1100).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&first).unwrap();
        std::fs::File::create(&first).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = FirmwareSet::load(dir.path(), Card::Gfx1100).unwrap_err().to_string();
        assert!(e.contains(&format!("is {} bytes, more than the {MAX_FILE_BYTES}", MAX_FILE_BYTES + 1)), "{e}");
    }

    #[test]
    fn file_lists_per_card() {
        let names = |c: Card| c.files().into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(
            names(Card::Gfx1100),
            [
                "psp_13_0_0_sos.bin",
                "smu_13_0_0.bin",
                "sdma_6_0_0.bin",
                "gc_11_0_0_mec.bin",
                "gc_11_0_0_imu.bin",
                "gc_11_0_0_rlc.bin"
            ]
        );
        assert_eq!(
            names(Card::Gfx1201),
            [
                "psp_14_0_3_sos.bin",
                "smu_14_0_3.bin",
                "sdma_7_0_1.bin",
                "gc_12_0_1_pfp.bin",
                "gc_12_0_1_me.bin",
                "gc_12_0_1_mec.bin",
                "gc_12_0_1_imu.bin",
                "gc_12_0_1_rlc.bin"
            ]
        );
    }

    #[test]
    fn sos_component_types() {
        assert_eq!(SosComponent::from_psp_fw_type(0), None);
        assert_eq!(SosComponent::from_psp_fw_type(1), Some(SosComponent::Sos));
        assert_eq!(SosComponent::from_psp_fw_type(4), Some(SosComponent::Toc));
        assert_eq!(SosComponent::from_psp_fw_type(12), Some(SosComponent::SpdmDrv));
        assert_eq!(SosComponent::from_psp_fw_type(13), None);
    }
}
