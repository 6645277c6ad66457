//! Steps through the C ABI make no heap allocation (counted on every thread). A single test, so nothing
//! else allocates in this process meanwhile.

use std::ffi::CString;
use std::ptr;

use pilot_capi::ffi::*;
use pilot_capi::PilotStatus;
use pilot_test_support::all_allocs;
use pilot_tests::demo;

pilot_test_support::counting_allocator!();

#[test]
fn c_abi_steps_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let camera = [0x3fu8; demo::WIDTH * 4];
    for threads in [1, 3] {
        let opts = PilotOptions { threads, profile: false, priority: -1 };
        let mut m = ptr::null_mut();
        // SAFETY: valid strings, options and pointers; `camera` outlives the model, closed below.
        unsafe {
            assert_eq!(pilot_model_open(path.as_ptr(), ptr::null(), &opts, &mut m), PilotStatus::Ok);
            assert_eq!(pilot_model_step(m), PilotStatus::Ok); // warm-up outside the window
            let before = all_allocs();
            for i in 0..100 {
                if i == 50 {
                    // Steps from caller memory bound by pointer allocate nothing either, nor does binding it.
                    let b = all_allocs();
                    let st = pilot_model_bind_input(m, 0, camera.as_ptr().cast(), camera.len(), ptr::null_mut());
                    assert_eq!(st, PilotStatus::Ok);
                    assert_eq!(all_allocs(), b, "binding allocated");
                }
                assert_eq!(pilot_model_enqueue(m), PilotStatus::Ok);
                assert_eq!(pilot_model_wait(m), PilotStatus::Ok);
                assert_eq!(pilot_model_step(m), PilotStatus::Ok);
            }
            assert_eq!(all_allocs() - before, 0, "threads={threads}: steps allocated");
            // The counter really counts: an allocation inside the window is seen.
            let before = all_allocs();
            drop(std::hint::black_box(vec![1u8; 64]));
            assert!(all_allocs() - before >= 1);
            assert_eq!(pilot_model_close(m), PilotStatus::Ok);
        }
    }
}
