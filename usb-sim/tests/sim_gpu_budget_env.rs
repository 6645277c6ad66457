//! The simulator's knobs are bounded (#26 items 2 and 9): `PILOT_EMU_MAX_INSTRUCTIONS` bounds a dispatch
//! (a wave that never ends stops the queue before its signal, as a hung GPU's does, instead of running
//! inside the doorbell write for minutes); `PILOT_SIM_THREADS` outside 1 to 256 is a one-line fault.
//! A file of its own: the variables are process-wide.

mod sim_gpu_support;
use sim_gpu_support::program::{run, S_ENDPGM};

/// `s_branch -1`: a wave that never ends.
const S_BRANCH_SELF: u32 = 0xbfa0_ffff;

#[test]
fn the_budget_and_thread_knobs_are_bounded() {
    std::env::set_var("PILOT_EMU_MAX_INSTRUCTIONS", "100000");
    let start = std::time::Instant::now();
    let Some((signal, faults)) = run(&[S_BRANCH_SELF], [1024, 1, 1]) else { return };
    assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
    assert_eq!((signal, faults.len()), (0, 1), "{faults:?}");
    assert!(faults[0].contains("budget of 100000 wave instructions (PILOT_EMU_MAX_INSTRUCTIONS)"), "{}", faults[0]);
    std::env::set_var("PILOT_EMU_MAX_INSTRUCTIONS", "lots");
    let (signal, faults) = run(&[S_ENDPGM], [64, 1, 1]).unwrap();
    assert_eq!((signal, faults.len()), (0, 1), "{faults:?}");
    assert!(faults[0].contains("PILOT_EMU_MAX_INSTRUCTIONS=lots: expected a positive integer"), "{}", faults[0]);
    std::env::remove_var("PILOT_EMU_MAX_INSTRUCTIONS");

    for bad in ["0", "1000000", "18446744073709551615", "x"] {
        std::env::set_var("PILOT_SIM_THREADS", bad);
        let (signal, faults) = run(&[S_ENDPGM], [64, 1, 1]).unwrap();
        assert_eq!((signal, faults.len()), (0, 1), "{bad}: {faults:?}");
        assert!(faults[0].contains(&format!("PILOT_SIM_THREADS={bad}: expected 1 to 256 threads")), "{}", faults[0]);
    }
    std::env::set_var("PILOT_SIM_THREADS", "256");
    let (signal, faults) = run(&[S_ENDPGM], [64, 1, 1]).unwrap();
    assert_eq!((signal, faults.len()), (7, 0), "{faults:?}");
    std::env::remove_var("PILOT_SIM_THREADS");
}
