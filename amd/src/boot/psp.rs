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
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

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
pub const CMD_RESP_BYTES: usize = size_of::<PspGfxCmdResp>();
pub const FRAME_BYTES: usize = size_of::<PspGfxRbFrame>();

/// `struct psp_gfx_cmd_resp` (Linux `psp_gfx_if.h`): the command buffer, whose `resp` the PSP fills in.
/// pilot leaves `buf_size`, `buf_version` and the RBI-only fields zero, as tinygrad does.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxCmdResp {
    buf_size: U32,
    buf_version: U32,
    cmd_id: U32,
    resp_buf_addr_lo: U32,
    resp_buf_addr_hi: U32,
    resp_offset: U32,
    resp_buf_size: U32,
    /// `union psp_gfx_commands cmd` and `reserved_1`, up to byte 864: the command's struct at its start
    /// ([`PspGfxCmdLoadToc`], [`PspGfxCmdLoadIpFw`], [`PspGfxCmdSetupTmr`]; none for AUTOLOAD_RLC).
    cmd: [u8; 864 - 28],
    resp: PspGfxResp,
    reserved_2: [u8; 1024 - 864 - size_of::<PspGfxResp>()],
}

/// `struct psp_gfx_resp`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxResp {
    status: U32,
    session_id: U32,
    fw_addr_lo: U32,
    fw_addr_hi: U32,
    /// The TMR LOAD_TOC asks for, in bytes.
    tmr_size: U32,
    reserved: [U32; 11],
    /// `union psp_gfx_uresp`.
    uresp: [U32; 8],
}

/// `struct psp_gfx_rb_frame`: one KM ring entry. pilot leaves `cmd_buf_size` and the RBI-only fields zero, as
/// tinygrad does.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxRbFrame {
    cmd_buf_addr_lo: U32,
    cmd_buf_addr_hi: U32,
    cmd_buf_size: U32,
    fence_addr_lo: U32,
    fence_addr_hi: U32,
    fence_value: U32,
    sid_lo: U32,
    sid_hi: U32,
    vmid: u8,
    frame_type: u8,
    reserved1: [u8; 2],
    reserved2: [U32; 7],
}

/// `struct psp_gfx_cmd_load_toc`.
#[derive(IntoBytes, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxCmdLoadToc {
    toc_phy_addr_lo: U32,
    toc_phy_addr_hi: U32,
    toc_size: U32,
}

/// `struct psp_gfx_cmd_load_ip_fw`.
#[derive(IntoBytes, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxCmdLoadIpFw {
    fw_phy_addr_lo: U32,
    fw_phy_addr_hi: U32,
    fw_size: U32,
    /// `enum psp_gfx_fw_type`.
    fw_type: U32,
}

/// `struct psp_gfx_cmd_setup_tmr`.
#[derive(IntoBytes, Immutable, Unaligned)]
#[repr(C)]
struct PspGfxCmdSetupTmr {
    buf_phy_addr_lo: U32,
    buf_phy_addr_hi: U32,
    buf_size: U32,
    /// `bitfield`: `sriov_enabled` (bit 0), `virt_phy_addr` (bit 1).
    tmr_flags: U32,
    system_phy_addr_lo: U32,
    system_phy_addr_hi: U32,
}

const _: () = {
    assert!(CMD_RESP_BYTES == 1024);
    assert!(std::mem::offset_of!(PspGfxCmdResp, resp) == 864);
    assert!(FRAME_BYTES == 64);
};

/// The low and high halves of a 64-bit address, as two fields.
fn lo_hi(a: u64) -> (U32, U32) {
    (U32::new(a as u32), U32::new((a >> 32) as u32))
}

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

/// One command: its buffer and the name errors use.
struct Command {
    buf: PspGfxCmdResp,
    name: String,
}

impl Command {
    /// Command `id` with `body` (its `psp_gfx_commands` member's bytes, at most the union's size).
    fn new(id: u32, body: &[u8], name: impl Into<String>) -> Command {
        let mut buf = PspGfxCmdResp::new_zeroed();
        buf.cmd_id = U32::new(id);
        buf.cmd[..body.len()].copy_from_slice(body);
        Command { buf, name: name.into() }
    }
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
                    let (toc_phy_addr_lo, toc_phy_addr_hi) = lo_hi(addr);
                    let body =
                        PspGfxCmdLoadToc { toc_phy_addr_lo, toc_phy_addr_hi, toc_size: U32::new(toc.len() as u32) };
                    let resp = self.submit(hw, layout, Command::new(cmd::LOAD_TOC, body.as_bytes(), "LOAD_TOC"))?;
                    let size = resp.tmr_size.get();
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
                    let ((buf_phy_addr_lo, buf_phy_addr_hi), (system_phy_addr_lo, system_phy_addr_hi)) =
                        (lo_hi(mc), lo_hi(phys));
                    let body = PspGfxCmdSetupTmr {
                        buf_phy_addr_lo,
                        buf_phy_addr_hi,
                        buf_size: U32::new(size),
                        tmr_flags: U32::new(1 << 1), // virt_phy_addr
                        system_phy_addr_lo,
                        system_phy_addr_hi,
                    };
                    self.submit(hw, layout, Command::new(cmd::SETUP_TMR, body.as_bytes(), "SETUP_TMR"))?;
                }
                PspStep::AutoloadRlc => {
                    self.submit(hw, layout, Command::new(cmd::AUTOLOAD_RLC, &[], "AUTOLOAD_RLC"))?;
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
        let (fw_phy_addr_lo, fw_phy_addr_hi) = lo_hi(addr);
        let body = PspGfxCmdLoadIpFw {
            fw_phy_addr_lo,
            fw_phy_addr_hi,
            fw_size: U32::new(bytes.len() as u32),
            fw_type: U32::new(fw_type.0),
        };
        let name = format!("LOAD_IP_FW({})", fw_type.name());
        self.submit(hw, layout, Command::new(cmd::LOAD_IP_FW, body.as_bytes(), name))?;
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

    /// Writes `c` and its frame, moves the write pointer, waits for the fence and checks the status; returns the
    /// PSP's response.
    fn submit(&mut self, hw: &mut Hw, layout: &VramLayout, c: Command) -> Result<PspGfxResp, BootError> {
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
        let mut frame = PspGfxRbFrame::new_zeroed();
        (frame.cmd_buf_addr_lo, frame.cmd_buf_addr_hi) = lo_hi(layout.mc(self.cmd));
        (frame.fence_addr_lo, frame.fence_addr_hi) = lo_hi(layout.mc(self.fence));
        frame.fence_value = U32::new(fence_value);
        hw.write_vram(self.cmd, c.buf.as_bytes())?;
        hw.write_vram(self.ring + frame_at, frame.as_bytes())?;
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
        let mut buf = PspGfxCmdResp::new_zeroed();
        hw.read_vram(self.cmd, buf.as_mut_bytes())?;
        let status = buf.resp.status.get();
        if status != 0 {
            return Err(BootError::PspCommand { cmd: c.name, status });
        }
        Ok(buf.resp)
    }
}

fn image<'a>(fw: &'a FirmwareSet, file: &str, range: &std::ops::Range<usize>) -> Result<&'a [u8], BootError> {
    fw.bytes(file, range).ok_or_else(|| BootError::Invalid {
        step: "PSP",
        msg: format!("{file}: bytes {:#x}..{:#x} are not in the loaded file", range.start, range.end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dwords(b: &[u8]) -> Vec<u32> {
        b.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// The bytes `psp_gfx_if.h` places: `cmd_id` at byte 8, the command's struct at 28, `resp` at 864.
    #[test]
    fn a_command_and_a_frame_put_each_field_where_psp_gfx_if_has_it() {
        let (lo, hi) = lo_hi(0x12_3456_7000);
        let body =
            PspGfxCmdLoadIpFw { fw_phy_addr_lo: lo, fw_phy_addr_hi: hi, fw_size: U32::new(0x40), fw_type: U32::new(9) };
        let c = Command::new(cmd::LOAD_IP_FW, body.as_bytes(), "LOAD_IP_FW");
        let d = dwords(c.buf.as_bytes());
        assert_eq!(d.len(), 256);
        assert_eq!(d[2], cmd::LOAD_IP_FW);
        assert_eq!(d[7..11], [0x3456_7000, 0x12, 0x40, 9]);
        assert!(d.iter().enumerate().all(|(i, &w)| w == 0 || i == 2 || (7..11).contains(&i)));

        let mut resp = PspGfxCmdResp::new_zeroed();
        let bytes = resp.as_mut_bytes();
        bytes[864..868].copy_from_slice(&5u32.to_le_bytes());
        bytes[880..884].copy_from_slice(&0x40_0000u32.to_le_bytes());
        assert_eq!((resp.resp.status.get(), resp.resp.tmr_size.get()), (5, 0x40_0000));

        let mut f = PspGfxRbFrame::new_zeroed();
        (f.cmd_buf_addr_lo, f.cmd_buf_addr_hi) = lo_hi(0x8_0000_1000);
        (f.fence_addr_lo, f.fence_addr_hi) = lo_hi(0x8_0000_2000);
        f.fence_value = U32::new(17);
        assert_eq!(dwords(f.as_bytes())[..7], [0x1000, 8, 0, 0x2000, 8, 17, 0]);
    }
}
