//! The PSP (MP0): the sOS bootloader and the KM ring, as Linux `psp_v13_0.c`/`psp_v14_0.c` and tinygrad's
//! `AM_PSP` drive them, with checks a real PSP would make by signature and the simulator makes by content.
//!
//! - Bootloader (before sOS runs): `C2PMSG_36` = staged address >> 20 (through MMHUB: VRAM in the system
//!   aperture or the bridge SRAM), then `C2PMSG_35` = component command. The component must be the next one in
//!   the order KDB, TOS_SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, SOS (those the card's sOS file has),
//!   and the staged bytes must equal that part of the real `psp_<MP0>_sos.bin` (size and content). Success:
//!   `C2PMSG_35` reads 0x80000000 again; after SOS, sOS is alive (`C2PMSG_81` != 0). A failure: `C2PMSG_35`
//!   reads 0x8000FFFF, a fault is recorded, and sOS will not start until a reset.
//! - KM ring: `C2PMSG_69/70` = ring MC address, `_71` = size, `_64` = 2 << 16; `_64` then reads 0x80000000.
//! - Frames (`psp_gfx_rb_frame`, 64 bytes) from the ring on each `C2PMSG_67` (wptr, dwords) write: LOAD_TOC,
//!   LOAD_IP_FW, SETUP_TMR, AUTOLOAD_RLC, each checked, the IP images in the load order Linux and tinygrad share
//!   (SDMA, CP, IMU, RLC, RLC_G, then the autoload; see `load_group`); the response status (0 = success) is written into the
//!   command buffer (`resp.status` at byte 864, `resp.tmr_size` at 880) and the frame's fence value to its
//!   fence address.

use super::board::{Board, Ip};
use super::fwfiles::{self, Files};
use super::mem::Fabric;
use super::mem::Hub;
use super::regs::Reg;
use super::Gpu;
use std::collections::HashSet;

/// Bootloader commands (Linux `amdgpu_psp.h` `enum psp_bootloader_cmd`) and the sOS part each loads
/// (`psp_fw_type`: KDB 3, SPL 5, SYS_DRV 2, SOC_DRV 7, INTF_DRV 8, DBG_DRV 9, RAS_DRV 10, SOS 1).
pub const BL_LOAD_KEY_DATABASE: u32 = 0x8_0000;
pub const BL_LOAD_TOS_SPL_TABLE: u32 = 0x1000_0000;
pub const BL_LOAD_SYSDRV: u32 = 0x1_0000;
pub const BL_LOAD_SOCDRV: u32 = 0xB_0000;
pub const BL_LOAD_INTFDRV: u32 = 0xD_0000;
pub const BL_LOAD_DBGDRV: u32 = 0xC_0000;
pub const BL_LOAD_RASDRV: u32 = 0xE_0000;
pub const BL_LOAD_SOSDRV: u32 = 0x2_0000;
pub const PART_KDB: u32 = 3;
pub const PART_SPL: u32 = 5;
pub const PART_SOS: u32 = 1;
pub const PART_TOC: u32 = 4;

/// KM ring control (`C2PMSG_64`): ring type KM << 16 creates, `GFX_CTRL_CMD_ID_DESTROY_RINGS` destroys.
pub const RING_CREATE_KM: u32 = 2 << 16;
pub const RING_DESTROY: u32 = 3 << 16;
const READY: u32 = 0x8000_0000;
pub const BL_FAILED: u32 = 0x8000_FFFF;

/// `psp_gfx_cmd_id`s.
pub const CMD_SETUP_TMR: u32 = 5;
pub const CMD_LOAD_IP_FW: u32 = 6;
pub const CMD_LOAD_TOC: u32 = 0x20;
pub const CMD_AUTOLOAD_RLC: u32 = 0x21;
/// A non-zero `resp.status`: the command failed.
const STATUS_FAILED: u32 = 0xFFFF_000A;
const FRAME_BYTES: u64 = 64;
pub const CMD_BYTES: usize = 1024;
/// The TMR size LOAD_TOC answers (tinygrad asserts it fits in its 0x1300000 reservation).
pub const TMR_BYTES: u32 = 0x100_0000;

/// `psp_gfx_fw_type`s the simulator knows, and which file holds each (by suffix after the version).
pub mod fw_type {
    pub const RLC_V: u32 = 7;
    pub const RLC_G: u32 = 8;
    pub const SMU: u32 = 18;
    pub const RLC_RESTORE_LIST_GPM_MEM: u32 = 20;
    pub const RLC_RESTORE_LIST_SRM_MEM: u32 = 21;
    pub const RLC_RESTORE_LIST_SRM_CNTL: u32 = 22;
    pub const RLC_P: u32 = 25;
    pub const RLC_IRAM: u32 = 26;
    pub const RLC_DRAM_BOOT: u32 = 48;
    pub const IMU_I: u32 = 68;
    pub const IMU_D: u32 = 69;
    pub const SDMA_TH0: u32 = 71;
    pub const SDMA_TH1: u32 = 72;
    pub const RS64_PFP: u32 = 87;
    pub const RS64_ME: u32 = 88;
    pub const RS64_MEC: u32 = 89;
    pub const RS64_PFP_P0_STACK: u32 = 90;
    pub const RS64_ME_P0_STACK: u32 = 92;
    pub const RS64_MEC_P0_STACK: u32 = 94;
}

/// The file an image of `t` comes from on `board`.
fn file_for(board: Board, t: u32) -> Option<String> {
    use fw_type::*;
    let gc = board.file_stem(Ip::Gc);
    Some(match t {
        SMU => format!("smu_{}.bin", board.file_stem(Ip::Mp1)),
        SDMA_TH0 | SDMA_TH1 => format!("sdma_{}.bin", board.file_stem(Ip::Sdma0)),
        RS64_MEC | RS64_MEC_P0_STACK => format!("gc_{gc}_mec.bin"),
        RS64_PFP | RS64_PFP_P0_STACK if board == Board::Navi48 => format!("gc_{gc}_pfp.bin"),
        RS64_ME | RS64_ME_P0_STACK if board == Board::Navi48 => format!("gc_{gc}_me.bin"),
        IMU_I | IMU_D => format!("gc_{gc}_imu.bin"),
        RLC_G
        | RLC_P
        | RLC_V
        | RLC_IRAM
        | RLC_DRAM_BOOT
        | RLC_RESTORE_LIST_GPM_MEM
        | RLC_RESTORE_LIST_SRM_MEM
        | RLC_RESTORE_LIST_SRM_CNTL => format!("gc_{gc}_rlc.bin"),
        _ => return None,
    })
}

/// Where an image stands in the PSP's load order: SDMA, then the CP engines, then IMU, then the RLC's other images,
/// then RLC_G, which starts the RLC autoload's inputs being complete. This is the order Linux loads them in
/// (`amdgpu_psp.c` `psp_load_non_psp_fw` walks `enum AMDGPU_UCODE_ID` in `amdgpu_ucode.h`: SDMA_UCODE_TH0/TH1,
/// CP_RS64_*, IMU_I/D, RLC_RESTORE_LIST_*, RLC_IRAM/DRAM, RLC_P/V, RLC_G, and starts the autoload right after
/// RLC_G) and tinygrad does (`amdev.py` `AMFirmware.__init__` fills `descs` SDMA, PFP/ME/MEC, IMU, RLC with RLC_G
/// last). Within a group the two differ (tinygrad loads SDMA TH1 before TH0, each RS64 stack after its code), so
/// the model enforces the groups only. The SMU image is ordered against the TMR instead (see `load_ip_fw`).
fn load_group(t: u32) -> u8 {
    use fw_type::*;
    match t {
        SDMA_TH0 | SDMA_TH1 => 0,
        RS64_PFP | RS64_ME | RS64_MEC | RS64_PFP_P0_STACK | RS64_ME_P0_STACK | RS64_MEC_P0_STACK => 1,
        IMU_I | IMU_D => 2,
        RLC_G => 4,
        _ => 3,
    }
}

fn group_name(g: u8) -> &'static str {
    ["SDMA", "CP", "IMU", "RLC (other than RLC_G)", "RLC_G"][usize::from(g)]
}

/// The images the RLC autoload needs loaded first.
fn autoload_needs(board: Board) -> Vec<u32> {
    use fw_type::*;
    let mut v = vec![SDMA_TH0, RS64_MEC, RS64_MEC_P0_STACK, IMU_I, IMU_D, RLC_G];
    if board == Board::Navi48 {
        v.extend([RS64_PFP, RS64_PFP_P0_STACK, RS64_ME, RS64_ME_P0_STACK]);
    }
    v
}

/// PSP state.
#[derive(Debug, Default)]
pub struct PspState {
    pub files: Files,
    /// Index of the next bootloader step.
    next_step: usize,
    bl_status: u32,
    failed: bool,
    pub sos_alive: bool,
    /// The sOS ring: MM-hub address and bytes.
    pub(super) ring: Option<(u64, u32)>,
    /// The TMR SETUP_TMR placed (MM-hub address and bytes), where the PSP keeps the firmware it loaded.
    pub(super) tmr: Option<(u64, u32)>,
    ring_ctl: u32,
    rptr: u32,
    toc_loaded: bool,
    tmr_ready: bool,
    pub loaded: HashSet<u32>,
    /// The [`load_group`] of the last non-SMU image loaded.
    last_group: Option<u8>,
    pub autoloaded: bool,
}

impl PspState {
    pub fn new(files: Files) -> PspState {
        PspState { files, bl_status: READY, ..PspState::default() }
    }
}

impl Gpu {
    fn sos_name(&self) -> String {
        format!("psp_{}_sos.bin", self.board.file_stem(Ip::Mp0))
    }

    /// The bootloader steps for this card: (command, acceptable sOS parts).
    fn bl_steps(&mut self) -> Result<Vec<(u32, Vec<u32>)>, String> {
        let name = self.sos_name();
        let file = self.psp.files.get(&name)?;
        let major = fwfiles::common(&name, file)?.ip_major;
        if u32::from(major) != u32::from(self.board.mp0_major()) {
            return Err(format!("{name} is for MP0 {major}"));
        }
        let parts = fwfiles::sos_parts(&name, file)?;
        // MP0 13 takes the KDB again as its TOS_SPL table (tinygrad, Linux psp_v13_0); its SPL part is accepted too.
        let spl: Vec<u32> = if self.board.mp0_major() == 13 { vec![PART_KDB, PART_SPL] } else { vec![PART_SPL] };
        let order = [
            (BL_LOAD_KEY_DATABASE, vec![PART_KDB]),
            (BL_LOAD_TOS_SPL_TABLE, spl),
            (BL_LOAD_SYSDRV, vec![2]),
            (BL_LOAD_SOCDRV, vec![7]),
            (BL_LOAD_INTFDRV, vec![8]),
            (BL_LOAD_DBGDRV, vec![9]),
            (BL_LOAD_RASDRV, vec![10]),
            (BL_LOAD_SOSDRV, vec![PART_SOS]),
        ];
        Ok(order.into_iter().filter(|(_, p)| parts.contains_key(&p[0])).collect())
    }

    pub(super) fn psp_read(&self, reg: Reg) -> Option<u32> {
        Some(match reg {
            Reg::PspBlCmd => {
                if self.psp.sos_alive {
                    0
                } else {
                    self.psp.bl_status
                }
            }
            Reg::PspSosAlive => u32::from(self.psp.sos_alive) * 0x0036_0000,
            Reg::PspRingCtl => self.psp.ring_ctl,
            _ => return None,
        })
    }

    /// Handles a write to a PSP register; false when `reg` is not the PSP's.
    pub(super) fn psp_write(&mut self, reg: Reg, value: u32, fabric: &mut dyn Fabric) -> bool {
        match reg {
            Reg::PspBlCmd => self.bootloader(value, fabric),
            Reg::PspRingCtl => self.ring_ctl(value),
            Reg::PspRingWptr => {
                self.set(Reg::PspRingWptr, value);
                self.ring_frames(value, fabric);
            }
            _ => return false,
        }
        true
    }

    fn bl_fail(&mut self, why: String) {
        self.psp.failed = true;
        self.psp.bl_status = BL_FAILED;
        self.fault("PSP bootloader", None, why);
    }

    fn bootloader(&mut self, cmd: u32, fabric: &mut dyn Fabric) {
        if self.psp.sos_alive {
            return self.fault("PSP bootloader", None, format!("command {cmd:#x} while sOS runs (reset first)"));
        }
        if self.psp.failed {
            return self.bl_fail(format!("command {cmd:#x} after a failed load (reset first)"));
        }
        let steps = match self.bl_steps() {
            Ok(s) => s,
            Err(e) => return self.bl_fail(e),
        };
        let Some((want, parts)) = steps.get(self.psp.next_step).cloned() else {
            return self.bl_fail(format!("command {cmd:#x} after the last component"));
        };
        if cmd != want {
            return self.bl_fail(format!(
                "component command {cmd:#x} out of order: step {} expects {want:#x}",
                self.psp.next_step
            ));
        }
        let addr = u64::from(self.get(Reg::PspBlAddr)) << 20;
        let name = self.sos_name();
        let file = self.psp.files.get(&name).map(<[u8]>::to_vec);
        let ranges = file.as_deref().map_err(Clone::clone).and_then(|f| fwfiles::sos_parts(&name, f));
        let (file, ranges) = match (file, ranges) {
            (Ok(f), Ok(r)) => (f, r),
            (Err(e), _) | (_, Err(e)) => return self.bl_fail(e),
        };
        let mut ok = false;
        let mut why = String::new();
        for p in &parts {
            let r = ranges[p].clone();
            let mut mem = self.mem(Hub::Mm, fabric, self.now);
            match mem.read(addr, r.len()) {
                Ok(staged) if staged == file[r.clone()] => ok = true,
                Ok(_) => why = format!("the {} bytes at {addr:#x} are not part {p} of {name}", r.len()),
                Err(e) => why = e,
            }
        }
        if !ok {
            return self.bl_fail(format!("component {cmd:#x}: {why}"));
        }
        self.psp.next_step += 1;
        self.psp.bl_status = READY;
        if cmd == BL_LOAD_SOSDRV {
            self.psp.sos_alive = true;
            self.psp.ring_ctl = READY;
        }
    }

    fn ring_ctl(&mut self, value: u32) {
        if !self.psp.sos_alive {
            self.psp.ring_ctl = 0;
            return self.fault("PSP", None, format!("ring command {value:#x} before sOS runs"));
        }
        match value {
            RING_CREATE_KM => {
                let addr = u64::from(self.get(Reg::PspRingLo)) | u64::from(self.get(Reg::PspRingHi)) << 32;
                let size = self.get(Reg::PspRingSize);
                if size < FRAME_BYTES as u32 || !size.is_multiple_of(FRAME_BYTES as u32) {
                    self.psp.ring_ctl = READY | 0xFFFF;
                    return self.fault("PSP", None, format!("KM ring size {size:#x} is not a multiple of a frame"));
                }
                self.psp.ring = Some((addr, size));
                self.psp.rptr = 0;
                self.set(Reg::PspRingWptr, 0);
                self.psp.ring_ctl = READY;
            }
            RING_DESTROY => {
                self.psp.ring = None;
                self.set(Reg::PspRingSize, 0);
                self.psp.ring_ctl = READY;
            }
            _ => {
                self.psp.ring_ctl = READY | 0xFFFF;
                self.fault("PSP", None, format!("unknown ring command {value:#x}"));
            }
        }
    }

    fn ring_frames(&mut self, wptr_dw: u32, fabric: &mut dyn Fabric) {
        let Some((ring, size)) = self.psp.ring else {
            return self.fault("PSP KM ring", None, "wptr written with no ring".to_string());
        };
        while self.psp.rptr != wptr_dw {
            let off = (u64::from(self.psp.rptr) * 4) % u64::from(size);
            if let Err(e) = self.frame(ring + off, fabric) {
                return self.fault("PSP KM ring", Some(off), e);
            }
            self.psp.rptr = self.psp.rptr.wrapping_add((FRAME_BYTES / 4) as u32);
        }
    }

    fn frame(&mut self, at: u64, fabric: &mut dyn Fabric) -> Result<(), String> {
        let f = self.mem(Hub::Mm, fabric, self.now).read(at, FRAME_BYTES as usize)?;
        let dw = |i: usize| u32::from_le_bytes(f[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        let cmd_addr = u64::from(dw(0)) | u64::from(dw(1)) << 32;
        let fence_addr = u64::from(dw(3)) | u64::from(dw(4)) << 32;
        let fence_value = dw(5);
        let mut cmd = self.mem(Hub::Mm, fabric, self.now).read(cmd_addr, CMD_BYTES)?;
        let c = |i: usize| u32::from_le_bytes(cmd[28 + 4 * i..32 + 4 * i].try_into().expect("4 bytes"));
        let id = u32::from_le_bytes(cmd[8..12].try_into().expect("4 bytes"));
        let (status, tmr) = match self.psp_command(id, [c(0), c(1), c(2), c(3), c(4), c(5)], fabric) {
            Ok(tmr) => (0, tmr),
            Err(e) => {
                self.fault("PSP", None, format!("command {id:#x}: {e}"));
                (STATUS_FAILED, 0)
            }
        };
        cmd[864..868].copy_from_slice(&status.to_le_bytes());
        cmd[880..884].copy_from_slice(&tmr.to_le_bytes());
        let mut mem = self.mem(Hub::Mm, fabric, self.now);
        mem.write(cmd_addr + 864, &cmd[864..884])?;
        mem.write32(fence_addr, fence_value)
    }

    /// Runs one ring command; the TMR size it reports.
    fn psp_command(&mut self, id: u32, a: [u32; 6], fabric: &mut dyn Fabric) -> Result<u32, String> {
        match id {
            CMD_LOAD_TOC => {
                let name = self.sos_name();
                let file = self.psp.files.get(&name)?.to_vec();
                let r = fwfiles::sos_parts(&name, &file)?.get(&PART_TOC).cloned().ok_or("this card has no TOC")?;
                let addr = u64::from(a[0]) | u64::from(a[1]) << 32;
                if a[2] as usize != r.len() {
                    return Err(format!("TOC size {} != {}", a[2], r.len()));
                }
                if self.mem(Hub::Mm, fabric, self.now).read(addr, r.len())? != file[r] {
                    return Err(format!("the TOC at {addr:#x} is not {name}'s"));
                }
                self.psp.toc_loaded = true;
                Ok(TMR_BYTES)
            }
            CMD_SETUP_TMR => {
                if !self.psp.toc_loaded {
                    return Err("SETUP_TMR before LOAD_TOC".into());
                }
                if !self.board.boot_time_tmr() {
                    let addr = u64::from(a[0]) | u64::from(a[1]) << 32;
                    if a[2] < TMR_BYTES || !addr.is_multiple_of(1 << 20) {
                        return Err(format!("TMR {addr:#x}+{:#x}: needs {TMR_BYTES:#x} bytes, 1 MB aligned", a[2]));
                    }
                    self.mem(Hub::Mm, fabric, self.now).resolve(addr, a[2] as usize)?;
                    self.psp.tmr = Some((addr, a[2]));
                }
                self.psp.tmr_ready = true;
                Ok(0)
            }
            CMD_LOAD_IP_FW => {
                let (addr, size, t) = (u64::from(a[0]) | u64::from(a[1]) << 32, a[2] as usize, a[3]);
                self.load_ip_fw(t, addr, size, fabric)?;
                Ok(0)
            }
            CMD_AUTOLOAD_RLC => {
                let missing: Vec<u32> =
                    autoload_needs(self.board).into_iter().filter(|t| !self.psp.loaded.contains(t)).collect();
                if !missing.is_empty() {
                    return Err(format!("AUTOLOAD_RLC with firmware types {missing:?} not loaded"));
                }
                if self.psp.last_group != Some(load_group(fw_type::RLC_G)) {
                    return Err("AUTOLOAD_RLC not right after RLC_G (Linux psp_load_non_psp_fw starts it there)".into());
                }
                self.psp.autoloaded = true;
                Ok(0)
            }
            other => Err(format!("unsupported PSP command {other:#x}")),
        }
    }

    fn load_ip_fw(&mut self, t: u32, addr: u64, size: usize, fabric: &mut dyn Fabric) -> Result<(), String> {
        let name = file_for(self.board, t).ok_or_else(|| format!("unknown firmware type {t}"))?;
        // The TMR holds the images: the SMU goes first (tinygrad: "SMU fw should be loaded before TMR"), the
        // others need it set up unless the PSP set it up at boot.
        if t == fw_type::SMU && self.psp.tmr_ready && !self.board.boot_time_tmr() {
            return Err("the SMU image after SETUP_TMR".into());
        }
        if t != fw_type::SMU && !self.psp.tmr_ready && !self.board.boot_time_tmr() {
            return Err(format!("firmware type {t} before SETUP_TMR"));
        }
        if self.psp.autoloaded {
            return Err(format!("firmware type {t} after AUTOLOAD_RLC"));
        }
        let group = load_group(t);
        if t != fw_type::SMU {
            if let Some(last) = self.psp.last_group.filter(|&last| last > group) {
                return Err(format!(
                    "firmware type {t} ({}) after a {} image: the PSP takes SDMA, CP, IMU, RLC, RLC_G in that order",
                    group_name(group),
                    group_name(last)
                ));
            }
        }
        let file = self.psp.files.get(&name)?.to_vec();
        let c = fwfiles::common(&name, &file)?;
        let ip = match t {
            fw_type::SMU => Ip::Mp1,
            fw_type::SDMA_TH0 | fw_type::SDMA_TH1 => Ip::Sdma0,
            _ => Ip::Gc,
        };
        if u32::from(c.ip_major) != u32::from(self.board.version(ip).0) {
            return Err(format!("{name} is for IP major {}, this card's is {}", c.ip_major, self.board.version(ip).0));
        }
        if size == 0 || size > file.len() - c.header_size as usize {
            return Err(format!("type {t}: size {size} does not fit {name}"));
        }
        let image = self.mem(Hub::Mm, fabric, self.now).read(addr, size)?;
        let found = if t == fw_type::SMU || t == fw_type::RLC_G {
            // These are the file's whole ucode array.
            let r = c.ucode_offset as usize..(c.ucode_offset + c.ucode_size) as usize;
            (image == file[r]).then_some(c.ucode_offset as usize)
        } else {
            fwfiles::find(&file, c.header_size as usize, &image)
        };
        if found.is_none() {
            return Err(format!("type {t}: the {size} bytes at {addr:#x} are not an image of {name}"));
        }
        self.psp.loaded.insert(t);
        if t != fw_type::SMU {
            self.psp.last_group = Some(group);
        }
        Ok(())
    }
}
