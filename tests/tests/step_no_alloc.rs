//! `Session::step` performs no heap allocation: a counting global allocator watches a window of steps.
//! This file holds a single test so no other test allocates concurrently in this process.

use pilot_core::cpu::CpuDevice;
use pilot_core::{Artifact, Session};
use pilot_test_support::all_allocs;
use pilot_tests::demo;

pilot_test_support::counting_allocator!();

#[test]
fn steps_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    for threads in [1, 3] {
        let mut session = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(threads))).unwrap();
        let input = vec![0x3fu8; demo::WIDTH * 4];
        session.step(&[&input]).unwrap(); // warm-up outside the window
        let before = all_allocs();
        for _ in 0..100 {
            session.step(&[&input]).unwrap();
        }
        assert_eq!(all_allocs() - before, 0, "threads={threads}: steps allocated");
        // The counter really counts: an allocation inside the window is seen.
        let before = all_allocs();
        drop(std::hint::black_box(vec![1u8; 64]));
        assert!(all_allocs() - before >= 1);
    }
}
