//! Stopping a running step from outside it: the Python module sets the request on Ctrl-C while a step runs on
//! another thread. Only devices that check for it between units of work can stop early: the RDNA3 emulator
//! (`amd-emu`, and the simulated GPU's dispatches, `sim`) checks every few thousand wave instructions and fails
//! the dispatch with "interrupted". The other devices finish the step they are running.
//!
//! The request is process-wide: it stops every such step running in the process, and stays set until cleared.

/// Whether a step on the device `name` (as [`crate::devices::open`] takes it) stops early on [`request`].
pub fn stoppable(name: &str) -> bool {
    match name {
        #[cfg(feature = "amd-emu")]
        "amd-emu" => true,
        #[cfg(feature = "sim")]
        "sim" => true,
        _ => false,
    }
}

/// Sets (`true`) or clears the stop request. Async-signal-safe: one atomic store per device kind.
pub fn request(stop: bool) {
    #[cfg(any(feature = "amd-emu", feature = "sim"))]
    pilot_rdna3::cancel_flag().store(stop, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(any(feature = "amd-emu", feature = "sim")))]
    let _ = stop;
}
