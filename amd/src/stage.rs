//! Small copy-ins staged for the next submission (issue 25 item 7).
//!
//! A copy-in through the pipelined SRAM copy ([`pilot_usb_bridge::copy`]) costs an SDMA submission (ring,
//! write pointer, HDP flush, doorbell), an 0xF2 arm, a bulk OUT and a fence read: about ten USB transactions per
//! input. A small one is kept in a host image instead, and the next ring submission carries them all: the image
//! goes to the SRAM in one 0xF2 write (two transactions, whatever the number of inputs), and the ring submission
//! starts with one CP DMA copy (DMA_DATA) per staged input from the SRAM to its buffer, ahead of the step's
//! indirect buffer ([`super::step::RingSubmit`]). tinygrad's USB path writes a staged input the same way, an 0xF2
//! arm and one blocking bulk OUT, and submits the GPU's copy out of the SRAM only afterwards
//! (`runtime/support/usb.py` `usb_stage_copy`): the bulk OUT's completion is the data's arrival.

use super::step::{StagedCopy, MAX_STAGED_COPIES};
use pilot_usb_bridge::proto::{copy, sram};

/// Bytes of the host image: the staged copies of one submission together, at most.
pub const STAGE_BYTES: usize = 0x2_0000;
/// Where the image lies in the SRAM: copy-in window 1, which it never fills to its last dword (the window's
/// sentinel slot, [`pilot_usb_bridge::copy::Copier`]).
pub const SRAM_OFFSET: usize = copy::WINDOW;
const _: () = assert!(STAGE_BYTES <= copy::WINDOW - sram::SECTOR && SRAM_OFFSET.is_multiple_of(sram::SLOT));

/// The staged copy-ins: a preallocated image and, per copy, its destination, offset in the image and bytes (at
/// most one submission's [`MAX_STAGED_COPIES`]).
#[derive(Debug)]
pub struct Staged {
    image: Vec<u8>,
    copies: heapless::Vec<(u64, usize, usize), MAX_STAGED_COPIES>,
}

impl Default for Staged {
    fn default() -> Self {
        Staged { image: Vec::with_capacity(STAGE_BYTES), copies: heapless::Vec::new() }
    }
}

impl Staged {
    /// Stages `data` for GPU address `dst`; false when it does not qualify (empty, not whole dwords at a dword
    /// address, or no room left in the image or the submission), and then nothing is staged.
    pub fn push(&mut self, dst: u64, data: &[u8]) -> bool {
        let fits = self.image.len() + data.len() <= STAGE_BYTES && !self.copies.is_full();
        if data.is_empty() || !data.len().is_multiple_of(4) || !dst.is_multiple_of(4) || !fits {
            return false;
        }
        self.copies.push((dst, self.image.len(), data.len())).expect("checked: not full");
        self.image.extend_from_slice(data);
        true
    }

    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Whether a staged copy writes any of `len` bytes at `dst`.
    pub fn overlaps(&self, dst: u64, len: u64) -> bool {
        self.copies.iter().any(|&(d, _, n)| d < dst + len && dst < d + n as u64)
    }

    /// The image as the 0xF2 engine takes it: padded with zeros to whole sectors.
    pub fn wire(&mut self) -> &[u8] {
        let n = self.image.len().next_multiple_of(sram::SECTOR);
        self.image.resize(n, 0);
        &self.image
    }

    /// The copies out of the image lying at GPU address `image`.
    pub fn copies(&self, image: u64) -> heapless::Vec<StagedCopy, MAX_STAGED_COPIES> {
        self.copies.iter().map(|&(dst, at, bytes)| StagedCopy { src: image + at as u64, dst, bytes }).collect()
    }

    /// Forgets every staged copy (once submitted).
    pub fn clear(&mut self) {
        self.image.clear();
        self.copies.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_staged_back_to_back_until_the_image_or_the_submission_is_full() {
        let mut s = Staged::default();
        assert!(!s.push(0x1000, &[]) && !s.push(0x1000, &[1, 2, 3]) && !s.push(0x1002, &[0; 4]));
        assert!(s.push(0x1000, &[1; 8]) && s.push(0x3000, &[2; 12]));
        assert!(s.overlaps(0x1004, 4) && !s.overlaps(0x1008, 0x1000) && s.overlaps(0x2000, 0x1001));
        let out = s.copies(0x9000);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1], StagedCopy { src: 0x9008, dst: 0x3000, bytes: 12 });
        assert_eq!(s.wire().len(), 512);
        assert!(!s.push(0, &vec![0; STAGE_BYTES]), "past the image");
        s.clear();
        assert!(s.is_empty());
        for i in 0..MAX_STAGED_COPIES as u64 {
            assert!(s.push(i * 4, &[0; 4]));
        }
        assert!(!s.push(0x100, &[0; 4]), "past the submission's copies");
    }
}
