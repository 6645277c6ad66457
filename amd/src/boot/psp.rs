//! PSP, the security processor that loads every other firmware (tinygrad `ip.py` `AM_PSP`; Linux
//! `psp_gfx_if.h` for the ring frame and command layouts):
//!
//! 1. if sOS is not running, the bootloader takes the sOS components one by one from msg1 (`C2PMSG_36` = msg1
//!    >> 20, `C2PMSG_35` = command, wait for bit 31), then sOS comes alive (`C2PMSG_81` ≠ 0);
//! 2. the KM ring is created (`C2PMSG_69/70` = ring address, `_71` = size, `_64` = KM << 16);
//! 3. each command is a 1 KB `psp_gfx_cmd_resp` in VRAM and a 64-byte `psp_gfx_rb_frame` at the write pointer;
//!    `C2PMSG_67` moves by 16 dwords and the PSP writes the frame's fence value when it is done.
//!
//! The images travel through msg1, the bridge's SRAM on USB ([`GpuBus::write_staging`](crate::bus::GpuBus)),
//! mapped into VMID 0 as system memory (tinygrad `AM_PSP.init_sw`), padded to 16 bytes.

use super::gmc::{self, Hub};
use super::hw::Hw;
use super::memory::VramLayout;
use super::vm::{Target, Vm};
use super::BootError;
use crate::firmware::{bootloader, FirmwareSet, FwType, PspStep};
use crate::regs::{psp_msg, PspMsg};
use std::time::Duration;

pub const RING_SIZE: u64 = 0x1_0000;
pub const CMD_SIZE: u64 = 0x1000;
pub const FENCE_SIZE: u64 = 0x1000;
/// The largest TMR the driver reserves (tinygrad `AM_PSP.max_tmr_size`), 1 MB aligned.
pub const MAX_TMR_SIZE: u64 = 0x130_0000;
/// msg1: 512 KB of bridge SRAM, at a 1 MB aligned VA.
pub const MSG1_SIZE: u64 = 512 << 10;
const TIMEOUT: Duration = Duration::from_secs(10);

/// `enum psp_gfx_cmd_id`.
pub mod cmd {
    pub const SETUP_TMR: u32 = 5;
    pub const LOAD_IP_FW: u32 = 6;
    pub const LOAD_TOC: u32 = 0x20;
    pub const AUTOLOAD_RLC: u32 = 0x21;
}
/// `GFX_CTRL_CMD_ID_DESTROY_RINGS` and `PSP_RING_TYPE__KM << 16`.
pub const DESTROY_RINGS: u32 = 0x3_0000;
pub const RING_KM: u32 = 2 << 16;
/// Byte offsets in `struct psp_gfx_cmd_resp`: `cmd_id`, the command union, `resp.status`, `resp.tmr_size`.
const CMD_ID_AT: usize = 8;
const CMD_AT: usize = 28;
const RESP_STATUS_AT: usize = 864;
const RESP_TMR_SIZE_AT: usize = 880;
pub const CMD_RESP_BYTES: usize = 1024;
pub const FRAME_BYTES: usize = 64;

/// The PSP's boot-memory buffers (VRAM physical addresses) and the msg1 mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Psp {
    pub cmd: u64,
    pub fence: u64,
    pub ring: u64,
    /// The driver's TMR; `None` where the PSP sets its own up at boot (MP0 14.0.3).
    pub tmr: Option<u64>,
    /// msg1's VA and the bus address it maps, once mapped.
    pub msg1: Option<(u64, u64)>,
    pub tmr_size: u32,
}

/// One command: its id, the command union's dwords, and the name errors use.
struct Command {
    id: u32,
    body: Vec<u32>,
    name: String,
}

impl Psp {
    pub fn sos_alive(hw: &mut Hw) -> Result<bool, BootError> {
        Ok(hw.read(psp_msg(hw.card(), PspMsg::Sos81))? != 0)
    }

    /// Runs the cold-boot load list: sOS (unless it runs), the ring, then every command in order.
    pub fn init(
        &mut self,
        hw: &mut Hw,
        fw: &FirmwareSet,
        layout: &VramLayout,
        vm: &mut Vm,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
    ) -> Result<(), BootError> {
        hw.step = "PSP";
        let steps = fw.psp_load_list();
        let sos_running = Self::sos_alive(hw)?;
        if !sos_running {
            for step in &steps {
                if let PspStep::Bootloader { component, command, file, range } = step {
                    let image = image(fw, file, range)?;
                    self.bootloader_load(hw, vm, alloc_table, component.name(), *command, image)?;
                }
            }
            let sos = psp_msg(hw.card(), PspMsg::Sos81);
            hw.wait_for(sos, TIMEOUT, "sOS to start (C2PMSG_81 != 0)", |v| v != 0)?;
        }
        self.ring_create(hw, layout)?;
        for step in &steps {
            match step {
                PspStep::Bootloader { .. } => {}
                PspStep::LoadToc { file, range } => {
                    let toc = image(fw, file, range)?;
                    let addr = self.stage(hw, vm, alloc_table, toc)?;
                    let body = vec![addr as u32, (addr >> 32) as u32, toc.len() as u32];
                    let resp = self.submit(hw, layout, Command { id: cmd::LOAD_TOC, body, name: "LOAD_TOC".into() })?;
                    let size = u32::from_le_bytes(resp[RESP_TMR_SIZE_AT..RESP_TMR_SIZE_AT + 4].try_into().expect("4"));
                    if u64::from(size) > MAX_TMR_SIZE {
                        return Err(BootError::Invalid {
                            step: "PSP",
                            msg: format!(
                                "LOAD_TOC asks for a {size:#x}-byte TMR, more than the {MAX_TMR_SIZE:#x} reserved"
                            ),
                        });
                    }
                    self.tmr_size = size;
                }
                PspStep::LoadIpFw { fw_type, file, range } => {
                    let bytes = image(fw, file, range)?;
                    self.load_ip_fw(hw, layout, vm, alloc_table, *fw_type, bytes)?;
                }
                PspStep::SetupTmr => {
                    let (mc, phys, size) = match self.tmr {
                        Some(t) => (layout.mc(t), t, self.tmr_size),
                        None => (0, 0, 0),
                    };
                    // psp_gfx_cmd_setup_tmr: buf address, size, bitfield (virt_phy_addr = bit 1), system address.
                    let body = vec![mc as u32, (mc >> 32) as u32, size, 1 << 1, phys as u32, (phys >> 32) as u32];
                    self.submit(hw, layout, Command { id: cmd::SETUP_TMR, body, name: "SETUP_TMR".into() })?;
                }
                PspStep::AutoloadRlc => {
                    let c = Command { id: cmd::AUTOLOAD_RLC, body: vec![], name: "AUTOLOAD_RLC".into() };
                    self.submit(hw, layout, c)?;
                }
            }
        }
        Ok(())
    }

    fn bootloader_load(
        &mut self,
        hw: &mut Hw,
        vm: &mut Vm,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
        name: &str,
        command: u32,
        image: &[u8],
    ) -> Result<(), BootError> {
        let (bl35, bl36) = (psp_msg(hw.card(), PspMsg::Bl35), psp_msg(hw.card(), PspMsg::Bl36));
        let what = format!("the bootloader to be ready for {name}");
        hw.wait(bl35, 0x8000_0000, 0x8000_0000, TIMEOUT, &what)?;
        let addr = self.stage(hw, vm, alloc_table, image)?;
        hw.write(bl36, (addr >> 20) as u32)?;
        hw.write(bl35, command)?;
        // After sOS itself the bootloader hands over; sOS's liveness is checked instead.
        if command != bootloader::LOAD_SOSDRV {
            let what = format!("the bootloader to take {name}");
            hw.wait(bl35, 0x8000_0000, 0x8000_0000, TIMEOUT, &what)?;
        }
        Ok(())
    }

    fn load_ip_fw(
        &mut self,
        hw: &mut Hw,
        layout: &VramLayout,
        vm: &mut Vm,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
        fw_type: FwType,
        bytes: &[u8],
    ) -> Result<(), BootError> {
        let addr = self.stage(hw, vm, alloc_table, bytes)?;
        let body = vec![addr as u32, (addr >> 32) as u32, bytes.len() as u32, fw_type.0];
        let name = format!("LOAD_IP_FW({})", fw_type.name());
        self.submit(hw, layout, Command { id: cmd::LOAD_IP_FW, body, name })?;
        Ok(())
    }

    /// Copies `data` (and 4 zero bytes, padded to 16: tinygrad `_prep_msg1`) into msg1 and returns msg1's
    /// VA; the first call maps the staging window into VMID 0.
    fn stage(
        &mut self,
        hw: &mut Hw,
        vm: &mut Vm,
        alloc_table: &mut dyn FnMut() -> Result<u64, BootError>,
        data: &[u8],
    ) -> Result<u64, BootError> {
        let mut padded = data.to_vec();
        padded.resize((data.len() + 4).div_ceil(16) * 16, 0);
        if padded.len() as u64 > MSG1_SIZE {
            return Err(BootError::Invalid {
                step: "PSP",
                msg: format!("a {}-byte image does not fit the {MSG1_SIZE}-byte msg1 window", data.len()),
            });
        }
        let bus_addr = hw.bus.write_staging(&padded).map_err(|source| BootError::Bus { step: "PSP", source })?;
        let va = match self.msg1 {
            Some((va, mapped)) if mapped == bus_addr => va,
            Some((_, mapped)) => {
                return Err(BootError::Invalid {
                    step: "PSP",
                    msg: format!("the staging window moved from {mapped:#x} to {bus_addr:#x}"),
                })
            }
            None => {
                let va = vm.alloc_va(MSG1_SIZE, 1 << 20);
                vm.map(hw, va, MSG1_SIZE, Target::System(bus_addr), true, alloc_table)?;
                // tinygrad `on_range_mapped`: the MM hub counts as set up (it survives a partial boot), GC not yet.
                gmc::flush_tlb(hw, Hub::Gc, false)?;
                gmc::flush_tlb(hw, Hub::Mm, true)?;
                self.msg1 = Some((va, bus_addr));
                va
            }
        };
        gmc::flush_hdp(hw)?;
        Ok(va)
    }

    fn ring_create(&mut self, hw: &mut Hw, layout: &VramLayout) -> Result<(), BootError> {
        let card = hw.card();
        let (r64, r69, r70, r71) = (
            psp_msg(card, PspMsg::Ring64),
            psp_msg(card, PspMsg::RingLo69),
            psp_msg(card, PspMsg::RingHi70),
            psp_msg(card, PspMsg::RingSize71),
        );
        if hw.read(r71)? != 0 {
            hw.write(r64, DESTROY_RINGS)?;
            // Linux and tinygrad: the handshake needs a delay.
            hw.sleep(Duration::from_millis(20));
        }
        hw.wait(r64, 0x8000_0000, 0x8000_0000, TIMEOUT, "sOS to be ready for the KM ring")?;
        hw.write64(r69, r70, layout.mc(self.ring))?;
        hw.write(r71, RING_SIZE as u32)?;
        hw.write(r64, RING_KM)?;
        hw.sleep(Duration::from_millis(20));
        hw.wait(r64, 0x8000_ffff, 0x8000_0000, TIMEOUT, "sOS to create the KM ring")?;
        Ok(())
    }

    /// Writes `c` and its frame, moves the write pointer, waits for the fence and checks the status.
    fn submit(&mut self, hw: &mut Hw, layout: &VramLayout, c: Command) -> Result<Vec<u8>, BootError> {
        let wptr_reg = psp_msg(hw.card(), PspMsg::Wptr67);
        let wptr = hw.read(wptr_reg)?;
        let frame_at = u64::from(wptr) * 4;
        if frame_at + FRAME_BYTES as u64 > RING_SIZE {
            return Err(BootError::Invalid {
                step: "PSP",
                msg: format!("{}: the KM ring's write pointer {wptr:#x} leaves no room for a frame", c.name),
            });
        }
        let fence_value = wptr + 1;
        let mut cmd_buf = vec![0u8; CMD_RESP_BYTES];
        cmd_buf[CMD_ID_AT..CMD_ID_AT + 4].copy_from_slice(&c.id.to_le_bytes());
        for (i, d) in c.body.iter().enumerate() {
            cmd_buf[CMD_AT + i * 4..CMD_AT + i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        let (cmd_mc, fence_mc) = (layout.mc(self.cmd), layout.mc(self.fence));
        let mut frame = [0u8; FRAME_BYTES];
        for (i, d) in [cmd_mc as u32, (cmd_mc >> 32) as u32, 0, fence_mc as u32, (fence_mc >> 32) as u32, fence_value]
            .into_iter()
            .enumerate()
        {
            frame[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        hw.write_vram(self.cmd, &cmd_buf)?;
        hw.write_vram(self.ring + frame_at, &frame)?;
        // The PSP reads the command and the frame from VRAM: flushed as Linux `amdgpu_psp.c` `psp_ring_cmd_submit`
        // does before it moves the write pointer (tinygrad's `_ring_submit` does not).
        gmc::flush_hdp(hw)?;
        hw.write(wptr_reg, wptr + (FRAME_BYTES / 4) as u32)?;

        let mut waited = Duration::ZERO;
        loop {
            let fence = hw.read_vram_u32(self.fence)?;
            if fence == fence_value {
                break;
            }
            if waited >= TIMEOUT {
                return Err(BootError::Invalid {
                    step: "PSP",
                    msg: format!(
                        "{}: no answer: fence {fence:#x}, expected {fence_value:#x} after {} ms",
                        c.name,
                        TIMEOUT.as_millis()
                    ),
                });
            }
            hw.sleep(super::hw::POLL);
            waited += super::hw::POLL;
        }
        let mut resp = vec![0u8; CMD_RESP_BYTES];
        hw.read_vram(self.cmd, &mut resp)?;
        let status = u32::from_le_bytes(resp[RESP_STATUS_AT..RESP_STATUS_AT + 4].try_into().expect("4"));
        if status != 0 {
            return Err(BootError::PspCommand { cmd: c.name, status });
        }
        Ok(resp)
    }
}

fn image<'a>(fw: &'a FirmwareSet, file: &str, range: &std::ops::Range<usize>) -> Result<&'a [u8], BootError> {
    fw.bytes(file, range).ok_or_else(|| BootError::Invalid {
        step: "PSP",
        msg: format!("{file}: bytes {:#x}..{:#x} are not in the loaded file", range.start, range.end),
    })
}
