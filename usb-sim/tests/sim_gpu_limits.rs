//! The simulated GPU models the dispatch registers exactly and refuses what the hardware would (#26):
//! COMPUTE_NUM_THREAD_X/Y/Z is 16 bits of NUM_THREAD_FULL (a 1024-wide workgroup runs, a 1025-wide one
//! faults).

mod sim_gpu_support;

use sim_gpu_support::program::{run, S_ENDPGM};

/// Item 4: the field was masked to 10 bits, so 1024 read as 0 (refused) and 1025 as 1 (ran one work-item).
#[test]
fn num_thread_is_16_bits_and_workgroups_past_1024_fault() {
    let Some((signal, faults)) = run(&[S_ENDPGM], [1024, 1, 1]) else { return };
    assert_eq!((signal, faults.len()), (7, 0), "{faults:?}");
    for threads in [[1025, 1, 1], [512, 2, 2], [0, 1, 1]] {
        let (signal, faults) = run(&[S_ENDPGM], threads).unwrap();
        assert_eq!((signal, faults.len()), (0, 1), "{threads:?}: {faults:?}");
        assert!(faults[0].contains("(1 to 1024 per workgroup)"), "{}", faults[0]);
    }
    let (signal, faults) = run(&[S_ENDPGM], [64 | 1 << 16, 1, 1]).unwrap();
    assert_eq!((signal, faults.len()), (0, 1), "{faults:?}");
    assert!(faults[0].contains("NUM_THREAD_PARTIAL"), "{}", faults[0]);
}

/// Item 9: a VRAM size the tools take from `PILOT_SIM_VRAM_MB` is refused in one line, not an abort.
#[test]
fn vram_sizes_past_the_largest_board_or_the_host_are_refused() {
    use pilot_usb_sim::{SimConfig, Simulator, MAX_VRAM_BYTES};
    let sim = |vram_bytes| Simulator::try_new(SimConfig { vram_bytes, ..SimConfig::default() }).map(|_| ());
    sim(1 << 20).unwrap();
    for bad in [0, 3 << 20, MAX_VRAM_BYTES * 2, 1 << 63] {
        let e = sim(bad).unwrap_err();
        assert_eq!(e, format!("simulated VRAM of {bad} bytes is not a power of two from 1 MB to {MAX_VRAM_BYTES}"));
    }
}
