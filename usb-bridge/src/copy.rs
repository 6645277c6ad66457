//! Big copies between host memory and GPU memory through the bridge's SRAM (tinygrad
//! `AMDAllocator._copyin/_copyout` in `ops_amd.py`).
//!
//! Copy-in is pipelined: chunks of 256 KB - 4 alternate between two SRAM windows, each wire image ends with a
//! sentinel dword the GPU polls for, and the GPU writes a drain fence (XDATA 0xA800) after copying each chunk.
//! The GPU drains one window while the host sends the other; the host waits on the fence only before reusing a
//! window, and reaps each chunk's bulk OUT before it arms the next (see [`Copier::stream`]). Copy-out arms an SRAM read per 512 KB piece; the GPU copies into SRAM and writes
//! to 0x822000+, which releases the bulk IN.
//!
//! The GPU side of both (tinygrad's SDMA packets) is behind [`DeviceDma`].

use crate::bridge::Bridge;
use crate::error::{Error, Result};
use crate::proto::{self, copy, timeout};
use crate::transport::Ticket;

/// One copy-in as the GPU side sees it: chunk `k` (sequence `first_seq + k`) carries
/// `min(CHUNK, len - k*CHUNK)` bytes for `dest + k*CHUNK`; its wire image is [`CopyInJob::wire_len`] bytes with
/// the sentinel in the last dword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyInJob {
    pub dest: u64,
    pub len: usize,
    pub first_seq: u64,
    /// The last chunk is padded to the whole window (see [`Copier`] on stale sentinel slots).
    pub pad_last: bool,
}

impl CopyInJob {
    pub fn chunks(&self) -> u64 {
        self.len.div_ceil(copy::CHUNK) as u64
    }

    /// Payload bytes of chunk `k`.
    pub fn payload(&self, k: u64) -> usize {
        (self.len - k as usize * copy::CHUNK).min(copy::CHUNK)
    }

    /// Bytes of chunk `k`'s wire image.
    pub fn wire_len(&self, k: u64) -> usize {
        if self.pad_last && k + 1 == self.chunks() {
            copy::WINDOW
        } else {
            proto::chunk_wire_len(self.payload(k))
        }
    }
}

/// The GPU side of the big copies. On an AMD GPU these are SDMA packets (the next layer up); the
/// simulator's stand-in DMA engine implements it for tests and measurements.
pub trait DeviceDma {
    /// Queues, for each chunk `k` of `job` in order: wait until the last dword of its wire image in SRAM window
    /// `seq & 1` (bus 0x200000 + 0x40000 * (seq & 1)) equals [`proto::sentinel`]`(seq)`; copy its payload from the
    /// window to `dest + k*CHUNK`; write `seq + 1` (LE64) to the fence at bus 0x820800.
    fn queue_copy_in(&mut self, job: &CopyInJob) -> Result<()>;
    /// Queues: copy `len` bytes from `src` to SRAM (bus 0x200000), then write a dword to bus 0x82200C.
    fn queue_copy_out(&mut self, src: u64, len: usize) -> Result<()>;
}

/// The GPU side as the copies call it: with the bridge at hand, for a DMA engine programmed through it (the SDMA
/// queue's ring writes and doorbells are bridge transactions). Every [`DeviceDma`] is one that needs no bridge.
pub trait BridgeDma {
    /// As [`DeviceDma::queue_copy_in`].
    fn queue_copy_in(&mut self, b: &mut Bridge, job: &CopyInJob) -> Result<()>;
    /// As [`DeviceDma::queue_copy_out`].
    fn queue_copy_out(&mut self, b: &mut Bridge, src: u64, len: usize) -> Result<()>;
}

impl<T: DeviceDma + ?Sized> BridgeDma for T {
    fn queue_copy_in(&mut self, _b: &mut Bridge, job: &CopyInJob) -> Result<()> {
        DeviceDma::queue_copy_in(self, job)
    }

    fn queue_copy_out(&mut self, _b: &mut Bridge, src: u64, len: usize) -> Result<()> {
        DeviceDma::queue_copy_out(self, src, len)
    }
}

/// Host-side copy state of one bridge: the chunk sequence and what each SRAM window holds.
#[derive(Debug, Default)]
pub struct Copier {
    next_seq: u64,
    fence_seen: u64,
    fence_zeroed: bool,
    /// The last wire image sent to each window (its bytes are what the window holds up to its length),
    /// or `None` when the window's contents are unknown and must be zeroed first.
    windows: [Option<Vec<u8>>; 2],
}

impl Copier {
    pub fn new() -> Copier {
        Copier::default()
    }

    /// Copies `data` to GPU memory at `dest`; returns when the GPU has drained every chunk.
    pub fn copy_in<D: BridgeDma + ?Sized>(
        &mut self,
        b: &mut Bridge,
        dma: &mut D,
        dest: u64,
        data: &[u8],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.prepare(b)?;
        let mut job = CopyInJob { dest, len: data.len(), first_seq: self.next_seq, pad_last: false };
        job.pad_last = self.last_needs_padding(&job, data);
        dma.queue_copy_in(b, &job)?;
        let mut in_flight: [Option<Ticket>; 2] = [None, None];
        let result = self.stream(b, &job, data, &mut in_flight);
        // Whatever happened, no transfer may outlive this call with a buffer we lost track of.
        for (w, t) in in_flight.iter_mut().enumerate() {
            if let Some(t) = t.take() {
                match b.reap(t) {
                    Ok(buf) => self.windows[w] = Some(buf),
                    Err(_) => self.windows[w] = None,
                }
            }
        }
        if result.is_err() {
            // The windows and the fence may hold anything the failed copy left; start over on both.
            self.windows = [None, None];
            self.fence_zeroed = false;
        }
        result?;
        self.next_seq += job.chunks();
        Ok(())
    }

    /// Sends every chunk. Chunk k's bulk OUT is reaped before chunk k+1 is armed: the 0xF2 engine takes the arm in
    /// force when a transfer's data starts, and a queued bulk OUT (a worker thread, the host controller) may start
    /// after a control transfer sent later, so an arm sent earlier could capture chunk k's data. Only the reap
    /// proves the data has gone. The fence read for the window's previous chunk still overlaps chunk k's transfer.
    fn stream(
        &mut self,
        b: &mut Bridge,
        job: &CopyInJob,
        data: &[u8],
        in_flight: &mut [Option<Ticket>; 2],
    ) -> Result<()> {
        for k in 0..job.chunks() {
            let seq = job.first_seq + k;
            let w = (seq & 1) as usize;
            // The window last held chunk seq-2: the GPU must have drained it.
            self.wait_fence(b, seq.saturating_sub(1))?;
            for (v, t) in in_flight.iter_mut().enumerate() {
                if let Some(t) = t.take() {
                    self.windows[v] = Some(b.reap(t)?);
                }
            }
            let off = k as usize * copy::CHUNK;
            let wire = self.stage(w, seq, &data[off..off + job.payload(k)], job.wire_len(k));
            in_flight[w] = Some(b.sram_write_async(proto::window_slot(seq), wire)?);
        }
        for (v, t) in in_flight.iter_mut().enumerate() {
            if let Some(t) = t.take() {
                self.windows[v] = Some(b.reap(t)?);
            }
        }
        self.wait_fence(b, job.first_seq + job.chunks())
    }

    /// The GPU polls only the sentinel slot, so the stale dword there must not already equal the chunk's
    /// sentinel, or the GPU would copy the window before the data lands. Only a short last chunk has a slot
    /// inside the window; its stale dword comes from chunk k-2 of this copy or from the window's previous image.
    /// When that is unknown or equal to the sentinel, the chunk is padded to the whole window, whose last dword
    /// only ever holds another chunk's sentinel or zero.
    fn last_needs_padding(&self, job: &CopyInJob, data: &[u8]) -> bool {
        let k = job.chunks() - 1;
        let natural = proto::chunk_wire_len(job.payload(k));
        if natural == copy::WINDOW {
            return false;
        }
        let slot = natural - 4..natural;
        let sentinel = proto::sentinel(job.first_seq + k).to_le_bytes();
        let stale = if k >= 2 {
            data.get((k as usize - 2) * copy::CHUNK + slot.start..).and_then(|d| d.get(..4))
        } else {
            self.windows[((job.first_seq + k) & 1) as usize].as_ref().and_then(|img| img.get(slot))
        };
        stale.is_none_or(|s| s == sentinel)
    }

    /// Builds chunk `seq`'s wire image of `len` bytes in the window's previous buffer: payload, zero padding,
    /// sentinel in the last dword.
    fn stage(&mut self, w: usize, seq: u64, payload: &[u8], len: usize) -> Vec<u8> {
        let sentinel = proto::sentinel(seq).to_le_bytes();
        let mut wire = self.windows[w].take().unwrap_or_default();
        wire.clear();
        wire.extend_from_slice(payload);
        wire.resize(len - 4, 0);
        wire.extend_from_slice(&sentinel);
        wire
    }

    /// Spins on the fence (E4 reads of XDATA 0xA800) until it reaches `target`, within [`timeout::COPY_FENCE`].
    fn wait_fence(&mut self, b: &mut Bridge, target: u64) -> Result<()> {
        if self.fence_seen >= target {
            return Ok(());
        }
        let start = b.now();
        loop {
            let mut f = [0u8; 8];
            b.xdata_read(proto::xdata::FENCE, &mut f)?;
            self.fence_seen = u64::from_le_bytes(f);
            if self.fence_seen >= target {
                return Ok(());
            }
            let waited = b.now().saturating_sub(start);
            if waited > timeout::COPY_FENCE {
                return Err(Error::HungCopy {
                    device: b.name().to_string(),
                    seq: target - 1,
                    fence: self.fence_seen,
                    waited,
                });
            }
        }
    }

    /// Zeroes the fence once per bridge and any window whose contents are unknown.
    fn prepare(&mut self, b: &mut Bridge) -> Result<()> {
        if !self.fence_zeroed {
            b.xdata_write(proto::xdata::FENCE, &[0; 8])?;
            self.fence_zeroed = true;
            self.next_seq = 0;
            self.fence_seen = 0;
        }
        for w in 0..2 {
            if self.windows[w].is_none() {
                let zeros = vec![0u8; copy::WINDOW];
                b.sram_write(w * (copy::WINDOW / proto::sram::SLOT), &zeros)?;
                self.windows[w] = Some(zeros);
            }
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes from GPU memory at `src` into `buf`, one armed SRAM read per 512 KB.
    pub fn copy_out<D: BridgeDma + ?Sized>(
        &mut self,
        b: &mut Bridge,
        dma: &mut D,
        src: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        for (i, piece) in buf.chunks_mut(copy::OUT_PIECE).enumerate() {
            // The GPU's copy overwrites the copy-in windows from the SRAM's start; on a failure they stay unknown.
            let old = [self.windows[0].take(), self.windows[1].take()];
            b.sram_read_arm(piece.len())?;
            dma.queue_copy_out(b, src + (i * copy::OUT_PIECE) as u64, piece.len())?;
            b.sram_read_finish(piece)?;
            self.windows = old;
            self.note_sram(piece);
        }
        Ok(())
    }

    /// Writes `wire` (whole sectors) into the SRAM at byte `offset` (a slot boundary) with one 0xF2 write and one
    /// bulk OUT, and records what it leaves in the copy-in windows. The write must not reach a window's last dword
    /// (the sentinel slot, see [`Copier::last_needs_padding`]).
    pub fn write_staged(&mut self, b: &mut Bridge, offset: usize, wire: &[u8]) -> Result<()> {
        let reaches_a_slot = (0..2).any(|w| (offset..offset + wire.len()).contains(&((w + 1) * copy::WINDOW - 4)));
        if !offset.is_multiple_of(proto::sram::SLOT) || reaches_a_slot {
            return Err(b.invalid(
                "SRAM stage",
                format!("{} bytes at {offset:#x} reach a window's sentinel slot or miss a slot boundary", wire.len()),
            ));
        }
        // Unknown until the write is done: a failed transfer leaves the bytes undetermined.
        let old = [self.windows[0].take(), self.windows[1].take()];
        b.sram_write_sectors(offset / proto::sram::SLOT, wire)?;
        self.windows = old;
        for w in 0..2 {
            let start = w * copy::WINDOW;
            let Some(img) = self.windows[w].as_mut() else { continue };
            // Only bytes inside the window's known prefix are tracked; those past it stay unknown.
            let (lo, hi) = (offset.max(start), (offset + wire.len()).min(start + img.len()));
            if lo < hi {
                img[lo - start..hi - start].copy_from_slice(&wire[lo - offset..hi - offset]);
            }
        }
        Ok(())
    }

    /// Records that the SRAM now starts with `data` (a copy-out's piece): each window it reaches holds it over its
    /// previous image. A window whose last dword it overwrites with a value that could pass for a chunk's sentinel
    /// (tag 0x51) becomes unknown, so it is zeroed before the next copy-in: that dword must only ever hold another
    /// chunk's sentinel or zero (see [`Copier::last_needs_padding`]). A window left unknown stays unknown unless
    /// the piece covers it whole.
    fn note_sram(&mut self, data: &[u8]) {
        for w in 0..2 {
            let start = w * copy::WINDOW;
            if data.len() <= start {
                continue;
            }
            let part = &data[start..data.len().min(start + copy::WINDOW)];
            let whole = part.len() == copy::WINDOW;
            let Some(mut img) = self.windows[w].take().or_else(|| whole.then(Vec::new)) else {
                continue;
            };
            if part.len() >= img.len() {
                img.clear();
                img.extend_from_slice(part);
            } else {
                img[..part.len()].copy_from_slice(part);
            }
            let last = whole.then(|| u32::from_le_bytes(part[copy::WINDOW - 4..].try_into().expect("4 bytes")));
            let sentinel_like = last.is_some_and(|v| v & 0xFF00_0000 == copy::SENTINEL_TAG);
            self.windows[w] = (!sentinel_like).then_some(img);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_out_piece_becomes_the_windows_images_unless_it_ends_in_a_sentinel_lookalike() {
        let mut c = Copier::new();
        // Unknown windows stay unknown under a partial piece; a whole window becomes known.
        c.note_sram(&[1u8; 100]);
        assert_eq!((c.windows[0].is_some(), c.windows[1].is_some()), (false, false));
        let mut whole = vec![2u8; copy::WINDOW + 8];
        c.note_sram(&whole);
        assert_eq!(c.windows[0].as_deref(), Some(&whole[..copy::WINDOW]));
        assert!(c.windows[1].is_none(), "8 bytes of window 1 do not make it known");
        // A shorter piece overwrites the start of a known image and keeps the rest.
        c.note_sram(&[3u8; 16]);
        let img = c.windows[0].as_deref().unwrap();
        assert_eq!((img.len(), img[15], img[16]), (copy::WINDOW, 3, 2));
        // A last dword that could pass for a sentinel makes the window unknown (it is zeroed before the next copy-in).
        whole[copy::WINDOW - 4..copy::WINDOW].copy_from_slice(&proto::sentinel(7).to_le_bytes());
        c.note_sram(&whole[..copy::WINDOW]);
        assert!(c.windows[0].is_none());
    }
}
