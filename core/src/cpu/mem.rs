//! Owned memory of the CPU backend: 64-byte aligned buffers and the W^X code image mapping.

use std::alloc::{self, Layout};
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use nix::sys::mman::{self, MapFlags, ProtFlags};

/// Alignment of every buffer the backend allocates (a cache line; enough for any SIMD load).
pub const BUFFER_ALIGN: usize = 64;

/// A type with the buffer alignment, for dangling pointers of empty buffers.
#[repr(C, align(64))]
struct CacheLine([u8; BUFFER_ALIGN]);

/// Buffers of at least this many bytes get a mapping of their own, 2 MiB aligned and advised as
/// transparent huge pages (`MADV_HUGEPAGE`, before the first touch): a weight read every step then
/// costs one TLB entry per 2 MiB instead of one per 4 KiB page. Under the kernel's THP mode
/// `madvise` (Debian's default) nothing else asks for them.
pub const HUGE_BUFFER: usize = 2 << 20;

/// The bytes behind a [`crate::device::BufferId`]: allocated by the device, [`BUFFER_ALIGN`]-aligned. For
/// `size == 0` the pointer is dangling (aligned, never dereferenced) and nothing was allocated.
pub(crate) struct Storage {
    ptr: NonNull<u8>,
    size: usize,
    /// An imported buffer (weights): nothing writes through it.
    read_only: bool,
    /// For a buffer of at least [`HUGE_BUFFER`] bytes: the whole anonymous mapping it lies in.
    mapping: Option<(NonNull<std::ffi::c_void>, usize)>,
}

// SAFETY: the storage is a unique heap allocation made and freed by this type, not tied to the thread
// that made it (the global allocator is thread-safe). Moving a `Storage` to another thread moves the
// ownership with it.
unsafe impl Send for Storage {}

impl Storage {
    /// Allocates `size` zeroed bytes aligned to [`BUFFER_ALIGN`]; `None` if the allocator refuses.
    pub(crate) fn alloc_zeroed(size: usize) -> Option<Storage> {
        if size == 0 {
            // A dangling but aligned pointer: a zero-length buffer is never read or written.
            let ptr = NonNull::<CacheLine>::dangling().cast();
            return Some(Storage { ptr, size, read_only: false, mapping: None });
        }
        if size >= HUGE_BUFFER {
            return Storage::map_huge(size);
        }
        let layout = Layout::from_size_align(size, BUFFER_ALIGN).ok()?;
        // SAFETY: `layout` has a non-zero size (checked above) and a valid power-of-two alignment.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(Storage { ptr, size, read_only: false, mapping: None })
    }

    /// `size` zeroed bytes at a 2 MiB boundary inside a fresh anonymous mapping, advised as huge
    /// pages. The advice is a hint: a kernel without THP keeps 4 KiB pages, which is no error.
    fn map_huge(size: usize) -> Option<Storage> {
        let len = size.checked_add(HUGE_BUFFER)?;
        // SAFETY: a fresh anonymous private mapping at an address the kernel picks cannot alias any
        // existing Rust object; this Storage owns it and unmaps it in Drop.
        let base = unsafe {
            mman::mmap_anonymous(
                None,
                NonZeroUsize::new(len)?,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .ok()?;
        let offset = (base.as_ptr() as usize).next_multiple_of(HUGE_BUFFER) - base.as_ptr() as usize;
        // SAFETY: `offset < HUGE_BUFFER`, so `offset + size <= len` stays inside the mapping.
        let ptr = unsafe { base.cast::<u8>().add(offset) };
        // SAFETY: the range is inside the mapping made above, which nothing else references yet.
        let _ = unsafe { mman::madvise(ptr.cast(), size, mman::MmapAdvise::MADV_HUGEPAGE) };
        Some(Storage { ptr, size, read_only: false, mapping: Some((base, len)) })
    }

    /// A read-only copy of `bytes` (an import); `None` if the allocator refuses.
    pub(crate) fn read_only_copy(bytes: &[u8]) -> Option<Storage> {
        let mut s = Storage::alloc_zeroed(bytes.len())?;
        if !bytes.is_empty() {
            // SAFETY: `s` owns `bytes.len()` fresh bytes that cannot overlap the caller's slice.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.ptr.as_ptr(), bytes.len()) };
        }
        s.read_only = true;
        Some(s)
    }

    pub(crate) fn len(&self) -> usize {
        self.size
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Base address of the bytes. Writing through it is only allowed when not [`Storage::is_read_only`].
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some((base, len)) = self.mapping {
            // SAFETY: the mapping was made by `map_huge` with this base and length, is owned by this
            // Storage alone, and is unmapped only here (drop runs once).
            let _ = unsafe { mman::munmap(base, len) };
            return;
        }
        if self.size != 0 {
            // This layout was valid when the buffer was allocated, with the same size and align.
            let Ok(layout) = Layout::from_size_align(self.size, BUFFER_ALIGN) else {
                return;
            };
            // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout, and this is the only place it
            // is freed (Storage is not Clone; drop runs once).
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// Granule at which the code image is split into protection regions. It is a multiple of every page
/// size Linux uses on x86_64 (4 KiB) and aarch64 (4, 16 or 64 KiB), so region boundaries are page
/// boundaries without asking the kernel for the page size. Untouched padding is never made resident.
pub(crate) const REGION_ALIGN: usize = 64 * 1024;

/// Flags for a private mapping in the first 2 GiB of the address space.
#[cfg(target_arch = "x86_64")]
fn low_map_flags() -> Result<MapFlags, String> {
    Ok(MapFlags::MAP_PRIVATE | MapFlags::MAP_32BIT)
}

#[cfg(not(target_arch = "x86_64"))]
fn low_map_flags() -> Result<MapFlags, String> {
    Err("absolute 32-bit relocations need a low mapping (x86_64 only)".to_string())
}

/// Protection of one region of an [`ImageMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protection {
    ReadExec,
    Read,
    ReadWrite,
}

/// An anonymous private mapping holding a loaded program: created read-write, filled and relocated,
/// then sealed region by region so no page is ever writable and executable at once.
pub(crate) struct ImageMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value (unmapped only in Drop), and mappings are
// process-wide, not per-thread, so another thread may use and unmap it.
unsafe impl Send for ImageMap {}

impl ImageMap {
    /// Maps `len` zeroed bytes read-write. `low` asks for the first 2 GiB of the address space
    /// (x86_64 `MAP_32BIT`), needed by absolute 32-bit relocations; elsewhere it is an error.
    pub(crate) fn new(len: usize, low: bool) -> Result<ImageMap, String> {
        let size = NonZeroUsize::new(len).ok_or("empty image")?;
        let flags = if low { low_map_flags()? } else { MapFlags::MAP_PRIVATE };
        // SAFETY: a fresh anonymous private mapping at an address the kernel picks cannot alias any
        // existing Rust object; we own it from here and unmap it in Drop.
        let ptr = unsafe { mman::mmap_anonymous(None, size, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, flags) }
            .map_err(|e| format!("mmap of {len} bytes failed: {e}"))?;
        Ok(ImageMap { ptr: ptr.cast(), len })
    }

    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The whole image, writable. Only valid before [`ImageMap::protect`] removes write access,
    /// which is why it needs `&mut self` and why the loader calls `protect` last.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable until `protect` (the loader only
        // calls this before sealing), zero-initialised by the kernel, and borrowed mutably through
        // `&mut self`, so no other reference to it exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Sets the protection of `[offset, offset + len)`, which must be page-aligned (the loader uses
    /// multiples of [`REGION_ALIGN`]).
    pub(crate) fn protect(&mut self, offset: usize, len: usize, prot: Protection) -> Result<(), String> {
        if len == 0 {
            return Ok(());
        }
        if !offset.is_multiple_of(REGION_ALIGN) || offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(format!("bad protection range {offset:#x}+{len:#x}"));
        }
        let flags = match prot {
            Protection::ReadExec => ProtFlags::PROT_READ | ProtFlags::PROT_EXEC,
            Protection::Read => ProtFlags::PROT_READ,
            Protection::ReadWrite => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
        };
        // SAFETY: the range lies inside our own mapping (checked above) and starts on a page
        // boundary (the mapping is page-aligned and `offset` is a multiple of REGION_ALIGN). No
        // Rust reference into the mapping is alive: `bytes_mut` borrows end before this `&mut self`.
        let ptr = unsafe { self.ptr.add(offset) };
        // SAFETY: see above; changing protection of our own pages has no other effect.
        unsafe { mman::mprotect(ptr.cast(), len, flags) }.map_err(|e| format!("mprotect failed: {e}"))
    }
}

impl Drop for ImageMap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe exactly the mapping made in `new`, unmapped only here. Any
        // function pointers into it are owned by the same program record and dropped with it.
        if let Err(e) = unsafe { mman::munmap(self.ptr.cast(), self.len) } {
            log::warn!("munmap of program image failed: {e}");
        }
    }
}

/// Makes freshly written code visible to instruction fetch on aarch64, where the instruction and
/// data caches are not coherent: for every cache line of `[start, start + len)` clean the data cache
/// to the point of unification (`dc cvau`), then invalidate the instruction cache (`ic ivau`), with
/// `dsb ish` after each pass and a final `isb`. Inner-shareable maintenance is broadcast to every
/// core, so pool workers see the new code too. This is what libgcc's `__clear_cache` does. On
/// x86_64 the caches are coherent and this is a no-op.
pub(crate) fn sync_icache(start: *const u8, len: usize) {
    #[cfg(target_arch = "aarch64")]
    {
        let ctr: u64;
        // SAFETY: reading CTR_EL0 is allowed at EL0 on Linux (the kernel sets SCTLR_EL1.UCT or
        // emulates it) and has no side effects.
        unsafe { core::arch::asm!("mrs {0}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
        let dline = 4usize << ((ctr >> 16) & 0xf);
        let iline = 4usize << (ctr & 0xf);
        let begin = start as usize;
        let end = begin + len;
        let mut addr = begin & !(dline - 1);
        while addr < end {
            // SAFETY: `addr` is inside (or in the first line of) a mapping we own that is readable;
            // cache maintenance by address does not change memory contents.
            unsafe { core::arch::asm!("dc cvau, {0}", in(reg) addr, options(nostack)) };
            addr += dline;
        }
        // SAFETY: a barrier has no memory-safety preconditions.
        unsafe { core::arch::asm!("dsb ish", options(nostack)) };
        let mut addr = begin & !(iline - 1);
        while addr < end {
            // SAFETY: as for `dc cvau` above.
            unsafe { core::arch::asm!("ic ivau, {0}", in(reg) addr, options(nostack)) };
            addr += iline;
        }
        // SAFETY: barriers have no memory-safety preconditions.
        unsafe { core::arch::asm!("dsb ish", "isb", options(nostack)) };
    }
    #[cfg(not(target_arch = "aarch64"))]
    let _ = (start, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_zeroed_2_mib_aligned_and_hold_their_bytes() {
        for size in [HUGE_BUFFER, HUGE_BUFFER * 3 + 100] {
            let s = Storage::alloc_zeroed(size).unwrap();
            assert_eq!(s.base() as usize % HUGE_BUFFER, 0);
            // SAFETY: `s` owns `size` initialized (zeroed) bytes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(s.base(), size) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[size - 1] = 7;
            assert_eq!(bytes[size - 1], 7);
        }
        let data: Vec<u8> = (0..HUGE_BUFFER + 5).map(|i| (i % 251) as u8).collect();
        let copy = Storage::read_only_copy(&data).unwrap();
        assert!(copy.is_read_only() && copy.len() == data.len());
        // SAFETY: `copy` owns `data.len()` bytes copied from `data`.
        assert_eq!(unsafe { std::slice::from_raw_parts(copy.base(), copy.len()) }, &data[..]);
        // Small buffers keep the allocator's cache-line alignment.
        assert_eq!(Storage::alloc_zeroed(100).unwrap().base() as usize % BUFFER_ALIGN, 0);
    }
}
