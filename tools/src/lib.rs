//! The `pilot` command's modules; `main.rs` holds only the argument parsing.

#[cfg(feature = "compiler")]
pub mod compile;
pub mod devices;
pub mod gate;
pub mod inspect;
pub mod keys;
pub use pilot_core::npy;
pub mod run;
#[cfg(feature = "compiler")]
pub mod selftest;
pub mod smi;
pub mod usb;
