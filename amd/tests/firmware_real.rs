//! The firmware reader on the real files: Debian trixie's `firmware-amd-graphics` (20250410), fetched and
//! checked against the package's md5sums by `scripts/fetch_amd_firmware.sh` (run by `scripts/setup.sh`).
//! Read from `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/root/usr/lib/firmware/amdgpu`.

use pilot_amd::firmware::{
    bootloader, Card, FirmwareError, FirmwareFile, FirmwareSet, FwType, Ip, PartId, PspStep, Rs64Engine, SosComponent,
};

use pilot_test_support::amd_firmware_dir as firmware_dir;

fn load(card: Card) -> Option<FirmwareSet> {
    let dir = firmware_dir()?;
    Some(FirmwareSet::load(&dir, card).unwrap_or_else(|e| panic!("{}: {e}", card.arch())))
}

/// (file, header version, IP major.minor, size_bytes, ucode_size_bytes) as the Debian files have them.
type HeaderSummary<'a> = (&'a str, (u16, u16), (u16, u16), u32, u32);

fn expected_headers(card: Card) -> Vec<HeaderSummary<'static>> {
    match card {
        Card::Gfx1100 => vec![
            ("psp_13_0_0_sos.bin", (2, 0), (13, 0), 268_304, 268_048),
            ("smu_13_0_0.bin", (2, 1), (13, 0), 292_452, 261_632),
            ("sdma_6_0_0.bin", (2, 0), (6, 0), 34_560, 34_304),
            ("gc_11_0_0_mec.bin", (2, 0), (11, 0), 406_528, 406_272),
            ("gc_11_0_0_imu.bin", (1, 0), (11, 0), 132_352, 132_096),
            ("gc_11_0_0_rlc.bin", (2, 3), (11, 0), 185_376, 25_088),
        ],
        Card::Gfx1201 => vec![
            ("psp_14_0_3_sos.bin", (2, 0), (14, 0), 435_632, 435_376),
            ("smu_14_0_3.bin", (2, 0), (14, 0), 333_236, 327_168),
            ("sdma_7_0_1.bin", (3, 0), (7, 0), 46_336, 46_080),
            ("gc_12_0_1_pfp.bin", (2, 0), (12, 0), 351_696, 351_440),
            ("gc_12_0_1_me.bin", (2, 0), (12, 0), 422_656, 422_400),
            ("gc_12_0_1_mec.bin", (2, 0), (12, 0), 447_456, 447_200),
            ("gc_12_0_1_imu.bin", (1, 0), (12, 0), 132_352, 132_096),
            ("gc_12_0_1_rlc.bin", (2, 2), (12, 0), 150_848, 25_088),
        ],
    }
}

#[test]
fn every_header_of_both_cards_parses_and_matches_the_file() {
    for card in Card::ALL {
        let Some(set) = load(card) else { return };
        let seen: Vec<HeaderSummary> = set
            .files
            .iter()
            .map(|f| {
                let h = &f.header.common;
                (f.spec.name.as_str(), h.header_version, h.ip_version, h.size_bytes, h.ucode_size_bytes)
            })
            .collect();
        assert_eq!(seen, expected_headers(card), "{}", card.arch());
        for f in &set.files {
            let h = &f.header.common;
            assert_eq!(h.size_bytes as usize, f.data.len(), "{}", f.spec.name);
            assert_eq!(h.ucode_array_offset_bytes, 256, "{}", f.spec.name);
            assert!(!f.header.parts.is_empty(), "{}", f.spec.name);
            for p in &f.header.parts {
                assert!(!p.range.is_empty() && p.range.end <= f.data.len(), "{}: {:?}", f.spec.name, p);
            }
        }
    }
}

#[test]
fn rs64_start_addresses_and_component_tables() {
    let Some(navi31) = load(Card::Gfx1100) else { return };
    let Some(navi48) = load(Card::Gfx1201) else { return };
    // The MEC's program counter start (CP_MEC_RS64_PRGRM_CNTR_START is this >> 2).
    assert_eq!(navi31.file(Ip::Rs64(Rs64Engine::Mec)).unwrap().header.ucode_start, Some(0x0007_0000_0000_3000));
    assert_eq!(navi48.file(Ip::Rs64(Rs64Engine::Mec)).unwrap().header.ucode_start, Some(0x0007_0000_0000_3000));
    assert!(navi31.file(Ip::Rs64(Rs64Engine::Pfp)).is_none(), "gfx1100 loads no PFP image");
    let components = |set: &FirmwareSet| -> Vec<(&'static str, usize)> {
        set.file(Ip::PspSos)
            .unwrap()
            .header
            .parts
            .iter()
            .map(|p| match p.id {
                PartId::Sos(c) => (c.name(), p.range.len()),
                PartId::Ip(t) => panic!("sOS file has an IP image {t:?}"),
            })
            .collect()
    };
    assert_eq!(
        components(&navi31),
        [("SYS_DRV", 0x26790), ("SOS", 0x18380), ("TOC", 0x900), ("KDB", 0x1700), ("SPL", 0x2a0), ("RL", 0x960)]
    );
    assert_eq!(
        components(&navi48),
        [
            ("KDB", 0x1aa0),
            ("SYS_DRV", 0x131c0),
            ("SOS", 0x1ea20),
            ("SOC_DRV", 0x19570),
            ("INTF_DRV", 0x91a0),
            ("DBG_DRV", 0xd060),
            ("TOC", 0x900),
            ("IPKEYMGR_DRV", 0x3230),
            ("SPL", 0x340),
            ("RAS_DRV", 0x31a0),
            ("RL", 0x6b0),
        ]
    );
}

/// The load list reduced to (what, file, bytes) for comparison.
fn summary(set: &FirmwareSet) -> Vec<(String, String, usize)> {
    set.psp_load_list()
        .into_iter()
        .map(|s| match s {
            PspStep::Bootloader { component, command, file, range } => {
                (format!("BL {} {command:#x}", component.name()), file, range.len())
            }
            PspStep::LoadToc { file, range } => ("LOAD_TOC".into(), file, range.len()),
            PspStep::LoadIpFw { fw_type, file, range } => (format!("LOAD_IP_FW {}", fw_type.0), file, range.len()),
            PspStep::SetupTmr => ("SETUP_TMR".into(), String::new(), 0),
            PspStep::AutoloadRlc => ("AUTOLOAD_RLC".into(), String::new(), 0),
        })
        .collect()
}

fn step(what: &str, file: &str, len: usize) -> (String, String, usize) {
    (what.to_string(), file.to_string(), len)
}

#[test]
fn psp_load_list_gfx1100_in_order() {
    let Some(set) = load(Card::Gfx1100) else { return };
    let sos = "psp_13_0_0_sos.bin";
    let (gc, rlc) = ("gc_11_0_0_mec.bin", "gc_11_0_0_rlc.bin");
    assert_eq!(
        summary(&set),
        [
            step("BL KDB 0x80000", sos, 0x1700),
            // MP0 13: KDB again in the SPL slot.
            step("BL KDB 0x10000000", sos, 0x1700),
            step("BL SYS_DRV 0x10000", sos, 0x26790),
            step("BL SOS 0x20000", sos, 0x18380),
            step("LOAD_TOC", sos, 0x900),
            step("LOAD_IP_FW 18", "smu_13_0_0.bin", 261_632),
            step("SETUP_TMR", "", 0),
            step("LOAD_IP_FW 72", "sdma_6_0_0.bin", 0x4200),
            step("LOAD_IP_FW 71", "sdma_6_0_0.bin", 0x4400),
            step("LOAD_IP_FW 89", gc, 0x41300),
            step("LOAD_IP_FW 94", gc, 0x22000),
            step("LOAD_IP_FW 68", "gc_11_0_0_imu.bin", 0x10200),
            step("LOAD_IP_FW 69", "gc_11_0_0_imu.bin", 0x10200),
            step("LOAD_IP_FW 20", rlc, 0xa00),
            step("LOAD_IP_FW 21", rlc, 0x8f20),
            step("LOAD_IP_FW 26", rlc, 0x10200),
            step("LOAD_IP_FW 48", rlc, 0x8200),
            step("LOAD_IP_FW 25", rlc, 0x2200),
            step("LOAD_IP_FW 7", rlc, 0x3200),
            step("LOAD_IP_FW 8", rlc, 25_088),
            step("AUTOLOAD_RLC", "", 0),
        ]
    );
}

#[test]
fn psp_load_list_gfx1201_in_order() {
    let Some(set) = load(Card::Gfx1201) else { return };
    let sos = "psp_14_0_3_sos.bin";
    let rlc = "gc_12_0_1_rlc.bin";
    let list = summary(&set);
    assert_eq!(
        list,
        [
            step("BL KDB 0x80000", sos, 0x1aa0),
            step("BL SPL 0x10000000", sos, 0x340),
            step("BL SYS_DRV 0x10000", sos, 0x131c0),
            step("BL SOC_DRV 0xb0000", sos, 0x19570),
            step("BL INTF_DRV 0xd0000", sos, 0x91a0),
            step("BL DBG_DRV 0xc0000", sos, 0xd060),
            step("BL RAS_DRV 0xe0000", sos, 0x31a0),
            step("BL SOS 0x20000", sos, 0x1ea20),
            step("LOAD_TOC", sos, 0x900),
            step("LOAD_IP_FW 18", "smu_14_0_3.bin", 327_168),
            // MP0 14.0.3 sets its TMR up at boot: no SETUP_TMR.
            step("LOAD_IP_FW 71", "sdma_7_0_1.bin", 0xb400),
            step("LOAD_IP_FW 87", "gc_12_0_1_pfp.bin", 0x15cd0),
            step("LOAD_IP_FW 90", "gc_12_0_1_pfp.bin", 0x40000),
            step("LOAD_IP_FW 88", "gc_12_0_1_me.bin", 0x27200),
            step("LOAD_IP_FW 92", "gc_12_0_1_me.bin", 0x40000),
            step("LOAD_IP_FW 89", "gc_12_0_1_mec.bin", 0x2d2e0),
            step("LOAD_IP_FW 94", "gc_12_0_1_mec.bin", 0x40000),
            step("LOAD_IP_FW 68", "gc_12_0_1_imu.bin", 0x10200),
            step("LOAD_IP_FW 69", "gc_12_0_1_imu.bin", 0x10200),
            step("LOAD_IP_FW 20", rlc, 0xa00),
            step("LOAD_IP_FW 21", rlc, 0x5c40),
            step("LOAD_IP_FW 26", rlc, 0x10200),
            step("LOAD_IP_FW 48", rlc, 0x8200),
            step("LOAD_IP_FW 8", rlc, 25_088),
            step("AUTOLOAD_RLC", "", 0),
        ]
    );
    // Every image step's bytes are there, and each fits the 512 KB bridge SRAM that stages msg1 over USB.
    for s in set.psp_load_list() {
        if let PspStep::Bootloader { file, range, .. }
        | PspStep::LoadToc { file, range }
        | PspStep::LoadIpFw { file, range, .. } = s
        {
            let bytes = set.bytes(&file, &range).expect("in the file");
            assert!(bytes.len() <= 512 << 10, "{file} {range:?}");
        }
    }
    assert_eq!(bootloader::LOAD_SOSDRV, 0x20000);
    assert_eq!(FwType::RLC_G, FwType(8));
}

/// A copy of the firmware directory with `edit` applied to one file.
fn edited_copy(src: &std::path::Path, file: &str, edit: impl FnOnce(&mut Vec<u8>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_str().unwrap();
        if name.starts_with("psp_1")
            || name.starts_with("smu_1")
            || name.starts_with("sdma_")
            || name.starts_with("gc_1")
        {
            std::fs::copy(src.join(name), dir.path().join(name)).unwrap();
        }
    }
    let mut data = std::fs::read(dir.path().join(file)).unwrap();
    edit(&mut data);
    std::fs::write(dir.path().join(file), data).unwrap();
    dir
}

fn refused(dir: &std::path::Path, card: Card) -> String {
    let e: FirmwareError = FirmwareSet::load(dir, card).expect_err("must be refused");
    let m = e.to_string();
    assert!(!m.contains('\n'), "one line: {m}");
    m
}

#[test]
fn truncated_or_corrupt_files_are_one_line_errors() {
    let Some(src) = firmware_dir() else { return };
    let dir = edited_copy(&src, "gc_11_0_0_mec.bin", |d| d.truncate(100_000));
    assert_eq!(
        refused(dir.path(), Card::Gfx1100),
        "gc_11_0_0_mec.bin: size_bytes: says 406528 bytes but the file has 100000 (truncated?)"
    );
    // An sOS descriptor pointing past the ucode array (descriptor 1 of psp_13_0_0 is SOS).
    let dir = edited_copy(&src, "psp_13_0_0_sos.bin", |d| {
        d[36 + 16 + 8..36 + 16 + 12].copy_from_slice(&0x40000u32.to_le_bytes())
    });
    let m = refused(dir.path(), Card::Gfx1100);
    assert!(
        m.starts_with("psp_13_0_0_sos.bin: psp_fw_bin[SOS].offset_bytes: bytes 0x40100..0x58480 fall outside"),
        "{m}"
    );
    // An RLC list offset outside the file.
    let dir = edited_copy(&src, "gc_12_0_1_rlc.bin", |d| d[152..156].copy_from_slice(&0x30000u32.to_le_bytes()));
    let m = refused(dir.path(), Card::Gfx1201);
    assert!(m.starts_with("gc_12_0_1_rlc.bin: save_restore_list_srm_offset_bytes: bytes 0x30000.."), "{m}");
    let dir = edited_copy(&src, "sdma_7_0_1.bin", |d| d.clear());
    assert!(refused(dir.path(), Card::Gfx1201).starts_with("sdma_7_0_1.bin: size_bytes: at byte 0 is past the end"));
}

#[test]
fn another_cards_file_is_a_one_line_error() {
    let Some(src) = firmware_dir() else { return };
    let navi48_mec = std::fs::read(src.join("gc_12_0_1_mec.bin")).unwrap();
    let dir = edited_copy(&src, "gc_11_0_0_mec.bin", |d| *d = navi48_mec);
    assert_eq!(
        refused(dir.path(), Card::Gfx1100),
        "gc_11_0_0_mec.bin: ip_version: the header is for IP 12.0, this file name needs 11.0 (another card's firmware?)"
    );
    // The SMU file in the sOS file's place: the header says SMU (v2.1), not a PSP table.
    let smu = std::fs::read(src.join("smu_13_0_0.bin")).unwrap();
    let dir = edited_copy(&src, "psp_13_0_0_sos.bin", |d| *d = smu);
    assert_eq!(
        refused(dir.path(), Card::Gfx1100),
        "psp_13_0_0_sos.bin: header_version: v2.1 is not a psp_firmware_header v2.0 header pilot reads"
    );
    let missing = tempfile::tempdir().unwrap();
    let m = refused(missing.path(), Card::Gfx1201);
    assert!(m.contains("psp_14_0_3_sos.bin: cannot read:") && m.contains("PILOT_AMD_FIRMWARE"), "{m}");
    // A part of a parsed file can be looked up by id.
    let spec = &Card::Gfx1100.files()[0];
    let sos = FirmwareFile::parse(spec, std::fs::read(src.join(&spec.name)).unwrap()).unwrap();
    assert!(sos.part(PartId::Sos(SosComponent::Toc)).is_some());
    assert!(sos.part(PartId::Sos(SosComponent::SocDrv)).is_none());
}
