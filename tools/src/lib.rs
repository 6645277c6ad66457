//! The `pilot` command's building blocks, as a library so they can be unit-tested.
//!
//! - [`npy`]: numpy `.npy` reader and writer (`run --input`, `run --save-outputs`).
//! - [`gate`]: the noise-aware step-time regression gate (`pilot gate`).
//! - [`smi`]: GPU housekeeping: unload kernel modules, kill processes holding the GPU (`pilot smi`).

pub mod gate;
pub mod npy;
pub mod smi;
