//! The compute queue's PM4 executor, decoded with its own opcode table (Linux `nvd.h`, gfx10+ layouts):
//! type-3 headers only (`3 << 30 | count << 16 | opcode << 8`, count = body dwords - 1). Each packet's body
//! length is checked against its opcode; addresses go through the GC hub ([`super::mem`]).

use super::mem::{Fabric, Hub};
use super::queue::{Ib, Queue, Step};
use super::Gpu;

pub const NOP: u32 = 0x10;
pub const DISPATCH_DIRECT: u32 = 0x15;
pub const WAIT_REG_MEM: u32 = 0x3C;
pub const INDIRECT_BUFFER: u32 = 0x3F;
pub const COPY_DATA: u32 = 0x40;
pub const EVENT_WRITE: u32 = 0x46;
pub const RELEASE_MEM: u32 = 0x49;
pub const ACQUIRE_MEM: u32 = 0x58;
pub const DMA_DATA: u32 = 0x50;
/// DMA_DATA control (body dword 0; Linux `nvd.h` `PACKET3_DMA_DATA_*`): DST_SEL bits 21:20, SRC_SEL bits 30:29
/// (0: the address, 3: the address through L2; Mesa `sid.h` `V_411_*`), CP_SYNC bit 31.
pub const DMA_DATA_CP_SYNC: u32 = 1 << 31;
/// DMA_DATA command (body dword 5): BYTE_COUNT bits 25:0, then SAS, DAS, SAIC, DAIC (bits 26-29).
pub const DMA_DATA_BYTE_COUNT: u32 = (1 << 26) - 1;
/// `EVENT_WRITE` event type of CS_PARTIAL_FLUSH (body bits 5:0; tinygrad `runtime/autogen/am/soc_11.py`
/// `enum_VGT_EVENT_TYPE`).
pub const EVENT_CS_PARTIAL_FLUSH: u32 = 7;
pub const SET_SH_REG: u32 = 0x76;
pub const SET_UCONFIG_REG: u32 = 0x79;
/// SET_SH_REG / SET_UCONFIG_REG offsets count from these register indices, up to (not including) the ends.
pub const SH_REG_START: u32 = 0x2C00;
pub const SH_REG_END: u32 = 0x3000;
pub const UCONFIG_REG_START: u32 = 0xC000;
pub const UCONFIG_REG_END: u32 = 0xC400;
/// The largest body a packet may have (the 14-bit count field).
const MAX_BODY: u32 = 0x3FFF;

/// `function` of WAIT_REG_MEM / POLL_REGMEM: 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >.
pub fn compare(function: u32, value: u32, reference: u32) -> Result<bool, String> {
    Ok(match function {
        0 => true,
        1 => value < reference,
        2 => value <= reference,
        3 => value == reference,
        4 => value != reference,
        5 => value >= reference,
        6 => value > reference,
        f => return Err(format!("compare function {f} is reserved")),
    })
}

fn want_body(name: &str, body: usize, want: usize) -> Result<(), String> {
    if body == want {
        Ok(())
    } else {
        Err(format!("{name} with a {body}-dword body (it has {want})"))
    }
}

impl Gpu {
    /// Executes the PM4 packet at `at` (a ring offset, or an address inside an indirect buffer).
    pub(super) fn pm4_packet(
        &mut self,
        q: &mut Queue,
        at: u64,
        in_ib: bool,
        fabric: &mut dyn Fabric,
    ) -> Result<Step, String> {
        let header = self.fetch(q, at, 1, in_ib, fabric)?[0];
        if header >> 30 != 3 {
            return Err(format!("header {header:#010x} is not a type-3 packet"));
        }
        let opcode = (header >> 8) & 0xFF;
        let count = (header >> 16) & MAX_BODY;
        if opcode == NOP && count == MAX_BODY {
            // The one-dword NOP.
            return Ok(Step::Done(4));
        }
        let n = count as usize + 1;
        let b = self.fetch(q, at + 4, n, in_ib, fabric)?;
        let bytes = 4 * (n as u64 + 1);
        q.busy_until += self.timing.pm4_packet;
        let at_time = q.busy_until;
        match opcode {
            NOP => {}
            SET_SH_REG | SET_UCONFIG_REG => {
                let (start, end, name) = if opcode == SET_SH_REG {
                    (SH_REG_START, SH_REG_END, "SET_SH_REG")
                } else {
                    (UCONFIG_REG_START, UCONFIG_REG_END, "SET_UCONFIG_REG")
                };
                if n < 2 {
                    return Err(format!("{name} without a value"));
                }
                let first = start + (b[0] & 0xFFFF);
                if first + (n as u32 - 1) > end {
                    return Err(format!("{name} of {} registers from {first:#x} runs past {end:#x}", n - 1));
                }
                for (i, &v) in b[1..].iter().enumerate() {
                    self.write_reg(first + i as u32, v, fabric);
                }
            }
            ACQUIRE_MEM => {
                want_body("ACQUIRE_MEM", n, 7)?;
                self.coherence.acquire(b[6]);
            }
            EVENT_WRITE => {
                if n != 1 && n != 3 {
                    return Err(format!("EVENT_WRITE with a {n}-dword body (it has 1 or 3)"));
                }
                if b[0] & 0x3F == EVENT_CS_PARTIAL_FLUSH {
                    self.cp_dma_land(at_time, fabric)?;
                    self.coherence.wait_idle();
                }
            }
            RELEASE_MEM => {
                want_body("RELEASE_MEM", n, 7)?;
                self.coherence.wait_idle();
                self.cp_dma_land(at_time, fabric)?;
                let (dst_sel, data_sel) = ((b[1] >> 16) & 3, b[1] >> 29);
                if dst_sel > 1 {
                    return Err(format!("RELEASE_MEM dst_sel {dst_sel} (memory is 0 or 1)"));
                }
                let addr = u64::from(b[2]) | u64::from(b[3]) << 32;
                let data = u64::from(b[4]) | u64::from(b[5]) << 32;
                let mut mem = self.mem(Hub::Gc, fabric, at_time);
                match data_sel {
                    0 => {}
                    1 if addr.is_multiple_of(4) => mem.write32(addr, data as u32)?,
                    2 if addr.is_multiple_of(8) => mem.write64(addr, data)?,
                    3 if addr.is_multiple_of(8) => mem.write64(addr, gpu_clock(at_time))?,
                    1..=3 => return Err(format!("RELEASE_MEM to misaligned {addr:#x}")),
                    d => return Err(format!("RELEASE_MEM data_sel {d} is not modelled")),
                }
            }
            WAIT_REG_MEM => {
                want_body("WAIT_REG_MEM", n, 6)?;
                let (function, memory, operation) = (b[0] & 7, b[0] & (1 << 4) != 0, (b[0] >> 6) & 3);
                let (reference, mask) = (b[3], b[4]);
                let value = if memory {
                    if operation != 0 {
                        return Err(format!("WAIT_REG_MEM operation {operation} on memory"));
                    }
                    let addr = u64::from(b[1]) | u64::from(b[2]) << 32;
                    if !addr.is_multiple_of(4) {
                        return Err(format!("WAIT_REG_MEM on misaligned {addr:#x}"));
                    }
                    self.mem(Hub::Gc, fabric, at_time).poll32(addr)?
                } else {
                    match operation {
                        0 => self.read_reg(b[1], fabric),
                        1 => {
                            self.write_reg(b[1], reference, fabric);
                            self.read_reg(b[2], fabric)
                        }
                        o => return Err(format!("WAIT_REG_MEM operation {o} is not modelled")),
                    }
                };
                if !compare(function, value & mask, reference)? {
                    return Ok(Step::Stall);
                }
            }
            INDIRECT_BUFFER => {
                want_body("INDIRECT_BUFFER", n, 3)?;
                let addr = u64::from(b[0]) | u64::from(b[1] & 0xFFFF) << 32;
                let ndw = u64::from(b[2] & 0xF_FFFF);
                if b[2] & (1 << 23) == 0 {
                    return Err("INDIRECT_BUFFER without its VALID bit".into());
                }
                if !addr.is_multiple_of(4) || ndw == 0 {
                    return Err(format!("INDIRECT_BUFFER at {addr:#x} of {ndw} dwords"));
                }
                self.mem(Hub::Gc, fabric, at_time).resolve(addr, 4 * ndw as usize)?;
                return Ok(Step::Ib(Ib { addr, bytes: 4 * ndw, pos: 0 }));
            }
            DISPATCH_DIRECT => {
                want_body("DISPATCH_DIRECT", n, 4)?;
                self.set(super::regs::Reg::DispatchInitiator, b[3]);
                let took = self.dispatch([b[0], b[1], b[2]], b[3], fabric)?;
                q.busy_until += took;
            }
            COPY_DATA => {
                want_body("COPY_DATA", n, 5)?;
                let (src_sel, dst_sel, wide) = (b[0] & 0xF, (b[0] >> 8) & 0xF, b[0] & (1 << 16) != 0);
                let src = u64::from(b[1]) | u64::from(b[2]) << 32;
                let dst = u64::from(b[3]) | u64::from(b[4]) << 32;
                let value: u64 = match src_sel {
                    0 => u64::from(self.read_reg(b[1], fabric)),
                    1 | 2 if wide => self.mem(Hub::Gc, fabric, at_time).read64(src)?,
                    1 | 2 => u64::from(self.mem(Hub::Gc, fabric, at_time).read32(src)?),
                    5 => src,
                    9 => gpu_clock(at_time),
                    s => return Err(format!("COPY_DATA src_sel {s} is not modelled")),
                };
                match dst_sel {
                    0 => self.write_reg(b[3], value as u32, fabric),
                    1 | 2 | 5 if wide => self.mem(Hub::Gc, fabric, at_time).write64(dst, value)?,
                    1 | 2 | 5 => self.mem(Hub::Gc, fabric, at_time).write32(dst, value as u32)?,
                    d => return Err(format!("COPY_DATA dst_sel {d} is not modelled")),
                }
            }
            DMA_DATA => {
                want_body("DMA_DATA", n, 6)?;
                self.cp_dma(&b, at_time, fabric)?;
            }
            op => return Err(format!("unknown PM4 opcode {op:#x} (header {header:#010x})")),
        }
        Ok(Step::Done(bytes))
    }
}

impl Gpu {
    /// DMA_DATA memory to memory (CP DMA). The CP reads the source when it takes the packet; the copy is done
    /// by the DMA engine beside the ME, which goes on to the next packet at once unless CP_SYNC is set: "set
    /// this if you want the 3D engine to wait until CP DMA is done; it should be set on the last CP DMA packet"
    /// (Mesa `radv_cp_dma.c` `CP_DMA_SYNC`, `si_cp_dma.c`). So a copy without CP_SYNC lands only at the next
    /// DMA_DATA with CP_SYNC, CS_PARTIAL_FLUSH or RELEASE_MEM: a dispatch between reads the old bytes.
    fn cp_dma(&mut self, b: &[u32], at: std::time::Duration, fabric: &mut dyn Fabric) -> Result<(), String> {
        let (dst_sel, src_sel) = ((b[0] >> 20) & 3, (b[0] >> 29) & 3);
        let command = b[5];
        if !matches!(src_sel, 0 | 3) || !matches!(dst_sel, 0 | 3) || command & !DMA_DATA_BYTE_COUNT & !(1 << 30) != 0 {
            return Err(format!(
                "DMA_DATA src_sel {src_sel}, dst_sel {dst_sel}, command {command:#x}: only memory to memory with \
                 incrementing addresses is modelled"
            ));
        }
        let src = u64::from(b[1]) | u64::from(b[2]) << 32;
        let dst = u64::from(b[3]) | u64::from(b[4]) << 32;
        let bytes = self.mem(Hub::Gc, fabric, at).read(src, (command & DMA_DATA_BYTE_COUNT) as usize)?;
        self.cp_dma.push((dst, bytes));
        if b[0] & DMA_DATA_CP_SYNC != 0 {
            self.cp_dma_land(at, fabric)?;
        }
        Ok(())
    }

    /// Every CP DMA copy in flight lands.
    fn cp_dma_land(&mut self, at: std::time::Duration, fabric: &mut dyn Fabric) -> Result<(), String> {
        for (dst, bytes) in std::mem::take(&mut self.cp_dma) {
            self.mem(Hub::Gc, fabric, at).write(dst, &bytes)?;
        }
        Ok(())
    }
}

/// The GPU clock counter at modelled time `t` (100 MHz, as the SOC reference clock).
pub fn gpu_clock(t: std::time::Duration) -> u64 {
    (t.as_nanos() / 10) as u64
}
