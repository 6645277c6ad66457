//! The `pilot` command's modules; `main.rs` holds only the argument parsing.

pub mod devices;
pub mod gate;
pub mod inspect;
pub use pilot_core::npy;
pub mod run;
pub mod smi;
