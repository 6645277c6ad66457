//! The device memory a kernel reads and writes: the simulated GPU's VRAM, or a `Vec` in tests.

use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::{MmapOptions, MmapRaw, RemapOptions};

/// An access outside the memory (or a misaligned atomic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds;

/// Byte-addressed device memory (GPU virtual addresses) used by one dispatch thread. Every access is
/// bounds-checked by the implementation; the emulator turns a refusal into an error naming the kernel
/// and instruction.
pub trait Memory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds>;
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds>;

    /// Replaces the u32 at `addr` (4-byte aligned) with `f(old)` as one atomic step; returns `old`.
    fn rmw32(&mut self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds> {
        if !addr.is_multiple_of(4) {
            return Err(OutOfBounds);
        }
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        let old = u32::from_le_bytes(b);
        self.write(addr, &f(old).to_le_bytes())?;
        Ok(old)
    }
}

/// Device memory that workgroups running on several host threads access at once
/// ([`super::dispatch::dispatch_parallel`]). Accesses of one lane are not torn within a 4-byte word.
pub trait SharedMemory: Sync {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds>;
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds>;
    /// As [`Memory::rmw32`], atomic with respect to every other thread.
    fn rmw32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds>;
}

impl<T: SharedMemory + ?Sized> Memory for &T {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        (**self).read(addr, out)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        (**self).write(addr, data)
    }

    fn rmw32(&mut self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds> {
        (**self).rmw32(addr, f)
    }
}

fn range(base: u64, size: usize, addr: u64, len: usize) -> Result<std::ops::Range<usize>, OutOfBounds> {
    let start = addr.checked_sub(base).ok_or(OutOfBounds)?;
    let end = start.checked_add(len as u64).ok_or(OutOfBounds)?;
    if end > size as u64 {
        return Err(OutOfBounds);
    }
    Ok(start as usize..end as usize)
}

/// One contiguous region of memory at `base`.
#[derive(Clone, Debug, Default)]
pub struct VecMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl VecMemory {
    pub fn new(base: u64, len: usize) -> Self {
        VecMemory { base, bytes: vec![0; len] }
    }
}

impl Memory for VecMemory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let r = range(self.base, self.bytes.len(), addr, out.len())?;
        out.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let r = range(self.base, self.bytes.len(), addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

/// [`VecMemory`] for parallel dispatches: 32-bit atomic words, so threads writing different bytes of
/// one word do not lose each other's bytes. The words live in an anonymous private mapping reserved without
/// swap (`MAP_NORESERVE`): the host commits a page on its first write, and untouched pages read as zeros
/// without memory, so memory declared but never written costs address space only.
#[derive(Debug)]
pub struct SharedVecMemory {
    pub base: u64,
    /// `None` while the memory is empty (a mapping cannot be).
    map: Option<MmapRaw>,
    /// Bytes in use: a whole number of words, at most the mapping's length.
    len: usize,
}

impl SharedVecMemory {
    /// `len` bytes (rounded up to whole words) at `base`, holding `init` from its start. Panics when the host
    /// cannot map that much (a test's memory; devices use [`SharedVecMemory::grow`], which fails instead).
    pub fn new(base: u64, len: usize, init: &[u8]) -> Self {
        let mut m = SharedVecMemory { base, map: None, len: 0 };
        m.grow(len.max(init.len())).expect("mapping the emulated memory");
        m.write(base, init).expect("inside the memory");
        m
    }

    /// Bytes of memory (a whole number of words).
    pub fn size(&self) -> usize {
        self.len
    }

    /// Grows the memory to at least `len` bytes, zero-filled; it never shrinks. Fails, leaving it as it was,
    /// when the host cannot map that much address space.
    pub fn grow(&mut self, len: usize) -> std::io::Result<()> {
        let bytes = len.div_ceil(4).checked_mul(4).ok_or(std::io::ErrorKind::OutOfMemory)?;
        if bytes <= self.len {
            return Ok(());
        }
        match &mut self.map {
            None => self.map = Some(MmapOptions::new().len(bytes).no_reserve_swap().map_anon()?.into()),
            // SAFETY: no reference into the mapping outlives a borrow of `self` (`words` borrows it), and
            // `&mut self` excludes every such borrow, so moving the mapping invalidates nothing.
            Some(map) => unsafe { map.remap(bytes, RemapOptions::new().may_move(true))? },
        }
        self.len = bytes;
        Ok(())
    }

    fn words(&self) -> &[AtomicU32] {
        match &self.map {
            None => &[],
            // SAFETY: the mapping is page-aligned, readable and writable, and at least `len` bytes, a whole
            // number of words; AtomicU32 has u32's size and alignment and every bit pattern is valid; every
            // access while the borrow lasts goes through these atomics.
            Some(map) => unsafe { std::slice::from_raw_parts(map.as_mut_ptr().cast::<AtomicU32>(), self.len / 4) },
        }
    }

    /// The whole memory as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words().iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect()
    }
}

impl SharedMemory for SharedVecMemory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let (r, words) = (range(self.base, self.len, addr, out.len())?, self.words());
        if r.start.is_multiple_of(4) && out.len().is_multiple_of(4) {
            for (o, w) in out.chunks_exact_mut(4).zip(&words[r.start / 4..]) {
                o.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
            return Ok(());
        }
        for (o, i) in out.iter_mut().zip(r) {
            *o = (words[i / 4].load(Ordering::Relaxed) >> (8 * (i % 4))) as u8;
        }
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let (r, words) = (range(self.base, self.len, addr, data.len())?, self.words());
        let mut i = r.start;
        while i < r.end {
            let (word, shift) = (i / 4, i % 4);
            let n = (4 - shift).min(r.end - i);
            let mut bits = 0u32;
            let mut mask = 0u32;
            for k in 0..n {
                bits |= (data[i - r.start + k] as u32) << (8 * (shift + k));
                mask |= 0xff << (8 * (shift + k));
            }
            if mask == u32::MAX {
                words[word].store(bits, Ordering::Relaxed);
            } else {
                let _ = words[word].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| Some(w & !mask | bits));
            }
            i += n;
        }
        Ok(())
    }

    fn rmw32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds> {
        let (r, words) = (range(self.base, self.len, addr, 4)?, self.words());
        if !r.start.is_multiple_of(4) {
            return Err(OutOfBounds);
        }
        let old = words[r.start / 4].fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| Some(f(w)));
        Ok(old.unwrap_or_else(|w| w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_bytes_words_and_bounds() {
        let mut m = SharedVecMemory::new(0x100, 6, &[1, 2, 3]);
        assert_eq!(m.size(), 8);
        m.grow(10).unwrap();
        assert_eq!((m.size(), m.to_bytes().len()), (12, 12));
        m.write(0x101, &[0xaa, 0xbb, 0xcc, 0xdd, 0xee]).unwrap(); // straddles two words
        let mut out = [0u8; 7];
        m.read(0x100, &mut out).unwrap();
        assert_eq!(out, [1, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0]);
        assert_eq!(m.rmw32(0x104, &mut |x| x + 1), Ok(0xeedd));
        assert_eq!(m.rmw32(0x102, &mut |x| x), Err(OutOfBounds)); // misaligned
        assert_eq!(m.write(0x10a, &[0; 3]), Err(OutOfBounds));
        assert_eq!(m.read(0xff, &mut [0]), Err(OutOfBounds));
        let mut v = VecMemory::new(0, 8);
        assert_eq!(v.rmw32(4, &mut |x| x ^ 7), Ok(0));
        assert_eq!(v.bytes[4], 7);
    }
}
