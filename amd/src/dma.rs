//! The GPU side of the pipelined big copies ([`pilot_usb_bridge::copy`]) as SDMA packets on the SDMA queue, as tinygrad's
//! `AMDAllocator._copyin/_copyout` build them for USB: per copy-in chunk POLL_REGMEM on the window's sentinel,
//! COPY_LINEAR out of the window, WRITE of the 64-bit drain fence; per copy-out piece COPY_LINEAR into SRAM and
//! the WRITE to `cq_buf + 12` that releases the armed bulk IN. Each call is one ring write and one doorbell.

use super::bridge_bus::{BridgeBus, BusMap};
use super::queue::{SdmaQueue, VaMap};
use super::sdma;
use pilot_usb_bridge::bridge::Bridge;
use pilot_usb_bridge::copy::{BridgeDma, CopyInJob};
use pilot_usb_bridge::error::Result;
use pilot_usb_bridge::proto::{self, bus, copy};

/// The SDMA queue driving the copies, with the maps that turn VRAM and bridge addresses into GPU addresses, and
/// the buffer the packets are built in (kept by the caller, so a copy allocates only when it needs more room than
/// any before it).
pub struct SdmaDma<'a> {
    pub queue: &'a mut SdmaQueue,
    pub bars: BusMap,
    pub va: VaMap,
    pub packets: &'a mut Vec<u32>,
}

/// The packets of copy-in `job` (its destination a VRAM physical address), in place of what `p` held.
pub fn copy_in_packets(job: &CopyInJob, va: &VaMap, p: &mut Vec<u32>) {
    p.clear();
    for k in 0..job.chunks() {
        let seq = job.first_seq + k;
        let window = bus::SRAM + (copy::WINDOW as u64) * (seq & 1);
        let sentinel_at = window + job.wire_len(k) as u64 - 4;
        sdma::poll_mem(p, sdma::poll::FUNC_EQ, va.sys(sentinel_at), proto::sentinel(seq), !0);
        let dest = job.dest + k * copy::CHUNK as u64;
        sdma::copy_linear(p, va.sys(window), va.vram(dest), job.payload(k) as u64);
        sdma::write(p, va.sys(bus::FENCE), &[(seq + 1) as u32, ((seq + 1) >> 32) as u32]);
    }
}

/// The packets of one copy-out piece, in place of what `p` held: `len` bytes of VRAM at physical `src` into SRAM,
/// then the trigger write.
pub fn copy_out_packets(src: u64, len: usize, va: &VaMap, p: &mut Vec<u32>) {
    p.clear();
    sdma::copy_linear(p, va.vram(src), va.sys(bus::SRAM), len as u64);
    sdma::write(p, va.sys(bus::READ_TRIGGER), &[0]);
}

impl BridgeDma for SdmaDma<'_> {
    fn queue_copy_in(&mut self, b: &mut Bridge, job: &CopyInJob) -> Result<()> {
        copy_in_packets(job, &self.va, self.packets);
        self.queue.submit(&mut BridgeBus::new(b, self.bars), self.packets)
    }

    fn queue_copy_out(&mut self, b: &mut Bridge, src: u64, len: usize) -> Result<()> {
        copy_out_packets(src, len, &self.va, self.packets);
        self.queue.submit(&mut BridgeBus::new(b, self.bars), self.packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each window mapped at 0x1_0000_0000 + its bus address.
    const VA: VaMap = VaMap {
        vram: 0x80_0000_0000,
        windows: [
            (0x20_0000, 0x8_0000, 0x1_0020_0000),
            (0x82_0000, 0x1000, 0x1_0082_0000),
            (0x82_2000, 0x1000, 0x1_0082_2000),
        ],
    };

    #[test]
    fn copy_in_chunks_poll_copy_and_fence() {
        let job = CopyInJob { dest: 0x10_0000, len: copy::CHUNK + 100, first_seq: 5, pad_last: false };
        let mut p = Vec::new();
        copy_in_packets(&job, &VA, &mut p);
        assert_eq!(p.len(), 2 * (6 + 7 + 6));
        // Chunk 0: sequence 5 uses window 1 (bus 0x240000), its sentinel in the window's last dword.
        assert_eq!(&p[..6], &[0x3000_0008 | 1 << 31, 0x0027_FFFC, 1, proto::sentinel(5), !0, 0x0FFF_0004]);
        assert_eq!(&p[6..13], &[1, copy::CHUNK as u32 - 1, 0, 0x0024_0000, 1, 0x0010_0000, 0x80]);
        assert_eq!(&p[13..19], &[2, 0x0082_0800, 1, 1, 6, 0]);
        // Chunk 1: window 0, 100 bytes, its sentinel at the end of its 512-byte-padded wire image.
        assert_eq!((p[20], p[22]), (0x0020_0000 + 512 - 4, proto::sentinel(6)));
        assert_eq!((p[26], p[27], p[30]), (99, 0, 0x0010_0000 + copy::CHUNK as u32));
        assert_eq!(p[36], 7, "the fence after the last chunk is its sequence + 1");
    }

    #[test]
    fn copy_out_writes_the_trigger_after_the_copy() {
        let mut p = vec![7; 100];
        copy_out_packets(0x2000, 4096, &VA, &mut p);
        assert_eq!(p, [1, 4095, 0, 0x2000, 0x80, 0x0020_0000, 1, 2, 0x0082_200C, 1, 0, 0]);
    }
}
