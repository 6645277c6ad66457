//! The PSP's load order for one card, as data (tinygrad `ip.py` `AM_PSP.init_hw`, `amdev.py` `AMFirmware`).

use super::{FirmwareFile, FirmwareSet, FwType, Ip, IpVersion, PartId, SosComponent};
use std::ops::Range;

/// The PSP bootloader's commands, written to `C2PMSG_35` (Linux `amdgpu_psp.h` `enum psp_bootloader_cmd`).
pub mod bootloader {
    pub const LOAD_SYSDRV: u32 = 0x1_0000;
    pub const LOAD_SOSDRV: u32 = 0x2_0000;
    pub const LOAD_KEY_DATABASE: u32 = 0x8_0000;
    pub const LOAD_SOCDRV: u32 = 0xB_0000;
    pub const LOAD_DBGDRV: u32 = 0xC_0000;
    pub const LOAD_INTFDRV: u32 = 0xD_0000;
    pub const LOAD_RASDRV: u32 = 0xE_0000;
    pub const LOAD_TOS_SPL_TABLE: u32 = 0x1000_0000;
}

/// One step of the PSP bring-up. Steps with an image name its file and byte range in that file
/// ([`FirmwareSet::bytes`]); the image is copied to the PSP's msg1 buffer before the step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PspStep {
    /// Before sOS runs: the bootloader loads one sOS component (`C2PMSG_36` = msg1 >> 20, `C2PMSG_35` =
    /// `command`, then wait for bit 31 of `C2PMSG_35`).
    Bootloader { component: SosComponent, command: u32, file: String, range: Range<usize> },
    /// `GFX_CMD_ID_LOAD_TOC` on the KM ring; the answer is the TMR size.
    LoadToc { file: String, range: Range<usize> },
    /// `GFX_CMD_ID_LOAD_IP_FW` of one image.
    LoadIpFw { fw_type: FwType, file: String, range: Range<usize> },
    /// `GFX_CMD_ID_SETUP_TMR` (not sent where the TMR is set up at boot and autoloaded).
    SetupTmr,
    /// `GFX_CMD_ID_AUTOLOAD_RLC`: the RLC starts GC from the images loaded before it.
    AutoloadRlc,
}

/// MP0 versions whose TMR the PSP sets up at boot (tinygrad `AM_PSP.init_sw` `boot_time_tmr`).
const BOOT_TIME_TMR: [IpVersion; 4] =
    [IpVersion(13, 0, 6), IpVersion(13, 0, 14), IpVersion(14, 0, 2), IpVersion(14, 0, 3)];
/// Of those, the ones whose TMR is not autoloaded (they still take `SETUP_TMR`).
const NO_AUTOLOAD_TMR: [IpVersion; 2] = [IpVersion(13, 0, 6), IpVersion(13, 0, 14)];

/// Whether the PSP of MP0 `mp0` sets its TMR up at boot (then the driver allocates none).
pub fn boot_time_tmr(mp0: IpVersion) -> bool {
    BOOT_TIME_TMR.contains(&mp0)
}

impl FirmwareSet {
    /// Every PSP step of a cold boot, in order: the sOS components through the bootloader, the TOC, the
    /// SMU image, the TMR, every other IP image (SDMA, GC's RS64 engines, IMU, RLC), then the RLC autoload.
    pub fn psp_load_list(&self) -> Vec<PspStep> {
        let mp0 = self.card.mp0();
        let Some(sos) = self.file(Ip::PspSos) else { return Vec::new() };
        // psp_v13 loads KDB again in the SPL slot (Linux `psp_v13_0_bootloader_load_spl`); v14 has its own SPL.
        let spl = if mp0.0 == 13 { SosComponent::Kdb } else { SosComponent::Spl };
        let order = [
            (SosComponent::Kdb, bootloader::LOAD_KEY_DATABASE),
            (spl, bootloader::LOAD_TOS_SPL_TABLE),
            (SosComponent::SysDrv, bootloader::LOAD_SYSDRV),
            (SosComponent::SocDrv, bootloader::LOAD_SOCDRV),
            (SosComponent::IntfDrv, bootloader::LOAD_INTFDRV),
            (SosComponent::DbgDrv, bootloader::LOAD_DBGDRV),
            (SosComponent::RasDrv, bootloader::LOAD_RASDRV),
            (SosComponent::Sos, bootloader::LOAD_SOSDRV),
        ];
        let mut steps: Vec<PspStep> = order
            .into_iter()
            .filter_map(|(component, command)| {
                let part = sos.part(PartId::Sos(component))?;
                Some(PspStep::Bootloader { component, command, file: sos.spec.name.clone(), range: part.range.clone() })
            })
            .collect();
        if let Some(toc) = sos.part(PartId::Sos(SosComponent::Toc)) {
            steps.push(PspStep::LoadToc { file: sos.spec.name.clone(), range: toc.range.clone() });
        }
        // The SMU image goes before the TMR is set up (tinygrad: "SMU fw should be loaded before TMR").
        if let Some(smu) = self.file(Ip::Smu) {
            steps.extend(image_steps(smu));
        }
        if !BOOT_TIME_TMR.contains(&mp0) || NO_AUTOLOAD_TMR.contains(&mp0) {
            steps.push(PspStep::SetupTmr);
        }
        // Then every other image in the order of `Card::files`: SDMA, PFP, ME, MEC, IMU, RLC.
        for file in self.files.iter().filter(|f| !matches!(f.spec.ip, Ip::PspSos | Ip::Smu)) {
            steps.extend(image_steps(file));
        }
        steps.push(PspStep::AutoloadRlc);
        steps
    }
}

/// `LOAD_IP_FW` of each image of `file`, in the file's part order.
fn image_steps(file: &FirmwareFile) -> impl Iterator<Item = PspStep> + '_ {
    file.header.parts.iter().filter_map(move |p| match p.id {
        PartId::Ip(fw_type) => {
            Some(PspStep::LoadIpFw { fw_type, file: file.spec.name.clone(), range: p.range.clone() })
        }
        PartId::Sos(_) => None,
    })
}
