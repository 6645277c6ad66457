//! `.rd` captures: a submission as Mesa's freedreno tools read it (`src/freedreno/common/redump.h`, read by
//! `src/freedreno/decode/cffdump.c` through `rdutil.h`), so Mesa's `cffdump` can decode what pilot submitted,
//! independently of pilot's encoder and of this fake's own decoder.
//!
//! A file is a sequence of sections `{u32 type, u32 size, size bytes of payload}`, little endian. A capture holds
//! `RD_GPU_ID` (630), then for every GPU-visible range `RD_GPUADDR` (`u32 addr_lo, u32 len, u32 addr_hi`) followed
//! by `RD_BUFFER_CONTENTS` (its bytes at submission), then one `RD_CMDSTREAM_ADDR` (`u32 addr_lo, u32 dwords,
//! u32 addr_hi`) per command object of the submission. cffdump forgets its buffers after a command stream, so the
//! buffers precede the streams.

use std::sync::{Arc, Mutex, MutexGuard};

/// `enum rd_sect_type` values (redump.h).
pub mod section {
    pub const GPUADDR: u32 = 3;
    pub const CMDSTREAM_ADDR: u32 = 6;
    pub const BUFFER_CONTENTS: u32 = 12;
    pub const GPU_ID: u32 = 13;
}

/// One GPU-visible range as the GPU sees it when the submission is made.
#[derive(Clone, Copy, Debug)]
pub struct Buffer<'a> {
    pub va: u64,
    pub bytes: &'a [u8],
}

/// One command object of the submission: `dwords` dwords at `va`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub va: u64,
    pub dwords: u32,
}

fn section(out: &mut Vec<u8>, ty: u32, payload: &[u8]) -> Result<(), String> {
    let len = u32::try_from(payload.len()).map_err(|_| format!(".rd section of {} bytes", payload.len()))?;
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// `{u32 addr_lo, u32 n, u32 addr_hi}`: the payload of `RD_GPUADDR` and `RD_CMDSTREAM_ADDR` (rdutil.h `parse_addr`).
fn addr(va: u64, n: u32) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&(va as u32).to_le_bytes());
    p[4..8].copy_from_slice(&n.to_le_bytes());
    p[8..].copy_from_slice(&((va >> 32) as u32).to_le_bytes());
    p
}

/// The `.rd` file of one submission on GPU `gpu_id` (630 for the a630): every buffer, then every stream.
/// Fails for a buffer of 4 GiB or more (the format's lengths are 32-bit).
pub fn encode(gpu_id: u32, buffers: &[Buffer<'_>], streams: &[Stream]) -> Result<Vec<u8>, String> {
    let total: usize = buffers.iter().map(|b| b.bytes.len() + 28).sum();
    let mut out = Vec::with_capacity(total + 12 + 20 * streams.len());
    section(&mut out, section::GPU_ID, &gpu_id.to_le_bytes())?;
    for b in buffers {
        let len = u32::try_from(b.bytes.len()).map_err(|_| {
            format!("buffer at {:#x} has {} bytes, more than an .rd file can hold", b.va, b.bytes.len())
        })?;
        section(&mut out, section::GPUADDR, &addr(b.va, len))?;
        section(&mut out, section::BUFFER_CONTENTS, b.bytes)?;
    }
    for s in streams {
        section(&mut out, section::CMDSTREAM_ADDR, &addr(s.va, s.dwords))?;
    }
    Ok(out)
}

#[derive(Debug, Default)]
enum Slot {
    #[default]
    Armed,
    Captured(Result<Vec<u8>, String>),
    Taken,
}

/// A handle shared between the fake KGSL and its owner: the fake fills it with the `.rd` file of the first
/// `IOCTL_KGSL_GPU_COMMAND` it receives after [`crate::fake::FakeKgsl::with_rd_capture`] (before checking it, so a
/// submission the fake refuses is captured too); later submissions are not captured.
#[derive(Clone, Debug, Default)]
pub struct RdCapture(Arc<Mutex<Slot>>);

impl RdCapture {
    /// A handle waiting for its submission.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the next submission should be captured.
    pub(crate) fn armed(&self) -> bool {
        matches!(*self.lock(), Slot::Armed)
    }

    pub(crate) fn fill(&self, file: Result<Vec<u8>, String>) {
        let mut slot = self.lock();
        if matches!(*slot, Slot::Armed) {
            *slot = Slot::Captured(file);
        }
    }

    /// The captured file, once: `None` when no submission was made (or it was taken already), an error when the
    /// submission could not be captured.
    pub fn take(&self) -> Option<Result<Vec<u8>, String>> {
        let mut slot = self.lock();
        match std::mem::take(&mut *slot) {
            Slot::Captured(file) => {
                *slot = Slot::Taken;
                Some(file)
            }
            other => {
                *slot = other;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(b: &[u8]) -> Vec<u32> {
        b.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn sections_follow_redump_h() {
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let bufs = [Buffer { va: 0x1_2345_6000, bytes: &data }];
        let streams = [Stream { va: 0x1_2345_6004, dwords: 1 }];
        let w = words(&encode(630, &bufs, &streams).unwrap());
        #[rustfmt::skip]
        let expected = [
            13, 4, 630,
            3, 12, 0x2345_6000, 8, 1,
            12, 8, 0x0403_0201, 0x0807_0605,
            6, 12, 0x2345_6004, 1, 1,
        ];
        assert_eq!(w, expected);
    }

    #[test]
    fn only_the_first_submission_is_kept_and_taken_once() {
        let c = RdCapture::new();
        assert!(c.take().is_none());
        assert!(c.armed());
        c.fill(Ok(vec![1]));
        c.fill(Ok(vec![2]));
        assert!(!c.armed());
        assert_eq!(c.take(), Some(Ok(vec![1])));
        assert_eq!(c.take(), None);
    }
}
