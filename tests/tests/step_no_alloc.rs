//! `Session::step` performs no heap allocation: a counting global allocator watches a window of steps.
//! This file holds a single test so no other test allocates concurrently in this process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pilot_core::cpu::CpuDevice;
use pilot_core::{Artifact, Session};
use pilot_tests::demo;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call unchanged to the system allocator; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steps_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    for threads in [1, 3] {
        let mut session = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(threads))).unwrap();
        let input = vec![0x3fu8; demo::WIDTH * 4];
        session.step(&[&input]).unwrap(); // warm-up outside the window
        ALLOCATIONS.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..100 {
            session.step(&[&input]).unwrap();
        }
        COUNTING.store(false, Ordering::SeqCst);
        assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "threads={threads}: steps allocated");
        // The counter really counts: an allocation inside the window is seen.
        COUNTING.store(true, Ordering::SeqCst);
        let v = std::hint::black_box(vec![1u8; 64]);
        COUNTING.store(false, Ordering::SeqCst);
        drop(v);
        assert!(ALLOCATIONS.load(Ordering::SeqCst) >= 1);
    }
}
