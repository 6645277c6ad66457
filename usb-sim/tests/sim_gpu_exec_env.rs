//! `PILOT_SIM_EXEC`: anything but `emulator` (or unset) is refused with one line naming the variable — there
//! is no host stand-in for the code object. A file of its own: the variable is process-wide.

mod sim_gpu_support;
use pilot_usb_sim::Board;
use sim_gpu_support::boot::*;
use sim_gpu_support::pm4;
use sim_gpu_support::*;

#[test]
fn pilot_sim_exec_other_than_emulator_is_refused() {
    let vram = 64 * MB;
    let Some((mut rig, r, fw)) = rig(Board::Navi31, vram) else { return };
    rig.cold_boot(&r, vram, &fw);
    let mut p = Producer::default();
    std::env::set_var("PILOT_SIM_EXEC", "host");
    let s = [pm4::set_sh(pm4::reg::NUM_THREAD_X, &[64, 1, 1]), pm4::dispatch([1, 1, 1])].concat();
    rig.submit_compute(&mut p, &s);
    std::env::remove_var("PILOT_SIM_EXEC");
    let f = rig.sim.gpu_faults();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].reason.contains("PILOT_SIM_EXEC=host") && !f[0].reason.contains('\n'), "{}", f[0]);
}
