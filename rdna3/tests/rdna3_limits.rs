//! A dispatch is bounded before it runs (#26): its grid, its user SGPRs and its scratch are checked with
//! overflow-free arithmetic, and its total work is limited by a budget, so no register value makes the
//! emulator panic, abort on an allocation or run without end.

use pilot_rdna3::{dispatch, Budget, CodeObjectKernel, Dispatch, EmuError, KernelDescriptor, VecMemory};
use std::time::Duration;

const S_NOP: u32 = 0xbf80_0000;
const S_ENDPGM: u32 = 0xbfb0_0000;
/// `s_branch -1`: a branch to itself.
const S_BRANCH_SELF: u32 = 0xbfa0_ffff;

fn kernel(code: &[u32]) -> CodeObjectKernel {
    let mut kd = [0u8; 64];
    kd[48..52].copy_from_slice(&0x60af_0000u32.to_le_bytes()); // 8 VGPRs, no flush
    kd[56..58].copy_from_slice(&0x0400u16.to_le_bytes()); // wave32
    let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
    CodeObjectKernel::from_parts("k", KernelDescriptor::parse(&kd).unwrap(), &bytes).unwrap()
}

fn run(code: &[u32], grid: [u32; 3], tweak: impl Fn(&mut Dispatch)) -> Result<pilot_rdna3::Stats, EmuError> {
    let k = kernel(code);
    let mut d = Dispatch::for_kernel(&k, grid, [32, 1, 1], 0).unwrap();
    tweak(&mut d);
    dispatch(&k, &d, &mut VecMemory::new(0x1_0000_0000, 4096))
}

/// Item 1: three u32 workgroup counts multiplied overflowed u64 (a panic in debug builds, a wrapped count
/// in release); a grid past 2^32-1 work-items ran for hours.
#[test]
fn grids_past_32_bit_work_items_are_refused() {
    for grid in [[u32::MAX; 3], [1 << 16, 1 << 16, 1], [1 << 27, 1, 1], [0, 1, 1]] {
        let e = run(&[S_ENDPGM], grid, |_| {}).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("rdna3 k: dispatch: grid {grid:?} of workgroups [32, 1, 1] is not 1 to 4294967295 work-items")
        );
    }
    let ok = run(&[S_ENDPGM], [3, 2, 2], |_| {}).unwrap();
    assert_eq!((ok.workgroups, ok.waves, ok.instructions), (12, 12, 12));
}

/// Item 10: the hardware loads 16 user SGPRs (COMPUTE_USER_DATA_0..15); 17 to 31 were accepted.
#[test]
fn more_than_16_user_sgprs_are_refused() {
    run(&[S_ENDPGM], [1, 1, 1], |d| d.rsrc2 = d.rsrc2 & !0x3e | 16 << 1).unwrap();
    for n in [17, 31] {
        let e = run(&[S_ENDPGM], [1, 1, 1], |d| d.rsrc2 = d.rsrc2 & !0x3e | n << 1).unwrap_err().to_string();
        assert_eq!(e, format!("rdna3 k: dispatch: USER_SGPR_COUNT {n} exceeds the 16 COMPUTE_USER_DATA registers"));
    }
}

/// Item 3: scratch of `private_segment_fixed_size × 32` per wave was allocated infallibly (137 GB: abort).
#[test]
fn scratch_is_bounded_before_it_is_allocated() {
    let max = pilot_rdna3::dispatch::MAX_SCRATCH_PER_ITEM;
    run(&[S_ENDPGM], [1, 1, 1], |d| d.scratch_bytes = max).unwrap();
    let e = run(&[S_ENDPGM], [1, 1, 1], |d| d.scratch_bytes = u32::MAX).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("rdna3 k: dispatch: 4294967295 scratch bytes per work-item exceed the {max} the emulator provides")
    );
}

/// Item 2: the step limit bounds one wave; the budget bounds the dispatch, over all its waves.
#[test]
fn the_dispatch_budget_bounds_all_waves_together() {
    let mut code = vec![S_NOP; 99];
    code.push(S_ENDPGM);
    let budget = |n| move |d: &mut Dispatch| d.budget = Budget { instructions: n, wall: None };
    // 1000 workgroups of one 100-instruction wave: each wave is far below the step limit.
    let ran = run(&code, [1000, 1, 1], budget(100_000)).unwrap();
    assert_eq!(ran.instructions, 100_000);
    let e = run(&code, [1000, 1, 1], budget(99_999)).unwrap_err().to_string();
    assert_eq!(
        e,
        "rdna3 k: dispatch: the dispatch ran past its budget of 99999 wave instructions (PILOT_EMU_MAX_INSTRUCTIONS)"
    );
    // A wave that never ends is stopped by the budget long before the step limit.
    let e = run(&[S_BRANCH_SELF], [1, 1, 1], budget(1 << 20)).unwrap_err().to_string();
    assert!(e.starts_with("rdna3 k: `s_branch") && e.contains("budget of 1048576"), "{e}");
}

#[test]
fn the_wall_time_limit_stops_a_running_wave() {
    let e = run(&[S_BRANCH_SELF], [1, 1, 1], |d| {
        d.step_limit = u64::MAX;
        d.budget = Budget { instructions: u64::MAX, wall: Some(Duration::from_millis(50)) };
    })
    .unwrap_err()
    .to_string();
    assert!(e.ends_with("the dispatch ran past its 0.05 s limit (PILOT_EMU_TIMEOUT_S)"), "{e}");
}

#[test]
fn the_budget_reads_its_environment_strictly() {
    // The only test in this binary that touches these variables.
    std::env::set_var("PILOT_EMU_MAX_INSTRUCTIONS", "1000");
    std::env::set_var("PILOT_EMU_TIMEOUT_S", "2.5");
    assert_eq!(Budget::from_env().unwrap(), Budget { instructions: 1000, wall: Some(Duration::from_millis(2500)) });
    std::env::set_var("PILOT_EMU_MAX_INSTRUCTIONS", "0");
    assert_eq!(Budget::from_env().unwrap_err(), "PILOT_EMU_MAX_INSTRUCTIONS=0: expected a positive integer");
    std::env::remove_var("PILOT_EMU_MAX_INSTRUCTIONS");
    std::env::set_var("PILOT_EMU_TIMEOUT_S", "inf");
    assert_eq!(Budget::from_env().unwrap_err(), "PILOT_EMU_TIMEOUT_S=inf: expected seconds in (0, 86400]");
    std::env::remove_var("PILOT_EMU_TIMEOUT_S");
    assert_eq!(Budget::from_env().unwrap(), Budget::default());
}
