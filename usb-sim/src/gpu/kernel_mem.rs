//! VRAM as a kernel on the emulator sees it: context 0's VRAM mappings in the GC hub (no system aperture;
//! enumerated once per dispatch), bounds-checked and confined ([`super::confine`]);
//! shared by the workgroups that run on several host threads. The first access refused is kept ([`Stray`]).
//! Loads and stores are reported to the cache model ([`super::coherence`]).

use super::coherence::DispatchView;
use super::confine::{Protected, Stray};
use pilot_rdna3::{OutOfBounds, SharedMemory};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// VRAM viewed as 32-bit atomic words for the duration of one dispatch.
pub struct KernelVram<'a> {
    words: &'a [AtomicU32],
    /// (GPU address, bytes, VRAM offset), sorted by address.
    ranges: Vec<(u64, u64, u64)>,
    caches: Option<&'a DispatchView<'a>>,
    protected: Protected,
    stray: Mutex<Option<Stray>>,
}

impl<'a> KernelVram<'a> {
    /// `None` when `vram` is not 4-byte aligned (or not whole words).
    pub fn new(vram: &'a mut [u8], ranges: Vec<(u64, u64, u64)>, protected: Protected) -> Option<KernelVram<'a>> {
        if !(vram.as_ptr() as usize).is_multiple_of(4) || !vram.len().is_multiple_of(4) {
            return None;
        }
        // SAFETY: `vram` is borrowed exclusively for 'a, 4-byte aligned and a whole number of words;
        // AtomicU32 has the size, alignment and bit validity of u32, so every byte pattern is a valid value,
        // and all access during 'a goes through these atomics.
        let words = unsafe { std::slice::from_raw_parts(vram.as_mut_ptr().cast::<AtomicU32>(), vram.len() / 4) };
        Some(KernelVram { words, ranges, caches: None, protected, stray: Mutex::new(None) })
    }

    /// Reports every load and store to `caches`.
    pub fn with_caches(mut self, caches: &'a DispatchView<'a>) -> KernelVram<'a> {
        self.caches = Some(caches);
        self
    }

    /// The first access refused so far.
    pub fn stray(&self) -> Option<Stray> {
        *self.stray.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn range(&self, addr: u64, len: usize, write: bool) -> Result<std::ops::Range<usize>, OutOfBounds> {
        let refuse = |region: Option<&'static str>| {
            self.stray.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(Stray { addr, len, write, region });
            OutOfBounds
        };
        let end = addr.checked_add(len as u64).ok_or_else(|| refuse(None))?;
        let i = self.ranges.partition_point(|r| r.0 <= addr).checked_sub(1).ok_or_else(|| refuse(None))?;
        let (va, size, pa) = self.ranges[i];
        if end > va + size {
            return Err(refuse(None));
        }
        let start = pa + addr - va;
        let stop = start + len as u64;
        if stop > 4 * self.words.len() as u64 {
            return Err(refuse(None));
        }
        if let Some(region) = self.protected.hit(start, stop.max(start + 1)) {
            return Err(refuse(Some(region)));
        }
        Ok(start as usize..stop as usize)
    }
}

impl SharedMemory for KernelVram<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let r = self.range(addr, out.len(), false)?;
        if let Some(c) = self.caches {
            c.load(r.clone());
        }
        for (o, i) in out.iter_mut().zip(r) {
            *o = (self.words[i / 4].load(Ordering::Relaxed) >> (8 * (i % 4))) as u8;
        }
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let r = self.range(addr, data.len(), true)?;
        if let Some(c) = self.caches {
            c.store(r.clone());
        }
        let mut i = r.start;
        while i < r.end {
            let (word, shift) = (i / 4, i % 4);
            let n = (4 - shift).min(r.end - i);
            let (mut bits, mut mask) = (0u32, 0u32);
            for k in 0..n {
                bits |= u32::from(data[i - r.start + k]) << (8 * (shift + k));
                mask |= 0xFF << (8 * (shift + k));
            }
            if mask == u32::MAX {
                self.words[word].store(bits, Ordering::Relaxed);
            } else {
                let _ = self.words[word].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| Some(w & !mask | bits));
            }
            i += n;
        }
        Ok(())
    }

    fn rmw32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds> {
        let r = self.range(addr, 4, true)?;
        if !r.start.is_multiple_of(4) {
            return Err(OutOfBounds);
        }
        let old = self.words[r.start / 4].fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| Some(f(w)));
        Ok(old.unwrap_or_else(|w| w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_words_aperture_and_bounds() {
        let mut backing = vec![0u32; 4];
        // SAFETY: a u32 buffer viewed as its bytes (4-aligned, 16 bytes), used only through `vram`.
        let vram = unsafe { std::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u8>(), 16) };
        const FB_BASE: u64 = 0x80_0000_0000;
        let m = KernelVram::new(vram, vec![(FB_BASE, 16, 0)], Protected::default()).unwrap();
        m.write(FB_BASE + 1, &[0xAA, 0xBB, 0xCC, 0xDD, 0xEE]).unwrap();
        let mut out = [0u8; 7];
        m.read(FB_BASE, &mut out).unwrap();
        assert_eq!(out, [0, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0]);
        assert_eq!(m.rmw32(FB_BASE + 4, &mut |x| x + 1), Ok(0xEEDD));
        assert_eq!(m.rmw32(FB_BASE + 2, &mut |x| x), Err(OutOfBounds));
        assert_eq!(m.write(FB_BASE + 14, &[0; 3]), Err(OutOfBounds));
        assert_eq!(m.read(FB_BASE - 1, &mut [0]), Err(OutOfBounds));
        // Only mapped ranges: a second range maps VA 0x1000 to VRAM 8; the gap between them is refused.
        // SAFETY: as above; `m` is no longer used.
        let vram = unsafe { std::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u8>(), 16) };
        let two = KernelVram::new(vram, vec![(0x1000, 8, 8), (FB_BASE + 4, 4, 4)], Protected::default()).unwrap();
        let mut b = [0u8; 2];
        two.read(0x1000, &mut b).unwrap();
        assert_eq!(b, [0, 0]);
        two.read(FB_BASE + 4, &mut b).unwrap();
        assert_eq!(b, [0xDE, 0xEE]);
        assert_eq!(two.read(FB_BASE, &mut [0]), Err(OutOfBounds));
        assert_eq!(two.read(0x1006, &mut [0; 4]), Err(OutOfBounds));
        assert_eq!(two.stray(), Some(Stray { addr: FB_BASE, len: 1, write: false, region: None }), "the first kept");
    }

    #[test]
    fn protected_vram_is_refused_and_the_first_refusal_kept() {
        let mut backing = vec![0u32; 4];
        // SAFETY: a u32 buffer viewed as its bytes (4-aligned, 16 bytes), used only through `m`.
        let vram = unsafe { std::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u8>(), 16) };
        const VA: u64 = 0x80_0000_0000;
        let m = KernelVram::new(vram, vec![(VA, 16, 0)], Protected::new(vec![(8, 12, "a page table")])).unwrap();
        m.read(VA, &mut [0; 8]).unwrap();
        m.write(VA + 12, &[1; 4]).unwrap();
        assert_eq!(m.stray(), None);
        assert_eq!(m.write(VA + 7, &[1; 2]), Err(OutOfBounds));
        assert_eq!(m.rmw32(VA + 8, &mut |x| x), Err(OutOfBounds));
        assert_eq!(m.stray(), Some(Stray { addr: VA + 7, len: 2, write: true, region: Some("a page table") }));
        assert_eq!(
            m.stray().unwrap().to_string(),
            format!("a 2-byte store at {:#x} reaches a page table, which no kernel may touch", VA + 7)
        );
    }
}
