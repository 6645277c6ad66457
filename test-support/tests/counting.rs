//! The counting allocator counts: this binary declares it, as every no-allocation test does.

use std::hint::black_box;

use pilot_test_support::{all_allocs, paused, tagged_allocs, thread_allocs};

fn tag() -> bool {
    TAGGED.with(std::cell::Cell::get)
}

thread_local! {
    static TAGGED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pilot_test_support::counting_allocator!(tagging tag);

#[test]
fn counts_allocations_and_reallocations_unless_paused() {
    let (thread, all) = (thread_allocs(), all_allocs());
    let mut v = black_box(Vec::<u8>::with_capacity(8));
    v.reserve(64);
    assert_eq!(thread_allocs() - thread, 2);
    assert!(all_allocs() - all >= 2);
    let thread = thread_allocs();
    let w = paused(|| paused(|| black_box(vec![1u8; 16])));
    assert_eq!(thread_allocs() - thread, 0, "paused, nested");
    drop(black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(thread_allocs() - thread, 1, "counting again after the pause");
    drop((v, w));
}

#[test]
fn counts_tagged_threads() {
    let before = tagged_allocs();
    std::thread::spawn(|| {
        TAGGED.with(|t| t.set(true));
        drop(black_box(Vec::<u8>::with_capacity(8)));
        TAGGED.with(|t| t.set(false));
    })
    .join()
    .unwrap();
    assert!(tagged_allocs() - before >= 1);
}
