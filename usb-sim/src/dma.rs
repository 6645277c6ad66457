//! The simulator's stand-in for the GPU's DMA engine: it plays the part of tinygrad's SDMA packets in the big
//! copies (POLL_REGMEM on the sentinel, COPY_LINEAR, WRITE64 of the fence; COPY_LINEAR into SRAM and the
//! WRITE32 to 0x82200C) so the host side can be built and measured before the AMD queues exist.
//! It reaches the bridge only through device-side bus addresses, as the GPU would.

use super::bridge_fw::BridgeFirmware;
use pilot_usb_bridge::copy::CopyInJob;
use std::time::Duration;

/// Own copies of the layout the GPU side is programmed with (tinygrad `AMDAllocator._copyin`).
const WINDOW_BUS: [u64; 2] = [0x20_0000, 0x24_0000];
const FENCE_BUS: u64 = 0x82_0800;
const TRIGGER_WRITE_BUS: u64 = 0x82_200C;
const CHUNK_PAYLOAD: usize = 0x4_0000 - 4;

fn sentinel(seq: u64) -> u32 {
    0x5100_0000 | (seq as u32 & 0xFF_FFFF)
}

/// A queued copy-in and the chunk it waits for.
#[derive(Clone, Copy, Debug)]
struct CopyIn {
    job: CopyInJob,
    next: u64,
}

#[derive(Debug, Default)]
pub struct DmaEngine {
    copy_in: Option<CopyIn>,
    /// When the engine finishes its current work (its copies are serial).
    busy_until: Duration,
}

impl DmaEngine {
    /// Replaces any unfinished copy-in (a host that gave up on one never streams its remaining chunks).
    pub fn queue_copy_in(&mut self, job: CopyInJob) {
        self.copy_in = Some(CopyIn { job, next: 0 });
    }

    /// Consumes every chunk whose sentinel is in place by time `t` (called whenever SRAM data lands).
    pub fn poll(&mut self, fw: &mut BridgeFirmware, t: Duration) {
        while let Some(ci) = self.copy_in.as_mut() {
            let job = ci.job;
            if ci.next == job.chunks() {
                self.copy_in = None;
                return;
            }
            let k = ci.next;
            let seq = job.first_seq + k;
            let window = WINDOW_BUS[(seq & 1) as usize];
            let wire =
                if job.pad_last && k + 1 == job.chunks() { 0x4_0000 } else { (job.payload(k) + 4).div_ceil(512) * 512 };
            let slot = fw.device_read(window + wire as u64 - 4, 4);
            if slot.as_deref() != Some(&sentinel(seq).to_le_bytes()[..]) {
                return;
            }
            let payload = job.payload(k);
            let Some(data) = fw.device_read(window, payload) else { return };
            let start = t.max(self.busy_until);
            let done = start + fw.timing.gpu(payload);
            let dest = job.dest as usize + k as usize * CHUNK_PAYLOAD;
            if let Some(v) = fw.pcie.vram.get_mut(dest..dest + payload) {
                v.copy_from_slice(&data);
            } else {
                log::warn!("sim DMA: copy-in destination 0x{dest:x}+{payload} is outside VRAM; engine stops");
                self.copy_in = None;
                return;
            }
            fw.device_write(FENCE_BUS, &(seq + 1).to_le_bytes(), done);
            self.busy_until = done;
            ci.next += 1;
        }
    }

    /// VRAM `src..src+len` into SRAM, then the trigger write; false when the source is outside VRAM.
    pub fn copy_out(&mut self, fw: &mut BridgeFirmware, src: u64, len: usize) -> bool {
        let src = src as usize;
        let Some(data) = fw.pcie.vram.get(src..src + len).map(<[u8]>::to_vec) else { return false };
        let start = fw.now.max(self.busy_until);
        let done = start + fw.timing.gpu(len);
        if !fw.device_write(WINDOW_BUS[0], &data, done) {
            return false;
        }
        fw.device_write(TRIGGER_WRITE_BUS, &0u32.to_le_bytes(), done);
        self.busy_until = done;
        true
    }
}
