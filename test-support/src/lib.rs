//! Test support for pilot's test binaries (a dev-dependency only, never a dependency of a runtime crate).
//!
//! [`require`]: the tools a test needs from outside the repository, and the one switch (`PILOT_REQUIRE=1`, set by CI)
//! that makes a missing one a failure instead of a skip. [`bytes`]: byte patterns in artifacts and code objects.
//!
//! The counting global allocator proves that a step path makes no heap allocation. A test binary declares it in one
//! line, `pilot_test_support::counting_allocator!();`, then compares [`thread_allocs`] (this thread) or
//! [`all_allocs`] (every thread) before and after the code under test. [`paused`] runs code that may allocate
//! without counting it on this thread (a fake kernel behind an ioctl, say), and a binary whose library has worker
//! threads can tag them: `counting_allocator!(tagging is_worker)` counts their allocations in [`tagged_allocs`].

pub mod bytes;
pub mod ir3;
pub mod require;
pub mod rng;

pub use bytes::{count_bytes, find_bytes};
pub use require::{amd_firmware_dir, clang_19, missing, opencl_missing, required, venv_python, venv_python_or_fail};
pub use rng::Rng;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
    static PAUSED: Cell<bool> = const { Cell::new(false) };
}
static ALL_ALLOCS: AtomicU64 = AtomicU64::new(0);
static TAGGED_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// A global allocator that forwards to [`System`] and counts allocations and reallocations (not frees).
pub struct CountingAlloc {
    tagged: fn() -> bool,
}

fn never() -> bool {
    false
}

impl CountingAlloc {
    pub const fn new() -> Self {
        CountingAlloc { tagged: never }
    }

    /// Also counts in [`tagged_allocs`] the allocations made while `tagged()` is true on the allocating thread.
    /// `tagged` must not allocate.
    pub const fn tagging(tagged: fn() -> bool) -> Self {
        CountingAlloc { tagged }
    }

    fn note(&self) {
        if PAUSED.try_with(Cell::get).unwrap_or(false) {
            return;
        }
        let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
        ALL_ALLOCS.fetch_add(1, Ordering::Relaxed);
        if (self.tagged)() {
            TAGGED_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: forwards every call unchanged to `System`, which upholds the GlobalAlloc contract; the bookkeeping
// touches only const-initialised thread-locals and atomics, which never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.note();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Declares [`CountingAlloc`] as the binary's `#[global_allocator]`: `counting_allocator!()`, or
/// `counting_allocator!(tagging f)` with `f: fn() -> bool` (see [`CountingAlloc::tagging`]).
#[macro_export]
macro_rules! counting_allocator {
    () => {
        #[global_allocator]
        static PILOT_COUNTING_ALLOC: $crate::CountingAlloc = $crate::CountingAlloc::new();
    };
    (tagging $tagged:expr) => {
        #[global_allocator]
        static PILOT_COUNTING_ALLOC: $crate::CountingAlloc = $crate::CountingAlloc::tagging($tagged);
    };
}

/// Allocations counted on this thread so far.
pub fn thread_allocs() -> u64 {
    THREAD_ALLOCS.with(Cell::get)
}

/// Allocations counted on every thread so far.
pub fn all_allocs() -> u64 {
    ALL_ALLOCS.load(Ordering::Relaxed)
}

/// Allocations counted while the binary's tag held (0 without [`CountingAlloc::tagging`]).
pub fn tagged_allocs() -> u64 {
    TAGGED_ALLOCS.load(Ordering::Relaxed)
}

/// Runs `f` without counting its allocations on this thread; nests, and restores the state if `f` panics.
pub fn paused<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            PAUSED.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PAUSED.with(|p| p.replace(true)));
    f()
}
