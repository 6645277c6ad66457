//! The simulated bridge and GPU the `usb+amd` device tests open (`amd_run_device.rs`, `amd_scratch_sim.rs`).

use pilot_amd::boot::BootOptions;
use pilot_amd::device::AmdDevice;
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{Board, SimConfig, Simulator};
use std::path::Path;

/// A simulated `board` with 256 MiB of VRAM whose PSP checks the firmware in `dir`.
pub fn sim(dir: &Path, board: Board) -> Simulator {
    Simulator::new(SimConfig {
        vram_bytes: 256 << 20,
        board,
        firmware_dir: Some(dir.to_path_buf()),
        ..SimConfig::default()
    })
}

/// The `usb+amd` device booted on `sim`; panics naming the simulated GPU's faults.
pub fn open(sim: &Simulator, dir: &Path) -> AmdDevice {
    let bridge = Bridge::open(sim.transport(), None).unwrap();
    AmdDevice::open(bridge, dir, BootOptions::default())
        .unwrap_or_else(|e| panic!("open: {e}; GPU faults: {:?}", sim.gpu_faults()))
}
