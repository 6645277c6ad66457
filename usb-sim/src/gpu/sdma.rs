//! The SDMA queue's executor, decoded with its own opcode table (Linux `sdma_v6_0_0_pkt_open.h`): the header's
//! op in bits 0-7 and sub-op in 8-15. Lengths follow from the opcode; addresses go through the GC hub.

use super::mem::{Fabric, Hub};
use super::pm4::{compare, gpu_clock};
use super::queue::{Queue, Step};
use super::Gpu;

pub const OP_NOP: u32 = 0;
pub const OP_COPY: u32 = 1;
pub const OP_WRITE: u32 = 2;
pub const OP_FENCE: u32 = 5;
pub const OP_TRAP: u32 = 6;
pub const OP_POLL_REGMEM: u32 = 8;
pub const OP_TIMESTAMP: u32 = 13;
pub const OP_GCR: u32 = 17;
pub const SUB_COPY_LINEAR: u32 = 0;
pub const SUB_WRITE_LINEAR: u32 = 0;
pub const SUB_TIMESTAMP_GET_GLOBAL: u32 = 2;

impl Gpu {
    pub(super) fn sdma_packet(&mut self, q: &mut Queue, at: u64, fabric: &mut dyn Fabric) -> Result<Step, String> {
        let h = self.fetch(q, at, 1, false, fabric)?[0];
        let (op, sub) = (h & 0xFF, (h >> 8) & 0xFF);
        let fetch = |g: &Gpu, q: &Queue, fabric: &mut dyn Fabric, n: usize| g.fetch(q, at + 4, n, false, fabric);
        q.busy_until += self.timing.sdma_packet;
        let len: u64 = match (op, sub) {
            (OP_NOP, _) => 1 + u64::from((h >> 16) & 0x3FFF),
            (OP_COPY, SUB_COPY_LINEAR) => {
                let b = fetch(self, q, fabric, 6)?;
                let count = (b[0] & 0x3FFF_FFFF) as usize + 1;
                let src = u64::from(b[2]) | u64::from(b[3]) << 32;
                let dst = u64::from(b[4]) | u64::from(b[5]) << 32;
                let mut mem = self.mem(Hub::Gc, fabric, q.busy_until);
                let data = mem.read(src, count)?;
                let over_pcie = mem.resolve(src, count).is_ok_and(|t| matches!(t, super::mem::Target::Bridge(_)))
                    || mem.resolve(dst, count).is_ok_and(|t| matches!(t, super::mem::Target::Bridge(_)));
                q.busy_until += if over_pcie { self.timing.gpu(count) } else { self.timing.vram(count) };
                self.mem(Hub::Gc, fabric, q.busy_until).write(dst, &data)?;
                7
            }
            (OP_WRITE, SUB_WRITE_LINEAR) => {
                let b = fetch(self, q, fabric, 3)?;
                let dst = u64::from(b[0]) | u64::from(b[1]) << 32;
                let ndw = (b[2] & 0xF_FFFF) as usize + 1;
                if !dst.is_multiple_of(4) {
                    return Err(format!("WRITE to misaligned {dst:#x}"));
                }
                let data = self.fetch(q, at + 16, ndw, false, fabric)?;
                let bytes: Vec<u8> = data.iter().flat_map(|d| d.to_le_bytes()).collect();
                self.mem(Hub::Gc, fabric, q.busy_until).write(dst, &bytes)?;
                4 + ndw as u64
            }
            (OP_FENCE, 0) => {
                let b = fetch(self, q, fabric, 3)?;
                let addr = u64::from(b[0]) | u64::from(b[1]) << 32;
                if !addr.is_multiple_of(4) {
                    return Err(format!("FENCE to misaligned {addr:#x}"));
                }
                self.mem(Hub::Gc, fabric, q.busy_until).write32(addr, b[2])?;
                4
            }
            (OP_TRAP, 0) => 2,
            (OP_POLL_REGMEM, 0) => {
                let b = fetch(self, q, fabric, 5)?;
                if h >> 31 == 0 {
                    return Err("POLL_REGMEM on a register is not modelled (mem_poll = 0)".into());
                }
                let addr = u64::from(b[0]) | u64::from(b[1]) << 32;
                if !addr.is_multiple_of(4) {
                    return Err(format!("POLL_REGMEM on misaligned {addr:#x}"));
                }
                let v = self.mem(Hub::Gc, fabric, q.busy_until).poll32(addr)?;
                if !compare((h >> 28) & 7, v & b[3], b[2])? {
                    return Ok(Step::Stall);
                }
                6
            }
            (OP_TIMESTAMP, SUB_TIMESTAMP_GET_GLOBAL) => {
                let b = fetch(self, q, fabric, 2)?;
                let addr = u64::from(b[0]) | u64::from(b[1]) << 32;
                if !addr.is_multiple_of(8) {
                    return Err(format!("TIMESTAMP to misaligned {addr:#x}"));
                }
                self.mem(Hub::Gc, fabric, q.busy_until).write64(addr, gpu_clock(q.busy_until))?;
                3
            }
            (OP_GCR, _) => 5,
            _ => return Err(format!("unknown SDMA packet op {op} sub-op {sub} (header {h:#010x})")),
        };
        Ok(Step::Done(4 * len))
    }
}
