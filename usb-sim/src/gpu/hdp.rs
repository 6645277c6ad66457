//! HDP, the host data path: the host's writes to VRAM through BAR0 land in HDP's write buffer, and the GPU's own
//! engines (the CP fetching rings and indirect buffers, SDMA, the PSP, shaders) see them only after an HDP flush.
//! Host reads through BAR0 go through HDP too and see them at once.
//!
//! A flush is a write of any value to either register:
//! - the remapped flush register, whose byte offset in BAR5 `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` reads (the host's
//!   flush: tinygrad `AM_GMC.flush_hdp`; Linux `hdp_v6_0.c` `hdp_v6_0_flush_hdp` writes
//!   `rmmio_remap.reg_offset + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL`);
//! - `BIF_BX_PF0_GPU_HDP_FLUSH_REQ` (the CP's flush, a WAIT_REG_MEM write-then-wait before an indirect buffer: tinygrad
//!   `AMDComputeQueue.memory_barrier`; Linux `gfx_v11_0.c` `gfx_v11_0_ring_emit_hdp_flush`).
//!
//! Linux flushes after every CPU write to VRAM that the GPU reads next (`amdgpu_device.c`
//! `amdgpu_device_flush_hdp`, called from `amdgpu_device_vram_access` after an aperture write). How long real
//! hardware holds a write without a flush is not documented; the model holds it until the next flush, the strictest
//! reading, so a driver that skips the flush fails every time rather than by timing. A GPU-side read of VRAM that
//! the buffer still holds a write for is refused with a reason naming the offset ([`super::mem::Mem::read`]), except a
//! poll's (WAIT_REG_MEM, POLL_REGMEM), which sees VRAM as it is and waits on; an engine that reads VRAM directly (the shader emulator, page-table walks) sees the VRAM as it was before the write.
//! A GPU-side write leaves the buffer alone: the flush lands the host's older write over it, as the drain would.
//! `MM_INDEX`/`MM_DATA` reach VRAM directly, past the buffer. A mode-1 reset drains the buffer (the model's choice:
//! no source says whether held writes survive it; the driver writes nothing it relies on before a reset).

use std::collections::HashMap;

/// The host's VRAM writes not yet flushed, per dword.
#[derive(Debug, Default)]
pub struct WriteBuffer {
    /// Dword-aligned VRAM offset → the dword as the host last wrote it.
    held: HashMap<usize, u32>,
    /// Bounds of the held offsets (a quick miss for reads outside them).
    lo: usize,
    hi: usize,
    flushes: u64,
}

impl WriteBuffer {
    /// The dword at `off` as the host sees it through BAR0: its held write, or `vram`'s.
    pub fn host_read32(&self, vram: &[u8], off: usize) -> u32 {
        match self.held.get(&off) {
            Some(&v) => v,
            None => u32::from_le_bytes(vram[off..off + 4].try_into().expect("4 bytes")),
        }
    }

    /// A host write of byte lanes `be` of `value` to the dword at `off`, held until the next flush.
    pub fn host_write32(&mut self, vram: &[u8], off: usize, be: u8, value: u32) {
        let old = self.host_read32(vram, off);
        let merged = (0..4).fold(old, |v, i| {
            if be & (1 << i) != 0 {
                (v & !(0xFF << (8 * i))) | (value & (0xFF << (8 * i)))
            } else {
                v
            }
        });
        if self.held.is_empty() {
            (self.lo, self.hi) = (off, off);
        }
        (self.lo, self.hi) = (self.lo.min(off), self.hi.max(off));
        self.held.insert(off, merged);
    }

    /// The flush: every held write lands in `vram`.
    pub fn flush(&mut self, vram: &mut [u8]) {
        for (off, v) in self.held.drain() {
            vram[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        self.flushes += 1;
    }

    /// Flushes so far (a register write the model took as a flush).
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// The first VRAM offset in `off..off+len` that a held write covers.
    pub fn held(&self, off: usize, len: usize) -> Option<usize> {
        if self.held.is_empty() || len == 0 || off > self.hi + 3 || off + len <= self.lo {
            return None;
        }
        let (first, last) = (off & !3, (off + len - 1) & !3);
        if last - first > 4 * self.held.len() {
            return self.held.keys().filter(|&&k| k >= first && k <= last).min().map(|&k| k.max(off));
        }
        (first..=last).step_by(4).find(|k| self.held.contains_key(k)).map(|k| k.max(off))
    }

    /// `buf`, a copy of VRAM from `off`, as the host sees it (held writes over it).
    pub fn overlay(&self, off: usize, buf: &mut [u8]) {
        if self.held(off, buf.len()).is_none() {
            return;
        }
        for (&k, &v) in &self.held {
            for (i, b) in v.to_le_bytes().into_iter().enumerate() {
                if let Some(at) = (k + i).checked_sub(off).filter(|&at| at < buf.len()) {
                    buf[at] = b;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_writes_show_to_the_host_and_land_at_the_flush() {
        let mut vram = vec![0u8; 64];
        let mut b = WriteBuffer::default();
        b.host_write32(&vram, 8, 0x0F, 0x1122_3344);
        b.host_write32(&vram, 8, 0b0001, 0xAA);
        assert_eq!(b.host_read32(&vram, 8), 0x1122_33AA);
        assert_eq!(b.held(0, 8), None);
        assert_eq!(b.held(10, 1), Some(10));
        assert_eq!(b.held(0, 64), Some(8));
        let mut host = vram[4..16].to_vec();
        b.overlay(4, &mut host);
        assert_eq!(host[4..8], 0x1122_33AAu32.to_le_bytes());
        assert_eq!(vram[8..12], [0; 4], "the GPU's VRAM holds the old dword until the flush");
        b.flush(&mut vram);
        assert_eq!(vram[8..12], 0x1122_33AAu32.to_le_bytes());
        assert_eq!((b.held(0, 64), b.flushes()), (None, 1));
    }
}
